//! Walks a parsed script and assesses every command that may run, wherever it may run
//! from: pipelines, lists, compound commands, substitutions, redirections.

use std::collections::HashMap;
use std::rc::Rc;

use nl2sh_proto::channels::RiskLevel::{Critical, High, Low, Medium};

use super::args::{args_of, Arg};
use super::ast::{Command, Piece, Pipeline, RedirOp, Script, Simple, Word};
use super::exec_table::ENV_VARS;
use super::lexer::shorten;
use super::parser::parse;
use super::paths::{read_level, resolve, write_level, Cwd, Resolved};
use super::{Assessment, MAX_DEPTH, TOO_DEEP};

/// Commands assessed per line, at most: past it the line is `high`, "too complex".
const MAX_STEPS: usize = 20_000;

/// Where a command's standard input comes from, for programs that run what they read.
#[derive(Debug, Clone)]
pub(super) enum Stdin {
    /// Whatever the shell got from the executor.
    Inherited,
    /// The previous command of a pipeline, or a `>(…)`.
    Pipe,
    /// The previous command of a pipeline only prints this fixed text (`echo … |`).
    Echoed(Rc<str>),
    /// `< FILE`.
    File(String),
    /// A here-document or here-string with this text (shared: a body can feed many
    /// commands of a compound command).
    Here(Rc<str>),
    /// Something computed at run time (`< $f`, `< <(…)`, `<&3`).
    Computed,
}

pub(super) struct Walker {
    pub cwd: Cwd,
    /// Fixed values assigned to variables so far (`X=rm` makes `$X` a known `rm`).
    vars: HashMap<String, String>,
    steps: usize,
}

impl Walker {
    pub fn new() -> Self {
        Walker {
            cwd: Cwd::Start,
            vars: HashMap::new(),
            steps: MAX_STEPS,
        }
    }

    /// Parse and assess a command line found `depth` levels deep.
    pub fn shell_text(&mut self, text: &str, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        if depth > MAX_DEPTH {
            a.raise(Critical, TOO_DEEP);
            return a;
        }
        if !self.step() {
            a.raise(High, "too complex to assess");
            return a;
        }
        if text.contains('\0') {
            a.raise(Medium, "contains a NUL character");
        }
        let parsed = parse(text, depth);
        for (level, problem) in parsed.problems {
            a.raise(level, problem);
        }
        a.merge(self.script(&parsed.script, depth, stdin));
        a
    }

    /// Count one unit of work; false once the budget is spent.
    pub fn step(&mut self) -> bool {
        if self.steps == 0 {
            return false;
        }
        self.steps -= 1;
        true
    }

    fn script(&mut self, script: &Script, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        for p in &script.pipelines {
            a.merge(self.pipeline(p, depth, stdin));
        }
        a
    }

    fn pipeline(&mut self, p: &Pipeline, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        let mut input = stdin.clone();
        for c in &p.commands {
            a.merge(self.command(c, depth, &input));
            input = echoed(c).map_or(Stdin::Pipe, Stdin::Echoed);
        }
        a
    }

    fn command(&mut self, c: &Command, depth: usize, stdin: &Stdin) -> Assessment {
        match c {
            Command::Simple(s) => self.simple(s, depth, stdin),
            Command::Compound {
                scripts,
                words,
                redirs,
            } => {
                let mut a = Assessment::read_only();
                let stdin = self.redirections(redirs, depth, stdin, &mut a);
                for w in words {
                    a.merge(self.substitutions(w, depth));
                }
                for s in scripts {
                    a.merge(self.script(s, depth + 1, &stdin));
                }
                a
            }
        }
    }

    fn simple(&mut self, s: &Simple, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        for w in &s.assigns {
            a.merge(self.substitutions(w, depth));
            if let Some(name) = w.assignment_name() {
                environment(&name, &mut a);
            }
        }
        if s.words.is_empty() {
            for w in &s.assigns {
                if let Some(name) = w.assignment_name() {
                    self.remember(&name, w.assignment_value());
                }
            }
        }
        let stdin = self.redirections(&s.redirs, depth, stdin, &mut a);
        let mut args = Vec::new();
        for w in &s.words {
            a.merge(self.substitutions(w, depth));
            let mut expanded = args_of(std::slice::from_ref(w));
            if let [arg] = expanded.as_mut_slice() {
                arg.candidates.extend(self.known(w));
            }
            args.extend(expanded);
        }
        a.merge(self.invoke(&args, depth, &stdin));
        a
    }

    /// Record a variable's fixed value (or forget it when the value is computed).
    pub fn remember(&mut self, name: &str, value: Option<String>) {
        const MAX_VARS: usize = 256;
        match value {
            Some(v) if self.vars.len() < MAX_VARS || self.vars.contains_key(name) => {
                self.vars.insert(name.to_string(), v);
            }
            _ => {
                self.vars.remove(name);
            }
        }
    }

