//! Programs and names that run other code or end the system, as data.

use nl2sh_proto::channels::RiskLevel::{self, Critical, Dangerous, High, Medium};

/// Variables that change what a command runs when set for it or exported.
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
