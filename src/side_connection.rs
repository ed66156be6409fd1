//! mongotap's own connection to the upstream, for what the traffic cannot tell the
//! index advisor: the indexes of the collections the application uses. It is kept
//! quiet, because its commands land in the application's profiler and logs: it runs
//! `listIndexes` once on each collection the advisor asks for (a few a second at
//! most), then at most once per `refresh`; a change that passes through is applied
//! from the wire and asks for one read two seconds after the last change only when
//! the wire did not say everything; a collection the wire dropped is not read. Every
//! command carries the app name `mongotap` and a `comment` naming mongotap, so
//! profilers, logs and `$currentOp` can tell it apart. Its credentials come from the upstream URI or from
//! `MONGOTAP_UPSTREAM_USERNAME`/`MONGOTAP_UPSTREAM_PASSWORD` (and
//! `MONGOTAP_UPSTREAM_AUTH_SOURCE`), never from the captured traffic. When it
//! cannot connect or is refused, it says so once, retries now and then, and the
//! advisor falls back to what the traffic shows.
//!
//! On a sharded cluster (reached through `mongos`, whose `config.collections` holds
//! a document per sharded collection) the same reads also fetch the current shard
//! key of the collections read, so the shard-key section judges it beside the
//! candidates. A server with no such documents is not asked again.

use std::time::Duration;

use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::options::{ClientOptions, Credential};
use mongotap_analyzers::detectors::indexes::catalog::{
    Explained, IndexSpec, ShardKey, SharedCatalog, Source,
};
use mongotap_analyzers::detectors::indexes::fit;
use mongotap_events::Clock;

use crate::proxy::upstream::without_credentials;

/// Collections read per second at most.
const PER_SECOND: usize = 4;
/// The app name of the side connection's handshake.
pub const APP_NAME: &str = "mongotap";
/// The `comment` every side command carries (profilers and logs show it).
pub const COMMENT: &str = "mongotap index advisor (side connection; --no-side-connection turns it off)";
/// How long one `listIndexes` may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait after a failure before trying again.
const BACKOFF: Duration = Duration::from_secs(30);

/// Where and how often.
#[derive(Debug, Clone)]
pub struct SideConfig {
    /// `--upstream` as given: `host:port` or a `mongodb://` URI.
    pub upstream: String,
    /// How often a collection's indexes are read again.
    pub refresh: Duration,
}

/// The URI the side connection uses: a `mongodb://` URI as given, or a direct
/// connection to `host:port`.
pub fn uri(upstream: &str) -> String {
    if upstream.contains("://") {
        upstream.to_owned()
    } else {
        format!("mongodb://{upstream}/?directConnection=true")
    }
}

async fn client(config: &SideConfig) -> Result<mongodb::Client, String> {
    let mut options = ClientOptions::parse(uri(&config.upstream)).await.map_err(|e| e.to_string())?;
    options.app_name = Some(APP_NAME.into());
    options.server_selection_timeout = Some(TIMEOUT);
    options.connect_timeout = Some(TIMEOUT);
    options.max_pool_size = Some(2);
    if let Ok(user) = std::env::var("MONGOTAP_UPSTREAM_USERNAME") {
        let mut c = Credential::default();
        c.username = Some(user);
        c.password = std::env::var("MONGOTAP_UPSTREAM_PASSWORD").ok();
        c.source = std::env::var("MONGOTAP_UPSTREAM_AUTH_SOURCE").ok();
        options.credential = Some(c);
    }
    mongodb::Client::with_options(options).map_err(|e| e.to_string())
}

