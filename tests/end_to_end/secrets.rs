//! The secrets sweep: an authenticated workload through `mongotap record` (SCRAM-
//! SHA-256, the side connection's credentials in the --upstream URI, debug logs),
//! then every output searched for the password, the SASL conversation and marked
//! literal values: the log, the trace (redacted, and raw with --capture-values),
//! every report format, and /metrics, /report.json and /report.html while it runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;
use bson::doc;
use mongodb::Client;

const USER: &str = "alice-secret-user";
const PASSWORD: &str = "Pa55-w0rd-SECRET-91";
const MARKER: &str = "LITERAL-MARKER-7f3a";

/// What must never appear in any output: the password, the user (its SCRAM
/// messages carry it), the pieces of a SCRAM conversation, a marked value.
fn secrets(values_too: bool) -> Vec<&'static str> {
    let mut v = vec![PASSWORD, USER, "n,,n=", "c=biws", "payload"];
    if values_too {
        v.push(MARKER);
    }
    v
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mongotap-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn assert_clean(what: &str, bytes: &[u8], needles: &[&str]) {
    for n in needles {
        assert!(!bytes.windows(n.len()).any(|w| w == n.as_bytes()), "{what} contains {n:?}");
    }
}

fn decompressed(trace: &Path) -> Vec<u8> {
    zstd::stream::decode_all(std::fs::File::open(trace).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_any_output() {
    let d = dir();
    let storage = d.join("data");
    let mut setup = Upstream::start_with(UpstreamOptions {
        storage: Some(storage.clone()),
        ..UpstreamOptions::default()
    });
    let admin =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", setup.addr())).await.unwrap();
    admin
        .database("admin")
        .run_command(doc! {"createUser": USER, "pwd": PASSWORD, "roles": [{"role": "root", "db": "admin"}]})
        .await
        .unwrap();
    admin.shutdown().await;
    setup.stop();
    std::thread::sleep(Duration::from_secs(2));
    let upstream = Upstream::start_with(UpstreamOptions {
        storage: Some(storage),
        auth: true,
        ..UpstreamOptions::default()
    });
    // The side connection logs in with the URI's credentials.
    let upstream_uri = format!("mongodb://{USER}:{PASSWORD}@{}/?authSource=admin", upstream.addr());

    for raw in [false, true] {
        let mode = if raw { "raw" } else { "redacted" };
        let trace = d.join(format!("{mode}.mtt"));
        let (json, md, html) =
            (d.join(format!("{mode}.json")), d.join(format!("{mode}.md")), d.join(format!("{mode}.html")));
        let admin_addr = format!("127.0.0.1:{}", free_port());
        let mut args = vec![
            "--admin",
            &admin_addr,
            "--trace",
            trace.to_str().unwrap(),
            "--report-json",
            json.to_str().unwrap(),
            "--report-md",
            md.to_str().unwrap(),
            "--report-html",
            html.to_str().unwrap(),
            "--report-interval",
            "1",
        ];
        if raw {
            args.push("--capture-values");
        }
        let log = d.join(format!("{mode}.log"));
        let mut m =
            Mongotap::start_logging("record", &upstream_uri, &args, &log, Some("mongotap=debug")).await;
        let client_uri = format!(
            "mongodb://{USER}:{PASSWORD}@{}/?directConnection=true&authSource=admin&appName=secrets",
            m.addr
        );
        let client = Client::with_uri_str(&client_uri).await.unwrap();
        let c = client.database("vault").collection::<bson::Document>("notes");
        for i in 0..20 {
            c.insert_one(doc! {"i": i, "note": format!("{MARKER}-{i}")}).await.unwrap();
            c.find_one(doc! {"note": format!("{MARKER}-{i}")}).await.unwrap();
        }
        // A wrong password too: its attempt must leave nothing either.
        let wrong = client_uri.replace(PASSWORD, "Wr0ng-SECRET-pass");
        let bad = Client::with_uri_str(&wrong).await.unwrap();
        assert!(bad.database("vault").run_command(doc! {"ping": 1}).await.is_err());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut live = String::new();
        for path in ["/metrics", "/report.json", "/report.html"] {
            live.push_str(&http_get(&admin_addr, path).await);
        }
        assert!(live.contains("mongotap_"), "the endpoints answered");
        client.shutdown().await;
        bad.shutdown().await;
        m.kill("-TERM");

        let mut needles = secrets(true);
        needles.push("Wr0ng-SECRET-pass");
        assert_clean(&format!("{mode}: the endpoints"), live.as_bytes(), &needles);
        for out in [&json, &md, &html, &log] {
            let bytes = std::fs::read(out).unwrap();
            assert!(!bytes.is_empty(), "{} was written", out.display());
            assert_clean(&format!("{mode}: {}", out.display()), &bytes, &needles);
        }
        let plain = decompressed(&trace);
        let text = String::from_utf8_lossy(&plain);
        assert!(text.contains("saslStart") || text.contains("saslContinue"), "auth is recorded by name");
        if raw {
            // The values were asked for; the auth conversation never is.
            assert!(text.contains(MARKER), "a raw trace keeps the values");
            let mut auth = secrets(false);
            auth.push("Wr0ng-SECRET-pass");
            assert_clean("the raw trace", &plain, &auth);
        } else {
            assert_clean("the redacted trace", &plain, &needles);
        }
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(log.contains("DEBUG") || log.contains("debug"), "the log was at debug level");
    }
}
