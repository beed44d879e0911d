//! Tokens and words of the shell language: quoting (`'…'`, `"…"`, `\`, `$'…'`),
//! expansions (`$x`, `${…}`, `$(…)`, `` `…` ``, `$((…))`, `<(…)`, `>(…)`), operators,
//! redirections with descriptor numbers, comments and here-document bodies. Nested
//! scripts are parsed on the spot by the grammar in `parser.rs`, so what they contain is
//! assessed like any other command.

use nl2sh_proto::channels::RiskLevel;

use super::ast::{HereBody, Param, Piece, RedirOp, Script, Word};
use super::parser::{Op, Parser, Tok, Token};

impl Parser {
    fn cur(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    fn at(&self, offset: usize) -> Option<char> {
        self.src.get(self.pos + offset).copied()
    }

    fn push(w: &mut Word, ch: char, quoted: bool) {
        w.pieces.push(Piece::Char { ch, quoted });
    }

    /// The next token. Blanks, line continuations and comments are skipped; a newline
    /// reads the bodies of here-documents opened on its line.
    pub(super) fn lex(&mut self) -> Token {
        loop {
            match self.cur() {
                // A carriage return is part of a word to bash; calling it a blank can only
                // make a program name match a known (riskier) one.
                Some(' ' | '\t' | '\r') => self.pos += 1,
                Some('\\') if self.at(1) == Some('\n') => self.pos += 2,
                Some('#') => {
                    while !matches!(self.cur(), None | Some('\n')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let start = self.pos;
        let tok = match self.cur() {
            None => Tok::Eof,
            Some('\n') => {
                self.pos += 1;
                self.read_here_docs();
                Tok::Newline
            }
            Some(c) => self.lex_at(c),
        };
        Token {
            tok,
            start,
            end: self.pos,
        }
    }

    fn lex_at(&mut self, c: char) -> Tok {
        if let Some(tok) = self.io_number() {
            return tok;
        }
        let next = self.at(1);
        let op = |n: usize, tok: Tok, p: &mut Parser| {
            p.pos += n;
            tok
        };
        match (c, next, self.at(2)) {
            ('<' | '>', Some('('), _) => Tok::Word(self.lex_word()),
            ('<' | '>', ..) => self.redirect(None),
            ('&', Some('&'), _) => op(2, Tok::Op(Op::And), self),
            ('&', Some('>'), _) => self.redirect(None),
            ('&', ..) => op(1, Tok::Op(Op::Amp), self),
            ('|', Some('|'), _) => op(2, Tok::Op(Op::Or), self),
            ('|', Some('&'), _) => op(2, Tok::Op(Op::PipeAll), self),
            ('|', ..) => op(1, Tok::Op(Op::Pipe), self),
            (';', Some(';'), Some('&')) => op(3, Tok::Op(Op::CaseEnd), self),
            (';', Some(';' | '&'), _) => op(2, Tok::Op(Op::CaseEnd), self),
            (';', ..) => op(1, Tok::Op(Op::Semi), self),
            ('(', ..) => op(1, Tok::Op(Op::LParen), self),
            (')', ..) => op(1, Tok::Op(Op::RParen), self),
            _ => Tok::Word(self.lex_word()),
        }
    }

    /// `2>`, `10<&`: digits directly before a redirection operator name a descriptor.
    fn io_number(&mut self) -> Option<Tok> {
        let mut end = self.pos;
        while self.src.get(end).is_some_and(char::is_ascii_digit) {
            end += 1;
        }
        if end == self.pos || !matches!(self.src.get(end), Some('<' | '>')) {
            return None;
        }
        let digits: String = self.src.get(self.pos..end)?.iter().collect();
        self.pos = end;
        Some(self.redirect(digits.parse().ok()))
    }

    fn redirect(&mut self, fd: Option<u32>) -> Tok {
        let three: String = self.src.iter().skip(self.pos).take(3).collect();
        let (len, op) = [
            ("&>>", RedirOp::AppendBoth),
            ("&>", RedirOp::WriteBoth),
            ("<<<", RedirOp::HereString),
            ("<<-", RedirOp::HereDocStrip),
            ("<<", RedirOp::HereDoc),
            ("<&", RedirOp::DupRead),
            ("<>", RedirOp::ReadWrite),
            ("<", RedirOp::Read),
            (">>", RedirOp::Append),
            (">&", RedirOp::DupWrite),
            (">|", RedirOp::Clobber),
            (">", RedirOp::Write),
        ]
        .into_iter()
        .find(|(text, _)| three.starts_with(text))
        .map_or((1, RedirOp::Write), |(text, op)| (text.len(), op));
        self.pos += len;
        Tok::Redir(fd, op)
    }

    /// An unquoted word, up to the next blank or operator.
    fn lex_word(&mut self) -> Word {
        let mut w = Word::default();
        while let Some(c) = self.cur() {
            if self.aborted {
                break;
            }
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' => break,
                '<' | '>' if self.at(1) == Some('(') => {
                    self.pos += 2;
                    let script = self.nested_script(if c == '<' { "<(" } else { ">(" });
                    w.pieces.push(Piece::Process {
                        script,
                        output: c == '>',
                    });
                }
                '<' | '>' => break,
                '\\' => match self.at(1) {
                    Some('\n') => self.pos += 2,
                    Some(n) => {
                        Self::push(&mut w, n, true);
                        self.pos += 2;
                    }
                    None => {
                        Self::push(&mut w, '\\', true);
                        self.pos += 1;
                    }
                },
                '\'' => self.single_quote(&mut w),
                '"' => {
                    self.pos += 1;
                    self.quoted(&mut w, true);
                }
                '$' => self.dollar(&mut w, false),
                '`' => self.backtick(&mut w),
                _ => {
                    Self::push(&mut w, c, false);
                    self.pos += 1;
                }
            }
        }
        w
    }

    fn single_quote(&mut self, w: &mut Word) {
        self.pos += 1;
        loop {
            match self.cur() {
                None => {
                    self.problem(RiskLevel::Medium, "unterminated single quote");
                    return;
                }
                Some('\'') => {
                    self.pos += 1;
                    return;
                }
                Some(c) => {
                    Self::push(w, c, true);
                    self.pos += 1;
                }
            }
        }
    }

    /// Double-quoted text up to the closing `"` (`in_quotes`), or text expanded like a
    /// here-document body or arithmetic up to the end of input.
    pub(super) fn quoted(&mut self, w: &mut Word, in_quotes: bool) {
        while !self.aborted {
            let Some(c) = self.cur() else {
                if in_quotes {
                    self.problem(RiskLevel::Medium, "unterminated double quote");
                }
                return;
            };
            match c {
                '"' if in_quotes => {
                    self.pos += 1;
                    return;
                }
                '\\' => match self.at(1) {
                    Some('\n') => self.pos += 2,
                    Some(n @ ('$' | '`' | '\\')) => {
                        Self::push(w, n, true);
                        self.pos += 2;
                    }
                    Some('"') if in_quotes => {
                        Self::push(w, '"', true);
                        self.pos += 2;
                    }
                    _ => {
                        Self::push(w, '\\', true);
                        self.pos += 1;
                    }
                },
                '$' => self.dollar(w, true),
                '`' => self.backtick(w),
                _ => {
                    Self::push(w, c, true);
                    self.pos += 1;
                }
            }
        }
    }

    fn dollar(&mut self, w: &mut Word, quoted: bool) {
        match self.at(1) {
            Some('(') => {
                if self.at(2) == Some('(') && self.arithmetic(w) {
                    return;
                }
                self.pos += 2;
                let script = self.nested_script("$(");
                w.pieces.push(Piece::Command(script));
            }
            Some('{') => {
                self.pos += 2;
                self.braced_param(w);
            }
            Some('\'') if !quoted => {
                self.pos += 2;
                w.dollar_quotes = true;
                self.ansi_c(w);
            }
            Some('"') if !quoted => {
                self.pos += 2;
                w.dollar_quotes = true;
                self.quoted(w, true);
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                self.pos += 1;
                let mut name = String::new();
                while let Some(c) = self
                    .cur()
                    .filter(|c| *c == '_' || c.is_ascii_alphanumeric())
                {
                    name.push(c);
                    self.pos += 1;
                }
                w.pieces.push(Piece::Param(Param {
                    name,
                    ..Param::default()
                }));
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 2;
                w.pieces.push(Piece::Param(Param {
                    name: c.to_string(),
                    ..Param::default()
                }));
            }
            _ => {
                Self::push(w, '$', quoted);
                self.pos += 1;
            }
        }
    }

    /// A script inside `$(…)`, `<(…)` or `>(…)`, up to its closing parenthesis.
    fn nested_script(&mut self, what: &str) -> Script {
        if !self.enter() {
            return Script::default();
        }
        let script = self.parse_script(&[], true);
        match self.peeked.take() {
            Some(Token {
                tok: Tok::Op(Op::RParen),
                ..
            }) => {}
            other => {
                self.peeked = other;
                if !self.aborted {
                    self.problem(RiskLevel::Medium, format!("unterminated `{what}`"));
                }
            }
        }
        self.leave();
        script
    }

    /// `$((…))` when its parentheses close as `))`; otherwise it is `$( (…) )` and the
    /// caller parses a command substitution.
    fn arithmetic(&mut self, w: &mut Word) -> bool {
        let start = self.pos + 3;
        let mut depth = 0usize;
        let mut i = start;
        let end = loop {
            match self.src.get(i) {
                None => return false,
                Some('(') => depth += 1,
                Some(')') if depth == 0 => {
                    if self.src.get(i + 1) == Some(&')') {
                        break i;
                    }
                    return false;
                }
                Some(')') => depth -= 1,
                Some(_) => {}
            }
            i += 1;
        };
        let text: String = self
            .src
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect();
        self.pos = end + 2;
        if text.contains(['\'', '"']) {
            // Quotes are not arithmetic; whatever a shell makes of them is not understood.
            self.problem(RiskLevel::Medium, "quotes inside `$((…))`");
        }
        if self.enter() {
            let inner = self.sub_text(&text);
            w.pieces.push(Piece::Arith(inner));
            self.leave();
        }
        true
    }

    /// `${name}`, `${#name}`, `${name[i]}`, `${name<op>word}`.
    fn braced_param(&mut self, w: &mut Word) {
        if !self.enter() {
            return;
        }
        let mut param = Param::default();
        if matches!(self.cur(), Some('#' | '!')) && !matches!(self.at(1), Some('}') | None) {
            param.name.extend(self.cur());
            self.pos += 1;
        }
        match self.cur() {
            Some(c) if c == '_' || c.is_ascii_alphanumeric() => {
                while let Some(c) = self
                    .cur()
                    .filter(|c| *c == '_' || c.is_ascii_alphanumeric())
                {
                    param.name.push(c);
                    self.pos += 1;
                }
            }
            Some(c) if "@*#?$!-".contains(c) => {
                param.name.push(c);
                self.pos += 1;
            }
            _ => {}
        }
        if self.cur() == Some('[') {
            self.pos += 1;
            let mut index = Word::default();
            self.param_word(&mut index, ']');
            param.index = Some(index);
        }
        while param.op.len() < 2 {
            match self.cur() {
                Some(c) if ":-=+?#%/^,@".contains(c) => {
                    param.op.push(c);
                    self.pos += 1;
                }
                _ => break,
            }
        }
        let mut arg = Word::default();
        self.param_word(&mut arg, '}');
        if !param.op.is_empty() || !arg.pieces.is_empty() {
            param.arg = Some(arg);
        }
        w.pieces.push(Piece::Param(param));
        self.leave();
    }

    /// The word inside `${…}` (or a subscript), up to an unquoted `close`.
    fn param_word(&mut self, w: &mut Word, close: char) {
        while !self.aborted {
            match self.cur() {
                None => {
                    self.problem(RiskLevel::Medium, "unterminated `${`");
                    return;
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    let c = self.at(1).unwrap_or('\\');
                    Self::push(w, c, true);
                    self.pos += 2;
                }
                Some('\'') => self.single_quote(w),
                Some('"') => {
                    self.pos += 1;
                    self.quoted(w, true);
                }
                Some('$') => self.dollar(w, true),
                Some('`') => self.backtick(w),
                Some(c) => {
                    Self::push(w, c, false);
                    self.pos += 1;
                }
            }
        }
    }

    /// `` `…` ``: backslash escapes `` ` ``, `\` and `$`; the text is then parsed as a
    /// script of its own.
    fn backtick(&mut self, w: &mut Word) {
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.cur() {
                None => {
                    self.problem(RiskLevel::Medium, "unterminated backquote");
                    break;
                }
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') if matches!(self.at(1), Some('`' | '\\' | '$')) => {
                    text.extend(self.at(1));
                    self.pos += 2;
                }
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
        if self.enter() {
            let mut p = Parser::new(&text, self.depth);
            let script = p.parse_script(&[], false);
            p.finish();
            self.absorb(p);
            w.pieces.push(Piece::Command(script));
            self.leave();
        }
    }

    /// Text expanded like a here-document body, lexed by a parser of its own.
    fn sub_text(&mut self, text: &str) -> Word {
        let mut p = Parser::new(text, self.depth);
        let mut w = Word::default();
        p.quoted(&mut w, false);
        self.absorb(p);
        w
    }

    /// `$'…'` with the escapes of bash and mksh, so `$'\x72m'` is seen as `rm`.
    fn ansi_c(&mut self, w: &mut Word) {
        loop {
            match self.cur() {
                None => {
                    self.problem(RiskLevel::Medium, "unterminated `$'`");
                    return;
                }
                Some('\'') => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    let Some(e) = self.at(1) else {
                        Self::push(w, '\\', true);
                        self.pos += 1;
                        continue;
                    };
                    self.pos += 2;
                    match self.ansi_escape(e) {
                        Some(c) => Self::push(w, c, true),
                        None => {
                            Self::push(w, '\\', true);
                            Self::push(w, e, true);
                        }
                    }
                }
                Some(c) => {
                    Self::push(w, c, true);
                    self.pos += 1;
                }
            }
        }
    }

    /// The character for `\e` (already consumed); `None` keeps the escape as written.
    fn ansi_escape(&mut self, e: char) -> Option<char> {
        let code = match e {
            'a' => 7,
            'b' => 8,
            'e' | 'E' => 27,
            'f' => 12,
            'n' => 10,
            'r' => 13,
            't' => 9,
            'v' => 11,
            '\\' | '\'' | '"' | '?' => u32::from(e),
            '0'..='7' => {
                self.pos -= 1;
                self.digits(8, 3)?
            }
            'x' => self.digits(16, 2)?,
            'u' => self.digits(16, 4)?,
            'U' => self.digits(16, 8)?,
            'c' => {
                let c = self.cur()?;
                self.pos += 1;
                u32::from(c) & 0x1f
            }
            _ => return None,
        };
        Some(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn digits(&mut self, radix: u32, max: usize) -> Option<u32> {
        let mut value: Option<u32> = None;
        for _ in 0..max {
            let Some(d) = self.cur().and_then(|c| c.to_digit(radix)) else {
                break;
            };
            value = Some(value.unwrap_or(0).saturating_mul(radix).saturating_add(d));
            self.pos += 1;
        }
        value
    }

    /// After a newline: the bodies of the here-documents opened before it, in order.
    fn read_here_docs(&mut self) {
        for pending in std::mem::take(&mut self.pending) {
            let mut text = String::new();
            let mut found = false;
            while self.pos < self.src.len() {
                let line_end = self.src[self.pos..]
                    .iter()
                    .position(|c| *c == '\n')
                    .map_or(self.src.len(), |n| self.pos + n);
                let line: String = self.src[self.pos..line_end].iter().collect();
                self.pos = (line_end + 1).min(self.src.len());
                let line = if pending.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == pending.delim {
                    found = true;
                    break;
                }
                text.push_str(line);
                text.push('\n');
            }
            if !found {
                // The shell reads the body to the end of the input.
                self.problem(
                    RiskLevel::Medium,
                    format!(
                        "here-document `{}` is not terminated",
                        shorten(&pending.delim)
                    ),
                );
            }
            if !pending.quoted && text.lines().any(|l| l.ends_with('\\')) {
                // The shell joins such lines before it looks for the delimiter.
                self.problem(
                    RiskLevel::Medium,
                    format!(
                        "here-document `{}` continues lines with `\\`",
                        shorten(&pending.delim)
                    ),
                );
            }
            let expanded = (!pending.quoted).then(|| {
                if self.enter() {
                    let w = self.sub_text(&text);
                    self.leave();
                    w
                } else {
                    Word::default()
                }
            });
            *pending.body.borrow_mut() = HereBody { text, expanded };
        }
    }
}

/// User text quoted in a reason: bounded and without control characters.
pub(super) fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    let mut out: String = text
        .chars()
        .take(MAX)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}
