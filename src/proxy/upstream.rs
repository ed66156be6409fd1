//! Reaching the upstream server, and saying so once when it cannot be reached.
//!
//! When the upstream is down every client connection fails the same way; logging
//! each would bury everything else. The first failure of a burst is logged, the
//! rest are counted and summed up in the next log line, and recovery is logged once.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::tls::UpstreamTls;

/// How often, at most, a continuing outage is logged again.
const RELOG_EVERY: Duration = Duration::from_secs(10);

/// The upstream address and its health.
#[derive(Debug)]
pub struct Upstream {
    addr: String,
    connect_timeout: Duration,
    tls: Option<UpstreamTls>,
    health: Mutex<Health>,
}

#[derive(Debug, Default)]
struct Health {
    failing_since: Option<Instant>,
    last_logged: Option<Instant>,
    suppressed: u64,
    failures: u64,
}

impl Upstream {
    /// An upstream at `addr` (`host:port`), reached over TLS when `tls` is given.
    pub fn new(addr: String, connect_timeout: Duration, tls: Option<UpstreamTls>) -> Upstream {
        Upstream { addr, connect_timeout, tls, health: Mutex::new(Health::default()) }
    }

    /// TLS toward this server (plaintext when `None`).
    pub fn tls(&self) -> Option<&UpstreamTls> {
        self.tls.as_ref()
    }

    /// The address connections go to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Failed connection attempts so far.
    pub fn failures(&self) -> u64 {
        self.health.lock().expect("not poisoned").failures
    }

    /// Opens a connection, logging a failure once per burst.
    pub async fn connect(&self) -> io::Result<TcpStream> {
        let result = match tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.addr)).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
        };
        let mut h = self.health.lock().expect("not poisoned");
        match &result {
            Ok(_) => {
                if let Some(since) = h.failing_since.take() {
                    tracing::info!(
                        upstream = %self.addr,
                        "upstream reachable again after {:.1?} ({} connections refused meanwhile)",
                        since.elapsed(),
                        h.suppressed + 1
                    );
                    h.suppressed = 0;
                    h.last_logged = None;
                }
            }
            Err(e) => {
                h.failures += 1;
                let now = Instant::now();
                h.failing_since.get_or_insert(now);
                if h.last_logged.is_none_or(|t| now.duration_since(t) >= RELOG_EVERY) {
                    let more = match h.suppressed {
                        0 => String::new(),
                        n => format!(" ({n} more failures since the last message)"),
                    };
                    tracing::error!(
                        upstream = %self.addr,
                        "cannot reach the upstream: {e}; client connections are closed until it returns{more}"
                    );
                    h.last_logged = Some(now);
                    h.suppressed = 0;
                } else {
                    h.suppressed += 1;
                }
            }
        }
        result
    }
}

/// The `host:port` of the first host in `--upstream`, which takes `host:port` or a
/// `mongodb://` URI (credentials and options are the client's business, not ours).
pub fn parse_upstream(s: &str) -> Result<String, String> {
    let rest = match s.split_once("://") {
        Some(("mongodb", rest)) => rest,
        Some(("mongodb+srv", rest)) => {
            let host = rest.split(['/', '?']).next().unwrap_or("");
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            return Err(format!(
                "mongodb+srv:// needs a DNS SRV lookup, which mongotap does not make: give the hosts it lists \
                 (dig +short SRV _mongodb._tcp.{host}) as mongodb://host1:port,host2:port/?tls=true&replicaSet=..."
            ));
        }
        Some((scheme, _)) => {
            return Err(format!("unsupported scheme {scheme}:// (give host:port or a mongodb:// URI)"))
        }
        None => s,
    };
    let hosts = rest.split(['/', '?']).next().unwrap_or("");
    let hosts = hosts.rsplit_once('@').map_or(hosts, |(_, h)| h);
    let first = hosts.split(',').next().unwrap_or("").trim();
    if first.is_empty() {
        return Err(format!("no host in {s:?}"));
    }
    let has_port = match first.rsplit_once(':') {
        Some((_, port)) => !first.ends_with(']') && port.parse::<u16>().is_ok(),
        None => false,
    };
    Ok(if has_port { first.to_owned() } else { format!("{first}:27017") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_accepts_host_port_and_uris() {
        assert_eq!(parse_upstream("127.0.0.1:27017").unwrap(), "127.0.0.1:27017");
        assert_eq!(parse_upstream("db.local").unwrap(), "db.local:27017");
        assert_eq!(parse_upstream("mongodb://u:p@h1:1,h2:2/app?replicaSet=rs").unwrap(), "h1:1");
        assert_eq!(parse_upstream("mongodb://[::1]:5/").unwrap(), "[::1]:5");
        assert_eq!(parse_upstream("mongodb://[::1]").unwrap(), "[::1]:27017");
        assert!(parse_upstream("mongodb+srv://cluster.example").is_err());
        assert!(parse_upstream("mongodb:///db").is_err());
    }

    #[tokio::test]
    async fn a_dead_upstream_fails_fast_and_is_counted() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let u = Upstream::new(format!("127.0.0.1:{port}"), Duration::from_secs(2), None);
        for _ in 0..3 {
            assert!(u.connect().await.is_err());
        }
        assert_eq!(u.failures(), 3);
        assert_eq!(u.health.lock().unwrap().suppressed, 2, "logged once, two counted");
    }
}
