//! Programs that run other code: wrappers (`env`, `timeout`, `sudo`, `xargs`, …), `su`,
//! shells and other interpreters, `eval` and `.`. The code they run is assessed like
//! the line itself, one level deeper.

use nl2sh_proto::channels::RiskLevel::{High, Medium};

use super::args::Arg;
use super::ast::is_name;
use super::classify::{environment, Stdin, Walker};
use super::lexer::shorten;
use super::option_table::FLAGS;
use super::options::Cli;
use super::wrap_table::Wrapper;
use super::Assessment;

impl Walker {
    pub fn wrapper(
        &mut self,
        w: &Wrapper,
        args: &[Arg],
        depth: usize,
        stdin: &Stdin,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        a.raise(w.level, format!("{}: {}", w.name, w.why));
        if w.root {
            a.require_root(format!("{} runs as root", w.name));
        }
        let mut own = Vec::new();
        let (mut no_exec, mut shell) = (false, false);
        let mut replace: Option<String> = None;
        let mut positionals = w.positionals;
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let text = arg.text();
            if text == "--" {
                i += 1;
                break;
            }
            if w.assignments {
                if let Some((name, _)) = text.split_once('=').filter(|(n, _)| is_name(n)) {
                    environment(name, &mut a);
                    i += 1;
                    continue;
                }
            }
            if text.len() < 2 || !text.starts_with('-') {
                // Options may follow the operands before the command (`flock FILE -c …`).
                if positionals == 0 {
                    break;
                }
                positionals -= 1;
                i += 1;
                continue;
            }
            i += 1;
            own.push(arg.clone());
            no_exec |= w.no_exec.contains(&text);
            shell |= w.shell.contains(&text);
            if w.feeds {
                replace = replace.or_else(|| replace_string(text, args.get(i)));
            }
            if let Some(value) = command_option(w, text, args.get(i)) {
                // The command line is the command; what follows it is its arguments.
                a.merge(self.command_line(&value, depth + 1, stdin, w.name));
                return a;
            }
            if takes_value(w, text) {
                i += 1;
            }
        }
        i += positionals;
        let own_cli = Cli::new(w.name, &own);
        for (_, flag, level, why) in FLAGS
            .iter()
            .filter(|(p, f, ..)| *p == w.name && own_cli.has(*f))
        {
            a.raise(*level, format!("{} {}: {why}", w.name, flag.example()));
        }
        if no_exec {
            return a;
        }
        let mut command: Vec<Arg> = args.get(i..).unwrap_or_default().to_vec();
        if command.is_empty() {
            if shell {
                a.merge(self.stdin_code(w.name, true, depth, stdin));
            }
            match w.default {
                Some(default) => command.push(Arg::plain(default)),
                None => return a,
            }
        }
        if w.feeds {
            // What is read from standard input becomes arguments: at the replace string's
            // places, or at the end.
            match &replace {
                Some(r) => {
                    for arg in command.iter_mut().filter(|a| a.text().contains(r.as_str())) {
                        *arg = Arg::computed();
                    }
                }
                None => command.push(Arg::computed()),
            }
        }
        let inner = if w.feeds {
            Stdin::Inherited
        } else {
            stdin.clone()
        };
        if w.joins {
            a.merge(self.command_line_args(&command, depth + 1, &inner, w.name));
        } else {
            a.merge(self.invoke(&command, depth + 1, &inner));
        }
        a
    }

    /// `su [options] [user [command…]]` with `-c COMMAND` anywhere (Magisk, AOSP, util-linux).
    pub fn su(&mut self, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        a.require_root("su runs as root");
        let mut ran = false;
        let mut user_seen = false;
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let text = arg.text();
            i += 1;
            match text {
                "-c" | "--command" => {
                    if let Some(cmd) = args.get(i) {
                        i += 1;
                        ran = true;
                        a.merge(self.command_line(cmd, depth + 1, stdin, "su -c"));
                    }
                }
                "-s" | "--shell" | "-Z" | "--context" | "-t" | "--target" | "-g" | "-G"
                | "--group" | "--supp-group" => i += 1,
                "--" => {}
                _ if text.starts_with("--command=") => {
                    ran = true;
                    let cmd = Arg::plain(text.trim_start_matches("--command="));
                    a.merge(self.command_line(&cmd, depth + 1, stdin, "su -c"));
                }
                _ if text.starts_with('-') => {}
                _ if !user_seen => user_seen = true,
                _ => {
                    ran = true;
                    let command = args.get(i - 1..).unwrap_or_default();
                    a.merge(self.invoke(command, depth + 1, stdin));
                    break;
                }
            }
        }
        if !ran {
            a.merge(self.stdin_code("su", true, depth, stdin));
        }
        a
    }

    /// A shell or another interpreter: inline code, a script file, or standard input.
    pub fn interpreter(
        &mut self,
        name: &str,
        inline: &[&str],
        posix: bool,
        args: &[Arg],
        depth: usize,
        stdin: &Stdin,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        let (mut inline_code, mut reads_stdin) = (false, false);
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let text = arg.text();
            if text == "--" || text == "-" {
                i += 1;
                break;
            }
            if !(text.starts_with('-') || (posix && text.starts_with('+'))) || text.len() < 2 {
                break;
            }
            i += 1;
            if posix {
                if matches!(text, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
                    i += 1;
                } else if !text.starts_with("--") {
                    inline_code |= text.contains('c');
                    reads_stdin |= text.contains('s');
                }
            } else if inline.contains(&text) {
                inline_code = true;
                break;
            } else if text == "-m" {
                a.raise(Medium, format!("{name} runs a module"));
                return a;
            }
        }
        let operand = args.get(i).filter(|_| inline_code || !reads_stdin);
        match operand {
            Some(code) if inline_code && posix => {
                a.merge(self.command_line(code, depth + 1, stdin, name));
            }
            Some(_) if inline_code => a.raise(High, format!("{name} runs inline code")),
            None if inline_code => a.raise(Medium, format!("{name} -c without a command")),
            Some(script) => a.merge(self.script_file(name, posix, script, depth, stdin)),
            None => a.merge(self.stdin_code(name, posix, depth, stdin)),
        }
        a
    }

    /// Running a script file: its contents are not known.
    fn script_file(
        &mut self,
        who: &str,
        posix: bool,
        script: &Arg,
        depth: usize,
        stdin: &Stdin,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        match script.lit.as_deref() {
            Some("/dev/stdin" | "/proc/self/fd/0" | "/dev/fd/0") => {
                a.merge(self.stdin_code(who, posix, depth, stdin));
            }
            Some(path) if !script.process => {
                a.raise(Medium, format!("{who} runs script {}", shorten(path)));
            }
            _ => a.raise(High, format!("{who} runs code produced at run time")),
        }
        a
    }

    /// An interpreter reading its program from standard input.
    pub fn stdin_code(
        &mut self,
        who: &str,
        posix: bool,
        depth: usize,
        stdin: &Stdin,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        match stdin {
            Stdin::Pipe => a.raise(High, format!("{who} runs commands read from a pipe")),
            Stdin::Echoed(text) => {
                a.raise(High, format!("{who} runs commands read from a pipe"));
                if posix {
                    a.merge(self.shell_text(text, depth + 1, &Stdin::Inherited));
                }
            }
            Stdin::Computed => a.raise(High, format!("{who} runs commands from a computed source")),
            Stdin::File(path) => a.raise(
                Medium,
                format!("{who} runs commands from {}", shorten(path)),
            ),
            Stdin::Here(text) if posix => {
                a.merge(self.shell_text(text, depth + 1, &Stdin::Inherited));
            }
            Stdin::Here(_) => a.raise(High, format!("{who} runs inline code")),
            Stdin::Inherited => {
                a.raise(Medium, format!("{who} reads commands from standard input"))
            }
        }
        a
    }

    /// `eval ARGS…`: the arguments joined by spaces are a command line.
    pub fn eval(&mut self, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        self.command_line_args(args, depth + 1, stdin, "eval")
    }

    /// `. FILE` / `source FILE`.
    pub fn source(&mut self, name: &str, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        match args.first() {
            Some(file) => self.script_file(name, true, file, depth, stdin),
            None => {
                let mut a = Assessment::read_only();
                a.raise(Medium, format!("{name} without a file"));
                a
            }
        }
    }

    /// One argument that is a command line (`sh -c`, `su -c`, `trap`).
    pub fn command_line(
        &mut self,
        arg: &Arg,
        depth: usize,
        stdin: &Stdin,
        who: &str,
    ) -> Assessment {
        self.command_line_args(std::slice::from_ref(arg), depth, stdin, who)
    }

    /// Arguments joined into a command line (`eval`, `ssh`, `watch`). Computed parts are
    /// assessed as expansions, and the line as a whole is not known.
    pub fn command_line_args(
        &mut self,
        args: &[Arg],
        depth: usize,
        stdin: &Stdin,
        who: &str,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        if args.iter().any(|arg| arg.lit.is_none()) {
            a.raise(
                High,
                format!("{who} runs a command line computed at run time"),
            );
        }
        let text = args
            .iter()
            .map(|arg| arg.lit.clone().unwrap_or_else(|| "\"$_\"".into()))
            .collect::<Vec<_>>()
            .join(" ");
        a.merge(self.shell_text(&text, depth, stdin));
        a
    }
}

