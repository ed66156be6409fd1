//! mongod's structured log (MongoDB 4.4 and later: one JSON object a line) as tap
//! events, so that a log goes through the same pipeline, access-pattern table and
//! index advisor as live traffic.
//!
//! Each slow operation ("Slow query", id 51803: an operation over `slowms`, or every
//! operation at log verbosity 1) becomes an OP_MSG request stamped when it started
//! (`t` minus `durationMillis`) and a reply stamped at `t`. The log keeps the command
//! as the client sent it (in Relaxed Extended JSON) and the reply's counters, never the
//! reply's documents: replies are made up from the counters, with empty documents.
//! "client metadata" lines (id 51800) become the connection's handshake and
//! "Connection ended" lines (id 22944) its close, as the tap would see them.
//!
//! What cannot be replayed faithfully is counted and left out rather than guessed:
//! commands the server truncated (part of a command makes a wrong shape), write
//! commands whose statements were logged apart, lines that are not JSON or are cut off.
//!
//! Log lines are in the order operations ended; a long operation's request is stamped
//! before the replies logged just above it. The pipeline takes events slightly out of
//! order (it keeps the latest time it saw), and so do the detectors' windows.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read};
use std::net::SocketAddr;

use bson::{doc, Bson, Document};
use bytes::Bytes;
use rustc_hash::FxHashSet;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{Map, Value};

use mongotap_wire::{Document as WireDocument, Frame, OpMsg, MAX_DOCUMENT_SIZE};

use crate::detectors::catalog::Explained;
use crate::event::{ConnId, Direction, Micros, TapEvent};
use crate::pipeline::Pipeline;

/// "Slow query": an operation over `slowms` (any operation at verbosity 1 and above).
pub const SLOW_QUERY: i64 = 51803;
/// "client metadata": the `client` document of a connection's handshake.
pub const CLIENT_METADATA: i64 = 51800;
/// "Connection ended".
pub const CONNECTION_ENDED: i64 = 22944;

/// Empty documents put in a made-up batch, at most: a real batch (16 MB) holds no
/// more than a few hundred thousand, and the reply is built in memory.
const MAX_BATCH: u64 = 100_000;
/// Longer lines are cut here (and then read as malformed), so a file without
/// newlines cannot take all the memory.
pub const MAX_LINE: usize = 64 << 20;
/// Connection ids of the server's own threads: above any `conn<N>`.
const INTERNAL_CONNS: ConnId = 1 << 62;
/// Server threads given an id of their own; the rest share one.
const MAX_INTERNAL: usize = 1024;
/// Connections remembered as greeted; past it the set starts over (a connection
/// greeted twice costs one more `hello` row, not memory).
const MAX_GREETED: usize = 100_000;

/// What one line of the log is.
#[derive(Debug)]
pub enum LineKind {
    /// A slow operation that can be replayed.
    Entry(Box<LogEntry>),
    /// A slow operation left out (see [`SkipReason`]).
    Skipped(Skipped),
    /// A connection's handshake metadata (id 51800).
    Client(ClientMetadata),
    /// A connection ended (id 22944).
    Ended {
        /// `conn<N>`.
        ctx: String,
        /// `N`.
        conn: ConnId,
        /// When.
        at: Micros,
    },
    /// Valid JSON that is no operation: startup, networking, replication, ...
    NotAnOperation,
    /// Not JSON, cut off (a torn tail, a line over the limit), or an operation
    /// without what every operation has; the reason says which.
    Malformed(&'static str),
}

/// Why a slow operation is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The command was truncated: cut by `maxLogSizeKB` (the entry's top-level
    /// `truncated` names `command`) or recorded as `{$truncated: "<summary>"}`. Its
    /// shape would be the shape of a part, so neither the table nor the advisor gets it.
    TruncatedCommand,
    /// The entry of an `update`, `delete` or `bulkWrite` command whose statements came
    /// in a document sequence, which the log leaves out: it has no shape, and each of
    /// its slow statements is logged as an operation of its own (`type` "update" or
    /// "remove"), so replaying it would count the writes twice.
    WriteSummary,
}

