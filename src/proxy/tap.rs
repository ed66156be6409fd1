//! The tap: the only thing the forwarding path knows about analysis. It offers
//! each event to a bounded channel with `try_send` and, when the channel is full,
//! drops the event and counts it. It never waits. Each direction of a connection
//! sends through a [`Lane`], which tells the analysis where its events have a hole.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use mongotap_events::{Clock, ConnId, Direction, TapEvent};

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
    /// Returns whether it got through.
    pub fn send(&self, ev: TapEvent) -> bool {
        self.offered.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(ev) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// A gap marker is not an event of the traffic: it is neither offered nor
    /// counted as dropped.
    fn send_marker(&self, ev: TapEvent) -> bool {
        self.tx.try_send(ev).is_ok()
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

/// One direction of one connection on the tap. When some of its events were
/// dropped, the next one is preceded by a [`TapEvent::Gap`]; if the marker itself
/// cannot be queued, the event is dropped too, so the analysis never sees an event
/// after a hole without being told of the hole first.
#[derive(Debug)]
pub struct Lane<'t> {
    tap: &'t Tap,
    conn: ConnId,
    dir: Direction,
    dropped: u64,
}

impl<'t> Lane<'t> {
    /// The lane of `conn` in direction `dir`.
    pub fn new(tap: &'t Tap, conn: ConnId, dir: Direction) -> Lane<'t> {
        Lane { tap, conn, dir, dropped: 0 }
    }

    /// The tap this lane sends on.
    pub fn tap(&self) -> &'t Tap {
        self.tap
    }

    /// Offers an event of this lane.
    pub fn send(&mut self, ev: TapEvent) {
        if self.dropped > 0 {
            let gap = TapEvent::Gap { conn: self.conn, dir: self.dir, at: ev.at(), dropped: self.dropped };
            if !self.tap.send_marker(gap) {
                self.tap.offered.fetch_add(1, Ordering::Relaxed);
                self.tap.dropped.fetch_add(1, Ordering::Relaxed);
                self.dropped += 1;
                return;
            }
            self.dropped = 0;
        }
        if !self.tap.send(ev) {
            self.dropped += 1;
        }
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
    fn a_lane_marks_its_holes_before_its_next_event() {
        let (tap, rx) = Tap::new(2, Clock::new());
        let mut lane = Lane::new(&tap, 7, Direction::ToClient);
        for at in 0..5 {
            lane.send(TapEvent::Closed { conn: 7, at });
        }
        // Two got through, three were dropped; the queue is full.
        assert_eq!((tap.offered(), tap.dropped()), (5, 3));
        let first: Vec<u64> = rx.try_iter().map(|e| e.at()).collect();
        assert_eq!(first, [0, 1]);
        // With room again, the hole is announced before the next event.
        lane.send(TapEvent::Closed { conn: 7, at: 5 });
        let next: Vec<TapEvent> = rx.try_iter().collect();
        assert!(matches!(next[0], TapEvent::Gap { conn: 7, dir: Direction::ToClient, dropped: 3, at: 5 }));
        assert!(matches!(next[1], TapEvent::Closed { at: 5, .. }));
        assert_eq!((tap.offered(), tap.dropped()), (6, 3), "the marker is not counted as traffic");
        // A marker that cannot be queued drops the event behind it too.
        let (tap, rx) = Tap::new(2, Clock::new());
        let mut lane = Lane::new(&tap, 1, Direction::ToServer);
        for at in 0..3 {
            lane.send(TapEvent::Closed { conn: 1, at }); // the third is dropped: full
        }
        lane.send(TapEvent::Closed { conn: 1, at: 3 }); // its marker cannot be queued: dropped
        assert_eq!(tap.dropped(), 2);
        assert_eq!(rx.try_iter().count(), 2);
        lane.send(TapEvent::Closed { conn: 1, at: 4 });
        let next: Vec<TapEvent> = rx.try_iter().collect();
        assert!(matches!(next[0], TapEvent::Gap { dropped: 2, .. }));
        assert!(matches!(next[1], TapEvent::Closed { at: 4, .. }));
        assert_eq!(next.len(), 2);
    }
}
