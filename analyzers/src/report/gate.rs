//! The CI gate: what a report has that its baseline did not. A build fails when a new
//! finding of a listed kind appears, or (with `new_shape`) a new read or write shape.
//! Handshake and admin commands never count as new shapes: they are not data access.

use std::collections::BTreeSet;

use super::{Finding, Report};
use crate::detectors::KINDS;

/// The `--fail-on` word for new access-pattern shapes.
pub const NEW_SHAPE: &str = "new_shape";
/// The `--fail-on` word for a new finding of any kind.
pub const ANY: &str = "any";

/// What is new in a report compared with its baseline, limited to what the gate watches.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    /// New findings of watched kinds, as one line each.
    pub new_findings: Vec<String>,
    /// New read/write shapes, as one line each (when `new_shape` is watched).
    pub new_shapes: Vec<String>,
}

impl Verdict {
    /// Whether the gate fails.
    pub fn fails(&self) -> bool {
        !self.new_findings.is_empty() || !self.new_shapes.is_empty()
    }
}

/// Checks the `--fail-on` words: finding kinds of the contract, [`ANY`] or
/// [`NEW_SHAPE`]. An unknown word is an error, so that a typo (`n_plus_on`) cannot
/// make the gate pass for ever.
pub fn check_fail_on(words: &[String]) -> Result<(), String> {
    let unknown: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| *w != ANY && *w != NEW_SHAPE && !KINDS.contains(w))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(format!(
        "--fail-on: unknown {} {} (known: {}, {ANY}, {NEW_SHAPE})",
        if unknown.len() == 1 { "word" } else { "words" },
        unknown.join(", "),
        KINDS.join(", ")
    ))
}

/// A finding's identity across runs: kind, namespace, shapes and the kind's own
/// fields (the index, the field), never its counts.
fn identity(f: &Finding) -> String {
    let mut shapes = match f.kind.as_str() {
        // An N+1 groups its parent shapes (a first page without `skip`, later pages
        // with it): which of them a run happened to see must not make it "new".
        // The link and the child (its last shape id) say which N+1 it is.
        "n_plus_one" => f.shape_ids.last().cloned().into_iter().collect(),
        _ => f.shape_ids.clone(),
    };
    shapes.sort();
    let extra: Vec<String> = ["index", "field", "child_namespace", "link", "lookups"]
        .iter()
        .filter_map(|k| f.extra.get(*k).map(|v| format!("{k}={v}")))
        .collect();
    format!("{} {} [{}] {}", f.kind, f.namespace, shapes.join(","), extra.join(" "))
}

