//! The syntax tree of a shell command line, as far as risk assessment needs it: which
//! commands run, with which words, redirections and nested scripts. Control flow is kept
//! only as "these lists may run", because any of them may.

use std::cell::RefCell;
use std::rc::Rc;

/// A list of pipelines (joined by `;`, `&`, `&&`, `||` or newlines; how does not matter:
/// every one of them may run).
#[derive(Debug, Default)]
pub(super) struct Script {
    pub pipelines: Vec<Pipeline>,
}

impl Script {
    pub fn of(command: Command) -> Self {
        Script {
            pipelines: vec![Pipeline {
                commands: vec![command],
                background: false,
                pipe_all: false,
            }],
        }
    }
}

/// Commands joined by `|`: each one after the first reads the previous one's output.
#[derive(Debug, Default)]
pub(super) struct Pipeline {
    pub commands: Vec<Command>,
    /// Started with `&`: it runs in the background and may outlive the line.
    pub background: bool,
    /// Joined by `|&` somewhere: bash pipes standard error too, mksh starts what is left
    /// of it as a co-process, in the background.
    pub pipe_all: bool,
}

#[derive(Debug)]
pub(super) enum Command {
    Simple(Simple),
    /// Subshell, group, `if`/`while`/`until`/`for`/`case`/`select`, `[[ ]]` and function
    /// bodies: lists that may run, words that are expanded (so their substitutions run),
    /// and redirections that apply to all of it.
    Compound {
        scripts: Vec<Script>,
        words: Vec<Word>,
        redirs: Vec<Redir>,
        kind: Kind,
    },
}

/// What a compound command is, as far as it matters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Kind {
    /// Group, `if`, `case`, `[[ ]]`: each list runs at most once.
    #[default]
    Group,
    /// `( … )`: like a group, in a subshell (its `cd` and variables do not last).
    Subshell,
    /// `while`/`until`/`for`/`select`: the lists may run many times; `for` and `select`
    /// assign the named variable.
    Loop(Option<String>),
    /// A function definition: the body runs when the function is called.
    Function,
}

/// `NAME=value … program args … redirections`.
#[derive(Debug, Default)]
pub(super) struct Simple {
    pub assigns: Vec<Word>,
    pub words: Vec<Word>,
    pub redirs: Vec<Redir>,
}

impl Simple {
    pub fn is_empty(&self) -> bool {
        self.assigns.is_empty() && self.words.is_empty() && self.redirs.is_empty()
    }
}

#[derive(Debug)]
pub(super) struct Redir {
    /// The explicit descriptor (`2>`), if any.
    pub fd: Option<u32>,
    pub op: RedirOp,
    pub target: Word,
    /// The here-document body, filled in when the lexer reaches it (after the next newline).
    pub body: Option<Rc<RefCell<HereBody>>>,
}

