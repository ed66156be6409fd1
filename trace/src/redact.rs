//! Redaction: a message as a trace keeps it by default. Literal values are replaced
//! by values of the same BSON type and size drawn from a keyed hash under a secret
//! drawn per trace (HMAC-SHA-256, never written anywhere), so a re-analysis sees the
//! same structure, field names, types, sizes and shapes, and equal values stay
//! equal (N+1 links, repeated queries, rewrite diffs); what a value was cannot be
//! told back. Numbers hash by their numeric value, so `5`, `5i64` and `5.0` stay
//! equal, as the server compares them.
//!
//! What is a literal is decided deny-by-default: in a request, every top-level
//! field not in [`KEEP`] (names, options, sort and projection specs, session and
//! cluster fields) is data; in a reply, everything but [`REPLY_KEEP`], cursor ids
//! and namespaces, and the replies of the handshake and the catalog commands. Inside
//! data, keys are kept (they are field names) and so are operator arguments that
//! are not values (`$slice`, `$exists`, `$type`, ...), booleans and nulls. In
//! aggregation expressions, `$field` paths and numbers are kept too.
//!
//! Auth commands keep their name and database only, and their replies `ok` and the
//! error code; a hello that carries `speculativeAuthenticate` keeps everything
//! else (the client metadata names the application), with that field emptied.
//!
//! The bytes are changed in place, so lengths never move; an OP_COMPRESSED message
//! is inflated first (the trace stores what it was on the wire beside it). A message
//! whose BSON does not walk cleanly is not kept at all.
//!
//! The walk and the keyed stand-ins are here; what counts as a literal is in
//! `literals`, auth and catalog messages in `sensitive`, raw BSON reading in `raw`.

use std::collections::HashMap;

use mongotap_events::{ConnId, Direction};
use mongotap_wire::{Command, Frame, Message, MsgFlags, MsgHeader, OpCode, OpCompressed, HEADER_LEN};
use ring::hmac;

mod literals;
mod raw;
mod sensitive;

use literals::*;
use raw::*;
use sensitive::*;

/// Nesting walked; deeper messages are not kept (the server's own limit is 100).
const MAX_DEPTH: usize = 180;

/// A message as the trace keeps it.
#[derive(Debug)]
pub enum Redacted {
    /// The message, values replaced (or an auth message reduced), uncompressed.
    Kept(Vec<u8>),
    /// The message as it was forwarded (raw traces: not an auth message).
    Unchanged,
    /// Not kept: the reason (its BSON did not walk, or its opcode is a legacy one
    /// whose layout is not redacted).
    Dropped(String),
}

/// Redacts the messages of one trace under one secret.
pub struct Redactor {
    key: hmac::Key,
    /// Replace literal values (else only auth is reduced: `--capture-values`).
    values: bool,
    /// Per connection, the request ids of sensitive requests awaiting their replies.
    sensitive: HashMap<ConnId, Vec<i32>>,
    /// Small whole numbers' stand-ins: a keyed shuffle of `0..SMALL` (the
    /// negatives' magnitudes are shuffled apart), so a small number stays small.
    /// Analysis tells a quantity from an id by its size; a redacted trace must
    /// give the report the live analysis gave.
    small: Vec<u16>,
    small_negative: Vec<u16>,
}

/// Whole numbers below this magnitude keep a stand-in below it (the analyzers'
/// bound for a small number).
const SMALL: i64 = 1_000;
const SMALLEST_NEGATIVE: i64 = 1 - SMALL;

/// Sensitive requests remembered per connection (a driver has one in flight).
const MAX_SENSITIVE_PENDING: usize = 16;

