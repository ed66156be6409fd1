//! The tap: the only thing the forwarding path knows about analysis. It offers
//! each event to a bounded channel with `try_send` and, when the channel is full,
//! drops the event and counts it. It never waits. After a drop, the next event that
//! gets through is preceded by a [`TapEvent::Gap`], so the analysis learns of the
//! hole before it reads on (on any connection: a driver's pool spreads one request
//! over several, so a hole on one is a hole for all).
//!
//! The backlog is bounded twice: by events (the channel's capacity) and by bytes
//! (the messages' sizes: 32,768 events of up to 16 MiB each would be 512 GiB). An
//! event that would take the bytes past the budget is dropped and counted like one
//! that finds the channel full. A small message counts while it is queued; a large
//! one (above [`HELD_ABOVE`]) counts from before the pump buffers it until the
//! analysis lets go of it (a request waits for its reply), through [`Held`]: the
//! budget bounds every large message the process holds for analysis.
//!
//! Each drop is charged to its connection (up to [`MAX_LOST_CONNS`] of them per
//! gap), so the report can say which connections had holes, and a dropped `Closed`
//! still ends its connection's state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongotap_events::{Clock, ConnId, Lost, TapEvent};

/// Messages above this size are reserved before they are buffered and counted
/// until their last reference is dropped.
pub const HELD_ABOVE: usize = 64 * 1024;

/// Drops to wait before trying again to announce a gap that found no room.
const RETRY_AFTER: u64 = 64;

/// Connections one gap names; drops on further ones are counted, not named.
pub const MAX_LOST_CONNS: usize = 4096;

/// The forwarding side's handle on the analysis channel.
#[derive(Debug)]
pub struct Tap {
    tx: SyncSender<TapEvent>,
    clock: Clock,
    /// Bytes of messages queued and not yet taken by the analysis.
    queued: Arc<AtomicU64>,
    budget: u64,
    offered: AtomicU64,
    loss: Arc<Loss>,
    /// The trace's own tap, offered every event too: a slow disk drops (and counts)
    /// trace records, never analysis events, and never waits.
    also: Option<Box<Tap>>,
}

/// Drops, counted and charged to their connections until a gap announces them.
#[derive(Debug, Default)]
struct Loss {
    dropped: AtomicU64,
    /// Drops a `Gap` has already told the analysis of.
    announced: AtomicU64,
    /// After a gap found no room, the next try waits until the analysis takes an
    /// event (or this many drops): while the channel stays full, building a gap on
    /// every offer would cost each drop a walk over the connections.
    retry_at: AtomicU64,
    /// Drops not yet announced, by connection. Locked only on the drop path and
    /// when a gap is announced, never on the path of an event that gets through.
    lost: Mutex<HashMap<ConnId, Lost>>,
}

impl Loss {
    /// Whether drops wait to be announced.
    fn pending(&self) -> bool {
        self.dropped.load(Ordering::Relaxed) > self.announced.load(Ordering::Relaxed)
    }

    /// The analysis took an event: there is room for a gap again.
    fn room(&self) {
        if self.retry_at.load(Ordering::Relaxed) != 0 {
            self.retry_at.store(0, Ordering::Relaxed);
        }
    }

    /// Whether an event may try to announce them now (see `retry_at`).
    fn may_retry(&self) -> bool {
        self.dropped.load(Ordering::Relaxed) >= self.retry_at.load(Ordering::Relaxed)
    }

    /// Hands `deliver` a `Gap` naming the drops not yet announced; they count as
    /// announced if it takes it. True when there was nothing to announce too.
    fn announce(&self, at: mongotap_events::Micros, deliver: impl FnOnce(TapEvent) -> bool) -> bool {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the lock that `lose` counts under, so the count and the
        // connections agree. Another thread may have announced meanwhile.
        let (dropped, announced) =
            (self.dropped.load(Ordering::Relaxed), self.announced.load(Ordering::Relaxed));
        if dropped <= announced {
            return true;
        }
        let gap = TapEvent::Gap { at, dropped: dropped - announced, lost: lost.values().copied().collect() };
        if !deliver(gap) {
            self.retry_at.store(dropped + RETRY_AFTER, Ordering::Relaxed);
            return false;
        }
        lost.clear();
        self.announced.store(dropped, Ordering::Relaxed);
        true
    }

