//! Argument rules the tables cannot express: what `rm -r` deletes, where `dd` and
//! `mount` point, which processes `kill` hits, which property `setprop` sets, what a sed
//! or awk program does.

use nl2sh_proto::channels::RiskLevel::{Critical, Dangerous, High, Medium};

use super::args::Arg;
use super::ast::is_name;
use super::classify::{environment, Stdin, Walker};
use super::exec_table::{AM_ACTIONS, CORE_PROCESSES};
use super::lexer::shorten;
use super::options::{
    Cli,
    Flag::{Long, Short},
};
use super::paths::{critical_tree, resolve, write_level, Resolved};
use super::scripts::{awk_program, sed_script};
use super::Assessment;

impl Walker {
    /// Rules for `key` beyond the tables.
    pub fn rules(&mut self, key: &str, cli: &Cli, depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
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
            "sed" => self.sed(cli, &mut a),
            "awk" | "gawk" | "mawk" | "nawk" => awk(key, cli, &mut a),
            "export" | "declare" | "typeset" | "local" | "readonly" => self.exports(cli, &mut a),
            "find" => a.merge(self.find(cli.args, depth)),
            "cd" | "pushd" | "popd" => self.cd(key, cli),
            "trap" => a.merge(self.trap(cli, depth, stdin)),
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
    fn exports(&mut self, cli: &Cli, a: &mut Assessment) {
        for operand in &cli.operands {
            if let Some((name, value)) = operand.star.split_once('=').filter(|(n, _)| is_name(n)) {
                environment(name, a);
                let value = operand.lit.as_ref().map(|_| value.to_string());
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

    fn sed(&self, cli: &Cli, a: &mut Assessment) {
        let mut scripts: Vec<Arg> = cli.values(Short('e'));
        scripts.extend(cli.values(Long("--expression")));
        if cli.has(Short('f')) || cli.has(Long("--file")) {
            a.raise(Medium, "sed runs a script file");
        }
        let mut files = cli.operands.iter();
        if scripts.is_empty() && !cli.has(Short('f')) && !cli.has(Long("--file")) {
            scripts.extend(files.next().map(|s| (*s).clone()));
        }
        for script in &scripts {
            match script.lit.as_deref().map(sed_script) {
                Some(Some((level, why))) => a.raise(level, why),
                Some(None) => {}
                None => a.raise(Medium, "sed script computed at run time"),
            }
        }
        if cli.has(Short('i')) || cli.has(Long("--in-place")) {
            for file in files {
                a.merge(self.write_arg(file, "sed -i"));
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

fn awk(key: &str, cli: &Cli, a: &mut Assessment) {
    if cli.has(Short('f')) || cli.has(Long("--file")) {
        a.raise(Medium, format!("{key} runs a program file"));
        return;
    }
    if cli.has(Short('i')) || cli.has(Long("--include")) {
        a.raise(
            Medium,
            format!("{key} loads an extension (may edit files in place)"),
        );
    }
    match cli.operands.first().map(|p| p.lit.as_deref()) {
        Some(Some(program)) => {
            if let Some((level, why)) = awk_program(program) {
                a.raise(level, why);
            }
        }
        Some(None) => a.raise(Medium, format!("{key} program computed at run time")),
        None => {}
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
