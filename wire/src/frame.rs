//! Framing: cutting a byte stream into whole messages using only the 16-byte header.
//!
//! Nothing here looks past the header, so framing costs the same for a 100-byte
//! find and a 40 MB insert. Bodies are decoded later, on the analysis side, from
//! the [`Frame`]'s refcounted [`Bytes`].

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{Result, WireError};
use crate::header::{MsgHeader, HEADER_LEN, MAX_MESSAGE_SIZE};

/// One whole message: its header and all of its bytes, header included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header, already read from `bytes`.
    pub header: MsgHeader,
    /// The whole message as it was on the wire.
    pub bytes: Bytes,
}

/// Messages this large leave the read buffer without a copy.
const SLICE_ABOVE: usize = 1024 * 1024;

/// The declared length of the message at the front of `buf`: `Ok(None)` until 16
/// bytes are there; an error when the length is below the header or above `limit`.
pub fn frame_length(buf: &[u8], limit: usize) -> Result<Option<usize>> {
    let Some(header) = MsgHeader::peek(buf) else {
        return Ok(None);
    };
    let declared = header.message_length;
    if declared < HEADER_LEN as i32 || declared as i64 > limit as i64 {
        return Err(WireError::BadLength { declared: declared.into(), limit });
    }
    Ok(Some(declared as usize))
}

impl Frame {
    /// Splits one whole message off the front of `buf`: `Ok(None)` means more bytes
    /// are needed. The length is checked against [`MAX_MESSAGE_SIZE`] before anything
    /// is reserved.
    pub fn parse(buf: &mut BytesMut) -> Result<Option<Frame>> {
        let Some(len) = frame_length(buf, MAX_MESSAGE_SIZE)? else {
            return Ok(None);
        };
        if buf.len() < len {
            buf.reserve(len - buf.len());
            return Ok(None);
        }
        let header = MsgHeader::peek(buf).expect("16 bytes are present");
        Ok(Some(Frame { header, bytes: buf.split_to(len).freeze() }))
    }

    /// A frame from bytes that must hold exactly one message (a fixture, a trace record).
    pub fn from_bytes(bytes: Bytes) -> Result<Frame> {
        let len = frame_length(&bytes, MAX_MESSAGE_SIZE)?
            .ok_or(WireError::FrameMismatch { declared: HEADER_LEN, available: bytes.len() })?;
        if len != bytes.len() {
            return Err(WireError::FrameMismatch { declared: len, available: bytes.len() });
        }
        let header = MsgHeader::peek(&bytes).expect("16 bytes are present");
        Ok(Frame { header, bytes })
    }

    /// The bytes after the header.
    pub fn body(&self) -> Bytes {
        self.bytes.slice(HEADER_LEN..)
    }
}

/// What [`Splitter::next`] found at the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Split {
    /// A whole message.
    Frame(Frame),
    /// A message larger than the splitter's keep limit: its bytes will be passed
    /// over as they arrive, and only its header is reported.
    TooLarge(MsgHeader),
}

/// Cuts a stream into frames for the tap, each a copy of its message's bytes,
/// keeping memory bounded: messages above
/// `keep_limit` are skipped (their header reported), and a length outside the
/// protocol's limits stops the splitter for good, since the stream can no longer
/// be framed. The caller forwards bytes itself; this only decides what to keep.
#[derive(Debug)]
pub struct Splitter {
    keep_limit: usize,
    skip: usize,
    broken: bool,
}

impl Splitter {
    /// A splitter that keeps messages of at most `keep_limit` bytes.
    pub fn new(keep_limit: usize) -> Splitter {
        Splitter { keep_limit: keep_limit.min(MAX_MESSAGE_SIZE), skip: 0, broken: false }
    }

    /// Whether a framing error stopped this splitter.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Changes the largest message kept from now on (the caller's memory budget); a
    /// message already being framed that no longer fits is passed over.
    pub fn set_keep_limit(&mut self, keep_limit: usize) {
        self.keep_limit = keep_limit.min(MAX_MESSAGE_SIZE);
    }

    /// The declared length of the message at the front of `buf`, when its header is
    /// there and it is not being passed over.
    pub fn front_len(&self, buf: &[u8]) -> Option<usize> {
        if self.broken || self.skip > 0 {
            return None;
        }
        frame_length(buf, MAX_MESSAGE_SIZE).ok().flatten()
    }

    /// How many more bytes the message at the front of `buf` needs before it can be
    /// yielded (or passed over, when it is being skipped); 0 when not yet known. The
    /// caller sizes its next read with it, so buffers grow only as messages require.
    pub fn wanted(&self, buf: &[u8]) -> usize {
        if self.broken {
            return 0;
        }
        if self.skip > 0 {
            return self.skip;
        }
        match frame_length(buf, MAX_MESSAGE_SIZE) {
            Ok(Some(len)) if len <= self.keep_limit => len.saturating_sub(buf.len()),
            _ => 0,
        }
    }

