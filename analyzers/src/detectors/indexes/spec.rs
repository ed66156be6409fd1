//! An index as `listIndexes` and `createIndexes` describe it: its key (fields with
//! directions or types) and the options that decide which queries it can serve.

use std::collections::BTreeSet;

use bson::RawDocument;
use mongotap_wire::element;
use serde_json::{json, Value};

/// One field of an index key.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyPart {
    /// 1 or -1.
    Ordered(i32),
    /// `"hashed"`: equality only.
    Hashed,
    /// `"text"`, `"2d"`, `"2dsphere"`, `"geoHaystack"`: special queries only.
    Special(String),
}

impl KeyPart {
    /// A key field's value: a direction or an index type.
    pub fn from_element(e: &element::Element<'_>) -> KeyPart {
        match (e.as_str(), e.as_i64()) {
            (Some("hashed"), _) => KeyPart::Hashed,
            (Some(s), _) => KeyPart::Special(s.to_owned()),
            (None, Some(d)) if d < 0 => KeyPart::Ordered(-1),
            // A double such as -1.0 reads through as_i64; anything else ascends.
            _ => KeyPart::Ordered(1),
        }
    }

    /// As the report writes it.
    pub fn to_json(&self) -> Value {
        match self {
            KeyPart::Ordered(d) => json!(d),
            KeyPart::Hashed => json!("hashed"),
            KeyPart::Special(s) => json!(s),
        }
    }
}

/// One index, as `listIndexes` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    /// Its name.
    pub name: String,
    /// Its key, in order.
    pub key: Vec<(String, KeyPart)>,
    /// `unique: true`.
    pub unique: bool,
    /// `sparse: true`.
    pub sparse: bool,
    /// The top-level fields of its `partialFilterExpression`.
    pub partial: Option<BTreeSet<String>>,
    /// `expireAfterSeconds` (a TTL index).
    pub ttl: bool,
    /// `hidden: true`.
    pub hidden: bool,
    /// Its collation's locale, unless simple.
    pub collation: Option<String>,
}

impl IndexSpec {
    /// Reads an index description (`listIndexes` reply entry or `createIndexes` entry).
    pub fn from_document(d: &RawDocument) -> Option<IndexSpec> {
        let mut spec = IndexSpec {
            name: String::new(),
            key: Vec::new(),
            unique: false,
            sparse: false,
            partial: None,
            ttl: false,
            hidden: false,
            collation: None,
        };
        for e in element::elements(d) {
            match e.key {
                b"name" => spec.name = e.as_str()?.to_owned(),
                b"key" => spec.key = key_of(e.as_document()?),
                b"unique" => spec.unique = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"sparse" => spec.sparse = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"hidden" => spec.hidden = e.as_bool().unwrap_or_else(|| e.is_one()),
                b"expireAfterSeconds" => spec.ttl = true,
                b"partialFilterExpression" => {
                    let mut fields = BTreeSet::new();
                    if let Some(p) = e.as_document() {
                        filter_fields(p, &mut fields);
                    }
                    spec.partial = Some(fields);
                }
                b"collation" => spec.collation = e.as_document().and_then(collation_key),
                _ => {}
            }
        }
        if spec.key.is_empty() {
            return None;
        }
        if spec.name.is_empty() {
            spec.name = default_name(&spec.key);
        }
        Some(spec)
    }

    /// The `_id` index every collection has.
    pub fn id_index() -> IndexSpec {
        IndexSpec {
            name: "_id_".into(),
            key: vec![("_id".into(), KeyPart::Ordered(1))],
            unique: true,
            sparse: false,
            partial: None,
            ttl: false,
            hidden: false,
            collation: None,
        }
    }

    /// Whether this is the `_id` index.
    pub fn is_id(&self) -> bool {
        self.name == "_id_" || (self.key.len() == 1 && self.key[0].0 == "_id")
    }

