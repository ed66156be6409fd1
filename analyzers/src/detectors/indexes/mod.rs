//! Indexes: what each query needs by the Equality-Sort-Range rule, the indexes that
//! exist, and the advice that joins them.
//!
//! - [`esr`]: what a query needs from an index, by the Equality-Sort-Range rule.
//! - [`spec`]: an index as `listIndexes` describes it.
//! - [`catalog`]: the indexes that exist, over time, and where that knowledge came from.
//! - [`fit`]: how well an index serves a query's needs.
//! - [`advisor`]: the detector: each shape's needs and executions, judged when they ran.
//! - [`missing`]: `missing_index`, one key per unserved need, merged.
//! - [`unneeded`]: `redundant_index` and `unused_index`.
//! - [`inefficient_regex`]: frequent regexes no index can seek (unanchored, case-insensitive).

pub mod advisor;
pub mod catalog;
pub mod esr;
pub mod fit;
pub mod inefficient_regex;
pub mod missing;
pub mod spec;
pub mod unneeded;
