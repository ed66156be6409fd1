//! TTL candidates (`ttl_candidate`): a collection is purged again and again by a
//! `deleteMany` of the documents whose date is older than a limit that moves with
//! the clock (`{createdAt: {$lt: now - 30 days}}` from a scheduled job). The server
//! does that itself with a TTL index (`expireAfterSeconds`), in the background, with
//! no job to run, schedule or watch; MongoDB's manual ("TTL Indexes") is the fix.
//!
//! From the wire: delete statements with `limit: 0` whose filter bounds one date
//! field from above (`$lt`/`$lte`), besides at most a few equalities (a TTL index
//! takes a `partialFilterExpression` for those). Per shape, the age of each run's
//! limit (when it ran, less the limit) is kept as a number of seconds, never the
//! date: a moving limit keeps its age (the runs agree within `ttl_max_age_spread`)
//! while the limit itself moves forward.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde_json::json;

use mongotap_wire::element;

use crate::detectors::{collection, Context, Detector};
use crate::event::Micros;
use crate::finding::Finding;
use crate::finding::{Draft, Severity};
use crate::operation::NO_APP;
use crate::shape::command::Category;
use crate::view::{OpView, ShapeId};

/// Other fields of a purge's filter (equalities), at most.
const MAX_OTHER_FIELDS: usize = 3;
/// Ages kept per shape (the first ones: enough to judge a schedule).
const MAX_AGES: usize = 64;

#[derive(Default)]
struct Stat {
    namespace: String,
    field: String,
    /// The filter's other fields (equalities).
    others: Vec<String>,
    runs: u64,
    deleted: u64,
    /// Age of each run's limit, in seconds (how far back from the run it was).
    ages: Vec<i64>,
    /// The limit moved forward from every run to the next (dates compared in place,
    /// then let go of).
    moving: bool,
    last_limit_ms: Option<i64>,
    first_at: Micros,
    last_at: Micros,
    apps: BTreeSet<String>,
}

/// The TTL-candidate detector.
pub struct TtlCandidate {
    max_shapes: usize,
    stats: FxHashMap<ShapeId, Stat>,
    refused: u64,
}

impl TtlCandidate {
    /// A detector with these thresholds.
    pub fn new(t: &crate::detectors::Thresholds) -> TtlCandidate {
        TtlCandidate { max_shapes: t.max_patterns as usize, stats: FxHashMap::default(), refused: 0 }
    }
}

/// A purge filter's date field and limit (ms since the epoch) and its other fields:
/// one field bounded from above by a date, every other field an equality.
fn purge_of(filter: &bson::RawDocument) -> Option<(String, i64, Vec<String>)> {
    let mut date = None;
    let mut others = Vec::new();
    for e in element::elements(filter) {
        let key = std::str::from_utf8(e.key).ok()?;
        if key.starts_with('$') {
            return None; // $or, $and, $expr...: not a plain purge.
        }
        let ops = e
            .as_document()
            .filter(|d| element::elements(d).next().is_some_and(|f| f.key.first() == Some(&b'$')));
        let Some(ops) = ops else {
            others.push(key.to_owned()); // An equality.
            continue;
        };
        let mut limit = None;
        for op in element::elements(ops) {
            match (op.key, op.kind) {
                (b"$lt" | b"$lte", 0x09) => limit = Some(i64::from_le_bytes(op.value.try_into().ok()?)),
                (b"$eq" | b"$in", _) => {}
                _ => return None,
            }
        }
        match limit {
            Some(l) if date.is_none() => date = Some((key.to_owned(), l)),
            Some(_) => return None, // Two dates: not one moving limit.
            None => others.push(key.to_owned()),
        }
    }
    let (field, limit) = date?;
    (others.len() <= MAX_OTHER_FIELDS).then_some((field, limit, others))
}

