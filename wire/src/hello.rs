//! The member addresses in a `hello`/`isMaster` reply, renamed. A replica set's
//! members name each other in every handshake reply, and a driver that is not told
//! `directConnection=true` connects to the names it reads there. A proxy in front of
//! a replica set renames them to its own listeners, and only them: every other
//! element keeps its exact bytes, and the message's length, checksum and
//! compression are made right again.
//!
//! A reply is recognised by what it holds, not by the request it answers, so each
//! streamed reply of an awaitable hello (moreToCome) is renamed like the first: a
//! top-level `isWritablePrimary` or `ismaster` field, and at least one of the
//! address fields ([`ADDRESS_FIELDS`]).

use bytes::{BufMut, Bytes};

use crate::doc::Document;
use crate::element::{elements, find};
use crate::error::Result;
use crate::frame::Frame;
use crate::message::{Message, Op};
use crate::op::msg::Section;

/// The fields of a hello reply that name members (`host:port` strings): the
/// Server Discovery and Monitoring spec's `hosts`, `passives`, `arbiters`,
/// `primary` and `me`.
pub const ADDRESS_FIELDS: [&str; 5] = ["hosts", "passives", "arbiters", "primary", "me"];

/// Renames the member addresses of a hello reply. `rename` maps a field's name and
/// an address in it, as the server wrote it, to the one to write instead (`None`
/// keeps it). Returns the new
/// message, or `None` when the message is not a hello reply or nothing was renamed
/// (then the original bytes are forwarded as they are).
pub fn rename_members(
    frame: &Frame,
    rename: &mut dyn FnMut(&str, &str) -> Option<String>,
) -> Result<Option<Bytes>> {
    let mut message = Message::decode(frame)?;
    let body = match &mut message.op {
        Op::Msg(m) => m.sections.iter_mut().find_map(|s| match s {
            Section::Body(d) => Some(d),
            Section::Sequence(_) => None,
        }),
        Op::Reply(r) if r.documents.len() == 1 => r.documents.first_mut(),
        _ => None,
    };
    let Some(body) = body else { return Ok(None) };
    if !is_hello_reply(body) {
        return Ok(None);
    }
    let Some(renamed) = rename_in(body, rename) else { return Ok(None) };
    *body = renamed;
    Ok(Some(message.encode()))
}

/// A reply to `hello`/`isMaster`: it says whether the server is writable, and it
/// names members.
pub fn is_hello_reply(doc: &Document) -> bool {
    let (mut writable, mut names) = (false, false);
    for e in elements(doc.raw()) {
        writable |= e.key == b"isWritablePrimary" || e.key == b"ismaster";
        names |= ADDRESS_FIELDS.iter().any(|f| e.key == f.as_bytes());
    }
    writable && names
}

/// The fields that hold several addresses; `primary` and `me` hold one.
const ARRAY_FIELDS: [&str; 3] = ["hosts", "passives", "arbiters"];

/// The document with its address fields renamed, or `None` if none changed (or the
/// document cannot be walked to its end, which leaves it alone: then nothing is
/// asked of `rename` either).
fn rename_in(doc: &Document, rename: &mut dyn FnMut(&str, &str) -> Option<String>) -> Option<Document> {
    let raw = doc.raw();
    if !walks_whole(raw) || !addresses_well_formed(raw) {
        return None;
    }
    // `me` first: it says which member this connection reaches, whatever name it
    // was reached by, so the other fields find that member already known.
    let me = find(raw, "me").and_then(|e| e.as_str()).and_then(|name| rename("me", name));
    let mut me_seen = false;
    let mut out = Vec::with_capacity(doc.len() + 64);
    out.put_i32_le(0);
    let mut changed = false;
    for e in elements(raw) {
        let array_field = ARRAY_FIELDS.iter().find(|f| e.key == f.as_bytes());
        let new_value = match (e.kind, e.key, array_field) {
            (0x02, b"me", _) if !me_seen => {
                me_seen = true;
                me.as_deref().map(string_value)
            }
            (0x02, b"primary", _) => e.as_str().and_then(|n| rename("primary", n)).map(|s| string_value(&s)),
            (0x04, _, Some(f)) => renamed_array(e.value, &mut |n| rename(f, n)),
            _ => None,
        };
        out.put_u8(e.kind);
        out.put_slice(e.key);
        out.put_u8(0);
        match new_value {
            Some(v) => {
                out.put_slice(&v);
                changed = true;
            }
            None => out.put_slice(e.value),
        }
    }
    if !changed {
        return None;
    }
    out.put_u8(0);
    let len = out.len() as i32;
    out[0..4].copy_from_slice(&len.to_le_bytes());
    Document::from_bytes(Bytes::from(out)).ok()
}

