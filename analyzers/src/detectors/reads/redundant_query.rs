//! Redundant queries (`redundant_query`): one client sends the same read with the
//! same values again and again, close together, without writing to that
//! collection in between. The answer cannot have changed because of it: a cache
//! (per request, or with invalidation on write) or one fetch of the distinct values
//! removes the round trips. Not N+1: an N+1 asks for many different values.
//!
//! Per client and shape, the last `redundant_window` reads (each at most
//! `redundant_gap_ms` after the one before) are kept as keyed hashes of their
//! values; when that window holds at most `redundant_max_distinct` distinct values,
//! its reads are redundant.

use std::collections::{BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::driver::{Language, Stack};
use crate::detectors::{collection, median, ms, Context, Detector, Thresholds};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::namespace::Change;
use crate::operation::{ConnInfo, NO_APP};
use crate::shape::command::Category;
use crate::values::Keyed;
use crate::view::{OpView, ShapeId};

/// Whether a field of a read decides its answer; the envelope (session, cluster
/// time, read concern) does not. (A `match`, not a list scan: it runs for every
/// field of every read.)
fn decides_answer(key: &[u8]) -> bool {
    matches!(
        key,
        b"filter"
            | b"query"
            | b"key"
            | b"pipeline"
            | b"projection"
            | b"fields"
            | b"sort"
            | b"skip"
            | b"limit"
            | b"let"
            | b"collation"
            | b"hint"
            | b"singleBatch"
    )
}

#[derive(Default)]
struct Window {
    /// (value hash, when, latency in µs).
    reads: VecDeque<(u64, Micros, u64)>,
    /// Distinct values among `reads`, kept as reads come and go.
    distinct: usize,
    in_burst: bool,
    /// Reads up to this time were already counted in a burst.
    counted_through: Micros,
}

#[derive(Default, Clone)]
struct Stat {
    reads: u64,
    bursts: u64,
    distinct: Vec<u64>,
    latency_us: u64,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
    drivers: BTreeSet<String>,
}

/// What the detector let go of to stay bounded.
#[derive(Debug, Default, Clone, Copy)]
struct Evicted {
    /// Reads not watched because every window was in use.
    reads_unwatched: u64,
    /// Times the write log overflowed (every window then restarts).
    write_log: u64,
    /// New shapes refused.
    shapes: u64,
}

/// The redundant-query detector.
pub struct RedundantQuery {
    t: Thresholds,
    keyed: Keyed,
    windows: FxHashMap<(u64, ShapeId), Window>,
    /// Last write per namespace (hashed), by any client: the answer may have changed.
    writes: FxHashMap<u64, Micros>,
    /// Databases dropped (hashed), and when: every answer of theirs changed.
    dropped_databases: FxHashMap<u64, Micros>,
    stats: FxHashMap<ShapeId, Stat>,
    evicted: Evicted,
}

impl RedundantQuery {
    /// A detector with these thresholds.
    pub fn new(t: &Thresholds) -> RedundantQuery {
        RedundantQuery {
            t: t.clone(),
            keyed: Keyed::default(),
            windows: FxHashMap::default(),
            writes: FxHashMap::default(),
            dropped_databases: FxHashMap::default(),
            stats: FxHashMap::default(),
            evicted: Evicted::default(),
        }
    }

    fn max_windows(&self) -> usize {
        self.t.max_patterns.saturating_mul(16) as usize
    }

    fn gap_us(&self) -> u64 {
        self.t.redundant_gap_ms.saturating_mul(1000)
    }

    /// How long a window can span: a write older than that cannot matter.
    fn span_us(&self) -> u64 {
        self.gap_us().saturating_mul(self.t.redundant_window)
    }

    /// A write to `ns`.
    fn note_write(&mut self, ns: &str, at: Micros) {
        let key = namespace_hash(ns);
        if !self.writes.contains_key(&key) && self.writes.len() >= self.max_windows() {
            let span = self.span_us();
            self.writes.retain(|_, w| at.saturating_sub(*w) <= span);
            if self.writes.len() >= self.max_windows() {
                // Forgetting a write could make a window look redundant across it:
                // every window restarts instead.
                self.writes.clear();
                self.windows.clear();
                self.evicted.write_log += 1;
            }
        }
        let w = self.writes.entry(key).or_insert(at);
        *w = (*w).max(at);
    }

    fn note(
        &mut self,
        shape: ShapeId,
        conn: &ConnInfo,
        reads: u64,
        burst: Option<u64>,
        latency_us: u64,
        at: Micros,
    ) {
        if !self.stats.contains_key(&shape) && self.stats.len() as u64 >= self.t.max_patterns {
            self.evicted.shapes += 1;
            return;
        }
        let s = self.stats.entry(shape).or_insert_with(|| Stat { first_at: at, ..Stat::default() });
        s.reads += reads;
        s.latency_us += latency_us;
        s.last_at = at;
        let Some(distinct) = burst else {
            return; // A burst going on: its client was named when it began.
        };
        s.bursts += 1;
        if s.distinct.len() < 256 {
            s.distinct.push(distinct);
        }
        let app = conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut s.apps, app);
        if let Some(d) = &conn.driver {
            crate::detectors::keep_name(&mut s.drivers, d);
        }
    }
}

