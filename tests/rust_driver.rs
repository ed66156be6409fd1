//! The Rust `mongodb` driver through mongotap against a real SecantusDB. (The Rust
//! driver refuses w:0 writes; the pymongo smoke test covers them.)

mod support;

use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::options::FindOptions;
use mongodb::Client;
use support::*;

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
