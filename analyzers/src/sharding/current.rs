//! The key a collection is sharded on now, judged against the candidates of its
//! [`super::section`]: a bad one (a monotonic ranged key, too few values, one value
//! holding many documents, or most reads sent to every shard where a candidate
//! would target them) is said in the section's recommendation, with the reshard
//! command, and is a `bad_shard_key` finding.

use serde_json::{json, Value};

use super::distribution::{routed_writes, Form};
use super::section::{build, key_text, pct, Candidate, MIN_INSERTS};
use super::ShardKeys;
use crate::detectors::indexes::catalog::IndexCatalog;
use crate::detectors::Thresholds;
use crate::finding::{Draft, Finding, Severity};
use crate::table::{AccessTable, Row};

/// Why the current key is a bad one, when it is: its own flaw (monotonic ranged,
/// too few values, a value holding many documents), or reads sent to every shard
/// where the best candidate would send most to one.
/// `rows`: the collection's (see [`routed`]).
fn current_flaw<'c>(
    now: &Candidate,
    candidates: &'c [Candidate],
    t: &Thresholds,
    rows: &[&Row],
) -> Option<(String, Option<&'c Candidate>)> {
    let others = || candidates.iter().filter(|c| c.recommended && !c.current);
    // Unknown characteristics (too few inserts seen) say nothing against the key.
    if let Some(why) = now.not_recommended.as_ref().filter(|_| now.distinct_values.is_some()) {
        return Some((why.clone(), others().next()));
    }
    // Reads sent everywhere count unless they are under a fifth of the operations and
    // the key serves the writes: sends most updates and deletes to one shard (a
    // collection updated by its key and rarely read is well sharded on it; inserts,
    // one shard each under any key, say nothing either way). And they count only
    // against a key that sends most reads to one shard and, by a margin, more of the
    // operations it routes (see `score`).
    let now_routed = routed(rows, &now.key);
    let rare_reads = now.reads.count * 5 < now.reads.count + now.writes.count;
    let serves_writes = now_routed.0 as f64 >= t.shard_min_single_reads * now_routed.1 as f64;
    if now.reads.count == 0
        || now.reads.single_shard >= t.shard_min_single_reads
        || (rare_reads && serves_writes)
    {
        return None;
    }
    let now_score = score(now, now_routed);
    let b = others().find(|b| {
        b.reads.single_shard >= t.shard_min_single_reads
            && score(b, routed(rows, &b.key)) >= now_score + SCORE_MARGIN
    })?;
    Some((
        format!(
            "{} of its reads go to several or every shard and {} to one, where {} would send {} to one",
            pct(now.reads.scatter_gather + now.reads.multi_shard),
            pct(now.reads.single_shard),
            key_text(&b.key),
            pct(b.reads.single_shard)
        ),
        Some(b),
    ))
}

/// How much more of its operations another key must send to one shard before a
/// current key is called poor for its reads.
const SCORE_MARGIN: f64 = 0.25;

/// The share of the operations a key routes that go to one shard: its reads, and
/// its writes that find their documents by a filter. Inserts go to one shard under
/// any key: counted, a busy insert stream made a key whose reads all scatter look
/// as good as one that sends them to one shard.
/// `(single, all)`: its [`routed`] writes.
fn score(c: &Candidate, (single, all): (u64, u64)) -> f64 {
    let r = c.reads.count as f64;
    (c.reads.single_shard * r + single as f64) / (r + all as f64).max(1.0)
}

/// [`routed_writes`] of `rows` under a candidate `key`.
fn routed(rows: &[&Row], key: &[(String, Value)]) -> (u64, u64) {
    let form = if key.first().is_some_and(|k| k.1 == json!("hashed")) { Form::Hashed } else { Form::Ranged };
    let names: Vec<String> = key.iter().map(|(f, _)| f.clone()).collect();
    routed_writes(rows, &names, form)
}

