//! What the documents of each collection look like, learnt from the documents the
//! traffic writes (inserts, replacements) and reads (the replies of finds, getMores
//! and findAndModify), and from the fields updates set: per field path, how many
//! documents carry it, its BSON types with counts, and for arrays their lengths.
//!
//! It answers "does any document have this field?" for `unknown_field` (a query on
//! `id` where documents store `_id` is a typo, not a missing index) and is the
//! ground the report's `schemas` section stands on.
//!
//! Counts are per epoch: a drop, a rename or a delete of every document starts the
//! collection afresh (test suites re-create collections with other models), while
//! the paths ever seen stay known for `unknown_field`. Types are counted with the
//! apps (and drivers) that wrote them, so a drift names its writer.
//!
//! Bounded: collections, paths per collection (Compass refuses more than 1,000 fields
//! too) and nesting depth are capped, what is refused is counted. Walking every
//! document costs: the first [`WALK_ALL_FIRST`] documents of a collection are
//! walked, then those of one operation in [`WALK_EVERY`] (in [`WALK_RARELY`] once
//! [`WALK_MANY`] were walked); a path an update sets is known without a walk.

pub mod enums;
pub mod section;
pub mod validator;
pub mod variants;
pub mod versions;
mod walk;

use mongotap_wire::element::{self, Element};
use rustc_hash::FxHashMap;

use crate::namespace::Change as Lifecycle;
use crate::operation::{ConnInfo, NO_APP};
use crate::shape::command::Category;
use crate::statements::Change;
use crate::values::Keyed;
use crate::view::OpView;

/// Collections followed at most.
const MAX_COLLECTIONS: usize = 1_000;
/// Field paths per collection at most.
pub const MAX_PATHS: usize = 512;
/// Sub-document levels walked below the top.
const MAX_DEPTH: usize = 6;
/// Documents of a collection walked whole before sampling starts.
const WALK_ALL_FIRST: u64 = 256;
/// Then the documents of one operation in this many.
const WALK_EVERY: u64 = 16;
/// Once this many documents were walked, one operation in [`WALK_RARELY`]: the
/// fields of a collection are long known by then.
const WALK_MANY: u64 = 4_096;
/// See [`WALK_MANY`].
const WALK_RARELY: u64 = 128;
/// Writers (app and driver) told apart per collection: one bit each in a type's count.
const MAX_WRITERS: usize = 16;
/// String fields per collection whose values are followed (for an `enum`).
const MAX_STRING_FIELDS: u32 = 32;

/// Values of one BSON type at a path, and who wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeCount {
    /// The BSON type byte.
    pub kind: u8,
    /// Values seen of that type in this epoch.
    pub count: u64,
    /// Bit i: written by the collection's writer i (values read back carry none).
    pub writers: u16,
    /// Of the values, those in documents the traffic wrote (a document read back
    /// twice counts twice in `count`, once here when it was written).
    pub written: u64,
}

/// One field path of a collection.
#[derive(Debug, Clone, Default)]
pub struct Field {
    /// The dotted path; array elements add no segment (`lines.sku`).
    pub path: String,
    /// Documents walked in this epoch that carry it.
    pub present: u64,
    /// The types of its values in this epoch, in the order first seen.
    pub types: Vec<TypeCount>,
    /// For arrays: the lengths seen in this epoch (smallest, largest, sum, arrays).
    pub array_lengths: Option<(u64, u64, u64, u64)>,
    /// For arrays: the lengths seen in this epoch, in doubling buckets.
    pub lengths: Option<Box<LengthBuckets>>,
    /// Whether it ever held a sub-document or an array (so `path.x` can exist).
    container: bool,
    /// Updates grow it (`$push`, `$addToSet`): its length today is no bound.
    pub pushed: bool,
    /// Updates remove it (`$unset`, `$rename`): present today, not required.
    pub removed: bool,
    /// Updates increment it (`$inc`): a counter (a lock's version), not a schema version.
    pub incremented: bool,
    /// Update operators set it (`$set`, `$inc`, `$push`..., a `$rename`'s new name):
    /// documents gain it over their life, not only at their write.
    pub set_by_update: bool,
    /// For strings: the written values while they are few (an `enum`).
    pub strings: Option<Box<enums::Strings>>,
    /// The last document (its number in the collection) that counted it present.
    last_document: u64,
    /// The field holding it where a document walk found it ([`walk::ROOT`] at the
    /// top, [`walk::UNLINKED`] before a walk linked it): see [`Collection::child`].
    parent: u32,
}

