//! A long idle period through the proxy (45 s): the driver's streaming monitor
//! (awaitable hello, 10 s waits) keeps its connection, nothing is re-opened, the
//! waits stay out of latency statistics, and the application works afterwards.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::*;
use bson::{doc, Document};
use mongodb::Client;

/// Long enough for four awaitable hellos (10 s each) on every monitor connection;
/// the test command pays it once, beside the other tests.
const IDLE: Duration = Duration::from_secs(45);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streaming_monitor_survives_a_long_idle_period() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = Client::with_uri_str(uri(proxy.local_addr(), "idle-e2e")).await.unwrap();
    let coll = client.database("idle").collection::<Document>("c");
    coll.insert_one(doc! {"x": 1}).await.unwrap();
    let accepted_before = proxy.shared().accepted.load(Ordering::Relaxed);

    tokio::time::sleep(IDLE).await;

    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1);
    let accepted_after = proxy.shared().accepted.load(Ordering::Relaxed);
    assert_eq!(accepted_before, accepted_after, "no connection had to be re-opened");
    client.shutdown().await;

    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    let awaited: u64 = p.table().rows().iter().filter(|r| r.command == "hello").map(|r| r.awaited).sum();
    // One awaitable hello every 10 s; allow for the first and last being cut.
    assert!(awaited >= IDLE.as_secs() / 10 - 2, "{awaited} awaited hellos");
    for r in p.table().rows().iter().filter(|r| r.command == "hello") {
        if let Some(max) = r.latency_ms(1.0) {
            assert!(max < 5_000.0, "awaited waits stay out of latency: max {max} ms");
        }
    }
    assert_eq!(p.exchange_stats().parse_errors, 0);
}
