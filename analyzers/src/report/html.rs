//! The HTML report: one self-contained file (no network, no external script), readable
//! on a laptop. Charts are inline SVG drawn here; a few lines of script sort the table.
//! Opened with `#selftest`, the page checks its own charts and sorting and says so in
//! `#selftest`, which the headless-browser test reads.

use std::fmt::Write;

use super::markdown::compact;
use super::{AccessPattern, Group, Operation, Report};

/// Renders the report as one HTML document.
pub fn render(r: &Report) -> String {
    let t = &r.totals;
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mongotap report</title>
<style>{CSS}</style></head><body>
<header><h1>mongotap report</h1>
<p class="meta">{ops} operations on {conns} connections over {secs:.1} s ({start} to {end}) &middot;
{dropped} events dropped &middot; {errors} parse errors &middot; {findings} findings</p></header>
"#,
        ops = t.operations,
        conns = t.connections,
        secs = r.window.seconds,
        start = esc(&r.window.start),
        end = esc(&r.window.end),
        dropped = t.events_dropped,
        errors = t.parse_errors,
        findings = r.findings.len(),
    );

    if let Some(loss) = r.loss_in_words() {
        let _ = writeln!(s, "<p class=\"warn\"><strong>Incomplete data.</strong> {}</p>", esc(&loss));
    }
    summary(&mut s, r);
    operations(&mut s, r);
    relationships(&mut s, r);

    let _ = writeln!(s, "<section><h2>Findings</h2>");
    if r.findings.is_empty() {
        let _ = writeln!(s, "<p>No findings.</p>");
    }
    for f in r.ranked_findings() {
        let figures: String = f
            .key_evidence()
            .iter()
            .map(|(k, v)| format!("<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v)))
            .collect();
        let _ = writeln!(
            s,
            "<article class=\"finding {sev}\"><h3><span class=\"sev\">{sev}</span> {kind} on <code>{ns}</code></h3>\
{headline}<p>{rec}</p><div class=\"wide\"><table class=\"evidence\">{figures}</table></div>\
<details><summary>All evidence (shapes {ids})</summary><pre>{ev}</pre></details>{fix}</article>",
            sev = esc(&f.severity),
            kind = esc(&f.kind),
            ns = esc(&f.namespace),
            headline = f.headline().map_or(String::new(), |h| format!("<p class=\"headline\"><code>{}</code></p>", esc(&h))),
            rec = esc(&f.recommendation),
            ids = esc(&f.shape_ids.join(", ")),
            ev = esc(&serde_json::to_string_pretty(&f.evidence).unwrap_or_default()),
            fix = f.fix.as_ref().map_or(String::new(), |x| format!("<p>Fix:</p><pre class=\"fix\">{}</pre>", esc(x))),
        );
    }
    let _ = writeln!(s, "</section>");
    schemas(&mut s, r);
    shard_keys(&mut s, r);

    let _ = writeln!(
        s,
        "<section><h2>Access patterns (per query shape)</h2><p class=\"hint\">Click a column to sort.</p>"
    );
    let of =
        |g: Group| -> Vec<&AccessPattern> { r.access_patterns.iter().filter(|p| p.group() == g).collect() };
    patterns_table(&mut s, Some("patterns"), &of(Group::Application));
    for (group, title) in [
        (Group::System, "The server's own namespaces (system.*, admin, config, local): no advice"),
        (
            Group::Administration,
            "Administrative commands (handshakes, sessions, index and collection commands)",
        ),
    ] {
        let rows = of(group);
        if !rows.is_empty() {
            let _ = writeln!(s, "<details class=\"group\"><summary>{title}: {} shapes</summary>", rows.len());
            patterns_table(&mut s, None, &rows);
            let _ = writeln!(s, "</details>");
        }
    }
    let _ = writeln!(s, "</section>");

    let _ = writeln!(s, "<section><h2>Operations per second</h2>{}</section>", timeline_svg(&r.timeline));
    let _ = writeln!(s, "<section><h2>Read/write mix per collection</h2>{}</section>", mix_svg(r));

    if !r.apps.is_empty() {
        let _ = writeln!(
            s,
            "<section><h2>Applications</h2><div class=\"wide\"><table><tr><th>App</th><th>Operations</th><th>Namespaces</th></tr>"
        );
        for a in &r.apps {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&a.app),
                a.operations,
                esc(&a.namespaces.join(", "))
            );
        }
        let _ = writeln!(s, "</table></div></section>");
    }
    let tr = &r.traffic;
    let _ = writeln!(
        s,
        "<section><h2>Traffic notes</h2><ul><li>Requests {}, replies {}; unpaired replies {}, unanswered requests {}.</li>\
<li>Compressed messages: {}.</li><li>Legacy opcodes: {}.</li><li>Too large to analyse: {}. Shapes over the cap: {}.</li>\
<li>Holes in connections' events (detectors reset there): {}. Detector state let go of: {}.</li></ul></section>",
        t.requests,
        t.replies,
        tr.unpaired_replies,
        tr.unanswered,
        esc(&kv(&tr.compressed_messages)),
        esc(&kv(&tr.legacy_messages)),
        tr.too_large,
        tr.other_shapes,
        tr.gaps,
        esc(&kv(&tr.detector_evictions)),
    );
    let _ = write!(s, "<pre id=\"selftest\" hidden></pre>\n<script>{JS}</script>\n</body></html>\n");
    s
}

