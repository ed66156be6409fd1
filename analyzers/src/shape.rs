//! Query shapes in the placeholder language of MongoDB's `$queryStats`.
//!
//! Literals become type placeholders (`?number`, `?string`, `?array<?number>`, ...),
//! implicit equality becomes `$eq`, sibling predicates become a sorted `$and`, and
//! operators are kept, so `{a: 5}` and `{a: {$gt: 5}}` are different shapes while
//! `{a: 5}` and `{a: 6}` are the same. `sort`, `collation` and `hint` are kept as
//! written; `skip` and `limit` by presence only. Shapes never carry a literal value.

use bson::{RawArray, RawBsonRef, RawDocument};
use serde_json::{json, Map, Value};

/// The placeholder for one literal.
pub fn placeholder(v: RawBsonRef<'_>) -> Value {
    Value::String(match v {
        RawBsonRef::Array(a) => return array_placeholder(a),
        other => type_placeholder(other).to_owned(),
    })
}

fn type_placeholder(v: RawBsonRef<'_>) -> &'static str {
    match v {
        RawBsonRef::Double(_) | RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Decimal128(_) => {
            "?number"
        }
        RawBsonRef::String(_) => "?string",
        RawBsonRef::Document(_) => "?object",
        RawBsonRef::Array(_) => "?array",
        RawBsonRef::Binary(_) => "?binData",
        RawBsonRef::Undefined => "?undefined",
        RawBsonRef::ObjectId(_) => "?objectId",
        RawBsonRef::Boolean(_) => "?bool",
        RawBsonRef::DateTime(_) => "?date",
        RawBsonRef::Null => "?null",
        RawBsonRef::RegularExpression(_) => "?regex",
        RawBsonRef::DbPointer(_) => "?dbPointer",
        RawBsonRef::JavaScriptCode(_) | RawBsonRef::JavaScriptCodeWithScope(_) => "?javascript",
        RawBsonRef::Symbol(_) => "?symbol",
        RawBsonRef::Timestamp(_) => "?timestamp",
        RawBsonRef::MinKey => "?minKey",
        RawBsonRef::MaxKey => "?maxKey",
    }
}

/// `?array<?T>` when every element has type T, `?array<>` when mixed, `[]` when empty.
fn array_placeholder(a: &RawArray) -> Value {
    let mut kind: Option<&'static str> = None;
    let mut mixed = false;
    for v in a.into_iter().flatten() {
        let t = type_placeholder(v);
        match kind {
            None => kind = Some(t),
            Some(k) if k != t => mixed = true,
            _ => {}
        }
    }
    match (kind, mixed) {
        (None, _) => json!([]),
        (Some(_), true) => json!("?array<>"),
        (Some(t), false) => json!(format!("?array<{t}>")),
    }
}

/// A literal value as JSON, for the parts a shape keeps as written (sort, collation,
/// hint, `$lookup` collection names). Never used for filter values.
pub fn literal(v: RawBsonRef<'_>) -> Value {
    match v {
        RawBsonRef::Double(d) => json!(d),
        RawBsonRef::Int32(i) => json!(i),
        RawBsonRef::Int64(i) => json!(i),
        RawBsonRef::String(s) => json!(s),
        RawBsonRef::Boolean(b) => json!(b),
        RawBsonRef::Null => Value::Null,
        RawBsonRef::Document(d) => {
            Value::Object(d.iter().flatten().map(|(k, v)| (k.as_str().to_owned(), literal(v))).collect())
        }
        RawBsonRef::Array(a) => Value::Array(a.into_iter().flatten().map(literal).collect()),
        other => placeholder(other),
    }
}

/// Normalises a query filter (`find.filter`, `$match`, `q` of update/delete).
pub fn filter(doc: &RawDocument) -> Value {
    let mut preds: Vec<Value> = Vec::new();
    for (key, v) in doc.iter().flatten() {
        let key = key.as_str();
        match key {
            "$and" | "$or" | "$nor" => {
                let branches: Vec<Value> = match v {
                    RawBsonRef::Array(a) => {
                        a.into_iter().flatten().filter_map(|b| b.as_document()).map(filter).collect()
                    }
                    other => vec![placeholder(other)],
                };
                if key == "$and" {
                    // Nested $and flattens into this level.
                    for b in branches {
                        match b {
                            Value::Object(mut m) if m.len() == 1 && m.contains_key("$and") => {
                                if let Some(Value::Array(inner)) = m.remove("$and") {
                                    preds.extend(inner);
                                }
                            }
                            other => preds.push(other),
                        }
                    }
                } else {
                    let mut branches = branches;
                    sort_values(&mut branches);
                    preds.push(json!({ key: branches }));
                }
            }
            "$expr" => preds.push(json!({"$expr": expression(v)})),
            "$comment" => {}
            k if k.starts_with('$') => preds.push(json!({ k: placeholder(v) })),
            field => preds.extend(field_predicates(field, v)),
        }
    }
    match preds.len() {
        0 => json!({}),
        1 => preds.pop().expect("one"),
        _ => {
            sort_values(&mut preds);
            json!({"$and": preds})
        }
    }
}

/// `{field: value}` or `{field: {$op: value, ...}}` as one predicate per operator.
fn field_predicates(field: &str, v: RawBsonRef<'_>) -> Vec<Value> {
    let ops = match v {
        RawBsonRef::Document(d) if first_key(d).is_some_and(|k| k.starts_with('$')) => d,
        RawBsonRef::RegularExpression(_) => return vec![json!({ field: {"$regex": "?regex"} })],
        other => return vec![json!({ field: {"$eq": placeholder(other)} })],
    };
    let mut out = Vec::new();
    let has_regex = ops.get("$regex").ok().flatten().is_some();
    for (op, val) in ops.iter().flatten() {
        let op = op.as_str();
        let shaped = match op {
            "$elemMatch" => match val {
                RawBsonRef::Document(d)
                    if first_key(d).is_some_and(|k| k.starts_with('$') && !is_logical(k)) =>
                {
                    operators_only(d)
                }
                RawBsonRef::Document(d) => filter(d),
                other => placeholder(other),
            },
            "$not" => match val {
                RawBsonRef::Document(d) => operators_only(d),
                other => placeholder(other),
            },
            // $options travels with $regex: one predicate.
            "$options" if has_regex => continue,
            "$regex" if has_regex && ops.get("$options").ok().flatten().is_some() => {
                out.push(json!({ field: {"$regex": "?string", "$options": "?string"} }));
                continue;
            }
            _ => placeholder(val),
        };
        out.push(json!({ field: { op: shaped } }));
    }
    out
}

fn is_logical(k: &str) -> bool {
    matches!(k, "$and" | "$or" | "$nor")
}

/// An operator document (`{$gt: 1, $lt: 5}`) with its values as placeholders.
fn operators_only(d: &RawDocument) -> Value {
    let mut m = Map::new();
    for (op, val) in d.iter().flatten() {
        let shaped = match val {
            RawBsonRef::Document(inner) if first_key(inner).is_some_and(|k| k.starts_with('$')) => {
                operators_only(inner)
            }
            other => placeholder(other),
        };
        m.insert(op.as_str().to_owned(), shaped);
    }
    Value::Object(m)
}

/// An aggregation expression: field paths (`"$a.b"`) and variables (`"$$NOW"`) kept,
/// other literals replaced by placeholders, operators and their structure kept.
pub fn expression(v: RawBsonRef<'_>) -> Value {
    match v {
        RawBsonRef::String(s) if s.starts_with('$') => json!(s),
        RawBsonRef::Document(d) => {
            if first_key(d) == Some("$literal") {
                return json!({"$literal": d.get("$literal").ok().flatten().map_or(json!("?"), placeholder)});
            }
            Value::Object(d.iter().flatten().map(|(k, v)| (k.as_str().to_owned(), expression(v))).collect())
        }
        RawBsonRef::Array(a) => Value::Array(a.into_iter().flatten().map(expression).collect()),
        other => placeholder(other),
    }
}

/// A projection: inclusion and exclusion kept as booleans, computed fields shaped.
pub fn projection(d: &RawDocument) -> Value {
    Value::Object(
        d.iter()
            .flatten()
            .map(|(k, v)| {
                let shaped = match v {
                    RawBsonRef::Int32(i) => json!(i != 0),
                    RawBsonRef::Int64(i) => json!(i != 0),
                    RawBsonRef::Double(f) => json!(f != 0.0),
                    RawBsonRef::Boolean(b) => json!(b),
                    other => expression(other),
                };
                (k.as_str().to_owned(), shaped)
            })
            .collect(),
    )
}

/// An aggregation pipeline, stage by stage.
pub fn pipeline(stages: &RawArray) -> Value {
    Value::Array(stages.into_iter().flatten().filter_map(|s| s.as_document()).map(stage).collect())
}

fn stage(s: &RawDocument) -> Value {
    let Some(name) = first_key(s) else { return json!({}) };
    let Ok(Some(body)) = s.get(name) else { return json!({}) };
    let shaped = match (name, body) {
        ("$match", RawBsonRef::Document(d)) => filter(d),
        ("$sort", RawBsonRef::Document(d)) => literal(RawBsonRef::Document(d)),
        ("$limit" | "$skip" | "$sample", v) => placeholder(v),
        ("$unwind" | "$count" | "$out" | "$merge" | "$sortByCount", v) => match v {
            RawBsonRef::String(_) | RawBsonRef::Document(_) => literal(v),
            other => placeholder(other),
        },
        ("$project", RawBsonRef::Document(d)) => projection(d),
        ("$lookup", RawBsonRef::Document(d)) => lookup(d),
        ("$graphLookup", RawBsonRef::Document(d)) => {
            let mut m = Map::new();
            for (k, v) in d.iter().flatten() {
                let k = k.as_str();
                let shaped = match k {
                    "restrictSearchWithMatch" => v.as_document().map_or_else(|| placeholder(v), filter),
                    "startWith" => expression(v),
                    "maxDepth" => placeholder(v),
                    _ => literal(v),
                };
                m.insert(k.to_owned(), shaped);
            }
            Value::Object(m)
        }
        ("$unionWith", RawBsonRef::Document(d)) => lookup(d),
        ("$facet", RawBsonRef::Document(d)) => Value::Object(
            d.iter()
                .flatten()
                .map(|(k, v)| (k.as_str().to_owned(), v.as_array().map_or_else(|| placeholder(v), pipeline)))
                .collect(),
        ),
        (_, v) => expression(v),
    };
    json!({ name: shaped })
}

/// `$lookup`: the joined collection and the join fields kept, sub-pipelines shaped.
fn lookup(d: &RawDocument) -> Value {
    let mut m = Map::new();
    for (k, v) in d.iter().flatten() {
        let k = k.as_str();
        let shaped = match (k, v) {
            ("pipeline", RawBsonRef::Array(a)) => pipeline(a),
            ("let", RawBsonRef::Document(l)) => Value::Object(
                l.iter().flatten().map(|(k, v)| (k.as_str().to_owned(), expression(v))).collect(),
            ),
            (_, v) => literal(v),
        };
        m.insert(k.to_owned(), shaped);
    }
    Value::Object(m)
}

/// The shape of an update's modification: operator updates by operator and path,
/// replacements by their top-level fields, pipeline updates stage by stage.
pub fn update_kind(u: RawBsonRef<'_>) -> Value {
    match u {
        RawBsonRef::Array(stages) => json!({"pipeline": pipeline(stages)}),
        RawBsonRef::Document(d) if first_key(d).is_some_and(|k| k.starts_with('$')) => {
            let mut ops = Map::new();
            for (op, paths) in d.iter().flatten() {
                let paths: Vec<Value> = match paths {
                    RawBsonRef::Document(p) => p
                        .iter()
                        .flatten()
                        .map(|(path, v)| match (op.as_str(), v) {
                            // $push/$addToSet modifiers matter to the detectors ($each, $slice).
                            ("$push" | "$addToSet", RawBsonRef::Document(m))
                                if first_key(m).is_some_and(|k| k.starts_with('$')) =>
                            {
                                let mods: Vec<&str> = m.iter().flatten().map(|(k, _)| k.as_str()).collect();
                                json!({ path.as_str(): mods })
                            }
                            _ => json!(path.as_str()),
                        })
                        .collect(),
                    other => vec![placeholder(other)],
                };
                ops.insert(op.as_str().to_owned(), Value::Array(paths));
            }
            json!({"operators": ops})
        }
        RawBsonRef::Document(d) => json!({"replacement": document_fields(d)}),
        other => json!({"replacement": placeholder(other)}),
    }
}

/// A document's top-level fields and their types: the shape of an insert.
pub fn document_fields(d: &RawDocument) -> Value {
    Value::Object(d.iter().flatten().map(|(k, v)| (k.as_str().to_owned(), placeholder(v))).collect())
}

fn first_key(d: &RawDocument) -> Option<&str> {
    d.iter().next()?.ok().map(|(k, _)| k.as_str())
}

/// Sorts values by their JSON text, so that predicate order does not split shapes.
fn sort_values(v: &mut [Value]) {
    v.sort_by_cached_key(|x| x.to_string());
}

/// A stable 64-bit FNV-1a fingerprint, the same on every machine and run: each part's
/// bytes then 0xff. Shapes are fed as their compact JSON text, streamed, never built.
#[derive(Debug, Clone, Copy)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Adds one part.
    pub fn part(mut self, s: &str) -> Fingerprint {
        self.bytes(s.as_bytes());
        self.bytes(&[0xff]);
        self
    }

    /// Adds a shape as one part, as its compact JSON text.
    pub fn shape(mut self, v: &Value) -> Fingerprint {
        serde_json::to_writer(&mut self, v).expect("writing to a hasher cannot fail");
        self.bytes(&[0xff]);
        self
    }

    /// The 64-bit value.
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint::new()
    }
}

