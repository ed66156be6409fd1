//! Capture here, analyse anywhere: a workload through `mongotap record`, then
//! `mongotap analyze` of its trace (redacted and raw) gives the live report; a pcap
//! of the same traffic gives the same access patterns; a trace cut by SIGKILL still
//! reads; a mongod log becomes shapes; the reports of two proxies merge into the
//! report of one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;
use bson::doc;
use mongodb::Client;
use serde_json::Value;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mongotap-offline-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `mongotap analyze INPUTS --report-json OUT`; the report and what it printed.
fn analyze(inputs: &[&Path], out: &Path, extra: &[&str]) -> (Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .arg("analyze")
        .args(inputs)
        .arg("--report-json")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "analyze failed: {stderr}");
    (read_json(out), stderr)
}

/// A blog's access: authors and posts inserted, each post read with its author one
/// by one (N+1), comments `$push`ed, a `$lookup`, a count.
async fn workload(uri: &str, db: &str, n: i32) {
    workload_from(uri, db, 0, n).await
}

async fn workload_from(uri: &str, db: &str, first: i32, n: i32) {
    let client = Client::with_uri_str(uri).await.unwrap();
    let db = client.database(db);
    let users = db.collection::<bson::Document>("users");
    let posts = db.collection::<bson::Document>("posts");
    for i in first..first + n {
        users
            .insert_one(doc! {"_id": i, "name": format!("user {i}"), "email": format!("u{i}@example.com")})
            .await
            .unwrap();
        posts
            .insert_one(doc! {"_id": i, "authorId": i, "title": format!("post {i}"), "comments": []})
            .await
            .unwrap();
    }
    for round in 0..3 {
        let mut cursor = posts.find(doc! {}).batch_size(5).await.unwrap();
        while cursor.advance().await.unwrap() {
            let post = cursor.deserialize_current().unwrap();
            let author = post.get_i32("authorId").unwrap();
            users.find_one(doc! {"_id": author}).await.unwrap();
            posts
                .update_one(
                    doc! {"_id": post.get_i32("_id").unwrap()},
                    doc! {"$push": {"comments": {"round": round, "text": "nice"}}},
                )
                .await
                .unwrap();
        }
    }
    let pipeline = vec![
        doc! {"$lookup": {"from": "users", "localField": "authorId", "foreignField": "_id", "as": "author"}},
    ];
    let mut c = posts.aggregate(pipeline).await.unwrap();
    while c.advance().await.unwrap() {}
    // shutdown() waits for every cursor to be dropped.
    drop(c);
    posts.count_documents(doc! {"title": "post 1"}).await.unwrap();
    client.shutdown().await;
}

