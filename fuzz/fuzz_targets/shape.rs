//! Arbitrary BSON as a command's body (and as its reply's), through the whole
//! pipeline: the shape writer, the table and every detector, then a report. Nothing
//! may panic, and every shape must read back as JSON.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{Report, RunFacts};
use mongotap_events::{Direction, TapEvent};
use mongotap_wire::{Frame, MsgFlags};

/// An OP_MSG with `body` as its kind 0 section, bytes as given.
fn msg(body: &[u8], id: i32, to: i32) -> Option<Frame> {
    let len = 16 + 4 + 1 + body.len();
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&(len as i32).to_le_bytes());
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&to.to_le_bytes());
    v.extend_from_slice(&2013i32.to_le_bytes());
    v.extend_from_slice(&MsgFlags::default().0.to_le_bytes());
    v.push(0);
    v.extend_from_slice(body);
    Frame::from_bytes(Bytes::from(v)).ok()
}

fuzz_target!(|data: &[u8]| {
    // The first half is the request's body, the rest the reply's.
    let cut = data.len() / 2;
    let (req, rep) = data.split_at(cut);
    let (Some(req), Some(rep)) = (msg(req, 7, 0), msg(rep, 8, 7)) else { return };
    let mut p = Pipeline::default();
    for (i, (dir, frame)) in
        [(Direction::ToServer, req.clone()), (Direction::ToClient, rep), (Direction::ToServer, req)]
            .into_iter()
            .enumerate()
    {
        p.feed(TapEvent::Message { conn: 1, dir, at: i as u64 * 10, frame });
    }
    let r = Report::build(&p, RunFacts::default());
    for row in &r.access_patterns {
        assert_ne!(row.shape, serde_json::Value::String("?unreadable".into()), "a shape that is not JSON");
    }
    let _ = mongotap_analyzers::report::json::render(&r);
});
