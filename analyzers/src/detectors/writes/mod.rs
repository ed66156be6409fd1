//! Writes and growth: the smells of over-embedding, seen on the write path.
//!
//! - [`rewrite`]: whole documents (or whole sub-trees) re-sent to change a little.
//! - [`array_growth`]: arrays that grow by `$push` without `$slice`.
//! - [`document_size`]: documents large enough to cost on every access.
//! - [`fan_out`]: one update rewriting a copied field in many documents, again and again.
//! - [`bucket`]: one small document per time-stamped reading.
//! - [`hot_document`]: one document taking most of its collection's writes, from many writers.
//! - [`outlier_candidate`]: an array small in almost every document and huge in a few.
//! - [`ttl_candidate`]: a scheduled purge by a moving date that a TTL index would do.

pub mod array_growth;
pub mod bucket;
pub mod document_size;
pub mod fan_out;
pub mod hot_document;
pub mod outlier_candidate;
pub mod rewrite;
pub mod ttl_candidate;
