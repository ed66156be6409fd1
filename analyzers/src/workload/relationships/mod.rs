//! Relationships: every link between two collections the traffic showed (a value
//! one step read and a later step asked for, a `$lookup`'s localField and
//! foreignField), with the four questions the guides ask once per relationship
//! answered in numbers:
//!
//! - read together: of the operations that read the parent, the share that read
//!   the child through this link (and of those that read the child, the share that
//!   came through the parent);
//! - change together: of the operations that write the child, the share that write
//!   the parent too;
//! - bounded: children per parent (references per parent document, or documents a
//!   child query by the parent's id returned);
//! - shared: parents per child (distinct parent documents that named the same child
//!   value, by keyed hash).
//!
//! The verdict follows the guides: embed what is read together, owned and bounded;
//! copy a few rarely changing fields of a shared child (extended reference); keep a
//! bounded subset of an unbounded child; reverse a reference to squillions; keep a
//! reference for data read separately or changing on its own.
//!
//! Here, one idea: a relationship from the values it was followed by to its verdict.
//! The counts (`Relationships`), the figures they make, the verdict and its fix text
//! are read together whenever a rule changes (each rule's figure is computed where
//! the verdict reads it). What the verdicts then say as findings, and in the N+1 and
//! `$lookup` findings on the same link, is [`findings`].

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use smallvec::SmallVec;

use super::units::Unit;
use crate::detectors::Thresholds;
use crate::names::Paths;
use crate::namespace::is_gridfs;
use crate::shape::command::Category;
use crate::shape::hex;
use crate::table::AccessTable;
use crate::view::ShapeId;

mod findings;
pub(crate) use findings::reconcile;

/// Relationships followed at most.
const MAX_RELATIONSHIPS: usize = 1_024;
/// Child values whose parents are counted, per relationship.
const MAX_CHILD_VALUES: usize = 4_096;
/// Parents counted per child value.
const MAX_PARENTS: usize = 16;
/// Per-unit samples kept per relationship.
const MAX_SAMPLES: usize = 512;
/// Child shapes and operations named per relationship.
const MAX_NAMES: usize = 8;
/// Pairs of written collections counted.
const MAX_PAIRS: usize = 16_384;
/// Child values whose parents are counted, all relationships together: 1,024
/// relationships of 4,096 values each could otherwise hold 780 MiB.
const MAX_CHILD_VALUES_ALL: usize = 65_536;
/// Child values every relationship may count even past [`MAX_CHILD_VALUES_ALL`]:
/// one found late still says whether its children are shared (none would read
/// as "not shared", and could make an embed of a child many parents share).
const MIN_CHILD_VALUES: usize = 64;
/// Collections whose reading and writing units are counted.
const MAX_NAMESPACES: usize = 10_000;

/// A link between two collections: the parent's path, the child's field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    parent: String,
    parent_field: String,
    child: String,
    child_field: String,
}

#[derive(Debug, Default)]
struct Stat {
    /// Units that followed the link.
    units: u64,
    /// Of which read the parent, then the child.
    read_together: u64,
    /// Child executions through the link, reads and writes.
    child_reads: u64,
    child_writes: u64,
    /// Children per parent, one sample per unit.
    children: Vec<u64>,
    /// Child value -> the parent documents that named it.
    parents: FxHashMap<u64, Vec<u64>>,
    child_shapes: BTreeSet<ShapeId>,
    /// Signatures of the operations that followed it, with how many units (written
    /// in hex for the report only: their order is the same).
    operations: BTreeMap<u64, u64>,
}

/// Every relationship seen, with the per-collection counts its shares need.
#[derive(Default)]
pub(crate) struct Relationships {
    stats: FxHashMap<Key, Stat>,
    units_reading: FxHashMap<String, u64>,
    units_writing: FxHashMap<String, u64>,
    /// (child, parent) -> units that wrote both.
    co_writes: FxHashMap<(String, String), u64>,
    /// Relationships or pairs refused past the bounds.
    pub refused: u64,
    /// Child values held in every relationship's `parents`.
    child_values: usize,
    /// Child values and collections left uncounted past the bounds.
    pub values_refused: u64,
}

