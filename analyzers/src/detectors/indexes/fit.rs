//! How well one index serves one query's [`Need`], by the ESR rule: its key must
//! start with the equality fields (in any order), continue with the sort (in order,
//! all directions as asked or all inverted; equality fields may sit in between), and
//! hold the range fields after that. With the caveats the planner has: a multikey
//! field cannot provide a sort; a hidden index serves nothing; a partial index
//! serves only queries that imply its filter; a sparse index cannot serve a query
//! that does not filter on its fields; an index with a collation serves only
//! queries with that collation; hashed fields serve equality only; text and geo
//! indexes serve only their own operators; a unique index whose fields are all
//! bound returns at most one document, whatever comes after (`_id` always is one).

use crate::detectors::indexes::catalog::{IndexCatalog, IndexSpec, KeyPart, Sample};
use crate::detectors::indexes::esr::Need;

/// From worst to best, so the best fit is the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Quality {
    /// The index cannot be used: a collection scan, unless another serves.
    Unusable,
    /// It bounds part of the query (or only gives the sort): it scans more than it returns.
    Partial,
    /// It bounds the query, but the sort is done in memory.
    SortInMemory,
    /// Equality, sort and range all served.
    Served,
}

impl Quality {
    /// As the report says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Unusable => "not served (collection scan)",
            Quality::Partial => "partly served (scans more than it returns)",
            Quality::SortInMemory => "served with an in-memory sort",
            Quality::Served => "served",
        }
    }
}

/// An index's fit to a need, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// How well.
    pub quality: Quality,
    /// Why not better, in words (empty when served).
    pub why: String,
}

fn fit(quality: Quality, why: impl Into<String>) -> Fit {
    Fit { quality, why: why.into() }
}

