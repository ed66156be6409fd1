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

/// The first host of `--upstream` as `host:port` (port 27017 when none is given):
/// `host:port`, `host`, `[v6]:port`, or a `mongodb://` URI with one or more hosts.
/// A port must be 1-65535 and a host a name or an address: anything else is refused
/// with what was given (credentials masked) and the forms accepted.
pub fn parse_upstream(s: &str) -> Result<String, String> {
    let refuse = |why: String| {
        format!(
            "{}: {why}; give host:port (127.0.0.1:27017), a host (port 27017), [::1]:27017, or a URI \
             mongodb://[user:password@]host[:port][,host2[:port]]/[?options]",
            without_credentials(s)
        )
    };
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
        Some((scheme, _)) => return Err(refuse(format!("unsupported scheme {scheme}://"))),
        None => s,
    };
    let hosts = rest.split(['/', '?']).next().unwrap_or("");
    let hosts = hosts.rsplit_once('@').map_or(hosts, |(_, h)| h);
    let mut first = None;
    for h in hosts.split(',') {
        let h = h.trim();
        let checked = host_port(h).map_err(refuse)?;
        first.get_or_insert(checked);
    }
    first.ok_or_else(|| refuse("no host".into()))
}

/// One `host[:port]` checked: a name or an address, and a port of 1-65535.
fn host_port(h: &str) -> Result<String, String> {
    let (host, port) = match h.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) =
                v6.split_once(']').ok_or_else(|| format!("{h:?} opens [ without closing it"))?;
            addr.parse::<std::net::Ipv6Addr>().map_err(|_| format!("{addr:?} is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| format!("{h:?} is not [address]:port"))?),
            };
            (&h[..addr.len() + 2], port)
        }
        None => match h.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        },
    };
    if host.is_empty() {
        return Err(format!("{h:?} has no host"));
    }
    let name = host.starts_with('[')
        || host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !name {
        return Err(format!("{host:?} is not a host name or address"));
    }
    let port = match port {
        None => 27017,
        Some(p) => match p.parse::<u32>() {
            Ok(n @ 1..=65535) => n,
            Ok(n) => return Err(format!("port {n} is out of range (1-65535)")),
            Err(_) => return Err(format!("{p:?} is not a port (1-65535)")),
        },
    };
    Ok(format!("{host}:{port}"))
}

/// A URI fit for a log or a message: its user name and password, if any, replaced
/// by `***`.
pub fn without_credentials(uri: &str) -> String {
    match uri.split_once("://") {
        Some((scheme, rest)) => {
            let hosts_end = rest.find(['/', '?']).unwrap_or(rest.len());
            match rest[..hosts_end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => uri.to_owned(),
            }
        }
        None => uri.to_owned(),
    }
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
        let refused = |s: &str| parse_upstream(s).unwrap_err();
        let e = refused("mongodb://user:pw@host:99999/");
        assert!(
            e.contains("port 99999 is out of range") && e.contains("***@host:99999") && !e.contains("pw"),
            "{e}"
        );
        assert!(refused("nonsense::::").contains("not a port"), "{}", refused("nonsense::::"));
        assert!(refused("127.0.0.1:0").contains("port 0 is out of range"));
        assert!(refused("mongodb://h1:1,h2:x/").contains("\"x\" is not a port"));
        assert!(refused("my host:27017").contains("not a host name"));
        assert!(refused("mongodb:///db").contains("no host"));
        assert!(refused("[::1:5").contains("without closing"));
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
