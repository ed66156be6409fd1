//! The operation event: one request paired with its reply, with everything the
//! table and the detectors need. It holds the decoded request and reply (values
//! included) only while the analyzers look at it; nothing keeps it afterwards.

use std::net::SocketAddr;
use std::sync::Arc;

use mongotap_wire::{Command, CommandReply, Compressor, Message};

use crate::event::{ConnId, Micros};

/// How reports name a client that sent no app name in its handshake.
pub const NO_APP: &str = "(no app name)";

/// Connection ids above this bit count tell the source (trace, capture) apart.
pub const SOURCE_SHIFT: u32 = 40;

/// Who is on the other end of a connection, learned from the accept and the handshake.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnInfo {
    /// The connection's id in this run.
    pub id: ConnId,
    /// The client's address, when known.
    pub client: Option<SocketAddr>,
    /// `client.application.name` from the handshake.
    pub app_name: Option<String>,
    /// `client.driver.name` and `version` from the handshake.
    pub driver: Option<String>,
    /// Who the client is across its pooled connections: a hash of its address
    /// without the port, its app name, its driver name and the source it came
    /// from (see [`ConnInfo::keyed`]).
    /// Drivers spread one request's queries over a pool, so detectors that follow
    /// sequences key their state by this, not by connection.
    pub client_key: u64,
}

impl ConnInfo {
    /// The same, with [`ConnInfo::client_key`] worked out from the other fields.
    pub fn keyed(mut self) -> ConnInfo {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.client.map(|a| a.ip()).hash(&mut h);
        // Offline analysis numbers each source's connections from `index << 40`:
        // two proxies' traces are two fleets of clients, whatever their addresses.
        (self.id >> SOURCE_SHIFT).hash(&mut h);
        self.app_name.hash(&mut h);
        // The driver's name without its version: one application, one client.
        self.driver.as_deref().map(|d| d.split(' ').next().unwrap_or(d)).hash(&mut h);
        self.client_key = h.finish();
        self
    }
}

/// One completed exchange: a request and its reply (or none, for `moreToCome` writes).
#[derive(Debug, Clone)]
pub struct Operation {
    /// The connection it ran on.
    pub conn: Arc<ConnInfo>,
    /// The command name (`find`, `insert`, `getMore`, `hello`, ...).
    pub command: Arc<str>,
    /// `db.collection`, or the database for database-level commands.
    pub namespace: Arc<str>,
    /// The request. `None` when it is sensitive (auth): its contents are never kept.
    pub request: Option<Message>,
    /// The reply. `None` for `moreToCome` requests and sensitive commands.
    pub reply: Option<Message>,
    /// When the request was seen.
    pub started_at: Micros,
    /// Time from the request (or, in an exhaust stream, the previous reply) to the reply.
    pub latency_us: Option<u64>,
    /// The server waits on purpose (awaitable hello, awaitData getMore): keep the
    /// latency out of the statistics.
    pub awaited: bool,
    /// This reply is the second or later of an exhaust stream.
    pub streamed: bool,
    /// Whether the request was sensitive and its bodies were dropped.
    pub sensitive: bool,
    /// Request size on the wire.
    pub request_bytes: u64,
    /// Reply size on the wire (0 without a reply).
    pub reply_bytes: u64,
    /// Documents returned: `firstBatch`/`nextBatch` length, or OP_REPLY's count.
    pub docs_returned: u64,
    /// Where that batch sits in the reply's body (see [`Operation::batch`]), found
    /// while counting it.
    pub batch_at: Option<(u32, u32)>,
    /// The error code, when the command failed or a write failed.
    pub error_code: Option<i32>,
    /// The cursor to continue with, when the reply left one open.
    pub cursor_id: Option<i64>,
    /// The compressor, when the request came compressed.
    pub compressor: Option<Compressor>,
}

impl Operation {
    /// The request as a command view.
    pub fn command_view(&self) -> Option<Command<'_>> {
        Command::from_message(self.request.as_ref()?)
    }

    /// The reply as a command reply view.
    pub fn reply_view(&self) -> Option<CommandReply<'_>> {
        CommandReply::from_message(self.reply.as_ref()?)
    }

    /// The documents the reply returned (`firstBatch` or `nextBatch`) as the
    /// document an array is on the wire, or `None` when it returned none.
    /// (A legacy OP_REPLY's documents are no cursor batch: `None`.)
    pub fn batch<'o>(&'o self, reply: &CommandReply<'o>) -> Option<&'o bson::RawDocument> {
        self.batch_at.filter(|_| self.docs_returned > 0).and_then(|at| reply.batch_at(at))
    }

    /// Whether the operation failed.
    pub fn failed(&self) -> bool {
        self.error_code.is_some()
    }
}
