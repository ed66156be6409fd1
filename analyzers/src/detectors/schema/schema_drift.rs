//! `schema_drift`: one field of a collection holds values of several types (a
//! price that is a number in most documents and a string in some, an `authorId`
//! that is an ObjectId here and its hex string there). Queries on it miss or
//! misorder the odd ones (`{price: {$gt: 10}}` never matches `"12"`, and an index
//! orders the types apart), and every reader must handle both. The guides' answer:
//! validate the structure (a `$jsonSchema` validator) and migrate the old values.
//!
//! Types are compared by family: int, long and double are one number (drivers pick
//! among them by value), and null is the absence of a value, not a type. `_id` is
//! left out (a collection keyed by names beside generated ids is a choice). Counts
//! are per epoch (see [`crate::schema`]): a test suite's re-created collections
//! never compare one case's model with another's. Who wrote each type comes from
//! the handshakes of the connections that wrote it.
//!
//! The other drift: documents in two field sets with no version field to tell them
//! apart, the new set written only after the last write of the old while the old
//! documents are still read (a rename or restructure left half done; see
//! [`crate::schema::variants`]). Readers handle both, and queries on the new field
//! miss the old documents. The guides' answer: finish the migration, or mark the
//! versions (the schema versioning pattern).

use serde_json::json;

use crate::detectors::{collection, Context, Detector};
use crate::finding::{Draft, Finding, Severity};
use crate::namespace::is_system;
use crate::schema::validator::{families, family, RARE};
use crate::schema::{Collection, Field};

/// The detector: it keeps nothing; the schemas hold what it needs.
pub struct SchemaDrift;

/// Rarer values only seen in documents read back need this many times
/// `drift_min_values`: one old document read again and again counts each time.
const READ_FACTOR: u64 = 3;

/// Whether `path` is the value of an attribute-pattern pair (`specs.v` beside
/// `specs.k` in an array): its types vary by attribute on purpose.
fn pair_value(c: &Collection, path: &str) -> bool {
    path.strip_suffix(".v").is_some_and(|parent| {
        c.field(&format!("{parent}.k")).is_some()
            && c.field(parent).is_some_and(|p| p.types.iter().any(|t| t.kind == 0x04))
    })
}

/// The aggregation operator that converts a value to a family's type.
fn converter(target: &str, majority_kind: u8) -> Option<&'static str> {
    Some(match target {
        "number" => match majority_kind {
            0x10 => "$toInt",
            0x12 => "$toLong",
            _ => "$toDouble",
        },
        "decimal" => "$toDecimal",
        "string" => "$toString",
        "date" => "$toDate",
        "objectId" => "$toObjectId",
        "bool" => "$toBool",
        _ => return None,
    })
}

/// Whether `path` sits inside an array (a pipeline `$set` cannot reach its values).
fn under_array(c: &Collection, path: &str) -> bool {
    let mut prefix = path;
    while let Some((p, _)) = prefix.rsplit_once('.') {
        if c.field(p).is_some_and(|f| f.types.iter().any(|t| t.kind == 0x04)) {
            return true;
        }
        prefix = p;
    }
    false
}

/// The writers (by the collection's writer bits) of a family's values.
fn writers(c: &Collection, f: &Field, name: &str) -> Vec<String> {
    c.writers(f.types.iter().filter(|t| family(t.kind) == Some(name)).fold(0u16, |b, t| b | t.writers))
}

