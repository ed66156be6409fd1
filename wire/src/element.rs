//! A quick walk over a document's top-level elements by their headers alone: type,
//! key bytes, value bytes. Nothing is decoded or UTF-8 checked until asked for, so
//! finding one field (`$db`, usually the last) or skipping large ones (`lsid`,
//! `$clusterTime`, a batch) costs a few byte reads each. The walk stops at the
//! first malformed element; `bson`'s iterator is the one that reports errors.

use bson::RawDocument;

/// One element: its type byte, key and the exact bytes of its value.
#[derive(Debug, Clone, Copy)]
pub struct Element<'a> {
    /// The BSON type byte (0x02 string, 0x03 document, 0x04 array, ...).
    pub kind: u8,
    /// The key, not checked for UTF-8.
    pub key: &'a [u8],
    /// The value's bytes.
    pub value: &'a [u8],
}

impl<'a> Element<'a> {
    /// The value of a string element.
    pub fn as_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.string_bytes()?).ok()
    }

    /// The bytes of a string element's value, not checked for UTF-8: without its
    /// length and its NUL. `None` for another type, or for a length that leaves no
    /// room for the NUL.
    pub fn string_bytes(&self) -> Option<&'a [u8]> {
        match self.kind {
            0x02 => self.value.get(4..self.value.len().checked_sub(1)?),
            _ => None,
        }
    }

    /// The value of a document element.
    pub fn as_document(&self) -> Option<&'a RawDocument> {
        match self.kind {
            0x03 => RawDocument::from_bytes(self.value).ok(),
            _ => None,
        }
    }

    /// The key as text, when it is UTF-8. Keys are nearly always a few ASCII
    /// bytes, which a byte test clears faster than the full UTF-8 check (that check
    /// was 1.2% of bench/analysis: it runs for every command's name).
    pub fn key_str(&self) -> Option<&'a str> {
        if self.key.is_ascii() {
            // SAFETY: ASCII bytes are UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(self.key) });
        }
        std::str::from_utf8(self.key).ok()
    }

    /// The elements of an array element, read as the document an array is on the wire.
    pub fn as_array(&self) -> Option<&'a RawDocument> {
        match self.kind {
            0x04 => RawDocument::from_bytes(self.value).ok(),
            _ => None,
        }
    }

    /// The value of a boolean element.
    pub fn as_bool(&self) -> Option<bool> {
        match self.kind {
            0x08 => Some(self.value == [1]),
            _ => None,
        }
    }

    /// An int32, int64 or double, as i64 (doubles truncated).
    pub fn as_i64(&self) -> Option<i64> {
        match self.kind {
            0x10 => Some(i32::from_le_bytes(self.value.try_into().ok()?).into()),
            0x12 => Some(i64::from_le_bytes(self.value.try_into().ok()?)),
            0x01 => Some(f64::from_le_bytes(self.value.try_into().ok()?) as i64),
            _ => None,
        }
    }

    /// A number or boolean equal to 1 (how `ok` is spelled: 1, 1.0, true).
    pub fn is_one(&self) -> bool {
        match self.kind {
            0x01 => f64::from_le_bytes(self.value.try_into().unwrap_or_default()) == 1.0,
            0x08 => self.value == [1],
            _ => self.as_i64() == Some(1),
        }
    }
}

/// The elements of `doc`, in order.
#[inline]
pub fn elements(doc: &RawDocument) -> Elements<'_> {
    Elements { b: doc.as_bytes(), at: 4 }
}

/// The elements of `doc` when there is one, none otherwise: one plain iterator, where
/// `doc.into_iter().flat_map(elements)` kept a `Flatten`'s inner and outer state on
/// every step (bench/analysis walks arrays and batches this way on every operation).
#[inline]
pub fn elements_in(doc: Option<&RawDocument>) -> Elements<'_> {
    // An empty document: its length, then its terminator.
    const EMPTY: &[u8] = &[5, 0, 0, 0, 0];
    Elements { b: doc.map_or(EMPTY, RawDocument::as_bytes), at: 4 }
}

/// The element of `doc` named `key`, if any.
#[inline]
pub fn find<'a>(doc: &'a RawDocument, key: &str) -> Option<Element<'a>> {
    elements(doc).find(|e| same(e.key, key.as_bytes()))
}

/// Whether two short byte strings (keys, field paths) are equal, compared in place
/// eight bytes at a time: for a key of a few bytes, a call to `memcmp` costs more
/// than the comparison (bench/analysis spent 6% of its time there).
#[inline(always)]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a8, mut b8) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut a8).zip(&mut b8) {
        if x != y {
            return false;
        }
    }
    a8.remainder().iter().zip(b8.remainder()).all(|(x, y)| x == y)
}

