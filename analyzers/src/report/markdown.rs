//! The Markdown report: the access-pattern table the design literature asks teams
//! to write by hand (Operation, Frequency, Data needed), with latency and volume,
//! then the findings, the read/write mix per collection, and the traffic notes.

use std::fmt::Write;

use super::{AccessPattern, Group, Operation, Report};

/// Renders the report as Markdown.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let t = &r.totals;
    let _ = writeln!(s, "# mongotap report\n");
    let _ = writeln!(
        s,
        "{} operations on {} connections over {:.1} s ({} to {}). {} events dropped, {} parse errors.\n",
        t.operations,
        t.connections,
        r.window.seconds,
        r.window.start,
        r.window.end,
        t.events_dropped,
        t.parse_errors
    );
    if let Some(loss) = r.loss_in_words() {
        let _ = writeln!(s, "> **Incomplete data.** {loss}\n");
    }

    summary(&mut s, r);
    operations(&mut s, r);
    relationships(&mut s, r);

    let _ = writeln!(s, "## Findings\n");
    if r.findings.is_empty() {
        let _ = writeln!(s, "No findings.\n");
    }
    for (i, f) in r.ranked_findings().into_iter().enumerate() {
        let _ = writeln!(s, "### {}. `{}` on `{}` ({})\n", i + 1, f.kind, f.namespace, f.severity);
        if let Some(h) = f.headline() {
            let _ = writeln!(s, "**{}**\n", cell(&h));
        }
        let _ = writeln!(s, "{}\n", f.recommendation);
        let figures = f.key_evidence();
        if !figures.is_empty() {
            let _ = writeln!(s, "| Evidence | |\n|---|---|");
            for (k, v) in figures {
                let _ = writeln!(s, "| {} | {} |", cell(&k), cell(&v));
            }
            let _ = writeln!(s);
        }
        let pretty = serde_json::to_string_pretty(&f.evidence).unwrap_or_default();
        let _ = writeln!(
            s,
            "<details><summary>All evidence, shapes {}</summary>\n\n```json\n{pretty}\n```\n\n</details>\n",
            f.shape_ids.join(", ")
        );
        if let Some(fix) = &f.fix {
            let _ = writeln!(s, "Fix:\n\n```{}\n{fix}\n```\n", f.fix_language());
        }
    }

    schemas(&mut s, r);
    shard_keys(&mut s, r);

    let of =
        |g: Group| -> Vec<&AccessPattern> { r.access_patterns.iter().filter(|p| p.group() == g).collect() };
    let (data, system, other) = (of(Group::Application), of(Group::System), of(Group::Administration));
    let _ = writeln!(s, "## Access patterns (per query shape)\n");
    if data.is_empty() {
        let _ = writeln!(s, "No reads or writes of the application's collections were seen.\n");
    } else {
        table(&mut s, &data);
    }
    if !system.is_empty() {
        let _ = writeln!(
            s,
            "<details><summary>The server's own namespaces ({} shapes: system.*, admin, config, local; no advice)</summary>\n",
            system.len()
        );
        table(&mut s, &system);
        let _ = writeln!(s, "</details>\n");
    }

    let examples: Vec<(usize, &AccessPattern)> =
        data.iter().enumerate().filter(|(_, p)| p.example.is_some()).map(|(i, p)| (i + 1, *p)).collect();
    if !examples.is_empty() {
        let _ = writeln!(s, "### Example values (shown because of --show-values)\n");
        for (i, p) in examples {
            let _ = writeln!(s, "- #{i}: `{}`", cell(&compact(p.example.as_ref().expect("filtered"), 400)));
        }
        let _ = writeln!(s);
    }

    if !r.collections.is_empty() {
        let _ = writeln!(s, "## Read/write mix per collection\n");
        let _ = writeln!(s, "| Namespace | Reads | Writes | Other commands | Read share |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for c in &r.collections {
            let rw = c.reads + c.writes;
            let share =
                if rw == 0 { "-".to_string() } else { format!("{:.0}%", 100.0 * c.reads as f64 / rw as f64) };
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | {} |",
                cell(&c.namespace),
                c.reads,
                c.writes,
                c.other,
                share
            );
        }
        let _ = writeln!(s);
    }

    if !r.apps.is_empty() {
        let _ = writeln!(s, "## Applications\n");
        let _ = writeln!(s, "| App | Operations | Namespaces |");
        let _ = writeln!(s, "|---|---:|---|");
        for a in &r.apps {
            let _ =
                writeln!(s, "| {} | {} | {} |", cell(&a.app), a.operations, cell(&a.namespaces.join(", ")));
        }
        let _ = writeln!(s);
    }

    if !other.is_empty() {
        let _ = writeln!(s, "## Other commands\n");
        let _ = writeln!(s, "| Command | Namespace | Count | p50 ms | p99 ms | Errors |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
        for p in other {
            let (p50, p99) =
                p.latency_ms.as_ref().map_or(("-".into(), "-".into()), |l| (ms(l.p50), ms(l.p99)));
            let _ = writeln!(
                s,
                "| {} | `{}` | {} | {p50} | {p99} | {} |",
                p.command,
                cell(&p.namespace),
                p.count,
                p.errors
            );
        }
        let _ = writeln!(s);
    }

    let tr = &r.traffic;
    let _ = writeln!(s, "## Traffic notes\n");
    let _ = writeln!(
        s,
        "- Requests {}, replies {}; unpaired replies {}, requests left unanswered {}.",
        t.requests, t.replies, tr.unpaired_replies, tr.unanswered
    );
    if !tr.compressed_messages.is_empty() {
        let _ = writeln!(s, "- Compressed messages: {}.", kv(&tr.compressed_messages));
    }
    if !tr.legacy_messages.is_empty() {
        let _ = writeln!(s, "- Legacy opcodes (counted, not analysed): {}.", kv(&tr.legacy_messages));
    }
    if tr.too_large > 0 {
        let _ = writeln!(s, "- {} messages were too large to analyse (forwarded as usual).", tr.too_large);
    }
    if tr.other_shapes > 0 {
        let _ = writeln!(
            s,
            "- {} operations had shapes beyond the table's cap (the \"other shapes\" row).",
            tr.other_shapes
        );
    }
    if tr.gaps > 0 {
        let _ = writeln!(
            s,
            "- {} holes in connections' events (the tap dropped some while the analysis was behind); the detectors reset what they followed on those connections.",
            tr.gaps
        );
    }
    if !tr.detector_evictions.is_empty() {
        let _ = writeln!(s, "- Detector state let go of to stay bounded: {}.", kv(&tr.detector_evictions));
    }
    if let Some(e) = &tr.last_parse_error {
        let _ = writeln!(s, "- Last parse error: {}.", cell(e));
    }
    s
}

