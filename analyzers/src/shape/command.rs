//! Which parts of each command make its shape. A command yields one shape per
//! distinct statement shape: a batch of ten identical updates is one shape with
//! ten statements; an insert of mixed documents is one shape per document shape.

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
use mongotap_wire::Command;

use crate::shape::{
    self, array, boolean, document_fields, expression, filter, pipeline, projection, single, sort,
    update_kind, Obj, ShapeJson,
};

/// Whether a command reads, writes, or does something else (handshake, admin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// find, aggregate, count, distinct, getMore.
    Read,
    /// insert, update, delete, findAndModify, bulkWrite, aggregate with $out/$merge.
    Write,
    /// Everything else: hello, ping, listIndexes, createIndexes, endSessions, ...
    Command,
}

/// One shape of a command and how many of its statements have it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementShape {
    /// The namespace (bulkWrite statements name their own).
    pub namespace: Option<String>,
    /// The normalised shape.
    pub shape: ShapeJson,
    /// Statements (or documents, for insert) with this shape in the command.
    pub statements: u64,
}

/// find's boolean options that are part of its shape (the server's find shape).
const FIND_OPTIONS: [&str; 7] =
    ["singleBatch", "allowDiskUse", "returnKey", "showRecordId", "tailable", "awaitData", "noCursorTimeout"];

/// The category of a command.
pub fn category(c: &Command<'_>) -> Category {
    match c.name {
        "find" | "count" | "distinct" | "getMore" => Category::Read,
        "insert" | "update" | "delete" | "findAndModify" | "findandmodify" | "bulkWrite" => Category::Write,
        "aggregate" => {
            let writes = c.body.get_array("pipeline").ok().is_some_and(|p| {
                p.into_iter().flatten().filter_map(|s| s.as_document()).any(|s| {
                    s.iter().next().and_then(|e| e.ok()).is_some_and(|(k, _)| k == "$out" || k == "$merge")
                })
            });
            if writes {
                Category::Write
            } else {
                Category::Read
            }
        }
        _ => Category::Command,
    }
}

/// The shapes of a command. getMore is not shaped here: the table attributes it to
/// the shape of the command that opened its cursor.
pub fn shapes(c: &Command<'_>) -> Vec<StatementShape> {
    let one = |write: &dyn Fn(&mut Obj<'_>)| {
        let shape = ShapeJson::build(|o| {
            let mut m = Obj::open(o);
            write(&mut m);
            m.close();
        });
        vec![StatementShape { namespace: None, shape, statements: 1 }]
    };
    let b = c.body;
    match c.name {
        "find" => {
            let [f, proj, let_, sort_, collation, hint, skip, limit, min, max] = pick(
                b,
                ["filter", "projection", "let", "sort", "collation", "hint", "skip", "limit", "min", "max"],
            );
            one(&|m| {
                put(m, "filter", doc(f), filter);
                put(m, "projection", doc(proj), projection);
                put(m, "let", let_, expression);
                put(m, "sort", sort_, sort);
                put(m, "collation", collation, shape::collation);
                put(m, "hint", hint, shape::hint);
                presence(m, "skip", skip);
                presence(m, "limit", limit);
                put(m, "min", doc(min), document_fields);
                put(m, "max", doc(max), document_fields);
                // Options the server's find shape keeps when given, false included.
                for e in element::elements(b).filter(|e| e.kind == 0x08) {
                    if FIND_OPTIONS.iter().any(|o| element::same(o.as_bytes(), e.key)) {
                        if let Some(v) = e.as_bool() {
                            boolean(m.key_bytes(e.key), v);
                        }
                    }
                }
            })
        }
        "aggregate" => {
            let [p, let_, collation, hint] = pick(b, ["pipeline", "let", "collation", "hint"]);
            one(&|m| {
                put(m, "pipeline", p.filter(|p| p.kind == 0x04), pipeline);
                put(m, "let", let_, expression);
                put(m, "collation", collation, shape::collation);
                put(m, "hint", hint, shape::hint);
            })
        }
        "count" => {
            let [q, collation, hint, skip, limit] = pick(b, ["query", "collation", "hint", "skip", "limit"]);
            one(&|m| {
                put(m, "query", doc(q), filter);
                put(m, "collation", collation, shape::collation);
                put(m, "hint", hint, shape::hint);
                presence(m, "skip", skip);
                presence(m, "limit", limit);
            })
        }
        "distinct" => {
            let [key, q, collation, hint] = pick(b, ["key", "query", "collation", "hint"]);
            one(&|m| {
                put(m, "key", key, shape::names);
                put(m, "query", doc(q), filter);
                put(m, "collation", collation, shape::collation);
                put(m, "hint", hint, shape::hint);
            })
        }
        "findAndModify" | "findandmodify" => {
            let [q, sort_, fields, remove, update, new, upsert] =
                pick(b, ["query", "sort", "fields", "remove", "update", "new", "upsert"]);
            one(&|m| {
                put(m, "query", doc(q), filter);
                put(m, "sort", sort_, sort);
                put(m, "fields", doc(fields), projection);
                flag(m, "remove", remove);
                put(m, "update", update, update_kind);
                flag(m, "new", new);
                flag(m, "upsert", upsert);
            })
        }
        "insert" => group(
            c.documents("documents")
                .into_iter()
                .map(|d| ShapeJson::build(|o| single(o, "document", |o| document_fields(o, d)))),
        ),
        "update" => group(
            c.documents("updates")
                .into_iter()
                .map(|d| ShapeJson::build(|o| update_statement(o, d, UPDATE_KEYS))),
        ),
        "delete" => group(c.documents("deletes").into_iter().map(|d| {
            let [q, limit, collation, hint] = pick(d, ["q", "limit", "collation", "hint"]);
            ShapeJson::build(|o| {
                let mut m = Obj::open(o);
                put(&mut m, "filter", doc(q), filter);
                let multi = !matches!(limit, Some(l) if l.kind != 0x01 && l.as_i64() == Some(1));
                boolean(m.key("multi"), multi);
                put(&mut m, "collation", collation, shape::collation);
                put(&mut m, "hint", hint, shape::hint);
                m.close();
            })
        })),
        "bulkWrite" => bulk_write(c),
        _ => one(&|_| {}),
    }
}