/// Array lengths in doubling buckets: bucket 0 holds empty arrays, bucket `i`
/// lengths from 2^(i-1) to 2^i - 1. Enough to tell "a dozen in most documents" from
/// "a hundred thousand in a few", in 128 bytes per array field.
#[derive(Debug, Clone, Default)]
pub struct LengthBuckets([u32; 32]);

impl LengthBuckets {
    fn bucket(len: u64) -> usize {
        (64 - len.leading_zeros() as usize).min(31)
    }

    fn add(&mut self, len: u64) {
        let b = &mut self.0[Self::bucket(len)];
        *b = b.saturating_add(1);
    }

    /// Arrays counted.
    pub fn arrays(&self) -> u64 {
        self.0.iter().map(|n| u64::from(*n)).sum()
    }

    /// The largest length the bucket holding quantile `q` can hold.
    pub fn quantile(&self, q: f64) -> u64 {
        let want = (self.arrays() as f64 * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.0.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= want {
                return (1u64 << i) - 1;
            }
        }
        u64::MAX
    }

    /// The smallest length of the first bucket that holds only lengths of at least
    /// `n`, and the arrays from that bucket up.
    pub fn at_least(&self, n: u64) -> (u64, u64) {
        let first = (0..32).find(|i| Self::lower(*i) >= n).unwrap_or(31);
        (Self::lower(first), self.0[first..].iter().map(|c| u64::from(*c)).sum())
    }

    /// The smallest length bucket `i` holds.
    fn lower(i: usize) -> u64 {
        if i == 0 {
            0
        } else {
            1u64 << (i - 1)
        }
    }

    /// (smallest length of the bucket, arrays) for the buckets that hold any.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        (0..32).filter(|i| self.0[*i] > 0).map(|i| (Self::lower(i), u64::from(self.0[i]))).collect()
    }
}

/// What is known of one collection's documents.
#[derive(Debug, Default)]
pub struct Collection {
    /// Documents walked whole (projected replies aside), in every epoch.
    pub documents: u64,
    /// Documents walked since the collection last started afresh.
    pub epoch_documents: u64,
    /// Of those, documents the traffic wrote (inserts, replacements).
    pub written: u64,
    /// Who wrote: (app, driver), one bit each in [`TypeCount::writers`].
    writers: Vec<(String, Option<String>)>,
    /// The schema versioning pattern's version field, if the documents carry one.
    pub versions: versions::Versions,
    /// The documents' top-level field sets, for migrations no version field marks.
    pub variants: variants::Variants,
    /// Documents offered: written or returned whole, walked or not.
    pub offered: u64,
    /// Operations that offered documents, for the one-in-[`WALK_EVERY`] sample.
    operations: u64,
    /// Its fields, in the order they were first seen.
    pub fields: Vec<Field>,
    index: FxHashMap<Box<[u8]>, u32>,
    /// The same fields by (parent field, key), hashed: a walk finds each key under
    /// its parent without hashing (nor checking) the whole dotted path again.
    children: FxHashMap<u64, u32>,
    /// Paths refused past [`MAX_PATHS`].
    pub refused_paths: u64,
    /// Keys that read as values, not field names (an email, an id in hex, a
    /// number): neither kept nor walked into, so no value becomes a "field".
    pub value_keys: u64,
    /// Hashes values (an enum's, a discriminator's) under the run's key.
    keyed: Keyed,
    /// Keep short string values' text (`--show-values`).
    show_values: bool,
    /// String fields whose values are followed, and those refused past the bound.
    string_fields: u32,
    pub string_fields_refused: u64,
}

impl Collection {
    /// The field at `path`, if any document (or a query) showed it.
    pub fn field(&self, path: &str) -> Option<&Field> {
        self.index.get(path.as_bytes()).map(|i| &self.fields[*i as usize])
    }

    /// Whether no document seen carries `path` (a query's dotted path): its top-level
    /// field was never seen, or it was seen only holding values that cannot hold
    /// `path`'s sub-fields. Deeper typos are left alone: a map-like sub-document
    /// (an ODM's DictField) holds keys no sample may show. `None` when too little is
    /// known to say: fewer than `min_documents` walked, or paths were refused.
    pub fn lacks(&self, path: &str, min_documents: u64) -> Option<bool> {
        if self.documents < min_documents || self.refused_paths > 0 {
            return None;
        }
        let path = String::from_utf8_lossy(&normalize(path.as_bytes())).into_owned();
        let (top, rest) = path.split_once('.').map_or((path.as_str(), None), |(t, r)| (t, Some(r)));
        if top == "_id" || top.is_empty() {
            return Some(false);
        }
        Some(match (self.field(top), rest) {
            (None, _) => true,
            (Some(_), None) => false,
            // `a.b` where `a` was only ever a scalar: no document can hold `a.b`.
            (Some(f), Some(_)) => !f.container,
        })
    }

