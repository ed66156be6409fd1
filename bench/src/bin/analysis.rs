//! Analysis throughput and memory: the whole pipeline (decode, pairing, shapes,
//! table) fed from memory as fast as it takes it, on one thread.
//!
//! - throughput: the Rust driver's captured orders workload (wire/tests/fixtures/
//!   rust.stream, a realistic mix) plus the load generator's find/reply pairs,
//!   replayed until OPS operations; prints operations (request + reply) per second.
//! - memory: peak RSS after 10,000 distinct shapes spread over 1,000 connections, and
//!   RSS after 1M and after 10M operations (bounded state: the two must match).
//!
//! Usage: analysis [OPS] (default 2,000,000)

use std::time::Instant;

use bson::doc;
use bytes::Bytes;
use mongotap_analyzers::event::{Direction, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_bench::{find_reply, find_request};
use mongotap_wire::{Document, Frame, OpMsg};

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The captured mixed workload and the load generator's pairs, as (direction, frame).
fn corpus() -> Vec<(Direction, Frame)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../wire/tests/fixtures/rust.stream");
    let bytes = Bytes::from(std::fs::read(path).expect("the captured fixture"));
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let dir = if bytes[at] == b'C' { Direction::ToServer } else { Direction::ToClient };
        let len = i32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        out.push((dir, Frame::from_bytes(bytes.slice(at + 1..at + 1 + len)).unwrap()));
        at += 1 + len;
    }
    for i in 0..1000 {
        let id = 1_000_000 + i * 2;
        out.push((Direction::ToServer, Frame::from_bytes(Bytes::from(find_request(id))).unwrap()));
        out.push((Direction::ToClient, Frame::from_bytes(Bytes::from(find_reply(id + 1, id))).unwrap()));
    }
    out
}

/// Feeds the corpus round and round until `ops` operations; returns the wall-clock and
/// CPU seconds taken. CPU time is the steadier measure on a shared machine: time spent
/// waiting for a core does not count.
fn run(p: &mut Pipeline, corpus: &[(Direction, Frame)], ops: u64) -> (f64, f64) {
    let start = Instant::now();
    let cpu = cpu_seconds();
    let mut t = 1_000_000u64;
    while p.operations() < ops {
        for (dir, frame) in corpus {
            t += 10;
            p.feed(TapEvent::Message { conn: 1, dir: *dir, at: t, frame: frame.clone() });
        }
    }
    (start.elapsed().as_secs_f64(), cpu_seconds() - cpu)
}

/// This thread's time on a CPU so far (the first field of its schedstat, in ns).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).expect("a number") as f64 / 1e9
}

fn main() {
    let ops: u64 = std::env::args().nth(1).map_or(2_000_000, |s| s.parse().expect("OPS"));
    let corpus = corpus();
    let messages = corpus.len();

    let mut p = Pipeline::default();
    run(&mut p, &corpus, 100_000); // warm up
    let mut p = Pipeline::default();
    let (wall, cpu) = run(&mut p, &corpus, ops);
    let done = p.operations();
    println!(
        "analysis throughput: {done} operations ({} messages, corpus of {messages}) in {cpu:.2} s of CPU = {:.0} operations/s on one core ({:.0} per wall-clock second)",
        p.exchange_stats().requests + p.exchange_stats().replies,
        done as f64 / cpu,
        done as f64 / wall
    );
    assert_eq!(p.exchange_stats().parse_errors, 0);
    assert_eq!(p.exchange_stats().unpaired_replies, 0);

    // Memory: 10,000 distinct shapes over 1,000 connections.
    let before = rss_kib("VmRSS:");
    let mut p = Pipeline::default();
    let mut t = 1u64;
    for conn in 0..1000u64 {
        p.feed(TapEvent::Opened { conn, client: "127.0.0.1:1".parse().unwrap(), at: t });
    }
    for i in 0..10_000i32 {
        let conn = (i % 1000) as u64;
        let field = format!("field{i}");
        let req = OpMsg::new(Document::from_doc(&doc! {"find": "c", "filter": {field: 1}, "$db": "t"}))
            .encode(i * 2, 0);
        let rep = find_reply(i * 2 + 1, i * 2);
        t += 10;
        p.feed(TapEvent::Message {
            conn,
            dir: Direction::ToServer,
            at: t,
            frame: Frame::from_bytes(req).unwrap(),
        });
        p.feed(TapEvent::Message {
            conn,
            dir: Direction::ToClient,
            at: t + 5,
            frame: Frame::from_bytes(Bytes::from(rep)).unwrap(),
        });
    }
    assert_eq!(p.table().rows().len(), 10_000);
    println!(
        "memory: 10,000 shapes on 1,000 connections: RSS {:.1} MiB (the process had {:.1} MiB before; peak {:.1} MiB)",
        rss_kib("VmRSS:") as f64 / 1024.0,
        before as f64 / 1024.0,
        rss_kib("VmHWM:") as f64 / 1024.0
    );
    drop(p);

    // Bounded state: RSS after 1M operations equals RSS after 10M.
    let mut p = Pipeline::default();
    run(&mut p, &corpus, 1_000_000);
    let at_1m = rss_kib("VmRSS:");
    run(&mut p, &corpus, 10_000_000);
    let at_10m = rss_kib("VmRSS:");
    println!(
        "memory: RSS after {} operations {:.1} MiB, after {} operations {:.1} MiB ({} rows)",
        1_000_000,
        at_1m as f64 / 1024.0,
        p.operations(),
        at_10m as f64 / 1024.0,
        p.table().rows().len()
    );
}