/// One relationship as the report writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Relationship {
    pub parent: String,
    pub child: String,
    pub link: RelationshipLink,
    /// Of the operations that read the parent, the share that read the child through the link.
    pub read_together: f64,
    /// Of the operations that read the child, the share that came through the parent.
    #[serde(default)]
    pub child_read_with_parent: f64,
    /// Of the operations that wrote the child, the share that wrote the parent too.
    pub change_together: Option<f64>,
    pub children_per_parent: Spread,
    pub parents_per_child: Spread,
    /// Writes to the child collection per read of it through the link.
    pub child_writes_per_read: f64,
    /// embed, extended_reference, reference, subset, reverse_reference or keep.
    pub verdict: String,
    /// For an extended reference: the child's fields the read path uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy_fields: Vec<String>,
    /// Found through `$lookup` (in the database) rather than between requests.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub via_lookup: bool,
    /// Operations that followed it, by name... their ids (see `operations`).
    #[serde(default)]
    pub operations: Vec<String>,
    pub evidence: Value,
    pub recommendation: String,
    /// The documents after the change, as the guides sketch them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sketch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RelationshipLink {
    pub parent_field: String,
    pub child_field: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub p50: u64,
    pub max: u64,
}

impl Spread {
    /// "p50 / max", or "-" when nothing was measured (a `$lookup` joins on the
    /// server: no documents of either side cross the wire apart).
    pub fn shown(&self) -> String {
        if self.max == 0 {
            "-".to_owned()
        } else {
            format!("{} / {}", self.p50, self.max)
        }
    }
}

/// Adds `n` units to a collection's count; false when the collection is new and
/// [`MAX_NAMESPACES`] are counted already.
fn count_unit(counts: &mut FxHashMap<String, u64>, ns: &str, n: u64) -> bool {
    if let Some(c) = counts.get_mut(ns) {
        *c += n;
    } else if counts.len() < MAX_NAMESPACES {
        counts.insert(ns.to_owned(), n);
    } else {
        return false;
    }
    true
}

/// Whether a relationship whose child values are `parents` may count `child`'s
/// parents: one it counts already, or a new one within the bounds (each
/// relationship's, then all of them together, `held`, past its first
/// [`MIN_CHILD_VALUES`]). A new one adds to `held`, one refused to `refused`.
fn admit(parents: &FxHashMap<u64, Vec<u64>>, child: u64, held: &mut usize, refused: &mut u64) -> bool {
    if parents.contains_key(&child) {
        return true;
    }
    let full = parents.len() >= MAX_CHILD_VALUES
        || (*held >= MAX_CHILD_VALUES_ALL && parents.len() >= MIN_CHILD_VALUES);
    if full {
        *refused += 1;
    } else {
        *held += 1;
    }
    !full
}

fn spread(mut v: Vec<u64>) -> Spread {
    v.sort_unstable();
    Spread { p50: v.get(v.len() / 2).copied().unwrap_or(0), max: v.last().copied().unwrap_or(0) }
}

