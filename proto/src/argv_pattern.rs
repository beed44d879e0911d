//! The `command` of an `[[approval_grants]]` table: which commands a grant covers, as a
//! pattern over the program and its arguments (never over the text of a command line,
//! whose prefix can be followed by anything: `ls /tmp; touch F`).
//!
//! `["am", "start", "-n", "com.example/.MainActivity"]`, `["ls", "**"]`:
//!
//! * the first element is the program exactly as the command line names it (`am`
//!   matches only the word `am`, found through `PATH`; `/system/bin/am` only that word);
//! * each following element matches exactly one argument: literally, or with `*`
//!   standing for one or more characters other than `/` within that argument (the text
//!   a `*` stands for is never `.` or `..`, so `/sdcard/Download/*` stays in that
//!   directory, and a `*` that starts an element never stands for text starting with
//!   `-`, so `["rm", "*.tmp"]` does not match `rm -rf.tmp`: write `-*` for options);
//! * a last element `**` matches any further arguments, none included.
//!
//! Matching is on the words as they reach the program; the executor sends only words the
//! shell does not expand (see `ParsedCommand::argv`).

use std::fmt;

use serde::Deserialize;

use crate::limits::MAX_COMMAND_ARGV_BYTES;

/// The element that matches any further arguments.
pub const ANY_REST: &str = "**";

/// A validated `command` pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct ArgvPattern {
    /// The elements as written (the program first).
    elements: Vec<String>,
    /// The last element is [`ANY_REST`].
    any_rest: bool,
}

/// Why a `command` pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("`command` is empty: name the program, then its arguments, e.g. [\"ls\", \"**\"]")]
    Empty,
    #[error("the program (the first element of `command`) is empty")]
    EmptyProgram,
    #[error("the program (the first element of `command`) is matched exactly and cannot hold `*`")]
    PatternProgram,
    #[error("`**` may only be the last element of `command` (it matches the remaining arguments)")]
    AnyRestNotLast,
    #[error("element {0} of `command` holds `**` within other text: `**` must be a whole element, and `*` stands for one or more characters")]
    AnyRestInWord(usize),
    #[error("element {0} of `command` holds a NUL character, which no argument can")]
    Nul(usize),
    #[error("`command` is over {MAX_COMMAND_ARGV_BYTES} bytes, longer than any command a grant can match")]
    TooLong,
}

impl TryFrom<Vec<String>> for ArgvPattern {
    type Error = PatternError;

    fn try_from(elements: Vec<String>) -> Result<Self, PatternError> {
        let (program, args) = elements.split_first().ok_or(PatternError::Empty)?;
        if program.is_empty() {
            return Err(PatternError::EmptyProgram);
        }
        if program.contains('*') {
            return Err(PatternError::PatternProgram);
        }
        for (i, element) in elements.iter().enumerate() {
            if element.contains('\0') {
                return Err(PatternError::Nul(i + 1));
            }
        }
        let last = args.len();
        for (i, arg) in args.iter().enumerate() {
            if arg == ANY_REST {
                if i + 1 != last {
                    return Err(PatternError::AnyRestNotLast);
                }
            } else if arg.contains(ANY_REST) {
                return Err(PatternError::AnyRestInWord(i + 2));
            }
        }
        if crate::channels::ParsedCommand::argv_bytes(&elements) > MAX_COMMAND_ARGV_BYTES {
            return Err(PatternError::TooLong);
        }
        let any_rest = args.last().is_some_and(|a| a == ANY_REST);
        Ok(ArgvPattern { elements, any_rest })
    }
}

impl ArgvPattern {
    /// The program word it matches.
    pub fn program(&self) -> &str {
        self.elements.first().map_or("", String::as_str)
    }

    /// The elements as written.
    pub fn elements(&self) -> &[String] {
        &self.elements
    }

    /// Whether `argv` (program first) is a command this pattern covers.
    pub fn matches(&self, argv: &[String]) -> bool {
        let Some((program, args)) = argv.split_first() else {
            return false;
        };
        if program != self.program() {
            return false;
        }
        let end = self.elements.len() - usize::from(self.any_rest);
        let fixed = self.elements.get(1..end).unwrap_or_default();
        let count_fits = if self.any_rest {
            args.len() >= fixed.len()
        } else {
            args.len() == fixed.len()
        };
        count_fits
            && fixed
                .iter()
                .zip(args)
                .all(|(pattern, arg)| word_matches(pattern, arg))
    }
}

impl fmt::Display for ArgvPattern {
    /// As TOML would write it: `["ls", "**"]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, element) in self.elements.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{element:?}")?;
        }
        f.write_str("]")
    }
}

