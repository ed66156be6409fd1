//! A client that sends requests and never reads the replies: mongotap must not hold
//! them for it. Each pump writes what it read before reading more, so a full client
//! socket stops the reading from the upstream (TCP's own backpressure) and memory
//! stays where it was. Alone in its own test binary so other tests do not move the RSS.

mod support;

use std::time::Duration;

use bson::doc;
use mongotap_wire::{Document, OpMsg};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_a_client_never_reads_are_not_held_in_memory() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let client = mongodb::Client::with_uri_str(uri(proxy.local_addr(), "seed")).await.unwrap();
    let c = client.database("bp").collection::<bson::Document>("big");
    c.drop().await.unwrap();
    for i in 0..4 {
        c.insert_one(doc! {"i": i, "blob": "x".repeat(1 << 20)}).await.unwrap();
    }
    client.shutdown().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib();

    // 30 finds of 4 MB each: 120 MB of replies nobody reads.
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    for id in 0..30 {
        let find =
            OpMsg::new(Document::from_doc(&doc! {"find": "big", "filter": {}, "$db": "bp"})).encode(id, 0);
        s.write_all(&find).await.unwrap();
    }
    // Time for the upstream to answer as much as the sockets let it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = rss_kib();
    eprintln!("RSS before {before} KiB, with 120 MB of replies unread {during} KiB");
    assert!(during < before + 32 * 1024, "mongotap held the unread replies: {before} -> {during} KiB");
    // The stuck connection goes away cleanly when the client does.
    drop(s);
    for _ in 0..200 {
        if proxy.open_connections() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(proxy.open_connections(), 0);
}