    /// The key as the report writes it: `[[field, direction], ...]`.
    pub fn key_json(&self) -> Value {
        Value::Array(self.key.iter().map(|(f, p)| json!([f, p.to_json()])).collect())
    }

    /// The key as mongosh writes it: `{a: 1, b: -1}`.
    pub fn key_js(&self) -> String {
        key_js(self.key.iter().map(|(f, p)| (f.as_str(), p.to_json())))
    }
}

/// An index key from its document (`{a: 1, b: "hashed"}`).
pub fn key_of(d: &RawDocument) -> Vec<(String, KeyPart)> {
    element::elements(d).filter_map(|k| Some((k.key_str()?.to_owned(), KeyPart::from_element(&k)))).collect()
}

/// The fields a filter names, through `$and`/`$or` (a partial index's filter).
fn filter_fields(d: &RawDocument, out: &mut BTreeSet<String>) {
    for e in element::elements(d) {
        match e.key_str() {
            Some(k) if k.starts_with('$') => {
                for branch in element::elements_in(e.as_array()).filter_map(|b| b.as_document()) {
                    filter_fields(branch, out);
                }
            }
            Some(k) => {
                out.insert(k.to_owned());
            }
            None => {}
        }
    }
}

/// What decides whether string bounds match: the locale and the strength (3 by
/// default); `None` for the simple collation. listIndexes spells every option out,
/// a query names a few, so the rest is not compared.
pub fn collation_key(c: &RawDocument) -> Option<String> {
    let locale = element::find(c, "locale")?.as_str()?;
    if locale == "simple" {
        return None;
    }
    let strength = element::find(c, "strength").and_then(|s| s.as_i64()).unwrap_or(3);
    Some(format!("{locale}/{strength}"))
}

/// `{a: 1, "b.c": -1}`, quoting what is not a plain identifier.
pub fn key_js<'a>(key: impl Iterator<Item = (&'a str, Value)>) -> String {
    let parts: Vec<String> = key
        .map(|(f, d)| {
            let plain = f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
                && !f.starts_with(|c: char| c.is_ascii_digit());
            if plain {
                format!("{f}: {d}")
            } else {
                format!("{}: {d}", Value::String(f.to_owned()))
            }
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The name the server gives an index: `a_1_b_-1`.
pub fn default_name(key: &[(String, KeyPart)]) -> String {
    key.iter()
        .map(|(f, p)| format!("{f}_{}", p.to_json().to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn reads_index_descriptions() {
        let d = rawdoc! {"v": 2, "key": {"a": 1, "b": -1.0, "h": "hashed"}, "name": "a_1",
        "unique": true, "partialFilterExpression": {"status": "open"}, "collation": {"locale": "fr"}};
        let s = IndexSpec::from_document(&d).unwrap();
        assert_eq!(
            s.key,
            vec![
                ("a".into(), KeyPart::Ordered(1)),
                ("b".into(), KeyPart::Ordered(-1)),
                ("h".into(), KeyPart::Hashed)
            ]
        );
        assert!(s.unique && !s.sparse && !s.ttl);
        assert_eq!(s.partial, Some(BTreeSet::from(["status".to_owned()])));
        assert_eq!(s.collation.as_deref(), Some("fr/3"));
        let p = rawdoc! {"key": {"a": 1}, "partialFilterExpression": {"$and": [{"a": {"$exists": true}}, {"b": {"$gt": 5}}]}};
        assert_eq!(
            IndexSpec::from_document(&p).unwrap().partial,
            Some(BTreeSet::from(["a".to_owned(), "b".to_owned()]))
        );
        assert_eq!(s.key_js(), "{a: 1, b: -1, h: \"hashed\"}");
        let unnamed = IndexSpec::from_document(&rawdoc! {"key": {"customerId": 1, "createdAt": -1}}).unwrap();
        assert_eq!(unnamed.name, "customerId_1_createdAt_-1");
        assert!(IndexSpec::from_document(&rawdoc! {"name": "x"}).is_none());
    }
}
