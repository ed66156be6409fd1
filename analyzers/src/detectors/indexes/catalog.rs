//! The indexes that exist, per collection, over time, and where that knowledge came
//! from: `listIndexes` on mongotap's own side connection (the live proxy), or what
//! the traffic shows (`listIndexes` replies, `createIndexes`, `dropIndexes`,
//! `collMod` hiding an index, and the collection's life: `create`, `drop`,
//! `dropDatabase`, `renameCollection`, an insert that creates it). Shared between
//! the index advisor, which reads it and asks for the collections it sees, and the
//! side connection, which fills it.
//!
//! Every change is a new state in the collection's history, numbered in one
//! sequence for the whole catalog, so the advisor can judge each execution of a
//! query against the indexes that existed when it ran: a test suite drops its
//! collections at the end, and a shape that ran while `_cls_1` served it was served.
//!
//! The side connection is kept quiet (its reads land in the application's profiler):
//! each collection is read once, then at most once per refresh; a change seen on
//! the wire is applied at once and asks for one read, two seconds after the last
//! change, only when the wire did not say everything (a `createIndexes` on a
//! collection whose other indexes are unknown); a collection the wire says is gone
//! is not read until something shows it again.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::event::Micros;
use crate::namespace::Change;

pub use super::spec::{collation_key, default_name, key_js, key_of, IndexSpec, KeyPart};

/// Where the knowledge of a collection's indexes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `listIndexes` on mongotap's own connection to the upstream.
    SideConnection,
    /// A `listIndexes` reply in the traffic.
    TrafficListIndexes,
    /// The collection's life as the traffic shows it from its creation (a `create`,
    /// or an insert after it was dropped: only `_id`), or its end (`drop`).
    TrafficLifecycle,
    /// `createIndexes` commands in the traffic: these exist, there may be more.
    TrafficCreateIndexes,
}

impl Source {
    /// As the report says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::SideConnection => "listIndexes on mongotap's side connection",
            Source::TrafficListIndexes => "a listIndexes reply in the traffic",
            Source::TrafficLifecycle => "the collection's creation and index commands in the traffic",
            Source::TrafficCreateIndexes => {
                "createIndexes commands in the traffic (there may be more indexes)"
            }
        }
    }

    /// Whether this source says which indexes exist and that there are no others.
    pub fn complete(self) -> bool {
        self != Source::TrafficCreateIndexes
    }
}

/// One real request of a shape, kept (in memory only, never reported) for
/// `--explain` to run on the side connection.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The shape it belongs to.
    pub shape: u64,
    /// Its collection.
    pub namespace: String,
    /// The command, without session and transport fields, literal values and all.
    pub command: bson::Document,
    /// What it needs from an index, to skip samples an index already serves.
    pub needs: Vec<super::esr::Need>,
}

/// What `explain` with `executionStats` said about a shape's sampled request.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// `totalKeysExamined`.
    pub keys_examined: u64,
    /// `totalDocsExamined`.
    pub docs_examined: u64,
    /// `nReturned`.
    pub returned: u64,
    /// The winning plan's stages, outermost first (`SORT <- COLLSCAN`).
    pub plan: String,
}

/// Samples waiting for `--explain`, at most.
const MAX_SAMPLES: usize = 1_000;
/// States kept per collection; older ones go (counted).
const MAX_HISTORY: usize = 32;
/// A read asked for by a change on the wire waits this long after the last change.
pub const DEBOUNCE_US: Micros = 2_000_000;

/// What is known of one collection's indexes at one point of its life.
#[derive(Debug, Clone)]
pub struct Known {
    /// The indexes (none when the collection does not exist).
    pub indexes: Vec<IndexSpec>,
    /// Whether the collection exists.
    pub exists: bool,
    /// Where this was learnt.
    pub source: Source,
    /// When (event time, or the wall clock for the side connection).
    pub at: Micros,
    /// Its number in the catalog's one sequence of changes.
    pub seq: u64,
}

