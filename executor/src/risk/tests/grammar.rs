//! Option grammars (`spec_*.rs`), `find` primaries and iproute2's commands, row by row.

use nl2sh_proto::channels::RiskLevel::{Dangerous, High, Low, Medium, ReadOnly};

use super::super::assess_shell;
use super::super::find_table::{Does, FIND_PRIMARIES};
use super::super::ip_table::{What, IP_OBJECTS};
use super::super::option_table::OPTION_MODES;
use super::super::options::Flag;
use super::super::spec::{all_specs, resolve, spec_of, Resolved, Style, Takes};
use super::super::table::{PROGRAMS, SUBCOMMANDS};
use super::{at_least, exactly};

#[test]
fn grammars_are_consistent() {
    let mut names = Vec::new();
    for spec in all_specs() {
        names.push(spec.name);
        for c in spec.flags.chars() {
            assert!(
                !spec.values.contains(c) && !spec.optional.contains(c),
                "{}: -{c} is both a flag and takes a value",
                spec.name
            );
        }
        for c in spec.values.chars() {
            assert!(!spec.optional.contains(c), "{}: -{c} twice", spec.name);
        }
        let mut longs: Vec<&str> = Vec::new();
        for long in spec.longs {
            let Resolved::Found(entry) = resolve(spec.longs, long_name(long), true) else {
                panic!("{}: --{long} does not resolve to itself", spec.name);
            };
            assert!(
                !longs.contains(&entry.name),
                "{}: --{long} twice",
                spec.name
            );
            longs.push(entry.name);
            if let Some(c) = entry.short {
                assert_eq!(
                    spec.short(c),
                    Some(entry.takes),
                    "{}: --{} and -{c} differ",
                    spec.name,
                    entry.name
                );
            }
        }
    }
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "a program has two grammars");
}

/// `name=?/c` → `name`.
fn long_name(entry: &str) -> &str {
    entry.split(['=', '/']).next().unwrap_or_default()
}

/// getopt_long: every unambiguous prefix of a long option is that option; a prefix of
/// several (that are not one option's spellings) is not understood.
#[test]
fn long_prefixes_resolve_like_getopt() {
    for spec in all_specs().filter(|s| !s.exact) {
        for long in spec.longs {
            let name = long_name(long);
            for end in 1..=name.len() {
                let Some(prefix) = name.get(..end) else {
                    continue;
                };
                let others = spec
                    .longs
                    .iter()
                    .map(|l| long_name(l))
                    .filter(|n| n.starts_with(prefix))
                    .count();
                match spec.long(prefix) {
                    Resolved::Found(e) => assert!(
                        e.name == prefix || others == 1 || e.short.is_some(),
                        "{}: --{prefix} resolved to --{}",
                        spec.name,
                        e.name
                    ),
                    Resolved::Ambiguous(all) => {
                        assert!(all.contains(&name), "{}: --{prefix}", spec.name);
                    }
                    Resolved::Unknown => panic!("{}: --{prefix} unknown", spec.name),
                }
            }
        }
    }
}

/// Every program that can be read-only reads its command line with a grammar that
/// lists all it understands.
#[test]
fn read_only_programs_have_grammars() {
    let read_only = PROGRAMS
        .iter()
        .filter(|(_, level, _)| *level == ReadOnly)
        .map(|(p, ..)| *p)
        .chain(
            SUBCOMMANDS
                .iter()
                .filter(|(_, _, level, _)| *level == ReadOnly)
                .map(|(p, ..)| *p),
        )
        .chain(
            OPTION_MODES
                .iter()
                .filter(|(_, _, level, _)| *level == ReadOnly)
                .map(|(p, ..)| *p),
        );
    for program in read_only {
        let spec = spec_of(program).unwrap_or_else(|| panic!("{program} has no grammar"));
        assert!(spec.complete, "{program}: grammar is partial");
    }
}

/// An option a complete grammar does not list is not understood.
#[test]
fn unknown_options_are_not_read_only() {
    for spec in all_specs().filter(|s| s.complete) {
        if matches!(spec.style, Style::Operands | Style::Free) {
            continue;
        }
        let name = spec.name;
        let short = ('!'..='~')
            .filter(|c| c.is_ascii_alphanumeric())
            .find(|c| spec.short(*c).is_none());
        if let Some(c) = short {
            at_least(&format!("{name} -{c} x"), Medium);
        }
        at_least(&format!("{name} --zz-not-an-option x"), Medium);
    }
}

