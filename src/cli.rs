//! The command line. Flags follow REPORT-CONTRACT.md so scripts and CI can rely on them;
//! every flag of `proxy` can also come from a `MONGOTAP_*` environment variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// A transparent MongoDB proxy that builds the access-pattern table of your traffic.
#[derive(Debug, Parser)]
#[command(name = "mongotap", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Commands,
}

const EXIT_CODES: &str = "Exit codes: 0 success; 1 runtime failure (cannot bind, cannot write a report, unreadable input); 2 bad usage; 3 the CI gate found something new (mongotap report --baseline).\nLogs go to stderr; set RUST_LOG (e.g. RUST_LOG=mongotap=debug) to see more.";

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Forward traffic to the upstream and analyse it on the side.
    ///
    /// Example: mongotap proxy --listen 127.0.0.1:27018 --upstream 127.0.0.1:27017 --report-md report.md
    Proxy(ProxyArgs),
    /// The proxy, recording a trace: the same as `proxy --trace PATH`.
    ///
    /// Example: mongotap record --listen 127.0.0.1:27018 --upstream 127.0.0.1:27017 --trace staging.mtt
    Record(ProxyArgs),
    /// Analyse traffic offline: trace files, pcap/pcapng captures of the MongoDB port,
    /// or mongod's JSON logs, through the same table and detectors as the proxy.
    ///
    /// Example: mongotap analyze staging.mtt --report-json report.json --report-html report.html
    ///
    /// Example: tcpdump -i lo -w cap.pcap port 27017; mongotap analyze cap.pcap --report-md report.md
    Analyze(AnalyzeArgs),
    /// Send the requests of a raw trace (recorded with --capture-values) again to a
    /// server, at the recorded pace, and compare latencies per shape before and after:
    /// did the schema or index change help?
    ///
    /// Example: mongotap replay staging.mtt --target mongodb://127.0.0.1:27017 --speed 2
    Replay(ReplayArgs),
    /// Re-render a saved JSON report, and gate CI on what is new versus a baseline.
    ///
    /// Example: mongotap report out/report.json --report-md out/report.md
    ///
    /// Example: mongotap report new.json --baseline main.json --fail-on missing_index,n_plus_one,new_shape
    Report(ReportArgs),
    /// List the detectors' thresholds with their sources, as a `[detectors]` TOML table
    /// (with a config file's overrides applied).
    ///
    /// Example: mongotap detectors --config mongotap.toml
    Detectors(DetectorsArgs),
    /// Watch a running proxy from a terminal: the busiest shapes and operations with
    /// their rates and latencies, new findings, dropped events (reads its admin
    /// endpoint). `q` quits; piped, it prints plain lines every interval.
    ///
    /// Example: mongotap top --admin 127.0.0.1:9187
    Top(TopArgs),
    /// Print a shell completion script.
    ///
    /// Example: mongotap completions bash > /etc/bash_completion.d/mongotap
    Completions(CompletionsArgs),
    /// Print the man page (roff), generated from these flags.
    ///
    /// Example: mongotap man > mongotap.1 && man ./mongotap.1
    Man,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// The proxy's admin endpoint (its --admin).
    #[arg(long, env = "MONGOTAP_ADMIN", default_value = "127.0.0.1:9187", value_name = "ADDR")]
    pub admin: String,
    /// Seconds between two reads.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Rows per section.
    #[arg(long, default_value_t = 10)]
    pub rows: usize,
    /// Read once, print, and exit (as a script or a test would).
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct DetectorsArgs {
    /// A TOML config file whose [detectors] table overrides the defaults.
    #[arg(long, env = "MONGOTAP_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// A TOML file with any of these flags as keys (listen = "...", max_shapes = 500, ...).
    /// Flags and MONGOTAP_* variables take precedence over it.
    #[arg(long, env = "MONGOTAP_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Address clients connect to (point your application's URI here, with
    /// directConnection=true, or without it in replica-set mode: --rewrite-topology).
    #[arg(long, env = "MONGOTAP_LISTEN", default_value = "127.0.0.1:27018")]
    pub listen: String,
    /// The real server: host:port, or a mongodb:// URI (its first host is the one
    /// --listen forwards to; with --rewrite-topology the others are learnt from it).
    #[arg(long, env = "MONGOTAP_UPSTREAM", default_value = "127.0.0.1:27017")]
    pub upstream: String,
    #[command(flatten)]
    pub outputs: ReportOutputs,
    /// The live HTTP endpoint: /metrics (Prometheus), /report.json, /report.html, /healthz. "off" disables it.
    #[arg(long, env = "MONGOTAP_ADMIN", default_value = "127.0.0.1:9187", value_name = "ADDR|off")]
    pub admin: String,
    /// How often the report files are rewritten while running, in seconds (also on exit).
    #[arg(long, env = "MONGOTAP_REPORT_INTERVAL", default_value_t = 10, value_name = "SECONDS")]
    pub report_interval: u64,
    /// Client connections served at once; more wait in the accept backlog.
    #[arg(long, env = "MONGOTAP_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Close a connection idle in both directions for this many seconds (keep it above 10 s, awaitable hello's wait).
    #[arg(long, env = "MONGOTAP_IDLE_TIMEOUT", default_value_t = 3600, value_name = "SECONDS")]
    pub idle_timeout: u64,
    /// On SIGINT/SIGTERM, how long open connections may take to finish, in seconds.
    #[arg(long, env = "MONGOTAP_SHUTDOWN_GRACE", default_value_t = 5, value_name = "SECONDS")]
    pub shutdown_grace: u64,
    /// Distinct shapes kept in the table; operations of further shapes are counted in one "other shapes" row.
    #[arg(long, env = "MONGOTAP_MAX_SHAPES", default_value_t = 10_000)]
    pub max_shapes: usize,
    /// Put one literal example per shape in the reports. Off by default: reports then
    /// carry placeholders only. Auth commands never have examples.
    #[arg(long, env = "MONGOTAP_SHOW_VALUES")]
    pub show_values: bool,
    /// Events queued for analysis before the tap starts dropping (and counting) them.
    /// Deep enough to ride out the analysis thread's scheduling gaps at saturation
    /// (8,192 dropped 1.1% at bench/proxy.sh's 32 connections, 32,768 none); the
    /// memory is bounded by --tap-mb either way.
    #[arg(long, env = "MONGOTAP_TAP_CAPACITY", default_value_t = 32_768)]
    pub tap_capacity: usize,
    /// Terminate TLS from clients with this certificate chain and key (one PEM file,
    /// as mongod's --tlsCertificateKeyFile). Without it clients speak plaintext.
    #[arg(long, env = "MONGOTAP_TLS_CERTIFICATE_KEY_FILE", value_name = "PEM")]
    pub tls_certificate_key_file: Option<std::path::PathBuf>,
    /// Require client certificates signed by these CAs (as mongod's --tlsCAFile).
    #[arg(long, env = "MONGOTAP_TLS_CA_FILE", value_name = "PEM", requires = "tls_certificate_key_file")]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Replica-set mode: rename the members named in every hello reply (hosts,
    /// passives, arbiters, primary, me) to mongotap listeners, one per member on the
    /// ports after --listen's, so a driver that discovers the set (no
    /// directConnection) connects only through mongotap.
    #[arg(long, env = "MONGOTAP_REWRITE_TOPOLOGY")]
    pub rewrite_topology: bool,
    /// In replica-set mode, the host name clients reach mongotap by (default:
    /// --listen's host; needed when --listen is on all interfaces).
    #[arg(long, env = "MONGOTAP_ADVERTISE_HOST", value_name = "HOST", requires = "rewrite_topology")]
    pub advertise_host: Option<String>,
    /// Megabytes of messages queued for analysis before the tap starts dropping (and
    /// counting) them: the analysis backlog's memory bound.
    #[arg(long, env = "MONGOTAP_TAP_MB", default_value_t = 128, value_name = "MB")]
    pub tap_mb: u64,
    /// A production round trip to the database, in ms: the detectors price extra round
    /// trips (N+1) with it, since staging answers locally (default 1, or [detectors] assumed_rtt_ms).
    #[arg(long, env = "MONGOTAP_ASSUMED_RTT_MS", value_name = "MS")]
    pub assumed_rtt_ms: Option<f64>,
    /// Do not open mongotap's own connection to the upstream to read the indexes of the
    /// collections in use (listIndexes); the index advisor then knows only what the
    /// traffic shows. Its credentials come from the --upstream URI or from
    /// MONGOTAP_UPSTREAM_USERNAME / MONGOTAP_UPSTREAM_PASSWORD / MONGOTAP_UPSTREAM_AUTH_SOURCE.
    #[arg(long, env = "MONGOTAP_NO_SIDE_CONNECTION")]
    pub no_side_connection: bool,
    /// How often the side connection reads a collection's indexes again, in seconds
    /// (at once after a createIndexes or dropIndexes passes through).
    #[arg(long, env = "MONGOTAP_INDEX_REFRESH", default_value_t = 60, value_name = "SECONDS")]
    pub index_refresh: u64,
    /// For staging: run explain (executionStats) on the side connection with one real
    /// request of each query shape no index serves, one a second, and put the keys and
    /// documents examined in the missing_index evidence. The sampled requests stay in memory.
    #[arg(long, env = "MONGOTAP_EXPLAIN", conflicts_with = "no_side_connection")]
    pub explain: bool,
    #[command(flatten)]
    pub trace: TraceArgs,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Record every message of every connection into this trace file (zstd, redacted
    /// unless --capture-values); `mongotap analyze PATH` reads it back.
    #[arg(long, env = "MONGOTAP_TRACE", value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Keep the values in the trace as they were (needed for `mongotap replay`). The
    /// trace then holds your data: staging only. Auth commands are still dropped.
    #[arg(long, env = "MONGOTAP_CAPTURE_VALUES", requires = "trace")]
    pub capture_values: bool,
    /// Start a new trace file (PATH.1, PATH.2, ...) after this many MB written (0: never).
    #[arg(
        long,
        env = "MONGOTAP_TRACE_ROTATE_MB",
        default_value_t = 0,
        value_name = "MB",
        requires = "trace"
    )]
    pub trace_rotate_mb: u64,
    /// Start a new trace file after this many minutes (0: never).
    #[arg(
        long,
        env = "MONGOTAP_TRACE_ROTATE_MINUTES",
        default_value_t = 0,
        value_name = "MINUTES",
        requires = "trace"
    )]
    pub trace_rotate_minutes: u64,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Raw trace files (their parts in order).
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// The server to send them to: host:port or a mongodb:// URI (its first host; no
    /// auth or TLS: replay a staging copy).
    #[arg(long, value_name = "URI")]
    pub target: String,
    /// Pace: 1 is as recorded, 2 twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Reports of the replayed traffic (the table below compares it with the trace).
    #[command(flatten)]
    pub outputs: ReportOutputs,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Trace files, pcap/pcapng captures or mongod JSON logs, recognised by their
    /// content; analysed in the order given, as one stream of traffic.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub outputs: ReportOutputs,
    /// For captures: the server's TCP port (default: found from the traffic, 27017 first).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Put one literal example per shape in the reports (raw traces and captures only).
    #[arg(long)]
    pub show_values: bool,
    /// Distinct shapes kept in the table.
    #[arg(long, default_value_t = 10_000)]
    pub max_shapes: usize,
    /// Show progress on the terminal (default: when stderr is a terminal).
    #[arg(long)]
    pub progress: bool,
}

