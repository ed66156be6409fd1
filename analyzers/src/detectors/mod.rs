//! The detectors: each watches the operations for one smell of the schema-design
//! literature and says what it found as report findings, with the evidence, the
//! recommendation and the fix.
//!
//! Every detector implements the small [`Detector`] trait: it is handed each
//! operation's [`OpView`] (decoded once, with the table's shape ids), told about
//! holes in the events (the tap dropped some), and asked for its findings whenever
//! a report is built. What a detector keeps is bounded and holds
//! no value: keyed hashes ([`crate::values::Keyed`]), counts, shape ids and field names.
//!
//! # Layout
//! The folders follow the chapters of the schema-design guides:
//! - [`reads`]: reads and joins: N+1 chains, redundant reads, `$lookup` chains, over-fetching.
//! - [`writes`]: writes and growth: whole-document rewrites, growing arrays, large
//!   documents, fan-out updates of copied fields, bucket candidates.
//! - [`indexes`]: the Equality-Sort-Range index advisor and the catalog of indexes it reads.
//! - [`schema`]: what queries ask of documents that none holds (unknown fields).
//!
//! Shared by all of them:
//! - [`thresholds`]: every threshold and bound, with its source.
//! - [`driver`]: the client's language and ODM, from its handshake, for fixes.
//! - [`snippets`]: fixes written in that language.

pub mod driver;
pub mod indexes;
pub mod reads;
pub mod schema;
pub mod snippets;
pub mod thresholds;
pub mod writes;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::event::Micros;
use crate::finding::Finding;
use crate::schema::Schemas;
use crate::table::{AccessTable, Row};
use crate::view::{OpView, ShapeId};

pub use thresholds::Thresholds;

/// Every finding kind a detector or the relationship map reports: the CI gate
/// accepts these and rejects anything else, `/metrics` counts each, and
/// `mongotap detectors` lists them (each has its page under `docs/findings/`).
pub const KINDS: &[&str] = &[
    "n_plus_one",
    "redundant_query",
    "lookup_chain",
    "full_document_rewrite",
    "unbounded_array_growth",
    "missing_index",
    "redundant_index",
    "unused_index",
    "fan_out_update",
    "bucket_candidate",
    "large_document",
    "over_fetch",
    "embed_candidate",
    "extended_reference_candidate",
    "unknown_field",
    "inefficient_regex",
    "ttl_candidate",
    "hot_document",
    "schema_drift",
    "computed_candidate",
    "outlier_candidate",
    "attribute_candidate",
    "bad_shard_key",
];

/// One detector. Every method but [`Detector::findings`] has a no-op default, so a
/// detector implements only what it needs.
pub trait Detector: Send {
    /// Its name, for the report's traffic notes.
    fn name(&self) -> &'static str;

