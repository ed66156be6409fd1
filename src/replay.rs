//! Replay: the requests of a raw trace (`--capture-values`) sent again to a target
//! server, connection by connection, at the recorded pace (or `speed` times it), and
//! their latencies per shape set beside the recorded ones: the check that a schema
//! or index change helped.
//!
//! What cannot be sent again as it was is adapted or left out, and counted: auth
//! commands (their payloads were never recorded; the target must not require auth),
//! a hello's `speculativeAuthenticate`, and cursor ids (a getMore or killCursors
//! names the target's cursor that stands for the recorded one). Requests are sent
//! uncompressed. Replies are read and analysed like live traffic.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{Bson, Document as BsonDoc};
use bytes::Bytes;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_events::{Clock, ConnId, Direction, Micros, TapEvent};
use mongotap_trace::TraceReader;
use mongotap_wire::{
    Command, CommandReply, Document, Frame, Message, MsgFlags, MsgHeader, Op, HEADER_LEN, MAX_MESSAGE_SIZE,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a replayed request may wait for its reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a replay did.
#[derive(Debug, Default, Clone)]
pub struct ReplayStats {
    pub connections: u64,
    pub sent: u64,
    pub answered: u64,
    pub auth_skipped: u64,
    /// Awaitable hellos: the driver's monitoring, which waits on the server on purpose.
    pub monitoring_skipped: u64,
    pub cursors_mapped: u64,
    pub failed_connections: u64,
    pub first_failure: Option<String>,
}

/// One recorded request, and the cursor its recorded reply opened.
struct Request {
    at: Micros,
    frame: Frame,
    cursor: Option<i64>,
}

/// Reads `traces` into `before` and replays their requests against `target`
/// (host:port), analysing the replayed traffic into `after`.
pub async fn replay(
    traces: &[PathBuf],
    target: &str,
    speed: f64,
    before: &mut Pipeline,
    after: &mut Pipeline,
) -> Result<ReplayStats, String> {
    let mut conns: HashMap<ConnId, Vec<Request>> = HashMap::new();
    let mut by_id: HashMap<(ConnId, i32), usize> = HashMap::new();
    // Each trace numbers its connections from 1: the parts of one trace share them.
    let mut sources: Vec<String> = Vec::new();
    for path in traces {
        let mut r = TraceReader::open(path)?;
        if !r.header().is_raw() {
            return Err(format!(
                "{}: a redacted trace has no values to send again; record with --capture-values to replay",
                path.display()
            ));
        }
        let id = r.header().trace_id.clone();
        let base = match sources.iter().position(|s| *s == id) {
            Some(i) => (i as u64) << 40,
            None => {
                sources.push(id);
                ((sources.len() - 1) as u64) << 40
            }
        };
        while let Some(ev) = r.next_event() {
            // Auth messages come back reduced (Recorded): they are met and left out.
            let message = match &ev {
                TapEvent::Message { conn, dir, at, frame }
                | TapEvent::Recorded { conn, dir, at, frame, .. } => Some((conn + base, *dir, *at, frame)),
                _ => None,
            };
            if let Some((conn, dir, at, frame)) = message {
                let (conn, at) = (&conn, &at);
                match dir {
                    Direction::ToServer => {
                        let list = conns.entry(*conn).or_default();
                        by_id.insert((*conn, frame.header.request_id), list.len());
                        list.push(Request { at: *at, frame: frame.clone(), cursor: None });
                    }
                    Direction::ToClient => {
                        let cursor = Message::decode(frame)
                            .ok()
                            .and_then(|m| CommandReply::from_message(&m).and_then(|c| c.summary().cursor_id))
                            .filter(|id| *id != 0);
                        if let (Some(c), Some(&i)) = (cursor, by_id.get(&(*conn, frame.header.response_to))) {
                            conns.get_mut(conn).expect("filed with its request")[i].cursor = Some(c);
                        }
                    }
                }
            }
            before.feed(crate::offline::rebase(ev, base));
        }
        if let Some(t) = r.truncated() {
            tracing::warn!("{}: {t}", path.display());
        }
    }
    // Parts given out of order: each connection's requests in time order.
    conns.values_mut().for_each(|v| v.sort_by_key(|r| r.at));
    let t0 = conns.values().filter_map(|v| v.first()).map(|r| r.at).min().unwrap_or(0);
    let start = Instant::now();
    let clock = Clock::new();
    let cursors: Arc<Mutex<HashMap<i64, i64>>> = Arc::default();
    let events: Arc<Mutex<Vec<TapEvent>>> = Arc::default();
    let stats: Arc<Mutex<ReplayStats>> = Arc::default();
    let mut tasks = Vec::new();
    let requests_total: u64 = conns.values().map(|v| v.len() as u64).sum();
    let mut ids: Vec<ConnId> = conns.keys().copied().collect();
    ids.sort_unstable();
    for conn in ids {
        let requests = conns.remove(&conn).expect("listed");
        let (target, cursors, events, stats) =
            (target.to_owned(), cursors.clone(), events.clone(), stats.clone());
        tasks.push(tokio::spawn(async move {
            let run = Connection { conn, clock, cursors, events: events.clone(), stats: stats.clone() };
            if let Err(e) = run.replay(&target, requests, t0, start, speed).await {
                let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                s.failed_connections += 1;
                s.first_failure.get_or_insert(format!("connection {conn}: {e}"));
            }
        }));
    }
    // On a terminal: how far, how fast, and the time left at the recorded pace.
    let total: u64 = tasks.len() as u64;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let stats = stats.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                let sent = stats.lock().unwrap_or_else(|e| e.into_inner()).sent;
                let seconds = start.elapsed().as_secs_f64().max(1e-9);
                let rate = sent as f64 / seconds;
                let left = if rate > 0.0 { requests_total.saturating_sub(sent) as f64 / rate } else { 0.0 };
                eprint!(
                    "\rreplaying {total} connections: {sent} of {requests_total} requests ({:.0}%), {rate:.0}/s, about {left:.0} s left ",
                    100.0 * sent as f64 / requests_total.max(1) as f64
                );
            }
        })
    });
    for t in tasks {
        let _ = t.await;
    }
    if let Some(p) = progress {
        p.abort();
        eprintln!();
    }
    let mut evs = std::mem::take(&mut *events.lock().unwrap_or_else(|e| e.into_inner()));
    evs.sort_by_key(TapEvent::at);
    evs.into_iter().for_each(|ev| after.feed(ev));
    let s = stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(s)
}