impl Redir {
    /// The descriptor this redirection changes.
    pub fn descriptor(&self) -> u32 {
        self.fd.unwrap_or(match self.op {
            RedirOp::Read
            | RedirOp::ReadWrite
            | RedirOp::DupRead
            | RedirOp::HereDoc
            | RedirOp::HereDocStrip
            | RedirOp::HereString => 0,
            _ => 1,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirOp {
    /// `<`
    Read,
    /// `>`
    Write,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `<&`
    DupRead,
    /// `>&`
    DupWrite,
    /// `&>`
    WriteBoth,
    /// `&>>`
    AppendBoth,
    /// `<<`
    HereDoc,
    /// `<<-`
    HereDocStrip,
    /// `<<<`
    HereString,
}

impl RedirOp {
    pub fn text(self) -> &'static str {
        match self {
            RedirOp::Read => "<",
            RedirOp::Write => ">",
            RedirOp::Append => ">>",
            RedirOp::Clobber => ">|",
            RedirOp::ReadWrite => "<>",
            RedirOp::DupRead => "<&",
            RedirOp::DupWrite => ">&",
            RedirOp::WriteBoth => "&>",
            RedirOp::AppendBoth => "&>>",
            RedirOp::HereDoc => "<<",
            RedirOp::HereDocStrip => "<<-",
            RedirOp::HereString => "<<<",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct HereBody {
    /// The body as written (what a shell reading it as a script would see).
    pub text: String,
    /// The body lexed for expansions when the delimiter was unquoted: its command
    /// substitutions run when the redirection is set up.
    pub expanded: Option<Word>,
}

/// One shell word: characters (remembering which were quoted) and expansions.
#[derive(Debug, Default)]
pub(super) struct Word {
    pub pieces: Vec<Piece>,
    /// It holds `$'…'` or `$"…"`, read here as bash and mksh read them; dash reads a `$`
    /// and a quoted string, so its text depends on the shell.
    pub dollar_quotes: bool,
}

#[derive(Debug)]
pub(super) enum Piece {
    Char {
        ch: char,
        quoted: bool,
    },
    /// `$name`, `${name…}`.
    Param(Param),
    /// `$(…)` or `` `…` ``.
    Command(Script),
    /// `<(…)` (`output == false`) or `>(…)` (its script reads what is written to it).
    Process {
        script: Script,
        output: bool,
    },
    /// `$((…))`; the word holds any substitutions inside.
    Arith(Word),
}

#[derive(Debug, Default)]
pub(super) struct Param {
    pub name: String,
    /// The operator of `${name<op>arg}` (`:-`, `#`, `//`, …), empty for `$name`.
    pub op: String,
    pub arg: Option<Word>,
    /// An array subscript, which bash evaluates (and may run substitutions in).
    pub index: Option<Word>,
}

impl Param {
    /// The value used when the variable is unset or empty, for the operators that have one.
    pub fn default_word(&self) -> Option<&Word> {
        match self.op.as_str() {
            ":-" | "-" | ":=" | "=" => self.arg.as_ref(),
            _ => None,
        }
    }
}

impl Word {
    /// The text after quote removal, or `None` when any part is expanded at run time.
    pub fn literal(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Char { ch, .. } => Some(*ch),
                _ => None,
            })
            .collect()
    }

    /// The text when every character is unquoted and literal: only such words can be
    /// reserved words (`if`, `{`, …) or assignments.
    pub fn plain(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Char { ch, quoted: false } => Some(*ch),
                _ => None,
            })
            .collect()
    }

    /// The variable name when the word is an assignment (`NAME=…`, `NAME+=…`, and
    /// bash's `NAME[SUBSCRIPT]=…`, which assigns an element of `NAME`).
    pub fn assignment_name(&self) -> Option<String> {
        let mut name = String::new();
        let mut subscript = false;
        for p in &self.pieces {
            match p {
                Piece::Char {
                    ch: '=',
                    quoted: false,
                } if !name.is_empty() && !subscript => {
                    let name = name.strip_suffix('+').unwrap_or(&name);
                    let name = match name.split_once('[') {
                        Some((base, rest)) if rest.ends_with(']') => base,
                        Some(_) => return None,
                        None => name,
                    };
                    return is_name(name).then(|| name.to_string());
                }
                Piece::Char {
                    ch: '[',
                    quoted: false,
                } if !name.is_empty() && !name.contains('[') => {
                    subscript = true;
                    name.push('[');
                }
                Piece::Char {
                    ch: ']',
                    quoted: false,
                } if subscript => {
                    subscript = false;
                    name.push(']');
                }
                // The subscript may hold anything (it is evaluated).
                _ if subscript => name.push('?'),
                Piece::Char { ch, quoted: false } => name.push(*ch),
                _ => return None,
            }
        }
        None
    }

    /// The fixed value of an assignment word (`NAME=value`), if it has one.
    pub fn assignment_value(&self) -> Option<String> {
        let at = self.pieces.iter().position(|p| {
            matches!(
                p,
                Piece::Char {
                    ch: '=',
                    quoted: false
                }
            )
        })?;
        self.pieces
            .get(at + 1..)?
            .iter()
            .map(|p| match p {
                Piece::Char { ch, .. } => Some(*ch),
                _ => None,
            })
            .collect()
    }

    /// Whether an unquoted character satisfies `pred`.
    pub fn has_unquoted(&self, pred: impl Fn(char) -> bool) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Char { ch, quoted: false } if pred(*ch)))
    }

    /// Every script nested in this word (command and process substitutions, also inside
    /// `${…}` and `$((…))`), with whether it reads what the command writes (`>(…)`).
    pub fn nested<'a>(&'a self, out: &mut Vec<(&'a Script, bool)>) {
        for p in &self.pieces {
            match p {
                Piece::Char { .. } => {}
                Piece::Param(param) => {
                    for w in param.arg.iter().chain(param.index.iter()) {
                        w.nested(out);
                    }
                }
                Piece::Command(s) => out.push((s, false)),
                Piece::Process { script, output } => out.push((script, *output)),
                Piece::Arith(w) => w.nested(out),
            }
        }
    }
}

/// A shell variable name.
pub(super) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}
