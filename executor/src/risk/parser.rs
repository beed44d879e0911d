//! Grammar of the shell command language: POSIX plus the bash/mksh forms agents send
//! (`[[ ]]`, `function`, arrays, `|&`, `;&`). The parser never fails: what it cannot make
//! sense of becomes a problem with a risk level, and parsing goes on, so that everything
//! that might still run is assessed. Tokens come from `lexer.rs`.

use std::cell::RefCell;
use std::rc::Rc;

use nl2sh_proto::channels::RiskLevel;

use super::ast::{Command, HereBody, Kind, Piece, Pipeline, Redir, RedirOp, Script, Simple, Word};
use super::lexer::shorten;
use super::MAX_DEPTH;

/// Problems kept per parse; more say nothing new.
const MAX_PROBLEMS: usize = 16;

/// The result of parsing one command line.
pub(super) struct Parsed {
    pub script: Script,
    /// What the parser did not understand, with the least risk to assume for it.
    pub problems: Vec<(RiskLevel, String)>,
}

/// Parse `text` found `depth` levels deep (nesting counts towards [`MAX_DEPTH`]).
pub(super) fn parse(text: &str, depth: usize) -> Parsed {
    let mut p = Parser::new(text, depth);
    let script = p.parse_script(&[], false);
    p.finish();
    Parsed {
        script,
        problems: p.problems,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Pipe,
    /// `|&`
    PipeAll,
    And,
    Or,
    Semi,
    Amp,
    /// `;;`, `;&`, `;;&`
    CaseEnd,
    LParen,
    RParen,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Pipe => "|",
            Op::PipeAll => "|&",
            Op::And => "&&",
            Op::Or => "||",
            Op::Semi => ";",
            Op::Amp => "&",
            Op::CaseEnd => ";;",
            Op::LParen => "(",
            Op::RParen => ")",
        }
    }
}

#[derive(Debug)]
pub(super) enum Tok {
    Word(Word),
    Op(Op),
    Redir(Option<u32>, RedirOp),
    Newline,
    Eof,
}

#[derive(Debug)]
pub(super) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

/// What the next token is, cheap to copy around while deciding.
#[derive(Debug, Clone, PartialEq)]
enum Look {
    Eof,
    Newline,
    Op(Op),
    Redir,
    /// A word; the text when it is plain (could be a reserved word).
    Word(Option<String>),
}

/// A here-document whose body starts after the next newline.
pub(super) struct Pending {
    pub delim: String,
    pub strip_tabs: bool,
    pub quoted: bool,
    pub body: Rc<RefCell<HereBody>>,
}

pub(super) struct Parser {
    pub src: Vec<char>,
    pub pos: usize,
    pub peeked: Option<Token>,
    pub pending: Vec<Pending>,
    pub depth: usize,
    pub problems: Vec<(RiskLevel, String)>,
    /// Set when nesting got too deep: everything after is skipped.
    pub aborted: bool,
}

impl Parser {
    pub fn new(text: &str, depth: usize) -> Self {
        Parser {
            src: text.chars().collect(),
            pos: 0,
            peeked: None,
            pending: Vec::new(),
            depth,
            problems: Vec::new(),
            aborted: false,
        }
    }

