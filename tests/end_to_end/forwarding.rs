//! The forwarding path: byte-exact under concurrent load, never slowed by a stalled
//! analysis (drops counted exactly), and unharmed by faults on either side.

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use bson::doc;
use bytes::BytesMut;
use mongotap::proxy::{Proxy, ProxyConfig};
use mongotap_wire::{Document, Frame, OpMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn op_msg(body: bson::Document, id: i32) -> Vec<u8> {
    OpMsg::new(Document::from_doc(&body)).encode(id, 0).to_vec()
}

/// Sends `count` requests one at a time on a fresh connection, reading each reply
/// whole. Returns (bytes sent, bytes received).
async fn raw_client(addr: std::net::SocketAddr, conn: usize, count: i32) -> (Vec<u8>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    let mut buf = BytesMut::new();
    for i in 0..count {
        let pad = "x".repeat(((conn * 7919 + i as usize * 104_729) % 60_000) + 1);
        let req = match i % 3 {
            0 => op_msg(doc! {"ping": 1, "$db": "admin"}, i),
            1 => op_msg(
                doc! {"insert": format!("c{conn}"), "documents": [{"i": i, "pad": pad}], "$db": "bx"},
                i,
            ),
            _ => op_msg(doc! {"find": format!("c{conn}"), "filter": {"i": {"$lte": i}}, "$db": "bx"}, i),
        };
        s.write_all(&req).await.unwrap();
        sent.extend_from_slice(&req);
        loop {
            if let Some(f) = Frame::parse(&mut buf).unwrap() {
                assert_eq!(f.header.response_to, i);
                got.extend_from_slice(&f.bytes);
                break;
            }
            let n = s.read_buf(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed early");
        }
    }
    (sent, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_are_forwarded_exactly_under_concurrent_load() {
    let upstream = Upstream::start();
    let (relay_port, recorded) = recording_relay(upstream.addr()).await;
    let proxy = start_proxy(&format!("127.0.0.1:{relay_port}")).await;
    let addr = proxy.local_addr();
    const CONNS: usize = 24;
    const MESSAGES: i32 = 30;
    let clients: Vec<_> = (0..CONNS).map(|c| tokio::spawn(raw_client(addr, c, MESSAGES))).collect();
    let mut client_side = Vec::new();
    for c in clients {
        client_side.push(c.await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let relay_side = recorded.lock().unwrap().clone();
    assert_eq!(relay_side.len(), CONNS);
    let (mut bytes, mut diffs) = (0usize, 0usize);
    // Connections reach the relay in any order: pair each client with the relay
    // connection that carried its requests; a client with none counts as a difference.
    for (sent, got) in &client_side {
        match relay_side.iter().find(|[up, _]| up == sent) {
            Some([_, down]) => diffs += (down != got) as usize,
            None => diffs += 1,
        }
        bytes += sent.len() + got.len();
    }
    assert_eq!(diffs, 0);
    eprintln!(
        "byte-exact: {CONNS} connections, {} messages, {bytes} bytes, 0 differences",
        CONNS * MESSAGES as usize * 2
    );
    let shared = proxy.shared().clone();
    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    assert_eq!(p.exchange_stats().requests, (CONNS * MESSAGES as usize) as u64);
    assert_eq!(p.exchange_stats().replies, (CONNS * MESSAGES as usize) as u64);
    assert_eq!(shared.tap.dropped(), 0);
}

// Holding the analysis lock across the workload is the point: it stalls the analysis.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_analysis_never_slows_forwarding_and_drops_are_counted_exactly() {
    let upstream = Upstream::start();
    let config = ProxyConfig { tap_capacity: 8, ..proxy_config(&upstream.addr()) };
    let proxy = Proxy::start(config).await.unwrap();
    let addr = proxy.local_addr();
    // A first client while the analysis keeps up (5 exchanges, one at a time: the
    // 8-event channel never fills), so the table has rows when the hole comes.
    raw_client(addr, 9, 5).await;
    // Its close too, as far as the analysis: the upstream closes its side in its own
    // time, and a loaded machine may take a while to pass the close on.
    for _ in 0..500 {
        if proxy.open_connections() == 0
            && proxy.analysis().pipeline().lock().unwrap().open_connections() == 0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        proxy.analysis().pipeline().lock().unwrap().open_connections(),
        0,
        "the first client's close analysed"
    );
    // Stall the analysis: hold its pipeline lock while the workload runs.
    let pipeline = proxy.analysis().pipeline().clone();
    let guard = pipeline.lock().unwrap();
    let clients: Vec<_> = (0..4).map(|c| tokio::spawn(raw_client(addr, c, 50))).collect();
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        for c in clients {
            c.await.unwrap();
        }
    })
    .await;
    assert!(done.is_ok(), "forwarding completed while the analysis was stalled");
    drop(guard);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shared = proxy.shared().clone();
    let analysis = proxy.shutdown().await;
    let p = analysis.pipeline().lock().unwrap();
    let (offered, dropped) = (shared.tap.offered(), shared.tap.dropped());
    // The first client's open, 10 messages and close; then 4 opens + 400 messages +
    // 4 closes.
    assert_eq!(offered, 12 + 408);
    assert!(dropped > 300, "the stall made the tap drop ({dropped})");
    // Gap markers reach the analysis too (before the next event after a drop, when
    // there is one), but they are not traffic.
    let gaps = p.exchange_stats().gaps;
    assert_eq!(p.events() - gaps + dropped, offered, "every event was either analysed or counted as dropped");
    // The drops reach the report: by connection, on the rows, in words; the
    // connections whose closes were dropped are let go of all the same.
    let r = mongotap_analyzers::report::Report::build(
        &p,
        mongotap_analyzers::report::RunFacts { events_dropped: dropped },
    );
    assert_eq!(r.traffic.lossy.iter().map(|l| l.events_dropped).sum::<u64>(), dropped);
    // The four stalled clients lost events; on a loaded machine the warm-up client
    // may have too (its 8-event channel is small on purpose).
    let lossy: Vec<u64> = r.traffic.lossy.iter().map(|l| l.connection).collect();
    assert!((2..=5).all(|c| lossy.contains(&c)), "{:?}", r.traffic.lossy);
    assert_eq!(r.traffic.lossy_connections as usize, lossy.len());
    assert_eq!(p.open_connections(), 0, "lost closes still end their connections");
    assert!(
        r.access_patterns.iter().any(|p| p.count_lower_bound),
        "rows seen around the hole are lower bounds"
    );
    let words = r.loss_in_words().unwrap();
    assert!(words.contains(&format!("skipped {dropped} of {offered} events")), "{words}");
}

async fn expect_closed(s: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 1024];
    let r = tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the connection was not closed within {within:?}");
}

async fn ping_ok(addr: std::net::SocketAddr) {
    let (_, got) = raw_client(addr, 0, 1).await;
    let f = Frame::from_bytes(bytes::Bytes::from(got)).unwrap();
    let m = mongotap_wire::Message::decode(&f).unwrap();
    assert!(mongotap_wire::CommandReply::from_message(&m).unwrap().ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_either_side_leave_the_proxy_serving() {
    let upstream = Upstream::start();

    // 1. Upstream absent at start: clients are closed promptly, then service resumes.
    let dead_port = free_port();
    let proxy = start_proxy(&format!("127.0.0.1:{dead_port}")).await;
    let addr = proxy.local_addr();
    for _ in 0..20 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        expect_closed(&mut c, Duration::from_secs(2)).await;
    }
    assert_eq!(proxy.shared().upstream_failures(), 20);
    let relay = TcpListener::bind(("127.0.0.1", dead_port)).await.unwrap();
    let target = upstream.addr();
    tokio::spawn(async move {
        while let Ok((mut down, _)) = relay.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let mut up = TcpStream::connect(target).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
            });
        }
    });
    ping_ok(addr).await;
    proxy.shutdown().await;

    // 2. Upstream dies mid-reply: the client is closed, other connections carry on.
    let half = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let half_addr = half.local_addr().unwrap();
    let real = upstream.addr();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut down, _)) = half.accept().await {
            n += 1;
            let real = real.clone();
            tokio::spawn(async move {
                if n == 1 {
                    // Read one request, send half a reply, then reset.
                    let mut buf = [0u8; 4096];
                    let _ = down.read(&mut buf).await;
                    let reply = op_msg(doc! {"ok": 1.0, "pad": "y".repeat(500)}, 1);
                    let _ = down.write_all(&reply[..reply.len() / 2]).await;
                    let _ = socket2::SockRef::from(&down).set_linger(Some(Duration::ZERO));
                    drop(down);
                } else {
                    let mut up = TcpStream::connect(real).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    let proxy = start_proxy(&half_addr.to_string()).await;
    let addr = proxy.local_addr();
    let mut victim = TcpStream::connect(addr).await.unwrap();
    victim.write_all(&op_msg(doc! {"ping": 1, "$db": "admin"}, 1)).await.unwrap();
    expect_closed(&mut victim, Duration::from_secs(2)).await;
    ping_ok(addr).await;

    // 3. A client resets mid-request; 4. an oversize declared length; 5. garbage.
    let mut resetter = TcpStream::connect(addr).await.unwrap();
    let req = op_msg(doc! {"ping": 1, "$db": "admin"}, 9);
    resetter.write_all(&req[..10]).await.unwrap();
    socket2::SockRef::from(&resetter).set_linger(Some(Duration::ZERO)).unwrap();
    drop(resetter);
    let mut oversize = TcpStream::connect(addr).await.unwrap();
    let mut header = op_msg(doc! {"ping": 1, "$db": "admin"}, 3);
    header[0..4].copy_from_slice(&100_000_000i32.to_le_bytes());
    oversize.write_all(&header).await.unwrap();
    let mut garbage = TcpStream::connect(addr).await.unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\nHost: mongotap\r\n\r\n").await.unwrap();
    expect_closed(&mut oversize, Duration::from_secs(5)).await;
    expect_closed(&mut garbage, Duration::from_secs(5)).await;
    ping_ok(addr).await;

    // Everything closed: no connection or descriptor left behind.
    drop((oversize, garbage, victim));
    for _ in 0..100 {
        if proxy.open_connections() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(proxy.open_connections(), 0);
    let analysis = proxy.shutdown().await;
    let stats = analysis.pipeline().lock().unwrap().exchange_stats().clone();
    assert!(stats.parse_errors >= 2, "oversize and garbage stop their analysis: {stats:?}");
    // Descriptors and memory are checked in tests/leaks.rs, alone in its binary: here
    // the other tests' sockets share the process and would make a count meaningless.
}

/// A scripted upstream: for each connection, runs `script` on the accepted socket.
async fn scripted_upstream<F, Fut>(script: F) -> String
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let script = Arc::new(script);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(script(s));
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_closes_and_resets_pass_through_both_ways() {
    // Half-close: the upstream reads until the client's FIN, then replies and closes.
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let upstream = scripted_upstream(move |mut s| {
        let seen = seen_tx.clone();
        async move {
            let mut got = Vec::new();
            let r = s.read_to_end(&mut got).await;
            match r {
                Ok(_) => {
                    // Reply after the client's FIN: the proxy must still carry it back.
                    let _ = s.write_all(&op_msg(doc! {"ok": 1.0, "len": got.len() as i64}, 2)).await;
                    let _ = s.shutdown().await;
                    let _ = seen.send(("fin", got.len()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    let _ = seen.send(("reset", got.len()));
                }
                Err(_) => {
                    let _ = seen.send(("error", got.len()));
                }
            }
        }
    })
    .await;
    let proxy = start_proxy(&upstream).await;
    let req = op_msg(doc! {"ping": 1, "$db": "admin"}, 1);
    let mut c = TcpStream::connect(proxy.local_addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    c.shutdown().await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut reply)).await.unwrap().unwrap();
    assert_eq!(seen_rx.recv().await.unwrap(), ("fin", req.len()), "the client's FIN reached the upstream");
    let f = Frame::from_bytes(bytes::Bytes::from(reply)).unwrap();
    assert_eq!(f.header.request_id, 2, "the reply sent after the FIN came back, then the upstream's FIN");

    // A client reset becomes an upstream reset.
    let mut c = TcpStream::connect(proxy.local_addr()).await.unwrap();
    c.write_all(&req[..7]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO)).unwrap();
    drop(c);
    let seen = tokio::time::timeout(Duration::from_secs(5), seen_rx.recv()).await.unwrap().unwrap();
    assert_eq!(seen, ("reset", 7), "the upstream saw a reset, not a clean close");
    proxy.shutdown().await;

    // An upstream reset becomes a client reset.
    let upstream = scripted_upstream(|mut s| async move {
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf).await;
        socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
    })
    .await;
    let proxy = start_proxy(&upstream).await;
    let mut c = TcpStream::connect(proxy.local_addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf)).await.unwrap();
    assert_eq!(r.map_err(|e| e.kind()).unwrap_err(), std::io::ErrorKind::ConnectionReset);
    proxy.shutdown().await;
}
