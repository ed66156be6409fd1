//! Any message through the trace's redaction, as a request and as a reply: nothing
//! may panic, and a message it keeps has the same length as the message it read
//! (inflated) and, if that message decoded, still decodes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mongotap_events::Direction;
use mongotap_trace::{Redacted, Redactor};
use mongotap_wire::{Frame, Message, OpCode, OpCompressed};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::from_bytes(Bytes::copy_from_slice(data)) else { return };
    let plain = match frame.header.op_code {
        OpCode::Compressed => OpCompressed::decode(&frame.bytes).and_then(|c| c.decompress()).ok(),
        _ => Some(frame.bytes.clone()),
    };
    let decodes = Message::decode(&frame).is_ok();
    let mut r = Redactor::with_secret(b"fuzz");
    for dir in [Direction::ToServer, Direction::ToClient] {
        if let Redacted::Kept(out) = r.message(1, dir, &frame) {
            let out = Frame::from_bytes(Bytes::from(out)).expect("kept messages are whole frames");
            let Some(plain) = &plain else { continue };
            let reduced = out.bytes.len() != plain.len();
            // Only auth messages are rebuilt (shorter); everything else keeps its length.
            if !reduced && decodes {
                Message::decode(&out).expect("a redacted message decodes as its original did");
            }
        }
    }
    let mut raw = Redactor::auth_only();
    let _ = raw.message(1, Direction::ToServer, &frame);
});
