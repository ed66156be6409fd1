//! Unbounded array growth (`unbounded_array_growth`): `$push` or `$addToSet` to the
//! same documents' array again and again, with no `$slice` to bound it (Mongoose
//! sends every push as `$each`, still without `$slice`). Every later read pulls the
//! whole array and every write re-serialises it, long before the 16 MB limit. The
//! seeds' fix is the subset pattern: the latest N embedded (`$each` + `$slice`), the
//! rest in their own collection, each child referencing its parent.
//!
//! Pushes are counted per document (by a keyed hash of the `_id` the filter asks
//! for); array lengths and document sizes come from later replies that return
//! those documents. Filters that bound the array themselves (the bucket pattern's
//! `count: {$lt: 200}`) are left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use bson::RawDocument;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::json;

use mongotap_wire::element::{self, Element};

use crate::detectors::driver::Stack;
use crate::detectors::MAX_NAMES;
use crate::detectors::{collection, Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::Paths;
use crate::namespace::Change as Lifecycle;
use crate::operation::{ConnInfo, NO_APP};
use crate::statements::{self, Change};
use crate::values::{At, Keyed};
use crate::view::{OpView, ShapeId};

/// 16 MiB: the document size limit.
const LIMIT: f64 = 16.0 * 1024.0 * 1024.0;

#[derive(Debug, Default, Clone, Copy)]
struct DocGrowth {
    pushes: u64,
    elements: u64,
    first_at: Micros,
    last_at: Micros,
    /// The array's length and the document's size in the latest reply that had it.
    len: Option<u64>,
    size: Option<u64>,
}

/// Documents no longer followed one by one, kept as a summary: those of a collection
/// that is gone (dropped, emptied, renamed away), whose keys can never match again,
/// and those let go of to stay bounded. The finding needs only how many there were,
/// how often each was pushed to, and the busiest one.
#[derive(Default)]
struct Retired {
    /// Documents by their pushes (pushes -> documents); at most `MAX_RETIRED_COUNTS`
    /// distinct counts, the rest folded into the next count down.
    by_pushes: BTreeMap<u64, u64>,
    documents: u64,
    top: Option<DocGrowth>,
}

/// Distinct push counts kept for the documents of collections that are gone.
const MAX_RETIRED_COUNTS: usize = 1024;

impl Retired {
    fn add(&mut self, d: &DocGrowth) {
        let at = if self.by_pushes.len() >= MAX_RETIRED_COUNTS && !self.by_pushes.contains_key(&d.pushes) {
            // The next count down, or the smallest kept: the cap holds.
            let below = self.by_pushes.range(..d.pushes).next_back();
            below.or_else(|| self.by_pushes.iter().next()).map_or(d.pushes, |(k, _)| *k)
        } else {
            d.pushes
        };
        *self.by_pushes.entry(at).or_default() += 1;
        self.documents += 1;
        if self.top.is_none_or(|t| d.pushes > t.pushes) {
            self.top = Some(*d);
        }
    }
}

#[derive(Default)]
struct Growth {
    namespace: String,
    path: u32,
    pushes: u64,
    elements: u64,
    element_bytes: u64,
    /// Pushes whose filter names no `_id` (counted, not per document).
    untargeted: u64,
    docs: FxHashMap<u64, DocGrowth>,
    /// Documents of earlier lives of the collection.
    retired: Retired,
    max_len: u64,
    max_doc_bytes: u64,
    shapes: BTreeSet<ShapeId>,
    apps: BTreeSet<String>,
    drivers: BTreeSet<String>,
}

/// The array-growth detector.
pub struct ArrayGrowth {
    keyed: Keyed,
    paths: Paths,
    max_documents: usize,
    max_arrays: usize,
    /// By (namespace, path).
    growth: FxHashMap<(String, u32), Growth>,
    /// Collections with a growing array: their replies are measured.
    watched: FxHashSet<String>,
    /// Documents tracked, across arrays: the bound.
    tracked: usize,
    evicted_documents: u64,
    refused_arrays: u64,
}

/// Whether a filter bounds the array itself: a range on a field (the bucket
/// pattern's `count: {$lt: N}`), or an `$exists: false` on an array position.
fn bounded_by_filter(filter: &RawDocument) -> bool {
    element::elements(filter).any(|e| {
        let Some(ops) = e.as_document() else { return false };
        element::elements(ops).any(|op| match op.key {
            b"$lt" | b"$lte" | b"$size" => true,
            b"$exists" => {
                op.as_bool() == Some(false)
                    && e.key.rsplit(|b| *b == b'.').next().is_some_and(|s| s.iter().all(u8::is_ascii_digit))
            }
            _ => false,
        })
    })
}

/// A document's key: its `_id` in its namespace's epoch (a re-created collection's
/// documents are new ones, whatever their `_id`).
fn id_hash(keyed: &Keyed, id: &Element<'_>, epoch: u32) -> u64 {
    let mut h = keyed.hasher();
    h.write_u32(epoch);
    h.write_u8(id.kind);
    h.write(id.value);
    h.finish()
}

/// A duration as people say it: seconds, minutes, hours or days.
fn duration(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7_200.0 => format!("{:.0} minutes", s / 60.0),
        s if s < 172_800.0 => format!("{:.0} hours", s / 3_600.0),
        s => format!("{:.0} days", s / 86_400.0),
    }
}