/// Findings by severity and the guides' checklist question for the top operations.
fn summary(s: &mut String, r: &Report) {
    let count = |sev: &str| r.findings.iter().filter(|f| f.severity == sev).count();
    let _ = write!(
        s,
        "<section><h2>Summary</h2><ul><li><strong>{} findings</strong>: {} high, {} medium, {} low.",
        r.findings.len(),
        count("high"),
        count("medium"),
        count("low")
    );
    let top: Vec<String> = r
        .ranked_findings()
        .into_iter()
        .take(3)
        .map(|f| {
            format!(
                "<li><code>{}</code> ({}): {}</li>",
                esc(&f.kind),
                esc(&f.severity),
                esc(&f.headline().unwrap_or_else(|| f.namespace.clone()))
            )
        })
        .collect();
    if !top.is_empty() {
        let _ = write!(s, "<ul>{}</ul>", top.join(""));
    }
    let _ = write!(s, "</li>");
    let ops: Vec<&Operation> = r.operations.iter().take(5).collect();
    if !ops.is_empty() {
        let several: Vec<&&Operation> = ops.iter().filter(|o| !o.one_round_trip).collect();
        let answer = if several.is_empty() {
            format!("Yes: each of the top {} needs one round trip to one collection.", ops.len())
        } else {
            format!("{} of the top {} need more than one round trip or collection.", several.len(), ops.len())
        };
        let _ = write!(
            s,
            "<li><strong>Do the top operations need only one document (or one targeted query)?</strong> {}</li>",
            esc(&answer)
        );
    }
    let _ = writeln!(s, "</ul></section>");
}

