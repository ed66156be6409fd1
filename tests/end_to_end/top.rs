//! `mongotap top` against a running proxy, in its plain (non-terminal) mode: the
//! busiest shapes and operations with rates and latencies, the findings, and what
//! the analysis lost, read from the admin endpoint.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use bson::{doc, Document};
use mongodb::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_shows_a_running_proxys_shapes_operations_and_findings() {
    let upstream = Upstream::start();
    let admin = format!("127.0.0.1:{}", free_port());
    let d = std::env::temp_dir().join(format!("mongotap-top-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let proxy = Mongotap::start(
        &upstream.addr(),
        &["--admin", &admin, "--no-side-connection", "--report-interval", "1"],
        &d.join("log"),
    )
    .await;
    let client = Client::with_uri_str(uri(proxy.addr, "top-e2e")).await.unwrap();
    let db = client.database("topdb");
    let (posts, users) = (db.collection::<Document>("posts"), db.collection::<Document>("users"));
    for i in 0..10 {
        users.insert_one(doc! {"_id": i, "name": format!("u{i}")}).await.unwrap();
        posts.insert_one(doc! {"_id": i, "authorId": i, "title": "t"}).await.unwrap();
    }
    // A page: posts, then each post's author (an N+1).
    for _ in 0..4 {
        let mut c = posts.find(doc! {}).await.unwrap();
        while c.advance().await.unwrap() {
            let a = c.deserialize_current().unwrap().get_i32("authorId").unwrap();
            users.find_one(doc! {"_id": a}).await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["top", "--admin", &admin, "--once", "--rows", "5"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for expected in [
        "mongotap top",
        "requests",
        "events dropped",
        "SHAPES",
        "topdb.users",
        "find",
        "OPERATIONS",
        "FINDINGS",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
    assert!(text.contains("n_plus_one"), "the page's N+1 is listed:\n{text}");
    assert!(!text.contains("\x1b["), "no escape codes when the output is not a terminal");
    // Watched through a pipe whose reader goes away (`mongotap top | head`): the
    // watch ends with success, where it went on reading the endpoint every interval;
    // on Linux without waiting out its interval.
    let interval = if cfg!(target_os = "linux") { "120" } else { "0.1" };
    let mut watch = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["top", "--admin", &admin, "--interval", interval, "--rows", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 12];
    if let Err(e) = watch.stdout.as_mut().unwrap().read_exact(&mut first) {
        let _ = watch.kill();
        let o = watch.wait_with_output().unwrap();
        panic!("no first frame: {e}: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(&first, b"mongotap top", "the first frame");
    drop(watch.stdout.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let ended = loop {
        if let Some(status) = watch.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = watch.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = watch.wait_with_output().unwrap().stderr;
    assert!(
        ended.is_some_and(|s| s.success()),
        "{ended:?} after its reader left: {}",
        String::from_utf8_lossy(&err)
    );
    // A proxy that is not there is said plainly.
    let gone = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["top", "--admin", &format!("127.0.0.1:{}", free_port()), "--once"])
        .output()
        .unwrap();
    assert_eq!(gone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("is `mongotap proxy --admin"), "{gone:?}");
    drop(proxy);
}
