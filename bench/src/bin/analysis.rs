//! Analysis throughput and memory: the whole pipeline (decode, pairing, shapes,
//! table, every detector) fed from memory as fast as it takes it, on one thread.
//!
//! - throughput: the Rust driver's captured orders workload (wire/tests/fixtures/
//!   rust.stream, a realistic mix) plus the load generator's find/reply pairs,
//!   replayed until OPS operations; prints operations (request + reply) per second,
//!   with every detector and with none (what the detectors cost), and on a blog
//!   whose every page is an N+1 (the detectors' busiest case); and on bench/proxy.sh's
//!   own traffic (the load generator's find and the canned reply): the analysis
//!   thread's work per operation there, measured alone (in the proxy it costs more,
//!   beside two busy forwarding threads).
//! - memory: peak RSS after 10,000 distinct shapes spread over 1,000 connections, and
//!   RSS after 1M and after 10M operations (bounded state: the two must match).
//!
//! Usage: analysis [OPS] [--throughput-only] (default 2,000,000; the flag skips the
//! memory runs, for instruction counts under `valgrind --tool=callgrind`)

use std::time::Instant;

use bson::doc;
use bytes::Bytes;
use mongotap_analyzers::detectors::Detectors;
use mongotap_analyzers::event::{Direction, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_bench::{find_reply, find_request, rss_kib};
use mongotap_wire::{Document, Frame, OpMsg};

/// The allocator of the mongotap binary, so the analysis is measured as it runs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// A blog whose every page is an N+1: 20 posts, then each post's author, one query
/// each, from a client with four pooled connections. Ids are numbers so every round
/// of the corpus repeats the same values (which also makes the author reads redundant).
fn n_plus_one_corpus() -> Vec<TapEvent> {
    use mongotap_analyzers::script::Script;
    let mut s = Script::new();
    let pool: Vec<u64> =
        (0..4).map(|i| s.connect(&format!("10.0.0.7:{}", 5000 + i), "blog", "PyMongo 4.20.1")).collect();
    for page in 0..50i64 {
        let posts: Vec<bson::Document> = (0..20)
            .map(|i| doc! {"_id": page * 20 + i, "authorId": (page * 7 + i * 3) % 40, "title": "a title", "tags": ["x", "y"]})
            .collect();
        s.find(pool[0], "blog.posts", doc! {"status": "published"}, posts.clone());
        for (i, p) in posts.iter().enumerate() {
            let a = p.get_i64("authorId").unwrap();
            s.find_one(pool[i % 4], "blog.users", doc! {"_id": a}, Some(doc! {"_id": a, "name": "someone"}));
        }
        s.wait_ms(1_500);
    }
    s.events().iter().filter(|e| matches!(e, TapEvent::Message { .. })).cloned().collect()
}

/// Feeds the corpus round and round until `ops` operations; returns the wall-clock and
/// CPU seconds taken. CPU time is the steadier measure on a shared machine: time spent
/// waiting for a core does not count.
fn run(p: &mut Pipeline, corpus: &[(Direction, Frame)], ops: u64) -> (f64, f64) {
    let events: Vec<TapEvent> = corpus
        .iter()
        .map(|(dir, frame)| TapEvent::Message { conn: 1, dir: *dir, at: 0, frame: frame.clone() })
        .collect();
    run_events(p, &events, ops)
}

fn run_events(p: &mut Pipeline, events: &[TapEvent], ops: u64) -> (f64, f64) {
    let start = Instant::now();
    let cpu = cpu_seconds();
    let mut t = 1_000_000u64;
    let mut round = 0u64;
    while p.operations() < ops {
        round += 1;
        for ev in events {
            t += 10;
            p.feed(match ev {
                TapEvent::Message { conn, dir, frame, .. } => {
                    TapEvent::Message { conn: *conn, dir: *dir, at: t, frame: frame.clone() }
                }
                other => other.clone(),
            });
        }
        if round % 16 == 0 {
            p.expire(t);
        }
    }
    (start.elapsed().as_secs_f64(), cpu_seconds() - cpu)
}

/// This thread's time on a CPU so far (the first field of its schedstat, in ns).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).expect("a number") as f64 / 1e9
}

/// 1,000 connections asking 10,000 distinct find shapes of one collection.
fn ten_thousand_shapes() -> Pipeline {
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
    p
}