/// The recommendation (and command) for a collection sharded on `now`.
pub(super) fn judge_current(
    ns: &str,
    now: &Candidate,
    candidates: &[Candidate],
    t: &Thresholds,
    rows: &[&Row],
) -> (String, Option<String>) {
    let figures = format!(
        "{rs} of its reads and {ws} of its writes go to one shard ({sg} of reads to every shard)",
        rs = pct(now.reads.single_shard),
        ws = pct(now.writes.single_shard),
        sg = pct(now.reads.scatter_gather),
    );
    match current_flaw(now, candidates, t, rows) {
        None if now.distinct_values.is_none() => (
            format!(
                "{ns} is sharded on {}: {figures}. Its characteristics (cardinality, monotonicity) are unknown: fewer than {MIN_INSERTS} documents carrying it were inserted through mongotap.",
                key_text(&now.key)
            ),
            None,
        ),
        None => {
            (format!("{ns} is sharded on {}, which suits its traffic: {figures}.", key_text(&now.key)), None)
        }
        Some((why, better)) => {
            let mut text =
                format!("{ns} is sharded on {}, a poor key: {why}. Now {figures}.", key_text(&now.key));
            // A key to move to serves most reads (or most writes, when nothing reads):
            // the one named by the flaw, or the first recommended one that does.
            let serves = |b: &&Candidate| {
                b.reads.single_shard >= t.shard_min_single_reads
                    || (b.reads.count == 0 && b.writes.single_shard >= t.shard_min_single_reads)
            };
            let better = better
                .filter(serves)
                .or_else(|| candidates.iter().filter(|c| c.recommended && !c.current).find(serves));
            if better.is_none() {
                text.push_str(if now.reads.count == 0 {
                    " No candidate sends most writes to one shard: choose a key its writes give before resharding."
                } else {
                    " No candidate sends most reads to one shard: choose a key its main queries give before resharding."
                });
            }
            let command = better.map(|b| {
                text.push_str(&format!(
                    " Reshard it on {}: {} of reads and {} of writes to one shard (MongoDB 5.0+ reshards online; before, a new collection sharded on it and a copy).",
                    key_text(&b.key),
                    pct(b.reads.single_shard),
                    pct(b.writes.single_shard)
                ));
                reshard(ns, &b.key)
            });
            (text, command)
        }
    }
}

/// The command that moves `ns` to `key`.
fn reshard(ns: &str, key: &[(String, Value)]) -> String {
    format!("db.adminCommand({{reshardCollection: {}, key: {}}})", json!(ns), key_text(key))
}

