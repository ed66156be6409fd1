//! Units of work: the requests of one client grouped into the application's
//! operations as they run. Evidence, strongest first:
//!
//! 1. a transaction (`lsid` + `txnNumber` + `autocommit: false`; a retryable write
//!    carries the number alone and is no transaction): every statement of it is one
//!    unit, which `commitTransaction`/`abortTransaction` ends;
//! 2. values that flow from one step into the next: a value a reply (or a request)
//!    carried, asked for by equality or `$in` in a later request of another shape
//!    (an order's `customerId` becoming the next `find`'s `_id`, a document read
//!    then updated by its `_id`); the newest open unit holding the value takes the
//!    request, so the interleaved units of a concurrent client stay apart, and a
//!    connection pool does not matter (units are per client, not per connection).
//!    The same shape asking a value again is the same read again, which a busy
//!    client's next operation does too (its settings, a hot document): no link;
//! 3. adjacency: a request that links to nothing joins the client's one unit active
//!    within `operation_gap_ms`, unless it repeats one of that unit's unlinked steps
//!    (a loop starting over: that unit then takes nothing more by adjacency) or
//!    several units are active (concurrency: it starts its own).
//!
//! A unit ends after `operation_gap_ms` without activity, and is then folded into
//! the operations and relationships it shows. Bounded: units per client, values
//! and steps per unit; what is let go of is counted.

// Units are boxed in their lists: a unit is a few hundred bytes, and each moves
// from open to ended to spare (those moves were 4% of the analysis of one-request
// operations).
#![allow(clippy::vec_box)]

use std::sync::Arc;

use bson::RawDocument;
use mongotap_wire::element;
use rustc_hash::FxHashMap;

use crate::event::Micros;
use crate::names::Paths;
use crate::operation::ConnInfo;
use crate::shape::command::Category;
use crate::values::{self, At, Keyed};
use crate::view::{OpView, ShapeId};

use super::carrier::{Carrier, Walk};
use super::held::Held;

/// Values remembered per unit.
const MAX_VALUES: usize = 512;
/// Steps per unit (further ones are counted, not kept).
pub(crate) const MAX_STEPS: usize = 32;
/// Documents of a reply whose values are remembered.
const DOCS_PER_REPLY: usize = 16;
/// Values of one `$in` list looked up.
const MAX_IN: usize = 64;
/// Parent documents remembered per value, for how many parents share a child.
const PARENTS_PER_VALUE: usize = 4;
/// (child value, parent document) pairs a unit keeps, all its steps together (and
/// [`MAX_VALUES`] per step): an early step's loop leaves room for the later ones'.
const MAX_PAIRS: usize = 1_024;
/// Units open at once, every client's together. `max_clients` x
/// `max_open_parents` alone would allow 80,000 open units of up to about 100 KB
/// each (their values, asks and pairs): 7.6 GiB. Past this many the least
/// recently active unit ends early, folded as it stands, and is counted.
pub(crate) const MAX_OPEN_UNITS: usize = 1_024;
/// A transaction's unit ends after this long without a statement (the server's own
/// `transactionLifetimeLimitSeconds` is 60 s).
const TXN_IDLE_US: Micros = 60_000_000;

/// Where a remembered value came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source {
    /// The step (its index in the unit).
    pub step: u8,
    /// The path it sat at (interned).
    pub path: u32,
    /// The keyed hash of the `_id` of the document it sat in (0 for a request's filter).
    pub doc: u64,
    /// Whether the path names a reference (see [`id_like`]).
    pub id_like: bool,
}

/// How a step took its values from an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Link {
    /// The earlier step.
    pub from: u8,
    /// The path of the value there (interned).
    pub path: u32,
    /// The field this step asked it of (interned).
    pub field: u32,
}

/// One step of a unit: a shape run once or more, linked or not.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub shape: ShapeId,
    pub namespace: Arc<str>,
    pub write: bool,
    /// An insert: a new document, which changes nothing already copied elsewhere.
    pub insert: bool,
    pub link: Option<Link>,
    /// Executions of it in the unit.
    pub count: u32,
    /// Documents it returned (reads) or changed (writes).
    pub docs: u64,
    /// Distinct linked values it asked for.
    pub values: u32,
    /// (child value, parent document) pairs it followed: who shares what.
    pub pairs: Vec<(u64, u64)>,
    /// Documents of it whose values were looked at (fewer than `docs` when a reply
    /// was long): how often a value was carried is then estimated.
    pub looked: u64,
}

