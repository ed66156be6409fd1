//! The tap: the only thing the forwarding path knows about analysis. It offers
//! each event to a bounded channel with `try_send` and, when the channel is full,
//! drops the event and counts it. It never waits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use mongotap_analyzers::event::{Clock, TapEvent};

/// The forwarding side's handle on the analysis channel.
#[derive(Debug)]
pub struct Tap {
    tx: SyncSender<TapEvent>,
    clock: Clock,
    offered: AtomicU64,
    dropped: AtomicU64,
}

impl Tap {
    /// A tap and the receiving end of its channel, which holds at most `capacity` events.
    pub fn new(capacity: usize, clock: Clock) -> (Tap, Receiver<TapEvent>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
        (Tap { tx, clock, offered: AtomicU64::new(0), dropped: AtomicU64::new(0) }, rx)
    }

    /// Offers an event; drops and counts it if the analysis is behind or gone.
    pub fn send(&self, ev: TapEvent) {
        self.offered.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(ev) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The clock events are stamped with.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Events offered so far.
    pub fn offered(&self) -> u64 {
        self.offered.load(Ordering::Relaxed)
    }

    /// Events dropped so far because the channel was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_channel_drops_and_counts_without_blocking() {
        let (tap, rx) = Tap::new(2, Clock::new());
        for conn in 0..5 {
            tap.send(TapEvent::Closed { conn, at: 0 });
        }
        assert_eq!((tap.offered(), tap.dropped()), (5, 3));
        assert_eq!(rx.try_iter().count(), 2);
        drop(rx);
        tap.send(TapEvent::Closed { conn: 9, at: 0 });
        assert_eq!(tap.dropped(), 4, "a gone analysis counts as dropped too");
    }
}
