//! What a command does to the files its words name: writes (by level of the path),
//! reads (secrets, and paths that may be secrets), and nl2sh's own files.

use nl2sh_proto::channels::RiskLevel::{High, Low, Medium};

use super::args::Arg;
use super::classify::Walker;
use super::lexer::shorten;
use super::paths::{
    below_start, join_climbing, read_level, read_level_relative, resolve, see_through, write_level,
    Resolved, Seen,
};
use super::Assessment;

/// Where a path a command names is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Absolute(String),
    /// Below the starting directory (which may be anywhere).
    Relative(String),
    /// An absolute path judged only against nl2sh's own files: one with `..` kept as
    /// written (the kernel may walk it elsewhere than the normalised form), or a relative
    /// path from the directory a command starts in (`/`, exec::START_DIR).
    OwnOnly(String),
    Unknown,
}

impl Walker {
    /// Writing the path an argument names, by `who`.
    pub fn write_arg(&self, arg: &Arg, who: &str) -> Assessment {
        let mut a = Assessment::read_only();
        if arg.process {
            // `> >(cmd)`: the process substitution is assessed as a pipe reader.
            return a;
        }
        let text = match &arg.lit {
            Some(lit) => lit.clone(),
            None => {
                a.raise(
                    High,
                    format!(
                        "{who} writes a path computed at run time: {}",
                        shorten(&arg.star)
                    ),
                );
                arg.star.clone()
            }
        };
        for place in self.places(&text) {
            match place {
                Place::Absolute(path) => self.write_path(&path, who, &mut a),
                Place::OwnOnly(path) => self.protected.check(&path, true, &mut a),
                Place::Relative(_) => a.raise(Low, format!("{who} writes {}", shorten(&text))),
                Place::Unknown => a.raise(
                    Medium,
                    format!("{who} writes {} in an unknown directory", shorten(&text)),
                ),
            }
        }
        for candidate in &arg.candidates {
            for place in self.places(candidate) {
                match place {
                    Place::Absolute(path) => self.write_path(&path, who, &mut a),
                    Place::OwnOnly(path) => self.protected.check(&path, true, &mut a),
                    Place::Relative(_) | Place::Unknown => {}
                }
            }
        }
        if arg.home {
            self.protected
                .check(&format!("/~{}", arg.home_rest), true, &mut a);
        }
        a
    }

    /// Writing an absolute path, also where `/proc/<pid>/root/…` leads.
    fn write_path(&self, path: &str, who: &str, a: &mut Assessment) {
        let (level, why) = write_level(path);
        a.raise(level, format!("{who} {why}"));
        self.protected.check(path, true, a);
        if let Seen::Path(seen) = see_through(path) {
            if seen != path {
                let (level, why) = write_level(&seen);
                a.raise(level, format!("{who} {why}"));
                self.protected.check(&seen, true, a);
            }
        }
    }

    /// Reading the path an argument names: secrets are not read-only, nor is a path
    /// that may be one (computed at run time, relative to an unknown directory, or a
    /// pattern that may match one).
    pub fn read_arg(&self, arg: &Arg, who: &str) -> Assessment {
        let mut a = Assessment::read_only();
        if arg.process && arg.lit.is_none() && arg.star == "*" {
            // `<(…)`: the reading end of a pipe the line itself sets up.
            return a;
        }
        let mut texts = Vec::new();
        match (&arg.lit, &arg.fixed) {
            (Some(text), _) | (None, Some(text)) => texts.push(text.clone()),
            (None, None) if arg.home && !arg.home_rest.contains('*') => {
                texts.push(format!("~{}", arg.home_rest));
            }
            (None, None) => {
                a.raise(
                    Medium,
                    format!(
                        "{who} reads {}, computed at run time (it may be secret material)",
                        shorten(&arg.star)
                    ),
                );
                texts.push(arg.star.clone());
            }
        }
        texts.extend(arg.candidates.iter().cloned());
        for text in &texts {
            self.read_text(text, who, &mut a);
        }
        a
    }

    fn read_text(&self, text: &str, who: &str, a: &mut Assessment) {
        if text == "-" || text.is_empty() {
            return;
        }
        if text.split('/').any(|c| c == "..") {
            a.raise(
                Medium,
                format!(
                    "{who} reads {}: `..` may climb out of a link (it may be secret material)",
                    shorten(text)
                ),
            );
        }
        for place in self.places(text) {
            match place {
                Place::Absolute(path) => self.read_path(&path, text, who, a),
                Place::OwnOnly(path) => self.protected.check(&path, false, a),
                Place::Relative(rel) => {
                    if let Some((level, why)) = read_level_relative(&rel) {
                        a.raise(level, format!("{who} {why}"));
                    }
                }
                Place::Unknown => a.raise(
                    Medium,
                    format!(
                        "{who} reads {} in an unknown directory (it may be secret material)",
                        shorten(text)
                    ),
                ),
            }
        }
    }

