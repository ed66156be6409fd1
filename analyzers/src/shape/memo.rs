//! Shapes remembered by skeleton: most requests are a handful of call sites sending
//! the same query with other values, and writing their shape again was a sixth of
//! the analysis (`perf` on `bench/analysis`, 2026-12-07).
//!
//! A skeleton is a keyed hash of what a command's shape depends on: the keys, the
//! BSON types, and the values a shape keeps (sort, projection, hint, an operator's
//! argument), but not the literals a shape turns into a type placeholder
//! (`{a: 5}` and `{a: 6}`: the same skeleton). Two commands with one skeleton have
//! one shape. Only what [`super::filter`] provably writes from the type alone is
//! left out of the hash; everything else goes in whole, which costs a miss, never
//! a wrong shape. `find`, the commonest command, is memoised; the rest are shaped
//! each time.

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
use mongotap_wire::Command;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::hash::Hasher;

use super::command::{self, StatementShape};
use crate::values::{Keyed, KeyedHasher};

/// Skeletons remembered; past this the memo starts over (a workload's call sites
/// are far fewer; an attacker's endless new ones only cost the shaping they would
/// have cost anyway).
const MAX_SKELETONS: usize = 4_096;

/// Which of the find fields that make its shape `key` is (see [`command::shapes`]):
/// filter, projection, let, sort, collation, hint, skip, limit, min, max.
fn find_part(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"filter" => 0,
        b"projection" => 1,
        b"let" => 2,
        b"sort" => 3,
        b"collation" => 4,
        b"hint" => 5,
        b"skip" => 6,
        b"limit" => 7,
        b"min" => 8,
        b"max" => 9,
        _ => return None,
    })
}

/// Comparison operators whose argument's shape is its type's placeholder (a
/// document, an array or a regex argument is hashed whole).
const COMPARISONS: [&[u8]; 6] = [b"$eq", b"$ne", b"$gt", b"$gte", b"$lt", b"$lte"];

/// Statement shapes by skeleton.
#[derive(Default)]
pub struct Memo {
    keyed: Keyed,
    shapes: FxHashMap<u64, Vec<StatementShape>>,
    /// Finds shaped from the memo, and shaped anew (for the tests).
    hits: u64,
    misses: u64,
}