/// A slow operation left out, for the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Why.
    pub reason: SkipReason,
    /// `attr.ns`.
    pub namespace: String,
    /// The command's name, when it survived.
    pub command_name: Option<String>,
    /// The thread (`conn<N>` for a client's operations).
    pub ctx: String,
    /// When it ended.
    pub at: Micros,
}

/// A connection's handshake, as the server logged it.
#[derive(Debug, Clone)]
pub struct ClientMetadata {
    /// When.
    pub at: Micros,
    /// `conn<N>`.
    pub ctx: String,
    /// `N`.
    pub conn: Option<ConnId>,
    /// The client's address.
    pub remote: Option<SocketAddr>,
    /// The handshake's `client` document (`application`, `driver`, `os`, ...).
    pub client: Document,
}

/// A failed operation's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    /// `errCode`.
    pub code: Option<i32>,
    /// `errName`.
    pub name: Option<String>,
}

/// One slow operation, read from its log entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// When it ended (`t`).
    pub at: Micros,
    /// When it started: `t` minus `durationMillis`.
    pub started_at: Micros,
    /// `durationMillis`.
    pub duration_ms: u64,
    /// The thread: `conn<N>` for a client's operations, a name for the server's own.
    pub ctx: String,
    /// `N` of `conn<N>`; `None` for the server's own threads.
    pub conn: Option<ConnId>,
    /// `attr.type`: "command", or for a single write statement "update" / "remove".
    pub op_type: String,
    /// `attr.ns`.
    pub namespace: String,
    /// `attr.appName`.
    pub app_name: Option<String>,
    /// The command's name (the first key of [`LogEntry::command`]).
    pub command_name: String,
    /// For a getMore: the command that opened its cursor, when the log kept it whole.
    pub originating_command: Option<Document>,
    /// `planSummary` (`COLLSCAN`, `IXSCAN { a: 1 }`, ...), for the index advisor.
    pub plan_summary: Option<String>,
    /// `keysExamined`.
    pub keys_examined: Option<u64>,
    /// `docsExamined`.
    pub docs_examined: Option<u64>,
    /// `hasSortStage`: the plan sorted in memory.
    pub has_sort_stage: bool,
    /// `nreturned`.
    pub nreturned: Option<u64>,
    /// `nMatched`.
    pub n_matched: Option<u64>,
    /// `nModified`.
    pub n_modified: Option<u64>,
    /// `nUpserted`.
    pub n_upserted: Option<u64>,
    /// `ninserted`.
    pub n_inserted: Option<u64>,
    /// `ndeleted`.
    pub n_deleted: Option<u64>,
    /// `reslen`: the reply's size in bytes.
    pub reslen: Option<u64>,
    /// `cursorid`.
    pub cursor_id: Option<i64>,
    /// `cursorExhausted`.
    pub cursor_exhausted: bool,
    /// `errCode` and `errName` of a failed operation.
    pub error: Option<LogError>,
    /// `remote` (5.0 and later): the client's address.
    pub remote: Option<SocketAddr>,
    /// `queryHash`.
    pub query_hash: Option<String>,
    command: Document,
    /// The command as BSON, checked once when the line was read.
    request: WireDocument,
}

impl LogEntry {
    /// The command as the request carries it: converted from Extended JSON, `$db`
    /// added when the entry had none, a single write statement wrapped in its command.
    pub fn command(&self) -> &Document {
        &self.command
    }
}

/// What a [`LogReader`] counted. Every line is in exactly one of `operations`,
/// `not_operations`, `malformed`, `truncated_commands`, `write_summaries`, `internal`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Lines read.
    pub lines: u64,
    /// Slow operations replayed.
    pub operations: u64,
    /// JSON lines that are no operation (handshakes and closes included).
    pub not_operations: u64,
    /// Lines that are not JSON, are cut off, or lack what an operation has.
    pub malformed: u64,
    /// Operations left out: their command was truncated.
    pub truncated_commands: u64,
    /// Operations left out: write commands whose statements are logged apart.
    pub write_summaries: u64,
    /// Operations of the server's own threads, left out (see [`LogReader::include_internal`]).
    pub internal: u64,
    /// Handshakes replayed (from client metadata, or from an entry's `appName`).
    pub handshakes: u64,
    /// Connections closed.
    pub connections_ended: u64,
}