impl Redactor {
    /// A redactor under a fresh random secret.
    pub fn new() -> Result<Redactor, String> {
        use ring::rand::SecureRandom;
        let mut secret = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut secret).map_err(|_| "no system randomness".to_string())?;
        Ok(Redactor::with_secret(&secret))
    }

    /// A redactor that keeps values and reduces only auth messages (raw traces).
    pub fn auth_only() -> Redactor {
        Redactor { values: false, ..Redactor::with_secret(b"") }
    }

    /// A redactor under a given secret (tests).
    pub fn with_secret(secret: &[u8]) -> Redactor {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let mut r = Redactor {
            key,
            values: true,
            sensitive: HashMap::new(),
            small: Vec::new(),
            small_negative: Vec::new(),
        };
        r.small = r.shuffle(b's', SMALL as usize);
        r.small_negative = r.shuffle(b'-', SMALL as usize - 1);
        r
    }

    /// A keyed permutation of `0..n` (Fisher-Yates on keyed draws).
    fn shuffle(&self, tag: u8, n: usize) -> Vec<u16> {
        let mut p: Vec<u16> = (0..n as u16).collect();
        for i in (1..p.len()).rev() {
            let draw = self.bytes(tag, &(i as u32).to_le_bytes(), 4);
            let j = u32::from_le_bytes(draw.try_into().unwrap_or_default()) as usize % (i + 1);
            p.swap(i, j);
        }
        p
    }

    /// Forgets a connection.
    pub fn closed(&mut self, conn: ConnId) {
        self.sensitive.remove(&conn);
    }

    /// The message as the trace keeps it.
    pub fn message(&mut self, conn: ConnId, dir: Direction, frame: &Frame) -> Redacted {
        let plain = match frame.header.op_code {
            OpCode::Compressed => match OpCompressed::decode(&frame.bytes).and_then(|c| c.decompress()) {
                Ok(b) => b.to_vec(),
                Err(e) => return Redacted::Dropped(e.to_string()),
            },
            _ => frame.bytes.to_vec(),
        };
        let Some(header) = MsgHeader::peek(&plain) else {
            return Redacted::Dropped("no header".into());
        };
        match dir {
            Direction::ToServer => self.request(conn, header, plain),
            Direction::ToClient => self.reply(conn, header, plain),
        }
    }

    fn request(&mut self, conn: ConnId, header: MsgHeader, mut plain: Vec<u8>) -> Redacted {
        let decoded = Frame::from_bytes(bytes::Bytes::copy_from_slice(&plain))
            .and_then(|f| Message::decode(&f))
            .map_err(|e| e.to_string());
        let message = match decoded {
            Ok(m) => m,
            Err(_) if !self.values => return Redacted::Unchanged,
            Err(e) => return Redacted::Dropped(e),
        };
        if let Some(c) = Command::from_message(&message) {
            if c.is_sensitive() {
                let ids = self.sensitive.entry(conn).or_default();
                if ids.len() >= MAX_SENSITIVE_PENDING {
                    ids.remove(0);
                }
                ids.push(header.request_id);
                return sensitive_request(&c, &message, header);
            }
            // A hello naming the user whose mechanisms it asks for: the name goes.
            if c.is_hello() && c.body.get("saslSupportedMechs").ok().flatten().is_some() {
                return sensitive_request(&c, &message, header);
            }
        }
        if !self.values {
            return Redacted::Unchanged;
        }
        match self.walk_message(&mut plain, header, true) {
            Ok(()) => Redacted::Kept(plain),
            Err(e) => Redacted::Dropped(e),
        }
    }

    fn reply(&mut self, conn: ConnId, header: MsgHeader, mut plain: Vec<u8>) -> Redacted {
        if let Some(ids) = self.sensitive.get_mut(&conn) {
            if let Some(i) = ids.iter().position(|&id| id == header.response_to) {
                ids.remove(i);
                return sensitive_reply(&plain, header);
            }
        }
        // An auth reply whose request the trace never saw (dropped, or before it
        // began): known by its content.
        if looks_like_auth_reply(&plain) {
            return sensitive_reply(&plain, header);
        }
        if !self.values {
            return Redacted::Unchanged;
        }
        match self.walk_message(&mut plain, header, false) {
            Ok(()) => Redacted::Kept(plain),
            Err(e) => Redacted::Dropped(e),
        }
    }

    /// Redacts every document of an OP_MSG, OP_QUERY or OP_REPLY in place.
    fn walk_message(&self, m: &mut [u8], header: MsgHeader, request: bool) -> Result<(), String> {
        let top = if request { Mode::Command } else { Mode::Reply };
        let mut at = HEADER_LEN;
        match header.op_code {
            OpCode::Msg => {
                let flags = MsgFlags(u32_at(m, at)?);
                at += 4;
                let end = if flags.contains(MsgFlags::CHECKSUM_PRESENT) { m.len() - 4 } else { m.len() };
                while at < end {
                    let kind = m[at];
                    at += 1;
                    match kind {
                        0 => {
                            let len = doc_len(m, at)?;
                            self.document(m, at, top, 0)?;
                            at += len;
                        }
                        1 => {
                            let size = i32_at(m, at)? as usize;
                            let stop =
                                at.checked_add(size).filter(|&s| s <= end).ok_or("sequence overruns")?;
                            let name_end = cstring_end(m, at + 4)?;
                            let mode = sequence_mode(&m[at + 4..name_end], request);
                            let mut d = name_end + 1;
                            while d < stop {
                                let len = doc_len(m, d)?;
                                self.document(m, d, mode, 1)?;
                                d += len;
                            }
                            at = stop;
                        }
                        k => return Err(format!("section kind {k}")),
                    }
                }
                if flags.contains(MsgFlags::CHECKSUM_PRESENT) {
                    let crc = crc32c::crc32c(&m[..end]);
                    m[end..].copy_from_slice(&crc.to_le_bytes());
                }
                Ok(())
            }
            OpCode::Query if request => {
                at += 4;
                let name_end = cstring_end(m, at)?;
                let is_command = m[at..name_end].ends_with(b".$cmd");
                at = name_end + 1 + 8;
                let len = doc_len(m, at)?;
                self.document(m, at, if is_command { Mode::Command } else { Mode::Data }, 0)?;
                if at + len < m.len() {
                    doc_len(m, at + len)?;
                }
                Ok(())
            }
            OpCode::Reply if !request => {
                at += 4 + 8 + 4 + 4;
                while at < m.len() {
                    let len = doc_len(m, at)?;
                    self.document(m, at, Mode::Reply, 0)?;
                    at += len;
                }
                Ok(())
            }
            op => Err(format!("{} is not kept in a redacted trace", op.name())),
        }
    }

    /// Redacts the document at `m[at..]` in the given mode.
    fn document(&self, m: &mut [u8], at: usize, mode: Mode, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("nested too deep to redact".into());
        }
        let len = doc_len(m, at)?;
        let end = at + len - 1;
        if m[end] != 0 {
            return Err("document not terminated".into());
        }
        // Whole-document decisions first.
        let mode = match mode {
            Mode::Reply if is_hello_reply(&m[at..at + len]) => return Ok(()),
            Mode::Cursor if is_catalog_cursor(&m[at..at + len]) => return Ok(()),
            Mode::Keep => return Ok(()),
            m => m,
        };
        let mut p = at + 4;
        let mut first = true;
        while p < end {
            let kind = m[p];
            let key_start = p + 1;
            let key_end = cstring_end(m, key_start)?;
            let value = key_end + 1;
            let size = value_len(m, kind, value)?;
            if value + size > end {
                return Err("element overruns its document".into());
            }
            let key = std::str::from_utf8(&m[key_start..key_end]).unwrap_or("").to_owned();
            let child = match mode {
                Mode::Command if first => first_value_mode(&key, kind),
                _ => child_mode(mode, &key, first),
            };
            self.value(m, kind, value, size, child, depth)?;
            first = false;
            p = value + size;
        }
        Ok(())
    }

    /// Redacts one value of `kind` at `m[at..at + size]`.
    fn value(
        &self,
        m: &mut [u8],
        kind: u8,
        at: usize,
        size: usize,
        mode: Mode,
        depth: usize,
    ) -> Result<(), String> {
        if mode == Mode::Keep {
            return Ok(());
        }
        let mode = if mode == Mode::Update && kind != 0x04 { Mode::Data } else { mode };
        let hash_all = matches!(mode, Mode::Data | Mode::Pattern);
        // Scalars are literals only in data and expressions; elsewhere they are names.
        let literal = matches!(mode, Mode::Data | Mode::Expr | Mode::Pattern);
        if !literal && !matches!(kind, 0x03 | 0x04) {
            return Ok(());
        }
        match kind {
            0x03 => self.document(m, at, mode, depth + 1),
            0x04 => {
                // An array's items take the array's mode (their keys are indexes); an
                // update that is an array is a pipeline.
                let mode = if mode == Mode::Update { Mode::Pipeline } else { mode };
                self.document(m, at, mode, depth + 1)
            }
            0x01 => {
                let v = f64::from_le_bytes(m[at..at + 8].try_into().unwrap_or_default());
                if hash_all {
                    let out = self.double(v);
                    m[at..at + 8].copy_from_slice(&out.to_le_bytes());
                }
                Ok(())
            }
            0x10 => {
                if hash_all {
                    let v = i64::from(i32::from_le_bytes(m[at..at + 4].try_into().unwrap_or_default()));
                    m[at..at + 4].copy_from_slice(&self.number(v).to_le_bytes());
                }
                Ok(())
            }
            0x12 => {
                if hash_all {
                    let v = i64::from_le_bytes(m[at..at + 8].try_into().unwrap_or_default());
                    m[at..at + 8].copy_from_slice(&i64::from(self.number(v)).to_le_bytes());
                }
                Ok(())
            }
            0x02 | 0x0D | 0x0E => {
                let start = match (mode, m.get(at + 4)) {
                    (Mode::Expr, Some(b'$')) => return Ok(()),
                    (Mode::Pattern, Some(b'^')) => at + 5,
                    _ => at + 4,
                };
                self.replace_text(m, start..at + size - 1);
                Ok(())
            }
            0x07 => {
                self.replace(m, b'o', at..at + 12);
                Ok(())
            }
            0x09 => {
                // A date within a century of the epoch, so it stays a printable date.
                let h = self.bytes(b't', &m[at..at + 8], 8);
                let ms = (u64::from_le_bytes(h.try_into().unwrap_or_default()) % 3_155_760_000_000) as i64;
                m[at..at + 8].copy_from_slice(&ms.to_le_bytes());
                Ok(())
            }
            0x05 => {
                self.replace(m, b'b', at + 5..at + size);
                Ok(())
            }
            0x13 => {
                self.replace(m, b'm', at..at + 16);
                Ok(())
            }
            0x0B => {
                // A regex: keep an anchor (the index advisor reads it), hash the rest.
                let pat_end = cstring_end(m, at)?;
                let start = if m.get(at) == Some(&b'^') { at + 1 } else { at };
                self.replace_text(m, start..pat_end);
                Ok(())
            }
            0x0C => {
                let n = i32_at(m, at)? as usize;
                self.replace_text(m, at + 4..at + 4 + n - 1);
                self.replace(m, b'o', at + 4 + n..at + 4 + n + 12);
                Ok(())
            }
            0x0F => {
                let n = i32_at(m, at + 4)? as usize;
                self.replace_text(m, at + 8..at + 8 + n - 1);
                self.document(m, at + 8 + n, Mode::Data, depth + 1)
            }
            // Booleans, nulls, timestamps, min/max keys, undefined: kept.
            _ => Ok(()),
        }
    }

    /// Replaces `m[r]` by its keyed hash.
    fn replace(&self, m: &mut [u8], tag: u8, r: std::ops::Range<usize>) {
        let out = self.bytes(tag, &m[r.clone()], r.len());
        m[r].copy_from_slice(&out);
    }

    /// Replaces the text `m[r]` by hashed text of the same length.
    fn replace_text(&self, m: &mut [u8], r: std::ops::Range<usize>) {
        let out = self.text(b's', &m[r.clone()]);
        m[r].copy_from_slice(&out);
    }

    /// A keyed hash of `tag` and `input`, `n` bytes long.
    fn bytes(&self, tag: u8, input: &[u8], n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 32);
        let mut counter = 0u32;
        while out.len() < n {
            let mut ctx = hmac::Context::with_key(&self.key);
            ctx.update(&[tag]);
            ctx.update(&counter.to_le_bytes());
            ctx.update(input);
            out.extend_from_slice(ctx.sign().as_ref());
            counter += 1;
        }
        out.truncate(n);
        out
    }

    /// Text of the same byte length, in `[a-z0-9]`: valid UTF-8, no NUL.
    fn text(&self, tag: u8, input: &[u8]) -> Vec<u8> {
        const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        if input.is_empty() {
            return Vec::new();
        }
        self.bytes(tag, input, input.len()).into_iter().map(|b| ALPHABET[b as usize % 36]).collect()
    }

    /// An integral number's stand-in: within int32, so it fits every numeric
    /// type and equal numbers of different types stay equal. A small number's
    /// is small, negative for a negative one (0 and positives shuffle together),
    /// and unique (a shuffle); a larger one's is a keyed hash in `SMALL..2^31`.
    fn number(&self, v: i64) -> i32 {
        match v {
            0..SMALL => i32::from(self.small[v as usize]),
            SMALLEST_NEGATIVE..0 => -i32::from(self.small_negative[(-v - 1) as usize]) - 1,
            _ => {
                let h = self.bytes(b'n', &v.to_le_bytes(), 4);
                let h = u32::from_le_bytes(h.try_into().unwrap_or_default()) & 0x7fff_ffff;
                (SMALL as u32 + h % (0x7fff_ffff - SMALL as u32)) as i32
            }
        }
    }

    fn double(&self, v: f64) -> f64 {
        if v.fract() == 0.0 && v.abs() < 9.2e18 {
            return f64::from(self.number(v as i64));
        }
        let h = self.bytes(b'd', &v.to_bits().to_le_bytes(), 4);
        f64::from(u32::from_le_bytes(h.try_into().unwrap_or_default()) & 0x7fff_ffff) + 0.5
    }
}

#[cfg(test)]
mod tests;
