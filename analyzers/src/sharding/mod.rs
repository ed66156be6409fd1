//! Shard keys from the traffic: the guides' last checklist question ("if sharding
//! later, does the model work with a sensible shard key?"), answered before anyone
//! shards, for every collection with enough traffic.
//!
//! MongoDB's `analyzeShardKey` (7.0+) judges one candidate key at a time from
//! queries sampled on a running cluster. Here every query and write is seen: the
//! read and write distribution of each candidate comes from the access-pattern
//! table's shapes ([`distribution`]), the key's characteristics from the inserted
//! documents, kept here as keyed hashes in bounded sketches: distinct values
//! (HyperLogLog), the most common values' counts (Space-Saving) and whether values
//! rise with time (monotonic: ObjectIds, dates, counters). [`section`] ranks the
//! candidates and writes the report's `shard_keys` section; [`current`] judges the
//! key a collection is sharded on now (`bad_shard_key`).

pub mod current;
pub mod distribution;
pub mod section;

use std::hash::Hasher;

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
use rustc_hash::FxHashMap;

use crate::namespace::Change as Lifecycle;
use crate::shape::command::Category;
use crate::sketch::{Distinct, TopK};
use crate::values::Keyed;
use crate::view::OpView;

/// Collections followed at most.
const MAX_COLLECTIONS: usize = 1_000;
/// Top-level fields followed per collection (the first seen in inserts).
const MAX_FIELDS: usize = 16;

/// What the inserts say about one field's values.
#[derive(Debug, Clone, Default)]
pub struct FieldValues {
    pub name: String,
    pub distinct: Distinct,
    pub common: TopK<8>,
    /// Inserts (of documents carrying it) whose value differed from the one before:
    /// in all, at the front (within a tolerance of the largest so far), and at the
    /// back (of the smallest so far).
    pub differing: u64,
    pub rising: u64,
    pub falling: u64,
    /// Values that were ObjectIds: as `_id`, they rise with time by construction.
    pub object_ids: u64,
    last: Option<f64>,
    range: Option<(f64, f64)>,
}

impl FieldValues {
    /// Whether the values rise (or fall) with time: at least `share` of the inserts
    /// whose value differed from the one before at the front (or all behind it),
    /// over at least 20 of them; `None` when fewer.
    pub fn monotonic(&self, share: f64) -> Option<bool> {
        // The manual: ObjectIds increase with time (their first bytes are a timestamp)
        // when they are made at insert: `_id`. Elsewhere an ObjectId is a reference to
        // another document (a customer, a user), in no time order: its values decide.
        if self.name == "_id" && self.object_ids * 2 > self.inserts() && self.inserts() > 0 {
            return Some(true);
        }
        (self.differing >= 20)
            .then(|| (self.rising.max(self.falling) as f64) >= share * self.differing as f64)
    }

    /// Documents inserted with the field.
    pub fn inserts(&self) -> u64 {
        self.common.total
    }

    /// The most common value's share of the inserts that carried the field.
    pub fn most_common_share(&self) -> f64 {
        self.common.top() as f64 / self.common.total.max(1) as f64
    }

    fn add(&mut self, keyed: &Keyed, e: &Element<'_>) {
        let mut h = keyed.hasher();
        h.write_u8(e.kind);
        h.write(e.value);
        let hash = h.finish();
        self.distinct.add(hash);
        self.common.add(hash);
        // Numbers as they are; dates and ObjectIds (by their timestamp) with a second
        // of tolerance: app servers' clocks and processes inserting within one
        // second interleave, and still all write at the front.
        let ordered = match e.kind {
            0x01 => e.value.try_into().ok().map(|b| (f64::from_le_bytes(b), 0.0)),
            0x10 | 0x12 => e.as_i64().map(|i| (i as f64, 0.0)),
            0x09 => e.value.try_into().ok().map(|b| (i64::from_le_bytes(b) as f64, 1000.0)),
            0x07 => e
                .value
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(|b| (f64::from(u32::from_be_bytes(b)), 1.0)),
            _ => None,
        };
        self.object_ids += u64::from(e.kind == 0x07);
        let Some((x, tolerance)) = ordered.filter(|(x, _)| x.is_finite()) else { return };
        if let (Some(last), Some((back, front))) = (self.last, self.range) {
            if x != last {
                self.differing += 1;
                self.rising += u64::from(x >= front - tolerance);
                self.falling += u64::from(x <= back + tolerance);
            }
        }
        self.last = Some(x);
        self.range = Some(self.range.map_or((x, x), |(b, f)| (b.min(x), f.max(x))));
    }
}