#[derive(Debug, Args)]
pub struct ReportOutputs {
    /// Write the JSON report (schema 1) here.
    #[arg(long, env = "MONGOTAP_REPORT_JSON", value_name = "PATH")]
    pub report_json: Option<PathBuf>,
    /// Write the Markdown report here.
    #[arg(long, env = "MONGOTAP_REPORT_MD", value_name = "PATH")]
    pub report_md: Option<PathBuf>,
    /// Write the HTML report (one self-contained file) here.
    #[arg(long, env = "MONGOTAP_REPORT_HTML", value_name = "PATH")]
    pub report_html: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: Option<ReportCommand>,
    /// A JSON report written by `mongotap proxy --report-json` (or analyze, or merge).
    #[arg(required = true)]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub outputs: ReportOutputs,
    /// A baseline JSON report (say, from the main branch) to compare with; see --fail-on.
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit 3 if a new finding of these kinds appears (finding kinds such as
    /// n_plus_one, lookup_chain, missing_index; "any" for every kind; "new_shape" for a new read
    /// or write shape). An unknown word is an error (exit 2), so a typo cannot pass the gate.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "KIND,...",
        requires = "baseline",
        default_value = "any"
    )]
    pub fail_on: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Combine the JSON reports of several proxies (one per app instance, or per
    /// member) into the report of their combined traffic: counts summed, percentiles
    /// from the merged histograms, findings merged with their evidence.
    ///
    /// Example: mongotap report merge a.json b.json --report-json all.json --report-md all.md
    Merge(MergeArgs),
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The JSON reports to combine.
    #[arg(required = true, num_args = 2.., value_name = "REPORT")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub outputs: ReportOutputs,
}

