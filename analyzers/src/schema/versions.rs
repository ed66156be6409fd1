//! The schema versioning pattern, seen from the documents: a field named like
//! `schemaVersion` whose values split the documents into groups with different
//! fields (version 1 has `address`, version 2 has `addresses`).
//!
//! A field with a version's name is not enough: `version` is often an optimistic
//! lock's counter, and Mongoose's `__v` counts array changes. So every document's
//! fields are counted per value, and the field is called a version field only when
//! some field is in (almost) every document of one value and (almost) no document
//! of another: the values partition the field sets.
//!
//! Only small whole numbers and version strings (`"2"`, `"v2"`, `"2.1.0"`) are taken
//! as versions: they number the code's model, not the data, so they may be shown.
//! Any other value makes the document count as unversioned.

use bson::RawDocument;
use mongotap_wire::element;

/// Field names read as a schema version, as the patterns and ODMs spell them.
const NAMES: &[&str] = &[
    "schemaVersion",
    "schema_version",
    "_schemaVersion",
    "schemaVer",
    "_v",
    "version",
    "_version",
    "docVersion",
];
/// Distinct version values followed; more are counted as refused.
const MAX_VALUES: usize = 8;
/// The largest whole number taken as a version.
const MAX_VERSION: i64 = 10_000;
/// A field in at least this share of one version's documents...
const PRESENT: f64 = 0.95;
/// ...and in at most this share of another's partitions the two.
const ABSENT: f64 = 0.05;

/// A version value: a whole number, or a version string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionValue {
    Number(i64),
    Text(String),
}

impl Default for VersionValue {
    fn default() -> Self {
        VersionValue::Number(0)
    }
}

impl std::fmt::Display for VersionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionValue::Number(n) => write!(f, "{n}"),
            VersionValue::Text(t) => f.write_str(t),
        }
    }
}

impl VersionValue {
    /// The value as a validator's `enum` holds it (a number matches an int, a long
    /// or a double of that value).
    pub fn json(&self) -> serde_json::Value {
        match self {
            VersionValue::Number(n) => serde_json::json!(n),
            VersionValue::Text(t) => serde_json::json!(t),
        }
    }
}

