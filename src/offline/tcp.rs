//! TCP reassembly for captures: each connection's two byte streams put back in
//! order and cut into MongoDB messages. Retransmitted and overlapping bytes are read
//! once; segments that arrive out of order wait (bounded) for the hole before them;
//! a hole that never fills (the capture missed a segment) is skipped and counted,
//! and so is a connection that started before the capture: both are picked up
//! again at the next plausible message header.

use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};
use mongotap_events::{ConnId, Direction, Micros, TapEvent};
use mongotap_wire::{Frame, MsgHeader, HEADER_LEN, MAX_MESSAGE_SIZE};

/// Out-of-order bytes held per direction before the hole in front of them is
/// given up on.
const MAX_PENDING_BYTES: usize = 4 << 20;

/// Out-of-order segments held per direction.
const MAX_PENDING_SEGMENTS: usize = 4096;

/// Messages above this are not analysed (as the proxy's default).
const MAX_ANALYSED: usize = 16 * 1024 * 1024 + 16 * 1024;

/// One TCP segment, as the capture shows it.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Sequence number of the first payload byte (of the SYN itself, on a SYN).
    pub seq: u32,
    /// Flags.
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    /// The data.
    pub payload: &'a [u8],
    /// The buffer `payload` lies in, when replies cut from it may share it
    /// rather than be copied out (see [`emit_message`]).
    pub shared: Option<&'a Bytes>,
}

/// What reassembly saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments with data.
    pub segments: u64,
    /// Connections seen.
    pub connections: u64,
    /// Messages cut from the streams.
    pub messages: u64,
    /// Bytes seen twice (retransmissions, overlaps): read once.
    pub retransmitted_bytes: u64,
    /// Bytes the capture never had (holes skipped).
    pub missing_bytes: u64,
    /// Holes skipped.
    pub holes: u64,
    /// Bytes dropped while looking for the next message after a hole or at a
    /// connection's start (part of a message whose beginning was missed).
    pub skipped_bytes: u64,
    /// Connections that started before the capture.
    pub mid_stream: u64,
    /// Segments of flows not on the server's port (with `--port`), left out.
    pub other_segments: u64,
}

/// Puts connections back together.
pub struct Reassembler {
    port: Option<u16>,
    flows: HashMap<(SocketAddr, SocketAddr), Flow>,
    next_conn: ConnId,
    stats: TcpStats,
    /// The last segment's time, for what is read at the end.
    last_at: Micros,
}

struct Flow {
    conn: ConnId,
    /// To the server, to the client.
    halves: [Half; 2],
    /// Counted as started before the capture.
    mid_stream: bool,
}

#[derive(Default)]
struct Half {
    /// The next sequence number expected.
    next: Option<u32>,
    /// Whether `buf` starts at a message boundary.
    synced: bool,
    buf: BytesMut,
    /// Segments beyond a hole: (sequence number, bytes).
    pending: Vec<(u32, Vec<u8>)>,
    pending_bytes: usize,
    fin: bool,
}

impl Reassembler {
    /// A reassembler; `port` names the server's port when known.
    pub fn new(port: Option<u16>) -> Reassembler {
        Reassembler { port, flows: HashMap::default(), next_conn: 1, stats: TcpStats::default(), last_at: 0 }
    }

    /// What it saw so far.
    pub fn stats(&self) -> TcpStats {
        self.stats
    }

