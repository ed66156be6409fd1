//! What a query asks of an index, by the Equality-Sort-Range rule (MongoDB's guide,
//! `tutorial/equality-sort-range-rule`): the fields it binds to one value, the sort
//! it needs in order, and the fields it bounds by a range. Read from the statement
//! shapes the table already keeps (normalised filters, literal sorts), so each shape
//! is analysed once.
//!
//! Labels, as the guide and the planner have them:
//! - equality: implicit or `$eq`, `$in` (unless it is long and there is a sort), `$all`,
//!   a `$lookup`'s foreignField;
//! - range: `$gt/$gte/$lt/$lte`, `$ne`, `$nin`, `$not`, `$regex`, `$exists`, `$type`,
//!   `$mod`, the bitwise tests, and `$in` with more values than the planner merges
//!   (`internalQueryMaxScansToExplode`, 200) when there is a sort;
//! - sort: the sort's fields in order with their directions, minus fields an equality
//!   binds (a constant sorts nothing), minus `$meta`/`$natural` sorts.
//!
//! `$or` needs an index per branch (each branch with the conjuncts around it);
//! `$elemMatch` puts its fields under the array's path; `$text` and geo operators
//! need special indexes and are left out; `$expr`, `$where` and `$jsonSchema` use no
//! index and are ignored.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One shape's need on one collection, with its figures: what the advisor judges
/// (`missing` and `unneeded` both read it).
pub(crate) struct Observed<'r> {
    pub(crate) id: crate::view::ShapeId,
    pub(crate) need: Need,
    pub(crate) count: u64,
    pub(crate) mean_us: f64,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) command: &'r str,
}

impl Observed<'_> {
    /// The time the shape's executions took in all.
    pub(crate) fn time_us(&self) -> f64 {
        self.count as f64 * self.mean_us
    }
}

/// What one query (or one `$or` branch) needs from an index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Need {
    /// Fields bound to one value (any order serves).
    pub equality: BTreeSet<String>,
    /// Fields compared with `$in`: equalities, unless long and sorted (see [`Need::resolve_in`]).
    pub in_fields: BTreeSet<String>,
    /// The sort, in order, with directions (1 or -1).
    pub sort: Vec<(String, i32)>,
    /// Fields bounded by a range.
    pub range: BTreeSet<String>,
    /// The collation's locale when not the simple one (string bounds depend on it).
    pub collation: Option<String>,
}

impl Need {
    /// Labels `$in` fields now that the longest list seen is known: a sorted query
    /// whose `$in` has more than `max_points` values scans it as a range.
    pub fn resolve_in(&self, longest_in: usize, max_points: usize) -> Need {
        let mut n = self.clone();
        let as_range = !n.sort.is_empty() && longest_in > max_points;
        for f in std::mem::take(&mut n.in_fields) {
            // Point lookups by _id stay points: a few hundred of them and a small
            // in-memory sort beat any range.
            if as_range && f != "_id" {
                n.range.insert(f);
            } else {
                n.equality.insert(f);
            }
        }
        n.normalise();
        n
    }

    /// Every field the need mentions.
    pub fn fields(&self) -> impl Iterator<Item = &String> {
        self.equality.iter().chain(&self.in_fields).chain(self.sort.iter().map(|(f, _)| f)).chain(&self.range)
    }

    /// Whether there is anything for an index to do: an empty filter without a sort
    /// reads the whole collection on purpose.
    pub fn is_empty(&self) -> bool {
        self.equality.is_empty() && self.in_fields.is_empty() && self.sort.is_empty() && self.range.is_empty()
    }

    /// A field bound by an equality sorts nothing and needs no range; a range on a
    /// sort field is served by the sort's part of the index.
    fn normalise(&mut self) {
        let eq = &self.equality;
        self.in_fields.retain(|f| !eq.contains(f));
        self.range.retain(|f| !eq.contains(f));
        self.sort.retain(|(f, _)| !eq.contains(f));
        let sorted: BTreeSet<&String> = self.sort.iter().map(|(f, _)| f).collect();
        self.range.retain(|f| !sorted.contains(f));
    }

