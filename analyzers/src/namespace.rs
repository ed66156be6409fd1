//! Namespaces and their lives: which collections the server writes itself (and get
//! no advice), and when a collection stops being the one it was.
//!
//! Test suites drop and re-create their collections between cases, and reuse the
//! same `_id`s in each. A detector that compared a document of one case with the
//! document of another that happens to share its `_id` would see rewrites nobody
//! made. So every namespace has an epoch: it moves on when the collection is
//! dropped (or its database), renamed away or over, or emptied by a delete of every
//! document. Detectors key what they remember of documents and reads by namespace
//! *and* epoch, and never compare across epochs.

use bson::RawDocument;
use mongotap_wire::element;
use mongotap_wire::{Command, CommandReply};
use rustc_hash::FxHashMap;

/// A GridFS bucket's collection (`fs.files`, `fs.chunks`, or another bucket's):
/// its layout is the driver's, not the model's, so no relationship of it is judged
/// and no ODM batching is offered for it (small files in the document are the fix).
pub fn is_gridfs(namespace: &str) -> bool {
    let coll = namespace.split_once('.').map_or(namespace, |(_, c)| c);
    coll.ends_with(".files") || coll.ends_with(".chunks")
}

/// Whether the server writes or owns this namespace: `system.*` collections (the
/// profiler, views, users), and everything in `admin`, `config` and `local`. Such
/// namespaces stay in the table but get no advice: the profiler is written after
/// every operation, so reading it again is never redundant, and nobody indexes it.
pub fn is_system(namespace: &str) -> bool {
    let (db, coll) = namespace.split_once('.').unwrap_or((namespace, ""));
    matches!(db, "admin" | "config" | "local") || coll.starts_with("system.")
}

/// A change in a collection's life, from a command that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `drop`: the collection and its indexes are gone.
    Dropped(String),
    /// `dropDatabase`: every collection of the database is gone.
    DatabaseDropped(String),
    /// `renameCollection`: `from` is gone and `to` holds its documents and indexes.
    Renamed { from: String, to: String },
    /// A `delete` with an empty filter: every document is gone, the indexes stay.
    Emptied(String),
    /// `create`: a new, empty collection with only the `_id` index.
    Created(String),
}

impl Change {
    /// The change `command` made, if it made one and its reply says it succeeded.
    pub fn of(command: &Command<'_>, reply: Option<&CommandReply<'_>>) -> Option<Change> {
        // The name first: this runs for every operation, and most change nothing.
        if !matches!(command.name, "drop" | "dropDatabase" | "create" | "renameCollection" | "delete") {
            return None;
        }
        if !reply.is_some_and(|r| r.ok()) {
            return None;
        }
        let db = command.database();
        let ns = || command.collection().map(|c| format!("{db}.{c}"));
        match command.name {
            "drop" => ns().map(Change::Dropped),
            "dropDatabase" => Some(Change::DatabaseDropped(db.to_owned())),
            "create" => ns().map(Change::Created),
            "renameCollection" => {
                let from = command.collection()?.to_owned();
                let to = element::find(command.body, "to")?.as_str()?.to_owned();
                Some(Change::Renamed { from, to })
            }
            "delete" => {
                let deletes = command.documents("deletes");
                let everything = deletes.iter().any(|d| {
                    element::find(d, "q").and_then(|q| q.as_document()).is_some_and(is_empty)
                        && element::find(d, "limit").and_then(|l| l.as_i64()) != Some(1)
                });
                let removed = reply.and_then(|r| r.n()).unwrap_or(0) > 0;
                (everything && removed).then(ns).flatten().map(Change::Emptied)
            }
            _ => None,
        }
    }

    /// Whether the change ends what was known of `namespace`'s documents.
    pub fn ends(&self, namespace: &str) -> bool {
        match self {
            Change::Dropped(ns) | Change::Emptied(ns) => ns == namespace,
            Change::DatabaseDropped(db) => namespace.split_once('.').is_some_and(|(d, _)| d == db),
            Change::Renamed { from, to } => from == namespace || to == namespace,
            Change::Created(_) => false,
        }
    }
}

fn is_empty(d: &RawDocument) -> bool {
    element::elements(d).next().is_none()
}

/// Namespaces (or databases) whose epochs are followed at most; past it, every epoch
/// moves on at once (counted), which only makes detectors forget more.
const MAX_FOLLOWED: usize = 100_000;

/// The epoch of every namespace: how many times its documents were ended.
#[derive(Debug, Default)]
pub struct Epochs {
    namespaces: FxHashMap<String, u32>,
    databases: FxHashMap<String, u32>,
    /// Added to every epoch: moves on when the maps are cleared to stay bounded.
    base: u32,
    /// Times the maps were cleared.
    pub resets: u64,
}

