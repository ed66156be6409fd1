//! What the relationships' verdicts say as findings: an embed or extended-reference
//! candidate where the change pays, with the fix to paste, unless the N+1 or
//! `$lookup` finding on the same link says it; and there, the verdict named, so a
//! link tells one story.

use serde_json::{json, Value};

use super::{embedded_name, Relationship};
use crate::detectors::Thresholds;
use crate::finding::{Draft, Finding, Severity};

/// The findings the relationships make where the change pays, and the verdict
/// named in the N+1 and `$lookup` findings on the same link: one story per link.
pub(crate) fn reconcile(
    relationships: &[Relationship],
    findings: &mut Vec<Finding>,
    total_operations: u64,
    t: &Thresholds,
) {
    let on_link = |f: &Finding, r: &Relationship| -> bool {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        match f.kind.as_str() {
            "n_plus_one" => {
                f.namespace == r.parent
                    && text(f.extra.get("child_namespace")).as_deref() == Some(r.child.as_str())
                    && f.extra.get("link").is_some_and(|l| {
                        text(l.get("parent_field")).as_deref() == Some(r.link.parent_field.as_str())
                            && text(l.get("child_field")).as_deref() == Some(r.link.child_field.as_str())
                    })
            }
            "lookup_chain" => {
                f.namespace == r.parent
                    && f.extra
                        .get("lookups")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.iter().any(|x| x.as_str() == Some(r.child.as_str())))
            }
            _ => false,
        }
    };
    let mut told: Vec<bool> = vec![false; relationships.len()];
    for f in findings.iter_mut() {
        let mine: Vec<(usize, &Relationship)> =
            relationships.iter().enumerate().filter(|(_, r)| on_link(f, r)).collect();
        if mine.is_empty() {
            continue;
        }
        let verdicts: Vec<Value> = mine
            .iter()
            .map(|(i, r)| {
                told[*i] = true;
                json!({"child": r.child, "link": r.link, "verdict": r.verdict, "copy_fields": r.copy_fields})
            })
            .collect();
        let words: Vec<String> = mine
            .iter()
            .map(|(_, r)| format!("{} -> {}: {}", r.parent, r.child, r.verdict.replace('_', " ")))
            .collect();
        f.recommendation.push_str(&format!(
            " The relationship map's verdict for this link: {} (see relationships).",
            words.join("; ")
        ));
        f.extra.insert("relationships".into(), Value::Array(verdicts));
    }
    for (i, r) in relationships.iter().enumerate() {
        let kind = match r.verdict.as_str() {
            "embed" => "embed_candidate",
            // Without fields to copy there is no fix to paste: the $lookup finding says it.
            "extended_reference" if !r.copy_fields.is_empty() => "extended_reference_candidate",
            _ => continue,
        };
        if told[i] {
            continue; // said in the N+1 or $lookup finding on the same link
        }
        let units = r.evidence.get("operations_following_it").and_then(Value::as_u64).unwrap_or(0);
        let share = units as f64 / total_operations.max(1) as f64;
        let severity = if share >= t.operation_very_high_share { Severity::High } else { Severity::Medium };
        let coll = |ns: &str| ns.split_once('.').map_or(ns, |(_, c)| c).to_owned();
        let (parent, child) = (coll(&r.parent), coll(&r.child));
        let fix = match kind {
            "embed_candidate" => format!(
                "// embed each {parent}'s {child} (then read {parent} alone, and write {child} through {parent}):\ndb.{parent}.aggregate([\n  {{ $lookup: {{ from: \"{child}\", localField: \"{pf}\", foreignField: \"{cf}\", as: \"{child}\" }} }},\n  {{ $merge: {{ into: \"{parent}\", whenMatched: \"merge\" }} }}\n])",
                pf = r.link.parent_field, cf = r.link.child_field,
            ),
            _ => match r.link.parent_field.split_once('.') {
                // An array of references: the fields go beside each reference.
                Some((array, reference)) if !reference.starts_with('$') => format!(
                    "// copy {fields} of {child} beside each {reference} in {parent}.{array} (and on a change of them, update the copies):\ndb.{parent}.aggregate([\n  {{ $lookup: {{ from: \"{child}\", localField: \"{pf}\", foreignField: \"{cf}\", as: \"_c\" }} }},\n  {{ $set: {{ {array}: {{ $map: {{ input: \"${array}\", as: \"e\", in: {{ $mergeObjects: [\"$$e\", {{ $let: {{\n    vars: {{ c: {{ $first: {{ $filter: {{ input: \"$_c\", cond: {{ $eq: [\"$$this.{cf}\", \"$$e.{reference}\"] }} }} }} }} }},\n    in: {{ {sets} }} }} }}] }} }} }} }} }},\n  {{ $unset: \"_c\" }},\n  {{ $merge: {{ into: \"{parent}\", whenMatched: \"merge\" }} }}\n])",
                    fields = r.copy_fields.join(", "), pf = r.link.parent_field, cf = r.link.child_field,
                    sets = r.copy_fields.iter().map(|f| format!("{f}: \"$$c.{f}\"")).collect::<Vec<_>>().join(", "),
                ),
                _ => format!(
                    "// copy {fields} of {child} into {parent} (and on a change of them, update the copies: updateMany by {pf}):\ndb.{parent}.aggregate([\n  {{ $lookup: {{ from: \"{child}\", localField: \"{pf}\", foreignField: \"{cf}\", as: \"_c\" }} }},\n  {{ $set: {{ {root}: {{ $let: {{ vars: {{ c: {{ $arrayElemAt: [\"$_c\", 0] }} }}, in: {{ id: \"${pf}\", {sets} }} }} }} }} }},\n  {{ $unset: \"_c\" }},\n  {{ $merge: {{ into: \"{parent}\", whenMatched: \"merge\" }} }}\n])",
                    fields = r.copy_fields.join(", "), pf = r.link.parent_field, cf = r.link.child_field,
                    root = embedded_name(&r.link.parent_field),
                    sets = r.copy_fields.iter().map(|f| format!("{f}: \"$$c.{f}\"")).collect::<Vec<_>>().join(", "),
                ),
            },
        };
        let mut extra = vec![("child_namespace", json!(r.child)), ("link", json!(r.link))];
        if kind == "extended_reference_candidate" {
            extra.push(("fields", json!(r.copy_fields)));
        }
        findings.push(
            Draft {
                kind,
                severity,
                namespace: &r.parent,
                shapes: &[],
                evidence: json!({
                    "count": units,
                    "read_together": r.read_together,
                    "change_together": r.change_together,
                    "children_per_parent": r.children_per_parent,
                    "parents_per_child": r.parents_per_child,
                    "child_writes_per_read": r.child_writes_per_read,
                    "operations": r.operations,
                    "sketch": r.sketch,
                }),
                recommendation: r.recommendation.clone(),
                fix: Some(fix),
                extra,
            }
            .finding(),
        );
    }
}
