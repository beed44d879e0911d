//! Walks a parsed script and assesses every command that may run, wherever it may run
//! from: pipelines, lists, compound commands, substitutions, redirections.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use nl2sh_proto::channels::RiskLevel::{self, Critical, High, Low, Medium};

use super::args::{args_of, Arg};
use super::ast::{Command, Kind, Piece, Pipeline, RedirOp, Script, Simple, Word};
use super::commands::{self, Commands, STATE_BUILTINS};
use super::exec_table::{ENV_COMMANDS, ENV_PREFIXES, ENV_VARS};
use super::parser::parse;
use super::paths::Cwd;
use super::protect::Protected;
use super::taint;
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
    /// Variables whose value is no longer certain (assigned twice, in a loop, by a
    /// builtin): they stay unknown.
    unsure: HashSet<String>,
    /// Working directories that may still be in effect besides `cwd`: a `cd` may fail
    /// or sit in a branch that does not run.
    pub cwd_before: Vec<Cwd>,
    /// nl2sh's own files.
    pub protected: Protected,
    /// Why the programs later words name can no longer be known (an alias, a function,
    /// `PATH` changed), once that happened.
    pub taint: Option<String>,
    /// A `trap` was set: its action runs at the end, after everything else.
    pub trapped: bool,
    /// Something changed the shell's variables, environment or settings: later
    /// commands may not be what their words say (see [`commands`]).
    pub state_changed: bool,
    /// Every command the line runs, for scoped grants.
    pub commands: Commands,
}

impl Walker {
    pub fn new(protected: &Protected) -> Self {
        Walker {
            cwd: Cwd::Start,
            vars: HashMap::new(),
            steps: MAX_STEPS,
            unsure: HashSet::new(),
            cwd_before: Vec::new(),
            protected: protected.clone(),
            taint: None,
            trapped: false,
            state_changed: false,
            commands: Commands::default(),
        }
    }

    /// Assess a whole command line.
    pub fn line(&mut self, line: &str) -> Assessment {
        let mut a = self.shell_text(line, 0, &Stdin::Inherited);
        if let (true, Some(why)) = (self.trapped, &self.taint) {
            a.raise(Medium, format!("a trap action runs after {why}"));
            self.commands
                .unresolve("a trap action runs after the line changed");
        }
        a
    }

