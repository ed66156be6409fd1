//! The 16-byte standard message header and the opcodes it names.

use bytes::BufMut;

/// Bytes in the standard header: messageLength, requestID, responseTo, opCode.
pub const HEADER_LEN: usize = 16;

/// `maxMessageSizeBytes`: the largest message a server accepts or sends.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;

/// `maxBsonObjectSize`, plus the 64 KiB the server allows itself on replies.
pub const MAX_DOCUMENT_SIZE: usize = 16 * 1024 * 1024 + 64 * 1024;

/// A request's identifier; a reply's `responseTo` names its request's `requestID`.
pub type RequestId = i32;

/// The opcodes of the wire protocol, current and legacy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpCode {
    /// OP_REPLY (1): reply to OP_QUERY (the legacy handshake).
    Reply,
    /// OP_UPDATE (2001), removed in 6.0.
    Update,
    /// OP_INSERT (2002), removed in 6.0.
    Insert,
    /// OP_QUERY (2004): the legacy handshake and old drivers' commands.
    Query,
    /// OP_GET_MORE (2005), removed in 6.0.
    GetMore,
    /// OP_DELETE (2006), removed in 6.0.
    Delete,
    /// OP_KILL_CURSORS (2007), removed in 6.0.
    KillCursors,
    /// OP_COMMAND (2010), removed in 4.2.
    Command,
    /// OP_COMMANDREPLY (2011), removed in 4.2.
    CommandReply,
    /// OP_COMPRESSED (2012): another message, compressed.
    Compressed,
    /// OP_MSG (2013): every command since 3.6.
    Msg,
    /// Anything else: passed through and counted, never decoded.
    Unknown(i32),
}

impl OpCode {
    /// The opcode for a raw header value.
    pub fn from_i32(v: i32) -> OpCode {
        match v {
            1 => OpCode::Reply,
            2001 => OpCode::Update,
            2002 => OpCode::Insert,
            2004 => OpCode::Query,
            2005 => OpCode::GetMore,
            2006 => OpCode::Delete,
            2007 => OpCode::KillCursors,
            2010 => OpCode::Command,
            2011 => OpCode::CommandReply,
            2012 => OpCode::Compressed,
            2013 => OpCode::Msg,
            other => OpCode::Unknown(other),
        }
    }

    /// The raw header value.
    pub fn as_i32(self) -> i32 {
        match self {
            OpCode::Reply => 1,
            OpCode::Update => 2001,
            OpCode::Insert => 2002,
            OpCode::Query => 2004,
            OpCode::GetMore => 2005,
            OpCode::Delete => 2006,
            OpCode::KillCursors => 2007,
            OpCode::Command => 2010,
            OpCode::CommandReply => 2011,
            OpCode::Compressed => 2012,
            OpCode::Msg => 2013,
            OpCode::Unknown(v) => v,
        }
    }

    /// The spec's name, for logs and counters.
    pub fn name(self) -> &'static str {
        match self {
            OpCode::Reply => "OP_REPLY",
            OpCode::Update => "OP_UPDATE",
            OpCode::Insert => "OP_INSERT",
            OpCode::Query => "OP_QUERY",
            OpCode::GetMore => "OP_GET_MORE",
            OpCode::Delete => "OP_DELETE",
            OpCode::KillCursors => "OP_KILL_CURSORS",
            OpCode::Command => "OP_COMMAND",
            OpCode::CommandReply => "OP_COMMANDREPLY",
            OpCode::Compressed => "OP_COMPRESSED",
            OpCode::Msg => "OP_MSG",
            OpCode::Unknown(_) => "unknown",
        }
    }
}

/// The standard message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// Total message size in bytes, header included.
    pub message_length: i32,
    /// Identifier the sender chose for this message.
    pub request_id: RequestId,
    /// For replies: the `requestID` being answered.
    pub response_to: RequestId,
    /// What the body is.
    pub op_code: OpCode,
}

impl MsgHeader {
    /// Reads a header from the first 16 bytes of `buf`, or `None` if fewer are there.
    /// It does not judge the length: see [`crate::frame::frame_length`].
    pub fn peek(buf: &[u8]) -> Option<MsgHeader> {
        let b: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
        let word = |i: usize| i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(MsgHeader {
            message_length: word(0),
            request_id: word(4),
            response_to: word(8),
            op_code: OpCode::from_i32(word(12)),
        })
    }

    /// Appends the 16 header bytes.
    pub fn write(&self, out: &mut impl BufMut) {
        out.put_i32_le(self.message_length);
        out.put_i32_le(self.request_id);
        out.put_i32_le(self.response_to);
        out.put_i32_le(self.op_code.as_i32());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_reads_little_endian_fields() {
        let bytes = [
            0x15, 0, 0, 0, // messageLength 21
            0x07, 0, 0, 0, // requestID 7
            0xff, 0xff, 0xff, 0xff, // responseTo -1
            0xdd, 0x07, 0, 0, // opCode 2013
        ];
        let h = MsgHeader::peek(&bytes).unwrap();
        assert_eq!(h.message_length, 21);
        assert_eq!(h.request_id, 7);
        assert_eq!(h.response_to, -1);
        assert_eq!(h.op_code, OpCode::Msg);
        let mut out = Vec::new();
        h.write(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn peek_needs_sixteen_bytes() {
        assert_eq!(MsgHeader::peek(&[0u8; 15]), None);
    }

    #[test]
    fn opcodes_round_trip() {
        for v in [1, 2001, 2002, 2004, 2005, 2006, 2007, 2010, 2011, 2012, 2013, 42, -1] {
            assert_eq!(OpCode::from_i32(v).as_i32(), v);
        }
        assert_eq!(OpCode::from_i32(2013).name(), "OP_MSG");
        assert_eq!(OpCode::from_i32(99).name(), "unknown");
    }
}