/// One argument against one pattern element. A `*` never crosses a `/`, so the pattern
/// and the argument have the same number of `/`-separated components, matched in turn.
fn word_matches(pattern: &str, arg: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == arg;
    }
    if pattern.starts_with('*') && arg.starts_with('-') {
        // The program would read the argument as an option, which the pattern never says.
        return false;
    }
    let mut patterns = pattern.split('/');
    let mut components = arg.split('/');
    loop {
        match (patterns.next(), components.next()) {
            (None, None) => return true,
            (Some(p), Some(c)) if component_matches(p.as_bytes(), c.as_bytes()) => {}
            _ => return false,
        }
    }
}

/// A component without `/` against a pattern component: literal bytes and `*`s, each
/// `*` standing for one or more bytes, never for exactly `.` or `..`. Linear in the
/// component for each literal segment (the argument is the caller's; the pattern is the
/// owner's).
fn component_matches(pattern: &[u8], text: &[u8]) -> bool {
    let mut segments = pattern.split(|&b| b == b'*');
    let first = segments.next().unwrap_or_default();
    if !text.starts_with(first) {
        return false;
    }
    // reach[i]: the pattern so far can match exactly text[..i].
    let mut reach = vec![false; text.len() + 1];
    reach[first.len()] = true;
    for segment in segments {
        let mut next = vec![false; text.len() + 1];
        // Whether some i < q - 2 is reachable: a `*` from there to q spans 3+ bytes.
        let mut reached_early = false;
        for q in 1..=text.len() {
            if q >= 3 && reach[q - 3] {
                reached_early = true;
            }
            let star_ends_here = reached_early
                || (q >= 2 && reach[q - 2] && &text[q - 2..q] != b"..")
                || (reach[q - 1] && text[q - 1] != b'.');
            if star_ends_here && text[q..].starts_with(segment) {
                next[q + segment.len()] = true;
            }
        }
        reach = next;
    }
    reach[text.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(elements: &[&str]) -> Result<ArgvPattern, PatternError> {
        ArgvPattern::try_from(elements.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn covers(p: &[&str], words: &[&str]) -> bool {
        pattern(p).unwrap().matches(&argv(words))
    }

    #[test]
    fn invalid_patterns_are_refused() {
        assert_eq!(pattern(&[]), Err(PatternError::Empty));
        assert_eq!(pattern(&[""]), Err(PatternError::EmptyProgram));
        assert_eq!(pattern(&["", "**"]), Err(PatternError::EmptyProgram));
        assert_eq!(pattern(&["*"]), Err(PatternError::PatternProgram));
        assert_eq!(pattern(&["**"]), Err(PatternError::PatternProgram));
        assert_eq!(pattern(&["l*"]), Err(PatternError::PatternProgram));
        assert_eq!(
            pattern(&["ls", "**", "-l"]),
            Err(PatternError::AnyRestNotLast)
        );
        assert_eq!(
            pattern(&["ls", "**", "**"]),
            Err(PatternError::AnyRestNotLast)
        );
        assert_eq!(pattern(&["ls", "a**"]), Err(PatternError::AnyRestInWord(2)));
        assert_eq!(
            pattern(&["ls", "/x/**/y"]),
            Err(PatternError::AnyRestInWord(2))
        );
        assert_eq!(pattern(&["ls", "a\0b"]), Err(PatternError::Nul(2)));
        assert_eq!(pattern(&["l\0s"]), Err(PatternError::Nul(1)));
        let long = "x".repeat(MAX_COMMAND_ARGV_BYTES);
        assert_eq!(pattern(&["ls", &long]), Err(PatternError::TooLong));
        for ok in [
            &["ls"][..],
            &["ls", "**"],
            &["ls", ""],
            &["am", "start", "-n", "com.example/.MainActivity"],
            &["rm", "/sdcard/Download/*.tmp"],
            &["/system/bin/am", "*", "**"],
        ] {
            assert!(pattern(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn program_is_matched_exactly() {
        assert!(covers(&["am"], &["am"]));
        assert!(!covers(&["am"], &["/system/bin/am"]));
        assert!(!covers(&["/system/bin/am"], &["am"]));
        assert!(covers(&["/system/bin/am"], &["/system/bin/am"]));
        assert!(!covers(&["am"], &["/tmp/am"]));
        assert!(!covers(&["am"], &["Am"]));
        assert!(!covers(&["am", "**"], &[]));
    }

    #[test]
    fn each_element_is_one_argument() {
        let p = ["am", "start", "-n", "com.example/.Main"];
        assert!(covers(&p, &["am", "start", "-n", "com.example/.Main"]));
        assert!(!covers(
            &p,
            &["am", "start", "-n", "com.example/.Main", "--user", "0"]
        ));
        assert!(!covers(&p, &["am", "start", "-n", "com.other/.Main"]));
        assert!(!covers(&p, &["am", "start", "-n"]));
        assert!(!covers(&p, &["am", "start", "-n com.example/.Main"]));
        assert!(!covers(&p, &["am", "start", "", "-n", "com.example/.Main"]));
        assert!(covers(&["ls", ""], &["ls", ""]));
        assert!(!covers(&["ls", ""], &["ls"]));
    }

    #[test]
    fn any_rest_matches_zero_or_more_arguments() {
        assert!(covers(&["ls", "**"], &["ls"]));
        assert!(covers(&["ls", "**"], &["ls", "-la", "/tmp", ";", "touch"]));
        assert!(covers(&["am", "start", "**"], &["am", "start"]));
        assert!(covers(&["am", "start", "**"], &["am", "start", "-n", "x"]));
        assert!(!covers(&["am", "start", "**"], &["am", "stop", "-n", "x"]));
        assert!(!covers(&["am", "start", "**"], &["am"]));
        assert!(!covers(&["ls"], &["ls", "-l"]));
    }

    #[test]
    fn star_stays_within_one_component() {
        let p = ["rm", "/sdcard/Download/*.tmp"];
        assert!(covers(&p, &["rm", "/sdcard/Download/a.tmp"]));
        assert!(covers(&p, &["rm", "/sdcard/Download/a b.c.tmp"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/.tmp"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/x/a.tmp"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/../a.tmp"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/a.tmp/"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/a.tmp", "/etc/x.tmp"]));
        let p = ["rm", "/sdcard/Download/*"];
        assert!(covers(&p, &["rm", "/sdcard/Download/a"]));
        assert!(covers(&p, &["rm", "/sdcard/Download/..."]));
        assert!(covers(&p, &["rm", "/sdcard/Download/.a"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/.."]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/."]));
        assert!(!covers(&p, &["rm", "/sdcard/Download/"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download"]));
        assert!(!covers(&p, &["rm", "/sdcard/Download//"]));
        // A `*` between literal dots cannot make a `.` or `..` component either.
        let p = ["cat", "/a/.*/b"];
        assert!(!covers(&p, &["cat", "/a/../b"]));
        assert!(covers(&p, &["cat", "/a/.x/b"]));
        // The rule is about the text a `*` stands for, whatever the name: `..` here.
        assert!(!covers(&p, &["cat", "/a/.../b"]));
        assert!(covers(&p, &["cat", "/a/..../b"]));
        let p = ["cat", "/a/*./b"];
        assert!(!covers(&p, &["cat", "/a/../b"]));
        assert!(covers(&p, &["cat", "/a/x./b"]));
    }

    #[test]
    fn several_stars_and_options() {
        let p = ["cp", "--target=/sdcard/*/*", "*.jpg"];
        assert!(covers(&p, &["cp", "--target=/sdcard/a/b", "x.jpg"]));
        assert!(!covers(&p, &["cp", "--target=/sdcard/a", "x.jpg"]));
        assert!(!covers(&p, &["cp", "--target=/sdcard/a/b/c", "x.jpg"]));
        assert!(!covers(&p, &["cp", "--target=/sdcard/../b", "x.jpg"]));
        assert!(!covers(&p, &["cp", "--target=/sdcard/a/b", "/etc/x.jpg"]));
        assert!(covers(&["x", "a*b*c"], &["x", "aXbYc"]));
        assert!(covers(&["x", "a*b*c"], &["x", "abbbc"]));
        assert!(!covers(&["x", "a*b*c"], &["x", "abc"]));
        assert!(covers(&["x", "*"], &["x", "é"]));
        // A leading `*` is never an option; `-*` is.
        assert!(!covers(&["rm", "*.tmp"], &["rm", "-rf.tmp"]));
        assert!(!covers(
            &["cp", "*", "/sdcard/b"],
            &["cp", "-t.", "/sdcard/b"]
        ));
        assert!(!covers(&["x", "*"], &["x", "-"]));
        assert!(covers(&["x", "-*"], &["x", "-la"]));
        assert!(covers(&["x", "a*"], &["x", "a-b"]));
        assert!(covers(&["x", "/a/*"], &["x", "/a/-b"]));
        assert!(covers(&["x", "é*é"], &["x", "ééé"]));
        assert!(!covers(&["x", "*"], &["x", ""]));
        // Long arguments stay cheap: one pass per literal segment.
        let long = "a".repeat(MAX_COMMAND_ARGV_BYTES);
        assert!(!covers(&["x", "*b*b*b*b*c"], &["x", &long]));
    }

    #[test]
    fn displays_as_toml() {
        assert_eq!(
            pattern(&["ls", "**"]).unwrap().to_string(),
            r#"["ls", "**"]"#
        );
    }
}
