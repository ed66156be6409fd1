//! `$lookup` chains (`lookup_chain`): an aggregation that joins other collections,
//! run often enough to be one of the application's access patterns. Data that is
//! always read together but stored apart is put back together on every read: the
//! seeds call it over-referencing, and recommend embedding the bounded parts or an
//! extended reference to the fields the page reads.
//!
//! Everything it needs is already in the table (the shape keeps `from`,
//! `localField`, `foreignField` and `as`; the row keeps count, latencies and apps),
//! so it looks at the table when findings are asked for and costs nothing per
//! operation. The weighting: an aggregation that runs fewer than `lookup_min_count`
//! times, or is less than `lookup_min_share` of its application's reads, is a report
//! or an admin task, not a page, and is not a finding. Past that, severity grows with
//! the number of collections joined and with the aggregation's share of the
//! application's reads and of its read time.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::detectors::{collection, Context, Detector};
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::shape::command::Category;
use crate::table::Row;

/// One join of a pipeline.
#[derive(Debug, Clone, PartialEq)]
struct Join {
    /// The stage (`$lookup`, `$graphLookup`, `$unionWith`).
    stage: &'static str,
    /// The joined namespace.
    namespace: String,
    local: Option<String>,
    foreign: Option<String>,
    /// The field the joined documents land in.
    as_: Option<String>,
    /// Pipeline form (`let` + `pipeline`).
    pipeline_form: bool,
    /// The top-level stage it is in, and whether it is that stage itself (not nested).
    at: usize,
    top: bool,
}

/// What a page reads of a join's output.
#[derive(Debug, Clone, PartialEq)]
enum Read {
    /// These fields of the joined documents (from an inclusion `$project` after it).
    Fields(Vec<String>),
    /// The joined documents as they come.
    Whole,
    /// Nothing: a later `$project` drops the field and no later stage mentions it.
    Nothing,
}

/// What the stages after `j` read of its `as` field.
fn read_after(pipeline: &Value, j: &Join) -> Read {
    let (Some(as_), true, Some(stages)) = (&j.as_, j.top, pipeline.as_array()) else { return Read::Whole };
    let after = stages.get(j.at + 1..).unwrap_or_default();
    let mut projects = after.iter().filter_map(|st| st.get("$project").and_then(Value::as_object)).peekable();
    let inclusion = projects.peek().is_some();
    let mut fields = Vec::new();
    let mut whole = false;
    for p in projects {
        for (k, v) in p {
            if *v == Value::Bool(false) {
                continue;
            }
            if k == as_ {
                whole = true;
            } else if let Some(f) = k.strip_prefix(as_.as_str()).and_then(|f| f.strip_prefix('.')) {
                fields.push(f.to_owned());
            }
        }
    }
    let text = serde_json::to_string(after).unwrap_or_default();
    let mentioned = text.contains(&format!("\"${as_}\"")) || text.contains(&format!("\"${as_}."));
    match (whole, fields.is_empty(), inclusion, mentioned) {
        (false, false, _, _) => Read::Fields(fields),
        (false, true, true, false) => Read::Nothing,
        _ => Read::Whole,
    }
}

/// The joins of a pipeline shape, in pipeline order, nested ones after their parent.
fn joins(pipeline: &Value, db: &str, out: &mut Vec<Join>) {
    joins_in(pipeline, db, None, out)
}

fn joins_in(pipeline: &Value, db: &str, within: Option<usize>, out: &mut Vec<Join>) {
    for (i, stage) in pipeline.as_array().into_iter().flatten().enumerate() {
        let (at, top) = (within.unwrap_or(i), within.is_none());
        let Some((name, body)) = stage.as_object().and_then(|o| o.iter().next()) else { continue };
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
        let ns = |c: String| format!("{db}.{c}");
        match name.as_str() {
            "$lookup" => {
                let from = body.get("from").and_then(|f| match f {
                    Value::String(s) => Some(ns(s.clone())),
                    Value::Object(o) => Some(format!(
                        "{}.{}",
                        o.get("db").and_then(Value::as_str).unwrap_or(db),
                        o.get("coll").and_then(Value::as_str)?
                    )),
                    _ => None,
                });
                if let Some(namespace) = from {
                    out.push(Join {
                        stage: "$lookup",
                        namespace,
                        local: text("localField"),
                        foreign: text("foreignField"),
                        as_: text("as"),
                        pipeline_form: body.get("pipeline").is_some(),
                        at,
                        top,
                    });
                }
                if let Some(p) = body.get("pipeline") {
                    joins_in(p, db, Some(at), out);
                }
            }
            "$graphLookup" => {
                if let Some(from) = text("from") {
                    out.push(Join {
                        stage: "$graphLookup",
                        namespace: ns(from),
                        local: None,
                        foreign: text("connectToField"),
                        as_: text("as"),
                        pipeline_form: false,
                        at,
                        top,
                    });
                }
            }
            "$unionWith" => {
                let coll = match body {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => o.get("coll").and_then(Value::as_str).map(str::to_owned),
                    _ => None,
                };
                if let Some(c) = coll {
                    out.push(Join {
                        stage: "$unionWith",
                        namespace: ns(c),
                        local: None,
                        foreign: None,
                        as_: None,
                        pipeline_form: false,
                        at,
                        top,
                    });
                }
                if let Some(p) = body.get("pipeline") {
                    joins_in(p, db, Some(at), out);
                }
            }
            "$facet" => {
                for p in body.as_object().into_iter().flat_map(|o| o.values()) {
                    joins_in(p, db, Some(at), out);
                }
            }
            _ => {}
        }
    }
}

