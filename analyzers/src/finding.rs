//! A finding: one smell of the schema-design literature, with the evidence a user
//! can check, the recommendation and the fix. Detectors make findings and every
//! report format renders them; this module sits below both and imports neither.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::shape::hex;
use crate::view::ShapeId;

/// A finding: a smell with its evidence and its fix (see [`crate::detectors`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    pub kind: String,
    pub severity: String,
    pub namespace: String,
    pub shape_ids: Vec<String>,
    pub evidence: Value,
    pub recommendation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Kind-specific fields (`index`, `child_namespace`, `link`, `field`, ...).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Finding {
    /// One line that names what the finding is about, for the kinds that have one:
    /// the link of an N+1, the joined collections of a `$lookup` chain, the field.
    pub fn headline(&self) -> Option<String> {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        match self.kind.as_str() {
            "n_plus_one" => {
                let child = self.extra.get("child_namespace").and_then(text)?;
                let link = self.extra.get("link")?;
                Some(format!(
                    "{}.{} -> {}.{}",
                    self.namespace,
                    link.get("parent_field").and_then(text)?,
                    child,
                    link.get("child_field").and_then(text)?
                ))
            }
            "lookup_chain" => {
                let l: Vec<String> = self.extra.get("lookups")?.as_array()?.iter().filter_map(text).collect();
                Some(format!("{} joins {}", self.namespace, l.join(", ")))
            }
            "missing_index" => {
                let key: Vec<String> = self
                    .extra
                    .get("index")?
                    .get("key")?
                    .as_array()?
                    .iter()
                    .filter_map(|k| Some(format!("{}: {}", k.get(0)?.as_str()?, k.get(1)?)))
                    .collect();
                Some(format!("{} needs {{{}}}", self.namespace, key.join(", ")))
            }
            "embed_candidate" | "extended_reference_candidate" => {
                let child = self.extra.get("child_namespace").and_then(text)?;
                let link = self.extra.get("link")?;
                let fields: Vec<String> = self
                    .extra
                    .get("fields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(text)
                    .collect();
                Some(format!(
                    "{}.{} -> {}.{}: {}",
                    self.namespace,
                    link.get("parent_field").and_then(text)?,
                    child,
                    link.get("child_field").and_then(text)?,
                    if fields.is_empty() {
                        "embed".to_owned()
                    } else {
                        format!("copy {}", fields.join(", "))
                    }
                ))
            }
            "redundant_index" | "unused_index" => {
                self.extra.get("index_name").and_then(text).map(|n| format!("{} index {n}", self.namespace))
            }
            _ => self.extra.get("field").and_then(text).map(|f| format!("{}.{f}", self.namespace)),
        }
    }

    /// The evidence's plain figures (numbers, strings, lists of strings), in order,
    /// for a table; nested evidence is left to the full JSON.
    pub fn key_evidence(&self) -> Vec<(String, String)> {
        let Some(o) = self.evidence.as_object() else { return Vec::new() };
        o.iter()
            .filter_map(|(k, v)| {
                let shown = match v {
                    Value::Number(n) => n.to_string(),
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::Array(a) if a.iter().all(Value::is_string) && !a.is_empty() => {
                        a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                    }
                    _ => return None,
                };
                Some((k.replace('_', " "), shown))
            })
            .collect()
    }

    /// The language of the fix, for syntax highlighting: Python comments start
    /// with `#`, Rust has `let` and turbofish, the rest is JavaScript (mongosh, Node).
    pub fn fix_language(&self) -> &'static str {
        let Some(fix) = &self.fix else { return "" };
        if fix.starts_with('#') {
            "python"
        } else if fix.contains("::<") || fix.contains("let ids: Vec<") {
            "rust"
        } else if fix.contains("List<") {
            "java"
        } else {
            "js"
        }
    }
}

/// How much a finding costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Fix it first.
    High,
    /// Worth fixing.
    Medium,
    /// Worth knowing.
    Low,
}

impl Severity {
    /// As the report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }
}

/// A finding as a detector writes it; [`Draft::finding`] gives it its contract form.
pub struct Draft<'a> {
    pub kind: &'a str,
    pub severity: Severity,
    pub namespace: &'a str,
    pub shapes: &'a [ShapeId],
    pub evidence: Value,
    pub recommendation: String,
    pub fix: Option<String>,
    pub extra: Vec<(&'a str, Value)>,
}

impl Draft<'_> {
    /// The finding, with shape ids as reports print them.
    pub fn finding(self) -> Finding {
        Finding {
            kind: self.kind.to_owned(),
            severity: self.severity.as_str().to_owned(),
            namespace: self.namespace.to_owned(),
            shape_ids: self.shapes.iter().map(|s| hex(*s)).collect(),
            evidence: self.evidence,
            recommendation: self.recommendation,
            fix: self.fix,
            extra: self.extra.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        }
    }
}
