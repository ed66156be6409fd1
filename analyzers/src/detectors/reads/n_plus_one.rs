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

use mongotap_wire::element;
use mongotap_wire::Command;

use crate::detectors::driver::Stack;
use crate::detectors::names::Paths;
use crate::detectors::snippets::{self, Batch};
use crate::detectors::values::{self, At, Keyed};
use crate::detectors::{collection, median, ms, Context, Detector, Thresholds};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::operation::{ConnInfo, NO_APP};
use crate::shape::command::Category;
use crate::view::{OpView, ShapeId};

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
/// Apps and drivers named per pattern; linked paths remembered per parent shape.
const MAX_NAMES: usize = 8;
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

/// One child shape linked to a parent occurrence through one path and field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LinkKey {
    child: ShapeId,
    path: u32,
    field: u32,
}

#[derive(Debug, Clone, Default)]
struct Link {
    /// The child's collection, in the names table.
    collection: Option<u32>,
    /// Child queries (round trips).
    children: u64,
    /// Their distinct values, as keyed hashes.
    distinct: FxHashSet<u64>,
    /// Their latency, as seen here.
    latency_us: u64,
}

/// One multi-document read, open for children.
struct Occurrence {
    parent: ShapeId,
    /// When its reply came, or its last child.
    last_at: Micros,
    /// Keyed value -> where it was seen (indices into `paths`).
    values: FxHashMap<u64, [u16; PATHS_PER_VALUE]>,
    /// The paths its values were seen at: a handful, so a list.
    paths: Vec<PathStat>,
    pairs: u64,
    links: FxHashMap<LinkKey, Link>,
    /// The client's unexplained-read counts when this parent opened.
    baseline: FxHashMap<ShapeId, u64>,
    /// Once it has closed: reads of a child shape during its life that no open
    /// parent explained.
    unexplained: FxHashMap<ShapeId, u64>,
}

impl Occurrence {
    /// Works out what went unexplained during its life, as it leaves its client.
    fn settle(&mut self, counts: &FxHashMap<ShapeId, u64>) {
        self.unexplained = counts
            .iter()
            .map(|(s, n)| (*s, n - self.baseline.get(s).copied().unwrap_or(0).min(*n)))
            .filter(|(_, n)| *n > 0)
            .collect();
    }
}

/// One path of a parent occurrence.
#[derive(Debug, Clone, Copy)]
struct PathStat {
    /// The interned path.
    path: u32,
    /// Values seen there, repeats included: the references a loop would follow.
    refs: u64,
    /// Distinct values seen there.
    distinct: u64,
}

/// An empty slot in a value's list of paths.
const NO_SLOT: u16 = u16::MAX;

impl Occurrence {
    fn path(&self, path: u32) -> Option<&PathStat> {
        self.paths.iter().find(|p| p.path == path)
    }
}

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

/// A pattern: parent shape, child shape and the link between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct PatternKey {
    parent: ShapeId,
    child: ShapeId,
    path: u32,
    field: u32,
}

/// What one closed parent occurrence adds to its pattern.
struct Contribution {
    key: PatternKey,
    children: u64,
    distinct: u64,
    coverage: f64,
    explained: f64,
    latency_us: u64,
    at: Micros,
}

