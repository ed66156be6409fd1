//! Which parts of each command make its shape. A command yields one shape per
//! distinct statement shape: a batch of ten identical updates is one shape with
//! ten statements; an insert of mixed documents is one shape per document shape.

use bson::{RawBsonRef, RawDocument};
use mongotap_wire::Command;
use serde_json::{json, Map, Value};

use crate::shape::{document_fields, expression, filter, literal, pipeline, projection, update_kind};

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
    pub shape: Value,
    /// Statements (or documents, for insert) with this shape in the command.
    pub statements: u64,
}

/// The category of a command.
pub fn category(c: &Command<'_>) -> Category {
    match c.name {
        "find" | "count" | "distinct" | "getMore" => Category::Read,
        "insert" | "update" | "delete" | "findAndModify" | "bulkWrite" => Category::Write,
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
    let one = |shape: Value| vec![StatementShape { namespace: None, shape, statements: 1 }];
    let b = c.body;
    match c.name {
        "find" => {
            let mut m = Map::new();
            put(&mut m, "filter", b.get_document("filter").ok().map(filter));
            put(&mut m, "projection", b.get_document("projection").ok().map(projection));
            put(&mut m, "let", b.get_document("let").ok().map(|d| expression(RawBsonRef::Document(d))));
            keep_literal(&mut m, b, &["sort", "collation", "hint"]);
            keep_presence(&mut m, b, &["skip", "limit"]);
            if b.get_bool("singleBatch").unwrap_or(false) {
                m.insert("singleBatch".into(), json!(true));
            }
            one(Value::Object(m))
        }
        "aggregate" => {
            let mut m = Map::new();
            put(&mut m, "pipeline", b.get_array("pipeline").ok().map(pipeline));
            put(&mut m, "let", b.get_document("let").ok().map(|d| expression(RawBsonRef::Document(d))));
            keep_literal(&mut m, b, &["collation", "hint"]);
            one(Value::Object(m))
        }
        "count" => {
            let mut m = Map::new();
            put(&mut m, "query", b.get_document("query").ok().map(filter));
            keep_literal(&mut m, b, &["collation", "hint"]);
            keep_presence(&mut m, b, &["skip", "limit"]);
            one(Value::Object(m))
        }
        "distinct" => {
            let mut m = Map::new();
            keep_literal(&mut m, b, &["key"]);
            put(&mut m, "query", b.get_document("query").ok().map(filter));
            keep_literal(&mut m, b, &["collation", "hint"]);
            one(Value::Object(m))
        }
        "findAndModify" | "findandmodify" => {
            let mut m = Map::new();
            put(&mut m, "query", b.get_document("query").ok().map(filter));
            keep_literal(&mut m, b, &["sort"]);
            put(&mut m, "fields", b.get_document("fields").ok().map(projection));
            if b.get_bool("remove").unwrap_or(false) {
                m.insert("remove".into(), json!(true));
            }
            put(&mut m, "update", b.get("update").ok().flatten().map(update_kind));
            for flag in ["new", "upsert"] {
                if b.get_bool(flag).unwrap_or(false) {
                    m.insert(flag.into(), json!(true));
                }
            }
            one(Value::Object(m))
        }
        "insert" => {
            group(c.documents("documents").into_iter().map(|d| json!({"document": document_fields(d)})))
        }
        "update" => group(c.documents("updates").into_iter().map(update_statement)),
        "delete" => group(c.documents("deletes").into_iter().map(|d| {
            let mut m = Map::new();
            put(&mut m, "filter", d.get_document("q").ok().map(filter));
            m.insert(
                "multi".into(),
                json!(!matches!(d.get("limit"), Ok(Some(RawBsonRef::Int32(1) | RawBsonRef::Int64(1))))),
            );
            keep_literal(&mut m, d, &["collation", "hint"]);
            Value::Object(m)
        })),
        "bulkWrite" => bulk_write(c),
        _ => one(json!({})),
    }
}

fn update_statement(d: &RawDocument) -> Value {
    let mut m = Map::new();
    put(&mut m, "filter", d.get_document("q").ok().map(filter));
    put(&mut m, "update", d.get("u").ok().flatten().map(update_kind));
    for flag in ["multi", "upsert"] {
        if d.get_bool(flag).unwrap_or(false) {
            m.insert(flag.into(), json!(true));
        }
    }
    if let Ok(filters) = d.get_array("arrayFilters") {
        m.insert(
            "arrayFilters".into(),
            Value::Array(filters.into_iter().flatten().filter_map(|f| f.as_document()).map(filter).collect()),
        );
    }
    keep_literal(&mut m, d, &["collation", "hint"]);
    Value::Object(m)
}

/// MongoDB 8.0 bulkWrite: `ops` name their namespace by index into `nsInfo`.
fn bulk_write(c: &Command<'_>) -> Vec<StatementShape> {
    let namespaces: Vec<String> =
        c.documents("nsInfo").iter().map(|d| d.get_str("ns").unwrap_or("?").to_owned()).collect();
    let mut out: Vec<StatementShape> = Vec::new();
    for op in c.documents("ops") {
        let Some(Ok((kind, idx))) = op.iter().next() else { continue };
        let ns = match idx {
            RawBsonRef::Int32(i) => namespaces.get(i as usize).cloned(),
            RawBsonRef::Int64(i) => namespaces.get(i as usize).cloned(),
            _ => None,
        };
        let shape = match kind.as_str() {
            "insert" => json!({"insert": op.get_document("document").ok().map(document_fields)}),
            "update" => json!({"update": update_statement(op)}),
            "delete" => {
                let mut m = Map::new();
                put(&mut m, "filter", op.get_document("filter").ok().map(filter));
                m.insert("multi".into(), json!(op.get_bool("multi").unwrap_or(false)));
                json!({"delete": m})
            }
            other => json!({ other: {} }),
        };
        match out.iter_mut().find(|s| s.shape == shape && s.namespace == ns) {
            Some(s) => s.statements += 1,
            None => out.push(StatementShape { namespace: ns, shape, statements: 1 }),
        }
    }
    out
}

/// Groups statement shapes, keeping first-seen order.
fn group(shapes: impl Iterator<Item = Value>) -> Vec<StatementShape> {
    let mut out: Vec<StatementShape> = Vec::new();
    for shape in shapes {
        match out.iter_mut().find(|s| s.shape == shape) {
            Some(s) => s.statements += 1,
            None => out.push(StatementShape { namespace: None, shape, statements: 1 }),
        }
    }
    if out.is_empty() {
        out.push(StatementShape { namespace: None, shape: json!({}), statements: 0 });
    }
    out
}

fn put(m: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(key.to_owned(), v);
    }
}

