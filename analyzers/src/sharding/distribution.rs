//! Where each read and write of a collection would go if it were sharded on a
//! candidate key, from the shapes in the access-pattern table: the
//! `readWriteDistribution` of `analyzeShardKey`, for every candidate at once.
//!
//! A statement's filter targets, for a ranged key, one shard when it holds an
//! equality on the key's first field (the documents of one value sit in one chunk
//! range, unless that value outgrows a chunk), several shards when the first field
//! is given as a range or an `$in` list, and every shard when the first field is
//! not constrained. For a hashed key, an equality targets one shard, an `$in` list
//! several, and a range every shard (hashing scatters neighbours). Inserts carry the
//! key and go to one shard. An update or delete that would go to every shard is a
//! broadcast when it may change many documents (`multi`), and a single-document
//! write without the key (it needs `_id` or a two-phase lookup) otherwise.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::shape::command::Category;
use crate::table::Row;

/// How a key is sharded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    Ranged,
    Hashed,
}

/// Where one statement goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    One,
    Several,
    All,
}

/// How a filter constrains one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pred {
    Eq,
    In,
    Range,
}

/// The constraints of a filter shape's top-level conjuncts (an `$or` constrains
/// nothing for targeting).
fn predicates(filter: &Value, out: &mut Vec<(String, Pred)>) {
    let Some(o) = filter.as_object() else { return };
    for (k, v) in o {
        if k == "$and" {
            v.as_array().into_iter().flatten().for_each(|b| predicates(b, out));
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let Some(ops) = v.as_object() else { continue };
        for (op, arg) in ops {
            let p = match op.as_str() {
                "$eq" if arg.as_str() != Some("?null") => Pred::Eq,
                "$in" => Pred::In,
                "$gt" | "$gte" | "$lt" | "$lte" => Pred::Range,
                _ => continue,
            };
            out.push((k.clone(), p));
        }
    }
}

/// Where a statement with `filter` goes for `first` (the key's first field).
pub fn target(filter: Option<&Value>, first: &str, form: Form) -> Target {
    let mut preds = Vec::new();
    if let Some(f) = filter {
        predicates(f, &mut preds);
    }
    let on = |p: Pred| preds.iter().any(|(f, q)| f == first && *q == p);
    match form {
        _ if on(Pred::Eq) => Target::One,
        _ if on(Pred::In) => Target::Several,
        Form::Ranged if on(Pred::Range) => Target::Several,
        _ => Target::All,
    }
}

/// The filter of a statement shape (find, count, distinct, update, delete,
/// findAndModify, an aggregation's first `$match`).
fn filter_of(shape: &Value) -> Option<&Value> {
    shape
        .get("filter")
        .or_else(|| shape.get("query"))
        .or_else(|| shape.get("pipeline").and_then(|p| p.get(0)).and_then(|s| s.get("$match")))
}

/// A write row's statement: its kind (`insert`, `update`, `delete`...) and shape,
/// unwrapped from a `bulkWrite`'s `{"update": {...}}`. `None` for an aggregation
/// that writes (`$out`, `$merge`): its reads are its source's, its writes another's.
fn statement(row: &Row) -> Option<(&str, &Value)> {
    match row.command.as_str() {
        "aggregate" => None,
        "bulkWrite" => {
            let o = row.shape.as_object().filter(|o| o.len() == 1)?;
            let (k, v) = o.iter().next()?;
            Some((k.as_str(), v))
        }
        c => Some((c, &row.shape)),
    }
}

/// Whether any write statement of `rows` changes one of `key`'s fields (counted,
/// not as a rounded share: one such update in thousands still moves documents).
pub fn changed_by_writes(rows: &[&Row], key: &[String]) -> bool {
    rows.iter()
        .filter(|r| r.category == Category::Write)
        .filter_map(|r| statement(r))
        .any(|(kind, shape)| kind != "insert" && changes_key(shape, key))
}

/// Whether an update shape changes one of `key`'s fields.
fn changes_key(shape: &Value, key: &[String]) -> bool {
    let Some(ops) = shape.get("update").and_then(|u| u.get("operators")).and_then(Value::as_object) else {
        return false;
    };
    ops.iter().filter(|(op, _)| *op != "$setOnInsert").any(|(_, fields)| {
        fields.as_array().into_iter().flatten().filter_map(Value::as_str).any(|f| {
            key.iter().any(|k| f == k || f.starts_with(&format!("{k}.")) || k.starts_with(&format!("{f}.")))
        })
    })
}

/// The shares of reads by target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reads {
    pub single_shard: f64,
    pub multi_shard: f64,
    pub scatter_gather: f64,
    /// Reads counted (executions of read shapes; cursors' getMores are their find's).
    pub count: u64,
}

