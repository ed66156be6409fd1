//! The workload in the seeds' own terms, end to end: the Rust `mongodb` driver,
//! unmodified, runs the guide's four operations (planted frequencies, a user's
//! think time apart) through mongotap against a real SecantusDB; the report lists
//! them with their counts, answers embed-or-reference per relationship, and the
//! extended reference's fix, pasted into mongosh, does what it says. (pymongo,
//! the Node driver, mongoengine, Mongoose and mongosh run the same kind of
//! workloads in `tests/scenarios/`.)

use std::time::Duration;

use crate::support::*;
use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::options::FindOptions;
use mongodb::Client;
use mongotap_analyzers::report::{Report, RunFacts};

const THINK: Duration = Duration::from_millis(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_four_operations_are_listed_with_their_frequency_and_verdicts() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "shop-api")).await.unwrap();
    let db = client.database("seedshop");
    db.drop().await.unwrap();
    let (orders, customers, products) = (
        db.collection::<Document>("orders"),
        db.collection::<Document>("customers"),
        db.collection::<Document>("products"),
    );
    customers
        .insert_many(
            (0..12).map(
                |c| doc! {"_id": 1000 + c, "name": format!("Customer {c}"), "address": {"city": "Lyon"}},
            ),
        )
        .await
        .unwrap();
    products
        .insert_many(
            (0..30)
                .map(|p| doc! {"_id": format!("P-{p:03}"), "name": format!("Product {p}"), "price": 5 + p}),
        )
        .await
        .unwrap();
    orders
        .insert_many((0..60).map(|o| {
            let lines: Vec<Document> = (0..3)
                .map(|k| doc! {"productId": format!("P-{:03}", (o * 7 + k) % 30), "qty": 1 + k % 3})
                .collect();
            doc! {"_id": 5000 + o, "customerId": 1000 + o % 12, "createdAt": o, "lines": lines}
        }))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 30 order pages, 12 added lines, 6 histories, 3 address updates, interleaved.
    let plan =
        ["show", "show", "add", "show", "show", "add", "history", "show", "show", "add", "show", "address"];
    let mut done = std::collections::BTreeMap::new();
    for (i, op) in plan.iter().cycle().take(51).enumerate() {
        let i = i as i32;
        let order_id = 5000 + (i * 17) % 60;
        match *op {
            "show" => {
                let order = orders.find_one(doc! {"_id": order_id}).await.unwrap().unwrap();
                let c = order.get_i32("customerId").unwrap();
                customers.find_one(doc! {"_id": c}).projection(doc! {"name": 1}).await.unwrap().unwrap();
                let ids: Vec<String> = order
                    .get_array("lines")
                    .unwrap()
                    .iter()
                    .map(|l| l.as_document().unwrap().get_str("productId").unwrap().to_owned())
                    .collect();
                let found: Vec<Document> = products
                    .find(doc! {"_id": {"$in": ids}})
                    .projection(doc! {"name": 1, "price": 1})
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                assert!(!found.is_empty());
            }
            "add" => {
                orders
                    .update_one(
                        doc! {"_id": order_id},
                        doc! {"$push": {"lines": {"productId": "P-001", "qty": 1}}},
                    )
                    .await
                    .unwrap();
            }
            "history" => {
                let opts = FindOptions::builder().sort(doc! {"createdAt": -1}).limit(10).build();
                let _: Vec<Document> = orders
                    .find(doc! {"customerId": 1000 + i % 12})
                    .with_options(opts)
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
            }
            _ => {
                customers
                    .update_one(doc! {"_id": 1000 + i % 12}, doc! {"$set": {"address": {"city": "Nice"}}})
                    .await
                    .unwrap();
            }
        }
        *done.entry(*op).or_insert(0u64) += 1;
        tokio::time::sleep(THINK).await;
    }
    client.shutdown().await;
    let analysis = proxy.shutdown().await;
    let report = {
        let p = analysis.pipeline().lock().unwrap();
        Report::build(&p, RunFacts::default())
    };
    assert_valid_report(&mongotap_analyzers::report::json::render(&report));
    let count = |steps: &[&str]| {
        report
            .operations
            .iter()
            .find(|o| {
                o.steps
                    .iter()
                    .map(|s| format!("{} {}", s.namespace.split_once('.').unwrap().1, s.command))
                    .collect::<Vec<_>>()
                    == steps
            })
            .map(|o| o.count)
    };
    assert_eq!(
        count(&["orders find", "customers find", "products find"]),
        Some(done["show"]),
        "{:#?}",
        report.operations
    );
    assert_eq!(count(&["orders update"]), Some(done["add"]));
    assert_eq!(count(&["orders find"]), Some(done["history"]));
    assert_eq!(count(&["customers update"]), Some(done["address"]));
    let page = &report.operations[0];
    assert_eq!(
        page.name,
        "orders by _id, then customers by _id via customerId, then products by _id via lines.productId"
    );
    assert_eq!(
        (page.frequency.as_str(), page.round_trips.mean, page.one_round_trip),
        ("very high", 3.0, false)
    );
    let verdict = |child: &str| {
        report
            .relationships
            .iter()
            .find(|r| r.parent == "seedshop.orders" && r.child == child)
            .map(|r| r.verdict.clone())
    };
    assert_eq!(
        verdict("seedshop.customers").as_deref(),
        Some("extended_reference"),
        "{:#?}",
        report.relationships
    );
    assert_eq!(verdict("seedshop.products").as_deref(), Some("extended_reference"));

    // The fix, pasted into mongosh against the server, copies the customer's name.
    let fix = report
        .findings
        .iter()
        .find(|f| {
            f.kind == "extended_reference_candidate" && f.extra["child_namespace"] == "seedshop.customers"
        })
        .and_then(|f| f.fix.clone())
        .expect("the customers' extended reference");
    let Some(out) = mongosh(&upstream.addr(), "seedshop", &fix) else { return };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let direct =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", upstream.addr())).await.unwrap();
    let order = direct
        .database("seedshop")
        .collection::<Document>("orders")
        .find_one(doc! {"_id": 5001})
        .await
        .unwrap()
        .unwrap();
    let copied = order.get_document("customer").unwrap();
    assert_eq!(
        (copied.get_i32("id").unwrap(), copied.get_str("name").unwrap()),
        (1001, "Customer 1"),
        "{order:?}"
    );
    direct.shutdown().await;
}