/// Fields that depend on when the analysis ran rather than on the traffic.
fn without_timing(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for k in ["first_seen", "last_seen", "rate_per_s", "window", "timeline"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// Access patterns as (namespace, command, shape) -> count.
fn counts(r: &Value) -> std::collections::BTreeMap<String, u64> {
    r["access_patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (format!("{} {} {}", p["command"], p["namespace"], p["shape"]), p["count"].as_u64().unwrap())
        })
        .collect()
}

fn dumpcap(port: u16, out: &Path) -> Child {
    let child = Command::new("dumpcap")
        .args(["-q", "-i", "lo", "-f", &format!("tcp port {port}"), "-w"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dumpcap (Debian tshark) is installed by ./scripts/setup.sh");
    // dumpcap writes its file header once it captures.
    for _ in 0..100 {
        if out.metadata().is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_and_a_capture_give_the_live_report() {
    let d = dir("roundtrip");
    let upstream = Upstream::start();
    let pcap = d.join("cap.pcapng");
    let mut capture = dumpcap(upstream.port, &pcap);
    for mode in ["redacted", "raw"] {
        let trace = d.join(format!("{mode}.mtt"));
        let live = d.join(format!("{mode}.live.json"));
        let mut args =
            vec!["--admin", "off", "--no-side-connection", "--report-json", live.to_str().unwrap()];
        args.extend(["--trace", trace.to_str().unwrap()]);
        if mode == "raw" {
            args.push("--capture-values");
        }
        let mut m =
            Mongotap::start_as("record", &upstream.addr(), &args, &d.join(format!("{mode}.log"))).await;
        workload(&uri(m.addr, mode), mode, 12).await;
        m.kill("-TERM");
        let (offline, said) = analyze(&[&trace], &d.join(format!("{mode}.offline.json")), &[]);
        assert!(said.contains(&format!("({mode})")), "{said}");
        let live = read_json(&live);
        assert!(live["totals"]["operations"].as_u64().unwrap() > 100, "{}", live["totals"]);
        assert!(
            live["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "n_plus_one"),
            "{:#}",
            live["findings"]
        );
        assert_eq!(
            without_timing(offline),
            without_timing(live.clone()),
            "{mode}: the trace gives the live report"
        );
        if mode == "redacted" {
            let plain = zstd::stream::decode_all(std::fs::File::open(&trace).unwrap()).unwrap();
            let text = String::from_utf8_lossy(&plain);
            assert!(
                !text.contains("example.com") && !text.contains("user 1") && !text.contains("nice"),
                "no literal in a redacted trace"
            );
            assert!(text.contains("authorId") && text.contains("redacted.posts"), "names are kept");
        }
    }
    // dumpcap reads the kernel's buffer a little behind the traffic.
    std::thread::sleep(Duration::from_secs(1));
    Command::new("kill").args(["-INT", &capture.id().to_string()]).status().unwrap();
    capture.wait().unwrap();
    // The capture saw both runs: its counts are the sum of the two live reports'.
    let (cap, said) = analyze(&[&pcap], &d.join("cap.json"), &[]);
    assert!(said.contains("capture"), "{said}");
    let mut want = counts(&read_json(&d.join("redacted.live.json")));
    for (k, n) in counts(&read_json(&d.join("raw.live.json"))) {
        *want.entry(k).or_default() += n;
    }
    assert_eq!(counts(&cap), want, "the capture gives the same access patterns");
    let kinds = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(kinds(&cap), kinds(&read_json(&d.join("raw.live.json"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_leaves_a_trace_readable_to_its_last_whole_frame() {
    let d = dir("sigkill");
    let upstream = Upstream::start();
    let trace = d.join("t.mtt");
    let mut m = Mongotap::start_as(
        "record",
        &upstream.addr(),
        &["--admin", "off", "--no-side-connection", "--trace", trace.to_str().unwrap()],
        &d.join("log"),
    )
    .await;
    workload(&uri(m.addr, "killed"), "blog", 6).await;
    // Frames are written at least every second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let client = Client::with_uri_str(uri(m.addr, "killed")).await.unwrap();
    let c = client.database("blog").collection::<bson::Document>("late");
    for i in 0..50 {
        c.insert_one(doc! {"i": i}).await.unwrap();
    }
    m.kill("-KILL");
    drop(client);
    let (r, _) = analyze(&[&trace], &d.join("r.json"), &[]);
    let ops = r["totals"]["operations"].as_u64().unwrap();
    assert!(ops >= 60, "the workload before the last second was read: {ops}");
    // The same file cut in the middle of its last frame: what comes before is read
    // and the cut is said.
    let bytes = std::fs::read(&trace).unwrap();
    let cut = d.join("cut.mtt");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let (r2, said) = analyze(&[&cut], &d.join("r2.json"), &[]);
    assert!(said.contains("cut short"), "{said}");
    assert!(r2["totals"]["operations"].as_u64().unwrap() <= ops);
}

#[test]
fn a_mongod_log_becomes_shapes_and_says_what_it_left_out() {
    let d = dir("log");
    let log = root().join("tests/fixtures/mongod/slow_queries.log");
    let (r, said) = analyze(&[&log], &d.join("r.json"), &[]);
    assert!(said.contains("mongod log"), "{said}");
    assert!(said.contains("truncated"), "{said}");
    assert!(said.contains("not whole JSON"), "{said}");
    let find = r["access_patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["command"] == "find" && p["shape"]["sort"].is_object())
        .expect("the find with a sort");
    assert_eq!(find["namespace"], "shop.orders");
    assert_eq!(find["shape"]["filter"]["$and"][0]["customerId"]["$eq"], "?objectId");
    assert_eq!(find["docs_returned"]["total"], 20);
    let apps: Vec<&str> = r["apps"].as_array().unwrap().iter().map(|a| a["app"].as_str().unwrap()).collect();
    assert!(apps.contains(&"shop-api"), "{apps:?}");
}

#[test]
fn garbage_is_refused_with_what_it_is_not() {
    let d = dir("garbage");
    let p = d.join("x.bin");
    std::fs::write(&p, b"\x00\x01garbage").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap")).arg("analyze").arg(&p).output().unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("not a mongotap trace, a pcap/pcapng capture or a mongod JSON log"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_reports_merge_into_the_report_of_all_their_traffic() {
    let d = dir("merge");
    let upstream = Upstream::start();
    let mut reports = Vec::new();
    let mut traces = Vec::new();
    for (i, name) in ["a", "b"].iter().enumerate() {
        let (json, trace) = (d.join(format!("{name}.json")), d.join(format!("{name}.mtt")));
        let args = [
            "--admin",
            "off",
            "--no-side-connection",
            "--report-json",
            json.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ];
        let mut m =
            Mongotap::start_as("record", &upstream.addr(), &args, &d.join(format!("{name}.log"))).await;
        // Two instances of one app, each behind its own proxy, on the same collections.
        workload_from(&uri(m.addr, "fleet"), "fleet", i as i32 * 100, 10).await;
        m.kill("-TERM");
        reports.push(json);
        traces.push(trace);
    }
    let all = d.join("all.json");
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["report", "merge"])
        .args(&reports)
        .arg("--report-json")
        .arg(&all)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged = read_json(&all);
    assert_valid_report(&merged.to_string());
    // One pipeline that saw both proxies' traffic: the report of one proxy in front
    // of both instances.
    let (one, _) = analyze(&[&traces[0], &traces[1]], &d.join("one.json"), &[]);
    let subjects = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let mut f = f.as_object().unwrap().clone();
                // The relationship map's verdict on the link is a note: a link that no
                // proxy followed often enough to judge is judged by one pipeline over
                // both traces, and not by a merge (reports keep no sketches of values).
                for k in ["severity", "shape_ids", "evidence", "recommendation", "fix", "relationships"] {
                    f.remove(k);
                }
                // Keys in order: the subject, not the order a report wrote it in.
                let f: std::collections::BTreeMap<String, Value> = f.into_iter().collect();
                serde_json::to_string(&f).unwrap()
            })
            .collect();
        v.sort();
        v
    };
    assert!(subjects(&one).iter().any(|s| s.contains("n_plus_one")));
    assert_eq!(subjects(&merged), subjects(&one), "the same findings");
    // Operations and relationships are grouped from sampled reply walks (the first
    // replies of a shape whole, then one in 64): one pipeline over both traces samples
    // other replies than two proxies did, so their tables are compared as a merge
    // (every operation of either report, counts summed) and by verdict.
    let operations = |r: &Value| -> std::collections::BTreeMap<String, u64> {
        let mut m = std::collections::BTreeMap::new();
        for o in r["operations"].as_array().unwrap() {
            *m.entry(o["id"].as_str().unwrap().to_owned()).or_default() += o["count"].as_u64().unwrap();
        }
        m
    };
    let mut summed = operations(&read_json(&reports[0]));
    for (id, n) in operations(&read_json(&reports[1])) {
        *summed.entry(id).or_default() += n;
    }
    assert!(!summed.is_empty(), "each proxy grouped operations");
    assert_eq!(operations(&merged), summed, "every operation of either report, counts summed");
    let total = |r: &Value| operations(r).values().sum::<u64>();
    assert_eq!(total(&merged), total(&one), "as many operations as one pipeline over both traces");
    let verdicts = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["relationships"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| format!("{} {} -> {} {}", x["parent"], x["link"], x["child"], x["verdict"]))
            .collect();
        v.sort();
        v
    };
    let (merged_v, one_v) = (verdicts(&merged), verdicts(&one));
    assert!(merged_v.iter().all(|v| one_v.contains(v)), "{merged_v:?} within {one_v:?}");
    // Each run walked a sample of its documents: the schemas agree on collections,
    // fields and types, their counts are the sum of two samples.
    let fields = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["schemas"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                c["fields"].as_array().unwrap().iter().map(move |f| {
                    let types: Vec<&String> = f["types"].as_object().unwrap().keys().collect();
                    format!("{} {} {types:?}", c["namespace"], f["path"])
                })
            })
            .collect();
        v.sort();
        v
    };
    assert!(!fields(&merged).is_empty());
    assert_eq!(fields(&merged), fields(&one), "the same collections, fields and types");
    let table = |mut r: Value| {
        // Shard keys are ranked per run (each proxy saw too few operations to rank).
        for k in ["findings", "operations", "relationships", "schemas", "shard_keys"] {
            r.as_object_mut().unwrap().remove(k);
        }
        r
    };
    let (merged_t, one_t) = (table(merged.clone()), table(one));
    assert_eq!(
        merged_t["access_patterns"], one_t["access_patterns"],
        "rows: counts, percentiles, histograms"
    );
    assert_eq!(merged_t, one_t);
    let n_plus_one =
        merged["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "n_plus_one").unwrap();
    assert_eq!(n_plus_one["evidence"]["merged_from"], 2, "{n_plus_one:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_trace_replayed_against_a_fresh_server_gives_the_same_operations() {
    let d = dir("replay");
    let (trace, live) = (d.join("t.mtt"), d.join("live.json"));
    {
        let upstream = Upstream::start();
        let args = [
            "--admin",
            "off",
            "--no-side-connection",
            "--report-json",
            live.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
            "--capture-values",
        ];
        let mut m = Mongotap::start_as("record", &upstream.addr(), &args, &d.join("log")).await;
        workload(&uri(m.addr, "replayed"), "replayed", 10).await;
        m.kill("-TERM");
    }
    let fresh = Upstream::start();
    let after = d.join("after.json");
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args([
            "replay",
            trace.to_str().unwrap(),
            "--target",
            &format!("mongodb://{}", fresh.addr()),
            "--speed",
            "4",
            "--report-json",
        ])
        .arg(&after)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("| find `replayed.users`"), "{out}");
    // Application operations, without the driver's handshakes and monitoring.
    let app = |r: &Value| -> std::collections::BTreeMap<String, u64> {
        counts(r)
            .into_iter()
            .filter(|(k, _)| !k.to_lowercase().contains("\"ismaster\"") && !k.contains("\"hello\""))
            .collect()
    };
    let (before, after) = (read_json(&live), read_json(&after));
    assert_eq!(app(&after), app(&before), "the replay ran the recorded operations");
    assert_eq!(after["totals"]["parse_errors"], 0);
    let errors: u64 =
        after["access_patterns"].as_array().unwrap().iter().map(|p| p["errors"].as_u64().unwrap()).sum();
    assert_eq!(errors, 0, "every replayed operation succeeded (cursor ids mapped)");
    // A redacted trace cannot be replayed, and says why.
    let redacted = d.join("r.mtt");
    {
        let upstream = Upstream::start();
        let mut m = Mongotap::start_as(
            "record",
            &upstream.addr(),
            &["--admin", "off", "--no-side-connection", "--trace", redacted.to_str().unwrap()],
            &d.join("log2"),
        )
        .await;
        workload(&uri(m.addr, "r"), "r", 2).await;
        m.kill("-TERM");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["replay", redacted.to_str().unwrap(), "--target", &fresh.addr()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--capture-values"));
}
