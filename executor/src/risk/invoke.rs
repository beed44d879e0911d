//! From the words of a simple command to the program that runs: computed names,
//! paths, and dispatch to wrappers, interpreters and the program tables.

use nl2sh_proto::channels::RiskLevel::{High, Medium};

use super::args::Arg;
use super::classify::{Stdin, Walker};
use super::exec_table::{INTERPRETERS, SYSTEM_BIN_DIRS};
use super::lexer::shorten;
use super::paths::normalize;
use super::wrap_table::WRAPPERS;
use super::Assessment;

impl Walker {
    /// Assess running `args` (program first) `depth` levels deep.
    pub fn invoke(&mut self, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        let Some((first, rest)) = args.split_first() else {
            return a;
        };
        if !self.within_bounds(depth, &mut a) {
            return a;
        }
        for arg in args {
            self.touch_arg(arg, &mut a);
        }
        if let Some(why) = &self.taint {
            a.raise(
                Medium,
                format!(
                    "{}: which program this is cannot be known after {why}",
                    shorten(first.text())
                ),
            );
        }
        let Some(path) = first.lit.as_deref() else {
            a.raise(
                High,
                format!(
                    "program name is computed at run time: {}",
                    shorten(&first.star)
                ),
            );
            // Still assess what it most likely is (`${RM:-rm}`, `$(echo rm)`).
            for candidate in &first.candidates {
                let mut v: Vec<Arg> = candidate.split_whitespace().map(Arg::plain).collect();
                v.extend(rest.iter().cloned());
                a.merge(self.invoke(&v, depth + 1, stdin));
            }
            return a;
        };
        if first.glob {
            a.raise(
                High,
                format!("program name is a pattern: {}", shorten(path)),
            );
        }
        let name = path.rsplit_once('/').map_or(path, |(_, name)| name);
        if !path.contains('/') {
            // A bare name may be one of nl2sh's own programs found through PATH.
            for dir in SYSTEM_BIN_DIRS {
                let candidate = format!("{}/{name}", dir.replace('*', "x"));
                self.protected.check(&candidate, false, &mut a);
            }
        }
        if path.contains('/') && !system_program(path) {
            a.raise(
                Medium,
                format!(
                    "runs {} from outside the system program directories",
                    shorten(path)
                ),
            );
        }
        a.merge(self.program(name, rest, depth, stdin));
        a
    }

    fn program(&mut self, name: &str, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        if name.is_empty() {
            let mut a = Assessment::read_only();
            a.raise(Medium, "empty program name");
            return a;
        }
        if let Some(w) = WRAPPERS.iter().find(|w| w.name == name) {
            return self.wrapper(w, args, depth, stdin);
        }
        match name {
            "su" => return self.su(args, depth, stdin),
            "eval" => {
                if args.iter().any(|arg| arg.lit.is_none()) {
                    self.set_taint("`eval` of text computed at run time");
                }
                return self.eval(args, depth, stdin);
            }
            // `ip` reads its own options and objects (`ip.rs`).
            "ip" => return self.ip(args, depth, stdin),
            "." | "source" => {
                self.set_taint(format!("`{name}` (the script may define anything)"));
                return self.source(name, args, depth, stdin);
            }
            _ => {}
        }
        if let Some((row_name, inline, posix)) = interpreter(name) {
            return self.interpreter(row_name, inline, posix, args, depth, stdin);
        }
        self.plain(name, args, depth, stdin)
    }
}

/// The interpreter row for a program name, also with a version suffix (`python3.11`).
fn interpreter(name: &str) -> Option<(&'static str, &'static [&'static str], bool)> {
    let base = without_version(name);
    INTERPRETERS
        .iter()
        .find(|(n, ..)| *n == name || *n == base)
        .copied()
}

/// `pip3` → `pip`, `python3.11` → `python`.
pub(super) fn without_version(name: &str) -> &str {
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
}

/// Whether a program path is in one of the system's own program directories.
fn system_program(path: &str) -> bool {
    let norm = normalize(path);
    let dir = norm.rsplit_once('/').map_or("", |(dir, _)| dir);
    let comps: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
    SYSTEM_BIN_DIRS.iter().any(|d| {
        let want: Vec<&str> = d.split('/').filter(|c| !c.is_empty()).collect();
        want.len() == comps.len() && want.iter().zip(&comps).all(|(w, c)| *w == "*" || w == c)
    })
}
