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
    check_all(&[(name, actual)]);
}

/// Compares each file with its golden copy. With `UPDATE_GOLDEN` set, writes them
/// all and fails: regeneration is a separate step that never passes as a test;
/// review `git diff`, then run the tests without it.
fn check_all(files: &[(&str, &str)]) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        for (name, actual) in files {
            std::fs::write(dir().join("tests/golden").join(name), actual).unwrap();
        }
        panic!("golden files rewritten (UPDATE_GOLDEN is set): review `git diff`, then test without it");
    }
    for (name, actual) in files {
        let expected = std::fs::read_to_string(dir().join("tests/golden").join(name)).unwrap_or_default();
        assert!(
            &expected == actual,
            "{name} differs from the golden file; if intended, run with UPDATE_GOLDEN=1 and review"
        );
    }
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

/// A scripted shop with one of each finding the detectors report: an order list
/// that fetches each order's customer (N+1), a settings read repeated in a loop
/// (redundant), and an order page assembled by three `$lookup`s (chain).
fn findings_report() -> Report {
    use bson::doc;
    use mongotap_analyzers::script::Script;
    let mut s = Script::new();
    let web = s.connect("10.0.0.7:50001", "shop-web", "PyMongo|c 4.20.1|");
    for page in 0..4 {
        let orders: Vec<bson::Document> =
            (0..12).map(|i| doc! {"_id": page * 100 + i, "customerId": 1000 + i, "total": 5}).collect();
        s.find(web, "shop.orders", doc! {"status": "placed"}, orders);
        for i in 0..12 {
            s.find_one(
                web,
                "shop.customers",
                doc! {"_id": 1000 + i},
                Some(doc! {"_id": 1000 + i, "name": "n"}),
            );
        }
        for _ in 0..20 {
            s.find_one(web, "shop.settings", doc! {"_id": "site"}, Some(doc! {"_id": "site"}));
        }
        for _ in 0..5 {
            s.aggregate(
                web,
                "shop.orders",
                vec![
                    doc! {"$match": {"_id": page}},
                    doc! {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "_id", "as": "customer"}},
                    doc! {"$lookup": {"from": "products", "localField": "productId", "foreignField": "_id", "as": "product"}},
                    doc! {"$lookup": {"from": "shippers", "localField": "shipperId", "foreignField": "_id", "as": "shipper"}},
                    doc! {"$project": {"total": 1, "customer.name": 1, "product.title": 1}},
                ],
                vec![doc! {"_id": page}],
            );
        }
        s.wait_ms(1500);
    }
    let mut p = Pipeline::default();
    s.run_into(&mut p);
    Report::build(&p, RunFacts::default())
}

#[test]
fn findings_report_matches_golden_and_schema() {
    let r = findings_report();
    let kinds: Vec<&str> = r.findings.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["n_plus_one", "redundant_query", "lookup_chain"]);
    let text = json::render(&r);
    assert_valid(&text);
    assert_eq!(json::parse(&text).unwrap(), r, "the JSON reads back to the same report");
    check_all(&[("findings.report.json", &text), ("findings.report.md", &markdown::render(&r))]);
    assert!(!text.contains("\"site\""), "no literal value in the report");
}

#[test]
fn the_schema_wants_an_n_plus_ones_link() {
    let mut v: serde_json::Value = serde_json::from_str(&json::render(&findings_report())).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("../schemas/report.schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&v));
    v["findings"][0].as_object_mut().unwrap().remove("link");
    assert!(!validator.is_valid(&v));
}

/// A scripted shop with one of each write and over-embedding finding: orders
/// replaced whole to add a line, a product's reviews pushed without a slice and read
/// whole, a copied name rewritten in every comment, readings inserted one by one,
/// and large attachments.
fn writes_report() -> Report {
    use bson::{doc, spec::BinarySubtype, Binary, DateTime};
    use mongotap_analyzers::script::Script;
    let mut s = Script::new();
    let web = s.connect("10.0.0.7:50001", "shop-web", "PyMongo|c 4.20.1|");
    let order = |id: i32, lines: i32| {
        let lines: Vec<bson::Document> =
            (0..lines).map(|i| doc! {"sku": format!("P-{i}"), "qty": 1}).collect();
        doc! {"_id": id, "customer": {"id": 7, "name": "A. Kumar"}, "status": "open", "lines": lines, "total": 10.0}
    };
    for round in 0..6 {
        for id in 0..3 {
            s.find_one(web, "shop.orders", doc! {"_id": id}, Some(order(id, 10 + round)));
            s.exchange(
                web,
                doc! {"update": "orders", "updates": [{"q": {"_id": id}, "u": order(id, 11 + round)}], "$db": "shop"},
                doc! {"n": 1, "nModified": 1, "ok": 1.0},
            );
        }
    }
    let review = doc! {"stars": 4, "text": "fine ".repeat(40)};
    for n in 0..300 {
        s.exchange(
            web,
            doc! {"update": "products", "updates": [{"q": {"_id": 1}, "u": {"$push": {"reviews": review.clone()}}}], "$db": "shop"},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        );
        if n % 20 == 19 {
            let reviews: Vec<bson::Document> = (0..=n).map(|_| review.clone()).collect();
            s.find_one(
                web,
                "shop.products",
                doc! {"_id": 1},
                Some(doc! {"_id": 1, "name": "lamp", "reviews": reviews}),
            );
        }
    }
    for user in 0..4 {
        s.exchange(
            web,
            doc! {"update": "comments", "updates": [{"q": {"authorId": user}, "u": {"$set": {"authorName": "new"}}, "multi": true}], "$db": "shop"},
            doc! {"n": 120, "nModified": 120, "ok": 1.0},
        );
    }
    for i in 0..600i64 {
        s.exchange(
            web,
            doc! {"insert": "readings", "documents": [{"sensorId": format!("s-{}", i % 12), "ts": DateTime::from_millis(1_796_169_600_000 + i * 100), "value": 21.5}], "$db": "shop"},
            doc! {"n": 1, "ok": 1.0},
        );
    }
    for id in 0..3 {
        let data = Binary { subtype: BinarySubtype::Generic, bytes: vec![7; 1_500_000] };
        s.exchange(
            web,
            doc! {"insert": "attachments", "documents": [{"_id": id, "name": "scan.pdf", "data": data}], "$db": "shop"},
            doc! {"n": 1, "ok": 1.0},
        );
    }
    let mut p = Pipeline::default();
    s.run_into(&mut p);
    Report::build(&p, RunFacts::default())
}

#[test]
fn writes_report_matches_golden_and_schema() {
    let r = writes_report();
    let mut kinds: Vec<&str> = r.findings.iter().map(|f| f.kind.as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "bucket_candidate",
            "fan_out_update",
            "full_document_rewrite",
            "large_document",
            "over_fetch",
            "unbounded_array_growth"
        ]
    );
    let text = json::render(&r);
    assert_valid(&text);
    assert_eq!(json::parse(&text).unwrap(), r, "the JSON reads back to the same report");
    check_all(&[("writes.report.json", &text), ("writes.report.md", &markdown::render(&r))]);
    assert!(!text.contains("A. Kumar") && !text.contains("fine fine"), "no literal value in the report");
}

