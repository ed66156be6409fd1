//! Query shapes in the placeholder language of MongoDB's `$queryStats`.
//!
//! Literals become type placeholders (`?number`, `?string`, `?array<?number>`, ...),
//! implicit equality becomes `$eq`, sibling predicates become a sorted `$and`, and
//! operators are kept, so `{a: 5}` and `{a: {$gt: 5}}` are different shapes while
//! `{a: 5}` and `{a: 6}` are the same. `sort`, `collation` and `hint` are kept as
//! written; `skip` and `limit` by presence only. Shapes never carry a literal value.
//!
//! Shapes are written straight from the raw BSON as compact JSON text ([`ShapeJson`]):
//! that text is what is compared and hashed on every operation, and it is parsed into
//! a `serde_json::Value` only when a new table row needs one. Building a tree of maps
//! per operation cost more than everything else in the analysis put together.

use std::ops::Range;

use bson::{RawArray, RawBsonRef, RawDocument};
use serde_json::Value;

/// A shape as compact JSON text, exactly as `serde_json` would print its `Value`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ShapeJson(Vec<u8>);

impl ShapeJson {
    /// Writes a shape with `write`.
    pub fn build(write: impl FnOnce(&mut Vec<u8>)) -> ShapeJson {
        let mut out = Vec::with_capacity(256);
        write(&mut out);
        ShapeJson(out)
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text (always UTF-8: it is written from `&str` pieces and ASCII).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("shape text is written from UTF-8 pieces")
    }

    /// The shape as a JSON value, for reports.
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.0).expect("shape text is valid JSON")
    }
}

impl std::fmt::Debug for ShapeJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for ShapeJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON string, escaped as `serde_json` escapes it.
pub fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        // Nearly every key and field path: nothing to escape.
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("writing to memory cannot fail");
    }
}

/// Writes a JSON object member by member, minding the commas.
pub struct Obj<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Obj<'a> {
    /// Opens an object.
    pub fn open(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, empty: true }
    }

    /// Writes a key; the caller writes its value into the returned buffer.
    pub fn key(&mut self, k: &str) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.empty) {
            self.out.push(b',');
        }
        string(self.out, k);
        self.out.push(b':');
        self.out
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.push(b'}');
    }
}

/// Writes a JSON array of the items `write` is called with.
fn array<T>(out: &mut Vec<u8>, items: impl IntoIterator<Item = T>, mut write: impl FnMut(&mut Vec<u8>, T)) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

/// `{"key":<value>}`.
pub fn single(out: &mut Vec<u8>, key: &str, value: impl FnOnce(&mut Vec<u8>)) {
    let mut o = Obj::open(out);
    value(o.key(key));
    o.close();
}

/// The placeholder for one literal.
pub fn placeholder(out: &mut Vec<u8>, v: RawBsonRef<'_>) {
    match v {
        RawBsonRef::Array(a) => array_placeholder(out, a),
        other => quoted(out, type_placeholder(other)),
    }
}