/// The shares of writes by target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Writes {
    pub single_shard: f64,
    pub multi_shard: f64,
    /// Multi-document updates and deletes without the key: sent to every shard.
    pub scatter_gather: f64,
    /// Single-document updates and deletes without the key (by `_id` or a lookup).
    pub single_without_key: f64,
    /// Updates that change a key field (the document may move between shards).
    pub shard_key_updates: f64,
    /// Write statements counted.
    pub count: u64,
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        (n as f64 / of as f64 * 1000.0).round() / 1000.0
    }
}

/// What `rows` (one collection's) send where under `key`: reads by target (one
/// shard, several, all), write statements by target (one, several, all as a multi
/// write, all as a single one) and those changing the key, and of them the inserts.
struct Counts {
    reads: [u64; 3],
    writes: [u64; 5],
    inserts: u64,
}

fn counts(rows: &[&Row], key: &[String], form: Form) -> Counts {
    let first = key.first().map_or("", String::as_str);
    let mut c = Counts { reads: [0; 3], writes: [0; 5], inserts: 0 };
    for row in rows {
        match row.category {
            Category::Read if row.command != "getMore" => {
                let i = match target(filter_of(&row.shape), first, form) {
                    Target::One => 0,
                    Target::Several => 1,
                    Target::All => 2,
                };
                c.reads[i] += row.count;
            }
            Category::Write => {
                let Some((kind, shape)) = statement(row) else { continue };
                let n = row.statements.max(1);
                if kind == "insert" {
                    c.writes[0] += n;
                    c.inserts += n;
                    continue;
                }
                let multi = shape.get("multi").and_then(Value::as_bool).unwrap_or(false);
                let i = match (target(filter_of(shape), first, form), multi) {
                    (Target::One, _) => 0,
                    (Target::Several, _) => 1,
                    (Target::All, true) => 2,
                    (Target::All, false) => 3,
                };
                c.writes[i] += n;
                if changes_key(shape, key) {
                    c.writes[4] += n;
                }
            }
            _ => {}
        }
    }
    c
}

/// The read and write distribution of `rows` (one collection's) for `key`.
pub fn distribution(rows: &[&Row], key: &[String], form: Form) -> (Reads, Writes) {
    let Counts { reads: r, writes: w, .. } = counts(rows, key, form);
    let reads: u64 = r.iter().sum();
    let writes: u64 = w[..4].iter().sum();
    (
        Reads {
            single_shard: share(r[0], reads),
            multi_shard: share(r[1], reads),
            scatter_gather: share(r[2], reads),
            count: reads,
        },
        Writes {
            single_shard: share(w[0], writes),
            multi_shard: share(w[1], writes),
            scatter_gather: share(w[2], writes),
            single_without_key: share(w[3], writes),
            shard_key_updates: share(w[4], writes),
            count: writes,
        },
    )
}

/// The write statements of `rows` that find their documents by a filter under
/// `key`, as (sent to one shard, in all). Inserts are not among them: each carries
/// the key and goes to one shard under any key, so they tell keys apart by their
/// values (cardinality, monotonicity), never by routing.
pub fn routed_writes(rows: &[&Row], key: &[String], form: Form) -> (u64, u64) {
    let c = counts(rows, key, form);
    (c.writes[0] - c.inserts, c.writes[..4].iter().sum::<u64>() - c.inserts)
}

