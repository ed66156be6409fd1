//! One module per opcode, each with the spec's field names. Decoders take the whole
//! message (header included) so that error offsets and the OP_MSG checksum refer to
//! the bytes as they were on the wire.

pub mod compressed;
pub mod msg;
pub mod query;
pub mod reply;

use bytes::{BufMut, Bytes};

use crate::doc::Document;
use crate::error::{Result, WireError};
use crate::header::HEADER_LEN;

/// A bounds-checked reader over one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
    op_code: i32,
}

impl<'a> Reader<'a> {
    /// A reader over the body (the bytes after the header) of `buf`.
    pub(crate) fn body(buf: &'a Bytes, op_code: i32) -> Reader<'a> {
        Reader { buf, pos: HEADER_LEN.min(buf.len()), end: buf.len(), op_code }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end - self.pos
    }

    /// Stops reading at `end` (for a checksum trailer).
    pub(crate) fn set_end(&mut self, end: usize) {
        self.end = end.max(self.pos);
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(WireError::Truncated {
                op_code: self.op_code,
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub(crate) fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    pub(crate) fn cstring(&mut self) -> Result<String> {
        let start = self.pos;
        let bad = WireError::BadCString { op_code: self.op_code, offset: start };
        let nul = self.buf[start..self.end].iter().position(|&b| b == 0).ok_or(bad.clone())?;
        let s = std::str::from_utf8(&self.buf[start..start + nul]).map_err(|_| bad)?;
        self.pos = start + nul + 1;
        Ok(s.to_owned())
    }

    pub(crate) fn document(&mut self) -> Result<Document> {
        let (doc, next) = Document::read_within(self.buf, self.pos, self.end, self.op_code)?;
        self.pos = next;
        Ok(doc)
    }

    pub(crate) fn rest(&mut self) -> Bytes {
        let b = self.buf.slice(self.pos..self.end);
        self.pos = self.end;
        b
    }
}

pub(crate) fn put_cstring(out: &mut impl BufMut, s: &str) {
    out.put_slice(s.as_bytes());
    out.put_u8(0);
}

/// Starts a message: a header with a length to be patched by [`finish`].
pub(crate) fn begin(request_id: i32, response_to: i32, op_code: i32) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.put_i32_le(0);
    v.put_i32_le(request_id);
    v.put_i32_le(response_to);
    v.put_i32_le(op_code);
    v
}

/// Writes the final length into the header.
pub(crate) fn finish(mut v: Vec<u8>) -> Bytes {
    let len = v.len() as i32;
    v[0..4].copy_from_slice(&len.to_le_bytes());
    Bytes::from(v)
}
