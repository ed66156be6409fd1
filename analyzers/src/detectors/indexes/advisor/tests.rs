use super::*;
use crate::detectors::indexes::catalog::IndexCatalog;
use crate::detectors::{Detectors, Thresholds};
use crate::exchange::Limits;
use crate::pipeline::Pipeline;
use crate::script::{batch, Script};
use crate::table::TableLimits;
use bson::{doc, Document};
use serde_json::json;

fn advisor_run(f: impl FnOnce(&mut Script)) -> Vec<Finding> {
    let catalog = IndexCatalog::shared();
    let mut p = Pipeline::with_detectors(
        Limits::default(),
        TableLimits::default(),
        Detectors::with_catalog(Thresholds::default(), catalog),
    );
    let mut s = Script::new();
    f(&mut s);
    s.run_into(&mut p);
    p.findings().into_iter().filter(|f| f.kind.contains("index")).collect()
}

fn find(s: &mut Script, c: u64, ns: &str, body: Document, docs: Vec<Document>) {
    let (db, coll) = ns.split_once('.').unwrap();
    let mut cmd = doc! {"find": coll};
    cmd.extend(body);
    cmd.insert("$db", db);
    s.exchange(c, cmd, batch(ns, docs, 0, true));
}

fn history(s: &mut Script, n: i32) {
    let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
    for i in 0..n {
        find(
            s,
            c,
            "shop.orders",
            doc! {"filter": {"customerId": i % 7, "status": "open"}, "sort": {"createdAt": -1}, "limit": 20},
            vec![doc! {"_id": i, "customerId": i % 7, "status": "open", "createdAt": i}],
        );
    }
}

fn create(s: &mut Script, ns: &str, key: Document, name: &str) {
    let c = s.connect("10.0.0.9:50001", "admin", "mongosh 2.5.0");
    let (db, coll) = ns.split_once('.').unwrap();
    s.exchange(
        c,
        doc! {"createIndexes": coll, "indexes": [{"key": key, "name": name}], "$db": db},
        doc! {"ok": 1.0},
    );
}

/// The application lists the collection's indexes (as ODMs and tools do).
fn list(s: &mut Script, ns: &str, keys: Vec<(Document, &str)>) {
    let c = s.connect("10.0.0.9:50003", "admin", "mongosh 2.5.0");
    let (db, coll) = ns.split_once('.').unwrap();
    let docs = keys.into_iter().map(|(key, name)| doc! {"v": 2, "key": key, "name": name}).collect();
    s.exchange(c, doc! {"listIndexes": coll, "cursor": {}, "$db": db}, batch(ns, docs, 0, true));
}

#[test]
fn order_history_without_its_index_is_flagged_with_the_esr_key() {
    let f = advisor_run(|s| {
        list(s, "shop.orders", vec![(doc! {"_id": 1}, "_id_"), (doc! {"createdAt": 1}, "createdAt_1")]);
        history(s, 30);
    });
    assert_eq!(f.len(), 1, "{f:#?}");
    let key = &f[0].extra["index"]["key"];
    assert_eq!(key[2], json!(["createdAt", -1]));
    let eq: BTreeSet<&str> = [key[0][0].as_str().unwrap(), key[1][0].as_str().unwrap()].into();
    assert_eq!(eq, BTreeSet::from(["customerId", "status"]));
    assert!(f[0].fix.as_deref().unwrap().starts_with("db.orders.createIndex({"), "{:?}", f[0].fix);
    assert_eq!(f[0].evidence["existing_indexes"], json!([[["_id", 1]], [["createdAt", 1]]]));
    assert_eq!(f[0].severity, "high");
}

