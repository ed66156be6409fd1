//! # mongotap-wire
//!
//! A sans-IO codec for the MongoDB wire protocol: no sockets, no runtime. It cuts
//! byte streams into frames using the 16-byte header alone, and decodes bodies
//! lazily as zero-copy [`bson::RawDocument`] views over the frame's refcounted
//! [`bytes::Bytes`]. Every length is checked against its limit before anything is
//! allocated or inflated.
//!
//! # Layout
//! - [`header`]: the standard header, [`OpCode`], the size limits.
//! - [`frame`]: [`Frame`] (one whole message) and [`Splitter`] (a stream cut into
//!   frames for the proxy's tap, bounded in memory).
//! - [`op`]: one module per opcode: [`op::msg`] (OP_MSG), [`op::compressed`]
//!   (OP_COMPRESSED), [`op::query`] (OP_QUERY), [`op::reply`] (OP_REPLY).
//! - [`message`]: [`Message`], any frame decoded, OP_COMPRESSED unwrapped.
//! - [`command`]: [`Command`] and [`CommandReply`], views that name the command,
//!   namespace and session, and say what must be redacted.
//! - [`doc`]: [`Document`], a checked BSON slice of a frame.
//! - [`element`]: a quick walk over a document's elements by their headers.
//! - [`hello`]: the member addresses of a `hello` reply, renamed (for a proxy in
//!   front of a replica set).
//! - [`error`]: [`WireError`], what was wrong and where.

pub mod command;
pub mod doc;
pub mod element;
pub mod error;
pub mod frame;
pub mod header;
pub mod hello;
pub mod message;
pub mod op;

pub use command::{Command, CommandReply, ReplySummary};
pub use doc::Document;
pub use error::{Result, WireError};
pub use frame::{Frame, Split, Splitter};
pub use header::{MsgHeader, OpCode, RequestId, HEADER_LEN, MAX_DOCUMENT_SIZE, MAX_MESSAGE_SIZE};
pub use message::{Message, Op};
pub use op::compressed::{Compressor, OpCompressed};
pub use op::msg::{DocumentSequence, MsgFlags, OpMsg, Section};
pub use op::query::OpQuery;
pub use op::reply::OpReply;
