//! The JSON report (schema 1): pretty-printed, keys in contract order.

use super::Report;

/// The report as pretty JSON.
pub fn render(r: &Report) -> String {
    let mut out = Vec::new();
    write(r, &mut out).expect("a report always serialises");
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// [`render`], written to `w` as it goes rather than built whole first. (Generic, not
/// `dyn`: the serializer writes a few bytes at a time, each a call through `w`.)
pub fn write(r: &Report, mut w: impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut w, r)?;
    w.write_all(b"\n")
}

/// Reads a saved report back (for `mongotap report`).
pub fn parse(text: &str) -> Result<Report, serde_json::Error> {
    serde_json::from_str(text)
}
