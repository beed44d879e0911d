//! What writing or reading a path means, as data. Patterns are absolute paths whose
//! components may hold `*` and `?`; a pattern covers everything below it; `**/` in front
//! matches at any depth. The most specific matching row wins (most components, then most
//! literal characters); a tie takes the higher level. A home directory written as `~` is
//! matched as `/~`.

use std::sync::LazyLock;

use nl2sh_proto::channels::RiskLevel::{self, Critical, Dangerous, High, Low, Medium, ReadOnly};

use crate::secrets::SECRET_LOCATIONS;

pub(super) const WRITE_PATHS: &[(&str, RiskLevel, &str)] = &[
    // Raw storage and memory.
    ("/dev/block", Critical, "raw storage device"),
    ("/dev/sd*", Critical, "raw storage device"),
    ("/dev/hd*", Critical, "raw storage device"),
    ("/dev/vd*", Critical, "raw storage device"),
    ("/dev/xvd*", Critical, "raw storage device"),
    ("/dev/nvme*", Critical, "raw storage device"),
    ("/dev/mmcblk*", Critical, "raw storage device"),
    ("/dev/mtd*", Critical, "raw flash device"),
    ("/dev/dm-*", Critical, "raw storage device"),
    ("/dev/mapper", Critical, "raw storage device"),
    ("/dev/disk", Critical, "raw storage device"),
    ("/dev/loop*", Critical, "raw storage device"),
    ("/dev/mem", Critical, "physical memory"),
    ("/dev/kmem", Critical, "kernel memory"),
    ("/dev/port", Critical, "I/O ports"),
    ("/dev", High, "device node"),
    // Harmless sinks.
    ("/dev/null", ReadOnly, "discarded output"),
    ("/dev/zero", ReadOnly, "discarded output"),
    ("/dev/full", ReadOnly, "discarded output"),
    ("/dev/stdout", ReadOnly, "standard output"),
    ("/dev/stderr", ReadOnly, "standard error"),
    ("/dev/fd", ReadOnly, "an open descriptor"),
    ("/dev/tty", ReadOnly, "the terminal"),
    ("/dev/random", ReadOnly, "the entropy pool"),
    ("/dev/urandom", ReadOnly, "the entropy pool"),
    ("/proc/self/fd", ReadOnly, "an open descriptor"),
    // Kernel state.
    ("/proc", High, "kernel or process state"),
    ("/proc/sys", High, "kernel setting"),
    (
        "/proc/sysrq-trigger",
        Dangerous,
        "can reboot or crash the kernel",
    ),
    ("/sys", High, "kernel or device setting"),
    // Android partitions and system state.
    ("/system", Dangerous, "system partition"),
    ("/system_ext", Dangerous, "system partition"),
    ("/vendor", Dangerous, "vendor partition"),
    ("/product", Dangerous, "product partition"),
    ("/odm", Dangerous, "ODM partition"),
    ("/oem", Dangerous, "OEM partition"),
    ("/apex", Dangerous, "system modules"),
    ("/boot", Dangerous, "boot files"),
    ("/init*", Dangerous, "init program and scripts"),
    ("/sbin", Dangerous, "system programs"),
    ("/metadata", Dangerous, "encryption metadata"),
    ("/persist", Critical, "device calibration and identity data"),
    (
        "/mnt/vendor/persist",
        Critical,
        "device calibration and identity data",
    ),
    ("/efs", Critical, "radio identity data (IMEI)"),
    (
        "/cache/recovery",
        Dangerous,
        "recovery commands (can wipe the device)",
    ),
    (
        "/data/adb",
        Dangerous,
        "root (Magisk) files and boot scripts",
    ),
    ("/data/system", Dangerous, "Android system state"),
    ("/data/system_ce", Dangerous, "Android system state"),
    ("/data/system_de", Dangerous, "Android system state"),
    ("/data/property", Dangerous, "persistent properties"),
    ("/data/misc", High, "system service data"),
    ("/data/app", High, "installed apps"),
    ("/data/vendor", High, "vendor data"),
    ("/data/data", Medium, "an app's private data"),
    ("/data/user", Medium, "an app's private data"),
    ("/data/user_de", Medium, "an app's private data"),
    ("/data/local/tmp", Low, "scratch space"),
    ("/sdcard", Low, "shared storage"),
    // Linux system files.
    ("/bin", Dangerous, "system programs"),
    ("/usr", Dangerous, "system programs"),
    ("/lib", Dangerous, "system libraries"),
    ("/lib32", Dangerous, "system libraries"),
    ("/lib64", Dangerous, "system libraries"),
    ("/etc", High, "system configuration"),
    ("/etc/passwd", Dangerous, "user accounts"),
    ("/etc/shadow", Dangerous, "password hashes"),
    ("/etc/group", Dangerous, "user groups"),
    ("/etc/gshadow", Dangerous, "group passwords"),
    ("/etc/sudoers", Dangerous, "root access rules"),
    ("/etc/sudoers.d", Dangerous, "root access rules"),
    (
        "/etc/ld.so.preload",
        Dangerous,
        "loads code into every program",
    ),
    ("/root", High, "root's home"),
    ("/var/spool/cron", High, "scheduled jobs"),
    // Files that run code or grant access later.
    ("**/.ssh", High, "SSH keys and settings"),
    ("**/.ssh/authorized_keys", Dangerous, "grants remote login"),
    ("**/.bashrc", High, "runs at shell start"),
    ("**/.bash_profile", High, "runs at login"),
    ("**/.profile", High, "runs at login"),
    ("**/.zshrc", High, "runs at shell start"),
    ("**/.mkshrc", High, "runs at shell start"),
    ("**/.config/autostart", High, "runs at login"),
    // nl2sh's own state and configuration.
    ("**/*.state", Dangerous, "nl2sh state (approvals, audit)"),
    (
        "**/config.toml",
        High,
        "may be nl2sh's configuration (approval policy)",
    ),
];