/// The array at a dotted path of a document, if there is one there.
fn array_at<'a>(doc: &'a RawDocument, path: &str) -> Option<&'a RawDocument> {
    let mut d = doc;
    let mut segs = path.split('.').peekable();
    while let Some(seg) = segs.next() {
        let e = element::find(d, seg)?;
        if segs.peek().is_none() {
            return e.as_array();
        }
        d = e.as_document()?;
    }
    None
}

impl ArrayGrowth {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> ArrayGrowth {
        ArrayGrowth {
            keyed: Keyed::default(),
            paths: Paths::default(),
            max_documents: t.max_documents as usize,
            max_arrays: t.max_patterns as usize,
            growth: FxHashMap::default(),
            watched: FxHashSet::default(),
            tracked: 0,
            evicted_documents: 0,
            refused_arrays: 0,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ns: &str,
        path: &[u8],
        id: Option<u64>,
        elements: u64,
        bytes: u64,
        shape: Option<ShapeId>,
        conn: &ConnInfo,
        at: Micros,
    ) {
        let Some(path) = self.paths.id(At { path, array: None }) else { return };
        let key = (ns.to_owned(), path);
        if !self.growth.contains_key(&key) && self.growth.len() >= self.max_arrays {
            self.refused_arrays += 1;
            return;
        }
        if !self.watched.contains(ns) {
            self.watched.insert(ns.to_owned());
        }
        let g = self.growth.entry(key).or_insert_with(|| Growth {
            namespace: ns.to_owned(),
            path,
            ..Growth::default()
        });
        g.pushes += 1;
        g.elements += elements;
        g.element_bytes += bytes;
        if let Some(s) = shape {
            if g.shapes.len() < MAX_NAMES {
                g.shapes.insert(s);
            }
        }
        let app = conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut g.apps, app);
        if let Some(d) = &conn.driver {
            crate::detectors::keep_name(&mut g.drivers, d);
        }
        let Some(id) = id else {
            g.untargeted += 1;
            return;
        };
        if !g.docs.contains_key(&id) {
            if self.tracked >= self.max_documents {
                // Forget the half of this array's documents pushed to least: they are
                // the least likely to grow. Half at once, so a full table costs one
                // pass per many new documents, not one per document.
                if g.docs.is_empty() {
                    self.evicted_documents += 1;
                    return;
                }
                let before = g.docs.len();
                let remove = before.div_ceil(2);
                if remove == before {
                    for d in g.docs.values() {
                        g.retired.add(d);
                    }
                    g.docs.clear();
                } else {
                    let mut pushes: Vec<u64> = g.docs.values().map(|d| d.pushes).collect();
                    let (_, first_kept, _) = pushes.select_nth_unstable(remove);
                    let first_kept = *first_kept;
                    let above = pushes.iter().filter(|p| **p > first_kept).count();
                    // Everything above the cut stays, and as many ties as fill the kept half.
                    let mut ties = before - remove - above;
                    let retired = &mut g.retired;
                    g.docs.retain(|_, d| {
                        let keep = d.pushes > first_kept
                            || (d.pushes == first_kept && ties > 0 && {
                                ties -= 1;
                                true
                            });
                        if !keep {
                            retired.add(d);
                        }
                        keep
                    });
                }
                let gone = before - g.docs.len();
                self.tracked -= gone;
                self.evicted_documents += gone as u64;
            }
            self.tracked += 1;
        }
        let d = g.docs.entry(id).or_insert(DocGrowth { first_at: at, ..DocGrowth::default() });
        d.pushes += 1;
        d.elements += elements;
        d.last_at = at;
    }