/// An operation in progress.
pub(crate) struct Unit {
    pub started: Micros,
    /// The end of its last request (its reply).
    pub last: Micros,
    pub txn: Option<u64>,
    pub steps: Vec<Step>,
    pub values: Values,
    /// Which values `values` may hold (see [`Held`]).
    held: Held,
    /// Round trips.
    pub requests: u32,
    pub docs: u64,
    pub conn: Arc<ConnInfo>,
    /// Steps left out past [`MAX_STEPS`].
    pub steps_refused: u32,
    /// Events were dropped while it ran: it may miss steps.
    pub lossy: bool,
    /// Linked values each step asked for, and how often: distinct ones are
    /// counted, and a value asked more often than documents carried it is a loop
    /// starting over, not this operation's next step.
    asks: Vec<(u8, u64, u16)>,
    /// A later request started the same operation over: it joins no request by
    /// adjacency any more.
    superseded: bool,
}

/// The values a unit carries, each with the documents that carried it.
pub(crate) type Values = FxHashMap<u64, [Source; PARENTS_PER_VALUE]>;

/// Emptied units kept for the next ones (a unit's map grows to hundreds of values;
/// growing a new one for every unit cost 2% of the analysis).
const SPARE_UNITS: usize = 4;

/// An empty slot of a value's sources.
const NONE: Source = Source { step: u8::MAX, path: 0, doc: 0, id_like: false };

impl Unit {
    fn new(conn: Arc<ConnInfo>, at: Micros, txn: Option<u64>) -> Unit {
        Unit {
            started: at,
            last: at,
            txn,
            steps: Vec::new(),
            values: Values::default(),
            held: Held::default(),
            requests: 0,
            docs: 0,
            conn,
            steps_refused: 0,
            lossy: false,
            asks: Vec::new(),
            superseded: false,
        }
    }

    /// An ended unit made new, keeping its allocations.
    fn reset(&mut self, conn: Arc<ConnInfo>, at: Micros, txn: Option<u64>) {
        let (mut steps, mut values, mut asks) = (
            std::mem::take(&mut self.steps),
            std::mem::take(&mut self.values),
            std::mem::take(&mut self.asks),
        );
        steps.clear();
        values.clear();
        asks.clear();
        *self = Unit { steps, values, asks, ..Unit::new(conn, at, txn) };
    }

    /// The step index of `(shape, link)`, added if new (`None` past the bound).
    fn step(
        &mut self,
        shape: ShapeId,
        namespace: &Arc<str>,
        write: (bool, bool),
        link: Option<Link>,
    ) -> Option<u8> {
        if let Some(i) = self.steps.iter().position(|s| s.shape == shape && s.link == link) {
            return Some(i as u8);
        }
        if self.steps.len() >= MAX_STEPS {
            self.steps_refused += 1;
            return None;
        }
        self.steps.push(Step {
            shape,
            namespace: namespace.clone(),
            write: write.0,
            insert: write.1,
            link,
            count: 0,
            docs: 0,
            values: 0,
            pairs: Vec::new(),
            looked: 0,
        });
        Some((self.steps.len() - 1) as u8)
    }