impl Detector for TtlCandidate {
    fn name(&self) -> &'static str {
        "ttl_candidate"
    }

    fn on_operation(&mut self, v: &OpView<'_>) {
        let op = v.op;
        let Some(cmd) = &v.command else { return };
        if cmd.name != "delete" || v.category != Category::Write || op.failed() {
            return;
        }
        let deletes = cmd.documents("deletes");
        // One statement: the reply's `n` is then that purge's count.
        let [d] = deletes.as_slice() else { return };
        let many = element::find(d, "limit").and_then(|l| l.as_i64()) == Some(0);
        let Some(q) = element::find(d, "q").and_then(|q| q.as_document()) else { return };
        if !many {
            return;
        }
        let Some((field, limit_ms, others)) = purge_of(q) else { return };
        let Some(Some(shape)) = v.shape_ids.first().copied() else { return };
        if !self.stats.contains_key(&shape) && self.stats.len() >= self.max_shapes {
            self.refused += 1;
            return;
        }
        let s = self.stats.entry(shape).or_insert_with(|| Stat {
            namespace: op.namespace.to_string(),
            field,
            others,
            moving: true,
            first_at: op.started_at,
            ..Stat::default()
        });
        s.runs += 1;
        s.deleted += v.outcome.as_ref().and_then(|o| o.matched).unwrap_or(0);
        s.last_at = op.started_at;
        if let Some(last) = s.last_limit_ms {
            s.moving &= limit_ms > last;
        }
        s.last_limit_ms = Some(limit_ms);
        if s.ages.len() < MAX_AGES {
            s.ages.push(((op.started_at / 1_000) as i64 - limit_ms + 500).div_euclid(1_000));
        }
        let app = op.conn.app_name.as_deref().unwrap_or(NO_APP);
        crate::detectors::keep_name(&mut s.apps, app);
    }

    fn evictions(&self) -> Vec<(&'static str, u64)> {
        vec![("shapes", self.refused)]
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        let mut all: Vec<(&ShapeId, &Stat)> =
            self.stats.iter().filter(|(_, s)| s.runs >= t.ttl_min_runs).collect();
        all.sort_by_key(|(id, _)| **id);
        for (id, s) in all {
            let mut ages = s.ages.clone();
            ages.sort_unstable();
            let (min, max, median) = (ages[0], ages[ages.len() - 1], ages[ages.len() / 2]);
            // A limit that moves with the clock: forward every run, its age steady and
            // in the past.
            let steady = (max - min) as f64 <= (median as f64 * t.ttl_max_age_spread).max(60.0);
            if !s.moving || !steady || median <= 0 {
                continue;
            }
            let coll = collection(&s.namespace);
            let field = &s.field;
            let span = (s.last_at.saturating_sub(s.first_at) as f64 / 1e6).max(1.0);
            // To the minute: the job's "now" and the server's differ by a moment.
            let expire = if median >= 3_600 { (median + 30) / 60 * 60 } else { median };
            let age = if expire % 86_400 == 0 {
                format!("{} days", expire / 86_400)
            } else if expire % 3_600 == 0 {
                format!("{} hours", expire / 3_600)
            } else {
                format!("{expire} s")
            };
            let partial = if s.others.is_empty() {
                String::new()
            } else {
                format!(
                    ", partialFilterExpression: {{ {} }}",
                    s.others
                        .iter()
                        .map(|f| format!("{f}: <the value your purge uses>"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let recommendation = format!(
                "{coll} is purged by deleteMany of the documents whose {field} is older than a limit that moves \
                 with the clock: {runs} runs, each {age} back, {deleted} documents deleted. A TTL index on {field} \
                 does it on the server, in the background, with no job to schedule, run or watch{also}.",
                runs = s.runs,
                deleted = s.deleted,
                also = if s.others.is_empty() {
                    String::new()
                } else {
                    format!(" (a partial one, for the documents with the same {})", s.others.join(", "))
                },
            );
            let fix = format!(
                "db.{coll}.createIndex({{ {field}: 1 }}, {{ expireAfterSeconds: {expire}{partial} }})  // {age}\n\
                 // an index on {field} that exists already: db.runCommand({{ collMod: \"{coll}\", index: {{ keyPattern: {{ {field}: 1 }}, expireAfterSeconds: {expire} }} }})\n\
                 // then retire the scheduled deleteMany"
            );
            out.push(
                Draft {
                    kind: "ttl_candidate",
                    severity: Severity::Low,
                    namespace: &s.namespace,
                    shapes: &[*id],
                    evidence: json!({
                        "count": s.runs,
                        "documents_deleted": s.deleted,
                        "age_seconds": {"median": median, "min": min, "max": max},
                        "runs_per_hour": (s.runs as f64 / span * 3_600.0 * 10.0).round() / 10.0,
                        "other_fields": s.others,
                        "apps": s.apps,
                        "thresholds": {
                            "ttl_min_runs": t.ttl_min_runs,
                            "ttl_max_age_spread": t.ttl_max_age_spread,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![("field", json!(field))],
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, DateTime};

    use crate::script::Script;

    const DAY_MS: i64 = 86_400_000;

    fn purge(s: &mut Script, c: u64, q: bson::Document, n: i32) {
        s.exchange(
            c,
            doc! {"delete": "sessions", "deletes": [{"q": q, "limit": 0}], "$db": "app"},
            doc! {"n": n, "ok": 1.0},
        );
    }

    fn now_ms(s: &Script) -> i64 {
        (s.now() / 1_000) as i64
    }

    fn ttl(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "ttl_candidate").collect()
    }

    #[test]
    fn a_scheduled_purge_by_a_moving_date_is_a_ttl_candidate() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "janitor", "PyMongo 4.20.1");
        for _ in 0..6 {
            // The job's clock runs a little ahead of the proxy's.
            let limit = DateTime::from_millis(now_ms(&s) - 30 * DAY_MS + 1_500);
            purge(&mut s, c, doc! {"lastSeen": {"$lt": limit}}, 40);
            s.wait_ms(60_000);
        }
        let f = ttl(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].extra["field"], "lastSeen");
        assert_eq!(f[0].evidence["age_seconds"]["median"], 30 * 86_400 - 1);
        assert!(f[0].fix.as_deref().unwrap().contains("expireAfterSeconds: 2592000"));
        assert_eq!(f[0].evidence["documents_deleted"], 240);
    }

    #[test]
    fn a_fixed_date_a_one_off_and_a_purge_by_status_are_not() {
        // The same fixed date again and again: a cleanup of old data, not a moving limit.
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "janitor", "PyMongo 4.20.1");
        let fixed = DateTime::from_millis(now_ms(&s) - 400 * DAY_MS);
        for _ in 0..6 {
            purge(&mut s, c, doc! {"lastSeen": {"$lt": fixed}}, 0);
            s.wait_ms(60_000);
        }
        // Twice only.
        for _ in 0..2 {
            let limit = DateTime::from_millis(now_ms(&s) - DAY_MS);
            s.exchange(
                c,
                doc! {"delete": "carts", "deletes": [{"q": {"updatedAt": {"$lt": limit}}, "limit": 0}], "$db": "app"},
                doc! {"n": 3, "ok": 1.0},
            );
            s.wait_ms(60_000);
        }
        // By status, no date.
        for _ in 0..6 {
            s.exchange(
                c,
                doc! {"delete": "jobs", "deletes": [{"q": {"status": "done"}, "limit": 0}], "$db": "app"},
                doc! {"n": 3, "ok": 1.0},
            );
        }
        assert!(ttl(s).is_empty());
    }

    #[test]
    fn limits_of_changing_age_are_no_schedule() {
        // A user picks "older than" by hand each time: 1 day, then 90, then 7...
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "admin-ui", "PyMongo 4.20.1");
        for days in [1, 90, 7, 30, 365] {
            let limit = DateTime::from_millis(now_ms(&s) - days * DAY_MS);
            purge(&mut s, c, doc! {"lastSeen": {"$lt": limit}}, 5);
            s.wait_ms(60_000);
        }
        assert!(ttl(s).is_empty());
    }
}
