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
//! connection) has its current key judged beside the candidates, marked `current`;
//! when it is a bad one (a monotonic ranged key, too few values, one value holding
//! many documents, or most reads sent to every shard where a candidate would target
//! them) it is a `bad_shard_key` finding, with the reshard command.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::distribution::{
    changed_by_writes, distribution, equality_fields, routed_writes, Form, Reads, Writes,
};
use super::ShardKeys;
use crate::detectors::indexes::catalog::{IndexCatalog, ShardKey};
use crate::detectors::Thresholds;
use crate::finding::{Draft, Finding, Severity};
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
const MIN_INSERTS: u64 = 20;

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

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

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
    let (routed_single, routed_all) = routed(rows, &now.key);
    let rare_reads = now.reads.count * 5 < now.reads.count + now.writes.count;
    let serves_writes = routed_single as f64 >= t.shard_min_single_reads * routed_all as f64;
    if now.reads.count == 0
        || now.reads.single_shard >= t.shard_min_single_reads
        || (rare_reads && serves_writes)
    {
        return None;
    }
    let now_score = score(now, rows);
    let b = others().find(|b| {
        b.reads.single_shard >= t.shard_min_single_reads && score(b, rows) >= now_score + SCORE_MARGIN
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
fn score(c: &Candidate, rows: &[&Row]) -> f64 {
    let (single, all) = routed(rows, &c.key);
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
fn judge_current(
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

/// The not-recommended candidates, in words.
fn warnings(candidates: &[Candidate]) -> String {
    let mut out = String::new();
    for c in candidates.iter().filter(|c| !c.recommended) {
        out.push_str(&format!(" Not {}: {}.", key_text(&c.key), c.not_recommended.as_deref().unwrap_or("")));
    }
    out
}

#[cfg(test)]
mod tests {
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
    fn orders_script() -> (Script, crate::event::ConnId) {
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
