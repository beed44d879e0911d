//! Every row of the classification tables, run through `assess_shell`.

use nl2sh_proto::channels::RiskLevel::{self, Critical, Dangerous, High, Low, Medium, ReadOnly};

use super::super::assess_shell;
use super::super::exec_table::{
    AM_ACTIONS, CORE_PROCESSES, ENV_COMMANDS, ENV_PREFIXES, ENV_VARS, INTERPRETERS, SYSTEM_BIN_DIRS,
};
use super::super::io_table::{Targets, OUTPUT_OPTIONS, READERS, READER_SCRIPTS, WRITERS};
use super::super::io_table::{INPUT_OPTIONS, RECURSIVE};
use super::super::option_table::MODES_WITHOUT_OPERANDS;
use super::super::option_table::{ALIASES, FLAGS, OPTION_MODES};
use super::super::options::Flag::{Long, Short};
use super::super::spec::{spec_of, Resolved, Takes};
use super::super::table::DUMPSYS_ACTIONS;
use super::super::table::{PROGRAMS, PROGRAM_PREFIXES, ROOT_PROGRAMS, SUBCOMMANDS};
use super::super::taint::{TAINT_BUILTINS, TAINT_NAMES, TAINT_PREFIXES, TAINT_SUFFIXES};
use super::super::wrap_table::WRAPPERS;
use super::super::{assess_shell_protected, Protected};
use super::{at_least, exactly};

/// Rows whose probe (`NAME a b`) is decided by a rule rather than the row itself.
const PROBE_EXCEPTIONS: &[(&str, RiskLevel)] = &[
    ("uniq", Low),     // `uniq a b` writes b.
    ("sed", ReadOnly), // `a` is sed's append command.
    ("setprop", High),
    ("bugreport", Low),
    ("trap", Medium), // `trap a b` runs `a` on signal b.
    ("xxd", Low),     // `xxd a b` writes b.
];

#[test]
fn every_program_row() {
    for (name, level, why) in PROGRAMS {
        assert!(!why.is_empty() && !name.contains('/'), "{name}");
        let want = PROBE_EXCEPTIONS
            .iter()
            .find(|(n, _)| n == name)
            .map_or(*level, |(_, l)| *l);
        exactly(&format!("{name} a b"), want);
        exactly(&format!("/system/bin/{name} a b"), want);
    }
    let mut names: Vec<&str> = PROGRAMS.iter().map(|(n, ..)| *n).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), PROGRAMS.len(), "duplicate program rows");
}

#[test]
fn every_prefix_row() {
    for (prefix, level, _) in PROGRAM_PREFIXES {
        exactly(&format!("{prefix}x a"), *level);
    }
}

#[test]
fn every_root_program() {
    for name in ROOT_PROGRAMS {
        assert!(assess_shell(name).requires_root, "{name}");
    }
    assert!(!assess_shell("ls").requires_root);
}

#[test]
fn every_subcommand_row() {
    for (program, pattern, level, _) in SUBCOMMANDS {
        let operands: Vec<&str> = pattern
            .iter()
            .filter(|p| **p != "$")
            .map(|p| if *p == "*" { "x" } else { p })
            .collect();
        exactly(&format!("{program} {}", operands.join(" ")), *level);
    }
}

#[test]
fn every_option_mode_row() {
    for (program, flag, level, _) in OPTION_MODES {
        exactly(&format!("{program} {}", flag.example()), *level);
    }
}

#[test]
fn every_flag_row() {
    for (program, flag, level, _) in FLAGS {
        at_least(&format!("{program} {} x", flag.example()), *level);
    }
}

#[test]
fn every_writer_row() {
    for (program, targets) in WRITERS {
        for (path, level) in [("/system/x", Dangerous), ("/dev/block/sda", Critical)] {
            let line = match targets {
                Targets::First => format!("{program} {path} a"),
                _ => format!("{program} a {path}"),
            };
            at_least(&line, level);
        }
    }
}

#[test]
fn every_output_option_row() {
    for (program, flag) in OUTPUT_OPTIONS {
        // An optional value is only given attached (`awk -o/system/x`).
        let attached = match flag {
            Short(c) => spec_of(program).and_then(|s| s.short(*c)) == Some(Takes::Optional),
            _ => false,
        };
        let sep = if attached { "" } else { " " };
        at_least(
            &format!("{program} {}{sep}/system/x", flag.example()),
            Dangerous,
        );
    }
}

#[test]
fn every_reader_row() {
    for program in READERS {
        // A program that takes a script or pattern first reads the files after it.
        let script = READER_SCRIPTS.iter().any(|(p, _)| p == program);
        let pattern = if script { "p " } else { "" };
        at_least(&format!("{program} {pattern}/etc/shadow"), Medium);
    }
}

#[test]
fn every_alias_row() {
    for (program, operand, target) in ALIASES {
        let via = assess_shell(&format!("{program} {operand} zz"));
        let direct = assess_shell(&format!("{target} zz"));
        assert_eq!(via.level, direct.level, "{program} {operand}");
    }
}

