//! Arbitrary bytes as the records of a trace (behind a valid header, so the reader's
//! record decoding is what is fuzzed), and as a whole file: nothing may panic, and
//! reading stops at the first record that does not decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mongotap_trace::TraceReader;

fuzz_target!(|data: &[u8]| {
    let header = br#"{"format":"mongotap-trace","version":1,"mongotap":"0","started_at":0,"upstream":"u","redaction":"redacted","trace_id":"f","part":0}"#;
    let mut plain = b"MONGOTAP-TRACE\n".to_vec();
    plain.extend_from_slice(&(header.len() as u32).to_le_bytes());
    plain.extend_from_slice(header);
    plain.extend_from_slice(data);
    let z = zstd::bulk::compress(&plain, 1).expect("compresses");
    if let Ok(r) = TraceReader::new(Box::new(std::io::Cursor::new(z))) {
        for _ in r {}
    }
    if let Ok(r) = TraceReader::new(Box::new(std::io::Cursor::new(data.to_vec()))) {
        for _ in r {}
    }
});
