//! Reading back what one `service start` wrote to the service log: all of it (to find the
//! startup block) or its last lines (shown when the start fails), never a token.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use nl2sh_proto::display::Shown;

/// Lines of the log shown when a start fails.
const LOG_TAIL_LINES: usize = 20;
/// Bytes of the log read for those lines.
const LOG_TAIL_BYTES: u64 = 16 * 1024;
/// How much of this start's log is searched for its startup block.
const START_LOG_BYTES: u64 = 256 * 1024;

/// What the log holds from `offset` on (from its start if it was rotated meanwhile),
/// up to [`START_LOG_BYTES`].
pub fn log_since(log: &Path, offset: u64) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut file) = File::open(log) {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let from = if len < offset { 0 } else { offset };
        if file.seek(SeekFrom::Start(from)).is_ok() {
            let _ = file.take(START_LOG_BYTES).read_to_end(&mut bytes);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The last lines this start wrote to the log. Lines that can carry a generated token
/// are left out: `start` never prints the token. The log holds what the service and
/// anything it ran wrote, so each line is shown through the one escaping function (its
/// bytes as they are, invalid UTF-8 as `\xNN`).
pub fn log_tail(log: &Path, offset: u64) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut file) = File::open(log) {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        // Shorter than where this start began: the service rotated it meanwhile.
        let offset = if len < offset { 0 } else { offset };
        let from = offset.max(len.saturating_sub(LOG_TAIL_BYTES));
        if file.seek(SeekFrom::Start(from)).is_ok() {
            let _ = file.take(LOG_TAIL_BYTES).read_to_end(&mut bytes);
        }
    }
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // The text after the last newline, if any, is a line; the empty rest after it is not.
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let keep = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    let mut out = String::new();
    for l in keep {
        if may_hold_token(&String::from_utf8_lossy(l)) {
            out.push_str("  [a line that may hold the token is not shown; see the log]\n");
        } else {
            out.push_str(&format!("  {}\n", Shown::lossy(l)));
        }
    }
    if out.is_empty() {
        out.push_str("  (nothing)\n");
    }
    out
}

fn may_hold_token(line: &str) -> bool {
    line.contains("Token:")
        || line.contains("NL2SH_PROTOCOL_TOKEN=")
        || line.contains("Bearer ")
        || line
            .split(|c: char| !c.is_ascii_hexdigit())
            .any(|word| word.len() >= 32)
}

#[cfg(test)]
mod tests {
    use std::fs::{self, OpenOptions};
    use std::io::Write;

    use super::*;

    #[test]
    fn token_lines_are_left_out_of_the_tail() {
        let token = "0123456789abcdef".repeat(4);
        assert!(may_hold_token(&format!("Token:      {token} (generated)")));
        assert!(may_hold_token(&format!(
            "export NL2SH_PROTOCOL_TOKEN='{token}'"
        )));
        assert!(may_hold_token(&format!("something {token} else")));
        assert!(!may_hold_token(
            "2026-01-01T00:00:00Z ERROR nl2sh-supervisor[12]: cannot listen"
        ));

        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("service.log");
        fs::write(&log, format!("old run\nToken: {token}\n")).unwrap();
        let offset = fs::metadata(&log).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        writeln!(
            f,
            "starting\nexport NL2SH_PROTOCOL_TOKEN='{token}'\nnl2sh: it failed"
        )
        .unwrap();
        let tail = log_tail(&log, offset);
        assert!(!tail.contains(&token), "{tail}");
        assert!(!tail.contains("old run"), "{tail}");
        assert!(tail.contains("nl2sh: it failed"), "{tail}");
        assert!(tail.contains("starting"), "{tail}");
        assert_eq!(log_tail(&tmp.path().join("none"), 0), "  (nothing)\n");

        // Whatever a line holds is shown escaped, on its own line.
        let offset = fs::metadata(&log).unwrap().len();
        f.write_all(b"bad \x1b[2J\rname \xff\xfe\r\nlast").unwrap();
        assert_eq!(
            log_tail(&log, offset),
            "  bad \\x1b[2J\\rname \\xff\\xfe\\r\n  last\n"
        );
    }
}
