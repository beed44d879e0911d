//! Commands whose arguments hold other commands or change how later ones resolve:
//! `find -exec`, `cd`, `trap`, `alias`, `adb shell`, and builtins that make later names
//! unknowable.

use nl2sh_proto::channels::RiskLevel::{Critical, High, Medium};

use super::args::Arg;
use super::classify::{Stdin, Walker};
use super::find_table::{primary, Does};
use super::io_table::READERS;
use super::lexer::shorten;
use super::options::{Cli, Flag::Short};
use super::paths::{below_start, normalize, resolve, Cwd, Resolved};
use super::taint::{self, TAINT_BUILTINS};
use super::Assessment;

/// `find` tests that narrow what `-delete` or `-exec` touch.
const FIND_FILTERS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-newer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-empty",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-perm",
    "-inum",
    "-samefile",
    "-links",
];

/// Roots per `find` whose `-exec` commands are assessed, at most.
const MAX_FIND_ROOTS: usize = 8;

impl Walker {
    /// `find ROOTS… EXPRESSION`: `-delete` on a critical tree, the commands of
    /// `-exec`/`-execdir`/`-ok`/`-okdir` with `{}` standing for what is found, and
    /// primaries it does not know.
    pub fn find(&mut self, args: &[Arg], depth: usize) -> Assessment {
        let mut a = Assessment::read_only();
        let mut i = 0;
        while let Some(t) = args.get(i).map(Arg::text) {
            match t {
                "-H" | "-L" | "-P" => i += 1,
                "-D" | "-O" => i += 2,
                _ if t.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        let mut roots: Vec<Arg> = args
            .iter()
            .skip(i)
            .take_while(|a| !a.text().starts_with('-') && !matches!(a.text(), "(" | "!" | ","))
            .cloned()
            .collect();
        let expression = args.get(i + roots.len()..).unwrap_or_default();
        if roots.is_empty() {
            roots.push(Arg::plain("."));
        }
        let filtered = args.iter().any(|a| FIND_FILTERS.contains(&a.text()));
        if args.iter().any(|a| a.is("-delete")) && !filtered {
            for root in &roots {
                if let Some(tree) = self.critical_target(root) {
                    a.raise(
                        Critical,
                        format!("find {} -delete: destroys {tree}", shorten(root.text())),
                    );
                }
            }
        }
        let mut rest = expression.iter();
        while let Some(arg) = rest.next() {
            let Some(word) = arg.lit.as_deref() else {
                a.raise(
                    Medium,
                    format!("find: {} computed at run time", shorten(&arg.star)),
                );
                continue;
            };
            let Some((takes, does)) = primary(word) else {
                a.raise(Medium, format!("find {}: not understood", shorten(word)));
                continue;
            };
            match does {
                Does::Runs => {
                    let command: Vec<&Arg> = rest
                        .by_ref()
                        .take_while(|a| !(a.is(";") || a.is("+")))
                        .collect();
                    a.merge(self.find_exec(&command, &roots, filtered, depth));
                }
                Does::Reads => {
                    if let Some(file) = rest.next() {
                        a.merge(self.read_arg(file, "find"));
                    }
                }
                Does::Nothing | Does::Writes => {
                    for _ in 0..takes {
                        rest.next();
                    }
                }
            }
        }
        a
    }

    /// A command `find` runs on what it finds.
    fn find_exec(
        &mut self,
        command: &[&Arg],
        roots: &[Arg],
        filtered: bool,
        depth: usize,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        let found_any = command.iter().any(|c| c.text().contains("{}"));
        let program = command
            .first()
            .map(|c| c.text().rsplit('/').next().unwrap_or_default().to_string());
        for root in roots.iter().take(MAX_FIND_ROOTS) {
            let found = found_path(root, filtered);
            let args: Vec<Arg> = command.iter().map(|c| placeholder(c, &found)).collect();
            a.merge(self.invoke(&args, depth + 1, &Stdin::Inherited));
            if !found_any {
                continue;
            }
            // What is found may be anything below the root, nl2sh's own files included.
            a.merge(self.tree_arg(root, "find"));
            let reads = program.as_deref().is_some_and(|p| READERS.contains(&p));
            if let (true, Some(dir)) = (reads, root.lit.as_deref()) {
                let dir = dir.trim_end_matches('/');
                for below in ["*", "*/*", "*/*/*", "*/*/*/*"] {
                    a.merge(self.read_arg(&Arg::plain(&format!("{dir}/{below}")), "find -exec"));
                }
            }
        }
        a
    }

    /// Builtins after which later words may mean something else (`alias`, `read PATH`,
    /// `set -k`, …).
    pub fn builtin_taints(&mut self, key: &str, cli: &Cli, a: &mut Assessment) {
        if let Some((_, why)) = TAINT_BUILTINS.iter().find(|(b, _)| *b == key) {
            self.set_taint(*why);
        }
        for name in taint::builtin_names(key, cli) {
            // `printf -v X`, `wait -p X`: a variable changes, perhaps an exported one.
            self.state_changed = true;
            if let Some(why) = taint::name_taints(&name) {
                self.set_taint(why);
            }
            if key != "export" {
                self.remember(&name, None);
            }
        }
        if key == "let" {
            for operand in &cli.operands {
                match operand.lit.as_deref() {
                    Some(text) => {
                        if let Some(why) = taint::arith_assigns(text) {
                            self.set_taint(why);
                        }
                    }
                    None => self.set_taint("`let` of an expression computed at run time"),
                }
            }
        }
        let why = match key {
            "declare" | "typeset" | "local" if cli.has(Short('n')) => {
                "a name reference (assigning it assigns another variable)"
            }
            "set" if cli.has(Short('k')) || cli.operands.iter().any(|o| o.is("keyword")) => {
                "`set -k` (assignments anywhere set a command's environment)"
            }
            "hash" if cli.has(Short('p')) => "`hash -p` (a name runs another program)",
            "shopt" if cli.operands.iter().any(|o| o.is("expand_aliases")) => {
                "`shopt -s expand_aliases`"
            }
            "enable" if cli.has(Short('f')) => {
                a.raise(High, "enable -f: loads a builtin from a shared library");
                "`enable -f`"
            }
            _ => return,
        };
        self.set_taint(why);
    }

    /// Track the working directory, so relative paths after `cd /system` are seen as
    /// system paths.
    pub fn cd(&mut self, key: &str, cli: &Cli) {
        let target = cli.operands.first();
        let to = match (key, target) {
            ("popd", _) => Cwd::Unknown,
            (_, None) => Cwd::Known("/~".into()),
            (_, Some(t)) if t.home && !t.home_rest.contains('*') => {
                Cwd::Known(normalize(&format!("/~{}", t.home_rest)))
            }
            (_, Some(t)) => match t.lit.as_deref() {
                None | Some("-") => Cwd::Unknown,
                Some(dir) => match resolve(dir, &self.cwd) {
                    Resolved::Absolute(path) => Cwd::Known(path),
                    Resolved::Relative => {
                        below_start(dir, &self.cwd).map_or(Cwd::Unknown, Cwd::Below)
                    }
                    Resolved::Unknown => Cwd::Unknown,
                },
            },
        };
        self.change_dir(to);
    }

    /// `trap ACTION SIGNAL…`: the action is a command line run later.
    pub fn trap(&mut self, cli: &Cli, depth: usize, stdin: &Stdin) -> Assessment {
        match cli.operands.first() {
            Some(action) if cli.operands.len() > 1 && !action.is("-") => {
                // It runs later: what it changes does not apply to what follows it.
                self.detached(|w| w.command_line(action, depth + 1, stdin, "trap"))
            }
            _ => Assessment::read_only(),
        }
    }

    /// `alias NAME=VALUE`: dash and mksh expand aliases in `sh -c`, so the value may run.
    pub fn alias(&mut self, cli: &Cli, depth: usize) -> Assessment {
        let mut a = Assessment::read_only();
        for operand in &cli.operands {
            if let Some((_, value)) = operand.text().split_once('=') {
                let value = Arg::plain(value);
                a.merge(
                    self.detached(|w| {
                        w.command_line(&value, depth + 1, &Stdin::Inherited, "alias")
                    }),
                );
            }
        }
        a
    }

    /// `adb shell COMMAND…` / `adb exec-out COMMAND…` run a command line on the device.
    pub fn adb(&mut self, cli: &Cli, depth: usize, stdin: &Stdin) -> Assessment {
        let Some(sub) = cli.operands.first() else {
            return Assessment::read_only();
        };
        if !(sub.is("shell") || sub.is("exec-out")) {
            return Assessment::read_only();
        }
        let at = cli
            .args
            .iter()
            .position(|a| std::ptr::eq(a, *sub))
            .unwrap_or(cli.args.len());
        let command = cli.args.get(at + 1..).unwrap_or_default();
        if command.is_empty() {
            return self.stdin_code("adb shell", true, depth, stdin);
        }
        self.command_line_args(command, depth + 1, stdin, "adb shell")
    }
}

/// What `{}` stands for: the root itself (find reports it first), or something below it
/// when tests narrow the search.
fn found_path(root: &Arg, filtered: bool) -> Arg {
    match (&root.lit, filtered) {
        (Some(r), false) => Arg::plain(r),
        (Some(r), true) => Arg::plain(&format!("{}/found", r.trim_end_matches('/'))),
        (None, _) => Arg::computed(),
    }
}

fn placeholder(arg: &Arg, found: &Arg) -> Arg {
    match (&arg.lit, &found.lit) {
        (Some(text), Some(path)) if text.contains("{}") => Arg::plain(&text.replace("{}", path)),
        (Some(text), None) if text.contains("{}") => Arg::computed(),
        _ => arg.clone(),
    }
}
