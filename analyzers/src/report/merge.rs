//! Reports of several proxies (one per app instance, or per member) combined into
//! the report of their combined traffic: rows of the same shape summed, latency
//! percentiles read off the sum of their recorded histograms (so they are those of
//! one histogram that saw every operation), collections, apps, the timeline and the
//! traffic notes summed.
//!
//! Findings are merged, not recomputed: a detector's state is not in the report.
//! The same finding (kind, namespace and subject) from several reports is kept once,
//! at its highest severity, with its `count` summed and `merged_from` saying how
//! many reports had it. A smell whose halves went through different proxies (a
//! parent read through one, its children through another) is seen by neither.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::Value;

use super::{
    histogram_ms, round, AccessPattern, Amount, AppMix, CollectionMix, Finding, Latency, Report, Totals,
    Traffic, Window, LOSSY_SHOWN,
};

/// The report of the traffic all of `reports` saw.
pub fn merge(reports: &[Report]) -> Result<Report, String> {
    let first = reports.first().ok_or("nothing to merge")?;
    for (i, r) in reports.iter().enumerate() {
        if r.schema != first.schema {
            return Err(format!("report {} has schema {}, the first has {}", i + 1, r.schema, first.schema));
        }
        if let Some(p) = r
            .access_patterns
            .iter()
            .find(|p| p.count > 0 && p.latency_ms.is_some() && p.latency_us_recorded.is_empty())
        {
            return Err(format!(
                "report {} has no recorded latencies for {} {} (written by a mongotap before 0.1's merge support): its percentiles cannot be combined",
                i + 1,
                p.command,
                p.namespace
            ));
        }
    }
    let start_us =
        reports.iter().filter(|r| r.totals.events > 0).map(|r| r.window.start_us).min().unwrap_or(0);
    let end_us = reports.iter().map(|r| r.window.end_us).max().unwrap_or(0);
    let seconds = end_us.saturating_sub(start_us) as f64 / 1e6;
    let totals = reports.iter().fold(Totals::default(), |mut t, r| {
        t.connections += r.totals.connections;
        t.requests += r.totals.requests;
        t.replies += r.totals.replies;
        t.events_dropped += r.totals.events_dropped;
        t.parse_errors += r.totals.parse_errors;
        t.operations += r.totals.operations;
        t.events += r.totals.events;
        t
    });
    let mut rows: BTreeMap<String, Merged> = BTreeMap::new();
    for p in reports.iter().flat_map(|r| &r.access_patterns) {
        rows.entry(p.shape_id.clone()).or_insert_with(|| Merged::new(p)).add(p)?;
    }
    let total_ops = totals.operations.max(1) as f64;
    let mut access_patterns: Vec<AccessPattern> =
        rows.into_values().map(|m| m.finish(total_ops, seconds)).collect();
    access_patterns.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.shape_id.cmp(&b.shape_id)));

    let mut collections: BTreeMap<String, CollectionMix> = BTreeMap::new();
    for p in &access_patterns {
        let c = collections.entry(p.namespace.clone()).or_insert_with(|| CollectionMix {
            namespace: p.namespace.clone(),
            reads: 0,
            writes: 0,
            other: 0,
        });
        match p.category.as_str() {
            "read" => c.reads += p.count,
            "write" => c.writes += p.count,
            _ => c.other += p.count,
        }
    }
    let mut collections: Vec<CollectionMix> = collections.into_values().collect();
    collections.sort_by(|a, b| {
        (b.reads + b.writes).cmp(&(a.reads + a.writes)).then_with(|| a.namespace.cmp(&b.namespace))
    });

    let mut apps: BTreeMap<String, (u64, std::collections::BTreeSet<String>)> = BTreeMap::new();
    for a in reports.iter().flat_map(|r| &r.apps) {
        let e = apps.entry(a.app.clone()).or_default();
        e.0 += a.operations;
        e.1.extend(a.namespaces.iter().cloned());
    }
    let mut apps: Vec<AppMix> = apps
        .into_iter()
        .map(|(app, (operations, ns))| AppMix { app, operations, namespaces: ns.into_iter().collect() })
        .collect();
    apps.sort_by(|a, b| b.operations.cmp(&a.operations).then_with(|| a.app.cmp(&b.app)));

    let mut timeline: BTreeMap<u64, u64> = BTreeMap::new();
    for (s, n) in reports.iter().flat_map(|r| &r.timeline) {
        *timeline.entry(*s).or_default() += n;
    }

    Ok(Report {
        schema: first.schema,
        tool: first.tool.clone(),
        window: Window {
            start: super::rfc3339(start_us),
            end: super::rfc3339(end_us),
            seconds: round(seconds, 3),
            start_us,
            end_us,
        },
        totals,
        access_patterns,
        findings: merge_findings(reports),
        collections,
        apps,
        timeline: timeline.into_iter().collect(),
        traffic: merge_traffic(reports),
        operations: merge_operations(reports, seconds),
        relationships: merge_relationships(reports),
        schemas: merge_schemas(reports),
        shard_keys: merge_shard_keys(reports),
    })
}

