//! Inefficient regular expressions (`inefficient_regex`): a frequent read matches a
//! field with a `$regex` that no index can seek. MongoDB's manual ("$regex", Index
//! Use): only a case-sensitive pattern anchored at the start (`^` or `\A`) and
//! followed by literal characters is a prefix expression the server turns into an
//! index range; any other pattern reads every key of an index on the field, or every
//! document without one, and "case-insensitive regular expression queries generally
//! cannot use indexes effectively" (a case-insensitive index does not help either:
//! `$regex` is not collation-aware). Atlas' schema advisor flags the same.
//!
//! From the wire: the filter of find, count, distinct and an aggregation's leading
//! `$match`, looked at only for shapes that carry a `$regex` (the shape says so; the
//! pattern itself is looked at, classified and forgotten: only its class is kept).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element::{self, Element};

use crate::detectors::MAX_NAMES;
use crate::detectors::{collection, Context, Detector};
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::names::Paths;
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::values::At;
use crate::view::{OpView, ShapeId};

/// A pattern's class: what decides whether an index on its field can be sought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// The `i` flag (or `(?i)`): every key is read, whatever the anchor.
    pub case_insensitive: bool,
    /// Anchored at the start (`^` or `\A`) with a literal first character: a prefix.
    pub prefix: bool,
    /// Anchored at both ends with only literals between: an equality (ignoring case,
    /// with the `i` flag), which a collation index answers.
    pub whole_value: bool,
}

impl Class {
    /// The manual's prefix expression: case-sensitive and anchored on a literal, an
    /// index range.
    pub fn seekable(&self) -> bool {
        self.prefix && !self.case_insensitive
    }
}

/// Bytes that make a pattern something other than literal text at their place.
fn special(b: u8) -> bool {
    matches!(
        b,
        b'.' | b'[' | b']' | b'(' | b')' | b'*' | b'+' | b'?' | b'{' | b'}' | b'|' | b'\\' | b'^' | b'$'
    )
}

/// Whether a pattern piece is plain text: no special byte but escaped punctuation
/// (`ann@example\.com`, as drivers' escape functions write it) and quoted runs
/// (`\Q...\E`, as Java's `Pattern.quote` writes them).
fn only_literals(piece: &[u8]) -> bool {
    let mut i = 0;
    while i < piece.len() {
        match piece[i] {
            b'\\' => match piece.get(i + 1) {
                Some(b'Q') => match piece[i + 2..].windows(2).position(|w| w == b"\\E") {
                    Some(end) => i += 2 + end + 2,
                    None => return true, // Quoted to the end.
                },
                Some(c) if c.is_ascii_punctuation() => i += 2,
                _ => return false,
            },
            c if special(c) => return false,
            _ => i += 1,
        }
    }
    !piece.is_empty()
}

/// Classifies a pattern with its options, by the manual's prefix-expression rule.
pub fn classify(pattern: &[u8], options: &[u8]) -> Class {
    let (pattern, inline_i) = match pattern.strip_prefix(b"(?i)") {
        Some(rest) => (rest, true),
        None => (pattern, false),
    };
    let case_insensitive = inline_i || options.contains(&b'i');
    let body = if let Some(rest) = pattern.strip_prefix(b"\\A") {
        Some(rest)
    } else if options.contains(&b'm') {
        None // `^` then anchors every line, not the value.
    } else {
        pattern.strip_prefix(b"^")
    };
    let literal_prefix = body.is_some_and(|b| {
        // The first character: plain, escaped punctuation (`^\$`) or quoted (`^\Q...`).
        let width = match b {
            [b'\\', b'Q', c, ..] if *c != b'\\' => return true,
            [b'\\', c, ..] if c.is_ascii_punctuation() => 2,
            [c, ..] if !special(*c) => 1,
            _ => return false,
        };
        // `^a?`, `^a*`, `^a{0,1}`: the first character is optional, so no prefix
        // (`^a{2}` keeps it).
        !matches!(b.get(width..), Some([b'?' | b'*', ..] | [b'{', b'0', ..]))
    });
    let whole_value = body.and_then(|b| b.strip_suffix(b"$")).is_some_and(only_literals);
    Class { case_insensitive, prefix: literal_prefix, whole_value }
}

