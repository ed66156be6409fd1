//! Large documents (`large_document`): documents read or written whole that are
//! large enough to cost on every access. The seed: "document size limit is 16 MB,
//! but performance suffers long before that with large, frequently rewritten
//! documents". Sizes come from the wire: each returned document's length prefix,
//! each inserted or replacing document's. For the largest document of a
//! collection, the field that makes most of it is named.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::MAX_NAMES;
use crate::detectors::{Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::plausible;
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::statements::Change;
use crate::view::{OpView, ShapeId};

/// Size buckets: powers of two up to 64 MiB.
const BUCKETS: usize = 27;

#[derive(Default)]
struct Sizes {
    namespace: String,
    /// Documents by size bucket (2^i bytes and up).
    buckets: [u64; BUCKETS],
    read: u64,
    written: u64,
    max: u64,
    /// The largest document's biggest field and its size.
    biggest_field: Option<(String, u64)>,
    over: u64,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
}

impl Sizes {
    fn quantile(&self, q: f64) -> u64 {
        let total: u64 = self.buckets.iter().sum();
        let target = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                return (1u64 << (i + 1)).min(self.max.max(1));
            }
        }
        self.max
    }
}

/// The large-document detector.
pub struct DocumentSize {
    threshold: u64,
    max_namespaces: usize,
    /// Written documents, by namespace.
    sizes: FxHashMap<String, Sizes>,
    /// Read documents, by the shape of the read (a number to hash, not a string):
    /// merged by namespace when findings are asked for.
    reads: FxHashMap<ShapeId, Sizes>,
    refused: u64,
}

impl DocumentSize {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> DocumentSize {
        DocumentSize {
            threshold: t.large_document_bytes,
            max_namespaces: t.max_patterns as usize,
            sizes: FxHashMap::default(),
            reads: FxHashMap::default(),
            refused: 0,
        }
    }

    /// The read sizes of a shape, made room for if need be.
    fn read_sizes(&mut self, shape: ShapeId, ns: &str, at: Micros) -> Option<&mut Sizes> {
        if !self.reads.contains_key(&shape) {
            if self.reads.len() >= self.max_namespaces * 8 {
                self.refused += 1;
                return None;
            }
            self.reads.insert(shape, Sizes { namespace: ns.to_owned(), first_at: at, ..Sizes::default() });
        }
        self.reads.get_mut(&shape)
    }

    /// The sizes of a collection, made room for if need be.
    fn sizes(&mut self, ns: &str, at: Micros) -> Option<&mut Sizes> {
        if self.sizes.contains_key(ns) {
            return self.sizes.get_mut(ns);
        }
        if self.sizes.len() >= self.max_namespaces {
            self.refused += 1;
            return None;
        }
        Some(self.sizes.entry(ns.to_owned()).or_insert_with(|| Sizes {
            namespace: ns.to_owned(),
            first_at: at,
            ..Sizes::default()
        }))
    }
}

impl Sizes {
    /// Adds another's figures (the same namespace).
    fn absorb(&mut self, o: &Sizes) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.read += o.read;
        self.written += o.written;
        self.over += o.over;
        if o.max > self.max {
            self.max = o.max;
            self.biggest_field = o.biggest_field.clone();
        }
        self.first_at = if self.first_at == 0 { o.first_at } else { self.first_at.min(o.first_at) };
        self.last_at = self.last_at.max(o.last_at);
        for a in &o.apps {
            if self.apps.len() < MAX_NAMES {
                self.apps.insert(a.clone());
            }
        }
    }

    fn note(&mut self, doc: &bson::RawDocument, read: bool, threshold: u64, app: &str, at: Micros) {
        let size = doc.as_bytes().len() as u64;
        let bucket = (63 - size.max(1).leading_zeros() as usize).min(BUCKETS - 1);
        self.buckets[bucket] += 1;
        if read {
            self.read += 1;
        } else {
            self.written += 1;
        }
        self.last_at = at;
        if size >= threshold {
            self.over += 1;
            crate::detectors::keep_name(&mut self.apps, app);
        }
        if size > self.max {
            self.max = size;
            if size >= threshold {
                // Only for a new largest one: a walk over its top level.
                self.biggest_field = element::elements(doc)
                    .filter(|e| plausible(e.key))
                    .max_by_key(|e| e.value.len())
                    .map(|e| (String::from_utf8_lossy(e.key).into_owned(), e.value.len() as u64));
            }
        }
    }
}

