//! Values as detectors may keep them: keyed hashes, never the values themselves.
//!
//! A detector that must compare values later (is this child's `_id` one of the
//! parent's `authorId`s?) keeps a 64-bit hash of each under a 128-bit key drawn at
//! random when the run starts, so its state cannot be turned back into values by
//! hashing guesses without the key, which never leaves the process. (The hash is a
//! folded-multiply one, as fast hash maps use: it runs for every value of every
//! parent read, and SipHash was a tenth of the analysis. The state stays in memory;
//! anything written out would use a cryptographic PRF.) Only values that can be
//! links are hashed: ObjectIds, strings, integral numbers (int32, int64 and whole
//! doubles compare equal, as the server compares them) and binary ids such as UUIDs.

use std::hash::{BuildHasher, Hasher};

use bson::RawDocument;
use mongotap_wire::element::{self, Element};

/// Strings longer than this are text, not keys.
const MAX_KEY_STRING: usize = 128;
/// Binary values longer than this are payloads, not keys.
const MAX_KEY_BINARY: usize = 64;
/// Sub-document levels walked below the top.
const MAX_DEPTH: usize = 4;

/// Keyed hashing with a random key per run.
#[derive(Debug, Clone, Copy)]
pub struct Keyed {
    k0: u64,
    k1: u64,
}

impl Default for Keyed {
    fn default() -> Self {
        // Two random words from the standard library's per-process random seed.
        let r = std::hash::RandomState::new();
        let word = |x: u64| {
            let mut h = r.build_hasher();
            h.write_u64(x);
            h.finish()
        };
        Keyed { k0: word(0x9e37_79b9_7f4a_7c15), k1: word(0xc2b2_ae3d_27d4_eb4f) | 1 }
    }
}

/// The 128-bit product of two words, folded to 64 bits.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A [`Hasher`] under a [`Keyed`] key.
#[derive(Debug, Clone, Copy)]
pub struct KeyedHasher {
    h: u64,
    k1: u64,
    len: u64,
}

impl Hasher for KeyedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.h = fold(self.h ^ v, self.k1);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The last bytes as a little-endian word, shifted in one by one: a copy
            // into a word-sized buffer was a call to `memcpy` for every key hashed.
            let last = rest.iter().rev().fold(0u64, |w, b| w << 8 | u64::from(*b));
            self.h = fold(self.h ^ last ^ ((rest.len() as u64) << 56), self.k1);
        }
        self.len = self.len.wrapping_add(bytes.len() as u64);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.h = fold(self.h ^ u64::from(i) ^ 0x0100, self.k1);
        self.len = self.len.wrapping_add(1);
    }

    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.h = fold(self.h ^ (i as u64), self.k1);
        self.len = self.len.wrapping_add(8);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold(self.h ^ self.len, self.k1 ^ 0x9e37_79b9_7f4a_7c15)
    }
}

impl Keyed {
    /// The keyed hash of a value that can be a link, or `None` for other values.
    pub fn link(&self, e: &Element<'_>) -> Option<u64> {
        let mut h = self.hasher();
        match e.kind {
            0x07 => {
                h.write_u8(b'o');
                h.write(e.value);
            }
            0x02 => {
                let s = e.string_bytes()?;
                if s.is_empty() || s.len() > MAX_KEY_STRING {
                    return None;
                }
                h.write_u8(b's');
                h.write(s);
            }
            0x10 | 0x12 => {
                h.write_u8(b'n');
                h.write_i64(e.as_i64()?);
            }
            0x01 => {
                let d = f64::from_le_bytes(e.value.try_into().ok()?);
                if d.fract() == 0.0 && d.abs() < 9.0e15 {
                    h.write_u8(b'n');
                    h.write_i64(d as i64);
                } else {
                    return None;
                }
            }
            0x05 => {
                // int32 length, subtype, bytes.
                let bytes = e.value.get(5..)?;
                if bytes.is_empty() || bytes.len() > MAX_KEY_BINARY {
                    return None;
                }
                h.write_u8(b'b');
                h.write(e.value.get(4..)?);
            }
            _ => return None,
        }
        Some(h.finish())
    }