    /// The index key this need asks for: equalities (in `eq_order`'s order, then by
    /// name), the sort as it is asked, then ranges.
    pub fn key(&self, eq_order: &dyn Fn(&str) -> i64) -> Vec<(String, i32)> {
        let mut eq: Vec<&String> = self.equality.iter().collect();
        eq.sort_by_key(|f| (std::cmp::Reverse(eq_order(f)), (*f).clone()));
        let mut key: Vec<(String, i32)> = eq.into_iter().map(|f| (f.clone(), 1)).collect();
        key.extend(self.sort.iter().cloned());
        key.extend(self.range.iter().map(|f| (f.clone(), 1)));
        key
    }
}

/// What a filter asks: one need per `$or` branch (one need without `$or`), or none
/// when it needs a special index (`$text`, geo).
pub fn filter_needs(filter: &Value, sort: Option<&Value>, collation: Option<&Value>) -> Vec<Need> {
    let mut base = Need::default();
    let mut ors: Vec<Vec<Need>> = Vec::new();
    if conjuncts(filter, "", &mut base, &mut ors).is_err() {
        return Vec::new();
    }
    base.sort = sort.map(sort_fields).unwrap_or_default();
    base.collation = collation.and_then(locale);
    // Each $or multiplies the branches (bounded: a shape with more is left out).
    let mut needs = vec![base];
    for branches in ors {
        // A branch that binds nothing an index can use makes the whole $or a
        // collection scan: no index helps, none is recommended.
        let unbounded =
            branches.iter().any(|b| b.equality.is_empty() && b.in_fields.is_empty() && b.range.is_empty());
        if branches.is_empty() || unbounded || needs.len() * branches.len() > 32 {
            return Vec::new();
        }
        needs = needs
            .iter()
            .flat_map(|n| {
                branches.iter().map(move |b| {
                    let mut m = n.clone();
                    m.equality.extend(b.equality.iter().cloned());
                    m.in_fields.extend(b.in_fields.iter().cloned());
                    m.range.extend(b.range.iter().cloned());
                    m
                })
            })
            .collect();
    }
    for n in &mut needs {
        n.normalise();
    }
    needs
}

/// A special index is needed ($text, geo): the caller leaves the query out.
struct Special;

fn conjuncts(filter: &Value, prefix: &str, need: &mut Need, ors: &mut Vec<Vec<Need>>) -> Result<(), Special> {
    let Some(obj) = filter.as_object() else { return Ok(()) };
    for (k, v) in obj {
        match k.as_str() {
            "$and" => {
                for b in v.as_array().into_iter().flatten() {
                    conjuncts(b, prefix, need, ors)?;
                }
            }
            "$or" => {
                let mut branches = Vec::new();
                for b in v.as_array().into_iter().flatten() {
                    let mut bn = Need::default();
                    let mut inner = Vec::new();
                    conjuncts(b, prefix, &mut bn, &mut inner)?;
                    // A nested $or inside a branch: its fields still count as filters
                    // (ranges at best); the branch keeps what it binds itself.
                    for n in inner.into_iter().flatten() {
                        bn.range.extend(n.fields().cloned());
                    }
                    branches.push(bn);
                }
                ors.push(branches);
            }
            "$text" | "$near" | "$nearSphere" | "$geoWithin" | "$geoIntersects" => return Err(Special),
            // $nor, $expr, $where, $jsonSchema, $comment: no index bounds.
            k if k.starts_with('$') => {}
            field => {
                let path = if prefix.is_empty() { field.to_owned() } else { format!("{prefix}.{field}") };
                field_ops(&path, v, need, ors)?;
            }
        }
    }
    Ok(())
}

