//! Scripted conversations, for tests and benchmarks: clients connect, send commands
//! and get replies, as the tap would see them, in real OP_MSG frames. A test reads
//! like the traffic it describes:
//!
//! ```
//! use bson::doc;
//! use mongotap_analyzers::script::Script;
//!
//! let mut s = Script::new();
//! let web = s.connect("10.0.0.7:50001", "blog", "PyMongo 4.20.1");
//! s.find(web, "blog.posts", doc! {}, (0..3).map(|i| doc! {"_id": i, "authorId": i}).collect());
//! for i in 0..3 {
//!     s.find(web, "blog.users", doc! {"_id": i}, vec![doc! {"_id": i, "name": "x"}]);
//! }
//! let pipeline = s.run();
//! assert_eq!(pipeline.operations(), 5);
//! ```

use bson::{doc, Document};

use mongotap_wire::{Frame, OpMsg};

use crate::event::{ConnId, Direction, Lost, Micros, TapEvent};
use crate::pipeline::Pipeline;

/// A conversation being written.
pub struct Script {
    events: Vec<TapEvent>,
    at: Micros,
    next_conn: ConnId,
    next_id: i32,
    /// Time from a request to its reply, in microseconds.
    pub latency_us: u64,
    /// Time between one reply and the next request, in microseconds.
    pub think_us: u64,
}

impl Default for Script {
    fn default() -> Self {
        Script::new()
    }
}

impl Script {
    /// An empty conversation starting at a fixed time (2026-12-02T00:00:00Z).
    pub fn new() -> Script {
        Script {
            events: Vec::new(),
            at: 1_796_169_600_000_000,
            next_conn: 1,
            next_id: 1,
            latency_us: 300,
            think_us: 100,
        }
    }

    /// The script's clock.
    pub fn now(&self) -> Micros {
        self.at
    }

    /// Lets `ms` milliseconds pass.
    pub fn wait_ms(&mut self, ms: u64) -> &mut Script {
        self.at += ms * 1000;
        self
    }

    /// A client at `addr` (`ip:port`) connects and says hello with its app name and
    /// driver (`name version`, as in `PyMongo|MongoEngine 4.20.1|0.29.3`).
    pub fn connect(&mut self, addr: &str, app: &str, driver: &str) -> ConnId {
        let conn = self.next_conn;
        self.next_conn += 1;
        let client = addr.parse().expect("an ip:port");
        self.events.push(TapEvent::Opened { conn, client, at: self.at });
        let (name, version) = driver.split_once(' ').unwrap_or((driver, ""));
        self.exchange(
            conn,
            doc! {"hello": 1, "client": {"application": {"name": app}, "driver": {"name": name, "version": version}}, "$db": "admin"},
            doc! {"isWritablePrimary": true, "maxWireVersion": 21, "ok": 1.0},
        );
        conn
    }

    /// A command on `conn` and its reply.
    pub fn exchange(&mut self, conn: ConnId, request: Document, reply: Document) -> &mut Script {
        let (rq, rp) = (self.next_id, self.next_id + 1);
        self.next_id += 2;
        let frame = |d: &Document, id, to| {
            Frame::from_bytes(OpMsg::new(mongotap_wire::Document::from_doc(d)).encode(id, to))
                .expect("a well-formed message")
        };
        self.events.push(TapEvent::Message {
            conn,
            dir: Direction::ToServer,
            at: self.at,
            frame: frame(&request, rq, 0),
        });
        self.at += self.latency_us;
        self.events.push(TapEvent::Message {
            conn,
            dir: Direction::ToClient,
            at: self.at,
            frame: frame(&reply, rp, rq),
        });
        self.at += self.think_us;
        self
    }

    /// `find` on `ns` (`db.collection`) with `filter`, answered with `docs` in one batch.
    pub fn find(&mut self, conn: ConnId, ns: &str, filter: Document, docs: Vec<Document>) -> &mut Script {
        let (db, coll) = ns.split_once('.').expect("db.collection");
        self.exchange(conn, doc! {"find": coll, "filter": filter, "$db": db}, batch(ns, docs, 0, true))
    }

    /// `find` with a projection and a limit, as drivers send `find_one`.
    pub fn find_one(
        &mut self,
        conn: ConnId,
        ns: &str,
        filter: Document,
        doc: Option<Document>,
    ) -> &mut Script {
        let (db, coll) = ns.split_once('.').expect("db.collection");
        self.exchange(
            conn,
            doc! {"find": coll, "filter": filter, "limit": 1, "singleBatch": true, "$db": db},
            batch(ns, doc.into_iter().collect(), 0, true),
        )
    }

    /// `aggregate` on `ns`, answered with `docs`.
    pub fn aggregate(
        &mut self,
        conn: ConnId,
        ns: &str,
        pipeline: Vec<Document>,
        docs: Vec<Document>,
    ) -> &mut Script {
        let (db, coll) = ns.split_once('.').expect("db.collection");
        self.exchange(
            conn,
            doc! {"aggregate": coll, "pipeline": pipeline, "cursor": {}, "$db": db},
            batch(ns, docs, 0, true),
        )
    }

    /// An update of one statement.
    pub fn update(&mut self, conn: ConnId, ns: &str, filter: Document, update: Document) -> &mut Script {
        let (db, coll) = ns.split_once('.').expect("db.collection");
        self.exchange(
            conn,
            doc! {"update": coll, "updates": [{"q": filter, "u": update}], "$db": db},
            doc! {"n": 1, "nModified": 1, "ok": 1.0},
        )
    }

    /// The tap dropped `dropped` events just now.
    pub fn gap(&mut self, dropped: u64) -> &mut Script {
        self.events.push(TapEvent::Gap { at: self.at, dropped, lost: Vec::new() });
        self
    }

    /// The tap dropped these connections' events just now.
    pub fn gap_on(&mut self, lost: &[Lost]) -> &mut Script {
        let dropped = lost.iter().map(|l| l.events).sum();
        self.events.push(TapEvent::Gap { at: self.at, dropped, lost: lost.to_vec() });
        self
    }

    /// Any event, as the tap would hand it over.
    pub fn push(&mut self, ev: TapEvent) -> &mut Script {
        self.events.push(ev);
        self
    }

    /// The connection ends.
    pub fn close(&mut self, conn: ConnId) -> &mut Script {
        self.events.push(TapEvent::Closed { conn, at: self.at });
        self
    }

    /// The events written so far.
    pub fn events(&self) -> &[TapEvent] {
        &self.events
    }

    /// Feeds the conversation to a default pipeline.
    pub fn run(self) -> Pipeline {
        let mut p = Pipeline::default();
        self.run_into(&mut p);
        p
    }

    /// Feeds the conversation to `p`, then lets every open parent time out.
    pub fn run_into(self, p: &mut Pipeline) {
        let end = self.at;
        for ev in self.events {
            p.feed(ev);
        }
        p.expire(end + 3_600_000_000);
    }
}

/// A cursor reply holding `docs` (`firstBatch` or `nextBatch`).
pub fn batch(ns: &str, docs: Vec<Document>, cursor: i64, first: bool) -> Document {
    let key = if first { "firstBatch" } else { "nextBatch" };
    doc! {"cursor": {"id": cursor, "ns": ns, key: docs}, "ok": 1.0}
}
