//! OP_COMPRESSED (2012): another message's body, compressed with noop, snappy,
//! zlib or zstd. Sizes are checked before anything is inflated, and inflation is
//! bounded by the declared size, so a compression bomb costs at most the limit.

use std::io::Read;

use bytes::{BufMut, Bytes};

use super::{begin, finish, Reader};
use crate::error::{Result, WireError};
use crate::header::{MsgHeader, OpCode, HEADER_LEN, MAX_MESSAGE_SIZE};

/// The compressor ids of the compression spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// 0: the payload is the body as is.
    Noop,
    /// 1: snappy, raw block format.
    Snappy,
    /// 2: zlib (RFC 1950, zlib-wrapped deflate).
    Zlib,
    /// 3: zstd.
    Zstd,
}

impl Compressor {
    /// The compressor for a wire id.
    pub fn from_id(id: u8) -> Result<Compressor> {
        Ok(match id {
            0 => Compressor::Noop,
            1 => Compressor::Snappy,
            2 => Compressor::Zlib,
            3 => Compressor::Zstd,
            id => return Err(WireError::UnknownCompressor { id }),
        })
    }

    /// The wire id.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The name drivers use in `compressors=`.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }
}

/// A decoded OP_COMPRESSED wrapper; the payload is still compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpCompressed {
    /// The header of the compressed message itself.
    pub header: MsgHeader,
    /// The opcode of the wrapped message.
    pub original_opcode: OpCode,
    /// The wrapped body's size, header excluded.
    pub uncompressed_size: i32,
    /// How the payload is compressed.
    pub compressor: Compressor,
    /// The compressed body.
    pub payload: Bytes,
}

impl OpCompressed {
    /// Decodes the wrapper of a whole OP_COMPRESSED message (header included).
    pub fn decode(msg: &Bytes) -> Result<OpCompressed> {
        let header = MsgHeader::peek(msg)
            .ok_or(WireError::FrameMismatch { declared: HEADER_LEN, available: msg.len() })?;
        let mut r = Reader::body(msg, OpCode::Compressed.as_i32());
        let original_opcode = OpCode::from_i32(r.i32()?);
        let uncompressed_size = r.i32()?;
        let compressor = Compressor::from_id(r.u8()?)?;
        if original_opcode == OpCode::Compressed {
            return Err(WireError::NestedCompression);
        }
        let limit = MAX_MESSAGE_SIZE - HEADER_LEN;
        if uncompressed_size < 0 || uncompressed_size as usize > limit {
            return Err(WireError::BadUncompressedSize { declared: uncompressed_size.into(), limit });
        }
        Ok(OpCompressed { header, original_opcode, uncompressed_size, compressor, payload: r.rest() })
    }

    /// Inflates the payload and returns the wrapped message, header included, as the
    /// receiver sees it: same requestID and responseTo, the original opcode, and a
    /// length of 16 + `uncompressedSize`. Output beyond the declared size is an error.
    ///
    /// Never inlined: the zlib decoder's state is built on the stack (about 43 KB)
    /// before it is boxed, and inlined into the analysis's message handler that made
    /// every message, compressed or not, open a 55 KB frame (bench/analysis).
    #[inline(never)]
    pub fn decompress(&self) -> Result<Bytes> {
        let size = self.uncompressed_size as usize;
        let name = self.compressor.name();
        let fail = |reason: String| WireError::Decompress { compressor: name, reason };
        let mut out = Vec::with_capacity(HEADER_LEN + size.min(1 << 20));
        MsgHeader {
            message_length: (HEADER_LEN + size) as i32,
            request_id: self.header.request_id,
            response_to: self.header.response_to,
            op_code: self.original_opcode,
        }
        .write(&mut out);
        match self.compressor {
            Compressor::Noop => out.extend_from_slice(&self.payload),
            Compressor::Snappy => {
                // The raw format states its length up front: check it before allocating.
                let n = snap::raw::decompress_len(&self.payload).map_err(|e| fail(e.to_string()))?;
                if n != size {
                    return Err(fail(format!("snappy says {n} bytes, header says {size}")));
                }
                out.resize(HEADER_LEN + n, 0);
                snap::raw::Decoder::new()
                    .decompress(&self.payload, &mut out[HEADER_LEN..])
                    .map_err(|e| fail(e.to_string()))?;
            }
            Compressor::Zlib => {
                let mut dec = flate2::read::ZlibDecoder::new(&self.payload[..]).take(size as u64 + 1);
                dec.read_to_end(&mut out).map_err(|e| fail(e.to_string()))?;
            }
            Compressor::Zstd => {
                let mut dec = zstd::stream::read::Decoder::with_buffer(&self.payload[..])
                    .map_err(|e| fail(e.to_string()))?
                    .take(size as u64 + 1);
                dec.read_to_end(&mut out).map_err(|e| fail(e.to_string()))?;
            }
        }
        let got = out.len() - HEADER_LEN;
        if got != size {
            return Err(fail(format!(
                "inflated to {got}{} bytes, header says {size}",
                if got > size { "+" } else { "" }
            )));
        }
        Ok(Bytes::from(out))
    }

