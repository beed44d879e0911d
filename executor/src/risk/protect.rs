//! nl2sh's own files (configuration, state directory, executable): any action that
//! touches them is at least `dangerous`. Paths are compared component by component, a
//! component of the command's path may be a pattern (`conf*`), and a path under an
//! unknown home directory (`~/…`) is compared against every place a home could be.

use nl2sh_proto::channels::RiskLevel::Dangerous;

use super::lexer::shorten;
use super::paths::{normalize, patterns_meet};
use super::Assessment;

/// nl2sh's own files (its configuration file, state directory, executable): any action
/// that touches them is at least `dangerous`, whatever else its assessment says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Normalised absolute paths.
    paths: Vec<String>,
}

impl Protected {
    /// Normalises each path lexically; relative and empty paths (and `/` itself, which
    /// would make everything dangerous) are skipped.
    pub fn new<I: IntoIterator<Item = std::path::PathBuf>>(paths: I) -> Self {
        let mut paths: Vec<String> = paths
            .into_iter()
            .filter_map(|p| {
                let text = p.to_string_lossy().into_owned();
                text.starts_with('/').then(|| normalize(&text))
            })
            .filter(|p| p != "/")
            .collect();
        paths.sort();
        paths.dedup();
        Protected { paths }
    }

    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    pub(super) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The protected path a (normalised, absolute; `/~…` for a home directory) path
    /// reaches: equal to it, beneath it, or (with `ancestors`) above it.
    pub(super) fn reached(&self, path: &str, ancestors: bool) -> Option<&str> {
        let comps = components(path);
        self.paths.iter().map(String::as_str).find(|p| {
            let prot = components(p);
            let relation = match comps.split_first() {
                // `~` or `~user`: the home directory may be `/` or any directory that is
                // a home directory somewhere.
                Some((home, rest)) if home.starts_with('~') => (0..prot.len())
                    .filter(|k| *k == 0 || is_home(prot.get(..*k).unwrap_or_default()))
                    .filter_map(|k| relation(prot.get(k..).unwrap_or_default(), rest))
                    .max(),
                _ => relation(&prot, &comps),
            };
            match relation {
                Some(Relation::Ancestor) => ancestors,
                Some(_) => true,
                None => false,
            }
        })
    }

    /// Raise `a` when `path` reaches a protected path.
    pub(super) fn check(&self, path: &str, ancestors: bool, a: &mut Assessment) {
        if let Some(p) = self.reached(path, ancestors) {
            a.raise(
                Dangerous,
                format!(
                    "touches nl2sh's own configuration/state/executable ({})",
                    shorten(p)
                ),
            );
        }
    }
}

/// Where home directories are (`*` is any one name).
const HOMES: &[&str] = &[
    "/root",
    "/home/*",
    "/Users/*",
    "/var/root",
    "/data/data/*/files/home",
    "/data/user/*/*/files/home",
    "/data/local/tmp",
];

fn is_home(dir: &[&str]) -> bool {
    HOMES.iter().any(|h| {
        let h = components(h);
        h.len() == dir.len() && h.iter().zip(dir).all(|(p, d)| patterns_meet(p, d))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Relation {
    Ancestor,
    Beneath,
    Equal,
}

fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|c| !c.is_empty()).collect()
}

/// How `path` (components, possibly patterns) relates to the literal `prot`.
fn relation(prot: &[&str], path: &[&str]) -> Option<Relation> {
    for (i, comp) in path.iter().enumerate() {
        // bash's `**` (globstar) matches any number of directories.
        if *comp == "**" {
            return Some(Relation::Beneath);
        }
        match prot.get(i) {
            Some(p) if patterns_meet(comp, p) => {}
            Some(_) => return None,
            None => return Some(Relation::Beneath),
        }
    }
    if path.len() == prot.len() {
        Some(Relation::Equal)
    } else {
        Some(Relation::Ancestor)
    }
}
