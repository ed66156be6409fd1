//! Views over a decoded request and its reply: which command, on which namespace,
//! in which session, and whether its contents are secret.

use bson::{RawBsonRef, RawDocument};

use crate::doc::Document;
use crate::element;
use crate::message::{Message, Op};
use crate::op::msg::DocumentSequence;

/// Commands whose requests and replies carry credentials or key material. Their
/// bodies are never recorded, printed or shaped (WIRE-NOTES, "Authentication").
const SENSITIVE: &[&str] = &[
    "authenticate",
    "saslstart",
    "saslcontinue",
    "getnonce",
    "createuser",
    "updateuser",
    "copydbgetnonce",
    "copydbsaslstart",
    "copydb",
];

/// The handshake commands, current and legacy spellings.
const HELLO: &[&str] = &["hello", "ismaster"];

/// A command request: the first key of the body names it.
#[derive(Debug, Clone)]
pub struct Command<'m> {
    /// The command name, as sent (`find`, `insert`, `isMaster`, ...).
    pub name: &'m str,
    /// OP_QUERY's database, from its `db.$cmd` name; OP_MSG's is read on demand.
    legacy_database: Option<&'m str>,
    /// The command document.
    pub body: &'m RawDocument,
    /// OP_MSG document sequences (`documents`, `updates`, `deletes`, ...).
    pub sequences: Vec<&'m DocumentSequence>,
}

impl<'m> Command<'m> {
    /// The command a request message carries: any OP_MSG, or an OP_QUERY on `db.$cmd`
    /// (unwrapping `$query`). `None` for replies, legacy CRUD opcodes and bodies whose
    /// first element cannot be read.
    pub fn from_message(m: &'m Message) -> Option<Command<'m>> {
        match &m.op {
            Op::Msg(msg) => {
                let body = msg.body().raw();
                let name = first_key(body)?;
                Some(Command { name, legacy_database: None, body, sequences: msg.sequences().collect() })
            }
            Op::Query(q) if q.collection() == "$cmd" => {
                let mut body = q.query.raw();
                // A wrapped command: `{$query: {count: ...}, $readPreference: ...}`, or
                // `{query: {...}, ...}` leading with its wrapper. A command's own
                // `query` (count's filter) comes after its name and is no wrapper.
                let wrapper = element::find(body, "$query")
                    .or_else(|| element::elements(body).next().filter(|e| e.key == b"query"));
                if let Some(inner) = wrapper.and_then(|e| e.as_document()) {
                    body = inner;
                }
                let name = first_key(body)?;
                Some(Command { name, legacy_database: Some(q.database()), body, sequences: Vec::new() })
            }
            _ => None,
        }
    }

    /// The database: `$db` for OP_MSG (read on demand: it is usually the last field,
    /// so finding it costs a scan of the body), the `db.$cmd` prefix for OP_QUERY.
    pub fn database(&self) -> &'m str {
        self.legacy_database
            .unwrap_or_else(|| element::find(self.body, "$db").and_then(|e| e.as_str()).unwrap_or(""))
    }