    /// The next complete item from the front of `buf`, or `None` when more bytes are
    /// needed. Call it until it returns `None` after each append to `buf`.
    pub fn next(&mut self, buf: &mut BytesMut) -> Option<Result<Split>> {
        if self.broken {
            buf.clear();
            return None;
        }
        if self.skip > 0 {
            let n = self.skip.min(buf.len());
            buf.advance(n);
            self.skip -= n;
            if self.skip > 0 {
                return None;
            }
        }
        let len = match frame_length(buf, MAX_MESSAGE_SIZE) {
            Ok(Some(len)) => len,
            Ok(None) => return None,
            Err(e) => {
                self.broken = true;
                buf.clear();
                return Some(Err(e));
            }
        };
        let header = MsgHeader::peek(buf).expect("16 bytes are present");
        if len > self.keep_limit {
            let n = len.min(buf.len());
            buf.advance(n);
            self.skip = len - n;
            return Some(Ok(Split::TooLarge(header)));
        }
        if buf.len() < len {
            return None;
        }
        // A small message is copied, not sliced out of `buf`: a frame waiting in a queue
        // would otherwise pin the whole read buffer, and the next read would need a new
        // one. Copying is cheaper than that allocation, and the buffer is reused in
        // place. A large message takes its bytes with it instead: the buffer grew for
        // it, a copy would hold it twice.
        let bytes = if len >= SLICE_ABOVE {
            buf.split_to(len).freeze()
        } else {
            let b = Bytes::copy_from_slice(&buf[..len]);
            buf.advance(len);
            b
        };
        Some(Ok(Split::Frame(Frame { header, bytes })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::OpCode;

    fn msg(len: i32, id: i32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&0i32.to_le_bytes());
        v.extend_from_slice(&2013i32.to_le_bytes());
        v.resize(len as usize, 0xab);
        v
    }

    #[test]
    fn parse_waits_for_header_then_body() {
        let bytes = msg(20, 1);
        let mut buf = BytesMut::from(&bytes[..10]);
        assert_eq!(Frame::parse(&mut buf).unwrap(), None);
        buf.extend_from_slice(&bytes[10..18]);
        assert_eq!(Frame::parse(&mut buf).unwrap(), None);
        buf.extend_from_slice(&bytes[18..]);
        let f = Frame::parse(&mut buf).unwrap().unwrap();
        assert_eq!(f.header.op_code, OpCode::Msg);
        assert_eq!(f.bytes.len(), 20);
        assert_eq!(f.body().len(), 4);
        assert!(buf.is_empty());
    }

    #[test]
    fn parse_rejects_lengths_outside_limits_before_allocating() {
        let mut buf = BytesMut::from(&msg(16, 1)[..]);
        buf[0..4].copy_from_slice(&15i32.to_le_bytes());
        assert_eq!(
            Frame::parse(&mut buf),
            Err(WireError::BadLength { declared: 15, limit: MAX_MESSAGE_SIZE })
        );
        buf[0..4].copy_from_slice(&48_000_001i32.to_le_bytes());
        assert!(matches!(Frame::parse(&mut buf), Err(WireError::BadLength { .. })));
        assert!(buf.capacity() < 1024, "nothing was reserved for the bogus length");
        buf[0..4].copy_from_slice(&(-5i32).to_le_bytes());
        assert!(matches!(Frame::parse(&mut buf), Err(WireError::BadLength { declared: -5, .. })));
    }

    #[test]
    fn from_bytes_requires_exactly_one_message() {
        let bytes = msg(20, 1);
        assert!(Frame::from_bytes(Bytes::from(bytes.clone())).is_ok());
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            Frame::from_bytes(Bytes::from(longer)),
            Err(WireError::FrameMismatch { declared: 20, available: 21 })
        );
        assert!(Frame::from_bytes(Bytes::from_static(&[1, 2, 3])).is_err());
    }

    #[test]
    fn splitter_yields_back_to_back_frames() {
        let mut stream = msg(20, 1);
        stream.extend(msg(30, 2));
        stream.extend(msg(16, 3));
        let mut s = Splitter::new(1024);
        let mut buf = BytesMut::new();
        let mut ids = Vec::new();
        // Feed one byte at a time: the worst case for a stream parser.
        for b in stream {
            buf.extend_from_slice(&[b]);
            while let Some(item) = s.next(&mut buf) {
                match item.unwrap() {
                    Split::Frame(f) => ids.push(f.header.request_id),
                    Split::TooLarge(_) => panic!("nothing is too large"),
                }
            }
        }
        assert_eq!(ids, [1, 2, 3]);
        assert!(buf.is_empty());
    }

    #[test]
    fn splitter_skips_messages_above_keep_limit() {
        let mut stream = msg(100, 1);
        stream.extend(msg(20, 2));
        let mut s = Splitter::new(50);
        let mut buf = BytesMut::new();
        let mut seen = Vec::new();
        for chunk in stream.chunks(7) {
            buf.extend_from_slice(chunk);
            while let Some(item) = s.next(&mut buf) {
                seen.push(match item.unwrap() {
                    Split::Frame(f) => (true, f.header.request_id),
                    Split::TooLarge(h) => (false, h.request_id),
                });
            }
            assert!(buf.len() <= 50, "a skipped message is not buffered");
        }
        assert_eq!(seen, [(false, 1), (true, 2)]);
    }

    #[test]
    fn splitter_says_how_much_the_current_message_still_needs() {
        let s = Splitter::new(1024);
        let m = msg(300, 1);
        assert_eq!(s.wanted(&m[..10]), 0, "no header yet");
        assert_eq!(s.wanted(&m[..100]), 200);
        assert_eq!(s.wanted(&m[..]), 0);
        let small = Splitter::new(50);
        assert_eq!(small.wanted(&m[..100]), 0, "a message it will skip is not buffered");
    }

    #[test]
    fn splitter_stops_for_good_on_a_bad_length() {
        let mut s = Splitter::new(1024);
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]);
        assert!(matches!(s.next(&mut buf), Some(Err(WireError::BadLength { .. }))));
        assert!(s.is_broken());
        buf.extend_from_slice(&msg(20, 1));
        assert!(s.next(&mut buf).is_none());
        assert!(buf.is_empty(), "a broken splitter keeps nothing");
    }
}
