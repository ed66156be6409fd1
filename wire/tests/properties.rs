//! Property tests: every message the codec can encode decodes back to itself, and
//! no byte string, however hostile, makes the decoder panic.

use bson::{doc, Bson};
use bytes::{Bytes, BytesMut};
use mongotap_wire::*;
use proptest::prelude::*;

fn bson_value() -> impl Strategy<Value = Bson> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<bool>().prop_map(Bson::Boolean),
        "[a-z]{0,12}".prop_map(Bson::String),
        Just(Bson::Null),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec(("[a-z$]{1,6}", inner), 0..4)
                .prop_map(|kv| Bson::Document(kv.into_iter().collect())),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec(("[a-zA-Z$_.]{1,8}", bson_value()), 0..5)
        .prop_map(|kv| Document::from_doc(&kv.into_iter().collect()))
}

fn section() -> impl Strategy<Value = Section> {
    ("documents|updates|deletes|ops|nsInfo", prop::collection::vec(document(), 0..4))
        .prop_map(|(identifier, documents)| Section::Sequence(DocumentSequence { identifier, documents }))
}

fn op_msg() -> impl Strategy<Value = OpMsg> {
    (
        prop::sample::select(vec![0u32, 1, 2, 3, 0x10000, 0x10002]),
        document(),
        prop::collection::vec(section(), 0..3),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(flags, body, mut sections, at)| {
            let at = at.index(sections.len() + 1);
            sections.insert(at, Section::Body(body));
            OpMsg { flags: MsgFlags(flags), sections: sections.into(), checksum: None }
        })
}

fn message() -> impl Strategy<Value = Message> {
    let op = prop_oneof![
        op_msg().prop_map(Op::Msg),
        (
            any::<i32>(),
            "[a-z]{1,5}\\.[a-z$]{1,5}",
            any::<i32>(),
            any::<i32>(),
            document(),
            prop::option::of(document())
        )
            .prop_map(
                |(
                    flags,
                    full_collection_name,
                    number_to_skip,
                    number_to_return,
                    query,
                    return_fields_selector,
                )| {
                    Op::Query(OpQuery {
                        flags,
                        full_collection_name,
                        number_to_skip,
                        number_to_return,
                        query,
                        return_fields_selector,
                    })
                }
            ),
        (any::<i32>(), any::<i64>(), any::<i32>(), prop::collection::vec(document(), 0..4)).prop_map(
            |(response_flags, cursor_id, starting_from, documents)| {
                Op::Reply(OpReply {
                    response_flags,
                    cursor_id,
                    starting_from,
                    number_returned: documents.len() as i32,
                    documents,
                })
            }
        ),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| Op::Opaque { body: Bytes::from(b) }),
    ];
    let compressor = prop::option::of(prop::sample::select(vec![
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ]));
    (
        op,
        any::<i32>(),
        any::<i32>(),
        compressor,
        prop::sample::select(vec![2001, 2002, 2005, 2010, 2011, 9999]),
    )
        .prop_map(|(op, request_id, response_to, compressor, opaque_code)| {
            let op_code = match &op {
                Op::Msg(_) => OpCode::Msg,
                Op::Query(_) => OpCode::Query,
                Op::Reply(_) => OpCode::Reply,
                Op::Opaque { .. } => OpCode::from_i32(opaque_code),
            };
            let response_to = if matches!(op, Op::Query(_)) { 0 } else { response_to };
            let header = MsgHeader { message_length: 0, request_id, response_to, op_code };
            Message { header, compressor, op }
        })
}

/// Checksums are computed on encode: give the expected value the one the bytes carry.
fn normalise(mut m: Message, bytes: &Bytes) -> Message {
    if let Op::Msg(msg) = &mut m.op {
        if msg.flags.contains(MsgFlags::CHECKSUM_PRESENT) {
            let plain = match m.compressor {
                Some(_) => OpCompressed::decode(bytes).unwrap().decompress().unwrap(),
                None => bytes.clone(),
            };
            let at = plain.len() - 4;
            msg.checksum = Some(u32::from_le_bytes(plain[at..].try_into().unwrap()));
        }
    }
    m
}

/// A hello reply naming 0-3 members among random other fields, as OP_MSG (maybe
/// checksummed) or OP_REPLY.
fn hello_reply() -> impl Strategy<Value = (bson::Document, Bytes)> {
    (
        prop::collection::vec("[a-z]{1,8}:[0-9]{1,5}", 0..4),
        prop::collection::vec(("[a-zA-Z]{1,8}", bson_value()), 0..5),
        0..3u8,
    )
        .prop_map(|(hosts, extra, form)| {
            let mut d = doc! {"isWritablePrimary": true};
            for (k, v) in extra {
                if !hello::ADDRESS_FIELDS.contains(&k.as_str()) {
                    d.insert(k, v);
                }
            }
            if let Some(first) = hosts.first() {
                d.insert("primary", first.clone());
                d.insert("me", first.clone());
            }
            d.insert("hosts", hosts);
            let body = Document::from_doc(&d);
            let bytes = match form {
                0 => OpMsg::new(body).encode(1, 2),
                1 => OpMsg {
                    flags: MsgFlags::CHECKSUM_PRESENT,
                    sections: vec![Section::Body(body)].into(),
                    checksum: None,
                }
                .encode(1, 2),
                _ => OpReply {
                    response_flags: 8,
                    cursor_id: 0,
                    starting_from: 0,
                    number_returned: 1,
                    documents: vec![body],
                }
                .encode(1, 2),
            };
            (d, bytes)
        })
}

