//! Schema: what the documents of each collection hold (see [`crate::schema`]),
//! against what the queries ask of them.
//!
//! - [`unknown_field`]: a filter or sort on a field no document carries.

pub mod unknown_field;