/// The seeds' table: Operation, Frequency, Data needed, then round trips and collections.
fn operations(s: &mut String, r: &Report) {
    if r.operations.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<section><h2>Operations</h2><p class=\"hint\">The application's units of work, grouped from each client's requests; &#9888; marks one that needs more than one round trip or collection.</p>\
<div class=\"wide\"><table id=\"operations\" class=\"sortable ops\"><thead><tr><th data-type=\"num\">#</th><th>Operation</th><th>Frequency</th>\
<th>Data needed</th><th data-type=\"num\">Round trips</th><th data-type=\"num\">Collections</th><th data-type=\"num\">Count</th>\
<th data-type=\"num\">p50 ms</th><th data-type=\"num\">p99 ms</th><th>Apps</th></tr></thead><tbody>"
    );
    for (i, o) in r.operations.iter().enumerate() {
        let needed: Vec<String> = o
            .data_needed
            .iter()
            .map(|d| {
                let coll = d.namespace.split_once('.').map_or(d.namespace.as_str(), |(_, c)| c);
                if d.fields.is_empty() {
                    coll.to_owned()
                } else {
                    format!("{coll}: {}", d.fields.join(", "))
                }
            })
            .collect();
        let lat = |f: fn(&crate::workload::operations::Span) -> f64| {
            o.latency_ms.as_ref().map_or(String::new(), |l| format!("{:.2}", f(l)))
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"n\">{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
<td class=\"n\" data-v=\"{}\">{}{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            i + 1,
            if o.one_round_trip { "" } else { "&#9888; " },
            esc(&o.name),
            esc(&o.frequency),
            esc(&needed.join("; ")),
            o.round_trips.mean,
            o.collections.len(),
            o.count,
            o.count,
            if o.count_lower_bound { " (lower bound)" } else { "" },
            lat(|l| l.p50),
            lat(|l| l.p99),
            esc(&o.apps.join(", ")),
        );
    }
    let _ = writeln!(s, "</tbody></table></div></section>");
}

/// The relationship map and each relationship's answers and verdict.
fn relationships(s: &mut String, r: &Report) {
    let Some(map) = super::map::svg(r) else { return };
    let _ =
        writeln!(s, "<section><h2>Relationships: embed or reference</h2><div class=\"mapbox\">{map}</div>");
    let _ = writeln!(
        s,
        "<div class=\"wide\"><table class=\"rels\"><thead><tr><th>Parent &rarr; child</th><th>Link</th><th>Read together</th><th>Change together</th>\
<th>Children per parent</th><th>Parents per child</th><th>Child writes per read</th><th>Verdict</th></tr></thead><tbody>"
    );
    for rel in &r.relationships {
        let _ = writeln!(
            s,
            "<tr><td><code>{}</code> &rarr; <code>{}</code></td><td>{} &rarr; {}{}</td><td class=\"n\">{:.0}%</td><td class=\"n\">{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td><td><strong>{}</strong>{}<details><summary>why</summary><p>{}</p>{}</details></td></tr>",
            esc(&rel.parent),
            esc(&rel.child),
            esc(&rel.link.parent_field),
            esc(&rel.link.child_field),
            if rel.via_lookup { " ($lookup)" } else { "" },
            rel.read_together * 100.0,
            rel.change_together.map_or("-".to_owned(), |c| format!("{:.0}%", c * 100.0)),
            rel.children_per_parent.shown(),
            rel.parents_per_child.shown(),
            rel.child_writes_per_read,
            esc(&rel.verdict.replace('_', " ")),
            if rel.copy_fields.is_empty() { String::new() } else { format!(" (copy {})", esc(&rel.copy_fields.join(", "))) },
            esc(&rel.recommendation),
            rel.sketch.as_ref().map_or(String::new(), |k| format!("<pre>{}</pre>", esc(k))),
        );
    }
    let _ = writeln!(s, "</tbody></table></div></section>");
}

/// Per collection: its fields' types and presence, its versions and its validator.
fn schemas(s: &mut String, r: &Report) {
    if r.schemas.is_empty() {
        return;
    }
    let _ = writeln!(s, "<section><h2>Schemas (from the documents written and read)</h2>");
    for c in &r.schemas {
        let versions = c.versions.as_ref().map_or(String::new(), |v| {
            let values: Vec<String> = v.values.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            format!(
                " Version field <code>{}</code> (documents per version: {}).",
                esc(&v.field),
                esc(&values.join(", "))
            )
        });
        let _ = writeln!(
            s,
            "<details class=\"schema\"><summary><code>{}</code>: {} documents seen, {} written, {} fields{}</summary>\
<div class=\"wide\"><table><thead><tr><th>Field</th><th>Types (values)</th><th>Present in</th><th>Array length (min / mean / max)</th></tr></thead><tbody>",
            esc(&c.namespace),
            c.documents_seen,
            c.documents_written,
            c.fields.len(),
            versions
        );
        for f in &c.fields {
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{:.0}%</td><td>{}</td></tr>",
                esc(&f.path),
                esc(&f.types_text()),
                f.presence * 100.0,
                f.lengths_text()
            );
        }
        let _ = writeln!(s, "</tbody></table></div>");
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "<p>A validator to paste:</p><pre class=\"fix\">{}</pre>", esc(fix));
        }
        let _ = writeln!(s, "</details>");
    }
    let _ = writeln!(s, "</section>");
}