/// The `$lookup` detector (stateless: it reads the table).
pub struct LookupChain;

/// What each application reads: operations and time, from the table.
fn app_reads(rows: &[&Row]) -> BTreeMap<String, (u64, f64)> {
    let mut out: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.category == Category::Read) {
        let mean = r.latency_us.histogram().mean();
        for (app, n) in &r.apps {
            let e = out.entry(app.clone()).or_default();
            e.0 += n;
            e.1 += mean * *n as f64;
        }
    }
    out
}

impl Detector for LookupChain {
    fn name(&self) -> &'static str {
        "lookup_chain"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let rows = ctx.table.rows();
        let apps = app_reads(&rows);
        let mut out = Vec::new();
        // Reads only: an aggregation that writes ($out, $merge) is a batch job, not a page.
        for r in rows.iter().filter(|r| r.command == "aggregate" && r.category == Category::Read && r.id != 0)
        {
            let Some(pipeline) = r.shape.get("pipeline") else { continue };
            let db = r.namespace.split_once('.').map_or(r.namespace.as_str(), |(d, _)| d);
            let mut js = Vec::new();
            joins(pipeline, db, &mut js);
            if js.is_empty() {
                continue;
            }
            let (app_ops, app_time) = r
                .apps
                .keys()
                .filter_map(|a| apps.get(a))
                .fold((0u64, 0f64), |(o, t), (ao, at)| (o + ao, t + at));
            let mean_us = r.latency_us.histogram().mean();
            let share = r.count as f64 / app_ops.max(r.count).max(1) as f64;
            let time_share = if app_time > 0.0 { mean_us * r.count as f64 / app_time } else { 0.0 };
            if r.count < t.lookup_min_count || share < t.lookup_min_share {
                continue;
            }
            let mut joined: Vec<String> = Vec::new();
            for j in &js {
                if !joined.contains(&j.namespace) {
                    joined.push(j.namespace.clone());
                }
            }
            let chain = joined.len() as u64 >= t.lookup_chain_min_joins;
            let heavy = share >= t.lookup_high_share || time_share >= t.lookup_high_time_share;
            let severity = match (chain, heavy) {
                (true, true) => Severity::High,
                (true, false) | (false, true) => Severity::Medium,
                (false, false) => Severity::Low,
            };
            let reads: Vec<Read> = js.iter().map(|j| read_after(pipeline, j)).collect();
            let pulled: Vec<Value> = js
                .iter()
                .zip(&reads)
                .map(|(j, read)| {
                    let fields = match read {
                        Read::Fields(f) => json!(f),
                        Read::Whole => json!("all"),
                        Read::Nothing => json!([]),
                    };
                    json!({
                        "stage": j.stage, "from": j.namespace, "local_field": j.local, "foreign_field": j.foreign,
                        "as": j.as_, "pipeline_form": j.pipeline_form, "fields_read": fields,
                    })
                })
                .collect();
            let coll = collection(&r.namespace);
            let names: Vec<&str> = joined.iter().map(|n| collection(n)).collect();
            let what = js
                .iter()
                .zip(&reads)
                .filter_map(|(j, read)| {
                    let as_ = j.as_.as_deref()?;
                    let from = collection(&j.namespace);
                    Some(match read {
                        Read::Fields(f) => format!("{as_}.{{{}}}", f.join(", ")),
                        Read::Whole => format!("{as_}: the whole {from} document"),
                        Read::Nothing => format!(
                            "nothing of {from}: no later stage keeps or mentions {as_}, so check whether that join is needed at all"
                        ),
                    })
                })
                .collect::<Vec<_>>()
                .join(", ");
            let p50 = r.latency_ms(0.5);
            let p99 = r.latency_ms(0.99);
            let recommendation = format!(
                "This aggregation on {ns} joins {n} collection{s} ({list}) on every run: {count} runs, {share:.1}% \
                 of its application's reads and {ts:.1}% of their time (p50 {p50} ms). Data read together on \
                 every page is stored apart and put back together each time (over-referencing). Embed what is \
                 bounded and owned, or keep an extended reference in {coll} to the fields the page reads{what}, \
                 and read one collection.",
                ns = r.namespace,
                n = joined.len(),
                s = if joined.len() == 1 { "" } else { "s" },
                list = names.join(", "),
                count = r.count,
                share = share * 100.0,
                ts = time_share * 100.0,
                p50 = p50.map_or("-".to_string(), |v| format!("{v:.2}")),
                what = if what.is_empty() { String::new() } else { format!(" ({what})") },
            );
            let evidence = json!({
                "count": r.count,
                "share_of_app_reads": (share * 1000.0).round() / 1000.0,
                "share_of_app_read_time": (time_share * 1000.0).round() / 1000.0,
                "p50_ms": p50,
                "p99_ms": p99,
                "docs_returned": {"total": r.docs_returned, "mean": (r.docs_returned as f64 / r.count.max(1) as f64 * 10.0).round() / 10.0},
                "joins": pulled,
                "apps": r.apps.keys().collect::<Vec<_>>(),
                "thresholds": {
                    "lookup_min_count": t.lookup_min_count,
                    "lookup_min_share": t.lookup_min_share,
                    "lookup_chain_min_joins": t.lookup_chain_min_joins,
                    "lookup_high_share": t.lookup_high_share,
                    "lookup_high_time_share": t.lookup_high_time_share,
                },
            });
            out.push(
                Draft {
                    kind: "lookup_chain",
                    severity,
                    namespace: &r.namespace,
                    shapes: &[r.id],
                    evidence,
                    recommendation,
                    fix: Some(migration(coll, &js, &reads)),
                    extra: vec![("lookups", json!(joined))],
                }
                .finding(),
            );
        }
        out
    }
}