/// What a person acts on first: the findings by severity, and the guides' checklist
/// question answered for the top operations.
fn summary(s: &mut String, r: &Report) {
    let _ = writeln!(s, "## Summary\n");
    let count = |sev: &str| r.findings.iter().filter(|f| f.severity == sev).count();
    let _ = writeln!(
        s,
        "- **{} findings**: {} high, {} medium, {} low.",
        r.findings.len(),
        count("high"),
        count("medium"),
        count("low")
    );
    for f in r.ranked_findings().into_iter().take(3) {
        let what = f.headline().unwrap_or_else(|| f.namespace.clone());
        let _ = writeln!(s, "  - `{}` ({}): {}", f.kind, f.severity, cell(&what));
    }
    let top: Vec<&Operation> = r.operations.iter().take(5).collect();
    if !top.is_empty() {
        let several: Vec<&&Operation> = top.iter().filter(|o| !o.one_round_trip).collect();
        let answer = if several.is_empty() {
            format!("Yes: each of the top {} needs one round trip to one collection.", top.len())
        } else {
            let named: Vec<String> = several
                .iter()
                .map(|o| {
                    format!(
                        "{} ({} round trips, {} collections)",
                        o.name,
                        o.round_trips.mean,
                        o.collections.len()
                    )
                })
                .collect();
            format!("{} of the top {} need more: {}.", several.len(), top.len(), named.join("; "))
        };
        let _ = writeln!(
            s,
            "- **Do the top operations need only one document (or one targeted query)?** {}",
            cell(&answer)
        );
    }
    let _ = writeln!(s);
}

/// Operations shown before the rest fold.
const SHOWN: usize = 20;

