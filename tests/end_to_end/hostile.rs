//! Hostile and broken input through mongotap to the real upstream. The broken
//! messages go through a relay that records what mongotap forwarded: each must be
//! forwarded byte for byte, its connection's analysis stopped with a counted parse
//! error (or, where the message can be read, analysed), and another client served
//! right after. Then a slow client and the connection cap. The hostile-input table
//! in docs/guarantees.md points here.

use std::time::Duration;

use crate::support::*;
use bson::doc;
use bytes::BytesMut;
use mongotap::proxy::{Proxy, ProxyConfig};
use mongotap_wire::{Compressor, Document, Frame, MsgFlags, OpCompressed, OpMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn ping(id: i32) -> Vec<u8> {
    OpMsg::new(Document::from_doc(&doc! {"ping": 1, "$db": "admin"})).encode(id, 0).to_vec()
}

fn with_length(mut msg: Vec<u8>, len: i32) -> Vec<u8> {
    msg[0..4].copy_from_slice(&len.to_le_bytes());
    msg
}

/// A find whose filter nests `depth` documents ({a: {a: ...}}), built byte by byte
/// (a recursive encoder would need the deep stack this case is about).
fn nested_find(depth: usize) -> Vec<u8> {
    let mut filter = Vec::with_capacity(5 + 8 * depth);
    for level in 0..depth {
        filter.extend_from_slice(&((5 + 8 * (depth - level)) as i32).to_le_bytes());
        filter.extend_from_slice(b"\x03a\x00");
    }
    filter.extend_from_slice(&[5, 0, 0, 0, 0]);
    filter.extend(std::iter::repeat_n(0u8, depth));
    let string = |key: &str, value: &str| {
        let mut e = vec![0x02];
        e.extend_from_slice(key.as_bytes());
        e.push(0);
        e.extend_from_slice(&(value.len() as i32 + 1).to_le_bytes());
        e.extend_from_slice(value.as_bytes());
        e.push(0);
        e
    };
    let mut elements = string("find", "t");
    elements.extend_from_slice(b"\x03filter\x00");
    elements.extend_from_slice(&filter);
    elements.extend(string("$db", "h"));
    let mut body = ((elements.len() + 5) as i32).to_le_bytes().to_vec();
    body.extend(elements);
    body.push(0);
    let mut msg = vec![0u8; 16];
    msg[4..8].copy_from_slice(&5i32.to_le_bytes());
    msg[12..16].copy_from_slice(&2013i32.to_le_bytes());
    msg.extend_from_slice(&[0, 0, 0, 0, 0]); // flags, then section kind 0
    msg.extend(body);
    let len = msg.len() as i32;
    with_length(msg, len)
}

/// A ping on a fresh connection gets its reply: the proxy serves others.
async fn served(proxy: &Proxy) {
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    s.write_all(&ping(77)).await.unwrap();
    let mut buf = BytesMut::new();
    let reply = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(f) = Frame::parse(&mut buf).unwrap() {
                return f;
            }
            assert!(s.read_buf(&mut buf).await.unwrap() > 0, "closed before the reply");
        }
    })
    .await
    .expect("a reply within 5 s");
    assert_eq!(reply.header.response_to, 77);
}

/// Sends `bytes`, then reads until the upstream's answer or close reaches the client
/// (or 3 s pass).
async fn send(proxy: &Proxy, bytes: &[u8]) {
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut buf = [0u8; 4096];
    let _ =
        tokio::time::timeout(Duration::from_secs(3), async { while let Ok(1..) = s.read(&mut buf).await {} })
            .await;
}

struct Bench {
    proxy: Proxy,
    recorded: Recorded,
    _upstream: Upstream,
}

async fn bench() -> Bench {
    let upstream = Upstream::start();
    let (port, recorded) = recording_relay(upstream.addr()).await;
    let proxy = Proxy::start(proxy_config(&format!("127.0.0.1:{port}"))).await.unwrap();
    Bench { proxy, recorded, _upstream: upstream }
}

impl Bench {
    /// What mongotap forwarded on the relay's last connection, client to server.
    fn last_forwarded(&self) -> Vec<u8> {
        self.recorded.lock().unwrap().last().map(|c| c[0].clone()).unwrap_or_default()
    }

    fn parse_errors(&self) -> u64 {
        self.proxy.analysis().pipeline().lock().unwrap().exchange_stats().parse_errors
    }

    /// Operations the analysis has put in its table.
    fn operations(&self) -> u64 {
        let p = self.proxy.analysis().pipeline().lock().unwrap();
        mongotap_analyzers::report::Report::build(&p, Default::default()).totals.operations
    }