/// How well `index` serves `need`; `multikey(field)` says whether a field holds arrays.
pub fn fit_of(need: &Need, index: &IndexSpec, multikey: &dyn Fn(&str) -> bool) -> Fit {
    if index.hidden {
        return fit(Quality::Unusable, "hidden");
    }
    if let Some((f, KeyPart::Special(kind))) =
        index.key.iter().find(|(_, p)| matches!(p, KeyPart::Special(_)))
    {
        return fit(Quality::Unusable, format!("a {kind} index (on {f}) serves only {kind} queries"));
    }
    let filtered = |f: &str| need.equality.contains(f) || need.range.contains(f);
    if let Some(partial) = &index.partial {
        if !partial.iter().all(|f| filtered(f)) {
            return fit(Quality::Unusable, "partial: the query does not filter on every field of its filter");
        }
    }
    if index.collation != need.collation {
        return fit(Quality::Unusable, "another collation than the query's");
    }
    if index.sparse && !index.key.iter().any(|(f, _)| filtered(f)) {
        return fit(Quality::Unusable, "sparse, and the query does not filter on its fields");
    }
    if let Some((wild, _)) = index.key.iter().find(|(f, _)| f == "$**" || f.ends_with(".$**")) {
        return wildcard(need, wild);
    }
    // A unique index with every field bound returns one document at most: `_id`'s
    // always is unique (listIndexes does not say so), so `{_id: ?, userId: ?}` is served.
    if (index.unique || index.is_id()) && index.key.iter().all(|(f, _)| need.equality.contains(f)) {
        return fit(Quality::Served, "");
    }

    let key = &index.key;
    // A partial index holds only documents that pass its filter: the query's
    // conditions on those fields are served by it, whatever its key.
    // Its key may still hold such a field: the walk steps over it as over an equality.
    let implied = |f: &String| index.partial.as_ref().is_some_and(|p| p.contains(f));
    let mut eq_left = need.equality.clone();
    let eq_total = eq_left.len();
    let mut i = 0;
    while i < key.len() && eq_left.remove(&key[i].0) {
        i += 1;
    }
    let eq_prefix = i;
    let bound_eq = eq_total - eq_left.len();
    eq_left.retain(|f| !implied(f));

    // The sort, in order, all as asked or all inverted; equalities may sit between.
    let (mut j, mut pos, mut flip) = (0, i, None);
    let mut eq_in_sort = eq_left.clone();
    let mut sort_blocker = None;
    while pos < key.len() && j < need.sort.len() {
        let (field, part) = &key[pos];
        let (want, dir) = &need.sort[j];
        if field == want {
            let KeyPart::Ordered(d) = part else {
                sort_blocker = Some(format!("{field} is hashed"));
                break;
            };
            if multikey(field) {
                sort_blocker = Some(format!("{field} holds arrays (multikey), which cannot provide a sort"));
                break;
            }
            let f = d * dir;
            if *flip.get_or_insert(f) != f {
                sort_blocker =
                    Some(format!("the sort's directions are neither its own nor their inverse at {field}"));
                break;
            }
            j += 1;
            pos += 1;
        } else if eq_in_sort.remove(field) || (implied(field) && need.equality.contains(field)) {
            pos += 1;
        } else {
            break;
        }
    }
    let sort_ok = j == need.sort.len();
    let after = if sort_ok { pos } else { eq_prefix };
    let eq_done = if sort_ok { eq_in_sort.is_empty() } else { eq_left.is_empty() };
    // Range fields bound the scan only in the run of query fields right after the
    // equalities and the sort; past a field the query does not mention, they are
    // checked key by key, which is what a missing index costs.
    let run = key[after..]
        .iter()
        .take_while(|(k, _)| need.range.contains(k) || need.equality.contains(k) || implied(k))
        .count();
    let ordered =
        |f: &String| key[after..after + run].iter().any(|(k, p)| k == f && matches!(p, KeyPart::Ordered(_)));
    let range_done = need.range.iter().filter(|f| !implied(f)).all(ordered);

    let first = &key[0].0;
    let range_first = need.range.contains(first) && matches!(key[0].1, KeyPart::Ordered(_));
    let bounds_something = bound_eq > 0 || range_first || (sort_ok && !need.sort.is_empty());
    let missing: Vec<&String> = need
        .equality
        .iter()
        .filter(|f| (if sort_ok { &eq_in_sort } else { &eq_left }).contains(*f))
        .chain(need.range.iter().filter(|f| !implied(f) && !ordered(f)))
        .collect();
    let names = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    if !bounds_something {
        return fit(Quality::Unusable, format!("its first field {first} is not bound by the query"));
    }
    match (eq_done && range_done, sort_ok) {
        (true, true) => fit(Quality::Served, ""),
        (true, false) => fit(
            Quality::SortInMemory,
            sort_blocker.unwrap_or_else(|| {
                format!("its key does not continue with the sort {} after the equalities", sort_text(need))
            }),
        ),
        (false, _) => {
            let how = if bound_eq == 0 && sort_ok && !need.sort.is_empty() && !range_first {
                "walks the whole index in sort order".to_owned()
            } else {
                format!(
                    "bounds only {}",
                    key[..eq_prefix.max(1)].iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", ")
                )
            };
            fit(Quality::Partial, format!("{how}; {} checked document by document", names(&missing)))
        }
    }
}

