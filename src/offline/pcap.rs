//! pcap and pcapng captures (tcpdump, dumpcap, Wireshark) of MongoDB traffic: the
//! file format is read by the `pcap-file` crate; the link, IP and TCP headers here;
//! the byte streams are put back together by [`super::tcp`].

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use bytes::{Bytes, BytesMut};

use mongotap_events::TapEvent;
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError};

use super::tcp::{Reassembler, Segment};
use super::{OfflineOptions, Progress};

/// pcap's magic numbers (micro- and nanosecond, either byte order) and pcapng's
/// section header block type.
pub fn looks_like_capture(head: &[u8]) -> bool {
    matches!(
        head.get(..4),
        Some(
            [0xd4, 0xc3, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0xc3, 0xd4]
                | [0x4d, 0x3c, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0x3c, 0x4d]
        ) | Some([0x0a, 0x0d, 0x0d, 0x0a])
    )
}

/// Reads a capture and hands its MongoDB messages to `emit` as tap events.
pub fn read(
    path: &Path,
    emit: &mut dyn FnMut(TapEvent),
    opts: &OfflineOptions,
) -> Result<Vec<String>, String> {
    let (progress, file) = Progress::of_file(path, opts.progress)?;
    read_with(file, &path.display().to_string(), emit, opts, progress)
}

/// Reads a capture from any source (`name` is for messages).
pub fn read_from(
    input: impl Read,
    name: &str,
    emit: &mut dyn FnMut(TapEvent),
    opts: &OfflineOptions,
) -> Result<Vec<String>, String> {
    read_with(input, name, emit, opts, Progress::new(Path::new(name), opts.progress))
}

/// The bytes read and not yet parsed. Replies' frames share the buffer they were
/// read into (see `tcp::emit_message`), so each read goes into a buffer no frame
/// holds any longer: the last one, or one given up earlier, or a new one. (The
/// crate's own readers zero an 8 MB buffer and fault it in page by page: a third
/// of the time spent on a 10 MB capture.)
struct Window<R> {
    input: R,
    /// The current buffer, whole: bytes read up to `end`, parsed up to `start`.
    buf: Bytes,
    start: usize,
    end: usize,
    /// What a buffer holds: grows only for a block larger than it.
    size: usize,
    /// Buffers given up while frames still shared them, oldest first.
    spares: Vec<Bytes>,
}

/// A window's size to begin with.
const WINDOW: usize = 256 << 10;

/// Buffers given up and kept to read into again. The frames in flight between the
/// reading and the analysis (a few hundred operations) hold a few of them.
const SPARES: usize = 16;

/// A block larger than this is not a packet anyone captured: the file is damaged.
const MAX_BLOCK: usize = 256 << 20;

/// What a parser made of the window.
enum Parsed {
    /// A block or packet of this many bytes was handled.
    Used(usize),
    /// The block goes on past the bytes read so far.
    Short,
    Failed(String),
}

