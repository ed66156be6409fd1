//! The mongod log reader against the server's documented log forms.

use super::*;
use mongotap_wire::{Command, CommandReply, Message};

const FIXTURE: &str = include_str!("../../../tests/fixtures/mongod/slow_queries.log");
/// 2024-05-02T10:00:00Z, the fixture's first second.
const T0: Micros = 1_714_644_000_000_000;

fn lines() -> Vec<LineKind> {
    FIXTURE.lines().map(parse_line).collect()
}

fn entry(kind: &LineKind) -> &LogEntry {
    match kind {
        LineKind::Entry(e) => e,
        other => panic!("not an entry: {other:?}"),
    }
}

fn decode(ev: &TapEvent) -> Message {
    let TapEvent::Message { frame, .. } = ev else { panic!("not a message: {ev:?}") };
    Message::decode(frame).unwrap()
}

#[test]
fn classifies_every_line() {
    let label = |k: &LineKind| match k {
        LineKind::Entry(_) => "entry",
        LineKind::Skipped(s) if s.reason == SkipReason::TruncatedCommand => "truncated",
        LineKind::Skipped(_) => "summary",
        LineKind::Client(_) => "client",
        LineKind::Ended { .. } => "ended",
        LineKind::NotAnOperation => "other",
        LineKind::Malformed(_) => "malformed",
    };
    let got: Vec<&str> = lines().iter().map(label).collect();
    #[rustfmt::skip]
    let want = [
        "other", "client",                                  // accepted, metadata
        "entry", "entry", "entry", "entry", "entry",        // find x3, getMore, aggregate
        "entry", "summary", "entry",                        // update: statement, summary, in body
        "entry", "entry", "entry",                          // insert, count, distinct
        "truncated", "truncated",                           // maxLogSizeKB, $truncated
        "entry", "entry",                                   // failed find, server thread
        "malformed", "ended", "malformed",                  // text line, ended, torn tail
    ];
    assert_eq!(got, want);
}

#[test]
fn reads_a_find_with_its_plan_counters_and_extended_json() {
    let kinds = lines();
    let e = entry(&kinds[2]);
    assert_eq!((e.at, e.started_at, e.duration_ms), (T0 + 1_250_000, T0 + 1_250_000 - 143_000, 143));
    assert_eq!((e.ctx.as_str(), e.conn, e.app_name.as_deref()), ("conn12", Some(12), Some("shop-api")));
    assert_eq!(
        (e.op_type.as_str(), e.namespace.as_str(), e.command_name.as_str()),
        ("command", "shop.orders", "find")
    );
    assert_eq!(e.plan_summary.as_deref(), Some("IXSCAN { customerId: 1 }"));
    assert_eq!(
        (e.keys_examined, e.docs_examined, e.nreturned, e.reslen),
        (Some(1480), Some(1480), Some(20), Some(9120))
    );
    assert!(e.has_sort_stage && e.cursor_exhausted && e.error.is_none());
    assert_eq!(e.remote, Some("10.0.0.7:50412".parse().unwrap()));
    assert_eq!(e.query_hash.as_deref(), Some("3C2B1A90"));
    let c = e.command();
    assert_eq!(c.keys().next().map(String::as_str), Some("find"), "key order is kept");
    assert_eq!(c.get_str("$db").unwrap(), "shop");
    assert!(matches!(c.get_document("filter").unwrap().get("customerId"), Some(Bson::ObjectId(_))));
    let lsid = c.get_document("lsid").unwrap().get("id");
    assert!(
        matches!(lsid, Some(Bson::Binary(b)) if b.subtype == bson::spec::BinarySubtype::Uuid),
        "{lsid:?}"
    );
    let cluster = c.get_document("$clusterTime").unwrap();
    let ts = bson::Timestamp { time: 1_714_644_000, increment: 3 };
    assert_eq!(cluster.get("clusterTime"), Some(&Bson::Timestamp(ts)));
    let hash = cluster.get_document("signature").unwrap().get("hash");
    assert!(
        matches!(hash, Some(Bson::Binary(b)) if b.bytes.len() == 20 && b.subtype == bson::spec::BinarySubtype::Generic),
        "subType \"0\" is read: {hash:?}"
    );
    let scan = entry(&kinds[3]);
    assert_eq!(
        (scan.plan_summary.as_deref(), scan.docs_examined, scan.nreturned),
        (Some("COLLSCAN"), Some(232_922), Some(1))
    );
}