/// Per collection: the shard-key candidates, the recommendation first.
fn shard_keys(s: &mut String, r: &Report) {
    if r.shard_keys.is_empty() {
        return;
    }
    let _ = writeln!(s, "<section><h2>Shard keys (if sharding later)</h2>");
    for c in &r.shard_keys {
        let _ = writeln!(
            s,
            "<h3><code>{}</code> ({} operations)</h3><p>{}</p>{}",
            esc(&c.namespace),
            c.operations,
            esc(&c.recommendation),
            c.command.as_ref().map_or(String::new(), |x| format!("<pre class=\"fix\">{}</pre>", esc(x)))
        );
        let _ = writeln!(
            s,
            "<div class=\"wide\"><table><thead><tr><th>#</th><th>Key</th><th>Reads to one shard</th><th>Reads to every shard</th>\
<th>Writes to one shard</th><th>Distinct values</th><th>Monotonic</th><th></th></tr></thead><tbody>"
        );
        for k in &c.candidates {
            let [key, one, every, writes, distinct, monotonic, verdict] = k.cells().map(|c| esc(&c));
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td><code>{key}</code></td><td class=\"n\">{one}</td><td class=\"n\">{every}</td>\
<td class=\"n\">{writes}</td><td class=\"n\">{distinct}</td><td>{monotonic}</td><td>{verdict}</td></tr>",
                k.rank
            );
        }
        let _ = writeln!(s, "</tbody></table></div>");
    }
    let _ = writeln!(s, "</section>");
}

/// A sortable table of access patterns (`id` names the main one, which the page's
/// self-test sorts).
fn patterns_table(s: &mut String, id: Option<&str>, rows: &[&AccessPattern]) {
    let id = id.map_or(String::new(), |i| format!(" id=\"{i}\""));
    let _ = writeln!(
        s,
        "<div class=\"wide\"><table{id} class=\"sortable\"><thead><tr>\
<th data-type=\"num\">#</th><th>Operation</th><th>Namespace</th><th>Shape</th>\
<th data-type=\"num\">Count</th><th data-type=\"num\">Share</th><th data-type=\"num\">Rate/s</th>\
<th data-type=\"num\">p50 ms</th><th data-type=\"num\">p95 ms</th><th data-type=\"num\">p99 ms</th>\
<th>Latency distribution</th><th data-type=\"num\">Docs (mean)</th><th data-type=\"num\">Errors</th>\
<th>Data needed</th><th>Apps</th></tr></thead><tbody>"
    );
    for (i, p) in rows.iter().enumerate() {
        row(s, i + 1, p);
    }
    let _ = writeln!(s, "</tbody></table></div>");
}