/// The regex a filter value holds, as (pattern, options): a BSON regex, or
/// `{$regex: "...", $options: "..."}` (whose `$regex` may itself be a BSON regex).
fn regex_of<'a>(v: &Element<'a>) -> Option<(&'a [u8], &'a [u8])> {
    if v.kind == 0x0B {
        return bson_regex(v.value);
    }
    let ops = v.as_document()?;
    let re = element::find(ops, "$regex")?;
    let (pattern, own) = match re.kind {
        0x0B => bson_regex(re.value)?,
        0x02 => (re.as_str()?.as_bytes(), &b""[..]),
        _ => return None,
    };
    let options = element::find(ops, "$options").and_then(|o| o.as_str()).map_or(own, str::as_bytes);
    Some((pattern, options))
}

/// A BSON regex value: two C strings, the pattern then the options.
fn bson_regex(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = value.iter().position(|b| *b == 0)?;
    let rest = &value[end + 1..];
    let end2 = rest.iter().position(|b| *b == 0)?;
    Some((&value[..end], &rest[..end2]))
}

/// Calls `found` for every (field, class) of a filter's regexes, through `$and`
/// and `$or` (a regex under `$or` still scans when its branch runs).
fn regexes<'a>(filter: &'a bson::RawDocument, found: &mut dyn FnMut(&'a [u8], Class)) {
    for e in element::elements(filter) {
        match e.key {
            b"$and" | b"$or" => {
                for b in element::elements_in(e.as_array()).filter_map(|b| b.as_document()) {
                    regexes(b, found);
                }
            }
            k if k.first() == Some(&b'$') => {}
            k => {
                if let Some((pattern, options)) = regex_of(&e) {
                    found(k, classify(pattern, options));
                }
            }
        }
    }
}

#[derive(Default)]
struct Stat {
    namespace: String,
    field: u32,
    runs: u64,
    case_insensitive: u64,
    unanchored: u64,
    whole_value: u64,
    latency_us: u64,
    docs_returned: u64,
    shapes: BTreeSet<ShapeId>,
    apps: BTreeSet<String>,
}

/// The inefficient-regex detector.
pub struct InefficientRegex {
    paths: Paths,
    max_fields: usize,
    /// Whether a shape's text carries `$regex`, decided once per shape.
    has_regex: FxHashMap<ShapeId, bool>,
    /// By (namespace, field): a regex on a field scans, whichever shape sends it.
    stats: FxHashMap<(String, u32), Stat>,
    refused: u64,
}

impl InefficientRegex {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> InefficientRegex {
        InefficientRegex {
            paths: Paths::default(),
            max_fields: t.max_patterns as usize,
            has_regex: FxHashMap::default(),
            stats: FxHashMap::default(),
            refused: 0,
        }
    }
}

