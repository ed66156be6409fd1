//! The ESR index advisor: `missing_index`, `redundant_index`, `unused_index`.
//!
//! Per operation it does almost nothing: the first time a shape is seen it works
//! out what the shape needs from an index ([`esr`](crate::detectors::indexes::esr)), asks the catalog
//! for its collection's indexes, and from then on only follows what the shape
//! cannot say: the longest `$in` list of sorted shapes, and whether a sort field
//! holds arrays (from a sample of the documents replies return). It also keeps the
//! catalog in step with the index commands and collection changes that pass through
//! (`createIndexes`, `dropIndexes`, `collMod`, `listIndexes` replies, `create`,
//! `drop`, `dropDatabase`, `renameCollection`, an insert that creates a collection).
//!
//! Each execution is judged against the indexes that existed when it ran: the
//! advisor counts a shape's executions by the catalog's state of its collections at
//! the time (a number, see [`catalog`](super::catalog)), and when findings are asked
//! for, only executions that no index served then count. A test suite drops its
//! collections when it ends; what ran while `_cls_1` existed was served.
//!
//! The shapes that ran unserved are fitted to the indexes the collection has now, or
//! had last if it was dropped ([`fit`](crate::detectors::indexes::fit)): an index
//! created since clears them. The needs no index serves get one key
//! each (equalities ordered so that shapes on the same collection share prefixes,
//! then the sort, then ranges), and keys are merged so that an index serving
//! several shapes is recommended once, listing them all, ranked by what they cost
//! (executions x latency). An existing index that is a prefix of another (and
//! nothing else: not unique, partial, sparse, TTL, hidden or with its own collation)
//! is redundant; one that no observed shape could use is unused, said with the
//! window it was watched for and the caveat that mongotap sees only its own clients.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bson::RawDocument;
use mongotap_wire::element;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use serde_json::Value;

use crate::detectors::indexes::catalog::{
    key_of, IndexCatalog, IndexSpec, Known, Sample, SharedCatalog, Source,
};
use crate::detectors::indexes::esr::Observed;
use crate::detectors::indexes::esr::{self, Need};
use crate::detectors::indexes::fit::{self, Quality};
use crate::detectors::indexes::missing::{missing, Facts};
use crate::detectors::indexes::unneeded::{key_matches, redundant, unused};
use crate::detectors::schema::unknown_field;
use crate::detectors::{Context, Detector};
use crate::finding::Finding;
use crate::namespace::Change;
use crate::shape::command::Category;
use crate::view::{OpView, ShapeId};

/// Shapes followed at most (the table bounds them first).
const MAX_SHAPES: usize = 100_000;
/// Collections written to whose shard key is asked for, at most.
const MAX_ASKED_KEYS: usize = 10_000;
/// (collection, field) pairs known to hold arrays, at most.
const MAX_MULTIKEY: usize = 100_000;
/// `--explain` samples larger than this are not kept (1,000 at most are: 16 MB).
const MAX_SAMPLE_BYTES: usize = 16 * 1024;
/// Replies sampled for arrays: the first few of a shape, then one in this many.
const SAMPLE_EVERY: u64 = 32;
/// Catalog states a shape's executions are counted under, at most; past it the
/// oldest two are merged (counted as evictions).
const MAX_RUN_STATES: usize = 8;

/// What one shape needs, learnt the first time it is seen.
struct ShapeNeeds {
    needs: Vec<(String, Need)>,
    /// The sort's fields, when the shape sorts (for the multikey sample).
    sort_paths: Vec<String>,
    /// Whether the shape sorts and has `$in` (its lists' lengths matter).
    sorted_in: bool,
    longest_in: usize,
    replies: u64,
    /// The collections its needs are on.
    namespaces: Vec<String>,
    /// Executions by the catalog's state of those collections when they ran: (the
    /// sequence number of their latest change then, executions).
    runs: Vec<(u64, u64)>,
}

