//! N+1 query chains (`n_plus_one`): a read returns N documents, and the same client
//! then sends one query per document, each asking for a value the parent returned.
//!
//! The link is made by value, not by timing alone. When a read returns at least two
//! documents, its link-able values are kept as keyed hashes, by path, in a parent
//! occurrence of that client. A later read of the same client (on any of its
//! pooled connections) whose filter asks for equality with one of those values is
//! a child of the newest open parent holding it. A parent stays open while its
//! children keep coming. When it closes, each child shape's best link (parent path
//! -> child field) is judged against the thresholds ([`Thresholds`]):
//! - enough distinct linked children (one `$in` fetch has one child, not N);
//! - they cover enough of the parent's distinct values at that path (a loop over
//!   the page, not a coincidence);
//! - they explain most of the client's reads of that shape during the burst
//!   (concurrent, unrelated reads of the same shape do not);
//! - there are not many more of them than the parent holds references (another
//!   loop asking for values that merely coincide).
//!
//! Parents that pass are counted per pattern (parent shape, child shape, link); the
//! pattern becomes a finding. The same value asked again and again is not N+1: it
//! is left to [`crate::detectors::reads::redundant_query`].
//!
//! Bounds: clients, open parents per client, values per parent, values in all open
//! parents, paths, links, patterns. What is let go of is counted by kind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bson::RawDocument;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::json;
use smallvec::SmallVec;

use mongotap_wire::element::{self, Element};

use crate::detectors::driver::Stack;
use crate::detectors::snippets::{self, Batch};
use crate::detectors::MAX_NAMES;
use crate::detectors::{collection, median, ms, Context, Detector, Thresholds};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::Paths;
use crate::operation::{ConnInfo, NO_APP};
use crate::shape::command::Category;
use crate::values::{self, At, Keyed};
use crate::view::{OpView, ShapeId};

mod occurrence;
mod pattern;
#[cfg(test)]
mod tests;

use occurrence::*;
use pattern::*;

/// Paths a value is remembered at, per parent (a value at more places is common
/// only for small numbers, which are poor links anyway).
const PATHS_PER_VALUE: usize = 4;
/// Distinct paths remembered per parent.
const MAX_PATHS_PER_PARENT: usize = 256;
/// Links (child shape, path, field) remembered per parent.
const MAX_LINKS: usize = 256;
/// Distinct child values remembered per link of one parent.
const MAX_DISTINCT: usize = 4_096;
/// Child shapes whose unexplained reads are counted per client.
const MAX_UNEXPLAINED: usize = 64;
/// Per-occurrence N values kept per pattern for the typical N.
const MAX_SAMPLES: usize = 256;
/// Every multi-document read of a shape has its values indexed until this many
/// were; after that, if none of them showed an N+1, one in [`SAMPLE_EVERY`] is.
/// Indexing a parent reads every value it returned (most of this detector's cost);
/// a page that is an N+1 is one on every load, so a sample still finds it. A shape
/// that showed one is indexed every time, at the paths that linked (and wholly in
/// one read out of [`SAMPLE_EVERY`], to find new links).
const INDEX_ALL_FIRST: u64 = 32;
/// See [`INDEX_ALL_FIRST`].
const SAMPLE_EVERY: u64 = 16;
/// After this many reads of a shape, the sample is one in `4 * SAMPLE_EVERY`: a page
/// that is an N+1 on every load still shows within 64 loads.
const SAMPLE_LONGER_AFTER: u64 = 512;

/// What is known of a parent shape.
#[derive(Debug, Default, Clone)]
struct ParentShape {
    /// Multi-document reads seen.
    reads: u64,
    /// Those whose values were indexed (see [`INDEX_ALL_FIRST`]).
    indexed: u64,
    /// Indexed reads that showed an N+1.
    showed: u64,
    /// The paths of this shape that linked in an N+1.
    linked: Vec<u32>,
    /// Its collection, in the names table (learnt once).
    collection: Option<Option<u32>>,
}

/// One client: its open parents, newest last.
struct Client {
    conn: Arc<ConnInfo>,
    last_at: Micros,
    open: Vec<Occurrence>,
    /// Reads of each child shape that no open parent explained, since the client
    /// was first seen: a parent's share is the difference over its life (one
    /// count per read, not one per open parent).
    unexplained: FxHashMap<ShapeId, u64>,
}

