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

    /// The numbers are a public contract (scripts test them): a change here is a change
    /// of docs/CLI.md and of every script that relies on it.
    #[test]
    fn the_documented_numbers() {
        let table = [
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
        for (exit, code) in table {
            assert_eq!(exit.code(), code, "{exit:?}");
        }
    }
}
