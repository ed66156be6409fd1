//! `computed_candidate`: the same aggregation (a `$group` with `$sum`, `$avg`,
//! `$count`...; a `$count` stage; the `count` and `distinct` commands) recomputed
//! on the read path far more often than its inputs are written. The seeds' computed
//! pattern: store totals and counters updated on write instead of aggregating on
//! every read; MongoDB's pattern catalogue puts it at a high read-to-write ratio.
//!
//! It keeps nothing per operation: the table has every shape with its runs,
//! latencies and apps, and every write shape of the inputs with its runs. A
//! shape that ran at least `computed_min_runs` times, at least
//! `computed_min_runs_per_write` times per write to the collections it reads (its
//! own and those it joins) in the same window, is a finding (write operations, not
//! documents: a bulk load changes the answer once). A `count` with no
//! filter (the driver's `estimatedDocumentCount`, read from metadata) and
//! pipelines that write (`$out`, `$merge`: they are the summary being built) are
//! left out.

use serde_json::{json, Value};

use crate::detectors::{collection, Context, Detector};
use crate::finding::{Draft, Finding, Severity};
use crate::namespace::is_system;
use crate::shape::command::Category;
use crate::table::Row;

/// Stages that compute a summary of the documents they read.
const SUMMARY_STAGES: &[&str] = &["$group", "$count", "$sortByCount", "$bucket", "$bucketAuto"];
/// `$group` accumulators that compute (not those that pick or collect documents).
const ACCUMULATORS: &[&str] =
    &["$sum", "$avg", "$count", "$min", "$max", "$stdDevPop", "$stdDevSamp", "$median", "$percentile"];

/// The detector: it keeps nothing; the table holds what it needs.
pub struct ComputedCandidate;

/// What one shape computes.
#[derive(Debug, PartialEq)]
struct Computation {
    /// "count", "distinct", or the summary stage.
    how: String,
    /// The computed fields (`$group` outputs with an accumulator).
    fields: Vec<String>,
    /// The `$group` key, when it is a field path (`customerId`).
    key: Option<String>,
    /// Collections read besides the shape's own (`$lookup`, `$unionWith`).
    joined: Vec<String>,
}

/// What `row` computes, if it is a summary.
fn computation(row: &Row) -> Option<Computation> {
    match row.command.as_str() {
        "count" => {
            let query = row.shape.get("query")?;
            let filtered = query.as_object().is_some_and(|q| !q.is_empty());
            filtered.then(|| Computation { how: "count".into(), fields: vec![], key: None, joined: vec![] })
        }
        "distinct" => Some(Computation { how: "distinct".into(), fields: vec![], key: None, joined: vec![] }),
        "aggregate" => {
            let stages = row.shape.get("pipeline")?.as_array()?;
            let mut found: Option<Computation> = None;
            let mut joined = Vec::new();
            for st in stages {
                let Some((name, body)) = st.as_object().and_then(|o| o.iter().next()) else { continue };
                match name.as_str() {
                    "$lookup" | "$graphLookup" => {
                        if let Some(from) = body.get("from").and_then(Value::as_str) {
                            joined.push(from.to_owned());
                        }
                    }
                    "$unionWith" => {
                        let coll = body.as_str().or_else(|| body.get("coll").and_then(Value::as_str));
                        joined.extend(coll.map(str::to_owned));
                    }
                    "$group" if found.is_none() => {
                        let group = body.as_object()?;
                        let fields: Vec<String> = group
                            .iter()
                            .filter(|(k, v)| {
                                *k != "_id"
                                    && v.as_object()
                                        .and_then(|a| a.keys().next())
                                        .is_some_and(|op| ACCUMULATORS.contains(&op.as_str()))
                            })
                            .map(|(k, _)| k.clone())
                            .collect();
                        if !fields.is_empty() {
                            let key = group
                                .get("_id")
                                .and_then(Value::as_str)
                                .and_then(|k| k.strip_prefix('$'))
                                .map(str::to_owned);
                            found = Some(Computation { how: "$group".into(), fields, key, joined: vec![] });
                        }
                    }
                    s if found.is_none() && SUMMARY_STAGES.contains(&s) && s != "$group" => {
                        found =
                            Some(Computation { how: s.into(), fields: vec![], key: None, joined: vec![] });
                    }
                    _ => {}
                }
            }
            found.map(|c| Computation { joined, ..c })
        }
        _ => None,
    }
}

