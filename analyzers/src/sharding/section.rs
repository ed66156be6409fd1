//! The report's `shard_keys` section: per collection with enough traffic, the
//! candidate keys ranked by where their reads and writes would go, with the key
//! characteristics `analyzeShardKey` reports (distinct values, the most common
//! value's share, monotonicity), a recommendation and the command to run.
//!
//! Candidates: the fields the collection's statements ask by equality (the busiest
//! four), `_id`, each of them followed by a field its queries sort or range on (a
//! customer's orders by date), and that field alone. A monotonic field (values rising with
//! time) is not recommended ranged: every insert would go to the shard holding the
//! last chunk (a hot shard); its hashed form is offered instead. A field with few
//! distinct values, or one value holding a large share of the documents, is not
//! recommended at all: its chunks could not split (jumbo chunks). (Few values each
//! repeated ten times or more: a small collection's unique ids are not that; and a
//! compound key splits past its first field.) Such a field asked by equality is
//! offered again (unless updates change it) followed by a hashed `_id`, which splits one value's documents over
//! many chunks and keeps the field's targeting. Characteristics are judged on 20 or
//! more inserted documents; with fewer, nothing is recommended. A collection that is
//! written and never read is judged by its writes.
//!
//! A collection already sharded (its key read from the cluster on the side
//! connection) has its current key shown beside the candidates, marked `current`,
//! and judged in [`super::current`].

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::current::judge_current;
use super::distribution::{changed_by_writes, distribution, equality_fields, Form, Reads, Writes};
use super::ShardKeys;
use crate::detectors::indexes::catalog::{IndexCatalog, ShardKey};
use crate::detectors::Thresholds;
use crate::namespace::is_system;
use crate::shape::command::Category;
use crate::table::{AccessTable, Row};

/// Equality fields taken as candidates per collection.
const MAX_FIELDS: usize = 4;
/// Candidates shown per collection.
const MAX_SHOWN: usize = 8;
/// Collections shown, busiest first.
const MAX_COLLECTIONS: usize = 20;
/// Inserted documents carrying a key's first field before its characteristics are
/// judged (fewer say nothing about cardinality, common values or monotonicity).
pub(super) const MIN_INSERTS: u64 = 20;

/// One candidate key with its figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Candidate {
    /// The key as `sh.shardCollection` takes it: (field, 1 or "hashed").
    pub key: Vec<(String, Value)>,
    pub rank: usize,
    pub reads: Reads,
    pub writes: Writes,
    /// Distinct values of the first field among the documents inserted (exact up
    /// to 128, then an estimate within about 6.5%); `null` when no insert was seen.
    pub distinct_values: Option<u64>,
    /// The most common value's share of those documents.
    pub most_common_share: Option<f64>,
    /// Whether the first field's values rise (or fall) with time.
    pub monotonic: Option<bool>,
    pub recommended: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_recommended: Option<String>,
    /// The key the collection is sharded on now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub current: bool,
}

impl Candidate {
    /// The table row both reports print: key, reads to one shard, reads to every
    /// shard, writes to one shard, distinct values, monotonic, verdict.
    pub fn cells(&self) -> [String; 7] {
        [
            key_text(&self.key),
            pct(self.reads.single_shard),
            pct(self.reads.scatter_gather),
            pct(self.writes.single_shard),
            self.distinct_values.map_or("-".to_owned(), |d| d.to_string()),
            self.monotonic.map_or("-", |m| if m { "yes" } else { "no" }).to_owned(),
            format!(
                "{}{}",
                if self.current { "current key; " } else { "" },
                self.not_recommended
                    .as_deref()
                    .map_or("recommended".to_owned(), |w| format!("not recommended: {w}"))
            ),
        ]
    }
}

/// One collection's candidates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectionKeys {
    pub namespace: String,
    /// Reads and write statements counted.
    pub operations: u64,
    pub candidates: Vec<Candidate>,
    pub recommendation: String,
    /// The command for the first recommended candidate, when one serves most reads
    /// (`reshardCollection` when the collection is sharded on a worse key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The key the collection is sharded on now, as the cluster says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_key: Option<Vec<(String, Value)>>,
}

/// The key as the shell writes it: `{customerId: 1, createdAt: 1}`, names quoted
/// where they are not plain (`{"customer.id": 1}`).
pub fn key_text(key: &[(String, Value)]) -> String {
    crate::detectors::indexes::spec::key_js(key.iter().map(|(f, d)| (f.as_str(), d.clone())))
}

