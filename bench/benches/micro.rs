//! Criterion micro-benchmarks: frame decode, shape normalisation, table update, and
//! the whole analysis of one request/reply pair. `cargo bench -p mongotap-bench`.

use std::hint::black_box;

use bson::{doc, RawDocumentBuf};
use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mongotap_analyzers::event::{Direction, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::shape;
use mongotap_bench::{find_reply, find_request};
use mongotap_wire::{Command, Frame, Message};

fn decode(c: &mut Criterion) {
    let req = Bytes::from(find_request(7));
    let mut g = c.benchmark_group("wire");
    g.throughput(Throughput::Elements(1));
    g.bench_function("frame_parse", |b| {
        b.iter(|| {
            let mut buf = BytesMut::from(&req[..]);
            black_box(Frame::parse(&mut buf).unwrap())
        })
    });
    let frame = Frame::from_bytes(req.clone()).unwrap();
    g.bench_function("message_decode_and_command_view", |b| {
        b.iter(|| {
            let m = Message::decode(black_box(&frame)).unwrap();
            black_box(Command::from_message(&m).map(|c| c.namespace()));
        })
    });
    g.finish();
}

fn shapes(c: &mut Criterion) {
    let filter = RawDocumentBuf::try_from(&doc! {
        "customerId": 42, "status": "open", "total": {"$gte": 100, "$lt": 500}, "tags": {"$in": ["a", "b", "c"]}
    })
    .unwrap();
    let mut g = c.benchmark_group("shape");
    g.throughput(Throughput::Elements(1));
    g.bench_function("filter_4_predicates", |b| {
        b.iter(|| black_box(shape::ShapeJson::build(|o| shape::filter(o, black_box(&filter)))))
    });
    let v = shape::ShapeJson::build(|o| shape::filter(o, &filter));
    g.bench_function("fingerprint", |b| {
        b.iter(|| {
            black_box(
                shape::Fingerprint::new().part("shop.orders").part("find").shape(black_box(&v)).finish(),
            )
        })
    });
    g.finish();
}

fn pipeline(c: &mut Criterion) {
    let req = Frame::from_bytes(Bytes::from(find_request(1))).unwrap();
    let rep = Frame::from_bytes(Bytes::from(find_reply(2, 1))).unwrap();
    let mut p = Pipeline::default();
    let mut t = 0u64;
    let mut g = c.benchmark_group("analysis");
    g.throughput(Throughput::Elements(1));
    g.bench_function("request_reply_pair_into_table", |b| {
        b.iter(|| {
            t += 10;
            p.feed(TapEvent::Message { conn: 1, dir: Direction::ToServer, at: t, frame: req.clone() });
            p.feed(TapEvent::Message { conn: 1, dir: Direction::ToClient, at: t + 5, frame: rep.clone() });
        })
    });
    g.finish();
}

criterion_group!(benches, decode, shapes, pipeline);
criterion_main!(benches);
