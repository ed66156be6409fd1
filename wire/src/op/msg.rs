//! OP_MSG (2013): flag bits, one body section, any number of document sequences,
//! and an optional CRC-32C checksum.

use bytes::{BufMut, Bytes};
use smallvec::SmallVec;

use super::{begin, finish, put_cstring, Reader};
use crate::doc::Document;
use crate::error::{Result, WireError};
use crate::header::OpCode;

/// OP_MSG `flagBits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct MsgFlags(pub u32);

impl MsgFlags {
    /// A CRC-32C checksum follows the sections.
    pub const CHECKSUM_PRESENT: MsgFlags = MsgFlags(1 << 0);
    /// The sender will send another message without waiting for a reply; on a
    /// request: no reply will come (w:0); on a reply: more replies follow (exhaust).
    pub const MORE_TO_COME: MsgFlags = MsgFlags(1 << 1);
    /// The client accepts several replies to this request (exhaust cursors, awaitable hello).
    pub const EXHAUST_ALLOWED: MsgFlags = MsgFlags(1 << 16);
    /// Bits 0-15 are required: a receiver must reject any it does not know.
    const REQUIRED_MASK: u32 = 0xffff;
    const KNOWN: u32 = Self::CHECKSUM_PRESENT.0 | Self::MORE_TO_COME.0 | Self::EXHAUST_ALLOWED.0;

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: MsgFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with `other`'s bits set too.
    pub fn with(self, other: MsgFlags) -> MsgFlags {
        MsgFlags(self.0 | other.0)
    }
}

/// A kind 1 section: documents for one command argument, sent outside the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentSequence {
    /// The argument it stands for: `documents`, `updates`, `deletes`, `ops`, `nsInfo`.
    pub identifier: String,
    /// The documents, in order.
    pub documents: Vec<Document>,
}

/// One OP_MSG section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    /// Kind 0: the command or reply document.
    Body(Document),
    /// Kind 1: a document sequence.
    Sequence(DocumentSequence),
}

/// A decoded OP_MSG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpMsg {
    /// The flag bits.
    pub flags: MsgFlags,
    /// The sections, in wire order: nearly every message is its body alone, held
    /// in place (an allocation per message was 0.8% of the analysis' instructions).
    pub sections: SmallVec<[Section; 1]>,
    /// The checksum, when `checksumPresent` is set (already verified by [`OpMsg::decode`]).
    pub checksum: Option<u32>,
}

