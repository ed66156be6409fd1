//! The admin endpoint end to end: real traffic through the proxy, then /metrics read
//! by a real Prometheus text parser, and the other routes.

use crate::support::*;
use bson::{doc, Document};
use mongodb::Client;
use mongotap_analyzers::report::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_reports_and_health_over_http() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin.local_addr().unwrap();
    tokio::spawn(mongotap::admin::serve(admin, proxy.shared().clone(), proxy.analysis().pipeline().clone()));

    let client = Client::with_uri_str(uri(proxy.local_addr(), "admin-e2e")).await.unwrap();
    let c = client.database("m").collection::<Document>("c");
    c.insert_one(doc! {"a": 1}).await.unwrap();
    for _ in 0..9 {
        c.find_one(doc! {"a": 1}).await.unwrap();
    }
    client.shutdown().await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let (status, body) = get(admin_addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    let value = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(ref b) => b.last().map_or(0.0, |b| b.count),
                _ => f64::NAN,
            })
    };
    let finds = [("namespace", "m.c"), ("command", "find"), ("app", "admin-e2e")];
    assert_eq!(value("mongotap_operations_total", &finds), Some(9.0));
    assert_eq!(
        value("mongotap_operation_duration_seconds", &[("namespace", "m.c"), ("command", "find")]),
        Some(9.0)
    );
    assert_eq!(value("mongotap_events_dropped_total", &[]), Some(0.0));
    assert_eq!(value("mongotap_findings", &[("kind", "n_plus_one"), ("severity", "high")]), Some(0.0));
    assert_eq!(value("mongotap_event_gaps_total", &[]), Some(0.0));
    assert_eq!(value("mongotap_parse_errors_total", &[]), Some(0.0));
    assert_eq!(value("mongotap_connections_lossy_total", &[]), Some(0.0));
    assert_eq!(value("mongotap_connections_untracked_total", &[]), Some(0.0));
    assert_eq!(value("mongotap_cursors_untracked_total", &[]), Some(0.0));
    assert!(value("mongotap_tap_queued_bytes", &[]).is_some());
    assert!(value("mongotap_connections_accepted_total", &[]).unwrap() >= 1.0);
    assert!(scrape.docs.contains_key("mongotap_operation_duration_seconds"), "HELP lines present");

    let (status, body) = get(admin_addr, "/report.json").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_valid_report(&body);
    let r = json::parse(&body).unwrap();
    assert!(r.access_patterns.iter().any(|p| p.command == "find" && p.count == 9));
    let (_, html) = get(admin_addr, "/report.html").await;
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(get(admin_addr, "/healthz").await, ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned()));
    assert_eq!(get(admin_addr, "/nope").await.0, "HTTP/1.1 404 Not Found");
    proxy.shutdown().await;
}
