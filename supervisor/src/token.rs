//! The protocol Bearer token: where it comes from and what a valid one looks like.
//!
//! Precedence: `NL2SH_PROTOCOL_TOKEN` > configured `protocol_token` > generated. An explicit
//! token must be 32–256 printable ASCII characters without spaces. No message produced
//! here ever contains the token text.

use std::ffi::OsString;
use std::fmt;

use nl2sh_proto::limits::{GENERATED_TOKEN_BYTES, TOKEN_MAX_CHARS, TOKEN_MIN_CHARS};
use nl2sh_proto::Secret;

/// Environment variable that overrides every other token source.
pub const TOKEN_ENV: &str = "NL2SH_PROTOCOL_TOKEN";

/// Where the token in use came from. Only a generated token is ever printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Environment,
    Config,
    Generated,
}

impl TokenSource {
    /// Word for user-facing text: "environment", "configuration", "generated".
    pub fn describe(self) -> &'static str {
        match self {
            TokenSource::Environment => "environment",
            TokenSource::Config => "configuration",
            TokenSource::Generated => "generated",
        }
    }

    fn setting(self) -> &'static str {
        match self {
            TokenSource::Environment => "the NL2SH_PROTOCOL_TOKEN environment variable",
            TokenSource::Config => "protocol_token in the configuration",
            TokenSource::Generated => "the generated token",
        }
    }
}

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

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "invalid protocol token from {}: {problem}; use {TOKEN_MIN_CHARS}–{TOKEN_MAX_CHARS} \
         printable ASCII characters without spaces",
        .origin.setting()
    )]
    Invalid {
        origin: TokenSource,
        problem: TokenProblem,
    },
    #[error("cannot generate a protocol token: the system random source failed: {0}")]
    Random(String),
}

/// Pick the token: `env` is the value of `NL2SH_PROTOCOL_TOKEN` (None when unset),
/// `configured` the `protocol_token` key (empty means "generate").
pub fn resolve(
    env: Option<OsString>,
    configured: Option<&str>,
) -> Result<(Secret, TokenSource), TokenError> {
    if let Some(env) = env {
        let origin = TokenSource::Environment;
        let value = env.into_string().map_err(|_| TokenError::Invalid {
            origin,
            problem: TokenProblem::NotUtf8,
        })?;
        check(&value).map_err(|problem| TokenError::Invalid { origin, problem })?;
        return Ok((Secret::new(value), origin));
    }
    match configured {
        Some(value) if !value.is_empty() => {
            let origin = TokenSource::Config;
            check(value).map_err(|problem| TokenError::Invalid { origin, problem })?;
            Ok((Secret::new(value.to_owned()), origin))
        }
        _ => Ok((generate()?, TokenSource::Generated)),
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

/// A fresh token: 256 bits from the OS random source, lowercase hex (64 characters).
pub fn generate() -> Result<Secret, TokenError> {
    nl2sh_proto::ids::random_hex(GENERATED_TOKEN_BYTES)
        .map(Secret::new)
        .map_err(|e| TokenError::Random(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    const GOOD_ENV: &str = "env-token-0123456789-abcdefghijklmnop";
    const GOOD_CFG: &str = "cfg-token-0123456789-abcdefghijklmnop";

    #[test]
    fn precedence_env_config_generated() {
        let (s, src) = resolve(Some(GOOD_ENV.into()), Some(GOOD_CFG)).unwrap();
        assert_eq!((s.expose(), src), (GOOD_ENV, TokenSource::Environment));
        let (s, src) = resolve(None, Some(GOOD_CFG)).unwrap();
        assert_eq!((s.expose(), src), (GOOD_CFG, TokenSource::Config));
        let (s, src) = resolve(None, None).unwrap();
        assert_eq!(src, TokenSource::Generated);
        assert_eq!(s.expose().len(), 64);
    }

    #[test]
    fn configured_empty_generates() {
        let (s, src) = resolve(None, Some("")).unwrap();
        assert_eq!(src, TokenSource::Generated);
        assert_eq!(s.expose().len(), 64);
    }

    #[test]
    fn env_empty_is_an_error_even_with_a_configured_token() {
        let err = resolve(Some("".into()), Some(GOOD_CFG)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("NL2SH_PROTOCOL_TOKEN"), "{msg}");
        assert!(msg.contains("empty"), "{msg}");
    }

    #[test]
    fn env_invalid_is_an_error_not_a_fallback() {
        let bad = "short-secret-xyz";
        let msg = resolve(Some(bad.into()), Some(GOOD_CFG))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("NL2SH_PROTOCOL_TOKEN"), "{msg}");
        assert!(msg.contains("too short: 16 chars"), "{msg}");
        assert!(!msg.contains(bad), "{msg}");
    }

    #[test]
    fn env_not_utf8() {
        let raw = OsString::from_vec(vec![0xff; 40]);
        let msg = resolve(Some(raw), None).unwrap_err().to_string();
        assert!(msg.contains("not valid UTF-8"), "{msg}");
    }

    #[test]
    fn configured_invalid_messages_name_source_and_reason_not_token() {
        let cases: &[(&str, &str)] = &[
            ("secret-but-short", "too short: 16 chars"),
            (
                "secret with a space in it and long enough to pass",
                "space at position 7",
            ),
            (
                "secret\ttab-and-long-enough-to-pass-the-length",
                "non-printable character at position 7",
            ),
            (
                "secret-ünicode-and-long-enough-to-pass-length",
                "non-ASCII character at position 8",
            ),
        ];
        for (bad, reason) in cases {
            let msg = resolve(None, Some(bad)).unwrap_err().to_string();
            assert!(msg.contains("protocol_token in the configuration"), "{msg}");
            assert!(msg.contains(reason), "{msg}");
            assert!(!msg.contains("secret"), "{msg}");
        }
        let long = "s".repeat(TOKEN_MAX_CHARS + 1);
        let msg = resolve(None, Some(&long)).unwrap_err().to_string();
        assert!(msg.contains("too long: 257 chars"), "{msg}");
        assert!(!msg.contains("ssss"), "{msg}");
    }

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