/// A one-off migration that stores the joined fields in the collection (extended
/// reference), for the joins in localField/foreignField form.
fn migration(coll: &str, js: &[Join], reads: &[Read]) -> String {
    let mut stages = Vec::new();
    let mut notes = Vec::new();
    for (j, read) in js.iter().zip(reads) {
        let (Some(local), Some(foreign), Some(as_), false, "$lookup", true) =
            (&j.local, &j.foreign, &j.as_, j.pipeline_form, j.stage, j.top)
        else {
            notes.push(format!(
                "// {} from {}: copy the fields the page reads from it likewise",
                j.stage, j.namespace
            ));
            continue;
        };
        let from = collection(&j.namespace);
        if *read == Read::Nothing {
            notes.push(format!("// {from}: the page reads nothing of it; drop that $lookup instead"));
            continue;
        }
        stages.push(format!(
            "  {{ $lookup: {{ from: \"{from}\", localField: \"{local}\", foreignField: \"{foreign}\", as: \"{as_}\" }} }},"
        ));
        if let Read::Fields(fields) = read {
            // Keep only what the page reads, for every match.
            let mut keys = vec!["_id"];
            keys.extend(fields.iter().map(String::as_str).filter(|f| *f != "_id"));
            let kept: Vec<String> = keys.iter().map(|k| format!("\"{k}\": \"$$this.{k}\"")).collect();
            stages.push(format!(
                "  {{ $set: {{ {as_}: {{ $map: {{ input: \"${as_}\", in: {{ {} }} }} }} }} }},",
                kept.join(", ")
            ));
        }
        if foreign != "_id" {
            notes.push(format!(
                "// {as_}: every matching {from} document is embedded; if there can be many, keep a bounded subset"
            ));
        }
    }
    let mut s = format!(
        "// Extended reference: store with each {coll} document what the page reads from the joined\n\
         // collections, once; keep it in step where they change; then drop the $lookup from the page.\n\
         // Each joined field holds the matches as an array, as $lookup returns them.\n"
    );
    for n in &notes {
        s.push_str(n);
        s.push('\n');
    }
    if stages.is_empty() {
        return s;
    }
    s.push_str(&format!("db.{coll}.aggregate([\n"));
    for st in stages {
        s.push_str(&st);
        s.push('\n');
    }
    s.push_str(&format!(
        "  {{ $merge: {{ into: \"{coll}\", whenMatched: \"merge\", whenNotMatched: \"discard\" }} }}\n])"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_are_found_in_every_form_and_order() {
        let p = json!([
            {"$match": {"status": {"$eq": "?string"}}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
            {"$lookup": {"from": "products", "let": {"p": "$productId"}, "pipeline": [
                {"$lookup": {"from": "suppliers", "localField": "supplierId", "foreignField": "_id", "as": "s"}}
            ], "as": "product"}},
            {"$graphLookup": {"from": "employees", "startWith": "$boss", "connectFromField": "boss", "connectToField": "_id", "as": "chain"}},
            {"$unionWith": {"coll": "archive", "pipeline": []}},
            {"$facet": {"a": [{"$unionWith": "old"}]}},
        ]);
        let mut js = Vec::new();
        joins(&p, "shop", &mut js);
        let ns: Vec<&str> = js.iter().map(|j| j.namespace.as_str()).collect();
        assert_eq!(
            ns,
            [
                "shop.customers",
                "shop.products",
                "shop.suppliers",
                "shop.employees",
                "shop.archive",
                "shop.old"
            ]
        );
        assert!(js[1].pipeline_form && !js[0].pipeline_form);
    }

    #[test]
    fn the_migration_embeds_what_the_page_reads() {
        let p = json!([
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
            {"$project": {"total": true, "customer.name": true}},
        ]);
        let mut js = Vec::new();
        joins(&p, "shop", &mut js);
        let reads: Vec<Read> = js.iter().map(|j| read_after(&p, j)).collect();
        let m = migration("orders", &js, &reads);
        assert!(m.contains("$lookup: { from: \"customers\", localField: \"customerId\", foreignField: \"_id\", as: \"customer\" }"), "{m}");
        assert!(m.contains("customer: { $map: { input: \"$customer\", in: { \"_id\": \"$$this._id\", \"name\": \"$$this.name\" } } }"), "{m}");
        assert!(m.contains("$merge: { into: \"orders\""), "{m}");
    }

    #[test]
    fn a_join_is_unread_only_when_nothing_after_it_keeps_or_mentions_it() {
        let reads = |p: Value| {
            let mut js = Vec::new();
            joins(&p, "shop", &mut js);
            js.iter().map(|j| read_after(&p, j)).collect::<Vec<_>>()
        };
        let lookup = json!({"$lookup": {"from": "shippers", "localField": "s", "foreignField": "_id", "as": "shipper"}});
        assert_eq!(reads(json!([lookup, {"$project": {"total": true}}])), [Read::Nothing]);
        assert_eq!(
            reads(json!([lookup, {"$project": {"total": true, "shipperName": "$shipper.name"}}])),
            [Read::Whole],
            "a computed field reads it"
        );
        assert_eq!(
            reads(json!([{"$project": {"total": true}}, lookup])),
            [Read::Whole],
            "a $project before it"
        );
        assert_eq!(reads(json!([lookup])), [Read::Whole]);
        assert_eq!(
            reads(json!([lookup, {"$project": {"shipper.name": true}}])),
            [Read::Fields(vec!["name".into()])]
        );
    }
}

#[cfg(test)]
mod script_tests {
    use bson::doc;

    use crate::script::Script;

    fn page_pipeline() -> Vec<bson::Document> {
        vec![
            doc! {"$match": {"status": "placed"}},
            doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
            doc! {"$lookup": {"from": "products", "localField": "productId", "foreignField": "_id", "as": "product"}},
            doc! {"$lookup": {"from": "shippers", "localField": "shipperId", "foreignField": "_id", "as": "shipper"}},
            doc! {"$project": {"total": 1, "customer.name": 1, "product.title": 1, "shipper.name": 1}},
        ]
    }

    #[test]
    fn a_frequent_three_lookup_page_is_a_chain_and_a_report_run_twice_is_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "nodejs 6.20.0");
        for i in 0..100 {
            s.find_one(c, "shop.orders", doc! {"_id": i}, Some(doc! {"_id": i}));
            if i % 2 == 0 {
                s.aggregate(c, "shop.orders", page_pipeline(), vec![doc! {"_id": i}]);
            }
        }
        let monthly = vec![
            doc! {"$match": {"year": 2026}},
            doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
            doc! {"$group": {"_id": "$c.country", "n": {"$sum": 1}}},
        ];
        for _ in 0..2 {
            s.aggregate(c, "shop.orders", monthly.clone(), vec![]);
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "lookup_chain").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.severity, "high");
        assert_eq!(
            f.extra["lookups"],
            serde_json::json!(["shop.customers", "shop.products", "shop.shippers"])
        );
        assert_eq!(f.evidence["count"], 50);
        assert_eq!(f.evidence["joins"][0]["fields_read"], serde_json::json!(["name"]));
        assert!(f.recommendation.contains("customer.{name}"), "{}", f.recommendation);
        assert!(f.fix.as_deref().unwrap().contains("$merge"), "{:?}", f.fix);
    }
}