impl Relationships {
    /// Counts what one ended unit shows.
    pub(crate) fn add(&mut self, u: &Unit, operation: u64, paths: &Paths) {
        // The namespaces read and changed, each once (a unit names few: no set).
        let mut read: SmallVec<[&str; 4]> = SmallVec::new();
        let mut written: SmallVec<[&str; 4]> = SmallVec::new();
        for s in &u.steps {
            // Changes: updates and deletes (an insert adds, it changes nothing copied).
            let into = match (s.write, s.insert) {
                (true, false) => &mut written,
                (false, _) => &mut read,
                (true, true) => continue,
            };
            if !into.contains(&&*s.namespace) {
                into.push(&s.namespace);
            }
        }
        // In order, as a set gave them: at their bounds, the first are admitted.
        read.sort_unstable();
        written.sort_unstable();
        for ns in &read {
            self.values_refused += u64::from(!count_unit(&mut self.units_reading, ns, 1));
        }
        for ns in &written {
            self.values_refused += u64::from(!count_unit(&mut self.units_writing, ns, 1));
        }
        for a in &written {
            for b in written.iter().filter(|b| *b != a) {
                let key = ((*a).to_owned(), (*b).to_owned());
                if !self.co_writes.contains_key(&key) && self.co_writes.len() >= MAX_PAIRS {
                    self.refused += 1;
                    continue;
                }
                *self.co_writes.entry(key).or_default() += 1;
            }
        }
        for s in &u.steps {
            let Some(l) = s.link else { continue };
            let Some(p) = u.steps.get(usize::from(l.from)) else { continue };
            if p.namespace == s.namespace {
                continue; // a document read again, or updated after it was read
            }
            let key = Key {
                parent: p.namespace.to_string(),
                parent_field: paths.name(l.path).to_owned(),
                child: s.namespace.to_string(),
                child_field: paths.name(l.field).to_owned(),
            };
            if !self.stats.contains_key(&key) && self.stats.len() >= MAX_RELATIONSHIPS {
                self.refused += 1;
                continue;
            }
            let child_is_id = key.child_field == "_id";
            let st = self.stats.entry(key).or_default();
            st.units += 1;
            st.read_together += u64::from(!p.write && !s.write);
            if s.write {
                st.child_writes += u64::from(s.count);
            } else {
                st.child_reads += u64::from(s.count);
            }
            // The parent holds the reference (children per parent: references per
            // parent document), or the child holds the parent's id (documents a child
            // query by that id returned).
            let children = if child_is_id {
                u64::from(s.values).div_ceil(p.docs.max(1))
            } else {
                s.docs.div_ceil(u64::from(s.values).max(1))
            };
            if st.children.len() < MAX_SAMPLES {
                st.children.push(children);
            }
            for (child, parent) in &s.pairs {
                if !admit(&st.parents, *child, &mut self.child_values, &mut self.values_refused) {
                    continue;
                }
                let ps = st.parents.entry(*child).or_default();
                if !ps.contains(parent) && ps.len() < MAX_PARENTS {
                    ps.push(*parent);
                }
            }
            if st.child_shapes.len() < MAX_NAMES {
                st.child_shapes.insert(s.shape);
            }
            if st.operations.len() < MAX_NAMES || st.operations.contains_key(&operation) {
                *st.operations.entry(operation).or_default() += 1;
            }
        }
    }

    /// Merges another set's counts into this one (the open units', for a report).
    pub(crate) fn absorb(&mut self, other: &Relationships) {
        for (ns, n) in &other.units_reading {
            self.values_refused += u64::from(!count_unit(&mut self.units_reading, ns, *n));
        }
        for (ns, n) in &other.units_writing {
            self.values_refused += u64::from(!count_unit(&mut self.units_writing, ns, *n));
        }
        for (k, n) in &other.co_writes {
            *self.co_writes.entry(k.clone()).or_default() += n;
        }
        for (k, s) in &other.stats {
            let st = self.stats.entry(k.clone()).or_default();
            st.units += s.units;
            st.read_together += s.read_together;
            st.child_reads += s.child_reads;
            st.child_writes += s.child_writes;
            st.children.extend(s.children.iter().take(MAX_SAMPLES.saturating_sub(st.children.len())));
            for (c, ps) in &s.parents {
                if !admit(&st.parents, *c, &mut self.child_values, &mut self.values_refused) {
                    continue;
                }
                let mine = st.parents.entry(*c).or_default();
                for p in ps {
                    if !mine.contains(p) && mine.len() < MAX_PARENTS {
                        mine.push(*p);
                    }
                }
            }
            st.child_shapes.extend(s.child_shapes.iter().copied());
            for (o, n) in &s.operations {
                *st.operations.entry(*o).or_default() += n;
            }
        }
    }