/// The names an update statement's parts go by: `update`'s and `bulkWrite`'s (the
/// memo hashes the same parts of an update).
pub(super) const UPDATE_KEYS: [&str; 7] = ["q", "u", "multi", "upsert", "arrayFilters", "collation", "hint"];
const BULK_UPDATE_KEYS: [&str; 7] =
    ["filter", "updateMods", "multi", "upsert", "arrayFilters", "collation", "hint"];

fn update_statement(out: &mut Vec<u8>, d: &RawDocument, keys: [&str; 7]) {
    let [q, u, multi, upsert, array_filters, collation, hint] = pick(d, keys);
    let mut m = Obj::open(out);
    put(&mut m, "filter", doc(q), filter);
    put(&mut m, "update", u, update_kind);
    flag(&mut m, "multi", multi);
    flag(&mut m, "upsert", upsert);
    if let Some(filters) = array_filters.and_then(|a| a.as_array()) {
        let items = element::elements(filters).filter_map(|f| f.as_document());
        array(m.key("arrayFilters"), items, filter);
    }
    put(&mut m, "collation", collation, shape::collation);
    put(&mut m, "hint", hint, shape::hint);
    m.close();
}

/// MongoDB 8.0 bulkWrite: `ops` name their namespace by index into `nsInfo`.
fn bulk_write(c: &Command<'_>) -> Vec<StatementShape> {
    let namespaces: Vec<String> =
        c.documents("nsInfo").iter().map(|d| d.get_str("ns").unwrap_or("?").to_owned()).collect();
    let (mut out, mut index) = (Vec::new(), Index::default());
    for op in c.documents("ops") {
        let Some(first) = element::elements(op).next() else { continue };
        let ns = match first.kind {
            0x10 | 0x12 => first.as_i64().and_then(|i| namespaces.get(usize::try_from(i).ok()?).cloned()),
            _ => None,
        };
        let kind = String::from_utf8_lossy(first.key);
        let shape = ShapeJson::build(|o| match kind.as_ref() {
            "insert" => single(o, "insert", |o| match op.get_document("document") {
                Ok(d) => document_fields(o, d),
                Err(_) => o.extend_from_slice(b"null"),
            }),
            "update" => single(o, "update", |o| update_statement(o, op, BULK_UPDATE_KEYS)),
            "delete" => single(o, "delete", |o| {
                let [f, multi, collation, hint] = pick(op, ["filter", "multi", "collation", "hint"]);
                let mut m = Obj::open(o);
                put(&mut m, "filter", doc(f), filter);
                boolean(m.key("multi"), multi.and_then(|v| v.as_bool()).unwrap_or(false));
                put(&mut m, "collation", collation, shape::collation);
                put(&mut m, "hint", hint, shape::hint);
                m.close();
            }),
            other => single(o, other, |o| o.extend_from_slice(b"{}")),
        });
        add(&mut out, &mut index, ns, shape);
    }
    out
}

