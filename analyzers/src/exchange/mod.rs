//! Pairing requests with replies into [`Operation`]s.
//!
//! A reply's `responseTo` names its request's `requestID`. A `moreToCome` request
//! (w:0) gets no reply and no pending entry. An exhaust stream answers one request
//! with many replies, each next one answering the previous reply's `requestID`, so
//! the pending entry is re-keyed on every streamed reply. Pending entries are
//! bounded per connection and expire, so a lost reply never grows memory.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use bson::RawDocument;
use mongotap_wire::{Command, CommandReply, Frame, Message, MsgFlags, Op, OpCode, RequestId};

use crate::event::{ConnId, Direction, Micros, TapEvent};
use crate::operation::{ConnInfo, Operation};

mod names;
use names::Names;

/// Bounds on the correlator's memory.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests awaiting a reply, per connection; the oldest is evicted beyond it.
    /// Drivers run one operation at a time per connection (exhaust streams are
    /// re-keyed, not added), so a handful is plenty.
    pub max_pending_per_conn: usize,
    /// A request unanswered this long is forgotten.
    pub pending_ttl_us: u64,
    /// Connections tracked at once; further ones are not analysed.
    pub max_connections: usize,
    /// A connection with no event for this long is forgotten (its close was lost).
    pub idle_conn_ttl_us: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pending_per_conn: 16,
            pending_ttl_us: 10 * 60 * 1_000_000,
            max_connections: 100_000,
            idle_conn_ttl_us: 24 * 3600 * 1_000_000,
        }
    }
}

/// What the correlator counted besides operations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Connections seen.
    pub connections: u64,
    /// Request messages seen (client to server), decodable or not.
    pub requests: u64,
    /// Reply messages seen (server to client).
    pub replies: u64,
    /// Messages that failed to decode; each stops the analysis of its connection.
    pub parse_errors: u64,
    /// The last parse error, for the report.
    pub last_parse_error: Option<String>,
    /// Messages in legacy or unknown opcodes (counted, not analysed), by opcode name.
    pub legacy_messages: BTreeMap<String, u64>,
    /// Messages that arrived compressed, by compressor name.
    pub compressed_messages: BTreeMap<String, u64>,
    /// Messages too large to keep for analysis.
    pub too_large: u64,
    /// Replies whose request was never seen or was already forgotten.
    pub unpaired_replies: u64,
    /// Requests forgotten unanswered (expired, evicted, or the connection closed).
    pub unanswered: u64,
    /// Messages on connections whose analysis had stopped.
    pub skipped_after_error: u64,
    /// Holes in the events: the tap dropped some (the analysis was behind).
    pub gaps: u64,
    /// Connections that lost events, by id (bounded by [`MAX_LOSSY_CONNS`]).
    pub lossy: BTreeMap<ConnId, LossyConn>,
    /// Connections that lost events, all of them (also those beyond the bound).
    pub lossy_connections: u64,
    /// Connections not analysed because the state table was full.
    pub untracked_connections: u64,
    /// Messages of those connections, forwarded and not analysed.
    pub untracked_messages: u64,
}

/// Connections [`ExchangeStats::lossy`] names; the rest are only counted.
pub const MAX_LOSSY_CONNS: usize = 1024;

/// A connection that lost events: who it was and how many it lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LossyConn {
    /// Events the tap dropped on it.
    pub events: u64,
    /// Its application name, when its handshake was seen.
    pub app: Option<String>,
}

#[derive(Clone)]
struct Pending {
    request: Option<Message>,
    command: Arc<str>,
    namespace: Arc<str>,
    sent_at: Micros,
    request_bytes: u64,
    awaited: bool,
    streamed: bool,
    sensitive: bool,
    legacy_query: bool,
    /// For an exhaust stream: the other key this entry is also filed under.
    alias: Option<RequestId>,
}

struct ConnState {
    info: Arc<ConnInfo>,
    /// Whether the tap has dropped events of this connection.
    lossy: bool,
    pending: HashMap<RequestId, Pending>,
    analysing: bool,
    last_seen: Micros,
}

