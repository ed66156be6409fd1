//! `/metrics` in the Prometheus text exposition format (0.0.4): operation counters by
//! namespace, command and app; latency histograms by namespace and command (awaited
//! waits excluded); and the proxy's own health counters.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use mongotap_analyzers::detectors::KINDS;
use mongotap_analyzers::pipeline::Pipeline;

use crate::proxy::Shared;

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Renders every metric.
pub fn render(p: &Pipeline, shared: &Shared) -> String {
    let mut s = String::with_capacity(16 * 1024);
    let rows = p.table().rows();

    let mut ops: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for r in &rows {
        for (app, n) in &r.apps {
            *ops.entry((&r.namespace, &r.command, app)).or_default() += n;
        }
    }
    header(
        &mut s,
        "mongotap_operations_total",
        "counter",
        "Operations completed, by namespace, command and application.",
    );
    for ((ns, cmd, app), n) in &ops {
        let _ = writeln!(
            s,
            "mongotap_operations_total{{namespace=\"{}\",command=\"{}\",app=\"{}\"}} {n}",
            label(ns),
            label(cmd),
            label(app)
        );
    }

    // Merge the rows' HDR histograms per namespace and command.
    struct Hist {
        buckets: [u64; BUCKETS.len()],
        count: u64,
        sum_s: f64,
    }
    let mut hists: BTreeMap<(&str, &str), Hist> = BTreeMap::new();
    for r in &rows {
        let h = r.latency_us.histogram();
        if h.is_empty() {
            continue;
        }
        let e = hists.entry((&r.namespace, &r.command)).or_insert(Hist {
            buckets: [0; BUCKETS.len()],
            count: 0,
            sum_s: 0.0,
        });
        for (i, le) in BUCKETS.iter().enumerate() {
            e.buckets[i] += h.count_between(0, (le * 1e6) as u64);
        }
        e.count += h.len();
        e.sum_s += h.mean() * h.len() as f64 / 1e6;
    }
    header(
        &mut s,
        "mongotap_operation_duration_seconds",
        "histogram",
        "Time from request to reply as mongotap saw it; awaitable hello and awaitData waits excluded.",
    );
    for ((ns, cmd), h) in &hists {
        let l = format!("namespace=\"{}\",command=\"{}\"", label(ns), label(cmd));
        for (le, n) in BUCKETS.iter().zip(h.buckets) {
            let _ = writeln!(s, "mongotap_operation_duration_seconds_bucket{{{l},le=\"{le}\"}} {n}");
        }
        let _ = writeln!(s, "mongotap_operation_duration_seconds_bucket{{{l},le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(s, "mongotap_operation_duration_seconds_sum{{{l}}} {:.6}", h.sum_s);
        let _ = writeln!(s, "mongotap_operation_duration_seconds_count{{{l}}} {}", h.count);
    }

    // Findings by kind and severity; every known kind is written, zeros included, so
    // an alert on a kind has a series from the start.
    let mut findings: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for kind in KINDS {
        for sev in ["high", "medium", "low"] {
            findings.insert((kind, sev), 0);
        }
    }
    let found = p.findings();
    for f in &found {
        if let Some(n) = findings.get_mut(&(f.kind.as_str(), f.severity.as_str())) {
            *n += 1;
        }
    }
    header(&mut s, "mongotap_findings", "gauge", "Findings in the current report, by kind and severity.");
    for ((kind, sev), n) in &findings {
        let _ = writeln!(s, "mongotap_findings{{kind=\"{kind}\",severity=\"{sev}\"}} {n}");
    }
    let evictions = p.detectors().evictions();
    header(
        &mut s,
        "mongotap_detector_evictions_total",
        "counter",
        "State a detector let go of to stay bounded.",
    );
    for (d, n) in &evictions {
        let _ = writeln!(s, "mongotap_detector_evictions_total{{detector=\"{}\"}} {n}", label(d));
    }

    let stats = p.exchange_stats();
    let tap = &shared.tap;
    let cursors = p.table().cursor_stats();
    let simple: [(&str, &str, &str, u64); 20] = [
        (
            "mongotap_connections_open",
            "gauge",
            "Client connections open now.",
            shared.open.load(Ordering::Relaxed),
        ),
        (
            "mongotap_connections_accepted_total",
            "counter",
            "Client connections accepted.",
            shared.accepted.load(Ordering::Relaxed),
        ),
        (
            "mongotap_clients_waiting",
            "gauge",
            "Clients waiting in the accept backlog because --max-connections are open (sampled every second).",
            shared.waiting.load(Ordering::Relaxed),
        ),
        (
            "mongotap_connection_cap_reached_total",
            "counter",
            "Times --max-connections was reached (once per burst).",
            shared.cap_reached.load(Ordering::Relaxed),
        ),
        (
            "mongotap_upstream_connect_failures_total",
            "counter",
            "Failed connections to the upstream.",
            shared.upstream_failures(),
        ),
        (
            "mongotap_events_offered_total",
            "counter",
            "Events the forwarding side offered to the analysis.",
            tap.offered(),
        ),
        (
            "mongotap_events_dropped_total",
            "counter",
            "Events dropped because the analysis was behind.",
            tap.dropped(),
        ),
        ("mongotap_requests_total", "counter", "Request messages analysed.", stats.requests),
        ("mongotap_replies_total", "counter", "Reply messages analysed.", stats.replies),
        (
            "mongotap_parse_errors_total",
            "counter",
            "Messages that failed to decode (each stops analysis of its connection).",
            stats.parse_errors,
        ),
        (
            "mongotap_unpaired_replies_total",
            "counter",
            "Replies whose request was never seen.",
            stats.unpaired_replies,
        ),
        ("mongotap_shapes", "gauge", "Distinct rows in the access-pattern table.", rows.len() as u64),
        (
            "mongotap_event_gaps_total",
            "counter",
            "Holes in a connection's events (the tap dropped some); detectors reset what they followed there.",
            stats.gaps,
        ),
        (
            "mongotap_connections_lossy_total",
            "counter",
            "Connections that lost events to the tap (their rows are lower bounds).",
            stats.lossy_connections,
        ),
        (
            "mongotap_connections_untracked_total",
            "counter",
            "Connections not analysed because the connection table was full.",
            stats.untracked_connections,
        ),
        ("mongotap_tap_queued_bytes", "gauge", "Bytes of messages held for the analysis (bounded by --tap-mb).", tap.queued_bytes()),
        ("mongotap_cursors_open", "gauge", "Cursors followed for getMore attribution.", cursors.open),
        ("mongotap_cursors_untracked_total", "counter", "Cursors not followed because the map was full.", cursors.untracked),
        ("mongotap_cursors_expired_total", "counter", "Cursors forgotten after the server's idle timeout.", cursors.expired),
        ("mongotap_cursors_killed_total", "counter", "Cursors closed by killCursors.", cursors.killed),
    ];
    for (name, kind, help, v) in simple {
        header(&mut s, name, kind, help);
        let _ = writeln!(s, "{name} {v}");
    }
    s
}

fn header(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Escapes a label value: backslash, double quote and newline.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
