//! The codec's one error type. Every variant says what was wrong and where, so a
//! parse failure in the logs points at the byte that caused it.

use std::fmt;

/// Why a frame could not be framed, decoded or decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The header's `messageLength` is below the 16-byte header or above the limit.
    BadLength { declared: i64, limit: usize },
    /// A length inside the body points past the end of the message (or is negative).
    Truncated { op_code: i32, offset: usize, needed: usize, available: usize },
    /// OP_MSG carried flag bits the protocol reserves (the server rejects them too).
    UnknownFlags { bits: u32 },
    /// OP_MSG carried a section kind other than 0 (body) or 1 (document sequence).
    UnknownSectionKind { kind: u8, offset: usize },
    /// OP_MSG must carry exactly one kind 0 body; `found` were present.
    BodyCount { found: usize },
    /// The CRC-32C checksum at the end of an OP_MSG did not match its bytes.
    ChecksumMismatch { expected: u32, computed: u32 },
    /// A BSON document's own length or terminator is wrong.
    BadDocument { op_code: i32, offset: usize, reason: &'static str },
    /// A C string (collection name, sequence identifier) had no NUL or was not UTF-8.
    BadCString { op_code: i32, offset: usize },
    /// OP_COMPRESSED named a compressor id this codec does not know.
    UnknownCompressor { id: u8 },
    /// OP_COMPRESSED declared an `uncompressedSize` that is negative or above the limit.
    BadUncompressedSize { declared: i64, limit: usize },
    /// The payload did not inflate to exactly the declared size (bomb, truncation, or corruption).
    Decompress { compressor: &'static str, reason: String },
    /// OP_COMPRESSED wrapped another OP_COMPRESSED, which the protocol forbids.
    NestedCompression,
    /// The bytes handed to a decoder were not one whole message.
    FrameMismatch { declared: usize, available: usize },
    /// A failure read back from a trace file, as it was written then.
    Recorded(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use WireError::*;
        match self {
            BadLength { declared, limit } => {
                write!(f, "messageLength {declared} is outside 16..={limit}")
            }
            Truncated { op_code, offset, needed, available } => write!(
                f,
                "opcode {op_code}: {needed} bytes needed at offset {offset}, only {available} available"
            ),
            UnknownFlags { bits } => write!(f, "OP_MSG has reserved flag bits set: {bits:#010x}"),
            UnknownSectionKind { kind, offset } => {
                write!(f, "OP_MSG section kind {kind} at offset {offset} is unknown")
            }
            BodyCount { found } => write!(f, "OP_MSG must have exactly one body section, found {found}"),
            ChecksumMismatch { expected, computed } => write!(
                f,
                "OP_MSG checksum mismatch: message says {expected:#010x}, bytes give {computed:#010x}"
            ),
            BadDocument { op_code, offset, reason } => {
                write!(f, "opcode {op_code}: bad BSON document at offset {offset}: {reason}")
            }
            BadCString { op_code, offset } => {
                write!(f, "opcode {op_code}: unterminated or non-UTF-8 C string at offset {offset}")
            }
            UnknownCompressor { id } => write!(f, "OP_COMPRESSED compressor id {id} is unknown"),
            BadUncompressedSize { declared, limit } => {
                write!(f, "OP_COMPRESSED uncompressedSize {declared} is outside 0..={limit}")
            }
            Decompress { compressor, reason } => write!(f, "{compressor} decompression failed: {reason}"),
            NestedCompression => write!(f, "OP_COMPRESSED may not wrap another OP_COMPRESSED"),
            FrameMismatch { declared, available } => {
                write!(f, "frame declares {declared} bytes but {available} were given")
            }
            Recorded(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for WireError {}

/// The codec's result type.
pub type Result<T> = std::result::Result<T, WireError>;
