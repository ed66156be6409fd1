//! The server-to-client stream in replica-set mode: whole small messages are held
//! until complete so a `hello` reply can have its member addresses renamed
//! ([`mongotap_wire::hello`]); everything else passes with its bytes unchanged.
//! Messages above [`HOLD_MAX`] (hello replies are a few KB) stream through as they
//! arrive, and a stream that stops looking like MongoDB messages is passed on as
//! it is. Without a topology the reader is the upstream's own, untouched.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use mongotap_wire::{Frame, MAX_MESSAGE_SIZE};
use tokio::io::{AsyncRead, ReadBuf};

use super::topology::{Member, Topology};

/// Replies up to this size are held whole and looked at; larger ones stream.
pub const HOLD_MAX: usize = 64 * 1024;

/// How much room a read into the holding buffer has at least.
const CHUNK: usize = 4 * 1024;

/// Renames member addresses in hello replies for the connection through `via`.
#[derive(Clone)]
pub struct Renamer {
    /// The members and their listeners.
    pub topology: Arc<Topology>,
    /// The member this connection reaches.
    pub via: Arc<Member>,
}

/// The upstream's reader, renaming hello replies when a [`Renamer`] is given.
pub struct Rewriting<R> {
    inner: R,
    renamer: Option<Renamer>,
    /// Bytes read from the upstream and not handed out yet.
    buf: BytesMut,
    /// Of those, how many at the front are ready to hand out.
    ready: usize,
    /// Bytes of a large message still to pass through unheld.
    passing: usize,
    /// The stream is not framed as messages: it all passes as it is.
    unframed: bool,
    eof: bool,
}

impl<R> Rewriting<R> {
    /// Reads `inner`, renaming when `renamer` is given.
    pub fn new(inner: R, renamer: Option<Renamer>) -> Rewriting<R> {
        Rewriting { inner, renamer, buf: BytesMut::new(), ready: 0, passing: 0, unframed: false, eof: false }
    }

    /// Decides what the front of the buffer is: ready as it is, renamed, or waiting
    /// for more bytes. Returns whether anything became ready.
    fn frame(&mut self) -> bool {
        if self.renamer.is_none() {
            return false;
        }
        if self.unframed || self.passing > 0 {
            let n = if self.unframed { self.buf.len() } else { self.passing.min(self.buf.len()) };
            self.passing -= n.min(self.passing);
            self.ready = n;
            return n > 0;
        }
        if self.buf.len() < 4 {
            return false;
        }
        let len = i32::from_le_bytes(self.buf[..4].try_into().expect("4 bytes"));
        let len = match usize::try_from(len) {
            Ok(l) if (16..=MAX_MESSAGE_SIZE).contains(&l) => l,
            _ => {
                // Not a message header: the analysis reports it; this side stays out of the way.
                self.unframed = true;
                return self.frame();
            }
        };
        if len > HOLD_MAX {
            self.passing = len;
            return self.frame();
        }
        if self.buf.len() < len {
            return false;
        }
        if let Some(renamed) = rename(&self.buf[..len], self.renamer.as_ref().expect("checked above")) {
            let rest = self.buf.split_off(len);
            let mut buf = BytesMut::with_capacity(renamed.len() + rest.len());
            buf.put_slice(&renamed);
            buf.put_slice(&rest);
            self.buf = buf;
            self.ready = renamed.len();
        } else {
            self.ready = len;
        }
        true
    }
}

