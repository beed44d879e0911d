//! Programs that run another program given in their arguments, as data: how to find the
//! wrapped command among their options, and what the wrapper adds.

use nl2sh_proto::channels::RiskLevel::{self, Medium, ReadOnly};

pub(super) struct Wrapper {
    pub name: &'static str,
    /// Short options taking a value.
    pub values: &'static str,
    /// Long options taking a separate value.
    pub long_values: &'static [&'static str],
    /// Operands before the command (`timeout DURATION`, `chroot DIR`, `ssh HOST`).
    pub positionals: usize,
    /// Options whose value is a shell command line (`flock -c`, `env -S`).
    pub command_options: &'static [&'static str],
    /// Options that make it run nothing (`command -v`, `sudo -l`).
    pub no_exec: &'static [&'static str],
    /// Options that, without a command, start a shell on standard input (`sudo -s`).
    pub shell: &'static [&'static str],
    /// `NAME=value` words before the command set its environment (`env`).
    pub assignments: bool,
    /// The command words are joined and run by a shell (`ssh`, `watch`).
    pub joins: bool,
    /// The command given as the wrapped program when none is (`xargs` runs `echo`).
    pub default: Option<&'static str>,
    /// The wrapped command also gets arguments read from standard input (`xargs`).
    pub feeds: bool,
    pub root: bool,
    pub level: RiskLevel,
    pub why: &'static str,
}

const fn w(name: &'static str, values: &'static str) -> Wrapper {
    Wrapper {
        name,
        values,
        long_values: &[],
        positionals: 0,
        command_options: &[],
        no_exec: &[],
        shell: &[],
        assignments: false,
        joins: false,
        default: None,
        feeds: false,
        root: false,
        level: ReadOnly,
        why: "runs a command",
    }
}

impl Wrapper {
    const fn longs(mut self, long_values: &'static [&'static str]) -> Self {
        self.long_values = long_values;
        self
    }
    const fn positionals(mut self, n: usize) -> Self {
        self.positionals = n;
        self
    }
    const fn command_options(mut self, options: &'static [&'static str]) -> Self {
        self.command_options = options;
        self
    }
    const fn no_exec(mut self, options: &'static [&'static str]) -> Self {
        self.no_exec = options;
        self
    }
    const fn shell(mut self, options: &'static [&'static str]) -> Self {
        self.shell = options;
        self
    }
    const fn assignments(mut self) -> Self {
        self.assignments = true;
        self
    }
    const fn joins(mut self) -> Self {
        self.joins = true;
        self
    }
    const fn feeds(mut self, default: &'static str) -> Self {
        self.default = Some(default);
        self.feeds = true;
        self
    }
    const fn root(mut self) -> Self {
        self.root = true;
        self
    }
    const fn level(mut self, level: RiskLevel, why: &'static str) -> Self {
        self.level = level;
        self.why = why;
        self
    }
}

pub(super) const WRAPPERS: &[Wrapper] = &[
    w("env", "uCS")
        .longs(&["--unset", "--chdir", "--split-string"])
        .command_options(&["-S", "--split-string"])
        .assignments(),
    w("nice", "n").longs(&["--adjustment"]),
    w("nohup", ""),
    w("time", "fo").longs(&["--format", "--output"]),
    w("command", "").no_exec(&["-v", "-V"]),
    w("builtin", ""),
    w("exec", "a"),
    w("stdbuf", "ioe").longs(&["--input", "--output", "--error"]),
    w("timeout", "sk")
        .longs(&["--signal", "--kill-after"])
        .positionals(1),
    w("ionice", "cnp").longs(&["--class", "--classdata", "--pid"]),
    w("chrt", "").positionals(1),
    w("taskset", "").positionals(1),
    w("setsid", ""),
    w("unbuffer", ""),
    w("logwrapper", ""),
    w("coproc", ""),
    w("fakeroot", ""),
    w("busybox", ""),
    w("toybox", ""),
    w("toolbox", ""),
    w("flock", "wEc")
        .longs(&["--timeout", "--conflict-exit-code", "--command"])
        .command_options(&["-c", "--command"])
        .positionals(1),
    w("xargs", "adEILnPs")
        .longs(&[
            "--arg-file",
            "--delimiter",
            "--eof",
            "--max-lines",
            "--max-args",
            "--max-procs",
        ])
        .feeds("echo"),
    w("watch", "n").longs(&["--interval"]).joins(),
    w("strace", "eoOpsSuEPXb").level(Medium, "traces another program"),
    w("ltrace", "eoOpsSuEPXb").level(Medium, "traces another program"),
    w("unshare", "").level(Medium, "runs in new namespaces"),
    w("runcon", "")
        .positionals(1)
        .level(Medium, "runs in another SELinux context"),
    w("run-as", "")
        .positionals(1)
        .level(Medium, "runs as an app's user"),
    w("chroot", "")
        .positionals(1)
        .root()
        .level(Medium, "runs in another root directory"),
    w("nsenter", "tSGwr")
        .longs(&["--target", "--setuid", "--setgid", "--wd", "--root"])
        .root()
        .level(Medium, "runs in another process's namespaces"),
    w("sudo", "ugCDhpRrTtU")
        .longs(&[
            "--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type",
        ])
        .no_exec(&["-l", "--list", "-v", "--validate", "-V", "--version", "-K"])
        .shell(&["-s", "--shell", "-i", "--login"])
        .root(),
    w("doas", "uC").shell(&["-s"]).root(),
    w("ssh", "bcDEeFIiJLlmOopQRSWw")
        .positionals(1)
        .joins()
        .level(Medium, "runs commands on another host"),
];