fn field_ops(path: &str, v: &Value, need: &mut Need, ors: &mut Vec<Vec<Need>>) -> Result<(), Special> {
    let Some(ops) = v.as_object().filter(|o| o.keys().next().is_some_and(|k| k.starts_with('$'))) else {
        // A shape always spells operators; a bare value is an equality.
        need.equality.insert(path.to_owned());
        return Ok(());
    };
    for (op, arg) in ops {
        match op.as_str() {
            "$eq" | "$all" => {
                need.equality.insert(path.to_owned());
            }
            "$in" => {
                need.in_fields.insert(path.to_owned());
            }
            "$elemMatch" => match arg.as_object() {
                Some(o) if o.keys().next().is_some_and(|k| k.starts_with('$') && !is_logical(k)) => {
                    field_ops(path, arg, need, ors)?;
                }
                Some(_) => conjuncts(arg, path, need, ors)?,
                None => {
                    need.range.insert(path.to_owned());
                }
            },
            "$near" | "$nearSphere" | "$geoWithin" | "$geoIntersects" => return Err(Special),
            // $size and $options test nothing an index bounds by themselves.
            "$size" | "$options" => {}
            _ => {
                need.range.insert(path.to_owned());
            }
        }
    }
    Ok(())
}

fn is_logical(k: &str) -> bool {
    matches!(k, "$and" | "$or" | "$nor")
}

/// The sort's fields with directions; a `$meta` or `$natural` sort needs no index.
pub fn sort_fields(sort: &Value) -> Vec<(String, i32)> {
    let Some(o) = sort.as_object() else { return Vec::new() };
    let mut out = Vec::new();
    for (f, d) in o {
        let dir = match d.as_f64() {
            Some(x) if x < 0.0 => -1,
            Some(_) => 1,
            None => return Vec::new(),
        };
        if f == "$natural" {
            return Vec::new();
        }
        out.push((f.clone(), dir));
    }
    out
}

/// The collation as the catalog compares it (locale and strength), unless simple.
fn locale(c: &Value) -> Option<String> {
    let l = c.get("locale")?.as_str()?;
    let strength = c.get("strength").and_then(Value::as_i64).unwrap_or(3);
    (l != "simple").then(|| format!("{l}/{strength}"))
}

/// The needs of one statement shape, with the namespace each applies to: the
/// filter (and sort) of find, count, distinct, findAndModify, update and delete
/// statements (bulkWrite's too), an aggregation's leading `$match`/`$sort`, and the
/// foreignField of each `$lookup`/`$graphLookup` on the joined collection.
pub fn statement_needs(command: &str, namespace: &str, shape: &Value) -> Vec<(String, Need)> {
    let one = |filter: Option<&Value>, sort: Option<&Value>| -> Vec<(String, Need)> {
        let empty = Value::Object(Map::new());
        filter_needs(filter.unwrap_or(&empty), sort, shape.get("collation"))
            .into_iter()
            .filter(|n| !n.is_empty())
            .map(|n| (namespace.to_owned(), n))
            .collect()
    };
    match command {
        "find" => one(shape.get("filter"), shape.get("sort")),
        "count" | "distinct" => one(shape.get("query"), None),
        "findAndModify" | "findandmodify" => one(shape.get("query"), shape.get("sort")),
        "update" | "delete" => one(shape.get("filter"), None),
        "bulkWrite" => {
            let inner = shape.get("update").or_else(|| shape.get("delete"));
            one(inner.and_then(|s| s.get("filter")), None)
        }
        "aggregate" => aggregate_needs(namespace, shape),
        _ => Vec::new(),
    }
}

