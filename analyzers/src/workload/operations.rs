//! Operations: the units of work that ran the same steps, counted together, and
//! their rows in the report (`operations`), in the seeds' own terms: "Operation |
//! Frequency | Data needed", then round trips and collections touched.
//!
//! Two units are the same operation when they ran the same steps (shapes, in the
//! order first run) with the same links; how many times a step ran in each (N
//! products for an order's N lines) is a figure of the operation, not part of it.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::units::{Link, Unit};
use crate::detectors::Thresholds;
use crate::event::Micros;
use crate::names::Paths;
use crate::operation::NO_APP;
use crate::shape::hex;
use crate::table::{AccessTable, Latencies};
use crate::view::ShapeId;

/// Apps named per operation.
const MAX_APPS: usize = 8;

/// One step of an operation as the report writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Step {
    pub namespace: String,
    pub command: String,
    pub shape_id: String,
    /// Executions of the step per operation, on average.
    pub per_operation: f64,
    /// Where its values came from, when they came from an earlier step.
    pub link: Option<StepLink>,
    /// Whether the step writes.
    #[serde(default)]
    pub write: bool,
}

/// A step's values, taken from an earlier step's documents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepLink {
    pub from_step: usize,
    pub parent_field: String,
    pub child_field: String,
}

/// The fields one collection's documents give an operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DataNeeded {
    pub namespace: String,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundTrips {
    pub mean: f64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Documents {
    pub mean: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Span {
    pub p50: f64,
    pub p99: f64,
}

/// One operation of the application, as the report writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Operation {
    pub id: String,
    pub name: String,
    pub count: u64,
    pub share: f64,
    pub rate_per_s: f64,
    /// "very high", "high", "medium" or "low" (bands in `mongotap detectors`).
    pub frequency: String,
    pub steps: Vec<Step>,
    pub data_needed: Vec<DataNeeded>,
    pub round_trips: RoundTrips,
    pub documents: Documents,
    /// From the first request to the last reply.
    pub latency_ms: Option<Span>,
    pub apps: Vec<String>,
    /// The collections it touches.
    #[serde(default)]
    pub collections: Vec<String>,
    /// The guides' checklist: does it need one round trip to one collection?
    #[serde(default)]
    pub one_round_trip: bool,
    /// Events were dropped while some of its units ran: the count is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_lower_bound: bool,
}

/// One step of an operation, as counted.
#[derive(Debug, Clone, PartialEq)]
struct StepKey {
    shape: ShapeId,
    link: Option<Link>,
    write: bool,
}

/// An operation's figures over the units that ran it.
#[derive(Debug, Clone)]
struct Stat {
    steps: Vec<StepKey>,
    /// Executions of each step, over all units.
    executions: Vec<u64>,
    count: u64,
    round_trips: u64,
    max_round_trips: u64,
    docs: u64,
    latency_us: Latencies,
    apps: BTreeSet<String>,
    first_at: Micros,
    last_at: Micros,
    lossy: bool,
}

/// Every operation seen.
#[derive(Default)]
pub(crate) struct Operations {
    stats: FxHashMap<u64, Stat>,
    /// Units not counted because the operations' bound was reached.
    pub refused: u64,
}

/// A unit's signature: its steps and links, counts aside.
pub(crate) fn signature(u: &Unit) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for s in &u.steps {
        h.write_u64(s.shape);
        match s.link {
            Some(l) => {
                h.write_u8(1);
                h.write_u8(l.from);
                h.write_u32(l.path);
                h.write_u32(l.field);
            }
            None => h.write_u8(0),
        }
    }
    h.finish()
}