impl OpMsg {
    /// A request or reply with just a body.
    pub fn new(body: Document) -> OpMsg {
        OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![Section::Body(body)],
            checksum: None,
        }
    }

    /// Decodes a whole OP_MSG message (header included), verifying the checksum.
    pub fn decode(msg: &Bytes) -> Result<OpMsg> {
        let op = OpCode::Msg.as_i32();
        let mut r = Reader::body(msg, op);
        let flags = MsgFlags(r.u32()?);
        let unknown = flags.0 & MsgFlags::REQUIRED_MASK & !MsgFlags::KNOWN;
        if unknown != 0 {
            return Err(WireError::UnknownFlags { bits: unknown });
        }
        let mut checksum = None;
        if flags.contains(MsgFlags::CHECKSUM_PRESENT) {
            if r.remaining() < 4 {
                return Err(WireError::Truncated {
                    op_code: op,
                    offset: r.pos(),
                    needed: 4,
                    available: r.remaining(),
                });
            }
            let at = msg.len() - 4;
            let expected = u32::from_le_bytes(msg[at..].try_into().expect("4 bytes"));
            let computed = crc32c::crc32c(&msg[..at]);
            if expected != computed {
                return Err(WireError::ChecksumMismatch { expected, computed });
            }
            checksum = Some(expected);
            r.set_end(at);
        }
        let mut sections = SmallVec::new();
        let mut bodies = 0;
        while r.remaining() > 0 {
            let kind_at = r.pos();
            match r.u8()? {
                0 => {
                    bodies += 1;
                    sections.push(Section::Body(r.document()?));
                }
                1 => {
                    let start = r.pos();
                    let size = r.i32()?;
                    let needed = usize::try_from(size).unwrap_or(0);
                    if needed < 5 || needed > r.remaining() + 4 {
                        return Err(WireError::Truncated {
                            op_code: op,
                            offset: start,
                            needed: needed.max(5),
                            available: r.remaining() + 4,
                        });
                    }
                    let end = start + needed;
                    let identifier = r.cstring()?;
                    if r.pos() > end {
                        return Err(WireError::BadCString { op_code: op, offset: start + 4 });
                    }
                    let mut documents = Vec::new();
                    let outer_end = r.pos() + r.remaining();
                    r.set_end(end);
                    while r.remaining() > 0 {
                        documents.push(r.document()?);
                    }
                    r.set_end(outer_end);
                    sections.push(Section::Sequence(DocumentSequence { identifier, documents }));
                }
                kind => return Err(WireError::UnknownSectionKind { kind, offset: kind_at }),
            }
        }
        if bodies != 1 {
            return Err(WireError::BodyCount { found: bodies });
        }
        Ok(OpMsg { flags, sections, checksum })
    }

    /// Encodes a whole message. When `checksumPresent` is set the checksum is
    /// computed afresh (the stored one is ignored).
    pub fn encode(&self, request_id: i32, response_to: i32) -> Bytes {
        let mut v = begin(request_id, response_to, OpCode::Msg.as_i32());
        v.put_u32_le(self.flags.0);
        for s in &self.sections {
            match s {
                Section::Body(d) => {
                    v.put_u8(0);
                    v.put_slice(d.bytes());
                }
                Section::Sequence(seq) => {
                    v.put_u8(1);
                    let size =
                        4 + seq.identifier.len() + 1 + seq.documents.iter().map(Document::len).sum::<usize>();
                    v.put_i32_le(size as i32);
                    put_cstring(&mut v, &seq.identifier);
                    for d in &seq.documents {
                        v.put_slice(d.bytes());
                    }
                }
            }
        }
        if self.flags.contains(MsgFlags::CHECKSUM_PRESENT) {
            let len = (v.len() + 4) as i32;
            v[0..4].copy_from_slice(&len.to_le_bytes());
            let crc = crc32c::crc32c(&v);
            v.put_u32_le(crc);
        }
        finish(v)
    }

    /// The kind 0 body.
    pub fn body(&self) -> &Document {
        self.sections
            .iter()
            .find_map(|s| match s {
                Section::Body(d) => Some(d),
                Section::Sequence(_) => None,
            })
            .expect("decode and new guarantee one body")
    }

    /// The document sequences (kind 1 sections).
    pub fn sequences(&self) -> impl Iterator<Item = &DocumentSequence> {
        self.sections.iter().filter_map(|s| match s {
            Section::Sequence(seq) => Some(seq),
            Section::Body(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// `{ping: 1, $db: "admin"}` as an OP_MSG, byte by byte.
    const PING: &[u8] = &[
        0x33, 0, 0, 0, // messageLength 51
        1, 0, 0, 0, // requestID
        0, 0, 0, 0, // responseTo
        0xdd, 0x07, 0, 0, // OP_MSG
        0, 0, 0, 0, // flagBits
        0, // kind 0
        0x1e, 0, 0, 0, // document length 30
        0x10, b'p', b'i', b'n', b'g', 0, 1, 0, 0, 0, // ping: int32 1
        0x02, b'$', b'd', b'b', 0, 6, 0, 0, 0, b'a', b'd', b'm', b'i', b'n', 0, // $db: "admin"
        0,
    ];

    #[test]
    fn decodes_a_byte_literal_ping() {
        let m = OpMsg::decode(&Bytes::from_static(PING)).unwrap();
        assert_eq!(m.flags, MsgFlags(0));
        assert_eq!(m.sections.len(), 1);
        assert_eq!(m.body().raw().get_i32("ping").unwrap(), 1);
        assert_eq!(m.body().raw().get_str("$db").unwrap(), "admin");
        assert_eq!(m.encode(1, 0), Bytes::from_static(PING));
    }

    fn with_flags(flags: u32) -> Bytes {
        let mut v = PING.to_vec();
        v[16..20].copy_from_slice(&flags.to_le_bytes());
        Bytes::from(v)
    }

    #[test]
    fn known_flags_decode_unknown_required_bits_do_not() {
        let m = OpMsg::decode(&with_flags(0x2 | 0x10000)).unwrap();
        assert!(m.flags.contains(MsgFlags::MORE_TO_COME));
        assert!(m.flags.contains(MsgFlags::EXHAUST_ALLOWED));
        assert!(!m.flags.contains(MsgFlags::CHECKSUM_PRESENT));
        assert_eq!(OpMsg::decode(&with_flags(0x4)), Err(WireError::UnknownFlags { bits: 0x4 }));
        // Unknown optional bits (16-31) are ignored, as the spec requires.
        assert!(OpMsg::decode(&with_flags(0x8000_0000)).is_ok());
    }

    #[test]
    fn checksum_is_crc32c_and_verified() {
        let mut m = OpMsg::new(Document::from_doc(&doc! {"ping": 1, "$db": "admin"}));
        m.flags = MsgFlags::CHECKSUM_PRESENT;
        let bytes = m.encode(9, 0);
        assert_eq!(bytes.len(), PING.len() + 4);
        let at = bytes.len() - 4;
        let crc = u32::from_le_bytes(bytes[at..].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&bytes[..at]));
        assert_ne!(crc, crc32c_ieee_for_contrast(&bytes[..at]));
        let d = OpMsg::decode(&bytes).unwrap();
        assert_eq!(d.checksum, Some(crc));
        let mut bad = bytes.to_vec();
        bad[25] ^= 1;
        assert!(matches!(
            OpMsg::decode(&Bytes::from(bad)),
            Err(WireError::ChecksumMismatch { expected, .. }) if expected == crc
        ));
    }

    /// The IEEE polynomial, to show the codec does not use it.
    fn crc32c_ieee_for_contrast(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn document_sequences_round_trip() {
        let body = Document::from_doc(&doc! {"insert": "c", "$db": "t"});
        let docs = vec![Document::from_doc(&doc! {"_id": 1}), Document::from_doc(&doc! {"_id": 2})];
        let m = OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![
                Section::Sequence(DocumentSequence { identifier: "documents".into(), documents: docs }),
                Section::Body(body),
            ],
            checksum: None,
        };
        let bytes = m.encode(3, 0);
        let d = OpMsg::decode(&bytes).unwrap();
        assert_eq!(d, m);
        let seq = d.sequences().next().unwrap();
        assert_eq!(seq.identifier, "documents");
        assert_eq!(seq.documents[1].raw().get_i32("_id").unwrap(), 2);
        assert_eq!(d.body().raw().get_str("insert").unwrap(), "c");
    }

    #[test]
    fn an_empty_sequence_is_allowed() {
        let m = OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![
                Section::Body(Document::from_doc(&doc! {"insert": "c"})),
                Section::Sequence(DocumentSequence { identifier: "documents".into(), documents: vec![] }),
            ],
            checksum: None,
        };
        assert_eq!(OpMsg::decode(&m.encode(1, 0)).unwrap(), m);
    }

    #[test]
    fn rejects_unknown_section_kinds_and_wrong_body_counts() {
        let mut v = PING.to_vec();
        v[20] = 2;
        assert_eq!(
            OpMsg::decode(&Bytes::from(v)),
            Err(WireError::UnknownSectionKind { kind: 2, offset: 20 })
        );
        let two_bodies = OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![
                Section::Body(Document::from_doc(&doc! {"a": 1})),
                Section::Body(Document::from_doc(&doc! {"b": 1})),
            ],
            checksum: None,
        };
        assert_eq!(OpMsg::decode(&two_bodies.encode(1, 0)), Err(WireError::BodyCount { found: 2 }));
        let no_body = Bytes::from(PING[..20].to_vec());
        assert_eq!(OpMsg::decode(&no_body), Err(WireError::BodyCount { found: 0 }));
    }

    #[test]
    fn rejects_sequences_whose_size_lies() {
        let m = OpMsg {
            flags: MsgFlags::default(),
            sections: smallvec::smallvec![
                Section::Body(Document::from_doc(&doc! {"insert": "c"})),
                Section::Sequence(DocumentSequence {
                    identifier: "documents".into(),
                    documents: vec![Document::from_doc(&doc! {"_id": 1})],
                }),
            ],
            checksum: None,
        };
        let good = m.encode(1, 0);
        let seq_at = 16 + 4 + 1 + m.body().len() + 1;
        for lie in [-1i32, 0, 4, 1000] {
            let mut v = good.to_vec();
            v[seq_at..seq_at + 4].copy_from_slice(&lie.to_le_bytes());
            assert!(OpMsg::decode(&Bytes::from(v)).is_err(), "size {lie} accepted");
        }
        // A size that cuts a document in half.
        let mut v = good.to_vec();
        let size = i32::from_le_bytes(v[seq_at..seq_at + 4].try_into().unwrap());
        v[seq_at..seq_at + 4].copy_from_slice(&(size - 3).to_le_bytes());
        assert!(OpMsg::decode(&Bytes::from(v)).is_err());
    }

    #[test]
    fn truncated_body_is_an_error_not_a_panic() {
        for cut in 16..PING.len() {
            let mut v = PING[..cut].to_vec();
            v[0..4].copy_from_slice(&(cut as i32).to_le_bytes());
            assert!(OpMsg::decode(&Bytes::from(v)).is_err(), "cut at {cut}");
        }
    }
}