/// The side connection's reads of one collection.
#[derive(Debug, Clone, Copy, Default)]
struct Reads {
    /// When it was last read.
    last: Option<Micros>,
    /// A read asked for by a change on the wire, not before this time.
    asked: Option<Micros>,
}

/// Per collection: its history of indexes, and whether the side connection should
/// (re)read them.
#[derive(Debug, Default)]
pub struct IndexCatalog {
    history: BTreeMap<String, VecDeque<Known>>,
    /// Databases dropped, with the sequence number of the drop: a collection of one,
    /// not known before, does not exist after it until something creates it.
    dropped_databases: BTreeMap<String, u64>,
    seq: u64,
    /// [`IndexCatalog::seq`], readable without the lock (see [`IndexCatalog::version`]).
    version: Arc<AtomicU64>,
    /// Collections seen in queries, with the side connection's reads of them.
    wanted: BTreeMap<String, Reads>,
    /// The side connection's state, for the report: `None` when there is none.
    side: Option<String>,
    /// Collections past the bound, not followed.
    evicted: u64,
    /// States that left a collection's history to keep it bounded.
    forgotten: u64,
    /// `--explain`: sample requests of new shapes and explain them on the side connection.
    explain: bool,
    samples: VecDeque<Sample>,
    sampled: HashSet<u64>,
    explained: HashMap<u64, Explained>,
    /// The sharded collections among those read, with their key as the cluster's
    /// `config.collections` holds it (read through `mongos` on the side connection).
    shard_keys: BTreeMap<String, ShardKey>,
    /// Collections whose shard key the side connection reads (those queried, and
    /// those only written to: a log sharded on its timestamp), with the last read.
    key_reads: BTreeMap<String, Option<Micros>>,
}

/// A collection's current shard key, as `sh.shardCollection` took it: (field, 1 or
/// `"hashed"`) in order.
pub type ShardKey = Vec<(String, serde_json::Value)>;

/// The catalog as the advisor and the side connection share it.
pub type SharedCatalog = Arc<Mutex<IndexCatalog>>;

/// Collections followed at most (the table's shapes bound them in practice).
const MAX_COLLECTIONS: usize = 10_000;

impl IndexCatalog {
    /// An empty catalog to share.
    pub fn shared() -> SharedCatalog {
        Arc::new(Mutex::new(IndexCatalog::default()))
    }

    /// What is known of `namespace` now.
    pub fn get(&self, namespace: &str) -> Option<&Known> {
        self.history.get(namespace)?.back()
    }

    /// What was known of `namespace` when the catalog's sequence was at `seq`.
    pub fn at(&self, namespace: &str, seq: u64) -> Option<&Known> {
        self.history.get(namespace)?.iter().rev().find(|k| k.seq <= seq)
    }

    /// The first thing learnt of `namespace` after `seq` while it existed: what a
    /// read that ran before the side connection's first answer (or before the oldest
    /// state the bounded history still holds) is best judged by.
    pub fn after(&self, namespace: &str, seq: u64) -> Option<&Known> {
        self.history.get(namespace)?.iter().find(|k| k.seq > seq && k.exists)
    }

    /// The last state of `namespace` in which it existed.
    pub fn last_existing(&self, namespace: &str) -> Option<&Known> {
        self.history.get(namespace)?.iter().rev().find(|k| k.exists)
    }

    /// The sequence number of `namespace`'s latest change (0: nothing known).
    pub fn latest_seq(&self, namespace: &str) -> u64 {
        self.get(namespace).map_or(0, |k| k.seq)
    }

    /// The catalog's sequence number, readable without the lock: it moves on with
    /// every change, so a reader can tell when what it cached is stale.
    pub fn version(&self) -> Arc<AtomicU64> {
        self.version.clone()
    }

    /// Every collection with known indexes, as they are now.
    pub fn all(&self) -> impl Iterator<Item = (&String, &Known)> {
        self.history.iter().filter_map(|(ns, h)| Some((ns, h.back()?)))
    }

