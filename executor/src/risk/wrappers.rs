//! Programs that run other code: wrappers (`env`, `timeout`, `sudo`, `xargs`, …), `su`,
//! shells and other interpreters, `eval` and `.`. The code they run is assessed like
//! the line itself, one level deeper.

use nl2sh_proto::channels::RiskLevel::{High, Medium};

use super::args::Arg;
use super::ast::is_name;
use super::classify::{Stdin, Walker};
use super::lexer::shorten;
use super::option_table::FLAGS;
use super::options::Cli;
use super::wrap_table::Wrapper;
use super::Assessment;

/// What a wrapper's own options say ([`Walker::wrapper_scan`]).
struct WrapperScan {
    /// The options themselves, for the flags table.
    own: Vec<Arg>,
    /// An option said the wrapper runs no command.
    no_exec: bool,
    /// An option said the wrapper runs a shell (which then reads code from stdin).
    shell: bool,
    /// The replace string of a wrapper that feeds its stdin in as arguments.
    replace: Option<String>,
    /// Where the command it runs begins in its arguments.
    command_at: usize,
}

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
        // `None`: an option carried the command line, assessed already.
        let Some(scanned) = self.wrapper_scan(w, args, depth, stdin, &mut a) else {
            return a;
        };
        let own_cli = Cli::new(w.name, &scanned.own);
        for (_, flag, level, why) in FLAGS
            .iter()
            .filter(|(p, f, ..)| *p == w.name && own_cli.has(*f))
        {
            a.raise(*level, format!("{} {}: {why}", w.name, flag.example()));
        }
        if scanned.no_exec {
            return a;
        }
        let mut command: Vec<Arg> = args.get(scanned.command_at..).unwrap_or_default().to_vec();
        if command.is_empty() {
            if scanned.shell {
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
            match &scanned.replace {
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

    /// Read a wrapper's own options and assignments up to the command it runs, assessing
    /// what they name into `a` (variables it sets, files it reads or writes); `None` when
    /// an option carries the command line itself (`-c …`), which is then assessed too.
    fn wrapper_scan(
        &mut self,
        w: &Wrapper,
        args: &[Arg],
        depth: usize,
        stdin: &Stdin,
        a: &mut Assessment,
    ) -> Option<WrapperScan> {
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
            if w.assignments && text == "-" {
                // `env -` is `env -i`.
                i += 1;
                continue;
            }
            if w.assignments {
                if let Some((name, value)) = text.split_once('=').filter(|(n, _)| is_name(n)) {
                    let value = arg.lit.as_ref().map(|_| value.to_string());
                    self.environment(name, value.as_deref(), depth, a);
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
            if arg.lit.is_none() {
                a.raise(
                    Medium,
                    format!("{}: option {} computed at run time", w.name, shorten(text)),
                );
                continue;
            }
            let (opts, used) = wrapper_options(w, text, args.get(i), a);
            i += used;
            for (name, value) in opts {
                no_exec |= w.no_exec.contains(&name.as_str());
                shell |= w.shell.contains(&name.as_str());
                if w.feeds {
                    replace = replace.or_else(|| replace_string(&name, value.as_ref()));
                    if matches!(name.as_str(), "-a" | "--arg-file") {
                        if let Some(file) = &value {
                            a.merge(self.read_arg(file, w.name));
                        }
                    }
                }
                if let (true, Some(file)) = (w.outputs.contains(&name.as_str()), &value) {
                    a.merge(self.write_arg(file, w.name));
                }
                if w.command_options.contains(&name.as_str()) {
                    if let Some(value) = value {
                        // The command line is the command; what follows it is its arguments.
                        a.merge(self.command_line(&value, depth + 1, stdin, w.name));
                        return None;
                    }
                }
            }
        }
        Some(WrapperScan {
            own,
            no_exec,
            shell,
            replace,
            command_at: i + positionals,
        })
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
            } else if inline.contains(&text) || clustered(text, inline) {
                // `perl -pe CODE`: an inline-code letter anywhere in a cluster.
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

/// A wrapper's option word as the options it stands for: canonical names (`-c`,
/// `--long`) with their values, and how many following arguments they used. Long
/// options are resolved like getopt_long does (unambiguous prefixes); clustered short
/// options are split, a value-taking letter taking the rest of the cluster.
fn wrapper_options(
    w: &Wrapper,
    text: &str,
    next: Option<&Arg>,
    a: &mut Assessment,
) -> (Vec<(String, Option<Arg>)>, usize) {
    if let Some(body) = text.strip_prefix("--") {
        let (given, eq) = match body.split_once('=') {
            Some((g, v)) => (g, Some(Arg::plain(v))),
            None => (body, None),
        };
        let longs = wrapper_longs(w);
        let exact = longs.iter().find(|(n, _)| *n == given);
        let prefixed: Vec<&(&str, bool)> =
            longs.iter().filter(|(n, _)| n.starts_with(given)).collect();
        let found = match (exact, prefixed.as_slice()) {
            (Some(found), _) => Some(*found),
            (None, [found]) => Some(**found),
            (None, []) => {
                if w.complete {
                    a.raise(
                        Medium,
                        format!("unknown option --{} for {}", shorten(given), w.name),
                    );
                }
                None
            }
            (None, more) => {
                let names: Vec<&str> = more.iter().map(|(n, _)| *n).collect();
                a.raise(
                    Medium,
                    format!(
                        "ambiguous option --{} for {} ({})",
                        shorten(given),
                        w.name,
                        names.join(", ")
                    ),
                );
                None
            }
        };
        return match found {
            Some((name, true)) if eq.is_none() => (vec![(format!("--{name}"), next.cloned())], 1),
            Some((name, _)) => (vec![(format!("--{name}"), eq)], 0),
            None => (vec![(format!("--{given}"), eq)], 0),
        };
    }
    let mut out = Vec::new();
    let cluster = text.get(1..).unwrap_or_default();
    for (at, c) in cluster.char_indices() {
        let rest = cluster.get(at + c.len_utf8()..).unwrap_or_default();
        let name = format!("-{c}");
        if w.values.contains(c) {
            if rest.is_empty() {
                out.push((name, next.cloned()));
                return (out, 1);
            }
            out.push((name, Some(Arg::plain(rest))));
            return (out, 0);
        }
        if w.optional.contains(c) {
            out.push((name, (!rest.is_empty()).then(|| Arg::plain(rest))));
            return (out, 0);
        }
        out.push((name, None));
    }
    (out, 0)
}

/// Every long option of a wrapper (without dashes), with whether it takes a value.
fn wrapper_longs(w: &Wrapper) -> Vec<(&'static str, bool)> {
    let strip = |o: &&'static str| o.strip_prefix("--");
    let mut out: Vec<(&'static str, bool)> = w
        .long_values
        .iter()
        .chain(w.command_options)
        .filter_map(strip)
        .map(|n| (n, true))
        .collect();
    out.extend(
        w.long_flags
            .iter()
            .chain(w.no_exec)
            .chain(w.shell)
            .filter_map(strip)
            .map(|n| (n, false)),
    );
    out.sort_unstable();
    out.dedup();
    out
}

/// The replace string of `xargs -I R`, `-iR`, `-i`, `--replace[=R]`.
fn replace_string(name: &str, value: Option<&Arg>) -> Option<String> {
    match name {
        "-I" => value.map(|v| v.text().to_string()),
        "-i" | "--replace" => Some(value.map_or("{}", |v| v.text()).to_string()),
        _ => None,
    }
}

/// Whether a short-option cluster (`-pe`) holds one of the one-letter inline-code options.
fn clustered(text: &str, inline: &[&str]) -> bool {
    let Some(cluster) = text.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
        return false;
    };
    inline
        .iter()
        .filter_map(|o| o.strip_prefix('-').filter(|l| l.len() == 1))
        .any(|letter| cluster.contains(letter))
}