/// The seeds' own table: Operation, Frequency, Data needed; then round trips and
/// the collections touched. The busiest first; the rest folded.
fn operations(s: &mut String, r: &Report) {
    if r.operations.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Operations\n");
    let _ = writeln!(
        s,
        "The application's units of work, grouped from each client's requests (transactions, values that flow from one reply into the next request, adjacency), as the guides ask them listed. ⚠ marks an operation that needs more than one round trip or more than one collection.\n"
    );
    let head = "| # | Operation | Frequency | Data needed | Round trips | Collections | Count | p50 / p99 ms | Apps |\n|---:|---|---|---|---:|---:|---:|---|---|";
    let row = |s: &mut String, i: usize, o: &Operation| {
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
        let lat = o.latency_ms.as_ref().map_or("-".to_owned(), |l| format!("{} / {}", ms(l.p50), ms(l.p99)));
        let _ = writeln!(
            s,
            "| {} | {}{} | {} ({:.1}%, {:.2}/s) | {} | {} | {} | {}{} | {} | {} |",
            i + 1,
            if o.one_round_trip { "" } else { "⚠ " },
            cell(&o.name),
            o.frequency,
            o.share * 100.0,
            o.rate_per_s,
            cell(&needed.join("; ")),
            o.round_trips.mean,
            o.collections.len(),
            o.count,
            if o.count_lower_bound { " (lower bound)" } else { "" },
            lat,
            cell(&o.apps.join(", ")),
        );
    };
    let _ = writeln!(s, "{head}");
    for (i, o) in r.operations.iter().enumerate().take(SHOWN) {
        row(s, i, o);
    }
    if r.operations.len() > SHOWN {
        let _ = writeln!(
            s,
            "\n<details><summary>{} more operations</summary>\n\n{head}",
            r.operations.len() - SHOWN
        );
        for (i, o) in r.operations.iter().enumerate().skip(SHOWN) {
            row(s, i, o);
        }
        let _ = writeln!(s, "\n</details>");
    }
    let _ = writeln!(s);
}

/// The relationship map (Mermaid) and each relationship's answers and verdict.
fn relationships(s: &mut String, r: &Report) {
    let Some(map) = super::map::mermaid(r) else { return };
    let _ = writeln!(s, "## Relationships: embed or reference\n");
    let _ = writeln!(s, "{map}");
    let _ = writeln!(
        s,
        "| Parent → child | Link | Read together | Change together | Children per parent (p50 / max) | Parents per child (p50 / max) | Child writes per read | Verdict |\n|---|---|---:|---:|---|---|---:|---|"
    );
    for rel in &r.relationships {
        let _ = writeln!(
            s,
            "| `{}` → `{}` | {} → {}{} | {:.0}% | {} | {} | {} | {:.2} | **{}**{} |",
            cell(&rel.parent),
            cell(&rel.child),
            cell(&rel.link.parent_field),
            cell(&rel.link.child_field),
            if rel.via_lookup { " ($lookup)" } else { "" },
            rel.read_together * 100.0,
            rel.change_together.map_or("-".to_owned(), |c| format!("{:.0}%", c * 100.0)),
            rel.children_per_parent.shown(),
            rel.parents_per_child.shown(),
            rel.child_writes_per_read,
            rel.verdict.replace('_', " "),
            if rel.copy_fields.is_empty() {
                String::new()
            } else {
                format!(" (copy {})", rel.copy_fields.join(", "))
            },
        );
    }
    let _ = writeln!(s);
    for rel in &r.relationships {
        let _ = writeln!(s, "- `{}` → `{}`: {}", cell(&rel.parent), cell(&rel.child), rel.recommendation);
        if let Some(sketch) = &rel.sketch {
            let _ = writeln!(s, "  After: `{}`", cell(sketch));
        }
    }
    let _ = writeln!(s);
}