    /// A hasher to feed piece by piece.
    pub fn hasher(&self) -> KeyedHasher {
        KeyedHasher { h: self.k0, k1: self.k1, len: 0 }
    }
}

/// For maps keyed by what clients send: a key chosen to collide needs the run's key.
impl BuildHasher for Keyed {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        self.hasher()
    }
}

/// Where a value sits in a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At<'p> {
    /// The dotted path: sub-documents add their key, array elements do not add
    /// their position (`items.productId` for `{items: [{productId: 7}]}`).
    pub path: &'p [u8],
    /// The length of the path's prefix that is the first array on the way
    /// (`items` above), if the value is inside one.
    pub array: Option<usize>,
}

/// Calls `f(at, value)` for every value of `doc` that can be a link (see
/// [`Keyed::link`]), with where it sits. A DBRef's id is `author.$id`; other
/// `$`-keys (`$ref`, `$db`) are not links. `path` is scratch space, left as given.
pub fn walk_links(doc: &RawDocument, path: &mut Vec<u8>, f: &mut dyn FnMut(At<'_>, &Element<'_>)) {
    Walk::<&[u8]> { only: None, f }.doc(doc, path, None, 0)
}

/// [`walk_links`], but only for the values at the paths in `only`: the walk does not
/// go into a sub-document or array that leads to none of them. Top-level paths
/// (`authorId`, `_id`: most links) are looked up without building paths, and the
/// look-up stops once each has been met.
pub fn walk_links_at<P: AsRef<[u8]>>(
    doc: &RawDocument,
    only: &[P],
    path: &mut Vec<u8>,
    f: &mut dyn FnMut(At<'_>, &Element<'_>),
) {
    if only.len() > 16 {
        return Walk { only: Some(only), f }.doc(doc, path, None, 0);
    }
    if only.iter().any(|w| w.as_ref().contains(&b'.')) {
        // Only the keys on the way to a wanted path are followed, and a path is built
        // only for them: an order's other fields cost a key comparison each.
        let mask = (0..only.len())
            .filter(|i| {
                let w = only[*i].as_ref();
                w.get(..path.len()).is_some_and(|head| element::same(head, path))
                    && (path.is_empty() || w.get(path.len()) == Some(&b'.'))
            })
            .fold(0u16, |m, i| m | 1 << i);
        return Directed { only, f }.doc(doc, mask, path, None, 0);
    }
    // Which wanted paths were met (a key written twice counts once).
    let (all, mut met) = ((1u32 << only.len()) - 1, 0u32);
    for e in element::elements(doc) {
        if met == all {
            break;
        }
        let Some(i) = only.iter().position(|w| element::same(w.as_ref(), e.key)) else { continue };
        met |= 1 << i;
        let base = path.len();
        if base > 0 {
            path.push(b'.');
        }
        path.extend_from_slice(e.key);
        Walk { only: Some(only), f: &mut *f }.value(e, path, None, 0);
        path.truncate(base);
    }
}

/// The walk of [`walk_links_at`] for dotted paths: at each level, `mask` says which
/// wanted paths are still on the way (each begins with the path so far).
struct Directed<'w, 'f, P> {
    only: &'w [P],
    f: &'w mut (dyn FnMut(At<'_>, &Element<'_>) + 'f),
}

