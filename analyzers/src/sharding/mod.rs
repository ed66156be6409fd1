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
//! candidates and writes the report's `shard_keys` section.

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

/// A value in the order the server sorts it, for the monotonicity check.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum Ordered {
    Number(f64),
    Date(i64),
    ObjectId(u128),
}

/// What the inserts say about one field's values.
#[derive(Debug, Clone, Default)]
pub struct FieldValues {
    pub name: String,
    pub distinct: Distinct,
    pub common: TopK<8>,
    /// Consecutive inserts (of documents carrying it) whose value rose, or fell.
    pub rising: u64,
    pub falling: u64,
    last: Option<Ordered>,
}

impl FieldValues {
    /// Whether the values rise (or fall) with time: at least `share` of the
    /// consecutive pairs, over at least 20 of them.
    pub fn monotonic(&self, share: f64) -> bool {
        let pairs = self.rising + self.falling;
        pairs >= 20 && (self.rising.max(self.falling) as f64) >= share * pairs as f64
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
        let ordered = match e.kind {
            0x01 => e.value.try_into().ok().map(|b| Ordered::Number(f64::from_le_bytes(b))),
            0x10 | 0x12 => e.as_i64().map(|i| Ordered::Number(i as f64)),
            0x09 => e.value.try_into().ok().map(|b| Ordered::Date(i64::from_le_bytes(b))),
            0x07 => e.value.get(..12).map(|b| {
                let mut x = [0u8; 16];
                x[4..].copy_from_slice(b);
                Ordered::ObjectId(u128::from_be_bytes(x))
            }),
            _ => None,
        };
        if let (Some(prev), Some(now)) = (self.last, ordered) {
            if std::mem::discriminant(&prev) == std::mem::discriminant(&now) {
                match now.partial_cmp(&prev) {
                    Some(std::cmp::Ordering::Greater) => self.rising += 1,
                    Some(std::cmp::Ordering::Less) => self.falling += 1,
                    _ => {}
                }
            }
        }
        if ordered.is_some() {
            self.last = ordered;
        }
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
        let ns = v.op.namespace.as_str();
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
        assert!(c.field("_id").unwrap().monotonic(0.9));
        assert!(c.field("createdAt").unwrap().monotonic(0.9));
        assert!(!c.field("customerId").unwrap().monotonic(0.9));
        let status = c.field("status").unwrap();
        assert!(status.distinct.estimate() <= 4, "{}", status.distinct.estimate());
        assert!((status.most_common_share() - 0.335).abs() < 0.01, "{}", status.most_common_share());
        let customers = c.field("customerId").unwrap().distinct.estimate();
        assert!((44..=56).contains(&customers), "{customers}");
    }
}