/// The indexes of `namespace` (none when the collection does not exist yet).
async fn list_indexes(
    client: &mongodb::Client,
    namespace: &str,
) -> Result<Vec<IndexSpec>, mongodb::error::Error> {
    let (db, coll) = namespace.split_once('.').unwrap_or((namespace, ""));
    let reply = client.database(db).run_command(doc! {"listIndexes": coll, "comment": COMMENT}).await;
    let reply = match reply {
        Ok(r) => r,
        // NamespaceNotFound: no collection, no index.
        Err(e) if matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 26) => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let batch =
        reply.get_document("cursor").and_then(|c| c.get_array("firstBatch")).cloned().unwrap_or_default();
    Ok(batch
        .iter()
        .filter_map(|d| d.as_document())
        .filter_map(|d: &Document| RawDocumentBuf::try_from(d).ok())
        .filter_map(|raw| IndexSpec::from_document(&raw))
        .collect())
}

/// Whether the upstream keeps a cluster catalog: `config.collections` holds at least
/// one document (through `mongos` it always does: `config.system.sessions`).
async fn is_cluster(client: &mongodb::Client) -> Result<bool, mongodb::error::Error> {
    let cmd = doc! {"find": "collections", "limit": 1, "projection": {"_id": 1}, "comment": COMMENT};
    let reply = client.database("config").run_command(cmd).await?;
    let batch = reply.get_document("cursor").and_then(|c| c.get_array("firstBatch")).map(|b| b.len());
    Ok(batch.unwrap_or(0) > 0)
}

/// The current shard key of each of `namespaces` (`None`: not sharded), from the
/// cluster's `config.collections`.
async fn shard_keys(
    client: &mongodb::Client,
    namespaces: &[String],
) -> Result<Vec<(String, Option<ShardKey>)>, mongodb::error::Error> {
    let n = namespaces.len() as i64;
    let cmd = doc! {"find": "collections", "filter": {"_id": {"$in": namespaces}},
    "projection": {"key": 1, "dropped": 1, "unsplittable": 1}, "batchSize": n.max(1), "singleBatch": true, "comment": COMMENT};
    let reply = client.database("config").run_command(cmd).await?;
    let batch =
        reply.get_document("cursor").and_then(|c| c.get_array("firstBatch")).cloned().unwrap_or_default();
    let found: Vec<(String, ShardKey)> = batch
        .iter()
        .filter_map(|d| d.as_document())
        // Before 5.0 a dropped collection's document stayed, marked `dropped`; since
        // 8.0 an unsharded collection placed on a shard (`moveCollection`) has one,
        // marked `unsplittable`: neither is sharded.
        .filter(|d| !d.get_bool("dropped").unwrap_or(false) && !d.get_bool("unsplittable").unwrap_or(false))
        .filter_map(|d| Some((d.get_str("_id").ok()?.to_owned(), key_of(d.get_document("key").ok()?)?)))
        .collect();
    Ok(namespaces
        .iter()
        .map(|ns| (ns.clone(), found.iter().find(|(f, _)| f == ns).map(|(_, k)| k.clone())))
        .collect())
}

/// A shard key document (`{customerId: 1, _id: "hashed"}`) as the report writes it.
fn key_of(key: &Document) -> Option<ShardKey> {
    let parts: Option<ShardKey> = key
        .iter()
        .map(|(f, v)| {
            let form = match v {
                mongodb::bson::Bson::String(s) if s == "hashed" => serde_json::json!("hashed"),
                v if v
                    .as_f64()
                    .or_else(|| v.as_i32().map(f64::from))
                    .or_else(|| v.as_i64().map(|i| i as f64))
                    == Some(1.0) =>
                {
                    serde_json::json!(1)
                }
                _ => return None,
            };
            Some((f.clone(), form))
        })
        .collect();
    parts.filter(|p| !p.is_empty())
}

/// The side connection: its client, once connected, and its health.
pub struct SideConnection {
    config: SideConfig,
    catalog: SharedCatalog,
    clock: Clock,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    client: Option<mongodb::Client>,
    healthy: Option<bool>,
    retry_at: Option<tokio::time::Instant>,
    /// Whether the upstream is a sharded cluster (see [`is_cluster`]), once it said.
    cluster: Option<bool>,
    /// No shard-key read before this time (after a failure).
    keys_retry_at: Option<tokio::time::Instant>,
}

