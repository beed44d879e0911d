//! A program classified by the tables: base level, subcommands, option modes, flags,
//! files written and read; what its option grammar does not understand; then the
//! argument rules in `rules.rs` and `builtins.rs`.

use nl2sh_proto::channels::RiskLevel::{self, Medium, ReadOnly};

use super::args::Arg;
use super::classify::{Stdin, Walker};
use super::invoke::without_version;
use super::io_table::{
    Targets, INPUT_OPTIONS, OUTPUT_OPTIONS, READERS, READER_SCRIPTS, RECURSIVE, WRITERS,
};
use super::lexer::shorten;
use super::option_table::{ALIASES, FLAGS, MODES_WITHOUT_OPERANDS, OPTION_MODES};
use super::options::Cli;
use super::table::{PROGRAMS, PROGRAM_PREFIXES, ROOT_PROGRAMS, SUBCOMMANDS};
use super::Assessment;

impl Walker {
    pub fn plain(&mut self, name: &str, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        let key = table_key(name);
        let cli = Cli::new(key, args);
        let mut a = Assessment::read_only();
        if ROOT_PROGRAMS.contains(&key) {
            a.require_root(format!("{key} needs root"));
        }
        if let Some(command) = alias(key, &cli, args) {
            a.merge(self.invoke(&command, depth + 1, stdin));
            return a;
        }
        let (mut level, mut why) = base(key);
        let mut read_only_mode = false;
        if let Some((mode_level, mode_why)) = mode(key, &cli) {
            (level, why) = (mode_level, mode_why);
            read_only_mode = mode_level == ReadOnly;
        }
        a.raise(level, format!("{}: {why}", shorten(key)));
        for (_, flag, level, why) in FLAGS.iter().filter(|(p, f, ..)| *p == key && cli.has(*f)) {
            a.raise(*level, format!("{key} {}: {why}", flag.example()));
        }
        understood(key, level, &cli, &mut a);
        if !read_only_mode {
            if let Some((_, targets)) = WRITERS.iter().find(|(p, _)| *p == key) {
                for target in select(*targets, &cli.operands) {
                    a.merge(self.write_arg(target, key));
                }
            }
        }
        for (_, flag) in OUTPUT_OPTIONS.iter().filter(|(p, _)| *p == key) {
            for value in cli.values(*flag) {
                a.merge(self.write_arg(&value, key));
            }
        }
        for (_, flag) in INPUT_OPTIONS.iter().filter(|(p, _)| *p == key) {
            for value in cli.values(*flag) {
                a.merge(self.read_arg(&value, key));
            }
        }
        if READERS.contains(&key) {
            let skip = READER_SCRIPTS
                .iter()
                .find(|(p, _)| *p == key)
                .is_some_and(|(_, given)| !given.iter().any(|f| cli.has(*f)));
            for operand in cli.operands.iter().skip(usize::from(skip)) {
                a.merge(self.read_arg(operand, key));
            }
        }
        let recursive = RECURSIVE
            .iter()
            .any(|(p, f)| *p == key && f.is_none_or(|f| cli.has(f)));
        if recursive {
            for operand in &cli.operands {
                a.merge(self.tree_arg(operand, key));
            }
        }
        a.merge(self.rules(key, &cli, depth, stdin));
        a
    }
}

/// The read-only mode or subcommand that replaces the base level, if any.
fn mode(key: &str, cli: &Cli) -> Option<(RiskLevel, &'static str)> {
    subcommand(key, &cli.operands).or_else(|| {
        if MODES_WITHOUT_OPERANDS.contains(&key) && !cli.operands.is_empty() {
            return None;
        }
        OPTION_MODES
            .iter()
            .find(|(p, flag, ..)| *p == key && cli.has(*flag))
            .map(|(_, _, level, why)| (*level, *why))
    })
}

/// What the option grammar did not understand: unknown or ambiguous options, words that
/// may become options at run time, and options of programs without a grammar. A
/// read-only verdict needs all of it understood.
fn understood(key: &str, level: RiskLevel, cli: &Cli, a: &mut Assessment) {
    for problem in &cli.problems {
        a.raise(Medium, problem.clone());
    }
    if risky(key) {
        if let Some(arg) = cli.maybe_options.first() {
            a.raise(
                Medium,
                format!(
                    "{} may become an option of {key} at run time",
                    shorten(&arg.star)
                ),
            );
        }
    }
    if level == ReadOnly && cli.spec.is_none() && cli.any_option() {
        a.raise(Medium, format!("options of {key} are not known"));
    }
}

/// Whether some option of the program writes, reads files, runs programs or selects a
/// mode: then an argument that may turn into an option matters.
fn risky(key: &str) -> bool {
    FLAGS.iter().any(|(p, ..)| *p == key)
        || OUTPUT_OPTIONS.iter().any(|(p, _)| *p == key)
        || INPUT_OPTIONS.iter().any(|(p, _)| *p == key)
        || OPTION_MODES.iter().any(|(p, ..)| *p == key)
}

/// The name the tables know a program by: itself, or without a version suffix.
fn table_key(name: &str) -> &str {
    let known = |n: &str| PROGRAMS.iter().any(|(p, ..)| *p == n);
    if known(name) {
        return name;
    }
    let base = without_version(name);
    if !base.is_empty() && known(base) {
        base
    } else {
        name
    }
}

fn base(key: &str) -> (RiskLevel, &'static str) {
    if let Some((_, level, why)) = PROGRAMS.iter().find(|(p, ..)| *p == key) {
        return (*level, why);
    }
    if let Some((_, level, why)) = PROGRAM_PREFIXES.iter().find(|(p, ..)| key.starts_with(p)) {
        return (*level, why);
    }
    (Medium, "unknown program")
}

/// The longest matching subcommand row (a tie takes the higher level).
fn subcommand(key: &str, operands: &[&Arg]) -> Option<(RiskLevel, &'static str)> {
    SUBCOMMANDS
        .iter()
        .filter(|(p, pattern, ..)| *p == key && operands_match(pattern, operands))
        .max_by_key(|(_, pattern, level, _)| (pattern.len(), *level))
        .map(|(_, _, level, why)| (*level, *why))
}

fn operands_match(pattern: &[&str], operands: &[&Arg]) -> bool {
    pattern.iter().enumerate().all(|(i, p)| match *p {
        "$" => i == operands.len(),
        "*" => i < operands.len(),
        lit => operands.get(i).is_some_and(|a| a.is(lit)),
    })
}

/// `cmd package …` → `pm …`: the command to assess instead, if `key` is an alias.
fn alias(key: &str, cli: &Cli, args: &[Arg]) -> Option<Vec<Arg>> {
    let first = cli.operands.first()?;
    let (_, _, target) = ALIASES
        .iter()
        .find(|(p, op, _)| *p == key && first.is(op))?;
    let at = args.iter().position(|a| std::ptr::eq(a, *first))?;
    let mut command = vec![Arg::plain(target)];
    command.extend(args.get(at + 1..).unwrap_or_default().iter().cloned());
    Some(command)
}

fn select<'a>(targets: Targets, operands: &[&'a Arg]) -> Vec<&'a Arg> {
    match targets {
        Targets::All => operands.to_vec(),
        Targets::First => operands.first().copied().into_iter().collect(),
        Targets::Second => operands.get(1).copied().into_iter().collect(),
        Targets::Last => operands.last().copied().into_iter().collect(),
        Targets::SkipFirst => operands.iter().skip(1).copied().collect(),
    }
}