fn aggregate_needs(namespace: &str, shape: &Value) -> Vec<(String, Need)> {
    let Some(stages) = shape.get("pipeline").and_then(Value::as_array) else { return Vec::new() };
    let db = namespace.split_once('.').map_or(namespace, |(d, _)| d);
    let mut out = Vec::new();
    // The leading $match stages and the first $sort among them, merged as the
    // optimizer does (a $match after a $sort runs before it).
    let mut filter = Vec::new();
    let mut sort = None;
    for s in stages {
        if let Some(m) = s.get("$match") {
            filter.push(m.clone());
        } else if let (Some(srt), None) = (s.get("$sort"), &sort) {
            sort = Some(srt.clone());
        } else {
            break;
        }
    }
    if !matches!(stages.first(), Some(s) if s.get("$geoNear").is_some()) {
        let filter = Value::Object(Map::from_iter([("$and".to_owned(), Value::Array(filter))]));
        for n in filter_needs(&filter, sort.as_ref(), shape.get("collation")) {
            if !n.is_empty() {
                out.push((namespace.to_owned(), n));
            }
        }
    }
    for s in stages {
        lookups(db, s, &mut out);
    }
    out
}

/// `$lookup` (localField/foreignField form, also with a pipeline, or a pipeline whose
/// `$match` compares a field with a variable by `$expr: {$eq}`) and `$graphLookup`
/// look the joined collection up by equality, once per input document.
fn lookups(db: &str, stage: &Value, out: &mut Vec<(String, Need)>) {
    let (body, field) = if let Some(l) = stage.get("$lookup") {
        (l, "foreignField")
    } else if let Some(g) = stage.get("$graphLookup") {
        (g, "connectToField")
    } else if let Some(f) = stage.get("$facet").and_then(Value::as_object) {
        for p in f.values().filter_map(Value::as_array) {
            for s in p {
                lookups(db, s, out);
            }
        }
        return;
    } else {
        return;
    };
    let Some(from) = body.get("from").and_then(Value::as_str) else { return };
    let ns = format!("{db}.{from}");
    let mut need = Need::default();
    if let Some(f) = body.get(field).and_then(Value::as_str) {
        need.equality.insert(f.to_owned());
    }
    if let Some(p) = body.get("pipeline").and_then(Value::as_array) {
        for s in p {
            match s.get("$match") {
                Some(m) => expr_equalities(m, &mut need),
                None => break,
            }
        }
        for s in p {
            lookups(db, s, out);
        }
    }
    if !need.is_empty() {
        out.push((ns, need));
    }
}

