//! Walking a document into its collection's fields: each key is found under its
//! parent field by a hash of (parent, key), so a document's known fields cost no
//! dotted path, no whole-path hash and no plausibility check; a path is built only
//! for a key seen for the first time. What a walk counts per field: presence, types
//! (with their writers), array lengths, string values (see [`super::enums`]).

use bson::RawDocument;
use mongotap_wire::element::{self, Element};

use super::{variants, Collection, TypeCount, MAX_DEPTH, MAX_STRING_FIELDS};

/// Items of one array whose sub-documents are walked: its first this many and its
/// last this many (a document's newest items are pushed at its end). The ones
/// between are counted in its length, not walked (their fields, and the arrays in
/// them, are not seen): a product embedding 300 reviews was 300 walks each time it
/// was seen, most of the analysis of a capture of such documents.
const ARRAY_ENDS: usize = 32;

/// The parent of top-level fields in [`Collection::child`].
pub(super) const ROOT: u32 = u32::MAX;
/// The parent of a field no walk has linked yet (an update made it, or a walk
/// under a refused path).
pub(super) const UNLINKED: u32 = u32::MAX - 1;

/// Where a document walk is: at the top, in a known field, or in a path the bound
/// of paths refused (its text: its sub-fields' paths start with it).
#[derive(Clone, Copy)]
enum Under<'p> {
    Top,
    Field(u32),
    Refused(&'p [u8]),
}

impl Collection {
    /// The field with `key` under `under`, if a walk linked it.
    fn child(&self, under: Under<'_>, key: &[u8]) -> Option<usize> {
        let parent = match under {
            Under::Top => ROOT,
            Under::Field(p) => p,
            Under::Refused(_) => return None,
        };
        let i = *self.children.get(&child_hash(parent, key))? as usize;
        let f = &self.fields[i];
        // Two (parent, key) pairs may share a hash: the field says which it is. Its
        // key starts after its parent's path and a dot.
        let key_at = if parent == ROOT { 0 } else { self.fields[parent as usize].path.len() + 1 };
        (f.parent == parent && f.path.as_bytes().get(key_at..) == Some(key)).then_some(i)
    }

    /// The dotted path of `key` under `under`.
    fn path_of(&self, under: Under<'_>, key: &[u8]) -> Vec<u8> {
        let prefix = match under {
            Under::Top => &[][..],
            Under::Field(p) => self.fields[p as usize].path.as_bytes(),
            Under::Refused(path) => path,
        };
        let mut path = Vec::with_capacity(prefix.len() + 1 + key.len());
        if !prefix.is_empty() {
            path.extend_from_slice(prefix);
            path.push(b'.');
        }
        path.extend_from_slice(key);
        path
    }

    /// The field at `path` (`key` under `under`), made if new and the bound allows,
    /// and linked for [`Collection::child`] unless its hash is taken or it is linked
    /// already (a key with a dot reaches a path another way: the first way stays).
    fn link(&mut self, under: Under<'_>, key: &[u8], path: &[u8]) -> Option<usize> {
        let i = self.slot(path)?;
        let parent = match under {
            Under::Top => ROOT,
            Under::Field(p) => p,
            Under::Refused(_) => return Some(i),
        };
        if self.fields[i].parent != UNLINKED {
            return Some(i);
        }
        if let std::collections::hash_map::Entry::Vacant(v) = self.children.entry(child_hash(parent, key)) {
            v.insert(i as u32);
            self.fields[i].parent = parent;
        }
        Some(i)
    }

    /// Walks one document: written by the writer with this bit (0 past the bound of
    /// writers), or read (`None`).
    pub(super) fn offer(&mut self, doc: &RawDocument, writer: Option<u16>) {
        self.documents += 1;
        self.epoch_documents += 1;
        self.written += u64::from(writer.is_some());
        let version = self.versions.of(doc);
        let mut doc_walk = Walk {
            n: self.documents,
            writer: writer.unwrap_or(0),
            written: writer.is_some(),
            version,
            seen: variants::Seen::default(),
        };
        self.walk(doc, Under::Top, 0, &mut doc_walk);
        self.variants.add(doc_walk.seen, self.documents, writer.is_some());
    }

    /// Walks the fields of `doc`, a sub-document `under` a field (or the top). A
    /// known key is found under its parent without its path: the path is built only
    /// for a key seen for the first time (or under a refused path).
    fn walk(&mut self, doc: &RawDocument, under: Under<'_>, depth: usize, w: &mut Walk) {
        for e in element::elements(doc) {
            let mut path = Vec::new();
            // A known key was plausible when it was linked; only new ones are checked.
            let slot = match self.child(under, e.key) {
                Some(i) => Some(i),
                None if !crate::names::plausible(e.key) => {
                    self.value_keys += 1;
                    continue;
                }
                None => {
                    path = self.path_of(under, e.key);
                    self.link(under, e.key, &path)
                }
            };
            let below = slot.map_or(Under::Refused(&path), |i| Under::Field(i as u32));
            self.value(&e, slot, below, depth, w);
        }
    }