/// Write operations on `namespace` in the window: each can change the result once
/// (an `insertMany` of a thousand documents is one change, not a thousand).
fn writes_to(ctx: &Context<'_>, namespace: &str) -> u64 {
    ctx.table
        .rows()
        .into_iter()
        .filter(|r| r.category == Category::Write && r.namespace == namespace)
        .map(|r| r.count)
        .sum()
}

impl Detector for ComputedCandidate {
    fn name(&self) -> &'static str {
        "computed_candidate"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        for row in ctx.table.rows() {
            if row.category != Category::Read || row.count < t.computed_min_runs || is_system(&row.namespace)
            {
                continue;
            }
            let Some(c) = computation(row) else { continue };
            let db = row.namespace.split_once('.').map_or("", |(d, _)| d);
            let mut inputs = vec![row.namespace.clone()];
            inputs.extend(c.joined.iter().map(|j| format!("{db}.{j}")));
            inputs.dedup();
            let writes: u64 = inputs.iter().map(|ns| writes_to(ctx, ns)).sum();
            let per_write = row.count as f64 / writes.max(1) as f64;
            if per_write < t.computed_min_runs_per_write {
                continue;
            }
            let h = row.latency_us.histogram();
            let time_ms = h.mean() * row.count as f64 / 1000.0;
            let coll = collection(&row.namespace);
            let what = match c.how.as_str() {
                "count" => "counts documents".to_owned(),
                "distinct" => "lists distinct values".to_owned(),
                "$group" => format!("computes {}", c.fields.join(", ")),
                s => format!("summarises documents with {s}"),
            };
            let per = c.key.as_ref().map_or(String::new(), |k| format!(" per {k}"));
            let recommendation = format!(
                "An aggregation on {ns} {what}{per} on every read: {runs} runs, {changes} ({time_ms:.1} ms of server time here). Store the result and update it on write (the computed pattern): a field kept with $inc by the writes, or a summary collection refreshed with $merge after writes or on a schedule; then read it with one targeted query.",
                ns = row.namespace,
                runs = row.count,
                changes = if writes == 0 {
                    format!("and no write to its input{s} ({inputs}) passed mongotap in the same window: if nothing writes them around it, the answer never changed", s = if inputs.len() > 1 { "s" } else { "" }, inputs = inputs.join(", "))
                } else {
                    format!("{writes} write(s) to its input{s} ({inputs}) in the same window, so {per_write:.0} runs per write recompute an answer that rarely changes", s = if inputs.len() > 1 { "s" } else { "" }, inputs = inputs.join(", "))
                },
            );
            let fix = match (c.how.as_str(), &c.key) {
                ("$group", Some(key)) => format!(
                    "// refresh a summary collection after writes (or on a schedule), keyed by {key}:\ndb.{coll}.aggregate([ /* the same $group, for every {key} (no $match on one) */ {{ $merge: {{ into: \"{coll}_summary\", whenMatched: \"replace\" }} }} ])\n// then read one {key}'s figures with one query:\ndb.{coll}_summary.findOne({{ _id: /* the {key} */ }})\n// or keep {fields} on the document of that {key}, with $inc in every write that changes them",
                    fields = c.fields.join(", "),
                ),
                ("count", _) => format!(
                    "// keep the count where it is read, updated by the writes that change it:\ndb.<parent>.updateOne({{ _id: /* the parent */ }}, {{ $inc: {{ {coll}Count: 1 }} }})  // beside each insert into {coll} (-1 beside a delete)\n// then read it with the parent instead of db.{coll}.countDocuments(/* the filter */)"
                ),
                _ => format!(
                    "// refresh a summary collection after writes (or on a schedule) and read it instead:\ndb.{coll}.aggregate([ /* the same pipeline */ {{ $merge: {{ into: \"{coll}_summary\", whenMatched: \"replace\" }} }} ])\ndb.{coll}_summary.find()"
                ),
            };
            // With no write seen, the inputs may be written around mongotap: low at most.
            let severity = if writes > 0 && per_write >= t.computed_high_runs_per_write {
                Severity::Medium
            } else {
                Severity::Low
            };
            let apps: Vec<&String> = row.apps.keys().collect();
            out.push(
                Draft {
                    kind: "computed_candidate",
                    severity,
                    namespace: &row.namespace,
                    shapes: &[row.id],
                    evidence: json!({
                        "count": row.count,
                        "computes": c.how,
                        "fields": c.fields,
                        "group_key": c.key,
                        "inputs": inputs,
                        "writes_to_inputs": writes,
                        "runs_per_write": (per_write * 10.0).round() / 10.0,
                        "time_ms": (time_ms * 10.0).round() / 10.0,
                        "docs_returned_per_run": (row.docs_returned as f64 / row.count.max(1) as f64 * 10.0).round() / 10.0,
                        "apps": apps,
                        "thresholds": {
                            "computed_min_runs": t.computed_min_runs,
                            "computed_min_runs_per_write": t.computed_min_runs_per_write,
                            "computed_high_runs_per_write": t.computed_high_runs_per_write,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: c.fields.first().map(|f| vec![("field", json!(f))]).unwrap_or_default(),
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use crate::script::Script;

    fn computed(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "computed_candidate").collect()
    }

    fn totals(customer: i32) -> Vec<bson::Document> {
        vec![
            doc! {"$match": {"customerId": customer}},
            doc! {"$group": {"_id": "$customerId", "spent": {"$sum": "$total"}, "orders": {"$sum": 1}}},
        ]
    }

    fn insert_order(s: &mut Script, c: u64, i: i32) {
        s.exchange(c, doc! {"insert": "orders", "documents": [{"_id": i, "customerId": i % 7, "total": 5}], "$db": "shop"}, doc! {"n": 1, "ok": 1.0});
    }

    #[test]
    fn totals_recomputed_on_every_page_view_are_a_computed_candidate() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..3 {
            insert_order(&mut s, c, i);
        }
        for i in 0..60 {
            s.aggregate(c, "shop.orders", totals(i % 7), vec![doc! {"_id": i % 7, "spent": 40, "orders": 8}]);
        }
        let f = computed(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(
            (f.evidence["count"].as_u64(), f.evidence["writes_to_inputs"].as_u64()),
            (Some(60), Some(3))
        );
        assert_eq!(f.evidence["group_key"], "customerId");
        assert_eq!(f.extra["field"], "spent");
        assert!(f.fix.as_deref().unwrap().contains("$merge"), "{:?}", f.fix);
    }

    #[test]
    fn a_report_over_busy_inputs_an_estimated_count_and_a_summary_build_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..30 {
            for j in 0..10 {
                insert_order(&mut s, c, i * 10 + j);
            }
            s.aggregate(c, "shop.orders", totals(i % 7), vec![doc! {"_id": i % 7, "spent": 40, "orders": 8}]);
            s.exchange(c, doc! {"count": "orders", "query": {}, "$db": "shop"}, doc! {"n": 10, "ok": 1.0});
            s.exchange(
                c,
                doc! {"aggregate": "orders", "pipeline": [{"$group": {"_id": "$customerId", "n": {"$sum": 1}}}, {"$merge": {"into": "totals"}}], "cursor": {}, "$db": "shop"},
                doc! {"cursor": {"id": 0_i64, "ns": "shop.orders", "firstBatch": []}, "ok": 1.0},
            );
        }
        assert!(computed(s).is_empty());
    }
}