/// An array of address strings with each renamed, keys and unrenamed values kept
/// byte for byte; `None` if none was renamed (or an element is not a string, or
/// the array is malformed: then it is not ours to touch).
fn renamed_array(value: &[u8], rename: &mut dyn FnMut(&str) -> Option<String>) -> Option<Vec<u8>> {
    let array = bson::RawDocument::from_bytes(value).ok()?;
    if !walks_whole(array) || elements(array).any(|e| e.as_str().is_none()) {
        return None;
    }
    let mut out = Vec::with_capacity(value.len() + 64);
    out.put_i32_le(0);
    let mut changed = false;
    for e in elements(array) {
        out.put_u8(e.kind);
        out.put_slice(e.key);
        out.put_u8(0);
        match e.as_str().and_then(&mut *rename) {
            Some(new) => {
                out.put_slice(&string_value(&new));
                changed = true;
            }
            None => out.put_slice(e.value),
        }
    }
    out.put_u8(0);
    let len = out.len() as i32;
    out[0..4].copy_from_slice(&len.to_le_bytes());
    changed.then_some(out)
}

/// Whether every address field holds what it should (a string; an array of
/// strings): a reply with one odd field is left whole, so nothing is half renamed.
fn addresses_well_formed(doc: &bson::RawDocument) -> bool {
    elements(doc).all(|e| match e.key_str() {
        Some("primary" | "me") => e.as_str().is_some(),
        Some(k) if ARRAY_FIELDS.contains(&k) => {
            e.as_array().is_some_and(|a| walks_whole(a) && elements(a).all(|x| x.as_str().is_some()))
        }
        _ => true,
    })
}

/// Whether the element walk reaches the document's terminator (a malformed
/// element stops it short).
fn walks_whole(doc: &bson::RawDocument) -> bool {
    let walked: usize = elements(doc).map(|e| 2 + e.key.len() + e.value.len()).sum();
    4 + walked + 1 == doc.as_bytes().len()
}

