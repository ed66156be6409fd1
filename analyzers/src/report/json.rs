//! The JSON report (schema 1): pretty-printed, keys in contract order.

use super::Report;

/// The report as pretty JSON.
pub fn render(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("a report always serialises");
    s.push('\n');
    s
}

/// Reads a saved report back (for `mongotap report`).
pub fn parse(text: &str) -> Result<Report, serde_json::Error> {
    serde_json::from_str(text)
}