    pub fn problem(&mut self, level: RiskLevel, msg: impl Into<String>) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push((level, msg.into()));
        }
    }

    /// Stop parsing: the rest of the input is skipped (and assessed by the problem alone).
    pub fn abort(&mut self, level: RiskLevel, msg: &str) {
        if !self.aborted {
            self.problem(level, msg);
        }
        self.aborted = true;
        self.pos = self.src.len();
        self.peeked = None;
        self.pending.clear();
    }

    /// One level deeper; false (and aborted) past [`MAX_DEPTH`].
    pub fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.abort(RiskLevel::Critical, "too deeply nested to assess");
            return false;
        }
        true
    }

    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Take over the problems (and an abort) of a parser run on a nested text.
    pub fn absorb(&mut self, other: Parser) {
        for (level, msg) in other.problems {
            self.problem(level, msg);
        }
        if other.aborted {
            self.aborted = true;
            self.pos = self.src.len();
            self.peeked = None;
            self.pending.clear();
        }
    }

    /// End of input: here-documents still waiting never got a body.
    pub fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.problem(RiskLevel::Medium, "here-document without a body");
        }
    }

    fn look(&mut self) -> Look {
        if self.peeked.is_none() {
            let t = self.lex();
            self.peeked = Some(t);
        }
        match self.peeked.as_ref().map(|t| &t.tok) {
            None | Some(Tok::Eof) => Look::Eof,
            Some(Tok::Newline) => Look::Newline,
            Some(Tok::Op(op)) => Look::Op(*op),
            Some(Tok::Redir(..)) => Look::Redir,
            Some(Tok::Word(w)) => Look::Word(w.plain()),
        }
    }

    fn take(&mut self) -> Token {
        match self.peeked.take() {
            Some(t) => t,
            None => self.lex(),
        }
    }

    fn peek_start(&mut self) -> usize {
        self.look();
        self.peeked.as_ref().map_or(self.pos, |t| t.start)
    }

    fn take_word(&mut self) -> Option<Word> {
        match self.look() {
            Look::Word(_) => match self.take().tok {
                Tok::Word(w) => Some(w),
                _ => None,
            },
            _ => None,
        }
    }

    fn is_keyword(&mut self, kw: &str) -> bool {
        matches!(self.look(), Look::Word(Some(k)) if k == kw)
    }

    fn skip_newlines(&mut self) {
        while self.look() == Look::Newline {
            self.take();
        }
    }

    fn expect_keyword(&mut self, kw: &str) -> bool {
        if self.is_keyword(kw) {
            self.take();
            return true;
        }
        self.problem(RiskLevel::Medium, format!("missing `{kw}`"));
        false
    }

    fn expect_rparen(&mut self, what: &str) {
        if self.look() == Look::Op(Op::RParen) {
            self.take();
        } else {
            self.problem(RiskLevel::Medium, format!("unterminated `{what}`"));
        }
    }

    /// A list up to a reserved word in `stops` (`";;"` stands for the case terminators),
    /// or an unmatched `)` when `paren`, or the end.
    pub fn parse_script(&mut self, stops: &[&str], paren: bool) -> Script {
        let mut script = Script::default();
        while !self.aborted {
            match self.look() {
                Look::Eof => break,
                Look::Newline | Look::Op(Op::Semi | Op::Amp) => {
                    self.take();
                }
                Look::Op(Op::RParen) if paren => break,
                Look::Op(Op::CaseEnd) if stops.contains(&";;") => break,
                Look::Word(Some(k)) if stops.contains(&k.as_str()) => break,
                Look::Op(op @ (Op::RParen | Op::CaseEnd)) => {
                    self.take();
                    self.problem(RiskLevel::Medium, format!("unexpected `{}`", op.text()));
                }
                _ => {
                    let start = script.pipelines.len();
                    self.parse_and_or(&mut script);
                    if self.look() == Look::Op(Op::Amp) {
                        for p in script.pipelines.iter_mut().skip(start) {
                            p.background = true;
                        }
                    }
                }
            }
        }
        script
    }

    fn parse_and_or(&mut self, script: &mut Script) {
        loop {
            let p = self.parse_pipeline();
            script.pipelines.push(p);
            match self.look() {
                Look::Op(Op::And | Op::Or) => {
                    self.take();
                    self.skip_newlines();
                }
                _ => break,
            }
        }
    }

    fn parse_pipeline(&mut self) -> Pipeline {
        let mut p = Pipeline::default();
        if self.is_keyword("!") {
            self.take();
        }
        loop {
            p.commands.push(self.parse_command());
            match self.look() {
                Look::Op(op @ (Op::Pipe | Op::PipeAll)) => {
                    p.pipe_all |= op == Op::PipeAll;
                    self.take();
                    self.skip_newlines();
                }
                _ => break,
            }
        }
        p
    }

    fn parse_command(&mut self) -> Command {
        let keyword = match self.look() {
            Look::Op(Op::LParen) => Some("(".to_string()),
            Look::Word(k) => k,
            _ => None,
        };
        let mut parts = Parts::default();
        match keyword.as_deref() {
            Some("(") => self.subshell(&mut parts),
            Some("{") => self.block(&mut parts, "}"),
            Some("if") => self.if_clause(&mut parts),
            Some("while" | "until") => self.loop_clause(&mut parts),
            Some("for" | "select") => self.for_clause(&mut parts),
            Some("case") => self.case_clause(&mut parts),
            Some("[[") => self.test_clause(&mut parts),
            Some("function") => return self.function_keyword(),
            Some(k @ ("}" | "then" | "else" | "elif" | "fi" | "do" | "done" | "esac")) => {
                let k = k.to_string();
                self.take();
                self.problem(RiskLevel::Medium, format!("unexpected `{k}`"));
                return Command::Simple(Simple::default());
            }
            _ => return self.parse_simple(),
        }
        while self.look() == Look::Redir {
            let r = self.parse_redir();
            parts.redirs.push(r);
        }
        Command::Compound {
            scripts: parts.scripts,
            words: parts.words,
            redirs: parts.redirs,
            kind: parts.kind,
        }
    }

    fn subshell(&mut self, parts: &mut Parts) {
        self.take();
        parts.kind = Kind::Subshell;
        if self.enter() {
            parts.scripts.push(self.parse_script(&[], true));
            self.expect_rparen("(");
            self.leave();
        }
    }

    fn block(&mut self, parts: &mut Parts, close: &str) {
        self.take();
        if self.enter() {
            parts.scripts.push(self.parse_script(&[close], false));
            self.expect_keyword(close);
            self.leave();
        }
    }

    fn if_clause(&mut self, parts: &mut Parts) {
        self.take();
        if !self.enter() {
            return;
        }
        loop {
            parts.scripts.push(self.parse_script(&["then"], false));
            if !self.expect_keyword("then") {
                break;
            }
            parts
                .scripts
                .push(self.parse_script(&["elif", "else", "fi"], false));
            if self.is_keyword("elif") {
                self.take();
                continue;
            }
            if self.is_keyword("else") {
                self.take();
                parts.scripts.push(self.parse_script(&["fi"], false));
            }
            self.expect_keyword("fi");
            break;
        }
        self.leave();
    }

    fn loop_clause(&mut self, parts: &mut Parts) {
        self.take();
        parts.kind = Kind::Loop(None);
        if self.enter() {
            parts.scripts.push(self.parse_script(&["do"], false));
            self.do_group(parts);
            self.leave();
        }
    }

    fn do_group(&mut self, parts: &mut Parts) {
        if self.expect_keyword("do") {
            parts.scripts.push(self.parse_script(&["done"], false));
            self.expect_keyword("done");
        }
    }

    fn for_clause(&mut self, parts: &mut Parts) {
        self.take();
        parts.kind = Kind::Loop(None);
        if !self.enter() {
            return;
        }
        if self.look() == Look::Op(Op::LParen) {
            // Arithmetic `for ((…))`: keep its words (substitutions run), skip the rest.
            while !matches!(self.look(), Look::Eof) && !self.is_keyword("do") {
                if let Tok::Word(w) = self.take().tok {
                    parts.words.push(w);
                }
            }
        } else if let Some(var) = self.take_word() {
            // A name the shell cannot take fails the loop; an unusual one is kept as written.
            let name = var.literal().unwrap_or_else(|| "?".into());
            parts.kind = Kind::Loop(Some(name));
            self.skip_newlines();
            if self.is_keyword("in") {
                self.take();
                while let Some(w) = self.take_word() {
                    parts.words.push(w);
                }
            }
            if matches!(self.look(), Look::Op(Op::Semi)) {
                self.take();
            }
        } else {
            self.problem(RiskLevel::Medium, "`for` without a variable name");
        }
        self.skip_newlines();
        self.do_group(parts);
        self.leave();
    }

    fn case_clause(&mut self, parts: &mut Parts) {
        self.take();
        if !self.enter() {
            return;
        }
        match self.take_word() {
            Some(w) => parts.words.push(w),
            None => self.problem(RiskLevel::Medium, "`case` without a word"),
        }
        self.skip_newlines();
        if self.expect_keyword("in") {
            self.case_items(parts);
        }
        self.leave();
    }

    fn case_items(&mut self, parts: &mut Parts) {
        loop {
            self.skip_newlines();
            match self.look() {
                Look::Eof => {
                    self.problem(RiskLevel::Medium, "missing `esac`");
                    return;
                }
                Look::Word(Some(k)) if k == "esac" => {
                    self.take();
                    return;
                }
                Look::Op(Op::LParen) => {
                    self.take();
                }
                _ => {}
            }
            loop {
                match self.look() {
                    Look::Word(_) => {
                        if let Tok::Word(w) = self.take().tok {
                            parts.words.push(w);
                        }
                    }
                    Look::Op(Op::Pipe) => {
                        self.take();
                    }
                    Look::Op(Op::RParen) => {
                        self.take();
                        break;
                    }
                    Look::Eof => break,
                    _ => {
                        self.take();
                        self.problem(RiskLevel::Medium, "malformed `case` pattern");
                        break;
                    }
                }
            }
            parts
                .scripts
                .push(self.parse_script(&[";;", "esac"], false));
            if self.look() == Look::Op(Op::CaseEnd) {
                self.take();
            }
        }
    }

    /// `[[ … ]]`: `<`, `>`, `&&`, `(` inside are operators of the test, not the shell.
    fn test_clause(&mut self, parts: &mut Parts) {
        self.take();
        loop {
            match self.look() {
                Look::Eof => {
                    self.problem(RiskLevel::Medium, "missing `]]`");
                    return;
                }
                Look::Word(Some(k)) if k == "]]" => {
                    self.take();
                    return;
                }
                _ => {
                    if let Tok::Word(w) = self.take().tok {
                        parts.words.push(w);
                    }
                }
            }
        }
    }

    fn function_keyword(&mut self) -> Command {
        self.take();
        if self.take_word().is_none() {
            self.problem(RiskLevel::Medium, "`function` without a name");
        }
        if self.look() == Look::Op(Op::LParen) {
            self.take();
            self.expect_rparen("(");
        }
        self.function_body()
    }

    /// `name() body`: the body is assessed as if it ran (a later call may run it).
    fn function_body(&mut self) -> Command {
        self.skip_newlines();
        if !self.enter() {
            return Command::Simple(Simple::default());
        }
        let body = self.parse_command();
        self.leave();
        Command::Compound {
            scripts: vec![Script::of(body)],
            words: Vec::new(),
            redirs: Vec::new(),
            kind: Kind::Function,
        }
    }

    fn parse_simple(&mut self) -> Command {
        let mut s = Simple::default();
        while !self.aborted {
            match self.look() {
                Look::Word(_) => {
                    let t = self.take();
                    let Tok::Word(w) = t.tok else { break };
                    if s.words.is_empty() && w.assignment_name().is_some() {
                        s.assigns.push(w);
                        self.array_assignment(&mut s, t.end);
                        continue;
                    }
                    s.words.push(w);
                    if s.words.len() == 1
                        && s.assigns.is_empty()
                        && s.redirs.is_empty()
                        && self.look() == Look::Op(Op::LParen)
                    {
                        self.take();
                        self.expect_rparen("(");
                        return self.function_body();
                    }
                }
                Look::Redir => {
                    let r = self.parse_redir();
                    s.redirs.push(r);
                }
                Look::Op(Op::LParen) => {
                    self.take();
                    self.problem(RiskLevel::Medium, "unexpected `(`");
                }
                _ => break,
            }
        }
        if s.is_empty() && !self.aborted {
            self.problem(RiskLevel::Medium, "missing command");
        }
        Command::Simple(s)
    }

    /// bash `name=(a b c)`: the elements are expanded like arguments.
    fn array_assignment(&mut self, s: &mut Simple, word_end: usize) {
        if self.look() != Look::Op(Op::LParen) || self.peek_start() != word_end {
            return;
        }
        self.take();
        loop {
            match self.look() {
                Look::Word(_) => {
                    if let Some(w) = self.take_word() {
                        s.assigns.push(w);
                    }
                }
                Look::Newline => {
                    self.take();
                }
                Look::Op(Op::RParen) => {
                    self.take();
                    return;
                }
                _ => {
                    self.problem(RiskLevel::Medium, "unterminated array assignment");
                    return;
                }
            }
        }
    }

    fn parse_redir(&mut self) -> Redir {
        let (fd, op) = match self.take().tok {
            Tok::Redir(fd, op) => (fd, op),
            _ => (None, RedirOp::Read),
        };
        if !matches!(self.look(), Look::Word(_)) {
            self.problem(
                RiskLevel::Medium,
                format!("redirection `{}` without a target", op.text()),
            );
            return Redir {
                fd,
                op,
                target: Word::default(),
                body: None,
            };
        }
        let t = self.take();
        let target = match t.tok {
            Tok::Word(w) => w,
            _ => Word::default(),
        };
        let body = matches!(op, RedirOp::HereDoc | RedirOp::HereDocStrip)
            .then(|| self.register_here_doc(&target, t.start, t.end, op == RedirOp::HereDocStrip));
        Redir {
            fd,
            op,
            target,
            body,
        }
    }

    /// The delimiter is the word after quote removal (`E\OF`, `'EOF'`, `E"O"F` are all
    /// `EOF`); quoting it anywhere turns off expansion in the body. A delimiter with
    /// expansions in it (`$X`, `$'…'`) is taken as written, and is not understood.
    fn register_here_doc(
        &mut self,
        target: &Word,
        start: usize,
        end: usize,
        strip_tabs: bool,
    ) -> Rc<RefCell<HereBody>> {
        let raw: String = self
            .src
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect();
        let quoted = target
            .pieces
            .iter()
            .any(|p| !matches!(p, Piece::Char { quoted: false, .. }));
        let delim = match target.literal() {
            Some(delim) if !raw.contains(['$', '`']) => delim,
            _ => {
                self.problem(
                    RiskLevel::Medium,
                    format!(
                        "here-document delimiter `{}` is not understood",
                        shorten(&raw)
                    ),
                );
                raw
            }
        };
        let body = Rc::new(RefCell::new(HereBody::default()));
        self.pending.push(Pending {
            delim,
            strip_tabs,
            quoted,
            body: Rc::clone(&body),
        });
        body
    }
}

/// The pieces of a compound command as they are parsed.
#[derive(Default)]
struct Parts {
    scripts: Vec<Script>,
    words: Vec<Word>,
    redirs: Vec<Redir>,
    kind: Kind,
}