fn renamed_body(bytes: Bytes) -> bson::Document {
    let m = Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap();
    match m.op {
        Op::Msg(m) => m.body().to_document().unwrap(),
        Op::Reply(r) => r.documents[0].to_document().unwrap(),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn renaming_members_changes_the_addresses_and_nothing_else((original, bytes) in hello_reply()) {
        let out = hello::rename_members(&Frame::from_bytes(bytes.clone()).unwrap(), &mut |_, name| Some(format!("proxy-{name}")))
            .unwrap();
        let hosts = original.get_array("hosts").unwrap().len();
        prop_assert_eq!(out.is_some(), hosts > 0, "renamed exactly when there is a member");
        if let Some(out) = out {
            let mut expected = original.clone();
            for field in hello::ADDRESS_FIELDS {
                match expected.get(field).cloned() {
                    Some(Bson::String(s)) => { expected.insert(field, format!("proxy-{s}")); }
                    Some(Bson::Array(a)) => {
                        let renamed: Vec<Bson> = a.iter().map(|h| Bson::String(format!("proxy-{}", h.as_str().unwrap()))).collect();
                        expected.insert(field, renamed);
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(renamed_body(out), expected);
        }
    }

    #[test]
    fn renaming_mutated_hello_replies_never_panics((_, bytes) in hello_reply(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut bytes = bytes.to_vec();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            if i >= 4 { bytes[i] = b; }
        }
        if let Ok(frame) = Frame::from_bytes(Bytes::from(bytes)) {
            if let Ok(Some(out)) = hello::rename_members(&frame, &mut |_, name| Some(format!("{name}-renamed"))) {
                // What is forwarded instead is a whole message that decodes.
                let f = Frame::from_bytes(out.clone()).expect("a whole frame");
                prop_assert_eq!(f.header.message_length as usize, out.len());
                prop_assert!(Message::decode(&f).is_ok());
            }
        }
    }

    #[test]
    fn encode_then_decode_is_identity(m in message()) {
        let bytes = m.encode();
        let mut buf = BytesMut::from(&bytes[..]);
        let frame = Frame::parse(&mut buf).unwrap().expect("a whole frame");
        prop_assert!(buf.is_empty());
        let decoded = Message::decode(&frame).unwrap();
        let mut expected = normalise(m, &bytes);
        expected.header.message_length = decoded.header.message_length;
        prop_assert_eq!(&decoded, &expected);
        prop_assert_eq!(decoded.encode().len(), bytes.len());
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&data[..]);
        if let Ok(Some(frame)) = Frame::parse(&mut buf) {
            let _ = Message::decode(&frame);
        }
        let mut splitter = Splitter::new(256);
        let mut buf = BytesMut::from(&data[..]);
        while let Some(item) = splitter.next(&mut buf) {
            if let Ok(Split::Frame(f)) = item {
                if let Ok(m) = Message::decode(&f) {
                    let _ = Command::from_message(&m).map(|c| (c.namespace(), c.is_sensitive(), c.documents("documents").len()));
                    let _ = CommandReply::from_message(&m).map(|r| (r.ok(), r.error_code(), r.cursor_id(), r.n()));
                }
            }
        }
    }

    #[test]
    fn decode_never_panics_on_mutated_messages(m in message(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = m.encode().to_vec();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            // Keep the declared length so the body decoders, not framing, meet the damage.
            if i >= 4 { bytes[i] = b; }
        }
        if let Ok(frame) = Frame::from_bytes(Bytes::from(bytes)) {
            if let Ok(m) = Message::decode(&frame) {
                let _ = Command::from_message(&m).map(|c| (c.namespace(), c.is_sensitive(), c.lsid().is_some()));
            }
        }
    }
}

#[test]
fn a_real_world_sized_message_frames_across_many_reads() {
    let big = Document::from_doc(&doc! {"insert": "c", "pad": "x".repeat(100_000), "$db": "t"});
    let bytes = OpMsg::new(big).encode(1, 0);
    let mut s = Splitter::new(MAX_MESSAGE_SIZE);
    let mut buf = BytesMut::new();
    let mut frames = 0;
    for chunk in bytes.chunks(4096) {
        buf.extend_from_slice(chunk);
        while let Some(item) = s.next(&mut buf) {
            if let Split::Frame(f) = item.unwrap() {
                assert_eq!(f.bytes, bytes);
                frames += 1;
            }
        }
    }
    assert_eq!(frames, 1);
}