/// What reading a path means, beyond [`SECRET_LOCATIONS`] (every one of which is
/// `medium` to read: [`READ_PATHS`]): secrets wherever they are (`**/`), raw storage and
/// memory, other processes' memory and environment.
const READ_RULES: &[(&str, RiskLevel, &str)] = &[
    (
        "/data/system/gatekeeper*",
        Medium,
        "lock screen credentials",
    ),
    ("**/.ssh/id_*", Medium, "SSH private key"),
    ("**/.ssh/id_*.pub", ReadOnly, "SSH public key"),
    // Public keys are no secret, in the homes whose `.ssh` is one too.
    ("/root/.ssh/id_*.pub", ReadOnly, "SSH public key"),
    ("/home/*/.ssh/id_*.pub", ReadOnly, "SSH public key"),
    ("/~/.ssh/id_*.pub", ReadOnly, "SSH public key"),
    ("**/.gnupg", Medium, "GnuPG keys"),
    ("**/.aws/credentials", Medium, "cloud credentials"),
    ("**/.netrc", Medium, "stored passwords"),
    ("**/.git-credentials", Medium, "stored passwords"),
    ("**/.docker/config.json", Medium, "registry credentials"),
    ("**/.kube/config", Medium, "cluster credentials"),
    (
        "**/config.toml",
        Medium,
        "may hold nl2sh secrets (model API key, token)",
    ),
    ("**/*.state/protocol", Medium, "nl2sh credentials"),
    ("**/*.state/sessions", Medium, "agent session history"),
    ("/dev/block", Medium, "raw storage"),
    ("/dev/sd*", Medium, "raw storage"),
    ("/dev/mmcblk*", Medium, "raw storage"),
    ("/dev/nvme*", Medium, "raw storage"),
    ("/dev/mem", Medium, "physical memory"),
    ("/dev/kmem", Medium, "kernel memory"),
    ("/proc/kcore", Medium, "kernel memory"),
    ("/proc/*/environ", Medium, "another process's environment"),
    ("/proc/*/mem", Medium, "another process's memory"),
];

/// What reading a path means: every secret location the sandbox masks, `medium`, and
/// [`READ_RULES`]. One table of secrets, so that what the sandbox hides and what asks a
/// person before it is read cannot drift apart.
pub(super) static READ_PATHS: LazyLock<Vec<(&'static str, RiskLevel, &'static str)>> =
    LazyLock::new(|| {
        let mut rows: Vec<_> = SECRET_LOCATIONS
            .iter()
            .map(|(pattern, why)| (*pattern, Medium, *why))
            .collect();
        // A home directory written `~` is matched as `/~` (module comment): the
        // secrets of every home are the secrets of `~` too.
        rows.extend(SECRET_LOCATIONS.iter().filter_map(|(pattern, why)| {
            let rest = pattern.strip_prefix("/home/*/")?;
            let tilde: &'static str = Box::leak(format!("/~/{rest}").into_boxed_str());
            Some((tilde, Medium, *why))
        }));
        rows.extend(READ_RULES.iter().copied());
        rows
    });

/// Trees whose recursive deletion destroys the system or all the user's data. A
/// component `*` stands for any one name (every home directory).
pub(super) const CRITICAL_TREES: &[&str] = &[
    "/",
    "/system",
    "/system_ext",
    "/vendor",
    "/product",
    "/odm",
    "/apex",
    "/boot",
    "/data",
    "/data/data",
    "/data/user",
    "/data/user/0",
    "/data/media",
    "/data/media/0",
    "/sdcard",
    "/storage",
    "/storage/emulated",
    "/storage/emulated/0",
    "/storage/self/primary",
    "/mnt",
    "/mnt/sdcard",
    "/persist",
    "/efs",
    "/metadata",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/var",
    "/dev",
    "/sys",
    "/proc",
    "/root",
    "/home",
    "/home/*",
    "/Users/*",
    "/~",
];
