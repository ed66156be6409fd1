//! The writer of the placeholder language: compact JSON text built piece by piece,
//! with literals turned into type placeholders. Everything that writes a shape
//! ([`super`], [`super::operators`], [`super::command`]) writes through these.

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

    /// The shape as a JSON value, for reports. (Shapes are nested at most
    /// [`MAX_DEPTH`] levels, within what the JSON reader accepts; should one not
    /// read back, it is reported as such rather than stop the analysis.)
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.0).unwrap_or_else(|_| Value::String("?unreadable".into()))
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
pub(crate) fn bytes_string(out: &mut Vec<u8>, b: &[u8]) {
    if b.iter().all(|&c| (0x20..0x80).contains(&c) && c != b'"' && c != b'\\') {
        out.push(b'"');
        out.extend_from_slice(b);
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, &String::from_utf8_lossy(b)).expect("writing to memory cannot fail");
    }
}

thread_local! {
    /// How deep the shape being written is nested now.
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Nesting past this is written as one `"?object"`: a hostile command nested
/// thousands of levels deep must not exhaust the analysis thread's stack (the
/// server itself refuses documents nested more than 180 levels; real queries
/// rarely pass ten).
pub const MAX_DEPTH: u32 = 32;

/// Runs `write` one level deeper, or writes `"?object"` past [`MAX_DEPTH`].
pub fn nested(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    struct Level(u32);
    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(self.0));
        }
    }
    let depth = DEPTH.with(|d| d.get());
    if depth >= MAX_DEPTH {
        return quoted(out, "?object");
    }
    DEPTH.with(|d| d.set(depth + 1));
    let _back = Level(depth);
    write(out);
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

    /// Writes a key given as bytes (a BSON key); the caller writes its value.
    pub fn key_bytes(&mut self, k: &[u8]) -> &mut Vec<u8> {
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

/// `{"key":<value>}` with a key given as bytes.
pub fn single_bytes(out: &mut Vec<u8>, key: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
    let mut o = Obj::open(out);
    value(o.key_bytes(key));
    o.close();
}

/// The elements of an array (or document) element's value, if it is one.
pub(crate) fn items<'a>(e: &Element<'a>) -> impl Iterator<Item = Element<'a>> {
    element::elements_in(e.as_array().or_else(|| e.as_document()))
}

/// The placeholder for one literal.
pub fn placeholder(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x04 => array_placeholder(out, v),
        kind => quoted(out, type_placeholder(kind)),
    }
}

/// A string that needs no escaping (placeholders are ASCII without quotes).
pub fn quoted(out: &mut Vec<u8>, s: &str) {
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
        0x0D => "?javascript",
        0x0F => "?javascriptWithScope",
        // The server reads a symbol as the string it is.
        0x0E => "?string",
        0x11 => "?timestamp",
        0xFF => "?minKey",
        0x7F => "?maxKey",
        _ => "?unknown",
    }
}

/// `?array<?T>` when every element has BSON type T, `?array<>` when mixed, `"[]"`
/// when empty. Types are compared as BSON types, so int and double are mixed.
fn array_placeholder(out: &mut Vec<u8>, a: Element<'_>) {
    array_of(out, a, |k| k)
}

/// An `$in` list: as [`array_placeholder`], with types compared as the server's
/// `$in` keeps them (one per canonical type: the numbers are one, as are strings
/// and symbols).
pub fn in_placeholder(out: &mut Vec<u8>, v: Element<'_>) {
    match v.kind {
        0x04 => array_of(out, v, |k| match k {
            0x01 | 0x10 | 0x12 | 0x13 => 0x01,
            0x0E => 0x02,
            k => k,
        }),
        _ => placeholder(out, v),
    }
}

fn array_of(out: &mut Vec<u8>, a: Element<'_>, canonical: impl Fn(u8) -> u8) {
    let mut kind: Option<u8> = None;
    let mut mixed = false;
    for v in items(&a) {
        let t = canonical(v.kind);
        match kind {
            None => kind = Some(t),
            Some(k) if k != t => mixed = true,
            _ => {}
        }
    }
    match (kind, mixed) {
        (None, _) => quoted(out, "[]"),
        (Some(_), true) => quoted(out, "?array<>"),
        (Some(t), false) => {
            out.extend_from_slice(b"\"?array<");
            out.extend_from_slice(type_placeholder(t).as_bytes());
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
        0x02 => bytes_string(out, v.string_bytes().unwrap_or_default()),
        0x08 => boolean(out, v.as_bool() == Some(true)),
        0x0A => out.extend_from_slice(b"null"),
        0x03 => object(out, v.as_document(), literal),
        0x04 => nested(out, |out| array(out, items(&v), literal)),
        _ => placeholder(out, v),
    }
}

/// `true` or `false`.
pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// An object with `d`'s keys and each value written by `value`.
pub(crate) fn object<'a>(
    out: &mut Vec<u8>,
    d: Option<&'a RawDocument>,
    value: impl Fn(&mut Vec<u8>, Element<'a>),
) {
    nested(out, |out| {
        let mut o = Obj::open(out);
        for e in element::elements_in(d) {
            value(o.key_bytes(e.key), e);
        }
        o.close();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for s in ["orders", "customer_id", "a \"quoted\" key", "back\\slash", "tab\there", "é", "ctl\u{1}"] {
            let mut out = Vec::new();
            bytes_string(&mut out, s.as_bytes());
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }
}
