//! Hot documents (`hot_document`): one document takes a large share of its
//! collection's writes, from several connections at once: a global counter, a
//! sequence, a settings or totals document that every request changes. WiredTiger
//! lets writers change different documents of a collection at the same time, not
//! the same one (MongoDB's manual, FAQ: Concurrency): writers of one document queue
//! behind each other, and in transactions they fail with `WriteConflict` and retry.
//! The seeds' fixes: the approximation pattern (write the counter every N events),
//! a counter spread over N documents summed on read, or the counter moved off the
//! request path.
//!
//! From the wire: update statements by `_id` whose change only sets or increments
//! fields (`$inc`, `$set`, `$max`, `$min`, `$mul`, `$currentDate`: counters and
//! settings; a growing array is `unbounded_array_growth`'s story), counted per
//! document by a keyed hash of its `_id` in a bounded heavy-hitter table per
//! collection (Space-Saving: the most written documents are exact enough, the rest
//! share the table's last places), against all writes to the collection.

use std::collections::BTreeSet;
use std::hash::Hasher;

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::MAX_NAMES;
use crate::detectors::{collection, Context, Detector};
use crate::event::{ConnId, Micros};
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::statements::{self, Change};
use crate::values::Keyed;
use crate::view::{OpView, ShapeId};

/// Documents followed per collection (the heavy-hitter table's size).
const TOP: usize = 16;
/// Connections remembered per document (enough to tell one writer from many).
const MAX_CONNS: usize = 8;
/// `WriteConflict`: two writers changed one document at once.
const WRITE_CONFLICT: i32 = 112;

#[derive(Clone, Default)]
struct Doc {
    key: u64,
    writes: u64,
    /// Writes it may have inherited from the entry it replaced (Space-Saving's error).
    over: u64,
    conflicts: u64,
    conns: Vec<ConnId>,
    first_at: Micros,
    last_at: Micros,
}

#[derive(Default)]
struct Collection {
    writes: u64,
    top: Vec<Doc>,
    fields: BTreeSet<String>,
    shapes: BTreeSet<ShapeId>,
    apps: BTreeSet<String>,
}

/// The hot-document detector.
pub struct HotDocument {
    keyed: Keyed,
    max_collections: usize,
    collections: FxHashMap<String, Collection>,
    refused: u64,
}

impl HotDocument {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> HotDocument {
        HotDocument {
            keyed: Keyed::default(),
            max_collections: t.max_patterns as usize,
            collections: FxHashMap::default(),
            refused: 0,
        }
    }
}

/// Whether an update only sets or increments fields (a counter, a setting), and
/// the fields it changes.
fn counter_fields(ops: &bson::RawDocument, out: &mut BTreeSet<String>) -> bool {
    element::elements(ops).all(|group| {
        matches!(group.key, b"$inc" | b"$set" | b"$max" | b"$min" | b"$mul" | b"$currentDate")
            && group.as_document().is_some_and(|fields| {
                for f in element::elements(fields) {
                    if out.len() < MAX_NAMES && crate::names::plausible(f.key) {
                        out.insert(String::from_utf8_lossy(f.key).into_owned());
                    }
                }
                true
            })
    })
}

