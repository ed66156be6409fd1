//! The analysis thread: drains the tap's channel into the pipeline. It runs on its
//! own OS thread so that a slow analysis costs the forwarding tasks nothing but a
//! dropped (and counted) event.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mongotap_analyzers::pipeline::Pipeline;
use mongotap_events::Clock;

use crate::proxy::tap::{IdleWait, TapReceiver};

/// Events handled per lock of the pipeline, so report readers get a turn.
const BATCH: usize = 1024;

/// A running analysis thread.
pub struct Analysis {
    pipeline: Arc<Mutex<Pipeline>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Analysis {
    /// Starts draining `rx` into `pipeline`.
    pub fn spawn(rx: TapReceiver, pipeline: Pipeline, clock: Clock) -> Analysis {
        let pipeline = Arc::new(Mutex::new(pipeline));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (pipeline.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mongotap-analysis".into())
            // Room for what walks nested documents (shapes stop at 32 levels; detectors
            // follow values a little deeper); address space, not memory, until used.
            .stack_size(64 << 20)
            .spawn(move || {
                lower_priority();
                run(rx, &p, &s, clock)
            })
            .expect("spawning the analysis thread");
        Analysis { pipeline, stop, thread: Some(thread) }
    }

    /// The pipeline, for reports while running. Hold the lock briefly.
    pub fn pipeline(&self) -> &Arc<Mutex<Pipeline>> {
        &self.pipeline
    }

    /// Drains what is already queued, then stops the thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Analysis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs this thread at the lowest scheduling priority (nice 19): when the machine is
/// short of CPU, forwarding wins and the analysis falls behind, which the bounded tap
/// turns into dropped (and counted) events rather than slower traffic.
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take no pointers; they affect only this thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

fn run(rx: TapReceiver, pipeline: &Mutex<Pipeline>, stop: &AtomicBool, clock: Clock) {
    let mut last_expire = clock.now();
    // Poll, never block (see `IdleWait`): waiting up to 16 ms for the next events
    // costs the analysis nothing that matters.
    let mut idle = IdleWait::new();
    loop {
        let mut batch = rx.try_iter().take(BATCH).peekable();
        if batch.peek().is_some() {
            idle.busy();
            let mut p = pipeline.lock().unwrap_or_else(|e| e.into_inner());
            batch.for_each(|ev| p.feed(ev));
        } else {
            drop(batch);
            match rx.try_recv() {
                Err(e) => {
                    // Quiet: drops no event has followed are announced now, so a
                    // report never misses a hole at the end of the traffic.
                    if let Some(gap) = rx.quiet_gap(clock.now()) {
                        pipeline.lock().unwrap_or_else(|e| e.into_inner()).feed(gap);
                    }
                    if e == TryRecvError::Disconnected || stop.load(Ordering::Relaxed) {
                        return;
                    }
                    idle.sleep();
                }
                Ok(ev) => {
                    idle.busy();
                    pipeline.lock().unwrap_or_else(|e| e.into_inner()).feed(ev)
                }
            }
        }
        let now = clock.now();
        if now.saturating_sub(last_expire) > 1_000_000 {
            pipeline.lock().unwrap_or_else(|e| e.into_inner()).expire(now);
            last_expire = now;
        }
    }
}
