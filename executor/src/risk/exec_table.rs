//! Programs and names that run other code or end the system, as data.

use nl2sh_proto::channels::RiskLevel::{self, Critical, Dangerous, High, Medium};

/// Variables that change what a command runs when set for it or exported (also when
/// assigned: a variable already exported keeps being exported).
pub(super) const ENV_VARS: &[(&str, RiskLevel, &str)] = &[
    ("LD_PRELOAD", High, "loads a library into the program"),
    ("LD_AUDIT", High, "loads a library into the program"),
    (
        "LD_LIBRARY_PATH",
        Medium,
        "changes where libraries load from",
    ),
    ("PATH", Medium, "changes which programs run"),
    ("BASH_ENV", High, "runs a script when bash starts"),
    ("ENV", High, "runs a script when the shell starts"),
    ("IFS", Medium, "changes word splitting"),
    ("PS4", Medium, "may run commands when tracing"),
    ("PROMPT_COMMAND", Medium, "runs a command at each prompt"),
    ("SHELLOPTS", Medium, "changes shell options"),
    ("PYTHONPATH", Medium, "changes which Python code runs"),
    ("NODE_OPTIONS", Medium, "changes which Node code runs"),
    ("PERL5OPT", Medium, "changes which Perl code runs"),
    ("CLASSPATH", Medium, "changes which Java code runs"),
    // Pagers, editors, preprocessors: programs run by the ones given them.
    ("LESSOPEN", High, "runs the program named by LESSOPEN"),
    ("LESSCLOSE", High, "runs the program named by LESSCLOSE"),
    ("LESSEDIT", High, "runs the editor named by LESSEDIT"),
    (
        "LESS",
        High,
        "gives less options (a key file can set LESSOPEN)",
    ),
    (
        "LESSKEY",
        High,
        "loads a less key file (it can set LESSOPEN)",
    ),
    (
        "LESSKEYIN",
        High,
        "loads a less key file (it can set LESSOPEN)",
    ),
    (
        "LESSKEY_CONTENT",
        High,
        "defines less keys (they can set LESSOPEN)",
    ),
    ("VISUAL", High, "runs the editor named by VISUAL"),
    ("EDITOR", High, "runs the editor named by EDITOR"),
    ("FCEDIT", High, "runs the editor named by FCEDIT"),
    ("PAGER", High, "runs the program named by PAGER"),
    ("MANPAGER", High, "runs the program named by MANPAGER"),
    ("MANOPT", Medium, "gives man options"),
    ("BROWSER", High, "runs the program named by BROWSER"),
    (
        "SYSTEMD_PAGER",
        High,
        "runs the program named by SYSTEMD_PAGER",
    ),
    (
        "SYSTEMD_EDITOR",
        High,
        "runs the editor named by SYSTEMD_EDITOR",
    ),
    ("SUDO_EDITOR", High, "runs the editor named by SUDO_EDITOR"),
    (
        "SUDO_ASKPASS",
        High,
        "runs the program named by SUDO_ASKPASS",
    ),
    ("SSH_ASKPASS", High, "runs the program named by SSH_ASKPASS"),
    ("SHELL", Medium, "programs that start a shell run this one"),
    ("GIT_PAGER", High, "runs the program named by GIT_PAGER"),
    ("GIT_EDITOR", High, "runs the editor named by GIT_EDITOR"),
    (
        "GIT_SEQUENCE_EDITOR",
        High,
        "runs the editor named by GIT_SEQUENCE_EDITOR",
    ),
    (
        "GIT_EXTERNAL_DIFF",
        High,
        "runs the program named by GIT_EXTERNAL_DIFF",
    ),
    ("GIT_SSH", High, "runs the program named by GIT_SSH"),
    (
        "GIT_SSH_COMMAND",
        High,
        "runs the command in GIT_SSH_COMMAND",
    ),
    ("GIT_ASKPASS", High, "runs the program named by GIT_ASKPASS"),
    (
        "GIT_PROXY_COMMAND",
        High,
        "runs the program named by GIT_PROXY_COMMAND",
    ),
    (
        "GIT_EXEC_PATH",
        High,
        "runs git commands from another directory",
    ),
    (
        "GIT_CONFIG",
        High,
        "reads another git configuration (it can run programs)",
    ),
    (
        "GIT_CONFIG_PARAMETERS",
        High,
        "sets git configuration (it can run programs)",
    ),
    (
        "GIT_CONFIG_COUNT",
        High,
        "sets git configuration (it can run programs)",
    ),
    (
        "GIT_DIR",
        Medium,
        "uses another repository (its configuration can run programs)",
    ),
    ("GIT_WORK_TREE", Medium, "uses another work tree"),
    (
        "TAR_OPTIONS",
        High,
        "gives tar options (they can run programs)",
    ),
    (
        "RIPGREP_CONFIG_PATH",
        High,
        "gives rg options (they can run programs)",
    ),
    ("GZIP", Medium, "gives gzip options"),
    ("XZ_OPT", Medium, "gives xz options"),
    ("XZ_DEFAULTS", Medium, "gives xz options"),
    ("BZIP2", Medium, "gives bzip2 options"),
    ("BZIP", Medium, "gives bzip2 options"),
    ("UNZIP", Medium, "gives unzip options"),
    ("UNZIPOPT", Medium, "gives unzip options"),
    ("ZIPOPT", Medium, "gives zip options"),
    ("GREP_OPTIONS", Medium, "gives grep options"),
    ("AWKPATH", Medium, "changes which awk program files load"),
    ("AWKLIBPATH", High, "changes which awk extensions load"),
    ("GCONV_PATH", High, "loads character set modules"),
    (
        "JAVA_TOOL_OPTIONS",
        High,
        "gives the JVM options (agents run code)",
    ),
    (
        "_JAVA_OPTIONS",
        High,
        "gives the JVM options (agents run code)",
    ),
    (
        "JDK_JAVA_OPTIONS",
        High,
        "gives the JVM options (agents run code)",
    ),
    ("RUBYOPT", Medium, "changes which Ruby code runs"),
    ("RUBYLIB", Medium, "changes which Ruby code runs"),
    ("PERL5LIB", Medium, "changes which Perl code runs"),
    ("PERLLIB", Medium, "changes which Perl code runs"),
    ("PYTHONSTARTUP", Medium, "runs a Python file"),
    ("PYTHONHOME", Medium, "changes which Python code runs"),
    ("NODE_PATH", Medium, "changes which Node code runs"),
    ("ZDOTDIR", Medium, "changes which zsh startup files run"),
    ("APT_CONFIG", Medium, "reads another apt configuration"),
    ("WGETRC", Medium, "reads another wget configuration"),
];

