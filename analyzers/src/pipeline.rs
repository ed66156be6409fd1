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
use crate::sharding::ShardKeys;
use crate::table::{AccessTable, TableLimits};
use crate::view::{OpView, ShapeId};
use crate::workload::Workload;

/// Events in, operations out to the analyzers.
pub struct Pipeline {
    correlator: Correlator,
    table: AccessTable,
    detectors: Detectors,
    events: u64,
    operations: u64,
    first_at: Option<Micros>,
    last_at: Micros,
    /// The shape of the last operation completed (see [`Pipeline::last_shape`]).
    last_shape: Option<ShapeId>,
    /// Each namespace's epoch: drops and renames end what detectors remember.
    epochs: Epochs,
    /// What each collection's documents look like.
    schemas: Schemas,
    shard_keys: ShardKeys,
    /// The application's operations and relationships.
    workload: Workload,
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
            table: AccessTable::new(table),
            events: 0,
            operations: 0,
            first_at: None,
            last_at: 0,
            last_shape: None,
            epochs: Epochs::default(),
            schemas: Schemas::default(),
            shard_keys: ShardKeys::default(),
            workload: Workload::new(detectors.thresholds()),
            detectors,
        }
    }

    /// Feeds one event.
    pub fn feed(&mut self, ev: TapEvent) {
        self.events += 1;
        let at = ev.at();
        self.first_at.get_or_insert(at);
        self.last_at = self.last_at.max(at);
        if let TapEvent::Gap { dropped, .. } = ev {
            // Events were dropped somewhere: what detectors follow across events
            // (a parent and its children, a run of reads) may have a hole, and the
            // rows seen since the last gap are likely short of some operations.
            self.detectors.on_gap(at);
            self.workload.on_gap();
            self.table.charge_loss(dropped);
        }
        let (ops, last_shape, epochs) = (&mut self.operations, &mut self.last_shape, &mut self.epochs);
        let (table, detectors, schemas, workload, shard_keys) = (
            &mut self.table,
            &mut self.detectors,
            &mut self.schemas,
            &mut self.workload,
            &mut self.shard_keys,
        );
        self.correlator.on_event(ev, &mut |op: Operation| {
            *ops += 1;
            // Decoded once; the table fills in the shape ids the detectors read.
            let mut view = OpView::new(&op);
            view.epoch = epochs.of(&op.namespace);
            table.record(&mut view);
            schemas.observe(&view);
            shard_keys.observe(&view);
            detectors.on_operation(&view);
            workload.observe(&view);
            if let Some(change) = &view.change {
                epochs.apply(change);
            }
            *last_shape = view.read_shape();
        });
    }

    /// Forgets what has waited too long (see [`Correlator::expire`]) and lets the
    /// detectors close what has timed out. The detectors go by the events' own time,
    /// so an analysis that lags behind the traffic does not cut their windows short.
    pub fn expire(&mut self, now: Micros) {
        self.correlator.expire(now);
        self.table.expire(self.last_at);
        self.detectors.expire(self.last_at);
        self.workload.expire(self.last_at);
    }

    /// The table's shape of the last operation completed (for a getMore, its
    /// cursor's): where an offline input files what it knows of that operation's
    /// plan.
    pub fn last_shape(&self) -> Option<ShapeId> {
        self.last_shape
    }

    /// The detectors.
    pub fn detectors(&self) -> &Detectors {
        &self.detectors
    }

    /// What the detectors found so far, with the relationships' findings and the
    /// relationship verdicts named in the N+1 and `$lookup` findings on their links.
    pub fn findings(&self) -> Vec<Finding> {
        let mut findings = self.detectors.findings(&self.table, &self.schemas);
        self.workload.reconcile(&self.table, &mut findings);
        findings
    }

    /// The application's operations and relationships.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// What each collection's documents look like.
    pub fn schemas(&self) -> &Schemas {
        &self.schemas
    }

    /// What the inserts showed of each collection's candidate shard-key values.
    pub fn shard_keys(&self) -> &ShardKeys {
        &self.shard_keys
    }

    /// Events fed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Operations completed so far.
    pub fn operations(&self) -> u64 {
        self.operations
    }

    /// The access-pattern table.
    pub fn table(&self) -> &AccessTable {
        &self.table
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
        self.first_at.map(|f| (f, self.last_at))
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new(Limits::default(), TableLimits::default())
    }
}
