//! Commands whose arguments hold other commands or change how later ones resolve:
//! `find -exec`, `cd`, `trap`, `alias`, `adb shell`.

use nl2sh_proto::channels::RiskLevel::Critical;

use super::args::Arg;
use super::classify::{Stdin, Walker};
use super::lexer::shorten;
use super::options::Cli;
use super::paths::{normalize, resolve, Cwd, Resolved};
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
    /// `find ROOTS… EXPRESSION`: `-delete` on a critical tree, and the commands of
    /// `-exec`/`-execdir`/`-ok`/`-okdir` with `{}` standing for what is found.
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
        let mut rest = args.iter().skip(i);
        while let Some(arg) = rest.next() {
            if !matches!(arg.text(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let command: Vec<&Arg> = rest
                .by_ref()
                .take_while(|a| !(a.is(";") || a.is("+")))
                .collect();
            for root in roots.iter().take(MAX_FIND_ROOTS) {
                let found = found_path(root, filtered);
                let args: Vec<Arg> = command.iter().map(|c| placeholder(c, &found)).collect();
                a.merge(self.invoke(&args, depth + 1, &Stdin::Inherited));
            }
        }
        a
    }

    /// Track the working directory, so relative paths after `cd /system` are seen as
    /// system paths.
    pub fn cd(&mut self, key: &str, cli: &Cli) {
        let target = cli.operands.first();
        self.cwd = match (key, target) {
            ("popd", _) => Cwd::Unknown,
            (_, None) => Cwd::Known("/~".into()),
            (_, Some(t)) if t.home && !t.home_rest.contains('*') => {
                Cwd::Known(normalize(&format!("/~{}", t.home_rest)))
            }
            (_, Some(t)) => match t.lit.as_deref() {
                None | Some("-") => Cwd::Unknown,
                Some(dir) => match resolve(dir, &self.cwd) {
                    Resolved::Absolute(path) => Cwd::Known(path),
                    Resolved::Relative => Cwd::Start,
                    Resolved::Unknown => Cwd::Unknown,
                },
            },
        };
    }

    /// `trap ACTION SIGNAL…`: the action is a command line run later.
    pub fn trap(&mut self, cli: &Cli, depth: usize, stdin: &Stdin) -> Assessment {
        match cli.operands.first() {
            Some(action) if cli.operands.len() > 1 && !action.is("-") => {
                self.command_line(action, depth + 1, stdin, "trap")
            }
            _ => Assessment::read_only(),
        }
    }

    /// `alias NAME=VALUE`: dash and mksh expand aliases in `sh -c`, so the value may run.
    pub fn alias(&mut self, cli: &Cli, depth: usize) -> Assessment {
        let mut a = Assessment::read_only();
        for operand in &cli.operands {
            if let Some((_, value)) = operand.text().split_once('=') {
                a.merge(self.command_line(
                    &Arg::plain(value),
                    depth + 1,
                    &Stdin::Inherited,
                    "alias",
                ));
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