/// `{$expr: {$eq: ["$field", "$$var"]}}` (also inside `$and`) binds `field`.
fn expr_equalities(m: &Value, need: &mut Need) {
    let Some(o) = m.as_object() else { return };
    for (k, v) in o {
        match k.as_str() {
            "$expr" => expr_equalities(v, need),
            "$and" => v.as_array().into_iter().flatten().for_each(|b| expr_equalities(b, need)),
            "$eq" => {
                let args: Vec<&str> = v.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                if let [a, b] = args[..] {
                    let field =
                        |s: &str| s.strip_prefix('$').filter(|f| !f.starts_with('$')).map(str::to_owned);
                    let var = |s: &str| s.starts_with("$$");
                    match (field(a), field(b)) {
                        (Some(f), None) if var(b) => {
                            need.equality.insert(f);
                        }
                        (None, Some(f)) if var(a) => {
                            need.equality.insert(f);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// The `$in` fields of a raw filter and their longest list, for shapes that sort:
/// shapes keep `$in` lists as placeholders, so the length comes from the request.
pub fn longest_in(filter: &bson::RawDocument) -> usize {
    use mongotap_wire::element;
    let mut longest = 0;
    for e in element::elements(filter) {
        match (e.key, e.kind) {
            (b"$and" | b"$or", 0x04) => {
                for b in element::elements_in(e.as_array()).filter_map(|b| b.as_document()) {
                    longest = longest.max(longest_in(b));
                }
            }
            (_, 0x03) => {
                if let Some(d) = e.as_document() {
                    if let Some(list) = element::find(d, "$in").and_then(|l| l.as_array()) {
                        longest = longest.max(element::elements(list).count());
                    }
                }
            }
            _ => {}
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn need(filter: Value, sort: Option<Value>) -> Need {
        let mut n = filter_needs(&filter, sort.as_ref(), None);
        assert_eq!(n.len(), 1, "{n:?}");
        n.remove(0).resolve_in(3, 200)
    }

    #[test]
    fn labels_equality_sort_and_range() {
        let n = need(
            json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}},
                            {"total": {"$gt": "?number"}}]}),
            Some(json!({"createdAt": -1})),
        );
        assert_eq!(n.equality, set(&["customerId", "status"]));
        assert_eq!(n.sort, vec![("createdAt".to_owned(), -1)]);
        assert_eq!(n.range, set(&["total"]));
    }

    #[test]
    fn every_range_operator_is_a_range() {
        for op in ["$gt", "$gte", "$lt", "$lte", "$ne", "$nin", "$regex", "$exists", "$type", "$not", "$mod"]
        {
            let n = need(json!({"a": {op: "?x"}}), None);
            assert_eq!(n.range, set(&["a"]), "{op}");
        }
        // A regular expression literal is a range too (shaped as $regex).
        assert_eq!(need(json!({"a": {"$regex": "?regex"}}), None).range, set(&["a"]));
    }

    #[test]
    fn in_is_an_equality_unless_long_and_sorted() {
        let f = json!({"status": {"$in": "?array<?string>"}});
        let sorted = filter_needs(&f, Some(&json!({"at": 1})), None).remove(0);
        assert_eq!(sorted.resolve_in(5, 200).equality, set(&["status"]));
        assert_eq!(sorted.resolve_in(500, 200).range, set(&["status"]));
        let unsorted = filter_needs(&f, None, None).remove(0);
        assert_eq!(unsorted.resolve_in(500, 200).equality, set(&["status"]));
    }

    #[test]
    fn a_range_on_the_sort_field_is_the_sort() {
        let n = need(json!({"createdAt": {"$gt": "?date"}}), Some(json!({"createdAt": -1})));
        assert!(n.range.is_empty());
        assert_eq!(n.sort, vec![("createdAt".to_owned(), -1)]);
        // An equality on a sort field leaves it out of the sort.
        let n = need(json!({"a": {"$eq": 1}}), Some(json!({"a": 1, "b": -1})));
        assert_eq!(n.sort, vec![("b".to_owned(), -1)]);
    }

    #[test]
    fn or_gives_one_need_per_branch_with_the_conjuncts_around_it() {
        let f = json!({"$and": [{"tenant": {"$eq": "?string"}},
                                {"$or": [{"a": {"$eq": 1}}, {"b": {"$gt": 2}}]}]});
        let needs: Vec<Need> =
            filter_needs(&f, None, None).into_iter().map(|n| n.resolve_in(0, 200)).collect();
        assert_eq!(needs.len(), 2);
        assert_eq!(needs[0].equality, set(&["a", "tenant"]));
        assert_eq!(needs[1].equality, set(&["tenant"]));
        assert_eq!(needs[1].range, set(&["b"]));
    }

    #[test]
    fn dotted_paths_and_elem_match() {
        let n = need(json!({"address.city": {"$eq": "?string"}}), None);
        assert_eq!(n.equality, set(&["address.city"]));
        let n = need(
            json!({"lines": {"$elemMatch": {"$and": [{"sku": {"$eq": "?string"}}, {"qty": {"$gt": "?number"}}]}}}),
            None,
        );
        assert_eq!(n.equality, set(&["lines.sku"]));
        assert_eq!(n.range, set(&["lines.qty"]));
        let n = need(json!({"scores": {"$elemMatch": {"$gt": 1, "$lt": 5}}}), None);
        assert_eq!(n.range, set(&["scores"]));
    }

    #[test]
    fn an_or_with_an_unbounded_branch_needs_nothing() {
        let f = json!({"$or": [{"a": {"$eq": 1}}, {"$expr": {"$gt": ["$x", "$y"]}}]});
        assert!(filter_needs(&f, None, None).is_empty());
    }

    #[test]
    fn a_long_in_on_id_stays_points() {
        let f = json!({"_id": {"$in": "?array<?objectId>"}});
        let n = filter_needs(&f, Some(&json!({"at": -1})), None).remove(0).resolve_in(500, 200);
        assert!(n.equality.contains("_id"));
    }

    #[test]
    fn a_match_after_the_sort_joins_the_leading_match() {
        let p = json!({"pipeline": [{"$sort": {"createdAt": -1}}, {"$match": {"status": {"$eq": "?string"}}}, {"$limit": 5}]});
        let needs = statement_needs("aggregate", "d.c", &p);
        assert_eq!(needs[0].1.equality, set(&["status"]));
        assert_eq!(needs[0].1.sort, vec![("createdAt".to_owned(), -1)]);
    }

    #[test]
    fn special_and_unindexable_operators() {
        assert!(filter_needs(&json!({"$text": {"$search": "?string"}}), None, None).is_empty());
        assert!(filter_needs(&json!({"loc": {"$near": "?object"}}), None, None).is_empty());
        let n = need(json!({"$and": [{"a": {"$eq": 1}}, {"$expr": {"$gt": ["$x", "$y"]}}]}), None);
        assert_eq!(n.equality, set(&["a"]));
        assert!(n.range.is_empty());
        assert!(sort_fields(&json!({"score": {"$meta": "textScore"}})).is_empty());
        assert!(sort_fields(&json!({"$natural": -1})).is_empty());
    }

    #[test]
    fn statements_of_every_command() {
        let s = json!({"filter": {"a": {"$eq": 1}}, "update": {"operators": {}}});
        assert_eq!(statement_needs("update", "d.c", &s)[0].1.equality, set(&["a"]));
        let s = json!({"query": {"a": {"$eq": 1}}, "sort": {"b": 1}});
        assert_eq!(statement_needs("findAndModify", "d.c", &s)[0].1.sort, vec![("b".to_owned(), 1)]);
        let s = json!({"update": {"filter": {"a": {"$eq": 1}}}});
        assert_eq!(statement_needs("bulkWrite", "d.c", &s).len(), 1);
        assert!(
            statement_needs("find", "d.c", &json!({})).is_empty(),
            "a whole-collection read needs nothing"
        );
        let p = json!({"pipeline": [
            {"$match": {"status": {"$eq": "?string"}}}, {"$sort": {"at": -1}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
            {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}], "as": "items"}}]});
        let needs = statement_needs("aggregate", "shop.orders", &p);
        assert_eq!(needs.len(), 3);
        assert_eq!(needs[0].0, "shop.orders");
        assert_eq!(needs[0].1.sort, vec![("at".to_owned(), -1)]);
        assert_eq!((needs[1].0.as_str(), needs[1].1.equality.clone()), ("shop.customers", set(&["_id"])));
        assert_eq!((needs[2].0.as_str(), needs[2].1.equality.clone()), ("shop.items", set(&["orderId"])));
    }

    #[test]
    fn longest_in_reads_the_request() {
        let f = bson::rawdoc! {"a": {"$in": [1, 2, 3]}, "$or": [{"b": {"$in": [1, 2, 3, 4, 5]}}]};
        assert_eq!(longest_in(&f), 5);
    }

    #[test]
    fn keys_put_equality_then_sort_then_range() {
        let n = need(
            json!({"$and": [{"status": {"$eq": 1}}, {"customerId": {"$eq": 1}}, {"total": {"$gte": 1}}]}),
            Some(json!({"createdAt": -1})),
        );
        let key = n.key(&|f| if f == "customerId" { 10 } else { 1 });
        let names: Vec<(&str, i32)> = key.iter().map(|(f, d)| (f.as_str(), *d)).collect();
        assert_eq!(names, [("customerId", 1), ("status", 1), ("createdAt", -1), ("total", 1)]);
    }
}
