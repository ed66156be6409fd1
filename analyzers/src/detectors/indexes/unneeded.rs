//! `redundant_index` and `unused_index`: indexes that cost every write and serve
//! nothing another does not (a prefix of a wider one), or that no observed shape
//! could use, said with the window mongotap watched.

use serde_json::{json, Value};

use crate::detectors::indexes::catalog::{IndexSpec, KeyPart};
use crate::detectors::indexes::esr::Observed;
use crate::detectors::indexes::fit::{self, Quality};
use crate::detectors::{collection, Context, Thresholds};
use crate::finding::{Draft, Finding, Severity};
use crate::shape::command::Category;

/// Whether a `hint` given as a key document names this index.
pub(crate) fn key_matches(hint: &Value, ix: &IndexSpec) -> bool {
    let Some(o) = hint.as_object() else { return false };
    o.len() == ix.key.len() && o.iter().zip(&ix.key).all(|((f, d), (k, p))| f == k && *d == p.to_json())
}

/// `a`'s key is a proper prefix of `b`'s, with the same directions.
pub(crate) fn prefix_of(a: &IndexSpec, b: &IndexSpec) -> bool {
    a.key.len() < b.key.len() && a.key.iter().zip(&b.key).all(|(x, y)| x == y)
}

/// Whether an index does nothing but serve queries (so a wider one can replace it).
pub(crate) fn droppable(ix: &IndexSpec) -> bool {
    !(ix.is_id()
        || ix.unique
        || ix.partial.is_some()
        || ix.sparse
        || ix.ttl
        || ix.hidden
        || ix.collation.is_some())
        && ix.key.iter().all(|(_, p)| matches!(p, KeyPart::Ordered(_)))
}

pub(crate) fn redundant(
    ns: &str,
    ctx: &Context<'_>,
    indexes: &[IndexSpec],
    hinted: &dyn Fn(&IndexSpec) -> bool,
    knowledge: &str,
) -> Vec<Finding> {
    let coll = collection(ns);
    let (mut reads, mut writes) = (0, 0);
    for r in ctx.table.rows().into_iter().filter(|r| r.namespace == ns) {
        match r.category {
            Category::Read => reads += r.count,
            Category::Write => writes += r.count,
            Category::Command => {}
        }
    }
    indexes
        .iter()
        .filter(|a| droppable(a) && !hinted(a))
        .filter_map(|a| {
            // The wider index must serve every query the narrower one does: no text,
            // geo or wildcard part, nothing that hides documents from it.
            let b = indexes.iter().find(|b| {
                prefix_of(a, b)
                    && !b.hidden
                    && b.partial.is_none()
                    && !b.sparse
                    && b.collation == a.collation
                    && b.key.iter().all(|(f, p)| !matches!(p, KeyPart::Special(_)) && !f.ends_with("$**"))
            })?;
            let severity = if writes > 0 { Severity::Medium } else { Severity::Low };
            Some(
                Draft {
                    kind: "redundant_index",
                    severity,
                    namespace: ns,
                    shapes: &[],
                    evidence: json!({
                        "count": writes,
                        "writes_seen": writes,
                        "reads_seen": reads,
                        "index": a.name,
                        "covered_by": b.name,
                        "covered_by_key": b.key_json(),
                        "index_knowledge": knowledge,
                    }),
                    recommendation: format!(
                        "{} {} is a prefix of {} {}: every query it serves, the wider one serves too, while every write ({writes} seen) maintains both. Hide it, watch, then drop it.",
                        a.name,
                        a.key_js(),
                        b.name,
                        b.key_js()
                    ),
                    fix: Some(format!(
                        "db.{coll}.hideIndex(\"{0}\")   // reversible: unhideIndex if a query slows down\ndb.{coll}.dropIndex(\"{0}\")",
                        a.name
                    )),
                    extra: vec![("index", json!({"key": a.key_json()})), ("index_name", json!(a.name))],
                }
                .finding(),
            )
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn unused(
    ns: &str,
    observed: &[Observed<'_>],
    indexes: &[IndexSpec],
    multikey: &dyn Fn(&str) -> bool,
    reported: &[String],
    hinted: &dyn Fn(&IndexSpec) -> bool,
    knowledge: &str,
    ctx: &Context<'_>,
    t: &Thresholds,
) -> Vec<Finding> {
    let rows: Vec<_> = ctx
        .table
        .rows()
        .into_iter()
        .filter(|r| r.namespace == ns && matches!(r.category, Category::Read | Category::Write))
        .collect();
    let operations: u64 = rows.iter().map(|r| r.count).sum();
    if operations < t.unused_index_min_operations {
        return Vec::new();
    }
    let from = rows.iter().map(|r| r.first_seen).min().unwrap_or(0);
    let to = rows.iter().map(|r| r.last_seen).max().unwrap_or(0);
    let window_s = to.saturating_sub(from) as f64 / 1e6;
    let coll = collection(ns);
    indexes
        .iter()
        .filter(|ix| {
            !(ix.is_id() || ix.unique || ix.ttl || ix.hidden || reported.contains(&ix.name) || hinted(ix))
                && ix.key.iter().all(|(_, p)| !matches!(p, KeyPart::Special(_)))
        })
        .filter(|ix| observed.iter().all(|o| fit::fit_of(&o.need, ix, multikey).quality == Quality::Unusable))
        .map(|ix| {
            Draft {
                kind: "unused_index",
                severity: Severity::Low,
                namespace: ns,
                shapes: &[],
                evidence: json!({
                    "count": operations,
                    "operations_seen": operations,
                    "shapes_seen": observed.len(),
                    "window_s": (window_s * 10.0).round() / 10.0,
                    "index": ix.name,
                    "index_knowledge": knowledge,
                }),
                recommendation: format!(
                    "No query shape seen on {ns} in {window_s:.1} s ({operations} operations, {} shapes) could use {} {}. mongotap sees only the clients that go through it, over this window: check $indexStats on every node over a full business cycle before dropping it (Atlas waits 7 days).",
                    observed.len(),
                    ix.name,
                    ix.key_js()
                ),
                fix: Some(format!(
                    "db.{coll}.aggregate([{{ $indexStats: {{}} }}, {{ $match: {{ name: \"{0}\" }} }}])   // accesses.ops on every node\ndb.{coll}.hideIndex(\"{0}\")   // reversible; drop it when nothing slowed down\ndb.{coll}.dropIndex(\"{0}\")",
                    ix.name
                )),
                extra: vec![("index", json!({"key": ix.key_json()})), ("index_name", json!(ix.name))],
            }
            .finding()
        })
        .collect()
}