    /// Remembers a value at `path` of step `step`'s document `doc`.
    fn remember(&mut self, h: u64, source: Source) {
        let full = self.values.len() >= MAX_VALUES;
        let slots = match self.values.entry(h) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(_) if full => return,
            std::collections::hash_map::Entry::Vacant(v) => {
                self.held.add(h);
                v.insert([NONE; PARENTS_PER_VALUE])
            }
        };
        if slots.iter().any(|s| s.step == source.step && s.path == source.path && s.doc == source.doc) {
            return;
        }
        // Full: the first documents that carried the value stay (they count the
        // parents per child); a later step's copy is not kept.
        if let Some(free) = slots.iter_mut().find(|s| s.step == u8::MAX) {
            *free = source;
        }
    }

    /// Whether the unit repeats `shape` as an unlinked step, or as a linked step
    /// asking a value it asked already: a loop starting over.
    fn repeats(&self, shape: ShapeId, asked: &[(u32, u64, bool)]) -> bool {
        self.steps.iter().enumerate().any(|(i, s)| {
            s.shape == shape
                && (s.link.is_none() || asked.iter().any(|(_, h, _)| self.asked(i as u8, *h) > 0))
        })
    }

    /// How often step `step` asked value `h`.
    fn asked(&self, step: u8, h: u64) -> u16 {
        self.asks.iter().find(|a| a.0 == step && a.1 == h).map_or(0, |a| a.2)
    }

    /// Whether a request of `shape` may still take `h` from `source`: a value one
    /// document carried is asked once by the step it feeds, one that `n`
    /// documents carried `n` times (a page's posts sharing an author), a value
    /// carried by more documents than are remembered any number of times.
    fn fresh(&self, shape: ShapeId, h: u64, source: &Source, field: u32) -> bool {
        let link = Some(Link { from: source.step, path: source.path, field });
        let Some(step) = self.steps.iter().position(|s| s.shape == shape && s.link == link) else {
            return true;
        };
        let carried = self.values.get(&h).map_or(0, |sources| {
            sources.iter().filter(|s| s.step == source.step && s.path == source.path && s.doc != 0).count()
                as u64
        });
        if carried >= PARENTS_PER_VALUE as u64 {
            return true;
        }
        // Of a long reply only some documents were looked at: as many again in the rest.
        let from = &self.steps[usize::from(source.step)];
        let carried = match from.looked {
            0 => carried,
            looked => (carried * from.docs.max(looked)).div_ceil(looked),
        };
        u64::from(self.asked(step as u8, h)) < carried.max(1)
    }
}

/// Whether a field or path names a reference: `_id`, `id`, `customerId`,
/// `author_id`, `productIds`, a DBRef's `$id`. A small number links units only
/// between such paths: a status, a quantity or a price that happens to equal an
/// id links nothing.
pub(crate) fn id_like(path: &[u8]) -> bool {
    let last = path.rsplit(|b| *b == b'.').next().unwrap_or(path);
    last == b"_id"
        || last == b"id"
        || last == b"$id"
        || last.ends_with(b"Id")
        || last.ends_with(b"_id")
        || last.ends_with(b"Ids")
        || last.ends_with(b"_ids")
}

/// Whether a value is a small whole number: ids of test data coincide with
/// quantities and positions, so such a value links only id to id.
fn small(e: &mongotap_wire::element::Element<'_>) -> bool {
    match e.kind {
        0x10 | 0x12 => e.as_i64().is_some_and(|n| n.unsigned_abs() < 1_000),
        0x01 => {
            e.value.try_into().map(f64::from_le_bytes).is_ok_and(|d| d.fract() == 0.0 && d.abs() < 1_000.0)
        }
        _ => false,
    }
}

/// The values a request asks for, into `out`: (field interned, keyed value, small)
/// of its filter's equalities and `$in` lists.
fn asked(v: &OpView<'_>, keyed: &Keyed, paths: &mut Paths, out: &mut Vec<(u32, u64, bool)>) {
    out.clear();
    // An ObjectId, a UUID or a string is an identifier whatever the field's name
    // (Mongoose's `user`, mongoengine's `author`); a small number only on an id field.
    let mut take = |field: &[u8], e: &mongotap_wire::element::Element<'_>| {
        let small = small(e);
        if !small || id_like(field) {
            if let (Some(h), Some(path)) = (keyed.link(e), paths.id(At { path: field, array: None })) {
                out.push((path, h, small));
            }
        }
    };
    for (field, e) in v.equalities() {
        take(field, e);
    }
    // $in lists filled from an earlier reply (one batched fetch).
    let Some(filter) = v.filter() else { return };
    for e in element::elements(filter) {
        if e.kind != 0x03 || e.key.first() == Some(&b'$') {
            continue;
        }
        let Some(list) = e.as_document().and_then(|ops| element::find(ops, "$in")).and_then(|l| l.as_array())
        else {
            continue;
        };
        for item in element::elements(list).take(MAX_IN) {
            take(e.key, &item);
        }
    }
}

/// Moves the units `idle` picks from `open` to `done` (nothing to move, nothing
/// allocated: this runs for every operation).
fn end_idle(open: &mut Vec<Box<Unit>>, done: &mut Vec<Box<Unit>>, idle: impl Fn(&Unit) -> bool) -> usize {
    if !open.iter().any(|u| idle(u)) {
        return 0;
    }
    let (mut i, before) = (0, open.len());
    while i < open.len() {
        if idle(&open[i]) {
            done.push(open.remove(i));
        } else {
            i += 1;
        }
    }
    before - open.len()
}

