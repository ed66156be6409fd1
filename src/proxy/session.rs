//! One client connection and its upstream connection: two pumps, and the rules
//! for ending. A clean end of stream on one side is passed on as a half-close and
//! the other direction runs on; a reset or error on either side resets both, so
//! neither peer waits on a connection that is already dead.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongotap_events::{ConnId, Direction, TapEvent};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::pump::{pump, PumpError};
use super::rewrite::{Renamer, Rewriting};
use super::topology::Member;
use super::Shared;

/// Runs one proxied connection to its end.
pub async fn run(
    client: TcpStream,
    peer: SocketAddr,
    conn: ConnId,
    member: Arc<Member>,
    shared: Arc<Shared>,
    mut kill: watch::Receiver<bool>,
) {
    let upstream = match member.upstream.connect().await {
        Ok(s) => s,
        Err(_) => return, // Upstream logged it; dropping `client` closes it at once.
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let renamer = shared.topology.as_ref().map(|t| Renamer { topology: t.clone(), via: member.clone() });
    let s = Serve { peer, conn, shared: &shared, renamer };
    match (&shared.config.client_tls, member.upstream.tls()) {
        (None, None) => s.serve(client, upstream, &mut kill).await,
        (Some(c), None) => {
            let Some(client) = handshake(c.accept(client), conn, "client", &shared).await else { return };
            s.serve(client, upstream, &mut kill).await
        }
        (None, Some(u)) => {
            let Some(upstream) = handshake(u.connect(upstream), conn, "upstream", &shared).await else {
                return;
            };
            s.serve(client, upstream, &mut kill).await
        }
        (Some(c), Some(u)) => {
            let Some(client) = handshake(c.accept(client), conn, "client", &shared).await else { return };
            let Some(upstream) = handshake(u.connect(upstream), conn, "upstream", &shared).await else {
                return;
            };
            s.serve(client, upstream, &mut kill).await
        }
    }
}

/// A TLS handshake, bounded by the connect timeout; a failure ends the connection
/// (both sides closed by the drop) and is logged.
async fn handshake<S>(
    h: impl std::future::Future<Output = std::io::Result<S>>,
    conn: ConnId,
    side: &str,
    shared: &Shared,
) -> Option<S> {
    match tokio::time::timeout(shared.config.connect_timeout, h).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            tracing::warn!(conn, "TLS handshake with the {side} failed: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(
                conn,
                "TLS handshake with the {side} took more than {:?}",
                shared.config.connect_timeout
            );
            None
        }
    }
}

/// One connection's forwarding, once both sides are connected.
struct Serve<'a> {
    peer: SocketAddr,
    conn: ConnId,
    shared: &'a Arc<Shared>,
    /// Renames hello replies' members, in replica-set mode.
    renamer: Option<Renamer>,
}