#[derive(Deserialize)]
struct Head {
    t: Option<Value>,
    id: Option<i64>,
    ctx: Option<String>,
    msg: Option<String>,
}

enum What {
    Operation,
    Client,
    Ended,
}

/// Reads one line. Lines that are no operation are only validated (the fields that
/// say what a line is are read, the rest skipped); the others are parsed in full.
pub fn parse_line(line: &str) -> LineKind {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() {
        return LineKind::NotAnOperation;
    }
    let head: Head = match serde_json::from_str(line) {
        Ok(h) => h,
        Err(_) if serde_json::from_str::<IgnoredAny>(line).is_ok() => return LineKind::NotAnOperation,
        Err(_) if line.trim_start().starts_with('{') => {
            return LineKind::Malformed("cut off or invalid JSON")
        }
        Err(_) => return LineKind::Malformed("not JSON"),
    };
    let what = match (head.id, head.msg.as_deref()) {
        (Some(SLOW_QUERY), _) | (None, Some("Slow query")) => What::Operation,
        (Some(CLIENT_METADATA), _) => What::Client,
        (Some(CONNECTION_ENDED), _) => What::Ended,
        _ => return LineKind::NotAnOperation,
    };
    let Some(at) = head.t.as_ref().and_then(date_micros) else {
        return LineKind::Malformed("no timestamp");
    };
    let ctx = head.ctx.unwrap_or_default();
    if let What::Ended = what {
        return match conn_number(&ctx) {
            Some(conn) => LineKind::Ended { ctx, conn, at },
            None => LineKind::NotAnOperation,
        };
    }
    let mut root: Map<String, Value> = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(_) => return LineKind::Malformed("cut off or invalid JSON"),
    };
    let Some(Value::Object(attr)) = root.remove("attr") else {
        return LineKind::Malformed("no attributes");
    };
    match what {
        What::Client => client_metadata(attr, ctx, at),
        _ => operation(&root, attr, ctx, at),
    }
}

fn client_metadata(mut attr: Map<String, Value>, ctx: String, at: Micros) -> LineKind {
    let Some(Value::Object(client)) = attr.remove("doc") else {
        return LineKind::NotAnOperation;
    };
    let remote = str_at(&attr, "remote").and_then(|r| r.parse().ok());
    LineKind::Client(ClientMetadata { at, conn: conn_number(&ctx), ctx, remote, client: to_document(client) })
}

fn operation(root: &Map<String, Value>, mut attr: Map<String, Value>, ctx: String, at: Micros) -> LineKind {
    // maxLogSizeKB: the top-level `truncated` names each attribute that was cut.
    let truncated = root.get("truncated").and_then(Value::as_object);
    let cut = |name: &str| truncated.is_some_and(|t| t.contains_key(name));
    let op_type = str_at(&attr, "type").unwrap_or("command").to_owned();
    let namespace = str_at(&attr, "ns").unwrap_or_default().to_owned();
    let Some(Value::Object(command)) = attr.remove("command") else {
        return LineKind::Malformed("a slow query without its command");
    };
    if cut("command") || command.contains_key("$truncated") {
        let command_name = truncated_name(&command);
        let reason = SkipReason::TruncatedCommand;
        return LineKind::Skipped(Skipped { reason, namespace, command_name, ctx, at });
    }
    let command = normalize(&op_type, &namespace, to_document(command));
    let command_name = command.keys().next().cloned().unwrap_or_default();
    let statements = match command_name.as_str() {
        "update" => Some("updates"),
        "delete" => Some("deletes"),
        "bulkWrite" => Some("ops"),
        _ => None,
    };
    if op_type == "command" && statements.is_some_and(|s| !command.contains_key(s)) {
        let reason = SkipReason::WriteSummary;
        return LineKind::Skipped(Skipped { reason, namespace, command_name: Some(command_name), ctx, at });
    }
    let Some(request) = encode(&command) else {
        return LineKind::Malformed("a command BSON cannot hold");
    };
    let originating_command = match attr.remove("originatingCommand") {
        Some(Value::Object(o)) if !cut("originatingCommand") && !o.contains_key("$truncated") => {
            Some(to_document(o))
        }
        _ => None,
    };
    let duration_ms = u64_at(&attr, "durationMillis").unwrap_or(0);
    let failed = attr.contains_key("errCode") || int_at(&attr, "ok") == Some(0);
    let error = failed.then(|| LogError {
        code: int_at(&attr, "errCode").and_then(|c| i32::try_from(c).ok()),
        name: str_at(&attr, "errName").map(str::to_owned),
    });
    LineKind::Entry(Box::new(LogEntry {
        at,
        started_at: at.saturating_sub(duration_ms.saturating_mul(1000)),
        duration_ms,
        conn: conn_number(&ctx),
        ctx,
        op_type,
        namespace,
        app_name: str_at(&attr, "appName").map(str::to_owned),
        command_name,
        originating_command,
        plan_summary: str_at(&attr, "planSummary").map(str::to_owned),
        keys_examined: u64_at(&attr, "keysExamined"),
        docs_examined: u64_at(&attr, "docsExamined"),
        has_sort_stage: bool_at(&attr, "hasSortStage"),
        nreturned: u64_at(&attr, "nreturned"),
        n_matched: u64_at(&attr, "nMatched"),
        n_modified: u64_at(&attr, "nModified"),
        n_upserted: u64_at(&attr, "nUpserted"),
        n_inserted: u64_at(&attr, "ninserted"),
        n_deleted: u64_at(&attr, "ndeleted"),
        reslen: u64_at(&attr, "reslen"),
        cursor_id: int_at(&attr, "cursorid"),
        cursor_exhausted: bool_at(&attr, "cursorExhausted"),
        error,
        remote: str_at(&attr, "remote").and_then(|r| r.parse().ok()),
        query_hash: str_at(&attr, "queryHash").map(str::to_owned),
        command,
        request,
    }))
}

