//! The forwarding side: a listener, one session per client, two pumps per session,
//! and the tap. Nothing here parses more than a header or waits on analysis.

pub mod listener;
pub mod pump;
pub mod rewrite;
pub mod session;
pub mod shards;
pub mod tap;
pub mod tls;
pub mod topology;
pub mod upstream;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongotap_analyzers::pipeline::Pipeline;
use mongotap_events::Clock;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::analysis::Analysis;
use crate::recording::Recording;
use tap::Tap;
use topology::{Member, Topology};
use upstream::Upstream;

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where clients connect.
    pub listen: String,
    /// Where mongotap connects for them (`host:port`).
    pub upstream: String,
    /// Client connections served at once; further ones wait in the accept backlog.
    pub max_connections: usize,
    /// A connection with no bytes either way for this long is closed. Keep it above
    /// awaitable hello's 10 s and the application's longest awaitData wait.
    pub idle_timeout: Duration,
    /// How long to wait for the upstream to accept a connection.
    pub connect_timeout: Duration,
    /// On shutdown, how long in-flight connections may take to finish.
    pub shutdown_grace: Duration,
    /// Events the tap's channel holds before it drops.
    pub tap_capacity: usize,
    /// Bytes of messages the tap holds for the analysis before it drops.
    pub tap_bytes: u64,
    /// Messages larger than this are forwarded but not analysed.
    pub max_analysed_message: usize,
    /// TLS toward clients (plaintext when `None`).
    pub client_tls: Option<tls::ClientTls>,
    /// TLS toward the upstream (plaintext when `None`).
    pub upstream_tls: Option<tls::UpstreamTls>,
    /// Replica-set mode: rename the members in hello replies to mongotap listeners,
    /// one per member, advertised under this host (see [`topology`]).
    pub rewrite_topology: Option<String>,
    /// Record a trace of every message (see `mongotap_trace`).
    pub trace: Option<mongotap_trace::TraceOptions>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: "127.0.0.1:27018".into(),
            upstream: "127.0.0.1:27017".into(),
            max_connections: 4096,
            idle_timeout: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(5),
            tap_capacity: 32_768,
            tap_bytes: 128 * 1024 * 1024,
            max_analysed_message: 16 * 1024 * 1024 + 16 * 1024,
            client_tls: None,
            upstream_tls: None,
            rewrite_topology: None,
            trace: None,
        }
    }
}

/// What every session shares.
pub struct Shared {
    /// The configuration.
    pub config: ProxyConfig,
    /// The upstream clients reach through `--listen`, and its health.
    pub seed: Arc<Member>,
    /// The replica set's members and their listeners, in replica-set mode.
    pub topology: Option<Arc<Topology>>,
    /// The tap.
    pub tap: Tap,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections accepted so far (also the next connection id).
    pub accepted: AtomicU64,
    /// Clients waiting in the accept backlog while `--max-connections` are open
    /// (sampled every second at the cap; 0 below it).
    pub waiting: AtomicU64,
    /// Times the connection cap was reached (one per burst).
    pub cap_reached: AtomicU64,
}

impl Shared {
    /// Failed connections to the upstream (every member's, in replica-set mode).
    pub fn upstream_failures(&self) -> u64 {
        match &self.topology {
            Some(t) => t.failures(),
            None => self.seed.upstream.failures(),
        }
    }
}

/// A running proxy.
pub struct Proxy {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    listener: Option<JoinHandle<()>>,
    analysis: Analysis,
    recording: Option<Recording>,
}

impl Proxy {
    /// Binds the listener and starts serving and analysing.
    pub async fn start(config: ProxyConfig) -> std::io::Result<Proxy> {
        Proxy::start_with(config, Pipeline::default()).await
    }

    /// Like [`Proxy::start`], with a pipeline of the caller's.
    pub async fn start_with(config: ProxyConfig, pipeline: Pipeline) -> std::io::Result<Proxy> {
        crate::memory::give_large_blocks_back();
        let listener = TcpListener::bind(&config.listen).await?;
        let local_addr = listener.local_addr()?;
        let clock = Clock::new();
        let (mut tap, rx) = Tap::new(config.tap_capacity, config.tap_bytes, clock);
        let recording = match &config.trace {
            Some(opts) => {
                let writer = mongotap_trace::TraceWriter::create(opts.clone(), clock.now())
                    .map_err(std::io::Error::other)?;
                let (trace_tap, trace_rx) = Tap::new(config.tap_capacity, config.tap_bytes, clock);
                tap = tap.also_to(trace_tap);
                Some(Recording::spawn(trace_rx, writer, clock))
            }
            None => None,
        };
        let analysis = Analysis::spawn(rx, pipeline, clock);
        let upstream =
            Upstream::new(config.upstream.clone(), config.connect_timeout, config.upstream_tls.clone());
        let advertised = match &config.rewrite_topology {
            Some(host) => format!("{host}:{}", local_addr.port()),
            None => local_addr.to_string(),
        };
        let seed = Arc::new(Member { upstream, advertised });
        let (topology, added) = match &config.rewrite_topology {
            Some(host) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let tls = config.upstream_tls.clone();
                let t =
                    Topology::new(seed.clone(), local_addr, host.clone(), config.connect_timeout, tls, tx);
                (Some(Arc::new(t)), Some(rx))
            }
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            config,
            seed,
            topology,
            tap,
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            cap_reached: AtomicU64::new(0),
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(listener::serve(listener, added, shared.clone(), stop_rx));
        tracing::info!(listen = %local_addr, upstream = %shared.seed.upstream.addr(), "proxying");
        if shared.topology.is_some() {
            tracing::info!(
                "replica-set mode: clients are told this listener is {}; each member named in a hello reply gets a listener of its own, from port {} up",
                shared.seed.advertised,
                local_addr.port().saturating_add(1)
            );
        }
        Ok(Proxy { local_addr, shared, stop, listener: Some(task), analysis, recording })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What the sessions share (counters, the tap, the upstream).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The analysis thread.
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }

    /// Stops accepting, lets open connections finish within the grace period, closes
    /// the rest, then drains the analysis and closes the trace. Returns the pipeline
    /// for the final report.
    pub async fn shutdown(mut self) -> Analysis {
        let _ = self.stop.send(true);
        if let Some(t) = self.listener.take() {
            let _ = t.await;
        }
        self.analysis.stop();
        if let Some(mut r) = self.recording.take() {
            r.stop();
            let s = r.stats();
            let dropped = self.shared.tap.also().map_or(0, Tap::dropped);
            tracing::info!(
                records = s.records,
                dropped,
                not_redacted = s.not_redacted,
                "trace: {} records written, {dropped} dropped",
                s.records
            );
        }
        self.analysis
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        self.shared.open.load(Ordering::Relaxed)
    }
}
