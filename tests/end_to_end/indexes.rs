//! The ESR index advisor end to end: the Rust `mongodb` driver through mongotap
//! against a real SecantusDB, with mongotap's side connection reading the indexes
//! that really exist (some created behind the proxy's back, where only
//! `listIndexes` can see them).

use std::time::{Duration, Instant};

use crate::support::*;
use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::options::{FindOptions, IndexOptions};
use mongodb::{Client, Collection, IndexModel};
use mongotap::proxy::Proxy;
use mongotap::side_connection::COMMENT;
use mongotap_analyzers::detectors::indexes::catalog::{SharedCatalog, Source};
use mongotap_analyzers::report::{json, Finding, Report, RunFacts};

/// Waits until the side connection has read `ns`'s indexes and they number `n`.
async fn wait_for_indexes(catalog: &SharedCatalog, ns: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        {
            let c = catalog.lock().unwrap();
            if let Some(k) = c.get(ns) {
                if k.source == Source::SideConnection && k.indexes.len() == n {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "the side connection did not read {ns}: {:?}", c.get(ns));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn findings(proxy: &Proxy) -> Vec<Finding> {
    let p = proxy.analysis().pipeline().lock().unwrap();
    let r = Report::build(&p, RunFacts::default());
    assert_valid_report(&json::render(&r));
    r.findings.into_iter().filter(|f| f.kind.ends_with("_index")).collect()
}

/// A page of `filter` sorted by `sort`, at most `limit` documents.
async fn page(orders: &Collection<Document>, filter: Document, sort: Document, limit: i64) -> Vec<Document> {
    let opts = FindOptions::builder().sort(sort).limit(limit).build();
    orders.find(filter).with_options(opts).await.unwrap().try_collect().await.unwrap()
}

async fn order_history(orders: &Collection<Document>, times: i64) {
    for i in 0..times {
        let p =
            page(orders, doc! {"customerId": i % 20, "status": "shipped"}, doc! {"createdAt": -1}, 10).await;
        assert!(!p.is_empty());
    }
}

/// Queries the existing indexes serve fully: never a finding.
async fn served_queries(orders: &Collection<Document>) {
    for i in 0..20 {
        orders.find_one(doc! {"_id": i}).await.unwrap();
        page(orders, doc! {"createdAt": {"$gte": i * 10}}, doc! {"createdAt": 1}, 5).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_history_without_its_esr_index_is_flagged_until_the_index_is_created() {
    let upstream = Upstream::start();
    // Seeded directly, with two indexes the proxy never sees being created.
    let direct =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", upstream.addr())).await.unwrap();
    let seeded = direct.database("shop").collection::<Document>("orders");
    seeded
        .insert_many((0..400).map(|i| {
            let status = if (i / 20) % 2 == 0 { "shipped" } else { "open" };
            doc! {"_id": i, "customerId": i % 20, "status": status, "createdAt": i, "total": i * 3}
        }))
        .await
        .unwrap();
    seeded.create_index(IndexModel::builder().keys(doc! {"createdAt": 1}).build()).await.unwrap();
    seeded.create_index(IndexModel::builder().keys(doc! {"customerId": 1}).build()).await.unwrap();

    let (proxy, catalog) = proxy_with_side_connection(&upstream.addr()).await;
    catalog.lock().unwrap().enable_explain();
    let client = Client::with_uri_str(uri(proxy.local_addr(), "shop-api")).await.unwrap();
    let orders = client.database("shop").collection::<Document>("orders");
    order_history(&orders, 40).await;
    served_queries(&orders).await;
    wait_for_indexes(&catalog, "shop.orders", 3).await;
    // --explain: the unserved history shape's sampled request is explained on the side connection.
    let deadline = Instant::now() + Duration::from_secs(20);
    while findings(&proxy).first().is_none_or(|f| f.evidence["shapes"][0].get("explain").is_none()) {
        assert!(Instant::now() < deadline, "no explain in {:#?}", findings(&proxy));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let f = findings(&proxy);
    assert_eq!(f.len(), 1, "one missing index, nothing about the served queries: {f:#?}");
    let m = &f[0];
    assert_eq!((m.kind.as_str(), m.namespace.as_str()), ("missing_index", "shop.orders"));
    let key = m.extra["index"]["key"].as_array().unwrap();
    let eq: std::collections::BTreeSet<&str> = key[..2].iter().map(|k| k[0].as_str().unwrap()).collect();
    assert_eq!(eq, ["customerId", "status"].into(), "{key:?}");
    assert_eq!(key[2], serde_json::json!(["createdAt", -1]));
    assert_eq!(key.len(), 3);
    assert_eq!(m.evidence["count"], 40);
    let knowledge = m.evidence["index_knowledge"].as_str().unwrap();
    assert!(knowledge.starts_with(Source::SideConnection.as_str()), "{knowledge}");
    let existing = m.evidence["existing_indexes"].to_string();
    assert!(existing.contains("createdAt") && existing.contains("customerId"), "{existing}");
    let fix = m.fix.as_deref().unwrap();
    assert!(fix.starts_with("db.orders.createIndex({customerId: 1, status: 1, createdAt: -1})"), "{fix}");
    assert!(fix.contains("dropIndex(\"customerId_1\")"), "the new index makes customerId_1 redundant: {fix}");
    let explain = &m.evidence["shapes"][0]["explain"];
    assert_eq!(explain["nReturned"], 10, "{explain}");
    assert!(explain["totalDocsExamined"].as_u64().unwrap() > 10, "scans more than it returns: {explain}");
    assert!(explain["winning_plan"].as_str().unwrap().contains("SCAN"), "{explain}");

    // The fix, applied through the proxy: the finding is gone from the next report,
    // and the index it makes redundant is reported.
    orders
        .create_index(
            IndexModel::builder()
                .keys(doc! {"customerId": 1, "status": 1, "createdAt": -1})
                .options(IndexOptions::builder().name("history".to_owned()).build())
                .build(),
        )
        .await
        .unwrap();
    order_history(&orders, 10).await;
    wait_for_indexes(&catalog, "shop.orders", 4).await;
    let f = findings(&proxy);
    let kinds: Vec<(&str, &str)> =
        f.iter().map(|f| (f.kind.as_str(), f.extra["index_name"].as_str().unwrap_or(""))).collect();
    assert_eq!(kinds, [("redundant_index", "customerId_1")], "{f:#?}");
    assert!(f[0].fix.as_deref().unwrap().contains("db.orders.dropIndex(\"customerId_1\")"));

    client.shutdown().await;
    let analysis = proxy.shutdown().await;
    assert_eq!(analysis.pipeline().lock().unwrap().exchange_stats().parse_errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_side_connection_the_traffic_tells_the_indexes() {
    let upstream = Upstream::start();
    // No side connection: what the application's own createIndexes and listIndexes show.
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "shop-api")).await.unwrap();
    let orders = client.database("shop").collection::<Document>("orders");
    orders
        .insert_many(
            (0..100).map(|i| doc! {"_id": i, "customerId": i % 20, "status": "shipped", "createdAt": i}),
        )
        .await
        .unwrap();
    orders.create_index(IndexModel::builder().keys(doc! {"createdAt": 1}).build()).await.unwrap();
    let listed: Vec<IndexModel> = orders.list_indexes().await.unwrap().try_collect().await.unwrap();
    assert_eq!(listed.len(), 2);
    order_history(&orders, 20).await;
    served_queries(&orders).await;
    let f = findings(&proxy);
    assert_eq!(f.len(), 1, "{f:#?}");
    let knowledge = f[0].evidence["index_knowledge"].as_str().unwrap();
    assert!(knowledge.starts_with(Source::TrafficListIndexes.as_str()), "{knowledge}");
    assert_eq!(f[0].severity, "high", "known indexes, a frequent shape");
    client.shutdown().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_side_connection_is_quiet_and_says_who_it_is() {
    // A test suite's traffic: each case drops its collection, creates its index and
    // queries it; the database profiler (which such suites count queries with) sees
    // everything, mongotap's reads included.
    let upstream = Upstream::start();
    let direct =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", upstream.addr())).await.unwrap();
    direct.database("suite").run_command(doc! {"profile": 2}).await.unwrap();
    // A collection made behind the proxy's back: only listIndexes can tell its indexes.
    direct.database("suite").collection::<Document>("other").insert_one(doc! {"kind": -1}).await.unwrap();
    let (proxy, catalog) = proxy_with_side_connection(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "suite")).await.unwrap();
    let db = client.database("suite");
    for case in 0..5 {
        let items = db.collection::<Document>("items");
        items.drop().await.unwrap();
        items.create_index(IndexModel::builder().keys(doc! {"sku": 1}).build()).await.unwrap();
        items.insert_many((0..10).map(|i| doc! {"_id": i, "sku": format!("s{case}-{i}")})).await.unwrap();
        for i in 0..10 {
            items.find_one(doc! {"sku": format!("s{case}-{i}")}).await.unwrap();
        }
        // A collection the traffic says nothing about: read once.
        db.collection::<Document>("other").find_one(doc! {"kind": case}).await.unwrap();
    }
    wait_for_indexes(&catalog, "suite.other", 1).await;
    // Longer than the debounce after the last change: any read it asked for is done.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let profile = direct.database("suite").collection::<Document>("system.profile");
    let reads: Vec<Document> = profile
        .find(doc! {"command.listIndexes": {"$exists": true}})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let on = |c: &str| {
        reads
            .iter()
            .filter(|r| r.get_document("command").unwrap().get_str("listIndexes").ok() == Some(c))
            .count()
    };
    assert_eq!(on("other"), 1, "read once: {reads:#?}");
    assert_eq!(
        on("items"),
        0,
        "the wire said everything about items (dropped, created, indexed): {reads:#?}"
    );
    for r in &reads {
        assert_eq!(r.get_document("command").unwrap().get_str("comment").ok(), Some(COMMENT), "{r:?}");
    }
    // Each case's finds ran while its sku index existed: served, drops or not.
    let f = findings(&proxy);
    assert!(f.iter().all(|f| f.namespace == "suite.other"), "{f:#?}");
    client.shutdown().await;
    direct.shutdown().await;
    proxy.shutdown().await;
}