/// The command as a client sends it. A single write statement (`type` "update" or
/// "remove", `command` `{q, u, ...}`) is wrapped in its command, as drivers send it;
/// a legacy query's bare filter in a `find`. `$db` comes from `ns` when missing.
fn normalize(op_type: &str, namespace: &str, command: Document) -> Document {
    let (db, coll) = namespace.split_once('.').unwrap_or((namespace, ""));
    let first = command.keys().next().cloned().unwrap_or_default();
    let mut out = match op_type {
        "update" if first != "update" && command.contains_key("q") => {
            statement("update", coll, "updates", command)
        }
        "remove" if first != "delete" && command.contains_key("q") => {
            statement("delete", coll, "deletes", command)
        }
        "insert" if first != "insert" => doc! {"insert": coll},
        "query" if !matches!(first.as_str(), "find" | "aggregate" | "count" | "distinct" | "explain") => {
            doc! {"find": coll, "filter": command}
        }
        _ => command,
    };
    if !out.contains_key("$db") {
        out.insert("$db", db);
    }
    out
}

fn statement(name: &str, coll: &str, list: &str, statement: Document) -> Document {
    let mut d = Document::new();
    d.insert(name, coll);
    d.insert(list, vec![Bson::Document(statement)]);
    d
}

/// The name of a truncated command: its first key when that survived, else the start
/// of the `$truncated` summary (`{ find: "orders", ...`).
fn truncated_name(command: &Map<String, Value>) -> Option<String> {
    match command.keys().next() {
        Some(k) if !k.starts_with('$') => Some(k.clone()),
        _ => {
            let summary = command.get("$truncated")?.as_str()?;
            let rest = summary.trim_start_matches(|c: char| c == '{' || c.is_whitespace());
            let name = rest.split(':').next()?.trim();
            let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            plain.then(|| name.to_owned())
        }
    }
}

/// `document` as BSON bytes, unless BSON cannot hold it (a key with a NUL) or it is
/// larger than a server would take (the decoder would stop the connection's analysis).
fn encode(document: &Document) -> Option<WireDocument> {
    let mut bytes = Vec::new();
    document.to_writer(&mut bytes).ok()?;
    if bytes.len() > MAX_DOCUMENT_SIZE {
        return None;
    }
    WireDocument::from_bytes(Bytes::from(bytes)).ok()
}