    /// A collection's life changed: the documents it had are gone (a re-created one
    /// holds new documents, whatever their `_id`), so their entries become a summary.
    fn retire(&mut self, change: &Lifecycle) {
        let gone = |ns: &str| match change {
            Lifecycle::Dropped(n) | Lifecycle::Emptied(n) => n == ns,
            Lifecycle::Renamed { from, to } => from == ns || to == ns,
            Lifecycle::DatabaseDropped(db) => {
                ns.strip_prefix(db.as_str()).is_some_and(|r| r.starts_with('.'))
            }
            Lifecycle::Created(_) => false,
        };
        for ((ns, _), g) in self.growth.iter_mut() {
            if g.docs.is_empty() || !gone(ns) {
                continue;
            }
            self.tracked -= g.docs.len();
            for d in g.docs.values() {
                g.retired.add(d);
            }
            g.docs.clear();
        }
    }

    /// Array lengths and document sizes from a document a reply returned.
    fn measure(&mut self, ns: &str, epoch: u32, doc: &RawDocument) {
        let Some(id) = element::find(doc, "_id") else { return };
        let h = id_hash(&self.keyed, &id, epoch);
        let size = doc.as_bytes().len() as u64;
        for ((gns, path), g) in self.growth.iter_mut() {
            if gns != ns {
                continue;
            }
            let Some(d) = g.docs.get_mut(&h) else { continue };
            let len = array_at(doc, self.paths.name(*path)).map(|a| element::elements(a).count() as u64);
            d.len = len.or(d.len);
            d.size = Some(size);
            g.max_len = g.max_len.max(len.unwrap_or(0));
            g.max_doc_bytes = g.max_doc_bytes.max(size);
        }
    }
}