/// Iterator of [`elements`].
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Elements<'a> {
    #[inline]
    fn i32_at(&self, i: usize) -> Option<usize> {
        let n = i32::from_le_bytes(self.b.get(i..i + 4)?.try_into().ok()?);
        usize::try_from(n).ok()
    }

    /// The length of the C string at `i` (to its NUL). Keys are short and the
    /// document goes on after them: eight bytes are tested at a time.
    #[inline(always)]
    fn cstring_len(&self, i: usize) -> Option<usize> {
        let rest = self.b.get(i..)?;
        let mut at = 0;
        while let Some(chunk) = rest.get(at..at + 8) {
            let v = u64::from_le_bytes(chunk.try_into().ok()?);
            let zero = v.wrapping_sub(0x0101_0101_0101_0101) & !v & 0x8080_8080_8080_8080;
            if zero != 0 {
                return Some(at + (zero.trailing_zeros() / 8) as usize);
            }
            at += 8;
        }
        rest[at..].iter().position(|&x| x == 0).map(|n| at + n)
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = Element<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<Element<'a>> {
        let kind = *self.b.get(self.at)?;
        if kind == 0 {
            return None;
        }
        let key_at = self.at + 1;
        let key_len = self.cstring_len(key_at)?;
        let v = key_at + key_len + 1;
        let len = match kind {
            0x06 | 0x0A | 0xFF | 0x7F => 0,
            0x08 => 1,
            0x10 => 4,
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x07 => 12,
            0x13 => 16,
            0x02 | 0x0D | 0x0E => 4 + self.i32_at(v)?,
            0x03 | 0x04 | 0x0F => self.i32_at(v)?,
            0x05 => 5 + self.i32_at(v)?,
            0x0C => 4 + self.i32_at(v)? + 12,
            0x0B => {
                let pattern = self.cstring_len(v)?;
                let options = self.cstring_len(v + pattern + 1)?;
                pattern + options + 2
            }
            _ => {
                self.at = self.b.len();
                return None;
            }
        };
        // The value must end before the document's terminator.
        let value = self.b.get(v..v + len).filter(|_| v + len < self.b.len())?;
        self.at = v + len;
        Some(Element { kind, key: &self.b[key_at..key_at + key_len], value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    #[test]
    fn keys_of_every_length_around_eight_bytes_are_read_whole() {
        for n in 0..40 {
            let key = "k".repeat(n);
            let mut d = bson::Document::new();
            d.insert(key.clone(), 1);
            d.insert("z", "x");
            let raw = RawDocumentBuf::try_from(&d).unwrap();
            let keys: Vec<&[u8]> = elements(&raw).map(|e| e.key).collect();
            assert_eq!(keys, [key.as_bytes(), b"z"], "a key of {n} bytes");
        }
    }

    #[test]
    fn no_document_has_no_elements_and_one_has_its_own() {
        assert_eq!(elements_in(None).count(), 0);
        let raw = RawDocumentBuf::try_from(&doc! {"a": 1, "b": [1, 2]}).unwrap();
        let keys: Vec<&[u8]> = elements_in(Some(&raw)).map(|e| e.key).collect();
        assert_eq!(keys, [b"a", b"b"]);
    }

    #[test]
    fn walks_every_type_and_finds_by_key() {
        let d = doc! {
            "d": 1.5, "s": "x", "o": {"a": 1}, "a": [1, 2], "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "oid": bson::oid::ObjectId::new(), "b": true, "dt": bson::DateTime::now(), "n": null,
            "re": bson::Regex { pattern: "^a".to_string().try_into().unwrap(), options: "i".to_string().try_into().unwrap() },
            "i": 7, "ts": bson::Timestamp { time: 1, increment: 2 }, "l": 9_i64, "min": bson::Bson::MinKey, "$db": "shop",
        };
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        let keys: Vec<&[u8]> = elements(&raw).map(|e| e.key).collect();
        let expected: Vec<&[u8]> = d.keys().map(|k| k.as_bytes()).collect();
        assert_eq!(keys, expected);
        assert_eq!(find(&raw, "$db").and_then(|e| e.as_str()), Some("shop"));
        assert_eq!(find(&raw, "i").and_then(|e| e.as_i64()), Some(7));
        assert_eq!(find(&raw, "l").and_then(|e| e.as_i64()), Some(9));
        assert!(find(&raw, "b").unwrap().is_one());
        assert_eq!(find(&raw, "o").and_then(|e| e.as_document()).unwrap().get_i32("a").unwrap(), 1);
        assert!(find(&raw, "missing").is_none());
    }

    #[test]
    fn keys_read_as_text_when_they_are_utf8_ascii_or_not() {
        // {"find": 1, "café": 1, <key 0xff 0xfe>: 1}, written by hand: no builder
        // writes a key that is not UTF-8.
        let mut b = vec![0u8; 4];
        for key in [&b"find"[..], "café".as_bytes(), &[0xff, 0xfe]] {
            b.push(0x10);
            b.extend_from_slice(key);
            b.push(0);
            b.extend_from_slice(&1i32.to_le_bytes());
        }
        b.push(0);
        let len = b.len() as i32;
        b[..4].copy_from_slice(&len.to_le_bytes());
        let doc = RawDocument::from_bytes(&b).unwrap();
        let keys: Vec<Option<&str>> = elements(doc).map(|e| e.key_str()).collect();
        assert_eq!(keys, [Some("find"), Some("café"), None]);
    }

    #[test]
    fn same_compares_keys_of_every_length() {
        for n in 0..20 {
            let a = "k".repeat(n);
            assert!(same(a.as_bytes(), a.as_bytes()));
            assert!(!same(a.as_bytes(), format!("{a}k").as_bytes()));
            for i in 0..n {
                let mut b = a.clone().into_bytes();
                b[i] = b'x';
                assert!(!same(a.as_bytes(), &b), "a difference at byte {i} of {n}");
            }
        }
    }

    #[test]
    fn stops_at_malformed_elements() {
        let raw = RawDocumentBuf::try_from(&doc! {"a": "x", "b": 1}).unwrap();
        let mut bytes = raw.as_bytes().to_vec();
        bytes[7] = 0x40; // string length beyond the document
        let bad = RawDocument::from_bytes(&bytes).unwrap();
        assert_eq!(elements(bad).count(), 0);
        let mut unknown = raw.as_bytes().to_vec();
        unknown[4] = 0x42;
        assert_eq!(elements(RawDocument::from_bytes(&unknown).unwrap()).count(), 0);
    }
}
