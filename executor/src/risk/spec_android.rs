//! Option grammars of Android tools. The service front ends (`pm`, `am`, `settings`,
//! `cmd`, …) take their own options before the subcommand; what follows belongs to the
//! subcommand, whose rows in `table.rs` decide.

use super::spec::{spec, Spec, Style};

pub(super) const ANDROID_SPECS: &[Spec] = &[
    spec("getprop", "TZ", "").style(Style::Leading),
    spec("dumpsys", "lhc", "tT")
        .longs(&[
            "help",
            "skip=",
            "proto",
            "priority=",
            "pid",
            "stability",
            "thread",
            "clients",
            "dump",
        ])
        .exact()
        .style(Style::Leading),
    spec("logcat", "cdDLSBhgpsQ", "fbrnvtTmeGP")
        .longs(&[
            "buffer=/b",
            "binary/B",
            "clear/c",
            "dividers/D",
            "file=/f",
            "format=/v",
            "last/L",
            "max-count=/m",
            "print",
            "prune=?",
            "regex=/e",
            "rotate-count=/n",
            "rotate-kbytes=/r",
            "statistics/S",
            "buffer-size=?",
            "help",
            "pid=",
            "wrap=?",
            "uid=",
            "id=",
        ])
        .exact(),
    spec("getevent", "tnSdpilrqh", "svc"),
    spec("pm", "", "").style(Style::Leading),
    spec("am", "", "").style(Style::Leading),
    spec("wm", "", "").style(Style::Leading),
    spec("content", "", "").style(Style::Leading),
    spec("sm", "", "").style(Style::Leading),
    spec("bootctl", "", "").style(Style::Leading),
    spec("settings", "", "")
        .longs(&["user="])
        .exact()
        .style(Style::Leading),
    spec("cmd", "lw", "").style(Style::Leading),
    spec("service", "lh", "").style(Style::Leading),
    spec("screencap", "hjpa", "d"),
    spec("adb", "adeh", "stHPL")
        .longs(&["one-device=", "exit-on-write-error", "help"])
        .exact()
        .style(Style::Leading),
];