    /// Collections past the bound.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// States that left a history to keep it bounded.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Records a new state of `namespace`.
    fn push(&mut self, namespace: &str, indexes: Vec<IndexSpec>, exists: bool, source: Source, at: Micros) {
        if !self.history.contains_key(namespace) && self.history.len() >= MAX_COLLECTIONS {
            self.evicted += 1;
            return;
        }
        self.seq += 1;
        self.version.store(self.seq, Ordering::Release);
        let h = self.history.entry(namespace.to_owned()).or_default();
        h.push_back(Known { indexes, exists, source, at, seq: self.seq });
        if h.len() > MAX_HISTORY {
            h.pop_front();
            self.forgotten += 1;
        }
    }

    /// Whether `namespace` is known not to exist now: dropped, or its database
    /// dropped since anything was learnt of it.
    pub fn absent(&self, namespace: &str) -> bool {
        let db = namespace.split_once('.').map_or(namespace, |(d, _)| d);
        let db_dropped = self.dropped_databases.get(db).copied();
        match (self.get(namespace), db_dropped) {
            (Some(k), Some(d)) if d > k.seq => true,
            (Some(k), _) => !k.exists,
            (None, d) => d.is_some(),
        }
    }

    /// The indexes of `namespace` now and whether the knowledge is complete, as the
    /// base of a change seen on the wire.
    fn base(&self, namespace: &str) -> (Vec<IndexSpec>, Source) {
        if self.absent(namespace) {
            // Created by this very change: `_id` only, and everything since is seen.
            return (vec![IndexSpec::id_index()], Source::TrafficLifecycle);
        }
        match self.get(namespace) {
            Some(k) => (k.indexes.clone(), k.source),
            None => (vec![IndexSpec::id_index()], Source::TrafficCreateIndexes),
        }
    }

    /// Asks for `namespace`'s indexes (the side connection reads them soon).
    pub fn want(&mut self, namespace: &str) {
        if !self.wanted.contains_key(namespace) {
            if self.wanted.len() >= MAX_COLLECTIONS {
                self.evicted += 1;
                return;
            }
            self.wanted.insert(namespace.to_owned(), Reads::default());
        }
        self.want_shard_key(namespace);
    }

    /// Asks for `namespace`'s shard key (on a sharded cluster), not its indexes: a
    /// collection the traffic only writes to.
    pub fn want_shard_key(&mut self, namespace: &str) {
        if !self.key_reads.contains_key(namespace) {
            if self.key_reads.len() >= MAX_COLLECTIONS {
                self.evicted += 1;
                return;
            }
            self.key_reads.insert(namespace.to_owned(), None);
        }
    }