/// Variable name prefixes with the same effect.
pub(super) const ENV_PREFIXES: &[(&str, RiskLevel, &str)] = &[
    ("LD_", Medium, "changes how programs load"),
    ("BASH_FUNC_", High, "defines a shell function"),
    (
        "GIT_CONFIG_",
        High,
        "sets git configuration (it can run programs)",
    ),
    (
        "npm_config_",
        Medium,
        "sets npm configuration (it can run scripts)",
    ),
    ("PIP_", Medium, "sets pip configuration"),
];

/// Variables whose value is a command line: it is assessed as one.
pub(super) const ENV_COMMANDS: &[&str] = &[
    "LESSOPEN",
    "LESSCLOSE",
    "VISUAL",
    "EDITOR",
    "FCEDIT",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "SYSTEMD_PAGER",
    "SYSTEMD_EDITOR",
    "SUDO_EDITOR",
    "SUDO_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
];

/// Programs that run code given to them: (name, options taking inline code, POSIX shell).
/// A POSIX shell's code is assessed; other languages' code is not understood.
pub(super) const INTERPRETERS: &[(&str, &[&str], bool)] = &[
    ("sh", &["-c"], true),
    ("bash", &["-c"], true),
    ("rbash", &["-c"], true),
    ("dash", &["-c"], true),
    ("ash", &["-c"], true),
    ("mksh", &["-c"], true),
    ("lksh", &["-c"], true),
    ("ksh", &["-c"], true),
    ("zsh", &["-c"], true),
    ("yash", &["-c"], true),
    ("posh", &["-c"], true),
    ("fish", &["-c"], true),
    ("python", &["-c"], false),
    ("perl", &["-e", "-E"], false),
    ("ruby", &["-e"], false),
    ("node", &["-e", "-p", "--eval", "--print"], false),
    ("nodejs", &["-e", "-p", "--eval", "--print"], false),
    ("php", &["-r"], false),
    ("lua", &["-e"], false),
    ("luajit", &["-e"], false),
    ("tclsh", &[], false),
    ("Rscript", &["-e"], false),
    ("pwsh", &["-c", "-Command"], false),
    ("bun", &["-e"], false),
];

/// Intent actions that wipe, reboot or power off the device when sent with `am`.
pub(super) const AM_ACTIONS: &[(&str, RiskLevel, &str)] = &[
    (
        "android.intent.action.MASTER_CLEAR",
        Critical,
        "factory reset",
    ),
    (
        "android.intent.action.FACTORY_RESET",
        Critical,
        "factory reset",
    ),
    (
        "android.intent.action.REBOOT",
        Dangerous,
        "reboots the device",
    ),
    (
        "android.intent.action.ACTION_REQUEST_SHUTDOWN",
        Dangerous,
        "powers the device off",
    ),
    (
        "com.android.internal.intent.action.REQUEST_SHUTDOWN",
        Dangerous,
        "powers the device off",
    ),
];

/// Killing these ends or restarts the whole system.
pub(super) const CORE_PROCESSES: &[&str] = &[
    "init",
    "zygote",
    "zygote64",
    "system_server",
    "surfaceflinger",
    "servicemanager",
    "vold",
    "ueventd",
    "systemd",
];

/// Directories whose programs are the system's own: a program elsewhere may be anything,
/// whatever its name.
pub(super) const SYSTEM_BIN_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/system/bin",
    "/system/xbin",
    "/system_ext/bin",
    "/vendor/bin",
    "/product/bin",
    "/apex/*/bin",
    "/debug_ramdisk",
    "/data/adb/magisk",
    "/data/adb/ksu/bin",
    "/data/adb/ap/bin",
    "/data/data/com.termux/files/usr/bin",
];
