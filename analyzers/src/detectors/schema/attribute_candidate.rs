//! `attribute_candidate`: many sibling fields under one parent (`specs.color`,
//! `specs.voltage`, `specs.capacity`, ...), each in few documents, each queried on
//! its own and so each wanting its own index. The attribute pattern (MongoDB's
//! pattern catalogue) turns them into one array of `{k, v}` pairs served by one
//! compound index, `{"specs.k": 1, "specs.v": 1}`, whatever attribute a query asks.
//!
//! From the table and the schemas, at report time: per collection and parent path,
//! the children asked by a positive predicate in read shapes that ran at least
//! `index_min_count` times in all. It is a finding when at least
//! `attribute_min_fields` children are asked, each in at most
//! `attribute_max_presence` of the documents seen (sparse: the hallmark of
//! attributes; an address's city and zip are in every document, and are no
//! attributes), and the parent is a sub-document (an array of `{k, v}` is the
//! pattern already). Without documents seen, nothing is said.

use std::collections::BTreeMap;

use serde_json::json;

use crate::detectors::indexes::catalog::SharedCatalog;
use crate::detectors::schema::unknown_field::asked_fields;
use crate::detectors::{collection, Context, Detector};
use crate::finding::{Draft, Finding, Severity};
use crate::namespace::is_system;
use crate::shape::command::Category;
use crate::view::ShapeId;

/// Shapes named per finding.
const MAX_SHAPES: usize = 16;

/// The detector; it reads the catalog for the indexes the pattern replaces.
pub struct AttributeCandidate {
    catalog: SharedCatalog,
}

impl AttributeCandidate {
    pub fn new(catalog: SharedCatalog) -> AttributeCandidate {
        AttributeCandidate { catalog }
    }
}

/// One child asked: executions, and the shapes that asked.
#[derive(Default)]
struct Asked {
    executions: u64,
    shapes: Vec<ShapeId>,
}