impl SideConnection {
    /// A side connection filling `catalog`; nothing happens until [`SideConnection::run`].
    pub fn new(config: SideConfig, catalog: SharedCatalog) -> std::sync::Arc<SideConnection> {
        std::sync::Arc::new(SideConnection {
            config,
            catalog,
            clock: Clock::new(),
            state: Default::default(),
        })
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, mongotap_analyzers::detectors::indexes::catalog::IndexCatalog> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the indexes of up to `most` collections that are due. The live proxy
    /// calls it every second; a last call before the final report catches the
    /// collections of a short run.
    pub async fn refresh(&self, most: usize) {
        let mut st = self.state.lock().await;
        if st.retry_at.is_some_and(|t| tokio::time::Instant::now() < t) {
            return;
        }
        let (now, refresh) = (self.clock.now(), self.config.refresh.as_micros() as u64);
        let due = self.lock().due(now, refresh);
        // Shard keys only while the upstream may be a cluster (not yet known, or one),
        // and not while a failure's backoff runs.
        let waiting = st.keys_retry_at.is_some_and(|t| tokio::time::Instant::now() < t);
        let keys_due = match st.cluster {
            None | Some(true) if !waiting => self.lock().shard_keys_due(now, refresh),
            _ => Vec::new(),
        };
        if due.is_empty() && keys_due.is_empty() {
            return;
        }
        if st.client.is_none() {
            match client(&self.config).await {
                Ok(c) => st.client = Some(c),
                Err(e) => {
                    self.lock().set_side(format!("not started: {e}"));
                    if st.healthy != Some(false) {
                        tracing::warn!("side connection to the upstream not started: {e}; index knowledge comes from the traffic until it starts (retrying every {BACKOFF:?})");
                        st.healthy = Some(false);
                    }
                    st.retry_at = Some(tokio::time::Instant::now() + BACKOFF);
                    return;
                }
            }
        }
        let c = st.client.clone().expect("just set");
        for ns in due.into_iter().take(most) {
            match tokio::time::timeout(TIMEOUT, list_indexes(&c, &ns)).await {
                Ok(Ok(specs)) => {
                    if st.healthy != Some(true) {
                        tracing::info!(upstream = %without_credentials(&self.config.upstream), "side connection: reading the indexes of the collections in use (listIndexes)");
                        st.healthy = Some(true);
                    }
                    let mut cat = self.lock();
                    cat.install(&ns, specs, Source::SideConnection, self.clock.now());
                    cat.set_side("connected");
                }
                // The server refused this collection only (a view, no privilege on it):
                // try it again at the next refresh, and go on with the others.
                Ok(Err(e)) if matches!(*e.kind, mongodb::error::ErrorKind::Command(_)) => {
                    tracing::debug!(namespace = %ns, "side connection: listIndexes refused: {}", error_code(&e));
                    self.lock().read_without_answer(&ns, self.clock.now());
                }
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => format!("listIndexes took more than {TIMEOUT:?}"),
                    };
                    if st.healthy != Some(false) {
                        tracing::warn!(
                            upstream = %without_credentials(&self.config.upstream),
                            "side connection: cannot read indexes ({why}); using what the traffic shows, retrying every {BACKOFF:?}"
                        );
                        st.healthy = Some(false);
                    }
                    self.lock().set_side(format!("failing: {why}"));
                    st.retry_at = Some(tokio::time::Instant::now() + BACKOFF);
                    return;
                }
            }
        }
        self.read_shard_keys(&mut st, &c, &keys_due).await;
    }

    /// On a sharded cluster, the current shard keys of `namespaces` (a hundred per
    /// `find`).
    async fn read_shard_keys(&self, st: &mut State, client: &mongodb::Client, namespaces: &[String]) {
        if namespaces.is_empty() {
            return;
        }
        if st.cluster.is_none() {
            match tokio::time::timeout(TIMEOUT, is_cluster(client)).await {
                Ok(Ok(cluster)) => {
                    if cluster {
                        tracing::info!("side connection: the upstream is a sharded cluster; reading the current shard keys (config.collections)");
                    }
                    st.cluster = Some(cluster);
                }
                // Refused (no privilege on `config`): said once, not asked again.
                Ok(Err(e)) if matches!(*e.kind, mongodb::error::ErrorKind::Command(_)) => {
                    tracing::info!(
                        "side connection: config.collections refused ({}); current shard keys are not read",
                        error_code(&e)
                    );
                    st.cluster = Some(false);
                }
                // Unreachable for now (a config server away): asked again later.
                _ => {
                    tracing::debug!(
                        "side connection: config.collections did not answer; asking again in {BACKOFF:?}"
                    );
                    st.keys_retry_at = Some(tokio::time::Instant::now() + BACKOFF);
                    return;
                }
            }
        }
        if st.cluster != Some(true) {
            return;
        }
        for chunk in namespaces.chunks(100) {
            let failed = match tokio::time::timeout(TIMEOUT, shard_keys(client, chunk)).await {
                Ok(Ok(keys)) => {
                    let mut cat = self.lock();
                    for (ns, key) in keys {
                        cat.set_shard_key(&ns, key, self.clock.now());
                    }
                    continue;
                }
                Ok(Err(e)) => format!("refused: {}", error_code(&e)),
                Err(_) => format!("took more than {TIMEOUT:?}"),
            };
            tracing::debug!("side connection: config.collections {failed}; asking again in {BACKOFF:?}");
            st.keys_retry_at = Some(tokio::time::Instant::now() + BACKOFF);
            return;
        }
    }

    /// With `--explain`: runs `explain` (`executionStats`) on one sampled request of a
    /// shape no index serves, and keeps what it says for the advisor's evidence.
    async fn explain_one(&self, client: &mongodb::Client) {
        let Some(sample) = fit::next_unserved_sample(&mut self.lock()) else { return };
        let db = sample.namespace.split_once('.').map_or(sample.namespace.as_str(), |(d, _)| d);
        let cmd = doc! {"explain": sample.command, "verbosity": "executionStats", "comment": COMMENT};
        match tokio::time::timeout(TIMEOUT, client.database(db).run_command(cmd)).await {
            Ok(Ok(reply)) => {
                if let Some(e) = explained(&reply) {
                    self.lock().set_explained(sample.shape, e);
                }
            }
            // The server's message may quote the command's values: only its code.
            Ok(Err(e)) => {
                tracing::debug!(namespace = %sample.namespace, "explain failed: {}", error_code(&e))
            }
            Err(_) => tracing::debug!(namespace = %sample.namespace, "explain took more than {TIMEOUT:?}"),
        }
    }

    /// Before the final report: reads what is due and explains a few samples, so
    /// that a short run is judged against the indexes that exist.
    pub async fn last_look(&self) {
        self.refresh(usize::MAX).await;
        let client = self.state.lock().await.client.clone();
        if let Some(c) = client {
            for _ in 0..10 {
                self.explain_one(&c).await;
            }
        }
    }

    /// Refreshes every second until the process ends.
    pub async fn run(self: std::sync::Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.refresh(PER_SECOND).await;
            let client = self.state.lock().await.client.clone();
            if let Some(c) = client {
                self.explain_one(&c).await;
            }
        }
    }
}

