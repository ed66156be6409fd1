//! Every number a detector decides with, in one place, each with where it comes
//! from. Users override any of them in the `[detectors]` table of the TOML config
//! (`mongotap detectors` prints them all with their sources).
//!
//! Here: the values, their defaults, their validation and the TOML users edit; in
//! [`sources`], what each decides and where its default comes from.
//!
//! Most tools we learn from work on APM spans or ORM hooks, with production
//! timings; mongotap sees the wire, usually on staging, where a local server answers
//! in well under a millisecond. So the rules here count round trips and link values
//! rather than time, and estimate the time at a production round trip the user sets.

mod sources;

use serde::{Deserialize, Serialize};

pub use sources::{ThresholdDoc, DOCS};

/// The detectors' thresholds and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// A production round trip between the application and the database, in ms.
    pub assumed_rtt_ms: f64,

    /// N+1: a parent must return at least this many documents.
    pub n_plus_one_min_parent_docs: u64,
    /// N+1: distinct child queries linked to one parent occurrence.
    pub n_plus_one_min_children: u64,
    /// N+1: share of the parent's distinct values at the link path that children asked for.
    pub n_plus_one_min_coverage: f64,
    /// N+1: share of the client's child-shaped reads in the burst whose value the parent returned.
    pub n_plus_one_min_explained: f64,
    /// N+1: child queries per reference in the parent, at most.
    pub n_plus_one_max_per_reference: f64,
    /// N+1: share of the parent shape's examined reads that showed the pattern, at least.
    pub n_plus_one_min_recurrence: f64,
    /// N+1: a parent stays open while its children come at most this far apart, in ms.
    pub n_plus_one_link_gap_ms: u64,
    /// N+1: a typical N at or above this is high severity.
    pub n_plus_one_high_children: u64,
    /// N+1: extra round trips per parent costing this much at `assumed_rtt_ms` are high severity.
    pub n_plus_one_high_cost_ms: f64,

    /// Redundant query: the client's last reads of a shape looked at together.
    pub redundant_window: u64,
    /// Redundant query: at most this many distinct values in that window.
    pub redundant_max_distinct: u64,
    /// Redundant query: the reads are at most this far apart, in ms.
    pub redundant_gap_ms: u64,

    /// $lookup: an aggregation with `$lookup` must run at least this often.
    pub lookup_min_count: u64,
    /// $lookup: and be at least this share of its application's reads.
    pub lookup_min_share: f64,
    /// $lookup: joining at least this many collections makes it a chain.
    pub lookup_chain_min_joins: u64,
    /// $lookup: this share of the application's reads raises the severity.
    pub lookup_high_share: f64,
    /// $lookup: this share of the application's read time raises the severity.
    pub lookup_high_time_share: f64,

    /// Rewrite: whole rewrites of one write shape before it is a finding.
    pub rewrite_min_count: u64,
    /// Rewrite: of which rewrites of a document rewritten (or read) before.
    pub rewrite_min_repeats: u64,
    /// Rewrite: the typical rewrite changes at most this share of the fields.
    pub rewrite_max_changed_share: f64,
    /// Rewrite: a `$set` of this many of a document's known fields rewrites it whole.
    pub rewrite_whole_set_share: f64,
    /// Rewrite: a `$set` of an array or sub-document this large re-sends a sub-tree.
    pub rewrite_min_subtree_bytes: u64,
    /// Array growth: pushes to one document's array (without `$slice`).
    pub array_min_pushes_per_doc: u64,
    /// Array growth: an array this long is too long (and high severity).
    pub array_max_elements: u64,
    /// Array growth: reaching 16 MiB within this many days at the observed rate is high severity.
    pub array_high_days_to_limit: f64,
    /// Large document: a document this large (bytes) read or written.
    pub large_document_bytes: u64,
    /// Large document: this large is high severity.
    pub large_document_high_bytes: u64,
    /// Fan-out: runs of one multi-document update of a copied field.
    pub fan_out_min_runs: u64,
    /// Fan-out: documents changed per run, on average.
    pub fan_out_min_docs: u64,
    /// Fan-out: this many documents per run is high severity.
    pub fan_out_high_docs: u64,
    /// Bucket: small inserts of time-stamped documents into one collection.
    pub bucket_min_inserts: u64,
    /// Bucket: distinct sources (values of one field) among them.
    pub bucket_min_sources: u64,
    /// Bucket: documents per source, on average.
    pub bucket_min_per_source: u64,
    /// Bucket: an insert of at most this many documents is a small one.
    pub bucket_max_docs_per_insert: u64,
    /// Hot document: updates of one document before it is a finding.
    pub hot_min_writes: u64,
    /// Hot document: its share of the collection's writes.
    pub hot_min_share: f64,
    /// Hot document: connections writing it (one writer waits for no one).
    pub hot_min_connections: u64,
    /// TTL candidate: runs of one purge by a moving date before it is a finding.
    pub ttl_min_runs: u64,
    /// TTL candidate: the runs' ages (run time less the limit) agree within this share of their median.
    pub ttl_max_age_spread: f64,
    /// Over-fetch: reads of one shape without a projection.
    pub over_fetch_min_reads: u64,
    /// Over-fetch: their documents' mean size (bytes).
    pub over_fetch_min_doc_bytes: u64,
    /// Over-fetch: one field makes at least this share of them.
    pub over_fetch_min_field_share: f64,
    /// Index advisor: executions of the shapes an index would serve before it is recommended.
    pub index_min_count: u64,
    /// Index advisor: a sorted `$in` with more values than this is a range, not an equality.
    pub index_in_max_points: u64,
    /// Index advisor: shapes that are this share of all reads and writes make a missing index high severity.
    pub index_high_share: f64,
    /// Index advisor (`--explain`): documents or keys examined beyond those returned, per query, for high severity.
    pub index_high_examined: u64,
    /// Index advisor: operations on a collection before one of its indexes may be called unused.
    pub unused_index_min_operations: u64,
    /// Inefficient regex: reads matching a field with a regex no index can seek before it is a finding.
    pub regex_min_count: u64,
    /// Unknown field: documents of a collection seen whole before a field none of them carries is unknown.
    pub unknown_field_min_documents: u64,
    /// Computed: runs of one summarising read (a `$group`, `count`, `distinct`) before it is a finding.
    pub computed_min_runs: u64,
    /// Computed: runs per write to the collections it reads, at least.
    pub computed_min_runs_per_write: f64,
    /// Computed: this many runs per write is medium severity.
    pub computed_high_runs_per_write: f64,
    /// Outlier: arrays of one field seen before their lengths are judged.
    pub outlier_min_arrays: u64,
    /// Outlier: the typical (p50) array holds at most this many elements.
    pub outlier_max_typical: u64,
    /// Outlier: an outlier holds at least this many (and ten times the typical).
    pub outlier_min_length: u64,
    /// Outlier: outliers are at most this share of the arrays.
    pub outlier_max_share: f64,
    /// Attribute: sibling fields under one parent, each asked on its own, before it is a finding.
    pub attribute_min_fields: u64,
    /// Attribute: each of them is in at most this share of the documents seen.
    pub attribute_max_presence: f64,
    /// Shard keys: reads and write statements of a collection before its candidates are ranked.
    pub shard_min_operations: u64,
    /// Shard keys: fewer distinct values than this is low cardinality.
    pub shard_min_distinct: u64,
    /// Shard keys: one value holding more than this share of the documents makes jumbo chunks.
    pub shard_max_common_share: f64,
    /// Shard keys: this share of consecutive inserts rising (or falling) is monotonic.
    pub shard_monotonic_share: f64,
    /// Shard keys: a key is recommended when at least this share of reads go to one shard.
    pub shard_min_single_reads: f64,
    /// Schema drift: documents of a collection seen whole since it last started afresh.
    pub drift_min_documents: u64,
    /// Schema drift: values of a field's rarer types before they are a drift.
    pub drift_min_values: u64,
    /// Schemas: documents written since the collection last started afresh before a validator is inferred.
    pub validator_min_documents: u64,

    /// Operations: a unit of work's requests come at most this far after its last reply, in ms.
    pub operation_gap_ms: u64,
    /// Operations: this share of all operations is "very high" frequency.
    pub operation_very_high_share: f64,
    /// Operations: this share is "high".
    pub operation_high_share: f64,
    /// Operations: this share is "medium" (below: "low").
    pub operation_medium_share: f64,
    /// Relationships: operations that followed a link before it gets a verdict.
    pub relationship_min_operations: u64,
    /// Relationships: read together in this share of the parent's reads or more.
    pub relationship_read_together: f64,
    /// Relationships: at most this many children per parent can be embedded.
    pub relationship_max_embedded: u64,
    /// Relationships: this many children per parent is one-to-squillions.
    pub relationship_squillions: u64,
    /// Relationships: at most this many writes to the child per read makes copying its fields cheap.
    pub relationship_rare_writes: f64,
    /// Relationships: at most this many fields are copied in an extended reference.
    pub relationship_copy_fields: u64,

    /// Bound: clients followed at once (least recently active evicted, counted).
    pub max_clients: u64,
    /// Bound: open parent reads per client.
    pub max_open_parents: u64,
    /// Bound: (value, path) pairs kept per parent read.
    pub max_values_per_parent: u64,
    /// Bound: documents remembered (their fields' keyed hashes, their pushes).
    pub max_documents: u64,
    /// Bound: (value, path) pairs kept in all open parent reads together.
    pub max_values_open: u64,
    /// Bound: distinct patterns (parent, child, link) and repeated reads kept.
    pub max_patterns: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            assumed_rtt_ms: 1.0,
            n_plus_one_min_parent_docs: 2,
            n_plus_one_min_children: 5,
            n_plus_one_min_coverage: 0.5,
            n_plus_one_min_explained: 0.8,
            n_plus_one_max_per_reference: 2.0,
            n_plus_one_min_recurrence: 0.1,
            n_plus_one_link_gap_ms: 1000,
            n_plus_one_high_children: 10,
            n_plus_one_high_cost_ms: 50.0,
            redundant_window: 16,
            redundant_max_distinct: 4,
            redundant_gap_ms: 500,
            lookup_min_count: 10,
            lookup_min_share: 0.01,
            lookup_chain_min_joins: 2,
            lookup_high_share: 0.05,
            lookup_high_time_share: 0.25,
            rewrite_min_count: 5,
            rewrite_min_repeats: 3,
            rewrite_max_changed_share: 0.5,
            rewrite_whole_set_share: 0.8,
            rewrite_min_subtree_bytes: 256,
            array_min_pushes_per_doc: 25,
            array_max_elements: 250,
            array_high_days_to_limit: 30.0,
            large_document_bytes: 1_000_000,
            large_document_high_bytes: 10_000_000,
            fan_out_min_runs: 3,
            fan_out_min_docs: 10,
            fan_out_high_docs: 1_000,
            bucket_min_inserts: 500,
            bucket_min_sources: 5,
            bucket_min_per_source: 20,
            bucket_max_docs_per_insert: 10,
            hot_min_writes: 100,
            hot_min_share: 0.5,
            hot_min_connections: 2,
            ttl_min_runs: 3,
            ttl_max_age_spread: 0.05,
            over_fetch_min_reads: 10,
            over_fetch_min_doc_bytes: 8_192,
            over_fetch_min_field_share: 0.6,
            index_min_count: 5,
            index_in_max_points: 200,
            index_high_share: 0.05,
            index_high_examined: 500,
            unused_index_min_operations: 100,
            regex_min_count: 5,
            unknown_field_min_documents: 20,
            computed_min_runs: 20,
            computed_min_runs_per_write: 10.0,
            computed_high_runs_per_write: 100.0,
            outlier_min_arrays: 50,
            outlier_max_typical: 100,
            outlier_min_length: 1_000,
            outlier_max_share: 0.05,
            attribute_min_fields: 4,
            attribute_max_presence: 0.5,
            shard_min_operations: 100,
            shard_min_distinct: 100,
            shard_max_common_share: 0.25,
            shard_monotonic_share: 0.9,
            shard_min_single_reads: 0.5,
            drift_min_documents: 20,
            drift_min_values: 2,
            validator_min_documents: 50,
            operation_gap_ms: 50,
            operation_very_high_share: 0.25,
            operation_high_share: 0.10,
            operation_medium_share: 0.02,
            relationship_min_operations: 10,
            relationship_read_together: 0.8,
            relationship_max_embedded: 50,
            relationship_squillions: 1_000,
            relationship_rare_writes: 0.05,
            relationship_copy_fields: 5,
            max_clients: 10_000,
            max_open_parents: 8,
            max_values_per_parent: 20_000,
            max_values_open: 1_000_000,
            max_patterns: 1_024,
            max_documents: 100_000,
        }
    }
}

