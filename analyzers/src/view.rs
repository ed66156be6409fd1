//! An operation as every analyzer sees it, decoded once: the request's command view,
//! the reply's view, the category and the statement shapes. The table records it
//! first and fills in the shape ids of its rows; the detectors then read the same
//! view. (A pipeline split over two threads decodes a second view, without shapes,
//! on the reading thread for the schemas; nobody re-computes a shape.)

use std::borrow::Cow;
use std::cell::OnceCell;

use bson::RawDocument;
use mongotap_wire::element::{self, Element};
use mongotap_wire::{Command, CommandReply};
use smallvec::SmallVec;

use crate::namespace::Change;
use crate::operation::Operation;
use crate::shape::command::{Category, StatementShape};
use crate::shape::memo::Memo;
use crate::statements::{self, Outcome, Update};

/// A shape's stable id: the FNV-1a fingerprint of namespace, command and shape that
/// reports print as 16 hex digits (see [`crate::shape::hex`]).
pub type ShapeId = u64;

/// A filter's equalities as (field, value): a few, kept inline.
type Equalities<'o> = SmallVec<[(&'o [u8], Element<'o>); 4]>;

/// Where a command's statement shapes come from.
enum Shaping<'o> {
    /// Not wanted (see [`OpView::unshaped`]).
    Unshaped,
    /// Written by the shaper.
    Anew,
    /// Through the memo: a find's shapes lent from it for as long as the view
    /// lives, any other command's written.
    Memo(&'o mut Memo),
}

/// One operation, decoded once for the table and every detector.
pub struct OpView<'o> {
    /// The operation.
    pub op: &'o Operation,
    /// The request as a command; `None` for auth commands (their bodies are gone)
    /// and legacy queries.
    pub command: Option<Command<'o>>,
    /// The reply as a command reply, when there is one.
    pub reply: Option<CommandReply<'o>>,
    /// The documents a cursor reply returned (`firstBatch` or `nextBatch`), as the
    /// document an array is on the wire; found once for every analyzer. `None` when
    /// the batch is empty.
    pub batch: Option<&'o RawDocument>,
    /// Read, write or other.
    pub category: Category,
    /// The command's statement shapes (none for getMore: the table attributes it to
    /// the shape that opened its cursor; none in a view made by [`OpView::unshaped`]).
    pub statements: Cow<'o, [StatementShape]>,
    /// The table row of each statement shape, in the same order (filled by the table;
    /// `None` when the shape went to the "other shapes" row).
    pub shape_ids: SmallVec<[Option<ShapeId>; 2]>,
    /// For getMore: the shape of the command that opened the cursor, when known.
    pub cursor_of: Option<ShapeId>,
    /// The epoch of the operation's namespace (see [`crate::namespace`]): what
    /// detectors remember of documents and reads is keyed by it.
    pub epoch: u32,
    /// The change in a collection's life this operation made (a drop, a rename...).
    pub change: Option<Change>,
    /// For a write: what its reply says it did (matched, changed, upserted).
    pub outcome: Option<Outcome>,
    /// The update statements and inserted documents, decoded on first use.
    updates: OnceCell<Vec<Update<'o>>>,
    inserts: OnceCell<Vec<(Option<&'o str>, &'o RawDocument)>>,
    /// The first statement's filter and its equalities, found on first use.
    filter: OnceCell<Option<&'o RawDocument>>,
    equalities: OnceCell<Equalities<'o>>,
}

impl<'o> OpView<'o> {
    /// Decodes `op` once, its statement shapes with it.
    pub fn new(op: &'o Operation) -> OpView<'o> {
        OpView::decode(op, Shaping::Anew)
    }

    /// As [`OpView::new`], with the shapes of calls seen before taken from `memo`,
    /// which the view borrows (mutably) for as long as it lives.
    pub fn remembered(op: &'o Operation, memo: &'o mut Memo) -> OpView<'o> {
        OpView::decode(op, Shaping::Memo(memo))
    }

    /// Decodes `op` without finding its statement shapes, for what reads its
    /// documents only (the schemas, on the correlator's thread of a split pipeline:
    /// see [`crate::pipeline::Pipeline::split`]).
    pub fn unshaped(op: &'o Operation) -> OpView<'o> {
        OpView::decode(op, Shaping::Unshaped)
    }

    fn decode(op: &'o Operation, shaping: Shaping<'o>) -> OpView<'o> {
        let command = if op.sensitive { None } else { op.command_view() };
        let reply = if op.sensitive { None } else { op.reply_view() };
        let category = command.as_ref().map_or(Category::Command, crate::shape::command::category);
        let statements = match (&command, shaping) {
            (Some(c), _) if c.name == "getMore" => Cow::Borrowed(&[][..]),
            (Some(c), Shaping::Anew) => Cow::Owned(crate::shape::command::shapes(c)),
            (Some(c), Shaping::Memo(memo)) => memo.shapes(c),
            _ => Cow::Borrowed(&[][..]),
        };
        let batch = reply.as_ref().and_then(|r| op.batch(r));
        let change = command.as_ref().and_then(|c| Change::of(c, reply.as_ref()));
        let outcome = match (&command, &reply) {
            (Some(c), Some(r)) if category == Category::Write => Some(Outcome::of(c.name, r)),
            _ => None,
        };
        OpView {
            op,
            command,
            reply,
            category,
            statements,
            batch,
            shape_ids: SmallVec::new(),
            cursor_of: None,
            epoch: 0,
            change,
            outcome,
            updates: OnceCell::new(),
            inserts: OnceCell::new(),
            filter: OnceCell::new(),
            equalities: OnceCell::new(),
        }
    }

