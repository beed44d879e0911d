//! Programs that run another program given in their arguments, as data: how to find the
//! wrapped command among their options, and what the wrapper adds.

use nl2sh_proto::channels::RiskLevel::{self, Low, Medium, ReadOnly};

pub(super) struct Wrapper {
    pub name: &'static str,
    /// Short options taking a value.
    pub values: &'static str,
    /// Short options whose value is optional and attached (`xargs -i[R]`).
    pub optional: &'static str,
    /// Long options taking a value (`--name=V` or `--name V`).
    pub long_values: &'static [&'static str],
    /// Long options without a value (for resolving prefixes).
    pub long_flags: &'static [&'static str],
    /// Every long option is listed: another one is not understood.
    pub complete: bool,
    /// Operands before the command (`timeout DURATION`, `chroot DIR`, `ssh HOST`).
    pub positionals: usize,
    /// Options whose value is a shell command line (`flock -c`, `env -S`).
    pub command_options: &'static [&'static str],
    /// Options whose value is a file it writes (`time -o FILE`).
    pub outputs: &'static [&'static str],
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
        optional: "",
        long_values: &[],
        long_flags: &[],
        complete: false,
        positionals: 0,
        command_options: &[],
        outputs: &[],
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
    /// Long options without a value; the list of long options is then complete.
    const fn flags(mut self, long_flags: &'static [&'static str]) -> Self {
        self.long_flags = long_flags;
        self.complete = true;
        self
    }
    const fn optional(mut self, optional: &'static str) -> Self {
        self.optional = optional;
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
    const fn outputs(mut self, options: &'static [&'static str]) -> Self {
        self.outputs = options;
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

/// Running in the background or detached from the session: the command may outlive
/// the call.
const DETACHES: &str = "runs in the background, may outlive the call";

pub(super) const WRAPPERS: &[Wrapper] = &[
    w("env", "uCS")
        .longs(&["--unset", "--chdir", "--split-string"])
        .flags(&[
            "--ignore-environment",
            "--null",
            "--block-signal",
            "--default-signal",
            "--ignore-signal",
            "--list-signal-handling",
            "--debug",
            "--help",
            "--version",
        ])
        .command_options(&["-S", "--split-string"])
        .assignments(),
    w("nice", "n")
        .longs(&["--adjustment"])
        .flags(&["--help", "--version"]),
    w("nohup", "")
        .flags(&["--help", "--version"])
        .level(Low, DETACHES),
    w("time", "fo")
        .longs(&["--format", "--output"])
        .outputs(&["-o", "--output"])
        .flags(&[
            "--portability",
            "--append",
            "--verbose",
            "--quiet",
            "--help",
            "--version",
        ]),
    w("command", "").no_exec(&["-v", "-V"]),
    w("builtin", ""),
    w("exec", "a"),
    w("stdbuf", "ioe")
        .longs(&["--input", "--output", "--error"])
        .flags(&["--help", "--version"]),
    w("timeout", "sk")
        .longs(&["--signal", "--kill-after"])
        .flags(&[
            "--foreground",
            "--preserve-status",
            "--verbose",
            "--help",
            "--version",
        ])
        .positionals(1),
    w("ionice", "cnpPu")
        .longs(&["--class", "--classdata", "--pid", "--pgid", "--uid"])
        .flags(&["--ignore", "--help", "--version"]),
    w("chrt", "").positionals(1),
    w("taskset", "")
        .flags(&["--pid", "--cpu-list", "--all-tasks", "--help", "--version"])
        .positionals(1),
    w("setsid", "")
        .flags(&["--ctty", "--fork", "--wait", "--help", "--version"])
        .level(Low, DETACHES),
    w("unbuffer", ""),
    w("logwrapper", ""),
    w("coproc", "").level(Low, DETACHES),
    w("fakeroot", ""),
    w("busybox", ""),
    w("toybox", ""),
    w("toolbox", ""),
    w("flock", "wEc")
        .longs(&["--timeout", "--conflict-exit-code", "--command"])
        .flags(&[
            "--shared",
            "--exclusive",
            "--unlock",
            "--nonblock",
            "--nb",
            "--no-fork",
            "--close",
            "--verbose",
            "--help",
            "--version",
        ])
        .command_options(&["-c", "--command"])
        .positionals(1),
    w("xargs", "adEILnPs")
        .optional("eil")
        .longs(&[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ])
        .flags(&[
            "--null",
            "--eof",
            "--replace",
            "--max-lines",
            "--interactive",
            "--no-run-if-empty",
            "--show-limits",
            "--verbose",
            "--exit",
            "--open-tty",
            "--help",
            "--version",
        ])
        .feeds("echo"),
    w("watch", "nd").longs(&["--interval", "--equexit"]).joins(),
    w("strace", "eoOpsSuEPXb")
        .outputs(&["-o"])
        .level(Medium, "traces another program"),
    w("ltrace", "eoOpsSuEPXb")
        .outputs(&["-o"])
        .level(Medium, "traces another program"),
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
    w("daemonize", "aceEiopPu").level(Medium, DETACHES),
];
