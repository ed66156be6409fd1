//! Schema: what the documents of each collection hold (see [`crate::schema`]),
//! against what the queries ask of them.
//!
//! - [`unknown_field`]: a filter or sort on a field no document carries.
//! - [`schema_drift`]: a field holding values of several types.

pub mod schema_drift;
pub mod unknown_field;
