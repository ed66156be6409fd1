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

pub mod command;
pub mod json;
pub mod memo;
pub mod operators;

pub use json::*;

/// Predicates being collected for one filter level, each a span of `text`.
#[derive(Default)]
struct Predicates {
    text: Vec<u8>,
    spans: Vec<Range<usize>>,
}

thread_local! {
    /// Emptied predicate lists kept for the next filter level: every request has a
    /// filter or two, and their buffers were a tenth of the shapes' cost.
    static SPARE: std::cell::RefCell<Vec<Predicates>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Predicates {
    /// An empty list, reusing a spare one's buffers when there is one.
    fn take() -> Predicates {
        SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default()
    }

    /// Empties the list and keeps it for [`Predicates::take`] (a few, of modest size).
    fn give_back(mut self) {
        if self.text.capacity() <= 16 * 1024 {
            self.text.clear();
            self.spans.clear();
            SPARE.with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < 8 {
                    s.push(self);
                }
            });
        }
    }

    fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.text.len();
        write(&mut self.text);
        self.spans.push(start..self.text.len());
    }

    /// The predicates as a list, sorted by their text.
    fn write_list(&mut self, out: &mut Vec<u8>) {
        let text = &self.text;
        self.spans.sort_by(|a, b| text[a.clone()].cmp(&text[b.clone()]));
        array(out, &self.spans, |out, s| out.extend_from_slice(&text[s.clone()]));
    }

    /// None is `{}`, one is itself, more are a `$and` sorted by their text, so
    /// that predicate order does not split shapes.
    fn write(&mut self, out: &mut Vec<u8>) {
        match self.spans.len() {
            0 => out.extend_from_slice(b"{}"),
            1 => out.extend_from_slice(&self.text[self.spans[0].clone()]),
            _ => {
                out.extend_from_slice(b"{\"$and\":");
                self.write_list(out);
                out.push(b'}');
            }
        }
    }
}

/// Normalises a query filter (`find.filter`, `$match`, `q` of update/delete).
pub fn filter(out: &mut Vec<u8>, doc: &RawDocument) {
    nested(out, |out| {
        let mut preds = Predicates::take();
        predicates(&mut preds, doc);
        preds.write(out);
        preds.give_back();
    })
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
                        branches.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                        array(o, &branches, |o, b| o.extend_from_slice(b.as_bytes()));
                    }
                    None => array(o, [e], placeholder),
                })
            }),
            b"$expr" => preds.push(|o| single(o, "$expr", |o| expression(o, e))),
            b"$comment" => {}
            b"$where" => preds.push(|o| single(o, "$where", |o| quoted(o, "?javascript"))),
            b"$text" => preds.push(|o| single(o, "$text", operators::text)),
            b"$sampleRate" => preds.push(|o| operators::sample_rate(o, e)),
            k if k.starts_with(b"$") => preds.push(|o| single_bytes(o, k, |o| placeholder(o, e))),
            field => field_predicates(preds, field, e),
        }
    }
}