/// Counts a statement under its shape, keeping first-seen order. A batch may hold
/// 100,000 statements of as many shapes: past a few shapes, `index` finds one in a
/// single lookup instead of a scan.
fn add(out: &mut Vec<StatementShape>, index: &mut Index, namespace: Option<String>, shape: ShapeJson) {
    const SCAN_UP_TO: usize = 16;
    if out.len() < SCAN_UP_TO {
        match out.iter_mut().find(|s| s.shape == shape && s.namespace == namespace) {
            Some(s) => s.statements += 1,
            None => out.push(StatementShape { namespace, shape, statements: 1 }),
        }
        if out.len() == SCAN_UP_TO {
            index.extend(out.iter().enumerate().map(|(i, s)| ((s.shape.clone(), s.namespace.clone()), i)));
        }
        return;
    }
    let next = out.len();
    match index.entry((shape, namespace)) {
        std::collections::hash_map::Entry::Occupied(e) => out[*e.get()].statements += 1,
        std::collections::hash_map::Entry::Vacant(e) => {
            let (shape, namespace) = e.key().clone();
            e.insert(next);
            out.push(StatementShape { namespace, shape, statements: 1 });
        }
    }
}

type Index = rustc_hash::FxHashMap<(ShapeJson, Option<String>), usize>;

/// Groups statement shapes, keeping first-seen order.
fn group(shapes: impl Iterator<Item = ShapeJson>) -> Vec<StatementShape> {
    let (mut out, mut index) = (Vec::new(), Index::default());
    for shape in shapes {
        add(&mut out, &mut index, None, shape);
    }
    if out.is_empty() {
        out.push(StatementShape {
            namespace: None,
            shape: ShapeJson::build(|o| o.extend_from_slice(b"{}")),
            statements: 0,
        });
    }
    out
}

/// Writes `key` with `write(value)` when the value is there.
fn put<T>(m: &mut Obj<'_>, key: &str, v: Option<T>, write: impl FnOnce(&mut Vec<u8>, T)) {
    if let Some(v) = v {
        write(m.key(key), v);
    }
}

/// The elements named `keys` in `d`, read in one pass (a `get` per key would rescan).
fn pick<'a, const N: usize>(d: &'a RawDocument, keys: [&str; N]) -> [Option<Element<'a>>; N] {
    let mut out = [None; N];
    for e in element::elements(d) {
        if let Some(i) = keys.iter().position(|x| element::same(x.as_bytes(), e.key)) {
            out[i] = Some(e);
        }
    }
    out
}

fn doc(v: Option<Element<'_>>) -> Option<&RawDocument> {
    v?.as_document()
}

/// Keeps only whether `skip`/`limit` is there; 0 means none (no skip, no limit).
fn presence(m: &mut Obj<'_>, key: &str, v: Option<Element<'_>>) {
    if v.is_some_and(|v| !zero(&v)) {
        boolean(m.key(key), true);
    }
}

/// Whether a number is zero (a `skip` or `limit` of 0 is none).
pub(crate) fn zero(v: &Element<'_>) -> bool {
    match v.kind {
        0x10 | 0x12 => v.as_i64() == Some(0),
        0x01 => v.value.try_into().is_ok_and(|b| f64::from_le_bytes(b) == 0.0),
        _ => false,
    }
}

