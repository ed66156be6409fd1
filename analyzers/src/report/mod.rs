//! The report: what the run saw, as one serialisable value that every format
//! renders. The JSON form is a contract (`REPORT-CONTRACT.md`, schema 1) that CI
//! gates and dashboards read; Markdown is for pull requests and wikis.

pub mod gate;
pub mod html;
pub mod json;
pub mod map;
pub mod markdown;
pub mod merge;

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pipeline::Pipeline;
use crate::shape::command::Category;

pub use crate::event::rfc3339;
pub use crate::finding::Finding;
pub use crate::schema::section::CollectionSchema;
pub use crate::sharding::section::CollectionKeys;
pub use crate::workload::operations::Operation;
pub use crate::workload::relationships::Relationship;

/// The contract's schema version.
pub const SCHEMA: u32 = 1;

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema: u32,
    pub tool: Tool,
    pub window: Window,
    pub totals: Totals,
    pub access_patterns: Vec<AccessPattern>,
    pub findings: Vec<Finding>,
    /// Read/write mix per collection.
    #[serde(default)]
    pub collections: Vec<CollectionMix>,
    /// Operations per application.
    #[serde(default)]
    pub apps: Vec<AppMix>,
    /// Operations per second over the run: (unix second, count).
    #[serde(default)]
    pub timeline: Vec<(u64, u64)>,
    /// What the codec and the correlator counted besides operations.
    #[serde(default)]
    pub traffic: Traffic,
    /// The application's operations (units of work), busiest first: the seeds'
    /// "Operation | Frequency | Data needed".
    #[serde(default)]
    pub operations: Vec<Operation>,
    /// The relationships between collections, each with its embed-or-reference verdict.
    #[serde(default)]
    pub relationships: Vec<Relationship>,
    /// What each collection's documents hold, with a validator to paste.
    #[serde(default)]
    pub schemas: Vec<CollectionSchema>,
    /// Shard-key candidates per collection, ranked, with a recommendation.
    #[serde(default)]
    pub shard_keys: Vec<CollectionKeys>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Window {
    pub start: String,
    pub end: String,
    pub seconds: f64,
    /// `start` and `end` in microseconds since the epoch: what a merge needs to
    /// compute the combined window's length exactly.
    #[serde(default)]
    pub start_us: u64,
    #[serde(default)]
    pub end_us: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub connections: u64,
    pub requests: u64,
    pub replies: u64,
    pub events_dropped: u64,
    pub parse_errors: u64,
    #[serde(default)]
    pub operations: u64,
    /// Events the analysis saw: messages, connections opened and closed.
    #[serde(default)]
    pub events: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Amount {
    pub total: u64,
    pub mean: f64,
}

/// One row of the access-pattern table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccessPattern {
    pub namespace: String,
    pub command: String,
    pub shape: Value,
    pub shape_id: String,
    pub count: u64,
    pub share: f64,
    pub rate_per_s: f64,
    /// `None` when every operation was awaited or unanswered (w:0).
    pub latency_ms: Option<Latency>,
    pub docs_returned: Amount,
    pub request_bytes: Amount,
    pub reply_bytes: Amount,
    pub errors: u64,
    pub apps: Vec<String>,
    pub fields_read: Vec<String>,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub statements: u64,
    #[serde(default)]
    pub errors_by_code: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor_of: Option<String>,
    /// One literal example, only when the user asked for values (`--show-values`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    /// Latency distribution: (upper bound in ms, operations), doubling buckets.
    #[serde(default)]
    pub latency_histogram_ms: Vec<(f64, u64)>,
    /// The latency histogram as recorded: (microseconds, operations) for each
    /// non-empty bucket, so reports of several proxies merge into exact percentiles
    /// (`mongotap report merge`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_us_recorded: Vec<[u64; 2]>,
    #[serde(default)]
    pub first_seen: String,
    #[serde(default)]
    pub last_seen: String,
    /// The count is a lower bound: operations of this row were seen while the tap
    /// was dropping events (the analysis was behind).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_lower_bound: bool,
    /// Operations of this row the tap is estimated to have dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missed_estimate: u64,
}

/// Which part of the table a row belongs to: the application's reads and writes,
/// the server's own namespaces (advice-free), or administrative commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Reads and writes of the application's collections.
    Application,
    /// Reads and writes of `system.*`, `admin`, `config` and `local`: no advice.
    System,
    /// Commands: handshakes, index and collection administration, sessions.
    Administration,
}