    /// Copies of the counts (a report adds the open units to them).
    pub(crate) fn snapshot(&self) -> Relationships {
        let mut r = Relationships::default();
        r.absorb(self);
        r.refused = self.refused;
        r
    }

    /// The relationships as the report writes them: every link followed by at
    /// least `relationship_min_operations` operations, and every `$lookup` run as often.
    pub(crate) fn rows(&self, table: &AccessTable, t: &Thresholds) -> Vec<Relationship> {
        let mut out = Vec::new();
        let rows = table.rows();
        // Updates of the child (all of them, or those that touch `fields`): what would
        // make an embedded copy or an extended reference stale. Inserts add documents.
        let updates_on = |ns: &str, fields: Option<&[String]>| -> u64 {
            rows.iter()
                .filter(|r| r.namespace == ns && r.category == Category::Write && r.command != "insert")
                .filter(|r| fields.is_none_or(|f| touches(&r.shape, f)))
                .map(|r| r.statements.max(r.count))
                .sum()
        };
        let reads_on = |ns: &str| -> u64 {
            rows.iter().filter(|r| r.namespace == ns && r.category == Category::Read).map(|r| r.count).sum()
        };
        // The fields the read path uses: those its projections, pipelines and replies
        // show, without the ODMs' bookkeeping (Mongoose's version key `__v`,
        // mongoengine's class name `_cls`), which no page shows and no copy needs.
        let fields_of = |shapes: &BTreeSet<ShapeId>| -> Vec<String> {
            let mut f: BTreeSet<String> = BTreeSet::new();
            for r in rows.iter().filter(|r| shapes.contains(&r.id)) {
                f.extend(
                    r.fields_read.iter().filter(|x| !matches!(x.as_str(), "_id" | "__v" | "_cls")).cloned(),
                );
            }
            f.into_iter().collect()
        };
        let mut keys: Vec<&Key> = self.stats.keys().collect();
        keys.sort();
        for k in keys {
            let s = &self.stats[k];
            if s.units < t.relationship_min_operations || is_gridfs(&k.parent) || is_gridfs(&k.child) {
                continue;
            }
            let parent_units = self.units_reading.get(&k.parent).copied().unwrap_or(0).max(s.read_together);
            let child_units = self.units_reading.get(&k.child).copied().unwrap_or(0).max(s.read_together);
            let child_write_units = self.units_writing.get(&k.child).copied().unwrap_or(0);
            let both = self.co_writes.get(&(k.child.clone(), k.parent.clone())).copied().unwrap_or(0);
            let parents: Vec<u64> = s.parents.values().map(|p| p.len() as u64).collect();
            let figures = Figures {
                read_together: ratio(s.read_together, parent_units),
                child_read_with_parent: ratio(s.read_together, child_units),
                change_together: (child_write_units > 0).then(|| ratio(both, child_write_units)),
                children: spread(s.children.clone()),
                parents: spread(parents),
                child_writes_per_read: 0.0,
                copied_writes_per_read: 0.0,
            };
            let fields = fields_of(&s.child_shapes);
            let mut figures = figures;
            figures.child_writes_per_read = ratio(updates_on(&k.child, None), s.child_reads.max(1));
            figures.copied_writes_per_read = ratio(updates_on(&k.child, Some(&fields)), s.child_reads.max(1));
            let operations: Vec<String> = s.operations.keys().map(|&o| hex(o)).collect();
            out.push(figures.row(k, fields, operations, false, s.units, t));
        }
        // `$lookup`s: read together wherever the aggregation runs.
        let mut lookups: BTreeMap<Key, (u64, BTreeSet<String>)> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.command == "aggregate") {
            let db = r.namespace.split_once('.').map_or(r.namespace.as_str(), |(d, _)| d);
            let stages: Vec<&Value> =
                r.shape.get("pipeline").and_then(Value::as_array).into_iter().flatten().collect();
            for (i, stage) in stages.iter().enumerate() {
                let Some(l) = stage.get("$lookup") else { continue };
                let (Some(from), Some(local), Some(foreign)) = (
                    l.get("from").and_then(Value::as_str),
                    l.get("localField").and_then(Value::as_str),
                    l.get("foreignField").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let key = Key {
                    parent: r.namespace.clone(),
                    parent_field: local.to_owned(),
                    child: format!("{db}.{from}"),
                    child_field: foreign.to_owned(),
                };
                // The joined fields a later $project keeps (`customer.name` of `as: "customer"`).
                let as_name = l.get("as").and_then(Value::as_str).unwrap_or("");
                let prefix = format!("{as_name}.");
                let kept = stages[i + 1..]
                    .iter()
                    .filter_map(|s| s.get("$project").and_then(Value::as_object))
                    .flat_map(|p| p.keys())
                    .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned));
                let e = lookups.entry(key).or_default();
                e.0 += r.count;
                e.1.extend(kept);
            }
        }
        for (k, (n, fields)) in lookups {
            if n < t.relationship_min_operations || out.iter().any(|o| same(o, &k)) {
                continue;
            }
            // A $lookup shows neither how many children nor who shares them: unknown (0).
            let figures = Figures {
                read_together: ratio(n, reads_on(&k.parent)),
                child_read_with_parent: ratio(n, reads_on(&k.child) + n),
                change_together: None,
                children: Spread { p50: 0, max: 0 },
                parents: Spread { p50: 0, max: 0 },
                child_writes_per_read: ratio(updates_on(&k.child, None), n),
                copied_writes_per_read: ratio(
                    updates_on(&k.child, Some(&fields.iter().cloned().collect::<Vec<_>>())),
                    n,
                ),
            };
            out.push(figures.row(&k, fields.into_iter().collect(), Vec::new(), true, n, t));
        }
        out
    }
}