fn row(s: &mut String, n: usize, p: &AccessPattern) {
    let lat = |f: fn(&super::Latency) -> f64| {
        p.latency_ms.as_ref().map_or(String::new(), |l| format!("{:.2}", f(l)))
    };
    let _ = writeln!(
        s,
        "<tr class=\"{cat}\"><td class=\"n\">{n}</td><td>{cmd}</td><td><code>{ns}</code></td>\
<td><details><summary><code>{short}</code></summary><pre>{full}</pre>{example}</details></td>\
<td class=\"n\" data-v=\"{count_v}\">{count}</td><td class=\"n\" data-v=\"{share}\">{pct:.1}%</td><td class=\"n\">{rate:.2}</td>\
<td class=\"n\">{p50}</td><td class=\"n\">{p95}</td><td class=\"n\">{p99}</td><td>{hist}</td>\
<td class=\"n\">{docs:.1}</td><td class=\"n\">{errors}</td><td>{fields}</td><td>{apps}</td></tr>",
        cat = esc(&p.category),
        cmd = esc(&p.command),
        ns = esc(&p.namespace),
        short = esc(&compact(&p.shape, 70)),
        full = esc(&serde_json::to_string_pretty(&p.shape).unwrap_or_default()),
        example = p.example.as_ref().map_or(String::new(), |e| format!(
            "<p class=\"hint\">Example (--show-values):</p><pre>{}</pre>",
            esc(&serde_json::to_string_pretty(e).unwrap_or_default())
        )),
        count = esc(&p.count_text()),
        count_v = p.count,
        share = p.share,
        pct = p.share * 100.0,
        rate = p.rate_per_s,
        p50 = lat(|l| l.p50),
        p95 = lat(|l| l.p95),
        p99 = lat(|l| l.p99),
        hist = histogram_svg(&p.latency_histogram_ms),
        docs = p.docs_returned.mean,
        errors = p.errors,
        fields = esc(&p.fields_read.join(", ")),
        apps = esc(&p.apps.join(", ")),
    );
}

/// Slots of the latency chart: doubling from 0.064 ms, so the last is about 2 s and
/// up; every row uses the same axis, so bar positions compare across rows.
const HIST_SLOTS: usize = 16;

/// A small bar chart of a latency distribution (doubling buckets on a shared axis).
fn histogram_svg(buckets: &[(f64, u64)]) -> String {
    if buckets.is_empty() {
        return String::new();
    }
    let mut slots = [0u64; HIST_SLOTS];
    for (i, (_, count)) in buckets.iter().enumerate() {
        slots[i.min(HIST_SLOTS - 1)] += count;
    }
    let max = slots.iter().copied().max().unwrap_or(1).max(1) as f64;
    let (w, h) = (160.0, 28.0);
    let bw = w / HIST_SLOTS as f64;
    let mut s = format!(
        "<svg class=\"chart hist\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">"
    );
    s.push_str(&format!("<line x1=\"0\" y1=\"{h}\" x2=\"{w}\" y2=\"{h}\" stroke=\"#d0d7de\"/>"));
    for (i, count) in slots.iter().enumerate().filter(|(_, c)| **c > 0) {
        let bh = (h - 2.0) * (*count as f64 / max).max(0.08);
        let upper = 0.064 * f64::powi(2.0, i as i32);
        let label = if i == HIST_SLOTS - 1 {
            format!("&gt; {:.0} ms", upper / 2.0)
        } else {
            format!("&le; {upper} ms")
        };
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\"><title>{label}: {count}</title></rect>",
            i as f64 * bw + 0.5,
            h - bh,
            bw - 1.0
        );
    }
    s.push_str("</svg>");
    s
}

/// Operations per second over the run, as bars (grouped when the run is long).
fn timeline_svg(points: &[(u64, u64)]) -> String {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return "<p>No operations.</p>".into();
    };
    let span = (last.0 - first.0 + 1) as usize;
    let group = span.div_ceil(240).max(1);
    let mut bars = vec![0u64; span.div_ceil(group)];
    for (sec, n) in points {
        bars[((sec - first.0) as usize) / group] += n;
    }
    let max = bars.iter().copied().max().unwrap_or(1).max(1) as f64;
    let (w, h) = (960.0, 160.0);
    let bw = w / bars.len() as f64;
    let mut s = format!(
        "<svg class=\"chart timeline\" width=\"100%\" height=\"{}\" viewBox=\"0 0 {w} {}\" preserveAspectRatio=\"none\" role=\"img\">",
        h + 20.0,
        h + 20.0
    );
    for (i, n) in bars.iter().enumerate() {
        let bh = (h - 4.0) * (*n as f64 / max);
        let _ = write!(
            s,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{bh:.2}\"><title>+{}s: {:.1} ops/s</title></rect>",
            i as f64 * bw,
            h - bh,
            (bw - 0.5).max(0.5),
            i * group,
            *n as f64 / group as f64
        );
    }
    let _ = write!(
        s,
        "<text x=\"0\" y=\"{}\">0 s</text><text x=\"{w}\" y=\"{}\" text-anchor=\"end\">{span} s; peak {:.0} ops/s</text></svg>",
        h + 16.0,
        h + 16.0,
        max / group as f64
    );
    s
}

