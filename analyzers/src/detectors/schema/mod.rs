//! Schema: what the documents of each collection hold (see [`crate::schema`]),
//! against what the queries ask of them.
//!
//! - [`unknown_field`]: a filter or sort on a field no document carries.
//! - [`schema_drift`]: a field holding values of several types.
//! - [`attribute_candidate`]: many sparse sibling fields, each queried (and indexed) on its own.

pub mod attribute_candidate;
pub mod schema_drift;
pub mod unknown_field;
