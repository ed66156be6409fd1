use bson::doc;

use crate::script::Script;

fn order(id: i32, lines: usize, status: &str) -> bson::Document {
    let lines: Vec<bson::Document> =
        (0..lines).map(|i| doc! {"sku": format!("P-{i}"), "qty": 1, "price": 9.5}).collect();
    doc! {"_id": id, "customer": {"id": 7, "name": "A. Kumar"}, "status": status, "lines": lines, "total": 10.0}
}

fn rewrites(s: Script) -> Vec<crate::finding::Finding> {
    s.run().findings().into_iter().filter(|f| f.kind == "full_document_rewrite").collect()
}

#[test]
fn replacing_an_order_to_add_a_line_is_a_whole_rewrite_with_what_changed() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
    for round in 0..8 {
        for id in 0..5 {
            s.find_one(c, "shop.orders", doc! {"_id": id}, Some(order(id, 10 + round, "open")));
            s.exchange(
                c,
                doc! {"update": "orders", "updates": [{"q": {"_id": id}, "u": order(id, 11 + round, "open")}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
        }
    }
    let f = rewrites(s);
    assert_eq!(f.len(), 1, "{f:#?}");
    let e = &f[0].evidence;
    assert_eq!((e["count"].as_u64(), e["documents"].as_u64()), (Some(40), Some(5)));
    assert_eq!(e["changed_fields"][0]["field"], "lines");
    assert_eq!(e["changed_share_median"], 0.25, "1 of 4 fields");
    assert_eq!(
        e["elements_appended"], 39,
        "one line each time, but for the very first rewrite (no copy yet)"
    );
    assert!(
        f[0].fix
            .as_deref()
            .unwrap()
            .contains("update_one({\"_id\": doc_id}, {\"$push\": {\"lines\": new_lines_item}})"),
        "{:?}",
        f[0].fix
    );
}

#[test]
fn a_list_set_whole_on_every_save_is_a_sub_tree_rewrite_of_that_field() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "shop", "PyMongo|c|MongoEngine 4.20.1||0.29.3");
    for round in 0..8 {
        for id in 0..5 {
            let lines = order(id, 10 + round, "open").get_array("lines").unwrap().clone();
            s.exchange(
                c,
                doc! {"update": "order", "updates": [{"q": {"_id": id}, "u": {"$set": {"lines": lines}}, "upsert": true}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
        }
    }
    let f = rewrites(s);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].extra["field"], "lines");
    assert_eq!(f[0].evidence["elements_appended"], 35, "7 appends on each of 5 orders");
    assert!(
        f[0].fix.as_deref().unwrap().contains("update_one(push__lines=new_lines_item)"),
        "{:?}",
        f[0].fix
    );
}

#[test]
fn field_updates_single_inserts_and_full_changes_are_not_rewrites() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
    for round in 0..8 {
        for id in 0..5 {
            s.exchange(
                c,
                doc! {"update": "orders", "updates": [{"q": {"_id": id}, "u": {"$push": {"lines": {"sku": "x"}}, "$inc": {"total": 1}}}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
            s.exchange(
                c,
                doc! {"update": "orders", "updates": [{"q": {"_id": id}, "u": {"$set": {"status": format!("s{round}")}}, "upsert": true}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
            // A cache entry replaced whole, every field new each time: a replacement is fair.
            s.exchange(
                c,
                doc! {"update": "cache", "updates": [{"q": {"_id": id}, "u": {"a": round, "b": round * 2, "c": format!("{round}")}}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
        }
    }
    for id in 100..140 {
        s.exchange(
            c,
            doc! {"update": "imports", "updates": [{"q": {"_id": id}, "u": {"a": 1}, "upsert": true}], "$db": "shop"},
            doc! {"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": id}], "ok": 1.0},
        );
    }
    assert!(rewrites(s).is_empty());
}

/// mongoengine's `save()` of a new document with a preset `_id`: a findAndModify
/// replacement that matches nothing, then an insert.
fn save_new(s: &mut Script, c: u64, d: bson::Document) {
    s.exchange(
        c,
        doc! {"findAndModify": "doc", "query": {"_id": d.get("_id").unwrap().clone()}, "update": d.clone(), "upsert": false, "$db": "t"},
        doc! {"lastErrorObject": {"n": 0, "updatedExisting": false}, "value": null, "ok": 1.0},
    );
    s.exchange(c, doc! {"insert": "doc", "documents": [d], "$db": "t"}, doc! {"n": 1, "ok": 1.0});
}

#[test]
fn saves_that_matched_nothing_and_recreated_collections_are_not_rewrites() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "tests", "PyMongo|MongoEngine 4.20.1|0.29.3");
    // Twenty test cases, each dropping the collection and saving the same ids anew.
    for case in 0..20 {
        s.exchange(c, doc! {"drop": "doc", "$db": "t"}, doc! {"ok": 1.0});
        for id in 0..3 {
            save_new(&mut s, c, doc! {"_id": id, "value": case, "x": 1, "e": "a"});
        }
    }
    assert!(rewrites(s).is_empty());
}

#[test]
fn a_replacement_of_a_document_there_is_still_a_rewrite_after_a_save_of_a_new_one() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
    for id in 0..5 {
        save_new(&mut s, c, order(id, 20, "open"));
        for status in ["paid", "packed", "shipped", "done"] {
            s.exchange(
                c,
                doc! {"findAndModify": "doc", "query": {"_id": id}, "update": order(id, 20, status), "$db": "t"},
                doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": order(id, 20, "x"), "ok": 1.0},
            );
        }
    }
    let f = rewrites(s);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].evidence["count"], 20);
}

#[test]
fn saving_a_document_of_its_id_alone_again_and_again_is_no_rewrite() {
    // mongoengine's own tests save `Doc(id=1)` over and over, run after run: a
    // replacement with nothing but the `_id`, which no operator could write instead.
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "tests", "PyMongo|MongoEngine 4.20.1|0.29.3");
    save_new(&mut s, c, doc! {"_id": 1});
    for _ in 0..12 {
        s.exchange(
            c,
            doc! {"update": "doc", "updates": [{"q": {"_id": 1}, "u": {"_id": 1}, "upsert": true}], "$db": "t"},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
    }
    assert!(rewrites(s).is_empty());
}

#[test]
fn a_document_emptied_to_its_id_is_remembered_empty() {
    // Emptied to its `_id`, then saved whole again, over and over: each whole save
    // writes every field anew (a fair replacement), not "nothing changed" against the
    // copy from before it was emptied.
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "shop", "PyMongo 4.20.1");
    let mut replace = |id: i32, u: bson::Document| {
        s.exchange(
            c,
            doc! {"update": "doc", "updates": [{"q": {"_id": id}, "u": u}], "$db": "t"},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
    };
    for id in 0..6 {
        for _ in 0..3 {
            replace(id, doc! {"_id": id});
            replace(id, doc! {"_id": id, "a": 1, "b": "two", "c": [3, 3, 3]});
        }
    }
    let f = rewrites(s);
    assert!(f.is_empty(), "{f:#?}");
}
