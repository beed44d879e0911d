//! Risk assessment of prepared actions (DESIGN.md §6).
//!
//! Shell command lines are parsed the way `sh -c LINE` would parse them (quotes,
//! substitutions, redirections, here-documents, compound commands) and every command
//! that could run is classified — also those hidden in `$(…)`, `<(…)`, `sh -c`, `su -c`,
//! `eval`, `find -exec`, `xargs` and wrapper programs — because block lists that look at
//! the text are bypassed by quoting, substitution and absolute paths
//! (spec/MCP-NOTES.md). What the parser does not understand is at least `medium`, never
//! read-only. The line's level is the highest of everything in it.
//!
//! Layout: `lexer`/`parser`/`ast` turn text into a tree; `classify`/`invoke` walk it;
//! `wrappers`, `programs`, `rules`, `builtins` and `scripts` classify commands using the
//! data in `table`, `option_table`, `exec_table`, `wrap_table` and `path_table`; `paths`
//! resolves and matches paths.

mod args;
mod ast;
mod builtins;
mod classify;
mod exec_table;
mod invoke;
mod lexer;
mod option_table;
mod options;
mod parser;
mod path_table;
mod paths;
mod programs;
mod rules;
mod scripts;
mod table;
mod wrap_table;
mod wrappers;

#[cfg(test)]
mod tests;

use std::path::Path;

use nl2sh_proto::channels::RiskLevel;

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
    if line.len() > MAX_LINE {
        let mut a = Assessment::read_only();
        a.raise(RiskLevel::High, "command line too long to assess");
        return a;
    }
    classify::Walker::new().shell_text(line, 0, &classify::Stdin::Inherited)
}

/// Assess writing (create/overwrite/append/chmod) the file at `path` (absolute, already
/// normalised).
pub fn assess_path_write(path: &Path) -> Assessment {
    paths::assess_write(path)
}

/// Assess reading `path` (secrets such as /data/adb, /etc/shadow, ssh keys are not
/// read_only).
pub fn assess_path_read(path: &Path) -> Assessment {
    paths::assess_read(path)
}

/// nl2sh's own files (its configuration file, state directory, executable): any action
/// that touches them is at least `dangerous`, whatever else its assessment says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Normalised absolute paths.
    paths: Vec<String>,
}

impl Protected {
    /// Absolute paths, normalised lexically; relative or empty ones are skipped.
    pub fn new<I: IntoIterator<Item = std::path::PathBuf>>(paths: I) -> Self {
        let mut out: Vec<String> = paths
            .into_iter()
            .filter_map(|p| {
                let text = p.to_string_lossy().into_owned();
                text.starts_with('/').then(|| paths::normalize(&text))
            })
            .filter(|p| p != "/")
            .collect();
        out.sort();
        out.dedup();
        Protected { paths: out }
    }

    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// The protected path `path` (normalised, absolute) is, or lies beneath.
    fn covering(&self, path: &str) -> Option<&str> {
        self.paths
            .iter()
            .find(|p| path == p.as_str() || path.starts_with(&format!("{p}/")))
            .map(String::as_str)
    }

    fn raise(&self, a: &mut Assessment, path: &str) {
        if let Some(p) = self.covering(path) {
            a.raise(
                RiskLevel::Dangerous,
                format!("touches nl2sh's own configuration, state or executable ({p})"),
            );
        }
    }
}

/// [`assess_shell`], and at least `dangerous` when the line names a protected path.
pub fn assess_shell_protected(line: &str, protected: &Protected) -> Assessment {
    let mut a = assess_shell(line);
    for p in protected.paths() {
        if line.contains(p.as_str()) {
            protected.raise(&mut a, p);
        }
    }
    a
}

/// [`assess_path_write`], and at least `dangerous` for a protected path (or one beneath).
pub fn assess_path_write_protected(path: &Path, protected: &Protected) -> Assessment {
    let mut a = assess_path_write(path);
    protected.raise(&mut a, &paths::normalize(&path.to_string_lossy()));
    a
}

/// [`assess_path_read`], and at least `dangerous` for a protected path (or one beneath).
pub fn assess_path_read_protected(path: &Path, protected: &Protected) -> Assessment {
    let mut a = assess_path_read(path);
    protected.raise(&mut a, &paths::normalize(&path.to_string_lossy()));
    a
}