/// Reads and writes per collection as horizontal stacked bars.
fn mix_svg(r: &Report) -> String {
    let rows: Vec<_> = r.collections.iter().filter(|c| c.reads + c.writes > 0).collect();
    if rows.is_empty() {
        return "<p>No reads or writes.</p>".into();
    }
    let max = rows.iter().map(|c| c.reads + c.writes).max().unwrap_or(1).max(1) as f64;
    let (w, lh) = (960.0, 26.0);
    let mut s = format!(
        "<svg class=\"chart mix\" width=\"100%\" viewBox=\"0 0 {w} {}\" role=\"img\">",
        lh * rows.len() as f64 + 24.0
    );
    for (i, c) in rows.iter().enumerate() {
        let y = i as f64 * lh;
        let scale = (w - 260.0) / max;
        let (rw, ww) = (c.reads as f64 * scale, c.writes as f64 * scale);
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{:.1}\">{}</text>\
<rect class=\"reads\" x=\"200\" y=\"{:.1}\" width=\"{rw:.1}\" height=\"18\"><title>{} reads</title></rect>\
<rect class=\"writes\" x=\"{:.1}\" y=\"{:.1}\" width=\"{ww:.1}\" height=\"18\"><title>{} writes</title></rect>\
<text x=\"{:.1}\" y=\"{:.1}\">{} r / {} w</text>",
            y + 14.0,
            esc(&c.namespace),
            y + 1.0,
            c.reads,
            200.0 + rw,
            y + 1.0,
            c.writes,
            206.0 + rw + ww,
            y + 14.0,
            c.reads,
            c.writes
        );
    }
    let _ = write!(
        s,
        "<rect class=\"reads\" x=\"200\" y=\"{0:.1}\" width=\"12\" height=\"12\"/><text x=\"216\" y=\"{1:.1}\">reads</text>\
<rect class=\"writes\" x=\"270\" y=\"{0:.1}\" width=\"12\" height=\"12\"/><text x=\"286\" y=\"{1:.1}\">writes</text></svg>",
        lh * rows.len() as f64 + 6.0,
        lh * rows.len() as f64 + 17.0
    );
    s
}

