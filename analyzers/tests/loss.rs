//! Loss made visible: what the tap dropped reaches the report as connections with
//! holes, rows whose counts are lower bounds (with an estimate of what they miss),
//! and words; a lost close does not keep a connection's state; a full connection
//! table and the cursor map are bounded and counted.

use bson::doc;
use mongotap_analyzers::event::{Lost, TapEvent};
use mongotap_analyzers::exchange::Limits;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{Report, RunFacts};
use mongotap_analyzers::script::{batch, Script};
use mongotap_analyzers::table::TableLimits;

#[test]
fn a_gap_marks_rows_as_lower_bounds_and_names_the_connections_that_lost_events() {
    let mut s = Script::new();
    let web = s.connect("10.0.0.7:50001", "web", "PyMongo 4.20.1");
    let jobs = s.connect("10.0.0.8:50002", "jobs", "PyMongo 4.20.1");
    for i in 0..100 {
        s.find(web, "shop.orders", doc! {"customerId": i}, vec![doc! {"_id": i}]);
    }
    // The analysis fell behind: 20 events of `web` were dropped, its close among them.
    s.gap_on(&[Lost { conn: web, events: 20, closed: true }]);
    for i in 0..50 {
        s.find(jobs, "shop.invoices", doc! {"status": i}, vec![]);
    }
    let p = s.run();
    assert_eq!(p.open_connections(), 1, "the connection whose close was lost is let go of");
    let r = Report::build(&p, RunFacts { events_dropped: 20 });

    assert_eq!(r.traffic.lossy_connections, 1);
    assert_eq!(r.traffic.lossy.len(), 1);
    assert_eq!((r.traffic.lossy[0].connection, r.traffic.lossy[0].events_dropped), (web, 20));
    assert_eq!(r.traffic.lossy[0].app.as_deref(), Some("web"));

    let row = |ns: &str| r.access_patterns.iter().find(|p| p.namespace == ns).unwrap();
    let orders = row("shop.orders");
    assert!(orders.count_lower_bound, "orders were seen while events were dropped");
    // 20 events dropped are about 10 operations, shared by the rows seen before the
    // gap: 100 finds and the hello.
    assert_eq!(orders.missed_estimate, 10);
    assert_eq!(orders.count_text(), format!("≥100 (~{} missed)", orders.missed_estimate));
    let invoices = row("shop.invoices");
    assert!(!invoices.count_lower_bound && invoices.missed_estimate == 0, "seen after the gap: exact");
    assert_eq!(invoices.count_text(), "50");

    let words = r.loss_in_words().expect("the loss is said in words");
    assert!(words.contains("skipped 20 of"), "{words}");
    assert!(words.contains("on 1 of 2 connections"), "{words}");
    assert!(words.contains("#1 (web) 20"), "{words}");
    assert!(words.contains("rows are lower bounds"), "{words}");
    for text in
        [mongotap_analyzers::report::markdown::render(&r), mongotap_analyzers::report::html::render(&r)]
    {
        assert!(text.contains("Incomplete data."), "every format says it");
        assert!(text.contains("≥100"), "the row is marked in every format");
    }
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["access_patterns"][0]["count_lower_bound"], true);
    assert!(json["access_patterns"][1].get("count_lower_bound").is_none(), "absent when exact");
}

#[test]
fn without_loss_nothing_is_marked() {
    let mut s = Script::new();
    let web = s.connect("10.0.0.7:50001", "web", "PyMongo 4.20.1");
    s.find(web, "shop.orders", doc! {"customerId": 1}, vec![]);
    let r = Report::build(&s.run(), RunFacts::default());
    assert!(r.loss_in_words().is_none());
    assert!(r.access_patterns.iter().all(|p| !p.count_lower_bound && p.missed_estimate == 0));
}

#[test]
fn a_full_connection_table_is_counted_and_said() {
    let limits = Limits { max_connections: 2, ..Limits::default() };
    let mut p = Pipeline::new(limits, TableLimits::default());
    let mut s = Script::new();
    let conns: Vec<_> =
        (0..4).map(|i| s.connect(&format!("10.0.0.{i}:5000"), "web", "PyMongo 4.20.1")).collect();
    for c in &conns {
        s.find(*c, "shop.orders", doc! {"customerId": 1}, vec![]);
    }
    s.run_into(&mut p);
    let r = Report::build(&p, RunFacts::default());
    assert_eq!(r.traffic.untracked_connections, 2);
    assert_eq!(r.traffic.untracked_messages, 8, "hello and find, request and reply, on each");
    let words = r.loss_in_words().unwrap();
    assert!(words.contains("2 connections were not analysed"), "{words}");
}

#[test]
fn cursors_end_on_kill_cursors_on_exhaustion_and_when_idle() {
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "web", "PyMongo 4.20.1");
    let docs = |n: i32| (0..n).map(|i| doc! {"_id": i}).collect::<Vec<_>>();
    // Three cursors open: one killed, one exhausted by its getMore, one left idle.
    for (cursor, status) in [(11_i64, "a"), (12, "b"), (13, "c")] {
        s.exchange(
            c,
            doc! {"find": "orders", "filter": {"status": status}, "batchSize": 2, "$db": "shop"},
            batch("shop.orders", docs(2), cursor, true),
        );
    }
    s.exchange(
        c,
        doc! {"killCursors": "orders", "cursors": [11_i64], "$db": "shop"},
        doc! {"cursorsKilled": [11_i64], "ok": 1.0},
    );
    s.exchange(
        c,
        doc! {"getMore": 12_i64, "collection": "orders", "$db": "shop"},
        batch("shop.orders", docs(1), 0, false),
    );
    // Eleven quiet minutes (the server's idle cursor timeout is ten), then traffic.
    s.wait_ms(11 * 60 * 1000);
    s.find(c, "shop.orders", doc! {"status": "d"}, vec![]);
    let p = s.run();
    let r = Report::build(&p, RunFacts::default());
    let cur = &r.traffic.cursors;
    assert_eq!((cur.killed, cur.expired, cur.open, cur.untracked), (1, 1, 0, 0), "{cur:?}");
    let get_more = r.access_patterns.iter().find(|p| p.command == "getMore").unwrap();
    assert!(get_more.cursor_of.is_some(), "the getMore is attributed to its find");
}

#[test]
fn a_full_cursor_map_is_counted() {
    let limits = TableLimits { max_cursors: 1, ..TableLimits::default() };
    let mut p = Pipeline::new(Limits::default(), limits);
    let mut s = Script::new();
    let c = s.connect("10.0.0.7:50001", "web", "PyMongo 4.20.1");
    for cursor in [21_i64, 22] {
        s.exchange(
            c,
            doc! {"find": "orders", "filter": {}, "batchSize": 1, "$db": "shop"},
            batch("shop.orders", vec![doc! {"_id": 1}], cursor, true),
        );
    }
    s.push(TapEvent::Closed { conn: c, at: s.now() });
    s.run_into(&mut p);
    assert_eq!(p.table().cursor_stats().untracked, 1);
}