    /// Takes one segment captured at `at`.
    pub fn segment(&mut self, at: Micros, s: Segment<'_>, emit: &mut dyn FnMut(TapEvent)) {
        self.last_at = at;
        if self.port.is_some_and(|p| s.src.port() != p && s.dst.port() != p) {
            self.stats.other_segments += 1;
            return;
        }
        let forward = (s.src, s.dst);
        let backward = (s.dst, s.src);
        // A client's SYN on addresses in use: the old connection's end was missed and
        // these are a new one (a retransmitted SYN names the same first sequence).
        if s.syn && !s.ack {
            let isn = s.seq.wrapping_add(1);
            if let Some(old) = self.flows.get(&forward).filter(|f| f.halves[0].next != Some(isn)) {
                let conn = old.conn;
                self.flows.remove(&forward);
                emit(TapEvent::Closed { conn, at });
            }
        }
        let (key, dir) = if self.flows.contains_key(&forward) {
            (forward, Direction::ToServer)
        } else if self.flows.contains_key(&backward) {
            (backward, Direction::ToClient)
        } else {
            if s.payload.is_empty() && !s.syn {
                return;
            }
            let from_client = self.sender_is_client(&s);
            let key = if from_client { forward } else { backward };
            let conn = self.next_conn;
            self.next_conn += 1;
            self.stats.connections += 1;
            self.flows
                .insert(key, Flow { conn, halves: [Half::default(), Half::default()], mid_stream: false });
            emit(TapEvent::Opened { conn, client: key.0, at });
            (key, if from_client { Direction::ToServer } else { Direction::ToClient })
        };
        let flow = self.flows.get_mut(&key).expect("found or inserted above");
        let conn = flow.conn;
        let half = &mut flow.halves[usize::from(dir == Direction::ToClient)];
        if s.syn {
            half.next = Some(s.seq.wrapping_add(1));
            half.synced = true;
            return;
        }
        if !s.payload.is_empty() {
            self.stats.segments += 1;
            if half.next.is_none() {
                // No SYN seen: the connection started before the capture.
                half.next = Some(s.seq);
                half.synced = false;
                if !std::mem::replace(&mut flow.mid_stream, true) {
                    self.stats.mid_stream += 1;
                }
            }
            let half = &mut flow.halves[usize::from(dir == Direction::ToClient)];
            half.data(
                s.seq,
                s.payload,
                &mut Sink { conn, dir, at, shared: s.shared, stats: &mut self.stats, emit },
            );
        }
        let half =
            &mut self.flows.get_mut(&key).expect("present").halves[usize::from(dir == Direction::ToClient)];
        if s.fin || s.rst {
            half.fin = true;
            half.give_up_holes(&mut Sink { conn, dir, at, shared: None, stats: &mut self.stats, emit });
        }
        let flow = self.flows.get(&key).expect("present");
        if s.rst || flow.halves.iter().all(|h| h.fin) {
            self.flows.remove(&key);
            emit(TapEvent::Closed { conn, at });
        }
    }

    /// At the end of the capture: what waited behind holes is read.
    pub fn finish(&mut self, emit: &mut dyn FnMut(TapEvent)) {
        let mut flows: Vec<_> = self.flows.drain().collect();
        flows.sort_by_key(|(_, f)| f.conn);
        for (_, mut f) in flows {
            for (i, h) in f.halves.iter_mut().enumerate() {
                let dir = if i == 0 { Direction::ToServer } else { Direction::ToClient };
                h.give_up_holes(&mut Sink {
                    conn: f.conn,
                    dir,
                    at: self.last_at,
                    shared: None,
                    stats: &mut self.stats,
                    emit,
                });
            }
        }
    }

    /// Which end of a new connection is the client: the one sending the SYN, else
    /// the one not on the server's port, else the one whose first message is a
    /// request (`responseTo` 0), else the one on the higher (ephemeral) port.
    fn sender_is_client(&self, s: &Segment<'_>) -> bool {
        if let Some(p) = self.port {
            if s.dst.port() == p {
                return true;
            }
            if s.src.port() == p {
                return false;
            }
        }
        if s.syn {
            return !s.ack;
        }
        if s.dst.port() == 27017 {
            return true;
        }
        if s.src.port() == 27017 {
            return false;
        }
        if let Some(h) = MsgHeader::peek(s.payload) {
            return h.response_to == 0;
        }
        s.src.port() > s.dst.port()
    }
}

/// Where a half's messages go, and what they are stamped with.
struct Sink<'a> {
    conn: ConnId,
    dir: Direction,
    at: Micros,
    shared: Option<&'a Bytes>,
    stats: &'a mut TcpStats,
    emit: &'a mut dyn FnMut(TapEvent),
}

impl Sink<'_> {
    fn emit(&mut self, ev: TapEvent) {
        (self.emit)(ev)
    }
}

impl Half {
    fn data(&mut self, seq: u32, payload: &[u8], out: &mut Sink<'_>) {
        let next = self.next.expect("set before data");
        let d = seq.wrapping_sub(next) as i32;
        if d > 0 {
            if self.pending.len() < MAX_PENDING_SEGMENTS {
                self.pending_bytes += payload.len();
                self.pending.push((seq, payload.to_vec()));
            }
            if self.pending_bytes > MAX_PENDING_BYTES || self.pending.len() >= MAX_PENDING_SEGMENTS {
                self.skip_hole(out);
            }
            return;
        }
        self.take(seq, payload, out);
        self.drain_pending(out);
    }