    /// Counts element `e` at field `slot` (if not refused), then walks its
    /// sub-documents, which are `below` it.
    fn value(&mut self, e: &Element<'_>, slot: Option<usize>, below: Under<'_>, depth: usize, w: &mut Walk) {
        // Sub-documents first: an array's items are counted in the pass that walks them.
        let deeper = depth < MAX_DEPTH;
        let mut array_len = None;
        match e.kind {
            0x03 if deeper => {
                if let Some(d) = e.as_document() {
                    self.walk(d, below, depth + 1, w);
                }
            }
            // Elements of an array of sub-documents add their fields at the array's
            // path: its first and its last ARRAY_ENDS of them (see there).
            0x04 => {
                let mut n = 0;
                let mut tail: [Option<&RawDocument>; ARRAY_ENDS] = [None; ARRAY_ENDS];
                for item in element::elements_in(e.as_array()) {
                    let d = deeper.then(|| item.as_document()).flatten();
                    match d {
                        Some(d) if n < ARRAY_ENDS => self.walk(d, below, depth + 1, w),
                        _ => tail[n % ARRAY_ENDS] = d,
                    }
                    n += 1;
                }
                // The last ones, oldest first (item i waited at i % ARRAY_ENDS).
                let last = n.saturating_sub(ARRAY_ENDS).min(ARRAY_ENDS);
                for i in n - last..n {
                    if let Some(d) = tail[i % ARRAY_ENDS] {
                        self.walk(d, below, depth + 1, w);
                    }
                }
                array_len = Some(n as u64);
            }
            _ => {}
        }
        if depth == 0 {
            match slot {
                Some(i) => self.variants.see(&mut w.seen, i, e, &self.keyed),
                None => w.seen.partial = true,
            }
        }
        if let Some(i) = slot {
            let f = &mut self.fields[i];
            if f.last_document != w.n {
                f.last_document = w.n;
                f.present += 1;
                if let Some(v) = w.version {
                    self.versions.present(v, i);
                }
            }
            if e.kind == 0x02 {
                if w.written {
                    self.string_value(i, e);
                } else if let Some(strings) = self.fields[i].strings.as_mut() {
                    // A stored value the writes never showed: the set is not closed.
                    strings.read(&self.keyed, e.value);
                }
            }
            let f = &mut self.fields[i];
            f.container |= matches!(e.kind, 0x03 | 0x04);
            match f.types.iter_mut().find(|t| t.kind == e.kind) {
                Some(t) => {
                    t.count += 1;
                    t.writers |= w.writer;
                    t.written += u64::from(w.written);
                }
                None => f.types.push(TypeCount {
                    kind: e.kind,
                    count: 1,
                    writers: w.writer,
                    written: u64::from(w.written),
                }),
            }
            if let Some(len) = array_len {
                let (lo, hi, sum, count) = f.array_lengths.get_or_insert((len, len, 0, 0));
                *lo = (*lo).min(len);
                *hi = (*hi).max(len);
                *sum += len;
                *count += 1;
                f.lengths.get_or_insert_with(Default::default).add(len);
            }
        }
    }

    /// Counts a written string value of field `i`, while the field's values are
    /// followed (the first [`MAX_STRING_FIELDS`] string fields).
    pub(super) fn string_value(&mut self, i: usize, e: &Element<'_>) {
        let f = &mut self.fields[i];
        if f.strings.is_none() {
            if self.string_fields >= MAX_STRING_FIELDS {
                self.string_fields_refused += 1;
                return;
            }
            self.string_fields += 1;
            f.strings = Some(Box::default());
        }
        let text = if self.show_values { e.as_str() } else { None };
        // The value's bytes hold its length and text: hashed whole.
        if let Some(s) = f.strings.as_mut() {
            s.add(&self.keyed, e.value, text);
        }
    }
}

/// The key of field `key` under field `parent` in [`Collection::child`].
fn child_hash(parent: u32, key: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(parent);
    h.write(key);
    h.finish()
}

/// One document's walk: its number, its writer's bit, its version's index and its
/// top-level field set.
struct Walk {
    n: u64,
    writer: u16,
    written: bool,
    version: Option<usize>,
    seen: variants::Seen,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::raw;
    use crate::schema::MAX_PATHS;
    use bson::doc;

