//! `missing_index`: the query shapes that ran with no index to serve them, each
//! given one key by the ESR rule, merged so that one index serving several shapes
//! is recommended once, with the evidence and the `createIndex` to paste.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use crate::detectors::indexes::catalog::{Explained, IndexSpec, KeyPart};
use crate::detectors::indexes::esr::{Need, Observed};
use crate::detectors::indexes::fit::{self, Quality};
use crate::detectors::indexes::unneeded::{droppable, prefix_of};
use crate::detectors::{collection, ms, Thresholds};
use crate::finding::{Draft, Finding, Severity};
use crate::view::ShapeId;

/// A need no index serves: how well the best does, which, and the key it asks for.
type Unserved<'o> = (&'o Observed<'o>, fit::Fit, Option<&'o IndexSpec>, Vec<(String, i32)>);

/// A recommended index and the needs it serves.
struct Recommendation<'o> {
    spec: IndexSpec,
    /// The hidden index to unhide instead of creating one.
    unhide: Option<String>,
    served: Vec<(&'o Observed<'o>, fit::Fit, Option<&'o IndexSpec>)>,
}

/// What a missing-index finding says besides the shapes: how much is known.
pub(crate) struct Facts<'a> {
    /// Whether the collection's indexes are known (else only `_id` is assumed).
    pub(crate) known: bool,
    /// Where the knowledge came from, in words.
    pub(crate) knowledge: &'a str,
    /// Reads and writes of every collection, for shares.
    pub(crate) total_ops: u64,
    /// What `--explain` said about a shape.
    pub(crate) explained: &'a dyn Fn(ShapeId) -> Option<Explained>,
}

