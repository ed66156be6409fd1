//! Field-set variants: a collection's documents told apart by the top-level fields
//! they carry, to find the half-done migration no version field marks. New code
//! writes `contact` where the old code wrote `phone`; the old documents are still
//! stored and read, so every reader handles both shapes and a query on `contact`
//! misses them.
//!
//! Two variants are a migration when each has fields the other lacks (a few on each
//! side), every write of the old one came before the first write of the new one, and
//! old documents are still read after that. Variants written interleaved are
//! different documents by design (optional fields, the subtypes of a model): not a
//! migration. Neither are variants whose discriminator (an ODM's `_cls`, `__t`,
//! `_t`, `_class`, or a `type`/`kind` field) holds different values: subtypes
//! inserted one after the other. A discriminator's values are compared by keyed hash.
//! The collection drops the pairs whose swapped fields update operators set or
//! remove (documents that change sets over their life: a sign-up's token unset once
//! verified), and an old set only ever read back needs [`READ_FACTOR`] times the
//! documents (one stored document read again and again counts each time).
//!
//! Bounded: the first [`MAX_BITS`] top-level fields of a collection, and
//! [`MAX_VARIANTS`] field sets; documents of further sets are counted as refused.

use std::hash::Hasher;

use mongotap_wire::element::Element;

use crate::values::Keyed;

/// Top-level fields told apart per collection (one bit each).
pub const MAX_BITS: usize = 64;
/// Field sets followed per collection.
const MAX_VARIANTS: usize = 16;
/// Fields on each side of a migration at most: more is another kind of document.
const MAX_SWAPPED: u32 = 3;
/// An old field set seen only in documents read back needs this many times the
/// documents (one stored document read again and again counts each time).
const READ_FACTOR: u64 = 3;
/// Top-level field names that say which subtype a document is.
const DISCRIMINATORS: &[&[u8]] = &[b"_cls", b"__t", b"_t", b"_class", b"_type", b"type", b"kind"];

/// The documents of one field set.
#[derive(Debug, Clone, Default)]
pub struct Variant {
    /// Bit i: the document carries the collection's top-level field of bit i.
    pub mask: u64,
    pub documents: u64,
    /// Of those, written by the traffic (inserts, replacements).
    pub written: u64,
    /// The collection's document numbers of the first and last write, and of the last read.
    pub first_written: Option<u64>,
    pub last_written: Option<u64>,
    pub last_read: Option<u64>,
    /// The keyed hash of the discriminator's value in the first document, and
    /// whether a later one held another.
    tag: Option<u64>,
    mixed: bool,
}

/// A half-done migration: the old and the new field sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    /// Indexes into [`Variants::variants`].
    pub old: usize,
    pub new: usize,
    /// Bits of the fields only the old documents carry, and only the new.
    pub only_old: u64,
    pub only_new: u64,
}

/// A collection's field sets.
#[derive(Debug, Clone, Default)]
pub struct Variants {
    /// The field index (in the collection) of each bit's top-level field.
    pub fields: Vec<u32>,
    pub variants: Vec<Variant>,
    /// Documents of field sets past [`MAX_VARIANTS`], or with a top-level field past
    /// [`MAX_BITS`] (their set is not known whole).
    pub refused: u64,
}

/// What one document's walk gathers for [`Variants::add`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    pub mask: u64,
    pub tag: Option<u64>,
    /// A top-level field had no bit.
    pub partial: bool,
}

impl Variants {
    /// Forgets every field set (the collection starts afresh).
    pub(super) fn clear(&mut self) {
        *self = Variants::default();
    }

    /// The bit of the top-level field with index `field`, given one if there is room.
    pub(super) fn bit(&mut self, field: usize) -> Option<u32> {
        let field = field as u32;
        if let Some(b) = self.fields.iter().position(|f| *f == field) {
            return Some(b as u32);
        }
        if self.fields.len() >= MAX_BITS {
            return None;
        }
        self.fields.push(field);
        Some(self.fields.len() as u32 - 1)
    }

    /// Notes top-level element `e` (field index `field`) of a document into `seen`.
    pub(super) fn see(&mut self, seen: &mut Seen, field: usize, e: &Element<'_>, keyed: &Keyed) {
        match self.bit(field) {
            Some(b) => seen.mask |= 1 << b,
            None => seen.partial = true,
        }
        if e.kind == 0x02 && DISCRIMINATORS.contains(&e.key) {
            let mut h = keyed.hasher();
            h.write(e.key);
            h.write(e.value);
            seen.tag = Some(h.finish());
        }
    }

    /// Counts document number `n`, written or read, of the field set `seen`.
    pub(super) fn add(&mut self, seen: Seen, n: u64, written: bool) {
        if seen.partial {
            self.refused += 1;
            return;
        }
        let i = match self.variants.iter().position(|v| v.mask == seen.mask) {
            Some(i) => i,
            None if self.variants.len() >= MAX_VARIANTS => {
                self.refused += 1;
                return;
            }
            None => {
                self.variants.push(Variant { mask: seen.mask, tag: seen.tag, ..Variant::default() });
                self.variants.len() - 1
            }
        };
        let v = &mut self.variants[i];
        v.documents += 1;
        v.mixed |= v.tag != seen.tag;
        if written {
            v.written += 1;
            v.first_written.get_or_insert(n);
            v.last_written = Some(n);
        } else {
            v.last_read = Some(n);
        }
    }

