//! The access-pattern frequency table: one row per namespace x command x shape.
//!
//! Memory is bounded: the number of rows is capped (operations of shapes beyond the
//! cap are counted in one "other shapes" row), per-row sets are capped, and the
//! cursor map that attributes getMores to their shape is capped. Nothing grows
//! with the number of operations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use bson::RawBsonRef;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use mongotap_wire::{Command, CommandReply};

use crate::event::Micros;
use crate::operation::Operation;
use crate::shape::command::Category;
use crate::shape::{hex, included, string, Fingerprint, Obj, ShapeJson};
use crate::view::{OpView, ShapeId};

/// Bounds on the table.
#[derive(Debug, Clone, Copy)]
pub struct TableLimits {
    /// Distinct rows kept; further shapes go to the "other shapes" row.
    pub max_shapes: usize,
    /// Open cursors remembered for getMore attribution.
    pub max_cursors: usize,
    /// Apps and fields remembered per row.
    pub max_names: usize,
    /// Seconds of op-rate timeline kept.
    pub timeline_seconds: usize,
    /// Keep one literal example per row (`--show-values`). Off by default: shapes
    /// alone never carry a value. Auth commands never have one.
    pub show_values: bool,
}

impl Default for TableLimits {
    fn default() -> Self {
        TableLimits {
            max_shapes: 10_000,
            max_cursors: 100_000,
            max_names: 32,
            timeline_seconds: 3600,
            show_values: false,
        }
    }
}

/// The shape id of the overflow row.
pub const OTHER_SHAPES: &str = "other-shapes";

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// `db.collection`.
    pub namespace: String,
    /// The command.
    pub command: String,
    /// Read, write or other.
    pub category: Category,
    /// The normalised shape.
    pub shape: Value,
    /// Stable fingerprint of namespace + command + shape, as reports print it.
    pub shape_id: String,
    /// The same fingerprint as a number.
    pub id: ShapeId,
    /// For getMore rows: the row of the command that opened the cursor.
    pub cursor_of: Option<String>,
    /// Operations.
    pub count: u64,
    /// Statements (updates, deletes) or documents (inserts) across those operations.
    pub statements: u64,
    /// Latency in microseconds (awaited waits excluded).
    pub latency_us: Latencies,
    /// Operations left out of latency because the server waited on purpose.
    pub awaited: u64,
    /// Documents returned.
    pub docs_returned: u64,
    /// Request bytes on the wire.
    pub request_bytes: u64,
    /// Reply bytes on the wire.
    pub reply_bytes: u64,
    /// Errors by code.
    pub errors: BTreeMap<i32, u64>,
    /// Operations by application name.
    pub apps: BTreeMap<String, u64>,
    /// Fields the application reads: projected, or present in returned documents.
    pub fields_read: BTreeSet<String>,
    /// First time seen.
    pub first_seen: Micros,
    /// Last time seen.
    pub last_seen: Micros,
    /// One literal example of the command, only with `show_values`.
    pub example: Option<Value>,
    /// Operations of this row the tap is estimated to have dropped (see
    /// [`AccessTable::charge_loss`]); its count is a lower bound when it is above 0.
    pub missed: f64,
    /// Whether operations of this row were seen while the tap was dropping events.
    pub lossy: bool,
    /// Operations since the last gap, for the next gap's estimate.
    epoch_ops: u64,
}

impl Row {
    fn new(
        namespace: String,
        command: String,
        category: Category,
        shape: Value,
        id: ShapeId,
        at: Micros,
    ) -> Row {
        Row {
            namespace,
            command,
            category,
            shape,
            shape_id: if id == 0 { OTHER_SHAPES.to_owned() } else { hex(id) },
            id,
            cursor_of: None,
            count: 0,
            statements: 0,
            latency_us: Latencies::default(),
            awaited: 0,
            docs_returned: 0,
            request_bytes: 0,
            reply_bytes: 0,
            errors: BTreeMap::new(),
            apps: BTreeMap::new(),
            fields_read: BTreeSet::new(),
            first_seen: at,
            last_seen: at,
            example: None,
            missed: 0.0,
            lossy: false,
            epoch_ops: 0,
        }
    }

    /// Errors of all codes.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// A latency percentile in milliseconds, if any latency was recorded.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        let h = self.latency_us.histogram();
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// A row's latencies in microseconds. The first few are kept as they are, so a row
/// seen a handful of times (most rows, when there are thousands of shapes) costs a
/// few bytes; beyond that, an HDR histogram that grows to the largest latency seen
/// (3 to 10 KiB at 2 significant figures).
#[derive(Debug, Clone)]
pub enum Latencies {
    /// Up to [`Latencies::FEW`] samples.
    Few(Vec<u32>),
    /// The histogram, once there were more.
    Many(Histogram<u32>),
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies::Few(Vec::new())
    }
}

