//! OP_QUERY (2004): how deployed drivers still open a connection (`isMaster`/`hello`
//! on `admin.$cmd`), and how very old ones send everything.

use bytes::{BufMut, Bytes};

use super::{begin, finish, put_cstring, Reader};
use crate::doc::Document;
use crate::error::Result;
use crate::header::OpCode;

/// A decoded OP_QUERY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpQuery {
    /// Bit vector of query options (tailable, secondaryOk, exhaust, ...).
    pub flags: i32,
    /// `db.collection`; commands use `db.$cmd`.
    pub full_collection_name: String,
    /// Documents to skip.
    pub number_to_skip: i32,
    /// Documents to return in the first reply (-1 for commands).
    pub number_to_return: i32,
    /// The query, or the command document (possibly wrapped in `$query`).
    pub query: Document,
    /// Optional projection.
    pub return_fields_selector: Option<Document>,
}

impl OpQuery {
    /// Decodes a whole OP_QUERY message (header included).
    pub fn decode(msg: &Bytes) -> Result<OpQuery> {
        let mut r = Reader::body(msg, OpCode::Query.as_i32());
        let flags = r.i32()?;
        let full_collection_name = r.cstring()?;
        let number_to_skip = r.i32()?;
        let number_to_return = r.i32()?;
        let query = r.document()?;
        let return_fields_selector = if r.remaining() > 0 { Some(r.document()?) } else { None };
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            return_fields_selector,
        })
    }

    /// Encodes a whole message.
    pub fn encode(&self, request_id: i32) -> Bytes {
        let mut v = begin(request_id, 0, OpCode::Query.as_i32());
        v.put_i32_le(self.flags);
        put_cstring(&mut v, &self.full_collection_name);
        v.put_i32_le(self.number_to_skip);
        v.put_i32_le(self.number_to_return);
        v.put_slice(self.query.bytes());
        if let Some(p) = &self.return_fields_selector {
            v.put_slice(p.bytes());
        }
        finish(v)
    }

    /// The database part of `full_collection_name`.
    pub fn database(&self) -> &str {
        self.full_collection_name.split_once('.').map_or(&self.full_collection_name, |(db, _)| db)
    }

    /// The collection part (`$cmd` for commands).
    pub fn collection(&self) -> &str {
        self.full_collection_name.split_once('.').map_or("", |(_, c)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::WireError;
    use bson::doc;

    #[test]
    fn decodes_a_byte_literal_legacy_hello() {
        let bytes: &[u8] = &[
            0x3a, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xd4, 0x07, 0, 0, // header, OP_QUERY
            4, 0, 0, 0, // flags: secondaryOk
            b'a', b'd', b'm', b'i', b'n', b'.', b'$', b'c', b'm', b'd', 0, // admin.$cmd
            0, 0, 0, 0, // numberToSkip
            0xff, 0xff, 0xff, 0xff, // numberToReturn -1
            0x13, 0, 0, 0, 0x10, b'i', b's', b'M', b'a', b's', b't', b'e', b'r', 0, 1, 0, 0, 0, 0,
        ];
        let q = OpQuery::decode(&Bytes::from_static(bytes)).unwrap();
        assert_eq!(q.flags, 4);
        assert_eq!(q.database(), "admin");
        assert_eq!(q.collection(), "$cmd");
        assert_eq!(q.number_to_return, -1);
        assert_eq!(q.query.raw().get_i32("isMaster").unwrap(), 1);
        assert!(q.return_fields_selector.is_none());
        assert_eq!(&q.encode(1)[..], bytes);
    }

    #[test]
    fn projection_round_trips_and_truncation_fails() {
        let q = OpQuery {
            flags: 0,
            full_collection_name: "shop.orders".into(),
            number_to_skip: 5,
            number_to_return: 10,
            query: Document::from_doc(&doc! {"status": "open"}),
            return_fields_selector: Some(Document::from_doc(&doc! {"total": 1})),
        };
        let bytes = q.encode(4);
        assert_eq!(OpQuery::decode(&bytes).unwrap(), q);
        let mut cut = bytes[..30].to_vec();
        cut[0..4].copy_from_slice(&30i32.to_le_bytes());
        assert!(OpQuery::decode(&Bytes::from(cut)).is_err());
        let mut no_nul = bytes[..27].to_vec();
        no_nul[0..4].copy_from_slice(&27i32.to_le_bytes());
        assert!(matches!(
            OpQuery::decode(&Bytes::from(no_nul)),
            Err(WireError::BadCString { offset: 20, .. })
        ));
    }
}
