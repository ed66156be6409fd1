//! Repeated full-document rewrites (`full_document_rewrite`): a write shape that
//! re-sends whole documents (a replacement, a `$set` of almost every field) or
//! whole sub-trees (a `$set` of an entire array, as mongoengine saves a changed
//! list) to change a small part of them. Every write re-sends and re-serialises
//! the whole, and a whole-document save loses concurrent updates to the fields it
//! did not mean to touch.
//!
//! What actually changed is worked out against a remembered copy of each document
//! (by namespace and `_id`): per top-level field, a keyed hash of its value and its
//! size, and for arrays their length and the hash of their elements in order, so
//! an append shows as an append. Copies are learned from earlier rewrites and, in
//! collections that see rewrites, from the documents replies return (finds without
//! a projection, findAndModify's `value`). Where no copy was seen, the changed
//! fields are "unknown", not guessed.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use bson::RawDocument;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::json;

use mongotap_wire::element::{self, Element};

use crate::detectors::driver::{Language, Odm, Stack};
use crate::detectors::{collection, median, Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::Paths;
use crate::operation::{ConnInfo, NO_APP};
use crate::statements::{self, Change};
use crate::values::{At, Keyed};
use crate::view::{OpView, ShapeId};

/// No field: the whole document.
const WHOLE: u32 = u32::MAX;
/// Changed fractions kept per write shape.
const MAX_SAMPLES: usize = 256;
/// Distinct documents counted per write shape.
const MAX_DOCS: usize = 10_000;
/// Fields named in a changed-fields histogram.
const MAX_FIELDS: usize = 32;

/// One remembered field.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Field {
    name: u32,
    hash: u64,
    size: u32,
    /// For an array: its length.
    len: Option<u32>,
}

/// One remembered document.
#[derive(Debug, Clone, Default)]
struct Copy {
    fields: Vec<Field>,
    last_used: Micros,
    /// Whole rewrites of it seen.
    rewrites: u32,
}

/// What a rewrite changed.
#[derive(Debug, Default)]
struct Diff {
    /// Changed fields that are arrays which only grew at their end.
    appended_fields: Vec<u32>,
    /// Fields compared (the union of old and new, `_id` aside).
    fields: usize,
    changed: Vec<u32>,
    /// Elements appended to arrays that only grew at their end.
    appended: u64,
    /// Bytes of what changed (appended elements only, for appends).
    changed_bytes: u64,
    /// Bytes of all the new values (keys and framing aside).
    total_bytes: u64,
}

#[derive(Default)]
struct Stat {
    namespace: String,
    rewrites: u64,
    with_copy: u64,
    repeats: u64,
    /// Rewrites whose reply said nothing changed (`nModified: 0`).
    unchanged: u64,
    shares: Vec<f64>,
    changed_fields: BTreeMap<u32, u64>,
    /// Fields that only grew at their end (a $push would do).
    appended_fields: BTreeSet<u32>,
    appended: u64,
    bytes_sent: u64,
    /// Bytes of the values re-sent by the rewrites compared with a copy (what changed
    /// in them is `bytes_changed`).
    bytes_sent_compared: u64,
    bytes_changed: u64,
    docs: FxHashSet<u64>,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
    drivers: BTreeSet<String>,
}

/// The rewrite detector.
pub struct Rewrite {
    keyed: Keyed,
    names: Paths,
    whole_set_share: f64,
    min_subtree_bytes: u64,
    max_documents: usize,
    max_stats: usize,
    copies: FxHashMap<(u64, u64), Copy>,
    /// Collections that saw a rewrite: their replies teach copies.
    watched: FxHashSet<String>,
    stats: FxHashMap<(ShapeId, u32), Stat>,
    evicted_copies: u64,
    refused_stats: u64,
}

fn hash_value(keyed: &Keyed, e: &Element<'_>) -> u64 {
    let mut h = keyed.hasher();
    h.write_u8(e.kind);
    h.write(e.value);
    h.finish()
}