impl Detector for InefficientRegex {
    fn name(&self) -> &'static str {
        "inefficient_regex"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        if v.category != Category::Read || op.failed() {
            return;
        }
        let Some(Some(shape)) = v.shape_ids.first().copied() else { return };
        let has = match self.has_regex.get(&shape) {
            Some(h) => *h,
            None => {
                if self.has_regex.len() >= self.max_fields * 16 {
                    self.refused += 1;
                    return;
                }
                let h = v.statements.first().is_some_and(|s| {
                    s.shape.as_bytes().windows(b"\"$regex\"".len()).any(|w| w == b"\"$regex\"")
                });
                self.has_regex.insert(shape, h);
                h
            }
        };
        if !has {
            return;
        }
        let Some(filter) = v.filter() else { return };
        // Beside an equality, the regex filters what an index on that field found
        // (`{tenantId: t, name: /q/i}`): it is not what the read costs.
        if !v.equalities().is_empty() {
            return;
        }
        let mut found: Vec<(&[u8], Class)> = Vec::new();
        regexes(filter, &mut |k, c| found.push((k, c)));
        for (field, class) in found {
            if class.seekable() {
                continue;
            }
            let Some(field) = self.paths.id(At { path: field, array: None }) else { continue };
            let key = (op.namespace.to_string(), field);
            if !self.stats.contains_key(&key) && self.stats.len() >= self.max_fields {
                self.refused += 1;
                continue;
            }
            let s = self.stats.entry(key).or_insert_with(|| Stat {
                namespace: op.namespace.to_string(),
                field,
                ..Stat::default()
            });
            s.runs += 1;
            s.case_insensitive += u64::from(class.case_insensitive);
            s.unanchored += u64::from(!class.prefix);
            s.whole_value += u64::from(class.whole_value && class.case_insensitive);
            s.latency_us += op.latency_us.unwrap_or(0);
            s.docs_returned += op.docs_returned;
            if s.shapes.len() < MAX_NAMES {
                s.shapes.insert(shape);
            }
            let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
            crate::detectors::keep_name(&mut s.apps, app);
        }
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("fields", self.refused), ("paths", self.paths.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let total: u64 = ctx.table.rows().iter().map(|r| r.count).sum();
        let mut all: Vec<&Stat> = self.stats.values().filter(|s| s.runs >= t.regex_min_count).collect();
        all.sort_by(|a, b| {
            (&a.namespace, self.paths.name(a.field)).cmp(&(&b.namespace, self.paths.name(b.field)))
        });
        all.into_iter()
            .map(|s| {
                let field = self.paths.name(s.field).to_owned();
                let coll = collection(&s.namespace);
                let share = s.runs as f64 / total.max(1) as f64;
                let severity = if share >= t.index_high_share { Severity::High } else { Severity::Medium };
                let what = match (s.case_insensitive > 0, s.unanchored > 0) {
                    (true, false) => "case-insensitive",
                    (false, _) => "unanchored",
                    (true, true) => "case-insensitive, unanchored",
                };
                let (how, fix) = if s.whole_value * 2 >= s.runs {
                    (
                        "It asks for one whole value ignoring case (^...$ with i): a case-insensitive index \
                         answers that as an equality, with the same collation on the query."
                            .to_owned(),
                        format!(
                            "db.{coll}.createIndex({{ {field}: 1 }}, {{ collation: {{ locale: \"en\", strength: 2 }} }})\n\
                             db.{coll}.find({{ {field}: value }}).collation({{ locale: \"en\", strength: 2 }})"
                        ),
                    )
                } else if s.unanchored * 2 < s.runs {
                    (
                        format!(
                            "Store {field} once more in lower case and match an anchored, case-sensitive prefix of \
                             it: that is an index range. For words anywhere in the text, a text index (or Atlas \
                             Search) is the tool."
                        ),
                        format!(
                            "db.{coll}.updateMany({{}}, [{{ $set: {{ {field}_lower: {{ $toLower: \"${field}\" }} }} }}])  // and on every write\n\
                             db.{coll}.createIndex({{ {field}_lower: 1 }})\n\
                             db.{coll}.find({{ {field}_lower: {{ $regex: \"^\" + escape(prefix.toLowerCase()) }} }})"
                        ),
                    )
                } else {
                    (
                        format!(
                            "Anchor it (^ and literal characters) if the application means a prefix; to find words \
                             anywhere in {field}, use a text index (or Atlas Search) instead of a regex."
                        ),
                        format!(
                            "db.{coll}.createIndex({{ {field}: \"text\" }})\n\
                             db.{coll}.find({{ $text: {{ $search: words }} }})\n\
                             // or, for a prefix: db.{coll}.find({{ {field}: {{ $regex: \"^\" + escape(prefix) }} }})"
                        ),
                    )
                };
                let recommendation = format!(
                    "{runs} reads of {coll} match {field} with a {what} regular expression, which no index can \
                     seek: the server reads every key of an index on {field}, or every document without one \
                     ({share:.1}% of all operations). {how}",
                    runs = s.runs,
                    share = share * 100.0,
                );
                let shapes: Vec<ShapeId> = s.shapes.iter().copied().collect();
                Draft {
                    kind: "inefficient_regex",
                    severity,
                    namespace: &s.namespace,
                    shapes: &shapes,
                    evidence: json!({
                        "count": s.runs,
                        "case_insensitive": s.case_insensitive,
                        "unanchored": s.unanchored,
                        "whole_value_ignoring_case": s.whole_value,
                        "share_of_operations": (share * 10_000.0).round() / 10_000.0,
                        "time_ms": crate::detectors::ms(s.latency_us as f64),
                        "docs_returned_mean": s.docs_returned / s.runs.max(1),
                        "apps": s.apps,
                        "rule": "MongoDB manual, $regex, Index Use: only a case-sensitive prefix expression (^ or \\A, then literals) uses an index range",
                        "thresholds": {
                            "regex_min_count": t.regex_min_count,
                            "index_high_share": t.index_high_share,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![("field", json!(field))],
                }
                .finding()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, Regex};

    use super::classify;
    use crate::script::Script;

    #[test]
    fn the_manuals_prefix_rule() {
        let c = |p: &str, o: &str| classify(p.as_bytes(), o.as_bytes());
        let seekable = |p: &str, o: &str| c(p, o).seekable();
        assert!(seekable("^Pho", ""));
        assert!(seekable("\\APho", ""));
        assert!(seekable("^\\$ref", ""), "escaped punctuation is a literal");
        assert!(!seekable("^Pho", "i") && c("^Pho", "i").prefix, "anchored, but case-insensitive");
        assert!(c("(?i)^Pho", "").case_insensitive);
        assert!(!c("phone", "").prefix);
        assert!(!c("^.*phone", "").prefix);
        assert!(!c("^(a|b)", "").prefix);
        assert!(!c("^a?b", "").prefix);
        assert!(!c("^Pho", "m").prefix, "with m, ^ anchors every line");
        assert!(c("^a{2}b", "").prefix && !c("^a{0,1}b", "").prefix);
        assert!(seekable("^\\QA.B\\E", ""), "Pattern.quote's form");
        assert!(c("^\\Qann@x.com\\E$", "i").whole_value);
        assert!(c("(?i)^Pho", "").prefix && c("(?i)^Pho", "").case_insensitive);
        assert!(c("^ann@example\\.com$", "i").whole_value, "escaped punctuation is text");
        assert!(!c("^ann\\d+$", "i").whole_value, "a class is not");
        assert!(c("^ann$", "i").whole_value);
        assert!(!c("^ann", "i").whole_value);
    }

    /// A BSON regex (the form pymongo sends for `re.compile` and Node for `/.../`).
    fn re(pattern: String, options: &str) -> Regex {
        Regex { pattern: pattern.try_into().unwrap(), options: options.try_into().unwrap() }
    }

    fn search(s: &mut Script, c: u64, filter: bson::Document) {
        s.find(c, "shop.products", filter, vec![doc! {"_id": 1, "name": "Phone"}]);
    }

    #[test]
    fn frequent_case_insensitive_and_unanchored_searches_are_found_and_prefixes_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..20 {
            search(&mut s, c, doc! {"name": {"$regex": format!("phone{i}"), "$options": "i"}});
            search(&mut s, c, doc! {"sku": re(format!("^AB{i}"), "")});
            search(&mut s, c, doc! {"$or": [{"tags": re(format!("sale{i}"), "")}, {"x": 1}]});
            // Beside an equality: a residual filter on what the equality found.
            search(&mut s, c, doc! {"tenantId": i, "title": re(format!("x{i}"), "i")});
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "inefficient_regex").collect();
        let fields: Vec<_> = f.iter().map(|f| f.extra["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["name", "tags"], "{f:#?}");
        assert_eq!(f[0].evidence["case_insensitive"], 20);
        assert!(f[0].fix.as_deref().unwrap().contains("\"text\""), "words anywhere: a text index");
        assert_eq!(f[1].evidence["unanchored"], 20);
        assert!(f[1].fix.as_deref().unwrap().contains("\"text\""));
        // No literal of the patterns reaches the finding.
        let text = serde_json::to_string(&f).unwrap();
        assert!(!text.contains("phone1") && !text.contains("sale1"), "{text}");
    }

    #[test]
    fn an_email_matched_ignoring_case_gets_the_collation_index_and_a_rare_search_nothing() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..10 {
            s.find(c, "shop.users", doc! {"email": re(format!("^user{i}$"), "i")}, vec![doc! {"_id": i}]);
        }
        for _ in 0..4 {
            search(&mut s, c, doc! {"name": {"$regex": "phone", "$options": "i"}});
        }
        let f: Vec<_> = s.run().findings().into_iter().filter(|f| f.kind == "inefficient_regex").collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].namespace, "shop.users");
        assert!(f[0].fix.as_deref().unwrap().contains("strength: 2"));
    }
}