impl AccessPattern {
    /// The part of the table this row belongs to.
    pub fn group(&self) -> Group {
        match self.category.as_str() {
            "read" | "write" if crate::namespace::is_system(&self.namespace) => Group::System,
            "read" | "write" => Group::Application,
            _ => Group::Administration,
        }
    }

    /// The count as reports print it: `≥1200 (~15 missed)` when it is a lower bound.
    pub fn count_text(&self) -> String {
        match (self.count_lower_bound, self.missed_estimate) {
            (false, _) => self.count.to_string(),
            (true, 0) => format!("≥{}", self.count),
            (true, m) => format!("≥{} (~{m} missed)", self.count),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectionMix {
    pub namespace: String,
    pub reads: u64,
    pub writes: u64,
    pub other: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AppMix {
    pub app: String,
    pub operations: u64,
    pub namespaces: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Traffic {
    pub legacy_messages: BTreeMap<String, u64>,
    pub compressed_messages: BTreeMap<String, u64>,
    pub too_large: u64,
    pub unpaired_replies: u64,
    pub unanswered: u64,
    pub other_shapes: u64,
    pub last_parse_error: Option<String>,
    /// Holes in connections' events (the tap dropped some): detectors reset what
    /// they followed on those connections rather than guess.
    #[serde(default)]
    pub gaps: u64,
    /// State the detectors let go of to stay bounded, by detector.
    #[serde(default)]
    pub detector_evictions: BTreeMap<String, u64>,
    /// Connections that lost events to the tap, all of them.
    #[serde(default)]
    pub lossy_connections: u64,
    /// The connections that lost the most events, most first (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lossy: Vec<LossyConnection>,
    /// Connections not analysed because the connection table was full, and their
    /// messages (forwarded as usual).
    #[serde(default)]
    pub untracked_connections: u64,
    #[serde(default)]
    pub untracked_messages: u64,
    /// Cursors followed for getMore attribution: open at the end, not followed
    /// (the map was full), expired idle, and closed by killCursors.
    #[serde(default)]
    pub cursors: Cursors,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cursors {
    pub open: u64,
    pub untracked: u64,
    pub expired: u64,
    pub killed: u64,
}

/// A connection that lost events to the tap.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LossyConnection {
    /// The proxy's connection number (as in its logs).
    pub connection: u64,
    pub app: Option<String>,
    pub events_dropped: u64,
}

/// Connections a report names in [`Traffic::lossy`].
const LOSSY_SHOWN: usize = 20;

/// Run-level facts the pipeline cannot know (they live on the forwarding side).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunFacts {
    /// Events the tap dropped.
    pub events_dropped: u64,
}

impl Report {
    /// Builds the report from the pipeline's state.
    pub fn build(p: &Pipeline, facts: RunFacts) -> Report {
        let table = p.table();
        let stats = p.exchange_stats();
        let (start, end) = p.window().unwrap_or((0, 0));
        let seconds = (end.saturating_sub(start)) as f64 / 1e6;
        let total_ops = table.operations().max(1) as f64;
        let workload = p.workload().sections(table, seconds);
        let mut collections: BTreeMap<String, CollectionMix> = BTreeMap::new();
        let mut apps: BTreeMap<String, (u64, std::collections::BTreeSet<String>)> = BTreeMap::new();
        let access_patterns = table
            .rows()
            .into_iter()
            .map(|r| {
                let mix = collections.entry(r.namespace.clone()).or_insert_with(|| CollectionMix {
                    namespace: r.namespace.clone(),
                    reads: 0,
                    writes: 0,
                    other: 0,
                });
                match r.category {
                    Category::Read => mix.reads += r.count,
                    Category::Write => mix.writes += r.count,
                    Category::Command => mix.other += r.count,
                }
                for (app, n) in &r.apps {
                    let e = apps.entry(app.clone()).or_default();
                    e.0 += n;
                    e.1.insert(r.namespace.clone());
                }
                let mean =
                    |total: u64| if r.count == 0 { 0.0 } else { round(total as f64 / r.count as f64, 1) };
                let span = r.last_seen.saturating_sub(r.first_seen) as f64 / 1e6;
                AccessPattern {
                    namespace: r.namespace.clone(),
                    command: r.command.clone(),
                    shape: r.shape.clone(),
                    shape_id: r.shape_id.clone(),
                    count: r.count,
                    share: round(r.count as f64 / total_ops, 4),
                    rate_per_s: round(r.count as f64 / seconds.max(span).max(1.0), 3),
                    latency_ms: r.latency_ms(0.5).map(|p50| Latency {
                        p50,
                        p95: r.latency_ms(0.95).unwrap_or(p50),
                        p99: r.latency_ms(0.99).unwrap_or(p50),
                        max: r.latency_us.histogram().max() as f64 / 1000.0,
                    }),
                    docs_returned: Amount { total: r.docs_returned, mean: mean(r.docs_returned) },
                    request_bytes: Amount { total: r.request_bytes, mean: mean(r.request_bytes) },
                    reply_bytes: Amount { total: r.reply_bytes, mean: mean(r.reply_bytes) },
                    errors: r.error_count(),
                    apps: r.apps.keys().cloned().collect(),
                    fields_read: r.fields_read.iter().cloned().collect(),
                    category: format!("{:?}", r.category).to_lowercase(),
                    statements: r.statements,
                    errors_by_code: r.errors.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
                    cursor_of: r.cursor_of.clone(),
                    latency_histogram_ms: histogram_ms(&r.latency_us.histogram()),
                    latency_us_recorded: recorded(&r.latency_us.histogram()),
                    example: r.example.clone(),
                    first_seen: rfc3339(r.first_seen),
                    last_seen: rfc3339(r.last_seen),
                    count_lower_bound: r.lossy,
                    missed_estimate: r.missed.round() as u64,
                }
            })
            .collect();
        let mut apps: Vec<AppMix> = apps
            .into_iter()
            .map(|(app, (operations, ns))| AppMix { app, operations, namespaces: ns.into_iter().collect() })
            .collect();
        apps.sort_by(|a, b| b.operations.cmp(&a.operations).then_with(|| a.app.cmp(&b.app)));
        let mut collections: Vec<CollectionMix> = collections.into_values().collect();
        collections.sort_by(|a, b| {
            (b.reads + b.writes).cmp(&(a.reads + a.writes)).then_with(|| a.namespace.cmp(&b.namespace))
        });
        Report {
            schema: SCHEMA,
            tool: Tool { name: "mongotap".into(), version: env!("CARGO_PKG_VERSION").into() },
            window: Window {
                start: rfc3339(start),
                end: rfc3339(end),
                seconds: round(seconds, 3),
                start_us: start,
                end_us: end,
            },
            totals: Totals {
                connections: stats.connections,
                requests: stats.requests,
                replies: stats.replies,
                events_dropped: facts.events_dropped,
                parse_errors: stats.parse_errors,
                operations: table.operations(),
                events: p.events() - stats.gaps,
            },
            access_patterns,
            findings: p.findings_beside(&workload),
            collections,
            apps,
            timeline: table.timeline().collect(),
            traffic: Traffic {
                legacy_messages: stats.legacy_messages.clone(),
                compressed_messages: stats.compressed_messages.clone(),
                too_large: stats.too_large,
                unpaired_replies: stats.unpaired_replies,
                unanswered: stats.unanswered,
                other_shapes: table.other_shapes(),
                last_parse_error: stats.last_parse_error.clone(),
                gaps: stats.gaps,
                detector_evictions: {
                    let mut e = p.detectors().evictions();
                    e.extend(p.workload().evictions());
                    e
                },
                lossy_connections: stats.lossy_connections,
                lossy: lossy(stats),
                untracked_connections: stats.untracked_connections,
                untracked_messages: stats.untracked_messages,
                cursors: {
                    let c = table.cursor_stats();
                    Cursors { open: c.open, untracked: c.untracked, expired: c.expired, killed: c.killed }
                },
            },
            operations: workload.operations,
            relationships: workload.relationships,
            schemas: crate::schema::section::build(p.schemas(), p.detectors().thresholds()),
            shard_keys: crate::sharding::section::build(
                p.shard_keys(),
                table,
                p.detectors().thresholds(),
                &p.detectors().catalog().lock().unwrap_or_else(|e| e.into_inner()),
            ),
        }
    }
}

/// The connections that lost the most events.
fn lossy(stats: &crate::exchange::ExchangeStats) -> Vec<LossyConnection> {
    let mut v: Vec<LossyConnection> = stats
        .lossy
        .iter()
        // An app name is what the client sent: no control characters reach a terminal.
        .map(|(c, l)| LossyConnection {
            connection: *c,
            app: l.app.as_ref().map(|a| a.chars().filter(|ch| !ch.is_control()).collect()),
            events_dropped: l.events,
        })
        .collect();
    v.sort_by(|a, b| b.events_dropped.cmp(&a.events_dropped).then(a.connection.cmp(&b.connection)));
    v.truncate(LOSSY_SHOWN);
    v
}

impl Report {
    /// What the run lost, in words, for every format and the end-of-run summary;
    /// `None` when nothing was lost.
    pub fn loss_in_words(&self) -> Option<String> {
        let (t, tr) = (&self.totals, &self.traffic);
        let mut parts = Vec::new();
        if t.events_dropped > 0 {
            let seen = t.events;
            let share = 100.0 * t.events_dropped as f64 / (seen + t.events_dropped).max(1) as f64;
            let mut s = format!(
                "The analysis fell behind the traffic and skipped {} of {} events ({share:.2}%; every byte was still forwarded)",
                t.events_dropped,
                seen + t.events_dropped
            );
            if tr.lossy_connections > 0 {
                let _ = write!(s, ", on {} of {} connections", tr.lossy_connections, t.connections);
                let named: Vec<String> = tr
                    .lossy
                    .iter()
                    .take(3)
                    .map(|l| match &l.app {
                        Some(app) => format!("#{} ({app}) {}", l.connection, l.events_dropped),
                        None => format!("#{} {}", l.connection, l.events_dropped),
                    })
                    .collect();
                let _ = write!(s, " (most: {})", named.join(", "));
            }
            s.push('.');
            let lower: Vec<&AccessPattern> =
                self.access_patterns.iter().filter(|p| p.count_lower_bound).collect();
            if !lower.is_empty() {
                let missed: u64 = lower.iter().map(|p| p.missed_estimate).sum();
                let _ = write!(
                    s,
                    " {} of {} rows are lower bounds (marked ≥), short of about {missed} operations in all; findings rest on what was seen.",
                    lower.len(),
                    self.access_patterns.len()
                );
            }
            parts.push(s);
        }
        if tr.untracked_connections > 0 {
            parts.push(format!(
                "{} connections were not analysed because the connection table was full ({} of their messages forwarded unanalysed).",
                tr.untracked_connections, tr.untracked_messages
            ));
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// Doubling buckets from 0.064 ms, trailing empty buckets cut.
/// Every non-empty bucket of `h`: (its highest equivalent value, its count).
/// Recording these into an empty histogram of the same precision rebuilds `h`.
fn recorded<C: hdrhistogram::Counter>(h: &hdrhistogram::Histogram<C>) -> Vec<[u64; 2]> {
    h.iter_recorded().map(|v| [v.value_iterated_to(), v.count_at_value().as_u64()]).collect()
}

fn histogram_ms<C: hdrhistogram::Counter>(h: &hdrhistogram::Histogram<C>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(f64, u64)> = h
        .iter_log(64, 2.0)
        .map(|v| (v.value_iterated_to() as f64 / 1000.0, v.count_since_last_iteration()))
        .collect();
    while out.last().is_some_and(|b| b.1 == 0) {
        out.pop();
    }
    out
}

impl Report {
    /// Findings ranked by estimated cost: severity first, then how many operations
    /// the evidence counts (the more often a smell is paid for, the more it costs).
    pub fn ranked_findings(&self) -> Vec<&Finding> {
        let rank = |s: &str| match s {
            "high" => 0,
            "medium" => 1,
            _ => 2,
        };
        let count = |f: &Finding| f.evidence.get("count").and_then(Value::as_u64).unwrap_or(0);
        let mut v: Vec<&Finding> = self.findings.iter().collect();
        v.sort_by(|a, b| rank(&a.severity).cmp(&rank(&b.severity)).then(count(b).cmp(&count(a))));
        v
    }
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_rank_by_severity_then_count() {
        let f = |kind: &str, severity: &str, count: u64| Finding {
            kind: kind.into(),
            severity: severity.into(),
            namespace: "t.c".into(),
            shape_ids: vec![],
            evidence: serde_json::json!({ "count": count }),
            recommendation: String::new(),
            fix: None,
            extra: BTreeMap::new(),
        };
        let mut r = Report::build(&Pipeline::default(), RunFacts::default());
        r.findings = vec![f("a", "low", 900), f("b", "high", 5), f("c", "medium", 50), f("d", "high", 80)];
        let order: Vec<&str> = r.ranked_findings().iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(order, ["d", "b", "c", "a"]);
    }
}