/// A scripted shop whose indexes the traffic shows (the application's own
/// `listIndexes`): an order history with no ESR index, a redundant and an unused
/// index, and queries that existing indexes serve.
fn indexes_report() -> Report {
    use bson::doc;
    use mongotap_analyzers::script::{batch, Script};
    let mut s = Script::new();
    let web = s.connect("10.0.0.7:50001", "shop-web", "PyMongo 4.20.1");
    let indexes = [
        (
            "orders",
            vec![
                (doc! {"_id": 1}, "_id_", false),
                (doc! {"createdAt": 1}, "createdAt_1", false),
                (doc! {"customerId": 1}, "customerId_1", false),
                (doc! {"legacyCode": 1}, "legacyCode_1", false),
            ],
        ),
        (
            "users",
            vec![
                (doc! {"_id": 1}, "_id_", false),
                (doc! {"email": 1}, "email_1", true),
                (doc! {"name": 1}, "name_1", false),
                (doc! {"name": 1, "email": 1}, "name_1_email_1", false),
            ],
        ),
    ];
    for (coll, keys) in indexes {
        let listed = keys
            .into_iter()
            .map(|(key, name, unique)| doc! {"v": 2, "key": key, "name": name, "unique": unique})
            .collect();
        s.exchange(
            web,
            doc! {"listIndexes": coll, "cursor": {}, "$db": "shop"},
            batch(&format!("shop.{coll}"), listed, 0, true),
        );
    }
    for i in 0..40 {
        s.exchange(
            web,
            doc! {"find": "orders", "filter": {"customerId": i % 9, "status": "open"}, "sort": {"createdAt": -1}, "limit": 10, "$db": "shop"},
            batch("shop.orders", vec![doc! {"_id": i, "customerId": i % 9, "status": "open", "createdAt": i}], 0, true),
        );
        s.find(web, "shop.orders", doc! {"customerId": i % 9}, vec![]);
        s.exchange(
            web,
            doc! {"find": "orders", "filter": {"createdAt": {"$gte": i}}, "sort": {"createdAt": 1}, "limit": 5, "$db": "shop"},
            batch("shop.orders", vec![], 0, true),
        );
        s.find(web, "shop.users", doc! {"email": format!("u{i}@example.com")}, vec![]);
        s.find(web, "shop.users", doc! {"name": "A. Kumar", "email": format!("u{i}@example.com")}, vec![]);
    }
    let mut p = Pipeline::default();
    s.run_into(&mut p);
    Report::build(&p, RunFacts::default())
}

#[test]
fn indexes_report_matches_golden_and_schema() {
    let r = indexes_report();
    let kinds: Vec<(&str, &str)> =
        r.findings.iter().map(|f| (f.kind.as_str(), f.namespace.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("missing_index", "shop.orders"),
            ("unused_index", "shop.orders"),
            ("redundant_index", "shop.users")
        ]
    );
    let text = json::render(&r);
    assert_valid(&text);
    assert_eq!(json::parse(&text).unwrap(), r, "the JSON reads back to the same report");
    check_all(&[("indexes.report.json", &text), ("indexes.report.md", &markdown::render(&r))]);
    assert!(!text.contains("A. Kumar") && !text.contains("example.com"), "no literal value in the report");
}