impl ShapeNeeds {
    /// Counts one execution under catalog state `seq`; returns whether two old
    /// states had to be merged to stay bounded.
    fn ran(&mut self, seq: u64) -> bool {
        match self.runs.last_mut() {
            Some((s, n)) if *s == seq => {
                *n += 1;
                return false;
            }
            _ => self.runs.push((seq, 1)),
        }
        if self.runs.len() > MAX_RUN_STATES {
            let (_, n) = self.runs.remove(0);
            self.runs[0].1 += n;
            return true;
        }
        false
    }
}

/// The advisor.
pub struct IndexAdvisor {
    catalog: SharedCatalog,
    shapes: FxHashMap<ShapeId, ShapeNeeds>,
    asked: FxHashSet<String>,
    /// Collections written to whose shard key was asked for.
    asked_keys: FxHashSet<String>,
    multikey: FxHashSet<u64>,
    evicted_shapes: u64,
    evicted_multikey: u64,
    merged_runs: u64,
    /// The catalog's version (read without its lock) and, as of `seen`, each
    /// collection's latest change: what an execution is counted under.
    version: Arc<AtomicU64>,
    seen: u64,
    latest: FxHashMap<String, u64>,
    /// Databases and collections the traffic dropped: an insert there creates the
    /// collection (the catalog is told; elsewhere inserts need no lock).
    dropped: FxHashSet<String>,
}

