//! The trace file format, version 1 (documented in docs/capture-and-offline.md, "Trace files").
//!
//! A trace is a sequence of zstd frames (so `zstd -dc` reads it whole); each frame
//! holds whole records, and is written at once, so a crash loses at most the frame
//! being filled and leaves every earlier one readable. Decompressed:
//!
//! ```text
//! "MONGOTAP-TRACE\n"             magic, 15 bytes
//! u32 n, n bytes of JSON          the header (Header)
//! record*                         u32 n, then n bytes: u8 kind, fields (little-endian)
//! ```
//!
//! | kind | record | fields |
//! |---|---|---|
//! | 1 | opened | conn u64, at u64, client (u16 n, n bytes UTF-8) |
//! | 2 | message | conn u64, at u64, dir u8, redacted u8, wire_len u32, compressor u8, message bytes |
//! | 3 | too large | conn u64, at u64, dir u8, header 16 bytes |
//! | 4 | unframeable | conn u64, at u64, dir u8, reason (rest, UTF-8) |
//! | 5 | closed | conn u64, at u64 |
//! | 6 | gap | at u64, dropped u64, n u32, n × (conn u64, events u64, closed u8) |
//!
//! `at` is microseconds since the Unix epoch; `dir` 0 is client to server, 1 server
//! to client. A message with `redacted` 1 holds the message as [`crate::redact`]
//! left it (values replaced, or an auth message reduced to its name), uncompressed;
//! `wire_len` and `compressor` (255: none) say what it was on the wire. With
//! `redacted` 0 it holds the bytes as forwarded (raw traces).

use serde::{Deserialize, Serialize};

/// The first bytes of a decompressed trace.
pub const MAGIC: &[u8; 15] = b"MONGOTAP-TRACE\n";

/// The format version this code writes and reads.
pub const VERSION: u32 = 1;

/// zstd's frame magic number, as the file starts.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Record kinds.
pub mod kind {
    /// A client connected.
    pub const OPENED: u8 = 1;
    /// A whole message.
    pub const MESSAGE: u8 = 2;
    /// A message too large to keep: its header.
    pub const TOO_LARGE: u8 = 3;
    /// The stream could not be framed any more, or a message could not be redacted.
    pub const UNFRAMEABLE: u8 = 4;
    /// The connection ended.
    pub const CLOSED: u8 = 5;
    /// Events were dropped before the next record.
    pub const GAP: u8 = 6;
}

/// The compressor byte of a message that was not compressed.
pub const NO_COMPRESSOR: u8 = 255;

/// What a trace says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always "mongotap-trace".
    pub format: String,
    /// The format version.
    pub version: u32,
    /// The mongotap that wrote it.
    pub mongotap: String,
    /// When the trace (its first file) started, microseconds since the Unix epoch.
    pub started_at: u64,
    /// The upstream the proxy forwarded to.
    pub upstream: String,
    /// "redacted" (values replaced by keyed hashes) or "raw" (`--capture-values`).
    pub redaction: String,
    /// A random id shared by the files of one rotated trace.
    pub trace_id: String,
    /// The file's number within the trace, from 0.
    pub part: u32,
}

impl Header {
    /// Whether its messages hold the values as they were.
    pub fn is_raw(&self) -> bool {
        self.redaction == "raw"
    }
}