    /// Collections due a read at `now`: never read (unless the wire already said
    /// everything, or that they are gone), read `refresh` ago or more, or asked for
    /// by a change on the wire at least [`DEBOUNCE_US`] ago.
    pub fn due(&self, now: Micros, refresh: Micros) -> Vec<String> {
        self.wanted
            .iter()
            .filter(|(ns, r)| {
                if self.absent(ns) {
                    return false;
                }
                if r.asked.is_some_and(|at| now >= at) {
                    return true;
                }
                match r.last {
                    Some(last) => now.saturating_sub(last) >= refresh,
                    None => self.get(ns).is_none_or(|k| k.source != Source::TrafficLifecycle),
                }
            })
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// What `listIndexes` said of `namespace` at `at` (no index: no collection).
    pub fn install(&mut self, namespace: &str, indexes: Vec<IndexSpec>, source: Source, at: Micros) {
        if source == Source::SideConnection {
            let r = self.wanted.entry(namespace.to_owned()).or_default();
            (r.last, r.asked) = (Some(at), None);
        }
        let exists = !indexes.is_empty();
        self.push(namespace, indexes, exists, source, at);
    }

    /// The side connection asked for `namespace`'s indexes at `at` and was refused (a
    /// view, no privilege): it asks again at the next refresh; what is known stays.
    pub fn read_without_answer(&mut self, namespace: &str, at: Micros) {
        if let Some(w) = self.wanted.get_mut(namespace) {
            (w.last, w.asked) = (Some(at), None);
        }
    }

    /// Records the side connection's state for the report ("connected", or why not).
    pub fn set_side(&mut self, state: impl Into<String>) {
        self.side = Some(state.into());
    }

    /// The side connection's state, if there is one.
    pub fn side(&self) -> Option<&str> {
        self.side.as_deref()
    }

    /// After a change on the wire: one read soon when the wire did not say everything.
    fn changed_on_wire(&mut self, namespace: &str, at: Micros) {
        let partial = self.get(namespace).is_some_and(|k| !k.source.complete());
        if let (true, Some(r)) = (partial, self.wanted.get_mut(namespace)) {
            r.asked = Some(at + DEBOUNCE_US);
        }
    }

    /// A `createIndexes` succeeded: these indexes exist now (and the collection).
    pub fn created(&mut self, namespace: &str, specs: Vec<IndexSpec>, at: Micros) {
        let (mut indexes, source) = self.base(namespace);
        for s in specs {
            indexes.retain(|i| i.name != s.name);
            indexes.push(s);
        }
        self.push(namespace, indexes, true, source, at);
        self.changed_on_wire(namespace, at);
    }

    /// A `dropIndexes` succeeded: `names` ("*" for all but `_id`), or indexes by key.
    pub fn dropped(
        &mut self,
        namespace: &str,
        names: &[String],
        keys: &[Vec<(String, KeyPart)>],
        at: Micros,
    ) {
        let Some(k) = self.get(namespace).filter(|k| k.exists) else { return };
        let (mut indexes, source) = (k.indexes.clone(), k.source);
        let all = names.iter().any(|n| n == "*");
        indexes.retain(|i| i.is_id() || !(all || names.contains(&i.name) || keys.contains(&i.key)));
        self.push(namespace, indexes, true, source, at);
        self.changed_on_wire(namespace, at);
    }

    /// `collMod` hid or unhid an index.
    pub fn hidden(
        &mut self,
        namespace: &str,
        name: Option<&str>,
        key: Option<&[(String, KeyPart)]>,
        hidden: bool,
        at: Micros,
    ) {
        let Some(k) = self.get(namespace).filter(|k| k.exists) else { return };
        let (mut indexes, source) = (k.indexes.clone(), k.source);
        for i in &mut indexes {
            if Some(i.name.as_str()) == name || Some(i.key.as_slice()) == key {
                i.hidden = hidden;
            }
        }
        self.push(namespace, indexes, true, source, at);
        self.changed_on_wire(namespace, at);
    }

    /// A document was inserted into `namespace`: if it did not exist, it does now,
    /// with only the `_id` index.
    pub fn inserted(&mut self, namespace: &str, at: Micros) {
        if self.absent(namespace) {
            self.push(namespace, vec![IndexSpec::id_index()], true, Source::TrafficLifecycle, at);
        }
    }

    /// Collections whose shard key is due a read at `now`: never read, or read
    /// `refresh` ago or more. Apart from [`IndexCatalog::due`]: the wire may tell
    /// every index of a collection, never how it is sharded.
    pub fn shard_keys_due(&self, now: Micros, refresh: Micros) -> Vec<String> {
        self.key_reads
            .iter()
            .filter(|(ns, read)| !self.absent(ns) && read.is_none_or(|at| now.saturating_sub(at) >= refresh))
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// What the cluster said of `namespace` at `at`: sharded on `key`, or not sharded.
    pub fn set_shard_key(&mut self, namespace: &str, key: Option<ShardKey>, at: Micros) {
        // An answer about a collection dropped while it was asked is stale.
        if self.absent(namespace) {
            return;
        }
        if let Some(r) = self.key_reads.get_mut(namespace) {
            *r = Some(at);
        }
        match key {
            Some(k) if self.shard_keys.len() < MAX_COLLECTIONS || self.shard_keys.contains_key(namespace) => {
                self.shard_keys.insert(namespace.to_owned(), k);
            }
            Some(_) => self.evicted += 1,
            None => {
                self.shard_keys.remove(namespace);
            }
        }
    }

    /// Whether the cluster said any collection is sharded.
    pub fn any_shard_key(&self) -> bool {
        !self.shard_keys.is_empty()
    }

    /// `namespace`'s current shard key, when the cluster said it is sharded.
    pub fn shard_key(&self, namespace: &str) -> Option<&ShardKey> {
        self.shard_keys.get(namespace)
    }

    /// A change in a collection's life (see [`crate::namespace`]). A dropped
    /// collection is no longer sharded; a renamed one keeps its key (MongoDB 5.0+).
    pub fn lifecycle(&mut self, change: &Change, at: Micros) {
        match change {
            // Read again once it exists again (it may be sharded anew).
            Change::Dropped(ns) => {
                self.shard_keys.remove(ns);
                self.key_reads.entry(ns.clone()).and_modify(|r| *r = None);
            }
            Change::DatabaseDropped(db) => {
                let prefix = format!("{db}.");
                self.shard_keys.retain(|ns, _| !ns.starts_with(&prefix));
                for (_, r) in self.key_reads.iter_mut().filter(|(ns, _)| ns.starts_with(&prefix)) {
                    *r = None;
                }
            }
            Change::Renamed { from, to } => {
                if let Some(k) = self.shard_keys.remove(from) {
                    self.shard_keys.insert(to.clone(), k);
                }
                self.key_reads.entry(to.clone()).and_modify(|r| *r = None);
            }
            _ => {}
        }
        match change {
            Change::Dropped(ns) => self.push(ns, Vec::new(), false, Source::TrafficLifecycle, at),
            Change::DatabaseDropped(db) => {
                let prefix = format!("{db}.");
                let gone: Vec<String> = self
                    .history
                    .iter()
                    .filter(|(ns, h)| ns.starts_with(&prefix) && h.back().is_some_and(|k| k.exists))
                    .map(|(ns, _)| ns.clone())
                    .collect();
                for ns in gone {
                    self.push(&ns, Vec::new(), false, Source::TrafficLifecycle, at);
                }
                self.seq += 1;
                self.version.store(self.seq, Ordering::Release);
                self.dropped_databases.insert(db.clone(), self.seq);
            }
            Change::Renamed { from, to } => {
                let moved = self.get(from).filter(|k| k.exists).map(|k| (k.indexes.clone(), k.source));
                self.push(from, Vec::new(), false, Source::TrafficLifecycle, at);
                match moved {
                    Some((indexes, source)) => self.push(to, indexes, true, source, at),
                    // What `to` holds now is unknown: read it.
                    None => {
                        if let Some(r) = self.wanted.get_mut(to) {
                            r.asked = Some(at + DEBOUNCE_US);
                        }
                    }
                }
            }
            Change::Created(ns) => {
                if self.absent(ns) || self.get(ns).is_none() {
                    self.push(ns, vec![IndexSpec::id_index()], true, Source::TrafficLifecycle, at);
                }
            }
            Change::Emptied(_) => {}
        }
    }

    /// Turns `--explain` on: the advisor samples one request per new shape.
    pub fn enable_explain(&mut self) {
        self.explain = true;
    }

    /// Whether the advisor should keep a sample of `shape`.
    pub fn wants_sample(&self, shape: u64) -> bool {
        self.explain && self.samples.len() < MAX_SAMPLES && !self.sampled.contains(&shape)
    }

    /// Keeps a sample for the side connection.
    pub fn add_sample(&mut self, sample: Sample) {
        if self.sampled.insert(sample.shape) {
            self.samples.push_back(sample);
        }
    }

    /// The oldest sample waiting for `--explain` (see [`super::fit::next_unserved_sample`]).
    pub fn pop_sample(&mut self) -> Option<Sample> {
        self.samples.pop_front()
    }

    /// Records what explain said about a shape.
    pub fn set_explained(&mut self, shape: u64, e: Explained) {
        self.explained.insert(shape, e);
    }

    /// What explain said about a shape, if it ran.
    pub fn explained(&self, shape: u64) -> Option<&Explained> {
        self.explained.get(&shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> IndexSpec {
        let mut key = bson::Document::new();
        key.insert(name, 1);
        let d = bson::doc! {"key": key, "name": format!("{name}_1")};
        IndexSpec::from_document(&bson::RawDocumentBuf::try_from(&d).unwrap()).unwrap()
    }

    #[test]
    fn traffic_changes_the_catalog_at_once_and_reads_only_when_it_says_too_little() {
        let mut c = IndexCatalog::default();
        c.want("shop.orders");
        assert_eq!(c.due(0, 60), vec!["shop.orders"], "read once at first");
        c.install("shop.orders", vec![IndexSpec::id_index()], Source::SideConnection, 100);
        assert!(c.due(120, 60).is_empty());
        c.created("shop.orders", vec![spec("a")], 130);
        assert_eq!(c.get("shop.orders").unwrap().indexes.len(), 2);
        assert!(
            c.due(131 + DEBOUNCE_US, 10 * DEBOUNCE_US).is_empty(),
            "complete knowledge stays complete: no read"
        );
        c.hidden("shop.orders", Some("a_1"), None, true, 140);
        assert!(c.get("shop.orders").unwrap().indexes[1].hidden);
        c.dropped("shop.orders", &["*".into()], &[], 150);
        assert_eq!(c.get("shop.orders").unwrap().indexes.len(), 1, "_id stays");
        assert_eq!(c.due(161, 60), vec!["shop.orders"], "and the periodic read comes a refresh later");
        // createIndexes on an unknown collection: partial knowledge, _id implied, one
        // debounced read after the last change.
        c.want("shop.items");
        c.read_without_answer("shop.items", 0);
        c.created("shop.items", vec![spec("a")], 1_000);
        c.created("shop.items", vec![spec("b")], 1_500);
        let k = c.get("shop.items").unwrap();
        assert_eq!((k.indexes.len(), k.source), (3, Source::TrafficCreateIndexes));
        assert!(!c.due(1_500 + DEBOUNCE_US - 1, 10_000_000).contains(&"shop.items".to_owned()));
        assert!(c.due(1_500 + DEBOUNCE_US, 10_000_000).contains(&"shop.items".to_owned()));
    }

    #[test]
    fn history_answers_what_existed_when() {
        let mut c = IndexCatalog::default();
        c.install("t.a", vec![IndexSpec::id_index(), spec("_cls")], Source::SideConnection, 10);
        let then = c.latest_seq("t.a");
        c.lifecycle(&Change::Dropped("t.a".into()), 20);
        assert!(c.absent("t.a") && !c.get("t.a").unwrap().exists);
        assert_eq!(c.at("t.a", then).unwrap().indexes.len(), 2, "what served the reads of then");
        assert_eq!(c.last_existing("t.a").unwrap().indexes.len(), 2);
        c.inserted("t.a", 30);
        let k = c.get("t.a").unwrap();
        assert!(k.exists && k.indexes.len() == 1 && k.source == Source::TrafficLifecycle, "{k:?}");
        c.want("t.a");
        assert!(c.due(40, 60).is_empty(), "the wire said everything");
        // A dropped database: its collections, known or not, are gone until created.
        c.lifecycle(&Change::DatabaseDropped("t".into()), 50);
        assert!(c.absent("t.a") && c.absent("t.never_seen") && !c.absent("u.x"));
        c.created("t.b", vec![spec("x")], 60);
        let b = c.get("t.b").unwrap();
        assert_eq!(
            (b.indexes.len(), b.source),
            (2, Source::TrafficLifecycle),
            "created with the index: complete"
        );
        c.lifecycle(&Change::Renamed { from: "t.b".into(), to: "t.c".into() }, 70);
        assert!(c.absent("t.b") && c.get("t.c").unwrap().indexes.len() == 2);
        assert!(c.after("t.x", 0).is_none() && c.after("t.a", then).is_some());
    }
}
