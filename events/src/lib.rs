//! # mongotap-events
//!
//! What the forwarding side hands the analysis, and nothing more: tap events from
//! the live proxy (and, later, from trace files and captures), each with the
//! connection it belongs to and a timestamp, and the clock that stamps them. The
//! forwarding path depends on this crate and on the codec's framing, never on the
//! analyzers.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mongotap_wire::{Compressor, Frame, MsgHeader, WireError};

/// A connection's identity within one run.
pub type ConnId = u64;

/// Microseconds since the Unix epoch, taken from a monotonic clock (see [`Clock`]).
pub type Micros = u64;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server: requests.
    ToServer,
    /// Server to client: replies.
    ToClient,
}

/// One thing the tap saw.
#[derive(Debug, Clone)]
pub enum TapEvent {
    /// A client connected and mongotap reached the upstream for it.
    Opened { conn: ConnId, client: SocketAddr, at: Micros },
    /// A whole message, as it was forwarded.
    Message { conn: ConnId, dir: Direction, at: Micros, frame: Frame },
    /// A message read back from a redacted trace: its values were replaced and it
    /// was stored uncompressed, so what it was on the wire (its length and
    /// compressor) travels beside it for the byte counts.
    Recorded {
        conn: ConnId,
        dir: Direction,
        at: Micros,
        frame: Frame,
        wire_len: u32,
        compressor: Option<Compressor>,
    },
    /// A message too large to keep for analysis; it was forwarded, not analysed.
    TooLarge { conn: ConnId, dir: Direction, at: Micros, header: MsgHeader },
    /// The stream could not be framed any more; analysis of this connection stops,
    /// forwarding does not.
    Unframeable { conn: ConnId, dir: Direction, at: Micros, error: WireError },
    /// The connection ended.
    Closed { conn: ConnId, at: Micros },
    /// The tap dropped `dropped` events (the analysis was behind) before the next
    /// one that got through, on any connection. Whatever the analysis was following
    /// across events has a hole in it. `lost` says on which connections (bounded:
    /// drops beyond it are in `dropped` only).
    Gap { at: Micros, dropped: u64, lost: Vec<Lost> },
}

/// The events one connection lost in a [`TapEvent::Gap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// The connection.
    pub conn: ConnId,
    /// Events of it dropped.
    pub events: u64,
    /// Whether its `Closed` was among them: the connection is gone.
    pub closed: bool,
}

impl TapEvent {
    /// When it happened.
    pub fn at(&self) -> Micros {
        match self {
            TapEvent::Opened { at, .. }
            | TapEvent::Message { at, .. }
            | TapEvent::Recorded { at, .. }
            | TapEvent::TooLarge { at, .. }
            | TapEvent::Unframeable { at, .. }
            | TapEvent::Closed { at, .. }
            | TapEvent::Gap { at, .. } => *at,
        }
    }

    /// The connection it belongs to (a gap belongs to none).
    pub fn conn(&self) -> Option<ConnId> {
        match self {
            TapEvent::Opened { conn, .. }
            | TapEvent::Message { conn, .. }
            | TapEvent::Recorded { conn, .. }
            | TapEvent::TooLarge { conn, .. }
            | TapEvent::Unframeable { conn, .. }
            | TapEvent::Closed { conn, .. } => Some(*conn),
            TapEvent::Gap { .. } => None,
        }
    }
}

/// Wall-clock timestamps that never go backwards: the wall clock read once at
/// start, advanced by a monotonic clock, so latencies are immune to clock steps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    start_wall: Micros,
}

impl Clock {
    /// A clock anchored now.
    pub fn new() -> Clock {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        Clock { start: Instant::now(), start_wall: wall.as_micros() as Micros }
    }

    /// The current time.
    pub fn now(&self) -> Micros {
        self.start_wall + self.start.elapsed().as_micros() as Micros
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Microseconds since the epoch as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(us: u64) -> String {
    let secs = (us / 1_000_000) as i64;
    let millis = (us % 1_000_000) / 1000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_212_800_123_456), "2026-12-02T12:00:00.123Z");
        assert_eq!(rfc3339(951_782_400_000_000), "2000-02-29T00:00:00.000Z");
    }
}