#[test]
fn every_env_var_row() {
    for (name, level, _) in ENV_VARS {
        exactly(&format!("{name}=x ls"), *level);
        exactly(&format!("env {name}=x ls"), *level);
    }
}

#[test]
fn every_interpreter_row() {
    for (name, inline, posix) in INTERPRETERS {
        at_least(&format!("echo x | {name}"), High);
        exactly(&format!("{name} script"), Medium);
        if let Some(flag) = inline.first() {
            if *posix {
                exactly(&format!("{name} {flag} 'rm -rf /'"), Critical);
            } else {
                exactly(&format!("{name} {flag} 'code'"), High);
            }
        }
    }
}

#[test]
fn every_wrapper_row() {
    for w in WRAPPERS {
        let fill = vec!["p"; w.positionals].join(" ");
        let line = format!("{} {fill} rm -rf /", w.name);
        let a = assess_shell(&line);
        assert_eq!(a.level, Critical, "{line}: {:?}", a.reasons);
        assert_eq!(a.requires_root, w.root, "{line}");
        assert!(!w.why.is_empty());
    }
}

#[test]
fn every_wrapper_output() {
    for w in WRAPPERS {
        for option in w.outputs {
            let fill = vec!["p"; w.positionals].join(" ");
            at_least(
                &format!("{} {option} /system/x {fill} ls", w.name),
                Dangerous,
            );
        }
    }
}

#[test]
fn every_am_action() {
    for (action, level, _) in AM_ACTIONS {
        exactly(&format!("am broadcast -a {action}"), *level);
    }
}

#[test]
fn every_core_process() {
    for name in CORE_PROCESSES {
        exactly(&format!("killall {name}"), Dangerous);
    }
}

#[test]
fn every_system_bin_dir() {
    for dir in SYSTEM_BIN_DIRS {
        let dir = dir.replace('*', "com.android.runtime");
        exactly(&format!("{dir}/ls"), ReadOnly);
        exactly(&format!("{dir}/../tmp/ls"), Medium);
    }
    exactly("/data/local/tmp/ls", Medium);
    let _ = High;
}

#[test]
fn every_env_prefix_row() {
    for (prefix, level, _) in ENV_PREFIXES {
        at_least(&format!("{prefix}X=x ls"), *level);
        at_least(&format!("env {prefix}X=x ls"), *level);
    }
}

#[test]
fn every_env_command_row() {
    for name in ENV_COMMANDS {
        exactly(&format!("{name}='rm -rf /' ls"), Critical);
        assert!(ENV_VARS.iter().any(|(n, ..)| n == name), "{name}");
    }
}

#[test]
fn every_taint_row() {
    for (name, _) in TAINT_NAMES {
        at_least(&format!("{name}=x; ls"), Medium);
        at_least(&format!("export {name}=x; ls"), Medium);
        at_least(&format!("for {name} in x; do ls; done"), Medium);
    }
    for (prefix, _) in TAINT_PREFIXES {
        at_least(&format!("{prefix}X=x; ls"), Medium);
    }
    for (suffix, _) in TAINT_SUFFIXES {
        at_least(&format!("X{suffix}=x; ls"), Medium);
    }
    for (builtin, _) in TAINT_BUILTINS {
        at_least(&format!("{builtin} x; ls"), Medium);
    }
    exactly("X=x; ls", ReadOnly);
}

#[test]
fn every_input_option_row() {
    for (program, flag) in INPUT_OPTIONS {
        let spec = spec_of(program);
        let takes = match flag {
            Short(c) => spec.and_then(|s| s.short(*c)),
            Long(l) => match spec.map(|s| s.long(l.trim_start_matches('-'))) {
                Some(Resolved::Found(e)) => Some(e.takes),
                _ => None,
            },
            _ => None,
        };
        // An optional value is attached; of two, the file is the second.
        let sep = match takes {
            Some(Takes::Optional) => "",
            Some(Takes::Two) => " name ",
            _ => " ",
        };
        at_least(
            &format!("{program} {}{sep}/etc/shadow x", flag.example()),
            Medium,
        );
    }
}

#[test]
fn every_recursive_row() {
    let protected = Protected::new([std::path::PathBuf::from("/tmp/nlx/config.toml")]);
    for (program, flag) in RECURSIVE {
        let flag = flag.map_or(String::new(), |f| f.example());
        let line = format!("{program} {flag} p /tmp");
        let a = assess_shell_protected(&line, &protected);
        assert!(a.level >= Dangerous, "{line}: {:?}", a.reasons);
    }
}

#[test]
fn every_dumpsys_action() {
    for (word, level, _) in DUMPSYS_ACTIONS {
        let word = word.replace('*', "x");
        at_least(&format!("dumpsys svc {word}"), *level);
    }
}

#[test]
fn modes_need_no_operands() {
    for program in MODES_WITHOUT_OPERANDS {
        let (_, flag, ..) = OPTION_MODES
            .iter()
            .find(|(p, ..)| p == program)
            .unwrap_or_else(|| panic!("{program} has no mode"));
        exactly(&format!("{program} {}", flag.example()), ReadOnly);
        at_least(&format!("{program} {} x", flag.example()), Low);
    }
}
