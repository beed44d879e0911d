//! Programs in other languages that text tools run: sed scripts and awk programs. Both
//! are read-only unless they write files or run commands, which is what is looked for.

use nl2sh_proto::channels::RiskLevel;

type Finding = Option<(RiskLevel, &'static str)>;

/// What a script does besides filtering text.
#[derive(Debug, Default)]
pub(super) struct Effects {
    /// The worst thing found that is not a file named below.
    pub finding: Finding,
    /// Files it writes (`sed w FILE`, awk `print > "FILE"`).
    pub writes: Vec<String>,
    /// Files it reads and prints (`sed r FILE`).
    pub reads: Vec<String>,
    /// Command lines it runs (`sed 'e CMD'`).
    pub commands: Vec<String>,
}

impl Effects {
    fn found(&mut self, level: RiskLevel, why: &'static str) {
        self.finding = worse(self.finding, Some((level, why)));
    }
}

fn worse(a: Finding, b: Finding) -> Finding {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A sed script: `w`/`W` and `s///w` write files, `r`/`R` read them, `e` and `s///e`
/// run commands. Anything not recognised is reported as not understood.
pub(super) fn sed_script(script: &str) -> Effects {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let mut fx = Effects::default();
    let not_understood = |mut fx: Effects| {
        fx.found(RiskLevel::Medium, "sed script not understood");
        fx
    };
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ';') {
            i += 1;
        }
        if i >= chars.len() {
            return fx;
        }
        if !skip_address(&chars, &mut i) {
            return not_understood(fx);
        }
        let Some(cmd) = chars.get(i).copied() else {
            return not_understood(fx);
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
                    return not_understood(fx);
                };
                i += 1;
                if !skip_delimited(&chars, &mut i, delim) || !skip_delimited(&chars, &mut i, delim)
                {
                    return not_understood(fx);
                }
                while let Some(f) = chars.get(i).copied().filter(|c| c.is_ascii_alphanumeric()) {
                    i += 1;
                    match f {
                        'e' => fx.found(RiskLevel::High, "sed runs commands"),
                        'w' => {
                            fx.found(RiskLevel::Medium, "sed writes a file");
                            fx.writes.push(rest_of_line(&chars, &mut i));
                        }
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' => {}
                        c if c.is_ascii_digit() => {}
                        _ => return not_understood(fx),
                    }
                }
            }
            'y' => {
                let Some(delim) = chars.get(i).copied() else {
                    return not_understood(fx);
                };
                i += 1;
                if !skip_delimited(&chars, &mut i, delim) || !skip_delimited(&chars, &mut i, delim)
                {
                    return not_understood(fx);
                }
            }
            'w' | 'W' => {
                fx.found(RiskLevel::Medium, "sed writes a file");
                fx.writes.push(rest_of_line(&chars, &mut i));
            }
            'r' | 'R' => fx.reads.push(rest_of_line(&chars, &mut i)),
            'e' => {
                fx.found(RiskLevel::High, "sed runs commands");
                let command = rest_of_line(&chars, &mut i);
                if !command.is_empty() {
                    fx.commands.push(command);
                }
            }
            'a' | 'i' | 'c' | '#' => skip_text(&chars, &mut i),
            'b' | 't' | 'T' | ':' | 'v' => {
                while !matches!(chars.get(i), None | Some(';' | '\n')) {
                    i += 1;
                }
            }
            _ => return not_understood(fx),
        }
    }
}

/// The rest of the line after blanks (a file name or a command).
fn rest_of_line(chars: &[char], i: &mut usize) -> String {
    while chars.get(*i).is_some_and(|c| *c == ' ' || *c == '\t') {
        *i += 1;
    }
    let start = *i;
    skip_line(chars, i);
    chars.get(start..*i).unwrap_or_default().iter().collect()
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
/// `print … > file` writes one (the file is named when it is a string); `getline < file`
/// reads one; gawk's `@load` loads code. A `>` elsewhere is a comparison.
pub(super) fn awk_program(program: &str) -> Effects {
    let original: Vec<char> = program.chars().collect();
    let chars: Vec<char> = without_strings(program);
    let text: String = chars.iter().collect();
    let mut fx = Effects::default();
    for (start, word) in identifiers(&chars) {
        let end = start + word.len();
        let after = chars.get(end..).unwrap_or_default();
        let next = after.iter().find(|c| !c.is_whitespace());
        match word.as_str() {
            "system" if next == Some(&'(') => fx.found(RiskLevel::High, "awk runs commands"),
            "print" | "printf" => match print_target(after) {
                Some(Target::Pipe) => fx.found(RiskLevel::High, "awk pipes into a command"),
                Some(Target::File(at)) => {
                    fx.found(RiskLevel::Medium, "awk writes a file");
                    if let Some(name) = string_at(&original, end + at) {
                        fx.writes.push(name);
                    }
                }
                None => {}
            },
            "getline" if reads_file(after) => {
                fx.found(
                    RiskLevel::Medium,
                    "awk reads a file (it may be secret material)",
                );
            }
            "load" if start > 0 && chars.get(start - 1) == Some(&'@') => {
                fx.found(RiskLevel::High, "awk loads a shared library");
            }
            "include" if start > 0 && chars.get(start - 1) == Some(&'@') => {
                fx.found(RiskLevel::Medium, "awk includes a program file");
            }
            _ => {}
        }
    }
    if text.contains("|&") || pipe_into_getline(&text) {
        fx.found(RiskLevel::High, "awk runs commands");
    }
    fx
}

/// `getline [var] < file`.
fn reads_file(after: &[char]) -> bool {
    let rest: String = after.iter().collect();
    let rest = rest.trim_start();
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    rest.trim_start().starts_with('<')
}

/// The string literal starting (after blanks) at `at` in the program as written.
fn string_at(original: &[char], at: usize) -> Option<String> {
    let rest = original.get(at..)?;
    let start = rest.iter().position(|c| !c.is_whitespace() && *c != '>')?;
    let rest = rest.get(start..)?;
    if rest.first() != Some(&'"') {
        return None;
    }
    let mut out = String::new();
    let mut chars = rest.iter().skip(1);
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.extend(chars.next()),
            c => out.push(*c),
        }
    }
    None
}

fn pipe_into_getline(text: &str) -> bool {
    text.match_indices('|').any(|(i, _)| {
        text.get(i + 1..)
            .is_some_and(|rest| rest.trim_start().starts_with("getline"))
    })
}

/// Where a print statement's output goes, when it is redirected.
enum Target {
    Pipe,
    /// A file, named after the `>` at this offset.
    File(usize),
}

fn print_target(after: &[char]) -> Option<Target> {
    let mut depth = 0usize;
    for (at, c) in after.iter().enumerate() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ';' | '}' | '\n' if depth == 0 => return None,
            '|' if depth == 0 => return Some(Target::Pipe),
            '>' if depth == 0 => return Some(Target::File(at + 1)),
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
