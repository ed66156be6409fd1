//! `unknown_field`: a filter or sort names a field that no document of the
//! collection carries: `sort("id")` where documents store `_id`, a renamed field the
//! code still asks for. Such a query matches nothing (or sorts nothing), and no
//! index would help it: the index advisor leaves its needs to this finding.
//!
//! A field is unknown when at least `unknown_field_min_documents` documents of the
//! collection were seen whole and none carried it (nor, for `a.b`, anything that
//! could hold it), and no query filtering on it by a positive predicate returned a
//! document (sampling could have missed a rare field; a match proves it exists).
//! Fields asked absent (`$exists: false`, `null`, `$ne`, `$nin`, `$not`) or inside
//! `$or`/`$nor` are left out: asking for a missing field is often the point. As for
//! a missing index, a query run fewer than `index_min_count` times is a one-off, not
//! an access pattern (and the documents it needed may be among those not sampled).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::detectors::{collection, Context, Detector};
use crate::finding::{Draft, Finding, Severity};
use crate::shape::command::Category;
use crate::table::Row;
use crate::view::ShapeId;

/// Close field names named per finding.
const MAX_CLOSE: usize = 3;
/// Shapes named per finding.
const MAX_SHAPES: usize = 8;

/// The detector: it keeps nothing; the table and the schemas hold what it needs.
pub struct UnknownField;

/// The fields a statement shape asks for by a positive predicate (in its filter's
/// conjuncts) and sorts on.
pub fn asked_fields(shape: &Value) -> (Vec<String>, Vec<String>) {
    let mut filtered = Vec::new();
    let filter = shape
        .get("filter")
        .or_else(|| shape.get("query"))
        .or_else(|| shape.get("pipeline").and_then(|p| p.get(0)).and_then(|s| s.get("$match")));
    if let Some(f) = filter {
        positive(f, "", &mut filtered);
    }
    let sort = shape
        .get("sort")
        .and_then(Value::as_object)
        .map(|o| o.keys().filter(|k| !k.starts_with('$')).cloned().collect())
        .unwrap_or_default();
    (filtered, sort)
}

fn positive(filter: &Value, prefix: &str, out: &mut Vec<String>) {
    let Some(o) = filter.as_object() else { return };
    for (k, v) in o {
        match k.as_str() {
            "$and" => v.as_array().into_iter().flatten().for_each(|b| positive(b, prefix, out)),
            k if k.starts_with('$') => {}
            field => {
                let path = if prefix.is_empty() { field.to_owned() } else { format!("{prefix}.{field}") };
                let Some(ops) = v.as_object() else { continue };
                let asks = ops.iter().any(|(op, arg)| match op.as_str() {
                    "$eq" => arg.as_str() != Some("?null"),
                    "$in" | "$gt" | "$gte" | "$lt" | "$lte" | "$all" | "$regex" | "$size" | "$type"
                    | "$mod" | "$elemMatch" => true,
                    _ => false,
                });
                if asks && !out.contains(&path) {
                    out.push(path);
                }
            }
        }
    }
}

/// Whether `field` of `row`'s collection is unknown: no document seen carries it,
/// and no execution that asked for it by a positive predicate (one of `positives`,
/// from [`asked_fields`]) returned a document, which would prove it exists.
pub fn unknown(ctx: &Context<'_>, row: &Row, field: &str, positives: &[String]) -> bool {
    let Some(coll) = ctx.schemas.get(&row.namespace) else { return false };
    let lacks = coll.lacks(field, ctx.thresholds.unknown_field_min_documents) == Some(true);
    let proven = row.docs_returned > 0 && positives.iter().any(|p| p == field);
    lacks && !proven
}