impl Serve<'_> {
    /// Forwards between a client and its upstream connection, plain or TLS, to the end.
    async fn serve<C: Duplex, U: Duplex>(self, client: C, upstream: U, kill: &mut watch::Receiver<bool>) {
        let (conn, shared) = (self.conn, self.shared);
        shared.tap.send(TapEvent::Opened { conn, client: self.peer, at: shared.tap.clock().now() });
        shared.open.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(conn, client = %self.peer, "connection opened");
        let (client, upstream, reset) = self.forward(client, upstream, kill).await;
        if reset {
            // SO_LINGER 0 makes the close a reset, passing the failure on to both peers.
            let _ = socket2::SockRef::from(client.tcp()).set_linger(Some(Duration::ZERO));
            let _ = socket2::SockRef::from(upstream.tcp()).set_linger(Some(Duration::ZERO));
        }
        drop((client, upstream));
        shared.open.fetch_sub(1, Ordering::Relaxed);
        tracing::debug!(conn, reset, "connection closed");
        shared.tap.send(TapEvent::Closed { conn, at: shared.tap.clock().now() });
    }

    async fn forward<C: Duplex, U: Duplex>(
        self,
        mut client: C,
        mut upstream: U,
        kill: &mut watch::Receiver<bool>,
    ) -> (C, U, bool) {
        let (conn, shared) = (self.conn, self.shared);
        let activity = AtomicU64::new(shared.tap.clock().now());
        let reset = {
            let (cr, cw) = client.halves();
            let (ur, uw) = upstream.halves();
            let ur = Rewriting::new(ur, self.renamer);
            let keep = shared.config.max_analysed_message;
            let tap = &shared.tap;
            let to_server = pump(cr, uw, conn, Direction::ToServer, tap, keep, &activity);
            let to_client = pump(ur, cw, conn, Direction::ToClient, tap, keep, &activity);
            tokio::pin!(to_server, to_client);
            let (mut server_done, mut client_done) = (false, false);
            let idle_us = shared.config.idle_timeout.as_micros() as u64;
            let mut tick = tokio::time::interval(Duration::from_secs(1).min(shared.config.idle_timeout));
            loop {
                tokio::select! {
                    r = &mut to_server, if !server_done => {
                        server_done = true;
                        if let Err(e) = r { log_end(conn, "client", &e); break true; }
                    }
                    r = &mut to_client, if !client_done => {
                        client_done = true;
                        if let Err(e) = r { log_end(conn, "upstream", &e); break true; }
                    }
                    _ = tick.tick() => {
                        let idle = shared.tap.clock().now().saturating_sub(activity.load(Ordering::Relaxed));
                        if idle > idle_us {
                            tracing::debug!(conn, "idle for {:?}: closing", shared.config.idle_timeout);
                            break false;
                        }
                    }
                    _ = kill.changed() => break false,
                }
                if server_done && client_done {
                    break false;
                }
            }
        };
        (client, upstream, reset)
    }
}

fn log_end(conn: ConnId, reading_side: &str, e: &PumpError) {
    match e {
        PumpError::Read(e) => tracing::debug!(conn, "reading from the {reading_side} failed: {e}"),
        PumpError::Write(e) => tracing::debug!(conn, "writing the {reading_side}'s bytes on failed: {e}"),
    }
}

/// A connection read and written at once: plain TCP (its halves are free) or TLS
/// (split through tokio's lock, since reading TLS may need to write and back).
pub trait Duplex: Send + 'static {
    /// The reading half.
    type Reader<'a>: AsyncRead + Unpin + Send
    where
        Self: 'a;
    /// The writing half.
    type Writer<'a>: AsyncWrite + Unpin + Send
    where
        Self: 'a;
    /// Both halves, for the two pumps.
    fn halves(&mut self) -> (Self::Reader<'_>, Self::Writer<'_>);
    /// The TCP connection underneath.
    fn tcp(&self) -> &TcpStream;
}

impl Duplex for TcpStream {
    type Reader<'a> = tokio::net::tcp::ReadHalf<'a>;
    type Writer<'a> = tokio::net::tcp::WriteHalf<'a>;
    fn halves(&mut self) -> (Self::Reader<'_>, Self::Writer<'_>) {
        self.split()
    }
    fn tcp(&self) -> &TcpStream {
        self
    }
}

/// TLS, on either side: split through tokio's lock.
macro_rules! tls_duplex {
    ($($t:ty),*) => {$(
        impl Duplex for $t {
            type Reader<'a> = tokio::io::ReadHalf<&'a mut Self>;
            type Writer<'a> = tokio::io::WriteHalf<&'a mut Self>;
            fn halves(&mut self) -> (Self::Reader<'_>, Self::Writer<'_>) {
                tokio::io::split(self)
            }
            fn tcp(&self) -> &TcpStream {
                self.get_ref().0
            }
        }
    )*};
}

tls_duplex!(tokio_rustls::server::TlsStream<TcpStream>, tokio_rustls::client::TlsStream<TcpStream>);