impl Latencies {
    /// Samples kept before switching to a histogram.
    pub const FEW: usize = 32;

    fn new_histogram() -> Histogram<u32> {
        // Auto-resizing: it grows to the largest latency seen, not an hour's range.
        Histogram::new(2).expect("2 significant figures are valid")
    }

    /// Records one latency (at least 1 us).
    pub fn record(&mut self, us: u64) {
        let us = us.max(1);
        match self {
            Latencies::Few(v) if v.len() < Self::FEW => v.push(u32::try_from(us).unwrap_or(u32::MAX)),
            Latencies::Few(v) => {
                let mut h = Self::new_histogram();
                for &x in v.iter() {
                    let _ = h.record(u64::from(x));
                }
                let _ = h.record(us);
                *self = Latencies::Many(h);
            }
            // record (not saturating_record): an auto-resizing histogram grows to fit.
            Latencies::Many(h) => {
                let _ = h.record(us);
            }
        }
    }

    /// The latencies as a histogram, for percentiles and buckets.
    pub fn histogram(&self) -> std::borrow::Cow<'_, Histogram<u32>> {
        match self {
            Latencies::Many(h) => std::borrow::Cow::Borrowed(h),
            Latencies::Few(v) => {
                let mut h = Self::new_histogram();
                for &x in v {
                    let _ = h.record(u64::from(x));
                }
                std::borrow::Cow::Owned(h)
            }
        }
    }
}

struct CursorOrigin {
    key: u64,
    shape: ShapeJson,
    command: Arc<str>,
    last_used: Micros,
}

/// How long a cursor is remembered without a getMore: the server's own idle
/// cursor timeout (`cursorTimeoutMillis`, 10 minutes by default).
pub const CURSOR_IDLE_US: Micros = 10 * 60 * 1_000_000;

/// What became of the cursors the table followed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CursorStats {
    /// Cursors open now (remembered for their getMores).
    pub open: u64,
    /// Cursors not remembered because the map was full: their getMores are
    /// attributed to "unknown".
    pub untracked: u64,
    /// Cursors forgotten after `CURSOR_IDLE_US` without a getMore.
    pub expired: u64,
    /// Cursors closed by `killCursors`.
    pub killed: u64,
}

/// The table.
pub struct AccessTable {
    /// Rows by fingerprint of namespace + command + shape.
    rows: HashMap<u64, Row>,
    /// The "other shapes" row, once the cap is reached.
    other: Option<Row>,
    cursors: HashMap<(Arc<str>, i64), CursorOrigin>,
    limits: TableLimits,
    operations: u64,
    other_shapes: u64,
    timeline: BTreeMap<u64, u64>,
    /// Rows with operations since the last gap (`None`: the "other shapes" row).
    touched: Vec<Option<u64>>,
    cursor_stats: CursorStats,
}

impl Default for AccessTable {
    fn default() -> Self {
        AccessTable::new(TableLimits::default())
    }
}

impl AccessTable {
    /// An empty table with the given bounds.
    pub fn new(limits: TableLimits) -> AccessTable {
        AccessTable {
            rows: HashMap::default(),
            other: None,
            cursors: HashMap::default(),
            limits,
            operations: 0,
            other_shapes: 0,
            timeline: BTreeMap::new(),
            touched: Vec::new(),
            cursor_stats: CursorStats::default(),
        }
    }

    /// What became of the cursors followed so far.
    pub fn cursor_stats(&self) -> CursorStats {
        CursorStats { open: self.cursors.len() as u64, ..self.cursor_stats }
    }

    /// Forgets cursors idle for longer than the server keeps them.
    pub fn expire(&mut self, now: Micros) {
        let before = self.cursors.len();
        self.cursors.retain(|_, c| now.saturating_sub(c.last_used) <= CURSOR_IDLE_US);
        self.cursor_stats.expired += (before - self.cursors.len()) as u64;
    }

    /// Operations recorded.
    pub fn operations(&self) -> u64 {
        self.operations
    }

    /// Operations whose shape did not fit under the cap.
    pub fn other_shapes(&self) -> u64 {
        self.other_shapes
    }

