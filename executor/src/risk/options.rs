//! Reading a program's command line the way getopt does: options (clustered short
//! options, `--long[=value]`, options taking values) and operands, ending at `--`.

use super::args::Arg;
use super::option_table::OPTION_VALUES;

/// How an option is written, for the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flag {
    /// A short option, alone or clustered (`-r` in `-rf`).
    Short(char),
    /// `--name` or `--name=value`.
    Long(&'static str),
    /// Exactly this argument (`find`'s `-delete`, `iptables`' `-L`).
    Word(&'static str),
    /// An argument starting with this text (`-fprint` covers `-fprintf`).
    Prefix(&'static str),
}

impl Flag {
    /// How the flag is typically written, for messages and tests.
    pub fn example(self) -> String {
        match self {
            Flag::Short(c) => format!("-{c}"),
            Flag::Long(s) | Flag::Word(s) | Flag::Prefix(s) => s.to_string(),
        }
    }
}

/// A program's arguments (without the program name), split into options and operands.
pub(super) struct Cli<'a> {
    pub args: &'a [Arg],
    pub operands: Vec<&'a Arg>,
    /// Index in `args` of `--`, or `args.len()`.
    end_of_options: usize,
    short_values: &'static str,
}

impl<'a> Cli<'a> {
    pub fn new(program: &str, args: &'a [Arg]) -> Self {
        let (short_values, long_values) = OPTION_VALUES
            .iter()
            .find(|(name, ..)| *name == program)
            .map_or(("", &[][..]), |(_, s, l)| (*s, *l));
        let mut operands = Vec::new();
        let mut end_of_options = args.len();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            let text = arg.text();
            if text == "--" {
                end_of_options = i - 1;
                operands.extend(args.iter().skip(i));
                break;
            }
            if text.len() < 2 || !text.starts_with('-') {
                operands.push(arg);
            } else if let Some(long) = text.strip_prefix("--") {
                if !long.contains('=') && long_values.contains(&text) {
                    i += 1;
                }
            } else if takes_separate_value(text, short_values) {
                i += 1;
            }
        }
        Cli {
            args,
            operands,
            end_of_options,
            short_values,
        }
    }

    /// The options (arguments before `--` that start with `-`).
    fn options(&self) -> impl Iterator<Item = (usize, &'a Arg)> + '_ {
        self.args
            .iter()
            .enumerate()
            .take(self.end_of_options)
            .filter(|(_, a)| a.text().len() > 1 && a.text().starts_with('-'))
    }

    pub fn has(&self, flag: Flag) -> bool {
        self.options().any(|(_, a)| {
            let text = a.text();
            match flag {
                Flag::Short(c) => short_cluster(text).is_some_and(|cluster| {
                    for ch in cluster.chars() {
                        if ch == c {
                            return true;
                        }
                        if self.short_values.contains(ch) {
                            return false;
                        }
                    }
                    false
                }),
                Flag::Long(name) => {
                    text == name || text.strip_prefix(name).is_some_and(|r| r.starts_with('='))
                }
                Flag::Word(word) => text == word,
                Flag::Prefix(prefix) => text.starts_with(prefix),
            }
        })
    }

    /// The values given to an option that takes one (`-o FILE`, `-oFILE`, `--output=FILE`).
    pub fn values(&self, flag: Flag) -> Vec<Arg> {
        let mut out = Vec::new();
        for (i, a) in self.options() {
            let text = a.text();
            let next = || self.args.get(i + 1).cloned();
            let value = match flag {
                Flag::Short(c) => short_cluster(text).and_then(|cluster| {
                    let at = cluster.find(c)?;
                    let before = cluster.get(..at)?;
                    if before.chars().any(|ch| self.short_values.contains(ch)) {
                        return None;
                    }
                    let rest = cluster.get(at + c.len_utf8()..)?;
                    if rest.is_empty() {
                        next()
                    } else {
                        Some(Arg::plain(rest))
                    }
                }),
                Flag::Long(name) => match text.strip_prefix(name) {
                    Some("") => next(),
                    Some(rest) => rest.strip_prefix('=').map(Arg::plain),
                    None => None,
                },
                Flag::Word(word) | Flag::Prefix(word) => (text == word).then(next).flatten(),
            };
            out.extend(value);
        }
        out
    }
}

/// The letters of a short-option cluster (`-rf` → `rf`); `None` for `--long`.
fn short_cluster(text: &str) -> Option<&str> {
    text.strip_prefix('-').filter(|rest| !rest.starts_with('-'))
}

/// Whether a short-option cluster ends with an option whose value is the next argument.
fn takes_separate_value(text: &str, short_values: &str) -> bool {
    let Some(cluster) = short_cluster(text) else {
        return false;
    };
    for (i, ch) in cluster.char_indices() {
        if short_values.contains(ch) {
            return i + ch.len_utf8() == cluster.len();
        }
    }
    false
}
