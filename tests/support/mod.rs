//! Shared helpers for the end-to-end tests: a real SecantusDB upstream on a free
//! loopback port, and a mongotap proxy in front of it.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mongotap::proxy::{Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free loopback port (free when asked; the caller binds it soon after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A SecantusDB server, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Upstream {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

/// How to start the upstream.
#[derive(Default, Clone)]
pub struct UpstreamOptions {
    /// Run as a one-member replica set (transactions need it).
    pub replica_set: bool,
    /// Require SCRAM-SHA-256.
    pub auth: bool,
    /// A storage directory instead of `:memory:` (users survive a restart).
    pub storage: Option<PathBuf>,
    /// Serve TLS with this certificate and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
}

impl Upstream {
    /// A standalone in-memory server.
    pub fn start() -> Upstream {
        Upstream::start_with(UpstreamOptions::default())
    }

    /// A server as `opts` says. Panics with the setup command when SecantusDB is missing.
    pub fn start_with(opts: UpstreamOptions) -> Upstream {
        let bin = std::env::var_os("MONGOTAP_SECANTUSD")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".venv/bin/secantusd-py"));
        assert!(bin.exists(), "{} is missing: run ./scripts/setup.sh first", bin.display());
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!("mongotap-secantus-{port}.log"));
            let storage = opts.storage.as_deref().map(Path::to_path_buf).unwrap_or_else(|| ":memory:".into());
            let mut cmd = Command::new(&bin);
            cmd.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--log-level", "WARNING"])
                .arg("--storage-path")
                .arg(&storage)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log).unwrap())
                .stderr(std::fs::File::create(&log).unwrap());
            if !opts.replica_set {
                cmd.arg("--standalone");
            }
            if opts.auth {
                cmd.arg("--auth");
            }
            if let Some((cert, key)) = &opts.tls {
                cmd.arg("--tls-cert-file").arg(cert).arg("--tls-key-file").arg(key);
            }
            let mut child = cmd.spawn().expect("starting secantusd-py");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Upstream { child, port, log };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // Lost the port race, or failed: try another port.
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("SecantusDB did not start; see the logs in {}", std::env::temp_dir().display());
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server and waits for it to exit (nothing, once it has).
    pub fn stop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The mongotap binary running as a child process.
pub struct Mongotap {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Mongotap {
    /// `mongotap proxy` on a free port in front of `upstream`, logging to `log`.
    pub async fn start(upstream: &str, args: &[&str], log: &Path) -> Mongotap {
        Mongotap::start_as("proxy", upstream, args, log).await
    }

    /// `mongotap <sub>` (proxy or record) on a free port in front of `upstream`.
    pub async fn start_as(sub: &str, upstream: &str, args: &[&str], log: &Path) -> Mongotap {
        Mongotap::start_logging(sub, upstream, args, log, None).await
    }

    /// As [`Mongotap::start_as`], with `RUST_LOG` set for the child alone (the
    /// test process is shared with other tests under `cargo test`).
    pub async fn start_logging(
        sub: &str,
        upstream: &str,
        args: &[&str],
        log: &Path,
        rust_log: Option<&str>,
    ) -> Mongotap {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongotap"));
        if let Some(filter) = rust_log {
            cmd.env("RUST_LOG", filter);
        }
        let child = cmd
            .args([sub, "--listen", &format!("127.0.0.1:{port}"), "--upstream", upstream])
            .args(args)
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_listening(addr).await;
        Mongotap { child, addr }
    }

    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).unwrap().count()
    }

    pub fn rss_kib(&self) -> u64 {
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.child.id())).unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4
    }

    /// Sends `signal` (`-TERM`, `-KILL`) and waits for the exit.
    pub fn kill(&mut self, signal: &str) {
        Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        let _ = self.child.wait();
    }
}

impl Drop for Mongotap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A proxy config listening on a free loopback port in front of `upstream`.
pub fn proxy_config(upstream: &str) -> ProxyConfig {
    ProxyConfig { listen: "127.0.0.1:0".into(), upstream: upstream.into(), ..ProxyConfig::default() }
}

/// Starts a proxy in front of `upstream`.
pub async fn start_proxy(upstream: &str) -> Proxy {
    Proxy::start(proxy_config(upstream)).await.unwrap()
}

