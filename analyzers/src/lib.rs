//! # mongotap-analyzers
//!
//! Everything mongotap learns from traffic, with no knowledge of sockets: tap
//! events go in, operations come out of the correlator, and the analyzers build
//! the access-pattern table and the reports from them.
//!
//! # Layout
//! - [`event`]: what the analysis is fed ([`event::TapEvent`]) and its clock.
//! - [`exchange`]: pairing requests with replies ([`exchange::Correlator`]).
//! - [`operation`]: the operation event every analyzer consumes.
//! - [`namespace`]: system namespaces, and the epochs drops and renames start.
//! - [`values`]: values as analyzers may keep them (keyed hashes), and where they sit;
//!   `names`: field paths interned.
//! - [`view`]: an operation decoded once ([`view::OpView`]), for the table and every detector.
//! - [`shape`]: query shapes in `$queryStats`' placeholder language (the writer, the
//!   operators, each command's parts).
//! - [`statements`]: the write statements of any write command, and what its reply says they did.
//! - [`table`]: the access-pattern frequency table.
//! - [`schema`]: what each collection's documents look like: fields, types, arrays.
//! - [`sharding`]: shard-key candidates, from the table's shapes and the inserted values.
//! - [`sketch`]: bounded summaries of values (distinct counts, the most common).
//! - [`finding`]: a finding, as detectors make it and reports render it.
//! - [`detectors`]: the schema smells (N+1, redundant queries, `$lookup` chains, ...).
//! - [`workload`]: the application's operations and the relationships between its
//!   collections, in the seeds' own terms.
//! - [`pipeline`]: events in, operations out to the table, the detectors and the workload.
//! - [`report`]: the report (JSON contract, Markdown, HTML) and the CI gate.
//! - [`script`]: scripted conversations for tests and benchmarks.

pub mod detectors;
pub use mongotap_events as event;
pub mod exchange;
pub mod finding;
pub(crate) mod names;
pub mod namespace;
pub mod operation;
pub mod pipeline;
pub mod report;
pub mod schema;
pub mod script;
pub mod shape;
pub mod sharding;
pub mod sketch;
pub mod statements;
pub mod table;
pub mod values;
pub mod view;
pub mod workload;
