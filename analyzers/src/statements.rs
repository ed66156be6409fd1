//! The writes a command carries, statement by statement, in one form for every
//! detector that looks at writes: `update` (its `updates`, from the body or a
//! document sequence), `findAndModify`, and MongoDB 8.0's `bulkWrite`.

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
use mongotap_wire::{Command, CommandReply};

/// What an update statement does to the documents it matches.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// A whole new document (`replace_one`, `findOneAndReplace`, an ODM's full save).
    Replacement(&'a RawDocument),
    /// Update operators (`{$set: ..., $push: ...}`).
    Operators(&'a RawDocument),
    /// An aggregation pipeline.
    Pipeline,
}

/// One update statement.
#[derive(Debug, Clone, Copy)]
pub struct Update<'a> {
    /// Its namespace (bulkWrite statements name their own).
    pub namespace: Option<&'a str>,
    /// Which documents it matches.
    pub filter: Option<&'a RawDocument>,
    /// What it does to them.
    pub change: Change<'a>,
    /// `multi: true` (updateMany).
    pub multi: bool,
    /// `upsert: true`.
    pub upsert: bool,
}

fn change(u: Element<'_>) -> Option<Change<'_>> {
    match u.kind {
        0x04 => Some(Change::Pipeline),
        0x03 => {
            let d = u.as_document()?;
            match element::elements(d).next() {
                Some(first) if first.key.first() == Some(&b'$') => Some(Change::Operators(d)),
                _ => Some(Change::Replacement(d)),
            }
        }
        _ => None,
    }
}

fn flag(e: Option<Element<'_>>) -> bool {
    e.and_then(|e| e.as_bool()).unwrap_or(false)
}

/// The update statements of a command (none for other commands).
pub fn updates<'a>(cmd: &Command<'a>) -> Vec<Update<'a>> {
    let mut out = Vec::new();
    match cmd.name {
        "update" => {
            for d in cmd.documents("updates") {
                let get = |k: &str| element::find(d, k);
                if let Some(change) = get("u").and_then(change) {
                    out.push(Update {
                        namespace: None,
                        filter: get("q").and_then(|q| q.as_document()),
                        change,
                        multi: flag(get("multi")),
                        upsert: flag(get("upsert")),
                    });
                }
            }
        }
        "findAndModify" | "findandmodify" => {
            let get = |k: &str| element::find(cmd.body, k);
            if !flag(get("remove")) {
                if let Some(change) = get("update").and_then(change) {
                    out.push(Update {
                        namespace: None,
                        filter: get("query").and_then(|q| q.as_document()),
                        change,
                        multi: false,
                        upsert: flag(get("upsert")),
                    });
                }
            }
        }
        "bulkWrite" => {
            let namespaces: Vec<&str> =
                cmd.documents("nsInfo").iter().map(|d| d.get_str("ns").unwrap_or("")).collect();
            for op in cmd.documents("ops") {
                let Some(first) = element::elements(op).next() else { continue };
                if first.key != b"update" {
                    continue;
                }
                let get = |k: &str| element::find(op, k);
                let namespace =
                    first.as_i64().and_then(|i| namespaces.get(usize::try_from(i).ok()?)).copied();
                if let Some(change) = get("updateMods").and_then(change) {
                    out.push(Update {
                        namespace,
                        filter: get("filter").and_then(|f| f.as_document()),
                        change,
                        multi: flag(get("multi")),
                        upsert: flag(get("upsert")),
                    });
                }
            }
        }
        _ => {}
    }
    out
}