/// The figures of an explain reply: `executionStats` totals and the winning plan's
/// stages (found wherever they sit: a find's top level, an aggregation's `$cursor`).
fn explained(reply: &Document) -> Option<Explained> {
    let stats = find_key(reply, "executionStats")?;
    let n = |k: &str| {
        stats.get(k).and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from))).unwrap_or(0) as u64
    };
    let mut plan = Vec::new();
    let mut stage = find_key(reply, "winningPlan");
    while let Some(s) = stage {
        let s = s.get_document("queryPlan").unwrap_or(s);
        if let Ok(name) = s.get_str("stage") {
            plan.push(name.to_owned());
        }
        stage = s.get_document("inputStage").ok();
    }
    Some(Explained {
        keys_examined: n("totalKeysExamined"),
        docs_examined: n("totalDocsExamined"),
        returned: n("nReturned"),
        plan: plan.join(" <- "),
    })
}

/// The first document under `key`, searched depth first.
fn find_key<'d>(d: &'d Document, key: &str) -> Option<&'d Document> {
    if let Ok(v) = d.get_document(key) {
        return Some(v);
    }
    d.values().find_map(|v| match v {
        mongodb::bson::Bson::Document(inner) => find_key(inner, key),
        mongodb::bson::Bson::Array(items) => {
            items.iter().find_map(|i| i.as_document().and_then(|x| find_key(x, key)))
        }
        _ => None,
    })
}

