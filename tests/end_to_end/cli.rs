//! The `mongotap` binary's report subcommand: re-rendering a saved report, and the CI
//! gate on a baseline with and without something new (exit codes 0 and 3).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::{json, Value};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mongotap"))
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mongotap-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The golden report of the pymongo capture: a real report with real shapes.
fn base() -> Value {
    let text = std::fs::read_to_string(root().join("analyzers/tests/golden/pymongo.report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

fn gate(new: &Path, baseline: &Path, fail_on: &str) -> (i32, String) {
    let out = bin()
        .arg("report")
        .arg(new)
        .arg("--baseline")
        .arg(baseline)
        .args(["--fail-on", fail_on])
        .output()
        .unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn the_gate_fails_only_on_something_new_of_the_kinds_asked_for() {
    let d = dir();
    let (old, new) = (d.join("old.json"), d.join("new.json"));
    write(&old, &base());

    // Nothing new: passes.
    write(&new, &base());
    let (code, out) = gate(&new, &old, "missing_index,n_plus_one,new_shape");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("mongotap gate: passed"));

    // A new missing_index finding (hand-made: the index advisor comes later).
    let mut with_finding = base();
    with_finding["findings"] = json!([{
        "kind": "missing_index", "severity": "high", "namespace": "fx.items", "shape_ids": ["0123456789abcdef"],
        "evidence": {"count": 4, "existing_indexes": [[["_id", 1]]]},
        "recommendation": "Create an index that serves equality on k.",
        "index": {"key": [["k", 1]]}, "fix": "db.items.createIndex({k: 1})"
    }]);
    assert_valid_report(&serde_json::to_string(&with_finding).unwrap());
    write(&new, &with_finding);
    let (code, out) = gate(&new, &old, "missing_index,n_plus_one");
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("new finding missing_index (high) on fx.items"), "{out}");
    assert_eq!(gate(&new, &old, "n_plus_one").0, 0, "an unwatched kind does not fail");
    assert_eq!(gate(&new, &new, "missing_index").0, 0, "a finding already in the baseline does not fail");

    // A new read shape: the baseline lacks one of the current shapes.
    let mut fewer = base();
    let removed = fewer["access_patterns"].as_array_mut().unwrap().remove(0);
    write(&old, &fewer);
    write(&new, &base());
    let (code, out) = gate(&new, &old, "new_shape");
    assert_eq!(code, 3, "{out}");
    assert!(out.contains(&format!("new shape {}", removed["shape_id"].as_str().unwrap())), "{out}");
    assert_eq!(gate(&new, &old, "missing_index").0, 0, "new shapes fail only when asked for");

    // A typo must not make the gate pass for ever.
    let out = bin()
        .args([
            "report",
            new.to_str().unwrap(),
            "--baseline",
            old.to_str().unwrap(),
            "--fail-on",
            "n_plus_on",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown word n_plus_on"), "{out:?}");
}

#[test]
fn detectors_list_their_thresholds_and_a_config_overrides_them() {
    let out = bin().arg("detectors").env_remove("MONGOTAP_CONFIG").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let table: toml::Table = text.parse().expect("the listing is TOML");
    let d = table["detectors"].as_table().unwrap();
    assert_eq!(d["n_plus_one_min_children"].as_integer(), Some(5));
    assert!(text.contains("# source: Sentry's N+1 detector fires at 5"), "{text}");

    let dir = dir();
    let config = dir.join("t.toml");
    std::fs::write(&config, "[detectors]\nn_plus_one_min_children = 8\n").unwrap();
    let out = bin().arg("detectors").arg("--config").arg(&config).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("n_plus_one_min_children = 8"));
    std::fs::write(&config, "[detectors]\nn_plus_one_min_kids = 8\n").unwrap();
    let out = bin().arg("detectors").arg("--config").arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `n_plus_one_min_kids`"), "{out:?}");
}

#[test]
fn a_saved_report_re_renders_in_every_format() {
    let d = dir();
    let input = d.join("in.json");
    write(&input, &base());
    let status = bin()
        .arg("report")
        .arg(&input)
        .arg("--report-md")
        .arg(d.join("r.md"))
        .arg("--report-html")
        .arg(d.join("r.html"))
        .arg("--report-json")
        .arg(d.join("r.json"))
        .status()
        .unwrap();
    assert!(status.success());
    let golden_md = std::fs::read_to_string(root().join("analyzers/tests/golden/pymongo.report.md")).unwrap();
    assert_eq!(std::fs::read_to_string(d.join("r.md")).unwrap(), golden_md);
    assert_valid_report(&std::fs::read_to_string(d.join("r.json")).unwrap());
    assert!(std::fs::read_to_string(d.join("r.html")).unwrap().contains("id=\"patterns\""));
    let bad = bin().arg("report").arg(d.join("missing.json")).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("reading"));
    assert_eq!(
        bin().args(["report", "--fail-on", "x"]).output().unwrap().status.code(),
        Some(2),
        "usage errors exit 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_from_a_config_file_writes_every_report_on_sigterm() {
    use bson::{doc, Document};
    let upstream = Upstream::start();
    let d = dir();
    let port = free_port();
    let config = d.join("mongotap.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nupstream = \"mongodb://{}/?directConnection=true\"\nadmin = \"off\"\n\
             report_json = \"{}\"\nreport_md = \"{}\"\nreport_html = \"{}\"\n",
            upstream.addr(),
            d.join("live.json").display(),
            d.join("live.md").display(),
            d.join("live.html").display()
        ),
    )
    .unwrap();
    let child =
        bin().args(["proxy", "--config"]).arg(&config).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr).await;
    let client = mongodb::Client::with_uri_str(uri(addr, "config-e2e")).await.unwrap();
    let c = client.database("cfg").collection::<Document>("c");
    c.insert_one(doc! {"a": 1}).await.unwrap();
    for _ in 0..4 {
        c.find_one(doc! {"a": 1}).await.unwrap();
    }
    client.shutdown().await;
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("mongotap: ") && stderr.contains("findings: 0"),
        "the end-of-run summary: {stderr}"
    );
    let json_text = std::fs::read_to_string(d.join("live.json")).unwrap();
    assert_valid_report(&json_text);
    let report: Value = serde_json::from_str(&json_text).unwrap();
    let finds =
        report["access_patterns"].as_array().unwrap().iter().find(|p| p["command"] == "find").unwrap();
    assert_eq!(finds["count"], 4);
    assert!(std::fs::read_to_string(d.join("live.md")).unwrap().contains("| find `cfg.c`"));
    assert!(std::fs::read_to_string(d.join("live.html")).unwrap().starts_with("<!doctype html>"));
}

