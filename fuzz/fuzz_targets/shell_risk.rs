//! The shell risk assessment fed arbitrary command lines (and working directories): it
//! must never panic, loop or explode, and a line whose quoting or nesting is unbalanced
//! is never read-only (what is not understood asks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nl2sh_executor::risk::{assess_shell_in, Protected};
use nl2sh_proto::channels::RiskLevel;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (cwd, line) = match text.split_once('\u{0}') {
        Some((cwd, line)) if cwd.starts_with('/') => (Some(std::path::Path::new(cwd)), line),
        _ => (None, text),
    };
    let protected = Protected::new([std::path::PathBuf::from("/tmp/nlx/config.toml")]);
    let a = assess_shell_in(line, cwd, &protected);
    // An odd number of single quotes, where nothing else could account for one (double
    // quotes, escapes, comments, here-documents), is an unterminated string to sh.
    let unbalanced = line.matches('\'').count() % 2 == 1 && !line.contains(['"', '\\', '#', '<']);
    if unbalanced {
        assert!(
            a.level > RiskLevel::ReadOnly,
            "unbalanced line read-only: {line:?}"
        );
    }
});