#[test]
fn reads_cursors_their_origin_and_pipelines() {
    let kinds = lines();
    let find = entry(&kinds[4]);
    assert_eq!(
        (find.cursor_id, find.cursor_exhausted, find.conn),
        (Some(8_471_834_917_234), false, Some(13))
    );
    let created = find.command().get_document("filter").unwrap().get_document("createdAt").unwrap();
    assert_eq!(created.get("$gte"), Some(&Bson::DateTime(bson::DateTime::from_millis(1_711_929_600_000))));
    let more = entry(&kinds[5]);
    assert_eq!(more.command_name, "getMore");
    assert_eq!(more.command().get("getMore"), Some(&Bson::Int64(8_471_834_917_234)));
    assert_eq!(more.originating_command.as_ref().unwrap().get_str("find").unwrap(), "orders");
    assert!(more.cursor_exhausted);
    let agg = entry(&kinds[6]);
    let pipeline = agg.command().get_array("pipeline").unwrap();
    let stages: Vec<&str> =
        pipeline.iter().filter_map(|s| s.as_document()?.keys().next().map(String::as_str)).collect();
    assert_eq!(stages, ["$match", "$lookup"]);
    assert_eq!(
        (agg.plan_summary.as_deref(), agg.docs_examined, agg.nreturned),
        (Some("COLLSCAN"), Some(50_000), Some(37))
    );
}

#[test]
fn reads_writes_and_leaves_out_what_cannot_be_replayed() {
    let kinds = lines();
    let statement = entry(&kinds[7]);
    assert_eq!((statement.op_type.as_str(), statement.command_name.as_str()), ("update", "update"));
    let c = statement.command();
    assert_eq!((c.get_str("update").unwrap(), c.get_str("$db").unwrap()), ("orders", "shop"));
    assert!(c.get_array("updates").unwrap()[0].as_document().unwrap().contains_key("q"));
    assert_eq!(
        (statement.n_matched, statement.n_modified, statement.n_upserted),
        (Some(1), Some(1), Some(0))
    );
    let LineKind::Skipped(summary) = &kinds[8] else { panic!("{:?}", kinds[8]) };
    assert_eq!((summary.reason, summary.command_name.as_deref()), (SkipReason::WriteSummary, Some("update")));
    assert_eq!(entry(&kinds[9]).command().get_array("updates").unwrap().len(), 1);
    let insert = entry(&kinds[10]);
    assert_eq!(
        (insert.command_name.as_str(), insert.namespace.as_str(), insert.n_inserted),
        ("insert", "shop.events", Some(3))
    );
    let count = entry(&kinds[11]);
    assert_eq!((count.command_name.as_str(), count.at), ("count", T0 + 9_000_000), "-05:00 is an offset");
    assert_eq!(count.plan_summary.as_deref(), Some("COUNT_SCAN { status: 1 }"));
    assert_eq!(entry(&kinds[12]).command_name, "distinct");
    for (i, name) in [(13, "find"), (14, "aggregate")] {
        let LineKind::Skipped(s) = &kinds[i] else { panic!("line {}: {:?}", i + 1, kinds[i]) };
        assert_eq!(
            (s.reason, s.command_name.as_deref(), s.namespace.as_str()),
            (SkipReason::TruncatedCommand, Some(name), "shop.orders")
        );
    }
    let failed = entry(&kinds[15]);
    assert_eq!(failed.error, Some(LogError { code: Some(50), name: Some("MaxTimeMSExpired".into()) }));
    let internal = entry(&kinds[16]);
    assert_eq!((internal.conn, internal.ctx.as_str()), (None, "LogicalSessionCacheReap"));
    assert!(matches!(kinds[17], LineKind::Malformed("not JSON")));
    assert!(matches!(kinds[18], LineKind::Ended { conn: 13, at, .. } if at == T0 + 16_000_000));
    assert!(matches!(kinds[19], LineKind::Malformed("cut off or invalid JSON")));
}