    /// Compresses a whole message (header included) into an OP_COMPRESSED message with
    /// the same requestID and responseTo.
    pub fn compress(msg: &[u8], compressor: Compressor) -> Bytes {
        let inner = MsgHeader::peek(msg).expect("a whole message");
        let body = &msg[HEADER_LEN..];
        let payload = match compressor {
            Compressor::Noop => body.to_vec(),
            Compressor::Snappy => {
                snap::raw::Encoder::new().compress_vec(body).expect("snappy encodes any input")
            }
            Compressor::Zlib => {
                use std::io::Write;
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(body).and_then(|_| e.finish()).expect("writing to a Vec")
            }
            Compressor::Zstd => zstd::bulk::compress(body, 3).expect("zstd encodes any input"),
        };
        let mut v = begin(inner.request_id, inner.response_to, OpCode::Compressed.as_i32());
        v.put_i32_le(inner.op_code.as_i32());
        v.put_i32_le(body.len() as i32);
        v.put_u8(compressor.id());
        v.put_slice(&payload);
        finish(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Document;
    use crate::op::msg::OpMsg;
    use bson::doc;

    fn ping() -> Bytes {
        OpMsg::new(Document::from_doc(&doc! {"ping": 1, "$db": "admin", "pad": "x".repeat(300)})).encode(7, 3)
    }

    #[test]
    fn every_compressor_round_trips() {
        let plain = ping();
        for c in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let wrapped = OpCompressed::compress(&plain, c);
            let d = OpCompressed::decode(&wrapped).unwrap();
            assert_eq!(d.compressor, c);
            assert_eq!(d.original_opcode, OpCode::Msg);
            assert_eq!(d.uncompressed_size as usize, plain.len() - HEADER_LEN);
            assert_eq!(d.header.request_id, 7);
            assert_eq!(d.decompress().unwrap(), plain, "{c:?}");
            if c != Compressor::Noop {
                assert!(wrapped.len() < plain.len(), "{c:?} compresses the padding");
            }
        }
    }

    #[test]
    fn byte_literal_noop_wrapper() {
        let bytes = Bytes::from_static(&[
            30, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0xdc, 0x07, 0, 0, // header: 30 bytes, OP_COMPRESSED
            0xdd, 0x07, 0, 0, // originalOpcode OP_MSG
            5, 0, 0, 0, // uncompressedSize 5
            0, // noop
            1, 2, 3, 4, 5, // payload
        ]);
        let d = OpCompressed::decode(&bytes).unwrap();
        assert_eq!(d.compressor, Compressor::Noop);
        let inner = d.decompress().unwrap();
        assert_eq!(&inner[..], &[21, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 1, 2, 3, 4, 5]);
    }

    fn with_size(msg: &Bytes, size: i32) -> Bytes {
        let mut v = msg.to_vec();
        v[20..24].copy_from_slice(&size.to_le_bytes());
        Bytes::from(v)
    }

    #[test]
    fn declared_sizes_are_checked_before_inflating() {
        let wrapped = OpCompressed::compress(&ping(), Compressor::Zlib);
        assert!(matches!(
            OpCompressed::decode(&with_size(&wrapped, 48_000_000)),
            Err(WireError::BadUncompressedSize { .. })
        ));
        assert!(matches!(
            OpCompressed::decode(&with_size(&wrapped, -1)),
            Err(WireError::BadUncompressedSize { declared: -1, .. })
        ));
    }

    #[test]
    fn a_size_that_lies_is_an_error_for_every_compressor() {
        let plain = ping();
        let real = (plain.len() - HEADER_LEN) as i32;
        for c in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let wrapped = OpCompressed::compress(&plain, c);
            for lie in [real - 1, real + 1, 10] {
                let d = OpCompressed::decode(&with_size(&wrapped, lie)).unwrap();
                assert!(matches!(d.decompress(), Err(WireError::Decompress { .. })), "{c:?} {lie}");
            }
        }
    }

    #[test]
    fn a_compression_bomb_inflates_no_further_than_declared() {
        // 40 MB of zeros compress to a few KB; the header claims 1 KB.
        let zeros = vec![0u8; 40_000_000];
        let mut msg = vec![0u8; HEADER_LEN];
        msg[12..16].copy_from_slice(&2013i32.to_le_bytes());
        msg.extend_from_slice(&zeros);
        for c in [Compressor::Zlib, Compressor::Zstd, Compressor::Snappy] {
            let wrapped = OpCompressed::compress(&msg, c);
            assert!(wrapped.len() < 2_000_000, "{c:?}: {}", wrapped.len());
            let d = OpCompressed::decode(&with_size(&wrapped, 1024)).unwrap();
            let err = d.decompress().unwrap_err();
            assert!(matches!(err, WireError::Decompress { .. }), "{c:?}: {err}");
        }
    }

    #[test]
    fn unknown_compressors_and_nesting_are_rejected() {
        let mut v = OpCompressed::compress(&ping(), Compressor::Noop).to_vec();
        v[24] = 9;
        assert_eq!(OpCompressed::decode(&Bytes::from(v)), Err(WireError::UnknownCompressor { id: 9 }));
        let nested =
            OpCompressed::compress(&OpCompressed::compress(&ping(), Compressor::Noop), Compressor::Noop);
        assert_eq!(OpCompressed::decode(&nested), Err(WireError::NestedCompression));
    }

    #[test]
    fn corrupt_payloads_are_errors() {
        for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let mut v = OpCompressed::compress(&ping(), c).to_vec();
            let n = v.len();
            for b in &mut v[25..n] {
                *b = b.wrapping_mul(31).wrapping_add(7);
            }
            let d = OpCompressed::decode(&Bytes::from(v)).unwrap();
            assert!(d.decompress().is_err(), "{c:?}");
        }
    }
}
