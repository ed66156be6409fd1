//! Writes and growth: the smells of over-embedding, seen on the write path.
//!
//! - [`rewrite`]: whole documents (or whole sub-trees) re-sent to change a little.
//! - [`array_growth`]: arrays that grow by `$push` without `$slice`.
//! - [`document_size`]: documents large enough to cost on every access.
//! - [`fan_out`]: one update rewriting a copied field in many documents, again and again.
//! - [`bucket`]: one small document per time-stamped reading.

pub mod array_growth;
pub mod bucket;
pub mod document_size;
pub mod fan_out;
pub mod rewrite;