#[test]
fn values_that_mean_nothing_are_refused_at_start_with_the_flag_and_the_forms_accepted() {
    let refused = |args: &[&str]| {
        let out = bin().arg("proxy").args(["--admin", "off"]).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = refused(&["--upstream", "mongodb://user:secret@host:99999/"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--upstream mongodb://***@host:99999/") && err.contains("port 99999 is out of range"),
        "{err}"
    );
    assert!(!err.contains("secret") && err.contains("host:port (127.0.0.1:27017)"), "{err}");
    for (bad, says) in [("nonsense::::", "is not a port"), ("127.0.0.1:0", "port 0 is out of range")] {
        let (code, err) = refused(&["--upstream", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    for flag in ["--tap-mb", "--max-shapes", "--report-interval", "--max-connections"] {
        let (code, err) = refused(&[flag, "0"]);
        assert_eq!(code, Some(2), "{flag}: {err}");
        assert!(err.contains(&format!("{flag} 0 means nothing")), "{err}");
    }
    let missing = dir().join("no-such-dir").join("report.json");
    let (code, err) = refused(&["--report-json", missing.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--report-json") && err.contains("does not exist"), "{err}");
    let (code, err) = refused(&["--report-md", dir().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a directory, not a file path"), "{err}");
}

#[test]
fn completions_and_the_man_page_come_from_the_flags() {
    let bash = bin().args(["completions", "bash"]).output().unwrap();
    assert!(bash.status.success());
    let bash = String::from_utf8_lossy(&bash.stdout);
    assert!(
        bash.contains("_mongotap") && bash.contains("--report-json") && bash.contains("analyze"),
        "{bash}"
    );
    let zsh = bin().args(["completions", "zsh"]).output().unwrap();
    assert!(String::from_utf8_lossy(&zsh.stdout).contains("#compdef mongotap"));
    let man = bin().arg("man").output().unwrap();
    assert!(man.status.success());
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(man.contains(".TH mongotap") && man.contains("top") && man.contains("Exit codes"), "{man}");
    let bad = bin().args(["completions", "cmd.exe"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is bad usage");
}
