//! The workload in the seeds' own terms: the application's operations (units of
//! work, not queries) with their frequency and the data each needs, and the
//! relationships between collections with the embed-or-reference verdict the guides
//! decide once per relationship. Fed by the pipeline with every operation, after
//! the table (which gives the shape ids) and before the report.
//!
//! # Layout
//! - [`units`]: requests grouped into units of work as they run, per client
//!   ([`carrier`]: how much of a reply to walk for the values later steps take;
//!   [`held`]: which values a unit may hold, told without a look-up).
//! - [`operations`]: units that ran the same steps, counted together; report rows.
//! - [`relationships`]: links between collections, the four questions answered,
//!   the verdict ([`relationships::findings`]: the findings where the change pays).

mod carrier;
mod held;
pub mod operations;
pub mod relationships;
pub(crate) mod units;

use std::collections::BTreeMap;

use crate::detectors::Thresholds;
use crate::event::Micros;
use crate::finding::Finding;
use crate::table::AccessTable;
use crate::view::OpView;

use operations::{Operation, Operations};
use relationships::{Relationship, Relationships};
use units::{Unit, Units};

/// The report's two workload sections (see [`Workload::sections`]).
pub struct Sections {
    pub operations: Vec<Operation>,
    pub relationships: Vec<Relationship>,
}

/// The workload: units in progress, and what the ended ones added up to.
pub struct Workload {
    units: Units,
    operations: Operations,
    relationships: Relationships,
    t: Thresholds,
    /// Boxed, as the open ones are (see [`units`]).
    #[allow(clippy::vec_box)]
    done: Vec<Box<Unit>>,
}

impl Workload {
    /// An empty workload with these thresholds and bounds.
    pub fn new(t: &Thresholds) -> Workload {
        Workload {
            units: Units::new(t.operation_gap_ms, t.max_clients, t.max_open_parents),
            operations: Operations::default(),
            relationships: Relationships::default(),
            t: t.clone(),
            done: Vec::new(),
        }
    }

    /// Takes one operation.
    pub fn observe(&mut self, v: &OpView<'_>) {
        self.units.observe(v, &mut self.done);
        self.fold();
    }

    /// Ends the units idle since before `now`.
    pub fn expire(&mut self, now: Micros) {
        self.units.expire(now, &mut self.done);
        self.fold();
    }

    /// Events were dropped: the units open now may miss steps (their operations are
    /// marked as lower bounds).
    pub fn on_gap(&mut self) {
        self.units.on_gap();
    }

    fn fold(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        for u in done.drain(..) {
            end(&u, &mut self.operations, &mut self.relationships, &self.units, &self.t);
            self.units.recycle(u);
        }
        self.done = done;
    }

    /// The operations, busiest first, and the relationships between collections
    /// with their verdicts: the units still open are folded in once for both, as if
    /// they ended now.
    pub fn sections(&self, table: &AccessTable, seconds: f64) -> Sections {
        let mut open = Operations::default();
        let mut rels = self.relationships.snapshot();
        for u in self.units.open() {
            end(u, &mut open, &mut rels, &self.units, &self.t);
        }
        Sections {
            operations: self.operations.rows(&open, table, &self.units.paths, &self.t, seconds),
            relationships: rels.rows(table, &self.t),
        }
    }

    /// Adds the relationship findings to `findings`, and the relationship verdicts
    /// to the N+1 and `$lookup` findings on the same links.
    pub fn reconcile(&self, sections: &Sections, findings: &mut Vec<Finding>) {
        let total = sections.operations.iter().map(|o| o.count).sum();
        relationships::reconcile(&sections.relationships, findings, total, &self.t);
    }

    /// What was let go of to stay bounded, by kind.
    pub fn evictions(&self) -> BTreeMap<String, u64> {
        [
            ("workload.units", self.units.evicted),
            ("workload.operations", self.operations.refused),
            ("workload.relationships", self.relationships.refused),
            ("workload.relationship_values", self.relationships.values_refused),
            ("workload.paths", self.units.paths.refused),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.to_owned(), n))
        .collect()
    }
}

/// Folds one ended (or still open) unit into the operations and relationships.
fn end(
    u: &Unit,
    operations: &mut Operations,
    relationships: &mut Relationships,
    units: &Units,
    t: &Thresholds,
) {
    let signature = operations::signature(u);
    operations.add(u, signature, t.max_patterns as usize);
    relationships.add(u, signature, &units.paths);
}

#[cfg(test)]
mod tests;
