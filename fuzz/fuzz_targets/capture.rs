//! Arbitrary bytes as a pcap or pcapng file (the first byte picks which header goes
//! in front): the file readers, the link and IP layers, reassembly and the pipeline.
//! Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mongotap::offline::{pcap, OfflineOptions};
use mongotap_analyzers::pipeline::Pipeline;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let mut file = Vec::new();
    match pick % 3 {
        // pcap, microseconds, little-endian, Ethernet.
        0 => {
            file.extend_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
            file.extend_from_slice(&[0; 8]);
            file.extend_from_slice(&65535u32.to_le_bytes());
            file.extend_from_slice(&1u32.to_le_bytes());
        }
        // pcap, Linux cooked.
        1 => {
            file.extend_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
            file.extend_from_slice(&[0; 8]);
            file.extend_from_slice(&65535u32.to_le_bytes());
            file.extend_from_slice(&113u32.to_le_bytes());
        }
        // Anything: pcapng or garbage.
        _ => {}
    }
    file.extend_from_slice(rest);
    let mut p = Pipeline::default();
    let _ = pcap::read_from(&file[..], "fuzz", &mut |ev| p.feed(ev), &OfflineOptions::default());
});
