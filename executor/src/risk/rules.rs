//! Argument rules the tables cannot express: what `rm -r` deletes, where `dd` and
//! `mount` point, which processes `kill` hits, which property `setprop` sets, what a sed
//! or awk program does.

use nl2sh_proto::channels::RiskLevel::{Critical, Dangerous, High, Medium};

use super::args::Arg;
use super::ast::is_name;
use super::classify::{Stdin, Walker};
use super::commands::STATE_BUILTINS;
use super::exec_table::{AM_ACTIONS, CORE_PROCESSES};
use super::lexer::shorten;
use super::options::{
    Cli,
    Flag::{Long, Short},
};
use super::paths::{critical_tree, resolve, write_level, Resolved};
use super::scripts::{awk_program, sed_script};
use super::table::DUMPSYS_ACTIONS;
use super::Assessment;

impl Walker {
    /// Rules for `key` beyond the tables.
    pub fn rules(&mut self, key: &str, cli: &Cli, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        // Also when a wrapper (`command`, `builtin`, `eval`) runs it.
        if STATE_BUILTINS.contains(&key) {
            self.state_changed = true;
        }
        self.builtin_taints(key, cli, &mut a);
        match key {
            "rm" => self.rm(cli, &mut a),
            "dd" => self.dd(cli, &mut a),
            "mount" | "umount" => self.mount(key, cli, &mut a),
            "kill" => kill(cli, &mut a),
            "pkill" | "killall" => pkill(key, cli, &mut a),
            "setprop" | "resetprop" => setprop(key, cli, &mut a),
            "setenforce" => setenforce(cli, &mut a),
            "date" => date(cli, &mut a),
            "sysctl" => sysctl(cli, &mut a),
            "chmod" => {
                chmod(cli, &mut a);
                self.recursive_owner(key, cli, &mut a);
            }
            "chown" | "chgrp" => self.recursive_owner(key, cli, &mut a),
            "mv" => self.mv(cli, &mut a),
            "am" => am(cli, &mut a),
            "sed" => self.sed(cli, depth, &mut a),
            "awk" | "gawk" | "mawk" | "nawk" => self.awk(key, cli, &mut a),
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                self.exports(cli, depth, &mut a);
            }
            "find" => a.merge(self.find(cli.args, depth)),
            "cd" | "pushd" | "popd" => self.cd(key, cli),
            "trap" => {
                self.trapped = true;
                a.merge(self.trap(cli, depth, stdin));
            }
            "tar" => tar(cli, &mut a),
            "getent" => getent(cli, &mut a),
            "dumpsys" => dumpsys(cli, &mut a),
            "less" | "more" => pager(key, cli, &mut a),
            "alias" => a.merge(self.alias(cli, depth)),
            "adb" => a.merge(self.adb(cli, depth, stdin)),
            _ => {}
        }
        a
    }

    /// The critical tree a recursive delete of `arg` would destroy. Expansions are tried
    /// both as anything (`/$X` may be `/anything`) and as empty (`"$DIR"/` may be `/`).
    pub fn critical_target(&self, arg: &Arg) -> Option<&'static str> {
        let mut texts = Vec::new();
        if arg.home {
            texts.push(format!("~{}", arg.home_rest));
        }
        match &arg.lit {
            Some(lit) => texts.push(lit.clone()),
            None => texts.extend([arg.star.clone(), arg.bare.clone()]),
        }
        texts.extend(arg.candidates.iter().cloned());
        texts
            .iter()
            .filter(|t| !t.is_empty())
            .find_map(|t| match resolve(t, &self.cwd) {
                Resolved::Absolute(path) => critical_tree(&path),
                _ => None,
            })
    }

    fn rm(&self, cli: &Cli, a: &mut Assessment) {
        let recursive = cli.has(Short('r')) || cli.has(Short('R')) || cli.has(Long("--recursive"));
        if !recursive {
            return;
        }
        for target in &cli.operands {
            if let Some(tree) = self.critical_target(target) {
                a.raise(
                    Critical,
                    format!("rm -r {}: destroys {tree}", shorten(target.text())),
                );
            }
        }
    }

    /// `chmod -R`/`chown -R` over a whole critical tree breaks the system.
    fn recursive_owner(&self, key: &str, cli: &Cli, a: &mut Assessment) {
        if !(cli.has(Short('R')) || cli.has(Long("--recursive"))) {
            return;
        }
        for target in cli.operands.iter().skip(1) {
            if let Some(tree) = self.critical_target(target) {
                a.raise(
                    Dangerous,
                    format!("{key} -R {}: changes all of {tree}", shorten(target.text())),
                );
            }
        }
    }

    /// Moving a critical tree away breaks the system as surely as deleting it.
    fn mv(&self, cli: &Cli, a: &mut Assessment) {
        for target in &cli.operands {
            if let Some(tree) = self.critical_target(target) {
                a.raise(
                    Dangerous,
                    format!("mv {}: moves {tree}", shorten(target.text())),
                );
            }
        }
    }

    /// `export NAME=value`: remembered like an assignment; some names change what later
    /// commands run.
    fn exports(&mut self, cli: &Cli, depth: usize, a: &mut Assessment) {
        for operand in &cli.operands {
            if let Some((name, value)) = operand.star.split_once('=').filter(|(n, _)| is_name(n)) {
                let value = operand.lit.as_ref().map(|_| value.to_string());
                self.environment(name, value.as_deref(), depth, a);
                self.remember(name, value);
            }
        }
    }

    /// `dd if=… of=…`: operands are `key=value`.
    fn dd(&self, cli: &Cli, a: &mut Assessment) {
        for operand in &cli.operands {
            if let Some(target) = strip(operand, "of=") {
                a.merge(self.write_arg(&target, "dd"));
            } else if let Some(source) = strip(operand, "if=") {
                a.merge(self.read_arg(&source, "dd"));
            }
        }
    }

    /// Mounting over (or remounting writable) the root or a system partition.
    fn mount(&self, key: &str, cli: &Cli, a: &mut Assessment) {
        let options: Vec<String> = cli
            .values(Short('o'))
            .into_iter()
            .chain(cli.values(Long("--options")))
            .map(|v| v.text().to_string())
            .collect();
        let has = |word: &str| options.iter().any(|o| o.split(',').any(|x| x == word));
        let Some(point) = cli.operands.last() else {
            return;
        };
        let system = match resolve(point.text(), &self.cwd) {
            Resolved::Absolute(path) => path == "/" || write_level(&path).0 >= Dangerous,
            _ => point.lit.is_none(),
        };
        if !system {
            return;
        }
        let what = if has("remount") && has("rw") {
            "makes a system partition writable"
        } else {
            "changes a system partition's mount"
        };
        a.raise(
            Dangerous,
            format!("{key} {}: {what}", shorten(point.text())),
        );
    }

    /// A sed script: commands it runs are assessed, files it writes or reads are checked.
    fn sed(&mut self, cli: &Cli, depth: usize, a: &mut Assessment) {
        let mut scripts: Vec<Arg> = cli.values(Short('e'));
        if cli.has(Short('f')) {
            a.raise(Medium, "sed runs a script file");
        }
        let mut files = cli.operands.iter();
        if scripts.is_empty() && !cli.has(Short('f')) {
            scripts.extend(files.next().map(|s| (*s).clone()));
        }
        for script in &scripts {
            let Some(text) = script.lit.as_deref() else {
                a.raise(Medium, "sed script computed at run time");
                continue;
            };
            let effects = sed_script(text);
            if let Some((level, why)) = effects.finding {
                a.raise(level, why);
            }
            for path in &effects.writes {
                a.merge(self.write_arg(&Arg::plain(path), "sed w"));
            }
            for path in &effects.reads {
                a.merge(self.read_arg(&Arg::plain(path), "sed r"));
            }
            for command in &effects.commands {
                a.merge(self.command_line(
                    &Arg::plain(command),
                    depth + 1,
                    &Stdin::Inherited,
                    "sed e",
                ));
            }
        }
        if cli.has(Short('i')) {
            for file in files {
                a.merge(self.write_arg(file, "sed -i"));
            }
        }
    }

    fn awk(&self, key: &str, cli: &Cli, a: &mut Assessment) {
        if cli.has(Short('f')) || cli.has(Short('E')) {
            a.raise(Medium, format!("{key} runs a program file"));
            return;
        }
        if cli.has(Short('i')) {
            a.raise(
                Medium,
                format!("{key} loads an extension (may edit files in place)"),
            );
        }
        let mut programs: Vec<Arg> = cli.values(Short('e'));
        if programs.is_empty() {
            programs.extend(cli.operands.first().map(|p| (*p).clone()));
        }
        for program in &programs {
            let Some(text) = program.lit.as_deref() else {
                a.raise(Medium, format!("{key} program computed at run time"));
                continue;
            };
            let effects = awk_program(text);
            if let Some((level, why)) = effects.finding {
                a.raise(level, why);
            }
            for path in &effects.writes {
                a.merge(self.write_arg(&Arg::plain(path), key));
            }
        }
    }
}