/// A wildcard index (`$**`, `a.$**`) holds one entry per field under its path and
/// bounds one field per query: it serves a query on one such field (sorted by it at
/// most), and only part of a query on more.
fn wildcard(need: &Need, wild: &str) -> Fit {
    let prefix = wild.trim_end_matches("$**");
    // A range on the sort field was folded into the sort; it is a filtered field here.
    let sorted_range = need.sort.first().map(|(f, _)| f).filter(|_| need.sort.len() == 1);
    let fields: Vec<&String> = need
        .equality
        .iter()
        .chain(&need.range)
        .chain(sorted_range.filter(|_| need.equality.is_empty() && need.range.is_empty()))
        .collect();
    let under = fields.iter().filter(|f| f.starts_with(prefix)).count();
    let sort_ok = match need.sort.as_slice() {
        [] => true,
        [(f, _)] => fields.len() == 1 && fields[0] == f,
        _ => false,
    };
    match (under, fields.len()) {
        (0, _) => {
            fit(Quality::Unusable, format!("the wildcard index on {wild} covers none of the query's fields"))
        }
        (1, 1) if sort_ok => fit(Quality::Served, ""),
        (1, 1) => fit(Quality::SortInMemory, "a wildcard index does not provide this sort"),
        _ => fit(
            Quality::Partial,
            "a wildcard index bounds one field per query; the others are checked document by document",
        ),
    }
}

/// The sort as `{a: 1, b: -1}`.
pub fn sort_text(need: &Need) -> String {
    crate::detectors::indexes::catalog::key_js(need.sort.iter().map(|(f, d)| (f.as_str(), (*d).into())))
}

/// The best fit among `indexes` and which index gives it.
pub fn best<'i>(
    need: &Need,
    indexes: &'i [IndexSpec],
    multikey: &dyn Fn(&str) -> bool,
) -> (Fit, Option<&'i IndexSpec>) {
    let mut best = (fit(Quality::Unusable, "no index"), None);
    for ix in indexes {
        let f = fit_of(need, ix, multikey);
        if best.1.is_none() || f.quality > best.0.quality {
            best = (f, Some(ix));
        }
    }
    best
}