#[test]
fn builds_the_request_and_a_reply_of_empty_documents() {
    let kinds = lines();
    let find = entry(&kinds[4]);
    let events = to_events(find, 13, 7);
    let (TapEvent::Message { conn, dir, at, .. }, TapEvent::Message { dir: back, at: answered, .. }) =
        (&events[0], &events[1])
    else {
        panic!("{events:?}")
    };
    assert_eq!((*conn, *dir, *at), (13, Direction::ToServer, find.started_at));
    assert_eq!((*back, *answered), (Direction::ToClient, find.at));
    let request = decode(&events[0]);
    let cmd = Command::from_message(&request).unwrap();
    assert_eq!((cmd.name, cmd.namespace()), ("find", "shop.orders".to_owned()));
    let reply = decode(&events[1]);
    assert_eq!((request.header.request_id, reply.header.request_id, reply.header.response_to), (7, 8, 7));
    let s = CommandReply::from_message(&reply).unwrap().summary();
    assert_eq!((s.ok, s.cursor_id, s.batch_len), (true, Some(8_471_834_917_234), 101));
    let more = to_events(entry(&kinds[5]), 13, 9);
    let s = CommandReply::from_message(&decode(&more[1])).unwrap().summary();
    assert_eq!((s.cursor_id, s.batch_len), (Some(0), 640), "exhausted: id 0, a next batch");
    let failed = to_events(entry(&kinds[15]), 13, 11);
    let s = CommandReply::from_message(&decode(&failed[1])).unwrap().summary();
    assert_eq!((s.ok, s.error_code, s.batch_len), (false, Some(50), 0));
    let insert = to_events(entry(&kinds[10]), 12, 13);
    assert_eq!(CommandReply::from_message(&decode(&insert[1])).unwrap().n(), Some(3));
}

#[test]
fn a_log_feeds_the_pipeline_as_traffic_would() {
    let mut pipeline = Pipeline::default();
    let mut reader = LogReader::new();
    reader.feed(FIXTURE.as_bytes(), &mut pipeline).unwrap();
    let s = reader.stats();
    assert_eq!(
        (
            s.lines,
            s.operations,
            s.not_operations,
            s.malformed,
            s.truncated_commands,
            s.write_summaries,
            s.internal
        ),
        (20, 11, 3, 2, 2, 1, 1)
    );
    assert_eq!((s.handshakes, s.connections_ended), (2, 1), "conn12 by its metadata, conn13 by its appName");
    assert_eq!(pipeline.operations(), 13, "11 operations and 2 handshakes");
    let x = pipeline.exchange_stats();
    assert_eq!((x.parse_errors, x.unpaired_replies, x.unanswered, x.connections), (0, 0, 0, 1));
    let rows = pipeline.table().rows();
    let more = rows.iter().find(|r| r.command == "getMore").unwrap();
    let origin = rows.iter().find(|r| Some(&r.shape_id) == more.cursor_of.as_ref()).expect("its find's");
    assert_eq!((origin.command.as_str(), origin.docs_returned, more.docs_returned), ("find", 101, 640));
    assert!(more.apps.contains_key("report-job"), "{:?}", more.apps);
    assert!(rows.iter().any(|r| r.command == "aggregate" && r.apps.contains_key("shop-api")));
    assert_eq!(rows.iter().filter(|r| r.command == "update").map(|r| r.count).sum::<u64>(), 2);
    assert!(rows.iter().any(|r| r.namespace == "shop.events" && r.command == "insert"));
    assert!(rows.iter().any(|r| r.errors.get(&50) == Some(&1)));
    assert!(rows.iter().all(|r| r.namespace != "config.transactions"));

    let (mut all, mut reader) = (Pipeline::default(), LogReader::new());
    reader.include_internal = true;
    reader.feed(FIXTURE.as_bytes(), &mut all).unwrap();
    assert_eq!((reader.stats().operations, reader.stats().internal), (12, 0));
    assert!(all.table().rows().iter().any(|r| r.namespace == "config.transactions"));
}