/// One collection's inserted values.
#[derive(Debug, Clone, Default)]
pub struct Collection {
    /// Documents inserted since the collection last started afresh.
    pub inserts: u64,
    pub fields: Vec<FieldValues>,
}

impl Collection {
    /// What is known of `field`'s values.
    pub fn field(&self, name: &str) -> Option<&FieldValues> {
        self.fields.iter().find(|f| f.name == name)
    }

    fn insert(&mut self, keyed: &Keyed, doc: &RawDocument) {
        self.inserts += 1;
        for e in element::elements(doc) {
            // Scalars only: a shard key's fields hold no arrays, and sub-documents are
            // followed by their dotted paths in the filters, not here.
            if matches!(e.kind, 0x03 | 0x04 | 0x0A | 0x06) {
                continue;
            }
            let i = match self.fields.iter().position(|f| f.name.as_bytes() == e.key) {
                Some(i) => i,
                None if self.fields.len() < MAX_FIELDS && crate::names::plausible(e.key) => {
                    self.fields.push(FieldValues {
                        name: String::from_utf8_lossy(e.key).into_owned(),
                        ..FieldValues::default()
                    });
                    self.fields.len() - 1
                }
                None => continue,
            };
            self.fields[i].add(keyed, &e);
        }
    }
}

/// Every collection's inserted values.
#[derive(Debug, Default)]
pub struct ShardKeys {
    keyed: Keyed,
    collections: FxHashMap<String, Collection>,
    /// Collections refused past the bound.
    pub refused: u64,
}

impl ShardKeys {
    /// What the inserts into `namespace` showed.
    pub fn get(&self, namespace: &str) -> Option<&Collection> {
        self.collections.get(namespace)
    }

    /// Learns from one operation.
    pub fn observe(&mut self, v: &OpView<'_>) {
        match &v.change {
            Some(Lifecycle::Dropped(ns) | Lifecycle::Emptied(ns) | Lifecycle::Created(ns)) => {
                self.collections.remove(ns.as_str());
            }
            Some(Lifecycle::Renamed { from, to }) => {
                self.collections.remove(from.as_str());
                self.collections.remove(to.as_str());
            }
            Some(Lifecycle::DatabaseDropped(db)) => {
                self.collections.retain(|ns, _| ns.split_once('.').is_none_or(|(d, _)| d != db));
            }
            None => {}
        }
        if v.category != Category::Write || v.op.failed() {
            return;
        }
        let inserts = v.inserts();
        if inserts.is_empty() {
            return;
        }
        let ns = &*v.op.namespace;
        for (other, d) in inserts.iter().copied() {
            let ns = other.unwrap_or(ns);
            if !self.collections.contains_key(ns) {
                if self.collections.len() >= MAX_COLLECTIONS {
                    self.refused += 1;
                    continue;
                }
                self.collections.insert(ns.to_owned(), Collection::default());
            }
            if let Some(c) = self.collections.get_mut(ns) {
                c.insert(&self.keyed, d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, DateTime, RawDocumentBuf};

    #[test]
    fn ids_and_dates_rise_customers_do_not_and_a_status_is_few_values() {
        let keyed = Keyed::default();
        let mut c = Collection::default();
        for i in 0..200i64 {
            let status = ["new", "paid", "sent"][(i % 3) as usize];
            let d = doc! {"_id": ObjectId::new(), "customerId": (i * 37) % 50, "status": status,
            "createdAt": DateTime::from_millis(1_700_000_000_000 + i * 1000), "lines": [1, 2]};
            c.insert(&keyed, &RawDocumentBuf::try_from(&d).unwrap());
        }
        assert_eq!(c.inserts, 200);
        let names: Vec<&str> = c.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["_id", "customerId", "status", "createdAt"], "arrays are no shard key");
        assert_eq!(
            c.field("_id").unwrap().monotonic(0.9),
            Some(true),
            "ObjectIds of one second are all at the front"
        );
        assert_eq!(c.field("createdAt").unwrap().monotonic(0.9), Some(true));
        assert_eq!(c.field("customerId").unwrap().monotonic(0.9), Some(false));
        let status = c.field("status").unwrap();
        assert!(status.distinct.estimate() <= 4, "{}", status.distinct.estimate());
        assert!((status.most_common_share() - 0.335).abs() < 0.01, "{}", status.most_common_share());
        let customers = c.field("customerId").unwrap().distinct.estimate();
        assert!((44..=56).contains(&customers), "{customers}");
    }
}