fn kv(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

/// Escapes text for HTML content and attributes.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 24px 40px;color:#1b1f24;background:#fff}
header{border-bottom:1px solid #d0d7de;margin-bottom:8px}h1{margin:16px 0 4px;font-size:22px}
h2{font-size:17px;margin:22px 0 8px}.meta,.hint{color:#57606a;margin:4px 0 10px}
.warn{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:8px 12px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eaeef2;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0;cursor:pointer;user-select:none}
th.asc::after{content:" \25B2"}th.desc::after{content:" \25BC"}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}
tr.command td{color:#57606a}code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}details pre{margin:4px 0;max-width:min(520px,100%);overflow:auto}
.wide{overflow-x:auto;max-width:100%}td{overflow-wrap:anywhere}table.sortable td:nth-child(4){min-width:16em}details.group{margin:.8em 0}.mapbox{overflow:hidden}svg.map{max-width:100%;height:auto}svg.map rect{fill:#f6f8fa;stroke:#57606a}svg.map text{font-size:13px;fill:#24292f}svg.map text.ops{font-size:11px;fill:#57606a}svg.map text.edge{font-size:12px;fill:#0969da;paint-order:stroke;stroke:#fff;stroke-width:4px}svg{max-width:100%}
@media (max-width:600px){body{margin:0 8px 24px}h1{font-size:19px}}
svg.chart rect{fill:#0969da}svg.mix rect.writes{fill:#cf222e}svg.mix rect.reads{fill:#0969da}svg text{font-size:12px;fill:#57606a}
.finding{border-left:4px solid #d0d7de;padding:4px 12px;margin:8px 0}.finding.high{border-color:#cf222e}.finding.medium{border-color:#bf8700}
.sev{text-transform:uppercase;font-size:11px;color:#57606a}
table.evidence{width:auto;margin:4px 0}table.evidence th{position:static;cursor:auto;font-weight:normal;color:#57606a}
pre.fix{background:#f6f8fa;padding:8px;overflow:auto}.headline{margin:2px 0}
"#;

const JS: &str = r#"
(function(){
  function key(td, num){ var v = td.getAttribute('data-v') || td.textContent.trim(); if(!num) return v.toLowerCase(); var x = parseFloat(v); return isNaN(x) ? -Infinity : x; }
  function sortBy(table, i){
    var th = table.tHead.rows[0].cells[i], num = th.getAttribute('data-type') === 'num';
    var asc = !th.classList.contains('asc');
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(c){ c.classList.remove('asc','desc'); });
    th.classList.add(asc ? 'asc' : 'desc');
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){ var x = key(a.cells[i], num), y = key(b.cells[i], num); return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
    rows.forEach(function(r){ body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable').forEach(function(t){
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function(th, i){ th.addEventListener('click', function(){ sortBy(t, i); }); });
  });
  if (location.hash === '#selftest') {
    var out = [], t = document.getElementById('patterns'), col = 4;
    function counts(){ return Array.prototype.map.call(t.tBodies[0].rows, function(r){ return parseFloat(r.cells[col].textContent); }); }
    t.tHead.rows[0].cells[col].click(); var up = counts();
    t.tHead.rows[0].cells[col].click(); var down = counts();
    var sortedUp = up.every(function(v, i){ return i === 0 || up[i-1] <= v; });
    var sortedDown = down.every(function(v, i){ return i === 0 || down[i-1] >= v; });
    var bars = document.querySelectorAll('svg.chart rect').length;
    var drawn = Array.prototype.filter.call(document.querySelectorAll('svg.chart'), function(s){ var b = s.getBoundingClientRect(); return b.width > 0 && b.height > 0; }).length;
    out.push('rows=' + up.length, 'sorted_up=' + sortedUp, 'sorted_down=' + sortedDown, 'chart_rects=' + bars, 'charts_drawn=' + drawn);
    // Widths: the page itself never scrolls sideways; a table wider than its box
    // scrolls inside it (on a phone), and one that does has columns out of sight.
    var page = document.documentElement, overflow = page.scrollWidth - page.clientWidth;
    var scrolled = Array.prototype.filter.call(document.querySelectorAll('.wide'), function(w){ return w.scrollWidth > w.clientWidth + 1; }).length;
    out.push('width=' + page.clientWidth, 'page_overflow=' + overflow, 'tables_scrolled=' + scrolled);
    var nodes = Array.prototype.filter.call(document.querySelectorAll('svg.map g.node rect'), function(n){ var b = n.getBoundingClientRect(); return b.width > 0 && b.right <= page.clientWidth + 1; }).length;
    out.push('map_nodes=' + nodes);
    var ok = up.length > 1 && sortedUp && sortedDown && bars > 0 && drawn >= 2 && overflow <= 0;
    var el = document.getElementById('selftest'); el.hidden = false; el.textContent = 'selftest: ' + (ok ? 'ok' : 'FAILED') + ' ' + out.join(' ');
  }
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_draws() {
        assert_eq!(esc("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
        let svg = histogram_svg(&[(0.064, 0), (0.128, 3), (0.256, 1)]);
        assert_eq!(svg.matches("<rect").count(), 2, "empty slots draw nothing");
        assert!(timeline_svg(&[(100, 5), (102, 10)]).contains("peak 10 ops/s"));
        assert_eq!(timeline_svg(&[]), "<p>No operations.</p>");
    }
}