impl IndexAdvisor {
    /// An advisor over `catalog` (filled by the side connection, if any, and by the traffic).
    pub fn new(catalog: SharedCatalog) -> IndexAdvisor {
        let version = catalog.lock().unwrap_or_else(|e| e.into_inner()).version();
        IndexAdvisor {
            catalog,
            merged_runs: 0,
            version,
            seen: 0,
            latest: FxHashMap::default(),
            dropped: FxHashSet::default(),
            shapes: FxHashMap::default(),
            asked: FxHashSet::default(),
            asked_keys: FxHashSet::default(),
            multikey: FxHashSet::default(),
            evicted_shapes: 0,
            evicted_multikey: 0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IndexCatalog> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the catalog in step with an index command that succeeded.
    fn index_command(&mut self, v: &OpView<'_>) {
        let (Some(cmd), Some(reply)) = (&v.command, &v.reply) else { return };
        if !reply.ok() {
            return;
        }
        let ns = &*v.op.namespace;
        let at = v.op.started_at;
        match cmd.name {
            "createIndexes" => {
                let specs: Vec<IndexSpec> =
                    cmd.documents("indexes").into_iter().filter_map(IndexSpec::from_document).collect();
                self.lock().created(ns, specs, at);
            }
            "dropIndexes" | "deleteIndexes" => {
                let (mut names, mut keys) = (Vec::new(), Vec::new());
                if let Some(e) = element::find(cmd.body, "index") {
                    match e.kind {
                        0x02 => names.extend(e.as_str().map(str::to_owned)),
                        0x03 => keys.extend(e.as_document().map(key_of)),
                        0x04 => names.extend(
                            e.as_array()
                                .into_iter()
                                .flat_map(element::elements)
                                .filter_map(|n| n.as_str().map(str::to_owned)),
                        ),
                        _ => {}
                    }
                }
                self.lock().dropped(ns, &names, &keys, at);
            }
            "collMod" => {
                let Some(ix) = element::find(cmd.body, "index").and_then(|e| e.as_document()) else { return };
                let Some(hidden) = element::find(ix, "hidden").and_then(|h| h.as_bool()) else { return };
                let name = element::find(ix, "name").and_then(|n| n.as_str());
                let key = element::find(ix, "keyPattern").and_then(|k| k.as_document()).map(key_of);
                self.lock().hidden(ns, name, key.as_deref(), hidden, at);
            }
            "listIndexes" => {
                // The first batch holds every index (at most 64, the default batch is 101).
                let Some(batch) = v.batch else { return };
                let specs: Vec<IndexSpec> = element::elements(batch)
                    .filter_map(|d| d.as_document())
                    .filter_map(IndexSpec::from_document)
                    .collect();
                let mut c = self.lock();
                // What the side connection read is as good and stays; otherwise learn it.
                if c.get(ns).is_none_or(|k| k.source != Source::SideConnection) {
                    c.install(ns, specs, Source::TrafficListIndexes, at);
                }
            }
            _ => {}
        }
    }

    /// The first time a shape is seen: what it needs, and ask for its collections' indexes.
    fn learn(&mut self, v: &OpView<'_>, i: usize) -> Option<ShapeNeeds> {
        let cmd = v.command.as_ref()?;
        let st = v.statements.get(i)?;
        let ns = st.namespace.as_deref().unwrap_or(&v.op.namespace);
        let shape = st.shape.to_value();
        let needs = esr::statement_needs(cmd.name, ns, &shape);
        for (ns, _) in &needs {
            if self.asked.insert(ns.clone()) {
                self.lock().want(ns);
            }
        }
        // A collection only written to has no needs, and may still be sharded.
        if v.category == Category::Write
            && self.asked_keys.len() < MAX_ASKED_KEYS
            && self.asked_keys.insert(ns.to_owned())
        {
            self.lock().want_shard_key(ns);
        }
        let sort_paths: Vec<String> = needs
            .iter()
            .filter(|(n, _)| n == ns)
            .flat_map(|(_, need)| need.sort.iter().map(|(f, _)| f.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let sorted_in = needs.iter().any(|(_, n)| !n.in_fields.is_empty() && !n.sort.is_empty());
        self.sample(v, i, ns, &needs);
        let namespaces: Vec<String> =
            needs.iter().map(|(n, _)| n.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        Some(ShapeNeeds {
            needs,
            sort_paths,
            sorted_in,
            longest_in: 0,
            replies: 0,
            namespaces,
            runs: Vec::new(),
        })
    }

    /// With `--explain`, keeps this first request of a read shape for the side
    /// connection to explain (in memory only; reports never carry it).
    fn sample(&self, v: &OpView<'_>, i: usize, ns: &str, needs: &[(String, Need)]) {
        let (Some(cmd), Some(Some(id))) = (&v.command, v.shape_ids.get(i)) else { return };
        let readable = matches!(cmd.name, "find" | "count" | "distinct")
            || (cmd.name == "aggregate" && v.category == Category::Read);
        let own: Vec<Need> = needs.iter().filter(|(n, _)| n == ns).map(|(_, need)| need.clone()).collect();
        if !readable || own.is_empty() {
            return;
        }
        let mut c = self.lock();
        if !c.wants_sample(*id) {
            return;
        }
        // A huge request (a long $in) is not worth holding for one explain.
        if cmd.body.as_bytes().len() > MAX_SAMPLE_BYTES {
            return;
        }
        let Ok(mut command) = bson::Document::try_from(cmd.body) else { return };
        for k in [
            "$db",
            "lsid",
            "$clusterTime",
            "txnNumber",
            "$readPreference",
            "readConcern",
            "autocommit",
            "startTransaction",
            "apiVersion",
            "apiStrict",
            "apiDeprecationErrors",
            "$audit",
            "$client",
        ] {
            command.remove(k);
        }
        c.add_sample(Sample { shape: *id, namespace: ns.to_owned(), command, needs: own });
    }

    fn multikey_key(namespace: &str, path: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = FxHasher::default();
        namespace.hash(&mut h);
        path.hash(&mut h);
        h.finish()
    }

    fn is_multikey(&self, namespace: &str, path: &str) -> bool {
        self.multikey.contains(&Self::multikey_key(namespace, path))
    }

    /// The catalog state an execution on `namespaces` runs under now: the latest
    /// change of any of them (cached until the catalog changes).
    fn state_of(&mut self, namespaces: &[String]) -> u64 {
        let version = self.version.load(Ordering::Acquire);
        if version != self.seen {
            self.latest.clear();
            self.seen = version;
        }
        let mut seq = 0;
        for ns in namespaces {
            let s = match self.latest.get(ns) {
                Some(s) => *s,
                None => {
                    let s = self.catalog.lock().unwrap_or_else(|e| e.into_inner()).latest_seq(ns);
                    self.latest.insert(ns.clone(), s);
                    s
                }
            };
            seq = seq.max(s);
        }
        seq
    }

    /// Keeps the catalog in step with a change in a collection's life, and with
    /// inserts that create a collection the traffic dropped.
    fn lifecycle(&mut self, v: &OpView<'_>) {
        let at = v.op.started_at;
        if let Some(change) = &v.change {
            match change {
                Change::Dropped(ns) => {
                    self.dropped.insert(ns.clone());
                }
                Change::DatabaseDropped(db) => {
                    self.dropped.insert(db.clone());
                }
                Change::Renamed { from, .. } => {
                    self.dropped.insert(from.clone());
                }
                Change::Created(_) | Change::Emptied(_) => {}
            }
            self.lock().lifecycle(change, at);
        }
        if self.dropped.is_empty() || v.category != Category::Write || v.op.failed() {
            return;
        }
        let Some(cmd) = &v.command else { return };
        let creates = cmd.name == "insert" || v.outcome.as_ref().is_some_and(|o| !o.upserted.is_empty());
        let ns = &*v.op.namespace;
        let db = ns.split_once('.').map_or(ns, |(d, _)| d);
        if creates && (self.dropped.contains(ns) || self.dropped.contains(db)) {
            self.dropped.remove(ns);
            self.lock().inserted(ns, at);
        }
    }
}

/// Whether any value along the dotted `path` of `doc` is an array.
fn holds_array(doc: &RawDocument, path: &str) -> bool {
    let mut d = doc;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        let Some(e) = element::find(d, p) else { return false };
        match (e.kind, parts.peek()) {
            (0x04, _) => return true,
            (0x03, Some(_)) => match e.as_document() {
                Some(next) => d = next,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// The filter of a command that sorts, for its `$in` lists.
fn sorted_filter<'a>(cmd: &mongotap_wire::Command<'a>) -> Option<&'a RawDocument> {
    match cmd.name {
        "find" => element::find(cmd.body, "filter")?.as_document(),
        "findAndModify" | "findandmodify" => element::find(cmd.body, "query")?.as_document(),
        "aggregate" => {
            let p = element::find(cmd.body, "pipeline")?.as_array()?;
            let first = element::elements(p).next()?.as_document()?;
            element::find(first, "$match")?.as_document()
        }
        _ => None,
    }
}

impl Detector for IndexAdvisor {
    fn name(&self) -> &'static str {
        "index_advisor"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        self.lifecycle(v);
        match v.category {
            Category::Command => return self.index_command(v),
            Category::Read | Category::Write => {}
        }
        for i in 0..v.shape_ids.len() {
            let Some(id) = v.shape_ids[i] else { continue };
            if !self.shapes.contains_key(&id) {
                if self.shapes.len() >= MAX_SHAPES {
                    self.evicted_shapes += 1;
                    continue;
                }
                let Some(s) = self.learn(v, i) else { continue };
                self.shapes.insert(id, s);
            }
            let namespaces = std::mem::take(&mut self.shapes.get_mut(&id).expect("just inserted").namespaces);
            let seq = self.state_of(&namespaces);
            let s = self.shapes.get_mut(&id).expect("just inserted");
            s.namespaces = namespaces;
            self.merged_runs += u64::from(s.ran(seq));
            if s.sorted_in {
                if let Some(f) = v.command.as_ref().and_then(sorted_filter) {
                    s.longest_in = s.longest_in.max(esr::longest_in(f));
                }
            }
            if s.sort_paths.is_empty() {
                continue;
            }
            let Some(batch) = v.batch else { continue };
            s.replies += 1;
            if s.replies > 4 && s.replies % SAMPLE_EVERY != 0 {
                continue;
            }
            let Some(first) = element::elements(batch).next().and_then(|d| d.as_document()) else { continue };
            let ns = &v.op.namespace;
            let arrays: Vec<u64> = s
                .sort_paths
                .iter()
                .filter(|p| holds_array(first, p))
                .map(|p| Self::multikey_key(ns, p))
                .collect();
            for k in arrays {
                if self.multikey.len() >= MAX_MULTIKEY {
                    self.evicted_multikey += 1;
                } else {
                    self.multikey.insert(k);
                }
            }
        }
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let catalog = self.lock();
        // Every (shape, need) that ran unserved, by namespace, with its figures.
        let mut by_ns: BTreeMap<&str, Vec<Observed<'_>>> = BTreeMap::new();
        let mut judged_unknown: FxHashSet<&str> = FxHashSet::default();
        for (id, s) in &self.shapes {
            let Some(row) = ctx.row(*id) else { continue };
            for (ns, need) in &s.needs {
                let need = need.resolve_in(s.longest_in, t.index_in_max_points as usize);
                // A field no document carries is not indexed: unknown_field says it.
                if ns == &row.namespace {
                    let positives = unknown_field::asked_fields(&row.shape).0;
                    if need.fields().any(|f| unknown_field::unknown(ctx, row, f, &positives)) {
                        continue;
                    }
                }
                let (unserved, unknown) = unserved_runs(&catalog, ns, &need, &s.runs);
                if unserved == 0 {
                    continue;
                }
                if unknown {
                    judged_unknown.insert(ns.as_str());
                }
                by_ns.entry(ns.as_str()).or_default().push(Observed {
                    id: *id,
                    need,
                    count: unserved,
                    mean_us: row.latency_us.histogram().mean(),
                    p50_ms: row.latency_ms(0.5),
                    command: &row.command,
                });
            }
        }
        let total_ops: u64 = ctx
            .table
            .rows()
            .iter()
            .filter(|r| matches!(r.category, Category::Read | Category::Write))
            .map(|r| r.count)
            .sum();
        let side = catalog.side().map(str::to_owned);
        // Indexes a shape names by `hint`, and `distinct` keys (a DISTINCT_SCAN may use
        // an index on them): used, whatever the filters say.
        let mut named: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for r in ctx.table.rows() {
            for v in [r.shape.get("hint"), r.shape.get("key").filter(|_| r.command == "distinct")]
                .into_iter()
                .flatten()
            {
                named.entry(r.namespace.as_str()).or_default().push(v);
            }
        }
        let complete = ctx.table.other_shapes() == 0 && self.evicted_shapes == 0;
        let mut out = Vec::new();
        // Missing indexes: the shapes that ran unserved, against the indexes the
        // collection has now, or had last if it is gone.
        for (ns, observed) in &mut by_ns {
            let now = catalog.get(ns);
            let reference = now.filter(|k| k.exists).or_else(|| catalog.last_existing(ns));
            // A collection's default collation is its _id index's; queries without one use it.
            if let Some(default) = reference.and_then(|k| default_collation(&k.indexes)) {
                for o in observed.iter_mut() {
                    o.need.collation.get_or_insert_with(|| default.clone());
                }
            }
            let observed: &Vec<Observed<'_>> = observed;
            let implied = [IndexSpec::id_index()];
            let indexes: &[IndexSpec] = match reference {
                Some(k) if !k.indexes.is_empty() => &k.indexes,
                _ => &implied,
            };
            let knowledge = knowledge(reference, now, side.as_deref());
            let multikey = |f: &str| self.is_multikey(ns, f);
            let explained = |id: ShapeId| catalog.explained(id).cloned();
            // createIndexes in the traffic says which indexes exist, not that there are no others.
            let known = reference.is_some_and(|k| k.source.complete()) && !judged_unknown.contains(ns);
            let facts = Facts { known, knowledge: &knowledge, total_ops, explained: &explained };
            out.extend(missing(ns, observed, indexes, &multikey, &facts, t));
        }
        // Redundant and unused indexes: of the collections that exist now.
        for (ns, k) in catalog.all().filter(|(_, k)| k.exists) {
            let observed = by_ns_all(&self.shapes, ns, t);
            let multikey = |f: &str| self.is_multikey(ns, f);
            let knowledge = knowledge(Some(k), Some(k), side.as_deref());
            let hinted = |ix: &IndexSpec| {
                named.get(ns.as_str()).is_some_and(|vs| {
                    vs.iter().any(|v| {
                        v.as_str() == Some(ix.name.as_str())
                            || v.as_str().is_some_and(|f| ix.key.first().is_some_and(|(k, _)| k == f))
                            || key_matches(v, ix)
                    })
                })
            };
            let redundant = redundant(ns, ctx, &k.indexes, &hinted, &knowledge);
            let reported: Vec<String> = redundant
                .iter()
                .filter_map(|f| f.extra.get("index_name")?.as_str().map(str::to_owned))
                .collect();
            out.extend(redundant);
            if complete {
                out.extend(unused(
                    ns, &observed, &k.indexes, &multikey, &reported, &hinted, &knowledge, ctx, t,
                ));
            }
        }
        out
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        let (collections, states) = {
            let c = self.lock();
            (c.evicted(), c.forgotten())
        };
        vec![
            ("shapes", self.evicted_shapes),
            ("multikey_fields", self.evicted_multikey),
            ("collections", collections),
            ("catalog_states", states),
            ("run_states", self.merged_runs),
        ]
    }
}

/// The default collation of a collection: its `_id` index's.
fn default_collation(indexes: &[IndexSpec]) -> Option<String> {
    indexes.iter().find(|i| i.is_id()).and_then(|i| i.collation.clone())
}

/// Executions of a shape that no index served when they ran, and whether any was
/// judged without knowing the collection's indexes (only `_id` assumed). A run
/// before anything was known of the collection is judged by what was learnt first
/// after it (the side connection answers within a second of the first query).
fn unserved_runs(catalog: &IndexCatalog, ns: &str, need: &Need, runs: &[(u64, u64)]) -> (u64, bool) {
    let implied = [IndexSpec::id_index()];
    let (mut unserved, mut unknown) = (0, false);
    for &(seq, n) in runs {
        let (indexes, complete): (&[IndexSpec], bool) =
            match catalog.at(ns, seq).or_else(|| catalog.after(ns, seq)) {
                // No collection then: nothing to scan.
                Some(k) if !k.exists => continue,
                Some(k) => (&k.indexes, k.source.complete()),
                None => (&implied, false),
            };
        let mut need = need.clone();
        if let Some(c) = default_collation(indexes) {
            need.collation.get_or_insert(c);
        }
        // Served but for arrays in a sort field counts as served: no index would do better.
        if fit::best(&need, indexes, &|_| false).0.quality < Quality::Served {
            unserved += n;
            unknown |= !complete;
        }
    }
    (unserved, unknown)
}

/// Every shape's need on `ns`, with all its executions (for unused indexes: an index
/// any observed shape could use is used).
fn by_ns_all<'s>(
    shapes: &'s FxHashMap<ShapeId, ShapeNeeds>,
    ns: &str,
    t: &crate::detectors::Thresholds,
) -> Vec<Observed<'s>> {
    shapes
        .iter()
        .flat_map(|(id, s)| {
            s.needs.iter().filter(|(n, _)| n == ns).map(move |(_, need)| Observed {
                id: *id,
                need: need.resolve_in(s.longest_in, t.index_in_max_points as usize),
                count: s.runs.iter().map(|r| r.1).sum(),
                mean_us: 0.0,
                p50_ms: None,
                command: "",
            })
        })
        .collect()
}

/// Where the knowledge of a collection's indexes came from, in words, with when;
/// for a collection dropped since, that these are the indexes it had.
fn knowledge(reference: Option<&Known>, now: Option<&Known>, side: Option<&str>) -> String {
    match (reference, now) {
        (Some(r), Some(n)) if !n.exists => format!(
            "{} at {}; the collection was dropped at {}: these are the indexes it had",
            r.source.as_str(),
            crate::event::rfc3339(r.at),
            crate::event::rfc3339(n.at)
        ),
        (Some(r), _) => format!("{} at {}", r.source.as_str(), crate::event::rfc3339(r.at)),
        (None, _) => match side {
            Some(s) => format!("unknown: only the _id index is assumed (side connection: {s})"),
            None => "unknown: only the _id index is assumed (no side connection, no listIndexes or createIndexes in the traffic)".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests;