    /// The half-done migrations: pairs of field sets of at least `min` documents
    /// each, the new one written at least `min` times, with a few fields on each side
    /// the other lacks, every write of the old before the first of the new, old
    /// documents read after it, and no discriminator telling them apart. One per
    /// pair of swapped field lists, the largest old set first.
    pub fn migrations(&self, min: u64) -> Vec<Migration> {
        let mut out: Vec<Migration> = Vec::new();
        let mut order: Vec<usize> = (0..self.variants.len()).collect();
        order.sort_by(|a, b| self.variants[*b].documents.cmp(&self.variants[*a].documents));
        for &o in &order {
            for &n in &order {
                let (old, new) = (&self.variants[o], &self.variants[n]);
                // An old set only read back may be a few documents read again and
                // again: it needs more.
                let old_min = if old.written == 0 { min.saturating_mul(READ_FACTOR) } else { min };
                if o == n || old.documents < old_min || new.documents < min || new.written < min {
                    continue;
                }
                let (only_old, only_new) = (old.mask & !new.mask, new.mask & !old.mask);
                let few = |m: u64| (1..=MAX_SWAPPED).contains(&m.count_ones());
                let Some(switch) = new.first_written else { continue };
                let before = old.last_written.is_none_or(|w| w < switch);
                let still_read = old.last_read.is_some_and(|r| r > switch);
                let subtypes = old.mixed || new.mixed || old.tag != new.tag;
                let said = out.iter().any(|m| m.only_old == only_old && m.only_new == only_new);
                if few(only_old) && few(only_new) && before && still_read && !subtypes && !said {
                    out.push(Migration { old: o, new: n, only_old, only_new });
                }
            }
        }
        out
    }

    /// The field indexes of the bits set in `mask`.
    pub fn fields_of(&self, mask: u64) -> Vec<usize> {
        (0..self.fields.len()).filter(|b| mask & (1 << b) != 0).map(|b| self.fields[b] as usize).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(v: &mut Variants, fields: &[usize], tag: Option<u64>, n: u64, written: bool) {
        let mut seen = Seen { tag, ..Seen::default() };
        for f in fields {
            seen.mask |= 1 << v.bit(*f).unwrap();
        }
        v.add(seen, n, written);
    }

    #[test]
    fn a_rename_written_after_the_old_shape_and_read_beside_it_is_a_migration() {
        let mut v = Variants::default();
        // _id 0, name 1, phone 2 | contact 3.
        for n in 0..30 {
            doc(&mut v, &[0, 1, 2], None, n, true);
        }
        for n in 30..60 {
            doc(&mut v, &[0, 1, 3], None, n, true);
        }
        for n in 60..70 {
            doc(&mut v, &[0, 1, if n % 2 == 0 { 2 } else { 3 }], None, n, false);
        }
        let m = v.migrations(20);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!((v.fields_of(m[0].only_old), v.fields_of(m[0].only_new)), (vec![2], vec![3]));
        assert!(v.migrations(40).is_empty(), "too few documents of each to say");
    }

    #[test]
    fn interleaved_optional_fields_subtypes_and_unread_old_documents_are_not() {
        // Customers with a phone or an email, whichever they gave: interleaved.
        let mut v = Variants::default();
        for n in 0..60 {
            doc(&mut v, &[0, if n % 3 == 0 { 2 } else { 3 }], None, n, true);
        }
        for n in 60..70 {
            doc(&mut v, &[0, 2], None, n, false);
        }
        assert!(v.migrations(10).is_empty());
        // Employees, then students: their _cls differ.
        let mut v = Variants::default();
        for n in 0..30 {
            doc(&mut v, &[0, 1, 2], Some(7), n, true);
        }
        for n in 30..60 {
            doc(&mut v, &[0, 1, 3], Some(8), n, true);
        }
        for n in 60..70 {
            doc(&mut v, &[0, 1, 2], Some(7), n, false);
        }
        assert!(v.migrations(10).is_empty());
        // The old shape never read again: nobody handles both.
        let mut v = Variants::default();
        for n in 0..30 {
            doc(&mut v, &[0, 1, 2], None, n, true);
        }
        for n in 30..60 {
            doc(&mut v, &[0, 1, 3], None, n, true);
        }
        assert!(v.migrations(10).is_empty());
        // A field added (no field lost): an optional field, not a rename.
        let mut v = Variants::default();
        for n in 0..30 {
            doc(&mut v, &[0, 1], None, n, true);
        }
        for n in 30..60 {
            doc(&mut v, &[0, 1, 3], None, n, true);
        }
        for n in 60..70 {
            doc(&mut v, &[0, 1], None, n, false);
        }
        assert!(v.migrations(10).is_empty());
    }

    #[test]
    fn field_sets_are_bounded() {
        let mut v = Variants::default();
        for f in 0..(MAX_VARIANTS + 4) {
            doc(&mut v, &[f], None, f as u64, true);
        }
        assert_eq!((v.variants.len(), v.refused), (MAX_VARIANTS, 4));
        for f in 0..(MAX_BITS + 3) {
            v.bit(f);
        }
        assert_eq!(v.fields.len(), MAX_BITS);
        assert_eq!(v.bit(MAX_BITS + 5), None);
    }
}