impl Detector for SchemaDrift {
    fn name(&self) -> &'static str {
        "schema_drift"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        let mut out = Vec::new();
        for (ns, c) in ctx.schemas.all() {
            if is_system(ns) || c.epoch_documents < t.drift_min_documents {
                continue;
            }
            for f in
                c.fields.iter().filter(|f| f.present > 0 && f.path != "_id" && !f.path.starts_with("_id."))
            {
                let fams = families(f);
                let rare: u64 = fams.iter().skip(1).map(|(_, n)| n).sum();
                let total: u64 = fams.iter().map(|(_, n)| n).sum();
                // Written values count once; values only read back may be one document
                // read again and again, so they need more.
                let rare_written: u64 = f
                    .types
                    .iter()
                    .filter(|t| family(t.kind).is_some_and(|n| n != fams[0].0))
                    .map(|t| t.written)
                    .sum();
                let enough = rare_written >= t.drift_min_values
                    || (rare_written == 0 && rare >= t.drift_min_values.saturating_mul(READ_FACTOR));
                if fams.len() < 2 || !enough || rare as f64 > RARE * total as f64 || pair_value(c, &f.path) {
                    continue;
                }
                let (main, main_n) = fams[0];
                let written_rare: Vec<(&str, Vec<String>)> =
                    fams.iter().skip(1).map(|(name, _)| (*name, writers(c, f, name))).collect();
                let rare_written = written_rare.iter().any(|(_, w)| !w.is_empty());
                let described: Vec<String> = fams
                    .iter()
                    .map(|(name, n)| {
                        let w = writers(c, f, name);
                        if w.is_empty() {
                            format!("{name} in {n}")
                        } else {
                            format!("{name} in {n} (written by {})", w.join(", "))
                        }
                    })
                    .collect();
                let coll = collection(ns);
                let path = &f.path;
                let example = match main {
                    "number" => format!(" (`{{{path}: {{$gt: 10}}}}` never matches a string \"12\")"),
                    _ => String::new(),
                };
                let recommendation = format!(
                    "`{path}` of {ns} holds several types: {types} of {total} values seen. Queries on it miss or misorder the odd ones{example}, an index keeps each type apart, and every reader must handle both. {who}Convert the {rare} value(s) to {main}, then apply the schemas section's validator for {ns}, which accepts {main} only.",
                    types = described.join(", "),
                    who = if rare_written {
                        "The rarer types are still being written: fix the writer named above first. "
                    } else {
                        "Only documents read back carry the rarer types: old data, from before the current code. "
                    },
                );
                let majority_kind = f
                    .types
                    .iter()
                    .filter(|t| family(t.kind) == Some(main))
                    .max_by_key(|t| t.count)
                    .map_or(0x01, |t| t.kind);
                let fix = match converter(main, majority_kind) {
                    Some(op) if !under_array(c, path) => {
                        let rare_types: Vec<&str> = f
                            .types
                            .iter()
                            .filter(|t| family(t.kind).is_some_and(|n| n != main))
                            .map(|t| crate::schema::validator::alias(t.kind))
                            .collect();
                        format!(
                            "// convert the other types to {main} (try it on a copy first; values that do not convert fail the update):\ndb.{coll}.updateMany(\n  {{ {path:?}: {{ $type: {types} }} }},\n  [{{ $set: {{ {path:?}: {{ {op}: \"${path}\" }} }} }}]\n)\n// then stop new ones: the validator in the report's schemas section for {ns}",
                            types = json!(rare_types),
                        )
                    }
                    _ => format!(
                        "// {path} has no automatic conversion to {main} here: migrate the odd documents in the application\ndb.{coll}.find({{ {path:?}: {{ $not: {{ $type: {main:?} }} }} }})\n// then stop new ones: the validator in the report's schemas section for {ns}"
                    ),
                };
                out.push(
                    Draft {
                        kind: "schema_drift",
                        severity: if rare_written { Severity::Medium } else { Severity::Low },
                        namespace: ns,
                        shapes: &[],
                        evidence: json!({
                            "count": rare,
                            "types": fams.iter().map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
                            "main_type": main,
                            "main_share": (main_n as f64 / total.max(1) as f64 * 1000.0).round() / 1000.0,
                            "written_by": written_rare.iter().map(|(n, w)| (n.to_string(), json!(w))).collect::<serde_json::Map<_, _>>(),
                            "documents_seen": c.epoch_documents,
                            "thresholds": {
                                "drift_min_documents": t.drift_min_documents,
                                "drift_min_values": t.drift_min_values,
                            },
                        }),
                        recommendation,
                        fix: Some(fix),
                        extra: vec![("field", json!(path))],
                    }
                    .finding(),
                );
            }
            out.extend(migrations(ns, c, t));
        }
        out
    }
}

/// The main type family of the field `name`.
fn main_family(c: &Collection, name: &str) -> Option<&'static str> {
    c.field(name).and_then(|f| families(f).first().map(|(n, _)| *n))
}