/// The message with its member addresses renamed, if it is a hello reply that names any.
fn rename(msg: &[u8], r: &Renamer) -> Option<bytes::Bytes> {
    // Most replies are not hello replies: a quick look for their keys before
    // decoding (a compressed one is decoded only when it says it holds a small reply).
    let word =
        |at: usize| msg.get(at..at + 4).map_or(0, |b| i32::from_le_bytes(b.try_into().expect("4 bytes")));
    let has = |key: &[u8]| msg.windows(key.len()).any(|w| w == key);
    let worth = match word(12) {
        // OP_COMPRESSED: inflated inline only when it says it holds a small reply
        // (servers do not compress hello, so this is rare and bounded).
        2012 => matches!(word(16), 1 | 2013) && (0..=HOLD_MAX as i32).contains(&word(20)),
        1 | 2013 => has(b"\x08ismaster\x00") || has(b"\x08isWritablePrimary\x00"),
        _ => false,
    };
    if !worth {
        return None;
    }
    let frame = Frame::from_bytes(bytes::Bytes::copy_from_slice(msg)).ok()?;
    let mut names = |field: &str, name: &str| r.topology.rename(&r.via, field, name);
    match mongotap_wire::hello::rename_members(&frame, &mut names) {
        Ok(renamed) => renamed,
        Err(e) => {
            tracing::debug!("a reply that looked like hello could not be decoded ({e}); forwarded as it is");
            None
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Rewriting<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.renamer.is_none() {
            return Pin::new(&mut this.inner).poll_read(cx, dst);
        }
        loop {
            if this.ready > 0 {
                let n = this.ready.min(dst.remaining());
                dst.put_slice(&this.buf[..n]);
                this.buf.advance(n);
                this.ready -= n;
                if this.buf.is_empty() && this.buf.capacity() > 2 * CHUNK {
                    // A thousand idle connections must not keep a held message's room each.
                    this.buf = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if this.frame() {
                continue;
            }
            if this.eof {
                // A message cut short by the end of the stream goes on as it is.
                this.ready = this.buf.len();
                if this.ready == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let room = dst.remaining();
            if this.buf.is_empty() && room > 0 && (this.unframed || this.passing >= room) {
                // Bytes that pass as they are, read straight into the caller's buffer.
                let before = dst.filled().len();
                ready!(Pin::new(&mut this.inner).poll_read(cx, dst))?;
                let n = dst.filled().len() - before;
                this.eof = n == 0;
                if !this.unframed {
                    this.passing -= n;
                }
                return Poll::Ready(Ok(()));
            }
            // Room for the rest of the message being held (its header says how
            // much, so it is read in few calls), or a chunk.
            let held = match this.buf.get(..4) {
                Some(b) => usize::try_from(i32::from_le_bytes(b.try_into().expect("4 bytes"))).unwrap_or(0),
                None => 0,
            };
            let want = held.min(HOLD_MAX).saturating_sub(this.buf.len()).max(CHUNK);
            if this.buf.capacity() - this.buf.len() < want {
                this.buf.reserve(want);
            }
            let n = ready!(tokio_util::io::poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.buf))?;
            this.eof = n == 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::upstream::Upstream;
    use super::*;
    use bson::doc;
    use mongotap_wire::{Document, OpMsg};
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    fn renamer() -> Renamer {
        let seed = Arc::new(Member {
            upstream: Upstream::new("db1:27017".into(), Duration::from_secs(1), None),
            advertised: "127.0.0.1:27018".into(),
        });
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::mem::forget(rx);
        let listen = "127.0.0.1:0".parse().unwrap();
        let topology =
            Topology::new(seed.clone(), listen, "127.0.0.1".into(), Duration::from_secs(1), None, tx);
        Renamer { topology: Arc::new(topology), via: seed }
    }

    fn msg(d: bson::Document, id: i32) -> Vec<u8> {
        OpMsg::new(Document::from_doc(&d)).encode(id, 0).to_vec()
    }

    /// Reads everything from `stream` fed `chunk` bytes at a time.
    async fn through(stream: &[u8], chunk: usize) -> Vec<u8> {
        let (mut feed, inner) = tokio::io::duplex(chunk);
        let data = stream.to_vec();
        let writer = tokio::spawn(async move {
            for c in data.chunks(chunk) {
                tokio::io::AsyncWriteExt::write_all(&mut feed, c).await.unwrap();
            }
        });
        let mut out = Vec::new();
        Rewriting::new(inner, Some(renamer())).read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        out
    }

    #[tokio::test]
    async fn hello_replies_are_renamed_and_the_rest_passes_byte_for_byte() {
        let find = msg(doc! {"cursor": {"firstBatch": [], "id": 0_i64, "ns": "a.b"}, "ok": 1.0}, 1);
        let hello = msg(doc! {"ismaster": true, "hosts": ["db1:27017"], "me": "db1:27017", "ok": 1.0}, 2);
        let large = msg(doc! {"cursor": {"firstBatch": [{"x": "y".repeat(100_000)}]}, "ok": 1.0}, 3);
        let stream = [find.clone(), hello.clone(), large.clone(), find.clone()].concat();
        let renamed =
            msg(doc! {"ismaster": true, "hosts": ["127.0.0.1:27018"], "me": "127.0.0.1:27018", "ok": 1.0}, 2);
        let expected = [find.clone(), renamed, large, find].concat();
        for chunk in [1, 7, 4096, 1 << 20] {
            assert_eq!(through(&stream, chunk).await, expected, "fed {chunk} bytes at a time");
        }
    }

    #[tokio::test]
    async fn a_stream_that_is_not_messages_and_a_cut_message_pass_as_they_are() {
        let garbage = b"\xff\xff\xff\xffnot a message at all".to_vec();
        assert_eq!(through(&garbage, 5).await, garbage);
        let hello = msg(doc! {"ismaster": true, "hosts": ["db1:27017"]}, 2);
        let cut = hello[..hello.len() - 3].to_vec();
        assert_eq!(through(&cut, 4).await, cut);
    }
}