    /// The half-done migrations no version field marks (see [`variants`]), each
    /// with the fields only its old documents carry and only its new ones, judged on
    /// field sets of at least `min` documents.
    pub fn migrations(&self, min: u64) -> Vec<(variants::Migration, Vec<&str>, Vec<&str>)> {
        if self.versions.field.is_some() && self.versions.partitions(min) {
            return Vec::new();
        }
        let names = |mask: u64| -> Vec<&str> {
            self.variants.fields_of(mask).into_iter().map(|i| self.fields[i].path.as_str()).collect()
        };
        // Updates that move documents from the new set to the old one (setting a field
        // only old documents carry, removing one only new documents carry: a sign-up's
        // token unset once verified) make documents change sets over their life: no
        // release to blame. An edit of the new field itself is no such move.
        let any = |mask: u64, flag: fn(&Field) -> bool| {
            self.variants.fields_of(mask).into_iter().any(|i| flag(&self.fields[i]))
        };
        self.variants
            .migrations(min)
            .into_iter()
            .filter(|m| !any(m.only_old, |f| f.set_by_update) && !any(m.only_new, |f| f.removed))
            .map(|m| {
                let (old, new) = (names(m.only_old), names(m.only_new));
                (m, old, new)
            })
            .collect()
    }

    /// The top-level field names seen.
    pub fn top_level(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.path.as_str()).filter(|p| !p.contains('.'))
    }

    /// The index of the field at `path`, made if new and the bound allows.
    fn slot(&mut self, path: &[u8]) -> Option<usize> {
        let i = match self.index.get(path) {
            Some(i) => *i,
            None if self.fields.len() >= MAX_PATHS => {
                self.refused_paths += 1;
                return None;
            }
            None => {
                let i = self.fields.len() as u32;
                self.index.insert(path.into(), i);
                self.fields.push(Field {
                    path: String::from_utf8_lossy(path).into_owned(),
                    parent: walk::UNLINKED,
                    ..Field::default()
                });
                i
            }
        };
        Some(i as usize)
    }

    /// The collection starts afresh (dropped, renamed, emptied): the counts go, the
    /// paths ever seen stay known.
    fn restart(&mut self) {
        self.epoch_documents = 0;
        self.written = 0;
        self.versions = versions::Versions::default();
        self.variants.clear();
        self.string_fields = 0;
        for f in &mut self.fields {
            f.strings = None;
            f.present = 0;
            f.types.clear();
            f.array_lengths = None;
            f.lengths = None;
        }
    }

    /// The writer bit of a connection ("app (driver)"), if there is room.
    fn writer(&mut self, conn: &ConnInfo) -> u16 {
        let app = conn.app_name.as_deref().unwrap_or(NO_APP);
        let i = match self.writers.iter().position(|(a, d)| a == app && *d == conn.driver) {
            Some(i) => i,
            None if self.writers.len() >= MAX_WRITERS => return 0,
            None => {
                self.writers.push((app.to_owned(), conn.driver.clone()));
                self.writers.len() - 1
            }
        };
        1 << i
    }

    /// The writers whose bits are set in `bits`, as "app (driver)".
    pub fn writers(&self, bits: u16) -> Vec<String> {
        let name = |(app, driver): &(String, Option<String>)| match driver {
            Some(d) => format!("{app} ({d})"),
            None => app.clone(),
        };
        self.writers.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, w)| name(w)).collect()
    }

    /// Marks a path as existing without a document (an update set it), and what
    /// the update operator `op` says of it; `e` is the operator's element for the
    /// path (its value: what `$set` writes, the new name of a `$rename`).
    fn updated(&mut self, e: &Element<'_>, op: &[u8]) {
        let path = normalize(e.key);
        if !crate::names::plausible(&path) {
            self.value_keys += 1;
            return;
        }
        let Some(i) = self.slot(&path) else { return };
        let f = &mut self.fields[i];
        match op {
            b"$push" | b"$addToSet" => f.pushed = true,
            b"$unset" | b"$rename" => f.removed = true,
            b"$inc" => f.incremented = true,
            _ => {}
        }
        // `$setOnInsert` writes a new document's field, not a change of an old one.
        if !matches!(op, b"$unset" | b"$rename" | b"$setOnInsert") {
            f.set_by_update = true;
        }
        // A value an update writes is one of the field's values too (an order's
        // status moved on from "placed").
        if e.kind == 0x02 && matches!(op, b"$set" | b"$setOnInsert") {
            self.string_value(i, e);
        }
        if let (b"$rename", Some(to)) = (op, e.as_str()) {
            let to = normalize(to.as_bytes());
            if let Some(j) = crate::names::plausible(&to).then(|| self.slot(&to)).flatten() {
                self.fields[j].set_by_update = true;
            }
        }
    }

    /// An operation offers `n` documents: whether to walk them. Every document is
    /// walked until [`WALK_ALL_FIRST`], then those of one operation in [`WALK_EVERY`]
    /// (deciding per operation spares the rest even a look at their batch).
    fn offering(&mut self, n: u64) -> bool {
        self.operations += 1;
        let every = if self.documents < WALK_MANY { WALK_EVERY } else { WALK_RARELY };
        let walk = self.offered < WALK_ALL_FIRST || self.operations % every == 0;
        self.offered += n;
        walk
    }
}