    /// Counts a dropped event against its connection.
    fn lose(&self, conn: Option<ConnId>, closed: bool) {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        self.dropped.fetch_add(1, Ordering::Relaxed);
        let Some(conn) = conn else { return };
        // A lost close ends its connection's state: kept past the bound (up to four
        // times it), unlike a lost message, which only names the connection.
        let room = lost.len() < MAX_LOST_CONNS || (closed && lost.len() < 4 * MAX_LOST_CONNS);
        if let Some(l) = lost.get_mut(&conn) {
            l.events += 1;
            l.closed |= closed;
        } else if room {
            lost.insert(conn, Lost { conn, events: 1, closed });
        }
    }
}

impl Tap {
    /// A tap and the receiving end of its channel, which holds at most `capacity`
    /// events and `budget` bytes of messages.
    pub fn new(capacity: usize, budget: u64, clock: Clock) -> (Tap, TapReceiver) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
        let queued = Arc::new(AtomicU64::new(0));
        let loss = Arc::new(Loss::default());
        let tap = Tap {
            tx,
            clock,
            queued: queued.clone(),
            budget,
            offered: AtomicU64::new(0),
            loss: loss.clone(),
            also: None,
        };
        (tap, TapReceiver { rx, queued, loss })
    }

    /// Offers every event to `other` as well (the trace's tap).
    pub fn also_to(mut self, other: Tap) -> Tap {
        self.also = Some(Box::new(other));
        self
    }

    /// The second tap, if there is one.
    pub fn also(&self) -> Option<&Tap> {
        self.also.as_deref()
    }

    /// Offers an event; drops and counts it if the analysis is behind or gone.
    /// Returns whether it got through.
    pub fn send(&self, ev: TapEvent) -> bool {
        if let Some(t) = &self.also {
            t.send(ev.clone());
        }
        match &ev {
            TapEvent::Message { frame, .. } if frame.bytes.len() > HELD_ABOVE => {
                if !self.reserve(frame.bytes.len() as u64) {
                    self.offered.fetch_add(1, Ordering::Relaxed);
                    self.lose_event(&ev);
                    return false;
                }
                // Offered to the trace above already.
                self.offer_reserved(ev)
            }
            _ => self.offer(ev),
        }
    }

    /// Sets `bytes` aside for a large message before it is buffered (the pump holds
    /// it whole while it arrives); false when the budget has no room for it.
    pub fn reserve(&self, bytes: u64) -> bool {
        if self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes > self.budget {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Gives back a reservation whose message will not be sent.
    pub fn release(&self, bytes: u64) {
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Offers the message a reservation was made for (its bytes are already
    /// counted); the reservation now goes with the message's bytes.
    pub fn send_reserved(&self, ev: TapEvent) -> bool {
        if let Some(t) = &self.also {
            t.send(ev.clone());
        }
        self.offer_reserved(ev)
    }

    fn offer_reserved(&self, ev: TapEvent) -> bool {
        let ev = match ev {
            TapEvent::Message { conn, dir, at, frame } => {
                let len = frame.bytes.len() as u64;
                let held = Held { bytes: frame.bytes, len, queued: self.queued.clone() };
                let frame =
                    mongotap_wire::Frame { header: frame.header, bytes: bytes::Bytes::from_owner(held) };
                TapEvent::Message { conn, dir, at, frame }
            }
            other => other,
        };
        self.offer(ev)
    }

    fn offer(&self, ev: TapEvent) -> bool {
        self.offered.fetch_add(1, Ordering::Relaxed);
        let size = bytes_of(&ev);
        // No event passes a hole not yet announced: it waits (dropped) for its gap.
        if self.loss.pending()
            && !(self.loss.may_retry() && self.loss.announce(ev.at(), |gap| self.tx.try_send(gap).is_ok()))
        {
            // The marker is not traffic: neither offered nor counted as dropped. If
            // it cannot be queued, neither can the event behind it.
            // (A held message gives its reservation back as it is dropped.)
            self.lose_event(&ev);
            return false;
        }
        if size > 0 && self.queued.fetch_add(size, Ordering::Relaxed) + size > self.budget {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            self.lose_event(&ev);
            return false;
        }
        match self.tx.try_send(ev) {
            Ok(()) => true,
            Err(TrySendError::Full(ev)) | Err(TrySendError::Disconnected(ev)) => {
                self.queued.fetch_sub(size, Ordering::Relaxed);
                self.lose_event(&ev);
                false
            }
        }
    }

    fn lose_event(&self, ev: &TapEvent) {
        self.loss.lose(ev.conn(), matches!(ev, TapEvent::Closed { .. }));
    }

    /// A message of `conn` was passed over for want of room: offered and dropped.
    pub fn drop_one(&self, conn: ConnId) {
        if let Some(t) = &self.also {
            t.drop_one(conn);
        }
        self.offered.fetch_add(1, Ordering::Relaxed);
        self.loss.lose(Some(conn), false);
    }

    /// Bytes of messages queued for the analysis now.
    pub fn queued_bytes(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
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
        self.loss.dropped.load(Ordering::Relaxed)
    }
}

/// The bytes an event counts for while queued: a small message's (a large one's
/// are counted by its [`Held`] owner).
fn bytes_of(ev: &TapEvent) -> u64 {
    match ev {
        TapEvent::Message { frame, .. } if frame.bytes.len() <= HELD_ABOVE => frame.bytes.len() as u64,
        _ => 0,
    }
}

/// The owner of a large message's bytes: gives its reservation back when the last
/// reference to them is dropped, wherever that is (the queue, the analysis, a
/// request waiting for its reply, a dropped event).
struct Held {
    bytes: bytes::Bytes,
    len: u64,
    queued: Arc<AtomicU64>,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.len, Ordering::Relaxed);
    }
}

/// The analysis side of the tap: taking an event gives its bytes back to the budget.
#[derive(Debug)]
pub struct TapReceiver {
    rx: Receiver<TapEvent>,
    queued: Arc<AtomicU64>,
    loss: Arc<Loss>,
}

impl TapReceiver {
    /// The next event, if one is queued.
    pub fn try_recv(&self) -> Result<TapEvent, TryRecvError> {
        let ev = self.rx.try_recv()?;
        self.queued.fetch_sub(bytes_of(&ev), Ordering::Relaxed);
        self.loss.room();
        Ok(ev)
    }

    /// A `Gap` for drops no event has followed yet (the traffic went quiet right
    /// after them), so the analysis learns of them anyway.
    pub fn quiet_gap(&self, at: mongotap_events::Micros) -> Option<TapEvent> {
        let mut gap = None;
        if self.loss.pending() {
            self.loss.announce(at, |g| {
                gap = Some(g);
                true
            });
        }
        gap
    }

    /// Every event queued now.
    pub fn try_iter(&self) -> impl Iterator<Item = TapEvent> + '_ {
        std::iter::from_fn(move || self.try_recv().ok())
    }
}