/// The parent document with the copied fields: beside the reference in each
/// element of an array of references, or in a sub-document for one reference.
fn extended_sketch(parent_field: &str, copy: &[String]) -> String {
    let copied = match copy {
        [] => "/* the fields the page shows */".to_owned(),
        _ => copy.iter().map(|f| format!("{f}: ...")).collect::<Vec<_>>().join(", "),
    };
    match parent_field.split_once('.') {
        Some((array, reference)) if !reference.starts_with('$') => {
            format!(
                "{{ _id: ..., {array}: [ {{ {reference}: ..., {copied}, /* the line's own fields */ }} ] }}"
            )
        }
        _ => format!("{{ _id: ..., {}: {{ id: ..., {copied} }} }}", embedded_name(parent_field)),
    }
}

/// The field an extended reference lives in: `customerId` -> `customer`, `author.$id` -> `author`.
fn embedded_name(parent_field: &str) -> String {
    let first = parent_field.split('.').next().unwrap_or(parent_field);
    let stem = first
        .strip_suffix("Id")
        .or_else(|| first.strip_suffix("_id"))
        .filter(|s| !s.is_empty())
        .unwrap_or(first);
    if stem == first && !first.contains('.') && parent_field.contains('.') {
        return first.to_owned();
    }
    stem.to_owned()
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn same(r: &Relationship, k: &Key) -> bool {
    r.parent == k.parent
        && r.child == k.child
        && r.link.parent_field == k.parent_field
        && r.link.child_field == k.child_field
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        ((a as f64 / b as f64).min(1.0) * 1000.0).round() / 1000.0
    }
}

/// A relationship's answers to the four questions.
struct Figures {
    read_together: f64,
    child_read_with_parent: f64,
    change_together: Option<f64>,
    children: Spread,
    parents: Spread,
    child_writes_per_read: f64,
    /// Updates of the fields an extended reference would copy, per read.
    copied_writes_per_read: f64,
}

/// Whether an update shape changes one of `fields` (a replacement or a pipeline
/// changes them all).
fn touches(shape: &Value, fields: &[String]) -> bool {
    let Some(update) = shape.get("update") else { return true };
    let Some(ops) = update.get("operators").and_then(Value::as_object) else { return true };
    ops.values().flat_map(|paths| paths.as_array().into_iter().flatten()).any(|p| {
        let path =
            p.as_str().map(str::to_owned).or_else(|| p.as_object().and_then(|o| o.keys().next().cloned()));
        path.is_some_and(|path| {
            fields.iter().any(|f| {
                path == *f || path.starts_with(&format!("{f}.")) || f.starts_with(&format!("{path}."))
            })
        })
    })
}

