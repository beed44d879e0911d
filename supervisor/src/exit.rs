//! The command line's exit codes: one table for every command, each number with one
//! meaning, so a script can act on a code without knowing which command gave it
//! (docs/CLI.md, "Exit codes").

use std::process::ExitCode;

/// Why a command ended. 0 is success; clap itself exits 2 for a usage error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// The command failed or was refused (the message says why).
    Failure = 1,
    /// The command line is wrong.
    Usage = 2,
    /// Nothing is running for this configuration (`service status`; the approvals
    /// commands, which need a running service).
    NotRunning = 3,
    /// `approve`/`reject`: there is no pending request with that id.
    NoSuchRequest = 4,
    /// `approve`/`reject`: the request expired.
    Expired = 5,
    /// `approve`: the request needs its phrase, or the phrase given was wrong.
    Phrase = 6,
    /// `approve` needs an interactive terminal on stdin.
    NoTerminal = 7,
    /// `audit --verify` found a broken chain.
    Tampered = 8,
    /// approvald closed the connection unanswered: this process is not the service's
    /// uid, or it was started (directly or not) by nl2sh itself, e.g. a tool command.
    Refused = 9,
    /// `service status`: not running, and a record of a process that died is left.
    Stale = 10,
    /// `service status`: cannot tell (starting, stopping, the state directory used by
    /// another configuration, or discovery unreadable).
    Unknown = 11,
    /// `service start`/`restart`: the configuration does not enable the managed service
    /// (or the file is missing).
    NotConfigured = 12,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code, in order. A new variant fails to compile in [`every_variant_listed`]
    /// until it is added here (and so to the WebUI's table, below).
    const TABLE: [(Exit, u8); 13] = [
        (Exit::Success, 0),
        (Exit::Failure, 1),
        (Exit::Usage, 2),
        (Exit::NotRunning, 3),
        (Exit::NoSuchRequest, 4),
        (Exit::Expired, 5),
        (Exit::Phrase, 6),
        (Exit::NoTerminal, 7),
        (Exit::Tampered, 8),
        (Exit::Refused, 9),
        (Exit::Stale, 10),
        (Exit::Unknown, 11),
        (Exit::NotConfigured, 12),
    ];

    #[allow(dead_code)]
    fn every_variant_listed(exit: Exit) {
        match exit {
            Exit::Success
            | Exit::Failure
            | Exit::Usage
            | Exit::NotRunning
            | Exit::NoSuchRequest
            | Exit::Expired
            | Exit::Phrase
            | Exit::NoTerminal
            | Exit::Tampered
            | Exit::Refused
            | Exit::Stale
            | Exit::Unknown
            | Exit::NotConfigured => {}
        }
    }

    /// The numbers are a public contract (scripts test them): a change here is a change
    /// of docs/CLI.md and of every script that relies on it.
    #[test]
    fn the_documented_numbers() {
        for (exit, code) in TABLE {
            assert_eq!(exit.code(), code, "{exit:?}");
        }
    }

    /// The module WebUI (packaging/magisk/webroot/app.js) runs the CLI and reads its exit
    /// status. Its `EXIT` object must be this table, whole and under these names, and it
    /// must compare a status with no bare number: one table, here, that the page mirrors.
    #[test]
    fn the_webui_reads_statuses_by_this_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../packaging/magisk/webroot/app.js");
        let js = std::fs::read_to_string(&path).unwrap();
        assert_eq!(webui_table(&js), rust_table());
        assert_eq!(bare_status_comparisons(&js), Vec::<String>::new());
    }

    /// The checks above fail on what they are meant to catch.
    #[test]
    fn the_webui_check_catches_drift() {
        let table = |body: &str| format!("  var EXIT = {{\n{body}\n  }};\n");
        let whole: Vec<String> = rust_table()
            .iter()
            .map(|(name, code)| format!("    {name}: {code}"))
            .collect();
        assert_eq!(webui_table(&table(&whole.join(",\n"))), rust_table());
        let renumbered = whole.join(",\n").replace("Stale: 10", "Stale: 13");
        assert_ne!(webui_table(&table(&renumbered)), rust_table());
        let short = whole[..12].join(",\n");
        assert_ne!(webui_table(&table(&short)), rust_table());
        for bare in [
            "if (r.errno === 3) {",
            "x = a.errno !== 0 ? 1 : 2;",
            "if (4 === r.errno) {",
            "if (r.errno == 11)",
        ] {
            assert_eq!(bare_status_comparisons(bare), vec![bare.to_string()]);
        }
        assert!(bare_status_comparisons("if (r.errno === EXIT.Stale) {").is_empty());
    }

    fn rust_table() -> Vec<(String, u8)> {
        TABLE
            .iter()
            .map(|(exit, _)| (format!("{exit:?}"), exit.code()))
            .collect()
    }

    /// `name: number` pairs of app.js's `var EXIT = { ... };`, in order.
    fn webui_table(js: &str) -> Vec<(String, u8)> {
        const OPEN: &str = "var EXIT = {";
        let start = js.find(OPEN).expect("app.js defines `var EXIT = {`") + OPEN.len();
        let body = &js[start..];
        let body = &body[..body.find("};").expect("`var EXIT` ends with `};`")];
        body.split(',')
            .map(|pair| {
                let (name, code) = pair.split_once(':').expect("`name: number`");
                let code = code.trim().parse().expect("a number");
                (name.trim().to_string(), code)
            })
            .collect()
    }

    /// Lines that compare an exit status (`errno`) with a number written out.
    fn bare_status_comparisons(js: &str) -> Vec<String> {
        let is_number = |word: &str| {
            word.trim_start_matches('(')
                .starts_with(|c: char| c.is_ascii_digit())
        };
        js.lines()
            .filter(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words.windows(3).any(|w| {
                    matches!(w[1], "===" | "!==" | "==" | "!=")
                        && ((w[0].contains("errno") && is_number(w[2]))
                            || (w[2].contains("errno") && is_number(w[0])))
                })
            })
            .map(str::to_string)
            .collect()
    }
}
