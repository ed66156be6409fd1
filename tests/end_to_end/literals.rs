//! No literal value ever reaches an output. A real driver sends marked values in
//! every place a command can carry one (filters, updates, documents, `let`,
//! `comment`, `arrayFilters`, `partialFilterExpression`, `$where` and `$function`
//! code, every kind of stage, explain-wrapped commands, bulkWrite, legacy OP_QUERY)
//! through the `mongotap` binary, logging at trace level with `--explain` on; then
//! every report format, the admin endpoints and the log are searched for the marks.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;
use bson::{doc, oid::ObjectId, Bson, Document};
use mongodb::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The marks: a string, numbers of each type (searched as digit runs) and an
/// ObjectId (searched as hex).
const MARK: &str = "LEAKMARK";
const MARK_I32: i32 = 987_654_321;
const MARK_I64: i64 = 9_876_543_210;
const MARK_F64: f64 = 98_765.432_1;
const MARK_OID: &str = "deadbeefcafe0123456789ab";

fn marks() -> [&'static str; 4] {
    [MARK, "987654321", "98765", MARK_OID]
}

fn m(what: &str) -> String {
    format!("{MARK}-{what}")
}

/// Every place a command carries a value, sent by the Rust driver (errors from
/// the upstream are fine: the traffic is what counts).
async fn workload(client: &Client) {
    let db = client.database("leaks");
    let c = db.collection::<Document>("orders");
    let oid = ObjectId::parse_str(MARK_OID).unwrap();
    let run = |cmd: Document| {
        let db = db.clone();
        async move {
            let _ = db.run_command(cmd).await;
        }
    };
    for i in 0..3 {
        let _ = c
            .insert_one(
                doc! {"name": m("insert"), "n": MARK_I32, "big": MARK_I64, "f": MARK_F64, "ref": oid, "i": i,
                "lines": [{"tag": m("line"), "qty": MARK_I32}], "at": bson::DateTime::from_millis(MARK_I64)},
            )
            .await;
    }
    let _ = c
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"status": 1})
                .options(
                    mongodb::options::IndexOptions::builder()
                        .partial_filter_expression(doc! {"status": m("partial")})
                        .build(),
                )
                .build(),
        )
        .await;
    for _ in 0..6 {
        let _ = c.find_one(doc! {"name": m("find"), "n": {"$gt": MARK_I32}, "ref": oid}).await;
    }
    run(doc! {"find": "orders", "filter": {"$expr": {"$eq": ["$name", "$$v"]}}, "let": {"v": m("let")},
    "comment": m("comment"), "projection": {"x": {"$literal": m("projected")}},
    "min": {"n": MARK_I32}, "hint": {"n": 1}})
    .await;
    run(doc! {"find": "orders", "filter": {"$where": format!("this.name == '{}'", m("where"))}}).await;
    run(doc! {"find": "orders", "filter": {"name": {"$regex": m("regex"), "$options": "i"}, "tags": {"$all": [m("all")]},
              "n": {"$in": [MARK_I32, MARK_I64]}, "s": {"$nin": [m("nin")]}, "t": {"$ne": m("ne")},
              "b": {"$bitsAllSet": MARK_I32}, "md": {"$mod": [MARK_I32, 1]}, "loc": {"$geoWithin": {"$centerSphere": [[MARK_F64, 1.5], 0.1]}}}})
    .await;
    run(doc! {"count": "orders", "query": {"name": m("count")}}).await;
    run(doc! {"distinct": "orders", "key": "name", "query": {"n": MARK_I32}}).await;
    run(doc! {"findAndModify": "orders", "query": {"name": m("fam")}, "update": {"$set": {"n": MARK_I64, "s": m("fam-set")}}, "new": true}).await;
    run(doc! {"update": "orders", "updates": [
        {"q": {"name": m("update")}, "u": {"$set": {"lines.$[e].qty": MARK_I32, "note": m("set")}, "$push": {"log": m("push")}},
         "arrayFilters": [{"e.tag": m("arrayFilter")}], "upsert": true},
        {"q": {"i": 1}, "u": [{"$set": {"note": {"$concat": ["$name", m("pipeline-update")]}}}]},
        {"q": {"i": 2}, "u": {"name": m("replacement"), "n": MARK_I32}},
    ]})
    .await;
    run(doc! {"delete": "orders", "deletes": [{"q": {"name": m("delete"), "n": MARK_I32}, "limit": 1}]})
        .await;
    run(doc! {"aggregate": "orders", "cursor": {}, "let": {"lv": m("agg-let")}, "comment": m("agg-comment"), "pipeline": [
        {"$match": {"name": m("match"), "n": {"$gte": MARK_I32}}},
        {"$addFields": {"x": m("addFields"), "y": {"$add": ["$n", MARK_I32]}}},
        {"$group": {"_id": "$name", "total": {"$sum": MARK_I32}, "first": {"$first": m("group")}}},
        {"$bucket": {"groupBy": "$total", "boundaries": [0, MARK_I32, MARK_I64], "default": m("bucket")}},
        {"$lookup": {"from": "customers", "let": {"k": "$_id"}, "pipeline": [{"$match": {"tier": m("lookup")}}], "as": "c"}},
        {"$facet": {"a": [{"$match": {"z": m("facet")}}], "b": [{"$limit": 3}]}},
        {"$unionWith": {"coll": "archive", "pipeline": [{"$match": {"old": m("union")}}]}},
        {"$replaceRoot": {"newRoot": {"$mergeObjects": ["$$ROOT", {"r": m("replaceRoot")}]}}},
        {"$redact": {"$cond": [{"$eq": ["$level", m("redact")]}, "$$PRUNE", "$$DESCEND"]}},
        {"$setWindowFields": {"sortBy": {"n": 1}, "output": {"w": {"$sum": MARK_I32, "window": {"documents": [-1, 0]}}}}},
        {"$fill": {"output": {"q": {"value": m("fill")}}}},
        {"$sample": {"size": MARK_I32}},
        {"$limit": MARK_I32},
        {"$project": {"label": {"$concat": ["$name", m("project")]}, "code": {"$function": {"body": format!("function() {{ return '{}'; }}", m("function")), "args": [], "lang": "js"}}}},
    ]})
    .await;
    run(doc! {"aggregate": "orders", "cursor": {}, "pipeline": [
        {"$graphLookup": {"from": "orders", "startWith": m("startWith"), "connectFromField": "a", "connectToField": "b", "as": "g",
                          "restrictSearchWithMatch": {"k": m("restrict")}, "maxDepth": MARK_I32}},
        {"$merge": {"into": "out", "let": {"mv": m("merge-let")}, "whenMatched": [{"$set": {"w": m("whenMatched")}}]}},
    ]})
    .await;
    run(doc! {"aggregate": "orders", "cursor": {}, "pipeline": [
        {"$geoNear": {"near": {"type": "Point", "coordinates": [MARK_F64, 2.5]}, "distanceField": "d", "query": {"q": m("geoNear")}}},
    ]})
    .await;
    run(doc! {"explain": {"find": "orders", "filter": {"name": m("explain")}}, "verbosity": "queryPlanner"})
        .await;
    run(doc! {"explain": {"aggregate": "orders", "pipeline": [{"$match": {"n": MARK_I32}}], "cursor": {}}, "verbosity": "queryPlanner"}).await;
    run(doc! {"find": "orders", "filter": {"$text": {"$search": m("text")}}}).await;
    run(doc! {"find": "orders", "filter": {"name": m("collation")}, "collation": {"locale": "fr", "strength": 2}}).await;
    let ns = c.namespace();
    let _ = client
        .bulk_write(vec![
            mongodb::options::WriteModel::from(
                mongodb::options::InsertOneModel::builder()
                    .namespace(ns.clone())
                    .document(doc! {"name": m("bulk-insert"), "n": MARK_I32})
                    .build(),
            ),
            mongodb::options::UpdateOneModel::builder()
                .namespace(ns.clone())
                .filter(doc! {"name": m("bulk-filter")})
                .update(doc! {"$set": {"n": MARK_I64}})
                .array_filters(vec![Bson::Document(doc! {"x.k": m("bulk-af")})])
                .build()
                .into(),
            mongodb::options::DeleteManyModel::builder()
                .namespace(ns)
                .filter(doc! {"n": {"$lt": MARK_F64}})
                .build()
                .into(),
        ])
        .await;
}

