//! Risk assessment of prepared actions (docs/APPROVALS.md, "Risk levels").
//!
//! Shell command lines are parsed the way `sh -c LINE` would parse them (quotes,
//! substitutions, redirections, here-documents, compound commands) and every command
//! that could run is classified — also those hidden in `$(…)`, `<(…)`, `sh -c`, `su -c`,
//! `eval`, `find -exec`, `xargs` and wrapper programs — because block lists that look at
//! the text are bypassed by quoting, substitution and absolute paths
//! (docs/SECURITY.md, "The shell assessment"). What the parser does not understand is at least `medium`, never
//! read-only. The line's level is the highest of everything in it.
//!
//! Layout: `lexer`/`parser`/`ast` turn text into a tree; `classify`/`invoke` walk it and
//! `access` checks the files commands name; `wrappers`, `programs`, `rules`, `builtins`,
//! `ip` and `scripts` classify commands using the data in `table`, `option_table`,
//! `io_table`, `exec_table`, `wrap_table`, `find_table`, `ip_table` and `path_table`;
//! `options` reads command lines with the option grammars of `spec` (`spec_text`,
//! `spec_sys`, `spec_modes`, `spec_android`); `taint` notices what makes later commands
//! unknowable (aliases, functions, `PATH`); `paths` resolves and matches paths and
//! `protect` guards nl2sh's own files. The same walk collects the commands a line runs
//! (`commands`), which scoped grants match.

mod access;
mod args;
mod ast;
mod builtins;
mod classify;
mod commands;
mod exec_table;
mod find_table;
mod invoke;
mod io_table;
mod ip;
mod ip_table;
mod lexer;
mod option_table;
mod options;
mod parser;
mod path_table;
mod paths;
mod programs;
mod protect;
mod rules;
mod scripts;
mod spec;
mod spec_android;
mod spec_modes;
mod spec_sys;
mod spec_text;
mod table;
mod taint;
mod wrap_table;
mod wrappers;

#[cfg(test)]
mod tests;

use std::path::Path;

use nl2sh_proto::channels::{ParsedCommand, RiskLevel};

pub use protect::{
    Protected, OWN_CONFIGURATION, OWN_EXECUTABLE, OWN_FILES, OWN_MODULE, OWN_SERVICE, OWN_STATE,
};

/// Nesting (substitutions, subshells, `sh -c` strings, wrappers) beyond this is not
/// followed; the line is `critical` instead.
pub const MAX_DEPTH: usize = 16;
/// Longer command lines are not parsed; they are `high`.
pub const MAX_LINE: usize = 64 * 1024;
/// Reasons kept per assessment; more would not help whoever approves.
const MAX_REASONS: usize = 32;

const TOO_DEEP: &str = "too deeply nested to assess";

/// The risk of one action and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Assessment {
    pub level: RiskLevel,
    pub requires_root: bool,
    /// Short statements naming the command, each prefixed with its level.
    pub reasons: Vec<String>,
}

impl Assessment {
    pub fn read_only() -> Self {
        Assessment {
            level: RiskLevel::ReadOnly,
            requires_root: false,
            reasons: Vec::new(),
        }
    }

    /// Raise the level to at least `level`. Reasons for read-only findings are dropped:
    /// they do not explain anything an approver has to decide.
    pub fn raise(&mut self, level: RiskLevel, reason: impl Into<String>) {
        self.level = self.level.max(level);
        if level > RiskLevel::ReadOnly {
            self.note(format!("{}: {}", level.as_str(), reason.into()));
        }
    }

    /// Mark the action as needing root.
    pub fn require_root(&mut self, reason: impl Into<String>) {
        self.requires_root = true;
        self.note(format!("root: {}", reason.into()));
    }

    /// Add a reason without changing the level (shown to whoever approves).
    pub fn note_reason(&mut self, reason: impl Into<String>) {
        self.note(reason.into());
    }

    pub fn merge(&mut self, other: Assessment) {
        self.level = self.level.max(other.level);
        self.requires_root |= other.requires_root;
        for reason in other.reasons {
            self.note(reason);
        }
    }

    fn note(&mut self, reason: String) {
        if self.reasons.contains(&reason) || self.reasons.len() > MAX_REASONS {
            return;
        }
        if self.reasons.len() == MAX_REASONS {
            self.reasons.push("further reasons omitted".into());
            return;
        }
        self.reasons.push(reason);
    }
}

/// Assess a shell command line exactly as `sh -c LINE` would run it.
pub fn assess_shell(line: &str) -> Assessment {
    assess_shell_protected(line, &Protected::default())
}

/// Assess a shell command line; touching nl2sh's own files makes it at least `dangerous`.
pub fn assess_shell_protected(line: &str, protected: &Protected) -> Assessment {
    assess_shell_in(line, None, protected)
}

/// Assess a shell command line that starts in `cwd` (absolute) when it is known, so its
/// relative paths are judged where they point.
pub fn assess_shell_in(line: &str, cwd: Option<&Path>, protected: &Protected) -> Assessment {
    assess_shell_commands(line, cwd, protected).0
}

/// Assess a shell command line (as [`assess_shell_in`]) and take it apart into the
/// commands it runs, each with its own assessment, for scoped grants to match
/// (`ActionSummary.commands`; see `commands.rs` for what a grant may match). `None` when
/// the line cannot be taken apart fully, and when it starts in a `cwd` of the caller's
/// choosing: a relative path, or a relative `PATH` entry, would then name another file
/// than the grant does.
pub fn assess_shell_commands(
    line: &str,
    cwd: Option<&Path>,
    protected: &Protected,
) -> (Assessment, Option<Vec<ParsedCommand>>) {
    if line.len() > MAX_LINE {
        let mut a = Assessment::read_only();
        a.raise(RiskLevel::High, "command line too long to assess");
        return (a, None);
    }
    let mut walker = classify::Walker::new(protected);
    if let Some(dir) = cwd
        .map(|d| d.to_string_lossy())
        .filter(|d| d.starts_with('/'))
    {
        walker.cwd = paths::Cwd::Known(paths::normalize(&dir));
    }
    let a = walker.line(line);
    let commands = std::mem::take(&mut walker.commands).finish(&a);
    (a, commands.filter(|_| cwd.is_none()))
}

/// Assess writing (create/overwrite/append/chmod) the file at `path` (absolute, already
/// normalised).
pub fn assess_path_write(path: &Path) -> Assessment {
    assess_path_write_protected(path, &Protected::default())
}

/// Assess writing `path`; nl2sh's own files, and directories above them, are at least
/// `dangerous`.
pub fn assess_path_write_protected(path: &Path, protected: &Protected) -> Assessment {
    paths::assess_write(path, protected)
}

/// Assess reading `path` (secrets such as /data/adb, /etc/shadow, ssh keys are not
/// read_only).
pub fn assess_path_read(path: &Path) -> Assessment {
    assess_path_read_protected(path, &Protected::default())
}

/// Assess reading `path`; nl2sh's own files are at least `dangerous`.
pub fn assess_path_read_protected(path: &Path, protected: &Protected) -> Assessment {
    paths::assess_read(path, protected)
}