    /// A word's text when every expansion in it is a variable with a known value.
    fn known(&self, w: &Word) -> Option<String> {
        let mut out = String::new();
        let mut expanded = false;
        for p in &w.pieces {
            match p {
                Piece::Char { ch, .. } => out.push(*ch),
                Piece::Param(param) if param.op.is_empty() && param.index.is_none() => {
                    out.push_str(self.vars.get(&param.name)?);
                    expanded = true;
                }
                _ => return None,
            }
        }
        expanded.then_some(out)
    }

    /// Assess the command and process substitutions in a word: they run when it is
    /// expanded, whatever the command is.
    fn substitutions(&mut self, w: &Word, depth: usize) -> Assessment {
        let mut nested = Vec::new();
        w.nested(&mut nested);
        let mut a = Assessment::read_only();
        for (script, reads_output) in nested {
            let stdin = if reads_output {
                Stdin::Pipe
            } else {
                Stdin::Inherited
            };
            a.merge(self.script(script, depth + 1, &stdin));
        }
        a
    }

    /// Assess redirections; returns the command's standard input after them.
    fn redirections(
        &mut self,
        redirs: &[super::ast::Redir],
        depth: usize,
        stdin: &Stdin,
        a: &mut Assessment,
    ) -> Stdin {
        let mut input = stdin.clone();
        for r in redirs {
            a.merge(self.substitutions(&r.target, depth));
            let mut target = Arg::from_word(&r.target);
            target.candidates.extend(self.known(&r.target));
            let fd0 = r.descriptor() == 0;
            match r.op {
                RedirOp::Write
                | RedirOp::Append
                | RedirOp::Clobber
                | RedirOp::WriteBoth
                | RedirOp::AppendBoth => a.merge(self.write_arg(&target, "redirection")),
                RedirOp::ReadWrite => {
                    a.merge(self.write_arg(&target, "redirection"));
                    if fd0 {
                        input = Stdin::Computed;
                    }
                }
                RedirOp::Read => {
                    a.merge(self.read_arg(&target, "redirection"));
                    if fd0 {
                        input = match &target.lit {
                            Some(path) if !target.process => Stdin::File(path.clone()),
                            _ => Stdin::Computed,
                        };
                    }
                }
                RedirOp::DupWrite => {
                    let text = target.text();
                    if !(text == "-" || text.chars().all(|c| c.is_ascii_digit())) {
                        a.merge(self.write_arg(&target, "redirection"));
                    }
                }
                RedirOp::DupRead => {
                    if fd0 && !target.is("0") {
                        input = Stdin::Computed;
                    }
                }
                RedirOp::HereDoc | RedirOp::HereDocStrip => {
                    if let Some(body) = &r.body {
                        let body = body.borrow();
                        if let Some(w) = &body.expanded {
                            a.merge(self.substitutions(w, depth));
                        }
                        if fd0 {
                            input = Stdin::Here(Rc::from(body.text.as_str()));
                        }
                    }
                }
                RedirOp::HereString => {
                    if fd0 {
                        input = target
                            .lit
                            .as_deref()
                            .map_or(Stdin::Computed, |text| Stdin::Here(Rc::from(text)));
                    }
                }
            }
        }
        input
    }

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
        match resolve(&text, &self.cwd) {
            Resolved::Absolute(path) => {
                let (level, why) = write_level(&path);
                a.raise(level, format!("{who} {why}"));
            }
            Resolved::Relative => a.raise(Low, format!("{who} writes {}", shorten(&text))),
            Resolved::Unknown => a.raise(
                Medium,
                format!("{who} writes {} in an unknown directory", shorten(&text)),
            ),
        }
        for candidate in &arg.candidates {
            if let Resolved::Absolute(path) = resolve(candidate, &self.cwd) {
                let (level, why) = write_level(&path);
                a.raise(level, format!("{who} {why}"));
            }
        }
        a
    }

    /// Reading the path an argument names: secrets are not read-only.
    pub fn read_arg(&self, arg: &Arg, who: &str) -> Assessment {
        let mut a = Assessment::read_only();
        let text = arg.lit.as_deref().unwrap_or(&arg.star);
        if let Resolved::Absolute(path) = resolve(text, &self.cwd) {
            if let Some((level, why)) = read_level(&path) {
                a.raise(level, format!("{who} {why}"));
            }
        }
        a
    }
}

/// Variables set for a command (or exported) that change what it runs.
pub(super) fn environment(name: &str, a: &mut Assessment) {
    if let Some((_, level, why)) = ENV_VARS.iter().find(|(n, ..)| *n == name) {
        a.raise(*level, format!("sets {name}: {why}"));
    }
}

/// The fixed text a command prints when it is a plain `echo` of fixed words.
fn echoed(c: &Command) -> Option<Rc<str>> {
    let Command::Simple(s) = c else {
        return None;
    };
    if !s.redirs.is_empty() {
        return None;
    }
    let words: Option<Vec<String>> = s.words.iter().map(Word::literal).collect();
    let words = words?;
    let (first, rest) = words.split_first()?;
    if first != "echo" {
        return None;
    }
    let rest: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .skip_while(|w| matches!(*w, "-n" | "-e" | "-E"))
        .collect();
    Some(Rc::from(rest.join(" ")))
}