/// A namespace in one epoch (see [`crate::namespace`]): a collection dropped and
/// re-created is another, whose documents are never compared with the old ones.
fn ns_hash(keyed: &Keyed, ns: &str, epoch: u32) -> u64 {
    let mut h = keyed.hasher();
    h.write(ns.as_bytes());
    h.write_u32(epoch);
    h.finish()
}

/// Whether `new` is `old` with elements appended: the first `old_len` elements of
/// `new` hash to the old array's hash. Returns the appended elements and bytes.
fn appended(keyed: &Keyed, old: &Field, new: &Element<'_>) -> Option<(u64, u64)> {
    let old_len = old.len? as usize;
    let arr = new.as_array()?;
    let items: Vec<Element<'_>> = element::elements(arr).collect();
    if items.len() <= old_len {
        return None;
    }
    // The old hash is of the whole old array's bytes, which are not the new array's
    // first bytes (the length prefix differs): rebuild the old array's value from the
    // first `old_len` elements and hash it as the old one was hashed.
    let mut rebuilt = Vec::with_capacity(new.value.len());
    rebuilt.extend_from_slice(&[0; 4]);
    for (i, item) in items[..old_len].iter().enumerate() {
        rebuilt.push(item.kind);
        rebuilt.extend_from_slice(i.to_string().as_bytes());
        rebuilt.push(0);
        rebuilt.extend_from_slice(item.value);
    }
    rebuilt.push(0);
    let len = rebuilt.len() as i32;
    rebuilt[..4].copy_from_slice(&len.to_le_bytes());
    let mut h = keyed.hasher();
    h.write_u8(0x04);
    h.write(&rebuilt);
    (h.finish() == old.hash).then(|| {
        let bytes = items[old_len..].iter().map(|i| i.value.len() as u64 + 8).sum();
        ((items.len() - old_len) as u64, bytes)
    })
}

impl Rewrite {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> Rewrite {
        Rewrite {
            keyed: Keyed::default(),
            names: Paths::default(),
            whole_set_share: t.rewrite_whole_set_share,
            min_subtree_bytes: t.rewrite_min_subtree_bytes,
            max_documents: t.max_documents as usize,
            max_stats: t.max_patterns as usize,
            copies: FxHashMap::default(),
            watched: FxHashSet::default(),
            stats: FxHashMap::default(),
            evicted_copies: 0,
            refused_stats: 0,
        }
    }

    fn field(&mut self, e: &Element<'_>) -> Option<Field> {
        let name = self.names.id(At { path: e.key, array: None })?;
        let len = e.as_array().map(|a| element::elements(a).count() as u32);
        Some(Field { name, hash: hash_value(&self.keyed, e), size: e.value.len() as u32, len })
    }

    fn copy_of(&mut self, doc: &RawDocument) -> Vec<Field> {
        let elements: Vec<Element<'_>> = element::elements(doc).filter(|e| e.key != b"_id").collect();
        elements.iter().filter_map(|e| self.field(e)).collect()
    }

    /// Remembers a document, making room if need be (the least recently used half goes).
    fn remember(&mut self, key: (u64, u64), fields: Vec<Field>, at: Micros, rewrite: bool) {
        if !self.copies.contains_key(&key) && self.copies.len() >= self.max_documents {
            let mut ages: Vec<Micros> = self.copies.values().map(|c| c.last_used).collect();
            let cut = ages.len() / 2;
            let (_, median, _) = ages.select_nth_unstable(cut);
            let median = *median;
            let before = self.copies.len();
            self.copies.retain(|_, c| c.last_used > median);
            self.evicted_copies += (before - self.copies.len()) as u64;
        }
        let c = self.copies.entry(key).or_default();
        c.fields = fields;
        c.last_used = at;
        c.rewrites += u32::from(rewrite);
    }