/// The fields a collection's statements ask by equality, with the executions
/// asking each, and the sort or range fields asked beside each (for compound keys).
pub fn equality_fields(rows: &[&Row]) -> Vec<(String, u64, Vec<String>)> {
    let mut out: Vec<(String, u64, Vec<String>)> = Vec::new();
    // Each field's place in `out`: a table of 10,000 shapes can ask 10,000 fields,
    // and a search of `out` for each made the report's build quadratic.
    let mut at: rustc_hash::FxHashMap<String, usize> = rustc_hash::FxHashMap::default();
    for row in rows.iter().filter(|r| matches!(r.category, Category::Read | Category::Write)) {
        let shape = match row.category {
            Category::Write => match statement(row) {
                Some((_, shape)) => shape,
                None => continue,
            },
            _ => &row.shape,
        };
        let mut preds = Vec::new();
        if let Some(f) = filter_of(shape) {
            predicates(f, &mut preds);
        }
        let sorted: Vec<String> = shape
            .get("sort")
            .and_then(Value::as_object)
            .map(|o| o.keys().filter(|k| !k.starts_with('$')).cloned().collect())
            .unwrap_or_default();
        let ranged: Vec<String> =
            preds.iter().filter(|(_, p)| *p == Pred::Range).map(|(f, _)| f.clone()).collect();
        for (f, _) in preds.iter().filter(|(_, p)| *p == Pred::Eq) {
            let n = if row.category == Category::Write { row.statements.max(1) } else { row.count };
            let i = match at.get(f.as_str()) {
                Some(&i) => i,
                None => {
                    at.insert(f.clone(), out.len());
                    out.push((f.clone(), 0, Vec::new()));
                    out.len() - 1
                }
            };
            out[i].1 += n;
            for s in sorted.iter().chain(&ranged) {
                if s != f && !out[i].2.contains(s) {
                    out[i].2.push(s.clone());
                }
            }
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_by_the_keys_first_field() {
        let eq = json!({"$and": [{"customerId": {"$eq": "?number"}}, {"status": {"$eq": "?string"}}]});
        let range = json!({"createdAt": {"$gte": "?date"}});
        let inn = json!({"customerId": {"$in": "?array<?number>"}});
        let or = json!({"$or": [{"customerId": {"$eq": "?number"}}, {"x": {"$eq": "?number"}}]});
        assert_eq!(target(Some(&eq), "customerId", Form::Ranged), Target::One);
        assert_eq!(target(Some(&eq), "status", Form::Hashed), Target::One);
        assert_eq!(target(Some(&eq), "createdAt", Form::Ranged), Target::All);
        assert_eq!(target(Some(&range), "createdAt", Form::Ranged), Target::Several);
        assert_eq!(target(Some(&range), "createdAt", Form::Hashed), Target::All, "hashing scatters a range");
        assert_eq!(target(Some(&inn), "customerId", Form::Hashed), Target::Several);
        assert_eq!(target(Some(&or), "customerId", Form::Ranged), Target::All);
        assert_eq!(target(None, "customerId", Form::Ranged), Target::All);
        let null = json!({"customerId": {"$eq": "?null"}});
        assert_eq!(target(Some(&null), "customerId", Form::Ranged), Target::All);
    }

    #[test]
    fn key_updates_are_seen_in_the_operators() {
        let key = vec!["customerId".to_owned()];
        let set = json!({"update": {"operators": {"$set": ["customerId", "total"]}}});
        let other = json!({"update": {"operators": {"$inc": ["total"]}, "$setOnInsert": ["customerId"]}});
        let on_insert = json!({"update": {"operators": {"$setOnInsert": ["customerId"]}}});
        assert!(changes_key(&set, &key));
        assert!(!changes_key(&other, &key));
        assert!(!changes_key(&on_insert, &key));
    }
}
