//! Replica-set mode (`--rewrite-topology`): one listener per member, and the member
//! addresses of every `hello` reply renamed to those listeners, so a driver that
//! discovers the set keeps all its connections on mongotap.
//!
//! Members are learnt from the replies themselves: the listener clients are given
//! (`--listen`) forwards to the first upstream host; the first hello through it
//! names the rest, and each named member gets a listener there and then (on the
//! next port up), before the reply that names it is forwarded. A member added to
//! the set later is picked up the same way. `me` names the member a connection
//! already reaches, so it maps to the listener the reply came through.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::tls::UpstreamTls;
use super::upstream::Upstream;

/// One upstream server and the listener that stands for it.
#[derive(Debug)]
pub struct Member {
    /// How mongotap reaches the server.
    pub upstream: Upstream,
    /// The listener's address as clients are told it (`host:port`).
    pub advertised: String,
}

/// A listener just bound for a new member, for the accept loop to serve.
pub type NewListener = (TcpListener, Arc<Member>);

/// The members known so far and how to add one.
#[derive(Debug)]
pub struct Topology {
    /// Host clients are told to reach mongotap by.
    advertise_host: String,
    /// Where new listeners bind (the `--listen` address's IP).
    bind_ip: std::net::IpAddr,
    connect_timeout: Duration,
    /// TLS to the upstream, made per member for its host name.
    tls: Option<UpstreamTls>,
    state: Mutex<State>,
    added: mpsc::UnboundedSender<NewListener>,
}

#[derive(Debug)]
struct State {
    /// Member address as the servers write it (host lower-cased) → its listener.
    by_name: HashMap<String, Arc<Member>>,
    /// Every member, in the order they were learnt.
    members: Vec<Arc<Member>>,
    /// The port the next listener tries first (0: any free port).
    next_port: u16,
    /// `MAX_NAMES` reached (said once).
    full: bool,
}

/// How many ports up from the last one a new listener tries before giving up.
const PORT_TRIES: u16 = 64;

/// A replica set has at most 50 members (MongoDB's limit); names past this many
/// (members, aliases, failures) are left as the server wrote them, so an upstream
/// naming endless members cannot exhaust ports and descriptors.
const MAX_NAMES: usize = 200;

impl Topology {
    /// The topology of a proxy whose first listener is `seed` at `listen`; further
    /// listeners are sent to `added`.
    pub fn new(
        seed: Arc<Member>,
        listen: SocketAddr,
        advertise_host: String,
        connect_timeout: Duration,
        tls: Option<UpstreamTls>,
        added: mpsc::UnboundedSender<NewListener>,
    ) -> Topology {
        let next_port = if listen.port() == 0 { 0 } else { listen.port().saturating_add(1) };
        let state = State {
            by_name: HashMap::from([(key(seed.upstream.addr()), seed.clone())]),
            members: vec![seed],
            next_port,
            full: false,
        };
        Topology {
            advertise_host,
            bind_ip: listen.ip(),
            connect_timeout,
            tls,
            state: Mutex::new(state),
            added,
        }
    }

    /// The address to write for `name`, found in the reply's `field`, which came
    /// through `via`. `None` leaves the name as the server wrote it (logged).
    pub fn rename(&self, via: &Arc<Member>, field: &str, name: &str) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = state.by_name.get(&key(name)) {
            return Some(m.advertised.clone());
        }
        if state.by_name.len() >= MAX_NAMES {
            if !state.full {
                state.full = true;
                tracing::error!("hello replies named more than {MAX_NAMES} members: further names are forwarded unrenamed");
            }
            return None;
        }
        if field == "me" {
            // The server's own name for the member this connection reaches.
            state.by_name.insert(key(name), via.clone());
            tracing::info!("replica-set member {name} is the server {} forwards to", via.advertised);
            return Some(via.advertised.clone());
        }
        match self.listen_for(&mut state, name) {
            Ok(member) => {
                tracing::info!("replica-set member {name}: clients reach it through {}", member.advertised);
                let advertised = member.advertised.clone();
                state.by_name.insert(key(name), member.clone());
                state.members.push(member);
                Some(advertised)
            }
            Err(e) => {
                // Remembered as itself, so the failure is logged once: clients will
                // reach this member directly, around the proxy.
                tracing::error!(member = name, "cannot open a listener for replica-set member {name}: {e}; clients will connect to it directly");
                let upstream = Upstream::new(name.to_owned(), self.connect_timeout, None);
                let itself = Arc::new(Member { upstream, advertised: name.to_owned() });
                state.by_name.insert(key(name), itself);
                None
            }
        }
    }

    /// Binds a listener for the member `name` and hands it to the accept loop.
    fn listen_for(&self, state: &mut State, name: &str) -> Result<Arc<Member>, String> {
        let host = host_of(name).ok_or_else(|| format!("{name:?} is not host:port"))?;
        let tls = match &self.tls {
            Some(t) => Some(t.for_host(host)?),
            None => None,
        };
        let listener = self.bind(state)?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let member = Arc::new(Member {
            upstream: Upstream::new(name.to_owned(), self.connect_timeout, tls),
            advertised: format!("{}:{port}", self.advertise_host),
        });
        self.added.send((listener, member.clone())).map_err(|_| "the proxy is shutting down".to_owned())?;
        Ok(member)
    }

    fn bind(&self, state: &mut State) -> Result<TcpListener, String> {
        if state.next_port == 0 {
            return TcpListener::bind((self.bind_ip, 0)).map_err(|e| e.to_string());
        }
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            let port = state.next_port;
            state.next_port = port.checked_add(1).ok_or("no port left")?;
            match TcpListener::bind((self.bind_ip, port)) {
                Ok(l) => return Ok(l),
                Err(e) => last = format!("{}:{port}: {e}", self.bind_ip),
            }
        }
        Err(format!("no free port in {PORT_TRIES} tries (last: {last})"))
    }

    /// Connection failures to every member's upstream.
    pub fn failures(&self) -> u64 {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.members.iter().map(|m| m.upstream.failures()).sum()
    }

    /// The members and their listeners, in the order they were learnt.
    pub fn members(&self) -> Vec<(String, String)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.members.iter().map(|m| (m.upstream.addr().to_owned(), m.advertised.clone())).collect()
    }
}