/// A query's or an update's path as documents hold it: positions (`lines.0.sku`) and
/// positional operators (`lines.$.sku`, `lines.$[].sku`) are not fields.
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for seg in path.split(|b| *b == b'.') {
        let position = !seg.is_empty() && (seg.iter().all(u8::is_ascii_digit) || seg.starts_with(b"$"));
        if position {
            continue;
        }
        if !out.is_empty() {
            out.push(b'.');
        }
        out.extend_from_slice(seg);
    }
    out
}

/// Every collection's documents.
#[derive(Debug, Default)]
pub struct Schemas {
    collections: Vec<(String, Collection)>,
    index: FxHashMap<String, usize>,
    /// The collection looked up last: operations on one collection come in runs,
    /// and a comparison is cheaper than hashing its name.
    last: usize,
    /// Collections refused past the bound.
    pub refused_collections: u64,
    /// Keep short string values' text for the validator's `enum` (`--show-values`).
    show_values: bool,
}

impl Schemas {
    /// Schemas that keep short string values' text (`--show-values`) when `show`.
    pub fn showing_values(show: bool) -> Schemas {
        Schemas { show_values: show, ..Schemas::default() }
    }

    /// What is known of `namespace`'s documents.
    pub fn get(&self, namespace: &str) -> Option<&Collection> {
        self.index.get(namespace).map(|i| &self.collections[*i].1)
    }

    /// Every collection, by namespace.
    pub fn all(&self) -> impl Iterator<Item = (&String, &Collection)> {
        self.collections.iter().map(|(ns, c)| (ns, c))
    }

    fn collection(&mut self, namespace: &str) -> Option<&mut Collection> {
        if self
            .collections
            .get(self.last)
            .is_some_and(|(ns, _)| element::same(ns.as_bytes(), namespace.as_bytes()))
        {
            return Some(&mut self.collections[self.last].1);
        }
        let i = match self.index.get(namespace) {
            Some(i) => *i,
            None if self.collections.len() >= MAX_COLLECTIONS => {
                self.refused_collections += 1;
                return None;
            }
            None => {
                let c = Collection { show_values: self.show_values, ..Collection::default() };
                self.collections.push((namespace.to_owned(), c));
                self.index.insert(namespace.to_owned(), self.collections.len() - 1);
                self.collections.len() - 1
            }
        };
        self.last = i;
        Some(&mut self.collections[i].1)
    }

    fn restart(&mut self, ns: &str) {
        if let Some(i) = self.index.get(ns) {
            self.collections[*i].1.restart();
        }
    }

    /// A collection's life changed: what is counted of it starts afresh.
    fn lifecycle(&mut self, change: &Lifecycle) {
        match change {
            Lifecycle::Dropped(ns) | Lifecycle::Emptied(ns) | Lifecycle::Created(ns) => self.restart(ns),
            Lifecycle::Renamed { from, to } => {
                self.restart(from);
                self.restart(to);
            }
            Lifecycle::DatabaseDropped(db) => {
                for (ns, c) in &mut self.collections {
                    if ns.split_once('.').is_some_and(|(d, _)| d == db) {
                        c.restart();
                    }
                }
            }
        }
    }