/// Field names that differ from `field` by little: a case, an underscore, a typo.
fn close<'a>(field: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "");
    let mut scored: Vec<(usize, String)> = names
        .filter(|n| *n != field)
        .filter_map(|n| {
            let d = if norm(n) == norm(field) { 0 } else { edit_distance(n, field) };
            (d <= 2 && d < field.len().max(2)).then(|| (d, n.to_owned()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(MAX_CLOSE).map(|(_, n)| n).collect()
}

/// Levenshtein distance, for short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[derive(Default)]
struct Asked {
    executions: u64,
    shapes: Vec<ShapeId>,
    sorted: bool,
    filtered: bool,
}

impl Detector for UnknownField {
    fn name(&self) -> &'static str {
        "unknown_field"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let mut asked: BTreeMap<(&str, String), Asked> = BTreeMap::new();
        for row in ctx.table.rows() {
            if !matches!(row.category, Category::Read | Category::Write) || row.id == 0 {
                continue;
            }
            if ctx.schemas.get(&row.namespace).is_none() {
                continue;
            }
            let (filtered, sorted) = asked_fields(&row.shape);
            let fields = filtered.iter().map(|f| (f, false)).chain(sorted.iter().map(|f| (f, true)));
            for (field, by_sort) in fields {
                if !unknown(ctx, row, field, &filtered) {
                    continue;
                }
                let a = asked.entry((row.namespace.as_str(), field.clone())).or_default();
                a.executions += row.count;
                a.sorted |= by_sort;
                a.filtered |= !by_sort;
                if a.shapes.len() < MAX_SHAPES && !a.shapes.contains(&row.id) {
                    a.shapes.push(row.id);
                }
            }
        }
        asked
            .into_iter()
            .filter(|(_, a)| a.executions >= ctx.thresholds.index_min_count)
            .filter_map(|((ns, field), a)| {
                let coll = ctx.schemas.get(ns)?;
                let top = field.split('.').next().unwrap_or(&field);
                let close_fields = close(top, coll.top_level());
                let seen: Vec<&str> = coll.top_level().take(20).collect();
                let how = match (a.filtered, a.sorted) {
                    (true, true) => "filters and sorts on",
                    (false, true) => "sorts on",
                    _ => "filters on",
                };
                let mut recommendation = format!(
                    "{n} execution(s) of {s} shape(s) {how} `{field}`, which none of the {d} documents of {ns} seen carries{matched}: the query {effect}, and no index would help it.",
                    n = a.executions,
                    s = a.shapes.len(),
                    d = coll.documents,
                    matched = if a.filtered { " (and no execution returned a document)" } else { "" },
                    effect = if a.filtered { "matches nothing" } else { "sorts by nothing (the order is the server's)" },
                );
                match close_fields.first() {
                    Some(c) => recommendation.push_str(&format!(" Did you mean `{c}`?")),
                    None => recommendation.push_str(" Check the field's name against the model (a rename the code missed?)."),
                }
                let coll_name = collection(ns);
                let fix = close_fields.first().map(|c| {
                    if a.sorted {
                        format!("// sort on the field the documents hold:\ndb.{coll_name}.find(/* ... */).sort({{ {c}: 1 }})")
                    } else {
                        format!("// filter on the field the documents hold:\ndb.{coll_name}.find({{ {c}: /* value */ }})")
                    }
                });
                Some(
                    Draft {
                        kind: "unknown_field",
                        severity: Severity::Low,
                        namespace: ns,
                        shapes: &a.shapes,
                        evidence: json!({
                            "count": a.executions,
                            "documents_seen": coll.documents,
                            "fields_seen": seen,
                            "sorted": a.sorted,
                            "filtered": a.filtered,
                            "thresholds": {
                                "unknown_field_min_documents": ctx.thresholds.unknown_field_min_documents,
                                "index_min_count": ctx.thresholds.index_min_count,
                            },
                        }),
                        recommendation,
                        fix,
                        extra: vec![("field", json!(field)), ("close_fields", json!(close_fields))],
                    }
                    .finding(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Script;
    use bson::doc;

    #[test]
    fn fields_asked_by_positive_predicates_and_sorts() {
        let shape = json!({"filter": {"$and": [{"a": {"$eq": "?number"}}, {"b": {"$exists": "?bool"}},
            {"c": {"$eq": "?null"}}, {"d": {"$gt": "?number"}}], "$or": [{"e": {"$eq": "?number"}}]},
            "sort": {"f": 1, "$natural": 1}});
        assert_eq!(asked_fields(&shape), (vec!["a".to_owned(), "d".to_owned()], vec!["f".to_owned()]));
        assert_eq!(close("id", ["_id", "name", "idx", "user_id"].into_iter()), ["_id", "idx"]);
        assert_eq!(edit_distance("createdAt", "created_at"), 2);
    }

    fn run(sort_field: &str, filter: bson::Document, returned: bool) -> Vec<Finding> {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "tests", "PyMongo 4.20.1");
        for i in 0..30 {
            s.exchange(
                c,
                doc! {"insert": "doc", "documents": [{"_id": i, "value": i}], "$db": "t"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        for _ in 0..6 {
            let docs = if returned { vec![doc! {"_id": 1, "value": 1}] } else { vec![] };
            let mut find = doc! {"find": "doc", "filter": filter.clone(), "$db": "t"};
            if !sort_field.is_empty() {
                let mut sort = bson::Document::new();
                sort.insert(sort_field, 1);
                find.insert("sort", sort);
            }
            s.exchange(c, find, crate::script::batch("t.doc", docs, 0, true));
        }
        s.run().findings()
    }

    #[test]
    fn a_sort_on_id_where_documents_store_underscore_id_is_unknown_not_a_missing_index() {
        let f = run("id", doc! {}, true);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].kind.as_str(), f[0].severity.as_str()), ("unknown_field", "low"));
        assert_eq!(f[0].extra["field"], "id");
        assert_eq!(f[0].extra["close_fields"], json!(["_id"]));
    }

    #[test]
    fn a_filter_that_matched_documents_proves_its_field_and_absent_fields_asked_absent_are_fine() {
        // `valeu` returned a document: the field exists, sampling or not.
        let kinds: Vec<String> = run("", doc! {"valeu": 3}, true).into_iter().map(|f| f.kind).collect();
        assert!(!kinds.contains(&"unknown_field".to_owned()), "{kinds:?}");
        let kinds: Vec<String> =
            run("", doc! {"deletedAt": {"$exists": false}}, true).into_iter().map(|f| f.kind).collect();
        assert!(kinds.is_empty(), "{kinds:?}");
        let f = run("", doc! {"valeu": 3}, false);
        assert_eq!(f.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(), ["unknown_field"], "{f:#?}");
        assert_eq!(f[0].extra["close_fields"], json!(["value"]));
    }
}
