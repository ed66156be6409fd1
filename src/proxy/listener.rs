//! Accepting clients: a semaphore caps the connections served at once (further
//! clients wait in the backlog), and shutdown stops accepting, gives open
//! connections a grace period, then closes what is left.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::shards::Shards;
use super::{session, Shared};

/// Serves until `stop` turns true, then winds down.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let shards = match Shards::start() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot start the forwarding threads: {e}");
            return;
        }
    };
    let permits = Arc::new(Semaphore::new(shared.config.max_connections));
    let (kill, kill_rx) = watch::channel(false);
    let mut sessions = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = stop.changed() => break,
        };
        let (socket, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        let conn = shared.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let (shared, kill_rx) = (shared.clone(), kill_rx.clone());
        // The socket moves to its forwarding thread's epoll.
        let Ok(socket) = socket.into_std() else { continue };
        sessions.spawn_on(
            async move {
                if let Ok(socket) = tokio::net::TcpStream::from_std(socket) {
                    session::run(socket, peer, conn, shared, kill_rx).await;
                }
                drop(permit);
            },
            shards.next(),
        );
        // Reap finished sessions so the set does not grow with the total count.
        while sessions.try_join_next().is_some() {}
    }
    drop(listener);
    let grace = shared.config.shutdown_grace;
    let open = shared.open.load(Ordering::Relaxed);
    if open > 0 {
        tracing::info!("shutting down: waiting up to {grace:?} for {open} connections");
    }
    let drained = tokio::time::timeout(grace, async { while sessions.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::info!("grace period over: closing {} connections", sessions.len());
        let _ = kill.send(true);
        while sessions.join_next().await.is_some() {}
    }
}