    /// Reading an absolute path, also where `/proc/<pid>/root/…` and the like lead.
    fn read_path(&self, path: &str, text: &str, who: &str, a: &mut Assessment) {
        self.protected.check(path, false, a);
        match see_through(path) {
            Seen::Path(seen) => {
                self.protected.check(&seen, false, a);
                if let Some((level, why)) = read_level(&seen) {
                    a.raise(level, format!("{who} {why}"));
                }
            }
            // `/proc/self/cwd/REST` is REST in the current directory.
            Seen::Relative(rest) if !rest.is_empty() => self.read_text(&rest, who, a),
            Seen::Relative(_) => {}
            Seen::Unknown(why) => a.raise(
                Medium,
                format!(
                    "{who} reads {}: {why} (it may be secret material)",
                    shorten(text)
                ),
            ),
        }
    }

    /// Where a path may be: resolved against the working directory and the ones that
    /// may still be in effect.
    fn places(&self, text: &str) -> Vec<Place> {
        let mut out = Vec::new();
        for cwd in std::iter::once(&self.cwd).chain(&self.cwd_before) {
            let place = match resolve(text, cwd) {
                Resolved::Absolute(path) => Place::Absolute(path),
                Resolved::Relative => {
                    below_start(text, cwd).map_or(Place::Unknown, Place::Relative)
                }
                Resolved::Unknown => Place::Unknown,
            };
            if !out.contains(&place) {
                out.push(place);
            }
            // `/proc/1/cwd/../x` and `link/../x` lead where the kernel walks them, not
            // where the text seems to: nl2sh's own files are also judged on that path.
            let own_only = join_climbing(text, cwd).or_else(|| {
                // The start directory as a whole (`grep -r x .`) is left to the sandbox's
                // masks, as before commands started in `/`.
                below_start(text, cwd)
                    .filter(|rel| !text.starts_with(['/', '~']) && rel != ".")
                    .map(|rel| format!("/{rel}"))
            });
            if let Some(place) = own_only.map(Place::OwnOnly) {
                if !out.contains(&place) {
                    out.push(place);
                }
            }
            if text.starts_with(['/', '~']) {
                break;
            }
        }
        out
    }

    /// A directory a program reads all of (`grep -r`, `cp -r`): above nl2sh's own
    /// files, it reaches them.
    pub fn tree_arg(&self, arg: &Arg, _who: &str) -> Assessment {
        let mut a = Assessment::read_only();
        for path in self.arg_paths(arg) {
            self.protected.check(&path, true, &mut a);
        }
        a
    }

    /// Any word naming one of nl2sh's own files (or something beneath it).
    pub fn touch_arg(&self, arg: &Arg, a: &mut Assessment) {
        if self.protected.is_empty() {
            return;
        }
        for path in self.arg_paths(arg) {
            self.protected.check(&path, false, a);
        }
    }

    /// A fixed text that may be a path (an assignment's value).
    pub fn touch_text(&self, text: &str, a: &mut Assessment) {
        self.touch_arg(&Arg::plain(text), a);
    }

    /// The absolute paths an argument may name: the word itself, the value of
    /// `--opt=VALUE` or `key=VALUE`, text from its first `/` (`-o/x`), a home path, and
    /// fixed values of its expansions; also where `/proc/<pid>/root/…` leads.
    fn arg_paths(&self, arg: &Arg) -> Vec<String> {
        let mut texts: Vec<String> = Vec::new();
        if let Some(lit) = &arg.lit {
            texts.push(lit.clone());
            if let Some((_, value)) = lit.split_once('=') {
                texts.push(value.to_string());
            }
            if !lit.starts_with(['/', '~']) {
                if let Some(at) = lit.find('/') {
                    texts.push(lit.get(at..).unwrap_or_default().to_string());
                }
            }
        } else if arg.star.starts_with('/') {
            texts.push(arg.star.clone());
        }
        if arg.home {
            texts.push(format!("~{}", arg.home_rest));
        }
        texts.extend(arg.fixed.iter().cloned());
        texts.extend(arg.candidates.iter().cloned());
        let mut out = Vec::new();
        for text in texts {
            for place in self.places(&text) {
                match place {
                    Place::Absolute(path) => {
                        if let Seen::Path(seen) = see_through(&path) {
                            out.push(seen);
                        }
                        out.push(path);
                    }
                    Place::OwnOnly(path) => out.push(path),
                    Place::Relative(_) | Place::Unknown => {}
                }
            }
        }
        out
    }
}