    /// The update statements of a write (see [`statements::updates`]), decoded once
    /// for every analyzer that asks.
    pub fn updates(&self) -> &[Update<'o>] {
        self.updates.get_or_init(|| match (&self.command, self.category) {
            (Some(c), Category::Write) => statements::updates(c),
            _ => Vec::new(),
        })
    }

    /// The documents an insert (or bulkWrite) carries, with their namespace when
    /// the statement names its own (see [`statements::inserts`]).
    pub fn inserts(&self) -> &[(Option<&'o str>, &'o RawDocument)] {
        self.inserts.get_or_init(|| match (&self.command, self.category) {
            (Some(c), Category::Write) => statements::inserts(c),
            _ => Vec::new(),
        })
    }

    /// The filter the first statement asks with: find's `filter`, count's and
    /// distinct's `query`, findAndModify's `query`, an aggregation's leading
    /// `$match`, the first update's or delete's `q`.
    pub fn filter(&self) -> Option<&'o RawDocument> {
        *self.filter.get_or_init(|| {
            let cmd = self.command.as_ref()?;
            let body = cmd.body;
            let field = |k: &str| element::find(body, k).and_then(|e| e.as_document());
            match cmd.name {
                "find" => field("filter"),
                "count" | "distinct" | "findAndModify" | "findandmodify" => field("query"),
                "aggregate" => {
                    let first = element::elements(element::find(body, "pipeline")?.as_array()?).next()?;
                    element::find(first.as_document()?, "$match")?.as_document()
                }
                "update" => self.updates().first().and_then(|u| u.filter),
                "delete" => {
                    cmd.documents("deletes").first().and_then(|d| element::find(d, "q")?.as_document())
                }
                _ => None,
            }
        })
    }

    /// The equalities of [`Self::filter`] (see [`crate::values::equalities`]), as
    /// (field, value), found once for every analyzer that follows values.
    pub fn equalities(&self) -> &[(&'o [u8], Element<'o>)] {
        self.equalities.get_or_init(|| {
            let mut out = SmallVec::new();
            if let Some(filter) = self.filter() {
                crate::values::equalities(filter, &mut |field, e| out.push((field, *e)));
            }
            out
        })
    }

    /// The document a findAndModify's reply carries in `value` (before or after the
    /// change); `None` for any other command, whose reply has no such field
    /// (looking for it walked the top level of every reply that was learnt from).
    pub fn find_and_modify_value(&self) -> Option<&'o RawDocument> {
        match self.command.as_ref()?.name {
            "findAndModify" | "findandmodify" => {
                element::find(self.reply.as_ref()?.body, "value")?.as_document()
            }
            _ => None,
        }
    }

    /// The shape id of the operation's first statement, or for a getMore the shape
    /// that opened its cursor: the shape a read's results belong to.
    pub fn read_shape(&self) -> Option<ShapeId> {
        match self.command.as_ref()?.name {
            "getMore" => self.cursor_of,
            _ => self.shape_ids.first().copied().flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Direction, TapEvent};
    use crate::exchange::Correlator;
    use bson::doc;
    use mongotap_wire::{Document, Frame, OpMsg};

    /// The operation a request and its reply make.
    fn operation(request: bson::Document, reply: bson::Document) -> Operation {
        let mut c = Correlator::default();
        c.on_event(TapEvent::Opened { conn: 1, client: "127.0.0.1:1".parse().unwrap(), at: 0 }, &mut |_| {});
        let mut out = Vec::new();
        for (dir, at, body, id, to) in
            [(Direction::ToServer, 1_000, request, 2, 0), (Direction::ToClient, 2_000, reply, 3, 2)]
        {
            let frame = Frame::from_bytes(OpMsg::new(Document::from_doc(&body)).encode(id, to)).unwrap();
            c.on_event(TapEvent::Message { conn: 1, dir, at, frame }, &mut |op| out.push(op));
        }
        out.pop().expect("the pair makes an operation")
    }

    #[test]
    fn only_a_find_and_modify_has_a_value_document() {
        let value = doc! {"_id": 1, "n": 2};
        for name in ["findAndModify", "findandmodify"] {
            let op = operation(
                doc! {name: "c", "query": {"_id": 1}, "update": {"$inc": {"n": 1}}, "$db": "d"},
                doc! {"lastErrorObject": {"n": 1}, "value": value.clone(), "ok": 1},
            );
            let got = OpView::new(&op).find_and_modify_value().map(|d| bson::Document::try_from(d).unwrap());
            assert_eq!(got, Some(value.clone()), "{name}");
        }
        // Another command's reply with a `value` field (no server sends one) is not read as one.
        let op = operation(
            doc! {"find": "c", "filter": {}, "$db": "d"},
            doc! {"cursor": {"id": 0_i64, "ns": "d.c", "firstBatch": []}, "value": value, "ok": 1},
        );
        assert_eq!(OpView::new(&op).find_and_modify_value(), None);
    }
}
