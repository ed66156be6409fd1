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
    let mut forwarded = 0u64;
    loop {
        // Grow only when room runs low or the message being framed needs more (its
        // header says how much), so a large message is read in few calls. Otherwise
        // `reserve` just moves the unread tail to the front of the same buffer.
        let need = splitter.wanted(&buf).min(READ_MAX);
        let spare = buf.capacity() - buf.len();
        if spare < READ_MIN / 4 || spare < need {
            buf.reserve(need.max(READ_MIN));
        }
        let start = buf.len();
        let n = from.read_buf(&mut buf).await.map_err(PumpError::Read)?;
        if n == 0 {
            // Half-close: the peer finished sending; tell the other side the same.
            let _ = to.shutdown().await;
            return Ok(forwarded);
        }
        let at = tap.clock().now();
        to.write_all(&buf[start..start + n]).await.map_err(PumpError::Write)?;
        forwarded += n as u64;
        activity.store(at, Ordering::Relaxed);
        while let Some(item) = splitter.next(&mut buf) {
            tap.send(match item {
                Ok(Split::Frame(frame)) => TapEvent::Message { conn, dir, at, frame },
                Ok(Split::TooLarge(header)) => TapEvent::TooLarge { conn, dir, at, header },
                Err(error) => TapEvent::Unframeable { conn, dir, at, error },
            });
        }
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
        let (tap, rx) = Tap::new(16, Clock::new());
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
}
