//! # mongotap-bench
//!
//! What the performance claims stand on. Nothing here is a test substitute: the
//! tests run against a real SecantusDB; these measure the proxy against a fast
//! upstream of our own so that SecantusDB's ~2k ops/s does not hide the proxy's cost.
//!
//! # Layout
//! - `bin/canned.rs`: a canned-reply MongoDB server (handshake and `find`).
//! - `bin/loadgen.rs`: a closed-loop raw-wire load generator with HDR latency.
//! - `bin/analysis.rs`: the analysis pipeline fed from memory as fast as it takes it,
//!   and its memory under many shapes and connections.
//! - `bin/stall.rs`: forwarding throughput with the analysis running and stalled.
//! - `benches/micro.rs`: criterion micro-benchmarks (decode, shapes, table).
//! - `proxy.sh`: direct vs haproxy vs mongotap, interleaved, with ratios.

use bson::doc;
use mongotap_wire::{Document, OpMsg};

/// The request the load generator sends: a `find` with a small filter.
pub fn find_request(request_id: i32) -> Vec<u8> {
    let body =
        doc! {"find": "items", "filter": {"sku": "P-100", "qty": {"$gt": 1}}, "limit": 1, "$db": "bench"};
    OpMsg::new(Document::from_doc(&body)).encode(request_id, 0).to_vec()
}

/// A `find` whose filter names `field`: one distinct shape per field name.
pub fn find_request_with_field(request_id: i32, field: &str) -> Vec<u8> {
    let body = doc! {"find": "items", "filter": {field: 1}, "$db": "bench"};
    OpMsg::new(Document::from_doc(&body)).encode(request_id, 0).to_vec()
}

/// An `insert` of one document holding `bytes` bytes of binary data (16,000,000
/// makes a document just under the 16 MiB limit).
pub fn insert_request(request_id: i32, bytes: usize) -> Vec<u8> {
    let data = bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![7; bytes] };
    let body = doc! {"insert": "blobs", "documents": [{"_id": request_id, "data": data}], "$db": "bench"};
    OpMsg::new(Document::from_doc(&body)).encode(request_id, 0).to_vec()
}

/// The canned server's reply to any OP_MSG: one small document, cursor closed.
pub fn find_reply(request_id: i32, response_to: i32) -> Vec<u8> {
    let body = doc! {"cursor": {"id": 0_i64, "ns": "bench.items", "firstBatch": [
    {"_id": 1, "sku": "P-100", "qty": 3, "name": "a small document"}]}, "ok": 1.0};
    OpMsg::new(Document::from_doc(&body)).encode(request_id, response_to).to_vec()
}

/// A field of this process's `/proc/self/status` in KiB (`VmRSS:`, `VmHWM:`).
pub fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs the `loadgen` binary next to this one with `args` and returns its ops/s.
pub fn loadgen(args: &[&str]) -> f64 {
    let exe = std::env::current_exe().expect("own path").with_file_name("loadgen");
    let out = std::process::Command::new(exe).args(args).output().expect("running loadgen");
    String::from_utf8_lossy(&out.stdout)
        .split('\t')
        .nth(2)
        .and_then(|v| v.trim().parse().ok())
        .expect("loadgen output")
}