/// Compares `new` with `baseline`, watching the kinds in `fail_on`.
pub fn compare(new: &Report, baseline: &Report, fail_on: &[String]) -> Verdict {
    let watch = |kind: &str| fail_on.iter().any(|k| k == kind || k == ANY);
    let known: BTreeSet<String> = baseline.findings.iter().map(identity).collect();
    let new_findings = new
        .findings
        .iter()
        .filter(|f| watch(&f.kind) && !known.contains(&identity(f)))
        .map(|f| format!("new finding {} ({}) on {}: {}", f.kind, f.severity, f.namespace, f.recommendation))
        .collect();
    let mut new_shapes = Vec::new();
    if fail_on.iter().any(|k| k == NEW_SHAPE) {
        let known: BTreeSet<&str> = baseline.access_patterns.iter().map(|p| p.shape_id.as_str()).collect();
        new_shapes = new
            .access_patterns
            .iter()
            .filter(|p| p.category != "command" && !known.contains(p.shape_id.as_str()))
            .map(|p| {
                format!(
                    "new shape {} {} {} ({} operations): {}",
                    p.shape_id, p.command, p.namespace, p.count, p.shape
                )
            })
            .collect();
    }
    Verdict { new_findings, new_shapes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{AccessPattern, Amount, Latency, Tool, Totals, Window};
    use serde_json::json;

    fn pattern(id: &str, category: &str) -> AccessPattern {
        let amount = Amount { total: 0, mean: 0.0 };
        AccessPattern {
            namespace: "shop.orders".into(),
            command: "find".into(),
            shape: json!({"filter": {"a": {"$eq": "?number"}}}),
            shape_id: id.into(),
            count: 3,
            share: 1.0,
            rate_per_s: 1.0,
            latency_ms: Some(Latency { p50: 1.0, p95: 1.0, p99: 1.0, max: 1.0 }),
            docs_returned: amount.clone(),
            request_bytes: amount.clone(),
            reply_bytes: amount,
            errors: 0,
            apps: vec![],
            fields_read: vec![],
            category: category.into(),
            statements: 3,
            errors_by_code: Default::default(),
            cursor_of: None,
            latency_histogram_ms: vec![],
            latency_us_recorded: vec![],
            example: None,
            first_seen: String::new(),
            last_seen: String::new(),
            count_lower_bound: false,
            missed_estimate: 0,
        }
    }

    fn finding(kind: &str, key: &[(&str, i32)]) -> Finding {
        let mut extra = std::collections::BTreeMap::new();
        extra.insert(
            "index".to_owned(),
            json!({"key": key.iter().map(|(f, d)| json!([f, d])).collect::<Vec<_>>()}),
        );
        Finding {
            kind: kind.into(),
            severity: "high".into(),
            namespace: "shop.orders".into(),
            shape_ids: vec!["aa".into()],
            evidence: json!({"count": 10}),
            recommendation: "Create an index.".into(),
            fix: None,
            extra,
        }
    }

    fn report(patterns: Vec<AccessPattern>, findings: Vec<Finding>) -> Report {
        Report {
            schema: 1,
            tool: Tool { name: "mongotap".into(), version: "0".into() },
            window: Window { start: String::new(), end: String::new(), seconds: 0.0, start_us: 0, end_us: 0 },
            totals: Totals::default(),
            access_patterns: patterns,
            findings,
            collections: vec![],
            apps: vec![],
            timeline: vec![],
            traffic: Default::default(),
            operations: vec![],
            relationships: vec![],
            schemas: vec![],
            shard_keys: vec![],
        }
    }

    #[test]
    fn new_findings_of_watched_kinds_fail_and_known_ones_do_not() {
        let fail_on = vec!["missing_index".to_owned(), "n_plus_one".to_owned()];
        let base = report(vec![], vec![finding("missing_index", &[("a", 1)])]);
        let same = report(
            vec![],
            vec![{
                let mut f = finding("missing_index", &[("a", 1)]);
                f.evidence = json!({"count": 999}); // counts change; the finding is the same
                f
            }],
        );
        assert!(!compare(&same, &base, &fail_on).fails());
        let other_index = report(vec![], vec![finding("missing_index", &[("a", 1), ("b", -1)])]);
        let v = compare(&other_index, &base, &fail_on);
        assert_eq!(v.new_findings.len(), 1);
        assert!(v.new_findings[0].starts_with("new finding missing_index (high) on shop.orders"));
        let unwatched = report(vec![], vec![finding("large_document", &[])]);
        assert!(!compare(&unwatched, &base, &fail_on).fails());
        assert!(compare(&unwatched, &base, &["any".to_owned()]).fails());
    }

    #[test]
    fn an_n_plus_one_is_the_same_whichever_parent_shapes_a_run_saw() {
        let n = |shapes: &[&str], child_field: &str| {
            let mut f = finding("n_plus_one", &[]);
            f.extra.clear();
            f.extra.insert("child_namespace".into(), json!("shop.customers"));
            f.extra.insert("link".into(), json!({"parent_field": "customerId", "child_field": child_field}));
            f.shape_ids = shapes.iter().map(|s| s.to_string()).collect();
            f
        };
        let watch = ["n_plus_one".to_owned()];
        let base = report(vec![], vec![n(&["page1", "child"], "_id")]);
        assert!(
            !compare(&report(vec![], vec![n(&["page1", "pageN", "child"], "_id")]), &base, &watch).fails()
        );
        assert!(compare(&report(vec![], vec![n(&["page1", "child"], "code")]), &base, &watch).fails());
        assert!(compare(&report(vec![], vec![n(&["page1", "other"], "_id")]), &base, &watch).fails());
    }

    #[test]
    fn new_shapes_fail_only_when_watched_and_only_for_reads_and_writes() {
        let base = report(vec![pattern("aa", "read")], vec![]);
        let new =
            report(vec![pattern("aa", "read"), pattern("bb", "read"), pattern("cc", "command")], vec![]);
        assert!(!compare(&new, &base, &["missing_index".to_owned()]).fails());
        let v = compare(&new, &base, &[NEW_SHAPE.to_owned()]);
        assert_eq!(v.new_shapes.len(), 1);
        assert!(v.new_shapes[0].starts_with("new shape bb find shop.orders (3 operations)"));
    }

    #[test]
    fn fail_on_rejects_what_it_does_not_know() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            check_fail_on(&w(&["n_plus_one", "lookup_chain", "missing_index", "any", "new_shape"])).is_ok()
        );
        let e = check_fail_on(&w(&["n_plus_on", "missing_index"])).unwrap_err();
        assert!(e.contains("unknown word n_plus_on") && e.contains("n_plus_one"), "{e}");
    }
}