/// A BSON string's value bytes: length (with the NUL), UTF-8, NUL.
fn string_value(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 5);
    v.put_i32_le(s.len() as i32 + 1);
    v.put_slice(s.as_bytes());
    v.put_u8(0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::compressed::{Compressor, OpCompressed};
    use crate::op::msg::{MsgFlags, OpMsg};
    use crate::op::reply::OpReply;
    use bson::{doc, oid::ObjectId, Bson};

    fn hello_reply() -> bson::Document {
        doc! {
            "isWritablePrimary": true,
            "topologyVersion": {"processId": ObjectId::from_bytes([7; 12]), "counter": 3_i64},
            "hosts": ["db1.internal:27017", "db2.internal:27017"],
            "passives": ["db3.internal:27017"],
            "arbiters": [],
            "setName": "rs0",
            "primary": "db1.internal:27017",
            "me": "db2.internal:27017",
            "maxWireVersion": 21,
            "ok": 1.0,
        }
    }

    fn to_proxy(_field: &str, name: &str) -> Option<String> {
        let port = match name {
            "db1.internal:27017" => 27018,
            "db2.internal:27017" => 27019,
            "db3.internal:27017" => 27020,
            _ => return None,
        };
        Some(format!("proxy.local:{port}"))
    }

    fn renamed(bytes: Bytes) -> Option<Bytes> {
        rename_members(&Frame::from_bytes(bytes).unwrap(), &mut to_proxy).unwrap()
    }

    fn body_of(bytes: Bytes) -> bson::Document {
        let m = Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap();
        match m.op {
            Op::Msg(m) => m.body().to_document().unwrap(),
            Op::Reply(r) => r.documents[0].to_document().unwrap(),
            _ => unreachable!(),
        }
    }

    fn expected() -> bson::Document {
        let mut d = hello_reply();
        d.insert("hosts", vec![Bson::from("proxy.local:27018"), Bson::from("proxy.local:27019")]);
        d.insert("passives", vec![Bson::from("proxy.local:27020")]);
        d.insert("primary", "proxy.local:27018");
        d.insert("me", "proxy.local:27019");
        d
    }

    #[test]
    fn op_msg_reply_renamed_and_nothing_else_changed() {
        let original = hello_reply();
        let msg = OpMsg::new(Document::from_doc(&original)).encode(41, 7);
        let out = renamed(msg).expect("renamed");
        let got = body_of(out.clone());
        // Same values, same order, apart from the addresses.
        assert_eq!(got, expected());
        assert_eq!(got.keys().collect::<Vec<_>>(), original.keys().collect::<Vec<_>>());
        let header = crate::header::MsgHeader::peek(&out).unwrap();
        assert_eq!(
            (header.request_id, header.response_to, header.message_length as usize),
            (41, 7, out.len())
        );
    }

    #[test]
    fn renaming_each_address_to_itself_gives_back_the_same_bytes() {
        for flags in [MsgFlags::default(), MsgFlags::CHECKSUM_PRESENT] {
            let mut m = OpMsg::new(Document::from_doc(&hello_reply()));
            m.flags = flags;
            let msg = m.encode(41, 7);
            let out =
                rename_members(&Frame::from_bytes(msg.clone()).unwrap(), &mut |_, s| Some(s.to_owned()));
            assert_eq!(out.unwrap().unwrap(), msg);
        }
    }

    #[test]
    fn checksummed_streamed_reply_keeps_its_flags_and_gets_a_new_checksum() {
        let mut m = OpMsg::new(Document::from_doc(&hello_reply()));
        m.flags = MsgFlags::CHECKSUM_PRESENT.with(MsgFlags::MORE_TO_COME);
        let out = renamed(m.encode(5, 4)).expect("renamed");
        let decoded = OpMsg::decode(&out).expect("the checksum verifies");
        assert_eq!(decoded.flags, m.flags);
        assert_eq!(decoded.body().to_document().unwrap(), expected());
    }

    #[test]
    fn legacy_op_reply_and_every_compressor() {
        let reply = OpReply {
            response_flags: 8,
            cursor_id: 0,
            starting_from: 0,
            number_returned: 1,
            documents: vec![Document::from_doc(&{
                let mut d = hello_reply();
                d.remove("isWritablePrimary");
                d.insert("ismaster", true);
                d
            })],
        };
        let out = renamed(reply.encode(9, 1)).expect("renamed");
        assert_eq!(body_of(out).get_str("me").unwrap(), "proxy.local:27019");
        let plain = OpMsg::new(Document::from_doc(&hello_reply())).encode(3, 2);
        for c in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let out = renamed(OpCompressed::compress(&plain, c)).expect("renamed");
            assert_eq!(OpCompressed::decode(&out).unwrap().compressor, c, "compressed again the same way");
            assert_eq!(body_of(out), expected(), "{c:?}");
        }
    }

    #[test]
    fn me_is_renamed_before_the_fields_that_come_first() {
        let reply = OpMsg::new(Document::from_doc(&hello_reply())).encode(1, 0);
        let mut order = Vec::new();
        let out = rename_members(&Frame::from_bytes(reply).unwrap(), &mut |field, name| {
            order.push(format!("{field}={name}"));
            to_proxy(field, name)
        });
        assert!(out.unwrap().is_some());
        assert_eq!(order[0], "me=db2.internal:27017");
        assert_eq!(order.iter().filter(|o| o.starts_with("me=")).count(), 1, "asked once");
    }

    #[test]
    fn other_replies_and_unknown_members_are_left_alone() {
        let find = OpMsg::new(Document::from_doc(&doc! {
            "cursor": {"id": 0_i64, "ns": "a.b", "firstBatch": [{"me": "db1.internal:27017", "ismaster": true}]},
            "ok": 1.0,
        }));
        assert!(renamed(find.encode(1, 1)).is_none(), "addresses inside documents are data");
        let standalone =
            OpMsg::new(Document::from_doc(&doc! {"isWritablePrimary": true, "maxWireVersion": 21}));
        assert!(renamed(standalone.encode(1, 1)).is_none(), "a standalone names no members");
        let elsewhere =
            OpMsg::new(Document::from_doc(&doc! {"ismaster": true, "me": "other:1", "hosts": ["other:1"]}));
        assert!(renamed(elsewhere.encode(1, 1)).is_none(), "nothing to rename");
        let odd = OpMsg::new(Document::from_doc(
            &doc! {"ismaster": true, "primary": "db1.internal:27017", "hosts": [1, "db1.internal:27017"]},
        ));
        assert!(renamed(odd.encode(1, 1)).is_none(), "one odd field: nothing renamed, not even primary");
        let odd = OpMsg::new(Document::from_doc(&doc! {"ismaster": true, "me": ["db1.internal:27017"]}));
        assert!(renamed(odd.encode(1, 1)).is_none(), "me is one address");
    }

    #[test]
    fn a_malformed_reply_asks_for_no_renaming() {
        // The last string's length runs past the document: the walk stops short.
        let mut body = Document::from_doc(&doc! {"ismaster": true, "me": "db1.internal:27017", "z": "tail"})
            .bytes()
            .to_vec();
        let at = body.len() - 10;
        body[at..at + 4].copy_from_slice(&400i32.to_le_bytes());
        let mut msg = OpMsg::new(Document::from_doc(&doc! {})).encode(1, 1).to_vec();
        msg.truncate(msg.len() - 5);
        msg.extend_from_slice(&body);
        let len = msg.len() as i32;
        msg[0..4].copy_from_slice(&len.to_le_bytes());
        let mut asked = 0;
        let out = rename_members(&Frame::from_bytes(Bytes::from(msg)).unwrap(), &mut |_, _| {
            asked += 1;
            Some("x:1".into())
        });
        assert!(!matches!(out, Ok(Some(_))));
        assert_eq!(asked, 0, "no listener opened for a reply that is not forwarded renamed");
    }
}
