//! The analysis thread: drains the tap's channel into the pipeline. It runs on its
//! own OS thread so that a slow analysis costs the forwarding tasks nothing but a
//! dropped (and counted) event.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mongotap_analyzers::event::{Clock, TapEvent};
use mongotap_analyzers::pipeline::Pipeline;

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
    pub fn spawn(rx: Receiver<TapEvent>, pipeline: Pipeline, clock: Clock) -> Analysis {
        let pipeline = Arc::new(Mutex::new(pipeline));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (pipeline.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mongotap-analysis".into())
            .spawn(move || run(rx, &p, &s, clock))
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

fn run(rx: Receiver<TapEvent>, pipeline: &Mutex<Pipeline>, stop: &AtomicBool, clock: Clock) {
    let mut last_expire = clock.now();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(ev) => {
                let mut p = pipeline.lock().unwrap_or_else(|e| e.into_inner());
                p.feed(ev);
                for ev in rx.try_iter().take(BATCH) {
                    p.feed(ev);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = clock.now();
        if now.saturating_sub(last_expire) > 1_000_000 {
            pipeline.lock().unwrap_or_else(|e| e.into_inner()).expire(now);
            last_expire = now;
        }
    }
}
