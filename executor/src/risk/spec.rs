//! Option grammars of programs: which short options take a value, which long options
//! exist, and how the arguments are laid out. The grammars themselves are data in
//! `spec_text.rs`, `spec_sys.rs`, `spec_modes.rs` and `spec_android.rs`. getopt_long
//! (GNU, toybox, bionic) accepts any unambiguous prefix of a long option, so `sed --i` is
//! `sed --in-place`: the parser resolves prefixes against the grammar the same way, and a
//! complete grammar lets it notice options it does not know.

use super::spec_android::ANDROID_SPECS;
use super::spec_modes::MODE_SPECS;
use super::spec_sys::SYS_SPECS;
use super::spec_text::TEXT_SPECS;

/// How a program's arguments are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// getopt_long: options anywhere before `--`, clustered short options, `--name[=value]`.
    Getopt,
    /// Like `Getopt`, and a first argument without `-` is a cluster too (`tar tvf F`), whose
    /// value-taking letters take the following arguments in order.
    Bundled,
    /// Options only before the first operand; everything after it belongs to a subcommand
    /// or the command run (`adb -s X shell …`).
    Leading,
    /// No options at all: every argument is an operand (`echo`, `test`, `expr`).
    Operands,
    /// Options are words the program interprets itself (`find` expressions, `ps aux`,
    /// `kill -9`): nothing is resolved or reported here; tables and rules look at them.
    Free,
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    Nothing,
    /// `--name=value` or `--name value` (`-xVALUE` or `-x VALUE`).
    Value,
    /// Only attached: `--name=value`, `-xVALUE`.
    Optional,
    /// Two arguments (`jq --rawfile NAME FILE`); the second is the option's value.
    Two,
}

/// The option grammar of one program.
pub(super) struct Spec {
    pub name: &'static str,
    /// Short options without a value.
    pub flags: &'static str,
    /// Short options taking a value (attached, or the next argument).
    pub values: &'static str,
    /// Short options whose value is optional and must be attached (`sed -i[SUFFIX]`).
    pub optional: &'static str,
    /// Long options without the dashes; a trailing `=` takes a value, `=?` an optional one,
    /// `==` two arguments;
    /// `/c` at the very end names the short option it is a spelling of (`output=/o`).
    pub longs: &'static [&'static str],
    /// Whole single-dash words (`xxd -ps`, `ip -batch`), same suffixes as `longs`.
    pub words: &'static [&'static str],
    pub style: Style,
    /// Every option the program accepts is listed: anything else is "not understood".
    /// Partial grammars only say which options take values (for programs that need
    /// approval anyway).
    pub complete: bool,
    /// Long options must be written in full (the program does not use getopt_long).
    pub exact: bool,
}

pub(super) const fn spec(name: &'static str, flags: &'static str, values: &'static str) -> Spec {
    Spec {
        name,
        flags,
        values,
        optional: "",
        longs: &[],
        words: &[],
        style: Style::Getopt,
        complete: true,
        exact: false,
    }
}

impl Spec {
    pub(super) const fn longs(mut self, longs: &'static [&'static str]) -> Self {
        self.longs = longs;
        self
    }
    pub(super) const fn optional(mut self, optional: &'static str) -> Self {
        self.optional = optional;
        self
    }
    pub(super) const fn words(mut self, words: &'static [&'static str]) -> Self {
        self.words = words;
        self
    }
    pub(super) const fn style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }
    pub(super) const fn partial(mut self) -> Self {
        self.complete = false;
        self
    }
    pub(super) const fn exact(mut self) -> Self {
        self.exact = true;
        self
    }

    /// What a short option letter is: `None` when the grammar does not know it.
    pub fn short(&self, c: char) -> Option<Takes> {
        if self.values.contains(c) {
            Some(Takes::Value)
        } else if self.optional.contains(c) {
            Some(Takes::Optional)
        } else if self.flags.contains(c) {
            Some(Takes::Nothing)
        } else {
            None
        }
    }

    /// Resolve `--given` (without dashes and `=value`) the way getopt_long does.
    pub fn long(&self, given: &str) -> Resolved {
        resolve(self.longs, given, self.exact)
    }

    /// Resolve a whole single-dash word (`-ps`), exactly.
    pub fn word(&self, given: &str) -> Option<Entry> {
        self.words
            .iter()
            .map(|w| entry(w))
            .find(|e| e.name == given)
    }
}