/// `{field: value}` or `{field: {$op: value, ...}}` as one predicate per operator
/// (see [`operators`] for how each is written).
fn field_predicates(preds: &mut Predicates, field: &[u8], v: Element<'_>) {
    let ops = match (v.kind, v.as_document()) {
        // A DBRef (`{$ref, $id}`) is a value, not operators.
        (_, Some(d)) if operators(d) => d,
        (0x0B, _) => return preds.push(|o| single_bytes(o, field, |o| operators::regex(o, v, None))),
        _ => return preds.push(|o| single_bytes(o, field, |o| single(o, "$eq", |o| placeholder(o, v)))),
    };
    for e in element::elements(ops).filter(|e| operators::counts(*e, ops)) {
        match (e.key, e.as_document()) {
            (b"$all", _) => operators::all(field, e, |w| preds.push(w), elem_match),
            (b"$elemMatch", _) => {
                preds.push(|o| single_bytes(o, field, |o| single(o, "$elemMatch", |o| elem_match(o, e))))
            }
            // `$not` over several operators is `$nor` over their `$and`.
            (b"$not", Some(d)) if operators::count(d) > 1 => preds.push(|o| {
                nested(o, |o| {
                    single(o, "$nor", |o| {
                        array(o, [()], |o, ()| {
                            let mut inner = Predicates::take();
                            field_predicates(&mut inner, field, e);
                            single(o, "$and", |o| inner.write_list(o));
                            inner.give_back();
                        })
                    })
                })
            }),
            (b"$not", Some(d)) => preds.push(|o| {
                single_bytes(o, field, |o| {
                    single(o, "$not", |o| match element::elements(d).find(|op| operators::counts(*op, d)) {
                        Some(op) if op.key == b"$elemMatch" => single(o, "$elemMatch", |o| elem_match(o, op)),
                        Some(op) => operators::operator(o, op, d),
                        None => o.extend_from_slice(b"{}"),
                    })
                })
            }),
            (b"$not", None) if e.kind == 0x0B => preds
                .push(|o| single_bytes(o, field, |o| single(o, "$not", |o| operators::regex(o, e, None)))),
            _ => preds.push(|o| single_bytes(o, field, |o| operators::operator(o, e, ops))),
        }
    }
}

/// Whether a field's document is operators (`{$gt: 5}`), not a value: a DBRef
/// (`{$ref, $id}`) is a value.
pub(crate) fn operators(d: &RawDocument) -> bool {
    first_key(d).is_some_and(|k| k.starts_with(b"$") && k != b"$ref" && k != b"$id")
}

fn is_logical(k: &[u8]) -> bool {
    matches!(k, b"$and" | b"$or" | b"$nor")
}

/// `$elemMatch`'s argument: operators on the elements themselves (written as a
/// field's would be, without the field), or a filter on the elements' fields.
fn elem_match(out: &mut Vec<u8>, e: Element<'_>) {
    nested(out, |out| elem_match_at(out, e))
}

fn elem_match_at(out: &mut Vec<u8>, e: Element<'_>) {
    match e.as_document() {
        Some(d) if first_key(d).is_some_and(|k| k.starts_with(b"$") && !is_logical(k)) => {
            let mut parts: Vec<Vec<u8>> = Vec::new();
            for op in element::elements(d).filter(|op| operators::counts(*op, d)) {
                let mut part = Vec::new();
                match op.key {
                    b"$elemMatch" => {
                        part.extend_from_slice(br#""$elemMatch":"#);
                        elem_match(&mut part, op);
                    }
                    _ => operators::members(&mut part, op, d),
                }
                parts.push(part);
            }
            // Two operators written with the same key (`$ne` and `$not` are both
            // `$not`) would make a JSON object lose one: list them under `$and`.
            let key = |p: &Vec<u8>| p.split(|&b| b == b':').next().map(<[u8]>::to_vec);
            let mut keys: Vec<Vec<u8>> = parts.iter().filter_map(key).collect();
            keys.sort();
            let clash = keys.windows(2).any(|w| w[0] == w[1]);
            if clash {
                out.extend_from_slice(br#"{"$and":"#);
                array(out, &parts, |o, p| {
                    o.push(b'{');
                    o.extend_from_slice(p);
                    o.push(b'}');
                });
                out.push(b'}');
            } else {
                out.push(b'{');
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(p);
                }
                out.push(b'}');
            }
        }
        Some(d) => filter(out, d),
        None => placeholder(out, e),
    }
}

/// An aggregation expression: field paths (`"$a.b"`) and variables (`"$$NOW"`) kept,
/// other literals replaced by placeholders, operators and their structure kept.
///
/// As the server's query shapes: an array of constants is one placeholder (so
/// `{$add: [1, 2]}` is `{$add: "?array<?number>"}`), `$literal` is the placeholder
/// of its value, and `$meta` keeps the name of what it reads.
pub fn expression(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x02 if v.value.get(4) == Some(&b'$') => literal(out, v),
        0x03 => {
            let d = v.as_document();
            match d.and_then(|d| element::elements(d).next()) {
                Some(first) if matches!(first.key, b"$literal" | b"$const") => placeholder(out, first),
                Some(first) if first.key == b"$meta" && meta_keyword(first) => {
                    single(out, "$meta", |o| literal(o, first))
                }
                _ => object(out, d, expression),
            }
        }
        0x04 if items(&v).next().is_some() && items(&v).all(constant) => placeholder(out, v),
        0x04 => nested(out, |out| array(out, items(&v), expression)),
        _ => placeholder(out, v),
    }
}