/// A string that needs no escaping (placeholders are ASCII without quotes).
fn quoted(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

fn type_placeholder(v: RawBsonRef<'_>) -> &'static str {
    match v {
        RawBsonRef::Double(_) | RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Decimal128(_) => {
            "?number"
        }
        RawBsonRef::String(_) => "?string",
        RawBsonRef::Document(_) => "?object",
        RawBsonRef::Array(_) => "?array",
        RawBsonRef::Binary(_) => "?binData",
        RawBsonRef::Undefined => "?undefined",
        RawBsonRef::ObjectId(_) => "?objectId",
        RawBsonRef::Boolean(_) => "?bool",
        RawBsonRef::DateTime(_) => "?date",
        RawBsonRef::Null => "?null",
        RawBsonRef::RegularExpression(_) => "?regex",
        RawBsonRef::DbPointer(_) => "?dbPointer",
        RawBsonRef::JavaScriptCode(_) | RawBsonRef::JavaScriptCodeWithScope(_) => "?javascript",
        RawBsonRef::Symbol(_) => "?symbol",
        RawBsonRef::Timestamp(_) => "?timestamp",
        RawBsonRef::MinKey => "?minKey",
        RawBsonRef::MaxKey => "?maxKey",
    }
}

/// `?array<?T>` when every element has type T, `?array<>` when mixed, `[]` when empty.
fn array_placeholder(out: &mut Vec<u8>, a: &RawArray) {
    let mut kind: Option<&'static str> = None;
    let mut mixed = false;
    for v in a.into_iter().flatten() {
        let t = type_placeholder(v);
        match kind {
            None => kind = Some(t),
            Some(k) if k != t => mixed = true,
            _ => {}
        }
    }
    match (kind, mixed) {
        (None, _) => out.extend_from_slice(b"[]"),
        (Some(_), true) => quoted(out, "?array<>"),
        (Some(t), false) => {
            out.extend_from_slice(b"\"?array<");
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(b">\"");
        }
    }
}

/// A literal value as JSON, for the parts a shape keeps as written (sort, collation,
/// hint, `$lookup` collection names). Never used for filter values.
pub fn literal(out: &mut Vec<u8>, v: RawBsonRef<'_>) {
    match v {
        // Non-finite doubles print as null, as serde_json prints them.
        RawBsonRef::Double(d) => serde_json::to_writer(&mut *out, &d).expect("memory"),
        RawBsonRef::Int32(i) => serde_json::to_writer(&mut *out, &i).expect("memory"),
        RawBsonRef::Int64(i) => serde_json::to_writer(&mut *out, &i).expect("memory"),
        RawBsonRef::String(s) => string(out, s),
        RawBsonRef::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        RawBsonRef::Null => out.extend_from_slice(b"null"),
        RawBsonRef::Document(d) => object(out, d, literal),
        RawBsonRef::Array(a) => array(out, a.into_iter().flatten(), literal),
        other => placeholder(out, other),
    }
}

/// An object with `d`'s keys and each value written by `value`.
fn object(out: &mut Vec<u8>, d: &RawDocument, value: impl Fn(&mut Vec<u8>, RawBsonRef<'_>)) {
    let mut o = Obj::open(out);
    for (k, v) in d.iter().flatten() {
        value(o.key(k.as_str()), v);
    }
    o.close();
}

/// Predicates being collected for one filter level, each a span of `text`.
#[derive(Default)]
struct Predicates {
    text: Vec<u8>,
    spans: Vec<Range<usize>>,
}

impl Predicates {
    fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.text.len();
        write(&mut self.text);
        self.spans.push(start..self.text.len());
    }

    /// None is `{}`, one is itself, more are a `$and` sorted by their text, so
    /// that predicate order does not split shapes.
    fn write(mut self, out: &mut Vec<u8>) {
        match self.spans.len() {
            0 => out.extend_from_slice(b"{}"),
            1 => out.extend_from_slice(&self.text[self.spans[0].clone()]),
            _ => {
                let text = &self.text;
                self.spans.sort_by(|a, b| text[a.clone()].cmp(&text[b.clone()]));
                out.extend_from_slice(b"{\"$and\":");
                array(out, &self.spans, |out, s| out.extend_from_slice(&text[s.clone()]));
                out.push(b'}');
            }
        }
    }
}

/// Normalises a query filter (`find.filter`, `$match`, `q` of update/delete).
pub fn filter(out: &mut Vec<u8>, doc: &RawDocument) {
    let mut preds = Predicates::default();
    predicates(&mut preds, doc);
    preds.write(out);
}

fn predicates(preds: &mut Predicates, doc: &RawDocument) {
    for (key, v) in doc.iter().flatten() {
        match key.as_str() {
            // An explicit $and is the same shape as implicit siblings: its branches'
            // predicates join this level.
            "$and" => match v {
                RawBsonRef::Array(a) => {
                    for branch in a.into_iter().flatten().filter_map(|b| b.as_document()) {
                        let before = preds.spans.len();
                        predicates(preds, branch);
                        if preds.spans.len() == before {
                            preds.push(|o| o.extend_from_slice(b"{}"));
                        }
                    }
                }
                other => preds.push(|o| placeholder(o, other)),
            },
            k @ ("$or" | "$nor") => preds.push(|o| {
                single(o, k, |o| match v {
                    RawBsonRef::Array(a) => {
                        let mut branches: Vec<ShapeJson> = a
                            .into_iter()
                            .flatten()
                            .filter_map(|b| b.as_document())
                            .map(|b| ShapeJson::build(|o| filter(o, b)))
                            .collect();
                        branches.sort_by(|a, b| a.0.cmp(&b.0));
                        array(o, &branches, |o, b| o.extend_from_slice(&b.0));
                    }
                    other => array(o, [other], placeholder),
                })
            }),
            "$expr" => preds.push(|o| single(o, "$expr", |o| expression(o, v))),
            "$comment" => {}
            k if k.starts_with('$') => preds.push(|o| single(o, k, |o| placeholder(o, v))),
            field => field_predicates(preds, field, v),
        }
    }
}

/// `{field: value}` or `{field: {$op: value, ...}}` as one predicate per operator.
fn field_predicates(preds: &mut Predicates, field: &str, v: RawBsonRef<'_>) {
    let one = |preds: &mut Predicates, op: &str, value: &dyn Fn(&mut Vec<u8>)| {
        preds.push(|o| single(o, field, |o| single(o, op, value)))
    };
    let ops = match v {
        RawBsonRef::Document(d) if first_key(d).is_some_and(|k| k.starts_with('$')) => d,
        RawBsonRef::RegularExpression(_) => return one(preds, "$regex", &|o| quoted(o, "?regex")),
        other => return one(preds, "$eq", &|o| placeholder(o, other)),
    };
    let has_regex = ops.get("$regex").ok().flatten().is_some();
    for (op, val) in ops.iter().flatten() {
        let op = op.as_str();
        match op {
            "$elemMatch" => one(preds, op, &|o| match val {
                RawBsonRef::Document(d)
                    if first_key(d).is_some_and(|k| k.starts_with('$') && !is_logical(k)) =>
                {
                    operators_only(o, d)
                }
                RawBsonRef::Document(d) => filter(o, d),
                other => placeholder(o, other),
            }),
            "$not" => one(preds, op, &|o| match val {
                RawBsonRef::Document(d) => operators_only(o, d),
                other => placeholder(o, other),
            }),
            // $options travels with $regex: one predicate.
            "$options" if has_regex => {}
            "$regex" if has_regex && ops.get("$options").ok().flatten().is_some() => preds.push(|o| {
                single(o, field, |o| o.extend_from_slice(br#"{"$regex":"?string","$options":"?string"}"#))
            }),
            _ => one(preds, op, &|o| placeholder(o, val)),
        }
    }
}

fn is_logical(k: &str) -> bool {
    matches!(k, "$and" | "$or" | "$nor")
}

/// An operator document (`{$gt: 1, $lt: 5}`) with its values as placeholders.
fn operators_only(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, d, |o, val| match val {
        RawBsonRef::Document(inner) if first_key(inner).is_some_and(|k| k.starts_with('$')) => {
            operators_only(o, inner)
        }
        other => placeholder(o, other),
    })
}

/// An aggregation expression: field paths (`"$a.b"`) and variables (`"$$NOW"`) kept,
/// other literals replaced by placeholders, operators and their structure kept.
pub fn expression(out: &mut Vec<u8>, v: RawBsonRef<'_>) {
    match v {
        RawBsonRef::String(s) if s.starts_with('$') => string(out, s),
        RawBsonRef::Document(d) if first_key(d) == Some("$literal") => {
            single(out, "$literal", |o| match d.get("$literal").ok().flatten() {
                Some(l) => placeholder(o, l),
                None => quoted(o, "?"),
            })
        }
        RawBsonRef::Document(d) => object(out, d, expression),
        RawBsonRef::Array(a) => array(out, a.into_iter().flatten(), expression),
        other => placeholder(out, other),
    }
}

/// A projection: inclusion and exclusion kept as booleans, computed fields shaped.
pub fn projection(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, d, |o, v| match included(v) {
        Some(b) => o.extend_from_slice(if b { b"true" } else { b"false" }),
        None => expression(o, v),
    })
}

/// Whether a projection value includes its field; `None` for a computed field.
pub fn included(v: RawBsonRef<'_>) -> Option<bool> {
    match v {
        RawBsonRef::Int32(i) => Some(i != 0),
        RawBsonRef::Int64(i) => Some(i != 0),
        RawBsonRef::Double(f) => Some(f != 0.0),
        RawBsonRef::Boolean(b) => Some(b),
        _ => None,
    }
}

/// An aggregation pipeline, stage by stage.
pub fn pipeline(out: &mut Vec<u8>, stages: &RawArray) {
    array(out, stages.into_iter().flatten().filter_map(|s| s.as_document()), stage)
}

fn stage(out: &mut Vec<u8>, s: &RawDocument) {
    let Some(name) = first_key(s) else { return out.extend_from_slice(b"{}") };
    let Ok(Some(body)) = s.get(name) else { return out.extend_from_slice(b"{}") };
    single(out, name, |o| match (name, body) {
        ("$match", RawBsonRef::Document(d)) => filter(o, d),
        ("$sort", RawBsonRef::Document(_)) => literal(o, body),
        ("$limit" | "$skip" | "$sample", v) => placeholder(o, v),
        ("$unwind" | "$count" | "$out" | "$merge" | "$sortByCount", v) => match v {
            RawBsonRef::String(_) | RawBsonRef::Document(_) => literal(o, v),
            other => placeholder(o, other),
        },
        ("$project", RawBsonRef::Document(d)) => projection(o, d),
        ("$lookup" | "$unionWith", RawBsonRef::Document(d)) => lookup(o, d),
        ("$graphLookup", RawBsonRef::Document(d)) => {
            let mut m = Obj::open(o);
            for (k, v) in d.iter().flatten() {
                let k = k.as_str();
                let o = m.key(k);
                match (k, v) {
                    ("restrictSearchWithMatch", RawBsonRef::Document(f)) => filter(o, f),
                    ("restrictSearchWithMatch" | "maxDepth", v) => placeholder(o, v),
                    ("startWith", v) => expression(o, v),
                    (_, v) => literal(o, v),
                }
            }
            m.close();
        }
        ("$facet", RawBsonRef::Document(d)) => object(o, d, |o, v| match v {
            RawBsonRef::Array(p) => pipeline(o, p),
            other => placeholder(o, other),
        }),
        (_, v) => expression(o, v),
    })
}

/// `$lookup`: the joined collection and the join fields kept, sub-pipelines shaped.
fn lookup(out: &mut Vec<u8>, d: &RawDocument) {
    let mut m = Obj::open(out);
    for (k, v) in d.iter().flatten() {
        let k = k.as_str();
        let o = m.key(k);
        match (k, v) {
            ("pipeline", RawBsonRef::Array(a)) => pipeline(o, a),
            ("let", RawBsonRef::Document(l)) => object(o, l, expression),
            (_, v) => literal(o, v),
        }
    }
    m.close();
}

/// The shape of an update's modification: operator updates by operator and path,
/// replacements by their top-level fields, pipeline updates stage by stage.
pub fn update_kind(out: &mut Vec<u8>, u: RawBsonRef<'_>) {
    match u {
        RawBsonRef::Array(stages) => single(out, "pipeline", |o| pipeline(o, stages)),
        RawBsonRef::Document(d) if first_key(d).is_some_and(|k| k.starts_with('$')) => {
            single(out, "operators", |o| {
                let mut ops = Obj::open(o);
                for (op, paths) in d.iter().flatten() {
                    let op = op.as_str();
                    match paths {
                        RawBsonRef::Document(p) => array(ops.key(op), p.iter().flatten(), |o, (path, v)| {
                            match (op, v) {
                                // $push/$addToSet modifiers matter to the detectors ($each, $slice).
                                ("$push" | "$addToSet", RawBsonRef::Document(m))
                                    if first_key(m).is_some_and(|k| k.starts_with('$')) =>
                                {
                                    single(o, path.as_str(), |o| {
                                        array(o, m.iter().flatten(), |o, (k, _)| string(o, k.as_str()))
                                    })
                                }
                                _ => string(o, path.as_str()),
                            }
                        }),
                        other => array(ops.key(op), [other], placeholder),
                    }
                }
                ops.close();
            })
        }
        RawBsonRef::Document(d) => single(out, "replacement", |o| document_fields(o, d)),
        other => single(out, "replacement", |o| placeholder(o, other)),
    }
}

/// A document's top-level fields and their types: the shape of an insert.
pub fn document_fields(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, d, placeholder)
}

fn first_key(d: &RawDocument) -> Option<&str> {
    d.iter().next()?.ok().map(|(k, _)| k.as_str())
}

/// A stable 64-bit FNV-1a fingerprint, the same on every machine and run: each part's
/// bytes then 0xff.
#[derive(Debug, Clone, Copy)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Adds one part.
    pub fn part(self, s: &str) -> Fingerprint {
        self.part_bytes(s.as_bytes())
    }

    /// Adds a shape as one part, as its compact JSON text.
    pub fn shape(self, s: &ShapeJson) -> Fingerprint {
        self.part_bytes(s.as_bytes())
    }

    fn part_bytes(mut self, b: &[u8]) -> Fingerprint {
        self.bytes(b);
        self.bytes(&[0xff]);
        self
    }

    /// The 64-bit value.
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint::new()
    }
}