#[derive(Debug, Clone, Default)]
struct Pattern {
    occurrences: u64,
    children: u64,
    distinct: u64,
    samples: Vec<u64>,
    max_n: u64,
    latency_us: u64,
    min_coverage: f64,
    min_explained: f64,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
    drivers: BTreeSet<String>,
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
        filter: &RawDocument,
        latency_us: u64,
        now: Micros,
    ) -> bool {
        let (child, namespace) = child;
        let Self { keyed, names, clients, evicted, .. } = self;
        let Some(client) = clients.get_mut(&key) else { return false };
        let mut equalities: Vec<(&[u8], u64)> = Vec::new();
        values::equalities(filter, &mut |field, e| {
            if let Some(h) = keyed.link(e) {
                equalities.push((field, h));
            }
        });
        if equalities.is_empty() {
            return false;
        }
        let linked =
            client.open.iter_mut().rev().find(|o| equalities.iter().any(|(_, h)| o.values.contains_key(h)));
        let Some(occ) = linked else {
            let n = client.unexplained.len();
            match client.unexplained.get_mut(&child) {
                Some(u) => *u += 1,
                None if n < MAX_UNEXPLAINED => {
                    client.unexplained.insert(child, 1);
                }
                None => {}
            }
            return false;
        };
        // Operations complete out of order: a slow child must not move time back.
        occ.last_at = occ.last_at.max(now);
        let coll = namespace.split_once('.').map_or(namespace, |(_, c)| c).as_bytes();
        let collection = names.id(At { path: coll, array: None });
        for (field, h) in equalities {
            let Some(at) = occ.values.get(&h).copied() else { continue };
            let Some(field) = names.id(At { path: field, array: None }) else { continue };
            for path in at.iter().filter(|s| **s != NO_SLOT).map(|s| occ.paths[usize::from(*s)].path) {
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
        true
    }

    /// Opens a parent occurrence for a read that returned several documents. Unless
    /// the read is itself a child (a tree walked level by level), it first ends the
    /// bursts of the client's earlier reads of the same shape that have children: a
    /// page loop has moved on to its next page.
    fn open_parent(&mut self, key: u64, parent: ShapeId, batch: &RawDocument, at: Micros, is_child: bool) {
        if !is_child {
            let (done, conn) = self.take(key, |o| o.parent == parent && !o.links.is_empty());
            for old in &done {
                self.close(old, &conn);
            }
        }
        let Self { keyed, paths, scratch, t, parents, evicted, .. } = self;
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
        let only: Option<Vec<Vec<u8>>> =
            (!everything).then(|| shape.linked.iter().map(|p| paths.name(*p).as_bytes().to_vec()).collect());
        let only: Option<Vec<&[u8]>> = only.as_ref().map(|o| o.iter().map(Vec::as_slice).collect());
        let mut occ = Occurrence {
            parent,
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
        let mut by_position: Vec<u16> = Vec::new();
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

/// The filter a read asks with: find's `filter`, count's and distinct's `query`, an
/// aggregation's leading `$match`.
fn read_filter<'a>(cmd: &Command<'a>) -> Option<&'a RawDocument> {
    let body = cmd.body;
    match cmd.name {
        "find" => element::find(body, "filter")?.as_document(),
        "count" | "distinct" => element::find(body, "query")?.as_document(),
        "aggregate" => {
            let first = element::elements(element::find(body, "pipeline")?.as_array()?).next()?;
            element::find(first.as_document()?, "$match")?.as_document()
        }
        _ => None,
    }
}

/// Judges one parent occurrence: for each child shape, its best link, if it passes.
/// A closed occurrence has its unexplained reads settled; an open one is judged with
/// its client's counts (`open`), as if it closed now.
fn evaluate(
    occ: &Occurrence,
    open: Option<&FxHashMap<ShapeId, u64>>,
    t: &Thresholds,
    paths: &Paths,
    names: &Paths,
) -> Vec<Contribution> {
    let unexplained_of = |shape: ShapeId| match open {
        Some(counts) => {
            let now = counts.get(&shape).copied().unwrap_or(0);
            now - occ.baseline.get(&shape).copied().unwrap_or(0).min(now)
        }
        None => occ.unexplained.get(&shape).copied().unwrap_or(0),
    };
    // Per child shape, its best link: most distinct values, then the best coverage;
    // on a tie (integer ids often coincide: an order's `_id` 7 and its customerId 7),
    // a path that names the child's collection (`customerId` for `customers`), then
    // one that is not the parent's own `_id`.
    let rank = |k: &LinkKey, l: &Link, coverage: f64| {
        let path = paths.name(k.path).to_ascii_lowercase();
        let coll = l.collection.map_or("", |c| names.name(c)).to_ascii_lowercase();
        let stem = coll.strip_suffix('s').filter(|s| s.len() >= 3).unwrap_or(&coll);
        (l.distinct.len(), coverage, !stem.is_empty() && path.contains(stem), path != "_id", l.children)
    };
    let mut best: FxHashMap<ShapeId, (LinkKey, &Link, f64)> = FxHashMap::default();
    for (k, l) in &occ.links {
        let parent_values = occ.path(k.path).map_or(0, |p| p.distinct).max(1);
        let coverage = l.distinct.len() as f64 / parent_values as f64;
        let better = |(bk, bl, bc): &(LinkKey, &Link, f64)| {
            rank(k, l, coverage)
                .partial_cmp(&rank(bk, bl, *bc))
                .map(|o| o.then_with(|| paths.name(bk.path).cmp(paths.name(k.path))))
                .is_some_and(|o| o.is_gt())
        };
        match best.get(&k.child) {
            Some(b) if !better(b) => {}
            _ => {
                best.insert(k.child, (*k, l, coverage));
            }
        }
    }
    let mut out: Vec<Contribution> = best
        .into_values()
        .filter_map(|(k, l, coverage)| {
            let unexplained = unexplained_of(k.child);
            let explained = l.children as f64 / (l.children + unexplained) as f64;
            let distinct = l.distinct.len() as u64;
            let refs = occ.path(k.path).map_or(0, |p| p.refs);
            (distinct >= t.n_plus_one_min_children
                && l.children as f64 <= t.n_plus_one_max_per_reference * refs as f64
                && coverage >= t.n_plus_one_min_coverage
                && explained >= t.n_plus_one_min_explained)
                .then_some(Contribution {
                    key: PatternKey { parent: occ.parent, child: k.child, path: k.path, field: k.field },
                    children: l.children,
                    distinct,
                    coverage,
                    explained,
                    latency_us: l.latency_us,
                    at: occ.last_at,
                })
        })
        .collect();
    out.sort_by_key(|c| c.key);
    out
}

/// Patterns with the same parent namespace, child and link: one finding.
#[derive(Default)]
struct Group {
    /// (operations, shape) of each parent shape.
    parents: Vec<(u64, ShapeId)>,
    pattern: Pattern,
    parent_reads: u64,
    examined: u64,
}

/// Adds one pattern's figures to another's.
fn absorb(into: &mut Pattern, p: &Pattern) {
    if into.occurrences == 0 {
        *into = p.clone();
        return;
    }
    into.occurrences += p.occurrences;
    into.children += p.children;
    into.distinct += p.distinct;
    into.samples.extend(p.samples.iter().take(MAX_SAMPLES.saturating_sub(into.samples.len())));
    into.max_n = into.max_n.max(p.max_n);
    into.latency_us += p.latency_us;
    into.min_coverage = into.min_coverage.min(p.min_coverage);
    into.min_explained = into.min_explained.min(p.min_explained);
    into.first_at = into.first_at.min(p.first_at);
    into.last_at = into.last_at.max(p.last_at);
    into.apps.extend(p.apps.iter().cloned());
    into.drivers.extend(p.drivers.iter().cloned());
}

fn merge(p: &mut Pattern, c: &Contribution, conn: &ConnInfo) {
    if p.occurrences == 0 {
        p.first_at = c.at;
        p.min_coverage = c.coverage;
        p.min_explained = c.explained;
    }
    if p.samples.len() < MAX_SAMPLES {
        p.samples.push(c.children);
    } else {
        p.samples[(p.occurrences as usize) % MAX_SAMPLES] = c.children;
    }
    p.occurrences += 1;
    p.children += c.children;
    p.distinct += c.distinct;
    p.max_n = p.max_n.max(c.children);
    p.latency_us += c.latency_us;
    p.min_coverage = p.min_coverage.min(c.coverage);
    p.min_explained = p.min_explained.min(c.explained);
    p.first_at = p.first_at.min(c.at);
    p.last_at = p.last_at.max(c.at);
    let app = conn.app_name.as_deref().unwrap_or(NO_APP);
    if p.apps.len() < MAX_NAMES && !p.apps.contains(app) {
        p.apps.insert(app.to_owned());
    }
    if let Some(d) = &conn.driver {
        if p.drivers.len() < MAX_NAMES && !p.drivers.contains(d) {
            p.drivers.insert(d.clone());
        }
    }
}

impl Detector for NPlusOne {
    fn name(&self) -> &'static str {
        "n_plus_one"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if v.category != Category::Read || op.failed() {
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
        let mut is_child = false;
        if cmd.name != "getMore" {
            if let (Some(Some(child)), Some(filter)) = (v.shape_ids.first(), read_filter(cmd)) {
                if self.clients.get(&key).is_some_and(|c| !c.open.is_empty()) {
                    let latency = op.latency_us.unwrap_or(0);
                    is_child = self.link_child(key, (*child, &op.namespace), filter, latency, now);
                }
            }
        }
        if let Some((parent, batch)) = parent {
            let replied_at = now + op.latency_us.unwrap_or(0);
            self.open_parent(key, parent, batch, replied_at, is_child);
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
        let t = ctx.thresholds;
        // One problem, one finding: parent shapes that differ only in options (a first
        // page without `skip`, later pages with it) but link to the same child through
        // the same field are one N+1 (Sentry split one problem into many fingerprints,
        // getsentry/sentry#40650).
        let mut groups: BTreeMap<(String, String, ShapeId, u32, u32), Group> = BTreeMap::new();
        let mut patterns: Vec<(PatternKey, Pattern)> = self.patterns_now().into_iter().collect();
        patterns.sort_by_key(|(k, _)| *k);
        for (k, p) in patterns {
            let Some(parent) = ctx.row(k.parent) else { continue };
            let key = (parent.namespace.clone(), parent.command.clone(), k.child, k.path, k.field);
            let shape = self.parents.get(&k.parent).cloned().unwrap_or_default();
            let g = groups.entry(key).or_default();
            g.parents.push((parent.count, k.parent));
            absorb(&mut g.pattern, &p);
            g.parent_reads += shape.reads.max(p.occurrences);
            g.examined += shape.indexed.max(p.occurrences);
        }
        let mut out = Vec::new();
        for ((_, _, child, path, field), Group { mut parents, pattern: p, parent_reads, examined }) in groups
        {
            parents.sort_by(|a, b| b.cmp(a));
            let k = PatternKey { parent: parents[0].1, child, path, field };
            let (Some(parent), Some(child)) = (ctx.row(k.parent), ctx.row(k.child)) else { continue };
            let mut shapes: Vec<ShapeId> = parents.iter().map(|(_, id)| *id).collect();
            shapes.push(k.child);
            let (path, field) = (self.paths.name(k.path), self.names.name(k.field));
            let typical = median(&p.samples);
            let extra = p.children.saturating_sub(p.occurrences);
            let cost_per_parent = typical.saturating_sub(1) as f64 * t.assumed_rtt_ms;
            let severity =
                if typical >= t.n_plus_one_high_children || cost_per_parent >= t.n_plus_one_high_cost_ms {
                    Severity::High
                } else {
                    Severity::Medium
                };
            let fields: Vec<String> = child.fields_read.iter().cloned().collect();
            // The fix projects only what the children asked for themselves; fields seen
            // in their replies are a guess, and a projection built on a guess would
            // drop fields the application uses.
            let projected: Vec<String> =
                if child.shape.get("projection").is_some() { fields.clone() } else { Vec::new() };
            let stack = Stack::from_driver(p.drivers.iter().next().map(String::as_str));
            let batch = Batch {
                parent: collection(&parent.namespace),
                child: collection(&child.namespace),
                path,
                array: self.paths.array(k.path),
                field,
                fields: &projected,
            };
            let stacks: Vec<String> = p.drivers.iter().map(|d| Stack::describe(d)).collect();
            let odm_hint = match stack.odm {
                Some(crate::detectors::driver::Odm::MongoEngine) => {
                    " With MongoEngine, select_related() on the queryset loads the references with one $in per collection."
                }
                Some(crate::detectors::driver::Odm::Mongoose) => {
                    " With Mongoose, populate() without perDocumentLimit loads a path with one $in."
                }
                _ => "",
            };
            let read = if fields.iter().any(|f| f != "_id") {
                format!(
                    " ({})",
                    fields.iter().filter(|f| *f != "_id").cloned().collect::<Vec<_>>().join(", ")
                )
            } else {
                String::new()
            };
            let recommendation = format!(
                "Each {pc} on {pns} that returns several documents is followed by one {cc} on {cns} per document, \
                 matching {cf} to the parent's {pf} (typical N = {typical}, in {occ} of {reads} such reads; \
                 {extra} extra round trips, about {cost:.0} ms per page at {rtt} ms a round trip). Fetch them \
                 with one $in query per page.{odm_hint} If the page always needs them, embed the fields it reads{read} \
                 in {pcoll} as an extended reference.",
                pc = parent.command,
                pns = parent.namespace,
                cc = child.command,
                cns = child.namespace,
                cf = field,
                pf = path,
                occ = p.occurrences,
                reads = examined,
                cost = cost_per_parent,
                rtt = t.assumed_rtt_ms,
                pcoll = collection(&parent.namespace),
            );
            let evidence = json!({
                "count": p.children,
                "parent": {
                    "shape_id": parent.shape_id, "command": parent.command, "shape": parent.shape,
                    "count": parents.iter().map(|(n, _)| n).sum::<u64>(), "multi_document_reads": parent_reads,
                    "examined_reads": examined,
                    "other_shape_ids": shapes[1..shapes.len() - 1].iter().map(|s| crate::shape::hex(*s)).collect::<Vec<_>>(),
                },
                "child": {
                    "shape_id": child.shape_id, "command": child.command, "shape": child.shape,
                    "count": child.count, "p50_ms": child.latency_ms(0.5), "p99_ms": child.latency_ms(0.99),
                    "fields_read": fields,
                },
                "occurrences": p.occurrences,
                "occurrence_share": (p.occurrences as f64 / examined as f64 * 1000.0).round() / 1000.0,
                "typical_n": typical,
                "max_n": p.max_n,
                "distinct_values_per_parent": (p.distinct as f64 / p.occurrences as f64 * 10.0).round() / 10.0,
                "extra_round_trips": extra,
                "observed_child_time_ms": ms(p.latency_us as f64),
                "estimated_cost_ms_per_parent": cost_per_parent,
                "estimated_cost_ms_total": extra as f64 * t.assumed_rtt_ms,
                "assumed_rtt_ms": t.assumed_rtt_ms,
                "min_coverage": (p.min_coverage * 1000.0).round() / 1000.0,
                "min_explained": (p.min_explained * 1000.0).round() / 1000.0,
                "apps": p.apps,
                "drivers": stacks,
                "first_seen": crate::event::rfc3339(p.first_at),
                "last_seen": crate::event::rfc3339(p.last_at),
                "thresholds": {
                    "n_plus_one_min_children": t.n_plus_one_min_children,
                    "n_plus_one_min_coverage": t.n_plus_one_min_coverage,
                    "n_plus_one_min_explained": t.n_plus_one_min_explained,
                    "n_plus_one_max_per_reference": t.n_plus_one_max_per_reference,
                },
            });
            out.push(
                Draft {
                    kind: "n_plus_one",
                    severity,
                    namespace: &parent.namespace,
                    shapes: &shapes,
                    evidence,
                    recommendation,
                    fix: Some(snippets::batch_fetch(stack, &batch)),
                    extra: vec![
                        ("child_namespace", json!(child.namespace)),
                        ("link", json!({"parent_field": path, "child_field": field})),
                    ],
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::oid::ObjectId;
    use bson::{doc, Document};

    use crate::finding::Finding;
    use crate::script::Script;

    /// `n` users with ObjectIds.
    fn users(n: usize) -> Vec<ObjectId> {
        (0..n).map(|_| ObjectId::new()).collect()
    }

    /// A page of `n` posts whose authors cycle through `authors`.
    fn page(n: usize, authors: &[ObjectId]) -> Vec<Document> {
        (0..n)
            .map(|i| doc! {"_id": ObjectId::new(), "title": "t", "authorId": authors[i % authors.len()]})
            .collect()
    }

    fn user(id: ObjectId) -> Document {
        doc! {"_id": id, "name": "someone"}
    }

    /// The blog page: the posts, then each post's author, one query each.
    fn blog_page(s: &mut Script, conns: &[u64], posts: &[Document]) {
        s.find(conns[0], "blog.posts", doc! {}, posts.to_vec());
        for (i, p) in posts.iter().enumerate() {
            let a = p.get_object_id("authorId").unwrap();
            s.find_one(conns[i % conns.len()], "blog.users", doc! {"_id": a}, Some(user(a)));
        }
    }

    fn of_kind<'a>(f: &'a [Finding], kind: &str) -> Vec<&'a Finding> {
        f.iter().filter(|x| x.kind == kind).collect()
    }

    #[test]
    fn a_blog_page_with_one_author_query_per_post_is_flagged_with_its_link() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo|c 4.20.1|");
        let authors = users(12);
        for _ in 0..3 {
            blog_page(&mut s, &[web], &page(20, &authors));
            s.wait_ms(2_000);
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        let n = n[0];
        assert_eq!((n.namespace.as_str(), n.severity.as_str()), ("blog.posts", "high"));
        assert_eq!(n.extra["child_namespace"], "blog.users");
        assert_eq!(n.extra["link"], serde_json::json!({"parent_field": "authorId", "child_field": "_id"}));
        assert_eq!(n.evidence["occurrences"], 3);
        assert_eq!(n.evidence["typical_n"], 20);
        assert_eq!(n.evidence["extra_round_trips"], 57);
        assert_eq!(n.evidence["apps"], serde_json::json!(["blog"]));
        assert_eq!(n.evidence["drivers"], serde_json::json!(["PyMongo"]));
        assert!(n.fix.as_deref().unwrap().contains("db.users.find({\"_id\": {\"$in\": ids}}"), "{:?}", n.fix);
        assert!(of_kind(&f, "redundant_query").is_empty(), "the N+1 says it: {f:#?}");
    }

    #[test]
    fn parent_shapes_that_differ_in_options_are_one_finding() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let authors = users(12);
        for n in 0..3 {
            let posts = page(20, &authors);
            let mut find = doc! {"find": "posts", "filter": {}, "limit": 20, "$db": "blog"};
            if n > 0 {
                find.insert("skip", n * 20); // the first page has no skip: another shape
            }
            s.exchange(web, find, crate::script::batch("blog.posts", posts.clone(), 0, true));
            for p in &posts {
                let a = p.get_object_id("authorId").unwrap();
                s.find_one(web, "blog.users", doc! {"_id": a}, Some(user(a)));
            }
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(n[0].shape_ids.len(), 3, "two parent shapes and the child");
        assert_eq!(n[0].evidence["occurrences"], 3);
    }

    #[test]
    fn one_in_query_per_page_is_not_flagged() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "nodejs|Mongoose 6.20.0|8.24.10");
        let authors = users(12);
        for _ in 0..5 {
            let posts = page(20, &authors);
            s.find(web, "blog.posts", doc! {}, posts.clone());
            let ids: Vec<ObjectId> = posts.iter().map(|p| p.get_object_id("authorId").unwrap()).collect();
            s.find(web, "blog.users", doc! {"_id": {"$in": ids}}, authors.iter().map(|a| user(*a)).collect());
        }
        assert!(s.run().findings().is_empty());
    }

    #[test]
    fn children_spread_over_a_pool_are_linked_but_other_clients_are_not() {
        let mut s = Script::new();
        // One client, four pooled connections (same address and app, other ports).
        let pool: Vec<u64> =
            (0..4).map(|i| s.connect(&format!("10.0.0.7:{}", 50001 + i), "blog", "PyMongo 4.20.1")).collect();
        // Another application reads the same users by the same ids, interleaved.
        let admin = s.connect("10.0.0.9:40000", "admin-tool", "nodejs 6.20.0");
        let authors = users(12);
        for _ in 0..2 {
            let posts = page(20, &authors);
            s.find(pool[0], "blog.posts", doc! {}, posts.clone());
            for (i, p) in posts.iter().enumerate() {
                let a = p.get_object_id("authorId").unwrap();
                s.find_one(pool[i % 4], "blog.users", doc! {"_id": a}, Some(user(a)));
                s.find_one(admin, "blog.users", doc! {"_id": a}, Some(user(a)));
            }
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(n[0].evidence["apps"], serde_json::json!(["blog"]), "the other client is not a child");
        assert_eq!(n[0].evidence["typical_n"], 20);
    }

    #[test]
    fn values_not_in_the_parent_are_not_children() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let (authors, others) = (users(12), users(20));
        for _ in 0..3 {
            s.find(web, "blog.posts", doc! {}, page(20, &authors));
            for o in &others {
                s.find_one(web, "blog.users", doc! {"_id": *o}, Some(user(*o)));
            }
        }
        assert!(s.run().findings().is_empty());
    }

    #[test]
    fn a_single_document_parent_does_not_start_an_n_plus_one() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        for _ in 0..20 {
            let post = ObjectId::new();
            s.find_one(web, "blog.posts", doc! {"_id": post}, Some(doc! {"_id": post, "title": "t"}));
            s.find(
                web,
                "blog.comments",
                doc! {"postId": post},
                vec![doc! {"postId": post}, doc! {"postId": post}],
            );
        }
        // Only the index advisor speaks: comments by postId with no index known.
        let kinds: Vec<String> = s.run().findings().into_iter().map(|f| f.kind).collect();
        assert_eq!(kinds, ["missing_index"]);
    }

    #[test]
    fn the_same_author_asked_for_every_post_is_redundant_not_n_plus_one() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let authors = users(2);
        for _ in 0..3 {
            blog_page(&mut s, &[web], &page(20, &authors));
        }
        let f = s.run().findings();
        assert!(of_kind(&f, "n_plus_one").is_empty(), "{f:#?}");
        let r = of_kind(&f, "redundant_query");
        assert_eq!(r.len(), 1, "{f:#?}");
        assert_eq!(r[0].namespace, "blog.users");
    }

    #[test]
    fn concurrent_reads_that_happen_to_hit_the_page_are_not_children() {
        // A list page batched with $in, while the same client serves profile pages
        // for a small population that includes the page's authors.
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let population = users(40);
        let authors = &population[..12];
        for round in 0..10 {
            let posts = page(20, authors);
            s.find(web, "blog.posts", doc! {}, posts.clone());
            let ids: Vec<ObjectId> = posts.iter().map(|p| p.get_object_id("authorId").unwrap()).collect();
            s.find(web, "blog.users", doc! {"_id": {"$in": ids}}, vec![]);
            for i in 0..20 {
                let u = population[(round * 7 + i * 3) % 40];
                s.find_one(web, "blog.users", doc! {"_id": u}, Some(user(u)));
            }
        }
        let f = s.run().findings();
        assert!(of_kind(&f, "n_plus_one").is_empty(), "{f:#?}");
    }

    #[test]
    fn a_gap_in_the_events_does_not_credit_a_parent_with_the_next_pages_children() {
        // Page 1 shows three authors only. Page 2's parent falls in a hole of the
        // tap; its children ask for the same authors. Without the gap marker they
        // would be credited to page 1, a page that never had an N+1.
        let build = |with_gap: bool| {
            let mut s = Script::new();
            let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
            let authors = users(12);
            let posts = page(20, &authors);
            s.find(web, "blog.posts", doc! {}, posts.clone());
            for p in &posts[..3] {
                let a = p.get_object_id("authorId").unwrap();
                s.find_one(web, "blog.users", doc! {"_id": a}, Some(user(a)));
            }
            if with_gap {
                s.gap(1);
            }
            for p in &posts {
                let a = p.get_object_id("authorId").unwrap();
                s.find_one(web, "blog.users", doc! {"_id": a}, Some(user(a)));
            }
            of_kind(&s.run().findings(), "n_plus_one").len()
        };
        assert_eq!(build(false), 1, "the hole would make a false finding");
        assert_eq!(build(true), 0, "the marked hole resets the client");
    }

    #[test]
    fn links_reach_into_arrays_of_sub_documents_and_dbrefs() {
        let mut s = Script::new();
        let shop = s.connect("10.0.0.7:50001", "shop", "nodejs 6.20.0");
        for page in 0..2 {
            let orders: Vec<Document> = (0..6)
                .map(|i| doc! {"_id": page * 10 + i, "items": [{"productId": i * 2, "qty": 1}, {"productId": i * 2 + 1, "qty": 3}]})
                .collect();
            s.find(shop, "shop.orders", doc! {}, orders);
            for p in 0..12 {
                s.find_one(shop, "shop.products", doc! {"_id": p}, Some(doc! {"_id": p, "name": "x"}));
            }
        }
        let blog = s.connect("10.0.0.8:50001", "blog", "PyMongo|c|MongoEngine 4.20.1||0.29.3");
        let authors = users(10);
        let posts: Vec<Document> = (0..10)
            .map(|i| doc! {"_id": i, "author": {"$ref": "user", "$id": authors[i as usize]}})
            .collect();
        s.find(blog, "blog.post", doc! {}, posts);
        for a in &authors {
            s.find_one(blog, "blog.user", doc! {"_id": *a}, Some(user(*a)));
        }
        let f = s.run().findings();
        let mut links: Vec<(&str, &serde_json::Value)> = of_kind(&f, "n_plus_one")
            .iter()
            .map(|f| (f.namespace.as_str(), &f.extra["link"]["parent_field"]))
            .collect();
        links.sort_by_key(|l| l.0);
        assert_eq!(
            links,
            [
                ("blog.post", &serde_json::json!("author.$id")),
                ("shop.orders", &serde_json::json!("items.productId"))
            ]
        );
        let me = of_kind(&f, "n_plus_one").into_iter().find(|f| f.namespace == "blog.post").unwrap();
        assert!(me.fix.as_deref().unwrap().contains("select_related()"), "{:?}", me.fix);
        assert!(me.recommendation.contains("MongoEngine"), "{}", me.recommendation);
    }

    #[test]
    fn uuids_and_strings_link_as_well_as_object_ids() {
        use bson::{spec::BinarySubtype, Binary};
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "nodejs 6.20.0");
        let uuid = |i: u8| Binary { subtype: BinarySubtype::Uuid, bytes: vec![i; 16] };
        let orders: Vec<Document> =
            (0..10u8).map(|i| doc! {"_id": i as i32, "buyer": uuid(i), "sku": format!("SKU-{i}")}).collect();
        s.find(c, "shop.orders", doc! {}, orders);
        for i in 0..10u8 {
            s.find_one(c, "shop.buyers", doc! {"_id": uuid(i)}, None);
            s.find_one(c, "shop.products", doc! {"sku": format!("SKU-{i}")}, None);
        }
        let f = s.run().findings();
        let mut links: Vec<String> = of_kind(&f, "n_plus_one")
            .iter()
            .map(|f| format!("{} -> {}", f.extra["link"]["parent_field"], f.extra["child_namespace"]))
            .collect();
        links.sort();
        assert_eq!(links, ["\"buyer\" -> \"shop.buyers\"", "\"sku\" -> \"shop.products\""], "{f:#?}");
    }

    #[test]
    fn a_cursors_later_batches_are_parents_too() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let authors = users(16);
        s.exchange(
            web,
            doc! {"find": "posts", "filter": {}, "batchSize": 2, "$db": "blog"},
            crate::script::batch("blog.posts", page(2, &authors[..2]), 77, true),
        );
        s.exchange(
            web,
            doc! {"getMore": 77_i64, "collection": "posts", "$db": "blog"},
            crate::script::batch("blog.posts", page(14, &authors[2..]), 0, false),
        );
        for a in &authors[2..] {
            s.find_one(web, "blog.users", doc! {"_id": *a}, Some(user(*a)));
        }
        let p = s.run();
        let f = p.findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        let find = p
            .table()
            .rows()
            .into_iter()
            .find(|r| r.command == "find" && r.namespace == "blog.posts")
            .unwrap();
        assert_eq!(n[0].shape_ids[0], find.shape_id, "the getMore's children belong to the find's shape");
    }

    #[test]
    fn when_integer_ids_coincide_the_link_is_the_field_named_after_the_child() {
        // Orders 1..=12 of customers 1..=12: `_id` and `customerId` hold the same values.
        let mut s = Script::new();
        let shop = s.connect("10.0.0.7:50001", "shop", "nodejs 6.20.0");
        for _ in 0..2 {
            let orders: Vec<Document> = (1..=12).map(|i| doc! {"_id": i, "customerId": 13 - i}).collect();
            s.find(shop, "shop.orders", doc! {}, orders);
            for i in 1..=12 {
                s.find_one(shop, "shop.customers", doc! {"_id": 13 - i}, Some(doc! {"_id": 13 - i}));
            }
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(n[0].extra["link"]["parent_field"], "customerId");
    }

    #[test]
    fn a_loop_that_asks_far_more_than_the_parent_references_is_not_its_child() {
        // A dashboard returns 20 customers; then another loop reads customers 15 times
        // over, values that merely coincide with the dashboard's.
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "nodejs 6.20.0");
        s.find(c, "shop.orders", doc! {}, (0..20).map(|i| doc! {"_id": 100 + i, "customerId": i}).collect());
        for k in 0..300 {
            s.find_one(c, "shop.customers", doc! {"_id": k % 20}, Some(doc! {"_id": k % 20}));
        }
        let f = s.run().findings();
        assert!(of_kind(&f, "n_plus_one").is_empty(), "{f:#?}");
    }

    #[test]
    fn after_learning_its_link_every_page_is_still_counted_and_quiet_shapes_are_sampled() {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let authors = users(12);
        for _ in 0..80 {
            blog_page(&mut s, &[web], &page(20, &authors));
            // A list no one follows up on.
            s.find(web, "blog.tags", doc! {}, (0..5).map(|i| doc! {"_id": i, "n": i}).collect());
            s.wait_ms(1_200);
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(
            (n[0].evidence["occurrences"].as_u64(), n[0].evidence["typical_n"].as_u64()),
            (Some(80), Some(20))
        );
        assert_eq!(
            n[0].evidence["parent"]["examined_reads"], 80,
            "a shape that showed an N+1 is examined every time"
        );
    }

    #[test]
    fn a_page_left_out_of_the_sample_still_ends_the_previous_pages_burst() {
        // Each page shows two authors only: never an N+1. After the first 32
        // pages most are not indexed (sampling); their children must not pile up
        // on the last indexed page.
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let authors = users(12);
        for _ in 0..80 {
            let posts = page(20, &authors);
            s.find(web, "blog.posts", doc! {}, posts.clone());
            for p in posts.iter().skip(s.now() as usize % 9).take(2) {
                let a = p.get_object_id("authorId").unwrap();
                s.find_one(web, "blog.users", doc! {"_id": a}, Some(user(a)));
            }
        }
        let f = s.run().findings();
        assert!(of_kind(&f, "n_plus_one").is_empty(), "{f:#?}");
    }

    #[test]
    fn a_tree_walked_level_by_level_keeps_its_root_open() {
        // Categories: the root's 8 children are read one query each, and each of
        // those reads is itself a multi-document parent of the same shape.
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for round in 0..2 {
            let kids: Vec<Document> =
                (0..8).map(|i| doc! {"_id": round * 100 + i + 1, "parent": 0}).collect();
            s.find(c, "shop.categories", doc! {"parent": 0}, kids.clone());
            for k in &kids {
                let id = k.get_i32("_id").unwrap();
                let leaves = vec![
                    doc! {"_id": 1000 + id * 10, "parent": id},
                    doc! {"_id": 1001 + id * 10, "parent": id},
                ];
                s.find(c, "shop.categories", doc! {"parent": id}, leaves);
            }
        }
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(n[0].extra["link"], serde_json::json!({"parent_field": "_id", "child_field": "parent"}));
    }

    #[test]
    fn a_new_parent_is_never_the_one_let_go() {
        // Eight parents of other shapes with children are open when the page comes:
        // the page must stay open for its own children.
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        for k in 0..8 {
            let ids: Vec<i64> = (0..6).map(|i| 1000 * (k + 1) + i).collect();
            let ns = format!("blog.list{k}");
            s.find(web, &ns, doc! {}, ids.iter().map(|i| doc! {"_id": i, "ref": i + 1}).collect());
            s.find_one(web, "blog.things", doc! {"_id": ids[0] + 1}, None);
        }
        let authors = users(12);
        blog_page(&mut s, &[web], &page(20, &authors));
        let f = s.run().findings();
        let n = of_kind(&f, "n_plus_one");
        assert_eq!(n.len(), 1, "{f:#?}");
        assert_eq!(
            (n[0].namespace.as_str(), &n[0].evidence["max_n"]),
            ("blog.posts", &serde_json::json!(20))
        );
    }

    #[test]
    fn state_stays_bounded_and_evictions_are_counted() {
        let t = crate::detectors::Thresholds { max_clients: 5, max_open_parents: 2, ..Default::default() };
        let mut p = crate::pipeline::Pipeline::with_detectors(
            Default::default(),
            Default::default(),
            crate::detectors::Detectors::new(t),
        );
        let mut s = Script::new();
        let authors = users(8);
        for c in 0..20 {
            let conn = s.connect(&format!("10.0.1.{c}:5000"), "many", "PyMongo 4.20.1");
            let posts = page(8, &authors);
            s.find(conn, "blog.posts", doc! {}, posts.clone());
            s.find_one(conn, "blog.users", doc! {"_id": authors[0]}, Some(user(authors[0])));
        }
        s.run_into(&mut p);
        assert_eq!(p.detectors().evictions().get("n_plus_one.clients"), Some(&15));
    }
}
