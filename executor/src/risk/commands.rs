//! The commands a shell line runs, collected by the same walk that assesses it, for
//! scoped grants (`ActionSummary.commands`, matched by approvald).
//!
//! Every simple command the walk reaches is one entry, wherever it sits (a list, a
//! pipeline, a subshell, a loop or function body, a substitution, a here-document or
//! `sh -c`/`su -c`/`eval` script), with its own assessment; so are the words of a `case`,
//! `for` or `[[` (the shell evaluates them itself: `[[ $x -eq 1 ]]` reads `$x` as
//! arithmetic), never matched. A grant covers the line only if each entry is matched by
//! it or is inert (approvald's `policy::inert`: `sleep 1`, `echo`). An entry's `argv` is
//! what a grant may match, and it is withheld (`None`) whenever the words are not what
//! reaches the program or the command may not mean what its words say:
//!
//! * a word naming a path through a `/proc` magic link (`/proc/<pid>/cwd/…`, `…/fd/N`,
//!   `…/root/…`, `…/exe`, `…/map_files/…`, `/dev/fd/N`): it names whatever the link
//!   leads to when the command runs;
//! * a word the shell expands (parameters, substitutions, arithmetic, unquoted glob
//!   characters, `~`, braces) or whose text depends on the shell (`$'…'`, `$"…"`);
//! * assignments before the program (`LD_PRELOAD=x am …`);
//! * a redirection of anything but `/dev/null` (a write, or input the caller chose: a
//!   file read as root, a here-document), or one the assessment does not find read-only;
//! * input the caller chose on stdin (a pipe, even from `echo`; `< FILE`; a here-document);
//! * anything earlier in the line that changes what a command means: an alias, a
//!   function, `PATH` and the like (the walk's taint), a change of directory, or any
//!   change to the shell's variables, environment or settings (`export`, `X=…`,
//!   `read`, `set`, `umask`, `${X:=…}`, a `for` variable, …) — an owner's grant for
//!   `am start` must not run `am` with an environment the caller chose;
//! * programs that run text as code or rebind names (`eval`, `.`, `trap`, `alias`, …).
//!
//! What the walk cannot account for makes the whole list unresolved (`None`): the parser
//! did not understand something, nesting or work past the limits, a loop (a grant names
//! one run of a command, not as many as a loop makes), a background job, a
//! redirection of a compound command that writes, what shells read differently (`&>`,
//! which dash reads as `&` and `>`; `|&`, a co-process in mksh; `10>`, an argument and a
//! redirection in dash and mksh; a carriage return, which the lexer takes for a blank),
//! more than [`MAX_ACTION_COMMANDS`] distinct commands, and
//! — checked at the end — any risk in the line's assessment that no entry carries.

use nl2sh_proto::channels::{ParsedCommand, RiskLevel};
use nl2sh_proto::limits::{MAX_ACTION_COMMANDS, MAX_COMMAND_ARGV_BYTES};

use super::ast::{Piece, Redir, RedirOp, Word};
use super::Assessment;

/// Programs a grant never matches: they run text as code or change what later names
/// mean, so their words do not say what runs; and the names mksh (Android's `sh`)
/// predefines as aliases, which run something else than a program of that name.
const NEVER_MATCHED: &[&str] = &[
    "eval",
    ".",
    "source",
    "trap",
    "alias",
    "unalias",
    "hash",
    "enable",
    "fc",
    "autoload",
    "functions",
    "history",
    "integer",
    "login",
    "nameref",
    "r",
    "stop",
    "suspend",
    "type",
];

/// Builtins that change the shell's state for the commands after them (directory,
/// variables and environment, options, file mode mask, limits, descriptors, names).
pub(super) const STATE_BUILTINS: &[&str] = &[
    "cd",
    "pushd",
    "popd",
    "export",
    "unset",
    "set",
    "shopt",
    "local",
    "declare",
    "typeset",
    "readonly",
    "read",
    "getopts",
    "mapfile",
    "readarray",
    "let",
    "umask",
    "ulimit",
    "exec",
    "trap",
    "alias",
    "unalias",
    "hash",
    "enable",
    ".",
    "source",
    "shift",
    "builtin",
];

/// The commands collected so far.
#[derive(Debug, Default)]
pub(super) struct Commands {
    list: Vec<ParsedCommand>,
    /// The highest level and whether any command needs root, over every command
    /// recorded (duplicates included).
    highest: Option<RiskLevel>,
    any_root: bool,
    /// Why the list cannot stand for the line, once that is known.
    unresolved: Option<String>,
}