/// `of=/dev/sda` → an argument for `/dev/sda`, keeping what is computed.
fn strip(arg: &Arg, prefix: &str) -> Option<Arg> {
    let star = arg.star.strip_prefix(prefix)?;
    Some(Arg {
        lit: arg
            .lit
            .as_deref()
            .and_then(|l| l.strip_prefix(prefix))
            .map(str::to_string),
        star: star.to_string(),
        bare: arg
            .bare
            .strip_prefix(prefix)
            .unwrap_or_default()
            .to_string(),
        ..arg.clone()
    })
}

/// `kill … 1` ends init (and the system); `kill -9 -1` ends every process.
fn kill(cli: &Cli, a: &mut Assessment) {
    let mut args = cli.args.iter().map(Arg::text).peekable();
    if args.peek().is_some_and(|t| matches!(*t, "-s" | "-n")) {
        args.next();
        args.next();
    } else if args
        .peek()
        .is_some_and(|t| t.starts_with('-') && *t != "--")
    {
        args.next();
    }
    for pid in args {
        match pid {
            "1" => a.raise(Dangerous, "kill 1: ends init"),
            "-1" => a.raise(Dangerous, "kill -1: ends every process"),
            _ => {}
        }
    }
}

fn pkill(key: &str, cli: &Cli, a: &mut Assessment) {
    for target in &cli.operands {
        let text = target.text();
        if CORE_PROCESSES.contains(&text) {
            a.raise(Dangerous, format!("{key} {text}: core system process"));
        } else if matches!(text, "." | ".*" | "^" | "") {
            a.raise(
                Dangerous,
                format!("{key} {}: matches every process", shorten(text)),
            );
        }
    }
}