/// The command line given to a wrapper option (`-c CMD`, `--command=CMD`).
fn command_option(w: &Wrapper, text: &str, next: Option<&Arg>) -> Option<Arg> {
    if w.command_options.contains(&text) {
        return next.cloned();
    }
    w.command_options
        .iter()
        .filter(|o| o.starts_with("--"))
        .find_map(|o| text.strip_prefix(o).and_then(|r| r.strip_prefix('=')))
        .map(Arg::plain)
}

/// The replace string of `xargs -I R`, `-iR`, `-i`, `--replace[=R]`.
fn replace_string(text: &str, next: Option<&Arg>) -> Option<String> {
    match text {
        "-I" => next.map(|n| n.text().to_string()),
        "-i" | "--replace" => Some("{}".into()),
        _ => text
            .strip_prefix("-I")
            .or_else(|| text.strip_prefix("-i"))
            .or_else(|| text.strip_prefix("--replace="))
            .map(str::to_string),
    }
}

/// Whether a wrapper option takes the next argument as its value.
fn takes_value(w: &Wrapper, text: &str) -> bool {
    if text.starts_with("--") {
        return !text.contains('=') && w.long_values.contains(&text);
    }
    let cluster = text.get(1..).unwrap_or_default();
    for (i, ch) in cluster.char_indices() {
        if w.values.contains(ch) {
            return i + ch.len_utf8() == cluster.len();
        }
    }
    false
}
