//! One pipeline from tap events to everything the report shows: the correlator
//! pairs messages into operations, and each operation goes to every analyzer.
//! The live proxy and the offline inputs feed the same pipeline.

use crate::event::{Micros, TapEvent};
use crate::exchange::{Correlator, ExchangeStats, Limits};
use crate::operation::Operation;
use crate::table::{AccessTable, TableLimits};

/// Events in, operations out to the analyzers.
pub struct Pipeline {
    correlator: Correlator,
    table: AccessTable,
    events: u64,
    operations: u64,
    first_at: Option<Micros>,
    last_at: Micros,
}

impl Pipeline {
    /// A pipeline with the given correlator bounds.
    pub fn new(limits: Limits, table: TableLimits) -> Pipeline {
        Pipeline {
            correlator: Correlator::new(limits),
            table: AccessTable::new(table),
            events: 0,
            operations: 0,
            first_at: None,
            last_at: 0,
        }
    }

    /// Feeds one event.
    pub fn feed(&mut self, ev: TapEvent) {
        self.events += 1;
        let at = ev.at();
        self.first_at.get_or_insert(at);
        self.last_at = self.last_at.max(at);
        let ops = &mut self.operations;
        let table = &mut self.table;
        self.correlator.on_event(ev, &mut |op: Operation| {
            *ops += 1;
            table.record(&op);
        });
    }

    /// Forgets what has waited too long (see [`Correlator::expire`]).
    pub fn expire(&mut self, now: Micros) {
        self.correlator.expire(now);
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