/// The request and reply of `entry`, on connection `conn`: the request (id
/// `request_id`) at the operation's start, the reply (id `request_id + 1`) at its end.
///
/// The reply is made up: the log keeps the counters of a reply, not its values. A
/// cursor reply's batch holds `nreturned` empty documents (so documents returned are
/// counted as live, and nothing reads values that were never there), its id is
/// `cursorid` unless the cursor was exhausted (so a logged getMore is attributed to
/// its logged find), a write's `n` comes from `nMatched` / `ninserted` / `ndeleted`, a
/// failure is `{ok: 0, code, codeName}`. `listIndexes` and `listCollections` get an
/// empty batch: a batch of empty index descriptions would tell the advisor the
/// collection has no index.
pub fn to_events(entry: &LogEntry, conn: ConnId, request_id: i32) -> [TapEvent; 2] {
    let reply = reply_of(entry);
    exchange(conn, request_id, entry.request.clone(), entry.started_at, &reply, entry.at)
}

/// A handshake carrying `client` (the `client` document of client metadata, or just
/// `{application: {name}}`), at `at`: how the pipeline learns a connection's app and
/// driver, as from live traffic.
pub fn hello_events(client: &Document, conn: ConnId, request_id: i32, at: Micros) -> [TapEvent; 2] {
    let request = encode(&doc! {"hello": 1, "client": client.clone(), "$db": "admin"})
        .unwrap_or_else(|| WireDocument::from_doc(&doc! {"hello": 1, "$db": "admin"}));
    let reply = doc! {"isWritablePrimary": true, "ok": 1.0};
    exchange(conn, request_id, request, at, &reply, at)
}

fn exchange(
    conn: ConnId,
    request_id: i32,
    request: WireDocument,
    sent: Micros,
    reply: &Document,
    answered: Micros,
) -> [TapEvent; 2] {
    // Both are far below the message size limit: the request was checked against the
    // document limit, the reply's batch is bounded.
    let frame = |bytes: Bytes| Frame::from_bytes(bytes).expect("a message within the size limit");
    let reply_id = request_id.wrapping_add(1);
    [
        TapEvent::Message {
            conn,
            dir: Direction::ToServer,
            at: sent,
            frame: frame(OpMsg::new(request).encode(request_id, 0)),
        },
        TapEvent::Message {
            conn,
            dir: Direction::ToClient,
            at: answered,
            frame: frame(OpMsg::new(WireDocument::from_doc(reply)).encode(reply_id, request_id)),
        },
    ]
}

fn reply_of(e: &LogEntry) -> Document {
    if let Some(err) = &e.error {
        let mut r = doc! {"ok": 0.0};
        if let Some(code) = err.code {
            r.insert("code", code);
        }
        if let Some(name) = &err.name {
            r.insert("codeName", name.as_str());
        }
        return r;
    }
    let n = |v: Option<u64>| i32::try_from(v.unwrap_or(0)).unwrap_or(i32::MAX);
    let ns = e.namespace.as_str();
    match e.command_name.as_str() {
        "find" | "aggregate" | "getMore" => {
            let id: i64 = if e.cursor_exhausted { 0 } else { e.cursor_id.unwrap_or(0) };
            let returned = e.nreturned.unwrap_or(0).min(MAX_BATCH) as usize;
            let docs = vec![Document::new(); returned];
            let key = if e.command_name == "getMore" { "nextBatch" } else { "firstBatch" };
            doc! {"cursor": {"id": id, "ns": ns, key: docs}, "ok": 1.0}
        }
        "listIndexes" | "listCollections" => {
            let none: Vec<Document> = Vec::new();
            doc! {"cursor": {"id": 0_i64, "ns": ns, "firstBatch": none}, "ok": 1.0}
        }
        "insert" => doc! {"n": n(e.n_inserted), "ok": 1.0},
        "update" => {
            let matched = e.n_matched.unwrap_or(0).saturating_add(e.n_upserted.unwrap_or(0));
            doc! {"n": n(Some(matched)), "nModified": n(e.n_modified), "ok": 1.0}
        }
        "delete" => doc! {"n": n(e.n_deleted), "ok": 1.0},
        "distinct" => {
            let none: Vec<Bson> = Vec::new();
            doc! {"values": none, "ok": 1.0}
        }
        "findAndModify" | "findandmodify" => {
            let touched = e.n_matched.or(e.n_deleted).or(e.n_upserted);
            doc! {"lastErrorObject": {"n": n(touched)}, "value": Bson::Null, "ok": 1.0}
        }
        _ => doc! {"ok": 1.0},
    }
}