/// `bad_shard_key` findings: the collections sharded on a poor key, with the
/// figures of the key and of the better one.
pub fn findings(
    keys: &ShardKeys,
    table: &AccessTable,
    t: &Thresholds,
    catalog: &IndexCatalog,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // Most deployments shard nothing: the section is not built a second time for them.
    if !catalog.any_shard_key() {
        return out;
    }
    let rows = table.rows();
    for c in build(keys, table, t, catalog) {
        let Some(now) = c.candidates.iter().find(|k| k.current) else { continue };
        let mine: Vec<&Row> = rows.iter().copied().filter(|r| r.namespace == c.namespace).collect();
        let Some((why, better)) = current_flaw(now, &c.candidates, t, &mine) else { continue };
        // Its own flaw (a hot shard, jumbo chunks) is high; reads that scatter, medium.
        let own = now.not_recommended.is_some() && now.distinct_values.is_some();
        let severity = if own { Severity::High } else { Severity::Medium };
        let figures = |k: &Candidate| {
            json!({"key": key_text(&k.key), "reads": k.reads, "writes": k.writes,
            "distinct_values": k.distinct_values, "most_common_share": k.most_common_share, "monotonic": k.monotonic})
        };
        out.push(
            Draft {
                kind: "bad_shard_key",
                severity,
                namespace: &c.namespace,
                shapes: &[],
                evidence: json!({
                    "count": c.operations,
                    "inserts": keys.get(&c.namespace).map_or(0, |v| v.inserts),
                    "current_key": key_text(&now.key),
                    "why": why,
                    "reads_to_one_shard": now.reads.single_shard,
                    "reads_to_every_shard": now.reads.scatter_gather,
                    "writes_to_one_shard": now.writes.single_shard,
                    "current": figures(now),
                    "better": better.map(figures),
                    "thresholds": {"shard_min_distinct": t.shard_min_distinct,
                    "shard_max_common_share": t.shard_max_common_share,
                    "shard_monotonic_share": t.shard_monotonic_share,
                    "shard_min_single_reads": t.shard_min_single_reads},
                }),
                recommendation: c.recommendation.clone(),
                fix: c.command.clone(),
                extra: vec![("key", json!(now.key)), ("field", json!(now.key[0].0))],
            }
            .finding(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use bson::{doc, oid::ObjectId, DateTime};
    use serde_json::json;

    use crate::report::{Report, RunFacts};
    use crate::script::Script;
    use crate::sharding::section::tests::orders_script;

    #[test]
    fn a_collection_sharded_on_its_creation_date_is_a_bad_shard_key_and_on_its_customer_is_not() {
        let p = orders_script().0.run();
        p.detectors().catalog().lock().unwrap().set_shard_key(
            "shop.orders",
            Some(vec![("createdAt".into(), json!(1))]),
            0,
        );
        let report = Report::build(&p, RunFacts::default());
        let orders = report.shard_keys.iter().find(|c| c.namespace == "shop.orders").expect("orders");
        let now = orders.candidates.iter().find(|c| c.current).expect("the current key is shown");
        assert_eq!((now.monotonic, now.recommended), (Some(true), false));
        assert_eq!(orders.current_key, Some(vec![("createdAt".to_owned(), json!(1))]));
        assert_eq!(
            orders.command.as_deref(),
            Some("db.adminCommand({reshardCollection: \"shop.orders\", key: {customerId: 1, createdAt: 1}})")
        );
        assert!(
            orders
                .recommendation
                .starts_with("shop.orders is sharded on {createdAt: 1}, a poor key: monotonic"),
            "{}",
            orders.recommendation
        );
        let bad: Vec<_> = report.findings.iter().filter(|f| f.kind == "bad_shard_key").collect();
        assert_eq!(bad.len(), 1, "{:?}", report.findings);
        assert_eq!(bad[0].severity, "high");
        assert_eq!(bad[0].evidence["inserts"], 120);
        assert_eq!(bad[0].evidence["reads_to_one_shard"], 0.0);
        assert_eq!(bad[0].evidence["better"]["reads"]["single_shard"], 1.0);
        assert_eq!(bad[0].fix, orders.command);

        // Sharded on the customer: judged, said to suit, no finding.
        let p = orders_script().0.run();
        let key = vec![("customerId".to_owned(), json!(1)), ("createdAt".to_owned(), json!(1))];
        p.detectors().catalog().lock().unwrap().set_shard_key("shop.orders", Some(key.clone()), 0);
        let report = Report::build(&p, RunFacts::default());
        let orders = report.shard_keys.iter().find(|c| c.namespace == "shop.orders").expect("orders");
        assert!(orders.candidates[0].current && orders.candidates[0].key == key);
        assert!(orders.recommendation.contains("which suits its traffic"), "{}", orders.recommendation);
        assert_eq!(orders.command, None);
        assert!(report.findings.iter().all(|f| f.kind != "bad_shard_key"));

        // A key of a field the reads never give sends them all to every shard, where
        // the customer would send them to one.
        let p = orders_script().0.run();
        p.detectors().catalog().lock().unwrap().set_shard_key(
            "shop.orders",
            Some(vec![("region".into(), json!("hashed"))]),
            0,
        );
        let report = Report::build(&p, RunFacts::default());
        let bad: Vec<_> = report.findings.iter().filter(|f| f.kind == "bad_shard_key").collect();
        assert_eq!(bad.len(), 1, "{:?}", report.findings);
        assert_eq!(
            bad[0].severity, "medium",
            "its characteristics are unknown (no insert carried it): the reads decide"
        );
        assert!(
            bad[0].recommendation.contains("100% of its reads go to several or every shard"),
            "{}",
            bad[0].recommendation
        );
    }

    /// The orders of [`orders_script`] and 300 more, then `more` (reads, updates) on a
    /// collection sharded on `{_id: "hashed"}`: its `bad_shard_key` findings.
    fn on_a_hashed_id(more: impl FnOnce(&mut Script, crate::event::ConnId)) -> Vec<crate::finding::Finding> {
        let (mut s, c) = orders_script();
        for i in 120..420i64 {
            let d = doc! {"_id": ObjectId::new(), "customerId": (i * 97) % 150, "status": "placed",
            "createdAt": DateTime::from_millis(1_700_000_000_000 + i * 60_000)};
            s.exchange(
                c,
                doc! {"insert": "orders", "documents": [d], "$db": "shop"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        more(&mut s, c);
        let p = s.run();
        p.detectors().catalog().lock().unwrap().set_shard_key(
            "shop.orders",
            Some(vec![("_id".into(), json!("hashed"))]),
            0,
        );
        let report = Report::build(&p, RunFacts::default());
        report.findings.into_iter().filter(|f| f.kind == "bad_shard_key").collect()
    }

    #[test]
    fn a_hashed_id_that_spreads_inserts_is_poor_when_the_reads_never_give_the_id() {
        // The common default, {_id: "hashed"}: no flaw of its own, every insert to one
        // shard (as under any key), but every read by customer goes to every shard.
        // Counted with the inserts, the customer key was not better by the margin.
        let bad = on_a_hashed_id(|s, c| {
            for i in 0..60 {
                s.find(c, "shop.orders", doc! {"customerId": i}, vec![]);
            }
        });
        assert_eq!(bad.len(), 1, "{bad:#?}");
        assert_eq!(bad[0].severity, "medium", "no flaw of its own: the reads decide");
        assert!(
            bad[0].recommendation.contains("100% of its reads go to several or every shard"),
            "{}",
            bad[0].recommendation
        );
        assert!(bad[0].fix.as_deref().is_some_and(|f| f.contains("customerId")), "{:?}", bad[0].fix);
    }

    #[test]
    fn rare_reads_are_excused_by_the_updates_the_key_serves_not_by_inserts() {
        // Reads under a fifth of the operations, but the updates (by customer) go to
        // every shard under {_id: "hashed"}: the inserts, one shard each under any
        // key, no longer make the key look as if it served the writes.
        let bad = on_a_hashed_id(|s, c| {
            for i in 0..100 {
                s.update(c, "shop.orders", doc! {"customerId": i % 150}, doc! {"$set": {"status": "paid"}});
            }
        });
        assert_eq!(bad.len(), 1, "{bad:#?}");
        assert_eq!(bad[0].severity, "medium");
    }

    #[test]
    fn a_key_the_updates_use_is_not_poor_for_a_few_reads_and_a_reference_id_is_not_monotonic() {
        // Devices (ObjectId references, inserted in no time order) updated by their
        // id 300 times, read 10 times by _id: sharded on the device, well sharded.
        let devices: Vec<ObjectId> = (0..50).map(|_| ObjectId::new()).collect();
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "iot", "PyMongo 4.20.1");
        for i in 0..200usize {
            let d = doc! {"_id": ObjectId::new(), "deviceId": devices[(i * 7) % 50], "v": i as i64};
            s.exchange(c, doc! {"insert": "state", "documents": [d], "$db": "iot"}, doc! {"n": 1, "ok": 1.0});
        }
        for i in 0..300usize {
            s.update(c, "iot.state", doc! {"deviceId": devices[i % 50]}, doc! {"$set": {"v": 1}});
        }
        for _ in 0..10 {
            s.find(c, "iot.state", doc! {"_id": ObjectId::new()}, vec![]);
        }
        let p = s.run();
        p.detectors().catalog().lock().unwrap().set_shard_key(
            "iot.state",
            Some(vec![("deviceId".into(), json!(1))]),
            0,
        );
        let report = Report::build(&p, RunFacts::default());
        assert!(report.findings.iter().all(|f| f.kind != "bad_shard_key"), "{:#?}", report.findings);
        let state = report.shard_keys.iter().find(|c| c.namespace == "iot.state").unwrap();
        let now = state.candidates.iter().find(|c| c.current).unwrap();
        assert_ne!(now.monotonic, Some(true), "a reference's ObjectIds do not rise with insert time");
        assert!(state.recommendation.contains("which suits its traffic"), "{}", state.recommendation);
    }
}
