//! Writes tap events into a trace file: records into a buffer, the buffer into a
//! zstd frame every [`FLUSH_BYTES`] or when [`TraceWriter::tick`] finds it older than
//! the flush interval, and a new file when the rotation limits say so.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mongotap_events::{Direction, TapEvent};

use crate::format::{kind, Header, MAGIC, NO_COMPRESSOR, VERSION};
use crate::redact::{Redacted, Redactor};

/// Records buffered before they are compressed and written as one frame.
pub const FLUSH_BYTES: usize = 1 << 20;

/// zstd's level: fast, and traces of MongoDB traffic still shrink several times.
const LEVEL: i32 = 3;

/// How a trace is written.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// The first file; later parts are `PATH.1`, `PATH.2`, ...
    pub path: PathBuf,
    /// Keep values as they are (`--capture-values`) instead of redacting them.
    pub raw: bool,
    /// Start a new file after this many compressed bytes (0: never).
    pub rotate_bytes: u64,
    /// Start a new file after this long (zero: never).
    pub rotate_after: Duration,
    /// Write buffered records at least this often.
    pub flush_every: Duration,
    /// Put in the header.
    pub upstream: String,
}

/// What a writer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Records written.
    pub records: u64,
    /// Messages redaction could not walk: kept as `unframeable` records.
    pub not_redacted: u64,
    /// Compressed bytes written, all parts.
    pub bytes: u64,
    /// Files started.
    pub parts: u32,
    /// Frames of records that could not be written (a full disk) and were let go.
    pub lost_frames: u64,
}

/// A trace being written.
pub struct TraceWriter {
    opts: TraceOptions,
    header: Header,
    file: File,
    buf: Vec<u8>,
    redactor: Redactor,
    part_bytes: u64,
    part_started: Instant,
    last_flush: Instant,
    stats: TraceStats,
    /// Records in `buf`, and records lost with frames the disk refused, not yet
    /// written into the trace as a gap.
    buffered: u64,
    lost: u64,
}

impl TraceWriter {
    /// Creates the first file and writes its header.
    pub fn create(opts: TraceOptions, started_at: u64) -> Result<TraceWriter, String> {
        let redactor = if opts.raw { Redactor::auth_only() } else { Redactor::new()? };
        let header = Header {
            format: "mongotap-trace".into(),
            version: VERSION,
            mongotap: env!("CARGO_PKG_VERSION").into(),
            started_at,
            upstream: opts.upstream.clone(),
            redaction: if opts.raw { "raw" } else { "redacted" }.into(),
            trace_id: random_id(),
            part: 0,
        };
        let file = open(&opts.path)?;
        let now = Instant::now();
        let mut w = TraceWriter {
            opts,
            header,
            file,
            buf: Vec::with_capacity(FLUSH_BYTES + 64 * 1024),
            redactor,
            part_bytes: 0,
            part_started: now,
            last_flush: now,
            stats: TraceStats { parts: 1, ..TraceStats::default() },
            buffered: 0,
            lost: 0,
        };
        w.start_part()?;
        Ok(w)
    }

    /// The file being written now.
    pub fn current_path(&self) -> PathBuf {
        part_path(&self.opts.path, self.header.part)
    }

    /// What it did so far.
    pub fn stats(&self) -> TraceStats {
        self.stats
    }

    fn start_part(&mut self) -> Result<(), String> {
        let header = self.header_bytes()?;
        self.buf.extend_from_slice(&header);
        self.write_frame()
    }

