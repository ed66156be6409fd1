//! How requests group into operations, on scripted conversations: each rule of
//! [`super::units`] with a case where it must hold and one where it must not.

use bson::{doc, Document};

use crate::script::Script;
use crate::workload::operations::Operation;

/// The operations of a script, as (steps "collection command", count).
fn operations(s: Script) -> Vec<(Vec<String>, u64)> {
    let p = s.run();
    let ops: Vec<Operation> = p.workload().sections(p.table(), 1.0).operations;
    ops.iter()
        .map(|o| {
            let steps = o
                .steps
                .iter()
                .map(|s| format!("{} {}", s.namespace.split_once('.').map_or("", |x| x.1), s.command))
                .collect();
            (steps, o.count)
        })
        .collect()
}

/// The linked steps of a script's operations, as (command, parent field, from step).
fn links(s: Script) -> Vec<(String, String, usize)> {
    let p = s.run();
    let ops: Vec<Operation> = p.workload().sections(p.table(), 1.0).operations;
    ops.iter()
        .flat_map(|o| &o.steps)
        .filter_map(|s| s.link.as_ref().map(|l| (s.command.clone(), l.parent_field.clone(), l.from_step)))
        .collect()
}

fn steps(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn order(id: i64, customer: i64) -> Document {
    doc! {"_id": id, "customerId": bson::oid::ObjectId::from_bytes([customer as u8; 12]), "total": 12}
}

fn customer(id: i64) -> Document {
    doc! {"_id": bson::oid::ObjectId::from_bytes([id as u8; 12]), "name": "someone"}
}

#[test]
fn a_value_from_a_reply_links_the_next_request_even_between_two_clients_operations() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "shop", "PyMongo 4.20.1");
    for i in 0..10 {
        s.find_one(c, "shop.orders", doc! {"_id": i}, Some(order(i, i + 1)));
        s.find_one(
            c,
            "shop.customers",
            doc! {"_id": customer(i + 1).get_object_id("_id").unwrap()},
            Some(customer(i + 1)),
        );
        s.wait_ms(200);
    }
    assert_eq!(operations(s), vec![(steps(&["orders find", "customers find"]), 10)]);
}

#[test]
fn a_busy_client_reading_the_same_document_back_to_back_runs_separate_operations() {
    // Every request of a web app reads its settings first; requests follow each other
    // within the gap. The settings value asked again is the same read, not a link.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "web", "PyMongo 4.20.1");
    for i in 0..30 {
        s.find_one(c, "web.settings", doc! {"_id": "site"}, Some(doc! {"_id": "site", "theme": "dark"}));
        s.find_one(
            c,
            "web.pages",
            doc! {"slug": format!("p{i}")},
            Some(doc! {"_id": i, "slug": format!("p{i}")}),
        );
        s.wait_ms(5);
    }
    assert_eq!(operations(s), vec![(steps(&["settings find", "pages find"]), 30)]);
}

#[test]
fn a_transaction_is_one_operation_however_slow_and_a_retryable_write_is_none() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "bank", "PyMongo 4.20.1");
    let lsid = doc! {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16] }};
    for n in 1..=4i64 {
        // A transaction whose statements are 200 ms apart: longer than the gap.
        for (k, account) in ["a", "b"].iter().enumerate() {
            let mut update = doc! {"update": "accounts", "updates": [{"q": {"name": *account}, "u": {"$inc": {"balance": 1}}}],
            "lsid": lsid.clone(), "txnNumber": n * 10, "autocommit": false, "$db": "bank"};
            if k == 0 {
                update.insert("startTransaction", true);
            }
            s.exchange(c, update, doc! {"n": 1, "nModified": 1, "ok": 1.0});
            s.wait_ms(200);
        }
        s.exchange(
            c,
            doc! {"commitTransaction": 1, "lsid": lsid.clone(), "txnNumber": n * 10, "autocommit": false, "$db": "admin"},
            doc! {"ok": 1.0},
        );
        s.wait_ms(500);
        // A read then a retryable write of what it read: the driver numbers the
        // write for retries, which makes no transaction.
        s.find_one(c, "bank.accounts", doc! {"name": "a"}, Some(doc! {"_id": n, "name": "a"}));
        s.exchange(
            c,
            doc! {"update": "accounts", "updates": [{"q": {"_id": n}, "u": {"$set": {"seen": true}}}],
            "lsid": lsid.clone(), "txnNumber": n * 10 + 1, "$db": "bank"},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
        s.wait_ms(500);
    }
    let ops = operations(s);
    // Both updates have one shape: one step, run twice per operation.
    assert!(ops.contains(&(steps(&["accounts update"]), 4)), "{ops:?}");
    assert!(ops.contains(&(steps(&["accounts find", "accounts update"]), 4)), "{ops:?}");
    assert_eq!(ops.len(), 2, "{ops:?}");
}

