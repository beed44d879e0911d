//! Command arguments as the classifier sees them: the literal text when it is fixed, and
//! otherwise renderings that assume the worst about what an expansion produces. Brace
//! expansion is applied first, so `{rm,-rf,/}` is seen as `rm -rf /`.

use super::ast::{Command, Piece, Script, Word};

/// Words produced by one brace expansion, at most; beyond that the word is kept as is.
const MAX_BRACE_WORDS: usize = 64;
/// Longer words are not brace-expanded (the search for braces is quadratic).
const MAX_BRACE_LEN: usize = 1024;

#[derive(Debug, Clone, Default)]
pub(super) struct Arg {
    /// The text after quote removal; `None` when something in it is expanded at run time.
    pub lit: Option<String>,
    /// The text with each expansion shown as `*` (it may be anything).
    pub star: String,
    /// The text with each expansion dropped (it may be empty: `"$DIR"/` may be `/`).
    pub bare: String,
    /// Contains an unquoted glob character or an expansion.
    pub glob: bool,
    /// Starts with `~` or `$HOME`.
    pub home: bool,
    /// The text after the `~`/`$HOME` prefix, when `home`.
    pub home_rest: String,
    /// Fixed texts the word may well have (`${X:-rm}` → `rm`, `$(echo rm)` → `rm`).
    pub candidates: Vec<String>,
    /// Contains a process substitution (a `/dev/fd/N` path at run time).
    pub process: bool,
    /// Contains a parameter, command or arithmetic expansion (which word splitting may
    /// also break into several words).
    pub expanded: bool,
    /// The text when every expansion in it is a variable with a value fixed earlier in
    /// the line.
    pub fixed: Option<String>,
}

impl Arg {
    pub fn plain(text: &str) -> Arg {
        Arg {
            lit: Some(text.to_string()),
            star: text.to_string(),
            bare: text.to_string(),
            glob: text.contains(['*', '?'])
                || text
                    .split_once('[')
                    .is_some_and(|(_, rest)| rest.contains(']')),
            home: text == "~" || text.starts_with("~/"),
            home_rest: text.strip_prefix('~').unwrap_or_default().to_string(),
            ..Arg::default()
        }
    }

    /// An argument nothing is known about (what `xargs` reads from its input).
    pub fn computed() -> Arg {
        Arg {
            lit: None,
            star: "*".into(),
            glob: true,
            expanded: true,
            ..Arg::default()
        }
    }

    /// The literal text, or the `*` rendering.
    pub fn text(&self) -> &str {
        self.lit.as_deref().unwrap_or(&self.star)
    }

    pub fn is(&self, text: &str) -> bool {
        self.lit.as_deref() == Some(text)
    }

    pub fn from_word(word: &Word) -> Arg {
        let mut arg = Arg {
            lit: Some(String::new()),
            ..Arg::default()
        };
        for (i, piece) in word.pieces.iter().enumerate() {
            match piece {
                Piece::Char { ch, quoted } => {
                    arg.star.push(*ch);
                    arg.bare.push(*ch);
                    if let Some(lit) = arg.lit.as_mut() {
                        lit.push(*ch);
                    }
                    if !quoted && matches!(ch, '*' | '?') {
                        arg.glob = true;
                    }
                    if !quoted
                        && *ch == '['
                        && has_closing_bracket(word.pieces.get(i + 1..).unwrap_or_default())
                    {
                        arg.glob = true;
                    }
                    if i == 0 && *ch == '~' && !quoted {
                        arg.home = true;
                    }
                }
                other => {
                    if i == 0 {
                        arg.home = matches!(other, Piece::Param(p) if p.name == "HOME");
                    }
                    arg.lit = None;
                    arg.glob = true;
                    arg.star.push('*');
                    arg.process |= matches!(other, Piece::Process { .. });
                    arg.expanded |= !matches!(other, Piece::Process { .. });
                }
            }
        }
        if arg.home {
            arg.home_rest = word
                .pieces
                .iter()
                .skip(1)
                .map(|p| match p {
                    Piece::Char { ch, .. } => ch.to_string(),
                    _ => "*".to_string(),
                })
                .collect();
        }
        if let [only] = word.pieces.as_slice() {
            arg.candidates = candidates(only);
        }
        arg
    }
}

