//! Auth and catalog messages: which replies are kept whole, and auth messages
//! reduced to their command's name (or an error code) before any walk.

use bson::RawDocument;
use mongotap_wire::{Command, Frame, Message, MsgFlags, MsgHeader, OpCode, OpMsg, HEADER_LEN};

use super::raw::doc_len;
use super::Redacted;

/// A reply carrying a SASL conversation or a speculative authentication.
pub(super) fn looks_like_auth_reply(plain: &[u8]) -> bool {
    // The body: OP_MSG's first section when it is the body, OP_REPLY's first document.
    let at = match MsgHeader::peek(plain).map(|h| h.op_code) {
        Some(OpCode::Msg) if plain.get(HEADER_LEN + 4) == Some(&0) => HEADER_LEN + 5,
        Some(OpCode::Reply) => HEADER_LEN + 20,
        _ => return false,
    };
    let Ok(len) = doc_len(plain, at) else { return false };
    let body = RawDocument::from_bytes(&plain[at..at + len]).ok();
    body.is_some_and(|b| {
        let has = |k: &str| b.get(k).ok().flatten().is_some();
        has("speculativeAuthenticate") || (has("conversationId") && has("payload"))
    })
}

/// The handshake's reply names no user data (and the topology rewrite reads it).
pub(super) fn is_hello_reply(doc: &[u8]) -> bool {
    let Ok(d) = RawDocument::from_bytes(doc) else { return false };
    ["isWritablePrimary", "ismaster", "maxWireVersion"].iter().any(|k| d.get(k).ok().flatten().is_some())
}

/// A listIndexes or listCollections cursor: the catalog, which the advisor reads.
pub(super) fn is_catalog_cursor(doc: &[u8]) -> bool {
    let Ok(d) = RawDocument::from_bytes(doc) else { return false };
    d.get_str("ns").is_ok_and(|ns| ns.contains(".$cmd.list"))
}

/// An auth request as kept: its name and database (and a hello's other fields but
/// the user it names and its speculative auth).
pub(super) fn sensitive_request(c: &Command<'_>, message: &Message, header: MsgHeader) -> Redacted {
    let mut body = bson::Document::new();
    if c.is_hello() {
        let Ok(full) = bson::Document::try_from(c.body) else {
            return Redacted::Dropped("a hello that does not decode".into());
        };
        for (k, v) in full {
            match k.as_str() {
                "speculativeAuthenticate" => {
                    body.insert(k, bson::Document::new());
                }
                // "db.user": the user the driver is about to log in as.
                "saslSupportedMechs" => {}
                _ => {
                    body.insert(k, v);
                }
            }
        }
    } else {
        body.insert(c.name, 1);
        body.insert("$db", c.database());
    }
    Redacted::Kept(rebuild(message, header, &body))
}

/// An auth reply as kept: `ok` and the error, if any.
pub(super) fn sensitive_reply(plain: &[u8], header: MsgHeader) -> Redacted {
    let decoded = Frame::from_bytes(bytes::Bytes::copy_from_slice(plain)).and_then(|f| Message::decode(&f));
    let message = match decoded {
        Ok(m) => m,
        Err(e) => return Redacted::Dropped(e.to_string()),
    };
    let reply = match &message.op {
        mongotap_wire::Op::Msg(m) => m.body().to_document().ok(),
        mongotap_wire::Op::Reply(r) => r.documents.first().and_then(|d| d.to_document().ok()),
        _ => None,
    };
    let mut body = bson::Document::new();
    for (k, v) in reply.into_iter().flatten() {
        if matches!(k.as_str(), "ok" | "code" | "codeName") && !matches!(v, bson::Bson::Document(_)) {
            body.insert(k, v);
        }
    }
    Redacted::Kept(rebuild(&message, header, &body))
}

/// A message of the same kind and ids with `body` as its only document.
pub(super) fn rebuild(message: &Message, header: MsgHeader, body: &bson::Document) -> Vec<u8> {
    let doc = mongotap_wire::Document::from_doc(body);
    match &message.op {
        mongotap_wire::Op::Query(q) => mongotap_wire::OpQuery {
            flags: q.flags,
            full_collection_name: q.full_collection_name.clone(),
            number_to_skip: 0,
            number_to_return: q.number_to_return,
            query: doc,
            return_fields_selector: None,
        }
        .encode(header.request_id),
        mongotap_wire::Op::Reply(r) => mongotap_wire::OpReply {
            response_flags: r.response_flags,
            cursor_id: 0,
            starting_from: 0,
            number_returned: 1,
            documents: vec![doc],
        }
        .encode(header.request_id, header.response_to),
        _ => {
            let mut m = OpMsg::new(doc);
            m.flags = MsgFlags(message.msg_flags().0 & !MsgFlags::CHECKSUM_PRESENT.0);
            m.encode(header.request_id, header.response_to)
        }
    }
    .to_vec()
}