#[test]
fn concurrent_operations_of_one_client_stay_apart_by_their_values() {
    // Two pages served at once on pooled connections: each page's customer read
    // follows its own order, interleaved with the other page's.
    let mut s = Script::new();
    let a = s.connect("10.0.0.1:5000", "shop", "PyMongo 4.20.1");
    let b = s.connect("10.0.0.1:5001", "shop", "PyMongo 4.20.1");
    for i in 0..8 {
        let (x, y) = (2 * i, 2 * i + 1);
        s.find_one(a, "shop.orders", doc! {"_id": x}, Some(order(x, x + 1)));
        s.find_one(b, "shop.orders", doc! {"_id": y}, Some(order(y, y + 1)));
        s.find_one(
            b,
            "shop.customers",
            doc! {"_id": customer(y + 1).get_object_id("_id").unwrap()},
            Some(customer(y + 1)),
        );
        s.find_one(
            a,
            "shop.customers",
            doc! {"_id": customer(x + 1).get_object_id("_id").unwrap()},
            Some(customer(x + 1)),
        );
        s.wait_ms(300);
    }
    assert_eq!(operations(s), vec![(steps(&["orders find", "customers find"]), 16)]);
}

#[test]
fn a_quantity_equal_to_an_id_links_nothing() {
    // The order's quantity 3 equals the next read's small id 3: no link, and the
    // read does not join (it repeats nothing, but the page read before started
    // the unit; the count of each operation stays right either way).
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "shop", "PyMongo 4.20.1");
    for _ in 0..5 {
        s.find_one(c, "shop.carts", doc! {"user": "u1"}, Some(doc! {"_id": 1, "user": "u1", "qty": 3}));
        s.wait_ms(300);
        s.find_one(c, "shop.products", doc! {"_id": 3}, Some(doc! {"_id": 3, "name": "pen"}));
        s.wait_ms(300);
    }
    let ops = operations(s);
    assert!(ops.contains(&(steps(&["carts find"]), 5)), "{ops:?}");
    assert!(ops.contains(&(steps(&["products find"]), 5)), "{ops:?}");
}

#[test]
fn a_hot_document_written_back_to_back_is_one_operation_per_write() {
    // A viral product: its reviews pushed one request after another, each within
    // the gap of the last. The product's id links the first push to the insert;
    // every later push asks it again, more often than one document carried it.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "shop", "PyMongo 4.20.1");
    let id = bson::oid::ObjectId::from_bytes([9; 12]);
    s.exchange(
        c,
        doc! {"insert": "products", "documents": [{"_id": id, "name": "pen", "reviews": []}], "$db": "shop"},
        doc! {"n": 1, "ok": 1.0},
    );
    for i in 0..20 {
        s.update(c, "shop.products", doc! {"_id": id}, doc! {"$push": {"reviews": {"stars": i % 5}}});
        s.wait_ms(5);
    }
    let ops = operations(s);
    assert!(ops.contains(&(steps(&["products insert", "products update"]), 1)), "{ops:?}");
    assert!(ops.contains(&(steps(&["products update"]), 19)), "{ops:?}");
}