impl<'w, P: AsRef<[u8]>> Directed<'w, '_, P> {
    fn doc(&mut self, doc: &RawDocument, mask: u16, path: &mut Vec<u8>, array: Option<usize>, depth: usize) {
        let start = if path.is_empty() { 0 } else { path.len() + 1 };
        // The wanted paths still to be met in this document: once none is, the rest
        // of it is not read. A path is met when its last field's key is (a key
        // written twice counts once, as at the top level); one that goes on below
        // this level never is, since a key with a dot in it (`"a.b"`, legal) can be
        // its end too, as the whole walk reads it.
        let mut pending = mask;
        for e in element::elements(doc) {
            if pending == 0 {
                break;
            }
            if e.key.first() == Some(&b'$') && e.key != b"$id" {
                continue;
            }
            // Which wanted paths end at this key (`leaf`), and which go on below it.
            let (mut leaf, mut deeper) = (false, 0u16);
            let mut m = pending;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let rest = self.only[i].as_ref().get(start..).unwrap_or_default();
                match rest.get(..e.key.len()) {
                    Some(head) if element::same(head, e.key) => match rest.get(e.key.len()) {
                        None => {
                            leaf = true;
                            if !rest.contains(&b'.') {
                                pending &= !(1 << i);
                            }
                        }
                        Some(b'.') => deeper |= 1 << i,
                        Some(_) => {}
                    },
                    _ => {}
                }
            }
            if !leaf && deeper == 0 {
                continue;
            }
            let base = path.len();
            if base > 0 {
                path.push(b'.');
            }
            path.extend_from_slice(e.key);
            self.value(e, leaf, deeper, path, array, depth);
            path.truncate(base);
        }
    }

    /// The one key left of the one wanted path that goes on below `path` (of
    /// `len` bytes), when that key ends the path and `doc` would read it: the
    /// array's documents are then searched for it alone, not walked.
    fn last_key(&self, leaf: bool, deeper: u16, len: usize) -> Option<&'w [u8]> {
        // Below a top-level key "" the path is empty and `doc` reads the wanted path
        // from its start: that rare case goes the long way.
        if leaf || deeper.count_ones() != 1 || len == 0 {
            return None;
        }
        let only = self.only;
        let rest = only[deeper.trailing_zeros() as usize].as_ref().get(len + 1..)?;
        let read = rest.first() != Some(&b'$') || rest == b"$id";
        (read && !rest.is_empty() && !rest.contains(&b'.')).then_some(rest)
    }

    /// As [`Walk::value`]: arrays add nothing to the path, scalars are reported.
    #[allow(clippy::too_many_arguments)]
    fn value(
        &mut self,
        e: Element<'_>,
        leaf: bool,
        deeper: u16,
        path: &mut Vec<u8>,
        array: Option<usize>,
        depth: usize,
    ) {
        match e.kind {
            0x03 if depth < MAX_DEPTH => {
                if let Some(d) = e.as_document().filter(|_| deeper != 0) {
                    self.doc(d, deeper, path, array, depth + 1);
                }
            }
            0x04 if depth < MAX_DEPTH => {
                let array = array.or(Some(path.len()));
                let Some(key) = self.last_key(leaf, deeper, path.len()) else {
                    for item in element::elements_in(e.as_array()) {
                        self.value(item, leaf, deeper, path, array, depth + 1);
                    }
                    return;
                };
                // An array of documents, one key wanted of each (an order's
                // `lines.sku`): its first match, as `doc` would stop at it.
                for item in element::elements_in(e.as_array()) {
                    if item.kind != 0x03 || depth + 1 >= MAX_DEPTH {
                        self.value(item, leaf, deeper, path, array, depth + 1);
                        continue;
                    }
                    let found = item
                        .as_document()
                        .and_then(|d| element::elements(d).find(|x| element::same(x.key, key)));
                    if let Some(found) = found {
                        let base = path.len();
                        path.push(b'.');
                        path.extend_from_slice(key);
                        self.value(found, true, 0, path, array, depth + 2);
                        path.truncate(base);
                    }
                }
            }
            0x03 | 0x04 => {}
            _ if leaf => (self.f)(At { path, array }, &e),
            _ => {}
        }
    }
}

struct Walk<'w, 'f, P> {
    only: Option<&'w [P]>,
    f: &'w mut (dyn FnMut(At<'_>, &Element<'_>) + 'f),
}

impl<P: AsRef<[u8]>> Walk<'_, '_, P> {
    /// Whether `path` is one of the wanted paths or leads to one.
    fn wanted(&self, path: &[u8]) -> bool {
        self.only.is_none_or(|only| {
            only.iter().map(|w| w.as_ref()).any(|w| {
                w.get(..path.len()).is_some_and(|head| element::same(head, path))
                    && (w.len() == path.len() || w[path.len()] == b'.')
            })
        })
    }

    fn doc(&mut self, doc: &RawDocument, path: &mut Vec<u8>, array: Option<usize>, depth: usize) {
        for e in element::elements(doc) {
            if e.key.first() == Some(&b'$') && e.key != b"$id" {
                continue;
            }
            let base = path.len();
            if base > 0 {
                path.push(b'.');
            }
            path.extend_from_slice(e.key);
            if self.wanted(path) {
                self.value(e, path, array, depth);
            }
            path.truncate(base);
        }
    }