/// Keeps a boolean option that is true.
fn flag(m: &mut Obj<'_>, key: &str, v: Option<Element<'_>>) {
    if v.and_then(|v| v.as_bool()) == Some(true) {
        boolean(m.key(key), true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, DocumentSequence, Frame, Message, MsgFlags, OpMsg, Section};
    use serde_json::json;

    fn shapes_of(
        body: bson::Document,
        seq: Option<(&str, Vec<bson::Document>)>,
    ) -> (Category, Vec<StatementShape>) {
        let mut sections = vec![Section::Body(Document::from_doc(&body))];
        if let Some((id, docs)) = seq {
            sections.push(Section::Sequence(DocumentSequence {
                identifier: id.into(),
                documents: docs.iter().map(Document::from_doc).collect(),
            }));
        }
        let bytes =
            OpMsg { flags: MsgFlags::default(), sections: sections.into(), checksum: None }.encode(1, 0);
        let m = Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap();
        let c = Command::from_message(&m).unwrap();
        (category(&c), shapes(&c))
    }

    #[test]
    fn find_keeps_sort_and_limit_presence() {
        let (cat, s) = shapes_of(
            doc! {"find": "orders", "filter": {"customerId": 7, "status": "open"}, "sort": {"createdAt": -1},
            "limit": 10, "skip": 0, "batchSize": 5, "$db": "shop"},
            None,
        );
        assert_eq!(cat, Category::Read);
        assert_eq!(
            s[0].shape.to_value(),
            json!({"filter": {"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]},
                   "sort": {"createdAt": -1}, "limit": true})
        );
    }

    #[test]
    fn updates_group_by_statement_shape_from_sequences_or_body() {
        let ups = vec![
            doc! {"q": {"_id": 1}, "u": {"$set": {"a": 1}}},
            doc! {"q": {"_id": 2}, "u": {"$set": {"a": 5}}},
            doc! {"q": {"_id": 3}, "u": {"_id": 3, "a": 1}},
        ];
        let (cat, s) = shapes_of(doc! {"update": "c", "$db": "t"}, Some(("updates", ups.clone())));
        assert_eq!(cat, Category::Write);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].statements, 2);
        assert_eq!(
            s[0].shape.to_value(),
            json!({"filter": {"_id": {"$eq": "?number"}}, "update": {"operators": {"$set": ["a"]}}})
        );
        assert_eq!(
            s[1].shape.to_value()["update"],
            json!({"replacement": {"_id": "?number", "a": "?number"}})
        );
        let (_, in_body) = shapes_of(doc! {"update": "c", "updates": ups, "$db": "t"}, None);
        assert_eq!(in_body, s, "body arrays and sequences shape the same");
    }

    #[test]
    fn inserts_and_deletes() {
        let (_, s) = shapes_of(
            doc! {"insert": "c", "$db": "t"},
            Some(("documents", vec![doc! {"a": 1, "b": "x"}, doc! {"a": 2, "b": "y"}, doc! {"a": 3}])),
        );
        assert_eq!((s.len(), s[0].statements, s[1].statements), (2, 2, 1));
        assert_eq!(s[0].shape.to_value(), json!({"document": {"a": "?number", "b": "?string"}}));
        let (_, d) = shapes_of(
            doc! {"delete": "c", "deletes": [{"q": {"a": {"$lt": 3}}, "limit": 0}], "$db": "t"},
            None,
        );
        assert_eq!(d[0].shape.to_value(), json!({"filter": {"a": {"$lt": "?number"}}, "multi": true}));
    }

    #[test]
    fn aggregate_with_out_is_a_write_and_other_commands_have_empty_shapes() {
        let (cat, _) =
            shapes_of(doc! {"aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "d"}], "$db": "t"}, None);
        assert_eq!(cat, Category::Write);
        let (cat, s) = shapes_of(doc! {"listIndexes": "c", "$db": "t"}, None);
        assert_eq!((cat, s[0].shape.to_value()), (Category::Command, json!({})));
    }

    #[test]
    fn find_and_modify_and_bulk_write() {
        // The legacy spelling is the same command, a write as well.
        let (cat, _) =
            shapes_of(doc! {"findandmodify": "c", "query": {"_id": 1}, "remove": true, "$db": "t"}, None);
        assert_eq!(cat, Category::Write);
        let (_, s) = shapes_of(
            doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"n": 1}}, "new": true, "$db": "t"},
            None,
        );
        assert_eq!(
            s[0].shape.to_value(),
            json!({"query": {"_id": {"$eq": "?number"}}, "update": {"operators": {"$inc": ["n"]}}, "new": true})
        );
        let (cat, b) = shapes_of(
            doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {"a": 1}}, {"delete": 1, "filter": {"x": 1}, "multi": false}],
            "nsInfo": [{"ns": "t.a"}, {"ns": "t.b"}], "$db": "admin"},
            None,
        );
        assert_eq!(cat, Category::Write);
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].namespace.as_deref(), Some("t.b"));
    }
}
