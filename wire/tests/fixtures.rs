//! Fixtures captured from real drivers (pymongo, the Rust driver, the Node driver)
//! talking to the real upstream through a recording relay, by
//! `scripts/capture_fixtures.py`. Every message must decode, and the codec must see
//! the same messages as tshark's MongoDB dissector saw on a capture of that traffic:
//! same requestID, responseTo, opcode, OP_MSG flags, section kinds and sequence ids.

use std::path::PathBuf;

use bytes::Bytes;
use mongotap_wire::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The records of a `.stream` file: a direction byte, then one whole message.
fn records(name: &str) -> Vec<(char, Frame)> {
    let bytes = Bytes::from(std::fs::read(fixture(name)).unwrap());
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let dir = bytes[at] as char;
        let len = i32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        out.push((dir, Frame::from_bytes(bytes.slice(at + 1..at + 1 + len)).unwrap()));
        at += 1 + len;
    }
    out
}

/// The codec's view of a message, in the columns of the `.tshark.tsv` files.
fn line(dir: char, m: &Message) -> String {
    let h = &m.header;
    let (flags, kinds, ids) = match &m.op {
        Op::Msg(msg) => {
            let kinds: Vec<&str> = msg
                .sections
                .iter()
                .map(|s| match s {
                    Section::Body(_) => "0",
                    Section::Sequence(_) => "1",
                })
                .collect();
            let ids: Vec<&str> = msg.sequences().map(|s| s.identifier.as_str()).collect();
            (msg.flags.0.to_string(), kinds.join(","), ids.join(","))
        }
        _ => (String::new(), String::new(), String::new()),
    };
    format!(
        "{dir}\t{}\t{}\t{}\t{flags}\t{kinds}\t{ids}",
        h.request_id as u32,
        h.response_to as u32,
        h.op_code.as_i32()
    )
}

/// Decodes a capture and checks it against tshark; returns the decoded messages.
fn decode_and_cross_check(name: &str) -> Vec<(char, Message)> {
    let decoded: Vec<(char, Message)> = records(&format!("{name}.stream"))
        .into_iter()
        .map(|(d, f)| (d, Message::decode(&f).unwrap_or_else(|e| panic!("{name}: {e}"))))
        .collect();
    let mut ours: Vec<String> = decoded.iter().map(|(d, m)| line(*d, m)).collect();
    ours.sort();
    let text = std::fs::read_to_string(fixture(&format!("{name}.tshark.tsv"))).unwrap();
    let mut theirs: Vec<String> = text.lines().map(str::to_owned).collect();
    theirs.sort();
    assert_eq!(ours.len(), theirs.len(), "{name}: message counts differ");
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b, "{name}: codec and tshark disagree");
    }
    decoded
}

fn command_name(m: &Message) -> Option<&str> {
    Command::from_message(m).map(|c| c.name)
}

#[test]
fn pymongo_capture_matches_tshark_and_has_exhaust_w0_and_sequences() {
    let msgs = decode_and_cross_check("pymongo");
    let exhaust_get_more = msgs.iter().any(|(d, m)| {
        *d == 'C' && command_name(m) == Some("getMore") && m.msg_flags().contains(MsgFlags::EXHAUST_ALLOWED)
    });
    let streamed_replies =
        msgs.iter().filter(|(d, m)| *d == 'S' && m.msg_flags().contains(MsgFlags::MORE_TO_COME)).count();
    let w0 = msgs.iter().any(|(d, m)| {
        *d == 'C' && command_name(m) == Some("insert") && m.msg_flags().contains(MsgFlags::MORE_TO_COME)
    });
    let documents_sequence = msgs.iter().any(|(_, m)| match &m.op {
        Op::Msg(msg) => msg.sequences().any(|s| s.identifier == "documents" && s.documents.len() == 120),
        _ => false,
    });
    assert!(exhaust_get_more, "an exhaust getMore");
    assert!(streamed_replies >= 2, "streamed exhaust replies: {streamed_replies}");
    assert!(w0, "a w:0 insert");
    assert!(documents_sequence, "insert_many's documents sequence");
}

#[test]
fn rust_driver_capture_matches_tshark() {
    let msgs = decode_and_cross_check("rust");
    assert!(msgs.len() > 1000);
    assert!(msgs.iter().any(|(_, m)| match &m.op {
        Op::Msg(msg) => msg.sequences().any(|s| s.identifier == "documents"),
        _ => false,
    }));
    let names: std::collections::BTreeSet<&str> = msgs.iter().filter_map(|(_, m)| command_name(m)).collect();
    for n in ["hello", "insert", "find", "getMore", "update", "aggregate"] {
        assert!(names.contains(n), "{n} in {names:?}");
    }
}

#[test]
fn node_driver_capture_matches_tshark_including_the_legacy_handshake() {
    let msgs = decode_and_cross_check("node");
    let legacy_hello = msgs
        .iter()
        .any(|(_, m)| matches!(m.op, Op::Query(_)) && Command::from_message(m).is_some_and(|c| c.is_hello()));
    let op_reply = msgs.iter().any(|(_, m)| matches!(m.op, Op::Reply(_)));
    assert!(legacy_hello && op_reply, "the Node driver opens with OP_QUERY hello and gets OP_REPLY");
}

#[test]
fn pymongo_compressed_frames_decode_to_their_originals() {
    let recs = records("compressed.stream");
    let mut seen = std::collections::BTreeSet::new();
    for pair in recs.chunks(2) {
        let [(p, plain), (z, wrapped)] = pair else { panic!("records come in pairs") };
        assert_eq!((*p, *z), ('P', 'Z'));
        let original = Message::decode(plain).unwrap();
        let inflated = Message::decode(wrapped).unwrap();
        seen.insert(inflated.compressor.unwrap().name());
        assert_eq!(inflated.op, original.op, "the same message after decompression");
        assert_eq!(inflated.header.op_code, original.header.op_code);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["snappy", "zlib", "zstd"]);
}
