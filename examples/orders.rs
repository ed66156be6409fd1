//! The order/customer access patterns of the schema-design seed (seed 000):
//!
//! | Operation               | Frequency |
//! |-------------------------|-----------|
//! | Show order with lines   | very high |
//! | Add order line          | high      |
//! | Customer order history  | medium    |
//! | Update customer address | low       |
//!
//! The schema here is deliberately over-referenced: orders keep only a customer id,
//! so "show order" is one query for the order and one more for its customer.
//!
//! Run it against mongotap: `cargo run --example orders -- 'mongodb://127.0.0.1:27018/?directConnection=true'`

use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, FindOptions};
use mongodb::Client;

use futures_util::TryStreamExt;

const CUSTOMERS: i64 = 20;
const ORDERS: i64 = 100;

#[tokio::main(flavor = "current_thread")]
async fn main() -> mongodb::error::Result<()> {
    let uri =
        std::env::args().nth(1).unwrap_or_else(|| "mongodb://127.0.0.1:27018/?directConnection=true".into());
    let mut opts = ClientOptions::parse(&uri).await?;
    opts.app_name.get_or_insert_with(|| "orders-service".into());
    let client = Client::with_options(opts)?;
    let db = client.database("shop");
    let customers = db.collection::<Document>("customers");
    let orders = db.collection::<Document>("orders");
    db.drop().await?;

    customers
        .insert_many(
            (0..CUSTOMERS)
                .map(|i| doc! {"_id": i, "name": format!("Customer {i}"), "address": {"city": "Pune"}}),
        )
        .await?;
    orders
        .insert_many((0..ORDERS).map(|i| {
            doc! {
                "_id": i, "customerId": i % CUSTOMERS, "status": "placed", "orderDate": bson_date(i),
                "lines": [{"sku": "P-100", "qty": 2, "price": 499}], "total": 998,
            }
        }))
        .await?;

    // Show order with lines: very high. Two round trips, because the customer is referenced.
    for i in 0..300 {
        let order = orders.find_one(doc! {"_id": i % ORDERS}).await?.expect("order exists");
        let cid = order.get_i64("customerId").expect("customerId");
        customers.find_one(doc! {"_id": cid}).projection(doc! {"name": 1}).await?;
    }
    // Add order line: high. $push without $slice: the lines array grows without bound.
    for i in 0..120 {
        orders
            .update_one(
                doc! {"_id": i % 10},
                doc! {"$push": {"lines": {"sku": format!("P-{i}"), "qty": 1, "price": 100}}, "$inc": {"total": 100}},
            )
            .await?;
    }
    // Recent orders page: medium. The 20 newest orders, then each one's customer
    // name, one query per order: N+1 round trips where one $in would do.
    let recent = FindOptions::builder().sort(doc! {"orderDate": -1}).limit(20).build();
    for _ in 0..10 {
        let page: Vec<Document> =
            orders.find(doc! {}).with_options(recent.clone()).await?.try_collect().await?;
        for order in &page {
            let cid = order.get_i64("customerId").expect("customerId");
            customers.find_one(doc! {"_id": cid}).projection(doc! {"name": 1}).await?;
        }
    }
    // Customer order history: medium. Recent first, ten at a time.
    let history = FindOptions::builder().sort(doc! {"orderDate": -1}).limit(10).batch_size(4).build();
    for i in 0..40 {
        let mut cur = orders
            .find(doc! {"customerId": i % CUSTOMERS, "status": "placed"})
            .with_options(history.clone())
            .await?;
        while cur.advance().await? {}
    }
    // Update customer address: low.
    for i in 0..5 {
        customers.update_one(doc! {"_id": i}, doc! {"$set": {"address.city": "Mumbai"}}).await?;
    }
    // A dashboard that joins orders to customers with $lookup.
    for _ in 0..15 {
        let pipeline = vec![
            doc! {"$match": {"status": "placed", "total": {"$gte": 500}}},
            doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
            doc! {"$limit": 20},
        ];
        let mut cur = orders.aggregate(pipeline).await?;
        while cur.advance().await? {}
    }
    client.shutdown().await;
    println!(
        "orders workload done: 300 order views, 120 line additions, 10 recent-orders pages, 40 history pages, 5 address updates, 15 dashboards"
    );
    Ok(())
}

fn bson_date(i: i64) -> mongodb::bson::DateTime {
    mongodb::bson::DateTime::from_millis(1_793_000_000_000 + i * 3_600_000)
}