impl ProxyArgs {
    /// The proxy configuration these flags describe.
    /// Every value is checked here, before anything starts: a bad one is refused
    /// with the flag's name, what was given (credentials masked) and what is
    /// accepted (the caller exits with code 2).
    pub fn config(&self) -> Result<mongotap::proxy::ProxyConfig, String> {
        use mongotap::proxy::tls::{ClientTls, TlsOptions, UpstreamTls};
        let upstream = mongotap::proxy::upstream::parse_upstream(&self.upstream)
            .map_err(|e| format!("--upstream {e}"))?;
        let at_least_one = [
            ("--report-interval", self.report_interval, "seconds between report writes"),
            ("--max-connections", self.max_connections as u64, "client connections served at once"),
            ("--max-shapes", self.max_shapes as u64, "distinct shapes kept in the table"),
            ("--tap-mb", self.tap_mb, "megabytes queued for analysis"),
            ("--tap-capacity", self.tap_capacity as u64, "events queued for analysis"),
            ("--index-refresh", self.index_refresh, "seconds between index reads"),
        ];
        for (flag, value, what) in at_least_one {
            if value == 0 {
                return Err(format!("{flag} 0 means nothing: give a whole number of {what}, 1 or more"));
            }
        }
        self.outputs.check()?;
        if let Some(trace) = &self.trace.trace {
            if trace.exists() {
                return Err(format!(
                    "--trace {}: the file exists, and traces are never overwritten; give a new path",
                    trace.display()
                ));
            }
            writable("--trace", trace)?;
        }
        let hosts =
            self.upstream.split_once("://").map_or("", |(_, r)| r).split(['/', '?']).next().unwrap_or("");
        if hosts.contains(',') && !self.rewrite_topology {
            tracing::warn!(
                "--upstream names several hosts: mongotap forwards to the first, {upstream}; give the primary's address (clients connect with directConnection=true), or use --rewrite-topology"
            );
        }
        let rewrite_topology = match (self.rewrite_topology, &self.advertise_host) {
            (false, _) => None,
            (true, Some(host)) => Some(host.clone()),
            (true, None) => Some(advertised_host(&self.listen)?),
        };
        let client_tls = match &self.tls_certificate_key_file {
            Some(pem) => Some(ClientTls::new(pem, self.tls_ca_file.as_deref())?),
            None => None,
        };
        // TLS to the upstream comes from its URI's own options, as drivers read them.
        let upstream_tls = match TlsOptions::from_uri(&self.upstream)? {
            Some(opts) => {
                if opts.allow_invalid_certificates {
                    tracing::warn!("tlsAllowInvalidCertificates: the upstream's certificate is NOT verified (staging only)");
                }
                if opts.certificate_key_file.is_some() {
                    tracing::warn!("tlsCertificateKeyFile: every connection through mongotap presents this certificate to the upstream, so any client of the proxy can authenticate as its subject with MONGODB-X509; give it a user with no more rights than the clients have");
                }
                let host = upstream.rsplit_once(':').map_or(upstream.as_str(), |(h, _)| h);
                Some(UpstreamTls::new(host, &opts)?)
            }
            None => None,
        };
        if self.idle_timeout <= 10 {
            return Err("--idle-timeout must be above 10 s, or awaitable hello connections are cut".into());
        }
        Ok(mongotap::proxy::ProxyConfig {
            listen: self.listen.clone(),
            upstream: upstream.clone(),
            max_connections: self.max_connections,
            idle_timeout: Duration::from_secs(self.idle_timeout),
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
            tap_capacity: self.tap_capacity,
            tap_bytes: self.tap_mb * 1024 * 1024,
            client_tls,
            upstream_tls,
            rewrite_topology,
            trace: self.trace.trace.as_ref().map(|path| mongotap_trace::TraceOptions {
                path: path.clone(),
                raw: self.trace.capture_values,
                rotate_bytes: self.trace.trace_rotate_mb * 1024 * 1024,
                rotate_after: Duration::from_secs(self.trace.trace_rotate_minutes * 60),
                flush_every: Duration::from_secs(1),
                // host:port only: a URI may carry credentials.
                upstream: upstream.clone(),
            }),
            ..mongotap::proxy::ProxyConfig::default()
        })
    }
}

