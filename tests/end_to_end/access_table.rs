//! The access-pattern table on a scripted workload, through the proxy, against the
//! real upstream: every read and write row has its exact count, getMores are
//! attributed to the find that opened their cursor, and latency percentiles lie
//! within what the client measured.

use std::time::{Duration, Instant};

use crate::support::*;
use bson::{doc, Document};
use mongodb::options::FindOptions;
use mongodb::Client;
use mongotap_analyzers::report::{Report, RunFacts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_counts_for_a_scripted_workload() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "table-e2e")).await.unwrap();
    let items = client.database("inv").collection::<Document>("items");

    // 5 items per sku, inserted in one insert_many (one insert command).
    items
        .insert_many((0..25).map(|i| doc! {"sku": format!("s{}", i % 5), "qty": i, "tags": ["a"]}))
        .await
        .unwrap();

    // 37 finds of one shape; batches of 2 over 5 matches: firstBatch 2, then 2 getMores (2, 1).
    let mut client_ms: Vec<f64> = Vec::new();
    for i in 0..37 {
        let t = Instant::now();
        let mut cur = items
            .find(doc! {"sku": format!("s{}", i % 5)})
            .with_options(FindOptions::builder().batch_size(2).build())
            .await
            .unwrap();
        client_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let mut n = 0;
        while cur.advance().await.unwrap() {
            n += 1;
        }
        assert_eq!(n, 5);
    }
    // 12 updates of another shape.
    for i in 0..12 {
        items.update_one(doc! {"sku": "s1", "qty": i}, doc! {"$inc": {"qty": 100}}).await.unwrap();
    }
    // 3 finds with an operator: a different shape from {sku: ?string}.
    for i in 0..3 {
        items.find_one(doc! {"qty": {"$gt": i}}).await.unwrap();
    }
    // 2 counts and 4 deletes.
    for _ in 0..2 {
        items.count_documents(doc! {"tags": "a"}).await.unwrap();
    }
    for i in 0..4 {
        items.delete_many(doc! {"qty": {"$lt": i}}).await.unwrap();
    }
    client.shutdown().await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    let report = Report::build(&p, RunFacts::default());
    assert_valid_report(&mongotap_analyzers::report::json::render(&report));
    let data: Vec<_> = report.access_patterns.iter().filter(|r| r.category != "command").collect();
    let rows: Vec<(String, String, u64)> =
        data.iter().map(|r| (r.command.clone(), r.shape.to_string(), r.count)).collect();
    let find_shape = r#"{"filter":{"sku":{"$eq":"?string"}}}"#;
    let expected = [
        ("getMore", format!(r#"{{"cursorOf":"find","shape":{find_shape}}}"#), 74),
        ("find", find_shape.to_string(), 37),
        (
            "update",
            r#"{"filter":{"$and":[{"qty":{"$eq":"?number"}},{"sku":{"$eq":"?string"}}]},"update":{"operators":{"$inc":["qty"]}}}"#.to_string(),
            12,
        ),
        ("delete", r#"{"filter":{"qty":{"$lt":"?number"}},"multi":true}"#.to_string(), 4),
        ("find", r#"{"filter":{"qty":{"$gt":"?number"}},"limit":true,"singleBatch":true}"#.to_string(), 3),
        ("aggregate", r#"{"pipeline":[{"$match":{"tags":{"$eq":"?string"}}},{"$group":{"_id":"?number","n":{"$sum":"?number"}}}]}"#.to_string(), 2),
        ("insert", r#"{"document":{"_id":"?objectId","sku":"?string","qty":"?number","tags":"?array<?string>"}}"#.to_string(), 1),
    ];
    let expected: Vec<(String, String, u64)> =
        expected.into_iter().map(|(c, s, n)| (c.to_string(), s, n)).collect();
    assert_eq!(rows, expected);

    let find = data.iter().find(|r| r.command == "find" && r.count == 37).unwrap();
    let get_more = data.iter().find(|r| r.command == "getMore").unwrap();
    assert_eq!(get_more.cursor_of.as_deref(), Some(find.shape_id.as_str()));
    assert_eq!(find.docs_returned.total, 74);
    assert_eq!(get_more.docs_returned.total, 111);
    assert_eq!(find.apps, ["table-e2e"]);
    let insert = data.iter().find(|r| r.command == "insert").unwrap();
    assert_eq!(insert.statements, 25);

    // The proxy sees a sub-interval of each round trip the client timed.
    let lat = find.latency_ms.as_ref().unwrap();
    let client_max = client_ms.iter().cloned().fold(0.0, f64::max);
    assert!(lat.p50 > 0.0 && lat.p50 <= lat.p95 && lat.p95 <= lat.p99 && lat.p99 <= lat.max);
    assert!(lat.max <= client_max * 1.01 + 0.01, "proxy max {} > client max {client_max}", lat.max);

    // The driver's handshake and monitoring are there, but not in the data rows.
    assert!(report.access_patterns.iter().any(|r| r.command == "hello" || r.command == "isMaster"));
    assert_eq!(report.totals.parse_errors, 0);
    assert_eq!(report.traffic.unpaired_replies, 0);
}
