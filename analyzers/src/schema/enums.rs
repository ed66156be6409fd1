//! A string field's values while they are few: the validator's `enum` ("Validate
//! structure": `enum` for a field of known values, a status, a currency, a role).
//!
//! Values are told apart by keyed hash; their text is kept only when the user asked
//! for values (`--show-values`), and then only short ones. A field is an enum when
//! the documents the traffic wrote hold at most [`MAX_VALUES`] distinct values and
//! none of them was seen only once: by Good and Turing's estimate (1953) the chance
//! that the next value is a new one is the share of values seen once, so none seen
//! once says the set is closed as far as the traffic can tell. Values updates set
//! (`$set`, `$setOnInsert`) count as written; a value read back that no write has
//! shown keeps the field from being an enum until a write shows it. Past the bound the field is open (a name, an email) and
//! forgets its values.

use std::hash::Hasher;

use crate::values::Keyed;

/// Distinct values an enum holds at most.
pub const MAX_VALUES: usize = 8;
/// Longest text kept (with `--show-values`); a longer value is no enum member.
const MAX_TEXT: usize = 40;

/// A value's keyed hash (its bytes hold its length and text).
fn hash(keyed: &Keyed, value: &[u8]) -> u64 {
    let mut h = keyed.hasher();
    h.write(value);
    h.finish()
}

/// One value: its keyed hash, the written documents holding it, and its text when
/// values are shown.
#[derive(Debug, Clone)]
struct Value {
    hash: u64,
    count: u64,
    text: Option<Box<str>>,
}

/// The values of one string field.
#[derive(Debug, Clone, Default)]
pub struct Strings {
    values: Vec<Value>,
    /// Values read back that no write has shown yet (a write later may).
    pending: Vec<u64>,
    /// More than [`MAX_VALUES`] distinct values (or one too long to show) were
    /// written or read.
    pub open: bool,
}

impl Strings {
    /// Counts one written value (`text` only with `--show-values`).
    pub(super) fn add(&mut self, keyed: &Keyed, value: &[u8], text: Option<&str>) {
        if self.open {
            return;
        }
        let hash = hash(keyed, value);
        self.pending.retain(|p| *p != hash);
        if let Some(v) = self.values.iter_mut().find(|v| v.hash == hash) {
            v.count += 1;
            return;
        }
        let too_long = text.is_some_and(|t| t.len() > MAX_TEXT);
        if self.values.len() >= MAX_VALUES || too_long {
            self.open = true;
            self.values = Vec::new();
            return;
        }
        self.values.push(Value { hash, count: 1, text: text.map(Into::into) });
    }

    /// A value read back: one the writes have not shown waits for a write of it;
    /// while any waits, the field is no enum (stored before the capture, or written
    /// where mongotap did not see it), and past the bound it is open.
    pub(super) fn read(&mut self, keyed: &Keyed, value: &[u8]) {
        if self.open {
            return;
        }
        let hash = hash(keyed, value);
        if self.values.iter().any(|v| v.hash == hash) || self.pending.contains(&hash) {
            return;
        }
        if self.pending.len() >= MAX_VALUES {
            self.open = true;
            self.values = Vec::new();
            self.pending = Vec::new();
            return;
        }
        self.pending.push(hash);
    }

    /// Written values counted.
    pub fn written(&self) -> u64 {
        self.values.iter().map(|v| v.count).sum()
    }

    /// The number of distinct values when the field reads as an enum: at least
    /// `min_written` values written, two to [`MAX_VALUES`] distinct, none seen once.
    pub fn enum_size(&self, min_written: u64) -> Option<usize> {
        let closed = !self.open && self.pending.is_empty() && self.values.iter().all(|v| v.count >= 2);
        (closed && (2..=MAX_VALUES).contains(&self.values.len()) && self.written() >= min_written)
            .then_some(self.values.len())
    }

    /// The values' texts, sorted, when every one is known (`--show-values`).
    pub fn texts(&self) -> Option<Vec<&str>> {
        let mut t: Vec<&str> = self.values.iter().map(|v| v.text.as_deref()).collect::<Option<_>>()?;
        t.sort_unstable();
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_an_enum_names_and_one_offs_are_not() {
        let keyed = Keyed::default();
        let mut status = Strings::default();
        for i in 0..40 {
            let s = ["placed", "paid", "shipped"][i % 3];
            status.add(&keyed, s.as_bytes(), Some(s));
        }
        assert_eq!(status.enum_size(20), Some(3));
        assert_eq!(status.texts(), Some(vec!["paid", "placed", "shipped"]));
        assert_eq!(status.enum_size(41), None, "too few written to say");

        let mut hidden = Strings::default();
        for i in 0..40 {
            hidden.add(&keyed, ["a", "b"][i % 2].as_bytes(), None);
        }
        assert_eq!((hidden.enum_size(20), hidden.texts()), (Some(2), None), "values stay hidden");

        let mut names = Strings::default();
        for i in 0..40 {
            names.add(&keyed, format!("name {i}").as_bytes(), None);
        }
        assert!(names.open && names.enum_size(1).is_none() && names.values.is_empty());

        // Four common values and one seen once: the set is not closed.
        let mut tail = Strings::default();
        for i in 0..40 {
            tail.add(&keyed, ["a", "b", "c", "d"][i % 4].as_bytes(), None);
        }
        tail.add(&keyed, b"rare", None);
        assert_eq!(tail.enum_size(20), None);

        let mut long = Strings::default();
        long.add(&keyed, &[b'x'; 50], Some(&"x".repeat(50)));
        assert!(long.open, "a long text is no enum member");
    }
}