/// Operations by id: counts, round trips and documents summed, latency taken as
/// the count-weighted median and the largest p99 (the reports keep no histogram of
/// them), shares and bands worked out again.
fn merge_operations(reports: &[Report], seconds: f64) -> Vec<crate::workload::operations::Operation> {
    let mut by_id: BTreeMap<String, crate::workload::operations::Operation> = BTreeMap::new();
    for o in reports.iter().flat_map(|r| &r.operations) {
        match by_id.get_mut(&o.id) {
            None => {
                by_id.insert(o.id.clone(), o.clone());
            }
            Some(m) => {
                let n = (m.count + o.count).max(1) as f64;
                let w = |a: f64, b: f64| (a * m.count as f64 + b * o.count as f64) / n;
                m.round_trips.mean = round(w(m.round_trips.mean, o.round_trips.mean), 2);
                m.round_trips.max = m.round_trips.max.max(o.round_trips.max);
                m.documents.mean = round(w(m.documents.mean, o.documents.mean), 2);
                m.latency_ms = match (&m.latency_ms, &o.latency_ms) {
                    (Some(a), Some(b)) => Some(crate::workload::operations::Span {
                        p50: round(w(a.p50, b.p50), 3),
                        p99: a.p99.max(b.p99),
                    }),
                    (a, b) => a.clone().or_else(|| b.clone()),
                };
                m.apps = union(&m.apps, &o.apps);
                m.count += o.count;
                m.count_lower_bound |= o.count_lower_bound;
            }
        }
    }
    let total: u64 = by_id.values().map(|o| o.count).sum();
    let mut out: Vec<_> = by_id.into_values().collect();
    let t = crate::detectors::Thresholds::default();
    for o in &mut out {
        let share = o.count as f64 / total.max(1) as f64;
        o.share = round(share, 4);
        o.rate_per_s = round(o.count as f64 / seconds.max(1.0), 3);
        o.frequency = crate::workload::operations::band(share, &t).to_owned();
    }
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    out
}