    /// Waits (up to 20 s: the analysis thread runs at the lowest priority and a busy
    /// machine starves it) until the analysis has counted `errors` parse errors and
    /// `operations` operations, then says what it counted. A fixed pause failed here
    /// when the tests ran side by side with a build.
    async fn counted(&self, errors: u64, operations: u64) -> (u64, u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let now = (self.parse_errors(), self.operations());
            if now == (errors, operations) || std::time::Instant::now() > deadline {
                // A little longer: what should not come would show by now.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return (self.parse_errors(), self.operations());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Each broken message: forwarded byte for byte, its connection's analysis
/// stopped with a parse error, and the proxy serving the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_messages_are_forwarded_untouched_and_stop_only_their_analysis() {
    let b = bench().await;
    let good = ping(1);
    let body_at = 21; // header 16, flags 4, section kind 1: the body document starts here
    let deep_msg = nested_find(10_000);
    let zlib = |msg: &[u8]| OpCompressed::compress(msg, Compressor::Zlib).to_vec();
    // An OP_COMPRESSED whose fields are then made to lie.
    let lying = |mut v: Vec<u8>, declared: Option<i32>, compressor: Option<u8>| {
        if let Some(d) = declared {
            v[20..24].copy_from_slice(&d.to_le_bytes());
        }
        if let Some(c) = compressor {
            v[24] = c;
        }
        v
    };
    let bomb = {
        let mut m = vec![0u8; 40 << 20];
        m[0..4].copy_from_slice(&(40i32 << 20).to_le_bytes());
        m[12..16].copy_from_slice(&2013i32.to_le_bytes());
        zlib(&m)
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("declared length below 16", with_length(good.clone(), 8)),
        ("declared length above 48,000,000", with_length(good.clone(), 48_000_001)),
        (
            "length longer than the body",
            [with_length(good.clone(), good.len() as i32 + 40), ping(2)].concat(),
        ),
        ("truncated section", {
            // A kind-1 section whose size runs past the message.
            let mut v = good[..20].to_vec();
            v.extend_from_slice(&[1, 0xff, 0, 0, 0]);
            v.extend_from_slice(b"documents\0");
            let len = v.len() as i32;
            with_length(v, len)
        }),
        ("BSON with a bad length", {
            let mut v = good.clone();
            v[body_at..body_at + 4].copy_from_slice(&3i32.to_le_bytes());
            v
        }),
        ("unterminated string", {
            // The NUL that ends "admin" (the $db value) becomes a letter.
            let mut v = good.clone();
            let at = v.windows(6).position(|w| w == b"admin\0").unwrap();
            v[at + 5] = b'x';
            v
        }),
        ("10,000 levels of nesting", deep_msg),
        ("OP_COMPRESSED with a false size", lying(zlib(&good), Some(10), None)),
        ("compression bomb (1 KB declared, 40 MB inflated)", lying(bomb, Some(1024), None)),
        ("unknown compressor", lying(zlib(&good), None, Some(99))),
        ("checksum mismatch", {
            let mut m = OpMsg::new(Document::from_doc(&doc! {"ping": 1, "$db": "admin"}));
            m.flags = MsgFlags::CHECKSUM_PRESENT;
            let mut v = m.encode(3, 0).to_vec();
            let last = v.len() - 1;
            v[last] ^= 0xff;
            v
        }),
    ];
    // What the analysis should have counted so far: each case adds a parse error or
    // an operation, and the ping that checks the proxy still serves adds one operation.
    let (mut errors, mut operations) = (0, 0);
    for (name, bytes) in cases {
        send(&b.proxy, &bytes).await;
        let forwarded = b.last_forwarded();
        assert_eq!(forwarded.len(), bytes.len(), "{name}: bytes forwarded");
        assert!(forwarded == bytes, "{name}: forwarded with a byte changed");
        // Read anyway: the nesting (shapes stop at 32 levels), and a string whose NUL
        // is missing (read to its declared length, as the element walk does). The
        // others stop their connection's analysis with one counted parse error.
        let read = ["10,000 levels of nesting", "unterminated string"].contains(&name);
        if read {
            operations += 1;
            let counted = b.counted(errors, operations).await;
            assert_eq!(
                counted,
                (errors, operations),
                "{name}: analysed (no parse error, one more operation)"
            );
        } else {
            errors += 1;
            let counted = b.counted(errors, operations).await;
            assert_eq!(counted, (errors, operations), "{name}: not analysed (one parse error, no operation)");
        }
        served(&b.proxy).await;
        operations += 1;
    }
    assert_eq!(b.counted(errors, operations).await, (errors, operations), "the last ping is in the table");
    for _ in 0..100 {
        if b.proxy.open_connections() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(b.proxy.open_connections(), 0, "every case's connection was closed");
}

/// A client that sends one byte at a time, slowly: each byte is forwarded as it
/// comes, the request is answered, and others are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_forwarded_byte_by_byte_and_others_are_served() {
    let b = bench().await;
    let mut slow = TcpStream::connect(b.proxy.local_addr()).await.unwrap();
    let req = ping(9);
    for (i, byte) in req.iter().enumerate() {
        slow.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if i == req.len() / 2 {
            served(&b.proxy).await;
            let forwarded = b.recorded.lock().unwrap()[0][0].clone();
            assert!(forwarded.len() >= i, "bytes go on as they come: {} of {}", forwarded.len(), i + 1);
        }
    }
    let mut buf = BytesMut::new();
    let reply = loop {
        if let Some(f) = Frame::parse(&mut buf).unwrap() {
            break f;
        }
        assert!(slow.read_buf(&mut buf).await.unwrap() > 0);
    };
    assert_eq!(reply.header.response_to, 9);
}

/// At the connection cap, the next client waits in the accept backlog and is
/// served as soon as a connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_the_cap_waits_and_is_then_served() {
    let upstream = Upstream::start();
    let config = ProxyConfig { max_connections: 2, ..proxy_config(&upstream.addr()) };
    let proxy = Proxy::start(config).await.unwrap();
    let a = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let _b = TcpStream::connect(proxy.local_addr()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(proxy.local_addr()).await.unwrap();
    third.write_all(&ping(3)).await.unwrap();
    let mut buf = [0u8; 1024];
    let waited = tokio::time::timeout(Duration::from_millis(1500), third.read(&mut buf)).await;
    assert!(waited.is_err(), "no reply while two connections hold the cap");
    assert_eq!(proxy.open_connections(), 2);
    // Said, and counted: one client waits in the backlog.
    let shared = proxy.shared();
    assert_eq!(shared.cap_reached.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(
        shared.waiting.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "sampled every second at the cap"
    );
    drop(a);
    let n =
        tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await.expect("served").unwrap();
    assert!(n > 16, "the reply arrived once a connection closed");
}