    fn value(&mut self, e: Element<'_>, path: &mut Vec<u8>, array: Option<usize>, depth: usize) {
        match e.kind {
            0x03 if depth < MAX_DEPTH => {
                if let Some(d) = e.as_document() {
                    self.doc(d, path, array, depth + 1);
                }
            }
            0x04 if depth < MAX_DEPTH => {
                let array = array.or(Some(path.len()));
                for item in element::elements_in(e.as_array()) {
                    self.value(item, path, array, depth + 1);
                }
            }
            0x03 | 0x04 => {}
            _ => {
                if self.only.is_none_or(|only| only.iter().any(|w| element::same(w.as_ref(), path))) {
                    (self.f)(At { path, array }, &e)
                }
            }
        }
    }
}

/// Calls `f(field, value)` for each equality a filter asks for: implicit equality,
/// `$eq`, a one-value `$in`, in the top level and inside `$and`. These are the
/// values a child query takes from its parent; ranges, `$or` branches and
/// multi-value `$in` (one batched fetch) are not.
pub fn equalities<'a>(filter: &'a RawDocument, f: &mut dyn FnMut(&'a [u8], &Element<'a>)) {
    for e in element::elements(filter) {
        match e.key {
            b"$and" => {
                for branch in element::elements_in(e.as_array()) {
                    if let Some(b) = branch.as_document() {
                        equalities(b, f);
                    }
                }
            }
            k if k.first() == Some(&b'$') => {}
            field => match e.kind {
                0x03 => {
                    let Some(ops) = e.as_document() else { continue };
                    for op in element::elements(ops) {
                        match op.key {
                            b"$eq" => f(field, &op),
                            b"$in" => {
                                let mut items = element::elements_in(op.as_array());
                                if let (Some(only), None) = (items.next(), items.next()) {
                                    f(field, &only);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                0x04 | 0x0B => {}
                _ => f(field, &e),
            },
        }
    }
}

/// A document of the given elements, as (type, key, value bytes), written as given:
/// keys repeated and bytes that are not UTF-8, which `doc!` cannot write.
#[cfg(test)]
pub(crate) fn bson_of(elements: &[(u8, &str, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (kind, key, value) in elements {
        body.push(*kind);
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value);
    }
    let mut d = ((body.len() + 5) as i32).to_le_bytes().to_vec();
    d.extend(body);
    d.push(0);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    fn links(d: bson::Document) -> Vec<(String, Option<u64>)> {
        let k = Keyed::default();
        let mut out = Vec::new();
        walk_links(&raw(d), &mut Vec::new(), &mut |at, e| {
            out.push((String::from_utf8_lossy(at.path).into_owned(), k.link(e)))
        });
        out
    }

    #[test]
    fn a_key_tail_hashes_as_the_zero_padded_word_of_its_bytes() {
        let keyed = Keyed::default();
        let bytes: Vec<u8> = (1..=40u8).map(|b| b.wrapping_mul(37)).collect();
        for n in 0..bytes.len() {
            let mut h = keyed.hasher();
            h.write(&bytes[..n]);
            // The reference: whole words, then the tail copied into a zeroed word.
            let mut r = keyed.hasher();
            for c in bytes[..n].chunks(8) {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                let tail = if c.len() < 8 { (c.len() as u64) << 56 } else { 0 };
                r.h = fold(r.h ^ u64::from_le_bytes(w) ^ tail, r.k1);
            }
            r.len = n as u64;
            assert_eq!(h.finish(), r.finish(), "{n} bytes");
        }
    }

    #[test]
    fn numbers_compare_as_the_server_compares_them_and_types_do_not_mix() {
        let k = Keyed::default();
        let d = raw(doc! {"i": 5, "l": 5_i64, "d": 5.0, "s": "5", "f": 5.5, "t": true, "n": null});
        let h: Vec<Option<u64>> = element::elements(&d).map(|e| k.link(&e)).collect();
        assert_eq!(h[0], h[1]);
        assert_eq!(h[0], h[2]);
        assert!(h[3].is_some() && h[3] != h[0]);
        assert_eq!(&h[4..], &[None, None, None], "fractions, booleans and nulls are not keys");
        let other_run = Keyed::default();
        assert_ne!(other_run.link(&element::elements(&d).next().unwrap()), h[0], "keyed per run");
        // Values that differ only in their last bytes, or in length, differ.
        let mut seen = std::collections::HashSet::new();
        for s in ["a", "b", "ab", "a\0", "abcdefgh", "abcdefgi", "abcdefghi", "abcdefgh\0"] {
            let mut hasher = k.hasher();
            hasher.write(s.as_bytes());
            assert!(seen.insert(hasher.finish()), "{s:?}");
        }
    }

    #[test]
    fn paths_follow_sub_documents_arrays_and_dbrefs() {
        let oid = ObjectId::new();
        let got = links(doc! {
            "_id": 1, "authorId": oid, "tags": ["a", "b"],
            "items": [{"productId": 7, "qty": 2}, {"productId": 8, "qty": 1}],
            "author": {"$ref": "user", "$id": oid}, "meta": {"by": {"id": "x"}},
            "body": "x".repeat(500),
        });
        let paths: Vec<&str> = got.iter().filter(|(_, h)| h.is_some()).map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "_id",
                "authorId",
                "tags",
                "tags",
                "items.productId",
                "items.qty",
                "items.productId",
                "items.qty",
                "author.$id",
                "meta.by.id"
            ]
        );
        assert_eq!(got[1].1, got.iter().find(|(p, _)| p == "author.$id").unwrap().1);
        let mut arrays = Vec::new();
        walk_links(&raw(doc! {"a": 1, "items": [{"p": 1}], "t": [[1]]}), &mut Vec::new(), &mut |at, _| {
            arrays.push(at.array)
        });
        assert_eq!(arrays, [None, Some(5), Some(1)]);
        let mut only = Vec::new();
        let d = raw(doc! {"a": 1, "items": [{"p": 1, "q": 2}], "item": 3, "m": {"x": {"p": 4}}});
        walk_links_at(&d, &[&b"items.p"[..], b"m.x.p"], &mut Vec::new(), &mut |at, _| {
            only.push(String::from_utf8_lossy(at.path).into_owned())
        });
        assert_eq!(only, ["items.p", "m.x.p"]);
        // Top-level paths take the short way, with the same result as the whole walk.
        let d = raw(doc! {"_id": 1, "tags": ["a", "b"], "authorId": 7, "m": {"authorId": 8}, "ids": [1, 2]});
        let short = at_paths_as_whole(&d, &[b"authorId", b"ids", b"tags"]);
        assert_eq!(short.len(), 5, "{short:?}");
    }

    /// What [`walk_links_at`] reports at `wanted`, checked against the whole walk's
    /// values at the same paths.
    fn at_paths_as_whole(d: &RawDocument, wanted: &[&[u8]]) -> Vec<(String, Option<usize>, Vec<u8>)> {
        let (mut at_paths, mut whole) = (Vec::new(), Vec::new());
        walk_links_at(d, wanted, &mut Vec::new(), &mut |at, e| {
            at_paths.push((String::from_utf8_lossy(at.path).into_owned(), at.array, e.value.to_vec()))
        });
        walk_links(d, &mut Vec::new(), &mut |at, e| {
            if wanted.contains(&at.path) {
                whole.push((String::from_utf8_lossy(at.path).into_owned(), at.array, e.value.to_vec()))
            }
        });
        assert_eq!(at_paths, whole);
        at_paths
    }

    #[test]
    fn dotted_paths_give_what_the_whole_walk_gives_at_them() {
        let oid = ObjectId::new();
        let d = raw(doc! {
            "_id": 1, "lines": [{"sku": "a", "qty": 2, "sub": {"sku": "z"}}, {"sku": ["b", "c"]}, [{"sku": "d"}]],
            "customer": {"_id": oid, "name": "x", "$id": 5}, "line": {"sku": "no"}, "lines2": {"sku": "no"},
            "author": {"$ref": "u", "$id": oid}, "$x": {"sku": 1}, "sku": "top", "deep": {"a": {"b": {"c": {"d": {"e": 1}}}}},
        });
        let wanted: [&[u8]; 7] = [
            b"lines.sku",
            b"customer._id",
            b"author.$id",
            b"sku",
            b"lines.sub.sku",
            b"deep.a.b.c.d.e",
            b"customer",
        ];
        let directed = at_paths_as_whole(&d, &wanted);
        let paths: Vec<&str> = directed.iter().map(|(p, ..)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "lines.sku",
                "lines.sub.sku",
                "lines.sku",
                "lines.sku",
                "lines.sku",
                "customer._id",
                "author.$id",
                "sku"
            ]
        );
    }

    #[test]
    fn an_array_of_documents_searched_for_one_key_gives_what_the_whole_walk_gives() {
        let int = |v: i32| v.to_le_bytes().to_vec();
        let string = |s: &str| [&((s.len() + 1) as i32).to_le_bytes()[..], s.as_bytes(), &[0]].concat();
        let (a, b, c, d) = (string("a"), string("b"), string("c"), string("d"));
        let array = bson_of(&[
            (0x03, "0", &bson_of(&[(0x02, "sku", &a), (0x10, "qty", &int(2))])),
            (0x03, "1", &bson_of(&[(0x10, "qty", &int(1)), (0x10, "$sku", &int(9))])),
            (0x04, "2", &bson_of(&[(0x03, "0", &bson_of(&[(0x02, "sku", &d)]))])),
            (0x02, "3", &string("not a document")),
            (0x03, "4", &bson_of(&[(0x04, "sku", &bson_of(&[(0x02, "0", &b), (0x02, "1", &c)]))])),
        ]);
        let oid = ObjectId::new();
        let refs = bson_of(&[(
            0x03,
            "0",
            &bson_of(&[(0x02, "$ref", &string("users")), (0x07, "$id", &oid.bytes())]),
        )]);
        let deep = bson_of(&[(0x04, "c", &bson_of(&[(0x03, "0", &bson_of(&[(0x04, "d", &array)]))]))]);
        let doc = bson_of(&[(0x04, "lines", &array), (0x04, "authors", &refs), (0x03, "a", &deep)]);
        let doc = RawDocument::from_bytes(&doc).unwrap();
        let values = |found: Vec<(String, Option<usize>, Vec<u8>)>| -> Vec<Vec<u8>> {
            found.into_iter().map(|(_, _, v)| v).collect()
        };
        // Nested arrays, documents without the key, a key that is an array, `$`-keys,
        // and (`a.c.d.sku`) documents past the depth the walks follow.
        assert_eq!(values(at_paths_as_whole(doc, &[b"lines.sku"])), [a.clone(), d, b, c]);
        assert_eq!(at_paths_as_whole(doc, &[b"authors.$id"]).len(), 1);
        assert!(at_paths_as_whole(doc, &[b"authors.$ref"]).is_empty());
        assert!(at_paths_as_whole(doc, &[b"a.c.d.sku"]).is_empty(), "items past the depth read");
        at_paths_as_whole(doc, &[b"lines.sku", b"a.c.d.sku"]);
        // A key written twice in an item: the first counts, as when two paths go
        // down the array and each item is walked key by key.
        let twice = bson_of(&[(0x10, "sku", &int(1)), (0x10, "qty", &int(3)), (0x10, "sku", &int(2))]);
        let doc = bson_of(&[(0x04, "lines", &bson_of(&[(0x03, "0", &twice)]))]);
        let doc = RawDocument::from_bytes(&doc).unwrap();
        let walk = |wanted: &[&[u8]]| {
            let mut got = Vec::new();
            walk_links_at(doc, wanted, &mut Vec::new(), &mut |at, e| {
                if at.path == b"lines.sku" {
                    got.push(e.value.to_vec())
                }
            });
            got
        };
        assert_eq!(walk(&[b"lines.sku"]), [int(1)]);
        assert_eq!(walk(&[b"lines.sku", b"lines.qty"]), [int(1)]);
        // At the last level the walks read, and one past it; and an array under a
        // top-level key "" (its path is empty: the long way).
        let items = bson_of(&[(0x03, "0", &bson_of(&[(0x04, "sku", &bson_of(&[(0x02, "0", &a)]))]))]);
        let lines = bson_of(&[(0x04, "lines", &items)]);
        let doc = bson_of(&[
            (0x03, "x", &bson_of(&[(0x03, "y", &lines)])),
            (0x03, "z", &lines),
            (0x04, "", &items),
        ]);
        let doc = RawDocument::from_bytes(&doc).unwrap();
        assert_eq!(values(at_paths_as_whole(doc, &[b"z.lines.sku"])), [a]);
        assert!(
            at_paths_as_whole(doc, &[b"x.y.lines.sku"]).is_empty(),
            "the sku array is past the depth read"
        );
        assert!(at_paths_as_whole(doc, &[b".sku"]).is_empty());
    }

    #[test]
    fn a_directed_walk_reads_a_document_only_until_its_wanted_paths_end() {
        let int = |v: i32| v.to_le_bytes();
        let inner = bson_of(&[(0x10, "x", &int(1)), (0x10, "y", &int(2)), (0x10, "x", &int(3))]);
        let second = bson_of(&[(0x10, "x", &int(4))]);
        let d = bson_of(&[(0x03, "m", &inner), (0x03, "m", &second), (0x10, "z", &int(5))]);
        let d = RawDocument::from_bytes(&d).unwrap();
        let mut seen = Vec::new();
        walk_links_at(d, &[&b"m.x"[..]], &mut Vec::new(), &mut |at, e| {
            seen.push((String::from_utf8_lossy(at.path).into_owned(), e.as_i64()))
        });
        // Where a path ends, a key written twice counts once, as at the top: each
        // `m` is read until its first `x`.
        assert_eq!(seen, [("m.x".to_string(), Some(1)), ("m.x".to_string(), Some(4))]);
        // Two wanted paths under one key are both taken from it.
        seen.clear();
        walk_links_at(d, &[&b"m.x"[..], b"m.y"], &mut Vec::new(), &mut |at, e| {
            seen.push((String::from_utf8_lossy(at.path).into_owned(), e.as_i64()))
        });
        assert_eq!(
            seen,
            [("m.x".to_string(), Some(1)), ("m.y".to_string(), Some(2)), ("m.x".to_string(), Some(4))]
        );
        // A key with a dot in it ends a path too, whether before or after the
        // document the path goes down, and beside a scalar: as the whole walk reads it.
        let one = bson_of(&[(0x10, "b", &int(1))]);
        let values = |found: Vec<(String, Option<usize>, Vec<u8>)>| -> Vec<Vec<u8>> {
            found.into_iter().map(|(_, _, v)| v).collect()
        };
        for (d, want) in [
            (bson_of(&[(0x03, "a", &one), (0x10, "a.b", &int(2))]), vec![int(1), int(2)]),
            (bson_of(&[(0x10, "a.b", &int(2)), (0x03, "a", &one)]), vec![int(2), int(1)]),
            (bson_of(&[(0x10, "a", &int(5)), (0x10, "a.b", &int(2))]), vec![int(2)]),
        ] {
            let d = RawDocument::from_bytes(&d).unwrap();
            assert_eq!(
                values(at_paths_as_whole(d, &[b"a.b"])),
                want.iter().map(|v| v.to_vec()).collect::<Vec<_>>()
            );
        }
        // And below the top: `{a: {"b.c": 1, b: {c: 2}}}` at `a.b.c`.
        let c = bson_of(&[(0x10, "c", &int(2))]);
        let a = bson_of(&[(0x10, "b.c", &int(1)), (0x03, "b", &c)]);
        let d = bson_of(&[(0x03, "a", &a)]);
        let d = RawDocument::from_bytes(&d).unwrap();
        assert_eq!(values(at_paths_as_whole(d, &[b"a.b.c"])), [int(1).to_vec(), int(2).to_vec()]);
    }

    #[test]
    fn equalities_are_what_a_child_takes_from_its_parent() {
        let f = raw(doc! {
            "_id": 1, "a": {"$eq": "x"}, "b": {"$in": [2]}, "c": {"$in": [1, 2]}, "d": {"$gt": 3},
            "$and": [{"e": 4}], "$or": [{"g": 5}], "h": [1, 2], "i": {"x": 1},
        });
        let mut fields = Vec::new();
        equalities(&f, &mut |k, _| fields.push(String::from_utf8_lossy(k).into_owned()));
        assert_eq!(fields, ["_id", "a", "b", "e"]);
    }
}
