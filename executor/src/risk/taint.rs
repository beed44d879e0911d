//! What makes later commands unknowable: aliases and functions (a later word may name
//! one), and changes to the variables that decide which program a name runs, how words
//! split or what `~` means (`PATH`, `IFS`, `ENV`, `LD_PRELOAD`, `HOME`, …), however they
//! are assigned. After one of these every later command of the line is at least
//! `medium`: the program a word names can no longer be known.

use super::args::Arg;
use super::ast::{is_name, Piece, Word};
use super::options::{Cli, Flag};

/// Variables whose change makes later program names, words or paths mean something else.
pub(super) const TAINT_NAMES: &[(&str, &str)] = &[
    ("PATH", "changes which program a name runs"),
    ("IFS", "changes how words split"),
    ("ENV", "runs a script when a shell starts"),
    ("BASH_ENV", "runs a script when bash starts"),
    ("CDPATH", "changes where `cd` goes"),
    ("SHELLOPTS", "changes shell options"),
    ("BASHOPTS", "changes shell options"),
    ("PS4", "runs commands when tracing"),
    ("PROMPT_COMMAND", "runs commands"),
    ("HOME", "changes what `~` means"),
    ("GLOBIGNORE", "changes pattern matching"),
    ("BASH_ALIASES", "defines aliases"),
    ("BASH_CMDS", "changes which program a name runs"),
    ("EXECIGNORE", "changes which program a name runs"),
    ("POSIXLY_CORRECT", "changes how programs read their options"),
    ("OLDPWD", "changes where `cd -` goes"),
];

/// Name prefixes and suffixes with the same effect.
pub(super) const TAINT_PREFIXES: &[(&str, &str)] = &[
    ("LD_", "changes how programs load"),
    ("BASH_FUNC_", "defines a function"),
];
pub(super) const TAINT_SUFFIXES: &[(&str, &str)] =
    &[("PATH", "changes where programs or files are looked up")];

/// Builtins whose every use makes later names unknowable.
pub(super) const TAINT_BUILTINS: &[(&str, &str)] = &[
    ("alias", "`alias` (a later word may be an alias)"),
    ("unalias", "`unalias` (a later word may be an alias)"),
    ("enable", "`enable` (builtins turned on or off, or loaded)"),
    (".", "`.` (the script may define anything)"),
    ("source", "`source` (the script may define anything)"),
];

/// Why assigning `name` taints what follows, if it does.
pub(super) fn taints(name: &str) -> Option<&'static str> {
    TAINT_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .or_else(|| TAINT_PREFIXES.iter().find(|(p, _)| name.starts_with(p)))
        .or_else(|| TAINT_SUFFIXES.iter().find(|(s, _)| name.ends_with(s)))
        .map(|(_, why)| *why)
}

/// The reason a variable assignment taints what follows.
pub(super) fn assigned(name: &str) -> Option<String> {
    taints(name).map(|why| format!("assigning {name} ({why})"))
}

/// Variables a builtin assigns (or unsets): `read NAME`, `export NAME=…`, `getopts S NAME`,
/// `printf -v NAME`, `mapfile NAME`, `wait -p NAME`, `unset NAME`.
pub(super) fn builtin_names(key: &str, cli: &Cli) -> Vec<String> {
    let names = |args: &mut dyn Iterator<Item = &Arg>| -> Vec<String> {
        args.map(|a| {
            let text = a.text();
            let name = text.split(['=', '[']).next().unwrap_or_default();
            name.trim_end_matches('+').to_string()
        })
        .collect()
    };
    match key {
        "read" | "unset" | "export" | "readonly" | "local" | "declare" | "typeset" => {
            let mut out = names(&mut cli.operands.iter().copied());
            for flag in ['a', 'p', 'v'] {
                if key == "read" || flag == 'v' {
                    out.extend(
                        cli.values(Flag::Short(flag))
                            .iter()
                            .map(|v| v.text().to_string()),
                    );
                }
            }
            out
        }
        "getopts" => names(&mut cli.operands.iter().skip(1).take(1).copied()),
        "mapfile" | "readarray" => {
            let mut out = names(&mut cli.operands.iter().copied());
            if out.is_empty() {
                out.push("MAPFILE".into());
            }
            out
        }
        "wait" => cli
            .values(Flag::Short('p'))
            .iter()
            .map(|v| v.text().to_string())
            .collect(),
        "printf" => match cli.args {
            [flag, name, ..] if flag.is("-v") => vec![name.text().to_string()],
            [flag, ..] if flag.text().starts_with("-v") => {
                vec![flag.text().get(2..).unwrap_or_default().to_string()]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Whether a name a builtin assigns taints (computed names may be anything).
pub(super) fn name_taints(name: &str) -> Option<String> {
    if name.is_empty() || !is_name(name) {
        return Some(format!(
            "assigning a variable named at run time ({})",
            super::lexer::shorten(name)
        ));
    }
    assigned(name)
}

/// Assignments hidden in expansions: `${PATH:=x}`, `$(( IFS = 1 ))`.
pub(super) fn in_word(w: &Word) -> Option<String> {
    for p in &w.pieces {
        match p {
            Piece::Param(param) => {
                if matches!(param.op.as_str(), "=" | ":=") {
                    if let Some(why) = assigned(&param.name) {
                        return Some(why);
                    }
                }
                for inner in param.arg.iter().chain(param.index.iter()) {
                    if let Some(why) = in_word(inner) {
                        return Some(why);
                    }
                }
            }
            Piece::Arith(inner) => {
                let text: String = inner
                    .pieces
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Char { ch, .. } => Some(*ch),
                        _ => None,
                    })
                    .collect();
                if let Some(why) = arith_assigns(&text) {
                    return Some(why);
                }
                if let Some(why) = in_word(inner) {
                    return Some(why);
                }
            }
            Piece::Char { .. } | Piece::Command(_) | Piece::Process { .. } => {}
        }
    }
    None
}

/// An arithmetic expression assigning a tainting variable (`IFS = 1`, `PATH += 2`).
pub(super) fn arith_assigns(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let is_start = |c: &char| c.is_ascii_alphabetic() || *c == '_';
        if !chars.get(i).is_some_and(is_start) {
            i += 1;
            continue;
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        let name: String = chars.get(start..i).unwrap_or_default().iter().collect();
        let rest: String = chars.get(i..).unwrap_or_default().iter().collect();
        let rest = rest.trim_start();
        let op: String = rest
            .chars()
            .take_while(|c| "+-*/%&|^<>=!".contains(*c))
            .collect();
        let assigns = op.starts_with("++")
            || op.starts_with("--")
            || op == "="
            || (op.len() >= 2
                && op.ends_with('=')
                && !matches!(op.as_str(), "==" | "!=" | "<=" | ">="));
        if assigns {
            if let Some(why) = assigned(&name) {
                return Some(why);
            }
        }
    }
    None
}
