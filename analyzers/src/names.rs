//! Field paths and names as detectors keep them: interned (a number in state, the
//! text once), and only when they read as field names. A key that looks like a
//! value (a number, an ObjectId in hex, an email, something long or odd) must not
//! end up in a report as a "field", and documents keyed by values must not fill
//! the table.

use rustc_hash::FxHashMap;

use crate::values::At;

/// Distinct paths remembered across the run, per table.
const MAX_PATHS: usize = 65_536;

/// Dotted paths (or names), interned, with where their first array is.
#[derive(Default)]
pub(crate) struct Paths {
    ids: FxHashMap<Box<[u8]>, u32>,
    /// The path and the length of its prefix that is an array.
    names: Vec<(String, Option<usize>)>,
    /// Paths refused: not plausible field names, or the table was full.
    pub(crate) refused: u64,
}

/// Whether `path` reads as a dotted path of field names.
pub(crate) fn plausible(path: &[u8]) -> bool {
    if path.is_empty() || path.len() > 256 {
        return false;
    }
    let Ok(text) = std::str::from_utf8(path) else { return false };
    let mut segments = 0;
    for seg in text.split('.') {
        segments += 1;
        let odd = |c: char| c.is_control() || matches!(c, '`' | '<' | '>' | '|' | '@' | '"' | '\\' | ' ');
        let hex_id = seg.len() == 24 && seg.bytes().all(|b| b.is_ascii_hexdigit());
        if seg.is_empty()
            || seg.len() > 64
            || seg.bytes().all(|b| b.is_ascii_digit())
            || hex_id
            || seg.chars().any(odd)
        {
            return false;
        }
    }
    segments <= 8
}

impl Paths {
    pub(crate) fn id(&mut self, at: At<'_>) -> Option<u32> {
        if let Some(id) = self.ids.get(at.path) {
            return Some(*id);
        }
        if self.names.len() >= MAX_PATHS || !plausible(at.path) {
            self.refused += 1;
            return None;
        }
        let id = self.names.len() as u32;
        self.ids.insert(at.path.into(), id);
        self.names.push((String::from_utf8_lossy(at.path).into_owned(), at.array));
        Some(id)
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", |n| n.0.as_str())
    }

    pub(crate) fn array(&self, id: u32) -> Option<usize> {
        self.names.get(id as usize).and_then(|n| n.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_field_names_are_kept() {
        for ok in ["authorId", "items.productId", "author.$id", "a_b-c"] {
            assert!(plausible(ok.as_bytes()), "{ok}");
        }
        for bad in
            ["", "members.12345", "byEmail.alice@example.com", "x.5f1d7c3e9b1e8a0012345678", "a`b", "a b"]
        {
            assert!(!plausible(bad.as_bytes()), "{bad}");
        }
        let mut p = Paths::default();
        assert_eq!(p.id(At { path: b"tags", array: Some(4) }), Some(0));
        assert_eq!(p.id(At { path: b"tags", array: None }), Some(0), "known paths keep their first sighting");
        assert_eq!((p.name(0), p.array(0)), ("tags", Some(4)));
        assert_eq!(p.id(At { path: b"1234", array: None }), None);
        assert_eq!(p.refused, 1);
    }
}