/// Whether `$meta`'s argument is one of the server's keywords (anything else is a
/// value, and shaped as one).
fn meta_keyword(v: Element<'_>) -> bool {
    const KEYWORDS: [&str; 14] = [
        "textScore",
        "indexKey",
        "searchScore",
        "searchHighlights",
        "searchScoreDetails",
        "searchSequenceToken",
        "sortKey",
        "recordId",
        "geoNearDistance",
        "geoNearPoint",
        "randVal",
        "score",
        "scoreDetails",
        "vectorSearchScore",
    ];
    v.as_str().is_some_and(|k| KEYWORDS.contains(&k))
}

/// Whether an expression is a constant: no field path, variable or operator in it.
fn constant(v: Element<'_>) -> bool {
    match v.kind {
        0x02 => v.value.get(4) != Some(&b'$'),
        0x03 => false,
        0x04 => items(&v).all(constant),
        _ => true,
    }
}

/// A sort specification: directions as 1 and -1 whatever their number type (the
/// server writes them so), `$meta` sorts kept.
pub fn sort(out: &mut Vec<u8>, v: Element<'_>) {
    match v.as_document() {
        Some(d) => object(out, Some(d), |o, dir| match dir.kind {
            0x01 | 0x10 | 0x12 | 0x13 => {
                let negative = match dir.kind {
                    0x01 => dir.value.try_into().is_ok_and(|b| f64::from_le_bytes(b) < 0.0),
                    0x13 => dir.value.last().is_some_and(|b| b & 0x80 != 0),
                    _ => dir.as_i64().is_some_and(|n| n < 0),
                };
                o.extend_from_slice(if negative { b"-1" } else { b"1" });
            }
            // `{$meta: "textScore"}`; anything else is no direction.
            _ => match dir.as_document().and_then(|d| element::elements(d).next()) {
                Some(m) if m.key == b"$meta" && meta_keyword(m) => single(o, "$meta", |o| literal(o, m)),
                _ => placeholder(o, dir),
            },
        }),
        None => placeholder(out, v),
    }
}

