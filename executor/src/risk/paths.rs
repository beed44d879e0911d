//! Paths: resolving what a command names against what is known of its working
//! directory, lexical normalisation, and matching against the tables in `path_table.rs`.

use std::path::Path;

use nl2sh_proto::channels::RiskLevel;

use super::lexer::shorten;
use super::path_table::{CRITICAL_TREES, READ_PATHS, WRITE_PATHS};
use super::protect::Protected;
use super::Assessment;

/// What is known of the shell's working directory at a point of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cwd {
    /// Wherever the executor starts the shell: relative paths are ordinary files there.
    Start,
    /// After `cd /fixed/path`.
    Known(String),
    /// After `cd sub/dir` from the starting directory: that directory below it.
    Below(String),
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
        Cwd::Start | Cwd::Below(_) if !text.split('/').any(|c| c == "..") => Resolved::Relative,
        _ => Resolved::Unknown,
    }
}

/// The absolute path `text` names as the kernel walks it (`..` after a link is the link's
/// parent, not the component written before it): empty and `.` components dropped, `..`
/// kept. `None` unless the text climbs with `..` and its directory is known; only then
/// can it differ from [`resolve`].
pub(super) fn join_climbing(text: &str, cwd: &Cwd) -> Option<String> {
    if !text.split('/').any(|c| c == "..") {
        return None;
    }
    let joined = if text.starts_with('/') {
        text.to_string()
    } else if let Cwd::Known(dir) = cwd {
        format!("{dir}/{text}")
    } else {
        return None;
    };
    let comps: Vec<&str> = joined
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    Some(format!("/{}", comps.join("/")))
}

/// A relative path as seen from the starting directory (`Relative` paths only).
pub(super) fn below_start(text: &str, cwd: &Cwd) -> Option<String> {
    let joined = match cwd {
        Cwd::Start => text.to_string(),
        Cwd::Below(dir) => format!("{dir}/{text}"),
        Cwd::Known(_) | Cwd::Unknown => return None,
    };
    let comps = components(&joined);
    if comps.is_empty() {
        return Some(".".into());
    }
    (!comps.contains(&"..")).then(|| comps.join("/"))
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
#[cfg(test)]
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
/// pattern (`/s*` may mean `/system`, `shado[w]` may mean `shadow`).
fn component_matches(table: &str, text: &str) -> bool {
    patterns_meet(table, text)
}

/// One element of a shell pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Char(char),
    /// `?`
    Any,
    /// `*`
    Star,
    /// `[…]`: ranges (a single character is a range of one), negated with `!` or `^`.
    Class(bool, Vec<(char, char)>),
}

fn tokens(pattern: &str) -> Vec<Tok> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = chars.get(i).copied() {
        i += 1;
        match c {
            '*' => out.push(Tok::Star),
            '?' => out.push(Tok::Any),
            '\\' => {
                out.push(Tok::Char(chars.get(i).copied().unwrap_or('\\')));
                i += 1;
            }
            '[' => match class(&chars, i) {
                Some((tok, next)) => {
                    out.push(tok);
                    i = next;
                }
                None => out.push(Tok::Char('[')),
            },
            c => out.push(Tok::Char(c)),
        }
    }
    out
}

/// A bracket expression starting after `[`: the class and the index after `]`.
fn class(chars: &[char], mut i: usize) -> Option<(Tok, usize)> {
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && !first {
            return Some((Tok::Class(negated, items), i + 1));
        }
        first = false;
        if c == '[' && chars.get(i + 1) == Some(&':') {
            // A named class (`[:alpha:]`): treated as any character.
            let end = (i + 2..chars.len()).find(|&j| chars.get(j) == Some(&']'))?;
            items.push(('\0', char::MAX));
            i = end + 1;
            continue;
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|e| *e != ']') {
            let end = *chars.get(i + 2)?;
            items.push((c, end));
            i += 3;
        } else {
            items.push((c, c));
            i += 1;
        }
    }
}

