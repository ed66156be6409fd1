//! Fan-out updates (`fan_out_update`): one multi-document update that sets a field or
//! two on many documents, again and again: a value copied into many documents (a
//! display name in every comment) kept in step by rewriting them all. The seed: "a
//! single field change requires updating many documents across a collection" means
//! a field that changes often was denormalised; embed less (an extended reference
//! with only what the page shows) or accept controlled staleness and propagate
//! changes in the background.
//!
//! From the wire: `updateMany` statements (`multi: true`) whose change is a `$set`
//! of at most three fields, and the documents their replies say they changed.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::{collection, Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::statements::Change;
use crate::view::{OpView, ShapeId};

/// `$set` fields of a fan-out, at most.
const MAX_FIELDS: usize = 3;

#[derive(Default)]
struct Stat {
    namespace: String,
    fields: Vec<String>,
    /// The field the filter picks the documents by (`authorId`), when it is one equality.
    key: Option<String>,
    runs: u64,
    docs: u64,
    max_docs: u64,
    first_at: Micros,
    last_at: Micros,
    latency_us: u64,
    apps: BTreeSet<String>,
}

/// The fan-out detector.
pub struct FanOut {
    max_shapes: usize,
    stats: FxHashMap<ShapeId, Stat>,
    refused: u64,
}

impl FanOut {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> FanOut {
        FanOut { max_shapes: t.max_patterns as usize, stats: FxHashMap::default(), refused: 0 }
    }
}

impl Detector for FanOut {
    fn name(&self) -> &'static str {
        "fan_out_update"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if v.category != Category::Write || op.failed() {
            return;
        }
        let Some(outcome) = &v.outcome else { return };
        let updates = v.updates();
        // Only a single-statement update says how many documents that statement changed.
        let [u] = updates else { return };
        let (Change::Operators(ops), true) = (u.change, u.multi) else { return };
        let mut fields = Vec::new();
        for e in element::elements(ops) {
            match (e.key, e.as_document()) {
                (b"$set", Some(set)) => {
                    fields.extend(element::elements(set).map(|f| String::from_utf8_lossy(f.key).into_owned()))
                }
                (b"$currentDate", _) => {}
                _ => return,
            }
        }
        if fields.is_empty()
            || fields.len() > MAX_FIELDS
            || !fields.iter().all(|f| crate::names::plausible(f.as_bytes()))
        {
            return;
        }
        let Some(docs) = outcome.modified.or(outcome.matched) else { return };
        let Some(Some(shape)) = v.shape_ids.first().copied() else { return };
        let ns = u.namespace.unwrap_or(&op.namespace);
        if !self.stats.contains_key(&shape) && self.stats.len() >= self.max_shapes {
            self.refused += 1;
            return;
        }
        let key = u.filter.and_then(|f| {
            let mut keys = Vec::new();
            crate::values::equalities(f, &mut |k, _| keys.push(String::from_utf8_lossy(k).into_owned()));
            (keys.len() == 1 && crate::names::plausible(keys[0].as_bytes())).then(|| keys.remove(0))
        });
        let s = self.stats.entry(shape).or_insert_with(|| Stat {
            namespace: ns.to_owned(),
            fields,
            key,
            first_at: op.started_at,
            ..Stat::default()
        });
        s.runs += 1;
        s.docs += docs;
        s.max_docs = s.max_docs.max(docs);
        s.last_at = op.started_at;
        s.latency_us += op.latency_us.unwrap_or(0);
        let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut s.apps, app);
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("shapes", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut all: Vec<(&ShapeId, &Stat)> = self
            .stats
            .iter()
            .filter(|(_, s)| s.runs >= t.fan_out_min_runs && s.docs / s.runs.max(1) >= t.fan_out_min_docs)
            .collect();
        all.sort_by_key(|(id, _)| **id);
        all.into_iter()
            .map(|(id, s)| {
                let mean = s.docs / s.runs.max(1);
                let severity = if mean >= t.fan_out_high_docs { Severity::High } else { Severity::Medium };
                let span = (s.last_at.saturating_sub(s.first_at) as f64 / 1e6).max(1.0);
                let coll = collection(&s.namespace);
                let fields = s.fields.join(", ");
                let shape = ctx.row(*id).map(|r| r.shape.clone());
                let recommendation = format!(
                    "Every change of {fields} is copied into many {coll} documents by one updateMany: {runs} runs, \
                     {mean} documents each on average (at most {max}). A field that changes was denormalised into \
                     every document that shows it. Keep the copy only if the page needs it without a lookup, and \
                     then accept some staleness and propagate changes in the background, in batches (extended \
                     reference); otherwise stop copying it and read it from its owner with one $in per page.",
                    runs = s.runs,
                    max = s.max_docs,
                );
                let by = s.key.clone().unwrap_or_else(|| "ownerId".to_owned());
                let fix = format!(
                    "// either stop copying {fields}: read it from its owner, one $in per page of {coll}\n\
                     const owners = db.<owners>.find({{ _id: {{ $in: page.map(d => d.{by}) }} }}, {{ {first}: 1 }}).toArray();\n\
                     // or keep the copy (an extended reference), accept that it lags, and propagate a change\n\
                     // later, in batches, off the request path:\n\
                     db.{coll}.updateMany({{ {by}: ownerId }}, {{ $set: {{ {first}: newValue }} }})",
                    first = s.fields.first().map_or("field", String::as_str),
                );
                Draft {
                    kind: "fan_out_update",
                    severity,
                    namespace: &s.namespace,
                    shapes: &[*id],
                    evidence: json!({
                        "count": s.runs,
                        "documents_changed": s.docs,
                        "documents_per_run": {"mean": mean, "max": s.max_docs},
                        "runs_per_minute": (s.runs as f64 / span * 60.0 * 10.0).round() / 10.0,
                        "fields": s.fields,
                        "matched_by": s.key,
                        "shape": shape,
                        "time_ms": crate::detectors::ms(s.latency_us as f64),
                        "apps": s.apps,
                        "thresholds": {
                            "fan_out_min_runs": t.fan_out_min_runs,
                            "fan_out_min_docs": t.fan_out_min_docs,
                            "fan_out_high_docs": t.fan_out_high_docs,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![("field", json!(s.fields.first()))],
                }
                .finding()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use crate::script::Script;

    fn rename(s: &mut Script, c: u64, user: i32, changed: i32) {
        s.exchange(
            c,
            doc! {"update": "comments", "updates": [{"q": {"authorId": user}, "u": {"$set": {"authorName": "new"}}, "multi": true}], "$db": "b"},
            doc! {"n": changed, "nModified": changed, "ok": 1.0},
        );
    }

    #[test]
    fn a_copied_name_rewritten_everywhere_again_and_again_is_a_fan_out() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "blog", "nodejs 6.20.0");
        for u in 0..6 {
            rename(&mut s, c, u, 150);
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "fan_out_update").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].namespace.as_str(), &f[0].extra["field"]),
            ("b.comments", &serde_json::json!("authorName"))
        );
        assert_eq!(f[0].evidence["documents_per_run"]["mean"], 150);
    }

    #[test]
    fn a_migration_run_once_and_small_updates_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "blog", "nodejs 6.20.0");
        s.exchange(
            c,
            doc! {"update": "posts", "updates": [{"q": {}, "u": {"$set": {"schemaVersion": 2}}, "multi": true}], "$db": "b"},
            doc! {"n": 500, "nModified": 500, "ok": 1.0},
        );
        for u in 0..10 {
            rename(&mut s, c, u, 2);
        }
        assert!(s.run().findings().iter().all(|f| f.kind != "fan_out_update"));
    }
}