/// A mode flag given as another option's value is no mode (`gzip -S -c FILE`).
#[test]
fn mode_flags_in_values_are_values() {
    for (program, flag, level, _) in OPTION_MODES {
        let (Flag::Short(mode), Some(spec)) = (flag, spec_of(program)) else {
            continue;
        };
        if *level != ReadOnly {
            continue;
        }
        for v in spec.values.chars() {
            let line = format!("{program} -{v} -{mode} x");
            let a = assess_shell(&line);
            assert!(
                a.level > ReadOnly || spec.short(*mode) != Some(Takes::Nothing),
                "{line}: {:?}",
                a.reasons
            );
        }
    }
}

#[test]
fn every_find_primary() {
    for (primary, takes, does) in FIND_PRIMARIES {
        let args = vec!["a"; *takes].join(" ");
        match does {
            Does::Runs => at_least(&format!("find . {primary} rm {{}} ;"), High),
            Does::Writes => at_least(&format!("find . {primary} /system/x {args}"), Dangerous),
            Does::Reads => at_least(&format!("find . {primary} /etc/shadow"), Medium),
            Does::Nothing if *primary == "-delete" => {
                at_least(&format!("find . {primary}"), Dangerous);
            }
            Does::Nothing => exactly(&format!("find . '{primary}' {args}"), ReadOnly),
        }
    }
}

/// Every iproute2 object and command: shown commands are read-only, the rest are not.
#[test]
fn every_ip_command() {
    for object in IP_OBJECTS {
        walk(&format!("ip {}", object.name), &object.what);
    }
}

fn walk(line: &str, what: &What) {
    match what {
        What::Shows => exactly(line, ReadOnly),
        What::Changes => exactly(line, High),
        What::Runs => exactly(&format!("{line} ns reboot"), Dangerous),
        What::Nested(verbs, none) => {
            match none {
                What::Shows => exactly(line, ReadOnly),
                _ => at_least(line, High),
            }
            for verb in *verbs {
                walk(&format!("{line} {}", verb.name), &verb.what);
            }
        }
    }
}

#[test]
fn other_names_share_grammars() {
    for name in [
        "egrep",
        "gawk",
        "dir",
        "gunzip",
        "zcat",
        "xzcat",
        "bzcat",
        "ip6tables",
    ] {
        assert!(spec_of(name).is_some(), "{name}");
    }
    let _ = Low;
}

/// Options the tables name exist in the program's grammar, so a row cannot miss the
/// option through a typo or a value-taking mismatch.
#[test]
fn table_options_are_in_grammars() {
    use super::super::io_table::{INPUT_OPTIONS, OUTPUT_OPTIONS};
    use super::super::option_table::FLAGS;
    let rows = FLAGS
        .iter()
        .map(|(p, f, ..)| (*p, *f))
        .chain(OUTPUT_OPTIONS.iter().copied())
        .chain(INPUT_OPTIONS.iter().copied())
        .chain(OPTION_MODES.iter().map(|(p, f, ..)| (*p, *f)));
    for (program, flag) in rows {
        let Some(spec) = spec_of(program) else {
            continue;
        };
        if spec.style == Style::Free || !spec.complete {
            continue;
        }
        match flag {
            Flag::Short(c) => assert!(spec.short(c).is_some(), "{program} -{c}"),
            Flag::Long(l) => assert!(
                matches!(spec.long(l.trim_start_matches('-')), Resolved::Found(e) if e.name == l.trim_start_matches('-')),
                "{program} {l}"
            ),
            Flag::Word(w) | Flag::Prefix(w) => assert!(
                spec.longs
                    .iter()
                    .any(|l| long_name(l).starts_with(w.trim_start_matches('-')))
                    || spec
                        .words
                        .iter()
                        .any(|x| long_name(x).starts_with(w.trim_start_matches('-'))),
                "{program} {w}"
            ),
        }
    }
}