/// How a reader of the tap waits while it is empty: [`IdleWait::FIRST`] after
/// events, then twice as long with each empty look, up to [`IdleWait::LONGEST`].
/// Readers poll, never block (a blocked receiver must be woken by every send: a
/// futex call on the forwarding path), and each wake-up is a context switch: at one
/// every millisecond an idle proxy's analysis thread spent 2.3% of a core waking up
/// (920 a second); backing off to 16 ms, 0.2%. The longest wait bounds what queues
/// meanwhile: 16 ms of 1.3M events a second (bench/analysis's fastest case, two
/// events an operation) is 21,000 events, inside the tap's 32,768.
#[derive(Debug)]
pub struct IdleWait {
    next: Duration,
}

impl IdleWait {
    /// The first wait after events.
    pub const FIRST: Duration = Duration::from_millis(1);
    /// The longest wait.
    pub const LONGEST: Duration = Duration::from_millis(16);

    pub fn new() -> IdleWait {
        IdleWait { next: Self::FIRST }
    }

    /// Events came: the next wait is the first again.
    pub fn busy(&mut self) {
        self.next = Self::FIRST;
    }

    /// The wait for this empty look, and the next one doubled.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 2).min(Self::LONGEST);
        wait
    }

    /// Sleeps this empty look's wait.
    pub fn sleep(&mut self) {
        std::thread::sleep(self.next_wait());
    }
}