/// Whether `s` reads as a version: an optional `v`, then one to three dotted
/// numbers of at most three digits (`2`, `v2`, `2.1`, `1.0.3`), never a year, a date
/// or an id.
fn version_text(s: &str) -> bool {
    let digits = s.strip_prefix(['v', 'V']).unwrap_or(s);
    let parts: Vec<&str> = digits.split('.').collect();
    parts.len() <= 3
        && parts.iter().all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The documents of one version value.
#[derive(Debug, Clone, Default)]
pub struct Version {
    pub value: VersionValue,
    /// Documents walked that carried this value.
    pub documents: u64,
    /// Per field (the collection's field index): documents of this value carrying it.
    pub(super) present: Vec<u64>,
}

impl Version {
    /// The share of this version's documents that carry field `field`.
    pub fn share(&self, field: usize) -> f64 {
        self.present.get(field).copied().unwrap_or(0) as f64 / self.documents.max(1) as f64
    }
}

/// What a collection's documents say about a version field.
#[derive(Debug, Clone, Default)]
pub struct Versions {
    /// The field, once a document carried one of [`NAMES`] with a version value.
    pub field: Option<&'static str>,
    pub values: Vec<Version>,
    /// Documents whose version value was past [`MAX_VALUES`] distinct ones.
    pub refused: u64,
}

impl Versions {
    /// The version of `doc`: the index of its value, counting the document.
    pub(super) fn of(&mut self, doc: &RawDocument) -> Option<usize> {
        let (field, value) = element::elements(doc).find_map(|e| {
            let name = NAMES.iter().find(|n| n.as_bytes() == e.key && self.field.is_none_or(|f| f == **n))?;
            let whole = match e.kind {
                0x10 | 0x12 => e.as_i64(),
                0x01 => {
                    let d = f64::from_le_bytes(e.value.try_into().ok()?);
                    (d.fract() == 0.0).then_some(d as i64)
                }
                _ => None,
            };
            let value = match whole {
                Some(n) => VersionValue::Number(Some(n).filter(|v| (0..=MAX_VERSION).contains(v))?),
                None => VersionValue::Text(e.as_str().filter(|t| version_text(t))?.to_owned()),
            };
            Some((*name, value))
        })?;
        self.field = Some(field);
        let i = match self.values.iter().position(|v| v.value == value) {
            Some(i) => i,
            None if self.values.len() >= MAX_VALUES => {
                self.refused += 1;
                return None;
            }
            None => {
                self.values.push(Version { value, documents: 0, present: Vec::new() });
                self.values.len() - 1
            }
        };
        self.values[i].documents += 1;
        Some(i)
    }

    /// The report's name of a version value: its text, and for a string that a
    /// number of the same collection also reads as (`"2"` beside `2`), the text
    /// quoted, so the two never share a key.
    pub fn key(&self, value: &VersionValue) -> String {
        let text = value.to_string();
        let clash = matches!(value, VersionValue::Text(_))
            && self
                .values
                .iter()
                .any(|o| matches!(o.value, VersionValue::Number(_)) && o.value.to_string() == text);
        if clash {
            format!("{text:?}")
        } else {
            text
        }
    }

    /// Field `field` is in a document of version `version`.
    pub(super) fn present(&mut self, version: usize, field: usize) {
        let p = &mut self.values[version].present;
        if p.len() <= field {
            p.resize(field + 1, 0);
        }
        p[field] += 1;
    }

    /// Whether the values partition the field sets: some field is in almost every
    /// document of one value (with at least `min_documents`) and almost none of
    /// another's.
    pub fn partitions(&self, min_documents: u64) -> bool {
        let enough: Vec<&Version> = self.values.iter().filter(|v| v.documents >= min_documents).collect();
        let fields = enough.iter().map(|v| v.present.len()).max().unwrap_or(0);
        enough.iter().any(|a| {
            enough.iter().any(|b| {
                a.value != b.value && (0..fields).any(|f| a.share(f) >= PRESENT && b.share(f) <= ABSENT)
            })
        })
    }

    /// The fields (indexes) version `v`'s documents carry and another version's do not.
    pub fn own_fields(&self, v: &Version) -> Vec<usize> {
        (0..v.present.len())
            .filter(|i| {
                v.share(*i) >= PRESENT
                    && self.values.iter().any(|o| o.value != v.value && o.share(*i) <= ABSENT)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    #[test]
    fn a_version_field_partitions_the_field_sets_a_lock_counter_does_not() {
        let mut v = Versions::default();
        for i in 0..20 {
            let d = if i % 2 == 0 {
                doc! {"schemaVersion": 1, "a": 1}
            } else {
                doc! {"schemaVersion": 2.0, "b": 1}
            };
            let slot = v.of(&raw(d)).unwrap();
            v.present(slot, if i % 2 == 0 { 1 } else { 2 });
        }
        assert_eq!(v.field, Some("schemaVersion"));
        let seen: Vec<(String, u64)> = v.values.iter().map(|x| (x.value.to_string(), x.documents)).collect();
        assert_eq!(seen, [("1".to_owned(), 10), ("2".to_owned(), 10)]);
        assert!(v.partitions(5));
        assert!(!v.partitions(11), "too few documents per value to say");

        // An optimistic lock: every value has the same fields.
        let mut lock = Versions::default();
        for i in 0..20 {
            let slot = lock.of(&raw(doc! {"version": i % 3, "a": 1})).unwrap();
            lock.present(slot, 1);
        }
        assert!(!lock.partitions(5));
    }

    #[test]
    fn only_small_whole_numbers_and_version_strings_are_versions() {
        let mut v = Versions::default();
        for not in ["2024-01-01", "2024.01.15", "2024", "a3f9c2", "1.2.3.4", "v", "", "2.x"] {
            assert_eq!(v.of(&raw(doc! {"version": not})), None, "{not}");
        }
        assert_eq!(v.of(&raw(doc! {"version": 1.5})), None);
        assert_eq!(v.of(&raw(doc! {"version": 1_700_000_000_i64})), None);
        assert_eq!(v.of(&raw(doc! {"__v": 3})), None, "Mongoose's revision counter is no schema version");
        assert_eq!(v.field, None);
        for i in 0..(MAX_VALUES as i64 + 2) {
            v.of(&raw(doc! {"_v": i}));
        }
        assert_eq!((v.values.len(), v.refused), (MAX_VALUES, 2));

        let mut s = Versions::default();
        for (i, text) in ["v1", "2.1", "1.0.3", "V2"].into_iter().enumerate() {
            assert_eq!(s.of(&raw(doc! {"schemaVersion": text})), Some(i), "{text}");
        }
        assert_eq!(s.values[1].value.json(), serde_json::json!("2.1"));

        let mut both = Versions::default();
        both.of(&raw(doc! {"schemaVersion": 2}));
        both.of(&raw(doc! {"schemaVersion": "2"}));
        let keys: Vec<String> = both.values.iter().map(|x| both.key(&x.value)).collect();
        assert_eq!(keys, ["2", "\"2\""], "a number and a string of the same text never share a key");
    }
}