impl Detector for ArrayGrowth {
    fn name(&self) -> &'static str {
        "unbounded_array_growth"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if let Some(change) = &v.change {
            self.retire(change);
        }
        if v.command.is_none() {
            return;
        }
        let value = v.find_and_modify_value();
        if (v.batch.is_some() || value.is_some()) && self.watched.contains(&*op.namespace) {
            if let Some(batch) = v.batch {
                for d in element::elements(batch).filter_map(|d| d.as_document()) {
                    self.measure(&op.namespace, v.epoch, d);
                }
            }
            if let Some(value) = value {
                self.measure(&op.namespace, v.epoch, value);
            }
        }
        if op.failed() || v.category != crate::shape::command::Category::Write {
            return;
        }
        let shape = v.shape_ids.first().copied().flatten();
        let outcome = v.outcome.clone().unwrap_or_default();
        for (i, u) in v.updates().iter().copied().enumerate() {
            let Change::Operators(ops) = u.change else { continue };
            // A push into a document that was not there grew nothing (unless its upsert made it).
            if !outcome.changed_existing(i) && !outcome.upserted.contains(&(i as u64)) {
                continue;
            }
            if u.filter.is_some_and(bounded_by_filter) {
                continue;
            }
            let id = u.filter.and_then(statements::id_of).map(|e| id_hash(&self.keyed, &e, v.epoch));
            let ns = u.namespace.unwrap_or(&op.namespace);
            for group in element::elements(ops).filter(|e| e.key == b"$push" || e.key == b"$addToSet") {
                for p in element::elements_in(group.as_document()) {
                    let modifiers = p.as_document().filter(|d| {
                        element::elements(d).next().is_some_and(|f| f.key.first() == Some(&b'$'))
                    });
                    let (elements, bytes) = match modifiers {
                        Some(m) => {
                            if element::find(m, "$slice").is_some() {
                                continue; // Bounded: the subset pattern.
                            }
                            let each = element::find(m, "$each").and_then(|e| e.as_array());
                            let n = each.map_or(1, |a| element::elements(a).count() as u64);
                            (n, each.map_or(p.value.len(), |a| a.as_bytes().len()) as u64)
                        }
                        None => (1, p.value.len() as u64),
                    };
                    self.push(ns, p.key, id, elements, bytes, shape, &op.conn, op.started_at);
                }
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("documents", self.evicted_documents),
            ("arrays", self.refused_arrays),
            ("paths", self.paths.refused),
        ]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        let mut all: Vec<&Growth> = self.growth.values().collect();
        all.sort_by(|a, b| {
            (&a.namespace, self.paths.name(a.path)).cmp(&(&b.namespace, self.paths.name(b.path)))
        });
        for g in all {
            let live = g.docs.iter().max_by_key(|(k, d)| (d.pushes, **k)).map(|(_, d)| *d);
            let Some(top) = [g.retired.top, live].into_iter().flatten().max_by_key(|d| d.pushes) else {
                continue;
            };
            let max_len = g.max_len.max(top.len.unwrap_or(0));
            if top.pushes < t.array_min_pushes_per_doc && max_len < t.array_max_elements {
                continue;
            }
            let field = self.paths.name(g.path).to_owned();
            let documents = g.docs.len() as u64 + g.retired.documents;
            let mut per_doc: BTreeMap<u64, u64> = g.retired.by_pushes.clone();
            for d in g.docs.values() {
                *per_doc.entry(d.pushes).or_default() += 1;
            }
            let mut below = 0;
            let p50 = per_doc
                .iter()
                .find(|(_, n)| {
                    below += **n;
                    below > documents / 2
                })
                .map_or(0, |(p, _)| *p);
            let elem_bytes = g.element_bytes as f64 / g.elements.max(1) as f64;
            let span = (top.last_at.saturating_sub(top.first_at) as f64 / 1e6).max(1.0);
            let growth_per_s = top.elements as f64 / span * elem_bytes;
            let size = top.size.map_or(top.elements as f64 * elem_bytes, |s| s as f64);
            let seconds =
                if growth_per_s > 0.0 { (LIMIT - size).max(0.0) / growth_per_s } else { f64::INFINITY };
            let days = seconds / 86_400.0;
            let severity = if max_len >= t.array_max_elements || days <= t.array_high_days_to_limit {
                Severity::High
            } else {
                Severity::Medium
            };
            let coll = collection(&g.namespace);
            let stack = Stack::from_driver(g.drivers.iter().next().map(String::as_str));
            let recommendation = format!(
                "{coll}.{field} grows by $push without $slice: {pushes} pushes, up to {top} on one document \
                 (p50 {p50} per document over {docs} document{plural}){len}. Every read of such a document pulls the whole \
                 array and every write re-serialises it; at the rate seen here ({top} pushes in {span}) the busiest \
                 one would reach 16 MB in {eta}. Keep a bounded subset embedded ($push with $each and $slice) and the \
                 rest in its own collection, each child referencing its {coll} document.",
                pushes = g.pushes,
                top = top.pushes,
                docs = documents,
                plural = if documents == 1 { "" } else { "s" },
                len = if max_len > 0 { format!("; the longest array seen has {max_len} elements") } else { String::new() },
                span = duration(span),
                eta = if seconds.is_finite() { format!("about {}", duration(seconds)) } else { "an unknown time".to_owned() },
            );
            let child = field.rsplit('.').next().unwrap_or(&field).to_owned();
            let parent_id = format!("{}Id", coll.strip_suffix('s').unwrap_or(coll));
            let fix = match stack.language {
                crate::detectors::driver::Language::Python => format!(
                    "# the subset pattern: the latest 10 embedded, every one in its own collection\n\
                     db.{child}.insert_one({{\"{parent_id}\": doc_id, **item}})\n\
                     db.{coll}.update_one({{\"_id\": doc_id}}, {{\"$push\": {{\"{field}\": {{\"$each\": [item], \"$slice\": -10}}}}}})"
                ),
                _ => format!(
                    "// the subset pattern: the latest 10 embedded, every one in its own collection\n\
                     db.{child}.insertOne({{ {parent_id}: docId, ...item }});\n\
                     db.{coll}.updateOne({{ _id: docId }}, {{ $push: {{ {field}: {{ $each: [item], $slice: -10 }} }} }});"
                ),
            };
            let shapes: Vec<ShapeId> = g.shapes.iter().copied().collect();
            out.push(
                Draft {
                    kind: "unbounded_array_growth",
                    severity,
                    namespace: &g.namespace,
                    shapes: &shapes,
                    evidence: json!({
                        "count": g.pushes,
                        "elements_pushed": g.elements,
                        "documents": documents,
                        "pushes_per_document": {"max": top.pushes, "p50": p50},
                        "pushes_without_id": g.untargeted,
                        "longest_array_seen": if max_len > 0 { json!(max_len) } else { json!(null) },
                        "largest_document_bytes_seen": if g.max_doc_bytes > 0 { json!(g.max_doc_bytes) } else { json!(null) },
                        "element_bytes_mean": elem_bytes.round(),
                        "seconds_to_16mb_at_observed_rate": if seconds.is_finite() { json!(seconds.round()) } else { json!(null) },
                        "apps": g.apps,
                        "thresholds": {
                            "array_min_pushes_per_doc": t.array_min_pushes_per_doc,
                            "array_max_elements": t.array_max_elements,
                            "array_high_days_to_limit": t.array_high_days_to_limit,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![("field", json!(field))],
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

    fn push(s: &mut Script, c: u64, id: i32, u: bson::Document, filter: Option<bson::Document>) {
        let q = filter.unwrap_or(doc! {"_id": id});
        s.exchange(
            c,
            doc! {"update": "products", "updates": [{"q": q, "u": u}], "$db": "shop"},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
    }

    fn growth(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "unbounded_array_growth").collect()
    }

    #[test]
    fn a_viral_products_reviews_are_unbounded_and_mongooses_each_counts_too() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "nodejs|Mongoose 6.20.0|8.24.10");
        for i in 0..300 {
            push(
                &mut s,
                c,
                1,
                doc! {"$push": {"reviews": {"$each": [{"stars": 5, "text": "great"}]}}, "$inc": {"__v": 1}},
                None,
            );
            if i % 100 == 0 {
                let reviews: Vec<bson::Document> =
                    (0..=i).map(|_| doc! {"stars": 5, "text": "great"}).collect();
                s.find_one(c, "shop.products", doc! {"_id": 1}, Some(doc! {"_id": 1, "reviews": reviews}));
            }
        }
        for id in 2..5 {
            push(&mut s, c, id, doc! {"$push": {"reviews": {"stars": 1}}}, None);
        }
        let f = growth(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].extra["field"].as_str(), f[0].severity.as_str()), (Some("reviews"), "high"));
        assert_eq!(f[0].evidence["pushes_per_document"]["max"], 300);
        assert_eq!(f[0].evidence["longest_array_seen"], 201);
    }

    #[test]
    fn sliced_pushes_bucket_guards_and_thin_spreads_are_not_unbounded() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for _ in 0..300 {
            push(&mut s, c, 1, doc! {"$push": {"reviews": {"$each": [{"stars": 5}], "$slice": -10}}}, None);
            push(
                &mut s,
                c,
                0,
                doc! {"$push": {"r": {"v": 1}}, "$inc": {"count": 1}},
                Some(doc! {"sensorId": "s1", "hour": 7, "count": {"$lt": 200}}),
            );
        }
        for id in 0..400 {
            push(&mut s, c, id, doc! {"$push": {"comments": {"t": "x"}}}, None);
        }
        assert!(growth(s).is_empty());
    }

    #[test]
    fn a_dropped_collections_documents_become_a_summary_that_still_counts() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for _ in 0..300 {
            push(&mut s, c, 1, doc! {"$push": {"reviews": {"stars": 5}}}, None);
        }
        push(&mut s, c, 2, doc! {"$push": {"reviews": {"stars": 5}}}, None);
        s.exchange(c, doc! {"drop": "products", "$db": "shop"}, doc! {"ok": 1.0});
        // The re-created collection's document 1 is a new document: its pushes start at 0.
        for _ in 0..3 {
            push(&mut s, c, 1, doc! {"$push": {"reviews": {"stars": 1}}}, None);
        }
        let f = growth(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].evidence["documents"], 3);
        assert_eq!(f[0].evidence["pushes_per_document"]["max"], 300);
        assert_eq!(f[0].evidence["pushes_per_document"]["p50"], 3);
    }

    #[test]
    fn a_full_document_table_lets_the_least_pushed_half_go_and_keeps_the_busy_one() {
        use crate::detectors::{Detectors, Thresholds};
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for _ in 0..300 {
            push(&mut s, c, 1, doc! {"$push": {"reviews": {"stars": 5}}}, None);
        }
        for id in 2..1000 {
            push(&mut s, c, id, doc! {"$push": {"reviews": {"stars": 1}}}, None);
        }
        let t = Thresholds { max_documents: 100, ..Thresholds::default() };
        let mut p = crate::pipeline::Pipeline::with_detectors(
            Default::default(),
            Default::default(),
            Detectors::new(t),
        );
        s.run_into(&mut p);
        let f: Vec<_> = p.findings().into_iter().filter(|f| f.kind == "unbounded_array_growth").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].evidence["pushes_per_document"]["max"], 300);
        // Documents let go of still count, in the summary.
        assert_eq!(f[0].evidence["documents"], 999);
        assert!(
            p.detectors().evictions().get("unbounded_array_growth.documents").is_some_and(|n| *n >= 899),
            "{:?}",
            p.detectors().evictions()
        );
    }
}
