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

use mongotap_analyzers::detectors::indexes::catalog::Explained;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_events::{ConnId, Direction, Micros, TapEvent};

mod ext_json;
use ext_json::*;

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

#[cfg(test)]
mod tests;
