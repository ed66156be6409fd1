//! The ESR index advisor: `missing_index`, `redundant_index`, `unused_index`.
//!
//! Per operation it does almost nothing: the first time a shape is seen it works
//! out what the shape needs from an index ([`esr`](crate::detectors::indexes::esr)), asks the catalog
//! for its collection's indexes, and from then on only follows what the shape
//! cannot say: the longest `$in` list of sorted shapes, and whether a sort field
//! holds arrays (from a sample of the documents replies return). It also keeps the
//! catalog in step with the index commands that pass through (`createIndexes`,
//! `dropIndexes`, `collMod`, `drop`, `listIndexes` replies).
//!
//! When findings are asked for, each shape's needs are fitted to the indexes that
//! exist ([`index_fit`](crate::detectors::indexes::fit)); the needs no index serves get one key
//! each (equalities ordered so that shapes on the same collection share prefixes,
//! then the sort, then ranges), and keys are merged so that an index serving
//! several shapes is recommended once, listing them all, ranked by what they cost
//! (executions x latency). An existing index that is a prefix of another (and
//! nothing else: not unique, partial, sparse, TTL, hidden or with its own collation)
//! is redundant; one that no observed shape could use is unused, said with the
//! window it was watched for and the caveat that mongotap sees only its own clients.

use std::collections::{BTreeMap, BTreeSet};

use bson::RawDocument;
use mongotap_wire::element;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use serde_json::{json, Value};

use crate::detectors::indexes::catalog::{
    key_of, Explained, IndexCatalog, IndexSpec, KeyPart, Sample, SharedCatalog, Source,
};
use crate::detectors::indexes::esr::{self, Need};
use crate::detectors::indexes::fit::{self, Quality};
use crate::detectors::{collection, ms, Context, Detector, Thresholds};
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::shape::command::Category;
use crate::view::{OpView, ShapeId};

/// Shapes followed at most (the table bounds them first).
const MAX_SHAPES: usize = 100_000;
/// (collection, field) pairs known to hold arrays, at most.
const MAX_MULTIKEY: usize = 100_000;
/// `--explain` samples larger than this are not kept (1,000 at most are: 16 MB).
const MAX_SAMPLE_BYTES: usize = 16 * 1024;
/// Replies sampled for arrays: the first few of a shape, then one in this many.
const SAMPLE_EVERY: u64 = 32;

/// What one shape needs, learnt the first time it is seen.
struct ShapeNeeds {
    needs: Vec<(String, Need)>,
    /// The sort's fields, when the shape sorts (for the multikey sample).
    sort_paths: Vec<String>,
    /// Whether the shape sorts and has `$in` (its lists' lengths matter).
    sorted_in: bool,
    longest_in: usize,
    replies: u64,
}

/// The advisor.
pub struct IndexAdvisor {
    catalog: SharedCatalog,
    shapes: FxHashMap<ShapeId, ShapeNeeds>,
    asked: FxHashSet<String>,
    multikey: FxHashSet<u64>,
    evicted_shapes: u64,
    evicted_multikey: u64,
}