/// Reads a log into a pipeline, keeping count of what it read.
pub struct LogReader {
    stats: LogStats,
    next_id: i32,
    greeted: FxHashSet<ConnId>,
    internal: BTreeMap<String, ConnId>,
    /// Also replay the operations of the server's own threads (TTL monitor, session
    /// cache, replication): off by default, as a proxy in front of the server never
    /// sees them. Each thread is then a connection of its own, above any `conn<N>`.
    pub include_internal: bool,
    /// Replay each connection's handshake (from its client metadata line, or else
    /// from its first entry's `appName`), so the detectors know the app and driver as
    /// they do live; each is a `hello` operation, as live. On by default.
    pub handshakes: bool,
}

impl Default for LogReader {
    fn default() -> Self {
        LogReader::new()
    }
}

impl LogReader {
    /// A reader with nothing read.
    pub fn new() -> LogReader {
        LogReader {
            stats: LogStats::default(),
            next_id: 1,
            greeted: FxHashSet::default(),
            internal: BTreeMap::new(),
            include_internal: false,
            handshakes: true,
        }
    }

    /// What was read so far.
    pub fn stats(&self) -> &LogStats {
        &self.stats
    }

    /// Reads one line; the events it makes are appended to `out`. An operation's
    /// plan (planSummary and what it examined) is returned, for the index advisor:
    /// the log's own explain of that operation.
    pub fn read_line(&mut self, line: &str, out: &mut Vec<TapEvent>) -> Option<Explained> {
        self.stats.lines += 1;
        match parse_line(line) {
            LineKind::Entry(e) => {
                let conn = match e.conn {
                    Some(conn) => {
                        if self.handshakes && !self.greeted.contains(&conn) {
                            if let Some(app) = &e.app_name {
                                let client = doc! {"application": {"name": app.as_str()}};
                                self.greet(conn, &client, e.started_at, out);
                            }
                        }
                        conn
                    }
                    None if self.include_internal => self.internal_conn(&e.ctx),
                    None => {
                        self.stats.internal += 1;
                        return None;
                    }
                };
                self.stats.operations += 1;
                let id = self.next_request_id();
                out.extend(to_events(&e, conn, id));
                return e.plan_summary.as_ref().map(|plan| Explained {
                    keys_examined: e.keys_examined.unwrap_or(0),
                    docs_examined: e.docs_examined.unwrap_or(0),
                    returned: e.nreturned.unwrap_or(0),
                    plan: plan.clone(),
                });
            }
            LineKind::Skipped(s) => match s.reason {
                SkipReason::TruncatedCommand => self.stats.truncated_commands += 1,
                SkipReason::WriteSummary => self.stats.write_summaries += 1,
            },
            LineKind::Client(c) => {
                self.stats.not_operations += 1;
                let conn = c.conn?;
                if let Some(client) = c.remote {
                    out.push(TapEvent::Opened { conn, client, at: c.at });
                }
                if self.handshakes {
                    self.greet(conn, &c.client, c.at, out);
                }
            }
            LineKind::Ended { conn, at, .. } => {
                self.stats.not_operations += 1;
                self.stats.connections_ended += 1;
                self.greeted.remove(&conn);
                out.push(TapEvent::Closed { conn, at });
            }
            LineKind::NotAnOperation => self.stats.not_operations += 1,
            LineKind::Malformed(_) => self.stats.malformed += 1,
        }
        None
    }

    /// Reads every line of `input` into `pipeline`. Invalid UTF-8 is replaced (the
    /// line then most likely reads as malformed); lines over 64 MiB are cut. The
    /// pipeline is not expired: the caller does that once the input is over.
    pub fn feed(&mut self, mut input: impl BufRead, pipeline: &mut Pipeline) -> io::Result<()> {
        let (mut line, mut events) = (Vec::new(), Vec::new());
        loop {
            line.clear();
            if read_capped(&mut input, &mut line, MAX_LINE)? == 0 {
                return Ok(());
            }
            self.read_line(&String::from_utf8_lossy(&line), &mut events);
            for ev in events.drain(..) {
                pipeline.feed(ev);
            }
        }
    }