/// A projection: inclusion and exclusion kept as booleans, computed fields shaped.
/// An inclusion projection returns `_id` unless told not to, so `{a: 1}` is written
/// `{a: true, _id: true}`, the same shape as `{a: 1, _id: 1}` (as the server does).
pub fn projection(out: &mut Vec<u8>, d: &RawDocument) {
    let mut m = Obj::open(out);
    let mut inclusion = false;
    let mut id = false;
    for e in element::elements(d) {
        id |= e.key == b"_id";
        let value = m.key_bytes(e.key);
        let elem_match =
            e.as_document().and_then(|d| element::find(d, "$elemMatch")).and_then(|m| m.as_document());
        match (included(e), elem_match) {
            (Some(b), _) => {
                inclusion |= b && e.key != b"_id";
                boolean(value, b)
            }
            // `{a: {$elemMatch: filter}}` picks array elements with a filter.
            (None, Some(f)) => {
                inclusion = true;
                single(value, "$elemMatch", |o| filter(o, f))
            }
            // `$slice` and `$meta` alone keep every field; other expressions include.
            (None, None) => {
                let keeps_all = e
                    .as_document()
                    .and_then(|d| element::elements(d).next())
                    .is_some_and(|k| matches!(k.key, b"$slice" | b"$meta"));
                inclusion |= !keeps_all;
                expression(value, e)
            }
        }
    }
    if inclusion && !id {
        boolean(m.key("_id"), true);
    }
    m.close();
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
        (b"$sort", Some(_)) => sort(o, body),
        (b"$limit" | b"$skip" | b"$sample", _) => placeholder(o, body),
        // Names only: a collection, a path, a field name, options.
        (b"$unwind" | b"$count" | b"$out", _) => names(o, body),
        // $merge names collections and fields, but its whenMatched pipeline and `let`
        // carry values: those are shaped like any pipeline and expression.
        (b"$merge", Some(d)) => object(o, Some(d), |o, v| match (v.key, v.kind) {
            (b"whenMatched", 0x04) => pipeline(o, v),
            (b"let", 0x03) => object(o, v.as_document(), expression),
            (b"into" | b"on" | b"whenMatched" | b"whenNotMatched", 0x02..=0x04) => names(o, v),
            _ => placeholder(o, v),
        }),
        (b"$merge", None) if body.kind == 0x02 => names(o, body),
        (b"$project", Some(d)) => projection(o, d),
        // $geoNear's `query` is a filter; its other parts are names, options and
        // a point.
        (b"$geoNear", Some(d)) => object(o, Some(d), |o, v| match (v.key, v.as_document()) {
            (b"query", Some(f)) => filter(o, f),
            (b"distanceField" | b"includeLocs" | b"key" | b"spherical", _) => names(o, v),
            _ => placeholder(o, v),
        }),
        (b"$lookup" | b"$unionWith", Some(d)) => lookup(o, d),
        // `{$unionWith: "coll"}` names a collection, like $lookup's `from`.
        (b"$unionWith", None) if body.kind == 0x02 => names(o, body),
        (b"$graphLookup", Some(d)) => object(o, Some(d), |o, v| match (v.key, v.as_document()) {
            (b"restrictSearchWithMatch", Some(f)) => filter(o, f),
            (b"restrictSearchWithMatch" | b"maxDepth", _) => placeholder(o, v),
            (b"startWith", _) => expression(o, v),
            (b"from" | b"connectFromField" | b"connectToField" | b"as" | b"depthField", _) => names(o, v),
            _ => placeholder(o, v),
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
        (b"from" | b"localField" | b"foreignField" | b"as" | b"coll" | b"db", _) => names(o, v),
        _ => placeholder(o, v),
    })
}

/// A value that names things (a collection, a field, a path, an option): strings
/// and booleans are kept, and the strings and booleans inside documents and arrays;
/// any other value (a number, a date, ...) is data and becomes a placeholder.
pub fn names(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x02 | 0x08 => literal(out, v),
        0x03 => object(out, v.as_document(), names),
        0x04 => nested(out, |out| array(out, items(&v), names)),
        _ => placeholder(out, v),
    }
}

/// A collation: its options are kept (`locale`, `strength`, ...: they decide which
/// index can serve the query), anything else becomes a placeholder.
pub fn collation(out: &mut Vec<u8>, v: Element<'_>) {
    const OPTIONS: [&[u8]; 8] = [
        b"locale",
        b"caseLevel",
        b"caseFirst",
        b"strength",
        b"numericOrdering",
        b"alternate",
        b"maxVariable",
        b"backwards",
    ];
    match v.as_document() {
        Some(d) => object(out, Some(d), |o, e| {
            match OPTIONS.contains(&e.key) && matches!(e.kind, 0x01 | 0x02 | 0x08 | 0x10 | 0x12) {
                true => literal(o, e),
                false => placeholder(o, e),
            }
        }),
        None => placeholder(out, v),
    }
}

/// A `hint`: an index's name, or its key pattern (directions as in [`sort`]).
pub fn hint(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x03 => sort(out, v),
        _ => names(out, v),
    }
}