/// Whether two single-character pattern elements can match the same character.
fn meet(a: &Tok, b: &Tok) -> bool {
    match (a, b) {
        (Tok::Char(x), Tok::Char(y)) => x == y,
        (Tok::Char(x), Tok::Class(neg, items)) | (Tok::Class(neg, items), Tok::Char(x)) => {
            items.iter().any(|(lo, hi)| lo <= x && x <= hi) != *neg
        }
        (Tok::Class(false, xs), Tok::Class(false, ys)) => xs
            .iter()
            .any(|(a_lo, a_hi)| ys.iter().any(|(b_lo, b_hi)| a_lo <= b_hi && b_lo <= a_hi)),
        _ => true,
    }
}

/// Whether some string matches both shell patterns (`*`, `?`, `[…]`); literal text is a
/// pattern that only matches itself. Unreasonably large inputs are assumed to meet.
pub(super) fn patterns_meet(a: &str, b: &str) -> bool {
    const MAX_STATES: usize = 1 << 20;
    let special = |t: &str| t.contains(['*', '?', '[', '\\']);
    if a == b || !(special(a) || special(b)) {
        return a == b;
    }
    let (a, b) = (tokens(a), tokens(b));
    let width = b.len() + 1;
    if (a.len() + 1).saturating_mul(width) > MAX_STATES {
        return true;
    }
    let mut seen = vec![false; (a.len() + 1) * width];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        let Some(slot) = seen.get_mut(i * width + j) else {
            continue;
        };
        if *slot {
            continue;
        }
        *slot = true;
        if i == a.len() && j == b.len() {
            return true;
        }
        let (x, y) = (a.get(i), b.get(j));
        if x == Some(&Tok::Star) {
            stack.push((i + 1, j));
        }
        if y == Some(&Tok::Star) {
            stack.push((i, j + 1));
        }
        match (x, y) {
            (Some(Tok::Star), Some(Tok::Star)) | (None, _) | (_, None) => {}
            (Some(Tok::Star), Some(_)) => stack.push((i, j + 1)),
            (Some(_), Some(Tok::Star)) => stack.push((i + 1, j)),
            (Some(x), Some(y)) => {
                if meet(x, y) {
                    stack.push((i + 1, j + 1));
                }
            }
        }
    }
    false
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
/// one decides (a `config.toml` is sensitive wherever it is). When the path is itself a
/// pattern (`id_*`), the worst row it may match decides.
pub(super) fn lookup(
    table: &'static [(&'static str, RiskLevel, &'static str)],
    path: &str,
) -> Option<(RiskLevel, &'static str)> {
    let comps = components(path);
    if path.contains(['*', '?', '[']) {
        // A pattern may match any of the rows it meets: the worst one decides.
        return table
            .iter()
            .filter(|(pattern, ..)| score(pattern, &comps).is_some())
            .max_by_key(|(_, level, _)| *level)
            .map(|(_, level, why)| (*level, *why));
    }
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

/// What reading a path relative to an unknown starting directory may mean: the worst
/// secret it can be, with the starting directory anywhere above it (`shadow` in `/etc`).
pub(super) fn read_level_relative(rel: &str) -> Option<(RiskLevel, String)> {
    let rel_comps = components(rel);
    let mut worst: Option<(RiskLevel, String)> = None;
    for (pattern, level, _) in READ_PATHS.iter() {
        if *level == RiskLevel::ReadOnly {
            continue;
        }
        let (anywhere, rest) = match pattern.strip_prefix("**") {
            Some(rest) => (true, rest),
            None => (false, *pattern),
        };
        let pat = components(rest);
        for k in 0..pat.len() {
            let tail = pat.get(k..).unwrap_or_default();
            if rel_comps.len() < tail.len()
                || !tail
                    .iter()
                    .zip(&rel_comps)
                    .all(|(p, t)| component_matches(p, t))
            {
                continue;
            }
            let dir = pat.get(..k).unwrap_or_default().join("/");
            let prefix = if anywhere { "/x/" } else { "/" };
            let full = normalize(&format!("{prefix}{dir}/{}", rel_comps.join("/")));
            if let Some((level, _)) = lookup(READ_PATHS.as_slice(), &full) {
                if level > RiskLevel::ReadOnly && worst.as_ref().is_none_or(|(w, _)| level > *w) {
                    worst = Some((
                        level,
                        format!(
                            "reads {} (relative to a directory that may be {}): secret material",
                            shorten(rel),
                            shorten(&normalize(&format!("{prefix}{dir}")))
                        ),
                    ));
                }
            }
        }
    }
    worst
}

/// Where a path really leads once `/proc/<pid>/root`, `/proc/<pid>/cwd` and descriptor
/// links are seen through (normalised, absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    Path(String),
    /// Relative to the current directory (`/proc/self/cwd/…`).
    Relative(String),
    /// Where it leads cannot be told.
    Unknown(&'static str),
}

pub(super) fn see_through(path: &str) -> Seen {
    let mut path = normalize(path);
    for _ in 0..8 {
        let comps = components(&path);
        let stdio = |n: Option<&&str>| matches!(n, Some(&("0" | "1" | "2")));
        match comps.as_slice() {
            ["proc", pid, rest @ ..] => {
                let this = matches!(*pid, "self" | "thread-self");
                let rest = match rest {
                    ["task", _, inner @ ..] => inner,
                    _ => rest,
                };
                match rest {
                    ["root", inner @ ..] => path = format!("/{}", inner.join("/")),
                    ["cwd", inner @ ..] if this => return Seen::Relative(inner.join("/")),
                    ["cwd", ..] => return Seen::Unknown("another process's working directory"),
                    ["fd", n] if this && stdio(Some(n)) => return Seen::Path(path),
                    ["fd" | "map_files", _, ..] => return Seen::Unknown("an open descriptor"),
                    _ => return Seen::Path(path),
                }
            }
            ["dev", "fd", n, ..] if !stdio(Some(n)) => return Seen::Unknown("an open descriptor"),
            _ => return Seen::Path(path),
        }
    }
    Seen::Unknown("too many links")
}

pub(super) fn read_level(path: &str) -> Option<(RiskLevel, String)> {
    lookup(READ_PATHS.as_slice(), path)
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

pub(super) fn assess_write(path: &Path, protected: &Protected) -> Assessment {
    // A copy: its pattern work is this assessment's alone.
    let protected = &protected.clone();
    let mut a = Assessment::read_only();
    if let Some(p) = absolute(path, &mut a) {
        let seen = match see_through(&p) {
            Seen::Path(seen) => seen,
            _ => p.clone(),
        };
        let (level, why) = write_level(&seen);
        a.raise(level, why);
        protected.check(&p, true, &mut a);
        protected.check(&seen, true, &mut a);
        if let Some(climbing) = join_climbing(&path.to_string_lossy(), &Cwd::Start) {
            protected.check(&climbing, true, &mut a);
        }
    }
    a
}

pub(super) fn assess_read(path: &Path, protected: &Protected) -> Assessment {
    let protected = &protected.clone();
    let mut a = Assessment::read_only();
    if let Some(p) = absolute(path, &mut a) {
        match see_through(&p) {
            Seen::Path(seen) => {
                if let Some((level, why)) = read_level(&seen) {
                    a.raise(level, why);
                }
                protected.check(&seen, false, &mut a);
            }
            Seen::Relative(_) | Seen::Unknown(_) => a.raise(
                RiskLevel::Medium,
                format!("reads {}: where it leads is not known", shorten(&p)),
            ),
        }
        protected.check(&p, false, &mut a);
        if let Some(climbing) = join_climbing(&path.to_string_lossy(), &Cwd::Start) {
            protected.check(&climbing, false, &mut a);
        }
    }
    a
}
