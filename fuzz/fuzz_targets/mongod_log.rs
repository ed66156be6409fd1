//! Arbitrary lines as mongod's JSON log, and arbitrary values inside an otherwise
//! well-formed slow-query entry: the reader and its Extended JSON conversion, then
//! the pipeline. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mongotap::offline::mongod_log::LogReader;
use mongotap_analyzers::pipeline::Pipeline;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut reader = LogReader::new();
    let mut p = Pipeline::default();
    let mut events = Vec::new();
    for line in text.lines() {
        let _ = reader.read_line(line, &mut events);
        let wrapped = format!(
            r#"{{"t":{{"$date":"2024-05-02T10:00:00.105+00:00"}},"s":"I","c":"COMMAND","id":51803,"ctx":"conn7","msg":"Slow query","attr":{{"type":"command","ns":"shop.orders","appName":"a","command":{line},"planSummary":"COLLSCAN","nreturned":3,"durationMillis":5}}}}"#
        );
        let _ = reader.read_line(&wrapped, &mut events);
        events.drain(..).for_each(|ev| p.feed(ev));
    }
});