impl Detector for AttributeCandidate {
    fn name(&self) -> &'static str {
        "attribute_candidate"
    }

    fn findings(&self, ctx: &Context<'_>) -> Vec<Finding> {
        let t = ctx.thresholds;
        // (namespace, parent) -> child -> asked
        let mut by_parent: BTreeMap<(&str, String), BTreeMap<String, Asked>> = BTreeMap::new();
        for row in ctx.table.rows() {
            if row.category != Category::Read || row.id == 0 || is_system(&row.namespace) {
                continue;
            }
            let (filtered, _) = asked_fields(&row.shape);
            for field in filtered {
                let Some((parent, child)) = field.rsplit_once('.') else { continue };
                let a = by_parent
                    .entry((row.namespace.as_str(), parent.to_owned()))
                    .or_default()
                    .entry(child.to_owned())
                    .or_default();
                a.executions += row.count;
                if a.shapes.len() < MAX_SHAPES && !a.shapes.contains(&row.id) {
                    a.shapes.push(row.id);
                }
            }
        }
        let catalog = self.catalog.lock().ok();
        let mut out = Vec::new();
        for ((ns, parent), children) in by_parent {
            let Some(coll) = ctx.schemas.get(ns) else { continue };
            if coll.epoch_documents == 0 {
                continue;
            }
            // The parent must be a sub-document: an array of {k, v} is the pattern already.
            let Some(p) = coll.field(&parent) else { continue };
            if p.types.iter().any(|ty| ty.kind == 0x04) || !p.types.iter().any(|ty| ty.kind == 0x03) {
                continue;
            }
            let sparse: Vec<(&String, &Asked, f64)> = children
                .iter()
                .filter(|(_, a)| a.executions >= t.index_min_count)
                .filter_map(|(c, a)| {
                    let present =
                        coll.field(&format!("{parent}.{c}"))?.present as f64 / coll.epoch_documents as f64;
                    (present <= t.attribute_max_presence).then_some((c, a, present))
                })
                .collect();
            if (sparse.len() as u64) < t.attribute_min_fields {
                continue;
            }
            let names: Vec<&str> = sparse.iter().map(|(c, _, _)| c.as_str()).collect();
            let executions: u64 = sparse.iter().map(|(_, a, _)| a.executions).sum();
            let mut shapes: Vec<ShapeId> =
                sparse.iter().flat_map(|(_, a, _)| a.shapes.iter().copied()).collect();
            shapes.sort_unstable();
            shapes.dedup();
            shapes.truncate(MAX_SHAPES);
            // Indexes on the attributes found and nothing else: the pattern's one index
            // replaces them. Unique, TTL and partial indexes do more than serve a query.
            let attribute_paths: Vec<String> = names.iter().map(|n| format!("{parent}.{n}")).collect();
            let replaced: Vec<String> = catalog
                .as_ref()
                .and_then(|c| c.get(ns))
                .into_iter()
                .flat_map(|known| &known.indexes)
                .filter(|ix| !ix.unique && !ix.ttl && ix.partial.is_none())
                .filter(|ix| ix.key.iter().all(|(k, _)| attribute_paths.contains(k)))
                .map(|ix| ix.key_js())
                .collect();
            let c = collection(ns);
            let recommendation = format!(
                "{n} fields under `{parent}` of {ns} ({list}) are each asked on their own ({executions} executions), and each is in few documents (at most {max:.0}% of the {docs} seen): each would need its own index{have}. Store them as one array of {{k, v}} pairs (the attribute pattern): one index on {parent}.k and {parent}.v serves a query on any of them, and new attributes need no new index.",
                n = names.len(),
                list = names.join(", "),
                max = sparse.iter().map(|(_, _, p)| *p).fold(0.0, f64::max) * 100.0,
                docs = coll.epoch_documents,
                have = if replaced.is_empty() { String::new() } else { format!(" ({} exist already)", replaced.len()) },
            );
            let mut fix = format!(
                "// {parent} as an array of {{ k, v }} pairs, converted in place (the code then writes and reads pairs):\ndb.{c}.updateMany({{ {parent:?}: {{ $type: \"object\" }} }}, [{{ $set: {{ {parent:?}: {{ $objectToArray: \"${parent}\" }} }} }}])\ndb.{c}.createIndex({{ \"{parent}.k\": 1, \"{parent}.v\": 1 }})\n// a query on any attribute:\ndb.{c}.find({{ {parent:?}: {{ $elemMatch: {{ k: {first:?}, v: /* value */ }} }} }})",
                first = names[0],
            );
            if !replaced.is_empty() {
                fix.push_str("\n// then the per-attribute indexes it replaces:");
            }
            for key in &replaced {
                fix.push_str(&format!("\ndb.{c}.dropIndex({key})"));
            }
            out.push(
                Draft {
                    kind: "attribute_candidate",
                    severity: Severity::Low,
                    namespace: ns,
                    shapes: &shapes,
                    evidence: json!({
                        "count": executions,
                        "fields": sparse.iter().map(|(c, a, p)| json!({"field": format!("{parent}.{c}"), "executions": a.executions, "presence": (p * 1000.0).round() / 1000.0})).collect::<Vec<_>>(),
                        "documents_seen": coll.epoch_documents,
                        "indexes_replaced": replaced,
                        "thresholds": {
                            "attribute_min_fields": t.attribute_min_fields,
                            "attribute_max_presence": t.attribute_max_presence,
                            "index_min_count": t.index_min_count,
                        },
                    }),
                    recommendation,
                    fix: Some(fix),
                    extra: vec![("field", json!(parent))],
                }
                .finding(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, Document};

    use crate::script::Script;

    const ATTRIBUTES: [&str; 6] = ["color", "voltage", "capacity", "weight", "size", "material"];

    fn attributes(s: Script) -> Vec<crate::finding::Finding> {
        s.run().findings().into_iter().filter(|f| f.kind == "attribute_candidate").collect()
    }

    fn insert(s: &mut Script, c: u64, d: Document) {
        s.exchange(c, doc! {"insert": "products", "documents": [d], "$db": "shop"}, doc! {"n": 1, "ok": 1.0});
    }

    #[test]
    fn sparse_specs_each_queried_on_their_own_are_attributes() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..60 {
            let a = ATTRIBUTES[i % 6];
            insert(
                &mut s,
                c,
                doc! {"_id": i as i32, "name": "p", "specs": {a: "x"}, "address": {"city": "c"}},
            );
        }
        for a in ATTRIBUTES {
            for _ in 0..6 {
                s.find(c, "shop.products", doc! {format!("specs.{a}"): "x"}, vec![doc! {"_id": 1}]);
            }
        }
        let f = attributes(s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.extra["field"], "specs");
        assert_eq!(f.evidence["fields"].as_array().unwrap().len(), 6);
        assert!(
            f.fix.as_deref().unwrap().contains(r#"createIndex({ "specs.k": 1, "specs.v": 1 })"#),
            "{:?}",
            f.fix
        );
    }

    #[test]
    fn an_address_in_every_document_and_an_array_of_pairs_are_not() {
        let mut s = Script::new();
        let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
        for i in 0..60 {
            insert(
                &mut s,
                c,
                doc! {"_id": i, "address": {"city": "c", "zip": "z", "street": "s", "country": "f", "state": "s"},
                "specs": [{"k": "color", "v": "red"}]},
            );
        }
        for f in ["city", "zip", "street", "country", "state"] {
            for _ in 0..6 {
                s.find(c, "shop.products", doc! {format!("address.{f}"): "x"}, vec![]);
            }
        }
        for _ in 0..6 {
            s.find(c, "shop.products", doc! {"specs.k": "color", "specs.v": "red"}, vec![]);
        }
        assert!(attributes(s).is_empty());
    }
}