fn main() {
    let ops: u64 = std::env::args().nth(1).map_or(2_000_000, |s| s.parse().expect("OPS"));
    let corpus = corpus();
    let messages = corpus.len();

    let mut p = Pipeline::default();
    run(&mut p, &corpus, 100_000); // warm up
                                   // Interleaved, so both see the same machine: every detector, then none, twice.
    let mut rates = [Vec::new(), Vec::new()];
    let mut last = None;
    let mut found: Vec<String> = Vec::new();
    for _ in 0..2 {
        for (i, detectors) in [Detectors::default(), Detectors::none()].into_iter().enumerate() {
            let mut p = Pipeline::with_detectors(Default::default(), Default::default(), detectors);
            let (wall, cpu) = run(&mut p, &corpus, ops / 2);
            rates[i].push((p.operations() as f64 / cpu, p.operations() as f64 / wall));
            assert_eq!(p.exchange_stats().parse_errors, 0);
            assert_eq!(p.exchange_stats().unpaired_replies, 0);
            if i == 0 {
                last = Some((
                    p.operations(),
                    p.exchange_stats().requests + p.exchange_stats().replies,
                    cpu,
                    wall,
                ));
                found = p.findings().iter().map(|f| format!("{} on {}", f.kind, f.namespace)).collect();
                if std::env::var_os("DUMP").is_some() {
                    for f in p.findings() {
                        eprintln!(
                            "{} {:?} {:?} {}",
                            f.kind,
                            f.extra.get("link"),
                            f.extra.get("child_namespace"),
                            f.evidence
                        );
                    }
                }
            }
        }
    }
    let (done, msgs, cpu, wall) = last.expect("ran");
    let best = |v: &Vec<(f64, f64)>| v.iter().map(|r| r.0).fold(0.0, f64::max);
    println!(
        "analysis throughput, every detector on: {done} operations ({msgs} messages, corpus of {messages}) in {cpu:.2} s of CPU = {:.0} operations/s on one core ({:.0} per wall-clock second); best of 2: {:.0} (target 700000)",
        done as f64 / cpu,
        done as f64 / wall,
        best(&rates[0]),
    );
    println!(
        "detectors' cost: {:.0} operations/s with every detector, {:.0} with none (best of 2 each, interleaved) -> {:.0}% of the analysis",
        best(&rates[0]),
        best(&rates[1]),
        100.0 * (1.0 - best(&rates[0]) / best(&rates[1]))
    );
    println!(
        "findings on the replayed corpus: {}",
        if found.is_empty() { "none".into() } else { found.join(", ") }
    );
    let blog = n_plus_one_corpus();
    let mut p = Pipeline::default();
    let (_, cpu) = run_events(&mut p, &blog, ops / 4);
    let findings = p.findings();
    println!(
        "N+1-heavy corpus (a blog page of 20 posts, then one author query per post, over a pool of 4): {:.0} operations/s on one core; findings: {}",
        p.operations() as f64 / cpu,
        findings.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>().join(", ")
    );

    // What bench/proxy.sh's analysis thread is fed: the load generator's find and
    // the canned server's reply, over 32 connections (measured alone: in the proxy
    // the same work costs more, beside the forwarding threads).
    let pairs: Vec<TapEvent> = (0..32u64)
        .flat_map(|conn| {
            let id = 2_000_000 + conn as i32 * 2;
            [(Direction::ToServer, find_request(id)), (Direction::ToClient, find_reply(id + 1, id))].map(
                |(dir, bytes)| TapEvent::Message {
                    conn,
                    dir,
                    at: 0,
                    frame: Frame::from_bytes(Bytes::from(bytes)).unwrap(),
                },
            )
        })
        .collect();
    let mut p = Pipeline::default();
    let (_, cpu) = run_events(&mut p, &pairs, ops / 4);
    println!(
        "the proxy benchmark's traffic (the load generator's find and the canned reply, 32 connections): {:.0} operations/s on one core = {:.2} us per operation",
        p.operations() as f64 / cpu,
        cpu * 1e6 / p.operations() as f64
    );

    if std::env::args().nth(2).as_deref() == Some("--throughput-only") {
        return;
    }

    // Memory: 10,000 distinct shapes over 1,000 connections.
    let before = rss_kib("VmRSS:");
    let p = ten_thousand_shapes();
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

    // After the memory figures, so its allocations do not show in them.
    let p = ten_thousand_shapes();
    // A report is built every --report-interval and for /metrics, under the pipeline
    // lock: with thousands of shapes it must stay quick.
    let started = std::time::Instant::now();
    let findings = p.findings().len();
    let detectors_ms = started.elapsed().as_secs_f64() * 1000.0;
    let started = std::time::Instant::now();
    mongotap_analyzers::report::Report::build(&p, mongotap_analyzers::report::RunFacts::default());
    println!(
        "report over 10,000 shapes on one collection: built in {:.0} ms, of which the detectors' findings ({findings}) {detectors_ms:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
}
