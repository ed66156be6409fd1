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
//! a `serde_json::Value` only when a new table row needs one. Documents are read with
//! [`mongotap_wire::element`]'s header walk: a placeholder needs a value's type, not
//! its decoded value.

use std::ops::Range;

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
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
    bytes_string(out, s.as_bytes());
}

/// A JSON string from raw key or string bytes: copied when printable ASCII with
/// nothing to escape (nearly always), otherwise escaped by `serde_json` (and made
/// valid UTF-8, should the wire's bytes not be).
fn bytes_string(out: &mut Vec<u8>, b: &[u8]) {
    if b.iter().all(|&c| (0x20..0x80).contains(&c) && c != b'"' && c != b'\\') {
        out.push(b'"');
        out.extend_from_slice(b);
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, &String::from_utf8_lossy(b)).expect("writing to memory cannot fail");
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
        self.key_bytes(k.as_bytes())
    }

    fn key_bytes(&mut self, k: &[u8]) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.empty) {
            self.out.push(b',');
        }
        bytes_string(self.out, k);
        self.out.push(b':');
        self.out
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.push(b'}');
    }
}

/// Writes a JSON array of the items `write` is called with.
pub fn array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
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
    single_bytes(out, key.as_bytes(), value)
}

fn single_bytes(out: &mut Vec<u8>, key: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
    let mut o = Obj::open(out);
    value(o.key_bytes(key));
    o.close();
}

/// The elements of an array (or document) element's value, if it is one.
fn items<'a>(e: &Element<'a>) -> impl Iterator<Item = Element<'a>> {
    e.as_array().or_else(|| e.as_document()).into_iter().flat_map(element::elements)
}

/// The placeholder for one literal.
pub fn placeholder(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x04 => array_placeholder(out, v),
        kind => quoted(out, type_placeholder(kind)),
    }
}

/// A string that needs no escaping (placeholders are ASCII without quotes).
fn quoted(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// The placeholder of a BSON type byte.
fn type_placeholder(kind: u8) -> &'static str {
    match kind {
        0x01 | 0x10 | 0x12 | 0x13 => "?number",
        0x02 => "?string",
        0x03 => "?object",
        0x04 => "?array",
        0x05 => "?binData",
        0x06 => "?undefined",
        0x07 => "?objectId",
        0x08 => "?bool",
        0x09 => "?date",
        0x0A => "?null",
        0x0B => "?regex",
        0x0C => "?dbPointer",
        0x0D | 0x0F => "?javascript",
        0x0E => "?symbol",
        0x11 => "?timestamp",
        0xFF => "?minKey",
        0x7F => "?maxKey",
        _ => "?unknown",
    }
}

