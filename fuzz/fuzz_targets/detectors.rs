//! Arbitrary sequences of operations for the detectors: each few bytes pick a
//! connection, a command (find, insert, update, replace, aggregate with $lookup,
//! getMore, delete), a collection, fields and values, and whether the reply fails
//! or returns documents; time moves on by a byte's worth of milliseconds. Findings
//! are asked for now and then, and at the end with a report. Nothing may panic.
#![no_main]

use bson::{doc, Bson, Document as Doc};
use libfuzzer_sys::fuzz_target;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{Report, RunFacts};
use mongotap_events::{Direction, TapEvent};
use mongotap_wire::{Document, Frame, OpMsg};

const COLLS: [&str; 4] = ["orders", "users", "posts", "events"];
const FIELDS: [&str; 6] = ["_id", "userId", "status", "items", "ts", "name"];

fn value(b: u8) -> Bson {
    match b % 5 {
        0 => Bson::Int32(i32::from(b / 5)),
        1 => Bson::String(format!("v{}", b / 5)),
        2 => Bson::Boolean(b & 8 != 0),
        3 => Bson::Array((0..b % 7).map(|i| Bson::Int32(i.into())).collect()),
        _ => Bson::Document(doc! {"k": i32::from(b)}),
    }
}

fn frame(body: &Doc, id: i32, to: i32) -> Frame {
    Frame::from_bytes(OpMsg::new(Document::from_doc(body)).encode(id, to)).expect("whole")
}

fuzz_target!(|data: &[u8]| {
    let mut p = Pipeline::default();
    let mut at = 1_000_000u64;
    let mut id = 1;
    for (n, op) in data.chunks(6).enumerate() {
        let b = |i: usize| op.get(i).copied().unwrap_or(0);
        let conn = u64::from(b(0) % 3) + 1;
        let coll = COLLS[usize::from(b(1)) % COLLS.len()];
        let field = FIELDS[usize::from(b(2)) % FIELDS.len()];
        let v = value(b(3));
        let request = match b(0) / 3 % 8 {
            0 => doc! {"find": coll, "filter": {field: v.clone()}, "sort": {"ts": -1}, "$db": "f"},
            1 => doc! {"insert": coll, "documents": [{field: v.clone(), "ts": i64::from(b(4))}], "$db": "f"},
            2 => {
                doc! {"update": coll, "updates": [{"q": {"_id": v.clone()}, "u": {"$push": {field: v.clone()}}}], "$db": "f"}
            }
            3 => {
                doc! {"update": coll, "updates": [{"q": {"_id": v.clone()}, "u": {field: v.clone(), "other": 1}}], "$db": "f"}
            }
            4 => {
                doc! {"aggregate": coll, "pipeline": [{"$match": {field: v.clone()}}, {"$lookup": {"from": COLLS[usize::from(b(4)) % 4], "localField": field, "foreignField": "_id", "as": "j"}}], "cursor": {}, "$db": "f"}
            }
            5 => doc! {"getMore": i64::from(b(4) % 4), "collection": coll, "$db": "f"},
            6 => doc! {"delete": coll, "deletes": [{"q": {field: v.clone()}, "limit": 0}], "$db": "f"},
            _ => doc! {"find": coll, "filter": {field: {"$in": [v.clone(), Bson::Int32(1)]}}, "$db": "f"},
        };
        let reply = if b(5) % 7 == 0 {
            doc! {"ok": 0.0, "code": i32::from(b(5)), "errmsg": "x"}
        } else {
            let docs: Vec<Bson> = (0..b(5) % 6)
                .map(|i| {
                    Bson::Document(doc! {"_id": i32::from(i), field: v.clone(), "userId": i32::from(b(4))})
                })
                .collect();
            doc! {"cursor": {"firstBatch": docs, "id": i64::from(b(4) % 4), "ns": format!("f.{coll}")}, "n": 1, "nModified": 1, "ok": 1.0}
        };
        p.feed(TapEvent::Message { conn, dir: Direction::ToServer, at, frame: frame(&request, id, 0) });
        at += u64::from(b(4)) * 100;
        p.feed(TapEvent::Message { conn, dir: Direction::ToClient, at, frame: frame(&reply, id + 1, id) });
        id += 2;
        at += u64::from(b(2)) * 1000;
        if n % 97 == 96 {
            p.expire(at);
            let _ = p.findings();
        }
    }
    let _ = mongotap_analyzers::report::json::render(&Report::build(&p, RunFacts::default()));
});