    fn greet(&mut self, conn: ConnId, client: &Document, at: Micros, out: &mut Vec<TapEvent>) {
        if self.greeted.len() >= MAX_GREETED {
            self.greeted.clear();
        }
        self.greeted.insert(conn);
        self.stats.handshakes += 1;
        let id = self.next_request_id();
        out.extend(hello_events(client, conn, id, at));
    }

    fn internal_conn(&mut self, ctx: &str) -> ConnId {
        if let Some(conn) = self.internal.get(ctx) {
            return *conn;
        }
        if self.internal.len() >= MAX_INTERNAL {
            return INTERNAL_CONNS + MAX_INTERNAL as ConnId;
        }
        let conn = INTERNAL_CONNS + self.internal.len() as ConnId;
        self.internal.insert(ctx.to_owned(), conn);
        conn
    }

    /// Two ids an exchange (request, reply), kept positive.
    fn next_request_id(&mut self) -> i32 {
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(2).unwrap_or(1);
        id
    }
}

/// Reads one line (its newline included) into `buf`, keeping at most `limit` bytes
/// of it and skipping the rest. Returns the bytes consumed: 0 at the end.
pub fn read_capped(input: &mut impl BufRead, buf: &mut Vec<u8>, limit: usize) -> io::Result<usize> {
    let kept = Read::take(&mut *input, limit as u64).read_until(b'\n', buf)?;
    if kept < limit || buf.last() == Some(&b'\n') {
        return Ok(kept);
    }
    let mut skipped = 0;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(kept + skipped);
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(kept + skipped + i + 1);
            }
            None => {
                let n = available.len();
                input.consume(n);
                skipped += n;
            }
        }
    }
}

/// `N` of `conn<N>`.
fn conn_number(ctx: &str) -> Option<ConnId> {
    ctx.strip_prefix("conn")?.parse().ok()
}

fn str_at<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key)?.as_str()
}

fn int_at(m: &Map<String, Value>, key: &str) -> Option<i64> {
    int_of(m.get(key)?)
}

fn u64_at(m: &Map<String, Value>, key: &str) -> Option<u64> {
    int_at(m, key).and_then(|i| u64::try_from(i).ok())
}

fn bool_at(m: &Map<String, Value>, key: &str) -> bool {
    match m.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(v) => int_of(v) == Some(1),
        None => false,
    }
}

/// An integer as the log writes one: a JSON number (relaxed), possibly a whole
/// double, or `{"$numberLong": "..."}` / `{"$numberInt": "..."}` (canonical).
fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
        }),
        Value::Object(o) => o.get("$numberLong").or_else(|| o.get("$numberInt"))?.as_str()?.parse().ok(),
        _ => None,
    }
}

/// `t` (`{"$date": "2020-05-01T15:16:17.180+00:00"}`, or milliseconds) in microseconds.
fn date_micros(t: &Value) -> Option<Micros> {
    let micros = match t.get("$date")? {
        Value::String(s) => parse_timestamp(s)?,
        other => int_of(other)?.checked_mul(1000)?,
    };
    Micros::try_from(micros).ok()
}

/// An ISO-8601 timestamp as mongod writes them (`iso8601-utc`: `+00:00`,
/// `iso8601-local`: `-05:00`, also `-0500`, `Z`, none for UTC; fractions of any
/// length) in microseconds since the epoch. Written here rather than taken from
/// `bson::DateTime`, whose RFC 3339 parser refuses `-0500` and keeps milliseconds only.
fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0_i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-') && at(7, b'-') && (at(10, b'T') || at(10, b' ')) && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0;
    if at(i, b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        // The first six digits, padded on the right.
        for k in 0..6 {
            micros = micros * 10 + b[start..i].get(k).map_or(0, |&c| i64::from(c - b'0'));
        }
    }
    let offset = match b.get(i) {
        None => 0,
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&sign) if sign == b'+' || sign == b'-' => {
            let (h, m) = match b.len() - (i + 1) {
                5 if at(i + 3, b':') => (num(i + 1, 2)?, num(i + 4, 2)?),
                4 => (num(i + 1, 2)?, num(i + 3, 2)?),
                2 => (num(i + 1, 2)?, 0),
                _ => return None,
            };
            let seconds = h * 3600 + m * 60;
            if sign == b'-' {
                -seconds
            } else {
                seconds
            }
        }
        Some(_) => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(seconds * 1_000_000 + micros)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar. Years are
