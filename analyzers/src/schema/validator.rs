//! A `$jsonSchema` validator inferred from the documents a collection was written
//! with, in the guides' form ("Validate structure": `required`, `bsonType`,
//! `maxItems`, applied with `validationLevel: "moderate"` so that documents already
//! stored are not rejected on their next update).
//!
//! The rules, each chosen so that the validator accepts what the application writes
//! today and stops what it should not:
//! - `bsonType` is the field's main type family (int, long and double are `number`),
//!   and `null` when nulls were seen; a rarer type (a drift, see `schema_drift`) is
//!   left out, so the validator stops new ones;
//! - `required` lists the fields every document of the epoch carried (`_id` aside);
//!   inside arrays nothing is required (presence is counted per document, not per
//!   element);
//! - `maxItems` is a round bound at least twice the largest array seen: a guard
//!   against unbounded growth, not a description of today's data;
//! - with a version field (the schema versioning pattern), each version's own
//!   required fields go in a `oneOf` branch keyed by its value.
//!
//! - `enum` lists a string field's values when it has a few, each written more than
//!   once (see [`super::enums`]), and only with `--show-values`: values are
//!   literals, which reports otherwise never hold (the schemas section then says how
//!   many values the field has).

use serde_json::{json, Map, Value};

use super::{Collection, Field};

/// The `$jsonSchema` type alias of a BSON type byte.
pub fn alias(kind: u8) -> &'static str {
    match kind {
        0x01 => "double",
        0x02 => "string",
        0x03 => "object",
        0x04 => "array",
        0x05 => "binData",
        0x06 => "undefined",
        0x07 => "objectId",
        0x08 => "bool",
        0x09 => "date",
        0x0A => "null",
        0x0B => "regex",
        0x0C => "dbPointer",
        0x0D => "javascript",
        0x0E => "symbol",
        0x10 => "int",
        0x11 => "timestamp",
        0x12 => "long",
        0x13 => "decimal",
        0x7F => "maxKey",
        0xFF => "minKey",
        _ => "unknown",
    }
}

/// The family a type belongs to when types are compared: numbers are one, null
/// (and undefined) none.
pub fn family(kind: u8) -> Option<&'static str> {
    match kind {
        0x01 | 0x10 | 0x12 => Some("number"),
        0x06 | 0x0A => None,
        k => Some(alias(k)),
    }
}

/// A field's type families with their value counts, most values first.
pub fn families(f: &Field) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for t in &f.types {
        let Some(name) = family(t.kind) else { continue };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += t.count,
            None => out.push((name, t.count)),
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    out
}

/// A type family with at most this share of a field's values is rare (a drift the
/// validator leaves out); more, and the field holds several types on purpose.
pub const RARE: f64 = 0.2;

/// The smallest of 10, 20, 50, 100, 200, 500, 1000... at least twice `max`.
fn round_bound(max: u64) -> u64 {
    let want = max.saturating_mul(2).max(10);
    let mut base = 10u64;
    loop {
        for m in [1, 2, 5] {
            if base.saturating_mul(m) >= want {
                return base * m;
            }
        }
        base = base.saturating_mul(10);
    }
}

/// The number of values of an enum field (`f` holds strings, and nulls at most),
/// judged on at least `min_written` written values.
pub fn enum_size(f: &Field, min_written: u64) -> Option<usize> {
    let only_strings = families(f).iter().all(|(name, _)| *name == "string");
    f.strings.as_ref().filter(|_| only_strings && f.path != "_id")?.enum_size(min_written)
}

/// The values of an enum field, sorted, when they are known (`--show-values`).
pub fn enum_values(f: &Field, min_written: u64) -> Option<Vec<&str>> {
    enum_size(f, min_written)?;
    f.strings.as_ref()?.texts()
}

/// The schema of one field, without its sub-fields.
fn field_schema(f: &Field, enum_min: u64) -> Option<Map<String, Value>> {
    let fams = families(f);
    let main = fams.first()?.0;
    let total: u64 = fams.iter().map(|(_, n)| n).sum();
    let mut types: Vec<Value> =
        fams.iter().filter(|(_, n)| *n as f64 > RARE * total as f64).map(|(name, _)| json!(name)).collect();
    if types.is_empty() {
        types.push(json!(main));
    }
    if f.types.iter().any(|t| t.kind == 0x0A) {
        types.push(json!("null"));
    }
    let mut m = Map::new();
    m.insert("bsonType".into(), if types.len() == 1 { types.remove(0) } else { Value::Array(types) });
    if let Some(values) = enum_values(f, enum_min) {
        let mut list: Vec<Value> = values.into_iter().map(|v| json!(v)).collect();
        if f.types.iter().any(|t| t.kind == 0x0A) {
            list.push(Value::Null);
        }
        m.insert("enum".into(), Value::Array(list));
    }
    // An array updates push to has no bound today's lengths could set.
    if main == "array" && !f.pushed {
        if let Some((_, max, _, _)) = f.array_lengths {
            m.insert("maxItems".into(), json!(round_bound(max)));
        }
    }
    Some(m)
}

