//! Bucket candidates (`bucket_candidate`): a stream of small inserts of
//! time-stamped documents, many per source (a sensor, a device, a meter): one
//! document per reading. The seed's bucket pattern groups them, one document per
//! source per hour with an array of readings, which cuts the documents and index
//! entries by the readings per bucket; MongoDB's time-series collections do it by
//! themselves.
//!
//! From the wire: inserts of at most a few documents, whose documents have a date
//! field and a handful of others; for each candidate source field (a string,
//! integer or ObjectId other than `_id`), the distinct values as keyed hashes.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::json;

use mongotap_wire::element::{self, Element};

use crate::detectors::MAX_NAMES;
use crate::detectors::{collection, Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::{plausible, Paths};
use crate::operation::NO_APP;
use crate::values::{At, Keyed};
use crate::view::{OpView, ShapeId};

/// A reading has at most this many fields.
const MAX_FIELDS: usize = 10;
/// Distinct source values remembered per field.
const MAX_DISTINCT: usize = 4_096;
/// Candidate source fields per collection.
const MAX_CANDIDATES: usize = 8;

#[derive(Default)]
struct Candidate {
    docs: u64,
    distinct: FxHashSet<u64>,
    saturated: bool,
    /// A value that was not a small integer was seen: a 1-5 rating or a status
    /// code is a category of the documents, never the source of a series.
    beyond_small_ints: bool,
    /// A string or ObjectId value was seen: what identifiers are made of (a number
    /// with many values can as well be a measurement, such as a heart rate).
    textual: bool,
}

/// Integers up to this are categories (ratings, levels, codes), not sources.
const SMALL_INT: i64 = 16;

/// Whether a document can be a reading: readings are a time, a source and a few
/// measurements. Free text (a review's words) or a list (an order's lines) makes it
/// an entity, which the bucket pattern does not fit.
fn reading_like(fields: &[Element<'_>]) -> bool {
    fields.iter().all(|e| match e.kind {
        0x04 => false,
        0x02 => e.value.len() <= 4 + 64 + 1,
        _ => true,
    })
}

#[derive(Default)]
struct Stream {
    namespace: String,
    docs: u64,
    inserts: u64,
    time_field: Option<u32>,
    candidates: FxHashMap<u32, Candidate>,
    shapes: BTreeSet<ShapeId>,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
}

/// The bucket-candidate detector.
pub struct Bucket {
    keyed: Keyed,
    names: Paths,
    max_per_insert: u64,
    max_streams: usize,
    streams: FxHashMap<String, Stream>,
    refused: u64,
}

fn source_like(e: &Element<'_>) -> bool {
    match e.kind {
        0x07 | 0x10 | 0x12 => true,
        0x02 => e.value.len() <= 4 + 64 + 1,
        _ => false,
    }
}

impl Bucket {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> Bucket {
        Bucket {
            keyed: Keyed::default(),
            names: Paths::default(),
            max_per_insert: t.bucket_max_docs_per_insert,
            max_streams: t.max_patterns as usize,
            streams: FxHashMap::default(),
            refused: 0,
        }
    }
}

impl Detector for Bucket {
    fn name(&self) -> &'static str {
        "bucket_candidate"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        if cmd.name != "insert" || op.failed() {
            return;
        }
        let docs = v.inserts();
        if docs.is_empty() || docs.len() as u64 > self.max_per_insert {
            return;
        }
        let Self { keyed, names, streams, max_streams, refused, .. } = self;
        if !streams.contains_key(&*op.namespace) && streams.len() >= *max_streams {
            *refused += 1;
            return;
        }
        let stream = streams.entry(op.namespace.to_string()).or_insert_with(|| Stream {
            namespace: op.namespace.to_string(),
            first_at: op.started_at,
            ..Stream::default()
        });
        stream.inserts += 1;
        stream.last_at = op.started_at;
        if let Some(Some(id)) = v.shape_ids.first() {
            if stream.shapes.len() < MAX_NAMES {
                stream.shapes.insert(*id);
            }
        }
        let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut stream.apps, app);
        for (_, d) in docs {
            let fields: Vec<Element<'_>> = element::elements(d).take(MAX_FIELDS + 1).collect();
            if fields.len() > MAX_FIELDS {
                continue;
            }
            let Some(time) = fields.iter().find(|e| e.kind == 0x09) else { continue };
            if !reading_like(&fields) {
                continue;
            }
            stream.docs += 1;
            if stream.time_field.is_none() {
                stream.time_field = names.id(At { path: time.key, array: None });
            }
            for e in fields.iter().filter(|e| e.key != b"_id" && source_like(e) && plausible(e.key)) {
                let Some(field) = names.id(At { path: e.key, array: None }) else { continue };
                let n = stream.candidates.len();
                let c = match stream.candidates.get_mut(&field) {
                    Some(c) => c,
                    None if n >= MAX_CANDIDATES => continue,
                    None => stream.candidates.entry(field).or_default(),
                };
                c.docs += 1;
                c.textual |= matches!(e.kind, 0x02 | 0x07);
                if !c.beyond_small_ints {
                    c.beyond_small_ints = !e.as_i64().is_some_and(|n| (0..=SMALL_INT).contains(&n));
                }
                if let Some(h) = keyed.link(e) {
                    if c.distinct.len() < MAX_DISTINCT {
                        c.distinct.insert(h);
                    } else if !c.distinct.contains(&h) {
                        c.saturated = true;
                    }
                }
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("collections", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        let mut streams: Vec<&Stream> =
            self.streams.values().filter(|s| s.docs >= t.bucket_min_inserts).collect();
        streams.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        for s in streams {
            // The source: many documents per value, values enough to be sources and not
            // small integers (categories); of those, strings and ObjectIds first (what
            // identifiers are made of), then the most values (an identifier has more
            // values than any category beside it).
            let best = s
                .candidates
                .iter()
                .filter(|(_, c)| !c.saturated && c.docs == s.docs && c.beyond_small_ints)
                .map(|(f, c)| (*f, c.distinct.len() as u64, c.textual))
                .filter(|(_, d, _)| {
                    *d >= t.bucket_min_sources && s.docs / d.max(&1) >= t.bucket_min_per_source
                })
                .max_by_key(|(f, d, textual)| {
                    (*textual, *d, std::cmp::Reverse(self.names.name(*f).to_owned()))
                })
                .map(|(f, d, _)| (f, d));
            let Some((field, sources)) = best else { continue };
            let field = self.names.name(field).to_owned();
            let time = s.time_field.map_or("ts", |f| self.names.name(f)).to_owned();
            let per_source = s.docs / sources.max(1);
            let span = (s.last_at.saturating_sub(s.first_at) as f64 / 1e6).max(1.0);
            let rate = s.docs as f64 / span;
            let severity = if rate >= 100.0 { Severity::High } else { Severity::Medium };
            let coll = collection(&s.namespace);
            let recommendation = format!(
                "{coll} receives one small document per reading: {docs} documents in {inserts} inserts ({rate:.0} \
                 a second), about {per_source} per {field} over {sources} {field} values, each with its own \
                 document and index entries. Group the readings of one {field} per time window into one document \
                 (the bucket pattern), or let MongoDB do it with a time-series collection ({field} as the meta \
                 field, {time} as the time field).",
                docs = s.docs,
                inserts = s.inserts,
            );
            let fix = format!(
                "// a time-series collection (MongoDB 5.0+), for new data:\n\
                 db.createCollection(\"{coll}_ts\", {{ timeseries: {{ timeField: \"{time}\", metaField: \"{field}\", granularity: \"seconds\" }} }})\n\
                 // or the bucket pattern: one document per {field} per hour, bounded by a count:\n\
                 db.{coll}.updateOne(\n  {{ {field}: reading.{field}, hour: hourOf(reading.{time}), count: {{ $lt: 200 }} }},\n  {{ $push: {{ readings: reading }}, $inc: {{ count: 1 }} }},\n  {{ upsert: true }}\n)"
            );
            let shapes: Vec<ShapeId> = s.shapes.iter().copied().collect();
            out.push(
                Draft {
                    kind: "bucket_candidate",
                    severity,
                    namespace: &s.namespace,
                    shapes: &shapes,
                    evidence: json!({
                        "count": s.docs,
                        "inserts": s.inserts,
                        "documents_per_second": (rate * 10.0).round() / 10.0,
                        "sources": sources,
                        "documents_per_source": per_source,
                        "time_field": time,
                        "apps": s.apps,
                        "thresholds": {
                            "bucket_min_inserts": t.bucket_min_inserts,
                            "bucket_min_sources": t.bucket_min_sources,
                            "bucket_min_per_source": t.bucket_min_per_source,
                            "bucket_max_docs_per_insert": t.bucket_max_docs_per_insert,
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
    use bson::{doc, DateTime};

    use crate::script::Script;

    fn insert(s: &mut Script, c: u64, d: bson::Document) {
        s.exchange(c, doc! {"insert": "readings", "documents": [d], "$db": "iot"}, doc! {"n": 1, "ok": 1.0});
    }

    #[test]
    fn one_document_per_reading_is_a_bucket_candidate_and_sparse_events_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "iot", "PyMongo 4.20.1");
        for i in 0..600i64 {
            insert(
                &mut s,
                c,
                doc! {"sensorId": format!("s-{}", i % 20), "kind": "temp", "ts": DateTime::from_millis(i * 1000), "value": 21.5},
            );
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "bucket_candidate").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].extra["field"], "sensorId", "not the one-value category");
        assert_eq!(f[0].evidence["documents_per_source"], 30);
        assert!(f[0].fix.as_deref().unwrap().contains("metaField: \"sensorId\""));

        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..1200i64 {
            let kind = ["paid", "shipped", "placed"][(i % 3) as usize];
            s.exchange(
                c,
                doc! {"insert": "events", "documents": [{"orderId": i / 2, "at": DateTime::from_millis(i), "kind": kind}], "$db": "shop"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        assert!(s.run().findings().iter().all(|f| f.kind != "bucket_candidate"));
    }

    #[test]
    fn the_identifier_is_the_source_not_a_category_with_fewer_values() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "iot", "PyMongo 4.20.1");
        for i in 0..600i64 {
            let kind = ["temp", "humidity", "pressure", "co2", "light"][(i % 5) as usize];
            // A measurement stored as an integer with more values than there are sensors.
            let bpm = 60 + (i * 7) % 25;
            insert(
                &mut s,
                c,
                doc! {"sensorId": format!("s-{}", i % 20), "kind": kind, "ts": DateTime::from_millis(i * 1000), "bpm": bpm},
            );
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "bucket_candidate").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].extra["field"], "sensorId");
    }

    #[test]
    fn reviews_inserted_one_by_one_are_entities_not_readings() {
        // A 1-5 rating is a category, whatever the number of reviews per rating.
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..600i64 {
            s.exchange(
                c,
                doc! {"insert": "reviews", "documents": [{"productId": i, "rating": (i % 5) + 1, "at": DateTime::from_millis(i * 1000)}], "$db": "shop"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        // Reviews with their words: free text is no reading, even with 30 per product.
        for i in 0..600i64 {
            let text = "Arrived on time, works as described, would buy again from this shop.";
            s.exchange(
                c,
                doc! {"insert": "comments", "documents": [{"productId": i % 20, "text": text, "at": DateTime::from_millis(i * 1000)}], "$db": "shop"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "bucket_candidate").collect();
        assert!(f.is_empty(), "{f:#?}");
    }
}