    /// Appends the part of a segment starting at or before `next` that is new.
    fn take(&mut self, seq: u32, bytes: &[u8], out: &mut Sink<'_>) {
        let overlap = self.next.expect("set").wrapping_sub(seq) as usize;
        if overlap >= bytes.len() {
            out.stats.retransmitted_bytes += bytes.len() as u64;
            return;
        }
        out.stats.retransmitted_bytes += overlap as u64;
        self.append(&bytes[overlap..], out);
    }

    /// Appends what waited and now follows on.
    fn drain_pending(&mut self, out: &mut Sink<'_>) {
        loop {
            let next = self.next.expect("set");
            let Some(i) = self.pending.iter().position(|(s, _)| (s.wrapping_sub(next) as i32) <= 0) else {
                return;
            };
            let (seq, bytes) = self.pending.swap_remove(i);
            self.pending_bytes -= bytes.len();
            self.take(seq, &bytes, out);
        }
    }

    /// Gives up on the first hole: what was before it is incomplete, and reading
    /// goes on from the first segment after it.
    fn skip_hole(&mut self, out: &mut Sink<'_>) {
        let next = self.next.expect("set");
        let Some(first) = self.pending.iter().map(|(s, _)| *s).min_by_key(|s| s.wrapping_sub(next)) else {
            return;
        };
        out.stats.holes += 1;
        out.stats.missing_bytes += u64::from(first.wrapping_sub(next));
        out.stats.skipped_bytes += self.buf.len() as u64;
        self.buf.clear();
        self.synced = false;
        self.next = Some(first);
        self.drain_pending(out);
    }

    /// Skips every hole left (the stream ended or the capture did).
    fn give_up_holes(&mut self, out: &mut Sink<'_>) {
        while !self.pending.is_empty() {
            self.skip_hole(out);
        }
    }

    fn append(&mut self, mut bytes: &[u8], out: &mut Sink<'_>) {
        self.next = Some(self.next.expect("set").wrapping_add(bytes.len() as u32));
        // Whole messages at the front of a segment are taken from it directly (a
        // reply shares the capture's buffer, a request is copied once). Only a
        // message split across segments goes through the stream's buffer.
        if self.synced && self.buf.is_empty() {
            while let Cut::Whole(len) | Cut::TooLarge(len) = cut(bytes) {
                emit_message(&bytes[..len], out);
                bytes = &bytes[len..];
            }
        }
        if bytes.is_empty() {
            return;
        }
        self.buf.extend_from_slice(bytes);
        loop {
            if !self.synced {
                match (0..self.buf.len()).find(|&i| plausible(&self.buf[i..], out.dir)) {
                    Some(i) => {
                        out.stats.skipped_bytes += i as u64;
                        self.buf.advance(i);
                        self.synced = true;
                    }
                    None => {
                        // Keep a tail that may be the start of a header still arriving.
                        let keep = self.buf.len().min(HEADER_LEN + 8);
                        let drop = self.buf.len() - keep;
                        out.stats.skipped_bytes += drop as u64;
                        self.buf.advance(drop);
                        return;
                    }
                }
            }
            match cut(&self.buf) {
                Cut::More => return,
                Cut::Insane => {
                    self.synced = false;
                    out.stats.skipped_bytes += 1;
                    self.buf.advance(1);
                }
                Cut::Whole(len) | Cut::TooLarge(len) => {
                    emit_message(&self.buf[..len], out);
                    self.buf.advance(len);
                }
            }
        }
    }
}

/// What the bytes at a message boundary hold.
enum Cut {
    /// Not yet a whole message.
    More,
    /// A header no message has: the stream is out of step.
    Insane,
    /// A whole message of this length.
    Whole(usize),
    /// A whole message of this length, above what is analysed.
    TooLarge(usize),
}

fn cut(b: &[u8]) -> Cut {
    let Some(h) = MsgHeader::peek(b) else { return Cut::More };
    let len = h.message_length as usize;
    if h.message_length < HEADER_LEN as i32 || len > MAX_MESSAGE_SIZE {
        Cut::Insane
    } else if b.len() < len {
        Cut::More
    } else if len > MAX_ANALYSED {
        Cut::TooLarge(len)
    } else {
        Cut::Whole(len)
    }
}