    /// The rows, most frequent first (ties by shape id, for a stable order).
    pub fn rows(&self) -> Vec<&Row> {
        let mut v: Vec<&Row> = self.rows.values().chain(&self.other).collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.shape_id.cmp(&b.shape_id)));
        v
    }

    /// Operations per second of the run, as (unix second, count).
    pub fn timeline(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.timeline.iter().map(|(s, n)| (*s, *n))
    }

    /// Records one operation, and fills in the view's shape ids.
    pub fn record(&mut self, view: &mut OpView<'_>) {
        let op = view.op;
        self.operations += 1;
        let second = op.started_at / 1_000_000;
        // Nearly always the newest second: its entry is the last one, found without
        // a search.
        match self.timeline.last_entry() {
            Some(mut last) if *last.key() == second => *last.get_mut() += 1,
            _ => *self.timeline.entry(second).or_default() += 1,
        }
        while self.timeline.len() > self.limits.timeline_seconds {
            self.timeline.pop_first();
        }
        let Some(cmd) = &view.command else {
            // Auth commands and legacy queries: counted by name, never shaped.
            let empty = ShapeJson::build(|o| o.extend_from_slice(b"{}"));
            self.add(op, &op.namespace, Category::Command, &empty, None, 1);
            return;
        };
        let category = view.category;
        if cmd.name == "getMore" {
            let id = match cmd.body.get("getMore") {
                Ok(Some(RawBsonRef::Int64(i))) => i,
                Ok(Some(RawBsonRef::Int32(i))) => i.into(),
                _ => 0,
            };
            let key = (op.namespace.clone(), id);
            // An exhausted cursor (id 0 in the reply) is forgotten; a live one is
            // marked used, so only idle ones expire.
            let origin = if op.cursor_id.is_none() { self.cursors.remove(&key) } else { None };
            let origin = origin.as_ref().or_else(|| {
                let o = self.cursors.get_mut(&key)?;
                o.last_used = op.started_at;
                Some(&*o)
            });
            let shape = ShapeJson::build(|out| {
                let mut m = Obj::open(out);
                match origin {
                    Some(o) => {
                        string(m.key("cursorOf"), &o.command);
                        m.key("shape").extend_from_slice(o.shape.as_bytes());
                    }
                    None => string(m.key("cursorOf"), "unknown"),
                }
                m.close();
            });
            let origin_row = origin.and_then(|o| self.rows.get(&o.key));
            view.cursor_of = origin_row.map(|r| r.id);
            let cursor_of = origin_row.map(|r| r.shape_id.clone());
            let key = self.add(op, &op.namespace, category, &shape, cursor_of, 1);
            view.shape_ids.push(self.rows.get(&key).map(|r| r.id));
            self.note_fields(key, cmd, view.reply.as_ref());
            return;
        }
        if cmd.name == "killCursors" {
            self.kill_cursors(&op.namespace, cmd);
        }
        let mut first = None;
        view.shape_ids.reserve_exact(view.statements.len());
        for s in view.statements.iter() {
            let ns = s.namespace.as_deref().unwrap_or(&op.namespace);
            let key = self.add(op, ns, category, &s.shape, None, s.statements);
            view.shape_ids.push(self.rows.get(&key).map(|r| r.id));
            first.get_or_insert((key, &s.shape));
        }
        if let (Category::Read, Some((key, _))) = (category, &first) {
            self.note_fields(*key, cmd, view.reply.as_ref());
        }
        // Remember the cursor so its getMores are attributed to this shape.
        if let (Some(cursor), Some((key, shape))) = (op.cursor_id, first) {
            if self.cursors.len() < self.limits.max_cursors {
                self.cursors.insert(
                    (op.namespace.clone(), cursor),
                    CursorOrigin {
                        key,
                        shape: shape.clone(),
                        command: op.command.clone(),
                        last_used: op.started_at,
                    },
                );
            } else {
                self.cursor_stats.untracked += 1;
            }
        }
    }

    /// `killCursors` closes the cursors it names.
    fn kill_cursors(&mut self, namespace: &Arc<str>, cmd: &Command<'_>) {
        let Ok(ids) = cmd.body.get_array("cursors") else { return };
        for id in ids.into_iter().flatten() {
            let id = match id {
                RawBsonRef::Int64(i) => i,
                RawBsonRef::Int32(i) => i.into(),
                _ => continue,
            };
            if self.cursors.remove(&(namespace.clone(), id)).is_some() {
                self.cursor_stats.killed += 1;
            }
        }
    }

    /// The tap dropped `dropped` events since the last gap. An operation is two
    /// events, and drops come in runs (the channel stays full for a while), so the
    /// hole held about `dropped / 2` operations. Drops hit every connection alike
    /// (the channel was full, whoever sent), so the rows seen in that stretch share
    /// them in proportion to their operations in it.
    pub fn charge_loss(&mut self, dropped: u64) {
        let seen: u64 = self
            .touched
            .iter()
            .filter_map(|k| match k {
                Some(k) => self.rows.get(k),
                None => self.other.as_ref(),
            })
            .map(|r| r.epoch_ops)
            .sum();
        let per_op = dropped as f64 / 2.0 / seen.max(1) as f64;
        for key in self.touched.drain(..) {
            let row = match key {
                Some(k) => self.rows.get_mut(&k),
                None => self.other.as_mut(),
            };
            if let Some(row) = row {
                row.missed += row.epoch_ops as f64 * per_op;
                row.lossy = true;
                row.epoch_ops = 0;
            }
        }
    }

    fn add(
        &mut self,
        op: &Operation,
        namespace: &str,
        category: Category,
        shape: &ShapeJson,
        cursor_of: Option<String>,
        statements: u64,
    ) -> u64 {
        let key = row_key(namespace, &op.command, shape);
        let at = op.started_at;
        let (row, touched) = if let Some(row) = self.rows.get_mut(&key) {
            (row, Some(key))
        } else if self.rows.len() < self.limits.max_shapes {
            // The shape id users see is a stable FNV-1a fingerprint; it is worked out
            // once per row, while the per-operation lookup uses a faster hash.
            let id = Fingerprint::new().part(namespace).part(&op.command).shape(shape).finish();
            let mut r =
                Row::new(namespace.to_owned(), op.command.to_string(), category, shape.to_value(), id, at);
            r.cursor_of = cursor_of;
            (self.rows.entry(key).or_insert(r), Some(key))
        } else {
            self.other_shapes += 1;
            let other = self.other.get_or_insert_with(|| {
                Row::new("*".into(), "*".into(), Category::Command, json!({"otherShapes": true}), 0, at)
            });
            (other, None)
        };
        if row.epoch_ops == 0 {
            self.touched.push(touched);
        }
        row.epoch_ops += 1;
        row.count += 1;
        row.statements += statements;
        row.first_seen = row.first_seen.min(at);
        row.last_seen = row.last_seen.max(at);
        match (op.latency_us, op.awaited) {
            (_, true) => row.awaited += 1,
            (Some(us), false) => {
                row.latency_us.record(us);
            }
            (None, false) => {}
        }
        row.docs_returned += op.docs_returned;
        row.request_bytes += op.request_bytes;
        row.reply_bytes += op.reply_bytes;
        if let Some(code) = op.error_code {
            *row.errors.entry(code).or_default() += 1;
        }
        let app = op.conn.app_name.as_deref().unwrap_or(crate::operation::NO_APP);
        if let Some(n) = row.apps.get_mut(app) {
            *n += 1;
        } else if row.apps.len() < self.limits.max_names {
            row.apps.insert(app.to_owned(), 1);
        }
        if self.limits.show_values && row.example.is_none() && !op.sensitive {
            row.example = example(op);
        }
        key
    }

    /// Notes the fields a read returns. They settle fast, so only a row's first
    /// operations and then one in 64 are looked at.
    fn note_fields(&mut self, key: u64, cmd: &Command<'_>, reply: Option<&CommandReply<'_>>) {
        let cap = self.limits.max_names;
        let Some(row) = self.rows.get_mut(&key) else { return };
        if (row.count <= 16 || row.count % 64 == 0) && row.fields_read.len() < cap {
            note_fields_read(row, cmd, reply, cap);
        }
    }
}