    /// The collection the command targets: the string value of its first element
    /// (`{find: "orders"}`), or `collection` for getMore. `None` for database-level
    /// commands such as `{ping: 1}` or `{aggregate: 1}`.
    pub fn collection(&self) -> Option<&'m str> {
        if self.name == "getMore" {
            return self.body.get_str("collection").ok();
        }
        element::elements(self.body).next()?.as_str()
    }

    /// The bytes of the database and of the collection (see [`Self::namespace`]), for
    /// who compares them with a namespace at hand rather than build a new one.
    pub fn namespace_bytes(&self) -> (&'m [u8], Option<&'m [u8]>) {
        let db = match self.legacy_database {
            Some(d) => d.as_bytes(),
            None => element::find(self.body, "$db").and_then(|e| e.string_bytes()).unwrap_or_default(),
        };
        let collection = match self.name {
            "getMore" => self.body.get_str("collection").ok().map(str::as_bytes),
            _ => element::elements(self.body).next().and_then(|e| e.string_bytes()),
        };
        (db, collection)
    }

    /// `database.collection`, or just the database for database-level commands.
    pub fn namespace(&self) -> String {
        let (db, collection) = self.namespace_bytes();
        // Built as bytes and checked for UTF-8 once: this runs for every request
        // (and `format!` costs more still).
        let mut ns = Vec::with_capacity(db.len() + 1 + collection.map_or(0, <[u8]>::len));
        ns.extend_from_slice(db);
        if let Some(c) = collection {
            ns.push(b'.');
            ns.extend_from_slice(c);
        }
        String::from_utf8(ns).unwrap_or_else(|_| {
            // Not UTF-8 (hostile bytes): what is UTF-8 of it, as the parts say.
            let db = self.database();
            match self.collection() {
                Some(c) => format!("{db}.{c}"),
                None => db.to_owned(),
            }
        })
    }

    /// The logical session id document, when the driver sent one.
    pub fn lsid(&self) -> Option<&'m RawDocument> {
        self.body.get_document("lsid").ok()
    }

    /// Whether this is the handshake (`hello`, `isMaster`, `ismaster`).
    pub fn is_hello(&self) -> bool {
        HELLO.iter().any(|h| self.name.eq_ignore_ascii_case(h))
    }

    /// Whether the request and its reply must never be recorded or shown: auth and
    /// user-management commands, and a hello carrying `speculativeAuthenticate`.
    pub fn is_sensitive(&self) -> bool {
        SENSITIVE.iter().any(|s| self.name.eq_ignore_ascii_case(s))
            || (self.is_hello() && self.body.get("speculativeAuthenticate").ok().flatten().is_some())
    }

    /// The documents of a command argument, from the body's array or from the
    /// document sequence of the same name (drivers use either).
    pub fn documents(&self, identifier: &str) -> Vec<&'m RawDocument> {
        let mut out: Vec<&'m RawDocument> = Vec::new();
        if let Some(arr) = element::find(self.body, identifier).and_then(|e| e.as_array()) {
            out.extend(element::elements(arr).filter_map(|v| v.as_document()));
        }
        for seq in self.sequences.iter().filter(|s| s.identifier == identifier) {
            out.extend(seq.documents.iter().map(Document::raw));
        }
        out
    }
}

fn first_key(doc: &RawDocument) -> Option<&str> {
    element::elements(doc).next()?.key_str()
}

/// The facts of a reply the correlator keeps, from [`CommandReply::summary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplySummary {
    /// `ok` is 1.
    pub ok: bool,
    /// The command's error code, or the first write error's.
    pub error_code: Option<i32>,
    /// The cursor id, when the reply has a cursor.
    pub cursor_id: Option<i64>,
    /// Documents in `firstBatch` or `nextBatch`.
    pub batch_len: u64,
    /// Where that batch sits in the reply body, as (offset, length) of the array
    /// (see [`CommandReply::batch_at`]): finding it again costs another walk.
    pub batch_at: Option<(u32, u32)>,
}

/// A command reply: the OP_MSG body, or the first OP_REPLY document.
#[derive(Debug, Clone, Copy)]
pub struct CommandReply<'m> {
    /// The reply document.
    pub body: &'m RawDocument,
}

impl<'m> CommandReply<'m> {
    /// The reply a message carries, if it is one.
    pub fn from_message(m: &'m Message) -> Option<CommandReply<'m>> {
        let body = match &m.op {
            Op::Msg(msg) => msg.body().raw(),
            Op::Reply(r) => r.documents.first()?.raw(),
            _ => return None,
        };
        Some(CommandReply { body })
    }

    /// `ok` as a number is 1 (drivers send 1, 1.0 or true).
    pub fn ok(&self) -> bool {
        match self.body.get("ok") {
            Ok(Some(RawBsonRef::Double(d))) => d == 1.0,
            Ok(Some(RawBsonRef::Int32(i))) => i == 1,
            Ok(Some(RawBsonRef::Int64(i))) => i == 1,
            Ok(Some(RawBsonRef::Boolean(b))) => b,
            _ => false,
        }
    }

    /// The error code of a failed command, or of the first write error.
    pub fn error_code(&self) -> Option<i32> {
        if !self.ok() {
            return Some(self.body.get_i32("code").unwrap_or(-1));
        }
        let first = self.body.get_array("writeErrors").ok()?.into_iter().next()?.ok()?;
        Some(first.as_document()?.get_i32("code").unwrap_or(-1))
    }

    /// The `cursor` sub-document of find/aggregate/getMore/listX replies.
    pub fn cursor(&self) -> Option<&'m RawDocument> {
        element::find(self.body, "cursor")?.as_document()
    }