/// The documents an insert carries (body array or document sequence), and
/// bulkWrite's insert documents with their namespace.
pub fn inserts<'a>(cmd: &Command<'a>) -> Vec<(Option<&'a str>, &'a RawDocument)> {
    match cmd.name {
        "insert" => cmd.documents("documents").into_iter().map(|d| (None, d)).collect(),
        "bulkWrite" => {
            let namespaces: Vec<&str> =
                cmd.documents("nsInfo").iter().map(|d| d.get_str("ns").unwrap_or("")).collect();
            cmd.documents("ops")
                .into_iter()
                .filter_map(|op| {
                    let first = element::elements(op).next()?;
                    if first.key != b"insert" {
                        return None;
                    }
                    let ns = first.as_i64().and_then(|i| namespaces.get(usize::try_from(i).ok()?)).copied();
                    Some((ns, element::find(op, "document")?.as_document()?))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The `_id` a filter asks for by equality (implicit or `$eq`), if it does.
pub fn id_of<'a>(filter: &'a RawDocument) -> Option<Element<'a>> {
    let id = element::find(filter, "_id")?;
    match id.as_document() {
        Some(ops) => match element::elements(ops).next() {
            Some(first) if first.key == b"$eq" => Some(first),
            Some(first) if first.key.first() == Some(&b'$') => None,
            _ => Some(id),
        },
        None if id.kind == 0x04 || id.kind == 0x0B => None,
        None => Some(id),
    }
}

/// What a write's reply says it did, read per command: `update` replies with `n`
/// (matched, upserts included), `nModified` and `upserted` (`[{index, _id}]`);
/// `findAndModify` with `lastErrorObject` (`n`, `updatedExisting`, `upserted`);
/// `delete` with `n`. A write detector counts a statement only when it changed a
/// document that was there: mongoengine's `save()` of a new document with a preset
/// `_id` sends a findAndModify replacement that matches nothing, then an insert.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Documents matched, upserts included, when the reply says.
    pub matched: Option<u64>,
    /// Documents changed (`nModified`), when the reply says.
    pub modified: Option<u64>,
    /// The statements that inserted a document by upsert.
    pub upserted: Vec<u64>,
}

impl Outcome {
    /// Reads the reply of `command` (a write command; anything else says nothing).
    pub fn of(command: &str, reply: &CommandReply<'_>) -> Outcome {
        let number = |e: &Element<'_>| e.as_i64().and_then(|v| u64::try_from(v).ok());
        let mut out = Outcome::default();
        let upserted_indexes = |e: &Element<'_>, out: &mut Outcome| {
            for u in element::elements_in(e.as_array()).filter_map(|u| u.as_document()) {
                out.upserted.push(element::find(u, "index").as_ref().and_then(number).unwrap_or(0));
            }
        };
        match command {
            "findAndModify" | "findandmodify" => {
                let Some(leo) = element::find(reply.body, "lastErrorObject").and_then(|e| e.as_document())
                else {
                    return out;
                };
                for e in element::elements(leo) {
                    match e.key {
                        b"n" => out.matched = number(&e),
                        b"upserted" => out.upserted.push(0),
                        _ => {}
                    }
                }
            }
            _ => {
                for e in element::elements(reply.body) {
                    match e.key {
                        b"n" => out.matched = number(&e),
                        b"nModified" => out.modified = number(&e),
                        b"upserted" => upserted_indexes(&e, &mut out),
                        _ => {}
                    }
                }
            }
        }
        out
    }

    /// Whether statement `i` of the command may have changed a document that was
    /// there: not when it inserted one by upsert, nor when nothing matched. (With
    /// several statements, the counts are for all of them: only "nothing at all"
    /// and the upserts' indexes are known per statement.)
    pub fn changed_existing(&self, i: usize) -> bool {
        if self.upserted.contains(&(i as u64)) {
            return false;
        }
        match self.matched {
            Some(n) => n > self.upserted.len() as u64,
            None => true,
        }
    }

    /// Whether the reply says the statements changed nothing in the documents they
    /// matched (`nModified: 0`, as for a replacement by the identical document).
    pub fn unchanged(&self) -> bool {
        self.modified == Some(0) && self.upserted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, Frame, Message, OpMsg};

    fn with_command(body: bson::Document, f: impl FnOnce(&Command<'_>)) {
        let bytes = OpMsg::new(Document::from_doc(&body)).encode(1, 0);
        let m = Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap();
        f(&Command::from_message(&m).unwrap());
    }

    #[test]
    fn every_write_command_gives_its_statements() {
        with_command(
            doc! {"update": "o", "updates": [
                {"q": {"_id": 1}, "u": {"a": 1}},
                {"q": {"s": "x"}, "u": {"$set": {"b": 2}}, "multi": true, "upsert": true},
                {"q": {}, "u": [{"$set": {"c": 1}}]},
            ], "$db": "t"},
            |c| {
                let u = updates(c);
                assert_eq!(u.len(), 3);
                assert!(matches!(u[0].change, Change::Replacement(_)));
                assert!(matches!(u[1].change, Change::Operators(_)) && u[1].multi && u[1].upsert);
                assert!(matches!(u[2].change, Change::Pipeline));
                assert_eq!(id_of(u[0].filter.unwrap()).and_then(|e| e.as_i64()), Some(1));
                assert!(id_of(u[1].filter.unwrap()).is_none());
            },
        );
        with_command(
            doc! {"findAndModify": "o", "query": {"_id": {"$eq": 7}}, "update": {"x": 1}, "new": true, "$db": "t"},
            |c| {
                let u = updates(c);
                assert!(matches!(u[0].change, Change::Replacement(_)));
                assert_eq!(id_of(u[0].filter.unwrap()).and_then(|e| e.as_i64()), Some(7));
            },
        );
        with_command(doc! {"findAndModify": "o", "query": {"_id": 1}, "remove": true, "$db": "t"}, |c| {
            assert!(updates(c).is_empty())
        });
        with_command(
            doc! {"bulkWrite": 1, "ops": [
                {"insert": 0, "document": {"a": 1}},
                {"update": 1, "filter": {"_id": 2}, "updateMods": {"$push": {"r": 1}}},
            ], "nsInfo": [{"ns": "t.a"}, {"ns": "t.b"}], "$db": "admin"},
            |c| {
                let u = updates(c);
                assert_eq!((u.len(), u[0].namespace), (1, Some("t.b")));
                let i = inserts(c);
                assert_eq!((i.len(), i[0].0), (1, Some("t.a")));
            },
        );
    }
}
