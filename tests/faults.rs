//! Faults around the binary: the upstream killed and restarted under load, SIGKILL
//! while reports are being rewritten, the admin port already taken.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bson::doc;
use mongodb::Client;
use support::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mongotap-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn pings(client: &Client, n: usize) -> (usize, usize) {
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..n {
        match client.database("admin").run_command(doc! {"ping": 1}).await {
            Ok(_) => ok += 1,
            Err(_) => failed += 1,
        }
    }
    (ok, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_killed_and_restarted_under_load() {
    let d = dir("restart");
    let mut upstream = Upstream::start();
    let port = upstream.port;
    let proxy =
        Mongotap::start(&upstream.addr(), &["--admin", "off", "--no-side-connection"], &d.join("log")).await;
    let uri = format!("mongodb://{}/?directConnection=true&serverSelectionTimeoutMS=1000", proxy.addr);
    let client = Client::with_uri_str(&uri).await.unwrap();
    assert_eq!(pings(&client, 50).await, (50, 0));
    let (fds_before, rss_before) = (proxy.fds(), proxy.rss_kib());

    // SIGKILL: no goodbye to anyone. Clients see errors; mongotap stays up.
    Command::new("kill").args(["-KILL", &upstream.pid().to_string()]).status().unwrap();
    let (_, failed) = pings(&client, 5).await;
    assert_eq!(failed, 5, "with the upstream gone every request fails");
    upstream.stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _again = restart_on(port);

    // Back: the same client recovers through the same mongotap.
    let deadline = Instant::now() + Duration::from_secs(20);
    while pings(&client, 1).await.0 == 0 {
        assert!(Instant::now() < deadline, "no recovery within 20 s");
    }
    assert_eq!(pings(&client, 50).await, (50, 0));
    client.shutdown().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (fds_after, rss_after) = (proxy.fds(), proxy.rss_kib());
    eprintln!("mongotap: {fds_before} fds, {rss_before} KiB before; {fds_after} fds, {rss_after} KiB after");
    assert!(fds_after <= fds_before, "descriptors leaked: {fds_before} -> {fds_after}");
    assert!(rss_after < rss_before + 8 * 1024, "memory: {rss_before} -> {rss_after} KiB");
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    assert_eq!(log.matches("cannot reach the upstream").count(), 1, "the outage is logged once:\n{log}");
    assert_eq!(log.matches("upstream reachable again").count(), 1, "and the recovery:\n{log}");
}

/// A server process killed when dropped (a failed assertion included).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SecantusDB again on the same port.
fn restart_on(port: u16) -> Killed {
    let bin = root().join(".venv/bin/secantusd-py");
    let child = Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--log-level", "WARNING", "--standalone"])
        .args(["--storage-path", ":memory:"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "SecantusDB did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
    Killed(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_reports_are_rewritten_leaves_a_whole_report() {
    let upstream = Upstream::start();
    let d = dir("sigkill");
    let report = d.join("report.json");
    for round in 0..6 {
        let args = ["--admin", "off", "--no-side-connection", "--report-interval", "1"];
        let mut args: Vec<&str> = args.to_vec();
        let path = report.to_string_lossy().into_owned();
        args.extend(["--report-json", &path]);
        let mut proxy = Mongotap::start(&upstream.addr(), &args, &d.join("log")).await;
        let client = Client::with_uri_str(uri(proxy.addr, "sigkill")).await.unwrap();
        // Many shapes make each rewrite take a while; kill at a different moment each round.
        let c = client.database("k").collection::<bson::Document>("c");
        let until = Instant::now() + Duration::from_millis(1300 + 170 * round);
        let mut i = 0;
        while Instant::now() < until {
            let field = format!("f{}", i % 400);
            let _ = c.find_one(doc! {field: i}).await;
            i += 1;
        }
        proxy.kill("-KILL");
        // Each round's first rewrite comes after a second: an early kill may find none yet.
        if report.exists() {
            let text = std::fs::read_to_string(&report).unwrap();
            let parsed: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("round {round}: the report is not whole JSON after SIGKILL: {e}"));
            assert!(parsed["totals"]["operations"].as_u64().is_some());
        }
    }
    assert!(report.exists(), "at least one report was written in six runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_port_already_taken_is_said_and_the_proxy_goes_on() {
    let upstream = Upstream::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = taken.local_addr().unwrap().to_string();
    let d = dir("admin");
    let proxy =
        Mongotap::start(&upstream.addr(), &["--admin", &admin, "--no-side-connection"], &d.join("log")).await;
    let client = Client::with_uri_str(uri(proxy.addr, "admin-taken")).await.unwrap();
    assert_eq!(pings(&client, 3).await, (3, 0), "the proxy serves without its admin endpoint");
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    assert!(
        log.contains(&format!("admin endpoint not started: cannot listen on {admin}")),
        "the log says why:\n{log}"
    );
    drop(taken);
}

/// A 256 KiB tmpfs mounted for the test (the test runs as root, as CI does),
/// unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn small(mnt: PathBuf) -> Mounted {
        std::fs::create_dir_all(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "none"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(mounted.success(), "this test mounts a 256 KiB tmpfs: it needs root (CI runs as root)");
        Mounted(mnt)
    }
}

/// Pings on, every one served, until the log says `said`. The writers run at the
/// lowest priority: on a busy machine their next write can come seconds late, so
/// the test waits for what they say, not for a fixed time.
async fn ping_until_logged(client: &Client, log: &std::path::Path, said: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log).unwrap_or_default().contains(said) {
        assert!(Instant::now() < deadline, "the log did not say {said:?} within 60 s");
        assert_eq!(pings(client, 10).await, (10, 0), "forwarding goes on");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Fills the disk under `dir` to the last byte; the file that did it.
fn fill(dir: &std::path::Path) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while f.write_all(&[7u8; 4096]).is_ok() {}
    while f.write_all(&[7u8]).is_ok() {}
    assert!(f.metadata().unwrap().len() > 0, "the filler wrote nothing: was the tmpfs full already?");
    filler
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_said_once_and_forwarding_goes_on() {
    let upstream = Upstream::start();
    let d = dir("full");
    let _mnt = Mounted::small(d.join("mnt"));
    let mnt = _mnt.0.clone();
    let report = mnt.join("report.json");
    let path = report.to_string_lossy().into_owned();
    let args = ["--admin", "off", "--no-side-connection", "--report-interval", "1", "--report-json", &path];
    let proxy = Mongotap::start(&upstream.addr(), &args, &d.join("log")).await;
    let client = Client::with_uri_str(uri(proxy.addr, "full-disk")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !report.exists() {
        assert!(Instant::now() < deadline, "no first report");
        pings(&client, 1).await;
    }
    // Fill the disk to the last byte.
    let filler = fill(&mnt);
    ping_until_logged(&client, &d.join("log"), "writing the report failed").await;
    // Three more intervals: every write fails, every request is served.
    let until = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < until {
        assert_eq!(pings(&client, 10).await, (10, 0), "forwarding goes on with the disk full");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let before = kept["totals"]["operations"].as_u64().unwrap();
    std::fs::remove_file(&filler).unwrap();
    ping_until_logged(&client, &d.join("log"), "reports written again").await;
    let now: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(now["totals"]["operations"].as_u64().unwrap() > before, "written again once there is room");
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    assert_eq!(log.matches("writing the report failed").count(), 1, "said once:\n{log}");
    assert_eq!(log.matches("reports written again").count(), 1, "and its end:\n{log}");
    let leftovers =
        std::fs::read_dir(&mnt).unwrap().filter(|e| e.as_ref().unwrap().file_name() != "report.json").count();
    assert_eq!(leftovers, 0, "no half-written temporary file left behind");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_a_trace_is_said_once_and_the_trace_stays_readable() {
    let upstream = Upstream::start();
    let d = dir("full-trace");
    let _mnt = Mounted::small(d.join("mnt"));
    let mnt = _mnt.0.clone();
    let trace = mnt.join("t.mtt");
    let args = ["--admin", "off", "--no-side-connection", "--trace", trace.to_str().unwrap()];
    let mut proxy = Mongotap::start_as("record", &upstream.addr(), &args, &d.join("log")).await;
    let client = Client::with_uri_str(uri(proxy.addr, "full-trace")).await.unwrap();
    assert_eq!(pings(&client, 20).await, (20, 0));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let filler = fill(&mnt);
    let log = d.join("log");
    ping_until_logged(&client, &log, "the records that cannot be written").await;
    // Frames are written every second: three more seconds of refused writes.
    let until = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < until {
        assert_eq!(pings(&client, 20).await, (20, 0), "forwarding goes on with the disk full");
    }
    std::fs::remove_file(&filler).unwrap();
    ping_until_logged(&client, &log, "the trace is written again").await;
    assert_eq!(pings(&client, 20).await, (20, 0), "and after it");
    client.shutdown().await;
    proxy.kill("-TERM");
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        log.matches("forwarding goes on, the records that cannot be written").count(),
        1,
        "said once:\n{log}"
    );
    assert_eq!(log.matches("the trace is written again").count(), 1, "and its end:\n{log}");
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .arg("analyze")
        .arg(&trace)
        .arg("--report-json")
        .arg(d.join("r.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let ops = r["totals"]["operations"].as_u64().unwrap();
    assert!(ops >= 40, "before and after the full disk: {ops}");
    assert!(r["traffic"]["gaps"].as_u64().unwrap() >= 1, "the lost records are a gap in the trace");
}

/// `mongotap analyze log | head`: the reader is gone before the report is printed.
/// The output ends quietly and the command succeeds, where `print!` panicked.
#[test]
fn a_reader_that_goes_away_ends_the_printed_report_quietly() {
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mongod/slow_queries.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .arg("analyze")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("panicked") && !err.contains("writing to stdout"), "{err}");
    assert!(err.contains("slow_queries.log: mongod log"), "the summary still goes to stderr: {err}");
}

/// `mongotap analyze log > report.md` on a full disk: an error and a failed status,
/// not a truncated report with success.
#[test]
fn a_printed_report_that_cannot_be_written_fails_the_command() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mongod/slow_queries.log");
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .arg("analyze")
        .arg(&log)
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("writing to stdout") && !err.contains("panicked"), "{err}");
}