#[test]
fn creating_the_index_through_the_proxy_clears_it() {
    let f = advisor_run(|s| {
        history(s, 30);
        create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
    });
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn two_shapes_share_one_index_and_served_shapes_never_appear() {
    let f = advisor_run(|s| {
        create(s, "shop.orders", doc! {"total": 1}, "total_1");
        history(s, 10);
        let c = s.connect("10.0.0.7:50002", "shop-api", "PyMongo 4.20.1");
        for i in 0..10 {
            find(s, c, "shop.orders", doc! {"filter": {"customerId": i}}, vec![]);
            find(s, c, "shop.orders", doc! {"filter": {"total": {"$gt": i}}}, vec![]);
            find(s, c, "shop.orders", doc! {"filter": {"_id": i, "x": 1}}, vec![]);
        }
    });
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].shape_ids.len(), 2, "one index for both shapes");
    assert_eq!(f[0].evidence["count"], 20);
}

#[test]
fn redundant_and_unused_indexes() {
    let f = advisor_run(|s| {
        create(s, "shop.orders", doc! {"customerId": 1}, "customerId_1");
        create(s, "shop.orders", doc! {"customerId": 1, "createdAt": -1}, "customerId_1_createdAt_-1");
        create(s, "shop.orders", doc! {"legacyCode": 1}, "legacyCode_1");
        let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
        for i in 0..120 {
            find(s, c, "shop.orders", doc! {"filter": {"customerId": i}, "sort": {"createdAt": -1}}, vec![]);
        }
    });
    let kinds: Vec<(&str, &str)> =
        f.iter().map(|f| (f.kind.as_str(), f.extra["index_name"].as_str().unwrap_or(""))).collect();
    assert_eq!(kinds, [("redundant_index", "customerId_1"), ("unused_index", "legacyCode_1")], "{f:#?}");
}

#[test]
fn unknown_indexes_lower_the_severity_and_say_so() {
    let f = advisor_run(|s| history(s, 30));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, "low");
    assert!(f[0].recommendation.contains("does not know"), "{}", f[0].recommendation);
    // createIndexes seen says which indexes exist, not that there are no others.
    let f = advisor_run(|s| {
        create(s, "shop.orders", doc! {"createdAt": 1}, "createdAt_1");
        history(s, 30);
    });
    assert_eq!(f[0].severity, "low", "{f:#?}");
}

#[test]
fn hinted_indexes_are_used_and_text_indexes_cover_nothing() {
    let f = advisor_run(|s| {
        list(
            s,
            "shop.orders",
            vec![
                (doc! {"_id": 1}, "_id_"),
                (doc! {"sku": 1}, "sku_1"),
                (doc! {"sku": 1, "notes": "text"}, "sku_1_notes_text"),
                (doc! {"region": 1}, "region_1"),
            ],
        );
        let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
        for i in 0..120 {
            find(s, c, "shop.orders", doc! {"filter": {"sku": i}}, vec![]);
            find(s, c, "shop.orders", doc! {"filter": {"total": {"$gt": i}}, "hint": "region_1"}, vec![]);
        }
    });
    // total is unindexed (a missing index), but region_1 is hinted (used) and sku_1
    // is not redundant with an index that serves only $text.
    let kinds: Vec<&str> = f.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["missing_index"], "{f:#?}");
}

#[test]
fn a_collections_default_collation_applies_to_its_queries() {
    let f = advisor_run(|s| {
        let c = s.connect("10.0.0.9:50003", "admin", "mongosh 2.5.0");
        let fr = doc! {"locale": "fr", "strength": 3, "caseLevel": false, "version": "57.1"};
        let docs = vec![
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_", "collation": fr.clone()},
            doc! {"v": 2, "key": {"customerId": 1, "status": 1, "createdAt": -1}, "name": "h", "collation": fr},
        ];
        s.exchange(
            c,
            doc! {"listIndexes": "orders", "cursor": {}, "$db": "shop"},
            batch("shop.orders", docs, 0, true),
        );
        history(s, 30);
        let c = s.connect("10.0.0.7:50002", "shop-api", "PyMongo 4.20.1");
        for i in 0..10 {
            find(s, c, "shop.orders", doc! {"filter": {"_id": i}}, vec![]);
        }
    });
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn a_multikey_sort_field_asks_for_no_index_that_exists() {
    let f = advisor_run(|s| {
        create(s, "blog.posts", doc! {"author": 1, "tags": 1}, "author_1_tags_1");
        let c = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
        for i in 0..10 {
            find(
                s,
                c,
                "blog.posts",
                doc! {"filter": {"author": i}, "sort": {"tags": 1}},
                vec![doc! {"_id": i, "author": i, "tags": ["a", "b"]}],
            );
        }
    });
    assert!(f.is_empty(), "the index exists; the sort is in memory because tags holds arrays: {f:#?}");
}

#[test]
fn a_hidden_index_is_unhidden_rather_than_created_again() {
    let f = advisor_run(|s| {
        create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
        let c = s.connect("10.0.0.9:50002", "admin", "mongosh 2.5.0");
        s.exchange(
            c,
            doc! {"collMod": "orders", "index": {"name": "history", "hidden": true}, "$db": "shop"},
            doc! {"ok": 1.0},
        );
        history(s, 30);
    });
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].fix.as_deref(), Some("db.orders.unhideIndex(\"history\")"));
}