    #[test]
    fn fields_types_presence_and_array_lengths() {
        let mut c = Collection::default();
        assert!(c.offering(2));
        c.offer(&raw(doc! {"_id": 1, "total": 5, "lines": [{"sku": "a"}, {"sku": "b", "qty": 2}], "customer": {"name": "x"}}), Some(1));
        c.offer(&raw(doc! {"_id": 2, "total": "5", "lines": []}), None);
        assert_eq!((c.documents, c.written), (2, 1));
        let total = c.field("total").unwrap();
        let types: Vec<_> = total.types.iter().map(|t| (t.kind, t.count, t.writers)).collect();
        assert_eq!((total.present, types), (2, vec![(0x10, 1, 1), (0x02, 1, 0)]));
        let sku = c.field("lines.sku").unwrap();
        assert_eq!(sku.present, 1, "counted once per document, not per element");
        assert_eq!(c.field("lines").unwrap().array_lengths, Some((0, 2, 2, 2)));
        assert!(c.field("customer.name").is_some() && c.field("lines.qty").is_some());
        assert_eq!(c.top_level().collect::<Vec<_>>(), ["_id", "total", "lines", "customer"]);
    }

    #[test]
    fn a_path_is_one_field_however_a_walk_reaches_it() {
        let mut c = Collection::default();
        let set = raw(doc! {"a.b": 7});
        // An update knows `a.b` before any document shows it.
        c.updated(&element::elements(&set).next().unwrap(), b"$set");
        assert!(c.offering(3));
        c.offer(&raw(doc! {"a": {"b": 1, "c": {"d": 2}}}), Some(1));
        // A key with a dot reaches the same path another way.
        c.offer(&raw(doc! {"a": {"b": 3, "c.d": 4}}), Some(1));
        c.offer(&raw(doc! {"a": {"b": 5, "c": {"d": 6}}}), None);
        let paths: Vec<_> = c.fields.iter().map(|f| (f.path.as_str(), f.present)).collect();
        assert_eq!(paths, [("a.b", 3), ("a", 3), ("a.c", 2), ("a.c.d", 3)]);
        assert!(c.fields[0].set_by_update, "the update's field is the walk's field");
        let at = |p: &str| c.fields.iter().position(|f| f.path == p).unwrap();
        let nested = c.child(Under::Field(at("a.c") as u32), b"d");
        assert_eq!(nested, Some(at("a.c.d")), "the first way to a path stays linked");
        assert_eq!(c.child(Under::Field(at("a") as u32), b"c.d"), None);
    }

    #[test]
    fn a_long_array_is_walked_at_its_ends_and_counted_whole() {
        let mut c = Collection::default();
        let items: Vec<bson::Document> = (0..100)
            .map(|i| match i {
                50 => doc! {"by": "x", "middle": 1},
                99 => doc! {"by": "x", "newest": 1},
                _ => doc! {"by": "x"},
            })
            .collect();
        assert!(c.offering(1));
        c.offer(&raw(doc! {"_id": 1, "reviews": items}), Some(1));
        assert_eq!(c.field("reviews").unwrap().array_lengths, Some((100, 100, 100, 1)));
        let by = c.field("reviews.by").unwrap();
        assert_eq!(by.present, 1);
        assert_eq!(by.types[0].count, 2 * ARRAY_ENDS as u64, "the first and the last walked");
        assert!(c.field("reviews.newest").is_some(), "the newest item's field is seen");
        assert!(c.field("reviews.middle").is_none(), "the ones between are not walked");
    }

    #[test]
    fn the_ends_are_counted_in_items_scalars_included() {
        let mut c = Collection::default();
        // 40 items, every other one a sub-document: none between the ends, all 20 walked.
        let mixed: Vec<bson::Bson> =
            (0..40).map(|i| if i % 2 == 1 { doc! {"a": i}.into() } else { bson::Bson::Int32(i) }).collect();
        // 70 sub-documents: 0..32 and 38..70 walked.
        let long: Vec<bson::Document> = (0..70).map(|i| doc! {"b": i}).collect();
        assert!(c.offering(1));
        c.offer(&raw(doc! {"_id": 1, "mixed": mixed, "long": long}), Some(1));
        assert_eq!(c.field("mixed.a").unwrap().types[0].count, 20);
        assert_eq!(c.field("long.b").unwrap().types[0].count, 64);
        assert_eq!(c.field("long").unwrap().array_lengths, Some((70, 70, 70, 1)));
    }

    #[test]
    fn past_the_bound_of_paths_known_fields_are_still_counted() {
        let mut c = Collection::default();
        let mut wide = bson::Document::new();
        for i in 0..MAX_PATHS + 10 {
            wide.insert(format!("f{i}"), i as i64);
        }
        assert!(c.offering(2));
        c.offer(&raw(wide.clone()), None);
        c.offer(&raw(wide), None);
        assert_eq!((c.fields.len(), c.refused_paths), (MAX_PATHS, 20));
        assert!(c.fields.iter().all(|f| f.present == 2));
    }
}