fn setprop(key: &str, cli: &Cli, a: &mut Assessment) {
    let Some(name) = cli.operands.first() else {
        return;
    };
    match name.lit.as_deref() {
        Some("sys.powerctl") => a.raise(
            Dangerous,
            format!("{key} sys.powerctl: reboots or powers off"),
        ),
        Some(n) if n.starts_with("ctl.") => {
            a.raise(
                High,
                format!("{key} {}: starts or stops system services", shorten(n)),
            );
        }
        Some(_) => {}
        None => a.raise(
            Dangerous,
            format!("{key}: property name computed at run time"),
        ),
    }
}

fn setenforce(cli: &Cli, a: &mut Assessment) {
    let Some(mode) = cli.operands.first() else {
        return;
    };
    match mode.lit.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("0" | "permissive") => a.raise(Critical, "setenforce 0: disables SELinux enforcement"),
        Some(_) => {}
        None => a.raise(
            Critical,
            "setenforce: mode computed at run time (may disable SELinux)",
        ),
    }
}

/// toybox `date MMDDhhmm[[CC]YY][.ss]` sets the clock.
fn date(cli: &Cli, a: &mut Assessment) {
    if cli
        .operands
        .iter()
        .any(|o| o.text().starts_with(|c: char| c.is_ascii_digit()))
    {
        a.raise(High, "date: sets the clock");
    }
}