impl IndexAdvisor {
    /// An advisor over `catalog` (filled by the side connection, if any, and by the traffic).
    pub fn new(catalog: SharedCatalog) -> IndexAdvisor {
        IndexAdvisor {
            catalog,
            shapes: FxHashMap::default(),
            asked: FxHashSet::default(),
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
        let ns = v.op.namespace.as_str();
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
                self.lock().dropped(ns, &names, &keys);
            }
            "collMod" => {
                let Some(ix) = element::find(cmd.body, "index").and_then(|e| e.as_document()) else { return };
                let Some(hidden) = element::find(ix, "hidden").and_then(|h| h.as_bool()) else { return };
                let name = element::find(ix, "name").and_then(|n| n.as_str());
                let key = element::find(ix, "keyPattern").and_then(|k| k.as_document()).map(key_of);
                self.lock().hidden(ns, name, key.as_deref(), hidden);
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
            "drop" => {
                self.lock().forget(cmd.database(), cmd.collection());
                self.asked.remove(ns);
            }
            "dropDatabase" => {
                self.lock().forget(cmd.database(), None);
                let db = format!("{}.", cmd.database());
                self.asked.retain(|a| !a.starts_with(&db));
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
        let sort_paths: Vec<String> = needs
            .iter()
            .filter(|(n, _)| n == ns)
            .flat_map(|(_, need)| need.sort.iter().map(|(f, _)| f.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let sorted_in = needs.iter().any(|(_, n)| !n.in_fields.is_empty() && !n.sort.is_empty());
        self.sample(v, i, ns, &needs);
        Some(ShapeNeeds { needs, sort_paths, sorted_in, longest_in: 0, replies: 0 })
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
            let s = self.shapes.get_mut(&id).expect("just inserted");
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
        // Every (shape, need) by namespace, with the shape's figures from the table.
        let mut by_ns: BTreeMap<&str, Vec<Observed<'_>>> = BTreeMap::new();
        for (id, s) in &self.shapes {
            let Some(row) = ctx.row(*id) else { continue };
            for (ns, need) in &s.needs {
                by_ns.entry(ns.as_str()).or_default().push(Observed {
                    id: *id,
                    need: need.resolve_in(s.longest_in, t.index_in_max_points as usize),
                    count: row.count,
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
        for (ns, observed) in &mut by_ns {
            let known = catalog.get(ns);
            // A collection's default collation is its _id index's; queries without one use it.
            if let Some(default) =
                known.and_then(|k| k.indexes.iter().find(|i| i.is_id())).and_then(|i| i.collation.clone())
            {
                for o in observed.iter_mut() {
                    o.need.collation.get_or_insert_with(|| default.clone());
                }
            }
            let observed: &Vec<Observed<'_>> = observed;
            let implied = [IndexSpec::id_index()];
            let indexes: &[IndexSpec] = match known {
                Some(k) if !k.indexes.is_empty() => &k.indexes,
                _ => &implied,
            };
            let knowledge = match (known, &side) {
                (Some(k), _) => k.source.as_str().to_owned(),
                (None, Some(s)) => format!("unknown: only the _id index is assumed (side connection: {s})"),
                (None, None) => "unknown: only the _id index is assumed (no side connection, no listIndexes or createIndexes in the traffic)".to_owned(),
            };
            let multikey = |f: &str| self.is_multikey(ns, f);
            let explained = |id: ShapeId| catalog.explained(id).cloned();
            // createIndexes in the traffic says which indexes exist, not that there are no others.
            let complete_knowledge = known.is_some_and(|k| k.source != Source::TrafficCreateIndexes);
            let facts =
                Facts { known: complete_knowledge, knowledge: &knowledge, total_ops, explained: &explained };
            out.extend(missing(ns, observed, indexes, &multikey, &facts, t));
            if let Some(k) = known {
                let hinted = |ix: &IndexSpec| {
                    named.get(ns).is_some_and(|vs| {
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
                        ns, observed, &k.indexes, &multikey, &reported, &hinted, &knowledge, ctx, t,
                    ));
                }
            }
        }
        out
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("shapes", self.evicted_shapes),
            ("multikey_fields", self.evicted_multikey),
            ("collections", self.lock().evicted()),
        ]
    }
}

/// One shape's need on one collection, with its figures.
struct Observed<'r> {
    id: ShapeId,
    need: Need,
    count: u64,
    mean_us: f64,
    p50_ms: Option<f64>,
    command: &'r str,
}

impl Observed<'_> {
    fn time_us(&self) -> f64 {
        self.count as f64 * self.mean_us
    }
}

/// A need no index serves: how well the best does, which, and the key it asks for.
type Unserved<'o> = (&'o Observed<'o>, fit::Fit, Option<&'o IndexSpec>, Vec<(String, i32)>);

/// A recommended index and the needs it serves.
struct Recommendation<'o> {
    spec: IndexSpec,
    /// The hidden index to unhide instead of creating one.
    unhide: Option<String>,
    served: Vec<(&'o Observed<'o>, fit::Fit, Option<&'o IndexSpec>)>,
}

/// What a missing-index finding says besides the shapes: how much is known.
struct Facts<'a> {
    /// Whether the collection's indexes are known (else only `_id` is assumed).
    known: bool,
    /// Where the knowledge came from, in words.
    knowledge: &'a str,
    /// Reads and writes of every collection, for shares.
    total_ops: u64,
    /// What `--explain` said about a shape.
    explained: &'a dyn Fn(ShapeId) -> Option<Explained>,
}

fn missing<'o>(
    ns: &str,
    observed: &'o [Observed<'o>],
    indexes: &'o [IndexSpec],
    multikey: &dyn Fn(&str) -> bool,
    facts: &Facts<'_>,
    t: &Thresholds,
) -> Vec<Finding> {
    let (known, knowledge, total_ops) = (facts.known, facts.knowledge, facts.total_ops);
    // Equality fields ordered by how often they are bound on this collection, so that
    // keys share prefixes.
    let mut weight: BTreeMap<&str, i64> = BTreeMap::new();
    for o in observed {
        for f in &o.need.equality {
            *weight.entry(f.as_str()).or_default() += o.count as i64;
        }
    }
    let eq_order = |f: &str| weight.get(f).copied().unwrap_or(0);
    let mut unserved: Vec<Unserved<'_>> = observed
        .iter()
        .filter_map(|o| {
            let (fit, ix) = fit::best(&o.need, indexes, multikey);
            // Served but for arrays in a sort field: no new index would do better.
            let served_but_arrays = fit::best(&o.need, indexes, &|_| false).0.quality == Quality::Served;
            (fit.quality < Quality::Served && !served_but_arrays).then(|| (o, fit, ix, o.need.key(&eq_order)))
        })
        .collect();
    // Longest keys first (they may serve the shorter ones), then the costliest.
    unserved.sort_by(|a, b| b.3.len().cmp(&a.3.len()).then(b.0.time_us().total_cmp(&a.0.time_us())));
    let mut recs: Vec<Recommendation<'_>> = Vec::new();
    // Recommendations by the first field of their key: one can serve a need only if
    // it starts with a field the need names, so each need looks at a few, not all
    // (thousands of shapes on one collection stay linear).
    let mut by_first: FxHashMap<String, Vec<usize>> = FxHashMap::default();
    // Hidden indexes as they would be unhidden, to suggest unhiding rather than creating.
    let unhidden: Vec<IndexSpec> =
        indexes.iter().filter(|ix| ix.hidden).map(|ix| IndexSpec { hidden: false, ..ix.clone() }).collect();
    let no_arrays = |_: &str| false;
    for (o, fit, ix, key) in unserved {
        let serving = o
            .need
            .fields()
            .filter_map(|f| by_first.get(f))
            .flatten()
            .copied()
            .find(|&i| fit::fit_of(&o.need, &recs[i].spec, &no_arrays).quality == Quality::Served);
        match serving {
            Some(i) => recs[i].served.push((o, fit, ix)),
            None => {
                let hidden =
                    unhidden.iter().find(|h| fit::fit_of(&o.need, h, multikey).quality == Quality::Served);
                let unhide = hidden.map(|h| h.name.clone());
                let spec = hidden.cloned().unwrap_or_else(|| IndexSpec {
                    name: String::new(),
                    key: key.iter().map(|(f, d)| (f.clone(), KeyPart::Ordered(*d))).collect(),
                    unique: false,
                    collation: o.need.collation.clone(),
                    ..IndexSpec::id_index()
                });
                by_first.entry(spec.key[0].0.clone()).or_default().push(recs.len());
                recs.push(Recommendation { spec, unhide, served: vec![(o, fit, ix)] });
            }
        }
    }
    let coll = collection(ns);
    recs.into_iter()
        // An index with this very key exists but cannot serve (its options, a collation):
        // creating it again would fail; the finding would mislead.
        .filter(|r| r.unhide.is_some() || !indexes.iter().any(|ix| ix.key == r.spec.key))
        .filter_map(|r| {
            let count: u64 = r.served.iter().map(|(o, ..)| o.count).sum();
            if count < t.index_min_count {
                return None;
            }
            let time_us: f64 = r.served.iter().map(|(o, ..)| o.time_us()).sum();
            let worst = r.served.iter().map(|(_, f, _)| f.quality).min().unwrap_or(Quality::Unusable);
            let share = count as f64 / total_ops.max(1) as f64;
            let explains: Vec<(ShapeId, Explained)> =
                r.served.iter().filter_map(|(o, ..)| Some((o.id, (facts.explained)(o.id)?))).collect();
            // count and distinct return (almost) nothing by design: only finds and
            // aggregations are judged by what they examine beyond what they return.
            let returns_documents =
                |id: &ShapeId| r.served.iter().any(|(o, ..)| o.id == *id && matches!(o.command, "find" | "aggregate"));
            let wasteful = explains.iter().any(|(id, e)| {
                returns_documents(id) && e.docs_examined.max(e.keys_examined).saturating_sub(e.returned) > t.index_high_examined
            });
            let severity = match worst {
                _ if !known => Severity::Low,
                Quality::SortInMemory if !wasteful => Severity::Low,
                _ if share >= t.index_high_share || wasteful => Severity::High,
                _ => Severity::Medium,
            };
            let key_js = r.spec.key_js();
            let key_json = r.spec.key_json();
            let mut ids: Vec<ShapeId> = Vec::new();
            let shapes: Vec<Value> = r
                .served
                .iter()
                .map(|(o, f, ix)| {
                    ids.push(o.id);
                    let mut shape = json!({
                        "shape_id": crate::shape::hex(o.id),
                        "command": o.command,
                        "count": o.count,
                        "p50_ms": o.p50_ms,
                        "today": f.quality.as_str(),
                        "best_index": ix.map(|i| i.name.clone()),
                        "why": f.why,
                    });
                    if let Some((_, e)) = explains.iter().find(|(id, _)| *id == o.id) {
                        shape["explain"] = json!({
                            "totalKeysExamined": e.keys_examined,
                            "totalDocsExamined": e.docs_examined,
                            "nReturned": e.returned,
                            "winning_plan": e.plan,
                        });
                    }
                    shape
                })
                .collect();
            ids.dedup();
            let first = &r.served[0].0.need;
            let existing: Vec<Value> = indexes.iter().map(IndexSpec::key_json).collect();
            let why_not: Vec<Value> = indexes
                .iter()
                .map(|ix| {
                    let f = fit::fit_of(first, ix, multikey);
                    let why = if f.why.is_empty() { String::new() } else { format!(": {}", f.why) };
                    json!(format!("{} {}: {}{why}", ix.name, ix.key_js(), f.quality.as_str()))
                })
                .collect();
            // Existing indexes the new one makes redundant (a prefix of it, droppable).
            let replaced: Vec<&IndexSpec> = indexes.iter().filter(|ix| prefix_of(ix, &r.spec) && droppable(ix)).collect();
            let served_text = describe(first);
            let plan = explains.first().map(|(_, e)| {
                format!(
                    "{}: {} documents and {} keys examined for {} returned",
                    e.plan, e.docs_examined, e.keys_examined, e.returned
                )
            });
            let evidence = || {
                let mut e = json!({
                    "count": count,
                    "today": worst.as_str(),
                    "shapes": shapes,
                    "total_ms": ms(time_us),
                    "share": (share * 1000.0).round() / 1000.0,
                    "existing_indexes": existing,
                    "why_existing_indexes_do_not_serve": why_not,
                    "index_knowledge": knowledge,
                });
                if let Some(p) = &plan {
                    e["explain"] = json!(p);
                }
                e
            };
            let mut recommendation = format!(
                "Create an index that serves {served_text}{}: {} {} ran {count} times ({:.1}% of the operations), {}.",
                if r.served.len() > 1 { format!(" and {} more shape(s)", r.served.len() - 1) } else { String::new() },
                r.served.len(),
                if r.served.len() == 1 { "shape" } else { "shapes" },
                100.0 * share,
                worst.as_str(),
            );
            if !known {
                recommendation.push_str(&format!(
                    " mongotap does not know {ns}'s indexes ({knowledge}); check with db.{coll}.getIndexes() first."
                ));
            }
            if !replaced.is_empty() {
                let names: Vec<&str> = replaced.iter().map(|i| i.name.as_str()).collect();
                recommendation.push_str(&format!(
                    " It makes {} redundant (a prefix of it): drop after the new index is built.",
                    names.join(", ")
                ));
            }
            if let Some(name) = &r.unhide {
                recommendation = format!(
                    "The hidden index {name} {key_js} would serve {served_text}: {} {} ran {count} times ({:.1}% of the operations), {}. Unhide it.",
                    r.served.len(),
                    if r.served.len() == 1 { "shape" } else { "shapes" },
                    100.0 * share,
                    worst.as_str(),
                );
                let fix = format!("db.{coll}.unhideIndex(\"{name}\")");
                return Some(draft(ns, severity, &ids, evidence(), recommendation, fix, key_json, &r.spec.key[0].0));
            }
            let mut fix = format!("db.{coll}.createIndex({key_js}");
            if let Some((locale, strength)) = r.spec.collation.as_deref().and_then(|c| c.split_once('/')) {
                fix.push_str(&format!(", {{ collation: {{ locale: \"{locale}\", strength: {strength} }} }}"));
            }
            fix.push(')');
            for ix in &replaced {
                fix.push_str(&format!(
                    "\n// then, once it is built, {} is a prefix of it:\ndb.{coll}.dropIndex(\"{}\")",
                    ix.key_js(),
                    ix.name
                ));
            }
            Some(draft(ns, severity, &ids, evidence(), recommendation, fix, key_json, &r.spec.key[0].0))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn draft(
    ns: &str,
    severity: Severity,
    ids: &[ShapeId],
    evidence: Value,
    recommendation: String,
    fix: String,
    key: Value,
    first_field: &str,
) -> Finding {
    Draft {
        kind: "missing_index",
        severity,
        namespace: ns,
        shapes: ids,
        evidence,
        recommendation,
        fix: Some(fix),
        extra: vec![("index", json!({"key": key})), ("field", json!(first_field))],
    }
    .finding()
}

/// "equality on a, b, then the sort {c: -1}, then the range on d".
fn describe(n: &Need) -> String {
    let mut parts = Vec::new();
    if !n.equality.is_empty() {
        parts.push(format!("equality on {}", n.equality.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    if !n.sort.is_empty() {
        parts.push(format!("the sort {}", fit::sort_text(n)));
    }
    if !n.range.is_empty() {
        parts.push(format!("the range on {}", n.range.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    parts.join(", then ")
}

/// Whether a `hint` given as a key document names this index.
fn key_matches(hint: &Value, ix: &IndexSpec) -> bool {
    let Some(o) = hint.as_object() else { return false };
    o.len() == ix.key.len() && o.iter().zip(&ix.key).all(|((f, d), (k, p))| f == k && *d == p.to_json())
}

/// `a`'s key is a proper prefix of `b`'s, with the same directions.
fn prefix_of(a: &IndexSpec, b: &IndexSpec) -> bool {
    a.key.len() < b.key.len() && a.key.iter().zip(&b.key).all(|(x, y)| x == y)
}

/// Whether an index does nothing but serve queries (so a wider one can replace it).
fn droppable(ix: &IndexSpec) -> bool {
    !(ix.is_id()
        || ix.unique
        || ix.partial.is_some()
        || ix.sparse
        || ix.ttl
        || ix.hidden
        || ix.collation.is_some())
        && ix.key.iter().all(|(_, p)| matches!(p, KeyPart::Ordered(_)))
}

fn redundant(
    ns: &str,
    ctx: &Context<'_>,
    indexes: &[IndexSpec],
    hinted: &dyn Fn(&IndexSpec) -> bool,
    knowledge: &str,
) -> Vec<Finding> {
    let coll = collection(ns);
    let (mut reads, mut writes) = (0, 0);
    for r in ctx.table.rows().into_iter().filter(|r| r.namespace == ns) {
        match r.category {
            Category::Read => reads += r.count,
            Category::Write => writes += r.count,
            Category::Command => {}
        }
    }
    indexes
        .iter()
        .filter(|a| droppable(a) && !hinted(a))
        .filter_map(|a| {
            // The wider index must serve every query the narrower one does: no text,
            // geo or wildcard part, nothing that hides documents from it.
            let b = indexes.iter().find(|b| {
                prefix_of(a, b)
                    && !b.hidden
                    && b.partial.is_none()
                    && !b.sparse
                    && b.collation == a.collation
                    && b.key.iter().all(|(f, p)| !matches!(p, KeyPart::Special(_)) && !f.ends_with("$**"))
            })?;
            let severity = if writes > 0 { Severity::Medium } else { Severity::Low };
            Some(
                Draft {
                    kind: "redundant_index",
                    severity,
                    namespace: ns,
                    shapes: &[],
                    evidence: json!({
                        "count": writes,
                        "writes_seen": writes,
                        "reads_seen": reads,
                        "index": a.name,
                        "covered_by": b.name,
                        "covered_by_key": b.key_json(),
                        "index_knowledge": knowledge,
                    }),
                    recommendation: format!(
                        "{} {} is a prefix of {} {}: every query it serves, the wider one serves too, while every write ({writes} seen) maintains both. Hide it, watch, then drop it.",
                        a.name,
                        a.key_js(),
                        b.name,
                        b.key_js()
                    ),
                    fix: Some(format!(
                        "db.{coll}.hideIndex(\"{0}\")   // reversible: unhideIndex if a query slows down\ndb.{coll}.dropIndex(\"{0}\")",
                        a.name
                    )),
                    extra: vec![("index", json!({"key": a.key_json()})), ("index_name", json!(a.name))],
                }
                .finding(),
            )
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn unused(
    ns: &str,
    observed: &[Observed<'_>],
    indexes: &[IndexSpec],
    multikey: &dyn Fn(&str) -> bool,
    reported: &[String],
    hinted: &dyn Fn(&IndexSpec) -> bool,
    knowledge: &str,
    ctx: &Context<'_>,
    t: &Thresholds,
) -> Vec<Finding> {
    let rows: Vec<_> = ctx
        .table
        .rows()
        .into_iter()
        .filter(|r| r.namespace == ns && matches!(r.category, Category::Read | Category::Write))
        .collect();
    let operations: u64 = rows.iter().map(|r| r.count).sum();
    if operations < t.unused_index_min_operations {
        return Vec::new();
    }
    let from = rows.iter().map(|r| r.first_seen).min().unwrap_or(0);
    let to = rows.iter().map(|r| r.last_seen).max().unwrap_or(0);
    let window_s = to.saturating_sub(from) as f64 / 1e6;
    let coll = collection(ns);
    indexes
        .iter()
        .filter(|ix| {
            !(ix.is_id() || ix.unique || ix.ttl || ix.hidden || reported.contains(&ix.name) || hinted(ix))
                && ix.key.iter().all(|(_, p)| !matches!(p, KeyPart::Special(_)))
        })
        .filter(|ix| observed.iter().all(|o| fit::fit_of(&o.need, ix, multikey).quality == Quality::Unusable))
        .map(|ix| {
            Draft {
                kind: "unused_index",
                severity: Severity::Low,
                namespace: ns,
                shapes: &[],
                evidence: json!({
                    "count": operations,
                    "operations_seen": operations,
                    "shapes_seen": observed.len(),
                    "window_s": (window_s * 10.0).round() / 10.0,
                    "index": ix.name,
                    "index_knowledge": knowledge,
                }),
                recommendation: format!(
                    "No query shape seen on {ns} in {window_s:.1} s ({operations} operations, {} shapes) could use {} {}. mongotap sees only the clients that go through it, over this window: check $indexStats on every node over a full business cycle before dropping it (Atlas waits 7 days).",
                    observed.len(),
                    ix.name,
                    ix.key_js()
                ),
                fix: Some(format!(
                    "db.{coll}.aggregate([{{ $indexStats: {{}} }}, {{ $match: {{ name: \"{0}\" }} }}])   // accesses.ops on every node\ndb.{coll}.hideIndex(\"{0}\")   // reversible; drop it when nothing slowed down\ndb.{coll}.dropIndex(\"{0}\")",
                    ix.name
                )),
                extra: vec![("index", json!({"key": ix.key_json()})), ("index_name", json!(ix.name))],
            }
            .finding()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detectors::indexes::catalog::IndexCatalog;
    use crate::detectors::Detectors;
    use crate::exchange::Limits;
    use crate::pipeline::Pipeline;
    use crate::script::{batch, Script};
    use crate::table::TableLimits;
    use bson::{doc, Document};

    fn advisor_run(f: impl FnOnce(&mut Script)) -> Vec<Finding> {
        let catalog = IndexCatalog::shared();
        let mut p = Pipeline::with_detectors(
            Limits::default(),
            TableLimits::default(),
            Detectors::with_catalog(Thresholds::default(), catalog),
        );
        let mut s = Script::new();
        f(&mut s);
        s.run_into(&mut p);
        p.findings().into_iter().filter(|f| f.kind.contains("index")).collect()
    }

    fn find(s: &mut Script, c: u64, ns: &str, body: Document, docs: Vec<Document>) {
        let (db, coll) = ns.split_once('.').unwrap();
        let mut cmd = doc! {"find": coll};
        cmd.extend(body);
        cmd.insert("$db", db);
        s.exchange(c, cmd, batch(ns, docs, 0, true));
    }

    fn history(s: &mut Script, n: i32) {
        let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
        for i in 0..n {
            find(
                s,
                c,
                "shop.orders",
                doc! {"filter": {"customerId": i % 7, "status": "open"}, "sort": {"createdAt": -1}, "limit": 20},
                vec![doc! {"_id": i, "customerId": i % 7, "status": "open", "createdAt": i}],
            );
        }
    }

    fn create(s: &mut Script, ns: &str, key: Document, name: &str) {
        let c = s.connect("10.0.0.9:50001", "admin", "mongosh 2.5.0");
        let (db, coll) = ns.split_once('.').unwrap();
        s.exchange(
            c,
            doc! {"createIndexes": coll, "indexes": [{"key": key, "name": name}], "$db": db},
            doc! {"ok": 1.0},
        );
    }

    /// The application lists the collection's indexes (as ODMs and tools do).
    fn list(s: &mut Script, ns: &str, keys: Vec<(Document, &str)>) {
        let c = s.connect("10.0.0.9:50003", "admin", "mongosh 2.5.0");
        let (db, coll) = ns.split_once('.').unwrap();
        let docs = keys.into_iter().map(|(key, name)| doc! {"v": 2, "key": key, "name": name}).collect();
        s.exchange(c, doc! {"listIndexes": coll, "cursor": {}, "$db": db}, batch(ns, docs, 0, true));
    }

    #[test]
    fn order_history_without_its_index_is_flagged_with_the_esr_key() {
        let f = advisor_run(|s| {
            list(s, "shop.orders", vec![(doc! {"_id": 1}, "_id_"), (doc! {"createdAt": 1}, "createdAt_1")]);
            history(s, 30);
        });
        assert_eq!(f.len(), 1, "{f:#?}");
        let key = &f[0].extra["index"]["key"];
        assert_eq!(key[2], json!(["createdAt", -1]));
        let eq: BTreeSet<&str> = [key[0][0].as_str().unwrap(), key[1][0].as_str().unwrap()].into();
        assert_eq!(eq, BTreeSet::from(["customerId", "status"]));
        assert!(f[0].fix.as_deref().unwrap().starts_with("db.orders.createIndex({"), "{:?}", f[0].fix);
        assert_eq!(f[0].evidence["existing_indexes"], json!([[["_id", 1]], [["createdAt", 1]]]));
        assert_eq!(f[0].severity, "high");
    }

    #[test]
    fn creating_the_index_through_the_proxy_clears_it() {
        let f = advisor_run(|s| {
            history(s, 30);
            create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
        });
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn two_shapes_share_one_index_and_served_shapes_never_appear() {
        let f = advisor_run(|s| {
            create(s, "shop.orders", doc! {"total": 1}, "total_1");
            history(s, 10);
            let c = s.connect("10.0.0.7:50002", "shop-api", "PyMongo 4.20.1");
            for i in 0..10 {
                find(s, c, "shop.orders", doc! {"filter": {"customerId": i}}, vec![]);
                find(s, c, "shop.orders", doc! {"filter": {"total": {"$gt": i}}}, vec![]);
                find(s, c, "shop.orders", doc! {"filter": {"_id": i, "x": 1}}, vec![]);
            }
        });
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].shape_ids.len(), 2, "one index for both shapes");
        assert_eq!(f[0].evidence["count"], 20);
    }

    #[test]
    fn redundant_and_unused_indexes() {
        let f = advisor_run(|s| {
            create(s, "shop.orders", doc! {"customerId": 1}, "customerId_1");
            create(s, "shop.orders", doc! {"customerId": 1, "createdAt": -1}, "customerId_1_createdAt_-1");
            create(s, "shop.orders", doc! {"legacyCode": 1}, "legacyCode_1");
            let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
            for i in 0..120 {
                find(
                    s,
                    c,
                    "shop.orders",
                    doc! {"filter": {"customerId": i}, "sort": {"createdAt": -1}},
                    vec![],
                );
            }
        });
        let kinds: Vec<(&str, &str)> =
            f.iter().map(|f| (f.kind.as_str(), f.extra["index_name"].as_str().unwrap_or(""))).collect();
        assert_eq!(kinds, [("redundant_index", "customerId_1"), ("unused_index", "legacyCode_1")], "{f:#?}");
    }

    #[test]
    fn unknown_indexes_lower_the_severity_and_say_so() {
        let f = advisor_run(|s| history(s, 30));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, "low");
        assert!(f[0].recommendation.contains("does not know"), "{}", f[0].recommendation);
        // createIndexes seen says which indexes exist, not that there are no others.
        let f = advisor_run(|s| {
            create(s, "shop.orders", doc! {"createdAt": 1}, "createdAt_1");
            history(s, 30);
        });
        assert_eq!(f[0].severity, "low", "{f:#?}");
    }

    #[test]
    fn hinted_indexes_are_used_and_text_indexes_cover_nothing() {
        let f = advisor_run(|s| {
            list(
                s,
                "shop.orders",
                vec![
                    (doc! {"_id": 1}, "_id_"),
                    (doc! {"sku": 1}, "sku_1"),
                    (doc! {"sku": 1, "notes": "text"}, "sku_1_notes_text"),
                    (doc! {"region": 1}, "region_1"),
                ],
            );
            let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
            for i in 0..120 {
                find(s, c, "shop.orders", doc! {"filter": {"sku": i}}, vec![]);
                find(s, c, "shop.orders", doc! {"filter": {"total": {"$gt": i}}, "hint": "region_1"}, vec![]);
            }
        });
        // total is unindexed (a missing index), but region_1 is hinted (used) and sku_1
        // is not redundant with an index that serves only $text.
        let kinds: Vec<&str> = f.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["missing_index"], "{f:#?}");
    }

    #[test]
    fn a_collections_default_collation_applies_to_its_queries() {
        let f = advisor_run(|s| {
            let c = s.connect("10.0.0.9:50003", "admin", "mongosh 2.5.0");
            let fr = doc! {"locale": "fr", "strength": 3, "caseLevel": false, "version": "57.1"};
            let docs = vec![
                doc! {"v": 2, "key": {"_id": 1}, "name": "_id_", "collation": fr.clone()},
                doc! {"v": 2, "key": {"customerId": 1, "status": 1, "createdAt": -1}, "name": "h", "collation": fr},
            ];
            s.exchange(
                c,
                doc! {"listIndexes": "orders", "cursor": {}, "$db": "shop"},
                batch("shop.orders", docs, 0, true),
            );
            history(s, 30);
            let c = s.connect("10.0.0.7:50002", "shop-api", "PyMongo 4.20.1");
            for i in 0..10 {
                find(s, c, "shop.orders", doc! {"filter": {"_id": i}}, vec![]);
            }
        });
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn a_multikey_sort_field_asks_for_no_index_that_exists() {
        let f = advisor_run(|s| {
            create(s, "blog.posts", doc! {"author": 1, "tags": 1}, "author_1_tags_1");
            let c = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
            for i in 0..10 {
                find(
                    s,
                    c,
                    "blog.posts",
                    doc! {"filter": {"author": i}, "sort": {"tags": 1}},
                    vec![doc! {"_id": i, "author": i, "tags": ["a", "b"]}],
                );
            }
        });
        assert!(f.is_empty(), "the index exists; the sort is in memory because tags holds arrays: {f:#?}");
    }

    #[test]
    fn a_hidden_index_is_unhidden_rather_than_created_again() {
        let f = advisor_run(|s| {
            create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
            let c = s.connect("10.0.0.9:50002", "admin", "mongosh 2.5.0");
            s.exchange(
                c,
                doc! {"collMod": "orders", "index": {"name": "history", "hidden": true}, "$db": "shop"},
                doc! {"ok": 1.0},
            );
            history(s, 30);
        });
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].fix.as_deref(), Some("db.orders.unhideIndex(\"history\")"));
    }
}
