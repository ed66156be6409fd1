//! The schemas section end to end: the Rust `mongodb` driver, unmodified, writes
//! customers at two schema versions through mongotap against a real SecantusDB,
//! and a second app writes scores as strings. The report names the version field,
//! finds the drift with its writer, and the validator it infers, pasted into mongosh
//! as printed, makes the server accept the documents the app writes and reject the
//! drift. (pymongo and the Node driver run the same kind of workloads in
//! `tests/scenarios/`.)

use crate::support::*;
use bson::{doc, Bson, Document};
use mongodb::Client;
use mongotap_analyzers::report::{Report, RunFacts};

fn customer(i: i32, version: i32) -> Document {
    let mut d = doc! {"name": format!("Customer {i}"), "score": i % 10, "schemaVersion": version};
    if version == 1 {
        d.insert("phone", format!("555-{i:04}"));
    } else {
        d.insert("contact", doc! {"phone": format!("555-{i:04}"), "prefers": "email"});
    }
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_drift_and_a_validator_the_server_applies() {
    let upstream = Upstream::start();
    let proxy = start_proxy(&upstream.addr()).await;
    let crm = Client::with_uri_str(uri(proxy.local_addr(), "crm")).await.unwrap();
    let import = Client::with_uri_str(uri(proxy.local_addr(), "legacy-import")).await.unwrap();
    let customers = crm.database("schemas").collection::<Document>("customers");
    customers.drop().await.unwrap();
    customers.insert_many((0..40).map(|i| customer(i, 1))).await.unwrap();
    customers.insert_many((40..80).map(|i| customer(i, 2))).await.unwrap();
    let imported = import.database("schemas").collection::<Document>("customers");
    for i in 80..86 {
        let mut d = customer(i, 2);
        d.insert("score", Bson::String(format!("{}", i % 10)));
        imported.insert_one(d).await.unwrap();
    }
    crm.shutdown().await;
    import.shutdown().await;
    let analysis = proxy.shutdown().await;
    let report = {
        let p = analysis.pipeline().lock().unwrap();
        Report::build(&p, RunFacts::default())
    };
    assert_valid_report(&mongotap_analyzers::report::json::render(&report));

    let schema = report.schemas.iter().find(|c| c.namespace == "schemas.customers").expect("a schema");
    assert_eq!(schema.documents_written, 86);
    let versions = schema.versions.as_ref().expect("the version field");
    assert_eq!(versions.field, "schemaVersion");
    assert_eq!(versions.values.get("1"), Some(&40));
    assert_eq!(versions.fields_of["1"], ["phone"]);
    let drift = report.findings.iter().find(|f| f.kind == "schema_drift").expect("the score's drift");
    assert_eq!(drift.extra["field"], "score");
    assert_eq!(drift.evidence["types"], serde_json::json!({"number": 80, "string": 6}));
    let writers = drift.evidence["written_by"]["string"].as_array().unwrap();
    assert!(writers.len() == 1 && writers[0].as_str().unwrap().starts_with("legacy-import ("), "{writers:?}");

    // The validator, pasted into mongosh as printed.
    let fix = schema.fix.clone().expect("a validator");
    let Some(out) = mongosh(&upstream.addr(), "schemas", &format!("printjson({fix});")) else { return };
    assert!(out.status.success(), "{}\n{fix}", String::from_utf8_lossy(&out.stderr));
    let direct =
        Client::with_uri_str(format!("mongodb://{}/?directConnection=true", upstream.addr())).await.unwrap();
    let customers = direct.database("schemas").collection::<Document>("customers");
    customers.insert_one(customer(100, 1)).await.expect("a version 1 customer");
    customers.insert_one(customer(101, 2)).await.expect("a version 2 customer");
    let mut drifted = customer(102, 2);
    drifted.insert("score", "7");
    let mut unversioned_contact = customer(103, 2);
    unversioned_contact.remove("contact");
    for bad in [drifted, unversioned_contact] {
        let err = customers.insert_one(bad.clone()).await.expect_err("the validator rejects it");
        assert!(err.to_string().contains("failed validation"), "{bad:?}: {err}");
    }
    direct.shutdown().await;
}