/// counted from March, so that February's leap day ends one; 400 years (146,097 days)
/// make a cycle.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let cycle = y.div_euclid(400);
    let year_of_cycle = y.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_cycle = year_of_cycle * 365 + year_of_cycle / 4 - year_of_cycle / 100 + day_of_year;
    // 719,468 days from 0000-03-01 to 1970-01-01.
    cycle * 146_097 + day_of_cycle - 719_468
}

/// A JSON object in Relaxed (or Canonical) Extended JSON as a BSON document, its key
/// order kept (serde_json's `preserve_order`).
fn to_document(m: Map<String, Value>) -> Document {
    m.into_iter().map(|(k, v)| (k, to_bson(v))).collect()
}

fn to_bson(v: Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s),
        Value::Array(a) => Bson::Array(a.into_iter().map(to_bson).collect()),
        Value::Object(m) => match wrapper(&m) {
            Some(b) => b,
            None => Bson::Document(to_document(m)),
        },
    }
}

/// The BSON value an Extended JSON wrapper (`{"$oid": ...}`, `{"$date": ...}`) stands
/// for; `None` for any other object (query operators are objects like any other). A
/// wrapper that does not parse becomes its JSON text: a literal either way.
fn wrapper(m: &Map<String, Value>) -> Option<Bson> {
    if m.len() > 2 {
        return None;
    }
    let text = || Bson::String(Value::Object(m.clone()).to_string());
    match m.keys().next()?.as_str() {
        // mongod writes `{"$date": "...+00:00"}`; bson's parser wants RFC 3339 only.
        "$date" if m.len() == 1 => {
            let millis = match m.get("$date")? {
                Value::String(s) => parse_timestamp(s).map(|us| us.div_euclid(1000)),
                other => int_of(other),
            };
            Some(millis.map_or_else(text, |ms| Bson::DateTime(bson::DateTime::from_millis(ms))))
        }
        // mongod writes `"subType": "0"`; bson's parser wants two hex digits.
        "$binary" => Some(binary(m).map_or_else(text, Bson::Binary)),
        "$oid" | "$numberInt" | "$numberLong" | "$numberDouble" | "$numberDecimal" | "$uuid"
        | "$timestamp" | "$regularExpression" | "$minKey" | "$maxKey" | "$symbol" | "$code"
        | "$dbPointer" | "$undefined" => {
            Some(Bson::try_from(Value::Object(m.clone())).unwrap_or_else(|_| text()))
        }
        _ => None,
    }
}

/// `{"$binary": {"base64": ..., "subType": "0"}}`, or the legacy `{"$binary": ..., "$type": ...}`.
fn binary(m: &Map<String, Value>) -> Option<bson::Binary> {
    let (base64, subtype) = match m.get("$binary")? {
        Value::Object(b) => (b.get("base64")?.as_str()?, b.get("subType")?.as_str()?),
        Value::String(s) => (s.as_str(), m.get("$type")?.as_str()?),
        _ => return None,
    };
    let subtype = bson::spec::BinarySubtype::from(u8::from_str_radix(subtype, 16).ok()?);
    bson::Binary::from_base64(base64, subtype).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongotap_wire::{Command, CommandReply, Message};

    const FIXTURE: &str = include_str!("../../tests/fixtures/mongod/slow_queries.log");
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
        assert_eq!(
            created.get("$gte"),
            Some(&Bson::DateTime(bson::DateTime::from_millis(1_711_929_600_000)))
        );
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
        assert_eq!(
            (summary.reason, summary.command_name.as_deref()),
            (SkipReason::WriteSummary, Some("update"))
        );
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
        assert_eq!(
            (s.handshakes, s.connections_ended),
            (2, 1),
            "conn12 by its metadata, conn13 by its appName"
        );
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
}
