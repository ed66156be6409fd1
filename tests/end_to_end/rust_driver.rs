//! The Rust `mongodb` driver through mongotap against a real SecantusDB. (The Rust
//! driver refuses w:0 writes; the pymongo smoke test covers them.)

use crate::support::*;
use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::options::FindOptions;
use mongodb::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_aggregate_and_get_more_chains_through_the_proxy() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "rust-e2e")).await.unwrap();
    let db = client.database("shop");
    let customers = db.collection::<Document>("customers");
    let orders = db.collection::<Document>("orders");

    customers.insert_many((0..10).map(|i| doc! {"_id": i, "name": format!("c{i}")})).await.unwrap();
    orders
        .insert_many((0..50).map(|i| doc! {"_id": i, "customerId": i % 10, "total": i * 3, "status": "open"}))
        .await
        .unwrap();

    // A getMore chain: 50 documents in batches of 7.
    let opts = FindOptions::builder().batch_size(7).build();
    let all: Vec<Document> =
        orders.find(doc! {"status": "open"}).with_options(opts).await.unwrap().try_collect().await.unwrap();
    assert_eq!(all.len(), 50);

    let r = orders.update_many(doc! {"customerId": 3}, doc! {"$set": {"status": "shipped"}}).await.unwrap();
    assert_eq!(r.modified_count, 5);
    assert_eq!(orders.delete_one(doc! {"_id": 49}).await.unwrap().deleted_count, 1);
    assert_eq!(orders.count_documents(doc! {"status": "shipped"}).await.unwrap(), 5);

    let joined: Vec<Document> = orders
        .aggregate(vec![
            doc! {"$match": {"customerId": 1}},
            doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(joined.len(), 5);
    assert_eq!(joined[0].get_array("customer").unwrap().len(), 1);

    client.shutdown().await;
    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    let stats = p.exchange_stats();
    assert_eq!(stats.parse_errors, 0, "{:?}", stats.last_parse_error);
    assert_eq!(stats.unpaired_replies, 0);
    assert!(p.operations() >= 12, "{} operations", p.operations());
}

/// MongoDB 8.0's client-level `bulkWrite`, as the Rust driver sends it: every form
/// of statement across two namespaces, each shaped in full (its filter and update,
/// not an empty `{"update":{}}`), with no literal value in any shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_write_statements_are_shaped_in_full() {
    use mongodb::options::{
        DeleteManyModel, DeleteOneModel, InsertOneModel, ReplaceOneModel, UpdateManyModel, UpdateOneModel,
    };
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "rust-bulk")).await.unwrap();
    let orders = client.database("shop").collection::<Document>("orders").namespace();
    let audit = client.database("shop").collection::<Document>("audit").namespace();
    let mut models: Vec<mongodb::options::WriteModel> = Vec::new();
    for i in 0..6 {
        models.push(
            InsertOneModel::builder()
                .namespace(orders.clone())
                .document(doc! {"_id": i, "status": "open", "note": "secret-note"})
                .build()
                .into(),
        );
    }
    for i in 0..3 {
        models.push(
            UpdateOneModel::builder()
                .namespace(orders.clone())
                .filter(doc! {"_id": i})
                .update(doc! {"$set": {format!("lines.{i}.qty"): 987_654_321}})
                .upsert(true)
                .build()
                .into(),
        );
    }
    models.push(
        UpdateManyModel::builder()
            .namespace(orders.clone())
            .filter(doc! {"status": "open"})
            .update(vec![doc! {"$set": {"seen": true}}])
            .build()
            .into(),
    );
    models.push(
        ReplaceOneModel::builder()
            .namespace(orders.clone())
            .filter(doc! {"_id": 5})
            .replacement(doc! {"status": "gone"})
            .build()
            .into(),
    );
    models.push(DeleteOneModel::builder().namespace(orders.clone()).filter(doc! {"_id": 4}).build().into());
    models.push(
        DeleteManyModel::builder()
            .namespace(audit.clone())
            .filter(doc! {"at": {"$lt": 987_654_321}})
            .build()
            .into(),
    );
    let r = client.bulk_write(models).await.unwrap();
    assert_eq!(r.inserted_count, 6);

    client.shutdown().await;
    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    let report = mongotap_analyzers::report::Report::build(&p, Default::default());
    let rows: Vec<_> = report.access_patterns.iter().filter(|r| r.command == "bulkWrite").collect();
    let shapes: Vec<String> =
        rows.iter().map(|r| format!("{} {} x{}", r.namespace, r.shape, r.statements)).collect();
    let has = |ns: &str, shape: serde_json::Value, statements: u64| {
        assert!(
            rows.iter().any(|r| r.namespace == ns && r.shape == shape && r.statements == statements),
            "no {ns} {shape} x{statements} in\n{}",
            shapes.join("\n")
        )
    };
    has(
        "shop.orders",
        serde_json::json!({"insert": {"_id": "?number", "status": "?string", "note": "?string"}}),
        6,
    );
    // Three updates of three array positions: one code path, one row.
    has(
        "shop.orders",
        serde_json::json!({"update": {"filter": {"_id": {"$eq": "?number"}}, "update": {"operators": {"$set": ["lines.?index.qty"]}}, "upsert": true}}),
        3,
    );
    has(
        "shop.orders",
        serde_json::json!({"update": {"filter": {"status": {"$eq": "?string"}}, "update": {"pipeline": [{"$set": {"seen": "?bool"}}]}, "multi": true}}),
        1,
    );
    has(
        "shop.orders",
        serde_json::json!({"update": {"filter": {"_id": {"$eq": "?number"}}, "update": {"replacement": {"status": "?string"}}}}),
        1,
    );
    has(
        "shop.orders",
        serde_json::json!({"delete": {"filter": {"_id": {"$eq": "?number"}}, "multi": false}}),
        1,
    );
    has(
        "shop.audit",
        serde_json::json!({"delete": {"filter": {"at": {"$lt": "?number"}}, "multi": true}}),
        1,
    );
    let all = serde_json::to_string(&report).unwrap();
    assert!(!all.contains("secret-note") && !all.contains("987654321"), "no literal reaches the report");
}