pub(crate) fn missing<'o>(
    ns: &str,
    observed: &'o [Observed<'o>],
    indexes: &'o [IndexSpec],
    multikey: &dyn Fn(&str) -> bool,
    facts: &Facts<'_>,
    t: &Thresholds,
) -> Vec<Finding> {
    let (known, knowledge, total_ops) = (facts.known, facts.knowledge, facts.total_ops);
    // Equality fields ordered by how often they are bound on this collection, so that
    // keys share prefixes.
    let mut weight: BTreeMap<&str, i64> = BTreeMap::new();
    for o in observed {
        for f in &o.need.equality {
            *weight.entry(f.as_str()).or_default() += o.count as i64;
        }
    }
    let eq_order = |f: &str| weight.get(f).copied().unwrap_or(0);
    let mut unserved: Vec<Unserved<'_>> = observed
        .iter()
        .filter_map(|o| {
            let (fit, ix) = fit::best(&o.need, indexes, multikey);
            // Served but for arrays in a sort field: no new index would do better.
            let served_but_arrays = fit::best(&o.need, indexes, &|_| false).0.quality == Quality::Served;
            (fit.quality < Quality::Served && !served_but_arrays).then(|| (o, fit, ix, o.need.key(&eq_order)))
        })
        .collect();
    // Longest keys first (they may serve the shorter ones), then the costliest.
    unserved.sort_by(|a, b| b.3.len().cmp(&a.3.len()).then(b.0.time_us().total_cmp(&a.0.time_us())));
    let mut recs: Vec<Recommendation<'_>> = Vec::new();
    // Recommendations by the first field of their key: one can serve a need only if
    // it starts with a field the need names, so each need looks at a few, not all
    // (thousands of shapes on one collection stay linear).
    let mut by_first: FxHashMap<String, Vec<usize>> = FxHashMap::default();
    // Hidden indexes as they would be unhidden, to suggest unhiding rather than creating.
    let unhidden: Vec<IndexSpec> =
        indexes.iter().filter(|ix| ix.hidden).map(|ix| IndexSpec { hidden: false, ..ix.clone() }).collect();
    let no_arrays = |_: &str| false;
    for (o, fit, ix, key) in unserved {
        let serving = o
            .need
            .fields()
            .filter_map(|f| by_first.get(f))
            .flatten()
            .copied()
            .find(|&i| fit::fit_of(&o.need, &recs[i].spec, &no_arrays).quality == Quality::Served);
        match serving {
            Some(i) => recs[i].served.push((o, fit, ix)),
            None => {
                let hidden =
                    unhidden.iter().find(|h| fit::fit_of(&o.need, h, multikey).quality == Quality::Served);
                let unhide = hidden.map(|h| h.name.clone());
                let spec = hidden.cloned().unwrap_or_else(|| IndexSpec {
                    name: String::new(),
                    key: key.iter().map(|(f, d)| (f.clone(), KeyPart::Ordered(*d))).collect(),
                    unique: false,
                    collation: o.need.collation.clone(),
                    ..IndexSpec::id_index()
                });
                by_first.entry(spec.key[0].0.clone()).or_default().push(recs.len());
                recs.push(Recommendation { spec, unhide, served: vec![(o, fit, ix)] });
            }
        }
    }
    let coll = collection(ns);
    recs.into_iter()
        // An index with this very key exists but cannot serve (its options, a collation):
        // creating it again would fail; the finding would mislead.
        .filter(|r| r.unhide.is_some() || !indexes.iter().any(|ix| ix.key == r.spec.key))
        .filter_map(|r| {
            let count: u64 = r.served.iter().map(|(o, ..)| o.count).sum();
            if count < t.index_min_count {
                return None;
            }
            let time_us: f64 = r.served.iter().map(|(o, ..)| o.time_us()).sum();
            let worst = r.served.iter().map(|(_, f, _)| f.quality).min().unwrap_or(Quality::Unusable);
            let share = count as f64 / total_ops.max(1) as f64;
            let explains: Vec<(ShapeId, Explained)> =
                r.served.iter().filter_map(|(o, ..)| Some((o.id, (facts.explained)(o.id)?))).collect();
            // count and distinct return (almost) nothing by design: only finds and
            // aggregations are judged by what they examine beyond what they return.
            let returns_documents =
                |id: &ShapeId| r.served.iter().any(|(o, ..)| o.id == *id && matches!(o.command, "find" | "aggregate"));
            let wasteful = explains.iter().any(|(id, e)| {
                returns_documents(id) && e.docs_examined.max(e.keys_examined).saturating_sub(e.returned) > t.index_high_examined
            });
            let severity = match worst {
                _ if !known => Severity::Low,
                Quality::SortInMemory if !wasteful => Severity::Low,
                _ if share >= t.index_high_share || wasteful => Severity::High,
                _ => Severity::Medium,
            };
            let key_js = r.spec.key_js();
            let key_json = r.spec.key_json();
            let mut ids: Vec<ShapeId> = Vec::new();
            let shapes: Vec<Value> = r
                .served
                .iter()
                .map(|(o, f, ix)| {
                    ids.push(o.id);
                    let mut shape = json!({
                        "shape_id": crate::shape::hex(o.id),
                        "command": o.command,
                        "count": o.count,
                        "p50_ms": o.p50_ms,
                        "today": f.quality.as_str(),
                        "best_index": ix.map(|i| i.name.clone()),
                        "why": f.why,
                    });
                    if let Some((_, e)) = explains.iter().find(|(id, _)| *id == o.id) {
                        shape["explain"] = json!({
                            "totalKeysExamined": e.keys_examined,
                            "totalDocsExamined": e.docs_examined,
                            "nReturned": e.returned,
                            "winning_plan": e.plan,
                        });
                    }
                    shape
                })
                .collect();
            ids.dedup();
            let first = &r.served[0].0.need;
            let existing: Vec<Value> = indexes.iter().map(IndexSpec::key_json).collect();
            let why_not: Vec<Value> = indexes
                .iter()
                .map(|ix| {
                    let f = fit::fit_of(first, ix, multikey);
                    let why = if f.why.is_empty() { String::new() } else { format!(": {}", f.why) };
                    json!(format!("{} {}: {}{why}", ix.name, ix.key_js(), f.quality.as_str()))
                })
                .collect();
            // Existing indexes the new one makes redundant (a prefix of it, droppable).
            let replaced: Vec<&IndexSpec> = indexes.iter().filter(|ix| prefix_of(ix, &r.spec) && droppable(ix)).collect();
            let served_text = describe(first);
            let plan = explains.first().map(|(_, e)| {
                format!(
                    "{}: {} documents and {} keys examined for {} returned",
                    e.plan, e.docs_examined, e.keys_examined, e.returned
                )
            });
            let evidence = || {
                let mut e = json!({
                    "count": count,
                    "today": worst.as_str(),
                    "shapes": shapes,
                    "total_ms": ms(time_us),
                    "share": (share * 1000.0).round() / 1000.0,
                    "existing_indexes": existing,
                    "why_existing_indexes_do_not_serve": why_not,
                    "index_knowledge": knowledge,
                });
                if let Some(p) = &plan {
                    e["explain"] = json!(p);
                }
                e
            };
            let mut recommendation = format!(
                "Create an index that serves {served_text}{}: {} {} ran {count} times ({:.1}% of the operations), {}.",
                if r.served.len() > 1 { format!(" and {} more shape(s)", r.served.len() - 1) } else { String::new() },
                r.served.len(),
                if r.served.len() == 1 { "shape" } else { "shapes" },
                100.0 * share,
                worst.as_str(),
            );
            if !known {
                recommendation.push_str(&format!(
                    " mongotap does not know {ns}'s indexes ({knowledge}); check with db.{coll}.getIndexes() first."
                ));
            }
            if !replaced.is_empty() {
                let names: Vec<&str> = replaced.iter().map(|i| i.name.as_str()).collect();
                recommendation.push_str(&format!(
                    " It makes {} redundant (a prefix of it): drop after the new index is built.",
                    names.join(", ")
                ));
            }
            if let Some(name) = &r.unhide {
                recommendation = format!(
                    "The hidden index {name} {key_js} would serve {served_text}: {} {} ran {count} times ({:.1}% of the operations), {}. Unhide it.",
                    r.served.len(),
                    if r.served.len() == 1 { "shape" } else { "shapes" },
                    100.0 * share,
                    worst.as_str(),
                );
                let fix = format!("db.{coll}.unhideIndex(\"{name}\")");
                return Some(draft(ns, severity, &ids, evidence(), recommendation, fix, key_json, &r.spec.key[0].0));
            }
            let mut fix = format!("db.{coll}.createIndex({key_js}");
            if let Some((locale, strength)) = r.spec.collation.as_deref().and_then(|c| c.split_once('/')) {
                fix.push_str(&format!(", {{ collation: {{ locale: \"{locale}\", strength: {strength} }} }}"));
            }
            fix.push(')');
            for ix in &replaced {
                fix.push_str(&format!(
                    "\n// then, once it is built, {} is a prefix of it:\ndb.{coll}.dropIndex(\"{}\")",
                    ix.key_js(),
                    ix.name
                ));
            }
            Some(draft(ns, severity, &ids, evidence(), recommendation, fix, key_json, &r.spec.key[0].0))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn draft(
    ns: &str,
    severity: Severity,
    ids: &[ShapeId],
    evidence: Value,
    recommendation: String,
    fix: String,
    key: Value,
    first_field: &str,
) -> Finding {
    Draft {
        kind: "missing_index",
        severity,
        namespace: ns,
        shapes: ids,
        evidence,
        recommendation,
        fix: Some(fix),
        extra: vec![("index", json!({"key": key})), ("field", json!(first_field))],
    }
    .finding()
}

/// "equality on a, b, then the sort {c: -1}, then the range on d".
fn describe(n: &Need) -> String {
    let mut parts = Vec::new();
    if !n.equality.is_empty() {
        parts.push(format!("equality on {}", n.equality.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    if !n.sort.is_empty() {
        parts.push(format!("the sort {}", fit::sort_text(n)));
    }
    if !n.range.is_empty() {
        parts.push(format!("the range on {}", n.range.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    parts.join(", then ")
}
