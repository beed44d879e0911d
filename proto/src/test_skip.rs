//! How a test that cannot run on this machine says so.
//!
//! A test that returns early because the machine lacks something it needs (root, a program,
//! a kernel feature) calls [`skip`] before returning. The reason goes to stderr, which
//! `cargo test` shows only for failures, and, when `NL2SH_TEST_SKIPS` names a file, one line
//! is appended there: `scripts/test` counts and lists those lines in its summary, so a
//! skipped test never passes unseen (docs/TESTING.md).

use std::io::Write;

/// The variable naming the file skips are recorded in.
pub const SKIPS_FILE_VAR: &str = "NL2SH_TEST_SKIPS";

/// Record that the running test is skipped, and why. The test then returns.
pub fn skip(reason: impl std::fmt::Display) {
    record(
        std::env::var_os(SKIPS_FILE_VAR).map(std::path::PathBuf::from),
        reason,
    );
}

fn record(file: Option<std::path::PathBuf>, reason: impl std::fmt::Display) {
    let line = format!("{}: {reason}", running_test());
    eprintln!("skipped: {line}");
    let Some(path) = file else {
        return;
    };
    // One write of one line to a file opened for append: lines from tests running at once,
    // in this process or another test binary, do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        eprintln!("could not record the skip in {}: {e}", path.display());
    }
}

/// `binary::test_name`: the test binary without cargo's hash, and the name libtest gives
/// the thread a test runs on (a `#[tokio::test]` body runs on that thread too).
fn running_test() -> String {
    let binary = std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let binary = match binary.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => binary,
    };
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    format!("{binary}::{test}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_with_the_test_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skips");
        record(Some(file.clone()), "no widget here");
        record(Some(file.clone()), format_args!("needs {}", "root"));
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with(
                "::test_skip::tests::a_skip_is_recorded_with_the_test_it_came_from: no widget here"
            ),
            "{text}"
        );
        assert!(lines[0].starts_with("nl2sh_proto::"), "{text}");
        assert!(lines[1].ends_with(": needs root"), "{text}");
    }
}
