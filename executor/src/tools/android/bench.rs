//! The Android parsers, reached from outside the crate for the `android_parse` bench
//! (tests/benches/android_parse.rs, docs/BENCHMARKS.md); no tool's interface.

use serde_json::Value;

/// `android.screen_dump`'s parse of a window dump: the nodes worth showing, or why the
/// dump is malformed.
pub fn screen_dump(xml: &[u8]) -> Result<usize, String> {
    super::uixml::parse(xml).map(|d| d.total)
}

/// What `android.device_state` reports when `text` is each of its three dumps (window,
/// power, battery): every parser of the device's state runs over the whole text.
pub fn device_state(text: &str) -> Value {
    let text = Ok(text.to_string());
    super::state::state_json(&text, &text, &text, None)
}

/// A corpus file's text as a phone's shell prints it (UTF-16LE or a BOM decoded, CRLF as
/// LF).
pub fn corpus_text(bytes: &[u8]) -> String {
    super::corpus::text(bytes)
}
