//! One pipeline from tap events to everything the report shows: the correlator
//! pairs messages into operations, and each operation goes to every analyzer.
//! The live proxy and the offline inputs feed the same pipeline.

use crate::detectors::Detectors;
use crate::event::{Micros, TapEvent};
use crate::exchange::{Correlator, ExchangeStats, Limits};
use crate::finding::Finding;
use crate::namespace::Epochs;
use crate::operation::Operation;
use crate::schema::Schemas;
use crate::shape::memo::Memo;
use crate::sharding::ShardKeys;
use crate::table::{AccessTable, TableLimits};
use crate::view::{OpView, ShapeId};
use crate::workload::{Sections, Workload};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

/// Events in, operations out to the analyzers.
pub struct Pipeline {
    correlator: Correlator,
    seen: Seen,
    /// What each collection's documents look like. Apart from the other analyzers:
    /// it needs nothing of theirs, so a split pipeline walks documents on the
    /// correlator's thread (see [`Pipeline::split`]).
    schemas: Schemas,
    analyzers: Analyzers,
}

/// The events fed so far, and their time span.
#[derive(Default)]
struct Seen {
    events: u64,
    first_at: Option<Micros>,
    last_at: Micros,
}

/// Everything after the correlator but the schemas: what each completed operation
/// goes to.
struct Analyzers {
    table: AccessTable,
    detectors: Detectors,
    operations: u64,
    /// The shape of the last operation completed (see [`Pipeline::last_shape`]).
    last_shape: Option<ShapeId>,
    /// Each namespace's epoch: drops and renames end what detectors remember.
    epochs: Epochs,
    shard_keys: ShardKeys,
    /// The application's operations and relationships.
    workload: Workload,
    /// The shapes of the calls seen before.
    shapes: Memo,
}

/// What the correlator's side hands the analyzers, in the order it happened.
// Nearly every step is an operation: boxing it would only add an allocation each.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Events were dropped somewhere.
    Gap { at: Micros, dropped: u64 },
    /// An operation completed.
    Operation(Operation),
    /// Time to close what has timed out, as of this time.
    Expire(Micros),
}

/// Operations handed from one thread to the other at a time (see [`Pipeline::split`]).
/// Small: the analyzers wait for the first batch, and analyse the last after the
/// reading is done; on a 10 MB capture 256 cost more in that wait than the hand-overs
/// of 64 do (bench/offline.sh).
const BATCH: usize = 64;

/// Batches in flight between the threads: bounded memory. When the analyzers are
/// the slower side, the reading runs ahead by this much whatever it is; more only
/// held more operations.
const BATCHES: usize = 8;

impl Seen {
    /// Counts `ev`, then has the correlator turn it into steps.
    fn feed(&mut self, correlator: &mut Correlator, ev: TapEvent, out: &mut dyn FnMut(Step)) {
        self.events += 1;
        let at = ev.at();
        self.first_at.get_or_insert(at);
        self.last_at = self.last_at.max(at);
        if let TapEvent::Gap { dropped, .. } = ev {
            out(Step::Gap { at, dropped });
        }
        correlator.on_event(ev, &mut |op| out(Step::Operation(op)));
    }

    fn expire(&mut self, correlator: &mut Correlator, now: Micros, out: &mut dyn FnMut(Step)) {
        correlator.expire(now);
        out(Step::Expire(self.last_at));
    }
}

impl Analyzers {
    /// Takes one step; an operation's documents go to `schemas` too, unless the
    /// correlator's side walked them already.
    fn apply(&mut self, step: &Step, schemas: Option<&mut Schemas>) {
        match step {
            Step::Gap { at, dropped } => {
                // Events were dropped somewhere: what detectors follow across events
                // (a parent and its children, a run of reads) may have a hole, and the
                // rows seen since the last gap are likely short of some operations.
                self.detectors.on_gap(*at);
                self.workload.on_gap();
                self.table.charge_loss(*dropped);
            }
            Step::Operation(op) => self.on_operation(op, schemas),
            Step::Expire(last_at) => {
                let last_at = *last_at;
                self.table.expire(last_at);
                self.detectors.expire(last_at);
                self.workload.expire(last_at);
            }
        }
    }