fn table(s: &mut String, rows: &[&AccessPattern]) {
    let _ = writeln!(s, "| # | Operation | Shape | Frequency | Data needed | p50 / p95 / p99 ms | Docs returned (mean) | Errors | Apps |");
    let _ = writeln!(s, "|---:|---|---|---|---|---|---:|---:|---|");
    for (i, p) in rows.iter().enumerate() {
        let lat = p
            .latency_ms
            .as_ref()
            .map_or("-".to_string(), |l| format!("{} / {} / {}", ms(l.p50), ms(l.p95), ms(l.p99)));
        let data = if p.fields_read.is_empty() { "-".to_string() } else { p.fields_read.join(", ") };
        let statements =
            if p.statements > p.count { format!(" ({} statements)", p.statements) } else { String::new() };
        let _ = writeln!(
            s,
            "| {} | {} `{}` | `{}` | {} ({:.1}%, {:.2}/s){} | {} | {} | {:.1} | {} | {} |",
            i + 1,
            p.command,
            cell(&p.namespace),
            cell(&compact(&p.shape, 160)),
            p.count_text(),
            p.share * 100.0,
            p.rate_per_s,
            statements,
            cell(&data),
            lat,
            p.docs_returned.mean,
            p.errors,
            cell(&p.apps.join(", ")),
        );
    }
    let _ = writeln!(s);
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn kv(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

/// A shape as short JSON, cut at `max` characters.
pub fn compact(v: &serde_json::Value, max: usize) -> String {
    let s = v.to_string();
    if s.chars().count() <= max {
        return s;
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}…")
}

/// Escapes what would break a table cell.
/// Fields shown per collection; the JSON report has them all.
const SCHEMA_FIELDS_SHOWN: usize = 15;

/// Per collection: its fields' types and presence, its versions and its validator.
fn schemas(s: &mut String, r: &Report) {
    if r.schemas.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Schemas (from the documents written and read)\n");
    for c in &r.schemas {
        let _ = writeln!(
            s,
            "### `{}`: {} documents seen, {} written\n",
            cell(&c.namespace),
            c.documents_seen,
            c.documents_written
        );
        if let Some(v) = &c.versions {
            let values: Vec<String> = v.values.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            let own: Vec<String> = v
                .fields_of
                .iter()
                .filter(|(_, f)| !f.is_empty())
                .map(|(k, f)| format!("{k} has {}", f.join(", ")))
                .collect();
            let _ = writeln!(
                s,
                "Version field `{}` (documents per version: {}; {}).\n",
                cell(&v.field),
                values.join(", "),
                own.join("; ")
            );
        }
        let _ = writeln!(
            s,
            "| Field | Types (values) | Present in | Array length (min / mean / max) |\n|---|---|---:|---|"
        );
        for f in c.fields.iter().take(SCHEMA_FIELDS_SHOWN) {
            let _ = writeln!(
                s,
                "| `{}` | {} | {:.0}% | {} |",
                cell(&f.path),
                f.types_text(),
                f.presence * 100.0,
                f.lengths_text()
            );
        }
        if c.fields.len() > SCHEMA_FIELDS_SHOWN {
            let _ =
                writeln!(s, "| ... {} more in the JSON report | | | |", c.fields.len() - SCHEMA_FIELDS_SHOWN);
        }
        let _ = writeln!(s);
        if let Some(fix) = &c.fix {
            let _ = writeln!(
                s,
                "<details><summary>A validator to paste (inferred from {} written documents)</summary>\n\n```js\n{fix}\n```\n\n</details>\n",
                c.documents_written
            );
        }
    }
}

/// Per collection: the shard-key candidates, the recommendation first.
fn shard_keys(s: &mut String, r: &Report) {
    if r.shard_keys.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Shard keys (if sharding later)\n");
    for c in &r.shard_keys {
        let _ = writeln!(
            s,
            "### `{}` ({} operations)\n\n{}\n",
            cell(&c.namespace),
            c.operations,
            c.recommendation
        );
        if let Some(cmd) = &c.command {
            let _ = writeln!(s, "```js\n{cmd}\n```\n");
        }
        let _ = writeln!(
            s,
            "| # | Key | Reads to one shard | Reads to every shard | Writes to one shard | Distinct values | Monotonic | |\n|---:|---|---:|---:|---:|---:|---|---|"
        );
        for k in &c.candidates {
            let [key, one, every, writes, distinct, monotonic, verdict] = k.cells();
            let _ = writeln!(
                s,
                "| {} | `{}` | {one} | {every} | {writes} | {distinct} | {monotonic} | {} |",
                k.rank,
                cell(&key),
                cell(&verdict)
            );
        }
        let _ = writeln!(s);
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