/// `?array<?T>` when every element has type T, `?array<>` when mixed, `[]` when empty.
fn array_placeholder(out: &mut Vec<u8>, a: Element<'_>) {
    let mut kind: Option<&'static str> = None;
    let mut mixed = false;
    for v in items(&a) {
        let t = type_placeholder(v.kind);
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
pub fn literal(out: &mut Vec<u8>, v: Element<'_>) {
    let memory = "writing to memory cannot fail";
    match v.kind {
        // Non-finite doubles print as null, as serde_json prints them.
        0x01 => serde_json::to_writer(&mut *out, &f64::from_le_bytes(v.value.try_into().unwrap_or_default()))
            .expect(memory),
        0x10 | 0x12 => serde_json::to_writer(&mut *out, &v.as_i64()).expect(memory),
        0x02 => bytes_string(out, v.value.get(4..v.value.len().saturating_sub(1)).unwrap_or_default()),
        0x08 => boolean(out, v.as_bool() == Some(true)),
        0x0A => out.extend_from_slice(b"null"),
        0x03 => object(out, v.as_document(), literal),
        0x04 => array(out, items(&v), literal),
        _ => placeholder(out, v),
    }
}

/// `true` or `false`.
pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// An object with `d`'s keys and each value written by `value`.
fn object<'a>(out: &mut Vec<u8>, d: Option<&'a RawDocument>, value: impl Fn(&mut Vec<u8>, Element<'a>)) {
    let mut o = Obj::open(out);
    for e in d.into_iter().flat_map(element::elements) {
        value(o.key_bytes(e.key), e);
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
    for e in element::elements(doc) {
        match e.key {
            // An explicit $and is the same shape as implicit siblings: its branches'
            // predicates join this level.
            b"$and" => match e.as_array() {
                Some(a) => {
                    for branch in element::elements(a).filter_map(|b| b.as_document()) {
                        let before = preds.spans.len();
                        predicates(preds, branch);
                        if preds.spans.len() == before {
                            preds.push(|o| o.extend_from_slice(b"{}"));
                        }
                    }
                }
                None => preds.push(|o| placeholder(o, e)),
            },
            k @ (b"$or" | b"$nor") => preds.push(|o| {
                single_bytes(o, k, |o| match e.as_array() {
                    Some(a) => {
                        let mut branches: Vec<ShapeJson> = element::elements(a)
                            .filter_map(|b| b.as_document())
                            .map(|b| ShapeJson::build(|o| filter(o, b)))
                            .collect();
                        branches.sort_by(|a, b| a.0.cmp(&b.0));
                        array(o, &branches, |o, b| o.extend_from_slice(&b.0));
                    }
                    None => array(o, [e], placeholder),
                })
            }),
            b"$expr" => preds.push(|o| single(o, "$expr", |o| expression(o, e))),
            b"$comment" => {}
            k if k.starts_with(b"$") => preds.push(|o| single_bytes(o, k, |o| placeholder(o, e))),
            field => field_predicates(preds, field, e),
        }
    }
}

/// `{field: value}` or `{field: {$op: value, ...}}` as one predicate per operator.
fn field_predicates(preds: &mut Predicates, field: &[u8], v: Element<'_>) {
    let one = |preds: &mut Predicates, op: &[u8], value: &dyn Fn(&mut Vec<u8>)| {
        preds.push(|o| single_bytes(o, field, |o| single_bytes(o, op, value)))
    };
    let ops = match (v.kind, v.as_document()) {
        (_, Some(d)) if first_key(d).is_some_and(|k| k.starts_with(b"$")) => d,
        (0x0B, _) => return one(preds, b"$regex", &|o| quoted(o, "?regex")),
        _ => return one(preds, b"$eq", &|o| placeholder(o, v)),
    };
    let (mut has_regex, mut has_options) = (false, false);
    for e in element::elements(ops) {
        has_regex |= e.key == b"$regex";
        has_options |= e.key == b"$options";
    }
    for e in element::elements(ops) {
        match e.key {
            b"$elemMatch" => one(preds, e.key, &|o| match e.as_document() {
                Some(d) if first_key(d).is_some_and(|k| k.starts_with(b"$") && !is_logical(k)) => {
                    operators_only(o, d)
                }
                Some(d) => filter(o, d),
                None => placeholder(o, e),
            }),
            b"$not" => one(preds, e.key, &|o| match e.as_document() {
                Some(d) => operators_only(o, d),
                None => placeholder(o, e),
            }),
            // $options travels with $regex: one predicate.
            b"$options" if has_regex => {}
            b"$regex" if has_options => preds.push(|o| {
                single_bytes(o, field, |o| {
                    o.extend_from_slice(br#"{"$regex":"?string","$options":"?string"}"#)
                })
            }),
            op => one(preds, op, &|o| placeholder(o, e)),
        }
    }
}

fn is_logical(k: &[u8]) -> bool {
    matches!(k, b"$and" | b"$or" | b"$nor")
}

/// An operator document (`{$gt: 1, $lt: 5}`) with its values as placeholders.
fn operators_only(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, Some(d), |o, val| match val.as_document() {
        Some(inner) if first_key(inner).is_some_and(|k| k.starts_with(b"$")) => operators_only(o, inner),
        _ => placeholder(o, val),
    })
}

/// An aggregation expression: field paths (`"$a.b"`) and variables (`"$$NOW"`) kept,
/// other literals replaced by placeholders, operators and their structure kept.
pub fn expression(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x02 if v.value.get(4) == Some(&b'$') => literal(out, v),
        0x03 => {
            let d = v.as_document();
            match d.and_then(|d| element::elements(d).next()) {
                Some(first) if first.key == b"$literal" => single(out, "$literal", |o| placeholder(o, first)),
                _ => object(out, d, expression),
            }
        }
        0x04 => array(out, items(&v), expression),
        _ => placeholder(out, v),
    }
}

/// A projection: inclusion and exclusion kept as booleans, computed fields shaped.
pub fn projection(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, Some(d), |o, v| match included(v) {
        Some(b) => boolean(o, b),
        None => expression(o, v),
    })
}

/// Whether a projection value includes its field; `None` for a computed field.
pub fn included(v: Element<'_>) -> Option<bool> {
    match v.kind {
        0x01 => Some(f64::from_le_bytes(v.value.try_into().ok()?) != 0.0),
        0x10 | 0x12 => Some(v.as_i64()? != 0),
        0x08 => v.as_bool(),
        _ => None,
    }
}

/// An aggregation pipeline (an array element), stage by stage.
pub fn pipeline(out: &mut Vec<u8>, stages: Element<'_>) {
    array(out, items(&stages).filter_map(|s| s.as_document()), stage)
}

fn stage(out: &mut Vec<u8>, s: &RawDocument) {
    let Some(body) = element::elements(s).next() else { return out.extend_from_slice(b"{}") };
    let name = body.key;
    single_bytes(out, name, |o| match (name, body.as_document()) {
        (b"$match", Some(d)) => filter(o, d),
        (b"$sort", Some(_)) => literal(o, body),
        (b"$limit" | b"$skip" | b"$sample", _) => placeholder(o, body),
        // Names only: a collection, a path, a field name, options.
        (b"$unwind" | b"$count" | b"$out", _) => match body.kind {
            0x02 | 0x03 => literal(o, body),
            _ => placeholder(o, body),
        },
        // $merge names collections and fields, but its whenMatched pipeline and `let`
        // carry values: those are shaped like any pipeline and expression.
        (b"$merge", Some(d)) => object(o, Some(d), |o, v| match (v.key, v.kind) {
            (b"whenMatched", 0x04) => pipeline(o, v),
            (b"let", 0x03) => object(o, v.as_document(), expression),
            (b"into" | b"on" | b"whenMatched" | b"whenNotMatched", 0x02..=0x04) => literal(o, v),
            _ => placeholder(o, v),
        }),
        (b"$merge", None) if body.kind == 0x02 => literal(o, body),
        (b"$project", Some(d)) => projection(o, d),
        (b"$lookup" | b"$unionWith", Some(d)) => lookup(o, d),
        // `{$unionWith: "coll"}` names a collection, like $lookup's `from`.
        (b"$unionWith", None) if body.kind == 0x02 => literal(o, body),
        (b"$graphLookup", Some(d)) => object(o, Some(d), |o, v| match (v.key, v.as_document()) {
            (b"restrictSearchWithMatch", Some(f)) => filter(o, f),
            (b"restrictSearchWithMatch" | b"maxDepth", _) => placeholder(o, v),
            (b"startWith", _) => expression(o, v),
            _ => literal(o, v),
        }),
        (b"$facet", Some(d)) => object(o, Some(d), |o, v| match v.kind {
            0x04 => pipeline(o, v),
            _ => placeholder(o, v),
        }),
        _ => expression(o, body),
    })
}

/// `$lookup`: the joined collection and the join fields kept, sub-pipelines shaped.
fn lookup(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, Some(d), |o, v| match (v.key, v.kind) {
        (b"pipeline", 0x04) => pipeline(o, v),
        (b"let", 0x03) => object(o, v.as_document(), expression),
        _ => literal(o, v),
    })
}