    /// Run `f` as code that runs in a subshell or later (`$(…)`, `( … )`, a pipeline's
    /// commands, a trap action): its `cd` and assignments do not change what follows.
    pub fn detached<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let cwd = self.cwd.clone();
        let cwd_before = self.cwd_before.clone();
        let vars = self.vars.clone();
        let out = f(self);
        self.cwd = cwd;
        self.cwd_before = cwd_before;
        self.vars = vars;
        out
    }

    /// Change the working directory; the old one may still be in effect (the `cd` may
    /// fail or not run).
    pub fn change_dir(&mut self, to: Cwd) {
        const MAX_DIRS: usize = 8;
        let old = std::mem::replace(&mut self.cwd, to);
        if old != self.cwd && !self.cwd_before.contains(&old) {
            self.cwd_before.push(old);
        }
        if self.cwd_before.len() > MAX_DIRS {
            self.cwd_before = vec![Cwd::Unknown];
        }
    }

    /// From here on, program names are not known (the first reason is kept).
    pub fn set_taint(&mut self, why: impl Into<String>) {
        if self.taint.is_none() {
            self.taint = Some(why.into());
        }
    }

    /// Whether one more step `depth` levels deep is within the assessment's bounds; if
    /// not, `a` says why (too deep is critical, too many steps high) and nothing that
    /// follows is resolved.
    pub(super) fn within_bounds(&mut self, depth: usize, a: &mut Assessment) -> bool {
        if depth > MAX_DEPTH {
            a.raise(Critical, TOO_DEEP);
            self.commands.unresolve(TOO_DEEP);
            return false;
        }
        if !self.step() {
            a.raise(High, "too complex to assess");
            self.commands.unresolve("too complex to assess");
            return false;
        }
        true
    }

    /// Parse and assess a command line found `depth` levels deep.
    pub fn shell_text(&mut self, text: &str, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        if !self.within_bounds(depth, &mut a) {
            return a;
        }
        if text.contains('\0') {
            a.raise(Medium, "contains a NUL character");
            self.commands.unresolve("contains a NUL character");
        }
        if text.contains('\r') {
            // The lexer splits words at it; the shell does not.
            self.commands.unresolve("contains a carriage return");
        }
        let parsed = parse(text, depth);
        for (level, problem) in parsed.problems {
            self.commands.unresolve(problem.as_str());
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
            if self.steps == 0 {
                // Loops are walked twice: the budget also bounds nested ones.
                a.raise(High, "too complex to assess");
                self.commands.unresolve("too complex to assess");
                break;
            }
            a.merge(self.pipeline(p, depth, stdin));
        }
        a
    }

    fn pipeline(&mut self, p: &Pipeline, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        if p.background {
            a.raise(Low, "runs in the background, may outlive the call");
            self.commands.unresolve("runs in the background");
        }
        if p.pipe_all {
            self.commands
                .unresolve("`|&` starts a co-process in mksh (in the background)");
        }
        // The commands of a pipeline, and a background one, run in subshells.
        let apart = p.background || p.commands.len() > 1;
        let mut input = stdin.clone();
        for c in &p.commands {
            let b = if apart {
                self.detached(|w| w.command(c, depth, &input))
            } else {
                self.command(c, depth, &input)
            };
            a.merge(b);
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
                kind,
            } => {
                let mut a = Assessment::read_only();
                let stdin = self.redirections(redirs, depth, stdin, &mut a);
                if a.level > RiskLevel::ReadOnly
                    || a.requires_root
                    || !redirs.iter().all(commands::redirection_keeps_files)
                {
                    // What they write is no command's doing.
                    self.commands
                        .unresolve("a redirection of a compound command writes");
                }
                let mut worded = Assessment::read_only();
                for w in words {
                    worded.merge(self.substitutions(w, depth));
                }
                if !words.is_empty() {
                    // `case`, `[[`, `for`: the shell evaluates these words itself (`[[ $x
                    // -eq 1 ]]` reads `$x` as arithmetic), so they are a command of their
                    // own, one no grant matches.
                    self.commands.record(None, &worded);
                }
                a.merge(worded);
                let passes = match kind {
                    Kind::Group => 1,
                    Kind::Subshell => {
                        return self.detached(|w| {
                            for s in scripts {
                                a.merge(w.script(s, depth + 1, &stdin));
                            }
                            a
                        });
                    }
                    Kind::Function => {
                        self.set_taint("a function definition (a later word may call it)");
                        1
                    }
                    Kind::Loop(var) => {
                        // A grant names one run of a command, not as many as a loop makes
                        // (`while true; do am start …; done` until the timeout).
                        self.commands.unresolve("runs in a loop");
                        if let Some(why) = var.as_deref().and_then(taint::name_taints) {
                            self.set_taint(why);
                        }
                        if let Some(var) = var {
                            self.state_changed = true;
                            self.remember(var, None);
                        }
                        // A second pass sees what the first iteration changed.
                        2
                    }
                };
                for _ in 0..passes {
                    for s in scripts {
                        a.merge(self.script(s, depth + 1, &stdin));
                    }
                }
                a
            }
        }
    }

    fn simple(&mut self, s: &Simple, depth: usize, stdin: &Stdin) -> Assessment {
        // Whether a grant may match this command is decided by what ran before it.
        let unchanged = self.taint.is_none()
            && !self.state_changed
            && self.cwd == Cwd::Start
            && self.cwd_before.is_empty();
        let mut a = Assessment::read_only();
        if !s.assigns.is_empty() {
            // Even before a program, an assignment may last (POSIX special builtins) or
            // change an exported variable.
            self.state_changed = true;
        }
        for w in &s.assigns {
            a.merge(self.substitutions(w, depth));
            let value = w.assignment_value();
            if let Some(name) = w.assignment_name() {
                self.environment(&name, value.as_deref(), depth, &mut a);
            }
            if let Some(value) = &value {
                self.touch_text(value, &mut a);
            }
        }
        if s.words.is_empty() {
            for w in &s.assigns {
                if let Some(name) = w.assignment_name() {
                    self.remember(&name, w.assignment_value());
                }
            }
        }
        let mut redirected = Assessment::read_only();
        let stdin = self.redirections(&s.redirs, depth, stdin, &mut redirected);
        let redirections_keep_files = redirected.level == RiskLevel::ReadOnly
            && !redirected.requires_root
            && s.redirs.iter().all(commands::redirection_keeps_files);
        a.merge(redirected);
        if s.words
            .first()
            .and_then(Word::literal)
            .is_some_and(|program| STATE_BUILTINS.contains(&program.as_str()))
        {
            self.state_changed = true;
        }
        let mut args = Vec::new();
        for w in &s.words {
            a.merge(self.substitutions(w, depth));
            let mut expanded = args_of(std::slice::from_ref(w));
            if let [arg] = expanded.as_mut_slice() {
                let known = self.known(w);
                arg.candidates.extend(known.clone());
                arg.fixed = known;
            }
            args.extend(expanded);
        }
        a.merge(self.invoke(&args, depth, &stdin));
        if !s.is_empty() {
            // What the command reads on stdin is part of what it does (SQL fed to
            // `sqlite3`, a file read as root through `<`): a grant names a command run
            // with the executor's empty stdin, not with input the caller chose.
            let own_stdin = match &stdin {
                Stdin::Inherited => true,
                Stdin::File(f) => f == "/dev/null",
                Stdin::Pipe | Stdin::Echoed(_) | Stdin::Here(_) | Stdin::Computed => false,
            };
            let argv = (unchanged && s.assigns.is_empty() && redirections_keep_files && own_stdin)
                .then(|| commands::literal_argv(&s.words))
                .flatten();
            self.commands.record(argv, &a);
        }
        a
    }

    /// Record a variable's fixed value (or forget it when the value is computed).
    /// A value assigned again (perhaps in a branch that does not run) leaves the variable
    /// unknown for the rest of the line.
    pub fn remember(&mut self, name: &str, value: Option<String>) {
        const MAX_VARS: usize = 256;
        let again = self
            .vars
            .get(name)
            .is_some_and(|old| Some(old) != value.as_ref());
        match value {
            Some(v)
                if !again
                    && !self.unsure.contains(name)
                    && (self.vars.len() < MAX_VARS || self.vars.contains_key(name)) =>
            {
                self.vars.insert(name.to_string(), v);
            }
            _ => {
                self.vars.remove(name);
                if self.unsure.len() < MAX_VARS {
                    self.unsure.insert(name.to_string());
                }
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
    /// expanded, whatever the command is. Assignments in it (`${PATH:=…}`) count too.
    fn substitutions(&mut self, w: &Word, depth: usize) -> Assessment {
        if let Some(why) = taint::in_word(w) {
            self.set_taint(why);
        }
        if commands::word_assigns(w) {
            self.state_changed = true;
        }
        let mut nested = Vec::new();
        w.nested(&mut nested);
        let mut a = Assessment::read_only();
        for (script, reads_output) in nested {
            let stdin = if reads_output {
                Stdin::Pipe
            } else {
                Stdin::Inherited
            };
            a.merge(self.detached(|w| w.script(script, depth + 1, &stdin)));
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
            if matches!(r.op, RedirOp::WriteBoth | RedirOp::AppendBoth) {
                // dash reads `ls &>F touch G` as `ls &` and `>F touch G`.
                self.commands
                    .unresolve("`&>` is a background job and a redirection in dash");
            }
            if r.fd.is_some_and(|fd| fd > 9) {
                // dash and mksh take one digit: `ls 10>F` gives ls the argument `10`.
                self.commands
                    .unresolve("a descriptor above 9 is an argument in dash and mksh");
            }
            a.merge(self.substitutions(&r.target, depth));
            let mut target = Arg::from_word(&r.target);
            let known = self.known(&r.target);
            target.candidates.extend(known.clone());
            target.fixed = known;
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
                    self.touch_arg(&target, a);
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

    /// Variables set for a command (or exported) that change what it runs; for those
    /// whose value is a command line (`LESSOPEN`, `PAGER`), that command is assessed.
    pub fn environment(
        &mut self,
        name: &str,
        value: Option<&str>,
        depth: usize,
        a: &mut Assessment,
    ) {
        if let Some((_, level, why)) = ENV_VARS.iter().find(|(n, ..)| *n == name) {
            a.raise(*level, format!("sets {name}: {why}"));
        } else if let Some((_, level, why)) =
            ENV_PREFIXES.iter().find(|(p, ..)| name.starts_with(p))
        {
            a.raise(*level, format!("sets {name}: {why}"));
        }
        if let (true, Some(value)) = (ENV_COMMANDS.contains(&name), value) {
            let command = value
                .trim_start_matches(['|', '-'])
                .replace("%s", "file")
                .replace("%E", "file")
                .replace("%lm", "1");
            if !command.trim().is_empty() {
                a.merge(self.detached(|w| w.shell_text(&command, depth + 1, &Stdin::Inherited)));
            }
        }
        if let Some(why) = taint::assigned(name) {
            self.set_taint(why);
        }
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