impl std::io::Write for Fingerprint {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The fingerprint of some parts, as the 16 hex digits reports use.
pub fn fingerprint(parts: &[&str]) -> String {
    hex(parts.iter().fold(Fingerprint::new(), |f, p| f.part(p)).finish())
}

/// A fingerprint as 16 hex digits.
pub fn hex(h: u64) -> String {
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    fn f(d: bson::Document) -> Value {
        filter(&raw(d))
    }

    #[test]
    fn literals_become_placeholders_and_equality_is_explicit() {
        assert_eq!(f(doc! {"a": 5}), json!({"a": {"$eq": "?number"}}));
        assert_eq!(f(doc! {"a": 5}), f(doc! {"a": 6.5}));
        assert_ne!(f(doc! {"a": 5}), f(doc! {"a": {"$gt": 5}}));
        assert_eq!(f(doc! {"a": {"$gt": 5}}), json!({"a": {"$gt": "?number"}}));
        assert_eq!(
            f(doc! {"s": "x", "o": bson::oid::ObjectId::new()}),
            json!({"$and": [
            {"o": {"$eq": "?objectId"}}, {"s": {"$eq": "?string"}}]})
        );
        assert_eq!(
            f(doc! {"n": null, "b": true}),
            json!({"$and": [{"b": {"$eq": "?bool"}}, {"n": {"$eq": "?null"}}]})
        );
        assert_eq!(f(doc! {}), json!({}));
    }

    #[test]
    fn sibling_order_does_not_split_shapes() {
        assert_eq!(f(doc! {"a": 1, "b": "x"}), f(doc! {"b": "y", "a": 2}));
        assert_eq!(
            f(doc! {"customerId": 1, "status": "open"}),
            json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]})
        );
    }

    #[test]
    fn in_of_any_length_is_one_shape() {
        let one = f(doc! {"a": {"$in": [1]}});
        assert_eq!(one, json!({"a": {"$in": "?array<?number>"}}));
        assert_eq!(one, f(doc! {"a": {"$in": [1, 2, 3, 4, 5, 6, 7]}}));
        assert_eq!(f(doc! {"a": {"$in": [1, "x"]}}), json!({"a": {"$in": "?array<>"}}));
        assert_eq!(f(doc! {"a": {"$in": []}}), json!({"a": {"$in": []}}));
    }

    #[test]
    fn several_operators_on_one_field_split_into_and() {
        assert_eq!(
            f(doc! {"a": {"$gte": 1, "$lt": 9}}),
            json!({"$and": [{"a": {"$gte": "?number"}}, {"a": {"$lt": "?number"}}]})
        );
    }

    #[test]
    fn and_or_nesting_and_dotted_paths() {
        let s = f(doc! {"$or": [{"a.b": 1}, {"c": {"$exists": true}}], "d": "x"});
        assert_eq!(
            s,
            json!({"$and": [
                {"$or": [{"a.b": {"$eq": "?number"}}, {"c": {"$exists": "?bool"}}]},
                {"d": {"$eq": "?string"}}
            ]})
        );
        // An explicit $and is the same shape as implicit siblings.
        assert_eq!(f(doc! {"$and": [{"a": 1}, {"b": 2}]}), f(doc! {"a": 1, "b": 2}));
        assert_eq!(f(doc! {"$or": [{"x": 1}, {"y": 1}]}), f(doc! {"$or": [{"y": 2}, {"x": 3}]}));
    }

    #[test]
    fn arrays_as_values_and_elem_match() {
        assert_eq!(f(doc! {"tags": ["a", "b"]}), json!({"tags": {"$eq": "?array<?string>"}}));
        assert_eq!(
            f(doc! {"items": {"$elemMatch": {"sku": "x", "qty": {"$gt": 1}}}}),
            json!({"items": {"$elemMatch": {"$and": [{"qty": {"$gt": "?number"}}, {"sku": {"$eq": "?string"}}]}}})
        );
        assert_eq!(
            f(doc! {"scores": {"$elemMatch": {"$gte": 80, "$lt": 90}}}),
            json!({"scores": {"$elemMatch": {"$gte": "?number", "$lt": "?number"}}})
        );
        assert_eq!(f(doc! {"a": {"$not": {"$gt": 3}}}), json!({"a": {"$not": {"$gt": "?number"}}}));
    }

    #[test]
    fn regex_operator_and_regex_literal() {
        let re = bson::Regex {
            pattern: "^ab".to_string().try_into().unwrap(),
            options: "i".to_string().try_into().unwrap(),
        };
        let lit = f(doc! {"name": re});
        assert_eq!(lit, json!({"name": {"$regex": "?regex"}}));
        assert_eq!(f(doc! {"name": {"$regex": "^ab"}}), json!({"name": {"$regex": "?string"}}));
        assert_eq!(
            f(doc! {"name": {"$regex": "^ab", "$options": "i"}}),
            json!({"name": {"$regex": "?string", "$options": "?string"}})
        );
    }

    #[test]
    fn expr_keeps_field_paths_and_hides_literals() {
        assert_eq!(
            f(doc! {"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", 1.5]}]}}),
            json!({"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", "?number"]}]}})
        );
    }

    #[test]
    fn pipelines_with_lookup_sub_pipelines() {
        let p = raw(doc! {"p": [
            {"$match": {"status": "open", "total": {"$gt": 100}}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
            {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": 5}], "as": "items"}},
            {"$sort": {"total": -1}},
            {"$limit": 10},
            {"$project": {"total": 1, "label": {"$concat": ["$name", " - VIP"]}}}
        ]});
        let shaped = pipeline(p.get_array("p").unwrap());
        assert_eq!(
            shaped,
            json!([
                {"$match": {"$and": [{"status": {"$eq": "?string"}}, {"total": {"$gt": "?number"}}]}},
                {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
                {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                    {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": "?number"}], "as": "items"}},
                {"$sort": {"total": -1}},
                {"$limit": "?number"},
                {"$project": {"total": true, "label": {"$concat": ["$name", "?string"]}}}
            ])
        );
    }

    #[test]
    fn update_kinds() {
        let ops = raw(
            doc! {"u": {"$set": {"a": 1, "b.c": "x"}, "$inc": {"n": 1}, "$push": {"log": {"$each": [1], "$slice": -10}}}},
        );
        assert_eq!(
            update_kind(ops.get("u").unwrap().unwrap()),
            json!({"operators": {"$set": ["a", "b.c"], "$inc": ["n"], "$push": [{"log": ["$each", "$slice"]}]}})
        );
        let rep = raw(doc! {"u": {"_id": 1, "name": "x", "lines": [1, 2]}});
        assert_eq!(
            update_kind(rep.get("u").unwrap().unwrap()),
            json!({"replacement": {"_id": "?number", "name": "?string", "lines": "?array<?number>"}})
        );
        let pipe = raw(doc! {"u": [{"$set": {"total": {"$sum": "$lines.price"}}}]});
        assert_eq!(
            update_kind(pipe.get("u").unwrap().unwrap()),
            json!({"pipeline": [{"$set": {"total": {"$sum": "$lines.price"}}}]})
        );
    }

    #[test]
    fn projections_and_fingerprints() {
        assert_eq!(
            projection(&raw(doc! {"a": 1, "b": 0, "c": true})),
            json!({"a": true, "b": false, "c": true})
        );
        let a = fingerprint(&["shop.orders", "find", "{}"]);
        assert_eq!(a, fingerprint(&["shop.orders", "find", "{}"]));
        assert_ne!(a, fingerprint(&["shop.orders", "find", "{ }"]));
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(a.len(), 16);
        // Pinned: the fingerprint must not change between versions or machines.
        assert_eq!(fingerprint(&["x"]), "08f1c907b58eba68");
        // Streaming a shape equals hashing its text.
        let shape = json!({"filter": {"a": {"$eq": "?number"}}, "limit": true});
        let streamed = Fingerprint::new().part("t.c").part("find").shape(&shape).finish();
        assert_eq!(hex(streamed), fingerprint(&["t.c", "find", &shape.to_string()]));
    }
}
