//! The current shard key end to end: the cluster's `config.collections` (written
//! into a real SecantusDB, as `mongos` keeps it) read on mongotap's side connection,
//! and the key judged against the traffic the Rust driver sends through the proxy.

use std::time::{Duration, Instant};

use crate::support::*;
use bson::{doc, DateTime, Document};
use mongodb::Client;
use mongotap_analyzers::report::{json, Report, RunFacts};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rising_with_time_is_a_bad_shard_key_and_the_customer_key_beside_it_is_not() {
    let upstream = Upstream::start();
    let direct =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", upstream.addr())).await.unwrap();
    // What mongos keeps for two sharded collections, a dropped one (before 5.0) and
    // an unsharded one placed on a shard (8.0's moveCollection).
    let config = direct.database("config").collection::<Document>("collections");
    config
        .insert_many([
            doc! {"_id": "shop.events", "key": {"at": 1}, "unique": false},
            doc! {"_id": "shop.orders", "key": {"customerId": 1}, "unique": false},
            doc! {"_id": "shop.carts", "key": {"userId": 1}, "dropped": true},
            doc! {"_id": "shop.notes", "key": {"_id": 1}, "unsplittable": true},
            doc! {"_id": "shop.log", "key": {"at": 1}},
        ])
        .await
        .unwrap();

    let (proxy, catalog) = proxy_with_side_connection(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "shop")).await.unwrap();
    let db = client.database("shop");
    let (events, orders, carts) = (
        db.collection::<Document>("events"),
        db.collection::<Document>("orders"),
        db.collection::<Document>("carts"),
    );
    for i in 0..200i64 {
        let at = DateTime::from_millis(1_700_000_000_000 + i * 1000);
        events.insert_one(doc! {"deviceId": format!("d{}", (i * 7) % 50), "at": at, "v": i}).await.unwrap();
        orders.insert_one(doc! {"customerId": (i * 37) % 150, "total": i}).await.unwrap();
        carts.insert_one(doc! {"userId": i, "items": 1}).await.unwrap();
        // A log only written to, sharded on its timestamp: the classic hot shard.
        db.collection::<Document>("log").insert_one(doc! {"at": at, "line": i}).await.unwrap();
    }
    for i in 0..100i64 {
        events.find_one(doc! {"deviceId": format!("d{}", i % 50)}).await.unwrap();
        orders.find_one(doc! {"customerId": i}).await.unwrap();
        carts.find_one(doc! {"userId": i}).await.unwrap();
    }
    db.collection::<Document>("notes").find_one(doc! {"_id": 1}).await.unwrap();
    // The side connection reads the collections the queries named, a few a second.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        {
            let c = catalog.lock().unwrap();
            // Read once: no longer due at time 0 with a refresh of 1 µs.
            let unread = c.shard_keys_due(0, 1);
            let read = |ns: &str| !unread.iter().any(|u| u == ns);
            if c.shard_key("shop.events").is_some()
                && c.shard_key("shop.orders").is_some()
                && c.shard_key("shop.log").is_some()
                && read("shop.carts")
                && read("shop.notes")
            {
                assert_eq!(c.shard_key("shop.carts"), None, "dropped: not sharded");
                assert_eq!(c.shard_key("shop.notes"), None, "unsplittable: not sharded");
                break;
            }
        }
        assert!(Instant::now() < deadline, "the side connection did not read config.collections");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let r = {
        let p = proxy.analysis().pipeline().lock().unwrap();
        Report::build(&p, RunFacts::default())
    };
    assert_valid_report(&json::render(&r));
    let mut bad: Vec<_> = r.findings.iter().filter(|f| f.kind == "bad_shard_key").collect();
    assert_eq!(bad.len(), 2, "{bad:#?}");
    bad.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    let log = bad.remove(1);
    assert_eq!((log.namespace.as_str(), log.severity.as_str()), ("shop.log", "high"));
    assert!(log.recommendation.contains("monotonic"), "{}", log.recommendation);
    assert_eq!((bad[0].namespace.as_str(), bad[0].severity.as_str()), ("shop.events", "high"));
    assert_eq!(bad[0].evidence["current_key"], "{at: 1}");
    assert_eq!(bad[0].evidence["current"]["monotonic"], true);
    assert_eq!(
        bad[0].fix.as_deref(),
        Some("db.adminCommand({reshardCollection: \"shop.events\", key: {deviceId: 1}})")
    );

    let section = |ns: &str| r.shard_keys.iter().find(|c| c.namespace == ns).unwrap();
    let orders = section("shop.orders");
    assert_eq!(orders.current_key, Some(vec![("customerId".to_owned(), json!(1))]));
    assert!(orders.candidates[0].current, "{:#?}", orders.candidates);
    assert!(orders.recommendation.contains("which suits its traffic"), "{}", orders.recommendation);
    let carts = section("shop.carts");
    assert!(carts.current_key.is_none() && carts.candidates.iter().all(|c| !c.current));
    client.shutdown().await;
    direct.shutdown().await;
    proxy.shutdown().await;
}
