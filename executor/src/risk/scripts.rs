//! Programs in other languages that text tools run: sed scripts and awk programs. Both
//! are read-only unless they write files or run commands, which is what is looked for.

use nl2sh_proto::channels::RiskLevel;

type Finding = Option<(RiskLevel, &'static str)>;

fn worse(a: Finding, b: Finding) -> Finding {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A sed script: `w` and `s///w` write files, `e` and `s///e` run commands. Anything
/// not recognised is reported as not understood.
pub(super) fn sed_script(script: &str) -> Finding {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let mut found: Finding = None;
    let not_understood = Some((RiskLevel::Medium, "sed script not understood"));
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ';') {
            i += 1;
        }
        if i >= chars.len() {
            return found;
        }
        if !skip_address(&chars, &mut i) {
            return not_understood;
        }
        let Some(cmd) = chars.get(i).copied() else {
            return not_understood;
        };
        i += 1;
        match cmd {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                while chars.get(i).is_some_and(char::is_ascii_digit) {
                    i += 1;
                }
            }
            's' => {
                let Some(delim) = chars.get(i).copied() else {
                    return not_understood;
                };
                i += 1;
                if !skip_delimited(&chars, &mut i, delim) || !skip_delimited(&chars, &mut i, delim)
                {
                    return not_understood;
                }
                while let Some(f) = chars.get(i).copied().filter(|c| c.is_ascii_alphanumeric()) {
                    i += 1;
                    match f {
                        'e' => found = worse(found, Some((RiskLevel::High, "sed runs commands"))),
                        'w' => {
                            found = worse(found, Some((RiskLevel::Medium, "sed writes a file")));
                            skip_line(&chars, &mut i);
                        }
                        _ => {}
                    }
                }
            }
            'y' => {
                let Some(delim) = chars.get(i).copied() else {
                    return not_understood;
                };
                i += 1;
                if !skip_delimited(&chars, &mut i, delim) || !skip_delimited(&chars, &mut i, delim)
                {
                    return not_understood;
                }
            }
            'w' | 'W' => {
                found = worse(found, Some((RiskLevel::Medium, "sed writes a file")));
                skip_line(&chars, &mut i);
            }
            'e' => {
                found = worse(found, Some((RiskLevel::High, "sed runs commands")));
                skip_line(&chars, &mut i);
            }
            'a' | 'i' | 'c' | 'r' | 'R' | '#' => skip_text(&chars, &mut i),
            'b' | 't' | 'T' | ':' | 'v' => {
                while !matches!(chars.get(i), None | Some(';' | '\n')) {
                    i += 1;
                }
            }
            _ => return not_understood,
        }
    }
}

/// Line addresses: numbers, `$`, `/re/`, `\cREc`, ranges, steps and `!`.
fn skip_address(chars: &[char], i: &mut usize) -> bool {
    loop {
        match chars.get(*i) {
            Some(c)
                if c.is_ascii_digit() || matches!(c, '$' | ',' | '!' | '~' | '+' | ' ' | '\t') =>
            {
                *i += 1;
            }
            Some('/') => {
                *i += 1;
                if !skip_delimited(chars, i, '/') {
                    return false;
                }
                while matches!(chars.get(*i), Some('I' | 'M')) {
                    *i += 1;
                }
            }
            Some('\\') => {
                let Some(delim) = chars.get(*i + 1).copied() else {
                    return false;
                };
                *i += 2;
                if !skip_delimited(chars, i, delim) {
                    return false;
                }
            }
            _ => return true,
        }
    }
}

/// Past the next unescaped `delim`; false when there is none.
fn skip_delimited(chars: &[char], i: &mut usize, delim: char) -> bool {
    while let Some(c) = chars.get(*i) {
        *i += 1;
        if *c == '\\' {
            *i += 1;
        } else if *c == delim {
            return true;
        }
    }
    false
}

fn skip_line(chars: &[char], i: &mut usize) {
    while !matches!(chars.get(*i), None | Some('\n')) {
        *i += 1;
    }
}

/// Text arguments (`a text`, `a\` + lines ending in `\`).
fn skip_text(chars: &[char], i: &mut usize) {
    loop {
        skip_line(chars, i);
        let continued = *i > 0 && chars.get(*i - 1) == Some(&'\\');
        if !continued || *i >= chars.len() {
            return;
        }
        *i += 1;
    }
}

/// An awk program: `system(…)`, `cmd | getline` and `print … | cmd` run commands;
/// `print … > file` writes one. A `>` elsewhere is a comparison.
pub(super) fn awk_program(program: &str) -> Finding {
    let chars: Vec<char> = without_strings(program);
    let text: String = chars.iter().collect();
    let mut found: Finding = None;
    for (start, word) in identifiers(&chars) {
        let after = chars.get(start + word.len()..).unwrap_or_default();
        let next = after.iter().find(|c| !c.is_whitespace());
        match word.as_str() {
            "system" if next == Some(&'(') => {
                found = worse(found, Some((RiskLevel::High, "awk runs commands")));
            }
            "print" | "printf" => found = worse(found, print_target(after)),
            _ => {}
        }
    }
    if text.contains("|&") || pipe_into_getline(&text) {
        found = worse(found, Some((RiskLevel::High, "awk runs commands")));
    }
    found
}

fn pipe_into_getline(text: &str) -> bool {
    text.match_indices('|').any(|(i, _)| {
        text.get(i + 1..)
            .is_some_and(|rest| rest.trim_start().starts_with("getline"))
    })
}

/// The redirection of a print statement, if it has one.
fn print_target(after: &[char]) -> Finding {
    let mut depth = 0usize;
    for c in after {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ';' | '}' | '\n' if depth == 0 => return None,
            '|' if depth == 0 => return Some((RiskLevel::High, "awk pipes into a command")),
            '>' if depth == 0 => return Some((RiskLevel::Medium, "awk writes a file")),
            _ => {}
        }
    }
    None
}

/// The program with string literals blanked, so their contents are not mistaken for code.
fn without_strings(program: &str) -> Vec<char> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut chars = program.chars();
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                    out.extend(['_', '_']);
                }
                '"' => {
                    in_string = false;
                    out.push('"');
                }
                _ => out.push('_'),
            }
        } else {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

fn identifiers(chars: &[char]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let is_ident = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
        if chars.get(i).is_some_and(is_ident) {
            let start = i;
            while chars.get(i).is_some_and(is_ident) {
                i += 1;
            }
            out.push((
                start,
                chars.get(start..i).unwrap_or_default().iter().collect(),
            ));
        } else {
            i += 1;
        }
    }
    out
}