/// Whether an unquoted `]` follows: only then is `[` a pattern (so `[ -f x ]` is not).
fn has_closing_bracket(rest: &[Piece]) -> bool {
    rest.iter().any(|p| {
        matches!(
            p,
            Piece::Char {
                ch: ']',
                quoted: false
            }
        )
    })
}

/// The arguments of a command: its words after brace expansion.
pub(super) fn args_of(words: &[Word]) -> Vec<Arg> {
    let mut out = Vec::new();
    for word in words {
        match brace_expand(word) {
            Some(texts) => out.extend(texts.iter().map(|t| Arg::plain(t))),
            None => out.push(Arg::from_word(word)),
        }
    }
    out
}

/// Fixed values an expansion plausibly has: a default value, or what a substitution that
/// only echoes fixed words prints.
fn candidates(piece: &Piece) -> Vec<String> {
    match piece {
        Piece::Param(p) => p
            .default_word()
            .and_then(Word::literal)
            .into_iter()
            .collect(),
        Piece::Command(script) => echoed(script).into_iter().collect(),
        _ => Vec::new(),
    }
}

fn echoed(script: &Script) -> Option<String> {
    let [pipeline] = script.pipelines.as_slice() else {
        return None;
    };
    let [Command::Simple(simple)] = pipeline.commands.as_slice() else {
        return None;
    };
    let (first, rest) = simple.words.split_first()?;
    if first.literal()? != "echo" {
        return None;
    }
    let words: Option<Vec<String>> = rest.iter().map(Word::literal).collect();
    Some(words?.join(" "))
}

/// `a{b,c}d` → `abd acd` (bash and mksh; dash does not, but assuming it can only add
/// risk). `None` when the word has nothing to expand or is not fixed text.
fn brace_expand(word: &Word) -> Option<Vec<String>> {
    if word.pieces.len() > MAX_BRACE_LEN || !word.has_unquoted(|c| c == '{') {
        return None;
    }
    let chars: Vec<(char, bool)> = word
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Char { ch, quoted } => Some((*ch, *quoted)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut out = Vec::new();
    let mut budget = MAX_BRACE_WORDS;
    expand(&chars, &mut out, &mut budget);
    if out.len() == 1 && out.first().map(String::len) == Some(chars.len()) {
        return None;
    }
    // Unquoted empty results are removed, like the shell does.
    Some(out.into_iter().filter(|s| !s.is_empty()).collect())
}

fn expand(chars: &[(char, bool)], out: &mut Vec<String>, budget: &mut usize) {
    let Some((open, close, commas)) = find_brace(chars) else {
        out.push(chars.iter().map(|(c, _)| *c).collect());
        return;
    };
    let mut start = open + 1;
    for end in commas.into_iter().chain(std::iter::once(close)) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let mut next: Vec<(char, bool)> = chars.get(..open).unwrap_or_default().to_vec();
        next.extend_from_slice(chars.get(start..end).unwrap_or_default());
        next.extend_from_slice(chars.get(close + 1..).unwrap_or_default());
        expand(&next, out, budget);
        start = end + 1;
    }
}

/// The leftmost unquoted `{…}` with a top-level unquoted comma: (open, close, commas).
/// One pass with a stack, so long words cost linear time.
fn find_brace(chars: &[(char, bool)]) -> Option<(usize, usize, Vec<usize>)> {
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut best: Option<(usize, usize, Vec<usize>)> = None;
    for (i, c) in chars.iter().enumerate() {
        match c {
            ('{', false) => stack.push((i, Vec::new())),
            ('}', false) => {
                if let Some((open, commas)) = stack.pop() {
                    if !commas.is_empty() && best.as_ref().is_none_or(|b| open < b.0) {
                        best = Some((open, i, commas));
                    }
                }
            }
            (',', false) => {
                if let Some((_, commas)) = stack.last_mut() {
                    commas.push(i);
                }
            }
            _ => {}
        }
    }
    best
}
