//! The correlator and the table on traffic captured from real drivers (the codec's
//! fixtures, see wire/tests/fixtures.rs): every reply pairs, nothing fails to parse.

use bytes::Bytes;
use mongotap_analyzers::event::{Direction, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_wire::Frame;

fn replay(name: &str) -> Pipeline {
    let path = format!("{}/../wire/tests/fixtures/{name}.stream", env!("CARGO_MANIFEST_DIR"));
    let bytes = Bytes::from(std::fs::read(path).unwrap());
    let mut p = Pipeline::default();
    let (mut at, mut t) = (0, 1_000_000);
    while at < bytes.len() {
        let dir = if bytes[at] == b'C' { Direction::ToServer } else { Direction::ToClient };
        let len = i32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        let frame = Frame::from_bytes(bytes.slice(at + 1..at + 1 + len)).unwrap();
        // The fixture interleaves several connections; request ids are unique across them.
        p.feed(TapEvent::Message { conn: 1, dir, at: t, frame });
        at += 1 + len;
        t += 100;
    }
    p
}

#[test]
fn captured_driver_traffic_pairs_completely() {
    for name in ["pymongo", "rust", "node"] {
        let p = replay(name);
        let s = p.exchange_stats();
        assert_eq!(s.parse_errors, 0, "{name}: {:?}", s.last_parse_error);
        assert_eq!(s.unpaired_replies, 0, "{name}");
        assert_eq!(p.operations(), p.table().operations());
        assert!(p.operations() > 10, "{name}");
    }
    let p = replay("pymongo");
    let rows = p.table().rows();
    let get_more = rows.iter().find(|r| r.command == "getMore").unwrap();
    assert!(get_more.cursor_of.is_some(), "exhaust getMores attributed to their find");
    assert!(rows
        .iter()
        .any(|r| r.command == "insert" && r.namespace == "fx.log" && r.latency_ms(0.5).is_none()));
}