    /// Learns from one operation.
    pub fn observe(&mut self, v: &OpView<'_>) {
        if let Some(change) = &v.change {
            self.lifecycle(change);
        }
        let (Some(cmd), false) = (&v.command, v.op.failed()) else { return };
        let ns = &*v.op.namespace;
        match v.category {
            Category::Write => {
                let inserts = v.inserts();
                if !inserts.is_empty() {
                    // bulkWrite names a namespace per statement; others use the command's.
                    let walk = self.collection(ns).is_some_and(|c| c.offering(inserts.len() as u64));
                    for (other, d) in inserts.iter().copied().filter(|_| walk) {
                        if let Some(c) = self.collection(other.unwrap_or(ns)) {
                            let writer = c.writer(&v.op.conn);
                            c.offer(d, Some(writer));
                        }
                    }
                }
                for u in v.updates().iter().copied() {
                    let Some(c) = self.collection(u.namespace.unwrap_or(ns)) else { continue };
                    match u.change {
                        Change::Replacement(d) => {
                            if c.offering(1) {
                                let writer = c.writer(&v.op.conn);
                                c.offer(d, Some(writer));
                            }
                        }
                        Change::Operators(ops) => {
                            for group in element::elements(ops) {
                                if !sets_fields(group.key) && !matches!(group.key, b"$unset" | b"$rename") {
                                    continue;
                                }
                                for f in element::elements_in(group.as_document()) {
                                    c.updated(&f, group.key);
                                }
                            }
                        }
                        Change::Pipeline => {}
                    }
                }
                // A projected document (`fields`) is not the document as stored.
                let projected = || {
                    element::find(cmd.body, "fields").is_some()
                        || element::find(cmd.body, "projection").is_some()
                };
                let value = v.find_and_modify_value();
                if let Some(value) = value.filter(|_| !projected()) {
                    if let Some(c) = self.collection(ns) {
                        if c.offering(1) {
                            c.offer(value, None);
                        }
                    }
                }
            }
            // Documents as stored: the first batch of a find without a projection
            // (a getMore cannot tell a find's cursor from an aggregation's).
            Category::Read if cmd.name == "find" && v.op.docs_returned > 0 => {
                let Some(c) = self.collection(ns) else { return };
                if !c.offering(v.op.docs_returned) || element::find(cmd.body, "projection").is_some() {
                    return;
                }
                for d in element::elements_in(v.batch).filter_map(|d| d.as_document()) {
                    c.offer(d, None);
                }
            }
            Category::Read | Category::Command => {}
        }
    }
}

/// Update operators whose keys are fields the document holds afterwards.
fn sets_fields(op: &[u8]) -> bool {
    matches!(
        op,
        b"$set"
            | b"$setOnInsert"
            | b"$inc"
            | b"$mul"
            | b"$push"
            | b"$addToSet"
            | b"$max"
            | b"$min"
            | b"$currentDate"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    pub(super) fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    #[test]
    fn array_lengths_in_doubling_buckets() {
        let mut h = LengthBuckets::default();
        for len in (0..95).map(|i| i % 12).chain([1500, 1500, 3000, 40, 9]) {
            h.add(len);
        }
        assert_eq!(h.arrays(), 100);
        assert_eq!(h.quantile(0.5), 7, "half the arrays hold at most 7");
        assert_eq!(h.quantile(0.99), 2047);
        assert_eq!(h.at_least(1000), (1024, 3), "1,000 rounds up to the bucket from 1,024");
        assert_eq!(h.at_least(1024), (1024, 3));
        assert_eq!(h.at_least(0), (0, 100));
        assert_eq!(h.buckets()[0], (0, 8));
    }

    #[test]
    fn positions_and_positional_operators_are_not_fields() {
        assert_eq!(normalize(b"lines.0.sku"), b"lines.sku");
        assert_eq!(normalize(b"lines.$.qty"), b"lines.qty");
        assert_eq!(normalize(b"lines.$[].qty"), b"lines.qty");
        assert_eq!(normalize(b"lines.$[x].qty"), b"lines.qty");
        assert_eq!(normalize(b"a"), b"a");
    }

    #[test]
    fn paths_are_bounded_and_sampling_thins_out() {
        let mut c = Collection::default();
        let mut d = bson::Document::new();
        for i in 0..(MAX_PATHS + 10) {
            d.insert(format!("f{i}"), 1);
        }
        c.offering(1);
        c.offer(&raw(d), None);
        assert_eq!((c.fields.len(), c.refused_paths), (MAX_PATHS, 10));
        let mut c = Collection::default();
        for i in 0..(WALK_ALL_FIRST + 10 * WALK_EVERY) {
            if c.offering(1) {
                c.offer(&raw(doc! {"_id": i as i64}), None);
            }
        }
        assert_eq!((c.documents, c.offered), (WALK_ALL_FIRST + 10, WALK_ALL_FIRST + 10 * WALK_EVERY));
    }
}
