//! One direction of one connection: read, forward at once, then hand any whole
//! messages to the tap. The bytes are written before anything looks at them, so
//! forwarding never waits on framing. Each tapped message is copied out of the read
//! buffer, so the buffer is reused in place and nothing queued pins it.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use mongotap_events::{ConnId, Direction, TapEvent};
use mongotap_wire::{Split, Splitter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tap::Tap;

/// A connection's read buffer starts this small: a thousand idle connections must
/// not cost a thousand large buffers. It grows only when a message needs more.
const READ_MIN: usize = 4 * 1024;

/// The most reserved at once for a message being skipped (too large to analyse).
const READ_MAX: usize = 256 * 1024;

/// After a large message, a buffer larger than this is given back (a connection
/// that once carried 16 MB must not keep 16 MB for the rest of its life): outside
/// the tap's budget, a connection holds at most this much per direction.
const KEEP_MAX: usize = READ_MAX;

/// How a pump ended badly; a clean end of stream is `Ok`.
#[derive(Debug)]
pub enum PumpError {
    /// Reading from the source failed (reset, timeout).
    Read(io::Error),
    /// Writing to the destination failed (the other side went away).
    Write(io::Error),
}

/// Copies `from` to `to` until end of stream, then half-closes `to`. Returns the
/// number of bytes forwarded.
pub async fn pump<R, W>(
    mut from: R,
    mut to: W,
    conn: ConnId,
    dir: Direction,
    tap: &Tap,
    keep_limit: usize,
    activity: &AtomicU64,
) -> Result<u64, PumpError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(READ_MIN);
    let mut splitter = Splitter::new(keep_limit);
    let mut budget = Budget { tap, keep_limit, reserved: 0, skipping: false };
    let mut forwarded = 0u64;
    loop {
        // Grow only when room runs low or the message being framed needs more (its
        // header says how much), so a large message is read in few calls. Otherwise
        // `reserve` just moves the unread tail to the front of the same buffer.
        budget.decide(&mut splitter, &buf);
        // A message kept against a reservation is read into room made for all of it
        // at once: growing step by step would double the buffer past its size.
        let need = match budget.reserved as usize {
            0 => splitter.wanted(&buf).min(READ_MAX),
            whole => whole.saturating_sub(buf.len()),
        };
        let spare = buf.capacity() - buf.len();
        if spare < READ_MIN / 4 || spare < need {
            buf.reserve(need.max(READ_MIN));
        }
        let start = buf.len();
        let n = match from.read_buf(&mut buf).await {
            Ok(n) => n,
            Err(e) => {
                budget.give_back();
                return Err(PumpError::Read(e));
            }
        };
        if n == 0 {
            budget.give_back();
            // Half-close: the peer finished sending; tell the other side the same.
            let _ = to.shutdown().await;
            return Ok(forwarded);
        }
        let at = tap.clock().now();
        if let Err(e) = to.write_all(&buf[start..start + n]).await {
            budget.give_back();
            return Err(PumpError::Write(e));
        }
        forwarded += n as u64;
        activity.store(at, Ordering::Relaxed);
        loop {
            budget.decide(&mut splitter, &buf);
            let Some(item) = splitter.next(&mut buf) else { break };
            match item {
                Ok(Split::Frame(frame)) => budget.send(TapEvent::Message { conn, dir, at, frame }),
                // Not too large to analyse, only larger than the budget's room: dropped.
                Ok(Split::TooLarge(_)) if budget.skipping => budget.skipped(&mut splitter, conn),
                Ok(Split::TooLarge(header)) => {
                    tap.send(TapEvent::TooLarge { conn, dir, at, header });
                }
                Err(error) => {
                    budget.give_back();
                    tap.send(TapEvent::Unframeable { conn, dir, at, error });
                }
            }
        }
        // (Not while a reserved message is arriving: its room was made on purpose.)
        if buf.capacity() > KEEP_MAX && buf.len() < READ_MIN && budget.reserved == 0 {
            let mut small = BytesMut::with_capacity(READ_MIN);
            small.extend_from_slice(&buf);
            buf = small;
        }
    }
}

/// Messages above this size are buffered only against a reservation in the tap's
/// byte budget: a connection holds a large message whole while it arrives, and many
/// connections doing so at once must stay within the budget too.
const RESERVE_ABOVE: usize = super::tap::HELD_ABOVE;

/// The pump's share of the tap's byte budget: the reservation for the large message
/// being framed, or that it is being passed over for want of room. A reservation
/// goes back however the pump ends, a cancelled one (the other direction failed,
/// the idle timeout, shutdown) included.
#[derive(Debug)]
struct Budget<'a> {
    tap: &'a Tap,
    /// Messages above this are forwarded but not analysed: never reserved for.
    keep_limit: usize,
    reserved: u64,
    skipping: bool,
}

impl Budget<'_> {
    /// Before framing the message at the front: a large one is kept only if its bytes
    /// can be set aside; otherwise the splitter passes over it (forwarded, not kept).
    fn decide(&mut self, splitter: &mut Splitter, buf: &[u8]) {
        if self.reserved > 0 || self.skipping {
            return;
        }
        let len = splitter.front_len(buf).filter(|&l| l > RESERVE_ABOVE && l <= self.keep_limit);
        if let Some(len) = len {
            if self.tap.reserve(len as u64) {
                self.reserved = len as u64;
            } else {
                splitter.set_keep_limit(len - 1);
                self.skipping = true;
            }
        }
    }

    /// Sends a framed message, on its reservation if it has one.
    fn send(&mut self, ev: TapEvent) {
        match std::mem::take(&mut self.reserved) {
            0 => self.tap.send(ev),
            reserved => {
                // The frame is the reserved message: its owner gives back its length.
                let len = match &ev {
                    TapEvent::Message { frame, .. } => frame.bytes.len() as u64,
                    _ => 0,
                };
                self.tap.release(reserved.saturating_sub(len));
                self.tap.send_reserved(ev)
            }
        };
    }

    /// The message passed over for want of room: dropped and counted; the next one
    /// is judged afresh.
    fn skipped(&mut self, splitter: &mut Splitter, conn: ConnId) {
        self.tap.drop_one(conn);
        splitter.set_keep_limit(self.keep_limit);
        self.skipping = false;
    }

    /// The connection ends with a message half read: its reservation goes back.
    fn give_back(&mut self) {
        self.tap.release(std::mem::take(&mut self.reserved));
    }
}

