//! Indexes: what each query needs by the Equality-Sort-Range rule, the indexes that
//! exist, and the advice that joins them.
//!
//! - [`esr`]: what a query needs from an index, by the Equality-Sort-Range rule.
//! - [`catalog`]: the indexes that exist, and where that knowledge came from.
//! - [`fit`]: how well an index serves a query's needs.
//! - [`advisor`]: missing, redundant and unused indexes.

pub mod advisor;
pub mod catalog;
pub mod esr;
pub mod fit;