fn sysctl(cli: &Cli, a: &mut Assessment) {
    if cli.operands.iter().any(|o| o.text().contains('=')) {
        a.raise(High, "sysctl: changes kernel settings");
    }
}

/// Setting the setuid or setgid bit makes a program run as its owner for everyone.
fn chmod(cli: &Cli, a: &mut Assessment) {
    let Some(mode) = cli.operands.first().map(|m| m.text()) else {
        return;
    };
    let numeric_special = mode.len() == 4
        && mode.chars().all(|c| c.is_digit(8))
        && mode.starts_with(['2', '3', '4', '5', '6', '7']);
    let symbolic_special = mode.contains(['+', '=']) && mode.contains('s');
    if numeric_special || symbolic_special {
        a.raise(High, format!("chmod {}: sets setuid/setgid", shorten(mode)));
    }
}

/// Intents whose broadcast or start wipes or stops the device.
fn am(cli: &Cli, a: &mut Assessment) {
    for arg in cli.args {
        if let Some((_, level, why)) = AM_ACTIONS.iter().find(|(action, ..)| arg.is(action)) {
            a.raise(*level, format!("am {}: {why}", arg.text()));
        }
    }
}

/// GNU tar treats an archive name `HOST:FILE` as remote and runs a remote shell for it.
fn tar(cli: &Cli, a: &mut Assessment) {
    if cli.has(Long("--force-local")) {
        return;
    }
    for archive in cli.values(Short('f')) {
        let text = archive.text();
        let remote = text
            .split_once(':')
            .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
        if remote || archive.lit.is_none() {
            a.raise(
                High,
                format!(
                    "tar -f {}: a remote archive runs a remote shell",
                    shorten(text)
                ),
            );
        }
    }
}

/// `getent shadow` reads the password hashes.
fn getent(cli: &Cli, a: &mut Assessment) {
    if let Some(db) = cli.operands.first() {
        match db.lit.as_deref() {
            Some("shadow" | "gshadow") => a.raise(
                Medium,
                format!("getent {}: reads password hashes", db.text()),
            ),
            Some(_) => {}
            None => a.raise(Medium, "getent: database computed at run time"),
        }
    }
}

/// `dumpsys SERVICE ARGS…` hands the arguments to the service, and some services act on
/// them (`battery set`, `batterystats --reset`).
fn dumpsys(cli: &Cli, a: &mut Assessment) {
    if cli.operands.first().is_some_and(|s| s.lit.is_none()) {
        // Word splitting may turn it into a service and its arguments.
        a.raise(Medium, "dumpsys: service computed at run time");
    }
    for arg in cli.operands.iter().skip(1) {
        match arg.lit.as_deref() {
            Some(text) => {
                if let Some((_, level, why)) = DUMPSYS_ACTIONS.iter().find(|(w, ..)| {
                    *w == text || (w.ends_with('*') && text.starts_with(w.trim_end_matches('*')))
                }) {
                    a.raise(*level, format!("dumpsys … {}: {why}", shorten(text)));
                }
            }
            None => a.raise(Medium, "dumpsys: service arguments computed at run time"),
        }
    }
}

/// `less +CMD` / `more +CMD` run pager commands at start.
fn pager(key: &str, cli: &Cli, a: &mut Assessment) {
    for operand in &cli.operands {
        if operand.text().starts_with('+') {
            a.raise(
                Medium,
                format!("{key} {}: runs a pager command", shorten(operand.text())),
            );
        }
    }
}