#[test]
fn a_page_whose_posts_share_authors_is_one_operation() {
    // Twelve posts by three authors, each post's author read (no cache, as a lazy
    // reference does): an author is asked as often as posts carried it.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "blog", "PyMongo 4.20.1");
    for page in 0..6i64 {
        let posts: Vec<Document> = (0..12).map(|i| order(page * 100 + i, i % 3 + 1)).collect();
        s.find(c, "blog.orders", doc! {"status": "open"}, posts);
        for i in 0..12 {
            let cust = customer(i % 3 + 1);
            s.find_one(c, "blog.customers", doc! {"_id": cust.get_object_id("_id").unwrap()}, Some(cust));
        }
        s.wait_ms(300);
    }
    assert_eq!(operations(s), vec![(steps(&["orders find", "customers find"]), 6)]);
}

#[test]
fn a_page_read_then_updated_links_the_update_to_the_post_not_to_an_author_with_the_same_id() {
    // Test data: post i written by user i. The update of post i asks _id i, which the
    // author read returned too, later: the update is of the post the page read.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "blog", "PyMongo 4.20.1");
    for page in 0..5i64 {
        for i in page * 10..page * 10 + 3 {
            s.find_one(c, "blog.posts", doc! {"slug": format!("p{i}")}, Some(doc! {"_id": i, "authorId": i}));
            s.find_one(c, "blog.users", doc! {"_id": i}, Some(doc! {"_id": i, "name": "someone"}));
            s.update(c, "blog.posts", doc! {"_id": i}, doc! {"$inc": {"views": 1}});
        }
        s.wait_ms(300);
    }
    let links = links(s);
    let update = links.iter().find(|l| l.0 == "update").expect("the update is a linked step");
    assert_eq!((update.1.as_str(), update.2), ("_id", 0), "{links:?}");
}

#[test]
fn a_concurrent_profile_read_does_not_take_the_pages_author_read() {
    // One client: a page (posts, then their authors by $in) while other requests
    // read profiles, one of which returned an author of the page just before.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "blog", "PyMongo 4.20.1");
    for page in 0..12i64 {
        let author = customer(page % 4 + 1);
        let author_id = author.get_object_id("_id").unwrap();
        let posts: Vec<Document> = (0..3).map(|i| order(page * 10 + i, page % 4 + 1)).collect();
        s.find(c, "blog.orders", doc! {"status": "open"}, posts);
        s.find_one(c, "blog.customers", doc! {"_id": author_id}, Some(author.clone()));
        s.find(c, "blog.customers", doc! {"_id": {"$in": [author_id]}}, vec![author]);
        s.wait_ms(300);
    }
    let links = links(s);
    assert!(!links.is_empty() && links.iter().all(|l| l.1 == "customerId"), "{links:?}");
}

#[test]
fn a_burst_of_concurrent_profile_reads_does_not_end_the_page_waiting_for_its_authors() {
    // One client: a page (posts, then their authors by $in) while three other
    // threads read profiles as fast as they can. Between the posts and their
    // authors come more profile reads than a client may keep units open: each is a
    // one-request operation of its own, and it is one of those that ends, not the
    // page. Without that, every page here loses its author read to the bound.
    let script = || {
        let mut s = Script::new();
        let c = s.connect("10.0.0.1:5000", "blog", "PyMongo 4.20.1");
        let mut profile = 100i64;
        let mut profiles = |s: &mut Script, n: usize| {
            for _ in 0..n {
                profile += 1;
                let user = customer(profile % 200 + 20);
                s.find_one(c, "blog.customers", doc! {"_id": user.get_object_id("_id").unwrap()}, Some(user));
            }
        };
        for page in 0..12i64 {
            profiles(&mut s, 3);
            let posts: Vec<Document> = (0..3).map(|i| order(page * 10 + i, page % 4 + 1)).collect();
            s.find(c, "blog.orders", doc! {"status": "open"}, posts);
            profiles(&mut s, 20);
            let author = customer(page % 4 + 1);
            let ids = vec![author.get_object_id("_id").unwrap()];
            s.find(c, "blog.customers", doc! {"_id": {"$in": ids}}, vec![author]);
            s.wait_ms(300);
        }
        s
    };
    let ops = operations(script());
    let pages: u64 = ops
        .iter()
        .filter(|(st, _)| st.ends_with(&steps(&["orders find", "customers find"])))
        .map(|o| o.1)
        .sum();
    assert_eq!(pages, 12, "every page keeps its authors: {ops:?}");
    let links = links(script());
    assert!(!links.is_empty() && links.iter().all(|l| l.1 == "customerId"), "{links:?}");
}

