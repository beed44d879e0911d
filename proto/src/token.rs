//! The protocol Bearer token's form, for every process that checks or makes one: the
//! supervisor (a token from the environment or the configuration, at startup) and the
//! configuration editor (`config set protocol_token`, the consoles' rotation). An
//! explicit token is 32–256 printable ASCII characters without spaces; a generated one
//! is 32 random bytes as lowercase hex. No message produced here ever contains the token
//! text.

use std::fmt;

use crate::limits::{GENERATED_TOKEN_BYTES, TOKEN_MAX_CHARS, TOKEN_MIN_CHARS};
use crate::Secret;

/// What is wrong with an explicit token. Positions are 1-based character positions; the
/// offending character itself is never shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    Empty,
    NotUtf8,
    TooShort(usize),
    TooLong(usize),
    Space(usize),
    NonAscii(usize),
    NonPrintable(usize),
}

impl fmt::Display for TokenProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenProblem::Empty => write!(f, "it is set but empty"),
            TokenProblem::NotUtf8 => write!(f, "it is not valid UTF-8"),
            TokenProblem::TooShort(n) => write!(
                f,
                "too short: {n} chars (needs {TOKEN_MIN_CHARS}–{TOKEN_MAX_CHARS})"
            ),
            TokenProblem::TooLong(n) => write!(
                f,
                "too long: {n} chars (needs {TOKEN_MIN_CHARS}–{TOKEN_MAX_CHARS})"
            ),
            TokenProblem::Space(k) => write!(f, "contains a space at position {k}"),
            TokenProblem::NonAscii(k) => {
                write!(f, "contains a non-ASCII character at position {k}")
            }
            TokenProblem::NonPrintable(k) => {
                write!(f, "contains a non-printable character at position {k}")
            }
        }
    }
}

/// Whether `token` is acceptable as an explicit token.
pub fn check(token: &str) -> Result<(), TokenProblem> {
    if token.is_empty() {
        return Err(TokenProblem::Empty);
    }
    for (i, c) in token.chars().enumerate() {
        let pos = i + 1;
        match c {
            ' ' => return Err(TokenProblem::Space(pos)),
            '\x21'..='\x7e' => {}
            c if !c.is_ascii() => return Err(TokenProblem::NonAscii(pos)),
            _ => return Err(TokenProblem::NonPrintable(pos)),
        }
    }
    // All ASCII from here, so bytes == chars.
    let n = token.len();
    if n < TOKEN_MIN_CHARS {
        return Err(TokenProblem::TooShort(n));
    }
    if n > TOKEN_MAX_CHARS {
        return Err(TokenProblem::TooLong(n));
    }
    Ok(())
}

/// The OS random source failed (with its own words).
#[derive(Debug, thiserror::Error)]
#[error("cannot generate a protocol token: the system random source failed: {0}")]
pub struct RandomFailed(pub String);

/// A fresh token: 256 bits from the OS random source, lowercase hex (64 characters).
pub fn generate() -> Result<Secret, RandomFailed> {
    crate::ids::random_hex(GENERATED_TOKEN_BYTES)
        .map(Secret::new)
        .map_err(|e| RandomFailed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_inclusive() {
        assert!(check(&"a".repeat(TOKEN_MIN_CHARS)).is_ok());
        assert!(check(&"~".repeat(TOKEN_MAX_CHARS)).is_ok());
        assert_eq!(check(&"a".repeat(31)), Err(TokenProblem::TooShort(31)));
        assert_eq!(check("\x7f"), Err(TokenProblem::NonPrintable(1)));
        assert!(check(&"!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~".repeat(2)).is_ok());
    }

    #[test]
    fn generated_tokens_are_64_lowercase_hex_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        for t in [&a, &b] {
            assert_eq!(t.expose().len(), 64);
            assert!(t
                .expose()
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
            assert!(check(t.expose()).is_ok());
        }
        assert_ne!(a.expose(), b.expose());
    }
}
