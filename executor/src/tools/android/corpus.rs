//! Tests' access to the shared corpus of real device output (`../shared/android-real`
//! beside the checkout, or `NL2SH_ANDROID_REAL`), read in place (docs/TESTING.md).
//! Files saved as UTF-16LE with a byte-order mark, or with CRLF line ends, are decoded
//! to the text a phone's shell gives (outside tests only that decoding is built, for the
//! parse bench).

#[cfg(test)]
use std::path::PathBuf;

#[cfg(test)]
/// The corpus directory, or `None` (the caller skips) when it is absent.
pub fn root() -> Option<PathBuf> {
    let dir = match std::env::var_os("NL2SH_ANDROID_REAL") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/android-real"),
    };
    dir.join("MANIFEST.tsv").is_file().then_some(dir)
}

#[cfg(test)]
/// The corpus root, or a recorded skip.
pub fn root_or_skip() -> Option<PathBuf> {
    let root = root();
    if root.is_none() {
        nl2sh_proto::test_skip::skip(
            "the real-device corpus (../shared/android-real or NL2SH_ANDROID_REAL) is absent",
        );
    }
    root
}

/// A file's text as the shell printed it.
pub fn text(bytes: &[u8]) -> String {
    let text = match bytes {
        [0xff, 0xfe, rest @ ..] => {
            let units: Vec<u16> = rest
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        [0xef, 0xbb, 0xbf, rest @ ..] => String::from_utf8_lossy(rest).into_owned(),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    };
    text.replace("\r\n", "\n")
}

#[cfg(test)]
/// Every file directly in `dir` of the corpus, sorted by name, with its text.
pub fn files(root: &std::path::Path, dir: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(e.path()).unwrap_or_else(|err| panic!("{name}: {err}"));
            (format!("{dir}/{name}"), text(&bytes))
        })
        .collect();
    out.sort();
    out
}