    /// Looks at one operation.
    fn on_operation(&mut self, _op: &OpView<'_>) {}

    /// Events were dropped before now (the analysis was behind): whatever the
    /// detector follows across events has a hole and must not be trusted.
    fn on_gap(&mut self, _at: Micros) {}

    /// Time has passed (the live proxy calls this every second).
    fn expire(&mut self, _now: Micros) {}

    /// What it found so far. Called for every report, so it does not consume state.
    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding>;

    /// State it had to let go of to stay bounded, by kind.
    fn evictions(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What detectors may consult when they write findings.
pub struct Context<'a> {
    /// The access-pattern table: counts, latencies, fields read per shape.
    pub table: &'a AccessTable,
    /// The thresholds in force.
    pub thresholds: &'a Thresholds,
    /// What each collection's documents look like.
    pub schemas: &'a Schemas,
    rows: FxHashMap<ShapeId, &'a Row>,
}

impl<'a> Context<'a> {
    /// A context over `table`.
    pub fn new(table: &'a AccessTable, thresholds: &'a Thresholds, schemas: &'a Schemas) -> Context<'a> {
        let rows = table.rows().into_iter().filter(|r| r.id != 0).map(|r| (r.id, r)).collect();
        Context { table, thresholds, schemas, rows }
    }

    /// The table row of a shape.
    pub fn row(&self, id: ShapeId) -> Option<&'a Row> {
        self.rows.get(&id).copied()
    }
}

/// All detectors, fed by the pipeline.
pub struct Detectors {
    list: Vec<Box<dyn Detector>>,
    thresholds: Thresholds,
    catalog: indexes::catalog::SharedCatalog,
}

impl Detectors {
    /// Every detector, with these thresholds; the index advisor knows only the
    /// indexes the traffic shows.
    pub fn new(thresholds: Thresholds) -> Detectors {
        Detectors::with_catalog(thresholds, indexes::catalog::IndexCatalog::shared())
    }

    /// Every detector, the index advisor reading `catalog` (which a side connection
    /// to the upstream may fill).
    pub fn with_catalog(thresholds: Thresholds, catalog: indexes::catalog::SharedCatalog) -> Detectors {
        let list: Vec<Box<dyn Detector>> = vec![
            Box::new(reads::n_plus_one::NPlusOne::new(&thresholds)),
            Box::new(reads::redundant_query::RedundantQuery::new(&thresholds)),
            Box::new(reads::lookup_chain::LookupChain),
            Box::new(writes::rewrite::Rewrite::new(&thresholds)),
            Box::new(writes::array_growth::ArrayGrowth::new(&thresholds)),
            Box::new(writes::document_size::DocumentSize::new(&thresholds)),
            Box::new(writes::fan_out::FanOut::new(&thresholds)),
            Box::new(writes::bucket::Bucket::new(&thresholds)),
            Box::new(writes::ttl_candidate::TtlCandidate::new(&thresholds)),
            Box::new(writes::hot_document::HotDocument::new(&thresholds)),
            Box::new(reads::over_fetch::OverFetch::new(&thresholds)),
            Box::new(schema::attribute_candidate::AttributeCandidate::new(catalog.clone())),
            Box::new(indexes::advisor::IndexAdvisor::new(catalog.clone())),
            Box::new(indexes::inefficient_regex::InefficientRegex::new(&thresholds)),
            Box::new(schema::unknown_field::UnknownField),
            Box::new(schema::schema_drift::SchemaDrift),
            Box::new(reads::computed_candidate::ComputedCandidate),
            Box::new(writes::outlier_candidate::OutlierCandidate),
        ];
        Detectors { list, thresholds, catalog }
    }

    /// No detector at all (to measure what they cost).
    pub fn none() -> Detectors {
        Detectors {
            list: Vec::new(),
            thresholds: Thresholds::default(),
            catalog: indexes::catalog::IndexCatalog::shared(),
        }
    }

    /// What the server says of each collection: its indexes and, on a sharded
    /// cluster, its shard key.
    pub fn catalog(&self) -> &indexes::catalog::SharedCatalog {
        &self.catalog
    }

    /// The thresholds in force.
    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// Hands an operation to every detector.
    pub fn on_operation(&mut self, op: &OpView<'_>) {
        for d in &mut self.list {
            d.on_operation(op);
        }
    }

    /// Tells every detector about a hole in the events.
    pub fn on_gap(&mut self, at: Micros) {
        for d in &mut self.list {
            d.on_gap(at);
        }
    }

    /// Lets every detector close what has timed out.
    pub fn expire(&mut self, now: Micros) {
        for d in &mut self.list {
            d.expire(now);
        }
    }

    /// Every detector's findings, reconciled so that one problem is said once: a
    /// redundant query that is the child of an N+1 (the last of its shape ids), in
    /// the N+1 (batching its children removes both); an over-fetch of the field that
    /// makes documents large, in the large_document finding.
    pub fn findings(&self, table: &AccessTable, schemas: &Schemas) -> Vec<Finding> {
        let ctx = Context::new(table, &self.thresholds, schemas);
        let mut all: Vec<Finding> = self.list.iter().flat_map(|d| d.findings(&ctx)).collect();
        // The server's own namespaces (the profiler, config, local, admin) get no
        // advice: nobody designs their schema, and the server writes them.
        let system = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(crate::namespace::is_system);
        all.retain(|f| !crate::namespace::is_system(&f.namespace) && !system(f.extra.get("child_namespace")));
        let children: Vec<String> = all
            .iter()
            .filter(|f| f.kind == "n_plus_one")
            .filter_map(|f| f.shape_ids.last().cloned())
            .collect();
        all.retain(|f| f.kind != "redundant_query" || !f.shape_ids.iter().any(|s| children.contains(s)));
        // An over-fetch of the field that makes a document large is said once, in the
        // large_document finding (which asks for the same projection, and more).
        let large: Vec<(String, Option<Value>)> = all
            .iter()
            .filter(|f| f.kind == "large_document")
            .map(|f| (f.namespace.clone(), f.extra.get("field").cloned()))
            .collect();
        all.retain(|f| {
            f.kind != "over_fetch"
                || !large
                    .iter()
                    .any(|(ns, field)| *ns == f.namespace && field.as_ref() == f.extra.get("field"))
        });
        all
    }

    /// Evictions by detector and kind (`n_plus_one.clients`), for the report's
    /// traffic notes and `/metrics`; kinds with none are left out.
    pub fn evictions(&self) -> BTreeMap<String, u64> {
        self.list
            .iter()
            .flat_map(|d| d.evictions().into_iter().map(move |(k, n)| (format!("{}.{k}", d.name()), n)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

impl Default for Detectors {
    fn default() -> Self {
        Detectors::new(Thresholds::default())
    }
}

/// The collection part of `db.collection`.
pub(crate) fn collection(namespace: &str) -> &str {
    namespace.split_once('.').map_or(namespace, |(_, c)| c)
}

/// Milliseconds from microseconds, to 3 decimals.
/// App and driver names kept per item of a detector: enough to say who, bounded.
pub(crate) const MAX_NAMES: usize = 8;

/// Adds `name` to a bounded set of names (the first [`MAX_NAMES`] distinct ones).
pub(crate) fn keep_name(names: &mut std::collections::BTreeSet<String>, name: &str) {
    if names.len() < MAX_NAMES && !names.contains(name) {
        names.insert(name.to_owned());
    }
}

pub(crate) fn ms(us: f64) -> f64 {
    us.round() / 1000.0
}

/// The median of some counts.
pub(crate) fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}
