//! BSON documents as zero-copy views over a message's bytes.

use bson::RawDocument;
use bytes::Bytes;

use crate::error::{Result, WireError};

/// One BSON document inside a message: a refcounted slice of the frame, checked for
/// its length prefix and terminator, read lazily through [`bson::RawDocument`].
#[derive(Clone, PartialEq, Eq)]
pub struct Document(Bytes);

impl Document {
    /// Reads the document that starts at `offset` in `buf`, returning it and the offset
    /// just past it. `op_code` is for the error message only.
    pub(crate) fn read(buf: &Bytes, offset: usize, op_code: i32) -> Result<(Document, usize)> {
        Document::read_within(buf, offset, buf.len(), op_code)
    }

    /// [`Document::read`] of a document that must end by `end` (a section's or a
    /// message's end), without a narrower `Bytes` made for it first.
    pub(crate) fn read_within(
        buf: &Bytes,
        offset: usize,
        end: usize,
        op_code: i32,
    ) -> Result<(Document, usize)> {
        let bad = |reason| WireError::BadDocument { op_code, offset, reason };
        let rest = end.min(buf.len()).saturating_sub(offset);
        if rest < 4 {
            return Err(WireError::Truncated { op_code, offset, needed: 4, available: rest });
        }
        let len = i32::from_le_bytes(buf[offset..offset + 4].try_into().expect("4 bytes"));
        if len < 5 {
            return Err(bad("length below 5"));
        }
        let len = len as usize;
        if len > rest {
            return Err(WireError::Truncated { op_code, offset, needed: len, available: rest });
        }
        if buf[offset + len - 1] != 0 {
            return Err(bad("missing terminating NUL"));
        }
        Ok((Document(buf.slice(offset..offset + len)), offset + len))
    }

    /// A document from bytes that must hold exactly one BSON document.
    pub fn from_bytes(bytes: Bytes) -> Result<Document> {
        let (doc, end) = Document::read(&bytes, 0, 0)?;
        if end != bytes.len() {
            return Err(WireError::BadDocument { op_code: 0, offset: end, reason: "trailing bytes" });
        }
        Ok(doc)
    }

    /// A document from an owned BSON document (for encoding tests and fixtures).
    pub fn from_doc(doc: &bson::Document) -> Document {
        let mut v = Vec::new();
        doc.to_writer(&mut v).expect("a bson::Document always serialises");
        Document(Bytes::from(v))
    }

    /// The lazy, zero-copy view. Elements are validated as they are read.
    pub fn raw(&self) -> &RawDocument {
        RawDocument::from_bytes(&self.0).expect("length and terminator were checked")
    }

    /// The document's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// The document's size in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a BSON document has at least 5 bytes.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// An owned copy, for tests and for code that must keep values.
    pub fn to_document(&self) -> std::result::Result<bson::Document, bson::error::Error> {
        bson::Document::try_from(self.raw())
    }
}

impl std::fmt::Debug for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_document() {
            Ok(d) => write!(f, "{d}"),
            Err(_) => write!(f, "<invalid bson, {} bytes>", self.0.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_document_at_an_offset() {
        // {a: 1} preceded by two junk bytes and followed by one.
        let bytes = Bytes::from_static(&[9, 9, 12, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0, 0, 7]);
        let (doc, end) = Document::read(&bytes, 2, 2013).unwrap();
        assert_eq!(end, 14);
        assert_eq!(doc.raw().get_i32("a").unwrap(), 1);
        assert_eq!(doc.len(), 12);
    }

    #[test]
    fn rejects_bad_lengths_and_terminators() {
        let short = Bytes::from_static(&[4, 0, 0, 0]);
        assert!(matches!(
            Document::read(&short, 0, 1),
            Err(WireError::BadDocument { reason: "length below 5", .. })
        ));
        let past_end = Bytes::from_static(&[50, 0, 0, 0, 0]);
        assert!(matches!(
            Document::read(&past_end, 0, 1),
            Err(WireError::Truncated { needed: 50, available: 5, .. })
        ));
        let no_nul = Bytes::from_static(&[5, 0, 0, 0, 1]);
        assert!(matches!(
            Document::read(&no_nul, 0, 1),
            Err(WireError::BadDocument { reason: "missing terminating NUL", .. })
        ));
        assert!(Document::from_bytes(Bytes::from_static(&[5, 0, 0, 0, 0, 0])).is_err());
    }
}
