//! A parent read open for children: the values it returned, by path, and the child
//! reads linked to it; and the judgement of one such occurrence when it closes.

use super::*;

/// One child shape linked to a parent occurrence through one path and field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct LinkKey {
    pub(super) child: ShapeId,
    pub(super) path: u32,
    pub(super) field: u32,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Link {
    /// The child's collection, in the names table.
    pub(super) collection: Option<u32>,
    /// Child queries (round trips).
    pub(super) children: u64,
    /// Their distinct values, as keyed hashes.
    pub(super) distinct: FxHashSet<u64>,
    /// Their latency, as seen here.
    pub(super) latency_us: u64,
}

/// One multi-document read, open for children.
pub(super) struct Occurrence {
    pub(super) parent: ShapeId,
    /// The parent's collection, in the names table (a child on the same collection
    /// asking for a returned `_id` re-reads a document; it follows no reference).
    pub(super) collection: Option<u32>,
    /// The client's operations since the last child that were not children of it.
    pub(super) other: u32,
    /// Each child shape's first value asked: a loop that asks it again after other
    /// work is a new burst.
    pub(super) firsts: Vec<(ShapeId, u64)>,
    /// When its reply came, or its last child.
    pub(super) last_at: Micros,
    /// Keyed value -> where it was seen (indices into `paths`).
    pub(super) values: FxHashMap<u64, [u16; PATHS_PER_VALUE]>,
    /// The paths its values were seen at: a handful, so a list.
    pub(super) paths: Vec<PathStat>,
    pub(super) pairs: u64,
    pub(super) links: FxHashMap<LinkKey, Link>,
    /// The client's unexplained-read counts when this parent opened.
    pub(super) baseline: FxHashMap<ShapeId, u64>,
    /// Once it has closed: reads of a child shape during its life that no open
    /// parent explained.
    pub(super) unexplained: FxHashMap<ShapeId, u64>,
}

impl Occurrence {
    /// Ends the burst so far as an occurrence of its own (returned, settled) and
    /// keeps the parent's values open for the next burst.
    pub(super) fn split(&mut self, counts: &FxHashMap<ShapeId, u64>) -> Occurrence {
        let mut done = Occurrence {
            parent: self.parent,
            collection: self.collection,
            other: 0,
            firsts: Vec::new(),
            last_at: self.last_at,
            values: FxHashMap::default(),
            paths: self.paths.clone(),
            pairs: 0,
            links: std::mem::take(&mut self.links),
            baseline: std::mem::replace(&mut self.baseline, counts.clone()),
            unexplained: FxHashMap::default(),
        };
        done.settle(counts);
        self.other = 0;
        self.firsts.clear();
        done
    }

    /// Works out what went unexplained during its life, as it leaves its client.
    pub(super) fn settle(&mut self, counts: &FxHashMap<ShapeId, u64>) {
        self.unexplained = counts
            .iter()
            .map(|(s, n)| (*s, n - self.baseline.get(s).copied().unwrap_or(0).min(*n)))
            .filter(|(_, n)| *n > 0)
            .collect();
    }
}

/// One path of a parent occurrence.
#[derive(Debug, Clone, Copy)]
pub(super) struct PathStat {
    /// The interned path.
    pub(super) path: u32,
    /// Values seen there, repeats included: the references a loop would follow.
    pub(super) refs: u64,
    /// Distinct values seen there.
    pub(super) distinct: u64,
}

/// An empty slot in a value's list of paths.
pub(super) const NO_SLOT: u16 = u16::MAX;

impl Occurrence {
    pub(super) fn path(&self, path: u32) -> Option<&PathStat> {
        self.paths.iter().find(|p| p.path == path)
    }
}

/// What one closed parent occurrence adds to its pattern.
pub(super) struct Contribution {
    pub(super) key: PatternKey,
    pub(super) children: u64,
    pub(super) distinct: u64,
    pub(super) coverage: f64,
    pub(super) explained: f64,
    pub(super) latency_us: u64,
    pub(super) at: Micros,
}

/// Judges one parent occurrence: for each child shape, its best link, if it passes.
/// A closed occurrence has its unexplained reads settled; an open one is judged with
/// its client's counts (`open`), as if it closed now.
pub(super) fn evaluate(
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
