//! The detectors end to end: the Rust `mongodb` driver, unmodified, through mongotap
//! against a real SecantusDB, each smell beside its fix. (pymongo, mongoengine, the
//! Node driver, Mongoose and mongosh run the labelled scenarios of
//! `tests/scenarios/`, from `scripts/test.sh`.)

use crate::support::*;
use bson::{doc, oid::ObjectId, Document};
use futures_util::future::join_all;
use futures_util::TryStreamExt;
use mongodb::options::FindOptions;
use mongodb::{Client, Database};
use mongotap_analyzers::report::Finding;

/// Runs `workload` through a fresh proxy and returns the findings.
async fn findings_of<F, Fut>(upstream: &Upstream, app: &str, workload: F) -> Vec<Finding>
where
    F: FnOnce(Database) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), app)).await.unwrap();
    workload(client.database(app)).await;
    client.shutdown().await;
    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    assert_eq!(p.exchange_stats().parse_errors, 0);
    p.findings()
}

/// 30 users and 60 posts; any 20 consecutive posts have 10 distinct authors.
async fn seed_blog(db: &Database) -> Vec<ObjectId> {
    db.drop().await.unwrap();
    let users: Vec<ObjectId> = (0..30).map(|_| ObjectId::new()).collect();
    db.collection::<Document>("users")
        .insert_many(users.iter().enumerate().map(|(i, id)| doc! {"_id": id, "name": format!("User {i}")}))
        .await
        .unwrap();
    db.collection::<Document>("posts")
        .insert_many((0..60).map(|i| doc! {"authorId": users[(i * 7) % 10], "title": format!("Post {i}")}))
        .await
        .unwrap();
    users
}

async fn recent_posts(db: &Database, page: i64) -> Vec<Document> {
    let opts = FindOptions::builder().sort(doc! {"_id": -1}).skip(page as u64 * 4).limit(20).build();
    db.collection::<Document>("posts")
        .find(doc! {})
        .with_options(opts)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn kinds<'a>(f: &'a [Finding], kind: &str) -> Vec<&'a Finding> {
    f.iter().filter(|x| x.kind == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blog_page_that_fetches_each_author_is_an_n_plus_one_and_its_in_fix_is_not() {
    let upstream = Upstream::start();

    // One author query per post, sequentially.
    let bad = findings_of(&upstream, "blog_n_plus_one", |db| async move {
        seed_blog(&db).await;
        let users = db.collection::<Document>("users");
        for page in 0..8 {
            for post in recent_posts(&db, page).await {
                let author = post.get_object_id("authorId").unwrap();
                let u = users.find_one(doc! {"_id": author}).projection(doc! {"name": 1}).await.unwrap();
                assert!(u.is_some());
            }
        }
    })
    .await;
    let n = kinds(&bad, "n_plus_one");
    assert_eq!(n.len(), 1, "{bad:#?}");
    assert_eq!(n[0].namespace, "blog_n_plus_one.posts");
    assert_eq!(n[0].extra["child_namespace"], "blog_n_plus_one.users");
    assert_eq!(n[0].extra["link"], serde_json::json!({"parent_field": "authorId", "child_field": "_id"}));
    assert_eq!(n[0].evidence["typical_n"], 20);
    assert_eq!(n[0].evidence["occurrences"], 8);
    assert_eq!(n[0].evidence["drivers"], serde_json::json!(["mongo-rust-driver"]));
    assert!(n[0].fix.as_deref().unwrap().contains("\"$in\": ids"), "a Rust fix: {:?}", n[0].fix);

    // The same page with one $in per page.
    let good = findings_of(&upstream, "blog_in_batch", |db| async move {
        seed_blog(&db).await;
        let users = db.collection::<Document>("users");
        for page in 0..8 {
            let ids: Vec<ObjectId> =
                recent_posts(&db, page).await.iter().map(|p| p.get_object_id("authorId").unwrap()).collect();
            let found: Vec<Document> =
                users.find(doc! {"_id": {"$in": ids}}).await.unwrap().try_collect().await.unwrap();
            assert_eq!(found.len(), 10);
        }
    })
    .await;
    assert!(good.is_empty(), "{good:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_sent_at_once_over_the_pool_are_still_linked() {
    let upstream = Upstream::start();
    let found = findings_of(&upstream, "blog_pool", |db| async move {
        seed_blog(&db).await;
        let users = db.collection::<Document>("users");
        for page in 0..6 {
            let posts = recent_posts(&db, page).await;
            // All 20 author queries at once: the driver spreads them over its pool.
            let queries = posts.iter().map(|p| {
                let users = users.clone();
                let author = p.get_object_id("authorId").unwrap();
                async move { users.find_one(doc! {"_id": author}).await.unwrap() }
            });
            assert!(join_all(queries).await.iter().all(Option::is_some));
        }
    })
    .await;
    let n = kinds(&found, "n_plus_one");
    assert_eq!(n.len(), 1, "{found:#?}");
    assert_eq!(n[0].extra["link"]["parent_field"], "authorId");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frequent_three_lookup_page_is_a_chain_and_a_lookup_run_twice_is_not() {
    let upstream = Upstream::start();
    let seed = |db: Database| async move {
        db.drop().await.unwrap();
        let coll = |n: &str| db.collection::<Document>(n);
        coll("customers")
            .insert_many((0..10).map(|i| doc! {"_id": i, "name": format!("c{i}")}))
            .await
            .unwrap();
        coll("products")
            .insert_many((0..10).map(|i| doc! {"_id": i, "title": format!("p{i}")}))
            .await
            .unwrap();
        coll("shippers").insert_many((0..3).map(|i| doc! {"_id": i, "name": format!("s{i}")})).await.unwrap();
        coll("orders")
            .insert_many(
                (0..40)
                    .map(|i| doc! {"_id": i, "customerId": i % 10, "productId": i % 10, "shipperId": i % 3}),
            )
            .await
            .unwrap();
        db
    };
    let chain = findings_of(&upstream, "lookup_page", |db| async move {
        let db = seed(db).await;
        let orders = db.collection::<Document>("orders");
        for i in 0..30 {
            let page: Vec<Document> = orders
                .aggregate(vec![
                    doc! {"$match": {"_id": i}},
                    doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
                    doc! {"$lookup": {"from": "products", "localField": "productId", "foreignField": "_id", "as": "product"}},
                    doc! {"$lookup": {"from": "shippers", "localField": "shipperId", "foreignField": "_id", "as": "shipper"}},
                    doc! {"$project": {"customer.name": 1, "product.title": 1, "shipper.name": 1}},
                ])
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(page.len(), 1);
        }
    })
    .await;
    let l = kinds(&chain, "lookup_chain");
    assert_eq!(l.len(), 1, "{chain:#?}");
    assert_eq!(
        l[0].extra["lookups"],
        serde_json::json!(["lookup_page.customers", "lookup_page.products", "lookup_page.shippers"])
    );
    assert_eq!(l[0].severity, "high");
    assert!(l[0].fix.as_deref().unwrap().contains("$merge"));

    let twice = findings_of(&upstream, "lookup_report", |db| async move {
        let db = seed(db).await;
        let orders = db.collection::<Document>("orders");
        for i in 0..40 {
            orders.find_one(doc! {"_id": i}).await.unwrap();
        }
        for _ in 0..2 {
            let _: Vec<Document> = orders
                .aggregate(vec![
                    doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "c"}},
                    doc! {"$group": {"_id": "$c.name", "n": {"$sum": 1}}},
                ])
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
        }
    })
    .await;
    assert!(kinds(&twice, "lookup_chain").is_empty(), "{twice:#?}");
}