impl<R: Read> Window<R> {
    fn new(input: R) -> Self {
        Window { input, buf: Bytes::new(), start: 0, end: 0, size: WINDOW, spares: Vec::new() }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The buffer [`Window::bytes`] lies in, for frames to share.
    fn shared(&self) -> &Bytes {
        &self.buf
    }

    /// Moves the unparsed bytes to the front of a buffer no frame holds and reads
    /// more after them (growing the buffer when a block fills it); false at the end
    /// of the input.
    fn more(&mut self) -> Result<bool, String> {
        let kept = self.end - self.start;
        if kept == self.size {
            if self.size >= MAX_BLOCK {
                return Err(format!("a block larger than {} MB", MAX_BLOCK >> 20));
            }
            self.size *= 2;
        }
        let mut next = match std::mem::take(&mut self.buf).try_into_mut() {
            // No frame shares it: the unparsed bytes move to its front.
            Ok(mut same) if same.len() == self.size => {
                same.copy_within(self.start..self.end, 0);
                same
            }
            old => {
                let old = old.map_or_else(|shared| shared, BytesMut::freeze);
                let mut next = self.spare();
                next[..kept].copy_from_slice(&old[self.start..self.end]);
                self.give_up(old);
                next
            }
        };
        let read = loop {
            match self.input.read(&mut next[kept..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                read => break read,
            }
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                (self.buf, self.start, self.end) = (next.freeze(), 0, kept);
                return Err(e.to_string());
            }
        };
        (self.buf, self.start, self.end) = (next.freeze(), 0, kept + n);
        Ok(n > 0)
    }

    /// A buffer of the window's size: a spare no frame holds any longer, or a new
    /// one (zeroed: memory fresh from the system is zero already, so nothing is
    /// written twice; a read into memory never written would have it zeroed first).
    fn spare(&mut self) -> BytesMut {
        while let Some(i) = self.spares.iter().position(Bytes::is_unique) {
            let spare = self.spares.remove(i).try_into_mut().expect("no frame holds it");
            if spare.len() == self.size {
                return spare;
            }
        }
        BytesMut::zeroed(self.size)
    }

    /// Keeps `b` to read into again once its frames are gone (not an empty one,
    /// nor one of a smaller size than the window's now).
    fn give_up(&mut self, b: Bytes) {
        if b.len() != self.size {
            return;
        }
        if self.spares.len() == SPARES {
            self.spares.remove(0);
        }
        self.spares.push(b);
    }

    /// Acts on what the parser made of the bytes: consumes them, or reads more.
    /// `Ok(false)` at a clean end of the input (nothing left unparsed).
    fn advance(&mut self, parsed: Parsed) -> Result<bool, String> {
        match parsed {
            Parsed::Used(n) => {
                self.start += n;
                Ok(true)
            }
            Parsed::Short => match self.more()? {
                true => Ok(true),
                false if self.bytes().is_empty() => Ok(false),
                false => Err("the capture ends inside a block".into()),
            },
            Parsed::Failed(e) => Err(e),
        }
    }
}

/// What a parser's result says to the window.
fn parsed<T>(before: usize, r: Result<(&[u8], T), PcapError>, then: impl FnOnce(T)) -> Parsed {
    match r {
        Ok((rest, value)) => {
            then(value);
            Parsed::Used(before - rest.len())
        }
        Err(PcapError::IncompleteBuffer) => Parsed::Short,
        Err(e) => Parsed::Failed(e.to_string()),
    }
}

fn read_with(
    input: impl Read,
    name: &str,
    emit: &mut dyn FnMut(TapEvent),
    opts: &OfflineOptions,
    mut progress: Progress,
) -> Result<Vec<String>, String> {
    let mut w = Window::new(input);
    while w.bytes().len() < 4 && w.more().map_err(|e| format!("{name}: {e}"))? {}
    let head: [u8; 4] = w
        .bytes()
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("{name}: too short for a capture"))?;
    let mut tcp = Reassembler::new(opts.port);
    let mut packets = 0u64;
    let mut not_tcp = 0u64;
    let mut on_packet =
        |link: DataLink, ts: std::time::Duration, data: &[u8], shared: &Bytes, tcp: &mut Reassembler| {
            packets += 1;
            progress.tick(packets);
            match parse(link, data) {
                Some(seg) => {
                    tcp.segment(ts.as_micros() as u64, Segment { shared: Some(shared), ..seg }, emit)
                }
                None => not_tcp += 1,
            }
        };
    let mut error = None;
    if head == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut ng: Option<PcapNgParser> = None;
        // The link types and timestamp units of this section's interfaces, by id.
        let mut links: Vec<DataLink> = Vec::new();
        let mut units: Vec<u8> = Vec::new();
        loop {
            let (bytes, shared) = (w.bytes(), w.shared());
            let step = match &mut ng {
                None => parsed(bytes.len(), PcapNgParser::new(bytes), |p| ng = Some(p)),
                Some(p) => parsed(bytes.len(), p.next_block(bytes), |block| match block {
                    Block::SectionHeader(_) => {
                        links.clear();
                        units.clear();
                    }
                    Block::InterfaceDescription(i) => {
                        links.push(i.linktype);
                        let resol = i.options.iter().find_map(|o| match o {
                            pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
                            _ => None,
                        });
                        units.push(resol.unwrap_or(6));
                    }
                    Block::EnhancedPacket(p) => {
                        let id = p.interface_id as usize;
                        let link = links.get(id).copied().unwrap_or(DataLink::ETHERNET);
                        // The crate hands over the raw count as nanoseconds; its unit is
                        // the interface's if_tsresol (microseconds when absent).
                        let ts =
                            timestamp(p.timestamp.as_nanos() as u64, units.get(id).copied().unwrap_or(6));
                        on_packet(link, ts, &p.data, shared, &mut tcp);
                    }
                    Block::SimplePacket(p) => {
                        let link = links.first().copied().unwrap_or(DataLink::ETHERNET);
                        on_packet(link, std::time::Duration::ZERO, &p.data, shared, &mut tcp);
                    }
                    _ => {}
                }),
            };
            match w.advance(step) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) if ng.is_none() => return Err(format!("{name}: {e}")),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
    } else {
        let mut header: Option<PcapParser> = None;
        loop {
            let (bytes, shared) = (w.bytes(), w.shared());
            let step = match &header {
                None => parsed(bytes.len(), PcapParser::new(bytes), |p| header = Some(p)),
                Some(h) => {
                    let link = h.header().datalink;
                    parsed(bytes.len(), h.next_packet(bytes), |p| {
                        on_packet(link, p.timestamp, &p.data, shared, &mut tcp)
                    })
                }
            };
            match w.advance(step) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) if header.is_none() => return Err(format!("{name}: {e}")),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
    }
    progress.done(packets);
    tcp.finish(emit);
    let s = tcp.stats();
    let mut notes = vec![format!(
        "{packets} packets, {} TCP segments with data on {} connections; {} messages",
        s.segments, s.connections, s.messages
    )];
    if s.other_segments > 0 {
        notes.push(format!("{} segments of other ports were left out", s.other_segments));
    }
    if not_tcp > 0 {
        notes.push(format!(
            "{not_tcp} packets were not TCP over IPv4/IPv6 (or were IP fragments) and were skipped"
        ));
    }
    if s.retransmitted_bytes > 0 {
        notes.push(format!("{} bytes retransmitted or overlapping were read once", s.retransmitted_bytes));
    }
    if s.missing_bytes > 0 || s.skipped_bytes > 0 {
        notes.push(format!(
            "{} bytes were missing from the capture ({} holes) and {} bytes around them skipped until the next whole message",
            s.missing_bytes, s.holes, s.skipped_bytes
        ));
    }
    if s.mid_stream > 0 {
        notes.push(format!(
            "{} connections had started before the capture and were picked up at their next message",
            s.mid_stream
        ));
    }
    if let Some(e) = error {
        notes.push(format!(
            "{name}: the capture ends with an unreadable block ({e}); everything before it was read"
        ));
    }
    Ok(notes)
}