/// The half-done migrations of `ns`, as findings.
fn migrations(ns: &str, c: &Collection, t: &crate::detectors::Thresholds) -> Vec<Finding> {
    let coll = collection(ns);
    let mut out = Vec::new();
    for (m, old, new) in c.migrations(t.drift_min_documents) {
        let (o, n) = (&c.variants.variants[m.old], &c.variants.variants[m.new]);
        let list = |f: &[&str]| f.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ");
        let recommendation = format!(
            "{ns} holds documents of two field sets and no version field to tell them apart: {old_f} in {ow} written and {or} read (no write of them seen since the other set appeared), {new_f} instead in {nw} written since. A migration was left half done: every reader handles both, and a query on {new_f} misses the old documents. Finish it (below), or mark the versions (the schema versioning pattern: a schemaVersion field the new code writes, old documents migrated as they are read), then apply the schemas section's validator for {ns}.",
            ow = o.written,
            or = o.documents - o.written,
            nw = n.written,
            old_f = list(&old),
            new_f = list(&new),
        );
        let same_type = old.len() == 1 && new.len() == 1 && main_family(c, old[0]) == main_family(c, new[0]);
        let fix = if same_type {
            format!(
                "// a rename: move the old documents' {o} to {n} (try it on a copy first)
db.{coll}.updateMany(
  {{ {o:?}: {{ $exists: true }}, {n:?}: {{ $exists: false }} }},
  {{ $rename: {{ {o:?}: {n:?} }} }}
)",
                o = old[0],
                n = new[0],
            )
        } else {
            let exists = |f: &[&str]| {
                f.iter().map(|x| format!("{x:?}: {{ $exists: true }}")).collect::<Vec<_>>().join(", ")
            };
            format!(
                "// mark the versions (the new code writes schemaVersion: 2 from now on):
db.{coll}.updateMany({{ {old} }}, {{ $set: {{ schemaVersion: 1 }} }})
db.{coll}.updateMany({{ {new} }}, {{ $set: {{ schemaVersion: 2 }} }})
// then migrate the schemaVersion 1 documents in the application as they are read, or in a batch",
                old = exists(&old),
                new = exists(&new),
            )
        };
        out.push(
            Draft {
                kind: "schema_drift",
                severity: Severity::Medium,
                namespace: ns,
                shapes: &[],
                evidence: json!({
                    "count": o.documents,
                    "old_fields": old,
                    "new_fields": new,
                    "old_documents_seen": o.documents,
                    "new_documents_seen": n.documents,
                    "old_written": o.written,
                    "new_written": n.written,
                    "documents_seen": c.epoch_documents,
                    "thresholds": {"drift_min_documents": t.drift_min_documents},
                }),
                recommendation,
                fix: Some(fix),
                extra: vec![("field", json!(new[0])), ("old_fields", json!(old))],
            }
            .finding(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use bson::{doc, Bson};

    use crate::script::Script;

    fn drift(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "schema_drift").collect()
    }

    fn insert(s: &mut Script, c: u64, d: bson::Document) {
        s.exchange(c, doc! {"insert": "products", "documents": [d], "$db": "shop"}, doc! {"n": 1, "ok": 1.0});
    }

    #[test]
    fn a_number_written_as_a_string_by_one_app_is_a_drift() {
        let mut s = Script::new();
        let shop = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        let import = s.connect("10.0.0.2:50000", "importer", "nodejs 6.21.0");
        for i in 0..40 {
            insert(
                &mut s,
                shop,
                doc! {"_id": i, "price": if i % 2 == 0 { Bson::Int32(3) } else { Bson::Double(2.5) }, "note": Bson::Null},
            );
        }
        for i in 40..45 {
            insert(&mut s, import, doc! {"_id": i, "price": "12.50", "note": "n"});
        }
        let f = drift(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!((f.severity.as_str(), f.extra["field"].as_str()), ("medium", Some("price")));
        assert_eq!(f.evidence["types"], serde_json::json!({"number": 40, "string": 5}));
        assert_eq!(f.evidence["written_by"]["string"], serde_json::json!(["importer (nodejs 6.21.0)"]));
        let fix = f.fix.as_deref().unwrap();
        assert!(fix.contains(r#"{ "price": { $type: ["string"] } }"#) && fix.contains("$toDouble"), "{fix}");
        assert!(!f.recommendation.contains("12.50"), "no literal value");
    }

    #[test]
    fn numbers_of_several_widths_nulls_ids_and_dropped_collections_are_no_drift() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        for i in 0..30 {
            let id = if i % 2 == 0 { Bson::Int32(i) } else { Bson::String(format!("k{i}")) };
            let qty = if i % 3 == 0 { Bson::Int64(1 << 40) } else { Bson::Int32(1) };
            insert(
                &mut s,
                c,
                doc! {"_id": id, "qty": qty, "tag": if i % 2 == 0 { Bson::Null } else { Bson::String("t".into()) }, "sku": "a"},
            );
        }
        // A test suite's next case re-creates the collection with another model.
        s.exchange(c, doc! {"drop": "products", "$db": "shop"}, doc! {"ok": 1.0});
        for i in 0..30 {
            insert(&mut s, c, doc! {"_id": i, "sku": 7});
        }
        assert!(drift(s).is_empty());
    }

    #[test]
    fn a_rename_left_half_done_is_a_drift_and_subtypes_one_after_the_other_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        for i in 0..30 {
            insert(&mut s, c, doc! {"_id": i, "name": "n", "phone": "p"});
        }
        for i in 30..60 {
            insert(&mut s, c, doc! {"_id": i, "name": "n", "mobile": "p"});
        }
        let both =
            vec![doc! {"_id": 1, "name": "n", "phone": "p"}, doc! {"_id": 40, "name": "n", "mobile": "p"}];
        s.find(c, "shop.products", doc! {}, both);
        // The new code edits the new field: still the same half-done rename.
        s.update(c, "shop.products", doc! {"_id": 40}, doc! {"$set": {"mobile": "q"}});
        let f = drift(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].extra["field"].as_str(), f[0].evidence["old_documents_seen"].as_u64()),
            (Some("mobile"), Some(31))
        );
        assert!(f[0].fix.as_deref().unwrap().contains(r#"$rename: { "phone": "mobile" }"#), "{:?}", f[0].fix);

        // mongoengine's subtypes: employees, then students, each with its _cls.
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "MongoEngine");
        for i in 0..30 {
            insert(&mut s, c, doc! {"_id": i, "_cls": "Person.Employee", "name": "n", "salary": 1});
        }
        for i in 30..60 {
            insert(&mut s, c, doc! {"_id": i, "_cls": "Person.Student", "name": "n", "school": "s"});
        }
        let both = vec![doc! {"_id": 1, "_cls": "Person.Employee", "name": "n", "salary": 1}];
        s.find(c, "shop.products", doc! {}, both);
        assert!(drift(s).is_empty());
    }

    #[test]
    fn documents_that_change_sets_by_their_updates_are_no_migration() {
        // Sign-ups carry a token until verified: $set verifiedAt, $unset verifyToken.
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        for i in 0..40 {
            insert(&mut s, c, doc! {"_id": i, "email": "e", "verifyToken": "t"});
        }
        for i in 0..30 {
            s.update(
                c,
                "shop.products",
                doc! {"_id": i},
                doc! {"$set": {"verifiedAt": 1}, "$unset": {"verifyToken": ""}},
            );
        }
        for i in 0..70 {
            s.find(
                c,
                "shop.products",
                doc! {"_id": i % 30},
                vec![doc! {"_id": i % 30, "email": "e", "verifiedAt": 1}],
            );
        }
        assert!(drift(s).is_empty());
    }

    #[test]
    fn too_few_documents_or_one_odd_value_is_no_drift() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        for i in 0..30 {
            insert(
                &mut s,
                c,
                doc! {"_id": i, "price": if i == 0 { Bson::String("1".into()) } else { Bson::Int32(1) }},
            );
        }
        assert!(drift(s).is_empty(), "one odd value");
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:50000", "shop", "PyMongo 4.20.1");
        for i in 0..10 {
            insert(
                &mut s,
                c,
                doc! {"_id": i, "price": if i < 5 { Bson::String("1".into()) } else { Bson::Int32(1) }},
            );
        }
        assert!(drift(s).is_empty(), "ten documents");
    }
}