/// Legacy OP_QUERY with marked values, on connections of their own: a command
/// (the old handshake) and a query on a collection.
async fn legacy_op_query(addr: std::net::SocketAddr) {
    for (ns, query) in [
        ("admin.$cmd", doc! {"isMaster": 1, "comment": m("op-query"), "n": MARK_I32}),
        ("leaks.orders", doc! {"name": m("op-query-find"), "n": MARK_I64}),
    ] {
        let mut body = Vec::new();
        query.to_writer(&mut body).unwrap();
        let name = format!("{ns}\0");
        let len = 16 + 4 + name.len() + 8 + body.len();
        let mut msg = Vec::new();
        for n in [len as i32, 7, 0, 2004, 0] {
            msg.extend_from_slice(&n.to_le_bytes());
        }
        msg.extend_from_slice(name.as_bytes());
        msg.extend_from_slice(&0i32.to_le_bytes());
        msg.extend_from_slice(&(-1i32).to_le_bytes());
        msg.extend_from_slice(&body);
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(&msg).await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_marked_value_reaches_any_report_endpoint_or_log() {
    let upstream = Upstream::start();
    let d = std::env::temp_dir().join(format!("mongotap-literals-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let (port, admin) = (free_port(), free_port());
    let log = std::fs::File::create(d.join("mongotap.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongotap"))
        .args(["proxy", "--listen", &format!("127.0.0.1:{port}"), "--upstream", &upstream.addr()])
        .args(["--admin", &format!("127.0.0.1:{admin}"), "--explain"])
        .args(["json", "md", "html"].map(|f| format!("--report-{f}={}", d.join(format!("r.{f}")).display())))
        .env("RUST_LOG", "trace")
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr).await;
    let client = Client::with_uri_str(uri(addr, "leak-check")).await.unwrap();
    workload(&client).await;
    legacy_op_query(addr).await;
    client.shutdown().await;
    // Let the side connection read the indexes and run its explains.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let admin = format!("127.0.0.1:{admin}");
    let mut outputs: Vec<(String, String)> = Vec::new();
    for path in ["/metrics", "/report.json", "/report.html"] {
        outputs.push((format!("GET {path}"), http_get(&admin, path).await));
    }
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());
    for f in ["r.json", "r.md", "r.html", "mongotap.log"] {
        outputs.push((f.to_owned(), std::fs::read_to_string(d.join(f)).unwrap()));
    }

    // The outputs are real: the workload is in them, and the log is verbose.
    let report: serde_json::Value = serde_json::from_str(&outputs[3].1).unwrap();
    let rows = report["access_patterns"].as_array().unwrap();
    assert!(rows.len() >= 15, "{} rows", rows.len());
    for command in
        ["find", "aggregate", "update", "bulkWrite", "findAndModify", "explain", "isMaster", "OP_QUERY"]
    {
        assert!(rows.iter().any(|r| r["command"] == command), "no {command} row");
    }
    let log_text = &outputs.last().unwrap().1;
    assert!(
        log_text.contains("DEBUG") && log_text.contains("connection closed"),
        "the log is at debug level"
    );
    assert!(!log_text.contains('\u{1b}'), "no colour codes in a log file");

    let mut hits = Vec::new();
    for (name, text) in &outputs {
        for mark in marks() {
            if let Some(at) = text.find(mark) {
                let from = text[..at].char_indices().rev().nth(80).map_or(0, |(i, _)| i);
                hits.push(format!("{name}: {mark} in ...{}", &text[from..(at + 40).min(text.len())]));
            }
        }
    }
    assert!(hits.is_empty(), "marked values reached an output:\n{}", hits.join("\n"));
}