/// Schemas by namespace, summed: documents, types and writers add up, presence and
/// array means are weighted by documents. Each run walked a sample of its documents
/// (all of the first 256 per collection), so the sums describe the fleet's samples,
/// not one pipeline's. The validator is the one inferred from the most written
/// documents: it is never stitched from several.
fn merge_schemas(reports: &[Report]) -> Vec<super::CollectionSchema> {
    let mut by_ns: BTreeMap<String, (super::CollectionSchema, u64)> = BTreeMap::new();
    for c in reports.iter().flat_map(|r| &r.schemas) {
        let Some((m, validator_from)) = by_ns.get_mut(&c.namespace) else {
            by_ns.insert(c.namespace.clone(), (c.clone(), c.documents_written));
            continue;
        };
        let (before, added) = (m.documents_seen as f64, c.documents_seen as f64);
        let total = (before + added).max(1.0);
        // Each field's presence before this report, for weighting its array mean.
        let prior: Vec<(String, f64)> = m.fields.iter().map(|f| (f.path.clone(), f.presence)).collect();
        for f in &mut m.fields {
            f.presence *= before / total;
        }
        for f in &c.fields {
            let at = match m.fields.iter().position(|x| x.path == f.path) {
                Some(i) => i,
                None => {
                    m.fields.push(crate::schema::section::FieldSchema { presence: 0.0, ..f.clone() });
                    m.fields.last_mut().unwrap().types.clear();
                    m.fields.len() - 1
                }
            };
            let x = &mut m.fields[at];
            for (t, n) in &f.types {
                *x.types.entry(t.clone()).or_insert(0) += n;
            }
            x.presence = round(x.presence + f.presence * added / total, 3);
            if let Some(l) = &f.array_lengths {
                let mine = x.array_lengths.get_or_insert_with(|| l.clone());
                let was = prior.iter().find(|(p, _)| *p == f.path).map_or(0.0, |(_, p)| *p);
                let (wa, wb) = (before * was.max(0.001), added * f.presence.max(0.001));
                mine.mean = round((mine.mean * wa + l.mean * wb) / (wa + wb), 3);
                mine.min = mine.min.min(l.min);
                mine.max = mine.max.max(l.max);
            }
        }
        for f in &mut m.fields {
            f.presence = round(f.presence, 3);
        }
        m.documents_seen += c.documents_seen;
        m.fields_refused += c.fields_refused;
        for w in &c.writers {
            if !m.writers.contains(w) {
                m.writers.push(w.clone());
            }
        }
        match (&mut m.versions, &c.versions) {
            (Some(mv), Some(cv)) if mv.field == cv.field => {
                for (v, n) in &cv.values {
                    *mv.values.entry(v.clone()).or_insert(0) += n;
                }
                for (v, own) in &cv.fields_of {
                    let mine = mv.fields_of.entry(v.clone()).or_default();
                    mine.extend(own.iter().filter(|f| !mine.contains(f)).cloned().collect::<Vec<_>>());
                }
            }
            (None, Some(cv)) => m.versions = Some(cv.clone()),
            _ => {}
        }
        if c.documents_written > *validator_from {
            *validator_from = c.documents_written;
            m.validator = c.validator.clone();
            m.fix = c.fix.clone();
        }
        m.documents_written += c.documents_written;
    }
    let mut out: Vec<super::CollectionSchema> = by_ns.into_values().map(|(c, _)| c).collect();
    out.sort_by(|a, b| b.documents_seen.cmp(&a.documents_seen).then_with(|| a.namespace.cmp(&b.namespace)));
    out.truncate(50);
    out
}

/// Shard keys by namespace: the one judged on the most operations (candidates are
/// ranked from one run's shapes and value sketches; sketches are not merged).
fn merge_shard_keys(reports: &[Report]) -> Vec<super::CollectionKeys> {
    let mut by_ns: BTreeMap<String, super::CollectionKeys> = BTreeMap::new();
    for c in reports.iter().flat_map(|r| &r.shard_keys) {
        if by_ns.get(&c.namespace).is_none_or(|kept| kept.operations < c.operations) {
            by_ns.insert(c.namespace.clone(), c.clone());
        }
    }
    let mut out: Vec<super::CollectionKeys> = by_ns.into_values().collect();
    out.sort_by(|a, b| b.operations.cmp(&a.operations).then_with(|| a.namespace.cmp(&b.namespace)));
    out
}