impl Default for IdleWait {
    fn default() -> IdleWait {
        IdleWait::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_tap_is_looked_at_less_and_less_often_until_events_come() {
        let mut w = IdleWait::new();
        let waits: Vec<u64> = (0..7).map(|_| w.next_wait().as_millis() as u64).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 16, 16]);
        w.busy();
        assert_eq!(w.next_wait(), IdleWait::FIRST);
    }

    #[test]
    fn a_full_channel_drops_and_counts_without_blocking() {
        let (tap, rx) = Tap::new(2, u64::MAX, Clock::new());
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
    fn the_byte_budget_drops_large_messages_and_is_given_back() {
        use mongotap_wire::{Frame, OpMsg};
        let msg = |n: usize| {
            let d = bson::doc! {"insert": "c", "documents": [{"blob": "x".repeat(n)}], "$db": "d"};
            Frame::from_bytes(OpMsg::new(mongotap_wire::Document::from_doc(&d)).encode(1, 0)).unwrap()
        };
        let (tap, rx) = Tap::new(100, 10_000, Clock::new());
        let ev =
            |frame| TapEvent::Message { conn: 1, dir: mongotap_events::Direction::ToServer, at: 0, frame };
        assert!(tap.send(ev(msg(4_000))));
        assert!(tap.send(ev(msg(4_000))));
        assert!(!tap.send(ev(msg(4_000))), "past the budget: dropped");
        assert!(tap.send(TapEvent::Closed { conn: 2, at: 0 }) || tap.dropped() > 0);
        assert_eq!(tap.dropped(), 1);
        assert!(tap.queued_bytes() > 8_000 && tap.queued_bytes() <= 10_000);
        assert_eq!(rx.try_iter().filter(|e| matches!(e, TapEvent::Message { .. })).count(), 2);
        assert_eq!(tap.queued_bytes(), 0, "taking events gives their bytes back");
        assert!(tap.send(ev(msg(4_000))));
    }

    #[test]
    fn a_large_message_counts_until_the_analysis_lets_go_of_it() {
        use mongotap_wire::{Frame, OpMsg};
        let d = bson::doc! {"insert": "c", "documents": [{"blob": "x".repeat(100_000)}], "$db": "d"};
        let frame =
            Frame::from_bytes(OpMsg::new(mongotap_wire::Document::from_doc(&d)).encode(1, 0)).unwrap();
        let len = frame.bytes.len() as u64;
        let (tap, rx) = Tap::new(100, 250_000, Clock::new());
        let ev =
            |frame| TapEvent::Message { conn: 1, dir: mongotap_events::Direction::ToServer, at: 0, frame };
        assert!(tap.send(ev(frame.clone())), "reserved on the spot");
        assert!(tap.send(ev(frame.clone())));
        assert!(!tap.send(ev(frame.clone())), "a third would pass the budget: dropped");
        assert_eq!(tap.queued_bytes(), 2 * len);
        let mut taken: Vec<TapEvent> = rx.try_iter().collect();
        assert_eq!(tap.queued_bytes(), 2 * len, "taken from the queue, still held");
        let kept = match taken.pop() {
            Some(TapEvent::Message { frame, .. }) => frame.bytes.slice(16..32),
            other => panic!("{other:?}"),
        };
        drop(taken);
        assert_eq!(tap.queued_bytes(), len, "one let go of; a slice of the other is still held");
        drop(kept);
        assert_eq!(tap.queued_bytes(), 0);
    }

    #[test]
    fn a_hole_is_announced_before_the_next_event_of_any_connection() {
        let (tap, rx) = Tap::new(2, u64::MAX, Clock::new());
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
        assert!(
            matches!(&next[0], TapEvent::Gap { dropped: 3, at: 5, lost } if lost[..] == [Lost { conn: 7, events: 3, closed: true }]),
            "{next:?}"
        );
        assert!(matches!(next[1], TapEvent::Closed { conn: 8, at: 5 }));
        assert_eq!((tap.offered(), tap.dropped()), (6, 3), "the marker is not counted as traffic");
        // Announced once.
        tap.send(TapEvent::Closed { conn: 8, at: 6 });
        assert!(matches!(rx.try_iter().collect::<Vec<_>>()[..], [TapEvent::Closed { at: 6, .. }]));

        // A marker that cannot be queued drops the event behind it too.
        let (tap, rx) = Tap::new(2, u64::MAX, Clock::new());
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
