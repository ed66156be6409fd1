//! OP_REPLY (1): the answer to an OP_QUERY.

use bytes::{BufMut, Bytes};

use super::{begin, finish, Reader};
use crate::doc::Document;
use crate::error::Result;
use crate::header::OpCode;

/// A decoded OP_REPLY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpReply {
    /// Bit vector: cursorNotFound, queryFailure, shardConfigStale, awaitCapable.
    pub response_flags: i32,
    /// The cursor to continue with, or 0.
    pub cursor_id: i64,
    /// Where in the cursor this reply starts.
    pub starting_from: i32,
    /// How many documents follow.
    pub number_returned: i32,
    /// The documents (for a command: one reply document).
    pub documents: Vec<Document>,
}

impl OpReply {
    /// `queryFailure`: the one document is a `$err` document.
    pub const QUERY_FAILURE: i32 = 1 << 1;

    /// Decodes a whole OP_REPLY message (header included).
    pub fn decode(msg: &Bytes) -> Result<OpReply> {
        let mut r = Reader::body(msg, OpCode::Reply.as_i32());
        let response_flags = r.i32()?;
        let cursor_id = r.i64()?;
        let starting_from = r.i32()?;
        let number_returned = r.i32()?;
        let mut documents = Vec::new();
        while r.remaining() > 0 {
            documents.push(r.document()?);
        }
        Ok(OpReply { response_flags, cursor_id, starting_from, number_returned, documents })
    }

    /// Encodes a whole message answering `response_to`.
    pub fn encode(&self, request_id: i32, response_to: i32) -> Bytes {
        let mut v = begin(request_id, response_to, OpCode::Reply.as_i32());
        v.put_i32_le(self.response_flags);
        v.put_i64_le(self.cursor_id);
        v.put_i32_le(self.starting_from);
        v.put_i32_le(self.number_returned);
        for d in &self.documents {
            v.put_slice(d.bytes());
        }
        finish(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_byte_literal_reply() {
        let bytes: &[u8] = &[
            0x35, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0,
            0, // header: 53 bytes, responseTo 1, OP_REPLY
            8, 0, 0, 0, // responseFlags: awaitCapable
            0, 0, 0, 0, 0, 0, 0, 0, // cursorID
            0, 0, 0, 0, // startingFrom
            1, 0, 0, 0, // numberReturned
            0x11, 0, 0, 0, 0x01, b'o', b'k', 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, // {ok: 1.0}
        ];
        let r = OpReply::decode(&Bytes::from_static(bytes)).unwrap();
        assert_eq!(r.response_flags, 8);
        assert_eq!(r.number_returned, 1);
        assert_eq!(r.documents[0].raw().get_f64("ok").unwrap(), 1.0);
        assert_eq!(&r.encode(2, 1)[..], bytes);
        let mut cut = bytes[..40].to_vec();
        cut[0..4].copy_from_slice(&40i32.to_le_bytes());
        assert!(OpReply::decode(&Bytes::from(cut)).is_err());
    }
}