impl Epochs {
    /// The epoch of `namespace` now.
    pub fn of(&self, namespace: &str) -> u32 {
        if self.namespaces.is_empty() && self.databases.is_empty() {
            return self.base;
        }
        let db = namespace.bytes().position(|b| b == b'.').map_or(namespace, |dot| &namespace[..dot]);
        let coll = self.namespaces.get(namespace).copied().unwrap_or(0);
        let data = self.databases.get(db).copied().unwrap_or(0);
        self.base.wrapping_add(coll).wrapping_add(data)
    }

    /// Applies a change.
    pub fn apply(&mut self, change: &Change) {
        if self.namespaces.len() + self.databases.len() >= MAX_FOLLOWED {
            self.namespaces.clear();
            self.databases.clear();
            self.base = self.base.wrapping_add(1);
            self.resets += 1;
        }
        let bump = |map: &mut FxHashMap<String, u32>, key: &str| {
            let e = map.entry(key.to_owned()).or_default();
            *e = e.wrapping_add(1);
        };
        match change {
            Change::Dropped(ns) | Change::Emptied(ns) => bump(&mut self.namespaces, ns),
            Change::DatabaseDropped(db) => bump(&mut self.databases, db),
            Change::Renamed { from, to } => {
                bump(&mut self.namespaces, from);
                bump(&mut self.namespaces, to);
            }
            Change::Created(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, Frame, Message, OpMsg};

    fn message(body: bson::Document) -> Message {
        let bytes = OpMsg::new(Document::from_doc(&body)).encode(1, 0);
        Message::decode(&Frame::from_bytes(bytes).unwrap()).unwrap()
    }

    fn change(cmd: bson::Document, reply: bson::Document) -> Option<Change> {
        let (c, r) = (message(cmd), message(reply));
        Change::of(&Command::from_message(&c).unwrap(), CommandReply::from_message(&r).as_ref())
    }

    #[test]
    fn system_namespaces_are_the_servers() {
        assert!(is_system("shop.system.profile"));
        assert!(is_system("admin"));
        assert!(is_system("config.chunks") && is_system("local.oplog.rs") && is_system("admin.system.users"));
        assert!(!is_system("shop.orders") && !is_system("shop.systems") && !is_system("administration.x"));
    }

    #[test]
    fn changes_come_from_commands_that_succeeded() {
        let ok = doc! {"ok": 1.0};
        assert_eq!(change(doc! {"drop": "c", "$db": "t"}, ok.clone()), Some(Change::Dropped("t.c".into())));
        assert_eq!(change(doc! {"drop": "c", "$db": "t"}, doc! {"ok": 0.0, "code": 26}), None);
        assert_eq!(
            change(doc! {"dropDatabase": 1, "$db": "t"}, ok.clone()),
            Some(Change::DatabaseDropped("t".into()))
        );
        assert_eq!(
            change(doc! {"renameCollection": "t.a", "to": "t.b", "$db": "admin"}, ok.clone()),
            Some(Change::Renamed { from: "t.a".into(), to: "t.b".into() })
        );
        let everything = doc! {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "$db": "t"};
        assert_eq!(change(everything.clone(), doc! {"n": 3, "ok": 1.0}), Some(Change::Emptied("t.c".into())));
        assert_eq!(change(everything, doc! {"n": 0, "ok": 1.0}), None, "nothing was there");
        let one = doc! {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}], "$db": "t"};
        assert_eq!(change(one, doc! {"n": 1, "ok": 1.0}), None);
        assert_eq!(change(doc! {"create": "c", "$db": "t"}, ok), Some(Change::Created("t.c".into())));
    }

    #[test]
    fn epochs_move_on_for_what_a_change_ends_only() {
        let mut e = Epochs::default();
        let (a, b, other) = (e.of("t.a"), e.of("t.b"), e.of("u.a"));
        e.apply(&Change::Dropped("t.a".into()));
        assert_ne!(e.of("t.a"), a);
        assert_eq!((e.of("t.b"), e.of("u.a")), (b, other));
        let before = (e.of("t.a"), e.of("t.b"));
        e.apply(&Change::DatabaseDropped("t".into()));
        assert!(e.of("t.a") != before.0 && e.of("t.b") != before.1 && e.of("t.new") != b);
        assert_eq!(e.of("u.a"), other);
        assert!(
            Change::DatabaseDropped("t".into()).ends("t.x")
                && !Change::DatabaseDropped("t".into()).ends("tt.x")
        );
    }
}