/// The section.
pub fn build(
    keys: &ShardKeys,
    table: &AccessTable,
    t: &Thresholds,
    catalog: &IndexCatalog,
) -> Vec<CollectionKeys> {
    let rows = table.rows();
    let mut namespaces: Vec<(&str, u64)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| matches!(r.category, Category::Read | Category::Write) && !is_system(&r.namespace))
    {
        let n = if r.category == Category::Write { r.statements.max(1) } else { r.count };
        match namespaces.iter_mut().find(|(ns, _)| *ns == r.namespace) {
            Some((_, c)) => *c += n,
            None => namespaces.push((&r.namespace, n)),
        }
    }
    namespaces.retain(|(_, n)| *n >= t.shard_min_operations);
    namespaces.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    namespaces.truncate(MAX_COLLECTIONS);
    namespaces
        .into_iter()
        .map(|(ns, operations)| {
            let mine: Vec<&Row> = rows.iter().copied().filter(|r| r.namespace == ns).collect();
            collection(ns, operations, &mine, keys, t, catalog.shard_key(ns))
        })
        .collect()
}

fn collection(
    ns: &str,
    operations: u64,
    rows: &[&Row],
    keys: &ShardKeys,
    t: &Thresholds,
    current: Option<&ShardKey>,
) -> CollectionKeys {
    let values = keys.get(ns);
    let eq = equality_fields(rows);
    let mut keys_tried: Vec<Vec<(String, Value)>> = Vec::new();
    let mut push = |k: Vec<(String, Value)>| {
        if !keys_tried.contains(&k) {
            keys_tried.push(k);
        }
    };
    if let Some(k) = current {
        push(k.clone());
    }
    for (f, _, companions) in eq.iter().take(MAX_FIELDS) {
        push(vec![(f.clone(), json!(1))]);
        if let Some(c) = companions.first() {
            push(vec![(f.clone(), json!(1)), (c.clone(), json!(1))]);
            // The sort or range field alone too: a date is the obvious, and often wrong, choice.
            push(vec![(c.clone(), json!(1))]);
        }
    }
    let known = |f: &str| values.and_then(|v| v.field(f)).filter(|v| v.inserts() >= MIN_INSERTS);
    // A field with few values (or one value holding many documents) that the
    // queries ask by equality keeps its targeting when a hashed `_id` follows it:
    // one value's documents then split into many chunks (MongoDB 4.4+'s compound
    // hashed keys; the manual: give a low-cardinality key a high-cardinality field).
    for (f, _, _) in eq.iter().take(MAX_FIELDS).filter(|(f, _, _)| f != "_id") {
        let low = known(f).is_some_and(|v| {
            let d = v.distinct.estimate();
            (d < t.shard_min_distinct && v.inserts() >= 10 * d)
                || v.most_common_share() > t.shard_max_common_share
        });
        // A field the updates change (a status) would move documents between shards.
        let moves = changed_by_writes(rows, std::slice::from_ref(f));
        if low && !moves {
            push(vec![(f.clone(), json!(1)), ("_id".to_owned(), json!("hashed"))]);
        }
    }
    push(vec![("_id".to_owned(), json!(1))]);
    // A monotonic single field is offered hashed beside its ranged form.
    let hashed: Vec<Vec<(String, Value)>> = keys_tried
        .iter()
        .filter(|k| {
            k.len() == 1
                && k[0].1 == json!(1)
                && known(&k[0].0).and_then(|v| v.monotonic(t.shard_monotonic_share)) == Some(true)
        })
        .map(|k| vec![(k[0].0.clone(), json!("hashed"))])
        .collect();
    for k in hashed {
        if !keys_tried.contains(&k) {
            keys_tried.push(k);
        }
    }

    let mut candidates: Vec<(f64, Candidate)> = keys_tried
        .into_iter()
        .map(|key| {
            let first = key[0].0.clone();
            let form = if key[0].1 == json!("hashed") { Form::Hashed } else { Form::Ranged };
            let names: Vec<String> = key.iter().map(|(f, _)| f.clone()).collect();
            let (reads, writes) = distribution(rows, &names, form);
            // Judged only on enough inserted documents that carried the field.
            let v = known(&first);
            let distinct = v.map(|v| v.distinct.estimate());
            // Few values, each repeated: a small collection's unique ids are not that.
            let repeated = v.is_some_and(|v| v.inserts() >= 10 * v.distinct.estimate());
            let common = v.map(|v| (v.most_common_share() * 1000.0).round() / 1000.0);
            let mono = v.and_then(|v| v.monotonic(t.shard_monotonic_share));
            // A compound key splits past its first field: its cardinality and common
            // value do not cap it (a monotonic first field still sends inserts to one shard).
            let single = key.len() == 1;
            let c_key = key.clone();
            let why = match (distinct, common, mono, form) {
                (None, _, _, _) => Some(format!(
                    "key characteristics unknown: fewer than {MIN_INSERTS} documents carrying {first} were inserted through mongotap (cardinality and monotonicity are read from inserts)"
                )),
                (Some(d), _, _, _) if single && d < t.shard_min_distinct && repeated => Some(format!(
                    "low cardinality: {d} distinct values of {first} cap the collection at {d} chunks, which cannot split (jumbo chunks)"
                )),
                (_, Some(c), _, _) if single && c > t.shard_max_common_share => Some(format!(
                    "one value of {first} holds {:.0}% of the documents: its chunk cannot split (a jumbo chunk on one shard)",
                    c * 100.0
                )),
                (_, _, Some(true), Form::Ranged) => Some(format!(
                    "monotonic: {first} rises with time, so every insert goes to the shard holding the last chunk (a hot shard); hashed spreads inserts but scatters ranges"
                )),
                _ => None,
            };
            let r = reads.count as f64;
            let w = writes.count as f64;
            let score = (reads.single_shard * r + writes.single_shard * w) / (r + w).max(1.0);
            let c = Candidate {
                key,
                rank: 0,
                reads,
                writes,
                distinct_values: distinct,
                most_common_share: common,
                monotonic: mono,
                recommended: why.is_none(),
                not_recommended: why,
                current: current == Some(&c_key),
            };
            (score, c)
        })
        .collect();
    // Recommended first, then by the share of operations sent to one shard, then the
    // longer key (a compound key splits one busy value's chunk further).
    candidates.sort_by(|(sa, a), (sb, b)| {
        b.recommended
            .cmp(&a.recommended)
            .then(sb.partial_cmp(sa).unwrap_or(std::cmp::Ordering::Equal))
            .then(b.key.len().cmp(&a.key.len()))
    });
    // The current key is always shown, last when it ranks below the others.
    if let Some(i) = candidates.iter().position(|(_, c)| c.current).filter(|i| *i >= MAX_SHOWN) {
        let c = candidates.remove(i);
        candidates.truncate(MAX_SHOWN - 1);
        candidates.push(c);
    }
    candidates.truncate(MAX_SHOWN);
    let mut candidates: Vec<Candidate> = candidates.into_iter().map(|(_, c)| c).collect();
    for (i, c) in candidates.iter_mut().enumerate() {
        c.rank = i + 1;
    }
    if let Some(now) = candidates.iter().find(|c| c.current) {
        let (recommendation, command) = judge_current(ns, now, &candidates, t, rows);
        return CollectionKeys {
            namespace: ns.to_owned(),
            operations,
            candidates,
            recommendation,
            command,
            current_key: current.cloned(),
        };
    }
    let (recommendation, command) = match candidates.first() {
        Some(best) if best.recommended && best.reads.single_shard >= t.shard_min_single_reads => (
            format!(
                "Shard {ns} on {key}: {rs} of its reads and {ws} of its writes would go to one shard ({sg} of reads to every shard).{others}",
                key = key_text(&best.key),
                rs = pct(best.reads.single_shard),
                ws = pct(best.writes.single_shard),
                sg = pct(best.reads.scatter_gather),
                others = warnings(&candidates),
            ),
            Some(format!("sh.shardCollection({}, {})", json!(ns), key_text(&best.key))),
        ),
        // Written, never read (a log, an outbox): the writes decide.
        Some(best)
            if best.recommended
                && best.reads.count == 0
                && best.writes.single_shard >= t.shard_min_single_reads =>
        {
            (
                format!(
                    "Shard {ns} on {key}: no read of it was seen, and {ws} of its writes would go to one shard.{others}",
                    key = key_text(&best.key),
                    ws = pct(best.writes.single_shard),
                    others = warnings(&candidates),
                ),
                Some(format!("sh.shardCollection({}, {})", json!(ns), key_text(&best.key))),
            )
        }
        Some(_) if candidates.iter().all(|c| c.distinct_values.is_none()) => (
            format!(
                "Too few documents were inserted into {ns} through mongotap ({MIN_INSERTS} are needed per field) to judge any candidate's cardinality or monotonicity: the table says where reads and writes would go; capture the inserts too before choosing."
            ),
            None,
        ),
        Some(_) if candidates.iter().all(|c| c.reads.count == 0) => (
            format!(
                "No read of {ns} was seen, and no recommended candidate sends most of its writes to one shard: judge a key once its reads are captured.{others}",
                others = warnings(&candidates),
            ),
            None,
        ),
        Some(best) if !best.recommended => (
            format!("No candidate key suits {ns}.{others}", others = warnings(&candidates)),
            None,
        ),
        Some(best) => (
            format!(
                "No key serves most reads of {ns}: the best candidate, {key}, still sends {sg} of its reads to every shard (scatter-gather) and only {rs} to one. Sharded, most queries of {ns} would ask every shard: keep it unsharded, or give its main queries a common field first.{others}",
                key = key_text(&best.key),
                sg = pct(best.reads.scatter_gather + best.reads.multi_shard),
                rs = pct(best.reads.single_shard),
                others = warnings(&candidates),
            ),
            None,
        ),
        None => (format!("No candidate key for {ns}."), None),
    };
    CollectionKeys {
        namespace: ns.to_owned(),
        operations,
        candidates,
        recommendation,
        command,
        current_key: None,
    }
}

pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The not-recommended candidates, in words.
fn warnings(candidates: &[Candidate]) -> String {
    let mut out = String::new();
    for c in candidates.iter().filter(|c| !c.recommended) {
        out.push_str(&format!(" Not {}: {}.", key_text(&c.key), c.not_recommended.as_deref().unwrap_or("")));
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use bson::{doc, oid::ObjectId, DateTime};
    use serde_json::json;

    use crate::report::{Report, RunFacts};
    use crate::script::Script;

    #[test]
    fn orders_queried_by_customer_rank_the_customer_first_with_hand_computed_shares() {
        // 120 orders, 60 reads by customer sorted by date (the script), then 20 by
        // _id, 10 by a date range; 8 updates by _id setting the status, 2 updateMany
        // by status.
        let (mut s, c) = orders_script();
        for _ in 0..20 {
            s.find(c, "shop.orders", doc! {"_id": ObjectId::new()}, vec![]);
        }
        for i in 0..10 {
            s.find(c, "shop.orders", doc! {"createdAt": {"$gte": DateTime::from_millis(i)}}, vec![]);
        }
        for _ in 0..8 {
            s.update(c, "shop.orders", doc! {"_id": ObjectId::new()}, doc! {"$set": {"status": "paid"}});
        }
        for _ in 0..2 {
            s.exchange(
                c,
                doc! {"update": "orders", "updates": [{"q": {"status": "placed"}, "u": {"$set": {"status": "late"}}, "multi": true}], "$db": "shop"},
                doc! {"n": 3, "nModified": 3, "ok": 1.0},
            );
        }
        let p = s.run();
        let report = Report::build(&p, RunFacts::default());
        let orders = report.shard_keys.iter().find(|c| c.namespace == "shop.orders").expect("orders");
        // 90 reads, 130 write statements (120 inserts, 8 + 2 updates).
        assert_eq!(orders.operations, 220);
        let best = &orders.candidates[0];
        assert_eq!(best.key, vec![("customerId".to_owned(), json!(1)), ("createdAt".to_owned(), json!(1))]);
        assert_eq!(
            (best.reads.single_shard, best.reads.scatter_gather, best.reads.count),
            (0.667, 0.333, 90)
        );
        // Inserts go to one shard (120 of 130); by _id without the key: 8 single, 2 broadcast.
        assert_eq!(
            (best.writes.single_shard, best.writes.single_without_key, best.writes.scatter_gather),
            (0.923, 0.062, 0.015)
        );
        assert_eq!((best.distinct_values, best.monotonic), (Some(120), Some(false)));
        assert_eq!(
            orders.command.as_deref(),
            Some("sh.shardCollection(\"shop.orders\", {customerId: 1, createdAt: 1})")
        );
        assert_eq!(super::key_text(&[("customer.id".to_owned(), json!(1))]), r#"{"customer.id": 1}"#);
        let by = |k: &str, form: serde_json::Value| {
            orders
                .candidates
                .iter()
                .find(|c| c.key == vec![(k.to_owned(), form.clone())])
                .unwrap_or_else(|| panic!("{k}"))
        };
        let created = by("createdAt", json!(1));
        assert_eq!(
            (created.reads.multi_shard, created.reads.scatter_gather),
            (0.111, 0.889),
            "a range is several shards"
        );
        assert!(created.monotonic == Some(true) && !created.recommended);
        let hashed = by("createdAt", json!("hashed"));
        assert_eq!(hashed.reads.scatter_gather, 1.0, "hashing scatters the range too");
        let status = by("status", json!(1));
        assert_eq!((status.distinct_values, status.most_common_share), (Some(2), Some(0.5)));
        assert!(!status.recommended);
        assert_eq!(status.writes.shard_key_updates, 0.077, "the 10 updates set the status");
    }

    /// Orders of 150 customers inserted in time order (two statuses), read by
    /// customer newest first, and the connection.
    pub(in crate::sharding) fn orders_script() -> (Script, crate::event::ConnId) {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..120i64 {
            let status = ["placed", "paid"][(i % 2) as usize];
            let d = doc! {"_id": ObjectId::new(), "customerId": (i * 97) % 150, "status": status,
            "createdAt": DateTime::from_millis(1_700_000_000_000 + i * 60_000)};
            s.exchange(
                c,
                doc! {"insert": "orders", "documents": [d], "$db": "shop"},
                doc! {"n": 1, "ok": 1.0},
            );
        }
        for i in 0..60 {
            s.exchange(
                c,
                doc! {"find": "orders", "filter": {"customerId": i}, "sort": {"createdAt": -1}, "$db": "shop"},
                doc! {"cursor": {"id": 0_i64, "ns": "shop.orders", "firstBatch": []}, "ok": 1.0},
            );
        }
        (s, c)
    }

    #[test]
    fn a_current_hashed_id_is_one_row() {
        let p = orders_script().0.run();
        p.detectors().catalog().lock().unwrap().set_shard_key(
            "shop.orders",
            Some(vec![("_id".into(), json!("hashed"))]),
            0,
        );
        let report = Report::build(&p, RunFacts::default());
        let orders = report.shard_keys.iter().find(|c| c.namespace == "shop.orders").unwrap();
        assert_eq!(
            orders.candidates.iter().filter(|c| c.key == vec![("_id".to_owned(), json!("hashed"))]).count(),
            1
        );
    }

    #[test]
    fn a_few_valued_field_is_offered_with_a_hashed_id_and_a_write_only_collection_is_judged_by_its_writes() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "iot", "PyMongo 4.20.1");
        // 200 readings of 10 sensors, read 20 times by sensor; an audit log only written.
        for i in 0..200i64 {
            let d = doc! {"_id": ObjectId::new(), "sensorId": format!("s{}", i % 10), "value": i};
            s.exchange(
                c,
                doc! {"insert": "readings", "documents": [d], "$db": "iot"},
                doc! {"n": 1, "ok": 1.0},
            );
            let e = doc! {"_id": ObjectId::new(), "at": DateTime::from_millis(1_700_000_000_000 + i * 1000)};
            s.exchange(c, doc! {"insert": "audit", "documents": [e], "$db": "iot"}, doc! {"n": 1, "ok": 1.0});
        }
        for i in 0..20 {
            s.find(c, "iot.readings", doc! {"sensorId": format!("s{}", i % 10)}, vec![]);
        }
        let report = Report::build(&s.run(), RunFacts::default());
        let readings = report.shard_keys.iter().find(|c| c.namespace == "iot.readings").expect("readings");
        let best = &readings.candidates[0];
        assert_eq!(best.key, vec![("sensorId".to_owned(), json!(1)), ("_id".to_owned(), json!("hashed"))]);
        assert!(best.recommended && best.reads.single_shard == 1.0, "{best:?}");
        let alone =
            readings.candidates.iter().find(|c| c.key.len() == 1 && c.key[0].0 == "sensorId").unwrap();
        assert!(
            alone.not_recommended.as_deref().is_some_and(|w| w.starts_with("low cardinality")),
            "{alone:?}"
        );
        assert_eq!(
            readings.command.as_deref(),
            Some("sh.shardCollection(\"iot.readings\", {sensorId: 1, _id: \"hashed\"})")
        );

        let audit = report.shard_keys.iter().find(|c| c.namespace == "iot.audit").expect("audit");
        assert!(audit.recommendation.contains("no read of it was seen"), "{}", audit.recommendation);
        assert_eq!(audit.command.as_deref(), Some("sh.shardCollection(\"iot.audit\", {_id: \"hashed\"})"));
    }
}