/// What the detector let go of to stay bounded, by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Evicted {
    /// Clients (and their open parents) evicted, least recently active first.
    clients: u64,
    /// Open parents with children closed early (per-client or run-wide bound).
    parents: u64,
    /// Parent shapes not tracked (their reads are counted as examined).
    parent_shapes: u64,
    /// New patterns refused.
    patterns: u64,
    /// Links refused in a parent, and values past a link's cap.
    links: u64,
}

/// The N+1 detector.
pub struct NPlusOne {
    t: Thresholds,
    keyed: Keyed,
    /// Parent paths, with where their array is.
    paths: Paths,
    /// Child fields and collections.
    names: Paths,
    clients: FxHashMap<u64, Client>,
    /// (value, path) pairs in every open parent, against `max_values_open`.
    pairs_open: u64,
    patterns: FxHashMap<PatternKey, Pattern>,
    /// Multi-document reads per parent shape: how often a parent had the chance.
    parents: FxHashMap<ShapeId, ParentShape>,
    evicted: Evicted,
    scratch: Vec<u8>,
    /// The path slot at each position of the last document indexed (kept to reuse
    /// its allocation).
    by_position: Vec<u16>,
    /// Bursts ended by [`Occurrence::split`], to be closed once the client is let go.
    split: Vec<Occurrence>,
}

impl NPlusOne {
    /// A detector with these thresholds.
    pub fn new(t: &Thresholds) -> NPlusOne {
        NPlusOne {
            t: t.clone(),
            keyed: Keyed::default(),
            paths: Paths::default(),
            names: Paths::default(),
            clients: FxHashMap::default(),
            pairs_open: 0,
            patterns: FxHashMap::default(),
            parents: FxHashMap::default(),
            evicted: Evicted::default(),
            scratch: Vec::new(),
            by_position: Vec::new(),
            split: Vec::new(),
        }
    }

    fn gap_us(&self) -> u64 {
        self.t.n_plus_one_link_gap_ms.saturating_mul(1000)
    }