/// Shapes whose carried values are followed.
const MAX_CARRIERS: usize = 16_384;
/// Documents of a reply walked at the linked paths only.
const DOCS_AT_PATHS: usize = 32;

/// Every client's open units.
pub(crate) struct Units {
    keyed: Keyed,
    /// Value paths and child fields, interned.
    pub paths: Paths,
    clients: FxHashMap<u64, Vec<Box<Unit>>>,
    gap_us: Micros,
    carriers: FxHashMap<ShapeId, Carrier>,
    max_clients: usize,
    max_open: usize,
    /// Units let go of before their end to stay bounded.
    pub evicted: u64,
    /// Units open now, every client's (at most [`MAX_OPEN_UNITS`]).
    open_units: usize,
    scratch: Vec<u8>,
    /// The path interned at each position of the last document walked, and whether
    /// it names a reference (kept to reuse its allocation).
    by_position: Vec<(u32, bool)>,
    /// What the operation at hand asks for (kept to reuse its allocation).
    asked: Vec<(u32, u64, bool)>,
    /// Ended units, emptied, for the next ones.
    spare: Vec<Box<Unit>>,
}

impl Units {
    pub(crate) fn new(gap_ms: u64, max_clients: u64, max_open: u64) -> Units {
        Units {
            keyed: Keyed::default(),
            paths: Paths::default(),
            clients: FxHashMap::default(),
            gap_us: gap_ms.saturating_mul(1000),
            carriers: FxHashMap::default(),
            max_clients: max_clients as usize,
            max_open: max_open.max(1) as usize,
            evicted: 0,
            open_units: 0,
            scratch: Vec::new(),
            by_position: Vec::new(),
            asked: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Takes back an ended unit (its allocations) for a later unit.
    pub(crate) fn recycle(&mut self, u: Box<Unit>) {
        if self.spare.len() < SPARE_UNITS && u.values.capacity() <= 2 * MAX_VALUES {
            self.spare.push(u);
        }
    }

    /// Takes one operation; `done` receives the units it ends.
    pub(crate) fn observe(&mut self, v: &OpView<'_>, done: &mut Vec<Box<Unit>>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        let now = op.started_at;
        let end = now + op.latency_us.unwrap_or(0);
        let key = op.conn.client_key;
        // Close what has been idle too long, before anything joins it.
        if let Some(open) = self.clients.get_mut(&key) {
            let gap = self.gap_us;
            self.open_units -= end_idle(open, done, |u| u.txn.is_none() && now.saturating_sub(u.last) > gap);
        }
        // Every statement of a transaction says `autocommit: false` beside its
        // `txnNumber`; a retryable write has the number alone, and is no transaction.
        // Most commands are in none: a byte search says so before a walk.
        static AUTOCOMMIT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"autocommit\0"));
        let in_txn = AUTOCOMMIT.find(cmd.body.as_bytes()).is_some()
            && element::find(cmd.body, "autocommit").is_some_and(|a| a.kind == 0x08 && a.value == [0]);
        let lsid = || element::find(cmd.body, "lsid").and_then(|l| l.as_document());
        let number = || element::find(cmd.body, "txnNumber").and_then(|t| t.as_i64());
        let txn = in_txn.then(number).flatten().and_then(|n| Some((n, lsid()?))).map(|(n, lsid)| {
            use std::hash::Hasher;
            let mut h = self.keyed.hasher();
            h.write(lsid.as_bytes());
            h.write_i64(n);
            h.finish()
        });
        // The commit (or abort) is one more round trip of the transaction's unit, and
        // its end; not a step of it.
        if let (true, Some(t)) = (matches!(cmd.name, "commitTransaction" | "abortTransaction"), txn) {
            if let Some(open) = self.clients.get_mut(&key) {
                if let Some(i) = open.iter().position(|u| u.txn == Some(t)) {
                    let mut u = open.remove(i);
                    self.open_units -= 1;
                    u.requests += 1;
                    u.last = u.last.max(end);
                    done.push(u);
                }
            }
            return;
        }
        if v.category == Category::Command {
            return;
        }
        // A getMore continues its cursor's step: a round trip, more documents.
        if cmd.name == "getMore" {
            if let (Some(shape), Some(open)) = (v.cursor_of, self.clients.get_mut(&key)) {
                if let Some(u) = open.iter_mut().rev().find(|u| u.steps.iter().any(|s| s.shape == shape)) {
                    u.requests += 1;
                    u.docs += op.docs_returned;
                    u.last = u.last.max(end);
                    if let Some(s) = u.steps.iter_mut().find(|s| s.shape == shape) {
                        s.docs += op.docs_returned;
                    }
                }
            }
            return;
        }
        let Some(Some(shape)) = v.shape_ids.first().copied() else { return };
        // Room for a unit this statement may open: another client's goes, never this
        // client's own (a transaction waits longest between statements).
        if self.open_units >= MAX_OPEN_UNITS {
            self.end_least_recent(done, key, now);
        }
        if !self.clients.contains_key(&key) && self.clients.len() >= self.max_clients {
            let oldest = self
                .clients
                .iter()
                .map(|(k, us)| (us.iter().map(|u| u.last).max().unwrap_or(0), *k))
                .min()
                .map(|(_, k)| k);
            if let Some(k) = oldest {
                // Its units end now, folded as they stand (their operations count).
                let gone = self.clients.remove(&k).unwrap_or_default();
                self.evicted += gone.len() as u64;
                self.open_units -= gone.len();
                done.extend(gone);
            }
        }
        let mut asked = std::mem::take(&mut self.asked);
        self::asked(v, &self.keyed, &mut self.paths, &mut asked);
        // The operation's, shared (one copy per namespace: see `exchange`); a new step
        // keeps a clone.
        let ns = &op.namespace;
        let mut link = None;
        let write = v.category == Category::Write;
        let gap = self.gap_us;
        let open = self.clients.entry(key).or_default();
        // 1. The transaction's unit.
        let mut joined = txn.and_then(|t| open.iter().position(|u| u.txn == Some(t)));
        // 2. The newest unit holding one of the values asked for; before it, an older
        // one that holds it the way this request uses it (see `fits` below): a
        // concurrent profile read that returned one of the page's authors must not
        // take the page's author read.
        if joined.is_none() {
            let mut best: Option<(bool, usize, Link, u64)> = None;
            'units: for (i, u) in open.iter().enumerate().rev() {
                // A unit that began with this shape is not continued by it: that is
                // the loop starting over (a page read, its document updated, read
                // again for the next request), whatever value it shares.
                if u.steps.first().is_some_and(|s| s.shape == shape) {
                    continue;
                }
                for (field, h, small) in &asked {
                    if !u.held.may_hold(*h) {
                        continue;
                    }
                    let Some(sources) = u.values.get(h) else { continue };
                    // A document that carried the value, before the request that asked it;
                    // a small number links only an id to an id. A value the same shape
                    // asked or returned is no link: that is the same read again, which
                    // a busy client's next operation does as well (its settings, its
                    // hot document) and which must not glue the two together.
                    let usable = |s: &&Source| {
                        s.step != u8::MAX
                            && (!small || s.id_like)
                            && u.steps.get(usize::from(s.step)).is_some_and(|st| st.shape != shape)
                    };
                    // A write fits the document itself, when its own collection
                    // returned it at the field asked (a post read, then updated by its
                    // _id), rather than another collection's document whose id
                    // coincides; a read fits another collection's reference, not its
                    // own collection's document (that is the same read again). Then
                    // the latest document that carried it: a value flows from the
                    // step that handed it over last (a page's posts, not their insert).
                    let fits = |s: &&Source| {
                        let itself = s.path == *field
                            && u.steps.get(usize::from(s.step)).is_some_and(|st| st.namespace == *ns);
                        itself == write
                    };
                    let Some(source) = sources
                        .iter()
                        .filter(usable)
                        .filter(|s| s.doc != 0)
                        .max_by_key(|s| (fits(s), s.step))
                        .or_else(|| sources.iter().filter(usable).max_by_key(|s| (fits(s), s.step)))
                    else {
                        continue;
                    };
                    if !u.fresh(shape, *h, source, *field) {
                        continue; // asked as often as it was carried: not this unit's
                    }
                    let fit = fits(&source);
                    if !fit && !write {
                        continue; // a read of what its own collection returned: no link
                    }
                    if best.is_none_or(|b| fit && !b.0) {
                        best =
                            Some((fit, i, Link { from: source.step, path: source.path, field: *field }, *h));
                    }
                    if fit {
                        break 'units;
                    }
                }
            }
            if let Some((_, i, l, h)) = best {
                link = Some((l, h));
                // The source's shape carries values at this path: follow it there.
                if let Some(c) =
                    open[i].steps.get(usize::from(l.from)).and_then(|s| self.carriers.get_mut(&s.shape))
                {
                    c.linked_at(self.paths.name(l.path).as_bytes());
                }
                joined = Some(i);
            }
        }
        // 3. The one unit active now, unless this starts it over.
        if joined.is_none() && txn.is_none() {
            let mut active = (0..open.len()).filter(|i| {
                now.saturating_sub(open[*i].last) <= gap && open[*i].txn.is_none() && !open[*i].superseded
            });
            if let (Some(only), None) = (active.next(), active.next()) {
                if open[only].repeats(shape, &asked) {
                    // The loop starting over: that operation takes no more requests by
                    // adjacency (its values may still link its own next steps, which a
                    // concurrent request may have come between).
                    open[only].superseded = true;
                } else {
                    joined = Some(only);
                }
            }
        }
        let i = match joined {
            Some(i) => i,
            None => {
                if open.len() >= self.max_open {
                    // One ends now: first the least recent lone request of the shape
                    // starting now (a one-request operation that a pool of threads
                    // repeats, like a profile read; never a transaction's first
                    // statement), then the least recently active.
                    // A burst of those must not end a page waiting for its next step.
                    let lone = |u: &Unit| u.txn.is_none() && u.steps.len() == 1 && u.steps[0].shape == shape;
                    let least_recent = |lone_only: bool| {
                        (0..open.len())
                            .filter(|i| !lone_only || lone(&open[*i]))
                            .min_by_key(|i| open[*i].last)
                    };
                    let oldest = least_recent(true).or_else(|| least_recent(false)).unwrap_or(0);
                    done.push(open.remove(oldest));
                    self.open_units -= 1;
                }
                let unit = match self.spare.pop() {
                    Some(mut u) => {
                        u.reset(op.conn.clone(), now, txn);
                        u
                    }
                    None => Box::new(Unit::new(op.conn.clone(), now, txn)),
                };
                open.push(unit);
                self.open_units += 1;
                open.len() - 1
            }
        };
        let u = &mut open[i];
        u.requests += 1;
        u.last = u.last.max(end);
        let docs = if write {
            v.outcome.as_ref().and_then(|o| o.modified.or(o.matched)).unwrap_or(v.inserts().len() as u64)
        } else {
            op.docs_returned
        };
        u.docs += docs;
        // Unlinked, but the unit already has this shape as a linked step: one more
        // child whose value sat past the documents that were looked at.
        let again = match link {
            Some(_) => None,
            None => u.steps.iter().position(|s| s.shape == shape && s.link.is_some()).map(|i| i as u8),
        };
        let insert = cmd.name == "insert";
        let Some(step) = again.or_else(|| u.step(shape, ns, (write, insert), link.map(|(l, _)| l))) else {
            return;
        };
        let s = &mut u.steps[usize::from(step)];
        s.count += 1;
        s.docs += docs;
        // Every value of the link's source the step asked for (all of an $in list):
        // how many children it fetched, and which parent documents named each.
        if let Some((l, _)) = link {
            for (_, h, _) in &asked {
                let Some(sources) = u.values.get(h) else { continue };
                if !sources.iter().any(|s| s.step == l.from && s.path == l.path) {
                    continue;
                }
                if let Some(a) = u.asks.iter_mut().find(|a| a.0 == step && a.1 == *h) {
                    a.2 = a.2.saturating_add(1);
                    continue;
                }
                let parents: Vec<u64> = sources
                    .iter()
                    .filter(|s| s.step == l.from && s.path == l.path && s.doc != 0)
                    .map(|s| s.doc)
                    .collect();
                if u.asks.len() < MAX_VALUES {
                    u.asks.push((step, *h, 1));
                }
                let held: usize = u.steps.iter().map(|s| s.pairs.len()).sum();
                let s = &mut u.steps[usize::from(step)];
                s.values += 1;
                let room = MAX_PAIRS.saturating_sub(held).min(MAX_VALUES.saturating_sub(s.pairs.len()));
                s.pairs.extend(parents.into_iter().take(room).map(|p| (*h, p)));
            }
        }
        // What this step carries for the next: the values it asked for, and those of
        // the documents it returned or wrote.
        for (path, h, _) in &asked {
            u.remember(*h, Source { step, path: *path, doc: 0, id_like: true });
        }
        self.asked = asked;
        let Self { keyed, paths, scratch, carriers, by_position, .. } = self;
        if !carriers.contains_key(&shape) && carriers.len() >= MAX_CARRIERS {
            return; // too many shapes: this one's values are not followed
        }
        let Some(walk) = carriers.entry(shape).or_default().next_reply() else { return };
        let (docs, only) = match walk {
            Walk::Whole => (DOCS_PER_REPLY, None),
            Walk::AtPaths(linked) => (DOCS_AT_PATHS, Some(linked)),
        };
        let looked = (op.docs_returned as usize).max(v.inserts().len()).min(docs);
        u.steps[usize::from(step)].looked += looked as u64;
        // The documents of a reply mostly have the same fields in the same order:
        // the path interned at the same position is tried first (a comparison)
        // before the interning map (a hash and a probe) and the reading of its name.
        by_position.clear();
        let mut learn = |d: &RawDocument, u: &mut Unit| {
            let doc = element::find(d, "_id").and_then(|id| keyed.link(&id)).unwrap_or(0);
            scratch.clear();
            let mut position = 0;
            let f = &mut |at: At<'_>, e: &mongotap_wire::element::Element<'_>| {
                let cached = by_position
                    .get(position)
                    .copied()
                    .filter(|(p, _)| element::same(paths.name(*p).as_bytes(), at.path));
                // Small numbers only where they are ids: quantities are no links.
                let id_like = cached.map_or_else(|| id_like(at.path), |(_, cached)| cached);
                if small(e) && !id_like {
                    return;
                }
                let Some(h) = keyed.link(e) else { return };
                let Some(path) = cached.map(|(p, _)| p).or_else(|| paths.id(at)) else { return };
                match by_position.get_mut(position) {
                    Some(p) => *p = (path, id_like),
                    None => by_position.push((path, id_like)),
                }
                position += 1;
                u.remember(h, Source { step, path, doc, id_like });
            };
            match only {
                None => values::walk_links(d, scratch, f),
                Some(paths_at) => values::walk_links_at(d, paths_at, scratch, f),
            }
        };
        if let Some(batch) = v.batch {
            for d in element::elements(batch).filter_map(|d| d.as_document()).take(docs) {
                learn(d, u);
            }
        }
        for (_, d) in v.inserts().iter().take(docs) {
            learn(d, u);
        }
        if let Some(value) = v.find_and_modify_value() {
            learn(value, u);
        }
    }

    /// Ends the least recently active open unit of any client but `except` (see
    /// [`MAX_OPEN_UNITS`]): a scan of the open units, only when they are that many.
    /// One already idle past the gap had ended anyway: it is not counted as let go.
    fn end_least_recent(&mut self, done: &mut Vec<Box<Unit>>, except: u64, now: Micros) {
        let oldest = self
            .clients
            .iter()
            .filter(|(k, _)| **k != except)
            .flat_map(|(k, us)| us.iter().enumerate().map(move |(i, u)| (u.last, *k, i)))
            .min();
        if let Some((_, k, i)) = oldest {
            if let Some(open) = self.clients.get_mut(&k) {
                let u = open.remove(i);
                self.open_units -= 1;
                self.evicted += u64::from(u.txn.is_some() || now.saturating_sub(u.last) <= self.gap_us);
                done.push(u);
            }
        }
    }

    /// Ends every unit idle for longer than the gap at `now`.
    pub(crate) fn expire(&mut self, now: Micros, done: &mut Vec<Box<Unit>>) {
        let gap = self.gap_us;
        for open in self.clients.values_mut() {
            // A transaction waits longer: its client may think between statements.
            self.open_units -= end_idle(open, done, |u| {
                now.saturating_sub(u.last) > if u.txn.is_some() { gap.max(TXN_IDLE_US) } else { gap }
            });
        }
        self.clients.retain(|_, open| !open.is_empty());
    }

    /// Events were dropped: every open unit may miss steps.
    pub(crate) fn on_gap(&mut self) {
        for u in self.clients.values_mut().flatten() {
            u.lossy = true;
        }
    }

    /// How many units are open now.
    #[cfg(test)]
    pub(crate) fn open_units(&self) -> usize {
        self.open_units
    }

    /// The units open now (counted as if they ended now, for a report).
    pub(crate) fn open(&self) -> impl Iterator<Item = &Unit> {
        self.clients.values().flatten().map(|u| &**u)
    }
}