/// One long option of a grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub name: &'static str,
    pub takes: Takes,
    /// The short option it is another spelling of.
    pub short: Option<char>,
}

/// The outcome of looking up a long option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolved {
    Found(Entry),
    /// A prefix of several options: getopt_long refuses it.
    Ambiguous(Vec<&'static str>),
    Unknown,
}

/// `name=?/c` → `name`, optional value, short option `c`.
fn entry(text: &'static str) -> Entry {
    let (text, short) = match text.char_indices().rev().nth(1) {
        Some((at, '/')) => (
            text.get(..at).unwrap_or(text),
            text.get(at + 1..).and_then(|c| c.chars().next()),
        ),
        _ => (text, None),
    };
    let (name, takes) = if let Some(name) = text.strip_suffix("==") {
        (name, Takes::Two)
    } else if let Some(name) = text.strip_suffix("=?") {
        (name, Takes::Optional)
    } else if let Some(name) = text.strip_suffix('=') {
        (name, Takes::Value)
    } else {
        (text, Takes::Nothing)
    };
    Entry { name, takes, short }
}

/// An exact match wins; otherwise a unique prefix; several prefixes are ambiguous unless
/// they are spellings of one option (getopt_long accepts those, and so does this).
pub(super) fn resolve(longs: &'static [&'static str], given: &str, exact: bool) -> Resolved {
    let entries = longs.iter().map(|l| entry(l));
    if let Some(found) = entries.clone().find(|e| e.name == given) {
        return Resolved::Found(found);
    }
    if exact || given.is_empty() {
        return Resolved::Unknown;
    }
    let matches: Vec<Entry> = entries.filter(|e| e.name.starts_with(given)).collect();
    match matches.as_slice() {
        [] => Resolved::Unknown,
        [found] => Resolved::Found(*found),
        [first, rest @ ..]
            if rest
                .iter()
                .all(|e| e.short.is_some() && e.short == first.short && e.takes == first.takes) =>
        {
            Resolved::Found(*first)
        }
        more => Resolved::Ambiguous(more.iter().map(|e| e.name).collect()),
    }
}

/// Programs that read their command line like another one (other names of one tool).
const SAME_GRAMMAR: &[(&str, &str)] = &[
    ("egrep", "grep"),
    ("fgrep", "grep"),
    ("gawk", "awk"),
    ("mawk", "awk"),
    ("nawk", "awk"),
    ("dir", "ls"),
    ("vdir", "ls"),
    ("gunzip", "gzip"),
    ("zcat", "gzip"),
    ("unxz", "xz"),
    ("xzcat", "xz"),
    ("bunzip2", "bzip2"),
    ("bzcat", "bzip2"),
    ("ip6tables", "iptables"),
];

/// The grammar of a program, if there is one.
pub(super) fn spec_of(program: &str) -> Option<&'static Spec> {
    let name = SAME_GRAMMAR
        .iter()
        .find(|(alias, _)| *alias == program)
        .map_or(program, |(_, same)| same);
    TEXT_SPECS
        .iter()
        .chain(SYS_SPECS)
        .chain(MODE_SPECS)
        .chain(ANDROID_SPECS)
        .find(|s| s.name == name)
}

/// Every grammar (for tests).
#[cfg(test)]
pub(super) fn all_specs() -> impl Iterator<Item = &'static Spec> {
    TEXT_SPECS
        .iter()
        .chain(SYS_SPECS)
        .chain(MODE_SPECS)
        .chain(ANDROID_SPECS)
}
