//! A closed-loop raw-wire load generator: N connections, each sending one pre-encoded
//! OP_MSG `find` and waiting for its reply before the next; every reply's
//! `responseTo` is checked. Prints one line: target, connections, ops/s, p50, p99 (µs).
//! Usage: loadgen ADDR CONNECTIONS SECONDS [LABEL] [SHAPES]
//! With SHAPES, requests cycle through that many distinct filter shapes (one field
//! name each) instead of repeating one pre-encoded find. With the LABEL `large`,
//! SHAPES is a size in bytes: each request inserts one document that large.
//! With `LOADGEN_TLS_CA=ca.pem` in the environment, it speaks TLS (server name
//! `localhost`, verified against that CA).

use std::time::{Duration, Instant};

use bytes::BytesMut;
use hdrhistogram::Histogram;
use mongotap_bench::find_request;
use mongotap_wire::Frame;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection to the target, plain or TLS.
trait Conn: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Conn for T {}

/// A TLS client for the target, when `LOADGEN_TLS_CA` names a CA file.
fn tls() -> Option<tokio_rustls::TlsConnector> {
    use rustls::pki_types::pem::PemObject;
    let ca = std::env::var_os("LOADGEN_TLS_CA")?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(&ca).expect("LOADGEN_TLS_CA") {
        roots.add(c.expect("a certificate")).expect("a CA certificate");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().expect("ADDR");
    let conns: usize = args.get(2).map_or(1, |s| s.parse().expect("CONNECTIONS"));
    let secs: f64 = args.get(3).map_or(5.0, |s| s.parse().expect("SECONDS"));
    let label = args.get(4).cloned().unwrap_or_else(|| addr.clone());
    let shapes: usize = args.get(5).map_or(0, |s| s.parse().expect("SHAPES"));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let label_is_large = label == "large";
    let tls = tls();
    let mut tasks = Vec::new();
    for c in 0..conns {
        let addr = addr.clone();
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            let tcp = TcpStream::connect(&addr).await.expect("connect");
            tcp.set_nodelay(true).unwrap();
            let mut s: Box<dyn Conn> = match tls {
                Some(t) => {
                    Box::new(t.connect("localhost".try_into().unwrap(), tcp).await.expect("TLS handshake"))
                }
                None => Box::new(tcp),
            };
            let mut buf = BytesMut::with_capacity(16 * 1024);
            let mut id = (c as i32) << 20;
            // Pre-encode once; only the requestID changes.
            let large = label_is_large;
            let mut req = if large { mongotap_bench::insert_request(0, shapes) } else { find_request(0) };
            let mut n = c;
            while Instant::now() < deadline {
                id += 1;
                if shapes > 0 && !large {
                    req = mongotap_bench::find_request_with_field(id, &format!("f{}", n % shapes));
                    n += conns;
                }
                req[4..8].copy_from_slice(&id.to_le_bytes());
                let t = Instant::now();
                s.write_all(&req).await.expect("write");
                let frame = loop {
                    if let Some(f) = Frame::parse(&mut buf).expect("a valid reply") {
                        break f;
                    }
                    if s.read_buf(&mut buf).await.expect("read") == 0 {
                        panic!("connection closed");
                    }
                };
                assert_eq!(frame.header.response_to, id, "reply answers the request");
                hist.record(t.elapsed().as_micros().max(1) as u64).unwrap();
            }
            hist
        }));
    }
    let started = Instant::now();
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for t in tasks {
        all.add(t.await.unwrap()).unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64().max(secs);
    println!(
        "{label}\t{conns}\t{:.0}\t{}\t{}",
        all.len() as f64 / elapsed,
        all.value_at_quantile(0.5),
        all.value_at_quantile(0.99)
    );
}