impl Thresholds {
    /// Checks that every value makes sense: shares between 0 and 1, a positive
    /// round trip, windows and bounds that are positive and not absurd.
    pub fn validate(&self) -> Result<(), String> {
        let share = |k: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("{k} must be between 0 and 1, not {v}"))
            }
        };
        share("n_plus_one_min_coverage", self.n_plus_one_min_coverage)?;
        share("n_plus_one_min_explained", self.n_plus_one_min_explained)?;
        share("n_plus_one_min_recurrence", self.n_plus_one_min_recurrence)?;
        share("lookup_min_share", self.lookup_min_share)?;
        share("lookup_high_share", self.lookup_high_share)?;
        share("lookup_high_time_share", self.lookup_high_time_share)?;
        share("rewrite_max_changed_share", self.rewrite_max_changed_share)?;
        share("rewrite_whole_set_share", self.rewrite_whole_set_share)?;
        share("over_fetch_min_field_share", self.over_fetch_min_field_share)?;
        share("ttl_max_age_spread", self.ttl_max_age_spread)?;
        share("hot_min_share", self.hot_min_share)?;
        share("shard_max_common_share", self.shard_max_common_share)?;
        share("shard_monotonic_share", self.shard_monotonic_share)?;
        share("shard_min_single_reads", self.shard_min_single_reads)?;
        share("attribute_max_presence", self.attribute_max_presence)?;
        share("outlier_max_share", self.outlier_max_share)?;
        share("index_high_share", self.index_high_share)?;
        share("operation_very_high_share", self.operation_very_high_share)?;
        share("operation_high_share", self.operation_high_share)?;
        share("operation_medium_share", self.operation_medium_share)?;
        share("relationship_read_together", self.relationship_read_together)?;
        let positive = |k: &str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(format!("{k} must be a positive number, not {v}"))
            }
        };
        positive("assumed_rtt_ms", self.assumed_rtt_ms)?;
        positive("n_plus_one_max_per_reference", self.n_plus_one_max_per_reference)?;
        positive("n_plus_one_high_cost_ms", self.n_plus_one_high_cost_ms)?;
        positive("array_high_days_to_limit", self.array_high_days_to_limit)?;
        positive("relationship_rare_writes", self.relationship_rare_writes)?;
        positive("computed_min_runs_per_write", self.computed_min_runs_per_write)?;
        positive("computed_high_runs_per_write", self.computed_high_runs_per_write)?;
        let counts = [
            ("n_plus_one_min_parent_docs", self.n_plus_one_min_parent_docs, 1_000_000),
            ("n_plus_one_min_children", self.n_plus_one_min_children, 1_000_000),
            ("n_plus_one_link_gap_ms", self.n_plus_one_link_gap_ms, 3_600_000),
            ("n_plus_one_high_children", self.n_plus_one_high_children, 1_000_000),
            ("redundant_window", self.redundant_window, 1_024),
            ("redundant_max_distinct", self.redundant_max_distinct, 1_024),
            ("redundant_gap_ms", self.redundant_gap_ms, 3_600_000),
            ("lookup_min_count", self.lookup_min_count, u64::MAX),
            ("lookup_chain_min_joins", self.lookup_chain_min_joins, 1_000),
            ("max_clients", self.max_clients, 10_000_000),
            ("max_open_parents", self.max_open_parents, 1_024),
            ("max_values_per_parent", self.max_values_per_parent, 100_000_000),
            ("max_values_open", self.max_values_open, 1_000_000_000),
            ("max_patterns", self.max_patterns, 10_000_000),
            ("max_documents", self.max_documents, 100_000_000),
            ("rewrite_min_count", self.rewrite_min_count, u64::MAX),
            ("rewrite_min_repeats", self.rewrite_min_repeats, u64::MAX),
            ("rewrite_min_subtree_bytes", self.rewrite_min_subtree_bytes, u64::MAX),
            ("array_min_pushes_per_doc", self.array_min_pushes_per_doc, u64::MAX),
            ("array_max_elements", self.array_max_elements, u64::MAX),
            ("large_document_bytes", self.large_document_bytes, u64::MAX),
            ("large_document_high_bytes", self.large_document_high_bytes, u64::MAX),
            ("fan_out_min_runs", self.fan_out_min_runs, u64::MAX),
            ("fan_out_min_docs", self.fan_out_min_docs, u64::MAX),
            ("fan_out_high_docs", self.fan_out_high_docs, u64::MAX),
            ("bucket_min_inserts", self.bucket_min_inserts, u64::MAX),
            ("bucket_min_sources", self.bucket_min_sources, u64::MAX),
            ("bucket_min_per_source", self.bucket_min_per_source, u64::MAX),
            ("bucket_max_docs_per_insert", self.bucket_max_docs_per_insert, u64::MAX),
            ("hot_min_writes", self.hot_min_writes, u64::MAX),
            ("hot_min_connections", self.hot_min_connections, 1_000_000),
            ("ttl_min_runs", self.ttl_min_runs, u64::MAX),
            ("index_min_count", self.index_min_count, u64::MAX),
            ("index_in_max_points", self.index_in_max_points, 1_000_000),
            ("index_high_examined", self.index_high_examined, u64::MAX),
            ("unused_index_min_operations", self.unused_index_min_operations, u64::MAX),
            ("regex_min_count", self.regex_min_count, u64::MAX),
            ("unknown_field_min_documents", self.unknown_field_min_documents, u64::MAX),
            ("computed_min_runs", self.computed_min_runs, u64::MAX),
            ("outlier_min_arrays", self.outlier_min_arrays, u64::MAX),
            ("outlier_max_typical", self.outlier_max_typical, u64::MAX),
            ("outlier_min_length", self.outlier_min_length, u64::MAX),
            ("attribute_min_fields", self.attribute_min_fields, 1_000),
            ("shard_min_operations", self.shard_min_operations, u64::MAX),
            ("shard_min_distinct", self.shard_min_distinct, u64::MAX),
            ("drift_min_documents", self.drift_min_documents, u64::MAX),
            ("drift_min_values", self.drift_min_values, u64::MAX),
            ("validator_min_documents", self.validator_min_documents, u64::MAX),
            ("operation_gap_ms", self.operation_gap_ms, 3_600_000),
            ("relationship_min_operations", self.relationship_min_operations, u64::MAX),
            ("relationship_max_embedded", self.relationship_max_embedded, u64::MAX),
            ("relationship_squillions", self.relationship_squillions, u64::MAX),
            ("relationship_copy_fields", self.relationship_copy_fields, 64),
        ];
        for (k, v, most) in counts {
            if v == 0 || v > most {
                return Err(format!("{k} must be between 1 and {most}, not {v}"));
            }
        }
        Ok(())
    }

    /// The thresholds as TOML for the `[detectors]` table, each with its meaning and source.
    pub fn to_toml_comments(&self) -> String {
        let values = serde_json::to_value(self).expect("thresholds serialise");
        let mut s = format!("# finding kinds: {}\n[detectors]\n", super::KINDS.join(", "));
        for d in DOCS {
            s.push_str(&format!("# {}\n# source: {}\n{} = {}\n", d.meaning, d.source, d.key, values[d.key]));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_threshold_is_documented_in_order() {
        let values = serde_json::to_value(Thresholds::default()).unwrap();
        let keys: Vec<&str> = values.as_object().unwrap().keys().map(String::as_str).collect();
        let documented: Vec<&str> = DOCS.iter().map(|d| d.key).collect();
        assert_eq!(keys, documented);
    }

    #[test]
    fn nonsense_values_are_refused() {
        assert!(Thresholds::default().validate().is_ok());
        let bad = |t: Thresholds| t.validate().unwrap_err();
        assert!(bad(Thresholds { assumed_rtt_ms: f64::NAN, ..Default::default() }).contains("assumed_rtt_ms"));
        assert!(bad(Thresholds { n_plus_one_min_coverage: 1.5, ..Default::default() })
            .contains("between 0 and 1"));
        assert!(
            bad(Thresholds { redundant_gap_ms: u64::MAX, ..Default::default() }).contains("redundant_gap_ms")
        );
        assert!(bad(Thresholds { max_open_parents: 0, ..Default::default() }).contains("max_open_parents"));
    }

    #[test]
    fn partial_overrides_keep_the_other_defaults_and_typos_are_errors() {
        let t: Thresholds = serde_json::from_str(r#"{"n_plus_one_min_children": 3}"#).unwrap();
        assert_eq!(t.n_plus_one_min_children, 3);
        assert_eq!(t.lookup_min_count, Thresholds::default().lookup_min_count);
        assert!(serde_json::from_str::<Thresholds>(r#"{"n_plus_one_min_childs": 3}"#).is_err());
    }
}