/// The fingerprint of some parts, as the 16 hex digits reports use.
pub fn fingerprint(parts: &[&str]) -> String {
    hex(parts.iter().fold(Fingerprint::new(), |f, p| f.part(p)).finish())
}

/// A fingerprint as 16 hex digits.
pub fn hex(h: u64) -> String {
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};
    use serde_json::json;

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    fn text(write: impl FnOnce(&mut Vec<u8>)) -> Value {
        ShapeJson::build(write).to_value()
    }

    fn f(d: bson::Document) -> Value {
        text(|o| filter(o, &raw(d)))
    }

    #[test]
    fn literals_become_placeholders_and_equality_is_explicit() {
        assert_eq!(f(doc! {"a": 5}), json!({"a": {"$eq": "?number"}}));
        assert_eq!(f(doc! {"a": 5}), f(doc! {"a": 6.5}));
        assert_ne!(f(doc! {"a": 5}), f(doc! {"a": {"$gt": 5}}));
        assert_eq!(f(doc! {"a": {"$gt": 5}}), json!({"a": {"$gt": "?number"}}));
        assert_eq!(
            f(doc! {"s": "x", "o": bson::oid::ObjectId::new()}),
            json!({"$and": [
            {"o": {"$eq": "?objectId"}}, {"s": {"$eq": "?string"}}]})
        );
        assert_eq!(
            f(doc! {"n": null, "b": true}),
            json!({"$and": [{"b": {"$eq": "?bool"}}, {"n": {"$eq": "?null"}}]})
        );
        assert_eq!(f(doc! {}), json!({}));
    }

    #[test]
    fn sibling_order_does_not_split_shapes() {
        assert_eq!(f(doc! {"a": 1, "b": "x"}), f(doc! {"b": "y", "a": 2}));
        assert_eq!(
            f(doc! {"customerId": 1, "status": "open"}),
            json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]})
        );
    }

    #[test]
    fn in_of_any_length_is_one_shape() {
        let one = f(doc! {"a": {"$in": [1]}});
        assert_eq!(one, json!({"a": {"$in": "?array<?number>"}}));
        assert_eq!(one, f(doc! {"a": {"$in": [1, 2, 3, 4, 5, 6, 7]}}));
        assert_eq!(f(doc! {"a": {"$in": [1, "x"]}}), json!({"a": {"$in": "?array<>"}}));
        assert_eq!(f(doc! {"a": {"$in": []}}), json!({"a": {"$in": []}}));
    }

    #[test]
    fn several_operators_on_one_field_split_into_and() {
        assert_eq!(
            f(doc! {"a": {"$gte": 1, "$lt": 9}}),
            json!({"$and": [{"a": {"$gte": "?number"}}, {"a": {"$lt": "?number"}}]})
        );
    }

    #[test]
    fn and_or_nesting_and_dotted_paths() {
        let s = f(doc! {"$or": [{"a.b": 1}, {"c": {"$exists": true}}], "d": "x"});
        assert_eq!(
            s,
            json!({"$and": [
                {"$or": [{"a.b": {"$eq": "?number"}}, {"c": {"$exists": "?bool"}}]},
                {"d": {"$eq": "?string"}}
            ]})
        );
        // An explicit $and is the same shape as implicit siblings.
        assert_eq!(f(doc! {"$and": [{"a": 1}, {"b": 2}]}), f(doc! {"a": 1, "b": 2}));
        assert_eq!(f(doc! {"$or": [{"x": 1}, {"y": 1}]}), f(doc! {"$or": [{"y": 2}, {"x": 3}]}));
    }

    #[test]
    fn arrays_as_values_and_elem_match() {
        assert_eq!(f(doc! {"tags": ["a", "b"]}), json!({"tags": {"$eq": "?array<?string>"}}));
        assert_eq!(
            f(doc! {"items": {"$elemMatch": {"sku": "x", "qty": {"$gt": 1}}}}),
            json!({"items": {"$elemMatch": {"$and": [{"qty": {"$gt": "?number"}}, {"sku": {"$eq": "?string"}}]}}})
        );
        assert_eq!(
            f(doc! {"scores": {"$elemMatch": {"$gte": 80, "$lt": 90}}}),
            json!({"scores": {"$elemMatch": {"$gte": "?number", "$lt": "?number"}}})
        );
        assert_eq!(f(doc! {"a": {"$not": {"$gt": 3}}}), json!({"a": {"$not": {"$gt": "?number"}}}));
    }

    #[test]
    fn regex_operator_and_regex_literal() {
        let re = bson::Regex {
            pattern: "^ab".to_string().try_into().unwrap(),
            options: "i".to_string().try_into().unwrap(),
        };
        let lit = f(doc! {"name": re});
        assert_eq!(lit, json!({"name": {"$regex": "?regex"}}));
        assert_eq!(f(doc! {"name": {"$regex": "^ab"}}), json!({"name": {"$regex": "?string"}}));
        assert_eq!(
            f(doc! {"name": {"$regex": "^ab", "$options": "i"}}),
            json!({"name": {"$regex": "?string", "$options": "?string"}})
        );
    }

    #[test]
    fn expr_keeps_field_paths_and_hides_literals() {
        assert_eq!(
            f(doc! {"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", 1.5]}]}}),
            json!({"$expr": {"$gt": ["$spent", {"$multiply": ["$budget", "?number"]}]}})
        );
    }

    #[test]
    fn pipelines_with_lookup_sub_pipelines() {
        let p = raw(doc! {"p": [
            {"$match": {"status": "open", "total": {"$gt": 100}}},
            {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
            {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": 5}], "as": "items"}},
            {"$sort": {"total": -1}},
            {"$limit": 10},
            {"$project": {"total": 1, "label": {"$concat": ["$name", " - VIP"]}}}
        ]});
        let shaped = text(|o| pipeline(o, p.get_array("p").unwrap()));
        assert_eq!(
            shaped,
            json!([
                {"$match": {"$and": [{"status": {"$eq": "?string"}}, {"total": {"$gt": "?number"}}]}},
                {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
                {"$lookup": {"from": "items", "let": {"oid": "$_id"}, "pipeline": [
                    {"$match": {"$expr": {"$eq": ["$orderId", "$$oid"]}}}, {"$limit": "?number"}], "as": "items"}},
                {"$sort": {"total": -1}},
                {"$limit": "?number"},
                {"$project": {"total": true, "label": {"$concat": ["$name", "?string"]}}}
            ])
        );
    }

    #[test]
    fn update_kinds() {
        let ops = raw(
            doc! {"u": {"$set": {"a": 1, "b.c": "x"}, "$inc": {"n": 1}, "$push": {"log": {"$each": [1], "$slice": -10}}}},
        );
        assert_eq!(
            text(|o| update_kind(o, ops.get("u").unwrap().unwrap())),
            json!({"operators": {"$set": ["a", "b.c"], "$inc": ["n"], "$push": [{"log": ["$each", "$slice"]}]}})
        );
        let rep = raw(doc! {"u": {"_id": 1, "name": "x", "lines": [1, 2]}});
        assert_eq!(
            text(|o| update_kind(o, rep.get("u").unwrap().unwrap())),
            json!({"replacement": {"_id": "?number", "name": "?string", "lines": "?array<?number>"}})
        );
        let pipe = raw(doc! {"u": [{"$set": {"total": {"$sum": "$lines.price"}}}]});
        assert_eq!(
            text(|o| update_kind(o, pipe.get("u").unwrap().unwrap())),
            json!({"pipeline": [{"$set": {"total": {"$sum": "$lines.price"}}}]})
        );
    }

    #[test]
    fn projections_and_fingerprints() {
        assert_eq!(
            text(|o| projection(o, &raw(doc! {"a": 1, "b": 0, "c": true}))),
            json!({"a": true, "b": false, "c": true})
        );
        let a = fingerprint(&["shop.orders", "find", "{}"]);
        assert_eq!(a, fingerprint(&["shop.orders", "find", "{}"]));
        assert_ne!(a, fingerprint(&["shop.orders", "find", "{ }"]));
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(a.len(), 16);
        // Pinned: the fingerprint must not change between versions or machines.
        assert_eq!(fingerprint(&["x"]), "08f1c907b58eba68");
        // Streaming a shape equals hashing its text.
        let shape = json!({"filter": {"a": {"$eq": "?number"}}, "limit": true});
        let written = ShapeJson::build(|o| o.extend_from_slice(shape.to_string().as_bytes()));
        let streamed = Fingerprint::new().part("t.c").part("find").shape(&written).finish();
        assert_eq!(hex(streamed), fingerprint(&["t.c", "find", &shape.to_string()]));
    }
}