impl Commands {
    /// Record one simple command and its own assessment (with what runs inside it).
    pub fn record(&mut self, argv: Option<Vec<String>>, a: &Assessment) {
        self.highest = self.highest.max(Some(a.level));
        self.any_root |= a.requires_root;
        if self.unresolved.is_some() {
            return;
        }
        let argv = argv.filter(|argv| ParsedCommand::argv_bytes(argv) <= MAX_COMMAND_ARGV_BYTES);
        let command = ParsedCommand {
            argv,
            read_only: a.level == RiskLevel::ReadOnly && !a.requires_root,
        };
        // Loops are walked twice and may repeat a command exactly.
        if self.list.contains(&command) {
            return;
        }
        if self.list.len() == MAX_ACTION_COMMANDS {
            self.unresolve(format!("runs more than {MAX_ACTION_COMMANDS} commands"));
            return;
        }
        self.list.push(command);
    }

    /// The list no longer stands for the line (the first reason is kept).
    pub fn unresolve(&mut self, why: impl Into<String>) {
        if self.unresolved.is_none() {
            self.unresolved = Some(why.into());
            self.list = Vec::new();
        }
    }

    /// The list for the line assessed as `line`: `None` when it is unresolved or when the
    /// line's assessment holds more than its commands do (something outside every
    /// command raised it, so no grant on commands may cover it).
    pub fn finish(self, line: &Assessment) -> Option<Vec<ParsedCommand>> {
        if self.unresolved.is_some() {
            return None;
        }
        let highest = self.highest.unwrap_or(RiskLevel::ReadOnly);
        if line.level > highest || (line.requires_root && !self.any_root) {
            return None;
        }
        Some(self.list)
    }
}

/// The words of a command as the program gets them, when a grant may match them: every
/// word fixed text after quote removal, nothing the shell would expand.
pub(super) fn literal_argv(words: &[Word]) -> Option<Vec<String>> {
    let argv: Vec<String> = words.iter().map(literal_word).collect::<Option<_>>()?;
    let program = argv.first()?;
    if NEVER_MATCHED.contains(&program.as_str()) {
        return None;
    }
    Some(argv)
}

fn literal_word(w: &Word) -> Option<String> {
    if w.dollar_quotes {
        return None;
    }
    let text = w.literal()?;
    // Globs, `~` (also after `=` and `:`, as bash expands it in assignment-like words) and
    // brace expansion; `{}` alone is left as it is (`find -exec … {} +`).
    let expands = |c: char| matches!(c, '*' | '?' | '[' | ']' | '~' | '{' | '}' | '(' | ')');
    if (w.has_unquoted(expands) && w.plain().as_deref() != Some("{}")) || text.contains('\0') {
        return None;
    }
    // A path through `/proc/<pid>/cwd` and the like names whatever that link leads to
    // when the command runs, not what a grant's pattern says.
    if super::protect::names_magic_link(&text) {
        return None;
    }
    Some(text)
}

/// Whether a redirection is neutral as far as a grant is concerned: it duplicates or
/// closes a descriptor, or reads or writes `/dev/null`. A read of any other file (as root,
/// a private one) or a here-document is input the caller chose.
pub(super) fn redirection_keeps_files(r: &Redir) -> bool {
    let to_null = || r.target.literal().as_deref() == Some("/dev/null") && !r.target.dollar_quotes;
    let fd_or_close = || {
        r.target
            .plain()
            .is_some_and(|t| t == "-" || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())))
    };
    match r.op {
        RedirOp::Read => to_null(),
        RedirOp::HereDoc | RedirOp::HereDocStrip | RedirOp::HereString => false,
        RedirOp::DupRead | RedirOp::DupWrite => fd_or_close() || to_null(),
        RedirOp::Write
        | RedirOp::Append
        | RedirOp::Clobber
        | RedirOp::ReadWrite
        | RedirOp::WriteBoth
        | RedirOp::AppendBoth => to_null(),
    }
}

/// Whether expanding a word assigns a variable (`${X:=v}`, `${X=v}`, `$(( X = 1 ))`,
/// `$(( X++ ))`): any arithmetic counts, it is rarely needed before a granted command.
pub(super) fn word_assigns(w: &Word) -> bool {
    w.pieces.iter().any(|p| match p {
        Piece::Param(param) => {
            matches!(param.op.as_str(), "=" | ":=")
                || param.arg.iter().chain(param.index.iter()).any(word_assigns)
        }
        Piece::Arith(_) => true,
        Piece::Char { .. } | Piece::Command(_) | Piece::Process { .. } => false,
    })
}
