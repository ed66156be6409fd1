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
//! a wrong shape. `find` and `update`, the commonest commands, are memoised; the
//! rest are shaped each time.

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
    /// Commands shaped from the memo, and shaped anew (for the tests).
    hits: u64,
    misses: u64,
}

impl Memo {
    /// The shapes of `c`, as [`command::shapes`] writes them: a find's or an
    /// update's lent from the memo (copying them out was two allocations a find),
    /// other commands' written.
    pub fn shapes(&mut self, c: &Command<'_>) -> Cow<'_, [StatementShape]> {
        let skeleton = match c.name {
            "find" => self.find(c.body),
            "update" => self.update(c),
            _ => None,
        };
        let Some(skeleton) = skeleton else {
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

    /// An update's skeleton: each statement's, in order (see
    /// `command::update_statement`), from the body's array or a sequence as the
    /// shaper takes them.
    fn update(&self, c: &Command<'_>) -> Option<u64> {
        let mut h = self.keyed.hasher();
        h.write(b"update");
        let statements = c.documents("updates");
        for d in &statements {
            let mut n = 0usize;
            for e in element::elements(d) {
                if !command::UPDATE_KEYS.iter().any(|k| element::same(k.as_bytes(), e.key)) {
                    continue; // sort, c, and what else the shape leaves out
                }
                n += 1;
                key(&mut h, &e);
                match (e.key, e.as_document()) {
                    (b"q", Some(q)) => {
                        h.write_u8(b'f');
                        filter(&mut h, q)?;
                    }
                    (b"u", Some(u)) => {
                        h.write_u8(b'u');
                        update_document(&mut h, u)?;
                    }
                    _ => whole(&mut h, &e),
                }
            }
            h.write_u64(COUNT | n as u64);
        }
        h.write_u64(COUNT | statements.len() as u64);
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

/// A key without its type: an update path, whose value the shape leaves out.
fn name(h: &mut KeyedHasher, e: &Element<'_>) {
    h.write_u64(HEADER | (e.key.len() as u64) << 8);
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
            (0x03, Some(ops)) if super::starts_with_operator(ops) => {
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

/// An update document's skeleton: what [`super::update_kind`] writes depends on the
/// keys (operators, paths, a replacement's fields), a replacement's types and
/// arrays' element types, and the modifiers' keys of a `$push` or `$addToSet`
/// (`$each`, `$slice`); not on the values an operator sets, nor on their types.
fn update_document(h: &mut KeyedHasher, u: &RawDocument) -> Option<()> {
    let operators = super::starts_with_operator(u);
    let mut n = 0usize;
    for op in element::elements(u) {
        n += 1;
        key(h, &op);
        match (operators, op.as_document()) {
            (true, Some(paths)) => {
                let modifiers = super::with_modifiers(op.key);
                let mut m = 0usize;
                for path in element::elements(paths) {
                    m += 1;
                    name(h, &path);
                    let Some(mods) =
                        path.as_document().filter(|d| modifiers && super::starts_with_operator(d))
                    else {
                        continue;
                    };
                    h.write_u8(b'm');
                    let mut k = 0usize;
                    for x in element::elements(mods) {
                        k += 1;
                        key(h, &x);
                    }
                    h.write_u64(COUNT | k as u64);
                }
                h.write_u64(COUNT | m as u64);
            }
            _ if op.kind == 0x04 => {
                h.write_u8(b'a');
                h.write_u64(types(&op)?);
            }
            // An operator's document that cannot be read: whole (it is "?object").
            (true, None) if op.kind == 0x03 => whole(h, &op),
            // A value the shape writes by its type alone.
            _ => {}
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
    fn every_update_is_shaped_as_the_shaper_writes_it_and_the_same_call_site_is_remembered() {
        // Statements that differ in one thing the shape keeps, and repeats with
        // other values.
        let statements: Vec<Document> = vec![
            doc! {"q": {"_id": 1}, "u": {"$set": {"a": 1}}},
            doc! {"q": {"_id": 2}, "u": {"$set": {"a": "x"}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {"b": 1}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {"a": 1, "b": 1}}},
            doc! {"q": {"_id": 1}, "u": {"$inc": {"a": 1}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {"lines.3.qty": 1}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {"lines.12.qty": 5}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"sku": "P-1", "qty": 1}}}},
            doc! {"q": {"_id": 2}, "u": {"$push": {"lines": {"sku": "P-2", "qty": 7}}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"$each": [1], "$slice": -10}}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"$each": [2], "$slice": -20}}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"$each": [1]}}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"$each": [1], "$position": 0}}}},
            doc! {"q": {"_id": 1}, "u": {"$push": {"lines": {"x": 1, "$each": [1]}}}},
            doc! {"q": {"_id": 1}, "u": {"a": 1, "$set": {"b": 1}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {"b": 1}, "a": 1}},
            doc! {"q": {"_id": 1}, "u": {"$addToSet": {"tags": {"$each": ["a"]}}}},
            doc! {"q": {"_id": 1}, "u": {"$addToSet": {"tags": "a"}}},
            doc! {"q": {"_id": 1}, "u": {"$set": 1}},
            doc! {"q": {"_id": 1}, "u": {"$set": [1, 2]}},
            doc! {"q": {"_id": 1}, "u": {"$set": ["x"]}},
            doc! {"q": {"_id": 1}, "u": {"_id": 1, "name": "x", "lines": [1, 2]}},
            doc! {"q": {"_id": 2}, "u": {"_id": 2, "name": "y", "lines": [3]}},
            doc! {"q": {"_id": 1}, "u": {"_id": 1, "name": "x", "lines": ["a"]}},
            doc! {"q": {"_id": 1}, "u": {"_id": 1, "name": 5}},
            doc! {"q": {"_id": 1}, "u": {"_id": 1, "address": {"city": "Pune"}}},
            doc! {"q": {"_id": 1}, "u": [{"$set": {"total": {"$sum": "$lines.price"}}}]},
            doc! {"q": {"_id": 1}, "u": "not an update"},
            doc! {"q": {"a": {"$gt": 5}}, "u": {"$set": {"a": 1}}, "multi": true},
            doc! {"q": {"a": {"$gt": 6}}, "u": {"$set": {"a": 1}}, "multi": false},
            doc! {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "upsert": true},
            doc! {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "multi": 1},
            doc! {"q": {"a": 1}, "u": {"$set": {"x.$[e].n": 1}}, "arrayFilters": [{"e.n": {"$gt": 1}}]},
            doc! {"q": {"a": 1}, "u": {"$set": {"x.$[e].n": 1}}, "arrayFilters": [{"e.m": {"$gt": 1}}]},
            doc! {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "hint": "a_1"},
            doc! {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "hint": "b_1"},
            doc! {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "collation": {"locale": "fr"}},
            doc! {"q": 1, "u": {"$set": {"a": 1}}},
            doc! {"u": {"$set": {"a": 1}}},
        ];
        let mut memo = Memo::default();
        let mut distinct = std::collections::BTreeSet::new();
        for round in 0..2 {
            if round == 1 {
                // Repeats with other values were found in the first pass already.
                assert!(memo.misses < statements.len() as u64, "misses {}", memo.misses);
            }
            for (i, st) in statements.iter().enumerate() {
                let body = doc! {"update": "c", "updates": [st.clone()], "ordered": true, "$db": "shop",
                "lsid": {"id": i as i64 + round * 1000}};
                distinct.insert(format!("{:?}", shapes(&mut memo, &body)));
            }
        }
        assert_eq!(memo.hits + memo.misses, 2 * statements.len() as u64);
        assert!(memo.hits >= statements.len() as u64, "hits {} misses {}", memo.hits, memo.misses);
        assert!(distinct.len() < statements.len());
        // A value's type is no part of an operator's path: one skeleton.
        let before = memo.misses;
        for value in [Bson::Int32(1), Bson::String("x".into()), Bson::Document(doc! {"y": 1})] {
            shapes(
                &mut memo,
                &doc! {"update": "c", "updates": [{"q": {"_id": 9}, "u": {"$set": {"typed": value}}}], "$db": "shop"},
            );
        }
        assert_eq!(memo.misses, before + 1);
        // Several statements: their order and number are the skeleton's too.
        let (a, b) = (statements[0].clone(), statements[4].clone());
        for updates in
            [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()], vec![a.clone(), a.clone(), b.clone()]]
        {
            shapes(&mut memo, &doc! {"update": "c", "updates": updates, "$db": "shop"});
        }
    }

    #[test]
    fn an_update_whose_statements_come_in_a_sequence_is_remembered_too() {
        use mongotap_wire::{DocumentSequence, Section};
        let statement = |id: i32| doc! {"q": {"_id": id}, "u": {"$inc": {"n": 1}}};
        let mut memo = Memo::default();
        for id in 0..3 {
            let mut msg = OpMsg::new(mongotap_wire::Document::from_doc(&doc! {"update": "c", "$db": "shop"}));
            msg.sections.push(Section::Sequence(DocumentSequence {
                identifier: "updates".into(),
                documents: [statement(id), statement(id + 1)]
                    .iter()
                    .map(mongotap_wire::Document::from_doc)
                    .collect(),
            }));
            let frame = Frame::from_bytes(msg.encode(1, 0)).unwrap();
            let m = Message::decode(&frame).unwrap();
            let c = Command::from_message(&m).unwrap();
            assert_eq!(*memo.shapes(&c), command::shapes(&c)[..]);
        }
        assert_eq!((memo.hits, memo.misses), (2, 1));
        // Statements in the body's array and in a sequence both, in that order.
        for body_first in [true, false] {
            let (x, y) = if body_first {
                (statement(1), doc! {"q": {"a": 1}, "u": {"$set": {"b": 1}}})
            } else {
                (doc! {"q": {"a": 1}, "u": {"$set": {"b": 1}}}, statement(1))
            };
            let mut msg = OpMsg::new(mongotap_wire::Document::from_doc(
                &doc! {"update": "c", "updates": [x], "$db": "shop"},
            ));
            msg.sections.push(Section::Sequence(DocumentSequence {
                identifier: "updates".into(),
                documents: vec![mongotap_wire::Document::from_doc(&y)],
            }));
            let frame = Frame::from_bytes(msg.encode(1, 0)).unwrap();
            let m = Message::decode(&frame).unwrap();
            let c = Command::from_message(&m).unwrap();
            assert_eq!(*memo.shapes(&c), command::shapes(&c)[..]);
        }
    }

    #[test]
    fn an_update_statement_with_a_key_written_twice_is_shaped_by_the_one_the_shaper_takes() {
        let doc = |elements: &[(u8, &str, &[u8])]| crate::values::bson_of(elements);
        let set = doc(&[(0x03, "$set", &doc(&[(0x10, "a", &1i32.to_le_bytes())]))]);
        let inc = doc(&[(0x03, "$inc", &doc(&[(0x10, "b", &1i32.to_le_bytes())]))]);
        let q = doc(&[(0x10, "_id", &1i32.to_le_bytes())]);
        let mut memo = Memo::default();
        let mut seen = Vec::new();
        for (first, last) in [(&set, &inc), (&inc, &set), (&set, &inc)] {
            let statement = doc(&[(0x03, "q", &q), (0x03, "u", first), (0x03, "u", last)]);
            let body = doc(&[
                (0x02, "update", &[&2i32.to_le_bytes()[..], b"c\0"].concat()),
                (0x04, "updates", &doc(&[(0x03, "0", &statement)])),
                (0x02, "$db", &[&5i32.to_le_bytes()[..], b"shop\0"].concat()),
            ]);
            let body = mongotap_wire::Document::from_bytes(bytes::Bytes::from(body)).unwrap();
            let frame = Frame::from_bytes(OpMsg::new(body).encode(1, 0)).unwrap();
            let m = Message::decode(&frame).unwrap();
            let c = Command::from_message(&m).unwrap();
            let direct = command::shapes(&c);
            assert_eq!(*memo.shapes(&c), direct[..]);
            seen.push(direct);
        }
        assert_ne!(seen[0], seen[1], "the last `u` is the one shaped");
        assert_eq!((memo.hits, memo.misses), (1, 2));
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
