//! Any byte stream through the splitter, every frame through the decoder and the
//! command views: nothing may panic, and what decodes must re-encode to a message
//! that decodes to the same thing.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mongotap_wire::{Command, CommandReply, Frame, Message, Split, Splitter};

fuzz_target!(|data: &[u8]| {
    let mut splitter = Splitter::new(1 << 20);
    let mut buf = BytesMut::new();
    // Feed in two uneven pieces, as a socket would.
    let cut = data.len() / 3;
    for piece in [&data[..cut], &data[cut..]] {
        buf.extend_from_slice(piece);
        while let Some(item) = splitter.next(&mut buf) {
            let Ok(Split::Frame(frame)) = item else { continue };
            let Ok(m) = Message::decode(&frame) else { continue };
            if let Some(c) = Command::from_message(&m) {
                let _ = (c.namespace(), c.lsid(), c.is_sensitive(), c.documents("documents").len());
            }
            if let Some(r) = CommandReply::from_message(&m) {
                let _ =
                    (r.ok(), r.error_code(), r.cursor_id(), r.n(), r.batch().map(|b| b.into_iter().count()));
            }
            let again = Message::decode(&Frame::from_bytes(m.encode()).expect("re-encoded frames are whole"))
                .expect("re-encoded messages decode");
            assert_eq!(again.op, m.op);
        }
    }
});