impl Operations {
    /// Counts one ended unit, whose [`signature`] is `sig`.
    pub(crate) fn add(&mut self, u: &Unit, sig: u64, max: usize) {
        if u.steps.is_empty() {
            return;
        }
        if !self.stats.contains_key(&sig) && self.stats.len() >= max {
            self.refused += 1;
            return;
        }
        let s = self.stats.entry(sig).or_insert_with(|| Stat {
            steps: u.steps.iter().map(|s| StepKey { shape: s.shape, link: s.link, write: s.write }).collect(),
            executions: vec![0; u.steps.len()],
            count: 0,
            round_trips: 0,
            max_round_trips: 0,
            docs: 0,
            latency_us: Latencies::default(),
            apps: BTreeSet::new(),
            first_at: u.started,
            last_at: u.last,
            lossy: false,
        });
        s.count += 1;
        for (e, step) in s.executions.iter_mut().zip(&u.steps) {
            *e += u64::from(step.count);
        }
        s.round_trips += u64::from(u.requests);
        s.max_round_trips = s.max_round_trips.max(u64::from(u.requests));
        s.docs += u.docs;
        s.latency_us.record(u.last.saturating_sub(u.started));
        s.first_at = s.first_at.min(u.started);
        s.last_at = s.last_at.max(u.last);
        s.lossy |= u.lossy;
        let app = u.conn.app_name.as_deref().unwrap_or(NO_APP);
        if s.apps.len() < MAX_APPS && !s.apps.contains(app) {
            s.apps.insert(app.to_owned());
        }
    }

