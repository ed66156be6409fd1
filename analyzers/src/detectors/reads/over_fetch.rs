//! Over-fetching (`over_fetch`): a frequent read without a projection whose
//! documents are mostly one large field, an embedded array or sub-document. The
//! seed's over-embedding symptom: "every read of the product, even a page that only
//! wants to display the product name and price, pulls the entire reviews array".
//! mongotap cannot see which fields the page shows, so the finding names the field
//! and its share of every document read, and asks for a projection (or the subset
//! pattern) if the page does not show all of it. A large binary or text field (a GridFS
//! chunk's data, a file's content) is what such a read is for: never an over-fetch.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::{collection, Context, Detector};
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::Paths;
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::values::At;
use crate::view::{OpView, ShapeId};

/// Reads of a shape whose documents are looked at: the first ones, then one in this many.
const LOOK_FIRST: u64 = 64;
/// See [`LOOK_FIRST`].
const LOOK_EVERY: u64 = 64;
/// Documents looked at per read.
const LOOK_PER_READ: usize = 16;

#[derive(Default)]
struct Stat {
    namespace: String,
    /// The shape has a projection: not this detector's business.
    projected: bool,
    reads: u64,
    docs: u64,
    looked: u64,
    bytes: u64,
    /// Bytes of the largest field, by field, over the documents looked at.
    fields: FxHashMap<u32, u64>,
    apps: BTreeSet<String>,
}

/// The over-fetch detector.
pub struct OverFetch {
    names: Paths,
    min_doc_bytes: u64,
    max_shapes: usize,
    stats: FxHashMap<ShapeId, Stat>,
    refused: u64,
}

impl OverFetch {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> OverFetch {
        OverFetch {
            names: Paths::default(),
            min_doc_bytes: t.over_fetch_min_doc_bytes,
            max_shapes: t.max_patterns as usize,
            stats: FxHashMap::default(),
            refused: 0,
        }
    }
}

impl Detector for OverFetch {
    fn name(&self) -> &'static str {
        "over_fetch"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let (Some(cmd), Some(batch), Category::Read) = (&v.command, v.batch, v.category) else { return };
        if !matches!(cmd.name, "find" | "getMore") {
            return;
        }
        let Some(shape) = v.read_shape() else { return };
        let op = v.op;
        let s = match self.stats.get_mut(&shape) {
            Some(s) => s,
            None => {
                if self.stats.len() >= self.max_shapes {
                    self.refused += 1;
                    return;
                }
                // A projection is part of the shape: looked at once per shape. (A
                // getMore's shape is its find's, which is all that is known of it.)
                let projected = cmd.name == "find" && element::find(cmd.body, "projection").is_some();
                self.stats.entry(shape).or_insert_with(|| Stat {
                    namespace: op.namespace.to_string(),
                    projected,
                    ..Stat::default()
                })
            }
        };
        if s.projected {
            return;
        }
        s.reads += 1;
        s.docs += op.docs_returned;
        // Documents are looked at in the first reads of a shape, then in one read in
        // LOOK_EVERY: a shape's documents look alike.
        if s.reads > LOOK_FIRST && s.reads % LOOK_EVERY != 0 {
            return;
        }
        let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut s.apps, app);
        for d in element::elements(batch).filter_map(|d| d.as_document()).take(LOOK_PER_READ) {
            s.looked += 1;
            let size = d.as_bytes().len() as u64;
            s.bytes += size;
            if size < self.min_doc_bytes {
                continue;
            }
            let Some(big) = element::elements(d).filter(|e| e.key != b"_id").max_by_key(|e| e.value.len())
            else {
                continue;
            };
            // Only embedded arrays and sub-documents: a binary or text payload (a GridFS
            // chunk's data, a file's content) is what such a read is for.
            if !matches!(big.kind, 0x03 | 0x04) {
                continue;
            }
            if let Some(f) = self.names.id(At { path: big.key, array: None }) {
                *s.fields.entry(f).or_default() += big.value.len() as u64;
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("shapes", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        let mut all: Vec<(&ShapeId, &Stat)> = self.stats.iter().collect();
        all.sort_by_key(|(id, _)| **id);
        for (id, s) in all {
            let mean = s.bytes / s.looked.max(1);
            let Some((field, field_bytes)) =
                s.fields.iter().max_by_key(|(f, b)| (**b, std::cmp::Reverse(**f)))
            else {
                continue;
            };
            let share = *field_bytes as f64 / s.bytes.max(1) as f64;
            if s.reads < t.over_fetch_min_reads
                || mean < t.over_fetch_min_doc_bytes
                || share < t.over_fetch_min_field_share
            {
                continue;
            }
            let field = self.names.name(*field).to_owned();
            let coll = collection(&s.namespace);
            let shape = ctx.row(*id).map(|r| r.shape.clone());
            let recommendation = format!(
                "Reads of {ns} without a projection return whole documents of {mean} bytes on average, {pct:.0}% \
                 of them `{field}`: {reads} reads, {docs} documents. If the page does not show all of `{field}`, \
                 project it away (or take a slice), and if it keeps growing, keep a bounded subset embedded and \
                 the rest in its own collection (the subset pattern).",
                ns = s.namespace,
                pct = share * 100.0,
                reads = s.reads,
                docs = s.docs,
            );
            let fix = format!(
                "// leave `{field}` out where the page does not show it, or keep its latest 10:\n\
                 db.{coll}.find({{ /* the same filter */ }}, {{ {field}: 0 }})\n\
                 db.{coll}.find({{ /* the same filter */ }}, {{ {field}: {{ $slice: -10 }} }})"
            );
            out.push(
                Draft {
                    kind: "over_fetch",
                    severity: Severity::Low,
                    namespace: &s.namespace,
                    shapes: &[*id],
                    evidence: json!({
                        "count": s.reads,
                        "documents": s.docs,
                        "documents_looked_at": s.looked,
                        "document_bytes_mean": mean,
                        "field_share": (share * 1000.0).round() / 1000.0,
                        "shape": shape,
                        "apps": s.apps,
                        "thresholds": {
                            "over_fetch_min_reads": t.over_fetch_min_reads,
                            "over_fetch_min_doc_bytes": t.over_fetch_min_doc_bytes,
                            "over_fetch_min_field_share": t.over_fetch_min_field_share,
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

    fn product(reviews: usize) -> bson::Document {
        let reviews: Vec<bson::Document> =
            (0..reviews).map(|_| doc! {"stars": 5, "text": "x".repeat(200)}).collect();
        doc! {"_id": 1, "name": "lamp", "price": 25, "reviews": reviews}
    }

    #[test]
    fn a_page_that_pulls_a_large_embedded_array_is_an_over_fetch_and_a_projected_one_is_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for _ in 0..20 {
            s.find_one(c, "shop.products", doc! {"_id": 1}, Some(product(100)));
            s.exchange(
                c,
                doc! {"find": "products", "filter": {"_id": 1}, "projection": {"reviews": 0}, "$db": "shop"},
                crate::script::batch("shop.products", vec![doc! {"_id": 1, "name": "lamp"}], 0, true),
            );
            s.find_one(c, "shop.users", doc! {"_id": 1}, Some(doc! {"_id": 1, "name": "small"}));
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "over_fetch").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].namespace.as_str(), &f[0].extra["field"]),
            ("shop.products", &serde_json::json!("reviews"))
        );
    }
}
