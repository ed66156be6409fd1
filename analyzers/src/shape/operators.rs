//! Query operators whose shape is more than a placeholder, written as MongoDB's
//! query shapes write them (`src/mongo/db/query/query_shape/` in the server and the
//! match expressions' `serialize` with the debug-type-string policy; each case is
//! pinned in `tests/query_shapes.rs`):
//!
//! - a regular expression is `{$regex: "?string"}`, with `$options: "?string"` when
//!   it has flags, whether written as a BSON regex or as `$regex`/`$options`;
//! - `$ne` is `$not: {$eq}`, `$nin` is `$not: {$in}`, `$exists: false` is
//!   `$not: {$exists: "?bool"}`, and `$exists` is always `"?bool"`;
//! - `$mod` is `["?number", "?number"]`; the bit tests are `"?array<?number>"`
//!   (`"[]"` for an empty mask); `$type` keeps its type codes, which are not data;
//! - `$all` is one `$eq` (or `$regex`, `$elemMatch`) per element;
//! - geo operators keep their structure and `type`, with coordinates shaped;
//! - `$text` is its four options, `$where` is `"?javascript"`, `$sampleRate` is the
//!   `$rand` expression it stands for.

use bson::RawDocument;
use mongotap_wire::element::{self, Element};

use crate::shape::json::{
    array, in_placeholder, nested, placeholder, quoted, single, single_bytes, string, Obj,
};

/// Whether `e` is an operator of its own among its siblings `ops`: `$options`
/// travels with `$regex`, and `$maxDistance`/`$minDistance` with `$near`.
pub fn counts(e: Element<'_>, ops: &RawDocument) -> bool {
    match e.key {
        b"$options" => element::find(ops, "$regex").is_none(),
        b"$maxDistance" | b"$minDistance" => {
            !element::elements(ops).any(|x| matches!(x.key, b"$near" | b"$nearSphere" | b"$geoNear"))
        }
        _ => true,
    }
}

/// The operators of their own in `ops`.
pub fn count(ops: &RawDocument) -> usize {
    element::elements(ops).filter(|e| counts(*e, ops)).count()
}