/// One recorded connection, replayed.
struct Connection {
    conn: ConnId,
    clock: Clock,
    cursors: Arc<Mutex<HashMap<i64, i64>>>,
    events: Arc<Mutex<Vec<TapEvent>>>,
    stats: Arc<Mutex<ReplayStats>>,
}

impl Connection {
    async fn replay(
        &self,
        target: &str,
        requests: Vec<Request>,
        t0: Micros,
        start: Instant,
        speed: f64,
    ) -> Result<(), String> {
        let mut stream =
            TcpStream::connect(target).await.map_err(|e| format!("connecting to {target}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        self.stats().connections += 1;
        let client = stream.local_addr().map_err(|e| e.to_string())?;
        self.event(TapEvent::Opened { conn: self.conn, client, at: self.clock.now() });
        for r in requests {
            let due = start + Duration::from_secs_f64(r.at.saturating_sub(t0) as f64 / 1e6 / speed.max(1e-6));
            tokio::time::sleep_until(due.into()).await;
            let (bytes, more_to_come) = match self.adapt(&r.frame)? {
                Adapted::Send(bytes, more_to_come) => (bytes, more_to_come),
                Adapted::Auth => {
                    self.stats().auth_skipped += 1;
                    continue;
                }
                Adapted::Monitoring => {
                    self.stats().monitoring_skipped += 1;
                    continue;
                }
            };
            let id = r.frame.header.request_id;
            stream.write_all(&bytes).await.map_err(|e| format!("sending: {e}"))?;
            let frame = Frame::from_bytes(bytes).map_err(|e| e.to_string())?;
            self.event(TapEvent::Message {
                conn: self.conn,
                dir: Direction::ToServer,
                at: self.clock.now(),
                frame,
            });
            self.stats().sent += 1;
            if more_to_come {
                continue;
            }
            loop {
                let reply = tokio::time::timeout(REPLY_TIMEOUT, read_frame(&mut stream))
                    .await
                    .map_err(|_| format!("no reply to request {id} in {} s", REPLY_TIMEOUT.as_secs()))??;
                let at = self.clock.now();
                let decoded = Message::decode(&reply).ok();
                let streaming =
                    decoded.as_ref().is_some_and(|m| m.msg_flags().contains(MsgFlags::MORE_TO_COME));
                if let (Some(orig), Some(m)) = (r.cursor, &decoded) {
                    if let Some(now) = CommandReply::from_message(m).and_then(|c| c.summary().cursor_id) {
                        self.cursors.lock().unwrap_or_else(|e| e.into_inner()).insert(orig, now);
                    }
                }
                self.event(TapEvent::Message { conn: self.conn, dir: Direction::ToClient, at, frame: reply });
                // The last reply of the exchange: an exhaust stream's later replies
                // answer the one before, not the request.
                if !streaming {
                    self.stats().answered += 1;
                    break;
                }
            }
        }
        self.event(TapEvent::Closed { conn: self.conn, at: self.clock.now() });
        Ok(())
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, ReplayStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn event(&self, ev: TapEvent) {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(ev);
    }

    /// The request as it is sent again: uncompressed, cursor ids mapped, a hello's
    /// speculative auth removed.
    fn adapt(&self, frame: &Frame) -> Result<Adapted, String> {
        let mut m = Message::decode(frame).map_err(|e| format!("a recorded request: {e}"))?;
        let more_to_come = m.msg_flags().contains(MsgFlags::MORE_TO_COME);
        let Some(c) = Command::from_message(&m) else {
            // Legacy opcodes go as they were (inflated).
            m.compressor = None;
            return Ok(Adapted::Send(m.encode(), more_to_come));
        };
        if c.is_sensitive() && !c.is_hello() {
            return Ok(Adapted::Auth);
        }
        // An awaitable hello (streamed with exhaustAllowed, or waiting maxAwaitTimeMS)
        // is the driver watching the server, not the application's traffic.
        if c.is_hello() && c.body.get("topologyVersion").ok().flatten().is_some() {
            return Ok(Adapted::Monitoring);
        }
        let name = c.name.to_owned();
        let Op::Msg(msg) = &mut m.op else {
            m.compressor = None;
            return Ok(Adapted::Send(m.encode(), more_to_come));
        };
        let body = msg.body().to_document().map_err(|e| e.to_string())?;
        let mut body: BsonDoc = body;
        let mut changed = false;
        if c_is_hello(&name) {
            changed |= body.remove("speculativeAuthenticate").is_some();
            changed |= body.remove("saslSupportedMechs").is_some();
        }
        let map = |id: i64| self.cursors.lock().unwrap_or_else(|e| e.into_inner()).get(&id).copied();
        if name == "getMore" {
            if let Some(Bson::Int64(id)) = body.get("getMore") {
                if let Some(now) = map(*id) {
                    body.insert("getMore", now);
                    changed = true;
                    self.stats().cursors_mapped += 1;
                }
            }
        }
        if name == "killCursors" {
            if let Ok(list) = body.get_array("cursors") {
                let mapped: Vec<Bson> = list
                    .iter()
                    .map(|v| match v {
                        Bson::Int64(id) => Bson::Int64(map(*id).unwrap_or(*id)),
                        other => other.clone(),
                    })
                    .collect();
                body.insert("cursors", mapped);
                changed = true;
            }
        }
        if changed {
            for s in msg.sections.iter_mut() {
                if let mongotap_wire::Section::Body(d) = s {
                    *d = Document::from_doc(&body);
                }
            }
        }
        // The checksum is computed afresh on encoding; requests go uncompressed.
        m.compressor = None;
        if let Op::Msg(msg) = &mut m.op {
            msg.flags = MsgFlags(msg.flags.0 & !MsgFlags::CHECKSUM_PRESENT.0);
        }
        Ok(Adapted::Send(m.encode(), more_to_come))
    }
}

/// What becomes of a recorded request.
enum Adapted {
    /// Sent as these bytes; true when no reply is expected (moreToCome).
    Send(Bytes, bool),
    /// An auth command: left out.
    Auth,
    /// An awaitable hello: left out.
    Monitoring,
}

fn c_is_hello(name: &str) -> bool {
    name.eq_ignore_ascii_case("hello") || name.eq_ignore_ascii_case("ismaster")
}

/// Reads one whole message.
async fn read_frame(s: &mut TcpStream) -> Result<Frame, String> {
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head).await.map_err(|e| format!("reading a reply: {e}"))?;
    let h = MsgHeader::peek(&head).ok_or("a reply header")?;
    let len = h.message_length as usize;
    if !(HEADER_LEN..=MAX_MESSAGE_SIZE).contains(&len) {
        return Err(format!("a reply of {len} bytes"));
    }
    let mut buf = vec![0u8; len];
    buf[..HEADER_LEN].copy_from_slice(&head);
    s.read_exact(&mut buf[HEADER_LEN..]).await.map_err(|e| format!("reading a reply: {e}"))?;
    Frame::from_bytes(Bytes::from(buf)).map_err(|e| e.to_string())
}

/// Before and after, shape by shape: count, p50 and p99 (ms), as a Markdown table,
/// the shapes that ran most first.
pub fn compare(
    before: &mongotap_analyzers::report::Report,
    after: &mongotap_analyzers::report::Report,
) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "| Operation | Shape | Count before / after | p50 ms before / after | p99 ms before / after | p50 change |\n|---|---|---|---|---|---:|\n",
    );
    let find = |id: &str| after.access_patterns.iter().find(|p| p.shape_id == id);
    for b in &before.access_patterns {
        let a = find(&b.shape_id);
        let lat = |p: Option<&mongotap_analyzers::report::AccessPattern>,
                   f: fn(&mongotap_analyzers::report::Latency) -> f64| {
            p.and_then(|p| p.latency_ms.as_ref()).map_or("-".to_owned(), |l| format!("{:.2}", f(l)))
        };
        let change = match (b.latency_ms.as_ref(), a.and_then(|a| a.latency_ms.as_ref())) {
            (Some(x), Some(y)) if x.p50 > 0.0 => format!("{:+.0}%", 100.0 * (y.p50 - x.p50) / x.p50),
            _ => "-".into(),
        };
        let mut shape = b.shape.to_string();
        if shape.len() > 90 {
            let cut = (0..=90).rev().find(|&i| shape.is_char_boundary(i)).unwrap_or(0);
            shape.truncate(cut);
            shape.push('…');
        }
        let _ = writeln!(
            out,
            "| {} `{}` | `{}` | {} / {} | {} / {} | {} / {} | {} |",
            b.command,
            b.namespace,
            shape,
            b.count,
            a.map_or(0, |a| a.count),
            lat(Some(b), |l| l.p50),
            lat(a, |l| l.p50),
            lat(Some(b), |l| l.p99),
            lat(a, |l| l.p99),
            change
        );
    }
    out
}
