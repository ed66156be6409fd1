//! Accepting clients: a semaphore caps the connections served at once (further
//! clients wait in the backlog, which is said once per burst in the log and sampled
//! every second into `/metrics`), and shutdown stops accepting, gives open
//! connections a grace period, then closes what is left. In replica-set mode the
//! loop accepts on every member's listener too, as they are opened.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::shards::Shards;
use super::topology::{Member, NewListener};
use super::{session, Shared};

/// Serves until `stop` turns true, then winds down. `listener` stands for the seed
/// upstream; listeners for further members arrive on `added`.
pub async fn serve(
    listener: TcpListener,
    mut added: Option<mpsc::UnboundedReceiver<NewListener>>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
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
    let mut listeners = vec![(listener, shared.seed.clone())];
    let mut turn = 0;
    let max = shared.config.max_connections;
    let mut capped = false;
    loop {
        if permits.available_permits() == 0 && !capped {
            capped = true;
            shared.cap_reached.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "{max} connections open: the --max-connections cap is reached; further clients wait in the accept backlog (and their drivers time out) until a connection closes; raise --max-connections if the clients are expected"
            );
        }
        let mut sample = tokio::time::interval(Duration::from_secs(1));
        let permit = loop {
            tokio::select! {
                p = permits.clone().acquire_owned() => break Some(p.expect("the semaphore is never closed")),
                _ = stop.changed() => break None,
                _ = sample.tick(), if capped => {
                    let waiting: u64 = listeners.iter().filter_map(|(l, _)| backlog(l)).sum();
                    shared.waiting.store(waiting, Ordering::Relaxed);
                }
            }
        };
        let Some(permit) = permit else { break };
        // The burst is over once a tenth of the cap is free again.
        if capped && permits.available_permits() + 1 > max / 10 {
            capped = false;
            shared.waiting.store(0, Ordering::Relaxed);
            tracing::info!("below the --max-connections cap again ({max})");
        }
        let (socket, peer, member) = tokio::select! {
            r = accept_any(&listeners, &mut turn) => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some((l, member)) = next_listener(&mut added) => {
                match l.set_nonblocking(true).and_then(|()| TcpListener::from_std(l)) {
                    Ok(l) => listeners.push((l, member)),
                    Err(e) => tracing::error!(member = %member.upstream.addr(), "cannot serve the listener of replica-set member: {e}"),
                }
                continue;
            }
            _ = stop.changed() => break,
        };
        let conn = shared.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let (shared, kill_rx) = (shared.clone(), kill_rx.clone());
        // The socket moves to its forwarding thread's epoll.
        let Ok(socket) = socket.into_std() else { continue };
        sessions.spawn_on(
            async move {
                if let Ok(socket) = tokio::net::TcpStream::from_std(socket) {
                    session::run(socket, peer, conn, member, shared, kill_rx).await;
                }
                drop(permit);
            },
            shards.next(),
        );
        // Reap finished sessions so the set does not grow with the total count.
        while sessions.try_join_next().is_some() {}
    }
    drop(listeners);
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

/// Clients waiting in a listener's accept backlog: Linux reports a listening
/// socket's queue length as `tcpi_unacked` in its TCP_INFO.
#[cfg(target_os = "linux")]
fn backlog(l: &TcpListener) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: getsockopt writes at most `len` bytes into a zeroed tcp_info of that size.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (rc == 0).then_some(u64::from(info.tcpi_unacked))
    }
}

#[cfg(not(target_os = "linux"))]
fn backlog(_: &TcpListener) -> Option<u64> {
    None
}

/// The next client of any listener, taking the listeners in turn so none starves.
async fn accept_any(
    listeners: &[(TcpListener, Arc<Member>)],
    turn: &mut usize,
) -> std::io::Result<(TcpStream, SocketAddr, Arc<Member>)> {
    std::future::poll_fn(|cx| {
        let n = listeners.len();
        for i in 0..n {
            let (l, member) = &listeners[(*turn + i) % n];
            if let Poll::Ready(r) = l.poll_accept(cx) {
                *turn = (*turn + i + 1) % n;
                return Poll::Ready(r.map(|(s, peer)| (s, peer, member.clone())));
            }
        }
        Poll::Pending
    })
    .await
}

/// A listener opened for a new member, or never without a topology.
async fn next_listener(added: &mut Option<mpsc::UnboundedReceiver<NewListener>>) -> Option<NewListener> {
    match added {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
