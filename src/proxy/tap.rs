//! The tap: the only thing the forwarding path knows about analysis. It offers
//! each event to a bounded channel with `try_send` and, when the channel is full,
//! drops the event and counts it. It never waits. After a drop, the next event that
//! gets through is preceded by a [`TapEvent::Gap`], so the analysis learns of the
//! hole before it reads on (on any connection: a driver's pool spreads one request
//! over several, so a hole on one is a hole for all).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use mongotap_events::{Clock, TapEvent};

/// The forwarding side's handle on the analysis channel.
#[derive(Debug)]
pub struct Tap {
    tx: SyncSender<TapEvent>,
    clock: Clock,
    offered: AtomicU64,
    dropped: AtomicU64,
    /// Drops a `Gap` has already told the analysis of.
    announced: AtomicU64,
}

impl Tap {
    /// A tap and the receiving end of its channel, which holds at most `capacity` events.
    pub fn new(capacity: usize, clock: Clock) -> (Tap, Receiver<TapEvent>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
        let tap = Tap {
            tx,
            clock,
            offered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            announced: AtomicU64::new(0),
        };
        (tap, rx)
    }

    /// Offers an event; drops and counts it if the analysis is behind or gone.
    /// Returns whether it got through.
    pub fn send(&self, ev: TapEvent) -> bool {
        self.offered.fetch_add(1, Ordering::Relaxed);
        let dropped = self.dropped.load(Ordering::Relaxed);
        let announced = self.announced.load(Ordering::Relaxed);
        if dropped > announced {
            // The marker is not traffic: neither offered nor counted as dropped. If
            // it cannot be queued, neither can the event behind it. (Two threads may
            // both announce the same hole: a second marker only resets twice.)
            let gap = TapEvent::Gap { at: ev.at(), dropped: dropped - announced };
            if self.tx.try_send(gap).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            self.announced.fetch_max(dropped, Ordering::Relaxed);
        }
        match self.tx.try_send(ev) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
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

    #[test]
    fn a_hole_is_announced_before_the_next_event_of_any_connection() {
        let (tap, rx) = Tap::new(2, Clock::new());
        for at in 0..5 {
            tap.send(TapEvent::Closed { conn: 7, at });
        }
        // Two got through, three were dropped; the queue is full.
        assert_eq!((tap.offered(), tap.dropped()), (5, 3));
        let first: Vec<u64> = rx.try_iter().map(|e| e.at()).collect();
        assert_eq!(first, [0, 1]);
        // With room again, the hole is announced before the next event, whichever
        // connection it is from.
        tap.send(TapEvent::Closed { conn: 8, at: 5 });
        let next: Vec<TapEvent> = rx.try_iter().collect();
        assert!(matches!(next[0], TapEvent::Gap { dropped: 3, at: 5 }), "{next:?}");
        assert!(matches!(next[1], TapEvent::Closed { conn: 8, at: 5 }));
        assert_eq!((tap.offered(), tap.dropped()), (6, 3), "the marker is not counted as traffic");
        // Announced once.
        tap.send(TapEvent::Closed { conn: 8, at: 6 });
        assert!(matches!(rx.try_iter().collect::<Vec<_>>()[..], [TapEvent::Closed { at: 6, .. }]));

        // A marker that cannot be queued drops the event behind it too.
        let (tap, rx) = Tap::new(2, Clock::new());
        for at in 0..3 {
            tap.send(TapEvent::Closed { conn: 1, at }); // the third is dropped: full
        }
        tap.send(TapEvent::Closed { conn: 1, at: 3 }); // its marker cannot be queued: dropped
        assert_eq!(tap.dropped(), 2);
        assert_eq!(rx.try_iter().count(), 2);
        tap.send(TapEvent::Closed { conn: 1, at: 4 });
        let next: Vec<TapEvent> = rx.try_iter().collect();
        assert!(matches!(next[0], TapEvent::Gap { dropped: 2, .. }));
        assert!(matches!(next[1], TapEvent::Closed { at: 4, .. }));
    }
}