/// Emits one whole message. A reply that lies in the capture's buffer shares it: it
/// completes its operation at once, so it holds that buffer only while its batch is
/// analysed (a 10 MB capture: 867 of its 1,489 page faults were these copies, each
/// into memory not touched before). Anything else is copied: a request waits for its
/// reply, a message from the stream's buffer keeps that buffer from being reused,
/// and neither should keep a whole buffer of the capture alive meanwhile.
fn emit_message(b: &[u8], out: &mut Sink<'_>) {
    out.stats.messages += 1;
    let (conn, dir, at) = (out.conn, out.dir, out.at);
    if b.len() > MAX_ANALYSED {
        let header = MsgHeader::peek(b).expect("a whole message has a header");
        out.emit(TapEvent::TooLarge { conn, dir, at, header });
        return;
    }
    let bytes = match out.shared.filter(|s| dir == Direction::ToClient && lies_in(b, s)) {
        Some(s) => s.slice_ref(b),
        None => Bytes::copy_from_slice(b),
    };
    match Frame::from_bytes(bytes) {
        Ok(frame) => out.emit(TapEvent::Message { conn, dir, at, frame }),
        Err(error) => out.emit(TapEvent::Unframeable { conn, dir, at, error }),
    }
}

/// Whether `part` lies within `whole`'s bytes.
fn lies_in(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr_range(), whole.as_ptr_range());
    w.start <= p.start && p.end <= w.end
}

/// Whether a message plausibly starts at `b`: a sane length and opcode, and for
/// OP_MSG known flags and a section kind; a request answers nothing, a reply
/// answers something. When the whole message is there and more follows, the next
/// one must look plausible too.
fn plausible(b: &[u8], dir: Direction) -> bool {
    plausible_one(b, dir) && {
        let len = i32::from_le_bytes(b[0..4].try_into().expect("checked")) as usize;
        b.len() <= len || b.len() < len + HEADER_LEN || plausible_one(&b[len..], dir)
    }
}

