//! One shared copy of each command name and namespace: every request names both,
//! and each operation keeps them as long as it lives.

use std::sync::Arc;

use mongotap_wire::Command;

use crate::values::Keyed;

/// Command names and namespaces, one shared copy of each: every request names
/// both, and two new strings for each were 4% of the analysis.
#[derive(Default)]
pub(super) struct Names {
    /// By the command name's bytes, a 0, then the database's and collection's
    /// (keyed: the client chooses these bytes).
    shared: std::collections::HashMap<Vec<u8>, (Arc<str>, Arc<str>), Keyed>,
    key: Vec<u8>,
}

/// Distinct (command, namespace) pairs kept; past this many the names start over
/// (an application has far fewer; made-up ones cost what they did before).
const MAX_NAMES: usize = 4_096;

impl Names {
    /// `c`'s command name and namespace, shared with the requests before it.
    pub(super) fn of(&mut self, c: &Command<'_>) -> (Arc<str>, Arc<str>) {
        let (db, collection) = c.namespace_bytes();
        self.key.clear();
        self.key.extend_from_slice(c.name.as_bytes());
        self.key.push(0);
        self.key.extend_from_slice(db);
        if let Some(coll) = collection {
            self.key.push(b'.');
            self.key.extend_from_slice(coll);
        }
        if let Some(names) = self.shared.get(self.key.as_slice()) {
            return names.clone();
        }
        let names: (Arc<str>, Arc<str>) = (Arc::from(c.name), Arc::from(c.namespace()));
        // Bytes that are not UTF-8 make a namespace of what is (see
        // `Command::namespace`), which another key may make too: never shared.
        let utf8 = |b: &[u8]| std::str::from_utf8(b).is_ok();
        if !utf8(db) || !collection.is_none_or(utf8) {
            return names;
        }
        if self.shared.len() >= MAX_NAMES {
            self.shared.clear();
        }
        self.shared.insert(self.key.clone(), names.clone());
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, Frame, Message, OpMsg};

    fn names(names: &mut Names, body: Document) -> (Arc<str>, Arc<str>) {
        let frame = Frame::from_bytes(OpMsg::new(body).encode(1, 0)).unwrap();
        let m = Message::decode(&frame).unwrap();
        names.of(&Command::from_message(&m).unwrap())
    }

    #[test]
    fn repeated_names_are_shared_and_a_change_is_seen() {
        let mut n = Names::default();
        let requests = [
            doc! {"find": "orders", "$db": "shop"},
            doc! {"find": "orders", "$db": "shop"},
            doc! {"insert": "orders", "$db": "shop"},
            doc! {"insert": "orders2", "$db": "shop"},
            doc! {"insert": "s", "$db": "shop.order"},
            doc! {"ping": 1, "$db": "shop"},
            doc! {"ping": 1, "$db": "shop.orders"},
            doc! {"getMore": 5_i64, "collection": "orders", "$db": "shop"},
        ];
        let got: Vec<_> = requests.iter().map(|r| names(&mut n, Document::from_doc(r))).collect();
        let text: Vec<(&str, &str)> = got.iter().map(|(c, ns)| (&**c, &**ns)).collect();
        assert_eq!(
            text,
            [
                ("find", "shop.orders"),
                ("find", "shop.orders"),
                ("insert", "shop.orders"),
                ("insert", "shop.orders2"),
                ("insert", "shop.order.s"),
                ("ping", "shop"),
                ("ping", "shop.orders"),
                ("getMore", "shop.orders"),
            ]
        );
        assert!(Arc::ptr_eq(&got[0].1, &got[1].1), "the repeat shares the name");
    }

    #[test]
    fn names_that_are_not_utf8_are_never_shared() {
        // `{find: 1, $db: "a.\xff"}` and `{find: "\xff", $db: "a"}`: the same bytes
        // in a row, two namespaces (what is UTF-8 of each: "" and "a").
        let raw = |elements: &[(u8, &str, &[u8])]| {
            Document::from_bytes(bytes::Bytes::from(crate::values::bson_of(elements))).unwrap()
        };
        let string = |b: &[u8]| [&((b.len() + 1) as i32).to_le_bytes()[..], b, &[0]].concat();
        let mut n = Names::default();
        let first =
            names(&mut n, raw(&[(0x10, "find", &1i32.to_le_bytes()), (0x02, "$db", &string(b"a.\xff"))]));
        let second = names(&mut n, raw(&[(0x02, "find", &string(b"\xff")), (0x02, "$db", &string(b"a"))]));
        assert_eq!((&*first.1, &*second.1), ("", "a"));
    }
}