impl Figures {
    /// The verdict, and for an extended reference the fields to copy.
    fn verdict(
        &self,
        fields: &[String],
        via_lookup: bool,
        child_holds_parent: bool,
        t: &Thresholds,
    ) -> (&'static str, Vec<String>) {
        let together = self.read_together >= t.relationship_read_together;
        let shared = self.parents.p50 > 1 || self.parents.max > 2;
        let bounded = self.children.max <= t.relationship_max_embedded;
        let volatile = self.child_writes_per_read > t.relationship_rare_writes;
        let change_together = self.change_together.unwrap_or(0.0) >= 0.5;
        if self.children.max >= t.relationship_squillions {
            return (if child_holds_parent { "keep" } else { "reverse_reference" }, Vec::new());
        }
        if !together {
            return ("reference", Vec::new());
        }
        if !bounded {
            return ("subset", Vec::new());
        }
        // Embedding also takes the child away from the reads that want it alone: only
        // when it is read with its parent almost every time too.
        let alone = self.child_read_with_parent < t.relationship_read_together;
        if !shared && !via_lookup && !alone && (change_together || !volatile) {
            return ("embed", Vec::new());
        }
        let copy = !fields.is_empty() && fields.len() <= t.relationship_copy_fields as usize;
        let copied_volatile = self.copied_writes_per_read > t.relationship_rare_writes;
        if (shared || via_lookup) && !copied_volatile && copy {
            return ("extended_reference", fields.to_vec());
        }
        // Whole documents read (no projection, or a $lookup keeping them whole) show
        // no fields to copy: still the extended reference (read together, rarely
        // written), the fields to be named by whoever knows the page.
        if (shared || via_lookup) && fields.is_empty() && !volatile {
            return ("extended_reference", Vec::new());
        }
        ("reference", Vec::new())
    }