/// Servers write host names in any case; drivers compare them lower-cased (SDAM).
fn key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// The host of `host:port` (brackets of an IPv6 literal removed).
fn host_of(name: &str) -> Option<&str> {
    let (host, port) = name.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    Some(host.trim_start_matches('[').trim_end_matches(']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(listen_port: u16) -> (Topology, mpsc::UnboundedReceiver<NewListener>, Arc<Member>) {
        let seed = Arc::new(Member {
            upstream: Upstream::new("db1.internal:27017".into(), Duration::from_secs(1), None),
            advertised: format!("127.0.0.1:{listen_port}"),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let listen = SocketAddr::from(([127, 0, 0, 1], listen_port));
        let t = Topology::new(seed.clone(), listen, "127.0.0.1".into(), Duration::from_secs(1), None, tx);
        (t, rx, seed)
    }

    #[test]
    fn each_member_gets_one_listener_and_me_is_the_listener_it_came_through() {
        let (t, mut rx, seed) = topology(0);
        assert_eq!(t.rename(&seed, "hosts", "db1.internal:27017").as_deref(), Some("127.0.0.1:0"));
        assert_eq!(t.rename(&seed, "me", "DB1.example:27017").as_deref(), Some("127.0.0.1:0"), "an alias");
        let db2 = t.rename(&seed, "hosts", "db2.internal:27017").unwrap();
        assert_eq!(t.rename(&seed, "primary", "DB2.internal:27017"), Some(db2.clone()), "case-insensitive");
        let (listener, member) = rx.try_recv().expect("a listener for db2");
        assert_eq!(member.upstream.addr(), "db2.internal:27017");
        assert_eq!(db2, format!("127.0.0.1:{}", listener.local_addr().unwrap().port()));
        assert!(rx.try_recv().is_err(), "one listener per member");
        assert_eq!(t.members().len(), 2);
    }

    #[test]
    fn new_listeners_take_the_ports_after_listen_and_skip_taken_ones() {
        let base = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // Held by this test, or by someone else if this bind fails: taken either way.
        let _taken = TcpListener::bind(("127.0.0.1", base + 1));
        let (t, _rx, seed) = topology(base);
        let db2 = t.rename(&seed, "hosts", "db2:1").unwrap();
        let port: u16 = db2.rsplit_once(':').unwrap().1.parse().unwrap();
        assert!(port >= base + 2 && port < base + 2 + PORT_TRIES, "{db2} after {base}");
    }

    #[test]
    fn names_past_the_bound_are_left_alone() {
        let (t, mut rx, seed) = topology(0);
        for i in 1..MAX_NAMES {
            assert!(t.rename(&seed, "hosts", &format!("db{i}:1")).is_some());
        }
        assert_eq!(t.rename(&seed, "hosts", "one-too-many:1"), None);
        assert_eq!(
            t.rename(&seed, "hosts", "db1:1").as_deref().map(|a| a.starts_with("127.0.0.1:")),
            Some(true)
        );
        let mut opened = 0;
        while rx.try_recv().is_ok() {
            opened += 1;
        }
        assert_eq!(opened, MAX_NAMES - 1);
    }

    #[test]
    fn a_name_that_is_not_host_port_is_left_alone_once() {
        let (t, mut rx, seed) = topology(0);
        assert_eq!(t.rename(&seed, "hosts", "no-port"), None);
        assert_eq!(t.rename(&seed, "hosts", "no-port").as_deref(), Some("no-port"), "remembered as itself");
        assert!(rx.try_recv().is_err());
    }
}