impl Detector for HotDocument {
    fn name(&self) -> &'static str {
        "hot_document"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if v.category != Category::Write {
            return;
        }
        let conflict = op.error_code == Some(WRITE_CONFLICT);
        if op.failed() && !conflict {
            return;
        }
        let ns = v.updates().first().and_then(|u| u.namespace).unwrap_or(&op.namespace);
        if !self.collections.contains_key(ns) {
            if self.collections.len() >= self.max_collections {
                self.refused += 1;
                return;
            }
            self.collections.insert(ns.to_owned(), Collection::default());
        }
        let c = self.collections.get_mut(ns).expect("just inserted");
        let updates = v.updates();
        // Every statement is a write to the collection; inserts and deletes too.
        c.writes += (updates.len() as u64).max(1);
        for u in updates.iter().copied() {
            let (Change::Operators(ops), false) = (u.change, u.multi) else { continue };
            let Some(id) = u.filter.and_then(statements::id_of) else { continue };
            let mut fields = BTreeSet::new();
            if !counter_fields(ops, &mut fields) {
                continue;
            }
            let mut h = self.keyed.hasher();
            h.write_u32(v.epoch);
            h.write_u8(id.kind);
            h.write(id.value);
            let key = h.finish();
            let at = op.started_at;
            let i = match c.top.iter().position(|d| d.key == key) {
                Some(i) => i,
                None if c.top.len() < TOP => {
                    c.top.push(Doc { key, first_at: at, ..Doc::default() });
                    c.top.len() - 1
                }
                None => {
                    // Space-Saving: the least written place goes to the newcomer, which
                    // inherits its count as a possible overestimate.
                    let (i, min) = c
                        .top
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, d)| d.writes)
                        .map(|(i, d)| (i, d.writes))
                        .expect("full");
                    c.top[i] = Doc { key, writes: min, over: min, first_at: at, ..Doc::default() };
                    i
                }
            };
            let d = &mut c.top[i];
            d.writes += 1;
            d.conflicts += u64::from(conflict);
            d.last_at = at;
            if d.conns.len() < MAX_CONNS && !d.conns.contains(&op.conn.id) {
                d.conns.push(op.conn.id);
            }
            for f in fields {
                if c.fields.len() < MAX_NAMES {
                    c.fields.insert(f);
                }
            }
            if let Some(Some(s)) = v.shape_ids.first() {
                if c.shapes.len() < MAX_NAMES {
                    c.shapes.insert(*s);
                }
            }
            let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
            crate::detectors::keep_name(&mut c.apps, app);
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("collections", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        let mut all: Vec<(&String, &Collection)> = self.collections.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        for (ns, c) in all {
            let Some(d) = c.top.iter().max_by_key(|d| d.writes - d.over) else { continue };
            // The count it surely had: Space-Saving may have lent it some.
            let writes = d.writes - d.over;
            let share = writes as f64 / c.writes.max(1) as f64;
            if writes < t.hot_min_writes
                || share < t.hot_min_share
                || (d.conns.len() as u64) < t.hot_min_connections
            {
                continue;
            }
            let span = (d.last_at.saturating_sub(d.first_at) as f64 / 1e6).max(1.0);
            let rate = writes as f64 / span;
            let severity = if d.conflicts > 0 { Severity::High } else { Severity::Medium };
            let coll = collection(ns);
            let fields: Vec<&String> = c.fields.iter().collect();
            let field = fields.first().map_or("count", |f| f.as_str());
            let conns = if d.conns.len() >= MAX_CONNS {
                format!("{MAX_CONNS} or more")
            } else {
                d.conns.len().to_string()
            };
            let recommendation = format!(
                "One {coll} document takes {pct:.0}% of the collection's writes: {writes} updates of {names} \
                 ({rate:.0} a second) from {conns} connections{conflicts}. Writers of one document queue behind \
                 each other (WiredTiger locks documents, not collections). Write it less often (the approximation \
                 pattern: add up in the application and write every N events), spread it over N documents summed \
                 on read, or move it off the request path.",
                pct = share * 100.0,
                names = fields.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", "),
                conflicts = if d.conflicts > 0 { format!(", {} of them refused with WriteConflict", d.conflicts) } else { String::new() },
            );
            let fix = format!(
                "// a counter spread over 16 documents: write one at random, read the sum\n\
                 db.{coll}.updateOne({{ _id: {{ key: counterKey, shard: Math.floor(Math.random() * 16) }} }}, {{ $inc: {{ {field}: 1 }} }}, {{ upsert: true }})\n\
                 db.{coll}.aggregate([{{ $match: {{ \"_id.key\": counterKey }} }}, {{ $group: {{ _id: null, {field}: {{ $sum: \"${field}\" }} }} }}])\n\
                 // or the approximation pattern: count in the application, write every N events\n\
                 if (++pending % 100 === 0) db.{coll}.updateOne({{ _id: counterKey }}, {{ $inc: {{ {field}: 100 }} }})"
            );
            let shapes: Vec<ShapeId> = c.shapes.iter().copied().collect();
            out.push(
                Draft {
                    kind: "hot_document",
                    severity,
                    namespace: ns,
                    shapes: &shapes,
                    evidence: json!({
                        "count": writes,
                        "collection_writes": c.writes,
                        "share_of_collection_writes": (share * 1000.0).round() / 1000.0,
                        "writes_per_second": (rate * 10.0).round() / 10.0,
                        "connections": d.conns.len(),
                        "write_conflicts": d.conflicts,
                        "fields": fields,
                        "apps": c.apps,
                        "thresholds": {
                            "hot_min_writes": t.hot_min_writes,
                            "hot_min_share": t.hot_min_share,
                            "hot_min_connections": t.hot_min_connections,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![],
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

    fn bump(s: &mut Script, c: u64, ns: &str, id: bson::Bson, u: bson::Document) {
        let (db, coll) = ns.split_once('.').unwrap();
        s.exchange(
            c,
            doc! {"update": coll, "updates": [{"q": {"_id": id}, "u": u}], "$db": db},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
    }

    fn hot(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "hot_document").collect()
    }

    #[test]
    fn a_global_counter_bumped_from_a_pool_is_hot() {
        let mut s = Script::new();
        let pool: Vec<u64> =
            (0..4).map(|i| s.connect(&format!("10.0.0.7:{}", 50001 + i), "shop", "PyMongo 4.20.1")).collect();
        for i in 0..400 {
            bump(&mut s, pool[i % 4], "shop.stats", "pageviews".into(), doc! {"$inc": {"views": 1}});
            if i % 4 == 0 {
                bump(
                    &mut s,
                    pool[0],
                    "shop.stats",
                    format!("product-{i}").into(),
                    doc! {"$inc": {"views": 1}},
                );
            }
        }
        let f = hot(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].evidence["count"], 400);
        assert_eq!(f[0].evidence["connections"], 4);
        assert_eq!(f[0].evidence["fields"], serde_json::json!(["views"]));
        // No literal: the document's _id is not named.
        assert!(!serde_json::to_string(&f).unwrap().contains("pageviews"));
    }

    #[test]
    fn one_writer_spread_counters_and_growing_arrays_are_not() {
        let mut s = Script::new();
        let pool: Vec<u64> =
            (0..4).map(|i| s.connect(&format!("10.0.0.7:{}", 50001 + i), "shop", "PyMongo 4.20.1")).collect();
        // A job's progress, written by its one worker.
        for i in 0..300 {
            bump(&mut s, pool[0], "shop.jobs", 7.into(), doc! {"$set": {"done": i}});
        }
        // Per-product counters from the pool: many documents share the writes.
        for i in 0..400 {
            bump(&mut s, pool[i % 4], "shop.products", ((i % 40) as i32).into(), doc! {"$inc": {"views": 1}});
        }
        // A viral product's reviews: array growth, another finding's story.
        for i in 0..300 {
            bump(&mut s, pool[i % 4], "shop.posts", 1.into(), doc! {"$push": {"comments": {"t": "x"}}});
        }
        assert!(hot(s).is_empty());
    }
}