    /// Learns the documents of a reply, in a watched collection.
    fn learn(&mut self, ns: (&str, u32), doc: &RawDocument, at: Micros) {
        let Some(id) = element::find(doc, "_id") else { return };
        let key = (ns_hash(&self.keyed, ns.0, ns.1), hash_value(&self.keyed, &id));
        let fields = self.copy_of(doc);
        let rewrites = self.copies.get(&key).map_or(0, |c| c.rewrites);
        self.remember(key, fields, at, false);
        if let Some(c) = self.copies.get_mut(&key) {
            c.rewrites = rewrites;
        }
    }

    fn diff(old: &[Field], new: &[Field]) -> Diff {
        let mut d = Diff::default();
        let mut names: BTreeSet<u32> = old.iter().map(|f| f.name).collect();
        names.extend(new.iter().map(|f| f.name));
        d.fields = names.len();
        d.total_bytes = new.iter().map(|f| f.size as u64).sum();
        for name in names {
            let (o, n) = (old.iter().find(|f| f.name == name), new.iter().find(|f| f.name == name));
            match (o, n) {
                (Some(o), Some(n)) if o.hash == n.hash => {}
                (_, n) => {
                    d.changed.push(name);
                    d.changed_bytes += n.map_or(0, |n| n.size as u64);
                }
            }
        }
        d
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        key: (ShapeId, u32),
        ns: &str,
        doc: u64,
        diff: Option<&Diff>,
        repeat: bool,
        sent: u64,
        unchanged: bool,
        conn: &ConnInfo,
        at: Micros,
    ) {
        if !self.stats.contains_key(&key) && self.stats.len() >= self.max_stats {
            self.refused_stats += 1;
            return;
        }
        let s = self.stats.entry(key).or_insert_with(|| Stat {
            namespace: ns.to_owned(),
            first_at: at,
            ..Stat::default()
        });
        s.rewrites += 1;
        s.repeats += u64::from(repeat);
        s.unchanged += u64::from(unchanged);
        s.bytes_sent += sent;
        s.last_at = at;
        if s.docs.len() < MAX_DOCS {
            s.docs.insert(doc);
        }
        if let Some(d) = diff {
            s.with_copy += 1;
            if s.shares.len() < MAX_SAMPLES {
                s.shares.push(d.changed.len() as f64 / d.fields.max(1) as f64);
            }
            for f in &d.changed {
                if let Some(n) = s.changed_fields.get_mut(f) {
                    *n += 1;
                } else if s.changed_fields.len() < MAX_FIELDS {
                    s.changed_fields.insert(*f, 1);
                }
            }
            s.appended += d.appended;
            s.bytes_changed += d.changed_bytes;
            s.bytes_sent_compared += d.total_bytes;
            for f in &d.appended_fields {
                if s.appended_fields.len() < MAX_FIELDS {
                    s.appended_fields.insert(*f);
                }
            }
        }
        let app = conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut s.apps, app);
        if let Some(dr) = &conn.driver {
            crate::detectors::keep_name(&mut s.drivers, dr);
        }
    }
}

