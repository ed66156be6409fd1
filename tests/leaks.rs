//! Faults repeated many times leave nothing behind: after a warm-up round, another
//! thousand faulty connections bring neither memory (RSS) nor file descriptors above
//! where they were. Alone in its own test binary so other tests do not move the RSS.

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

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// One round of every client-side fault, plus one good request.
async fn faults(addr: std::net::SocketAddr, round: i32) {
    let ping = OpMsg::new(Document::from_doc(&doc! {"ping": 1, "$db": "admin"})).encode(round, 0).to_vec();
    // A client that resets mid-request.
    let s = TcpStream::connect(addr).await.unwrap();
    let mut s = s;
    s.write_all(&ping[..9]).await.unwrap();
    socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
    drop(s);
    // An oversize declared length, and garbage: the upstream closes, so do we.
    for bad in [
        {
            let mut v = ping.clone();
            v[0..4].copy_from_slice(&60_000_000i32.to_le_bytes());
            v
        },
        b"\x16\x03\x01 not mongodb at all".to_vec(),
    ] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bad).await.unwrap();
        let mut buf = [0u8; 256];
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while s.read(&mut buf).await.unwrap_or(0) > 0 {}
        })
        .await;
    }
    // A good request on a connection the client then just drops.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&ping).await.unwrap();
    let mut buf = [0u8; 4096];
    let _ = s.read(&mut buf).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_rounds_of_faults_leave_memory_and_descriptors_flat() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let addr = proxy.local_addr();
    let settle = || async {
        for _ in 0..200 {
            if proxy.open_connections() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for round in 0..200 {
        faults(addr, round).await;
    }
    settle().await;
    let (rss_before, fds_before) = (rss_kib(), fds());
    for round in 0..1000 {
        faults(addr, round).await;
    }
    settle().await;
    let (rss_after, fds_after) = (rss_kib(), fds());
    eprintln!("after warm-up: {rss_before} KiB, {fds_before} fds; after 1000 more rounds (4000 connections): {rss_after} KiB, {fds_after} fds");
    assert_eq!(proxy.open_connections(), 0);
    assert!(fds_after <= fds_before, "descriptors: {fds_before} -> {fds_after}");
    assert!(rss_after <= rss_before + 2048, "RSS grew from {rss_before} to {rss_after} KiB");
    let shared = proxy.shared().clone();
    let analysis = proxy.shutdown().await;
    let stats = analysis.pipeline().lock().unwrap().exchange_stats().clone();
    assert_eq!(stats.connections, 4800);
    assert!(stats.parse_errors >= 2400, "{stats:?}");
    assert_eq!(shared.tap.dropped(), 0);
}