fn namespace_hash(ns: &str) -> u64 {
    let mut h = FxHasher::default();
    ns.hash(&mut h);
    h.finish()
}

impl Detector for RedundantQuery {
    fn name(&self) -> &'static str {
        "redundant_query"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        // A drop, a rename or a delete of everything changes every answer, as a write does.
        match &v.change {
            Some(Change::Dropped(ns) | Change::Emptied(ns)) => self.note_write(ns, op.started_at),
            Some(Change::Renamed { from, to }) => {
                self.note_write(from, op.started_at);
                self.note_write(to, op.started_at);
            }
            Some(Change::DatabaseDropped(db)) => {
                if self.dropped_databases.len() >= self.max_windows() {
                    // As for the write log: forgetting a drop could join reads across it.
                    self.dropped_databases.clear();
                    self.windows.clear();
                    self.evicted.write_log += 1;
                }
                self.dropped_databases.insert(namespace_hash(db), op.started_at);
            }
            Some(Change::Created(_)) | None => {}
        }
        match v.category {
            Category::Write => {
                for s in v.statements.iter() {
                    self.note_write(s.namespace.as_deref().unwrap_or(&op.namespace), op.started_at);
                }
                return;
            }
            Category::Command => return,
            Category::Read if cmd.name == "getMore" || op.failed() => return,
            Category::Read => {}
        }
        let Some(Some(shape)) = v.shape_ids.first().copied() else { return };
        let mut h = self.keyed.hasher();
        for e in element::elements(cmd.body).filter(|e| decides_answer(e.key)) {
            h.write(e.key);
            h.write_u8(e.kind);
            h.write(e.value);
        }
        let value = h.finish();
        let now = op.started_at;
        let key = (op.conn.client_key, shape);
        let gap = self.gap_us();
        if !self.windows.contains_key(&key) && self.windows.len() >= self.max_windows() {
            self.windows.retain(|_, w| w.reads.back().is_some_and(|r| now.saturating_sub(r.1) <= gap));
            if self.windows.len() >= self.max_windows() {
                self.evicted.reads_unwatched += 1;
                return;
            }
        }
        let mut written_at = self.writes.get(&namespace_hash(&op.namespace)).copied();
        if !self.dropped_databases.is_empty() {
            let db = op.namespace.split_once('.').map_or(&*op.namespace, |(d, _)| d);
            written_at = written_at.max(self.dropped_databases.get(&namespace_hash(db)).copied());
        }
        let k = self.t.redundant_window.max(2) as usize;
        let latency = op.latency_us.unwrap_or(0);
        let w = self.windows.entry(key).or_default();
        let stale = w.reads.back().is_some_and(|r| now.saturating_sub(r.1) > gap);
        let written = match (written_at, w.reads.front()) {
            (Some(wrote), Some(first)) => wrote >= first.1,
            _ => false,
        };
        if stale || written {
            w.reads.clear();
            w.distinct = 0;
            w.in_burst = false;
        }
        if !w.reads.iter().any(|r| r.0 == value) {
            w.distinct += 1;
        }
        w.reads.push_back((value, now, latency));
        if w.reads.len() > k {
            if let Some((gone, _, _)) = w.reads.pop_front() {
                if !w.reads.iter().any(|r| r.0 == gone) {
                    w.distinct -= 1;
                }
            }
        }
        if w.reads.len() < k {
            return;
        }
        let distinct = w.distinct;
        if distinct as u64 > self.t.redundant_max_distinct {
            w.in_burst = false;
            return;
        }
        // Count each read once, even when a burst ends and starts again over reads
        // already counted.
        let (n, lat) = w
            .reads
            .iter()
            .filter(|r| r.1 > w.counted_through)
            .fold((0u64, 0u64), |(n, lat), r| (n + 1, lat + r.2));
        let burst = (!w.in_burst).then_some(distinct as u64);
        w.in_burst = true;
        w.counted_through = now;
        self.note(shape, &op.conn, n, burst, lat, now);
    }

    fn on_gap(&mut self, _at: Micros) {
        // A write may have been lost: no window can be trusted.
        self.windows.clear();
    }

    fn expire(&mut self, now: Micros) {
        let (gap, span) = (self.gap_us(), self.span_us());
        self.windows.retain(|_, w| w.reads.back().is_some_and(|r| now.saturating_sub(r.1) <= gap));
        self.writes.retain(|_, at| now.saturating_sub(*at) <= span);
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        let e = self.evicted;
        vec![("reads_unwatched", e.reads_unwatched), ("write_log", e.write_log), ("shapes", e.shapes)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut stats: Vec<(&ShapeId, &Stat)> = self.stats.iter().collect();
        stats.sort_by_key(|(id, _)| **id);
        let mut out = Vec::new();
        for (id, s) in stats {
            let Some(row) = ctx.row(*id) else { continue };
            // One short burst is not a habit: twice the window at least.
            if s.reads < t.redundant_window.saturating_mul(2) {
                continue;
            }
            let distinct = median(&s.distinct);
            let share = s.reads as f64 / row.count.max(1) as f64;
            let severity = if s.reads >= 50 && share >= 0.5 { Severity::Medium } else { Severity::Low };
            let avoidable = s.reads.saturating_sub(s.bursts * distinct);
            let stack = Stack::from_driver(s.drivers.iter().next().map(String::as_str));
            let coll = collection(&row.namespace);
            let recommendation = format!(
                "The same {cmd} on {ns} is sent again and again with the same values: {reads} reads in {bursts} \
                 bursts where {k} consecutive reads carried at most {distinct} distinct values, at most {gap} ms \
                 apart, with no write to {coll} seen in between; about {avoidable} of them could not have \
                 returned anything new (unless something that does not go through mongotap writes to {coll}). \
                 Keep the answer for the length of a request (or cache it and drop it on write), or fetch the \
                 distinct values once.",
                cmd = row.command,
                ns = row.namespace,
                reads = s.reads,
                bursts = s.bursts,
                k = t.redundant_window,
                gap = t.redundant_gap_ms,
            );
            let fix = match stack.language {
                Language::Python => format!(
                    "# ask once per request (or cache with a TTL and drop entries when {coll} is written):\n_seen = {{}}\ndef find_one_{coll}(query):\n    key = repr(sorted(query.items()))\n    if key not in _seen:\n        _seen[key] = db.{coll}.find_one(query)\n    return _seen[key]"
                ),
                Language::Rust => format!(
                    "// ask once per request (or cache with a TTL and drop entries when {coll} is written):\nlet mut seen: HashMap<String, Option<Document>> = HashMap::new();\nlet key = query.to_string();\nif !seen.contains_key(&key) {{\n    seen.insert(key.clone(), db.collection::<Document>(\"{coll}\").find_one(query).await?);\n}}"
                ),
                _ => format!(
                    "// ask once per request (or cache with a TTL and drop entries when {coll} is written):\nconst seen = new Map();\nasync function findOneCached(query) {{\n  const key = JSON.stringify(query);\n  if (!seen.has(key)) seen.set(key, await db.collection(\"{coll}\").findOne(query));\n  return seen.get(key);\n}}"
                ),
            };
            let stacks: Vec<String> = s.drivers.iter().map(|d| Stack::describe(d)).collect();
            let evidence = json!({
                "count": s.reads,
                "bursts": s.bursts,
                "typical_distinct_values": distinct,
                "avoidable_reads": avoidable,
                "share_of_shape": (share * 1000.0).round() / 1000.0,
                "shape": row.shape,
                "shape_count": row.count,
                "p50_ms": row.latency_ms(0.5),
                "observed_time_ms": ms(s.latency_us as f64),
                "apps": s.apps,
                "drivers": stacks,
                "first_seen": crate::event::rfc3339(s.first_at),
                "last_seen": crate::event::rfc3339(s.last_at),
                "thresholds": {
                    "redundant_window": t.redundant_window,
                    "redundant_max_distinct": t.redundant_max_distinct,
                    "redundant_gap_ms": t.redundant_gap_ms,
                },
            });
            out.push(
                Draft {
                    kind: "redundant_query",
                    severity,
                    namespace: &row.namespace,
                    shapes: &[*id],
                    evidence,
                    recommendation,
                    fix: Some(fix),
                    extra: Vec::new(),
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use crate::script::Script;

    fn redundant(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "redundant_query").collect()
    }

    #[test]
    fn the_same_read_again_and_again_is_redundant() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "site", "PyMongo 4.20.1");
        for _ in 0..5 {
            for _ in 0..30 {
                s.find_one(
                    c,
                    "site.settings",
                    doc! {"_id": "site"},
                    Some(doc! {"_id": "site", "theme": "dark"}),
                );
            }
            s.wait_ms(2_000);
        }
        let f = redundant(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].namespace, "site.settings");
        assert_eq!((f[0].evidence["count"].as_u64(), f[0].evidence["bursts"].as_u64()), (Some(150), Some(5)));
        assert_eq!(f[0].evidence["typical_distinct_values"], 1);
        assert_eq!(f[0].severity, "medium");
    }

    #[test]
    fn many_values_slow_repeats_and_writes_in_between_are_not_redundant() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "site", "PyMongo 4.20.1");
        for i in 0..40 {
            s.find_one(c, "site.users", doc! {"_id": i}, Some(doc! {"_id": i}));
        }
        for _ in 0..20 {
            s.find_one(c, "site.settings", doc! {"_id": "site"}, None);
            s.wait_ms(1_000); // polling once a second
        }
        for i in 0..40 {
            s.find_one(c, "site.counters", doc! {"_id": "hits"}, Some(doc! {"_id": "hits", "n": i}));
            s.update(c, "site.counters", doc! {"_id": "hits"}, doc! {"$inc": {"n": 1}});
        }
        for p in 0..40 {
            // Same filter, other pages: other values.
            s.exchange(
                c,
                doc! {"find": "posts", "filter": {}, "skip": p * 20, "limit": 20, "$db": "site"},
                crate::script::batch("site.posts", vec![], 0, true),
            );
        }
        assert!(redundant(s).is_empty());
    }
}