impl ReportOutputs {
    /// Whether each report path can be written, checked now rather than at the first
    /// write (ten seconds later, or at exit after an hour of capture).
    pub fn check(&self) -> Result<(), String> {
        for (flag, path) in [
            ("--report-json", &self.report_json),
            ("--report-md", &self.report_md),
            ("--report-html", &self.report_html),
        ] {
            if let Some(p) = path {
                writable(flag, p)?;
            }
        }
        Ok(())
    }
}

/// Whether a file can be created at `path`: its directory exists and takes a new
/// file (tried, then removed), and `path` is not a directory.
fn writable(flag: &str, path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!("{flag} {shown}: a directory, not a file path"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("{flag} {shown}: the directory {} does not exist", dir.display()));
    }
    let probe = dir.join(format!(".mongotap-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("{flag} {shown}: cannot write in {}: {e}", dir.display())),
    }
}

/// The host of `--listen`, as clients can be told it: not a wildcard address.
fn advertised_host(listen: &str) -> Result<String, String> {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let wildcard = host.is_empty()
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified());
    if wildcard {
        return Err(format!(
            "--rewrite-topology with --listen {listen}: give --advertise-host, the name clients reach this machine by"
        ));
    }
    Ok(host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::advertised_host;

    #[test]
    fn the_advertised_host_is_listens_unless_it_is_a_wildcard() {
        assert_eq!(advertised_host("127.0.0.1:27018").unwrap(), "127.0.0.1");
        assert_eq!(advertised_host("mongotap.staging:27018").unwrap(), "mongotap.staging");
        assert_eq!(advertised_host("[::1]:27018").unwrap(), "[::1]");
        for wildcard in ["0.0.0.0:27018", "[::]:27018", ":27018"] {
            assert!(advertised_host(wildcard).unwrap_err().contains("--advertise-host"), "{wildcard}");
        }
    }
}