    /// The operations as the report writes them, busiest first. `open` are the
    /// units still running, counted as if they ended now.
    pub(crate) fn rows(
        &self,
        open: &Operations,
        table: &AccessTable,
        paths: &Paths,
        t: &Thresholds,
        seconds: f64,
    ) -> Vec<Operation> {
        let mut all: FxHashMap<u64, Stat> = self.stats.clone();
        for (sig, s) in &open.stats {
            match all.get_mut(sig) {
                Some(a) => {
                    a.count += s.count;
                    for (x, y) in a.executions.iter_mut().zip(&s.executions) {
                        *x += y;
                    }
                    a.round_trips += s.round_trips;
                    a.max_round_trips = a.max_round_trips.max(s.max_round_trips);
                    a.docs += s.docs;
                    let h = s.latency_us.histogram();
                    for v in h.iter_recorded() {
                        for _ in 0..v.count_at_value().min(64) {
                            a.latency_us.record(v.value_iterated_to());
                        }
                    }
                    a.apps.extend(s.apps.iter().cloned());
                    a.lossy |= s.lossy;
                }
                None => {
                    all.insert(*sig, s.clone());
                }
            }
        }
        let rows: FxHashMap<ShapeId, &crate::table::Row> =
            table.rows().into_iter().filter(|r| r.id != 0).map(|r| (r.id, r)).collect();
        let total: u64 = all.values().map(|s| s.count).sum();
        let mut out: Vec<Operation> = all
            .iter()
            .map(|(sig, s)| {
                let share = s.count as f64 / total.max(1) as f64;
                let steps: Vec<Step> = s
                    .steps
                    .iter()
                    .zip(&s.executions)
                    .map(|(k, n)| {
                        let row = rows.get(&k.shape);
                        Step {
                            namespace: row.map_or_else(|| "?".into(), |r| r.namespace.clone()),
                            command: row.map_or_else(|| "?".into(), |r| r.command.clone()),
                            shape_id: hex(k.shape),
                            per_operation: round(*n as f64 / s.count.max(1) as f64, 2),
                            link: k.link.map(|l| StepLink {
                                from_step: usize::from(l.from),
                                parent_field: paths.name(l.path).to_owned(),
                                child_field: paths.name(l.field).to_owned(),
                            }),
                            write: k.write,
                        }
                    })
                    .collect();
                let mut needed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                for k in &s.steps {
                    if let Some(r) = rows.get(&k.shape) {
                        let fields = needed.entry(r.namespace.clone()).or_default();
                        if !k.write {
                            fields.extend(r.fields_read.iter().cloned());
                        }
                        // The collections an aggregation joins are touched too.
                        let db = r.namespace.split_once('.').map_or(r.namespace.as_str(), |(d, _)| d);
                        for joined in lookups(&r.shape) {
                            needed.entry(format!("{db}.{joined}")).or_default();
                        }
                    }
                }
                let collections: Vec<String> = needed.keys().cloned().collect();
                let h = s.latency_us.histogram();
                let span = (!h.is_empty()).then(|| Span {
                    p50: h.value_at_quantile(0.5) as f64 / 1000.0,
                    p99: h.value_at_quantile(0.99) as f64 / 1000.0,
                });
                let span_s = s.last_at.saturating_sub(s.first_at) as f64 / 1e6;
                Operation {
                    id: hex(*sig),
                    name: name(&steps, &rows, &s.steps),
                    count: s.count,
                    share: round(share, 4),
                    rate_per_s: round(s.count as f64 / seconds.max(span_s).max(1.0), 3),
                    frequency: band(share, t).to_owned(),
                    one_round_trip: s.max_round_trips <= 1 && collections.len() <= 1,
                    data_needed: needed
                        .into_iter()
                        .map(|(namespace, fields)| DataNeeded {
                            namespace,
                            fields: fields.into_iter().collect(),
                        })
                        .collect(),
                    collections,
                    steps,
                    round_trips: RoundTrips {
                        mean: round(s.round_trips as f64 / s.count.max(1) as f64, 2),
                        max: s.max_round_trips,
                    },
                    documents: Documents { mean: round(s.docs as f64 / s.count.max(1) as f64, 2) },
                    latency_ms: span,
                    apps: s.apps.iter().cloned().collect(),
                    count_lower_bound: s.lossy,
                }
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

/// The frequency band of an operation's share of all operations.
pub fn band(share: f64, t: &Thresholds) -> &'static str {
    if share >= t.operation_very_high_share {
        "very high"
    } else if share >= t.operation_high_share {
        "high"
    } else if share >= t.operation_medium_share {
        "medium"
    } else {
        "low"
    }
}

/// "orders by _id, then customers by _id via customerId, then products by _id via
/// lines.productId".
fn name(steps: &[Step], rows: &FxHashMap<ShapeId, &crate::table::Row>, keys: &[StepKey]) -> String {
    let parts: Vec<String> = steps
        .iter()
        .zip(keys)
        .map(|(s, k)| {
            let coll = s.namespace.split_once('.').map_or(s.namespace.as_str(), |(_, c)| c);
            let shape = rows.get(&k.shape).map(|r| &r.shape);
            let (filtered, sorted) =
                shape.map(crate::detectors::schema::unknown_field::asked_fields).unwrap_or_default();
            let by = if filtered.is_empty() { String::new() } else { format!(" by {}", filtered.join(", ")) };
            let sort =
                if sorted.is_empty() { String::new() } else { format!(" sorted by {}", sorted.join(", ")) };
            let what = match s.command.as_str() {
                "insert" => format!("insert into {coll}"),
                "update" | "findAndModify" | "findandmodify" => format!("update {coll}{by}"),
                "delete" => format!("delete from {coll}{by}"),
                "aggregate" => {
                    let joins = shape.map(lookups).unwrap_or_default();
                    if joins.is_empty() {
                        format!("aggregate {coll}{by}")
                    } else {
                        format!("{coll}{by} joining {}", joins.join(", "))
                    }
                }
                "count" => format!("count {coll}{by}"),
                "distinct" => format!("distinct {coll}{by}"),
                _ => format!("{coll}{by}{sort}"),
            };
            match &s.link {
                Some(l) if s.per_operation > 1.0 => {
                    format!("{what} via {} (x{})", l.parent_field, trim(s.per_operation))
                }
                Some(l) => format!("{what} via {}", l.parent_field),
                None if s.per_operation > 1.0 => format!("{what} (x{})", trim(s.per_operation)),
                None => what,
            }
        })
        .collect();
    parts.join(", then ")
}

/// The collections an aggregation's `$lookup` stages join.
pub(crate) fn lookups(shape: &serde_json::Value) -> Vec<String> {
    shape
        .get("pipeline")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
        .filter_map(|stage| stage.get("$lookup").or_else(|| stage.get("$graphLookup")))
        .filter_map(|l| l.get("from").and_then(|f| f.as_str()).map(str::to_owned))
        .collect()
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}