/// Writes one operator of `ops` as the members of its predicate's operator
/// document (`"$gt":"?number"`, `"$not":{"$eq":"?number"}`, ...), without braces.
/// `$all`, `$not` and `$elemMatch`, which hold predicates, are the caller's.
pub fn members(out: &mut Vec<u8>, e: Element<'_>, ops: &RawDocument) {
    let key = |out: &mut Vec<u8>, k: &str| {
        string(out, k);
        out.push(b':');
    };
    match e.key {
        b"$ne" => {
            key(out, "$not");
            single(out, "$eq", |o| placeholder(o, e));
        }
        b"$nin" => {
            key(out, "$not");
            single(out, "$in", |o| in_placeholder(o, e));
        }
        b"$in" => {
            key(out, "$in");
            in_placeholder(out, e);
        }
        b"$exists" if falsy(e) => {
            key(out, "$not");
            out.extend_from_slice(br#"{"$exists":"?bool"}"#);
        }
        b"$exists" => out.extend_from_slice(br#""$exists":"?bool""#),
        b"$mod" => out.extend_from_slice(br#""$mod":["?number","?number"]"#),
        b"$bitsAllSet" | b"$bitsAllClear" | b"$bitsAnySet" | b"$bitsAnyClear" => {
            bytes_key(out, e.key);
            bit_mask(out, e);
        }
        b"$type" => {
            key(out, "$type");
            type_codes(out, e);
        }
        b"$regex" | b"$options" => {
            let options = element::find(ops, "$options");
            out.extend_from_slice(br#""$regex":"?string""#);
            if regex_has_flags(e, options) {
                out.extend_from_slice(br#","$options":"?string""#);
            }
        }
        k if is_geo(k) => {
            bytes_key(out, k);
            geo(out, e);
            let near = matches!(k, b"$near" | b"$nearSphere" | b"$geoNear");
            for d in
                element::elements(ops).filter(|d| near && matches!(d.key, b"$maxDistance" | b"$minDistance"))
            {
                out.push(b',');
                bytes_key(out, d.key);
                placeholder(out, d);
            }
        }
        k => {
            bytes_key(out, k);
            placeholder(out, e);
        }
    }
}

/// One operator of `ops` as its own operator document: `{"$gt":"?number"}`.
pub fn operator(out: &mut Vec<u8>, e: Element<'_>, ops: &RawDocument) {
    out.push(b'{');
    members(out, e, ops);
    out.push(b'}');
}

fn bytes_key(out: &mut Vec<u8>, k: &[u8]) {
    string(out, &String::from_utf8_lossy(k));
    out.push(b':');
}

/// A regular expression value, `{$regex: "?string"[, $options: "?string"]}`, from a
/// BSON regex (its flags travel with it) or a `$regex` string with `$options`.
pub fn regex(out: &mut Vec<u8>, re: Element<'_>, options: Option<Element<'_>>) {
    if regex_has_flags(re, options) {
        out.extend_from_slice(br#"{"$regex":"?string","$options":"?string"}"#);
    } else {
        out.extend_from_slice(br#"{"$regex":"?string"}"#);
    }
}

/// Whether a regex has flags: its own (a BSON regex) or a non-empty `$options`.
fn regex_has_flags(re: Element<'_>, options: Option<Element<'_>>) -> bool {
    let own = re.kind == 0x0B && regex_flags(re.value).is_some_and(|f| !f.is_empty());
    own || options.is_some_and(|o| o.as_str() != Some(""))
}
/// The flags of a BSON regex value (two C strings: pattern, flags).
fn regex_flags(value: &[u8]) -> Option<&[u8]> {
    let end = value.iter().position(|&b| b == 0)?;
    let rest = value.get(end + 1..)?;
    rest.split(|&b| b == 0).next()
}

/// Whether a value is falsy as `$exists` reads it (false, 0, null, undefined).
pub fn falsy(v: Element<'_>) -> bool {
    match v.kind {
        0x08 => v.as_bool() == Some(false),
        0x01 => v.value.try_into().is_ok_and(|b| f64::from_le_bytes(b) == 0.0),
        0x10 | 0x12 => v.as_i64() == Some(0),
        0x06 | 0x0A => true,
        _ => false,
    }
}

/// A bit test's mask, as the server holds it: a list of bit positions, `"[]"`
/// when no bit is set (mask 0, `[]`, all-zero bytes).
pub fn bit_mask(out: &mut Vec<u8>, v: Element<'_>) {
    let empty = match v.kind {
        0x10 | 0x12 | 0x01 => v.as_i64() == Some(0),
        0x04 => v.as_array().is_some_and(|a| element::elements(a).next().is_none()),
        // Binary: length, subtype, bytes.
        0x05 => v.value.get(5..).is_some_and(|b| b.iter().all(|&x| x == 0)),
        _ => false,
    };
    quoted(out, if empty { "[]" } else { "?array<?number>" });
}

/// `$type`: the type codes, which describe the query, not the data. Names become
/// codes; `"number"` stays a name and comes first; codes are sorted, once each.
pub fn type_codes(out: &mut Vec<u8>, v: Element<'_>) {
    let mut number = false;
    let mut codes: Vec<i64> = Vec::new();
    let mut one = |e: Element<'_>| match e.as_str() {
        Some("number") => number = true,
        Some(name) => codes.extend(type_code(name)),
        // A code the server knows; any other number is a value, not a type.
        None => codes.extend(e.as_i64().map(|c| if matches!(c, -1 | 1..=19 | 127) { c } else { 0 })),
    };
    match v.as_array() {
        Some(a) => element::elements(a).for_each(&mut one),
        None => one(v),
    }
    codes.sort_unstable();
    codes.dedup();
    out.push(b'[');
    if number {
        out.extend_from_slice(b"\"number\"");
    }
    for (i, c) in codes.iter().enumerate() {
        if number || i > 0 {
            out.push(b',');
        }
        match c {
            0 => quoted(out, "?number"),
            c => out.extend_from_slice(c.to_string().as_bytes()),
        }
    }
    out.push(b']');
}

/// The BSON type code of a `$type` alias.
fn type_code(name: &str) -> Option<i64> {
    Some(match name {
        "double" => 1,
        "string" => 2,
        "object" => 3,
        "array" => 4,
        "binData" => 5,
        "undefined" => 6,
        "objectId" => 7,
        "bool" => 8,
        "date" => 9,
        "null" => 10,
        "regex" => 11,
        "dbPointer" => 12,
        "javascript" => 13,
        "symbol" => 14,
        "javascriptWithScope" => 15,
        "int" => 16,
        "timestamp" => 17,
        "long" => 18,
        "decimal" => 19,
        "minKey" => -1,
        "maxKey" => 127,
        _ => return None,
    })
}

/// `$all: [a, b]` as the server reads it: `{field: {$eq: a}}` and `{field: {$eq: b}}`
/// (a regex element is a `$regex`, an `{$elemMatch}` element an `$elemMatch`), each
/// written by `push` as one predicate. `$all: []` matches nothing.
pub fn all(
    field: &[u8],
    v: Element<'_>,
    mut push: impl FnMut(&dyn Fn(&mut Vec<u8>)),
    elem_match: impl Fn(&mut Vec<u8>, Element<'_>),
) {
    let Some(items) = v.as_array() else {
        return push(&|o| single_bytes(o, field, |o| single(o, "$eq", |o| placeholder(o, v))));
    };
    let mut any = false;
    for e in element::elements(items) {
        any = true;
        let em = e.as_document().and_then(|d| element::find(d, "$elemMatch"));
        match (e.kind, em) {
            (0x0B, _) => push(&|o| single_bytes(o, field, |o| regex(o, e, None))),
            (_, Some(m)) => {
                push(&|o| single_bytes(o, field, |o| single(o, "$elemMatch", |o| elem_match(o, m))))
            }
            _ => push(&|o| single_bytes(o, field, |o| single(o, "$eq", |o| placeholder(o, e)))),
        }
    }
    if !any {
        push(&|o| single(o, "$alwaysFalse", |o| quoted(o, "?number")));
    }
}

/// `$geoWithin`, `$geoIntersects`, `$near`, ... : the structure and a GeoJSON
/// `type` kept, coordinates and distances shaped.
pub fn geo(out: &mut Vec<u8>, v: Element<'_>) {
    match v.as_document() {
        Some(d) => {
            let mut m = Obj::open(out);
            for e in element::elements(d) {
                let o = m.key_bytes(e.key);
                match (e.key, e.kind) {
                    // GeoJSON's own type names are kept; any other string is a value.
                    (b"type", 0x02) if e.as_str().is_some_and(|t| GEOJSON_TYPES.contains(&t)) => {
                        string(o, e.as_str().unwrap_or("?"))
                    }
                    (_, 0x03) => nested(o, |o| geo(o, e)),
                    _ => placeholder(o, e),
                }
            }
            m.close();
        }
        None => placeholder(out, v),
    }
}

/// The GeoJSON geometry types.
const GEOJSON_TYPES: [&str; 7] =
    ["Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon", "GeometryCollection"];

/// Whether an operator is a geo query (its value is shaped by [`geo`]).
pub fn is_geo(op: &[u8]) -> bool {
    matches!(op, b"$geoWithin" | b"$within" | b"$geoIntersects" | b"$near" | b"$nearSphere" | b"$geoNear")
}

/// `$text`: the server always writes its four options.
pub fn text(out: &mut Vec<u8>) {
    out.extend_from_slice(
        br#"{"$search":"?string","$language":"?string","$caseSensitive":"?bool","$diacriticSensitive":"?bool"}"#,
    );
}

/// `$sampleRate: r` is `{$expr: {$lt: [{$rand: {}}, r]}}` to the server, and a
/// constant `{$expr: "?bool"}` when r is 0 or 1.
pub fn sample_rate(out: &mut Vec<u8>, r: Element<'_>) {
    let constant = match r.kind {
        0x01 => r.value.try_into().is_ok_and(|b| matches!(f64::from_le_bytes(b), 0.0 | 1.0)),
        _ => matches!(r.as_i64(), Some(0 | 1)),
    };
    single(out, "$expr", |o| {
        if constant {
            return quoted(o, "?bool");
        }
        single(o, "$lt", |o| {
            array(o, [0, 1], |o, i| match i {
                0 => o.extend_from_slice(br#"{"$rand":{}}"#),
                _ => quoted(o, "?number"),
            })
        })
    });
}
