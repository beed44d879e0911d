//! The protocol Bearer token: where it comes from. What a valid one looks like is
//! [`nl2sh_proto::token`].
//!
//! Precedence: `NL2SH_PROTOCOL_TOKEN` > configured `protocol_token` > generated. No message
//! produced here ever contains the token text.

use std::ffi::OsString;

use nl2sh_proto::limits::{TOKEN_MAX_CHARS, TOKEN_MIN_CHARS};
use nl2sh_proto::token::{check, TokenProblem};
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
    #[error(transparent)]
    Random(#[from] nl2sh_proto::token::RandomFailed),
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

/// A fresh token (see [`nl2sh_proto::token::generate`]).
pub fn generate() -> Result<Secret, TokenError> {
    Ok(nl2sh_proto::token::generate()?)
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
}