    fn row(
        &self,
        k: &Key,
        fields: Vec<String>,
        operations: Vec<String>,
        via_lookup: bool,
        units: u64,
        t: &Thresholds,
    ) -> Relationship {
        let child_holds_parent = k.child_field != "_id";
        let (verdict, copy_fields) = self.verdict(&fields, via_lookup, child_holds_parent, t);
        let coll = |ns: &str| ns.split_once('.').map_or(ns, |(_, c)| c).to_owned();
        let (parent, child) = (coll(&k.parent), coll(&k.child));
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let counts = if via_lookup {
            format!("how many {child} per {parent}, and who shares them, the $lookup does not show")
        } else {
            format!(
                "{} {child} per {parent} (max {}); {} {parent} per {child} (max {})",
                self.children.p50, self.children.max, self.parents.p50, self.parents.max
            )
        };
        let copied = if verdict == "extended_reference" {
            format!(", {:.2} to the fields copied", self.copied_writes_per_read)
        } else {
            String::new()
        };
        let facts = format!(
            "read together in {} of the operations that read {parent}{}; {}; {counts}; {:.2} updates of {child} per read of it{copied}",
            pct(self.read_together),
            if via_lookup { " (joined by $lookup)" } else { "" },
            match self.change_together {
                Some(c) => format!("{} of the updates of {child} come with an update of {parent}", pct(c)),
                None => format!("{child} is not updated"),
            },
            self.child_writes_per_read,
        );
        let (recommendation, sketch) = match verdict {
            "embed" => (
                format!("Embed {child} in {parent}: {facts}. Read together, owned by one {parent} and bounded: the guides' one-to-few, one document for the operation instead of two reads."),
                Some(format!("{{ _id: ..., /* {parent}'s fields */, {child}: [ {{ /* the {child} fields, without {} */ }} ] }}", k.child_field)),
            ),
            "extended_reference" => (
                format!("Copy {} of {child} into {parent} (an extended reference): {facts}. The child is {} and rarely written, so the copy is cheap to keep up to date; keep {} for everything else.",
                    if copy_fields.is_empty() { "the fields the page shows".to_owned() } else { copy_fields.join(", ") },
                    if via_lookup { "joined on every read" } else { "shared" },
                    k.parent_field),
                Some(extended_sketch(&k.parent_field, &copy_fields)),
            ),
            "subset" => (
                format!("Keep a bounded subset of {child} in {parent} (the latest N), the rest apart: {facts}. Read together, but the children are too many to embed whole."),
                Some(format!("{{ _id: ..., recent_{child}: [ /* the latest N, $push with $slice */ ] }}")),
            ),
            "reverse_reference" => (
                format!("Reverse the reference: {child} documents keep {parent}'s id, and {parent} keeps no array of them: {facts}. One-to-squillions: a growing array of references has the same problem as the children themselves."),
                Some(format!("{{ _id: ..., {parent}_id: ..., /* a {child} */ }}")),
            ),
            "keep" => (format!("Keep it as it is: {facts}. The children already hold their parent's id, as the guides advise for one-to-squillions."), None),
            _ => {
                let why = if self.read_together < t.relationship_read_together {
                    format!("{child} is read apart from {parent} most of the time")
                } else if self.child_writes_per_read > t.relationship_rare_writes {
                    format!("{child} changes too often to copy (every change would rewrite the copies in {parent})")
                } else if fields.is_empty() {
                    format!("which of {child}'s fields the reads use is not seen (the $lookup keeps whole documents): copy those a page shows, if they are few and rarely change")
                } else {
                    format!("the reads use {} fields of {child}: more than an extended reference should copy", fields.len())
                };
                (format!("Keep {child} referenced: {facts}. {}.", capitalise(&why)), None)
            }
        };
        Relationship {
            parent: k.parent.clone(),
            child: k.child.clone(),
            link: RelationshipLink {
                parent_field: k.parent_field.clone(),
                child_field: k.child_field.clone(),
            },
            read_together: self.read_together,
            child_read_with_parent: self.child_read_with_parent,
            change_together: self.change_together,
            children_per_parent: self.children.clone(),
            parents_per_child: self.parents.clone(),
            child_writes_per_read: self.child_writes_per_read,
            verdict: verdict.to_owned(),
            copy_fields,
            via_lookup,
            operations,
            evidence: json!({
                "operations_following_it": units,
                "fields_the_read_path_uses": fields,
                "thresholds": {
                    "relationship_read_together": t.relationship_read_together,
                    "relationship_max_embedded": t.relationship_max_embedded,
                    "relationship_squillions": t.relationship_squillions,
                    "relationship_rare_writes": t.relationship_rare_writes,
                    "relationship_copy_fields": t.relationship_copy_fields,
                },
            }),
            recommendation,
            sketch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_values_are_bounded_per_relationship_and_in_all_with_a_floor_each() {
        let (mut held, mut refused) = (MAX_CHILD_VALUES_ALL - 1, 0);
        let mut late: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
        // The last value of the global budget, then the floor every relationship keeps.
        for child in 0..(MIN_CHILD_VALUES as u64 + 10) {
            if admit(&late, child, &mut held, &mut refused) {
                late.insert(child, vec![1]);
            }
        }
        assert_eq!(late.len(), MIN_CHILD_VALUES, "a late relationship still counts its first values");
        assert_eq!(refused, 10);
        assert!(admit(&late, 0, &mut held, &mut refused), "a value counted already is always taken");
        // Within the global budget, a relationship stops at its own bound.
        let (mut held, mut refused) = (0, 0);
        let full: FxHashMap<u64, Vec<u64>> = (0..MAX_CHILD_VALUES as u64).map(|c| (c, vec![])).collect();
        assert!(!admit(&full, u64::MAX, &mut held, &mut refused));
        assert_eq!((held, refused), (0, 1));
    }
}