    fn on_operation(&mut self, op: &Operation, schemas: Option<&mut Schemas>) {
        self.operations += 1;
        // Decoded once; the table fills in the shape ids the detectors read.
        let mut view = OpView::remembered(op, &mut self.shapes);
        view.epoch = self.epochs.of(&op.namespace);
        self.table.record(&mut view);
        if let Some(schemas) = schemas {
            schemas.observe(&view);
        }
        self.shard_keys.observe(&view);
        self.detectors.on_operation(&view);
        self.workload.observe(&view);
        if let Some(change) = &view.change {
            self.epochs.apply(change);
        }
        self.last_shape = view.read_shape();
    }
}

/// Takes tap events: a [`Pipeline`] itself, or the correlator's side of one split
/// over two threads ([`Front`]).
pub trait Feed {
    /// Feeds one event.
    fn feed(&mut self, ev: TapEvent);
    /// As [`Pipeline::expire`].
    fn expire(&mut self, now: Micros);
}

impl Feed for Pipeline {
    fn feed(&mut self, ev: TapEvent) {
        Pipeline::feed(self, ev)
    }
    fn expire(&mut self, now: Micros) {
        Pipeline::expire(self, now)
    }
}

/// The correlator's side of a pipeline split over threads (see [`Pipeline::split`]):
/// it reads, decodes, decompresses and pairs, hands the operations over to the
/// analyzers in batches, and walks each batch's documents for the schemas while the
/// analyzers work on it. The batches come back once the analyzers are done with
/// them, to be freed on the thread that allocated them (a free from another thread
/// costs the allocator several times more).
pub struct Front<'p> {
    correlator: &'p mut Correlator,
    seen: &'p mut Seen,
    batch: Vec<Step>,
    schemas: &'p mut Schemas,
    to_analyzers: SyncSender<Arc<Vec<Step>>>,
    analysed: Receiver<Arc<Vec<Step>>>,
    /// The analyzers are gone (they panicked): nothing more is worth decoding.
    stopped: bool,
}

impl Front<'_> {
    fn flush_when_full(&mut self) {
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        // Every batch back from the analyzers is cleared here, on the thread that
        // made its frames, and one of them is filled again. (Taking back one batch a
        // flush let the returned ones queue up: the messages of a 10 MB capture's
        // operations were kept long after they were analysed, and every message was
        // copied into memory never touched before.)
        let mut reused = None;
        while let Ok(back) = self.analysed.try_recv() {
            // This side's copy went when the flush that sent it ended.
            let mut done = Arc::into_inner(back).expect("only the analyzers held it");
            done.clear();
            reused.get_or_insert(done);
        }
        let mut next = reused.unwrap_or_else(|| Vec::with_capacity(BATCH));
        std::mem::swap(&mut self.batch, &mut next);
        let next = Arc::new(next);
        // The analyzers end only by a panic, which the scope passes on once this side
        // returns: it stops decoding now. While they analyse the batch, its
        // documents are walked here for the schemas.
        self.stopped |= self.to_analyzers.send(next.clone()).is_err();
        for step in next.iter() {
            if let Step::Operation(op) = step {
                self.schemas.observe(&OpView::unshaped(op));
            }
        }
    }
}

impl Feed for Front<'_> {
    fn feed(&mut self, ev: TapEvent) {
        if self.stopped {
            return;
        }
        let (seen, correlator, batch) = (&mut *self.seen, &mut *self.correlator, &mut self.batch);
        seen.feed(correlator, ev, &mut |step| batch.push(step));
        self.flush_when_full();
    }

    fn expire(&mut self, now: Micros) {
        if self.stopped {
            return;
        }
        let (seen, correlator, batch) = (&mut *self.seen, &mut *self.correlator, &mut self.batch);
        seen.expire(correlator, now, &mut |step| batch.push(step));
        self.flush_when_full();
    }
}

impl Pipeline {
    /// A pipeline with the given bounds and every detector at its default thresholds.
    pub fn new(limits: Limits, table: TableLimits) -> Pipeline {
        Pipeline::with_detectors(limits, table, Detectors::default())
    }

