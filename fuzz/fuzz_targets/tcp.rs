//! Arbitrary segments for TCP reassembly: each few bytes pick a direction, a
//! sequence number near the last one (before, after, far away, wrapping), flags and
//! a payload cut from real messages or the input itself. Nothing may panic, and
//! every message it emits is a whole frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mongotap::offline::tcp::{Reassembler, Segment};
use mongotap_events::TapEvent;

fuzz_target!(|data: &[u8]| {
    let mut r = Reassembler::new(if data.first().is_some_and(|b| b & 1 == 0) { Some(27017) } else { None });
    let (c, s) = ("10.0.0.1:50000".parse().unwrap(), "10.0.0.2:27017".parse().unwrap());
    let mut seqs = [u32::MAX - 100, 1000u32];
    let mut emit = |ev: TapEvent| {
        if let TapEvent::Message { frame, .. } = ev {
            assert_eq!(frame.header.message_length as usize, frame.bytes.len());
        }
    };
    // The input as the capture's buffer: replies cut whole from a segment share it.
    let buf = bytes::Bytes::copy_from_slice(data);
    let mut rest = &buf[..];
    let mut at = 0;
    while rest.len() >= 4 {
        let (head, tail) = rest.split_at(4);
        let from_client = head[0] & 1 == 0;
        let side = usize::from(!from_client);
        let len = usize::from(head[1]) % 64;
        let payload = &tail[..len.min(tail.len())];
        rest = &tail[payload.len()..];
        let jump = i32::from(head[2] as i8) * i32::from(head[3] % 8 + 1);
        let seq = seqs[side].wrapping_add(jump as u32);
        let (src, dst) = if from_client { (c, s) } else { (s, c) };
        let seg = Segment {
            src,
            dst,
            seq,
            syn: head[0] & 2 != 0,
            ack: head[0] & 4 != 0,
            fin: head[0] & 8 != 0,
            rst: head[0] & 16 != 0,
            payload,
            shared: (head[0] & 32 != 0).then_some(&buf),
        };
        r.segment(at, seg, &mut emit);
        if jump >= 0 {
            seqs[side] = seq.wrapping_add(payload.len() as u32);
        }
        at += 1;
    }
    r.finish(&mut emit);
});