fn keep_literal(m: &mut Map<String, Value>, d: &RawDocument, keys: &[&str]) {
    for k in keys {
        if let Ok(Some(v)) = d.get(k) {
            m.insert((*k).to_owned(), literal(v));
        }
    }
}

fn keep_presence(m: &mut Map<String, Value>, d: &RawDocument, keys: &[&str]) {
    for k in keys {
        if let Ok(Some(v)) = d.get(k) {
            // limit: 0 means no limit; skip: 0 skips nothing.
            let zero = matches!(v, RawBsonRef::Int32(0) | RawBsonRef::Int64(0)) || v.as_f64() == Some(0.0);
            if !zero {
                m.insert((*k).to_owned(), json!(true));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, DocumentSequence, Frame, Message, MsgFlags, OpMsg, Section};

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
        let bytes = OpMsg { flags: MsgFlags::default(), sections, checksum: None }.encode(1, 0);
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
            s[0].shape,
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
            s[0].shape,
            json!({"filter": {"_id": {"$eq": "?number"}}, "update": {"operators": {"$set": ["a"]}}})
        );
        assert_eq!(s[1].shape["update"], json!({"replacement": {"_id": "?number", "a": "?number"}}));
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
        assert_eq!(s[0].shape, json!({"document": {"a": "?number", "b": "?string"}}));
        let (_, d) = shapes_of(
            doc! {"delete": "c", "deletes": [{"q": {"a": {"$lt": 3}}, "limit": 0}], "$db": "t"},
            None,
        );
        assert_eq!(d[0].shape, json!({"filter": {"a": {"$lt": "?number"}}, "multi": true}));
    }

    #[test]
    fn aggregate_with_out_is_a_write_and_other_commands_have_empty_shapes() {
        let (cat, _) =
            shapes_of(doc! {"aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "d"}], "$db": "t"}, None);
        assert_eq!(cat, Category::Write);
        let (cat, s) = shapes_of(doc! {"listIndexes": "c", "$db": "t"}, None);
        assert_eq!((cat, &s[0].shape), (Category::Command, &json!({})));
    }

    #[test]
    fn find_and_modify_and_bulk_write() {
        let (_, s) = shapes_of(
            doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"n": 1}}, "new": true, "$db": "t"},
            None,
        );
        assert_eq!(
            s[0].shape,
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