impl Drop for Budget<'_> {
    fn drop(&mut self) {
        self.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongotap_events::Clock;

    #[tokio::test]
    async fn forwards_everything_and_taps_whole_frames() {
        let mut stream = Vec::new();
        for id in 0..3i32 {
            let mut m = vec![0u8; 40];
            m[0..4].copy_from_slice(&40i32.to_le_bytes());
            m[4..8].copy_from_slice(&id.to_le_bytes());
            m[12..16].copy_from_slice(&2013i32.to_le_bytes());
            stream.extend(m);
        }
        stream.extend_from_slice(b"trailing garbage that is not a frame");
        let (tap, rx) = Tap::new(16, u64::MAX, Clock::new());
        let mut out = Vec::new();
        let activity = AtomicU64::new(0);
        let n = pump(&stream[..], &mut out, 1, Direction::ToServer, &tap, 1 << 20, &activity).await.unwrap();
        assert_eq!(n as usize, stream.len());
        assert_eq!(out, stream, "byte-exact");
        let events: Vec<_> = rx.try_iter().collect();
        assert_eq!(events.len(), 4);
        assert!(matches!(events[2], TapEvent::Message { ref frame, .. } if frame.header.request_id == 2));
        assert!(matches!(events[3], TapEvent::Unframeable { .. }));
        assert!(activity.load(Ordering::Relaxed) > 0);
    }

    #[tokio::test]
    async fn a_large_message_past_the_byte_budget_is_forwarded_but_not_kept() {
        let msg = |id: i32, len: usize| {
            let mut m = vec![0u8; len];
            m[0..4].copy_from_slice(&(len as i32).to_le_bytes());
            m[4..8].copy_from_slice(&id.to_le_bytes());
            m[12..16].copy_from_slice(&2013i32.to_le_bytes());
            m
        };
        let stream = [msg(1, 200_000), msg(2, 100), msg(3, 90_000)].concat();
        let (tap, rx) = Tap::new(16, 150_000, Clock::new());
        let mut out = Vec::new();
        let activity = AtomicU64::new(0);
        pump(&stream[..], &mut out, 1, Direction::ToServer, &tap, 1 << 20, &activity).await.unwrap();
        assert_eq!(out, stream, "byte-exact");
        let kept: Vec<i32> = rx
            .try_iter()
            .filter_map(|e| match e {
                TapEvent::Message { frame, .. } => Some(frame.header.request_id),
                _ => None,
            })
            .collect();
        assert_eq!(kept, [2, 3], "the 200 KB message did not fit the 150 KB budget");
        assert_eq!(tap.dropped(), 1);
        assert_eq!(tap.queued_bytes(), 0, "every reservation was used or given back");
    }

    fn msg(id: i32, len: usize) -> Vec<u8> {
        let mut m = vec![0u8; len];
        m[0..4].copy_from_slice(&(len as i32).to_le_bytes());
        m[4..8].copy_from_slice(&id.to_le_bytes());
        m[12..16].copy_from_slice(&2013i32.to_le_bytes());
        m
    }

    #[tokio::test]
    async fn a_message_too_large_to_analyse_takes_no_reservation() {
        // Above the keep limit (150 KB here, 16 MiB by default): forwarded, reported
        // as too large, and no byte of the budget is taken or lost.
        let stream = [msg(1, 200_000), msg(2, 100), msg(3, 90_000)].concat();
        let (tap, rx) = Tap::new(16, 1 << 30, Clock::new());
        let (mut out, activity) = (Vec::new(), AtomicU64::new(0));
        pump(&stream[..], &mut out, 1, Direction::ToServer, &tap, 150_000, &activity).await.unwrap();
        assert_eq!(out, stream);
        let events: Vec<TapEvent> = rx.try_iter().collect();
        assert!(matches!(events[0], TapEvent::TooLarge { .. }));
        drop(events);
        assert_eq!(tap.queued_bytes(), 0, "nothing held, nothing leaked");
    }

    #[tokio::test]
    async fn a_cancelled_pump_gives_its_reservation_back() {
        // Only the first half of a 100 KB message arrives, then nothing: the session
        // gives up on the connection (idle timeout, the other side failed) and drops
        // the pump mid-message.
        let half = msg(1, 100_000)[..50_000].to_vec();
        let (client, mut feeder) = tokio::io::duplex(1 << 20);
        let (tap, _rx) = Tap::new(16, 1 << 30, Clock::new());
        let activity = AtomicU64::new(0);
        tokio::io::AsyncWriteExt::write_all(&mut feeder, &half).await.unwrap();
        let pumping = pump(client, tokio::io::sink(), 1, Direction::ToServer, &tap, 1 << 20, &activity);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(200), pumping).await.is_err());
        assert_eq!(tap.queued_bytes(), 0, "the reservation went back with the cancelled pump");
        drop(feeder);
    }
}
