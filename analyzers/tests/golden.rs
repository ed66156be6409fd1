//! Golden files: the JSON and Markdown reports of a fixed input (the pymongo capture,
//! replayed with fixed timestamps) must match the committed files byte for byte, and
//! the JSON must satisfy the contract's schema. After an intended change, regenerate
//! with `UPDATE_GOLDEN=1 cargo test -p mongotap-analyzers --test golden` and review
//! the diff.

use std::path::PathBuf;

use bytes::Bytes;
use mongotap_analyzers::event::{Direction, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{json, markdown, Report, RunFacts};
use mongotap_wire::Frame;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pymongo capture, one message every 250 µs from a fixed instant.
fn fixed_report() -> Report {
    let bytes = Bytes::from(std::fs::read(dir().join("../wire/tests/fixtures/pymongo.stream")).unwrap());
    let mut p = Pipeline::default();
    let (mut at, mut t) = (0, 1_796_212_800_000_000u64);
    p.feed(TapEvent::Opened { conn: 1, client: "127.0.0.1:50000".parse().unwrap(), at: t });
    while at < bytes.len() {
        let dir = if bytes[at] == b'C' { Direction::ToServer } else { Direction::ToClient };
        let len = i32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        let frame = Frame::from_bytes(bytes.slice(at + 1..at + 1 + len)).unwrap();
        t += 250;
        p.feed(TapEvent::Message { conn: 1, dir, at: t, frame });
        at += 1 + len;
    }
    Report::build(&p, RunFacts::default())
}

fn check(name: &str, actual: &str) {
    let path = dir().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} differs from the golden file; if intended, run with UPDATE_GOLDEN=1 and review"
    );
}

/// Validates a JSON report against schemas/report.schema.json.
pub fn assert_valid(report_json: &str) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("../schemas/report.schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let instance: serde_json::Value = serde_json::from_str(report_json).unwrap();
    let errors: Vec<String> =
        validator.iter_errors(&instance).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "report violates the schema: {errors:#?}");
}

#[test]
fn json_report_matches_golden_and_schema() {
    let text = json::render(&fixed_report());
    assert_valid(&text);
    check("pymongo.report.json", &text);
    assert_eq!(json::parse(&text).unwrap(), fixed_report(), "the JSON reads back to the same report");
}

#[test]
fn markdown_report_matches_golden() {
    check("pymongo.report.md", &markdown::render(&fixed_report()));
}

#[test]
fn the_schema_rejects_what_breaks_the_contract() {
    let mut v: serde_json::Value = serde_json::from_str(&json::render(&fixed_report())).unwrap();
    v["access_patterns"][0].as_object_mut().unwrap().remove("shape_id");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("../schemas/report.schema.json")).unwrap())
            .unwrap();
    assert!(!jsonschema::validator_for(&schema).unwrap().is_valid(&v));
}
