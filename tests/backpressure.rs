//! A client that sends requests and never reads the replies: mongotap must not hold
//! them for it. Each pump writes what it read before reading more, so a full client
//! socket stops the reading from the upstream (TCP's own backpressure) and memory
//! stays where it was. Alone in its own test binary so other tests do not move the RSS.

mod support;

use std::time::Duration;

use bson::doc;
use mongotap_wire::{Document, OpMsg};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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

    // 30 finds of 4 MB each: 120 MB of replies. The first is read whole, to show
    // what each reply is; then nobody reads.
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let find =
        |id| OpMsg::new(Document::from_doc(&doc! {"find": "big", "filter": {}, "$db": "bp"})).encode(id, 0);
    s.write_all(&find(0)).await.unwrap();
    let mut buf = bytes::BytesMut::new();
    let first = loop {
        if let Some(f) = mongotap_wire::Frame::parse(&mut buf).unwrap() {
            break f;
        }
        assert!(s.read_buf(&mut buf).await.unwrap() > 0);
    };
    assert!(first.bytes.len() > 4_000_000, "a reply of {} bytes", first.bytes.len());
    drop(buf);
    let before = rss_kib();
    for id in 1..30 {
        s.write_all(&find(id)).await.unwrap();
    }
    // Time for the upstream to answer as much as the sockets let it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = rss_kib();
    eprintln!("RSS before {before} KiB, with 116 MB of replies unread {during} KiB");
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