impl ConnState {
    fn new(info: Arc<ConnInfo>, at: Micros) -> ConnState {
        ConnState { info, lossy: false, pending: HashMap::default(), analysing: true, last_seen: at }
    }
}

/// Turns a stream of tap events into operations.
#[derive(Default)]
pub struct Correlator {
    conns: HashMap<ConnId, ConnState>,
    limits: Limits,
    stats: ExchangeStats,
    names: Names,
}

impl Correlator {
    /// A correlator with the given bounds.
    pub fn new(limits: Limits) -> Correlator {
        Correlator {
            conns: HashMap::default(),
            limits,
            stats: ExchangeStats::default(),
            names: Names::default(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> &ExchangeStats {
        &self.stats
    }

    /// Connections currently tracked.
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// Who is on connection `conn`, if it is tracked.
    pub fn conn_info(&self, conn: ConnId) -> Option<&Arc<ConnInfo>> {
        self.conns.get(&conn).map(|s| &s.info)
    }

    /// Feeds one event; completed operations go to `out`.
    pub fn on_event(&mut self, ev: TapEvent, out: &mut dyn FnMut(Operation)) {
        match ev {
            TapEvent::Opened { conn, client, at } => {
                self.stats.connections += 1;
                if self.conns.len() >= self.limits.max_connections {
                    self.stats.untracked_connections += 1;
                } else {
                    let info =
                        Arc::new(ConnInfo { id: conn, client: Some(client), ..ConnInfo::default() }.keyed());
                    self.conns.insert(conn, ConnState::new(info, at));
                }
            }
            TapEvent::Closed { conn, .. } => {
                if let Some(state) = self.conns.remove(&conn) {
                    self.stats.unanswered += state.pending.len() as u64;
                }
            }
            TapEvent::Gap { lost, .. } => {
                // Requests whose replies fell in the hole expire as unanswered; replies
                // whose requests fell in it arrive unpaired. The pipeline tells the
                // detectors, which reset what they follow; here each connection's loss
                // is noted, and one whose close was lost is let go of now.
                self.stats.gaps += 1;
                for l in lost {
                    let state = self.conns.get_mut(&l.conn);
                    let app = state.as_ref().and_then(|s| s.info.app_name.clone());
                    // Counted once per connection, named or not (the named ones are bounded).
                    let known = self.stats.lossy.contains_key(&l.conn)
                        || state.is_some_and(|s| std::mem::replace(&mut s.lossy, true));
                    if !known {
                        self.stats.lossy_connections += 1;
                    }
                    if known || self.stats.lossy.len() < MAX_LOSSY_CONNS {
                        let e = self.stats.lossy.entry(l.conn).or_default();
                        e.events += l.events;
                        e.app = e.app.take().or(app);
                    }
                    if l.closed {
                        if let Some(state) = self.conns.remove(&l.conn) {
                            self.stats.unanswered += state.pending.len() as u64;
                        }
                    }
                }
            }
            TapEvent::TooLarge { dir, .. } => {
                // Its reply, if any, arrives unpaired and is counted there.
                self.count_direction(dir);
                self.stats.too_large += 1;
            }
            TapEvent::Unframeable { conn, error, .. } => {
                self.stats.parse_errors += 1;
                self.stats.last_parse_error = Some(format!("connection {conn}: {error}"));
                if let Some(s) = self.conns.get_mut(&conn) {
                    s.analysing = false;
                }
            }
            TapEvent::Message { conn, dir, at, frame } => self.on_message(conn, dir, at, frame, None, out),
            TapEvent::Recorded { conn, dir, at, frame, wire_len, compressor } => {
                self.on_message(conn, dir, at, frame, Some((wire_len, compressor)), out)
            }
        }
    }

    /// A message; `wire` is what a redacted trace's message was on the wire (its
    /// length and compressor), which its stored bytes no longer show.
    fn on_message(
        &mut self,
        conn: ConnId,
        dir: Direction,
        at: Micros,
        frame: Frame,
        wire: Option<(u32, Option<mongotap_wire::Compressor>)>,
        out: &mut dyn FnMut(Operation),
    ) {
        self.count_direction(dir);
        // A connection opened before a restart of the analysis, or from a
        // capture that missed the accept: track it from here.
        if !self.conns.contains_key(&conn) {
            if self.conns.len() >= self.limits.max_connections {
                self.stats.untracked_messages += 1;
                return;
            }
            let info = Arc::new(ConnInfo { id: conn, ..ConnInfo::default() }.keyed());
            self.conns.insert(conn, ConnState::new(info, at));
        }
        let state = self.conns.get_mut(&conn).expect("inserted above");
        state.last_seen = at;
        if !state.analysing {
            self.stats.skipped_after_error += 1;
            return;
        }
        let bytes = wire.map_or(frame.bytes.len() as u64, |(len, _)| u64::from(len));
        // A request may wait for its reply a long time (or forever, if the tap
        // dropped the reply): it holds its frame, which owns just its own bytes
        // (the proxy's splitter copies each message out of its read buffer).
        let message = match Message::decode(&frame) {
            Ok(mut m) => {
                if let Some((_, compressor)) = wire {
                    m.compressor = compressor;
                }
                m
            }
            Err(e) => {
                self.stats.parse_errors += 1;
                self.stats.last_parse_error = Some(format!(
                    "connection {conn}, {} {}: {e}",
                    frame.header.op_code.name(),
                    if dir == Direction::ToServer { "request" } else { "reply" },
                ));
                state.analysing = false;
                state.pending.clear();
                return;
            }
        };
        if let Some(c) = message.compressor {
            *self.stats.compressed_messages.entry(c.name().to_owned()).or_default() += 1;
        }
        if let Op::Opaque { .. } = message.op {
            *self.stats.legacy_messages.entry(message.header.op_code.name().to_owned()).or_default() += 1;
            return;
        }
        match dir {
            Direction::ToServer => Self::on_request(
                state,
                &mut self.stats,
                &self.limits,
                &mut self.names,
                message,
                at,
                bytes,
                out,
            ),
            Direction::ToClient => Self::on_reply(state, &mut self.stats, message, at, bytes, out),
        }
    }

    fn count_direction(&mut self, dir: Direction) {
        match dir {
            Direction::ToServer => self.stats.requests += 1,
            Direction::ToClient => self.stats.replies += 1,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_request(
        state: &mut ConnState,
        stats: &mut ExchangeStats,
        limits: &Limits,
        names: &mut Names,
        message: Message,
        at: Micros,
        bytes: u64,
        out: &mut dyn FnMut(Operation),
    ) {
        let (command, namespace, sensitive, awaited, legacy_query) = match Command::from_message(&message) {
            Some(c) => {
                if c.is_hello() && state.info.app_name.is_none() && state.info.driver.is_none() {
                    if let Ok(client) = c.body.get_document("client") {
                        state.info = Arc::new(client_info(&state.info, client));
                    }
                }
                let awaited = (c.is_hello() && c.body.get("topologyVersion").ok().flatten().is_some())
                    || (c.name == "getMore" && c.body.get("maxTimeMS").ok().flatten().is_some());
                let (name, namespace) = names.of(&c);
                (name, namespace, c.is_sensitive(), awaited, false)
            }
            None => match &message.op {
                Op::Query(q) => {
                    (OpCode::Query.name().into(), q.full_collection_name.as_str().into(), false, false, true)
                }
                _ => return,
            },
        };
        let request_id = message.header.request_id;
        let more_to_come = message.msg_flags().contains(MsgFlags::MORE_TO_COME);
        let pending = Pending {
            request: if sensitive { None } else { Some(message) },
            command,
            namespace,
            sent_at: at,
            request_bytes: bytes,
            awaited,
            streamed: false,
            sensitive,
            legacy_query,
            alias: None,
        };
        if more_to_come {
            // Fire-and-forget: no reply will come, so no pending entry.
            out(complete(&state.info, pending, None, at, 0));
            return;
        }
        if state.pending.len() >= limits.max_pending_per_conn {
            if let Some(oldest) = state.pending.iter().min_by_key(|(_, p)| p.sent_at).map(|(k, _)| *k) {
                state.pending.remove(&oldest);
                stats.unanswered += 1;
            }
        }
        if state.pending.insert(request_id, pending).is_some() {
            stats.unanswered += 1;
        }
    }

    fn on_reply(
        state: &mut ConnState,
        stats: &mut ExchangeStats,
        message: Message,
        at: Micros,
        bytes: u64,
        out: &mut dyn FnMut(Operation),
    ) {
        let key = message.header.response_to;
        let Some(pending) = state.pending.remove(&key) else {
            stats.unpaired_replies += 1;
            return;
        };
        if let Some(alias) = pending.alias {
            state.pending.remove(&alias);
        }
        if message.msg_flags().contains(MsgFlags::MORE_TO_COME) {
            // Exhaust: the spec says the next reply answers this reply's requestID;
            // some servers answer the original request's id again. File the next
            // entry under both, each naming the other, so either consumes both.
            let next =
                Pending { sent_at: at, request_bytes: 0, streamed: true, alias: None, ..pending.clone() };
            let reply_id = message.header.request_id;
            if reply_id == key {
                state.pending.insert(key, next);
            } else {
                state.pending.insert(reply_id, Pending { alias: Some(key), ..next.clone() });
                state.pending.insert(key, Pending { alias: Some(reply_id), ..next });
            }
        }
        out(complete(&state.info, pending, Some(message), at, bytes));
    }

    /// Forgets requests unanswered for longer than the limit and connections idle
    /// for longer than theirs. Call it now and then (the proxy does, every second).
    pub fn expire(&mut self, now: Micros) {
        let ttl = self.limits.pending_ttl_us;
        let idle = self.limits.idle_conn_ttl_us;
        let mut forgotten = 0;
        self.conns.retain(|_, s| {
            let before = s.pending.len();
            s.pending.retain(|_, p| now.saturating_sub(p.sent_at) <= ttl);
            forgotten += (before - s.pending.len()) as u64;
            if now.saturating_sub(s.last_seen) > idle {
                forgotten += s.pending.len() as u64;
                return false;
            }
            true
        });
        self.stats.unanswered += forgotten;
    }
}

fn client_info(base: &ConnInfo, client: &RawDocument) -> ConnInfo {
    let app_name =
        client.get_document("application").ok().and_then(|a| a.get_str("name").ok()).map(str::to_owned);
    let driver = client.get_document("driver").ok().map(|d| {
        let name = d.get_str("name").unwrap_or("unknown");
        match d.get_str("version") {
            Ok(v) => format!("{name} {v}"),
            Err(_) => name.to_owned(),
        }
    });
    ConnInfo { app_name, driver, ..base.clone() }.keyed()
}

fn complete(
    info: &Arc<ConnInfo>,
    p: Pending,
    reply: Option<Message>,
    at: Micros,
    reply_bytes: u64,
) -> Operation {
    let mut docs_returned = 0;
    let mut error_code = None;
    let mut cursor_id = None;
    let mut batch_at = None;
    if let Some(r) = &reply {
        if let Some(view) = CommandReply::from_message(r) {
            let summary = view.summary();
            docs_returned = match &r.op {
                Op::Reply(legacy) if p.legacy_query => legacy.number_returned.max(0) as u64,
                _ => summary.batch_len,
            };
            error_code = summary.error_code;
            cursor_id = summary.cursor_id.filter(|id| *id != 0);
            batch_at = summary.batch_at;
        }
    }
    let compressor = p.request.as_ref().and_then(|m| m.compressor);
    let has_reply = reply.is_some();
    Operation {
        conn: info.clone(),
        command: p.command,
        namespace: p.namespace,
        request: p.request,
        reply: if p.sensitive { None } else { reply },
        started_at: p.sent_at,
        latency_us: has_reply.then(|| at.saturating_sub(p.sent_at)),
        awaited: p.awaited,
        streamed: p.streamed,
        sensitive: p.sensitive,
        request_bytes: p.request_bytes,
        reply_bytes,
        docs_returned,
        batch_at,
        error_code,
        cursor_id,
        compressor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use mongotap_wire::{Compressor, Document, Frame, OpCompressed, OpMsg, OpQuery, OpReply};

    const C: ConnId = 1;

    fn opened(c: &mut Correlator) {
        c.on_event(
            TapEvent::Opened { conn: C, client: "127.0.0.1:5000".parse().unwrap(), at: 0 },
            &mut |_| {},
        );
    }

    fn send(c: &mut Correlator, dir: Direction, at: Micros, bytes: bytes::Bytes) -> Vec<Operation> {
        let mut ops = Vec::new();
        let frame = Frame::from_bytes(bytes).unwrap();
        c.on_event(TapEvent::Message { conn: C, dir, at, frame }, &mut |o| ops.push(o));
        ops
    }

    fn msg(body: bson::Document, flags: u32, id: i32, to: i32) -> bytes::Bytes {
        let mut m = OpMsg::new(Document::from_doc(&body));
        m.flags = MsgFlags(flags);
        m.encode(id, to)
    }

    #[test]
    fn pairs_a_find_with_its_reply() {
        let mut c = Correlator::default();
        opened(&mut c);
        let req = msg(doc! {"find": "orders", "filter": {"a": 1}, "$db": "shop"}, 0, 10, 0);
        assert!(send(&mut c, Direction::ToServer, 1_000, req).is_empty());
        let reply = msg(
            doc! {"cursor": {"id": 99_i64, "ns": "shop.orders", "firstBatch": [{"a": 1}, {"a": 1}]}, "ok": 1.0},
            0,
            20,
            10,
        );
        let ops = send(&mut c, Direction::ToClient, 1_750, reply);
        assert_eq!(ops.len(), 1);
        let op = &ops[0];
        assert_eq!((&*op.command, &*op.namespace), ("find", "shop.orders"));
        assert_eq!(op.latency_us, Some(750));
        assert_eq!(op.docs_returned, 2);
        assert_eq!(op.cursor_id, Some(99));
        assert_eq!(op.error_code, None);
        assert!(op.request.is_some() && op.reply.is_some());
        assert_eq!(c.stats().requests, 1);
        assert_eq!(c.stats().replies, 1);
    }

    #[test]
    fn replies_pair_out_of_order() {
        let mut c = Correlator::default();
        opened(&mut c);
        send(&mut c, Direction::ToServer, 0, msg(doc! {"find": "a", "$db": "t"}, 0, 1, 0));
        send(&mut c, Direction::ToServer, 5, msg(doc! {"find": "b", "$db": "t"}, 0, 2, 0));
        let second = send(&mut c, Direction::ToClient, 10, msg(doc! {"ok": 1}, 0, 100, 2));
        let first = send(&mut c, Direction::ToClient, 20, msg(doc! {"ok": 1}, 0, 101, 1));
        assert_eq!(&*second[0].namespace, "t.b");
        assert_eq!(&*first[0].namespace, "t.a");
        assert_eq!(first[0].latency_us, Some(20));
    }

    #[test]
    fn more_to_come_requests_complete_at_once_without_a_pending_entry() {
        let mut c = Correlator::default();
        opened(&mut c);
        let w0 = msg(
            doc! {"insert": "logs", "documents": [{"m": "x"}], "writeConcern": {"w": 0}, "$db": "t"},
            2,
            5,
            0,
        );
        let ops = send(&mut c, Direction::ToServer, 0, w0);
        assert_eq!(ops.len(), 1);
        assert!(ops[0].reply.is_none() && ops[0].latency_us.is_none());
        assert_eq!(c.conns[&C].pending.len(), 0);
    }

    #[test]
    fn exhaust_streams_are_rekeyed_on_every_reply() {
        let mut c = Correlator::default();
        opened(&mut c);
        let gm = msg(doc! {"getMore": 7_i64, "collection": "c", "$db": "t"}, 0x10000, 1, 0);
        send(&mut c, Direction::ToServer, 0, gm);
        let batch = |id: i64| doc! {"cursor": {"id": id, "ns": "t.c", "nextBatch": [{"x": 1}]}, "ok": 1};
        let a = send(&mut c, Direction::ToClient, 10, msg(batch(7), 2, 50, 1));
        let b = send(&mut c, Direction::ToClient, 25, msg(batch(7), 2, 51, 50));
        let z = send(&mut c, Direction::ToClient, 45, msg(batch(0), 0, 52, 51));
        assert_eq!((a.len(), b.len(), z.len()), (1, 1, 1));
        assert!(!a[0].streamed && b[0].streamed && z[0].streamed);
        assert_eq!((a[0].latency_us, b[0].latency_us, z[0].latency_us), (Some(10), Some(15), Some(20)));
        assert_eq!(z[0].cursor_id, None);
        assert!(c.conns[&C].pending.is_empty(), "the stream ended without moreToCome, no alias left");
        assert_eq!(c.stats().unpaired_replies, 0);
    }

    #[test]
    fn exhaust_streams_that_repeat_the_original_request_id_pair_too() {
        let mut c = Correlator::default();
        opened(&mut c);
        send(
            &mut c,
            Direction::ToServer,
            0,
            msg(doc! {"getMore": 7_i64, "collection": "c", "$db": "t"}, 0x10000, 2, 0),
        );
        let batch = |id: i64| doc! {"cursor": {"id": id, "ns": "t.c", "nextBatch": [{"x": 1}]}, "ok": 1};
        let mut ops = Vec::new();
        // SecantusDB: every streamed reply says responseTo = 2.
        for (i, reply_id) in [2, 3, 4, 5].into_iter().enumerate() {
            let last = i == 3;
            let flags = if last { 0 } else { 2 };
            ops.extend(send(
                &mut c,
                Direction::ToClient,
                10 * (i as u64 + 1),
                msg(batch(if last { 0 } else { 7 }), flags, reply_id, 2),
            ));
        }
        assert_eq!(ops.len(), 4);
        assert_eq!(ops.iter().map(|o| o.latency_us.unwrap()).collect::<Vec<_>>(), [10, 10, 10, 10]);
        assert_eq!(c.stats().unpaired_replies, 0);
        assert!(c.conns[&C].pending.is_empty(), "no alias left behind");
    }

    #[test]
    fn legacy_handshake_pairs_and_names_the_app() {
        let mut c = Correlator::default();
        opened(&mut c);
        let q = OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: Document::from_doc(&doc! {"isMaster": 1, "client": {
            "application": {"name": "orders-service"}, "driver": {"name": "pymongo", "version": "4.20"}}}),
            return_fields_selector: None,
        };
        send(&mut c, Direction::ToServer, 0, q.encode(3));
        let r = OpReply {
            response_flags: 0,
            cursor_id: 0,
            starting_from: 0,
            number_returned: 1,
            documents: vec![Document::from_doc(&doc! {"ismaster": true, "ok": 1.0})],
        };
        let ops = send(&mut c, Direction::ToClient, 9, r.encode(4, 3));
        assert_eq!(&*ops[0].command, "isMaster");
        assert_eq!(ops[0].docs_returned, 0);
        assert_eq!(ops[0].conn.app_name.as_deref(), Some("orders-service"));
        assert_eq!(ops[0].conn.driver.as_deref(), Some("pymongo 4.20"));
    }

    #[test]
    fn awaitable_hello_and_await_data_get_more_are_marked() {
        let mut c = Correlator::default();
        opened(&mut c);
        let h = msg(
            doc! {"hello": 1, "topologyVersion": {"counter": 0_i64}, "maxAwaitTimeMS": 10000, "$db": "admin"},
            0x10000,
            1,
            0,
        );
        send(&mut c, Direction::ToServer, 0, h);
        let ops = send(&mut c, Direction::ToClient, 10_000_000, msg(doc! {"ok": 1}, 0, 2, 1));
        assert!(ops[0].awaited);
        send(
            &mut c,
            Direction::ToServer,
            0,
            msg(doc! {"getMore": 1_i64, "collection": "c", "maxTimeMS": 500, "$db": "t"}, 0, 3, 0),
        );
        assert!(send(&mut c, Direction::ToClient, 1, msg(doc! {"ok": 1}, 0, 4, 3))[0].awaited);
    }

    #[test]
    fn sensitive_commands_keep_no_bodies() {
        let mut c = Correlator::default();
        opened(&mut c);
        send(
            &mut c,
            Direction::ToServer,
            0,
            msg(doc! {"saslStart": 1, "payload": "secret", "$db": "admin"}, 0, 1, 0),
        );
        let ops =
            send(&mut c, Direction::ToClient, 5, msg(doc! {"payload": "secret-reply", "ok": 1}, 0, 2, 1));
        assert!(ops[0].sensitive);
        assert!(ops[0].request.is_none() && ops[0].reply.is_none());
        assert_eq!(&*ops[0].command, "saslStart");
    }

    #[test]
    fn compressed_messages_pair_after_decompression() {
        let mut c = Correlator::default();
        opened(&mut c);
        let req = OpCompressed::compress(&msg(doc! {"count": "c", "$db": "t"}, 0, 8, 0), Compressor::Zstd);
        send(&mut c, Direction::ToServer, 0, req);
        let rep = OpCompressed::compress(&msg(doc! {"n": 3, "ok": 1}, 0, 9, 8), Compressor::Zlib);
        let ops = send(&mut c, Direction::ToClient, 3, rep);
        assert_eq!(ops[0].compressor, Some(Compressor::Zstd));
        assert_eq!(c.stats().compressed_messages.get("zlib"), Some(&1));
    }

    #[test]
    fn a_parse_error_stops_analysis_of_that_connection_only() {
        let mut c = Correlator::default();
        opened(&mut c);
        let mut bad = msg(doc! {"find": "c", "$db": "t"}, 0, 1, 0).to_vec();
        bad[20] = 7; // section kind 7
        send(&mut c, Direction::ToServer, 0, bytes::Bytes::from(bad));
        assert_eq!(c.stats().parse_errors, 1);
        assert!(c.stats().last_parse_error.as_deref().unwrap().contains("section kind 7"));
        send(&mut c, Direction::ToServer, 1, msg(doc! {"find": "c", "$db": "t"}, 0, 2, 0));
        assert_eq!(c.stats().skipped_after_error, 1);
        // Another connection is unaffected.
        let mut ops = Vec::new();
        let other = |b| TapEvent::Message {
            conn: 2,
            dir: Direction::ToServer,
            at: 0,
            frame: Frame::from_bytes(b).unwrap(),
        };
        c.on_event(other(msg(doc! {"ping": 1, "$db": "admin"}, 2, 1, 0)), &mut |o| ops.push(o));
        assert_eq!(ops.len(), 1);
    }

    #[test]
    fn pending_entries_are_bounded_and_expire() {
        let limits = Limits { max_pending_per_conn: 3, pending_ttl_us: 100, ..Limits::default() };
        let mut c = Correlator::new(limits);
        opened(&mut c);
        for id in 0..5 {
            send(&mut c, Direction::ToServer, id as u64, msg(doc! {"ping": 1, "$db": "a"}, 0, id, 0));
        }
        assert_eq!(c.conns[&C].pending.len(), 3);
        assert_eq!(c.stats().unanswered, 2);
        c.expire(1_000);
        assert!(c.conns[&C].pending.is_empty());
        assert_eq!(c.stats().unanswered, 5);
        c.on_event(TapEvent::Closed { conn: C, at: 2_000 }, &mut |_| {});
        assert_eq!(c.open_connections(), 0);
    }

    #[test]
    fn legacy_opcodes_are_counted_not_analysed() {
        let mut c = Correlator::default();
        opened(&mut c);
        let mut v = vec![0u8; 16];
        v[0] = 20;
        v[12..16].copy_from_slice(&2002i32.to_le_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]);
        assert!(send(&mut c, Direction::ToServer, 0, bytes::Bytes::from(v)).is_empty());
        assert_eq!(c.stats().legacy_messages.get("OP_INSERT"), Some(&1));
    }
}