/// The table's key for a row: a 64-bit hash of namespace, command and shape text,
/// eight bytes a step. Not the shape id (that must stay the same across versions).
fn row_key(namespace: &str, command: &str, shape: &ShapeJson) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    for part in [namespace.as_bytes(), command.as_bytes(), shape.as_bytes()] {
        h.write(part);
        h.write_u8(0xff);
    }
    h.finish()
}

/// Envelope fields that say nothing about the query.
const ENVELOPE: &[&str] =
    &["$db", "lsid", "$clusterTime", "txnNumber", "$readPreference", "autocommit", "startTransaction"];

/// The command as relaxed Extended JSON, without its envelope, its document
/// sequences folded in, and arrays cut to three elements.
fn example(op: &Operation) -> Option<Value> {
    let cmd = op.command_view()?;
    let mut doc = bson::Document::try_from(cmd.body).ok()?;
    for k in ENVELOPE {
        doc.remove(*k);
    }
    for seq in &cmd.sequences {
        let docs: Vec<bson::Bson> = seq
            .documents
            .iter()
            .take(3)
            .filter_map(|d| d.to_document().ok().map(bson::Bson::Document))
            .collect();
        doc.insert(seq.identifier.clone(), docs);
    }
    let mut v = bson::Bson::Document(doc).into_relaxed_extjson();
    cut_arrays(&mut v);
    Some(v)
}