    /// A pipeline with the given bounds and detectors.
    pub fn with_detectors(limits: Limits, table: TableLimits, detectors: Detectors) -> Pipeline {
        Pipeline {
            correlator: Correlator::new(limits),
            seen: Seen::default(),
            schemas: Schemas::showing_values(table.show_values),
            analyzers: Analyzers {
                table: AccessTable::new(table),
                operations: 0,
                last_shape: None,
                epochs: Epochs::default(),
                shard_keys: ShardKeys::default(),
                workload: Workload::new(detectors.thresholds()),
                detectors,
                shapes: Memo::default(),
            },
        }
    }

    /// Feeds one event.
    pub fn feed(&mut self, ev: TapEvent) {
        let (analyzers, schemas) = (&mut self.analyzers, &mut self.schemas);
        self.seen.feed(&mut self.correlator, ev, &mut |step| analyzers.apply(&step, Some(schemas)));
    }

    /// Runs `produce` on a thread of its own, feeding this pipeline's correlator
    /// there (the reading, decoding, decompressing and pairing, then the schemas'
    /// walk of each batch), while this thread runs the other analyzers, each on the
    /// operations in the order they complete: the same state as feeding the pipeline
    /// itself. Two threads: the walk had a third one, which on two cores shared one
    /// with the analyzers, woken for every batch, while the reading waited on the
    /// other (a 10 MB capture: 21.1 ms against 18.3 with two, medians of 40; a 1 GB
    /// one on two cores 0.63 s against 0.67, on one 1.22 s against 1.11).
    pub fn split<R: Send>(&mut self, produce: impl FnOnce(&mut Front<'_>) -> R + Send) -> R {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<Vec<Step>>>(BATCHES);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Arc<Vec<Step>>>();
        let Pipeline { correlator, seen, schemas, analyzers } = self;
        std::thread::scope(|scope| {
            let front = scope.spawn(move || {
                let batch = Vec::with_capacity(BATCH);
                let mut front = Front {
                    correlator,
                    seen,
                    batch,
                    schemas,
                    to_analyzers: tx,
                    analysed: done_rx,
                    stopped: false,
                };
                let r = produce(&mut front);
                front.flush();
                r
            });
            for batch in rx {
                batch.iter().for_each(|step| analyzers.apply(step, None));
                // Back to be freed there; once the front is done, freed here.
                let _ = done_tx.send(batch);
            }
            front.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Forgets what has waited too long (see [`Correlator::expire`]) and lets the
    /// detectors close what has timed out. The detectors go by the events' own time,
    /// so an analysis that lags behind the traffic does not cut their windows short.
    pub fn expire(&mut self, now: Micros) {
        let (analyzers, schemas) = (&mut self.analyzers, &mut self.schemas);
        self.seen.expire(&mut self.correlator, now, &mut |step| analyzers.apply(&step, Some(schemas)));
    }

    /// The table's shape of the last operation completed (for a getMore, its
    /// cursor's): where an offline input files what it knows of that operation's
    /// plan.
    pub fn last_shape(&self) -> Option<ShapeId> {
        self.analyzers.last_shape
    }

    /// The detectors.
    pub fn detectors(&self) -> &Detectors {
        &self.analyzers.detectors
    }

    /// What the detectors found so far, with the relationships' findings and the
    /// relationship verdicts named in the N+1 and `$lookup` findings on their links.
    pub fn findings(&self) -> Vec<Finding> {
        let a = &self.analyzers;
        self.findings_beside(&a.workload.sections(&a.table, 1.0))
    }

    /// [`Pipeline::findings`], given this pipeline's workload sections
    /// (`workload().sections(..)`: a report has them; their `seconds` changes only
    /// the rates, which the findings do not read).
    pub fn findings_beside(&self, workload: &Sections) -> Vec<Finding> {
        let a = &self.analyzers;
        let mut findings = a.detectors.findings(&a.table, &self.schemas);
        a.workload.reconcile(workload, &mut findings);
        let catalog = a.detectors.catalog().lock().unwrap_or_else(|e| e.into_inner());
        findings.extend(crate::sharding::current::findings(
            &a.shard_keys,
            &a.table,
            a.detectors.thresholds(),
            &catalog,
        ));
        findings
    }

    /// The application's operations and relationships.
    pub fn workload(&self) -> &Workload {
        &self.analyzers.workload
    }

    /// What each collection's documents look like.
    pub fn schemas(&self) -> &Schemas {
        &self.schemas
    }

    /// What the inserts showed of each collection's candidate shard-key values.
    pub fn shard_keys(&self) -> &ShardKeys {
        &self.analyzers.shard_keys
    }

    /// Events fed so far.
    pub fn events(&self) -> u64 {
        self.seen.events
    }

    /// Operations completed so far.
    pub fn operations(&self) -> u64 {
        self.analyzers.operations
    }

    /// The access-pattern table.
    pub fn table(&self) -> &AccessTable {
        &self.analyzers.table
    }

    /// Connections whose state the correlator holds now.
    pub fn open_connections(&self) -> usize {
        self.correlator.open_connections()
    }

    /// The correlator's counters.
    pub fn exchange_stats(&self) -> &ExchangeStats {
        self.correlator.stats()
    }

    /// The time span of the events seen: first and last timestamps.
    pub fn window(&self) -> Option<(Micros, Micros)> {
        self.seen.first_at.map(|f| (f, self.seen.last_at))
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new(Limits::default(), TableLimits::default())
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;
    use crate::report::{json, Report, RunFacts};
    use crate::script::Script;

    /// A conversation with something for every analyzer: a blog page and its N+1,
    /// inserts of readings, updates, a gap, and time enough to expire.
    fn conversation() -> Script {
        let mut s = Script::new();
        let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        let jobs = s.connect("10.0.0.8:50002", "jobs", "nodejs 6.9.0");
        for page in 0..30 {
            let posts = (0..10).map(|i| doc! {"_id": page * 10 + i, "authorId": 1000 + page * 10 + i});
            s.find(web, "blog.posts", doc! {"published": true}, posts.collect());
            for i in 0..10 {
                let author = 1000 + page * 10 + i;
                s.find(web, "blog.users", doc! {"_id": author}, vec![doc! {"_id": author, "name": "n"}]);
            }
            let reading =
                doc! {"sensorId": page % 7, "ts": bson::DateTime::from_millis(page as i64), "value": 1.5};
            s.exchange(
                jobs,
                doc! {"insert": "readings", "documents": [reading], "$db": "iot"},
                doc! {"n": 1, "ok": 1.0},
            );
            s.update(jobs, "blog.posts", doc! {"_id": page}, doc! {"$push": {"comments": {"by": 1}}});
            if page == 12 {
                s.gap(3);
            }
            s.wait_ms(700);
        }
        s.close(web);
        s
    }

    fn report(p: &Pipeline) -> String {
        json::render(&Report::build(p, RunFacts::default()))
    }

    /// Feeds like an offline input: each event, and expiry once a second of its time.
    fn feed_all(events: &[TapEvent], p: &mut impl Feed) {
        let mut last = None;
        for ev in events {
            let at = ev.at();
            p.feed(ev.clone());
            if at.saturating_sub(*last.get_or_insert(at)) > 1_000_000 {
                p.expire(at);
                last = Some(at);
            }
        }
    }

    #[test]
    fn a_split_pipeline_reports_what_it_reports_on_one_thread() {
        let events = conversation().events().to_vec();
        let mut one = Pipeline::default();
        feed_all(&events, &mut one);
        let mut two = Pipeline::default();
        let fed = two.split(|front| {
            feed_all(&events, front);
            events.len()
        });
        assert_eq!(fed, events.len());
        let kinds: Vec<String> = one.findings().iter().map(|f| f.kind.to_string()).collect();
        assert!(
            one.operations() >= 390 && kinds.iter().any(|k| k == "n_plus_one"),
            "{} operations, {kinds:?}",
            one.operations()
        );
        assert_eq!(two.operations(), one.operations());
        assert_eq!(two.events(), one.events());
        assert_eq!(report(&two), report(&one));
    }
}
