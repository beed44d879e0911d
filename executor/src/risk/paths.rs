//! Paths: resolving what a command names against what is known of its working
//! directory, lexical normalisation, and matching against the tables in `path_table.rs`.

use std::path::Path;

use nl2sh_proto::channels::RiskLevel;

use super::lexer::shorten;
use super::path_table::{CRITICAL_TREES, READ_PATHS, WRITE_PATHS};
use super::Assessment;

/// What is known of the shell's working directory at a point of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cwd {
    /// Wherever the executor starts the shell: relative paths are ordinary files there.
    Start,
    /// After `cd /fixed/path`.
    Known(String),
    /// After `cd` to somewhere computed, `~` or `-`.
    Unknown,
}

/// Where a path written in a command points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolved {
    /// A normalised absolute path (`~` becomes `/~`).
    Absolute(String),
    /// Relative to the starting directory.
    Relative,
    /// Somewhere that cannot be told (relative to an unknown directory, or climbing out of
    /// the starting one with `..`).
    Unknown,
}

pub(super) fn resolve(text: &str, cwd: &Cwd) -> Resolved {
    if text.starts_with('/') {
        return Resolved::Absolute(normalize(text));
    }
    if let Some(rest) = text.strip_prefix('~') {
        return Resolved::Absolute(normalize(&format!("/~{rest}")));
    }
    match cwd {
        Cwd::Known(dir) => Resolved::Absolute(normalize(&format!("{dir}/{text}"))),
        Cwd::Start if !text.split('/').any(|c| c == "..") => Resolved::Relative,
        _ => Resolved::Unknown,
    }
}

/// `/a/./b//c/../d` → `/a/b/d`, without looking at the filesystem.
pub(super) fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

fn components(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

/// Shell pattern match of one path component: `*` any run of characters, `?` one.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || Some(c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..).unwrap_or_default().iter().all(|c| *c == '*')
}

/// A table component against a component from a command, which may itself be a
/// pattern (`/s*` may mean `/system`).
fn component_matches(table: &str, text: &str) -> bool {
    glob(table, text) || (text.contains(['*', '?']) && glob(text, table))
}

/// How specifically `pattern` matches the path (components, literal characters).
fn score(pattern: &str, path: &[&str]) -> Option<(usize, usize)> {
    let (anywhere, rest) = match pattern.strip_prefix("**") {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let pat = components(rest);
    let last_start = path.len().checked_sub(pat.len())?;
    let starts = if anywhere { 0..=last_start } else { 0..=0 };
    let literal = pat
        .iter()
        .flat_map(|c| c.chars())
        .filter(|c| !matches!(c, '*' | '?'))
        .count();
    starts
        .into_iter()
        .any(|s| {
            pat.iter()
                .zip(path.iter().skip(s))
                .all(|(p, t)| component_matches(p, t))
        })
        .then_some((pat.len(), literal))
}

/// The row of `table` that decides for `path` (normalised, absolute): the most specific
/// anchored pattern and the most specific `**/` pattern each give a level, and the higher
/// one decides (a `config.toml` is sensitive wherever it is).
pub(super) fn lookup(
    table: &'static [(&'static str, RiskLevel, &'static str)],
    path: &str,
) -> Option<(RiskLevel, &'static str)> {
    let comps = components(path);
    let best = |anywhere: bool| {
        let mut best: Option<((usize, usize), RiskLevel, &'static str)> = None;
        for (pattern, level, why) in table
            .iter()
            .filter(|(p, ..)| p.starts_with("**") == anywhere)
        {
            let Some(s) = score(pattern, &comps) else {
                continue;
            };
            if best.is_none_or(|(bs, bl, _)| s > bs || (s == bs && *level > bl)) {
                best = Some((s, *level, why));
            }
        }
        best.map(|(_, level, why)| (level, why))
    };
    match (best(false), best(true)) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The critical tree that deleting `path` recursively would destroy: the path itself,
/// or everything in it (`/data/*`).
pub(super) fn critical_tree(path: &str) -> Option<&'static str> {
    let mut comps = components(path);
    while comps.last() == Some(&"*") {
        comps.pop();
    }
    CRITICAL_TREES.iter().copied().find(|tree| {
        let t = components(tree);
        t.len() == comps.len() && t.iter().zip(&comps).all(|(p, c)| component_matches(p, c))
    })
}

pub(super) fn write_level(path: &str) -> (RiskLevel, String) {
    match lookup(WRITE_PATHS, path) {
        Some((level, why)) => (level, format!("writes {}: {why}", shorten(path))),
        None => (RiskLevel::Low, format!("writes {}", shorten(path))),
    }
}

pub(super) fn read_level(path: &str) -> Option<(RiskLevel, String)> {
    lookup(READ_PATHS, path)
        .filter(|(level, _)| *level > RiskLevel::ReadOnly)
        .map(|(level, why)| {
            (
                level,
                format!("reads {}: secret material ({why})", shorten(path)),
            )
        })
}

/// A path given to a file tool must be absolute; anything else is not understood.
fn absolute(path: &Path, a: &mut Assessment) -> Option<String> {
    let text = path.to_string_lossy();
    if !text.starts_with('/') {
        a.raise(
            RiskLevel::Medium,
            format!("path {} is not absolute", shorten(&text)),
        );
        return None;
    }
    Some(normalize(&text))
}

pub(super) fn assess_write(path: &Path) -> Assessment {
    let mut a = Assessment::read_only();
    if let Some(p) = absolute(path, &mut a) {
        let (level, why) = write_level(&p);
        a.raise(level, why);
    }
    a
}

pub(super) fn assess_read(path: &Path) -> Assessment {
    let mut a = Assessment::read_only();
    if let Some((level, why)) = absolute(path, &mut a).as_deref().and_then(read_level) {
        a.raise(level, why);
    }
    a
}