/// A pcapng timestamp of `raw` units of `resol` (if_tsresol: 10^-n seconds, or
/// 2^-n with the top bit set).
fn timestamp(raw: u64, resol: u8) -> std::time::Duration {
    let per_second: f64 =
        if resol & 0x80 == 0 { 10f64.powi(i32::from(resol)) } else { 2f64.powi(i32::from(resol & 0x7f)) };
    std::time::Duration::from_secs_f64(raw as f64 / per_second)
}

/// The TCP segment in a link-layer frame, if it is one.
fn parse(link: DataLink, data: &[u8]) -> Option<Segment<'_>> {
    let ip = match link {
        DataLink::ETHERNET => {
            let mut at = 12;
            let mut ethertype = u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]);
            // 802.1Q / QinQ tags.
            while ethertype == 0x8100 || ethertype == 0x88a8 {
                at += 4;
                ethertype = u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]);
            }
            match ethertype {
                0x0800 | 0x86dd => data.get(at + 2..)?,
                _ => return None,
            }
        }
        DataLink::LINUX_SLL => data.get(16..)?,
        DataLink::LINUX_SLL2 => data.get(20..)?,
        DataLink::NULL | DataLink::LOOP => data.get(4..)?,
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => data,
        _ => return None,
    };
    match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
            if ip.get(9) != Some(&6) || frag & 0x3fff != 0 || ihl < 20 {
                return None;
            }
            let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
            let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
            // The IP length trims the Ethernet padding of short frames.
            tcp(src, dst, ip.get(ihl..total.min(ip.len()))?)
        }
        6 => {
            if ip.get(6) != Some(&6) {
                return None;
            }
            let len = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            let octets = |at: usize| -> Option<[u8; 16]> { ip.get(at..at + 16)?.try_into().ok() };
            let src = IpAddr::V6(Ipv6Addr::from(octets(8)?));
            let dst = IpAddr::V6(Ipv6Addr::from(octets(24)?));
            tcp(src, dst, ip.get(40..(40 + len).min(ip.len()))?)
        }
        _ => None,
    }
}