/// The shape of an update's modification: operator updates by operator and path,
/// replacements by their top-level fields, pipeline updates stage by stage.
pub fn update_kind(out: &mut Vec<u8>, u: Element<'_>) {
    let d = u.as_document();
    match u.kind {
        0x04 => single(out, "pipeline", |o| pipeline(o, u)),
        0x03 if d.and_then(first_key).is_some_and(|k| k.starts_with(b"$")) => single(out, "operators", |o| {
            object(o, d, |o, paths| match paths.as_document() {
                Some(p) => array(o, element::elements(p), |o, path| match (paths.key, path.as_document()) {
                    // $push/$addToSet modifiers matter to the detectors ($each, $slice).
                    (b"$push" | b"$addToSet", Some(m))
                        if first_key(m).is_some_and(|k| k.starts_with(b"$")) =>
                    {
                        single_bytes(o, path.key, |o| {
                            array(o, element::elements(m), |o, k| bytes_string(o, k.key))
                        })
                    }
                    _ => bytes_string(o, path.key),
                }),
                None => array(o, [paths], placeholder),
            })
        }),
        0x03 => single(out, "replacement", |o| object(o, d, placeholder)),
        _ => single(out, "replacement", |o| placeholder(o, u)),
    }
}

/// A document's top-level fields and their types: the shape of an insert.
pub fn document_fields(out: &mut Vec<u8>, d: &RawDocument) {
    object(out, Some(d), placeholder)
}