#[test]
fn reads_timestamps_in_every_documented_form() {
    let t0 = T0 as i64;
    assert_eq!(parse_timestamp("2024-05-02T10:00:00.000+00:00"), Some(t0));
    assert_eq!(parse_timestamp("2024-05-02T05:00:00.000-05:00"), Some(t0));
    assert_eq!(parse_timestamp("2024-05-02T05:00:00.000-0500"), Some(t0));
    assert_eq!(parse_timestamp("2024-05-02T10:00:00.123456Z"), Some(t0 + 123_456));
    assert_eq!(parse_timestamp("2024-05-02T10:00:00.5Z"), Some(t0 + 500_000));
    assert_eq!(parse_timestamp("2000-02-29T12:00:00Z"), Some(951_825_600_000_000));
    assert_eq!(parse_timestamp("1969-12-31T23:59:59Z"), Some(-1_000_000));
    assert_eq!(parse_timestamp("2024-13-02T10:00:00Z"), None);
    assert_eq!(parse_timestamp("2024-05-02T10:00:00+5"), None);
    assert_eq!(parse_timestamp("yesterday"), None);
    assert_eq!(date_micros(&serde_json::json!({"$date": {"$numberLong": "1714644000000"}})), Some(T0));
    assert_eq!(date_micros(&serde_json::json!({"$date": "1969-12-31T23:59:59Z"})), None);
}

#[test]
fn converts_relaxed_extended_json() {
    let Value::Object(m) = serde_json::json!({
        "i": 1,
        "l": 8_000_000_000_i64,
        "d": 1.5,
        "nl": {"$numberLong": "7"},
        "bin": {"$binary": {"base64": "AQID", "subType": "80"}},
        "legacy": {"$binary": "AQID", "$type": "0"},
        "old": {"$date": "1969-12-31T23:59:59Z"},
        "bad": {"$date": "not a date"},
        "op": {"$in": [1, 2]},
        "re": {"$regularExpression": {"pattern": "^a", "options": "i"}},
    }) else {
        unreachable!()
    };
    let d = to_document(m);
    assert_eq!(
        (d.get("i"), d.get("l"), d.get("d")),
        (Some(&Bson::Int32(1)), Some(&Bson::Int64(8_000_000_000)), Some(&Bson::Double(1.5)))
    );
    assert_eq!(d.get("nl"), Some(&Bson::Int64(7)));
    assert!(
        matches!(d.get("bin"), Some(Bson::Binary(b)) if b.bytes == [1, 2, 3] && u8::from(b.subtype) == 0x80)
    );
    assert!(matches!(d.get("legacy"), Some(Bson::Binary(b)) if b.bytes == [1, 2, 3]));
    assert_eq!(d.get("old"), Some(&Bson::DateTime(bson::DateTime::from_millis(-1000))));
    assert!(matches!(d.get("bad"), Some(Bson::String(s)) if s.contains("not a date")));
    assert!(matches!(d.get("op"), Some(Bson::Document(op)) if op.get_array("$in").unwrap().len() == 2));
    assert!(matches!(d.get("re"), Some(Bson::RegularExpression(_))));
    let nul = r#"{"t":{"$date":"2024-05-02T10:00:00.000+00:00"},"s":"I","c":"COMMAND","id":51803,"ctx":"conn1","msg":"Slow query","attr":{"type":"command","ns":"a.b","command":{"find":"b","filter":{"x\u0000y":1},"$db":"a"},"durationMillis":5}}"#;
    assert!(matches!(parse_line(nul), LineKind::Malformed("a command BSON cannot hold")));
}

#[test]
fn cuts_lines_over_the_limit() {
    let mut reader = &b"0123456789abc\nnext\nlast"[..];
    let mut buf = Vec::new();
    assert_eq!(read_capped(&mut reader, &mut buf, 8).unwrap(), 14, "the rest of the line is skipped");
    assert_eq!(buf, b"01234567");
    buf.clear();
    assert_eq!(read_capped(&mut reader, &mut buf, 8).unwrap(), 5);
    assert_eq!(buf, b"next\n");
    buf.clear();
    assert_eq!(read_capped(&mut reader, &mut buf, 8).unwrap(), 4, "a last line without its newline");
    buf.clear();
    assert_eq!(read_capped(&mut reader, &mut buf, 8).unwrap(), 0);
}