fn drop(s: &mut Script, ns: &str) {
    let c = s.connect("10.0.0.9:50004", "tests", "PyMongo|MongoEngine 4.20.1|0.29.3");
    let (db, coll) = ns.split_once('.').unwrap();
    s.exchange(c, doc! {"drop": coll, "$db": db}, doc! {"ok": 1.0});
}

fn insert(s: &mut Script, ns: &str, d: Document) {
    let c = s.connect("10.0.0.9:50004", "tests", "PyMongo|MongoEngine 4.20.1|0.29.3");
    let (db, coll) = ns.split_once('.').unwrap();
    s.exchange(c, doc! {"insert": coll, "documents": [d], "$db": db}, doc! {"n": 1, "ok": 1.0});
}

#[test]
fn a_shape_served_when_it_ran_stays_served_after_the_collection_is_dropped() {
    // A test case: the ODM creates its index, the case queries it, the suite
    // drops the collection when it ends (and the final catalog knows nothing).
    let f = advisor_run(|s| {
        for case in 0..3 {
            drop(s, "shop.orders");
            create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
            insert(s, "shop.orders", doc! {"_id": case, "customerId": 1});
            history(s, 10);
        }
        drop(s, "shop.orders");
    });
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn an_insert_after_a_drop_makes_a_collection_with_only_id_known_for_certain() {
    let f = advisor_run(|s| {
        drop(s, "shop.orders");
        insert(s, "shop.orders", doc! {"_id": 1, "customerId": 1});
        history(s, 30);
    });
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_ne!(f[0].severity, "low", "the indexes are known: only _id");
    let knowledge = f[0].evidence["index_knowledge"].as_str().unwrap();
    assert!(knowledge.starts_with("the collection's creation"), "{knowledge}");
}

#[test]
fn runs_before_an_index_was_dropped_are_served_and_runs_after_are_not() {
    let f = advisor_run(|s| {
        create(s, "shop.orders", doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history");
        list(
            s,
            "shop.orders",
            vec![
                (doc! {"_id": 1}, "_id_"),
                (doc! {"customerId": 1, "status": 1, "createdAt": -1}, "history"),
            ],
        );
        history(s, 30);
        let c = s.connect("10.0.0.9:50005", "admin", "mongosh 2.5.0");
        s.exchange(c, doc! {"dropIndexes": "orders", "index": "history", "$db": "shop"}, doc! {"ok": 1.0});
        history(s, 7);
    });
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].evidence["count"], 7, "only the runs after the drop: {f:#?}");
}

#[test]
fn an_equality_on_id_is_served_whatever_else_the_filter_holds() {
    let f = advisor_run(|s| {
        list(s, "shop.users", vec![(doc! {"_id": 1}, "_id_")]);
        let c = s.connect("10.0.0.7:50001", "shop-api", "PyMongo 4.20.1");
        for i in 0..30 {
            find(s, c, "shop.users", doc! {"filter": {"_id": i, "userId": 7}}, vec![]);
        }
    });
    assert!(f.is_empty(), "{f:#?}");
}
