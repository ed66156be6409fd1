//! # mongotap-trace
//!
//! Trace files: every message of every connection, with its time, direction and
//! connection, in a streaming, zstd-compressed, append-only format
//! ([`format`]), redacted by default ([`redact`]), written by [`writer`] and read
//! back into the same tap events the live proxy produces by [`reader`], so an
//! offline analysis runs the very pipeline the live one does.

pub mod format;
pub mod reader;
pub mod redact;
pub mod writer;

pub use format::Header;
pub use reader::{looks_like_trace, TraceReader};
pub use redact::{Redacted, Redactor};
pub use writer::{part_path, TraceOptions, TraceStats, TraceWriter};