/// Relationships by link: the one the most operations followed (their figures
/// are not recomputed: the reports keep no sketches of values, so a link that no
/// report followed often enough to judge stays unjudged in the merge too).
fn merge_relationships(reports: &[Report]) -> Vec<crate::workload::relationships::Relationship> {
    let following = |r: &crate::workload::relationships::Relationship| {
        r.evidence.get("operations_following_it").and_then(serde_json::Value::as_u64).unwrap_or(0)
    };
    let mut by_key: BTreeMap<(String, String, String, String), crate::workload::relationships::Relationship> =
        BTreeMap::new();
    for r in reports.iter().flat_map(|r| &r.relationships) {
        let key =
            (r.parent.clone(), r.link.parent_field.clone(), r.child.clone(), r.link.child_field.clone());
        match by_key.get(&key) {
            Some(m) if following(m) >= following(r) => {}
            _ => {
                by_key.insert(key, r.clone());
            }
        }
    }
    by_key.into_values().collect()
}

/// One row being summed.
struct Merged {
    p: AccessPattern,
    latencies: Histogram<u64>,
    first: bool,
}

impl Merged {
    fn new(p: &AccessPattern) -> Merged {
        Merged {
            p: p.clone(),
            latencies: Histogram::new(2).expect("2 significant figures are valid"),
            first: true,
        }
    }

    fn add(&mut self, p: &AccessPattern) -> Result<(), String> {
        for &[value, count] in &p.latency_us_recorded {
            self.latencies
                .record_n(value, count)
                .map_err(|e| format!("a recorded latency of {value} us: {e}"))?;
        }
        if std::mem::take(&mut self.first) {
            return Ok(());
        }
        let m = &mut self.p;
        m.count += p.count;
        m.docs_returned.total += p.docs_returned.total;
        m.request_bytes.total += p.request_bytes.total;
        m.reply_bytes.total += p.reply_bytes.total;
        m.errors += p.errors;
        m.statements += p.statements;
        for (code, n) in &p.errors_by_code {
            *m.errors_by_code.entry(code.clone()).or_default() += n;
        }
        m.apps = union(&m.apps, &p.apps);
        m.fields_read = union(&m.fields_read, &p.fields_read);
        m.example = m.example.take().or_else(|| p.example.clone());
        m.first_seen = std::cmp::min(m.first_seen.clone(), p.first_seen.clone());
        m.last_seen = std::cmp::max(m.last_seen.clone(), p.last_seen.clone());
        m.count_lower_bound |= p.count_lower_bound;
        m.missed_estimate += p.missed_estimate;
        Ok(())
    }

    fn finish(self, total_ops: f64, seconds: f64) -> AccessPattern {
        let (mut p, h) = (self.p, self.latencies);
        let mean = |total: u64| if p.count == 0 { 0.0 } else { round(total as f64 / p.count as f64, 1) };
        p.docs_returned = Amount { total: p.docs_returned.total, mean: mean(p.docs_returned.total) };
        p.request_bytes = Amount { total: p.request_bytes.total, mean: mean(p.request_bytes.total) };
        p.reply_bytes = Amount { total: p.reply_bytes.total, mean: mean(p.reply_bytes.total) };
        p.share = round(p.count as f64 / total_ops, 4);
        // Rows lie within the window, so the window is the longer span.
        p.rate_per_s = round(p.count as f64 / seconds.max(1.0), 3);
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        p.latency_ms = (!h.is_empty()).then(|| Latency {
            p50: ms(0.5),
            p95: ms(0.95),
            p99: ms(0.99),
            max: h.max() as f64 / 1000.0,
        });
        p.latency_histogram_ms = histogram_ms(&h);
        p.latency_us_recorded = super::recorded(&h);
        p
    }
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut v: Vec<String> = a.iter().chain(b).cloned().collect();
    v.sort();
    v.dedup();
    v
}