    /// The client's state, made room for if need be.
    fn client(&mut self, conn: &Arc<ConnInfo>, now: Micros) {
        if !self.clients.contains_key(&conn.client_key) && self.clients.len() as u64 >= self.t.max_clients {
            let oldest = self.clients.iter().min_by_key(|(_, c)| c.last_at).map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.evicted.clients += 1;
                let (gone, conn) = self.take(k, |_| true);
                for occ in &gone {
                    self.close(occ, &conn);
                }
                self.clients.remove(&k);
            }
        }
        let c = self.clients.entry(conn.client_key).or_insert_with(|| Client {
            conn: conn.clone(),
            last_at: now,
            open: Vec::new(),
            unexplained: FxHashMap::default(),
        });
        if !Arc::ptr_eq(&c.conn, conn) {
            c.conn = conn.clone();
        }
        c.last_at = c.last_at.max(now);
    }

    /// Takes the client's open parents that `which` picks out of the open list.
    fn take(&mut self, key: u64, which: impl Fn(&Occurrence) -> bool) -> (Vec<Occurrence>, Arc<ConnInfo>) {
        let Some(c) = self.clients.get_mut(&key) else { return (Vec::new(), Arc::default()) };
        let (mut taken, kept): (Vec<Occurrence>, Vec<Occurrence>) =
            std::mem::take(&mut c.open).into_iter().partition(|o| which(o));
        c.open = kept;
        for o in &mut taken {
            o.settle(&c.unexplained);
        }
        self.pairs_open -= taken.iter().map(|o| o.pairs).sum::<u64>();
        (taken, c.conn.clone())
    }

    /// Closes a parent occurrence: what it shows goes into the patterns.
    fn close(&mut self, occ: &Occurrence, conn: &ConnInfo) {
        let found = evaluate(occ, None, &self.t, &self.paths, &self.names);
        if let (false, Some(p)) = (found.is_empty(), self.parents.get_mut(&occ.parent)) {
            p.showed += 1;
            for c in &found {
                if !p.linked.contains(&c.key.path) && p.linked.len() < MAX_NAMES {
                    p.linked.push(c.key.path);
                }
            }
        }
        for c in found {
            if !self.patterns.contains_key(&c.key) && self.patterns.len() as u64 >= self.t.max_patterns {
                self.evicted.patterns += 1;
                continue;
            }
            merge(self.patterns.entry(c.key).or_default(), &c, conn);
        }
    }

    /// Closes the client's parents that no child has extended for too long.
    fn expire_client(&mut self, key: u64, now: Micros) {
        let gap = self.gap_us();
        let Some(c) = self.clients.get(&key) else { return };
        if c.open.iter().all(|o| now.saturating_sub(o.last_at) <= gap) {
            return;
        }
        let (closed, conn) = self.take(key, |o| now.saturating_sub(o.last_at) > gap);
        for occ in &closed {
            self.close(occ, &conn);
        }
    }

    /// Links a read to the newest open parent that returned one of its values.
    /// Returns whether it linked.
    fn link_child(
        &mut self,
        key: u64,
        child: (ShapeId, &str),
        asked: &[(&[u8], Element<'_>)],
        latency_us: u64,
        now: Micros,
    ) -> Option<usize> {
        let (child, namespace) = child;
        let Self { keyed, paths, names, clients, evicted, split, .. } = self;
        let client = clients.get_mut(&key)?;
        // Inline: a request asks for few values, and this runs for every one.
        let equalities: SmallVec<[(&[u8], u64); 4]> =
            asked.iter().filter_map(|(f, e)| Some((*f, keyed.link(e)?))).collect();
        if equalities.is_empty() {
            return None;
        }
        let coll = namespace.split_once('.').map_or(namespace, |(_, c)| c).as_bytes();
        let collection = names.id(At { path: coll, array: None });
        // A value the parent returned as its own `_id`, asked by `_id` again on the
        // parent's collection, is a document read again, not a reference followed.
        let reference = |o: &Occurrence, slot: u16, field: &[u8]| {
            slot != NO_SLOT
                && !(field == b"_id"
                    && o.collection == collection
                    && paths.name(o.paths[usize::from(slot)].path) == "_id")
        };
        // The parent is the newest whose reply carried one of the values as a reference.
        let linked = client.open.iter().rposition(|o| {
            equalities
                .iter()
                .any(|(f, h)| o.values.get(h).is_some_and(|at| at.iter().any(|s| reference(o, *s, f))))
        });
        let Some(index) = linked else {
            let n = client.unexplained.len();
            match client.unexplained.get_mut(&child) {
                Some(u) => *u += 1,
                None if n < MAX_UNEXPLAINED => {
                    client.unexplained.insert(child, 1);
                }
                None => {}
            }
            return None;
        };
        let occ = &mut client.open[index];
        // The same loop run again after other work (the first value asked again) is a
        // second burst over the same parent: two occurrences, not one of twice the size.
        let first = occ.firsts.iter().find(|(c, _)| *c == child).map(|(_, h)| *h);
        let again = occ.other > 0 && first.is_some_and(|f| equalities.iter().any(|(_, h)| *h == f));
        if again {
            split.push(occ.split(&client.unexplained));
        }
        if occ.firsts.iter().all(|(c, _)| *c != child) && occ.firsts.len() < MAX_NAMES {
            occ.firsts.push((child, equalities[0].1));
        }
        occ.other = 0;
        // Operations complete out of order: a slow child must not move time back.
        occ.last_at = occ.last_at.max(now);
        for (field_name, h) in equalities {
            let Some(at) = occ.values.get(&h).copied() else { continue };
            let Some(field) = names.id(At { path: field_name, array: None }) else { continue };
            // The paths the value was a reference at (copied out: the links change below).
            let mut paths_at = [None; PATHS_PER_VALUE];
            for (out, slot) in paths_at.iter_mut().zip(at) {
                *out = reference(occ, slot, field_name).then(|| occ.paths[usize::from(slot)].path);
            }
            for path in paths_at.into_iter().flatten() {
                let key = LinkKey { child, path, field };
                if !occ.links.contains_key(&key) && occ.links.len() >= MAX_LINKS {
                    evicted.links += 1;
                    continue;
                }
                let link = occ.links.entry(key).or_default();
                link.collection = collection;
                link.children += 1;
                link.latency_us += latency_us;
                if link.distinct.len() < MAX_DISTINCT {
                    link.distinct.insert(h);
                } else if !link.distinct.contains(&h) {
                    evicted.links += 1;
                }
            }
        }
        Some(index)
    }

    /// Closes the bursts ended by a second run of the same loop.
    fn close_split(&mut self, key: u64) {
        if self.split.is_empty() {
            return;
        }
        let conn = self.clients.get(&key).map(|c| c.conn.clone()).unwrap_or_default();
        for done in std::mem::take(&mut self.split) {
            self.close(&done, &conn);
        }
    }

    /// Opens a parent occurrence for a read that returned several documents. Unless
    /// the read is itself a child (a tree walked level by level), it first ends the
    /// bursts of the client's earlier reads of the same shape that have children: a
    /// page loop has moved on to its next page.
    fn open_parent(
        &mut self,
        key: u64,
        parent: (ShapeId, &str),
        batch: &RawDocument,
        at: Micros,
        is_child: bool,
    ) {
        let (parent, namespace) = parent;
        if !is_child {
            let (done, conn) = self.take(key, |o| o.parent == parent && !o.links.is_empty());
            for old in &done {
                self.close(old, &conn);
            }
        }
        let Self { keyed, paths, names, scratch, by_position, t, parents, evicted, .. } = self;
        let full = parents.len() as u64 >= t.max_patterns.saturating_mul(4);
        let mut untracked = ParentShape::default();
        let shape = match parents.get_mut(&parent) {
            Some(p) => p,
            None if full => {
                evicted.parent_shapes += 1;
                &mut untracked
            }
            None => parents.entry(parent).or_default(),
        };
        shape.reads += 1;
        // Which values to index: all of them at first and in one read out of
        // SAMPLE_EVERY; afterwards only the paths that linked, for a shape that
        // showed an N+1, and none for a shape that never did.
        // The sample thins out as a shape keeps not showing anything new.
        let every = if shape.reads < SAMPLE_LONGER_AFTER { SAMPLE_EVERY } else { SAMPLE_EVERY * 4 };
        let everything = shape.indexed < INDEX_ALL_FIRST || shape.reads % every == 0;
        if !everything && shape.showed == 0 {
            return;
        }
        shape.indexed += 1;
        let collection = *shape.collection.get_or_insert_with(|| {
            names.id(At {
                path: namespace.split_once('.').map_or(namespace, |(_, c)| c).as_bytes(),
                array: None,
            })
        });
        let only: Option<Vec<Vec<u8>>> =
            (!everything).then(|| shape.linked.iter().map(|p| paths.name(*p).as_bytes().to_vec()).collect());
        let only: Option<Vec<&[u8]>> = only.as_ref().map(|o| o.iter().map(Vec::as_slice).collect());
        let mut occ = Occurrence {
            parent,
            collection,
            other: 0,
            firsts: Vec::new(),
            last_at: at,
            values: FxHashMap::default(),
            paths: Vec::new(),
            pairs: 0,
            links: FxHashMap::default(),
            baseline: FxHashMap::default(),
            unexplained: FxHashMap::default(),
        };
        let max = t.max_values_per_parent;
        // The documents of a batch mostly share their layout: the n-th value of one is
        // usually at the path of the n-th value of the one before, so that path's id is
        // tried first (a comparison) before the interning map (a hash and a probe).
        by_position.clear();
        for doc in element::elements(batch).filter_map(|d| d.as_document()) {
            scratch.clear();
            let mut position = 0;
            let f = &mut |at: At<'_>, e: &mongotap_wire::element::Element<'_>| {
                if occ.pairs >= max {
                    return;
                }
                let Some(h) = keyed.link(e) else { return };
                let cached = by_position
                    .get(position)
                    .copied()
                    .filter(|slot| paths.name(occ.paths[usize::from(*slot)].path).as_bytes() == at.path);
                let slot = match cached {
                    Some(slot) => slot,
                    None => {
                        let Some(path) = paths.id(at) else { return };
                        match occ.paths.iter().position(|p| p.path == path) {
                            Some(i) => i as u16,
                            None if occ.paths.len() < MAX_PATHS_PER_PARENT => {
                                occ.paths.push(PathStat { path, refs: 0, distinct: 0 });
                                (occ.paths.len() - 1) as u16
                            }
                            None => return,
                        }
                    }
                };
                match by_position.get_mut(position) {
                    Some(s) => *s = slot,
                    None => by_position.push(slot),
                }
                position += 1;
                occ.paths[usize::from(slot)].refs += 1;
                let slots = occ.values.entry(h).or_insert([NO_SLOT; PATHS_PER_VALUE]);
                if slots.contains(&slot) {
                    return;
                }
                if let Some(free) = slots.iter_mut().find(|s| **s == NO_SLOT) {
                    *free = slot;
                    occ.pairs += 1;
                    occ.paths[usize::from(slot)].distinct += 1;
                }
            };
            match &only {
                None => values::walk_links(doc, scratch, f),
                Some(only) => values::walk_links_at(doc, only, scratch, f),
            }
        }
        if occ.values.is_empty() {
            return;
        }
        // The run-wide bound: the oldest open parents (of any client) go first.
        while self.pairs_open + occ.pairs > self.t.max_values_open && self.pairs_open > 0 {
            let oldest = self
                .clients
                .iter()
                .filter_map(|(k, c)| c.open.first().map(|o| (o.last_at, *k)))
                .min()
                .map(|(_, k)| k);
            let Some(k) = oldest else { break };
            let first = self.clients.get(&k).and_then(|c| c.open.first()).map(|o| (o.parent, o.last_at));
            let (gone, conn) = self.take(k, |o| Some((o.parent, o.last_at)) == first);
            for old in &gone {
                self.evicted.parents += u64::from(!old.links.is_empty());
                self.close(old, &conn);
            }
        }
        let Some(client) = self.clients.get_mut(&key) else { return };
        self.pairs_open += occ.pairs;
        occ.baseline = client.unexplained.clone();
        client.open.push(occ);
        if client.open.len() as u64 > self.t.max_open_parents.max(1) {
            // Let go of the oldest parent without children; if all have some, the
            // oldest. Never the one just opened: its children have not come yet.
            let older = client.open.len() - 1;
            let i = client.open[..older].iter().position(|o| o.links.is_empty()).unwrap_or(0);
            let mut old = client.open.remove(i);
            old.settle(&client.unexplained);
            self.pairs_open -= old.pairs;
            if !old.links.is_empty() {
                self.evicted.parents += 1;
                let conn = client.conn.clone();
                self.close(&old, &conn);
            }
        }
    }

    /// All patterns, with the parents still open counted as if they closed now.
    fn patterns_now(&self) -> FxHashMap<PatternKey, Pattern> {
        let mut all = self.patterns.clone();
        for c in self.clients.values() {
            for occ in &c.open {
                for contribution in evaluate(occ, Some(&c.unexplained), &self.t, &self.paths, &self.names) {
                    merge(all.entry(contribution.key).or_default(), &contribution, &c.conn);
                }
            }
        }
        all
    }
}

impl Detector for NPlusOne {
    fn name(&self) -> &'static str {
        "n_plus_one"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if v.category != Category::Read || op.failed() {
            // Other work of a client with open parents: a loop asking again after it
            // is a new burst.
            if !self.clients.is_empty() {
                if let Some(c) = self.clients.get_mut(&op.conn.client_key) {
                    c.open.iter_mut().for_each(|o| o.other = o.other.saturating_add(1));
                }
            }
            return;
        }
        let Some(cmd) = &v.command else { return };
        let key = op.conn.client_key;
        let now = op.started_at;
        let parent = (op.docs_returned >= self.t.n_plus_one_min_parent_docs)
            .then(|| v.read_shape())
            .flatten()
            .zip(v.batch);
        if !self.clients.contains_key(&key) && parent.is_none() {
            return; // The common case: no parent open, none to open.
        }
        self.client(&op.conn, now);
        self.expire_client(key, now);
        let mut linked = None;
        if cmd.name != "getMore" {
            if let Some(Some(child)) = v.shape_ids.first() {
                if self.clients.get(&key).is_some_and(|c| !c.open.is_empty()) {
                    let latency = op.latency_us.unwrap_or(0);
                    linked = self.link_child(key, (*child, &op.namespace), v.equalities(), latency, now);
                    self.close_split(key);
                }
            }
        }
        if let Some(c) = self.clients.get_mut(&key) {
            for (i, o) in c.open.iter_mut().enumerate() {
                if Some(i) != linked {
                    o.other = o.other.saturating_add(1);
                }
            }
        }
        if let Some((parent, batch)) = parent {
            let replied_at = now + op.latency_us.unwrap_or(0);
            self.open_parent(key, (parent, &op.namespace), batch, replied_at, linked.is_some());
        }
        if self.clients.get(&key).is_some_and(|c| c.open.is_empty()) {
            self.clients.remove(&key);
        }
    }

    fn on_gap(&mut self, _at: Micros) {
        // Parents or children may be missing: a parent open now could be credited
        // with the next page's children. Forget what is open; keep what was judged.
        self.clients.clear();
        self.pairs_open = 0;
    }

    fn expire(&mut self, now: Micros) {
        let keys: Vec<u64> = self.clients.keys().copied().collect();
        for k in keys {
            self.expire_client(k, now);
            if self.clients.get(&k).is_some_and(|c| c.open.is_empty()) {
                self.clients.remove(&k);
            }
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        let e = self.evicted;
        vec![
            ("clients", e.clients),
            ("parents", e.parents),
            ("parent_shapes", e.parent_shapes),
            ("patterns", e.patterns),
            ("links", e.links),
            ("paths", self.paths.refused + self.names.refused),
        ]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        pattern::findings(self, ctx)
    }
}