/// Builds `properties` (and `required`) for the fields directly under `prefix`.
fn object(
    c: &Collection,
    prefix: &str,
    parent_present: u64,
    in_array: bool,
    depth: usize,
    enum_min: u64,
) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for f in c.fields.iter().filter(|f| f.present > 0) {
        let Some(name) = child_name(&f.path, prefix) else { continue };
        // The version field's values are its oneOf branches' own.
        let versioned = c.versions.field == Some(f.path.as_str());
        let Some(mut schema) = field_schema(f, if versioned { u64::MAX } else { enum_min }) else { continue };
        let main = schema.get("bsonType").cloned();
        let is = |t: &str| main.as_ref().is_some_and(|m| m == t || m.as_array().is_some_and(|a| a[0] == t));
        if depth < super::MAX_DEPTH {
            if is("object") {
                let inner = object(c, &f.path, f.present, in_array, depth + 1, enum_min);
                schema.extend(inner);
            } else if is("array") {
                let inner = object(c, &f.path, f.present, true, depth + 1, enum_min);
                if inner.contains_key("properties") {
                    let mut items = Map::new();
                    items.insert("bsonType".into(), json!("object"));
                    items.extend(inner);
                    schema.insert("items".into(), Value::Object(items));
                }
            }
        }
        if !in_array && f.present == parent_present && f.path != "_id" && !f.removed {
            required.push(json!(name));
        }
        properties.insert(name.to_owned(), Value::Object(schema));
    }
    let mut out = Map::new();
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
    if !properties.is_empty() {
        out.insert("properties".into(), Value::Object(properties));
    }
    out
}

/// `path`'s last segment when it sits directly under `prefix` ("" for the top).
fn child_name<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    let rest = if prefix.is_empty() { path } else { path.strip_prefix(prefix)?.strip_prefix('.')? };
    (!rest.is_empty() && !rest.contains('.')).then_some(rest)
}

/// The validator for `c`, if enough of its documents were written in this epoch.
pub fn infer(c: &Collection, min_written: u64, version_min_documents: u64) -> Option<Value> {
    if c.written < min_written.max(1) || c.epoch_documents == 0 {
        return None;
    }
    let mut schema = Map::new();
    schema.insert("bsonType".into(), json!("object"));
    let mut top = object(c, "", c.epoch_documents, false, 0, min_written);
    // A field updates increment is a counter (a lock's version), and values past the
    // bound would have no branch: no oneOf then.
    let counter = |f: &str| c.field(f).is_some_and(|x| x.incremented);
    let versions = c
        .versions
        .field
        .filter(|f| c.versions.partitions(version_min_documents) && c.versions.refused == 0 && !counter(f));
    if let Some(field) = versions {
        // Fields every document of one version carries (and not every document) are
        // required in its branch.
        let mut branches = Vec::new();
        for v in &c.versions.values {
            let required: Vec<&str> = std::iter::once(field)
                .chain(
                    c.fields
                        .iter()
                        .enumerate()
                        .filter(|(i, f)| {
                            !f.path.contains('.')
                                && f.path != "_id"
                                && f.present < c.epoch_documents
                                && v.share(*i) >= 1.0
                        })
                        .map(|(_, f)| f.path.as_str()),
                )
                .collect();
            branches.push(json!({
                "properties": {field: {"enum": [v.value.json()]}},
                "required": required,
            }));
        }
        let versioned: u64 = c.versions.values.iter().map(|v| v.documents).sum();
        if versioned < c.epoch_documents {
            branches.push(json!({"not": {"required": [field]}}));
        }
        schema.insert("oneOf".into(), Value::Array(branches));
    }
    schema.append(&mut top);
    Some(json!({"$jsonSchema": Value::Object(schema)}))
}