/// What a finding is about: its kind, namespace and kind-specific subject (the
/// relationship map's verdict on its link is a note, not its subject: a report
/// that judged the link and one that did not speak of the same finding).
fn subject(f: &Finding) -> String {
    let mut extra = f.extra.clone();
    extra.remove("relationships");
    format!("{}\u{1}{}\u{1}{}", f.kind, f.namespace, serde_json::to_string(&extra).unwrap_or_default())
}

/// Whether a finding carries the relationship map's verdict on its link.
fn judged(f: &Finding) -> bool {
    f.extra.contains_key("relationships")
}

fn severity_rank(s: &str) -> u8 {
    match s {
        "high" => 3,
        "medium" => 2,
        _ => 1,
    }
}

fn merge_findings(reports: &[Report]) -> Vec<Finding> {
    let mut order: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, (Finding, u64, u64)> = BTreeMap::new();
    for f in reports.iter().flat_map(|r| &r.findings) {
        let key = subject(f);
        let count = f.evidence.get("count").and_then(Value::as_u64).unwrap_or(0);
        match by.get_mut(&key) {
            None => {
                order.push(key.clone());
                by.insert(key, (f.clone(), count, 1));
            }
            Some((kept, total, reports)) => {
                *total += count;
                *reports += 1;
                // The most severe and frequent; the verdict on its link from any report
                // that judged it.
                let better = (severity_rank(&f.severity), count)
                    > (
                        severity_rank(&kept.severity),
                        kept.evidence.get("count").and_then(Value::as_u64).unwrap_or(0),
                    );
                if better {
                    let ids = std::mem::take(&mut kept.shape_ids);
                    let verdict = kept.extra.get("relationships").cloned();
                    *kept = f.clone();
                    for id in ids {
                        if !kept.shape_ids.contains(&id) {
                            kept.shape_ids.push(id);
                        }
                    }
                    if let (false, Some(v)) = (judged(kept), verdict) {
                        kept.extra.insert("relationships".into(), v);
                    }
                } else if !judged(kept) {
                    if let Some(v) = f.extra.get("relationships") {
                        kept.extra.insert("relationships".into(), v.clone());
                    }
                }
                for id in &f.shape_ids {
                    if !kept.shape_ids.contains(id) {
                        kept.shape_ids.push(id.clone());
                    }
                }
            }
        }
    }
    order
        .into_iter()
        .filter_map(|k| by.remove(&k))
        .map(|(mut f, total, n)| {
            if n > 1 {
                if let Some(e) = f.evidence.as_object_mut() {
                    e.insert("count".into(), total.into());
                    e.insert("merged_from".into(), n.into());
                }
            }
            f
        })
        .collect()
}

fn merge_traffic(reports: &[Report]) -> Traffic {
    let mut t = Traffic::default();
    for r in reports {
        let x = &r.traffic;
        for (k, n) in &x.legacy_messages {
            *t.legacy_messages.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &x.compressed_messages {
            *t.compressed_messages.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &x.detector_evictions {
            *t.detector_evictions.entry(k.clone()).or_default() += n;
        }
        t.too_large += x.too_large;
        t.unpaired_replies += x.unpaired_replies;
        t.unanswered += x.unanswered;
        t.other_shapes += x.other_shapes;
        t.last_parse_error = x.last_parse_error.clone().or(t.last_parse_error.take());
        t.gaps += x.gaps;
        t.lossy_connections += x.lossy_connections;
        t.lossy.extend(x.lossy.iter().cloned());
        t.untracked_connections += x.untracked_connections;
        t.untracked_messages += x.untracked_messages;
        t.cursors.open += x.cursors.open;
        t.cursors.untracked += x.cursors.untracked;
        t.cursors.expired += x.cursors.expired;
        t.cursors.killed += x.cursors.killed;
    }
    t.lossy.sort_by(|a, b| b.events_dropped.cmp(&a.events_dropped).then(a.connection.cmp(&b.connection)));
    t.lossy.truncate(LOSSY_SHOWN);
    t
}