    /// The cursor id to continue with (0 when exhausted).
    pub fn cursor_id(&self) -> Option<i64> {
        self.cursor()?.get_i64("id").ok()
    }

    /// The documents of `firstBatch` or `nextBatch`.
    pub fn batch(&self) -> Option<&'m bson::RawArray> {
        let c = self.cursor()?;
        c.get_array("firstBatch").or_else(|_| c.get_array("nextBatch")).ok()
    }

    /// The same batch as the document an array is on the wire (keys "0", "1", ...),
    /// found with the header walk: detectors read it for every multi-document reply.
    pub fn batch_elements(&self) -> Option<&'m RawDocument> {
        element::elements(self.cursor()?)
            .find(|e| e.kind == 0x04 && (e.key == b"firstBatch" || e.key == b"nextBatch"))?
            .as_array()
    }

    /// What the analysis needs from a reply, read in one quick walk over its top
    /// level and one over its cursor (a `get` per field would rescan the document
    /// each time, and decoding every value would cost more than the walk).
    pub fn summary(&self) -> ReplySummary {
        let mut ok = false;
        let mut code = None;
        let mut first_write_error = None;
        let mut cursor = None;
        for e in element::elements(self.body) {
            match (e.key, e.kind) {
                (b"ok", _) => ok = e.is_one(),
                (b"code", 0x10) => code = e.as_i64().map(|c| c as i32),
                (b"writeErrors", 0x04) => {
                    let first =
                        RawDocument::from_bytes(e.value).ok().and_then(|a| element::elements(a).next());
                    first_write_error =
                        first.map(|w| w.as_document().and_then(|d| d.get_i32("code").ok()).unwrap_or(-1));
                }
                (b"cursor", 0x03) if cursor.is_none() => cursor = e.as_document(),
                _ => {}
            }
        }
        let error_code = if ok { first_write_error } else { Some(code.unwrap_or(-1)) };
        let (mut cursor_id, mut batch_len, mut batch_at) = (None, 0, None);
        for e in element::elements_in(cursor) {
            match (e.key, e.kind) {
                (b"id", 0x12) => cursor_id = e.as_i64(),
                // A batch's documents are counted by their length prefixes, never decoded.
                // The first batch is the one (as [`CommandReply::batch_elements`] finds it).
                (b"firstBatch" | b"nextBatch", 0x04) if batch_at.is_none() => {
                    batch_len =
                        RawDocument::from_bytes(e.value).map_or(0, |a| element::elements(a).count() as u64);
                    let offset = e.value.as_ptr() as usize - self.body.as_bytes().as_ptr() as usize;
                    batch_at = u32::try_from(offset).ok().zip(u32::try_from(e.value.len()).ok());
                }
                _ => {}
            }
        }
        ReplySummary { ok, error_code, cursor_id, batch_len, batch_at }
    }

    /// The batch at `at` (from [`ReplySummary::batch_at`] of this same reply), as
    /// [`CommandReply::batch_elements`] finds it.
    pub fn batch_at(&self, at: (u32, u32)) -> Option<&'m RawDocument> {
        let start = at.0 as usize;
        RawDocument::from_bytes(self.body.as_bytes().get(start..start + at.1 as usize)?).ok()
    }

    /// `n` of write and count replies.
    pub fn n(&self) -> Option<i64> {
        match self.body.get("n").ok()?? {
            RawBsonRef::Int32(i) => Some(i.into()),
            RawBsonRef::Int64(i) => Some(i),
            RawBsonRef::Double(d) => Some(d as i64),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::op::msg::{MsgFlags, OpMsg, Section};
    use crate::op::query::OpQuery;
    use crate::op::reply::OpReply;
    use bson::doc;

    fn msg(body: bson::Document) -> Message {
        let bytes = OpMsg::new(Document::from_doc(&body)).encode(1, 0);
        Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap()
    }

    #[test]
    fn a_namespace_that_is_not_utf8_keeps_the_parts_that_are() {
        // {find: "or\xffders", $db: "shop"}, and the same with the database bad.
        let raw = |find: &[u8], db: &[u8]| {
            let mut body = Vec::new();
            for (key, value) in [(&b"find"[..], find), (&b"$db"[..], db)] {
                body.push(0x02);
                body.extend_from_slice(key);
                body.push(0);
                body.extend_from_slice(&(value.len() as i32 + 1).to_le_bytes());
                body.extend_from_slice(value);
                body.push(0);
            }
            let mut d = ((body.len() + 5) as i32).to_le_bytes().to_vec();
            d.extend_from_slice(&body);
            d.push(0);
            let bytes = OpMsg::new(Document::from_bytes(bytes::Bytes::from(d)).unwrap()).encode(1, 0);
            Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap()
        };
        let m = raw(b"or\xffders", b"shop");
        assert_eq!(Command::from_message(&m).unwrap().namespace(), "shop");
        let m = raw(b"orders", b"sh\xffop");
        assert_eq!(Command::from_message(&m).unwrap().namespace(), ".orders");
        let m = raw(b"orders", b"shop");
        assert_eq!(Command::from_message(&m).unwrap().namespace(), "shop.orders");
        // A collection string whose length prefix says 0 (no room for its NUL): no
        // collection, as before, and the walk ends there, so no `$db` either.
        let empty = raw(b"", b"shop");
        let Op::Msg(msg) = &empty.op else { unreachable!() };
        let mut body = msg.body().raw().as_bytes().to_vec();
        body[10..14].copy_from_slice(&0i32.to_le_bytes());
        let zero = OpMsg::new(Document::from_bytes(bytes::Bytes::from(body)).unwrap()).encode(1, 0);
        let m = Message::decode(&Frame::from_bytes(zero).unwrap()).unwrap();
        assert_eq!(Command::from_message(&m).unwrap().namespace(), "");
    }

    #[test]
    fn op_msg_command_names_namespace_and_session() {
        let m = msg(doc! {"find": "orders", "filter": {"a": 1}, "lsid": {"id": 7}, "$db": "shop"});
        let c = Command::from_message(&m).unwrap();
        assert_eq!(c.name, "find");
        assert_eq!(c.database(), "shop");
        assert_eq!(c.collection(), Some("orders"));
        assert_eq!(c.namespace(), "shop.orders");
        assert_eq!(c.lsid().unwrap().get_i32("id").unwrap(), 7);
        assert!(!c.is_sensitive());

        let g = msg(doc! {"getMore": 5_i64, "collection": "orders", "$db": "shop"});
        assert_eq!(Command::from_message(&g).unwrap().namespace(), "shop.orders");
        let p = msg(doc! {"ping": 1, "$db": "admin"});
        let c = Command::from_message(&p).unwrap();
        assert_eq!((c.collection(), c.namespace().as_str()), (None, "admin"));
    }

    #[test]
    fn op_query_handshake_is_a_command() {
        let q = OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: Document::from_doc(
                &doc! {"$query": {"isMaster": 1, "client": {"application": {"name": "a"}}}},
            ),
            return_fields_selector: None,
        };
        let m = Message::decode(&Frame::from_bytes(q.encode(1)).unwrap()).unwrap();
        let c = Command::from_message(&m).unwrap();
        assert_eq!(c.name, "isMaster");
        assert!(c.is_hello());
        assert_eq!(c.database(), "admin");
        // A command whose own `query` is its filter is not unwrapped to it.
        let count = OpQuery {
            full_collection_name: "shop.$cmd".into(),
            query: Document::from_doc(&doc! {"count": "orders", "query": {"status": "new"}}),
            ..q.clone()
        };
        let m = Message::decode(&Frame::from_bytes(count.encode(1)).unwrap()).unwrap();
        let c = Command::from_message(&m).unwrap();
        assert_eq!((c.name, c.namespace().as_str()), ("count", "shop.orders"));
        // `$query` wraps wherever it sits.
        let wrapped = OpQuery {
            full_collection_name: "shop.$cmd".into(),
            query: Document::from_doc(
                &doc! {"$readPreference": {"mode": "secondary"}, "$query": {"count": "orders", "query": {}}},
            ),
            ..q.clone()
        };
        let m = Message::decode(&Frame::from_bytes(wrapped.encode(1)).unwrap()).unwrap();
        assert_eq!(Command::from_message(&m).unwrap().name, "count");
        let legacy_find = OpQuery { full_collection_name: "shop.orders".into(), ..q };
        let m = Message::decode(&Frame::from_bytes(legacy_find.encode(1)).unwrap()).unwrap();
        assert!(Command::from_message(&m).is_none());
    }

    #[test]
    fn auth_and_speculative_hello_are_sensitive() {
        for name in
            ["saslStart", "saslContinue", "authenticate", "getnonce", "createUser", "updateUser", "copydb"]
        {
            let m = msg(doc! {name: 1, "$db": "admin"});
            assert!(Command::from_message(&m).unwrap().is_sensitive(), "{name}");
        }
        let m = msg(doc! {"hello": 1, "speculativeAuthenticate": {"saslStart": 1}, "$db": "admin"});
        assert!(Command::from_message(&m).unwrap().is_sensitive());
        let m = msg(doc! {"hello": 1, "$db": "admin"});
        assert!(!Command::from_message(&m).unwrap().is_sensitive());
    }

    #[test]
    fn documents_come_from_body_arrays_and_sequences() {
        let in_body = msg(doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "$db": "t"});
        assert_eq!(Command::from_message(&in_body).unwrap().documents("documents").len(), 2);
        let seq = OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![
                Section::Body(Document::from_doc(&doc! {"update": "c", "$db": "t"})),
                Section::Sequence(crate::op::msg::DocumentSequence {
                    identifier: "updates".into(),
                    documents: vec![Document::from_doc(&doc! {"q": {"a": 1}, "u": {"$set": {"b": 1}}})],
                }),
            ],
            checksum: None,
        };
        let m = Message::decode(&Frame::from_bytes(seq.encode(1, 0)).unwrap()).unwrap();
        let c = Command::from_message(&m).unwrap();
        let ups = c.documents("updates");
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].get_document("q").unwrap().get_i32("a").unwrap(), 1);
        assert!(c.documents("deletes").is_empty());
    }

    #[test]
    fn replies_expose_ok_errors_cursors_and_n() {
        let r =
            msg(doc! {"cursor": {"id": 42_i64, "ns": "t.c", "firstBatch": [{"a": 1}, {"a": 2}]}, "ok": 1.0});
        let v = CommandReply::from_message(&r).unwrap();
        assert!(v.ok());
        assert_eq!(v.cursor_id(), Some(42));
        assert_eq!(v.batch().unwrap().into_iter().count(), 2);
        assert_eq!(v.error_code(), None);
        let e = msg(doc! {"ok": 0.0, "errmsg": "x", "code": 26});
        assert_eq!(CommandReply::from_message(&e).unwrap().error_code(), Some(26));
        let s = CommandReply::from_message(&r).unwrap().summary();
        assert_eq!((s.ok, s.error_code, s.cursor_id, s.batch_len), (true, None, Some(42), 2));
        let at = v.batch_at(s.batch_at.expect("a batch")).expect("found where it was");
        assert_eq!(Some(at.as_bytes()), v.batch_elements().map(|b| b.as_bytes()));
        let two = msg(doc! {"cursor": {"id": 0_i64, "firstBatch": [], "nextBatch": [{"a": 1}]}, "ok": 1});
        let (v2, s2) =
            (CommandReply::from_message(&two).unwrap(), CommandReply::from_message(&two).unwrap().summary());
        assert_eq!(s2.batch_len, 0, "the first batch, as batch_elements finds it");
        assert_eq!(
            v2.batch_at(s2.batch_at.unwrap()).map(|b| b.as_bytes()),
            v2.batch_elements().map(|b| b.as_bytes())
        );
        let mixed = msg(doc! {"cursor": {"id": 0_i64, "nextBatch": [1, "x", {"a": 1}]}, "ok": 1});
        assert_eq!(CommandReply::from_message(&mixed).unwrap().summary().batch_len, 3);
        assert_eq!(CommandReply::from_message(&e).unwrap().summary().error_code, Some(26));
        let w = msg(doc! {"n": 1, "writeErrors": [{"index": 0, "code": 11000}], "ok": 1});
        assert_eq!(CommandReply::from_message(&w).unwrap().summary().error_code, Some(11000));
        let v = CommandReply::from_message(&w).unwrap();
        assert_eq!((v.n(), v.error_code()), (Some(1), Some(11000)));
        let legacy = OpReply {
            response_flags: 0,
            cursor_id: 0,
            starting_from: 0,
            number_returned: 1,
            documents: vec![Document::from_doc(&doc! {"ismaster": true, "ok": true})],
        };
        let m = Message::decode(&Frame::from_bytes(legacy.encode(2, 1)).unwrap()).unwrap();
        assert!(CommandReply::from_message(&m).unwrap().ok());
    }
}