fn tcp(src: IpAddr, dst: IpAddr, t: &[u8]) -> Option<Segment<'_>> {
    let sport = u16::from_be_bytes([*t.first()?, *t.get(1)?]);
    let dport = u16::from_be_bytes([*t.get(2)?, *t.get(3)?]);
    let seq = u32::from_be_bytes(t.get(4..8)?.try_into().ok()?);
    let offset = usize::from(t.get(12)? >> 4) * 4;
    let flags = *t.get(13)?;
    Some(Segment {
        src: SocketAddr::new(src, sport),
        dst: SocketAddr::new(dst, dport),
        seq,
        syn: flags & 0x02 != 0,
        ack: flags & 0x10 != 0,
        fin: flags & 0x01 != 0,
        rst: flags & 0x04 != 0,
        payload: t.get(offset..)?,
        shared: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_analyzers::pipeline::Feed;
    use mongotap_analyzers::pipeline::Pipeline;
    use mongotap_analyzers::report::{json, Report, RunFacts};
    use mongotap_wire::{Compressor, Document, OpCompressed, OpMsg};
    use pcap_file::pcap::{PcapPacket, PcapWriter};

    /// An Ethernet/IPv4/TCP frame carrying `payload`.
    fn packet(from_client: bool, seq: u32, payload: &[u8]) -> Vec<u8> {
        let (src, dst, sport, dport) = if from_client {
            ([10, 0, 0, 1], [10, 0, 0, 2], 50000u16, 27017u16)
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1], 27017, 50000)
        };
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 20 + payload.len()) as u16;
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn a_capture_starting_mid_stream_with_compressed_messages_is_read() {
        let req = |id: i32| {
            OpMsg::new(Document::from_doc(&doc! {"find": "orders", "filter": {"k": id}, "$db": "shop"}))
                .encode(id, 0)
        };
        let rep = |id: i32| {
            let d =
                doc! {"cursor": {"firstBatch": [{"_id": id}], "id": 0i64, "ns": "shop.orders"}, "ok": 1.0};
            OpMsg::new(Document::from_doc(&d)).encode(100 + id, id)
        };
        let mut packets: Vec<(bool, Vec<u8>)> = Vec::new();
        // The first request's first half was sent before the capture began.
        let first = req(1);
        packets.push((true, first[20..].to_vec()));
        packets.push((false, rep(1).to_vec()));
        for (id, c) in [(2, Compressor::Snappy), (3, Compressor::Zlib), (4, Compressor::Zstd)] {
            packets.push((true, OpCompressed::compress(&req(id), c).to_vec()));
            packets.push((false, OpCompressed::compress(&rep(id), c).to_vec()));
        }
        let mut file = Vec::new();
        {
            let mut w = PcapWriter::new(&mut file).unwrap();
            let (mut cseq, mut sseq) = (5000u32, 9000u32);
            for (i, (from_client, payload)) in packets.iter().enumerate() {
                let seq = if *from_client { &mut cseq } else { &mut sseq };
                let frame = packet(*from_client, *seq, payload);
                *seq = seq.wrapping_add(payload.len() as u32);
                let ts = std::time::Duration::from_millis(1_700_000_000_000 + i as u64);
                w.write_packet(&PcapPacket::new(ts, frame.len() as u32, &frame)).unwrap();
            }
        }
        let mut p = Pipeline::default();
        let notes = read_from(&file[..], "mem", &mut |ev| p.feed(ev), &OfflineOptions::default()).unwrap();
        assert!(notes.iter().any(|n| n.contains("started before the capture")), "{notes:?}");
        let r = Report::build(&p, RunFacts::default());
        assert_eq!(r.totals.operations, 3, "the cut request is skipped, the three compressed ones read");
        let compressed: Vec<(&str, u64)> =
            r.traffic.compressed_messages.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(compressed, vec![("snappy", 2), ("zlib", 2), ("zstd", 2)]);
        assert_eq!(r.traffic.unpaired_replies, 1, "the cut request's reply");
        assert_eq!(r.access_patterns[0].count, 3);
    }

    /// A legacy pcap of one find and its reply, after a packet larger than the
    /// reader's first window (an ARP frame padded to 600 KB, not TCP).
    fn capture_with_a_large_packet() -> Vec<u8> {
        let req = OpMsg::new(Document::from_doc(&doc! {"find": "orders", "filter": {"k": 1}, "$db": "shop"}));
        let d = doc! {"cursor": {"firstBatch": [{"_id": 1}], "id": 0i64, "ns": "shop.orders"}, "ok": 1.0};
        let rep = OpMsg::new(Document::from_doc(&d));
        let mut large = vec![0u8; 600 << 10];
        large[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let frames = [large, packet(true, 1, &req.encode(1, 0)), packet(false, 1, &rep.encode(2, 1))];
        let mut file = Vec::new();
        {
            let header = pcap_file::pcap::PcapHeader { snaplen: 1 << 20, ..Default::default() };
            let mut w = pcap_file::pcap::PcapWriter::with_header(&mut file, header).unwrap();
            for (i, f) in frames.iter().enumerate() {
                let ts = std::time::Duration::from_millis(1_700_000_000_000 + i as u64);
                w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).unwrap();
            }
        }
        file
    }

    #[test]
    fn a_packet_larger_than_the_window_and_a_cut_tail_are_read_around() {
        let file = capture_with_a_large_packet();
        let mut p = Pipeline::default();
        let notes = read_from(&file[..], "mem", &mut |ev| p.feed(ev), &OfflineOptions::default()).unwrap();
        assert!(notes.iter().any(|n| n.contains("1 packets were not TCP")), "{notes:?}");
        assert_eq!(p.operations(), 1);

        // Cut inside the reply: the request is read, and the note says where it ended.
        let cut = &file[..file.len() - 10];
        let mut p = Pipeline::default();
        let notes = read_from(cut, "mem", &mut |ev| p.feed(ev), &OfflineOptions::default()).unwrap();
        assert!(notes.iter().any(|n| n.contains("ends with an unreadable block")), "{notes:?}");
        assert_eq!(p.operations(), 0, "the request waits for a reply that was cut off");

        let err = read_from(&file[..10], "mem", &mut |_| {}, &OfflineOptions::default()).unwrap_err();
        assert!(err.starts_with("mem: "), "{err}");
    }

    #[test]
    fn the_window_reads_into_a_buffer_again_once_no_frame_holds_it() {
        let data: Vec<u8> = (0..WINDOW * 3).map(|i| (i % 251) as u8).collect();
        let mut w = Window::new(&data[..]);
        assert!(w.more().unwrap());
        let first = w.shared().as_ptr();
        // A frame holds the first buffer: the next read goes into another.
        let frame = w.shared().slice_ref(&w.bytes()[10..20]);
        w.start = w.end - 5;
        assert!(w.more().unwrap());
        assert_ne!(w.shared().as_ptr(), first);
        assert_eq!(&w.bytes()[..5], &data[WINDOW - 5..WINDOW], "the unparsed bytes come along");
        assert_eq!(&frame[..], &data[10..20]);
        // Once it is gone, the first buffer is read into again.
        drop(frame);
        let held = w.shared().slice_ref(&w.bytes()[..1]);
        w.start = w.end;
        assert!(w.more().unwrap());
        assert_eq!(w.shared().as_ptr(), first);
        assert_eq!(w.bytes(), &data[2 * WINDOW - 5..3 * WINDOW - 5]);
        drop(held);
        // Nothing holds the current one: it is read into in place.
        let current = w.shared().as_ptr();
        w.start = w.end;
        assert!(w.more().unwrap());
        assert_eq!(w.shared().as_ptr(), current);
        assert_eq!(w.bytes(), &data[3 * WINDOW - 5..]);
        w.start = w.end;
        assert!(!w.more().unwrap(), "the end of the input");
    }

    #[test]
    fn a_capture_read_through_many_buffers_gives_what_one_buffer_gives() {
        // Replies that share buffers, kept alive in the pipeline's batches while
        // later buffers are read: the same report as a capture read in one piece.
        let mut file = Vec::new();
        {
            let mut w = PcapWriter::new(&mut file).unwrap();
            let (mut cs, mut ss) = (1000u32, 9000u32);
            for i in 1..=2000 {
                let q = OpMsg::new(Document::from_doc(&doc! {"find": "c", "filter": {"_id": i}, "$db": "d"}))
                    .encode(i, 0)
                    .to_vec();
                let docs: Vec<bson::Document> =
                    (0..20).map(|k| doc! {"_id": i, "k": k, "pad": "x".repeat(40)}).collect();
                let r = OpMsg::new(Document::from_doc(
                    &doc! {"cursor": {"firstBatch": docs, "id": 0i64, "ns": "d.c"}, "ok": 1.0},
                ))
                .encode(10_000 + i, i)
                .to_vec();
                for (client, bytes) in [(true, q), (false, r)] {
                    let seq = if client { &mut cs } else { &mut ss };
                    let data = packet(client, *seq, &bytes);
                    *seq = seq.wrapping_add(bytes.len() as u32);
                    let at = std::time::Duration::from_micros(u64::from(i as u32) * 100);
                    w.write_packet(&PcapPacket::new(at, data.len() as u32, &data)).unwrap();
                }
            }
        }
        assert!(file.len() > 4 * WINDOW, "several buffers: {} bytes", file.len());
        let report = |p: &Pipeline| json::render(&Report::build(p, RunFacts::default()));
        let mut one = Pipeline::default();
        read_from(&file[..], "mem", &mut |ev| one.feed(ev), &OfflineOptions::default()).unwrap();
        let mut two = Pipeline::default();
        two.split(|front| read_from(&file[..], "mem", &mut |ev| front.feed(ev), &OfflineOptions::default()))
            .unwrap();
        assert_eq!(one.operations(), 2000);
        assert_eq!(two.operations(), 2000);
        assert_eq!(report(&two), report(&one));
    }

    #[test]
    fn a_read_that_fails_leaves_the_unparsed_bytes_in_the_window() {
        /// Gives its bytes once, then fails.
        struct Once(Option<Vec<u8>>);
        impl Read for Once {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                match self.0.take() {
                    Some(b) => {
                        buf[..b.len()].copy_from_slice(&b);
                        Ok(b.len())
                    }
                    None => Err(std::io::Error::other("the disk went away")),
                }
            }
        }
        let mut w = Window::new(Once(Some(b"abcdef".to_vec())));
        assert!(w.more().unwrap());
        w.start = 2;
        assert_eq!(w.more().unwrap_err(), "the disk went away");
        assert_eq!(w.bytes(), b"cdef");
    }
}
