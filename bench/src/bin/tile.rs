//! Makes a large capture from a small real one, for `bench/offline.sh`: the capture
//! written again and again, each copy later in time than the last and its clients at
//! addresses of their own (127.K.K.1 for copy K), so every copy's connections are
//! new connections to the same server. Reproducible: the same input gives the same
//! output, byte for byte.
//!
//!   tile IN.pcapng OUT.pcapng SERVER_PORT TARGET_MB

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::time::Duration;

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: tile IN.pcapng OUT.pcapng SERVER_PORT TARGET_MB");
        std::process::exit(2);
    }
    let port: u16 = args[3].parse().expect("SERVER_PORT is a port number");
    let target = args[4].parse::<u64>().expect("TARGET_MB is a number") << 20;
    let mut blocks: Vec<Block<'static>> = Vec::new();
    let mut r =
        PcapNgReader::new(BufReader::new(File::open(&args[1]).expect("opening IN"))).expect("a pcapng file");
    let section = r.section().clone();
    while let Some(b) = r.next_block() {
        blocks.push(b.expect("a readable block").into_owned());
    }
    let times: Vec<Duration> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::EnhancedPacket(p) => Some(p.timestamp),
            _ => None,
        })
        .collect();
    let (first, last) =
        (times.iter().min().copied().unwrap_or_default(), times.iter().max().copied().unwrap_or_default());
    // The raw timestamp's unit is the interface's; a copy starts a second (in the
    // coarsest unit, microseconds) after the last one ended.
    let span = last - first + Duration::from_secs(1);
    let mut w = PcapNgWriter::with_section_header(
        BufWriter::with_capacity(1 << 20, File::create(&args[2]).expect("creating OUT")),
        section,
    )
    .expect("writing OUT");
    let (mut written, mut copy) = (0u64, 0u32);
    while written < target {
        for b in &blocks {
            match b {
                Block::InterfaceDescription(_) if copy > 0 => {}
                Block::EnhancedPacket(p) => {
                    let mut data = p.data.to_vec();
                    readdress(&mut data, port, copy);
                    written += data.len() as u64;
                    let moved = EnhancedPacketBlock {
                        interface_id: p.interface_id,
                        timestamp: p.timestamp + span * copy,
                        original_len: p.original_len,
                        data: data.into(),
                        options: vec![],
                    };
                    w.write_block(&Block::EnhancedPacket(moved)).expect("writing OUT");
                }
                other if copy == 0 => {
                    w.write_block(other).expect("writing OUT");
                }
                _ => {}
            }
        }
        copy += 1;
    }
    eprintln!("{copy} copies, {} MB of packet data", written >> 20);
}

/// Moves the client's end of an Ethernet/IPv4/TCP frame to 127.K.K.1 (K from the
/// copy number); the server's end (its port is `port`) stays.
fn readdress(frame: &mut [u8], port: u16, copy: u32) {
    if frame.len() < 14 + 20 + 4 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
        return;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let tcp = 14 + ihl;
    if frame.len() < tcp + 4 || frame[14 + 9] != 6 {
        return;
    }
    let sport = u16::from_be_bytes([frame[tcp], frame[tcp + 1]]);
    let client = if sport == port { 14 + 16 } else { 14 + 12 };
    let k = copy + 1;
    frame[client..client + 4].copy_from_slice(&[127, (k >> 8) as u8, k as u8, 1]);
}