fn cut_arrays(v: &mut Value) {
    match v {
        Value::Array(a) => {
            a.truncate(3);
            a.iter_mut().for_each(cut_arrays);
        }
        Value::Object(m) => m.values_mut().for_each(cut_arrays),
        _ => {}
    }
}

/// The fields an operation reads: its projection's, or those present in the first
/// few returned documents.
fn note_fields_read(row: &mut Row, cmd: &Command<'_>, reply: Option<&CommandReply<'_>>, cap: usize) {
    let proj = cmd.body.get_document("projection").or_else(|_| cmd.body.get_document("fields"));
    if let Ok(p) = proj {
        for e in mongotap_wire::element::elements(p) {
            if included(e) != Some(false) && row.fields_read.len() < cap {
                row.fields_read.insert(String::from_utf8_lossy(e.key).into_owned());
            }
        }
        return;
    }
    let Some(batch) = reply.and_then(|r| r.batch()) else { return };
    for doc in batch.into_iter().flatten().filter_map(|d| d.as_document()).take(8) {
        for (k, _) in doc.iter().flatten() {
            if row.fields_read.len() >= cap {
                return;
            }
            if !row.fields_read.contains(k.as_str()) {
                row.fields_read.insert(k.as_str().to_owned());
            }
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

    /// Runs request/reply pairs through a correlator into a table.
    struct Harness {
        c: Correlator,
        t: AccessTable,
        id: i32,
        at: Micros,
    }

    impl Harness {
        fn new(limits: TableLimits) -> Harness {
            let mut c = Correlator::default();
            c.on_event(
                TapEvent::Opened { conn: 1, client: "127.0.0.1:1".parse().unwrap(), at: 0 },
                &mut |_| {},
            );
            Harness { c, t: AccessTable::new(limits), id: 0, at: 1_000_000 }
        }

        fn exchange(&mut self, req: bson::Document, reply: bson::Document, latency: u64) {
            self.id += 2;
            let (rq, rp) = (self.id, self.id + 1);
            let send = |h: &mut Harness, dir, at, bytes| {
                let frame = Frame::from_bytes(bytes).unwrap();
                let t = &mut h.t;
                h.c.on_event(TapEvent::Message { conn: 1, dir, at, frame }, &mut |op| {
                    t.record(&mut OpView::new(&op))
                });
            };
            let at = self.at;
            send(self, Direction::ToServer, at, OpMsg::new(Document::from_doc(&req)).encode(rq, 0));
            send(
                self,
                Direction::ToClient,
                at + latency,
                OpMsg::new(Document::from_doc(&reply)).encode(rp, rq),
            );
            self.at += 10_000;
        }
    }

    fn batch(n: i32, id: i64, first: bool) -> bson::Document {
        let docs: Vec<bson::Document> = (0..n).map(|i| doc! {"_id": i, "total": i}).collect();
        let key = if first { "firstBatch" } else { "nextBatch" };
        doc! {"cursor": {"id": id, "ns": "shop.orders", key: docs}, "ok": 1}
    }

    #[test]
    fn counts_latencies_documents_and_get_more_attribution() {
        let mut h = Harness::new(TableLimits::default());
        for i in 0..37 {
            h.exchange(
                doc! {"find": "orders", "filter": {"customerId": i}, "batchSize": 2, "$db": "shop"},
                batch(2, 500 + i as i64, true),
                1_000 + i as u64 * 10,
            );
            h.exchange(
                doc! {"getMore": 500 + i as i64, "collection": "orders", "$db": "shop"},
                batch(1, 0, false),
                300,
            );
        }
        for _ in 0..12 {
            h.exchange(doc! {"update": "orders", "updates": [{"q": {"_id": 1}, "u": {"$set": {"s": 1}}}], "$db": "shop"}, doc! {"n": 1, "nModified": 1, "ok": 1}, 500);
        }
        h.exchange(
            doc! {"find": "orders", "filter": {"customerId": {"$gt": 5}}, "$db": "shop"},
            doc! {"ok": 0, "code": 2, "errmsg": "x"},
            50,
        );
        let rows = h.t.rows();
        assert_eq!(rows.len(), 4);
        let (find, get_more, update, failing) = (rows[0], rows[1], rows[2], rows[3]);
        assert_eq!((find.command.as_str(), find.count, find.docs_returned), ("find", 37, 74));
        assert_eq!((get_more.command.as_str(), get_more.count, get_more.docs_returned), ("getMore", 37, 37));
        assert_eq!(get_more.cursor_of.as_deref(), Some(find.shape_id.as_str()));
        assert_eq!(get_more.shape["shape"], find.shape);
        assert_eq!((update.command.as_str(), update.count, update.statements), ("update", 12, 12));
        assert_eq!(failing.errors.get(&2), Some(&1));
        assert_eq!(find.latency_ms(0.0), Some(1.0));
        let p99 = find.latency_ms(0.99).unwrap();
        assert!((1.3..=1.37).contains(&p99), "{p99}");
        assert!(find.fields_read.contains("total") && find.fields_read.contains("_id"));
        assert_eq!(find.apps.get("(no app name)"), Some(&37));
        assert_eq!(h.t.operations(), 87);
        assert!(h.t.cursors.is_empty(), "exhausted cursors are forgotten");
    }

    #[test]
    fn latencies_switch_from_samples_to_a_histogram_with_the_same_answers() {
        for n in [1u64, 5, 32, 33, 500] {
            let (mut l, mut h) = (Latencies::default(), Latencies::new_histogram());
            for i in 0..n {
                let us = 50 + (i * 7919) % 20_000;
                l.record(us);
                h.record(us).unwrap();
            }
            assert_eq!(matches!(l, Latencies::Few(_)), n <= Latencies::FEW as u64, "{n}");
            let got = l.histogram();
            for q in [0.0, 0.5, 0.95, 0.99, 1.0] {
                assert_eq!(got.value_at_quantile(q), h.value_at_quantile(q), "{n} samples, q {q}");
            }
            assert_eq!((got.len(), got.max()), (h.len(), h.max()));
        }
    }

    #[test]
    fn shapes_beyond_the_cap_go_to_one_other_row() {
        let mut h = Harness::new(TableLimits { max_shapes: 3, ..TableLimits::default() });
        for i in 0..10 {
            let field = format!("f{i}");
            h.exchange(doc! {"find": "c", "filter": {field: 1}, "$db": "t"}, batch(0, 0, true), 10);
        }
        let rows = h.t.rows();
        assert_eq!(rows.len(), 4);
        assert_eq!(h.t.other_shapes(), 7);
        let other = rows.iter().find(|r| r.shape_id == OTHER_SHAPES).unwrap();
        assert_eq!(other.count, 7);
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 10, "nothing silently lost");
    }

    #[test]
    fn examples_only_with_show_values_and_never_for_auth() {
        let mut h = Harness::new(TableLimits::default());
        h.exchange(
            doc! {"find": "c", "filter": {"email": "a@b.c"}, "lsid": {"id": 1}, "$db": "t"},
            batch(0, 0, true),
            10,
        );
        assert!(h.t.rows()[0].example.is_none(), "values are redacted by default");

        let mut h = Harness::new(TableLimits { show_values: true, ..TableLimits::default() });
        h.exchange(
            doc! {"find": "c", "filter": {"email": "a@b.c"}, "lsid": {"id": 1}, "$db": "t"},
            batch(0, 0, true),
            10,
        );
        h.exchange(doc! {"saslStart": 1, "payload": "secret", "$db": "admin"}, doc! {"ok": 1}, 10);
        let rows = h.t.rows();
        let find = rows.iter().find(|r| r.command == "find").unwrap();
        assert_eq!(find.example, Some(json!({"find": "c", "filter": {"email": "a@b.c"}})));
        let sasl = rows.iter().find(|r| r.command == "saslStart").unwrap();
        assert!(sasl.example.is_none());
    }

    #[test]
    fn projections_name_the_data_needed() {
        let mut h = Harness::new(TableLimits::default());
        h.exchange(
            doc! {"find": "c", "filter": {}, "projection": {"name": 1, "_id": 0}, "$db": "t"},
            batch(1, 0, true),
            10,
        );
        let row = h.t.rows()[0];
        assert_eq!(row.fields_read.iter().collect::<Vec<_>>(), ["name"]);
    }
}