impl Detector for DocumentSize {
    fn name(&self) -> &'static str {
        "large_document"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
        let (at, threshold) = (op.started_at, self.threshold);
        let value = v.find_and_modify_value();
        // Only a collection's documents count: a bulk write's or an administrative
        // command's reply carries results and bookkeeping, not documents.
        let returns_documents = matches!(cmd.name, "find" | "aggregate" | "getMore") || value.is_some();
        if let (true, true, Some(shape)) = (
            returns_documents && op.namespace.contains('.'),
            v.batch.is_some() || value.is_some(),
            v.read_shape(),
        ) {
            let Some(s) = self.read_sizes(shape, &op.namespace, at) else { return };
            for d in element::elements_in(v.batch).filter_map(|d| d.as_document()) {
                s.note(d, true, threshold, app, at);
            }
            if let Some(value) = value {
                s.note(value, true, threshold, app, at);
            }
        }
        if v.category != Category::Write {
            return;
        }
        for (ns, d) in v.inserts().iter().copied() {
            let ns = ns.unwrap_or(&op.namespace);
            if !ns.contains('.') {
                continue;
            }
            if let Some(s) = self.sizes(ns, at) {
                s.note(d, false, threshold, app, at);
            }
        }
        for u in v.updates().iter().copied() {
            if let Change::Replacement(d) = u.change {
                if let Some(s) = self.sizes(u.namespace.unwrap_or(&op.namespace), at) {
                    s.note(d, false, threshold, app, at);
                }
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("namespaces", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let large: BTreeSet<&str> = self
            .sizes
            .values()
            .chain(self.reads.values())
            .filter(|s| s.max >= t.large_document_bytes)
            .map(|s| s.namespace.as_str())
            .collect();
        let mut merged: BTreeMap<&str, Sizes> = BTreeMap::new();
        for s in
            self.sizes.values().chain(self.reads.values()).filter(|s| large.contains(s.namespace.as_str()))
        {
            merged
                .entry(&s.namespace)
                .or_insert_with(|| Sizes { namespace: s.namespace.clone(), ..Sizes::default() })
                .absorb(s);
        }
        let all: Vec<&Sizes> = merged.values().collect();
        all.into_iter()
            .map(|s| {
                let severity =
                    if s.max >= t.large_document_high_bytes { Severity::High } else { Severity::Medium };
                let coll = crate::detectors::collection(&s.namespace);
                let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
                let (field, field_bytes) = s.biggest_field.clone().unwrap_or_default();
                let recommendation = format!(
                    "{over} documents of {ns} of {threshold} or more were read or written whole (the largest \
                     {max}, p50 {p50} over all {total}){field_text}. Every read and write moves them whole, long \
                     before the 16 MB limit. Move what grows or is rarely needed out of the document: an \
                     unbounded list into its own collection (or a bounded subset kept here), large binary \
                     content into GridFS, and project only the fields a page reads.",
                    over = s.over,
                    ns = s.namespace,
                    threshold = mb(t.large_document_bytes),
                    max = mb(s.max),
                    p50 = mb(s.quantile(0.5)),
                    total = s.read + s.written,
                    field_text = if field.is_empty() {
                        String::new()
                    } else {
                        format!("; most of the largest is `{field}` ({})", mb(field_bytes))
                    },
                );
                let fix = if field.is_empty() {
                    format!("// read only what the page needs:\ndb.{coll}.find({{ /* ... */ }}, {{ /* the fields the page reads */ }})")
                } else {
                    format!(
                        "// keep `{field}` out of the hot document: its own collection (or GridFS for files), one\n\
                         // document per item, referencing the parent; read it only where it is shown:\n\
                         db.{coll}_{field}.insertOne({{ parentId: doc._id, {field}: doc.{field} }})\n\
                         db.{coll}.updateOne({{ _id: doc._id }}, {{ $unset: {{ {field}: \"\" }} }})\n\
                         // meanwhile, project it away where it is not needed:\n\
                         db.{coll}.find({{ /* ... */ }}, {{ {field}: 0 }})"
                    )
                };
                Draft {
                    kind: "large_document",
                    severity,
                    namespace: &s.namespace,
                    shapes: &[],
                    evidence: json!({
                        "count": s.over,
                        "documents_seen": s.read + s.written,
                        "read": s.read,
                        "written": s.written,
                        "max_bytes": s.max,
                        "p50_bytes": s.quantile(0.5),
                        "p99_bytes": s.quantile(0.99),
                        "largest_field": if field.is_empty() { json!(null) } else { json!({"field": field, "bytes": field_bytes}) },
                        "apps": s.apps,
                        "first_seen": crate::event::rfc3339(s.first_at),
                        "last_seen": crate::event::rfc3339(s.last_at),
                        "thresholds": {
                            "large_document_bytes": t.large_document_bytes,
                            "large_document_high_bytes": t.large_document_high_bytes,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: if field.is_empty() { Vec::new() } else { vec![("field", json!(field))] },
                }
                .finding()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, spec::BinarySubtype, Binary};

    use crate::script::Script;

    fn blob(bytes: usize) -> Binary {
        Binary { subtype: BinarySubtype::Generic, bytes: vec![7; bytes] }
    }

    #[test]
    fn a_bulk_writes_reply_on_admin_is_no_document() {
        // Two rules keep it out: the detector counts only what a collection's reads
        // return, and the server's own namespaces (admin) get no advice at all.
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "files", "PyMongo 4.20.1");
        for i in 0..3 {
            // The results' upserted ids echo what was sent: big ones make a big reply.
            let id = "k".repeat(1_200_000 + i);
            s.exchange(
                c,
                doc! {"bulkWrite": 1, "ops": [{"update": 0, "filter": {"_id": &id}, "updateMods": {"$set": {"n": 1}}, "upsert": true}],
                      "nsInfo": [{"ns": "f.keys"}], "$db": "admin"},
                doc! {"cursor": {"id": 0i64, "ns": "admin.$cmd.bulkWrite", "firstBatch": [{"ok": 1.0, "idx": 0, "n": 1, "upserted": {"_id": &id}}]},
                      "nErrors": 0, "nInserted": 0, "nUpserted": 1, "nMatched": 0, "nModified": 0, "nDeleted": 0, "ok": 1.0},
            );
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "large_document").collect();
        assert!(f.iter().all(|f| f.namespace != "admin"), "{f:#?}");
    }

    #[test]
    fn large_documents_are_found_with_their_biggest_field_and_small_ones_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "files", "PyMongo 4.20.1");
        for i in 0..3 {
            s.exchange(
                c,
                doc! {"insert": "attachments", "documents": [{"_id": i, "name": "a", "data": blob(2_500_000)}], "$db": "f"},
                doc! {"n": 1, "ok": 1.0},
            );
            s.find_one(
                c,
                "f.attachments",
                doc! {"_id": i},
                Some(doc! {"_id": i, "name": "a", "data": blob(2_500_000)}),
            );
        }
        for i in 0..100 {
            s.find_one(c, "f.users", doc! {"_id": i}, Some(doc! {"_id": i, "name": "x".repeat(500)}));
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "large_document").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].namespace.as_str(), f[0].severity.as_str()), ("f.attachments", "medium"));
        assert_eq!(f[0].evidence["count"], 6);
        assert_eq!(f[0].extra["field"], "data");
        assert!(f[0].recommendation.contains("`data` (2.5 MB)"), "{}", f[0].recommendation);
    }
}