/// The next sample worth explaining: the oldest whose needs no known index
/// serves (samples of served shapes are let go unexplained).
pub fn next_unserved_sample(catalog: &mut IndexCatalog) -> Option<Sample> {
    while let Some(s) = catalog.pop_sample() {
        let indexes = catalog.get(&s.namespace).map(|k| k.indexes.clone()).unwrap_or_default();
        let indexes = if indexes.is_empty() { vec![IndexSpec::id_index()] } else { indexes };
        let served = s.needs.iter().all(|n| best(n, &indexes, &|_| false).0.quality == Quality::Served);
        if !served {
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detectors::indexes::esr::filter_needs;
    use bson::rawdoc;
    use serde_json::{json, Value};

    fn need(filter: Value, sort: Option<Value>) -> Need {
        filter_needs(&filter, sort.as_ref(), None).remove(0).resolve_in(3, 200)
    }

    fn index(key: bson::RawDocumentBuf) -> IndexSpec {
        IndexSpec::from_document(&rawdoc! {"key": key}).unwrap()
    }

    fn q(n: &Need, ix: &IndexSpec) -> Quality {
        fit_of(n, ix, &|_| false).quality
    }

    fn order_history() -> Need {
        need(
            json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]}),
            Some(json!({"createdAt": -1})),
        )
    }

    #[test]
    fn the_esr_cases() {
        let n = order_history();
        // E+S: equality fields in either order, the sort as asked or inverted.
        assert_eq!(q(&n, &index(rawdoc! {"customerId": 1, "status": 1, "createdAt": -1})), Quality::Served);
        assert_eq!(q(&n, &index(rawdoc! {"status": 1, "customerId": -1, "createdAt": 1})), Quality::Served);
        // Only the sort's field: walks the whole index in order.
        let f = fit_of(&n, &index(rawdoc! {"createdAt": 1}), &|_| false);
        assert_eq!(f.quality, Quality::Partial, "{f:?}");
        assert!(f.why.contains("walks the whole index"), "{}", f.why);
        // Equality only, no sort field: an in-memory sort.
        assert_eq!(q(&n, &index(rawdoc! {"customerId": 1, "status": 1})), Quality::SortInMemory);
        // One equality field of two: partly served.
        assert_eq!(q(&n, &index(rawdoc! {"customerId": 1})), Quality::Partial);
        // Nothing in common: unusable.
        assert_eq!(q(&n, &index(rawdoc! {"total": 1})), Quality::Unusable);
        // Sort before the equalities: the sort holds but equality is not bounded.
        assert_eq!(q(&n, &index(rawdoc! {"createdAt": -1, "customerId": 1, "status": 1})), Quality::Partial);
    }

    #[test]
    fn equality_only_sort_only_and_ranges() {
        let eq = need(json!({"a": {"$eq": 1}}), None);
        assert_eq!(q(&eq, &index(rawdoc! {"a": 1, "b": 1})), Quality::Served);
        assert_eq!(q(&eq, &index(rawdoc! {"b": 1, "a": 1})), Quality::Unusable);
        let sort_only = need(json!({}), Some(json!({"at": -1})));
        assert_eq!(q(&sort_only, &index(rawdoc! {"at": 1})), Quality::Served);
        let esr = need(json!({"$and": [{"a": {"$eq": 1}}, {"total": {"$gt": 5}}]}), Some(json!({"at": 1})));
        assert_eq!(q(&esr, &index(rawdoc! {"a": 1, "at": 1, "total": 1})), Quality::Served);
        // A range past a field the query does not mention is checked key by key.
        assert_eq!(q(&esr, &index(rawdoc! {"a": 1, "at": 1, "x": 1, "total": 1})), Quality::Partial);
        // E-R-S: the range before the sort serves the filter, not the sort.
        assert_eq!(q(&esr, &index(rawdoc! {"a": 1, "total": 1, "at": 1})), Quality::SortInMemory);
        // A range on the sort field is served by the sort's part.
        let ranged_sort = need(json!({"at": {"$gte": 1}}), Some(json!({"at": -1})));
        assert_eq!(q(&ranged_sort, &index(rawdoc! {"at": 1})), Quality::Served);
        // Equality on `a` and sort {b: -1} is served by {a: 1, b: 1} (inverse walk).
        let a_b = need(json!({"a": {"$eq": 1}}), Some(json!({"b": -1})));
        assert_eq!(q(&a_b, &index(rawdoc! {"a": 1, "b": 1})), Quality::Served);
        // A compound sort must keep its relative directions.
        let mixed = need(json!({}), Some(json!({"a": 1, "b": -1})));
        assert_eq!(q(&mixed, &index(rawdoc! {"a": 1, "b": -1})), Quality::Served);
        assert_eq!(q(&mixed, &index(rawdoc! {"a": -1, "b": 1})), Quality::Served);
        assert_eq!(q(&mixed, &index(rawdoc! {"a": 1, "b": 1})), Quality::Unusable);
    }

    #[test]
    fn in_lists_with_a_sort() {
        let f = json!({"status": {"$in": "?array<?string>"}});
        let few = filter_needs(&f, Some(&json!({"at": -1})), None).remove(0).resolve_in(3, 200);
        let many = filter_needs(&f, Some(&json!({"at": -1})), None).remove(0).resolve_in(500, 200);
        assert_eq!(q(&few, &index(rawdoc! {"status": 1, "at": -1})), Quality::Served);
        // Many values: a range, so {status, at} leaves the sort to memory; {at, status} is ESR.
        assert_eq!(q(&many, &index(rawdoc! {"status": 1, "at": -1})), Quality::SortInMemory);
        assert_eq!(q(&many, &index(rawdoc! {"at": -1, "status": 1})), Quality::Served);
    }

    #[test]
    fn caveats() {
        let n = order_history();
        let good = rawdoc! {"customerId": 1, "status": 1, "createdAt": -1};
        // A multikey sort field cannot provide the sort.
        let f = fit_of(&n, &index(good.clone()), &|f| f == "createdAt");
        assert_eq!(f.quality, Quality::SortInMemory);
        assert!(f.why.contains("multikey"), "{}", f.why);
        let mut hidden = index(good.clone());
        hidden.hidden = true;
        assert_eq!(q(&n, &hidden), Quality::Unusable);
        let partial = IndexSpec::from_document(
            &rawdoc! {"key": good.clone(), "partialFilterExpression": {"archived": false}},
        )
        .unwrap();
        assert_eq!(q(&n, &partial), Quality::Unusable);
        let with_archived = need(
            json!({"$and": [{"customerId": {"$eq": 1}}, {"status": {"$eq": 1}}, {"archived": {"$eq": false}}]}),
            Some(json!({"createdAt": -1})),
        );
        assert_eq!(q(&with_archived, &partial), Quality::Served);
        // A partial index keyed on its own filter field serves a query that binds it.
        let open = IndexSpec::from_document(
            &rawdoc! {"key": {"status": 1, "createdAt": -1}, "partialFilterExpression": {"status": "open"}},
        )
        .unwrap();
        assert_eq!(
            q(&need(json!({"status": {"$eq": "?string"}}), Some(json!({"createdAt": -1}))), &open),
            Quality::Served
        );
        let french = IndexSpec::from_document(&rawdoc! {"key": good, "collation": {"locale": "fr"}}).unwrap();
        assert_eq!(q(&n, &french), Quality::Unusable);
        let sparse = IndexSpec::from_document(&rawdoc! {"key": {"at": 1}, "sparse": true}).unwrap();
        assert_eq!(q(&need(json!({}), Some(json!({"at": 1}))), &sparse), Quality::Unusable);
        let text = index(rawdoc! {"body": "text"});
        assert_eq!(q(&need(json!({"body": {"$eq": 1}}), None), &text), Quality::Unusable);
        let hashed = index(rawdoc! {"h": "hashed"});
        assert_eq!(q(&need(json!({"h": {"$eq": 1}}), None), &hashed), Quality::Served);
        assert_eq!(q(&need(json!({"h": {"$gt": 1}}), None), &hashed), Quality::Unusable);
    }

    #[test]
    fn id_and_unique_indexes_serve_any_query_that_binds_them() {
        let n = need(json!({"$and": [{"_id": {"$eq": 1}}, {"owner": {"$eq": 2}}]}), Some(json!({"x": 1})));
        assert_eq!(q(&n, &IndexSpec::id_index()), Quality::Served);
        let email = IndexSpec::from_document(&rawdoc! {"key": {"email": 1}, "unique": true}).unwrap();
        assert_eq!(
            q(&need(json!({"$and": [{"email": {"$eq": 1}}, {"a": {"$gt": 1}}]}), None), &email),
            Quality::Served
        );
    }

    #[test]
    fn wildcard_indexes_serve_one_field() {
        let all = index(rawdoc! {"$**": 1});
        let attrs = index(rawdoc! {"attrs.$**": 1});
        let one = need(json!({"attrs.color": {"$eq": 1}}), None);
        assert_eq!(q(&one, &all), Quality::Served);
        assert_eq!(q(&one, &attrs), Quality::Served);
        assert_eq!(q(&need(json!({"name": {"$eq": 1}}), None), &attrs), Quality::Unusable);
        let ranged_sort = need(json!({"attrs.size": {"$gt": 1}}), Some(json!({"attrs.size": 1})));
        assert_eq!(q(&ranged_sort, &attrs), Quality::Served);
        let two = need(json!({"$and": [{"attrs.color": {"$eq": 1}}, {"attrs.size": {"$gt": 1}}]}), None);
        assert_eq!(q(&two, &attrs), Quality::Partial);
    }

    #[test]
    fn the_best_of_several() {
        let n = order_history();
        let ixs = [IndexSpec::id_index(), index(rawdoc! {"createdAt": 1}), index(rawdoc! {"customerId": 1})];
        let (f, ix) = best(&n, &ixs, &|_| false);
        assert_eq!(f.quality, Quality::Partial);
        assert!(ix.is_some());
    }
}
