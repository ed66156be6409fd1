//! The trace thread: drains the trace's own tap into a [`TraceWriter`]. Like the
//! analysis, it runs on its own OS thread at the lowest priority behind a bounded
//! channel, so a slow or full disk costs forwarding nothing but dropped (and
//! counted) trace records, written into the trace as gaps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mongotap_events::Clock;
use mongotap_trace::{TraceStats, TraceWriter};

use crate::proxy::tap::{IdleWait, TapReceiver};

/// A running trace thread.
pub struct Recording {
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<TraceStats>>,
    thread: Option<JoinHandle<()>>,
}

impl Recording {
    /// Starts writing what `rx` receives into `writer`.
    pub fn spawn(rx: TapReceiver, writer: TraceWriter, clock: Clock) -> Recording {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(writer.stats()));
        let (s, st) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("mongotap-trace".into())
            .stack_size(16 << 20)
            .spawn(move || run(rx, writer, &s, &st, clock))
            .expect("spawning the trace thread");
        Recording { stop, stats, thread: Some(thread) }
    }

    /// What was written so far.
    pub fn stats(&self) -> TraceStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes what is queued, closes the file and stops the thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(rx: TapReceiver, mut w: TraceWriter, stop: &AtomicBool, stats: &Mutex<TraceStats>, clock: Clock) {
    // The trace yields to forwarding and to the analysis.
    crate::analysis::lower_priority();
    let path = w.current_path();
    tracing::info!(trace = %path.display(), "recording a trace");
    // A failing disk is said once, and its end once: when a frame is written again.
    let mut failing: Option<u64> = None;
    let mut part = 0;
    let mut report = |r: Result<(), String>, w: &TraceWriter| match r {
        Ok(()) => {
            if failing.is_some_and(|bytes| w.stats().bytes > bytes) {
                failing = None;
                tracing::info!("the trace is written again");
            }
            if w.stats().parts != part {
                part = w.stats().parts;
                if part > 1 {
                    tracing::info!(trace = %w.current_path().display(), "the trace goes on in a new file");
                }
            }
        }
        Err(e) => {
            if failing.is_none() {
                tracing::error!("{e}; forwarding goes on, the records that cannot be written are let go, and the file stays readable up to them");
            }
            failing = Some(w.stats().bytes);
        }
    };
    let mut idle = IdleWait::new();
    loop {
        let mut any = false;
        for ev in rx.try_iter().take(4096) {
            any = true;
            let r = w.write(&ev);
            report(r, &w);
        }
        if !any {
            if let Some(gap) = rx.quiet_gap(clock.now()) {
                let r = w.write(&gap);
                report(r, &w);
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            idle.sleep();
        } else {
            idle.busy();
        }
        let r = w.tick();
        report(r, &w);
        *stats.lock().unwrap_or_else(|e| e.into_inner()) = w.stats();
    }
    let path = w.current_path();
    match w.finish() {
        Ok(s) => {
            *stats.lock().unwrap_or_else(|e| e.into_inner()) = s;
            tracing::info!(trace = %path.display(), records = s.records, bytes = s.bytes, files = s.parts, "trace closed");
        }
        Err(e) => tracing::error!("closing the trace: {e}"),
    }
}