#[test]
fn a_transaction_begun_by_a_lone_read_is_not_ended_by_a_burst_of_the_same_read() {
    // A transaction's first statement reads a customer by _id, the read that other
    // threads of the client send twenty times before its next statement: those
    // lone reads end first at the bound, never the transaction.
    let mut s = Script::new();
    let c = s.connect("10.0.0.1:5000", "shop", "PyMongo 4.20.1");
    let lsid = doc! {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![9; 16] }};
    let read = |id: i64| doc! {"find": "customers", "filter": {"_id": id}, "limit": 1, "singleBatch": true, "$db": "shop"};
    let mut first = read(1);
    first.extend(
        doc! {"lsid": lsid.clone(), "txnNumber": 1i64, "startTransaction": true, "autocommit": false},
    );
    s.exchange(c, first, crate::script::batch("shop.customers", vec![doc! {"_id": 1i64}], 0, true));
    for id in 100..120 {
        s.exchange(c, read(id), crate::script::batch("shop.customers", vec![doc! {"_id": id}], 0, true));
    }
    s.exchange(
        c,
        doc! {"update": "orders", "updates": [{"q": {"status": "new"}, "u": {"$set": {"status": "paid"}}}],
        "lsid": lsid.clone(), "txnNumber": 1i64, "autocommit": false, "$db": "shop"},
        doc! {"n": 1, "nModified": 1, "ok": 1.0},
    );
    s.exchange(
        c,
        doc! {"commitTransaction": 1, "lsid": lsid, "txnNumber": 1i64, "autocommit": false, "$db": "admin"},
        doc! {"ok": 1.0},
    );
    let ops = operations(s);
    assert!(ops.contains(&(steps(&["customers find", "orders update"]), 1)), "{ops:?}");
}

#[test]
fn open_units_are_bounded_across_clients_and_the_least_recent_ends_first() {
    // More clients than units may be open at once, each in the middle of a
    // transaction (which stays open for a minute): the least recently active end
    // early (folded, counted), the newest stay open.
    use crate::workload::units::MAX_OPEN_UNITS;
    let mut s = Script::new();
    let clients = MAX_OPEN_UNITS + 100;
    for i in 0..clients {
        let c = s.connect("10.0.0.1:5000", &format!("app{i}"), "PyMongo 4.20.1");
        let lsid = doc! {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: (i as u128).to_le_bytes().to_vec() }};
        s.exchange(
            c,
            doc! {"find": "orders", "filter": {"_id": i as i64}, "lsid": lsid, "txnNumber": 1i64,
            "startTransaction": true, "autocommit": false, "$db": "shop"},
            crate::script::batch("shop.orders", vec![order(i as i64, 1)], 0, true),
        );
    }
    let mut p = crate::pipeline::Pipeline::default();
    s.events().iter().for_each(|ev| p.feed(ev.clone()));
    let w = p.workload();
    let open = w.units.open().count();
    assert_eq!(open, MAX_OPEN_UNITS);
    assert_eq!(w.evictions()["workload.units"] as usize, clients - open, "each ended early is counted");
    assert_eq!(w.units.open_units(), open, "the count kept matches the units");
    // Every operation is still counted, ended early or open.
    let ops: u64 = w.sections(p.table(), 1.0).operations.iter().map(|o| o.count).sum();
    assert_eq!(ops, clients as u64);
}