/// A proxy whose index advisor reads a catalog that mongotap's side connection to
/// `upstream` fills (refreshed every minute), and that catalog.
pub async fn proxy_with_side_connection(
    upstream: &str,
) -> (Proxy, mongotap_analyzers::detectors::indexes::catalog::SharedCatalog) {
    use mongotap::side_connection::{SideConfig, SideConnection};
    use mongotap_analyzers::detectors::{indexes::catalog::IndexCatalog, Detectors, Thresholds};
    let catalog = IndexCatalog::shared();
    let pipeline = mongotap_analyzers::pipeline::Pipeline::with_detectors(
        mongotap_analyzers::exchange::Limits::default(),
        mongotap_analyzers::table::TableLimits::default(),
        Detectors::with_catalog(Thresholds::default(), catalog.clone()),
    );
    let proxy = Proxy::start_with(proxy_config(upstream), pipeline).await.unwrap();
    let side = SideConfig { upstream: upstream.to_owned(), refresh: Duration::from_secs(60) };
    tokio::spawn(SideConnection::new(side, catalog.clone()).run());
    (proxy, catalog)
}

/// A driver URI for the proxy.
pub fn uri(addr: SocketAddr, app: &str) -> String {
    format!("mongodb://{addr}/?directConnection=true&appName={app}&serverSelectionTimeoutMS=5000")
}

/// Validates a JSON report against `schemas/report.schema.json`.
pub fn assert_valid_report(report_json: &str) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("schemas/report.schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let instance: serde_json::Value = serde_json::from_str(report_json).unwrap();
    let errors: Vec<String> =
        validator.iter_errors(&instance).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "report violates the schema: {errors:#?}");
}

/// Waits (up to 5 s) until something listens on `addr`: a child process started.
pub async fn wait_listening(addr: SocketAddr) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("nothing listens on {addr}");
}

/// An HTTP GET of `path` on `addr` (the admin endpoint): the whole response.
pub async fn http_get(addr: &str, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Bytes seen on each relayed connection: [client to server, server to client].
pub type Recorded = std::sync::Arc<std::sync::Mutex<Vec<[Vec<u8>; 2]>>>;

/// Copies `from` to `to` until end of stream, appending what passed to side `side`
/// of connection `idx`, then half-closes `to`.
async fn copy_recording(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    rec: Recorded,
    idx: usize,
    side: usize,
) {
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        // Recorded as received, even if the other side has gone away.
        rec.lock().unwrap()[idx][side].extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A TCP relay that records every byte in both directions, per connection. It sits
/// between mongotap and the real upstream so the test can see what mongotap sent.
pub async fn recording_relay(upstream: String) -> (u16, Recorded) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let rec: Recorded = std::sync::Arc::default();
    let r = rec.clone();
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let up = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let idx = {
                let mut v = r.lock().unwrap();
                v.push([Vec::new(), Vec::new()]);
                v.len() - 1
            };
            let (dr, dw) = down.into_split();
            let (ur, uw) = up.into_split();
            tokio::spawn(copy_recording(dr, uw, r.clone(), idx, 0));
            tokio::spawn(copy_recording(ur, dw, r.clone(), idx, 1));
        }
    });
    (port, rec)
}

/// Runs `script` in mongosh against the server at `addr` with database `db`
/// selected, as a user pasting a report's fix would. `None` when mongosh is not
/// installed (`scripts/setup.sh` installs it).
#[allow(dead_code)]
pub fn mongosh(addr: &str, db: &str, script: &str) -> Option<std::process::Output> {
    let mongosh = root().join("tests/node/node_modules/.bin/mongosh");
    if !mongosh.exists() {
        eprintln!("mongosh is not installed (scripts/setup.sh): the fix is not pasted");
        return None;
    }
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("mongotap-paste-{}-{n}.js", std::process::id()));
    std::fs::write(&file, format!("db = db.getSiblingDB('{db}');\n{script}\n")).unwrap();
    let out = std::process::Command::new(mongosh)
        .args([&format!("mongodb://{addr}/?directConnection=true"), "--quiet", "--norc"])
        .arg(&file)
        .env("MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    Some(out)
}
