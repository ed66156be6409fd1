//! One client connection and its upstream connection: two pumps, and the rules
//! for ending. A clean end of stream on one side is passed on as a half-close and
//! the other direction runs on; a reset or error on either side resets both, so
//! neither peer waits on a connection that is already dead.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongotap_events::{ConnId, Direction, TapEvent};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::pump::{pump, PumpError};
use super::Shared;

/// Runs one proxied connection to its end.
pub async fn run(
    client: TcpStream,
    peer: SocketAddr,
    conn: ConnId,
    shared: Arc<Shared>,
    mut kill: watch::Receiver<bool>,
) {
    let upstream = match shared.upstream.connect().await {
        Ok(s) => s,
        Err(_) => return, // Upstream logged it; dropping `client` closes it at once.
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    shared.tap.send(TapEvent::Opened { conn, client: peer, at: shared.tap.clock().now() });
    shared.open.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(conn, client = %peer, "connection opened");
    let (client, upstream, reset) = forward(client, upstream, conn, &shared, &mut kill).await;
    if reset {
        // SO_LINGER 0 makes the close a reset, passing the failure on to both peers.
        let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
        let _ = socket2::SockRef::from(&upstream).set_linger(Some(Duration::ZERO));
    }
    drop((client, upstream));
    shared.open.fetch_sub(1, Ordering::Relaxed);
    tracing::debug!(conn, reset, "connection closed");
    shared.tap.send(TapEvent::Closed { conn, at: shared.tap.clock().now() });
}

async fn forward(
    mut client: TcpStream,
    mut upstream: TcpStream,
    conn: ConnId,
    shared: &Shared,
    kill: &mut watch::Receiver<bool>,
) -> (TcpStream, TcpStream, bool) {
    let activity = AtomicU64::new(shared.tap.clock().now());
    let reset = {
        let (cr, cw) = client.split();
        let (ur, uw) = upstream.split();
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

fn log_end(conn: ConnId, reading_side: &str, e: &PumpError) {
    match e {
        PumpError::Read(e) => tracing::debug!(conn, "reading from the {reading_side} failed: {e}"),
        PumpError::Write(e) => tracing::debug!(conn, "writing the {reading_side}'s bytes on failed: {e}"),
    }
}
