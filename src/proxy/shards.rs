//! The forwarding threads: one single-threaded runtime per core, each with its own
//! epoll, and every session pinned to one of them. Like haproxy's threads, a
//! connection's reads, writes and wakeups stay on one thread: no work stealing and
//! no cross-thread wakeups on the forwarding path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The forwarding runtimes and their threads.
pub struct Shards {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    next: AtomicUsize,
}

impl Shards {
    /// One runtime per available core.
    pub fn start() -> std::io::Result<Shards> {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (mut handles, mut stops, mut threads) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            handles.push(rt.handle().clone());
            stops.push(stop);
            threads.push(std::thread::Builder::new().name(format!("mongotap-fwd-{i}")).spawn(move || {
                // Sessions are spawned onto this runtime from outside; it runs them
                // until told to stop.
                let _ = rt.block_on(stopped);
            })?);
        }
        Ok(Shards { handles, stops, threads, next: AtomicUsize::new(0) })
    }

    /// The runtime for the next session, round robin.
    pub fn next(&self) -> &Handle {
        &self.handles[self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len()]
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
