//! Arbitrary input: no panic, bounded time, and unbalanced quotes are never read-only.

use nl2sh_proto::channels::RiskLevel::{High, ReadOnly};

use super::super::{
    assess_path_read, assess_path_write, assess_shell, assess_shell_commands, Protected,
};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }

    fn string(&mut self, alphabet: &[&str], max_len: usize) -> String {
        let len = self.below(max_len);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

const META: &[&str] = &[
    " ",
    "\t",
    "\n",
    ";",
    "&",
    "|",
    "&&",
    "||",
    "(",
    ")",
    "{",
    "}",
    "<",
    ">",
    ">>",
    "<<",
    "<<-",
    "<<<",
    "<(",
    ">(",
    "2>&1",
    "$",
    "$(",
    "${",
    "$((",
    "`",
    "'",
    "\"",
    "\\",
    "#",
    "*",
    "?",
    "[",
    "]",
    "=",
    "~",
    "!",
    ",",
    "-",
    "/",
    "$'",
    "EOF",
    "rm",
    "-rf",
    "sh",
    "-c",
    "su",
    "ls",
    "echo",
    "if",
    "then",
    "fi",
    "case",
    "in",
    "esac",
    ";;",
    "do",
    "done",
    "for",
    "x",
    "\\x72",
    "\r",
    "\0",
    "é",
    "{a,b}",
    "[[",
    "]]",
    "function",
    "eval",
    "find",
    "-exec",
    "tar",
    "-tf",
    "--to-c=",
    "gzip",
    "-S",
    "ip",
    "l",
    "s",
    "alias",
    "PATH=",
    "E\\OF",
    "<<'E'",
    "sed",
    "--i",
    "/proc/self/root",
    "..",
    "/etc/shadow",
    "awk",
    "getline",
    "env",
    "-S'",
    "xargs",
    "read",
    "printf -v",
    "[!a-z]",
];

/// No quotes, backslashes, comments or here-documents: a single quote added to such a
/// line is always unbalanced.
const PLAIN: &[&str] = &[
    " ", "\t", "\n", ";", "&", "|", "(", ")", "{", "}", "$", "$(", "${", "*", "?", "=", "-", "/",
    "x", "ls", "rm", "sh -c ", "echo", "if", "then", "fi", "do", "done", "~", "!", "`",
];

#[test]
fn random_lines_do_not_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4000 {
        let line = rng.string(META, 60);
        let a = assess_shell(&line);
        assert!(a.reasons.len() <= 33);
        // The commands collected for grants agree with the assessment.
        let (same, commands) = assess_shell_commands(&line, None, &Protected::default());
        assert_eq!(same, a, "{line:?}");
        if let Some(commands) = commands {
            let line_read_only = a.level == ReadOnly && !a.requires_root;
            assert_eq!(
                commands.iter().all(|c| c.read_only),
                line_read_only,
                "{line:?}: {a:?} {commands:?}"
            );
        }
        let _ = assess_path_write(std::path::Path::new(&line));
        let _ = assess_path_read(std::path::Path::new(&line));
    }
}

#[test]
fn unbalanced_quotes_are_never_read_only() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for i in 0..3000 {
        let mut line = rng.string(PLAIN, 30);
        let at = rng.below(line.len() + 1);
        let quote = if i % 2 == 0 { "'" } else { "\"" };
        if line.is_char_boundary(at) {
            line.insert_str(at, quote);
        } else {
            line.push_str(quote);
        }
        let a = assess_shell(&line);
        assert_ne!(a.level, ReadOnly, "{line:?}");
    }
}

#[test]
fn large_inputs_are_quick() {
    let started = std::time::Instant::now();
    for piece in [
        "$((", "{", "(", "`", "\"", "'", "${", "<<E\n", "a{b,c}", "$(echo ", "x|",
    ] {
        let line = piece.repeat(60 * 1024 / piece.len());
        let _ = assess_shell(&line);
    }
    let nested = format!(
        "{}{}{}",
        "while :; do ".repeat(16),
        "ls; ".repeat(2000),
        "done; ".repeat(16)
    );
    assert!(assess_shell(&nested).level >= High);
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );
}
