//! Reads a trace file back into tap events. A file cut short (a crash while it was
//! written) gives every whole record before the cut, then says where it stopped.

use std::fs::File;
use std::io::{BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use mongotap_events::{Direction, Lost, TapEvent};
use mongotap_wire::{Compressor, Frame, MsgHeader, WireError, HEADER_LEN};

use crate::format::{kind, Header, MAGIC, NO_COMPRESSOR, VERSION, ZSTD_MAGIC};

/// Records longer than this are not believed (a message is at most 48 MB).
const MAX_RECORD: usize = 64 << 20;

/// A trace being read.
pub struct TraceReader {
    input: Box<dyn Read>,
    header: Header,
    /// Bytes of decompressed input read so far.
    offset: u64,
    /// Why reading stopped early, once it has.
    truncated: Option<String>,
    done: bool,
}

/// Whether `head` (a file's first bytes) looks like a trace.
pub fn looks_like_trace(head: &[u8]) -> bool {
    head.starts_with(&ZSTD_MAGIC)
}

impl TraceReader {
    /// Opens a trace file and reads its header.
    pub fn open(path: &Path) -> Result<TraceReader, String> {
        let file = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
        TraceReader::new(Box::new(BufReader::with_capacity(1 << 20, file)))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads a trace from any source.
    pub fn new(raw: Box<dyn Read>) -> Result<TraceReader, String> {
        let decoder = zstd::stream::read::Decoder::new(raw).map_err(|e| format!("not a trace: {e}"))?;
        let mut input: Box<dyn Read> = Box::new(decoder);
        let mut magic = [0u8; 15];
        input.read_exact(&mut magic).map_err(|e| format!("not a mongotap trace: {e}"))?;
        if &magic != MAGIC {
            return Err("a zstd file, but not a mongotap trace".into());
        }
        let mut n = [0u8; 4];
        input.read_exact(&mut n).map_err(|e| format!("trace header cut short: {e}"))?;
        let n = u32::from_le_bytes(n) as usize;
        if n > 1 << 20 {
            return Err(format!("trace header of {n} bytes"));
        }
        let mut json = vec![0u8; n];
        input.read_exact(&mut json).map_err(|e| format!("trace header cut short: {e}"))?;
        let header: Header = serde_json::from_slice(&json).map_err(|e| format!("trace header: {e}"))?;
        if header.version != VERSION {
            return Err(format!(
                "trace format version {} (this mongotap reads version {VERSION})",
                header.version
            ));
        }
        Ok(TraceReader { input, header, offset: (15 + 4 + n) as u64, truncated: None, done: false })
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Why the file ended early, if it did (the events before it were all read).
    pub fn truncated(&self) -> Option<&str> {
        self.truncated.as_deref()
    }

    /// The next event, `None` at the end (or at a cut).
    pub fn next_event(&mut self) -> Option<TapEvent> {
        while !self.done {
            let record = self.record()?;
            match decode(&record) {
                Ok(ev) => return Some(ev),
                Err(e) => {
                    // A record that does not decode: say so and stop, as for a cut.
                    self.truncated = Some(format!("a bad record at byte {}: {e}", self.offset));
                    self.done = true;
                }
            }
        }
        None
    }

    fn record(&mut self) -> Option<Vec<u8>> {
        let mut n = [0u8; 4];
        match read_full(&mut self.input, &mut n) {
            Ok(0) => {
                self.done = true;
                return None;
            }
            Ok(4) => {}
            Ok(_) | Err(_) => return self.cut("inside a record's length"),
        }
        let n = u32::from_le_bytes(n) as usize;
        if n == 0 || n > MAX_RECORD {
            return self.cut(&format!("a record of {n} bytes"));
        }
        let mut rec = vec![0u8; n];
        match read_full(&mut self.input, &mut rec) {
            Ok(got) if got == n => {}
            _ => return self.cut("inside a record"),
        }
        self.offset += 4 + n as u64;
        Some(rec)
    }

    fn cut(&mut self, where_: &str) -> Option<Vec<u8>> {
        self.truncated = Some(format!("cut short {where_}, after byte {} of its content", self.offset));
        self.done = true;
        None
    }
}

impl Iterator for TraceReader {
    type Item = TapEvent;
    fn next(&mut self) -> Option<TapEvent> {
        self.next_event()
    }
}

/// Reads until `buf` is full or the input ends; an error after some bytes counts as
/// the end (a zstd frame cut short).
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if got == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(got)
}

/// One record's event.
fn decode(rec: &[u8]) -> Result<TapEvent, String> {
    let mut r = Fields { b: rec, at: 1 };
    let ev = match rec[0] {
        kind::OPENED => {
            let (conn, at) = (r.u64()?, r.u64()?);
            let n = r.u16()? as usize;
            let text = std::str::from_utf8(r.take(n)?).map_err(|e| e.to_string())?;
            let client: SocketAddr = text.parse().map_err(|_| format!("client address {text:?}"))?;
            TapEvent::Opened { conn, client, at }
        }
        kind::MESSAGE => {
            let (conn, at, dir) = (r.u64()?, r.u64()?, r.dir()?);
            let redacted = r.u8()? == 1;
            let wire_len = r.u32()?;
            let compressor = r.u8()?;
            let bytes = Bytes::copy_from_slice(r.rest());
            let frame = Frame::from_bytes(bytes).map_err(|e| e.to_string())?;
            if redacted {
                let compressor = match compressor {
                    NO_COMPRESSOR => None,
                    id => Compressor::from_id(id).ok(),
                };
                TapEvent::Recorded { conn, dir, at, frame, wire_len, compressor }
            } else {
                TapEvent::Message { conn, dir, at, frame }
            }
        }
        kind::TOO_LARGE => {
            let (conn, at, dir) = (r.u64()?, r.u64()?, r.dir()?);
            let header = MsgHeader::peek(r.take(HEADER_LEN)?).ok_or("a header")?;
            TapEvent::TooLarge { conn, dir, at, header }
        }
        kind::UNFRAMEABLE => {
            let (conn, at, dir) = (r.u64()?, r.u64()?, r.dir()?);
            let reason = String::from_utf8_lossy(r.rest()).into_owned();
            TapEvent::Unframeable { conn, dir, at, error: WireError::Recorded(reason) }
        }
        kind::CLOSED => TapEvent::Closed { conn: r.u64()?, at: r.u64()? },
        kind::GAP => {
            let (at, dropped) = (r.u64()?, r.u64()?);
            let n = r.u32()? as usize;
            let mut lost = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                lost.push(Lost { conn: r.u64()?, events: r.u64()?, closed: r.u8()? == 1 });
            }
            TapEvent::Gap { at, dropped, lost }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    Ok(ev)
}

/// Little-endian fields read off a record.
struct Fields<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let s = self.b.get(self.at..self.at + n).ok_or("record cut short")?;
        self.at += n;
        Ok(s)
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.at.min(self.b.len())..];
        self.at = self.b.len();
        s
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }
    fn dir(&mut self) -> Result<Direction, String> {
        match self.u8()? {
            0 => Ok(Direction::ToServer),
            1 => Ok(Direction::ToClient),
            d => Err(format!("direction {d}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::{TraceOptions, TraceWriter};
    use bson::doc;
    use mongotap_wire::{Document, OpMsg};
    use std::time::Duration;

    fn frame(i: i32) -> Frame {
        let body = doc! {"find": "c", "filter": {"k": format!("v{i}")}, "$db": "d"};
        Frame::from_bytes(OpMsg::new(Document::from_doc(&body)).encode(i, 0)).unwrap()
    }

    fn events(n: i32) -> Vec<TapEvent> {
        let mut v = vec![TapEvent::Opened { conn: 1, client: "127.0.0.1:5000".parse().unwrap(), at: 10 }];
        for i in 1..=n {
            v.push(TapEvent::Message {
                conn: 1,
                dir: Direction::ToServer,
                at: 10 + i as u64,
                frame: frame(i),
            });
        }
        v.push(TapEvent::Gap { at: 99, dropped: 3, lost: vec![Lost { conn: 1, events: 3, closed: false }] });
        v.push(TapEvent::Closed { conn: 1, at: 100 });
        v
    }

    fn opts(path: &Path, raw: bool) -> TraceOptions {
        TraceOptions {
            path: path.to_path_buf(),
            raw,
            rotate_bytes: 0,
            rotate_after: Duration::ZERO,
            flush_every: Duration::from_secs(1),
            upstream: "127.0.0.1:27017".into(),
        }
    }

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "mongotap-trace-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_raw_trace_reads_back_event_for_event() {
        let path = dir().join("raw.mtt");
        let mut w = TraceWriter::create(opts(&path, true), 1).unwrap();
        let evs = events(50);
        evs.iter().for_each(|e| w.write(e).unwrap());
        w.finish().unwrap();
        let r = TraceReader::open(&path).unwrap();
        assert!(r.header().is_raw());
        let back: Vec<TapEvent> = r.collect();
        assert_eq!(format!("{back:?}"), format!("{evs:?}"));
    }

    #[test]
    fn a_redacted_trace_reads_back_as_recorded_messages_of_the_same_size() {
        let path = dir().join("red.mtt");
        let mut w = TraceWriter::create(opts(&path, false), 1).unwrap();
        events(3).iter().for_each(|e| w.write(e).unwrap());
        w.finish().unwrap();
        let raw = std::fs::read(&path).unwrap();
        let plain = zstd::stream::decode_all(&raw[..]).unwrap();
        assert!(!plain.windows(2).any(|w| w == b"v1"), "no literal in the file");
        let back: Vec<TapEvent> = TraceReader::open(&path).unwrap().collect();
        assert_eq!(back.len(), 6);
        match &back[1] {
            TapEvent::Recorded { frame, wire_len, compressor: None, .. } => {
                assert_eq!(*wire_len as usize, frame.bytes.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_trace_cut_anywhere_reads_every_whole_frame_before_the_cut() {
        let path = dir().join("cut.mtt");
        let mut w = TraceWriter::create(opts(&path, true), 1).unwrap();
        // Three frames of records: each flush writes one.
        for chunk in 0..3 {
            for e in events(20).iter().skip(1).take(20) {
                w.write(e).unwrap();
            }
            w.flush().unwrap();
            let _ = chunk;
        }
        w.finish().unwrap();
        let whole = std::fs::read(&path).unwrap();
        let all = TraceReader::new(Box::new(std::io::Cursor::new(whole.clone()))).unwrap().count();
        assert_eq!(all, 60);
        let mut seen = Vec::new();
        for cut in (40..whole.len()).step_by(37) {
            let Ok(mut r) = TraceReader::new(Box::new(std::io::Cursor::new(whole[..cut].to_vec()))) else {
                assert!(cut < 400, "only a cut inside the header's own frame loses the file ({cut})");
                continue;
            };
            let n = r.by_ref().count();
            assert!(n <= 60);
            assert!(r.truncated().is_some() || n == 60 || n % 20 == 0, "cut at {cut}: {n} events");
            seen.push(n);
        }
        assert!(seen.contains(&20) && seen.contains(&40), "{seen:?}");
    }

    #[test]
    fn rotation_starts_numbered_parts_each_with_a_header() {
        let path = dir().join("rot.mtt");
        let mut o = opts(&path, true);
        o.rotate_bytes = 1;
        let mut w = TraceWriter::create(o, 1).unwrap();
        for e in events(5).iter().skip(1).take(5) {
            w.write(e).unwrap();
            w.flush().unwrap();
        }
        let stats = w.finish().unwrap();
        assert!(stats.parts >= 5);
        let mut total = 0;
        for n in 0..stats.parts {
            let r = TraceReader::open(&crate::writer::part_path(&path, n)).unwrap();
            assert_eq!(r.header().part, n);
            total += r.count();
        }
        assert_eq!(total, 5);
    }

    #[test]
    fn garbage_is_not_a_trace() {
        assert!(TraceReader::new(Box::new(std::io::Cursor::new(b"hello".to_vec()))).is_err());
        let z = zstd::bulk::compress(b"MONGOTAP-TRACE\n\xff\xff\xff\xff", 3).unwrap();
        assert!(TraceReader::new(Box::new(std::io::Cursor::new(z))).is_err());
    }
}