impl Detector for Rewrite {
    fn name(&self) -> &'static str {
        "full_document_rewrite"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        let now = op.started_at;
        // Replies in collections that see rewrites teach copies.
        if self.watched.contains(&*op.namespace) {
            let ns = (&*op.namespace, v.epoch);
            let projected = element::find(cmd.body, "projection").is_some();
            if let (false, Some(batch)) = (projected, v.batch) {
                for d in element::elements(batch).filter_map(|d| d.as_document()) {
                    self.learn(ns, d, now);
                }
            }
            // findAndModify's `value` (before the change unless `new`): learnt before
            // the statement below is compared with it.
            if let Some(value) = v.find_and_modify_value() {
                if element::find(cmd.body, "new").and_then(|e| e.as_bool()) != Some(true) {
                    self.learn(ns, value, now);
                }
            }
            // An insert makes a new document (a test case re-using an `_id` made in an
            // earlier one starts afresh); a delete by `_id` ends one.
            if !op.failed() {
                for (_, d) in v.inserts().iter().copied() {
                    self.learn(ns, d, now);
                }
                for d in cmd.documents("deletes") {
                    let filter = element::find(d, "q").and_then(|q| q.as_document());
                    if let Some(id) = filter.and_then(statements::id_of) {
                        self.copies.remove(&(ns_hash(&self.keyed, ns.0, ns.1), hash_value(&self.keyed, &id)));
                    }
                }
            }
        }
        if op.failed() || v.category != crate::shape::command::Category::Write {
            return;
        }
        let updates = v.updates();
        let outcome = v.outcome.clone().unwrap_or_default();
        let unchanged = updates.len() == 1 && outcome.unchanged() && !updates[0].upsert;
        let shape = v.shape_ids.first().copied().flatten().unwrap_or(0);
        for (i, u) in updates.iter().copied().enumerate() {
            let ns = u.namespace.unwrap_or(&op.namespace).to_owned();
            let Some(id) = u.filter.and_then(statements::id_of) else { continue };
            let key = (ns_hash(&self.keyed, &ns, v.epoch), hash_value(&self.keyed, &id));
            let doc = key.1;
            if !outcome.changed_existing(i) {
                // Nothing was there to rewrite: the statement matched nothing, or its
                // upsert inserted the document (which is now the copy to compare with).
                if let (true, Change::Replacement(d)) = (outcome.upserted.contains(&(i as u64)), u.change) {
                    let fields = self.copy_of(d);
                    self.remember(key, fields, now, false);
                }
                continue;
            }
            match u.change {
                // A document of its `_id` alone has nothing an operator could write
                // instead: saved again and again (mongoengine's own tests do), it is no
                // rewrite of anything. What is remembered of it is that it has no field.
                Change::Replacement(d) if element::elements(d).all(|e| e.key == b"_id") => {
                    if let Some(c) = self.copies.get_mut(&key) {
                        c.fields.clear();
                        c.last_used = now;
                    }
                }
                Change::Replacement(d) => {
                    self.watched.insert(ns.clone());
                    let new = self.copy_of(d);
                    let old = self.copies.get(&key).cloned();
                    let diff = old.as_ref().map(|o| {
                        let mut diff = Self::diff(&o.fields, &new);
                        // An array that only grew at its end was appended to: $push would do.
                        for e in element::elements(d).filter(|e| e.kind == 0x04) {
                            let Some(name) = self.names.id(At { path: e.key, array: None }) else { continue };
                            let Some(prior) = o.fields.iter().find(|f| f.name == name) else { continue };
                            if let (true, Some((n, bytes))) =
                                (diff.changed.contains(&name), appended(&self.keyed, prior, &e))
                            {
                                diff.appended += n;
                                diff.appended_fields.push(name);
                                let size = new.iter().find(|f| f.name == name).map_or(0, |f| f.size as u64);
                                diff.changed_bytes = diff.changed_bytes.saturating_sub(size) + bytes;
                            }
                        }
                        diff
                    });
                    let repeat = old.is_some();
                    self.record(
                        (shape, WHOLE),
                        &ns,
                        doc,
                        diff.as_ref(),
                        repeat,
                        d.as_bytes().len() as u64,
                        unchanged,
                        &op.conn,
                        now,
                    );
                    self.remember(key, new, now, true);
                }
                Change::Operators(ops) => {
                    let Some(set) = element::find(ops, "$set").and_then(|s| s.as_document()) else {
                        // Other operators change fields in ways not replayed here: forget them.
                        if let Some(c) = self.copies.get_mut(&key) {
                            for group in element::elements(ops).filter_map(|g| g.as_document()) {
                                for p in element::elements(group) {
                                    let top = p.key.split(|b| *b == b'.').next().unwrap_or(p.key);
                                    c.fields.retain(|f| self.names.name(f.name).as_bytes() != top);
                                }
                            }
                        }
                        continue;
                    };
                    let sets: Vec<Element<'_>> = element::elements(set).collect();
                    let old = self.copies.get(&key).cloned();
                    let top_level: Vec<&Element<'_>> =
                        sets.iter().filter(|e| !e.key.contains(&b'.')).collect();
                    // A $set of (almost) every known field: a whole rewrite in disguise.
                    if let Some(o) = &old {
                        let known = o.fields.len();
                        if known >= 3 && top_level.len() as f64 >= self.whole_set_share * known as f64 {
                            let new: Vec<Field> = top_level.iter().filter_map(|e| self.field(e)).collect();
                            let olds: Vec<Field> = o
                                .fields
                                .iter()
                                .filter(|f| new.iter().any(|n| n.name == f.name))
                                .copied()
                                .collect();
                            let diff = Self::diff(&olds, &new);
                            let sent = set.as_bytes().len() as u64;
                            self.record(
                                (shape, WHOLE),
                                &ns,
                                doc,
                                Some(&diff),
                                true,
                                sent,
                                unchanged,
                                &op.conn,
                                now,
                            );
                            self.watched.insert(ns.clone());
                            let mut fields = o.fields.clone();
                            for n in new {
                                match fields.iter_mut().find(|f| f.name == n.name) {
                                    Some(f) => *f = n,
                                    None => fields.push(n),
                                }
                            }
                            self.remember(key, fields, now, true);
                            continue;
                        }
                    }
                    // A $set of a whole large array or sub-document: a sub-tree rewrite.
                    let mut fields = old.as_ref().map(|o| o.fields.clone());
                    for e in top_level {
                        let big =
                            matches!(e.kind, 0x03 | 0x04) && e.value.len() as u64 >= self.min_subtree_bytes;
                        let Some(new) = self.field(e) else { continue };
                        let prior =
                            fields.as_ref().and_then(|f| f.iter().find(|f| f.name == new.name).copied());
                        if big {
                            self.watched.insert(ns.clone());
                            let diff = prior.map(|p| {
                                let mut d = Diff {
                                    fields: new.len.unwrap_or(1).max(1) as usize,
                                    total_bytes: new.size as u64,
                                    ..Diff::default()
                                };
                                if p.hash != new.hash {
                                    match appended(&self.keyed, &p, e) {
                                        Some((n, bytes)) => {
                                            d.appended = n;
                                            d.changed_bytes = bytes;
                                            d.changed = vec![new.name; n as usize];
                                        }
                                        None => {
                                            d.changed = vec![new.name; d.fields];
                                            d.changed_bytes = new.size as u64;
                                        }
                                    }
                                }
                                d
                            });
                            let repeat =
                                self.copies.get(&key).is_some_and(|c| c.rewrites > 0) || prior.is_some();
                            let sent = e.value.len() as u64;
                            self.record(
                                (shape, new.name),
                                &ns,
                                doc,
                                diff.as_ref(),
                                repeat,
                                sent,
                                unchanged,
                                &op.conn,
                                now,
                            );
                        }
                        let f = fields.get_or_insert_with(Vec::new);
                        match f.iter_mut().find(|f| f.name == new.name) {
                            Some(slot) => *slot = new,
                            None => f.push(new),
                        }
                    }
                    if let Some(f) = fields {
                        let is_rewrite = self.copies.get(&key).is_some_and(|c| c.rewrites > 0);
                        if old.is_some() || self.watched.contains(&ns) {
                            self.remember(key, f, now, false);
                            if let (true, Some(c)) = (is_rewrite, self.copies.get_mut(&key)) {
                                c.rewrites += 1;
                            }
                        }
                    }
                }
                Change::Pipeline => {}
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("documents", self.evicted_copies),
            ("shapes", self.refused_stats),
            ("fields", self.names.refused),
        ]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut keys: Vec<&(ShapeId, u32)> = self.stats.keys().collect();
        keys.sort();
        let mut out = Vec::new();
        for key in keys {
            let s = &self.stats[key];
            if s.rewrites < t.rewrite_min_count || s.repeats < t.rewrite_min_repeats {
                continue;
            }
            let known = s.with_copy > 0;
            let mut shares: Vec<u64> = s.shares.iter().map(|x| (x * 1000.0).round() as u64).collect();
            shares.sort_unstable();
            let share = median(&shares) as f64 / 1000.0;
            // What changed, in fields and in bytes: a rewrite that changes most fields,
            // or most bytes, is a fair replacement.
            let byte_share = s.bytes_changed as f64 / s.bytes_sent_compared.max(1) as f64;
            if known && share > t.rewrite_max_changed_share && byte_share > t.rewrite_max_changed_share {
                continue;
            }
            let sub_tree = key.1 != WHOLE;
            let field = sub_tree.then(|| self.names.name(key.1).to_owned());
            let coll = collection(&s.namespace);
            let mean_sent = s.bytes_sent / s.rewrites.max(1);
            // The bytes wasted raise the severity: most of a kilobyte or more re-sent each time.
            let severity = match (known, byte_share <= 0.25 && mean_sent >= 1_024) {
                (false, _) => Severity::Low,
                (true, true) => Severity::High,
                (true, false) => Severity::Medium,
            };
            let mut changed: Vec<(&u32, &u64)> = s.changed_fields.iter().collect();
            changed.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let changed: Vec<(String, u64)> =
                changed.iter().map(|(f, n)| (self.names.name(**f).to_owned(), **n)).collect();
            let names: Vec<&str> = changed.iter().map(|(f, _)| f.as_str()).collect();
            let stack = Stack::from_driver(s.drivers.iter().next().map(String::as_str));
            let what = match (&field, known) {
                (Some(f), true) if s.appended > 0 => format!(
                    "each save re-sends the whole `{f}` ({mean_sent} bytes on average) to add about {} element(s)",
                    (s.appended as f64 / s.with_copy as f64).round()
                ),
                (Some(f), true) => format!("each save re-sends the whole `{f}` ({mean_sent} bytes on average)"),
                (Some(f), false) => format!("each save re-sends the whole `{f}` ({mean_sent} bytes on average; what changed is unknown: no earlier copy was seen)"),
                (None, true) => format!(
                    "each write re-sends the whole document ({mean_sent} bytes on average) while a median {:.0}% of its fields change ({}), {:.0}% of its bytes",
                    share * 100.0,
                    if names.is_empty() { "nothing".to_owned() } else { names.join(", ") },
                    byte_share * 100.0
                ),
                (None, false) => format!("each write re-sends the whole document ({mean_sent} bytes on average; changed fields unknown: no earlier copy was seen)"),
            };
            let recommendation = format!(
                "{ns} is rewritten whole again and again: {n} rewrites of {docs} documents; {what}. Write only what \
                 changes with field-level operators ($push for an appended element, $inc for a counter, $set for a \
                 field): fewer bytes on every write, and no lost update when two writers touch the same document \
                 (a whole-document save overwrites fields it did not mean to change).{odm}",
                ns = s.namespace,
                n = s.rewrites,
                docs = s.docs.len(),
                odm = match stack.odm {
                    Some(Odm::MongoEngine) => " With MongoEngine, atomic updates (Doc.objects(id=...).update_one(push__lines=line)) instead of save() after appending to a list.",
                    Some(Odm::SpringData) => " With Spring Data, mongoTemplate.updateFirst(...) with an Update instead of repository save().",
                    Some(Odm::Mongoose) => " With Mongoose, Model.updateOne with operators instead of replaceOne or reassigning whole arrays.",
                    _ => "",
                },
            );
            let pushed: Vec<String> =
                s.appended_fields.iter().map(|f| self.names.name(*f).to_owned()).collect();
            let ops = |py: bool| -> String {
                let mut parts = Vec::new();
                let (pushes, sets): (Vec<&str>, Vec<&str>) = match &field {
                    Some(f) => (vec![f.as_str()], Vec::new()),
                    None => names.iter().take(4).partition(|f| pushed.iter().any(|p| p == *f)),
                };
                let entry = |f: &str, v: &str| if py { format!("\"{f}\": {v}") } else { format!("{f}: {v}") };
                if !pushes.is_empty() {
                    let items: Vec<String> =
                        pushes.iter().map(|f| entry(f, &format!("new_{f}_item"))).collect();
                    parts.push(if py {
                        format!("\"$push\": {{{}}}", items.join(", "))
                    } else {
                        format!("$push: {{ {} }}", items.join(", "))
                    });
                }
                if !sets.is_empty() || parts.is_empty() {
                    let items: Vec<String> = if sets.is_empty() {
                        vec![entry("<field>", "value")]
                    } else {
                        sets.iter().map(|f| entry(f, &format!("new_{f}"))).collect()
                    };
                    parts.push(if py {
                        format!("\"$set\": {{{}}}", items.join(", "))
                    } else {
                        format!("$set: {{ {} }}", items.join(", "))
                    });
                }
                parts.join(", ")
            };
            let fix = match (stack.language, stack.odm) {
                (_, Some(Odm::MongoEngine)) => format!(
                    "# an atomic update instead of save() of the loaded document:\n{cls}.objects(id=doc.id).update_one({op})",
                    cls = crate::detectors::snippets::class_name(coll),
                    op = field.as_ref().or(pushed.first()).map_or("set__<field>=value".to_owned(), |f| format!("push__{f}=new_{f}_item")),
                ),
                (Language::Python, _) => format!(
                    "# send only what changes:\ndb.{coll}.update_one({{\"_id\": doc_id}}, {{{}}})",
                    ops(true)
                ),
                _ => format!("// send only what changes:\ndb.{coll}.updateOne({{ _id: docId }}, {{ {} }})", ops(false)),
            };
            let evidence = json!({
                "count": s.rewrites,
                "documents": s.docs.len(),
                "rewrites_of_known_documents": s.repeats,
                "compared_with_an_earlier_copy": s.with_copy,
                "changed_share_median": if known { json!(share) } else { json!(null) },
                "changed_fields": if known { json!(changed.iter().map(|(f, n)| json!({"field": f, "rewrites": n})).collect::<Vec<_>>()) } else { json!("unknown") },
                "elements_appended": s.appended,
                "bytes_sent_per_rewrite": mean_sent,
                "bytes_changed_per_rewrite": if known { json!(s.bytes_changed / s.with_copy.max(1)) } else { json!(null) },
                "changed_bytes_share": if known { json!((byte_share * 1000.0).round() / 1000.0) } else { json!(null) },
                "unchanged_rewrites": s.unchanged,
                "shape": ctx.row(key.0).map(|r| r.shape.clone()),
                "apps": s.apps,
                "drivers": s.drivers.iter().map(|d| Stack::describe(d)).collect::<Vec<_>>(),
                "first_seen": crate::event::rfc3339(s.first_at),
                "last_seen": crate::event::rfc3339(s.last_at),
                "thresholds": {
                    "rewrite_min_count": t.rewrite_min_count,
                    "rewrite_min_repeats": t.rewrite_min_repeats,
                    "rewrite_max_changed_share": t.rewrite_max_changed_share,
                    "rewrite_whole_set_share": t.rewrite_whole_set_share,
                    "rewrite_min_subtree_bytes": t.rewrite_min_subtree_bytes,
                },
            });
            let shapes: Vec<ShapeId> = if key.0 == 0 { Vec::new() } else { vec![key.0] };
            out.push(
                Draft {
                    kind: "full_document_rewrite",
                    severity,
                    namespace: &s.namespace,
                    shapes: &shapes,
                    evidence,
                    recommendation,
                    fix: Some(fix),
                    extra: field.map(|f| vec![("field", json!(f))]).unwrap_or_default(),
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
