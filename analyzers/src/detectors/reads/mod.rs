//! Reads and joins: the smells of over-referencing, seen on the read path.
//!
//! - [`n_plus_one`]: a read returns N documents, then one query per document.
//! - [`redundant_query`]: the same read with the same values again and again.
//! - [`lookup_chain`]: frequent aggregations that join collections with `$lookup`.
//! - [`over_fetch`]: frequent reads of whole documents that are mostly one large field.
//! - [`computed_candidate`]: the same summary recomputed on every read, its inputs rarely written.

pub mod computed_candidate;
pub mod lookup_chain;
pub mod n_plus_one;
pub mod over_fetch;
pub mod redundant_query;