    /// The magic and the header of the current part.
    fn header_bytes(&self) -> Result<Vec<u8>, String> {
        let json = serde_json::to_vec(&self.header).map_err(|e| e.to_string())?;
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&json);
        Ok(out)
    }

    /// Adds one event.
    pub fn write(&mut self, ev: &TapEvent) -> Result<(), String> {
        if self.lost > 0 && !matches!(ev, TapEvent::Gap { .. }) {
            // Records went with a frame the disk refused: the analysis must know of
            // the hole, as of one the tap made.
            let dropped = std::mem::take(&mut self.lost);
            self.write(&TapEvent::Gap { at: ev.at(), dropped, lost: Vec::new() })?;
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        match ev {
            TapEvent::Opened { conn, client, at } => {
                self.buf.push(kind::OPENED);
                put_u64(&mut self.buf, *conn);
                put_u64(&mut self.buf, *at);
                let c = client.to_string();
                self.buf.extend_from_slice(&(c.len() as u16).to_le_bytes());
                self.buf.extend_from_slice(c.as_bytes());
            }
            TapEvent::Message { conn, dir, at, frame } => {
                let compressor = match frame.header.op_code {
                    mongotap_wire::OpCode::Compressed => {
                        frame.bytes.get(24).copied().unwrap_or(NO_COMPRESSOR)
                    }
                    _ => NO_COMPRESSOR,
                };
                // A panic in redaction (a bug) loses that message, never the trace.
                let redacted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.redactor.message(*conn, *dir, frame)
                }))
                .unwrap_or_else(|_| Redacted::Dropped("redaction failed".into()));
                let (bytes, changed) = match redacted {
                    Redacted::Kept(bytes) => (Some(bytes), true),
                    Redacted::Unchanged => (None, false),
                    Redacted::Dropped(_) => {
                        // Not kept (a legacy opcode, BSON that does not walk): its header
                        // only, as for a message too large to keep, so the analysis of
                        // the connection goes on past it.
                        self.stats.not_redacted += 1;
                        self.buf.push(kind::TOO_LARGE);
                        put_u64(&mut self.buf, *conn);
                        put_u64(&mut self.buf, *at);
                        self.buf.push(dir_byte(*dir));
                        frame.header.write(&mut self.buf);
                        return self.end_record(start);
                    }
                };
                self.buf.push(kind::MESSAGE);
                put_u64(&mut self.buf, *conn);
                put_u64(&mut self.buf, *at);
                self.buf.push(dir_byte(*dir));
                self.buf.push(u8::from(changed));
                self.buf.extend_from_slice(&(frame.bytes.len() as u32).to_le_bytes());
                self.buf.push(compressor);
                self.buf.extend_from_slice(bytes.as_deref().unwrap_or(&frame.bytes));
            }
            TapEvent::Recorded { .. } => return Err("a recorded event cannot be recorded again".into()),
            TapEvent::TooLarge { conn, dir, at, header } => {
                self.buf.push(kind::TOO_LARGE);
                put_u64(&mut self.buf, *conn);
                put_u64(&mut self.buf, *at);
                self.buf.push(dir_byte(*dir));
                header.write(&mut self.buf);
            }
            TapEvent::Unframeable { conn, dir, at, error } => {
                self.buf.push(kind::UNFRAMEABLE);
                put_u64(&mut self.buf, *conn);
                put_u64(&mut self.buf, *at);
                self.buf.push(dir_byte(*dir));
                self.buf.extend_from_slice(error.to_string().as_bytes());
            }
            TapEvent::Closed { conn, at } => {
                self.redactor.closed(*conn);
                self.buf.push(kind::CLOSED);
                put_u64(&mut self.buf, *conn);
                put_u64(&mut self.buf, *at);
            }
            TapEvent::Gap { at, dropped, lost } => {
                self.buf.push(kind::GAP);
                put_u64(&mut self.buf, *at);
                put_u64(&mut self.buf, *dropped);
                self.buf.extend_from_slice(&(lost.len() as u32).to_le_bytes());
                for l in lost {
                    put_u64(&mut self.buf, l.conn);
                    put_u64(&mut self.buf, l.events);
                    self.buf.push(u8::from(l.closed));
                }
            }
        }
        self.end_record(start)
    }

    /// Fills in the length of the record begun at `start`.
    fn end_record(&mut self, start: usize) -> Result<(), String> {
        let len = (self.buf.len() - start - 4) as u32;
        self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        self.stats.records += 1;
        self.buffered += 1;
        if self.buf.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is buffered if it waited long enough, and rotates if it is time.
    pub fn tick(&mut self) -> Result<(), String> {
        if !self.buf.is_empty() && self.last_flush.elapsed() >= self.opts.flush_every {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is buffered as one frame, then starts a new file if this one is
    /// full or old enough.
    pub fn flush(&mut self) -> Result<(), String> {
        self.write_frame()?;
        let full = self.opts.rotate_bytes > 0 && self.part_bytes >= self.opts.rotate_bytes;
        let old = !self.opts.rotate_after.is_zero() && self.part_started.elapsed() >= self.opts.rotate_after;
        if full || old {
            self.rotate()?;
        }
        Ok(())
    }

    /// Compresses what is buffered into one frame and writes it.
    fn write_frame(&mut self) -> Result<(), String> {
        self.last_flush = Instant::now();
        if self.buf.is_empty() {
            return Ok(());
        }
        let frame =
            zstd::bulk::compress(&self.buf, LEVEL).map_err(|e| format!("compressing the trace: {e}"))?;
        self.buf.clear();
        let records = std::mem::take(&mut self.buffered);
        if let Err(e) = self.file.write_all(&frame) {
            // A frame half written (a full disk) is cut off again, so the file stays
            // readable to its last whole frame and later frames follow that one.
            use std::io::Seek;
            let _ = self.file.set_len(self.part_bytes);
            let _ = self.file.seek(std::io::SeekFrom::Start(self.part_bytes));
            self.stats.lost_frames += 1;
            self.lost += records;
            if self.part_bytes == 0 {
                // The part's header went with it: it goes again first.
                self.buf = self.header_bytes()?;
            }
            return Err(format!("writing {}: {e}", self.current_path().display()));
        }
        self.part_bytes += frame.len() as u64;
        self.stats.bytes += frame.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), String> {
        // The new part's file first: if it cannot be created, writing goes on in this one.
        self.file = open(&part_path(&self.opts.path, self.header.part + 1))?;
        self.header.part += 1;
        self.part_bytes = 0;
        self.part_started = Instant::now();
        self.stats.parts += 1;
        self.start_part()
    }

    /// Writes what is buffered and syncs the file.
    pub fn finish(mut self) -> Result<TraceStats, String> {
        self.write_frame()?;
        self.file.sync_all().map_err(|e| format!("syncing {}: {e}", self.current_path().display()))?;
        Ok(self.stats)
    }
}

/// The file of part `n`: the path itself, then `PATH.1`, `PATH.2`, ...
pub fn part_path(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// A new file, readable by its owner only (a trace may hold values), never one
/// that exists: an earlier trace is not overwritten.
fn open(path: &Path) -> Result<File, String> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            format!("the trace {} already exists: move it away or give another path", path.display())
        }
        _ => format!("creating the trace {}: {e}", path.display()),
    })
}

fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

fn dir_byte(dir: Direction) -> u8 {
    match dir {
        Direction::ToServer => 0,
        Direction::ToClient => 1,
    }
}

fn random_id() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