impl Memo {
    /// The shapes of `c`, as [`command::shapes`] writes them: a find's lent from the
    /// memo (copying them out was two allocations a find), other commands' written.
    pub fn shapes(&mut self, c: &Command<'_>) -> Cow<'_, [StatementShape]> {
        let Some(skeleton) = (c.name == "find").then(|| self.find(c.body)).flatten() else {
            return Cow::Owned(command::shapes(c));
        };
        if self.shapes.len() >= MAX_SKELETONS && !self.shapes.contains_key(&skeleton) {
            self.shapes.clear();
        }
        match self.shapes.entry(skeleton) {
            Entry::Occupied(e) => {
                self.hits += 1;
                Cow::Borrowed(e.into_mut())
            }
            Entry::Vacant(e) => {
                self.misses += 1;
                Cow::Borrowed(e.insert(command::shapes(c)))
            }
        }
    }

    /// A find's skeleton; `None` when some part is beyond what it describes.
    fn find(&self, body: &RawDocument) -> Option<u64> {
        let mut h = self.keyed.hasher();
        h.write(b"find");
        for e in element::elements(body) {
            if e.kind == 0x08 {
                // The boolean options, false included (any boolean: more than the
                // shape keeps, which only splits skeletons).
                key(&mut h, &e);
                h.write_u8(e.value.first().copied().unwrap_or(2));
                continue;
            }
            let Some(part) = find_part(e.key) else {
                continue; // lsid, $db, batchSize...: not in the shape
            };
            key(&mut h, &e);
            match (part, e.as_document()) {
                (0, Some(filter)) => {
                    h.write_u8(b'f');
                    self::filter(&mut h, filter)?;
                }
                // skip and limit: whether they are there and not zero.
                (6 | 7, _) => h.write_u8(u8::from(command::zero(&e))),
                _ => whole(&mut h, &e),
            }
        }
        Some(h.finish())
    }
}

/// The top two bits of the words that say what follows, so that no element's
/// header, whole value or count can be read as another (the one-byte tags are below
/// 0x200): the hashed stream splits back into its parts one way only.
const HEADER: u64 = 0b10 << 62;
const WHOLE: u64 = 0b01 << 62;
const COUNT: u64 = 0b11 << 62;

/// An element's type and key (the type and the key's length in one word: each
/// word hashed is a multiplication).
fn key(h: &mut KeyedHasher, e: &Element<'_>) {
    h.write_u64(HEADER | u64::from(e.kind) | (e.key.len() as u64) << 8);
    h.write(e.key);
}

/// A value hashed as it is.
fn whole(h: &mut KeyedHasher, e: &Element<'_>) {
    h.write_u64(WHOLE | e.value.len() as u64);
    h.write(e.value);
}

/// A filter's skeleton: what [`super::filter`] writes depends on the keys, the
/// types, and the values of operators other than the comparisons; an equality's or
/// a comparison's scalar value only by its type, an array's (equality or `$in`)
/// only by its elements' types.
fn filter(h: &mut KeyedHasher, d: &RawDocument) -> Option<()> {
    let mut n = 0usize;
    for e in element::elements(d) {
        n += 1;
        key(h, &e);
        if e.key.first() == Some(&b'$') {
            whole(h, &e); // $and, $or, $expr...: as written
            continue;
        }
        match (e.kind, e.as_document()) {
            (0x03, Some(ops)) if super::operators(ops) => {
                let mut m = 0usize;
                for op in element::elements(ops) {
                    m += 1;
                    key(h, &op);
                    let scalar = !matches!(op.kind, 0x03 | 0x04 | 0x0B);
                    if scalar && COMPARISONS.contains(&op.key) {
                        h.write_u8(b't');
                    } else if op.kind == 0x04 && matches!(op.key, b"$in" | b"$nin") {
                        h.write_u8(b'a');
                        h.write_u64(types(&op)?);
                    } else {
                        whole(h, &op);
                    }
                }
                h.write_u64(COUNT | m as u64);
            }
            // A regular expression keeps whether it has flags.
            (0x0B, _) => whole(h, &e),
            (0x04, _) => {
                h.write_u8(b'a');
                h.write_u64(types(&e)?);
            }
            // A document equality (a DBRef too) or a scalar: its type only.
            _ => h.write_u8(b't'),
        }
    }
    h.write_u64(COUNT | n as u64);
    Some(())
}

/// The set of an array's element types, one bit each; `None` for a type outside
/// the BSON spec's (two such would share a bit yet be told apart by the shape).
fn types(a: &Element<'_>) -> Option<u64> {
    let mut bits = 0u64;
    for v in element::elements(a.as_array()?) {
        let bit = match v.kind {
            k @ 0x01..=0x13 => u32::from(k),
            0x7F => 62,
            0xFF => 63,
            _ => return None,
        };
        bits |= 1 << bit;
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Document};
    use mongotap_wire::{Frame, Message, OpMsg};

    fn shapes(memo: &mut Memo, body: &Document) -> Vec<StatementShape> {
        let bytes = OpMsg::new(mongotap_wire::Document::from_doc(body)).encode(1, 0);
        let frame = Frame::from_bytes(bytes).unwrap();
        let m = Message::decode(&frame).unwrap();
        let c = Command::from_message(&m).unwrap();
        let direct = command::shapes(&c);
        let memo = memo.shapes(&c);
        assert_eq!(*memo, direct[..], "{body}");
        direct
    }

    fn regex(options: &str) -> bson::Regex {
        bson::Regex {
            pattern: "^x".to_string().try_into().unwrap(),
            options: options.to_string().try_into().unwrap(),
        }
    }

    #[test]
    fn every_find_is_shaped_as_the_shaper_writes_it_and_the_same_call_site_is_remembered() {
        // Pairs that differ in one thing the shape keeps (each must be its own
        // skeleton), and repeats with other values (the same skeleton).
        let finds: Vec<Document> = vec![
            doc! {"filter": {"a": 5}},
            doc! {"filter": {"a": 6}},
            doc! {"filter": {"a": "x"}},
            doc! {"filter": {"a": {"$gt": 5}}},
            doc! {"filter": {"a": {"$gt": 7}}},
            doc! {"filter": {"a": {"$gt": [1]}}},
            doc! {"filter": {"a": {"$gt": ["x"]}}},
            doc! {"filter": {"a": {"$gt": []}}},
            doc! {"filter": {"a": {"$gt": {"x": 1}}}},
            doc! {"filter": {"a": {"$gt": {"y": 1}}}},
            doc! {"filter": {"a": {"$exists": true}}},
            doc! {"filter": {"a": {"$exists": false}}},
            doc! {"filter": {"a": {"$exists": 1}}},
            doc! {"filter": {"a": {"$exists": 0}}},
            doc! {"filter": {"a": {"$type": "string"}}},
            doc! {"filter": {"a": {"$type": "int"}}},
            doc! {"filter": {"a": {"$in": [1, 2]}}},
            doc! {"filter": {"a": {"$in": [3]}}},
            doc! {"filter": {"a": {"$in": [1, "x"]}}},
            doc! {"filter": {"a": {"$in": [Bson::MinKey]}}},
            doc! {"filter": {"a": {"$in": [Bson::MaxKey]}}},
            doc! {"filter": {"a": {"$in": [Bson::MinKey, Bson::MaxKey]}}},
            doc! {"filter": {"a": {"$in": []}}},
            doc! {"filter": {"a": [1, 2]}},
            doc! {"filter": {"a": []}},
            doc! {"filter": {"a": {"x": 1}}},
            doc! {"filter": {"a": {"$ref": "c", "$id": 1}}},
            doc! {"filter": {"a": regex("")}},
            doc! {"filter": {"a": regex("i")}},
            doc! {"filter": {"a": {"$regex": "^x", "$options": "i"}}},
            doc! {"filter": {"a": {"$regex": "^x"}}},
            doc! {"filter": {"$or": [{"a": 1}, {"b": 2}]}},
            doc! {"filter": {"$or": [{"a": 1}, {"b": 3}]}},
            doc! {"filter": {"a": 1, "b": 2}},
            doc! {"filter": {"b": 2, "a": 1}},
            doc! {"filter": {"a": {"b": {"$gt": 1}}}},
            doc! {"filter": {"a": 1}, "sort": {"a": 1}},
            doc! {"filter": {"a": 1}, "sort": {"a": -1}},
            doc! {"filter": {"a": 1}, "projection": {"a": 1}},
            doc! {"filter": {"a": 1}, "projection": {"a": 0}},
            doc! {"filter": {"a": 1}, "skip": 0},
            doc! {"filter": {"a": 1}, "skip": 20},
            doc! {"filter": {"a": 1}, "skip": 40},
            doc! {"filter": {"a": 1}, "limit": 1, "singleBatch": true},
            doc! {"filter": {"a": 1}, "limit": 1, "singleBatch": false},
            doc! {"filter": {"a": 1}, "hint": "a_1"},
            doc! {"filter": {"a": 1}, "hint": "b_1"},
            doc! {"filter": 1},
            doc! {},
        ];
        let mut memo = Memo::default();
        let mut distinct = std::collections::BTreeSet::new();
        for round in 0..2 {
            for (i, f) in finds.iter().enumerate() {
                let mut body = doc! {"find": "c"};
                body.extend(f.clone());
                body.insert("lsid", doc! {"id": i as i64 + round * 1000});
                body.insert("$db", "shop");
                distinct.insert(format!("{:?}", shapes(&mut memo, &body)));
            }
        }
        // Each pass shaped every find (the assertion is in `shapes`); the second
        // pass found each in the memo.
        assert_eq!(memo.hits + memo.misses, 2 * finds.len() as u64);
        assert!(memo.hits >= finds.len() as u64, "hits {} misses {}", memo.hits, memo.misses);
        // Values alone never split a shape: fewer shapes than finds.
        assert!(distinct.len() < finds.len());
    }

    #[test]
    fn a_full_memo_starts_over() {
        let mut memo = Memo::default();
        for i in 0..MAX_SKELETONS + 10 {
            let mut filter = Document::new();
            filter.insert(format!("f{i}"), 1);
            shapes(&mut memo, &doc! {"find": "c", "filter": filter, "$db": "shop"});
        }
        assert!(memo.shapes.len() <= MAX_SKELETONS);
        assert_eq!(memo.misses, MAX_SKELETONS as u64 + 10);
    }
}
