//! What each threshold decides and where its default comes from (prior art, the
//! manual, the seeds, or "ours" with the reason): the table `mongotap detectors`
//! prints and `docs/thresholds.md` mirrors, in the order of [`super::Thresholds`].

/// One threshold as users read it: key, meaning, and where its default comes from.
#[derive(Debug, Clone, Copy)]
pub struct ThresholdDoc {
    /// The key in `[detectors]`.
    pub key: &'static str,
    /// What it decides.
    pub meaning: &'static str,
    /// Where the default comes from, or why it is ours.
    pub source: &'static str,
}

/// The sources of every threshold, in the order of the struct.
pub const DOCS: &[ThresholdDoc] = &[
    ThresholdDoc {
        key: "assumed_rtt_ms",
        meaning: "production round trip used to price extra round trips",
        source: "a same-region application server to its database; set it to yours (staging answers locally, so its own times hide the cost)",
    },
    ThresholdDoc {
        key: "n_plus_one_min_parent_docs",
        meaning: "documents a parent read must return to start an N+1",
        source: "Bullet and nplusone: only multi-document results start an N+1; single loads never do",
    },
    ThresholdDoc {
        key: "n_plus_one_min_children",
        meaning: "distinct linked child queries per parent occurrence",
        source: "Sentry's N+1 detector fires at 5 repeated spans; perf-sentinel wants 5 occurrences with 5 distinct parameter sets",
    },
    ThresholdDoc {
        key: "n_plus_one_min_coverage",
        meaning: "share of the parent's distinct values (at the link path) the children asked for",
        source: "ours: APM tools see the loop, we see values; a loop over the page dereferences most of them",
    },
    ThresholdDoc {
        key: "n_plus_one_min_explained",
        meaning: "share of the client's reads of the child shape during the burst whose value came from the parent",
        source: "ours: keeps concurrent, unrelated reads of the same shape out (Sentry's misses with interleaved and concurrent spans, getsentry/sentry#93090, PR #49805)",
    },
    ThresholdDoc {
        key: "n_plus_one_max_per_reference",
        meaning: "child queries per reference (a value at the link path, repeats counted) in the parent, at most",
        source: "ours: an N+1 sends one query per reference (fewer with an ODM's identity map); far more means another loop asks for values that merely coincide",
    },
    ThresholdDoc {
        key: "n_plus_one_min_recurrence",
        meaning: "share of the parent shape's examined reads that showed the pattern, at least",
        source: "ours: a loop that loads children one at a time does so on every render of its page, while concurrent reads of the same ids line up with a page only now and then (one page read in 53, in the N11 scenario)",
    },
    ThresholdDoc {
        key: "n_plus_one_link_gap_ms",
        meaning: "a parent read stays open while its children come at most this far apart",
        source: "perf-sentinel groups an N+1 within 500 ms; doubled and sliding, for staging clients that are scripts",
    },
    ThresholdDoc {
        key: "n_plus_one_high_children",
        meaning: "a typical N at or above this is high severity",
        source: "perf-sentinel: 10 or more is critical",
    },
    ThresholdDoc {
        key: "n_plus_one_high_cost_ms",
        meaning: "extra round trips per parent costing this much at assumed_rtt_ms are high severity",
        source: "Sentry's N+1 minimum total duration (50 ms), applied to the estimated production cost, not to staging time",
    },
    ThresholdDoc {
        key: "redundant_window",
        meaning: "a client's last reads of one shape looked at together; a shape is reported once twice this many of its reads were redundant",
        source: "ours: room for Sentry's 5 repeats three times over",
    },
    ThresholdDoc {
        key: "redundant_max_distinct",
        meaning: "at most this many distinct values in that window makes the reads redundant",
        source: "ours: three in four reads repeat an earlier one (perf-sentinel calls repeated identical parameters redundant, not N+1)",
    },
    ThresholdDoc {
        key: "redundant_gap_ms",
        meaning: "redundant reads come at most this far apart",
        source: "perf-sentinel's 500 ms window",
    },
    ThresholdDoc {
        key: "lookup_min_count",
        meaning: "an aggregation with $lookup must run at least this often",
        source: "ours: Compass flags every $lookup and Atlas publishes no threshold; a report run a few times is not an access pattern",
    },
    ThresholdDoc {
        key: "lookup_min_share",
        meaning: "and be at least this share of its application's reads",
        source: "ours: Atlas's PERCENT_QUERIES_USE_LOOKUP trigger, threshold not published",
    },
    ThresholdDoc {
        key: "lookup_chain_min_joins",
        meaning: "joining at least this many collections makes it a chain (higher severity)",
        source: "the seed: 'several $lookup joins to assemble one screen' is over-referencing",
    },
    ThresholdDoc {
        key: "lookup_high_share",
        meaning: "this share of the application's reads raises the severity",
        source: "ours: a page among the top ~20 operations",
    },
    ThresholdDoc {
        key: "lookup_high_time_share",
        meaning: "this share of the application's read time raises the severity",
        source: "ours: a quarter of the time the application waits on reads",
    },
    ThresholdDoc {
        key: "rewrite_min_count",
        meaning: "whole rewrites (replacements, whole-document or whole-sub-tree $set) of one write shape before it is a finding",
        source: "Sentry's 5 repeats; no tool detects rewrites (DETECTORS.md)",
    },
    ThresholdDoc {
        key: "rewrite_min_repeats",
        meaning: "of which rewrites of a document already rewritten or read: documents written once are not rewritten",
        source: "ours: the seeds' negative, whole documents inserted once and never rewritten",
    },
    ThresholdDoc {
        key: "rewrite_max_changed_share",
        meaning: "the typical rewrite changes at most this share of the fields (more, and a replacement is fair)",
        source: "ours: the issue's 'a small fraction of fields change'",
    },
    ThresholdDoc {
        key: "rewrite_whole_set_share",
        meaning: "a $set naming this share of a document's known fields rewrites it whole",
        source: "ours: 'a $set that covers (almost) every field'",
    },
    ThresholdDoc {
        key: "rewrite_min_subtree_bytes",
        meaning: "a $set of an array or sub-document this large re-sends a sub-tree",
        source: "ours: larger than a few small fields; mongoengine sends a whole ListField this way on every save",
    },
    ThresholdDoc {
        key: "array_min_pushes_per_doc",
        meaning: "pushes (without $slice) to one document's array in the run",
        source: "ours: a tenth of Compass's 250 elements, seen growing",
    },
    ThresholdDoc {
        key: "array_max_elements",
        meaning: "an array this long is too long (high severity)",
        source: "Compass's unbounded-array insight: 250 elements",
    },
    ThresholdDoc {
        key: "array_high_days_to_limit",
        meaning: "reaching 16 MiB within this many days at the observed rate is high severity",
        source: "ours: the 16 MiB document limit against the observed growth",
    },
    ThresholdDoc {
        key: "large_document_bytes",
        meaning: "a document this large (bytes), read or written, is a finding",
        source: "ours: 'performance suffers long before' 16 MB (the seed); every access moves it whole",
    },
    ThresholdDoc {
        key: "large_document_high_bytes",
        meaning: "this large is high severity",
        source: "Compass's bloated-document insight: 10,000,000 bytes",
    },
    ThresholdDoc {
        key: "fan_out_min_runs",
        meaning: "runs of one multi-document update of a copied field before it is a finding",
        source: "ours: a single updateMany run once is a migration",
    },
    ThresholdDoc {
        key: "fan_out_min_docs",
        meaning: "documents changed per run, on average",
        source: "ours: the seed's 'a single field change requires updating many documents'",
    },
    ThresholdDoc {
        key: "fan_out_high_docs",
        meaning: "this many documents per run is high severity",
        source: "ours",
    },
    ThresholdDoc {
        key: "bucket_min_inserts",
        meaning: "small inserts of time-stamped documents into one collection before it is a finding",
        source: "ours: a stream, not a handful",
    },
    ThresholdDoc {
        key: "bucket_min_sources",
        meaning: "distinct values of the source field among them",
        source: "ours: a category with three values is not a source",
    },
    ThresholdDoc {
        key: "bucket_min_per_source",
        meaning: "documents per source, on average",
        source: "ours: the seed's one document per sensor per hour (and time-series collections) pays off from a few dozen readings",
    },
    ThresholdDoc {
        key: "bucket_max_docs_per_insert",
        meaning: "an insert of at most this many documents is a small one",
        source: "ours",
    },
    ThresholdDoc {
        key: "hot_min_writes",
        meaning: "updates of one document (by _id, setting or incrementing fields) before it is a finding",
        source: "ours: a hundred writes of one counter in the window, not a handful of settings changes",
    },
    ThresholdDoc {
        key: "hot_min_share",
        meaning: "that document's share of all writes to its collection",
        source: "ours: most of the collection's writes land on one document",
    },
    ThresholdDoc {
        key: "hot_min_connections",
        meaning: "connections writing that document",
        source: "MongoDB manual, FAQ: Concurrency: WiredTiger lets writers change different documents at once, not one; a single writer waits for no one",
    },
    ThresholdDoc {
        key: "ttl_min_runs",
        meaning: "runs of one deleteMany by a date older than a moving limit before it is a finding",
        source: "ours: one or two purges are a cleanup; three at a steady age are a schedule, which a TTL index replaces (MongoDB manual, TTL Indexes)",
    },
    ThresholdDoc {
        key: "ttl_max_age_spread",
        meaning: "the runs' ages (run time less the date limit) agree within this share of their median (or 60 s)",
        source: "ours: a job computing now - N days sends the same age each time, to the second; a person typing dates does not",
    },
    ThresholdDoc {
        key: "over_fetch_min_reads",
        meaning: "reads of one shape without a projection before it is a finding",
        source: "ours: as for $lookup, a read run a few times is not a page",
    },
    ThresholdDoc {
        key: "over_fetch_min_doc_bytes",
        meaning: "their documents' mean size (bytes)",
        source: "ours: a few kilobytes, where a projection starts to matter",
    },
    ThresholdDoc {
        key: "over_fetch_min_field_share",
        meaning: "one field (an embedded array or sub-document) makes at least this share of them",
        source: "the seed: a page that shows a name and a price still pulls the whole reviews array",
    },
    ThresholdDoc {
        key: "index_min_count",
        meaning: "executions of the query shapes an index would serve before it is recommended",
        source: "ours, as Sentry's 5 repeats: a query run a handful of times is a page, a one-off is not (Atlas asks 60 s of slow queries a day)",
    },
    ThresholdDoc {
        key: "index_in_max_points",
        meaning: "a sorted $in with more values than this is a range in the ESR order, not an equality",
        source: "MongoDB's planner merges at most internalQueryMaxScansToExplode (200) point scans to keep a sort (the ESR guide)",
    },
    ThresholdDoc {
        key: "index_high_share",
        meaning: "shapes that are this share of all reads and writes make a missing index high severity",
        source: "ours: a page among the top ~20 operations, as for $lookup",
    },
    ThresholdDoc {
        key: "index_high_examined",
        meaning: "with --explain: documents (or keys) examined beyond those returned, per query, that make a missing index high severity",
        source: "Atlas Performance Advisor suggests an index when docsExamined - nReturned > 500",
    },
    ThresholdDoc {
        key: "unused_index_min_operations",
        meaning: "operations on a collection before one of its indexes may be called unused (low severity, with the window)",
        source: "ours: Atlas calls an index unused after 7 days without use; mongotap says how long it watched",
    },
    ThresholdDoc {
        key: "regex_min_count",
        meaning: "reads matching one field with an unanchored or case-insensitive regex before it is a finding",
        source: "ours, as index_min_count (a handful of runs is a page); the rule itself is the manual's ($regex, Index Use: only a case-sensitive prefix expression uses an index range)",
    },
    ThresholdDoc {
        key: "unknown_field_min_documents",
        meaning: "documents of a collection seen whole (written, or returned without a projection) before a queried field none of them carries is called unknown",
        source: "ours: twenty documents, none with the field, and no query on it that returned a document (Compass samples 1,000 documents for its schema view; mongotap walks every document it sees until 256, then one in 16)",
    },
    ThresholdDoc {
        key: "computed_min_runs",
        meaning: "runs of one summarising read (an aggregation with $group/$count/$bucket, a filtered count, a distinct) before it is a finding",
        source: "ours, twice lookup_min_count: a summary run a handful of times is a report, twenty times a page that recomputes it",
    },
    ThresholdDoc {
        key: "computed_min_runs_per_write",
        meaning: "runs per write operation (a bulk insert is one) on the collections it reads, in the same window, at least",
        source: "MongoDB's pattern catalogue (Building with Patterns: the Computed Pattern) applies it where reads far outnumber writes; ours: an order of magnitude",
    },
    ThresholdDoc {
        key: "computed_high_runs_per_write",
        meaning: "runs per write from which the finding is medium severity",
        source: "ours: two orders of magnitude, the catalogue's example ratio being a thousand reads per write",
    },
    ThresholdDoc {
        key: "outlier_min_arrays",
        meaning: "arrays of one field seen (in documents written or read whole) before their lengths are judged",
        source: "ours: fifty documents give a typical length; fewer give anecdotes",
    },
    ThresholdDoc {
        key: "outlier_max_typical",
        meaning: "the typical (p50) array holds at most this many elements (in doubling buckets: 100 admits p50 up to 63)",
        source: "ours: a hundred elements sit comfortably in a document; past that the whole array is the question (unbounded_array_growth)",
    },
    ThresholdDoc {
        key: "outlier_min_length",
        meaning: "an outlier array holds at least this many elements, and ten times the typical length",
        source: "MongoDB's pattern catalogue (Building with Patterns: the Outlier Pattern): its book keeps up to 1,000 buyers in the document and overflows past that",
    },
    ThresholdDoc {
        key: "outlier_max_share",
        meaning: "outliers are at most this share of the field's arrays",
        source: "ours: one document in twenty at most; more, and the large case is the normal one",
    },
    ThresholdDoc {
        key: "attribute_min_fields",
        meaning: "sibling fields under one parent, each asked by a read shape run index_min_count times or more, before they are attributes",
        source: "ours: the pattern catalogue's products carry many specs; four separately indexed ones are where one {k, v} index starts to pay",
    },
    ThresholdDoc {
        key: "attribute_max_presence",
        meaning: "each of those fields is in at most this share of the collection's documents seen (attributes are sparse; an address's fields are in every document)",
        source: "MongoDB's pattern catalogue (Building with Patterns: the Attribute Pattern): fields that only a subset of documents share",
    },
    ThresholdDoc {
        key: "shard_min_operations",
        meaning: "reads and write statements of a collection before its shard-key candidates are ranked",
        source: "ours: a hundred operations show a collection's main queries",
    },
    ThresholdDoc {
        key: "shard_min_distinct",
        meaning: "a candidate's first field with fewer distinct values among the inserted documents, each repeated ten times or more on average, is low cardinality (exact up to 128 values, then within about 6.5%)",
        source: "the manual (Choose a Shard Key, cardinality): a key's distinct values cap its chunks; ours: a hundred",
    },
    ThresholdDoc {
        key: "shard_max_common_share",
        meaning: "one value holding more than this share of the inserted documents makes a jumbo chunk",
        source: "analyzeShardKey reports the most common values' frequencies for this reason; ours: a quarter",
    },
    ThresholdDoc {
        key: "shard_monotonic_share",
        meaning: "this share of consecutive inserts (over at least 20) with a rising (or falling) value is monotonic: a hot shard when ranged",
        source: "analyzeShardKey's monotonicity (the manual: a monotonically changing key sends all inserts to one shard); ours: nine in ten",
    },
    ThresholdDoc {
        key: "shard_min_single_reads",
        meaning: "the best candidate is recommended when at least this share of the collection's reads would go to one shard; below, scatter-gather is said plainly",
        source: "ours: most reads",
    },
    ThresholdDoc {
        key: "drift_min_documents",
        meaning: "documents of a collection seen whole (written, or returned without a projection) since it was last created, dropped or emptied, before its fields' types are judged",
        source: "ours, as unknown_field_min_documents: a test case's handful of documents is no collection's schema (Compass samples 1,000)",
    },
    ThresholdDoc {
        key: "drift_min_values",
        meaning: "values of a field's rarer types (int, long and double are one type, null is none) before the field is a drift",
        source: "ours: Compass lists every type a field holds with its share; two values keep one odd document, perhaps a test's, out of the findings",
    },
    ThresholdDoc {
        key: "validator_min_documents",
        meaning: "documents written (inserted or replaced) since the collection was last created, dropped or emptied, before the schemas section infers a $jsonSchema validator",
        source: "ours: fifty written documents show the fields a model always writes; the guides' validator (required, bsonType, maxItems) with validationLevel \"moderate\"",
    },
    ThresholdDoc {
        key: "operation_gap_ms",
        meaning: "a unit of work's next request comes at most this long after its last reply; longer, and it is another operation (values linking the steps and transactions win over it)",
        source: "ours: a request handler sends its queries back to back (a local server answers in well under a millisecond); a user's next request comes after more",
    },
    ThresholdDoc {
        key: "operation_very_high_share",
        meaning: "an operation that is this share of all operations has frequency \"very high\"",
        source: "ours: the seed's table rates its top operation very high; a quarter of the traffic is that",
    },
    ThresholdDoc {
        key: "operation_high_share",
        meaning: "this share is \"high\"",
        source: "ours: one operation in ten",
    },
    ThresholdDoc {
        key: "operation_medium_share",
        meaning: "this share is \"medium\" (below it: \"low\")",
        source: "ours: the index advisor's page among the top ~50 operations",
    },
    ThresholdDoc {
        key: "relationship_min_operations",
        meaning: "operations (or $lookup runs) that followed a link before the relationship gets a verdict",
        source: "ours: as lookup_min_count, a link followed a few times is not a pattern",
    },
    ThresholdDoc {
        key: "relationship_read_together",
        meaning: "read together in at least this share of the operations that read the parent",
        source: "the seeds: embed when the parent is 'read together, almost every time' with the child",
    },
    ThresholdDoc {
        key: "relationship_max_embedded",
        meaning: "at most this many children per parent (largest seen) can be embedded",
        source: "the seeds' one-to-few ('a handful, or a known small ceiling'); Compass's unbounded-array insight is at 250, a fifth of it leaves room to grow",
    },
    ThresholdDoc {
        key: "relationship_squillions",
        meaning: "this many children per parent is one-to-squillions: the child keeps the parent's id, the parent nothing",
        source: "the seeds: 'a sensor and millions of readings'; four times Compass's 250 elements",
    },
    ThresholdDoc {
        key: "relationship_rare_writes",
        meaning: "at most this many writes to the child per read of it through the link makes copying its fields cheap (an extended reference)",
        source: "the seeds: copy 'a few rarely changing fields'; one write in twenty reads",
    },
    ThresholdDoc {
        key: "relationship_copy_fields",
        meaning: "at most this many of the child's fields are copied in an extended reference (more, and the reference stays)",
        source: "the seeds: 'embed only the small, genuinely-needed subset of fields the read path actually displays'",
    },
    ThresholdDoc {
        key: "max_clients",
        meaning: "clients followed at once; the least recently active is evicted and counted",
        source: "bound on memory",
    },
    ThresholdDoc {
        key: "max_open_parents",
        meaning: "parent reads open at once per client (those without children go first)",
        source: "bound on memory",
    },
    ThresholdDoc {
        key: "max_values_per_parent",
        meaning: "(value, path) pairs kept per parent read",
        source: "bound on memory",
    },
    ThresholdDoc {
        key: "max_documents",
        meaning: "documents remembered for rewrites and array growth (keyed hashes of their fields, their pushes); the least recently used go first",
        source: "bound on memory",
    },
    ThresholdDoc {
        key: "max_values_open",
        meaning: "(value, path) pairs kept in all open parent reads together; the oldest parents go first",
        source: "bound on memory (about 40 MB)",
    },
    ThresholdDoc {
        key: "max_patterns",
        meaning: "distinct N+1 patterns and repeated-read keys kept",
        source: "bound on memory (Hibernate caps query statistics at 5,000)",
    },
];