fn first_key(d: &RawDocument) -> Option<&[u8]> {
    element::elements(d).next().map(|e| e.key)
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
        let shaped = text(|o| pipeline(o, element::find(&p, "p").unwrap()));
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
    fn merge_keeps_names_and_shapes_its_pipeline() {
        let p = raw(doc! {"p": [
            {"$merge": {"into": {"db": "reports", "coll": "totals"}, "on": ["region", "day"],
                        "let": {"secret": "hunter2"},
                        "whenMatched": [{"$set": {"note": "hunter2", "n": {"$add": ["$n", 41]}}}],
                        "whenNotMatched": "insert"}},
            {"$sortByCount": {"$concat": ["$a", "hunter2"]}}
        ]});
        let shaped = text(|o| pipeline(o, element::find(&p, "p").unwrap())).to_string();
        assert!(!shaped.contains("hunter2") && !shaped.contains("41"), "{shaped}");
        assert!(
            shaped.contains("totals") && shaped.contains("region") && shaped.contains("insert"),
            "{shaped}"
        );
    }

    #[test]
    fn update_kinds() {
        let ops = raw(
            doc! {"u": {"$set": {"a": 1, "b.c": "x"}, "$inc": {"n": 1}, "$push": {"log": {"$each": [1], "$slice": -10}}}},
        );
        assert_eq!(
            text(|o| update_kind(o, element::find(&ops, "u").unwrap())),
            json!({"operators": {"$set": ["a", "b.c"], "$inc": ["n"], "$push": [{"log": ["$each", "$slice"]}]}})
        );
        let rep = raw(doc! {"u": {"_id": 1, "name": "x", "lines": [1, 2]}});
        assert_eq!(
            text(|o| update_kind(o, element::find(&rep, "u").unwrap())),
            json!({"replacement": {"_id": "?number", "name": "?string", "lines": "?array<?number>"}})
        );
        let pipe = raw(doc! {"u": [{"$set": {"total": {"$sum": "$lines.price"}}}]});
        assert_eq!(
            text(|o| update_kind(o, element::find(&pipe, "u").unwrap())),
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