/// The command that applies `validator` to `namespace`'s collection, as the
/// guides write it for the shell.
pub fn command(namespace: &str, validator: &Value) -> String {
    let coll = namespace.split_once('.').map_or(namespace, |(_, c)| c);
    let mut body = String::new();
    shell(validator, 1, &mut body);
    format!(
        "db.runCommand({{\n  collMod: {},\n  validator: {body},\n  validationLevel: \"moderate\"\n}})",
        json!(coll)
    )
}

/// Shell syntax: names unquoted where they can be, and an object or array on one
/// line when it fits.
fn shell(v: &Value, depth: usize, out: &mut String) {
    const WIDTH: usize = 72;
    let key = |k: &str| {
        let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
        if plain {
            k.to_owned()
        } else {
            json!(k).to_string()
        }
    };
    let line = flat(v, &key);
    let pad = "  ".repeat(depth);
    match v {
        Value::Object(m) if line.len() + pad.len() > WIDTH => {
            out.push_str("{\n");
            for (i, (k, x)) in m.iter().enumerate() {
                out.push_str(&format!("{pad}  {}: ", key(k)));
                shell(x, depth + 1, out);
                out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
            }
            out.push_str(&format!("{pad}}}"));
        }
        Value::Array(a) if line.len() + pad.len() > WIDTH => {
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                out.push_str(&format!("{pad}  "));
                shell(x, depth + 1, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            out.push_str(&format!("{pad}]"));
        }
        _ => out.push_str(&line),
    }
}

/// `v` on one line, names as `key` writes them.
fn flat(v: &Value, key: &dyn Fn(&str) -> String) -> String {
    match v {
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Object(m) => {
            let parts: Vec<String> = m.iter().map(|(k, x)| format!("{}: {}", key(k), flat(x, key))).collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(|x| flat(x, key)).collect::<Vec<_>>().join(", ")),
        x => x.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn written(docs: Vec<bson::Document>) -> Collection {
        let mut c = Collection::default();
        for d in docs {
            c.offer(&RawDocumentBuf::try_from(&d).unwrap(), Some(1));
        }
        c
    }

    #[test]
    fn required_types_nested_objects_and_array_bounds() {
        let docs = (0..60)
            .map(|i| {
                let mut d = doc! {"_id": i, "customer": {"name": "n", "tier": i % 3}, "total": if i % 2 == 0 { bson::Bson::Int32(3) } else { bson::Bson::Double(2.5) },
                    "lines": (0..(i % 7)).map(|_| doc! {"sku": "s", "qty": 1}).collect::<Vec<_>>()};
                if i % 4 == 0 {
                    d.insert("note", bson::Bson::Null);
                } else {
                    d.insert("note", "x");
                }
                if i == 0 {
                    d.insert("coupon", "c");
                }
                d
            })
            .collect();
        let c = written(docs);
        let v = infer(&c, 50, 10).unwrap();
        let s = &v["$jsonSchema"];
        assert_eq!(s["bsonType"], "object");
        assert_eq!(
            s["required"],
            json!(["customer", "total", "lines", "note"]),
            "coupon is in one document, _id is implied"
        );
        assert_eq!(s["properties"]["total"]["bsonType"], "number", "int and double are one family");
        assert_eq!(s["properties"]["note"]["bsonType"], json!(["string", "null"]));
        assert_eq!(s["properties"]["customer"]["required"], json!(["name", "tier"]));
        assert_eq!(s["properties"]["lines"]["maxItems"], 20, "twice the largest (6), rounded up");
        assert_eq!(s["properties"]["lines"]["items"]["properties"]["qty"]["bsonType"], "number");
        assert!(
            s["properties"]["lines"]["items"].get("required").is_none(),
            "presence is per document, not per element"
        );
        assert!(infer(&c, 61, 10).is_none(), "too few written");
        let cmd = command("shop.orders", &v);
        assert!(
            cmd.starts_with("db.runCommand({\n  collMod: \"orders\",\n  validator: {\n    $jsonSchema: {\n"),
            "{cmd}"
        );
        assert!(cmd.contains("\n        total: { bsonType: \"number\" },\n"), "{cmd}");
        assert!(cmd.ends_with("validationLevel: \"moderate\"\n})"));
    }

    #[test]
    fn a_status_of_few_values_gets_an_enum_only_when_values_are_shown() {
        let docs = |c: &mut Collection| {
            for i in 0..60 {
                let status =
                    if i % 10 == 0 { bson::Bson::Null } else { ["paid", "placed", "sent"][i % 3].into() };
                let tier = ["a", "b"][i % 2];
                let d = doc! {"status": status, "name": format!("n{i}"), "tier": tier};
                c.offer(&RawDocumentBuf::try_from(&d).unwrap(), Some(1));
            }
        };
        let mut shown = Collection { show_values: true, ..Collection::default() };
        docs(&mut shown);
        let s = &infer(&shown, 50, 10).unwrap()["$jsonSchema"]["properties"];
        assert_eq!(s["status"]["enum"], json!(["paid", "placed", "sent", null]), "nulls were written too");
        assert_eq!(s["tier"]["enum"], json!(["a", "b"]));
        assert!(s["name"].get("enum").is_none(), "a name has a value per document");
        // A status an update moves on to joins the values; a stored one the writes never
        // showed opens the field.
        let set = RawDocumentBuf::try_from(&doc! {"tier": "c"}).unwrap();
        shown.updated(&mongotap_wire::element::elements(&set).next().unwrap(), b"$set");
        shown.updated(&mongotap_wire::element::elements(&set).next().unwrap(), b"$set");
        let s = &infer(&shown, 50, 10).unwrap()["$jsonSchema"]["properties"];
        assert_eq!(s["tier"]["enum"], json!(["a", "b", "c"]));
        shown.offer(&RawDocumentBuf::try_from(&doc! {"status": "lost"}).unwrap(), None);
        let s = &infer(&shown, 50, 10).unwrap()["$jsonSchema"]["properties"];
        assert!(s["status"].get("enum").is_none(), "a stored value the writes never held");
        let mut hidden = Collection::default();
        docs(&mut hidden);
        let s = &infer(&hidden, 50, 10).unwrap()["$jsonSchema"]["properties"];
        assert!(s["status"].get("enum").is_none(), "no literal without --show-values");
        assert_eq!(enum_size(hidden.field("status").unwrap(), 50), Some(3));
    }

    #[test]
    fn a_rarer_type_is_left_out_and_versions_get_branches() {
        let mut docs: Vec<bson::Document> = (0..50).map(|i| doc! {"price": i}).collect();
        docs.extend((0..3).map(|_| doc! {"price": "12"}));
        let c = written(docs);
        assert_eq!(infer(&c, 50, 10).unwrap()["$jsonSchema"]["properties"]["price"]["bsonType"], "number");

        let mut docs: Vec<bson::Document> =
            (0..30).map(|_| doc! {"schemaVersion": 1, "name": "a", "phone": "p"}).collect();
        docs.extend((0..30).map(|_| doc! {"schemaVersion": 2, "name": "a", "contact": {"phone": "p"}}));
        let c = written(docs);
        let s = &infer(&c, 50, 10).unwrap()["$jsonSchema"];
        assert_eq!(s["required"], json!(["schemaVersion", "name"]));
        assert_eq!(
            s["oneOf"],
            json!([
                {"properties": {"schemaVersion": {"enum": [1]}}, "required": ["schemaVersion", "phone"]},
                {"properties": {"schemaVersion": {"enum": [2]}}, "required": ["schemaVersion", "contact"]},
            ])
        );
    }

    #[test]
    fn what_updates_grow_or_remove_is_neither_bounded_nor_required_and_common_types_stay() {
        let mut docs: Vec<bson::Document> =
            (0..60).map(|i| doc! {"items": [], "resetToken": "t", "value": if i % 3 == 0 { bson::Bson::String("s".into()) } else { bson::Bson::Int32(i) }}).collect();
        docs.push(doc! {"items": [], "resetToken": "t", "value": 1});
        let mut c = written(docs);
        let ops = RawDocumentBuf::try_from(&doc! {"items": 1, "resetToken": ""}).unwrap();
        let mut paths = mongotap_wire::element::elements(&ops);
        c.updated(&paths.next().unwrap(), b"$push");
        c.updated(&paths.next().unwrap(), b"$unset");
        let s = &infer(&c, 50, 10).unwrap()["$jsonSchema"];
        assert!(s["properties"]["items"].get("maxItems").is_none(), "carts grow by $push");
        assert_eq!(s["required"], json!(["items", "value"]), "resetToken is $unset later");
        assert_eq!(
            s["properties"]["value"]["bsonType"],
            json!(["number", "string"]),
            "a third are strings: polymorphic, kept"
        );
    }

    #[test]
    fn bounds_are_round() {
        assert_eq!([0, 4, 5, 6, 24, 26, 400, 501].map(round_bound), [10, 10, 10, 20, 50, 100, 1000, 2000]);
    }
}