/// An upstream error without its message, which may quote values: the server's
/// code and code name, or the kind of failure.
fn error_code(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => format!("code {} ({})", c.code, c.code_name),
        mongodb::error::ErrorKind::Io(io) => format!("i/o: {io}"),
        mongodb::error::ErrorKind::Authentication { .. } => "authentication failed".to_owned(),
        _ => "not a command error (connection, selection or protocol)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_connects_directly_and_uris_are_kept() {
        assert_eq!(uri("127.0.0.1:27017"), "mongodb://127.0.0.1:27017/?directConnection=true");
        assert_eq!(uri("mongodb://u:p@h:1/?authSource=admin"), "mongodb://u:p@h:1/?authSource=admin");
    }

    #[test]
    fn shard_key_documents_as_the_report_writes_them() {
        let k = key_of(&doc! {"customerId": 1_i32, "createdAt": 1.0, "_id": "hashed"}).unwrap();
        let names: Vec<(&str, String)> = k.iter().map(|(f, v)| (f.as_str(), v.to_string())).collect();
        assert_eq!(
            names,
            [("customerId", "1".into()), ("createdAt", "1".into()), ("_id", "\"hashed\"".into())]
        );
        assert_eq!(key_of(&doc! {"a": -1}), None, "a shard key is ascending or hashed");
        assert_eq!(key_of(&doc! {}), None);
    }

    #[test]
    fn explain_replies_of_find_and_aggregate() {
        let find = doc! {"queryPlanner": {"winningPlan": {"stage": "SORT", "inputStage": {"stage": "COLLSCAN"}}},
        "executionStats": {"nReturned": 20, "totalKeysExamined": 0, "totalDocsExamined": 200}, "ok": 1.0};
        let e = explained(&find).unwrap();
        assert_eq!((e.keys_examined, e.docs_examined, e.returned), (0, 200, 20));
        assert_eq!(e.plan, "SORT <- COLLSCAN");
        let agg = doc! {"stages": [{"$cursor": {"queryPlanner": {"winningPlan": {"stage": "FETCH",
        "inputStage": {"stage": "IXSCAN"}}}, "executionStats": {"nReturned": 5_i64, "totalKeysExamined": 5_i64,
        "totalDocsExamined": 5_i64}}}], "ok": 1.0};
        assert_eq!(explained(&agg).unwrap().plan, "FETCH <- IXSCAN");
    }
}

#[cfg(test)]
mod credential_tests {
    use crate::proxy::upstream::without_credentials;

    #[test]
    fn credentials_never_reach_a_log() {
        assert_eq!(
            without_credentials("mongodb://u:p%40ss@h1:1,h2:2/db?authSource=admin"),
            "mongodb://***@h1:1,h2:2/db?authSource=admin"
        );
        assert_eq!(without_credentials("mongodb://h:1/?appName=a@b"), "mongodb://h:1/?appName=a@b");
        assert_eq!(without_credentials("127.0.0.1:27017"), "127.0.0.1:27017");
    }
}