fn plausible_one(b: &[u8], dir: Direction) -> bool {
    let Some(h) = MsgHeader::peek(b) else { return false };
    let len = h.message_length;
    if len < 21 || len as usize > MAX_MESSAGE_SIZE {
        return false;
    }
    let answers = h.response_to != 0;
    if answers != (dir == Direction::ToClient) {
        return false;
    }
    let u32_at = |at: usize| b.get(at..at + 4).map(|x| u32::from_le_bytes(x.try_into().expect("four")));
    match h.op_code.as_i32() {
        2013 => {
            let Some(flags) = u32_at(16) else { return true };
            flags & !(1 | 2 | 1 << 16) == 0 && b.get(20).is_none_or(|&k| k <= 1)
        }
        2012 => {
            let (Some(orig), Some(size)) = (u32_at(16), u32_at(20)) else { return true };
            matches!(orig, 2013 | 2004 | 1)
                && (size as usize) <= MAX_MESSAGE_SIZE
                && b.get(24).is_none_or(|&c| c <= 3)
        }
        2004 => dir == Direction::ToServer,
        1 => dir == Direction::ToClient,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Compressor, Document, OpCompressed, OpMsg};

    const C: &str = "10.0.0.1:50000";
    const S: &str = "10.0.0.2:27017";

    fn req(id: i32) -> Vec<u8> {
        let d = doc! {"find": "orders", "filter": {"k": id}, "$db": "shop"};
        OpMsg::new(Document::from_doc(&d)).encode(id, 0).to_vec()
    }

    fn reply(id: i32) -> Vec<u8> {
        let d = doc! {"cursor": {"firstBatch": [{"_id": id}], "id": 0i64, "ns": "shop.orders"}, "ok": 1.0};
        OpMsg::new(Document::from_doc(&d)).encode(1000 + id, id).to_vec()
    }

    fn seg<'a>(from_client: bool, seq: u32, payload: &'a [u8]) -> Segment<'a> {
        let (src, dst) = if from_client { (C, S) } else { (S, C) };
        Segment {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            syn: false,
            ack: true,
            fin: false,
            rst: false,
            payload,
            shared: None,
        }
    }

    fn messages(evs: &[TapEvent]) -> Vec<(Direction, i32)> {
        evs.iter()
            .filter_map(|e| match e {
                TapEvent::Message { dir, frame, .. } => Some((*dir, frame.header.request_id)),
                _ => None,
            })
            .collect()
    }

    /// A client stream of `n` requests and the server's replies, as segments of at
    /// most `mss` bytes: (from_client, seq, bytes).
    fn streams(n: i32, mss: usize) -> Vec<(bool, u32, Vec<u8>)> {
        let (mut cs, mut ss) = (1000u32, 9000u32);
        let mut out = Vec::new();
        for i in 1..=n {
            for (client, bytes) in [(true, req(i)), (false, reply(i))] {
                for chunk in bytes.chunks(mss) {
                    let seq = if client { &mut cs } else { &mut ss };
                    out.push((client, *seq, chunk.to_vec()));
                    *seq = seq.wrapping_add(chunk.len() as u32);
                }
            }
        }
        out
    }

    fn run(segs: &[(bool, u32, Vec<u8>)]) -> (Vec<TapEvent>, TcpStats) {
        let mut r = Reassembler::new(None);
        let mut evs = Vec::new();
        for (i, (c, seq, b)) in segs.iter().enumerate() {
            r.segment(i as u64, seg(*c, *seq, b), &mut |e| evs.push(e));
        }
        r.finish(&mut |e| evs.push(e));
        (evs, r.stats())
    }

    #[test]
    fn a_reply_in_the_shared_buffer_shares_it_and_a_request_is_copied() {
        // One buffer holding a request, a reply, and a reply split in two segments.
        let (q, r, split) = (req(1), reply(1), reply(2));
        let mut all = Vec::new();
        for part in [&q[..], &r[..], &split[..]] {
            all.extend_from_slice(part);
        }
        let buf = Bytes::from(all);
        let (a, b) = (q.len(), q.len() + r.len());
        let half = b + split.len() / 2;
        let mut rs = Reassembler::new(None);
        let mut evs = Vec::new();
        // The handshake: each side's stream starts at a message.
        for (client, isn) in [(true, 999), (false, 8999)] {
            let s = Segment { syn: true, ack: !client, ..seg(client, isn, &[]) };
            rs.segment(0, s, &mut |e| evs.push(e));
        }
        let server = 9000 + r.len() as u32;
        for (client, seq, range) in [
            (true, 1000, 0..a),
            (false, 9000, a..b),
            (false, server, b..half),
            (false, server + (half - b) as u32, half..buf.len()),
        ] {
            let s = Segment { shared: Some(&buf), ..seg(client, seq, &buf[range]) };
            rs.segment(0, s, &mut |e| evs.push(e));
        }
        let frames: Vec<(Direction, &Bytes)> = evs
            .iter()
            .filter_map(|e| match e {
                TapEvent::Message { dir, frame, .. } => Some((*dir, &frame.bytes)),
                _ => None,
            })
            .collect();
        assert_eq!(frames.len(), 3);
        let within = |f: &Bytes| lies_in(f, &buf);
        assert_eq!(frames[0].0, Direction::ToServer);
        assert!(!within(frames[0].1), "a request waits for its reply: copied");
        assert_eq!((frames[1].0, &frames[1].1[..]), (Direction::ToClient, &r[..]));
        assert!(within(frames[1].1), "a whole reply in the buffer shares it");
        assert_eq!(&frames[2].1[..], &split[..]);
        assert!(!within(frames[2].1), "a reply put together from two segments is copied");
    }

    #[test]
    fn in_order_segments_give_every_message() {
        let (evs, s) = run(&streams(5, 7));
        assert_eq!(messages(&evs).len(), 10);
        assert!(matches!(evs[0], TapEvent::Opened { .. }));
        assert_eq!((s.missing_bytes, s.retransmitted_bytes), (0, 0));
    }

    #[test]
    fn segments_of_several_messages_and_of_part_of_one_give_each_once() {
        // Three requests in one segment, the third cut after its header; then its
        // rest with the fourth whole; then bytes no message starts with, then a fifth.
        let (r1, r2, r3, r4, r5) = (req(1), req(2), req(3), req(4), req(5));
        let first = [&r1[..], &r2[..], &r3[..20]].concat();
        let second = [&r3[20..], &r4[..]].concat();
        let garbage = vec![0xffu8; 40];
        let mut segs = Vec::new();
        let mut seq = 1000u32;
        for b in [first, second, garbage, r5] {
            let len = b.len() as u32;
            segs.push((true, seq, b));
            seq = seq.wrapping_add(len);
        }
        let (evs, s) = run(&segs);
        let ids: Vec<i32> = messages(&evs).iter().map(|m| m.1).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        assert_eq!(s.messages, 5);
        assert_eq!(s.skipped_bytes, 40);
        for e in &evs {
            if let TapEvent::Message { frame, .. } = e {
                assert_eq!(frame.bytes, req(frame.header.request_id), "a message's bytes are its own");
            }
        }
    }

    #[test]
    fn reordered_and_retransmitted_segments_are_put_back_in_order_once() {
        let mut segs = streams(5, 10);
        segs.swap(3, 5);
        segs.swap(10, 11);
        let dup = segs[7].clone();
        segs.insert(9, dup);
        let (evs, s) = run(&segs);
        let m = messages(&evs);
        assert_eq!(m.len(), 10, "{m:?}");
        assert!(s.retransmitted_bytes > 0);
        assert_eq!(s.missing_bytes, 0);
    }

    #[test]
    fn a_missing_segment_loses_its_message_only() {
        let mut segs = streams(6, 16);
        // A segment in the middle of the third request.
        let i = segs
            .iter()
            .position(|(c, _, b)| *c && b.len() == 16 && segs.iter().filter(|x| x.0).count() > 0)
            .unwrap()
            + 14;
        let gone = segs.remove(i);
        assert!(gone.0, "a client segment");
        let (evs, s) = run(&segs);
        let m = messages(&evs);
        let requests = m.iter().filter(|(d, _)| *d == Direction::ToServer).count();
        assert_eq!(requests, 5, "{m:?}");
        assert_eq!(m.iter().filter(|(d, _)| *d == Direction::ToClient).count(), 6);
        assert_eq!(s.holes, 1);
        assert_eq!(s.missing_bytes, 16);
    }

    #[test]
    fn a_capture_that_starts_mid_stream_picks_up_at_the_next_message() {
        let segs = streams(5, 9);
        // Start in the middle of the first request and of the first reply.
        let first_reply = segs.iter().position(|(c, _, _)| !c).unwrap();
        let mut cut: Vec<_> = segs[2..first_reply].to_vec();
        cut.extend(segs[first_reply + 3..].iter().cloned());
        let (evs, s) = run(&cut);
        let m = messages(&evs);
        assert_eq!(
            m.iter().filter(|(d, _)| *d == Direction::ToServer).map(|x| x.1).collect::<Vec<_>>(),
            vec![2, 3, 4, 5]
        );
        assert_eq!(
            m.iter().filter(|(d, _)| *d == Direction::ToClient).map(|x| x.1).collect::<Vec<_>>(),
            vec![1002, 1003, 1004, 1005]
        );
        assert!(s.skipped_bytes > 0);
        assert_eq!(s.mid_stream, 1);
    }

    #[test]
    fn compressed_messages_pass_as_they_are() {
        let z = OpCompressed::compress(&req(1), Compressor::Snappy).to_vec();
        let mut r = Reassembler::new(Some(27017));
        let mut evs = Vec::new();
        r.segment(0, seg(true, 1, &z), &mut |e| evs.push(e));
        assert_eq!(messages(&evs), vec![(Direction::ToServer, 1)]);
    }

    #[test]
    fn fin_from_both_sides_closes_and_sequence_numbers_wrap() {
        let mut r = Reassembler::new(None);
        let mut evs = Vec::new();
        let a = req(1);
        let start = u32::MAX - 10;
        r.segment(0, seg(true, start, &a[..20]), &mut |e| evs.push(e));
        r.segment(1, seg(true, start.wrapping_add(20), &a[20..]), &mut |e| evs.push(e));
        let mut fin = seg(true, start.wrapping_add(a.len() as u32), &[]);
        fin.fin = true;
        r.segment(2, fin, &mut |e| evs.push(e));
        let mut fin2 = seg(false, 5, &[]);
        fin2.fin = true;
        r.segment(3, fin2, &mut |e| evs.push(e));
        assert_eq!(messages(&evs), vec![(Direction::ToServer, 1)]);
        assert!(matches!(evs.last(), Some(TapEvent::Closed { conn: 1, .. })));
    }
}