/// The shape of an update's modification: operator updates by operator and path,
/// replacements by their top-level fields, pipeline updates stage by stage.
pub fn update_kind(out: &mut Vec<u8>, u: Element<'_>) {
    let d = u.as_document();
    match u.kind {
        0x04 => single(out, "pipeline", |o| pipeline(o, u)),
        0x03 if d.is_some_and(starts_with_operator) => single(out, "operators", |o| {
            object(o, d, |o, paths| match paths.as_document() {
                Some(p) => array(o, element::elements(p), |o, path| match (paths.key, path.as_document()) {
                    // $push/$addToSet modifiers matter to the detectors ($each, $slice).
                    (op, Some(m)) if with_modifiers(op) && starts_with_operator(m) => {
                        single(o, &code_path(path.key), |o| {
                            array(o, element::elements(m), |o, k| bytes_string(o, k.key))
                        })
                    }
                    _ => string(o, &code_path(path.key)),
                }),
                None => array(o, [paths], placeholder),
            })
        }),
        0x03 => single(out, "replacement", |o| match d {
            Some(d) => document_fields(o, d),
            None => placeholder(o, u),
        }),
        _ => single(out, "replacement", |o| placeholder(o, u)),
    }
}

/// A document's top-level fields and their types: the shape of an insert. Keys
/// that are data (see [`code_path`]) are written as `?key`, once.
pub fn document_fields(out: &mut Vec<u8>, d: &RawDocument) {
    let mut m = Obj::open(out);
    let mut data_keys = false;
    for e in element::elements(d) {
        match path_part(e.key) {
            Some(_) if std::mem::replace(&mut data_keys, true) => {}
            Some(p) => placeholder(m.key(p), e),
            None => placeholder(m.key_bytes(e.key), e),
        }
    }
    m.close();
}

/// An update path as the code that wrote it: array positions (`lines.3.qty`)
/// become `?index` and keys that are plainly data (an ObjectId, a UUID, a date,
/// a long hex or digit run) become `?key`, so one code path is one row whatever
/// element or key it touched. Filter paths are kept as written: an index serves
/// a path as written.
pub fn code_path(path: &[u8]) -> String {
    let path = String::from_utf8_lossy(path);
    if !path.split('.').any(|p| path_part(p.as_bytes()).is_some()) {
        return path.into_owned();
    }
    path.split('.').map(|p| path_part(p.as_bytes()).unwrap_or(p)).collect::<Vec<_>>().join(".")
}

/// What a path component that is data stands for: `?index` for an array position,
/// `?key` for a key that is a value.
fn path_part(p: &[u8]) -> Option<&'static str> {
    let hex = |b: &u8| b.is_ascii_hexdigit();
    let digits = |b: &u8| b.is_ascii_digit();
    if !p.is_empty() && p.len() <= 9 && p.iter().all(digits) {
        return Some("?index");
    }
    let uuid = p.len() == 36
        && p.iter()
            .enumerate()
            .all(|(i, b)| matches!(i, 8 | 13 | 18 | 23) == (*b == b'-') && (*b == b'-' || hex(b)));
    let date = p.len() >= 8
        && p.len() <= 10
        && p.iter().all(|b| digits(b) || *b == b'-')
        && p.iter().filter(|b| **b == b'-').count() >= 1
        && p.first().is_some_and(digits);
    let long_hex = p.len() >= 16 && p.iter().all(hex) && p.iter().any(digits);
    let long_digits = p.len() > 9 && p.iter().all(digits);
    (uuid || date || long_hex || long_digits).then_some("?key")
}

fn first_key(d: &RawDocument) -> Option<&[u8]> {
    element::elements(d).next().map(|e| e.key)
}

/// Whether an update, or a `$push`'s value, is written with operators (`$set`,
/// `$each`): its first key says (a filter's field has [`operators`]).
pub(super) fn starts_with_operator(d: &RawDocument) -> bool {
    first_key(d).is_some_and(|k| k.starts_with(b"$"))
}

/// Whether an update operator's modifiers (`$each`, `$slice`) are part of the shape.
pub(super) fn with_modifiers(op: &[u8]) -> bool {
    matches!(op, b"$push" | b"$addToSet")
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
mod tests;
