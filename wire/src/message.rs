//! A whole decoded message: OP_COMPRESSED is unwrapped here, so callers see the
//! message the sender meant, plus which compressor carried it.

use bytes::Bytes;

use crate::error::Result;
use crate::frame::Frame;
use crate::header::{MsgHeader, OpCode};
use crate::op::compressed::{Compressor, OpCompressed};
use crate::op::msg::{MsgFlags, OpMsg};
use crate::op::query::OpQuery;
use crate::op::reply::OpReply;

/// The decoded body of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// OP_MSG.
    Msg(OpMsg),
    /// OP_QUERY.
    Query(OpQuery),
    /// OP_REPLY.
    Reply(OpReply),
    /// A legacy or unknown opcode: recognised, counted and passed through, not decoded.
    Opaque {
        /// The body after the header.
        body: Bytes,
    },
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header of the message as the receiver acts on it (for a compressed
    /// message: the inner header, with the original opcode and inflated length).
    pub header: MsgHeader,
    /// The compressor, when the message arrived as OP_COMPRESSED.
    pub compressor: Option<Compressor>,
    /// The body.
    pub op: Op,
}

impl Message {
    /// Decodes a frame, inflating OP_COMPRESSED first.
    pub fn decode(frame: &Frame) -> Result<Message> {
        if frame.header.op_code == OpCode::Compressed {
            let c = OpCompressed::decode(&frame.bytes)?;
            let inner = c.decompress()?;
            let mut m = Message::decode_plain(&inner)?;
            m.compressor = Some(c.compressor);
            return Ok(m);
        }
        Message::decode_plain(&frame.bytes)
    }

    fn decode_plain(bytes: &Bytes) -> Result<Message> {
        let header = MsgHeader::peek(bytes).expect("frames have a header");
        let op = match header.op_code {
            OpCode::Msg => Op::Msg(OpMsg::decode(bytes)?),
            OpCode::Query => Op::Query(OpQuery::decode(bytes)?),
            OpCode::Reply => Op::Reply(OpReply::decode(bytes)?),
            OpCode::Compressed => return Err(crate::error::WireError::NestedCompression),
            _ => Op::Opaque { body: bytes.slice(crate::header::HEADER_LEN..) },
        };
        Ok(Message { header, compressor: None, op })
    }

    /// Encodes the message, compressing it again if it arrived compressed.
    pub fn encode(&self) -> Bytes {
        let h = &self.header;
        let plain = match &self.op {
            Op::Msg(m) => m.encode(h.request_id, h.response_to),
            Op::Query(q) => q.encode(h.request_id),
            Op::Reply(r) => r.encode(h.request_id, h.response_to),
            Op::Opaque { body } => {
                let mut v = crate::op::begin(h.request_id, h.response_to, h.op_code.as_i32());
                v.extend_from_slice(body);
                crate::op::finish(v)
            }
        };
        match self.compressor {
            Some(c) => OpCompressed::compress(&plain, c),
            None => plain,
        }
    }

    /// OP_MSG flags, or none for other opcodes.
    pub fn msg_flags(&self) -> MsgFlags {
        match &self.op {
            Op::Msg(m) => m.flags,
            _ => MsgFlags::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Document;
    use bson::doc;

    #[test]
    fn compressed_messages_decode_to_the_inner_message() {
        let msg = OpMsg::new(Document::from_doc(&doc! {"find": "c", "$db": "t"}));
        let plain = msg.encode(11, 0);
        let framed = Frame::from_bytes(OpCompressed::compress(&plain, Compressor::Snappy)).unwrap();
        let m = Message::decode(&framed).unwrap();
        assert_eq!(m.compressor, Some(Compressor::Snappy));
        assert_eq!(m.header.op_code, OpCode::Msg);
        assert_eq!(m.header.request_id, 11);
        assert_eq!(m.header.message_length as usize, plain.len());
        assert_eq!(m.op, Op::Msg(msg));
        assert_eq!(Message::decode(&Frame::from_bytes(m.encode()).unwrap()).unwrap(), m);
    }

    #[test]
    fn legacy_and_unknown_opcodes_are_opaque() {
        for op in [2001, 2002, 2005, 2006, 2007, 2010, 2011, 77] {
            let mut v = crate::op::begin(1, 0, op);
            v.extend_from_slice(&[1, 2, 3]);
            let f = Frame::from_bytes(crate::op::finish(v)).unwrap();
            let m = Message::decode(&f).unwrap();
            assert_eq!(m.op, Op::Opaque { body: Bytes::from_static(&[1, 2, 3]) });
            assert_eq!(m.header.op_code.as_i32(), op);
            assert_eq!(m.encode(), f.bytes);
        }
    }
}
