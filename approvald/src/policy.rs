//! The one configuration key approvald acts on, `protocol_auto_approve`, read from the
//! configuration file for each decision so a change applies to the next call without a
//! restart. Other keys are ignored here: the supervisor validates the whole file strictly
//! at startup.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest configuration file read (the supervisor's limit too).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a regular file", .path.display())]
    NotRegularFile { path: PathBuf },
    #[error("{} is larger than {MAX_CONFIG_BYTES} bytes", .path.display())]
    TooLarge { path: PathBuf },
    #[error("{} is not UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    /// `message` is the parser's message without the source excerpt, so a value such as
    /// the protocol token never reaches a log line.
    #[error("{}{}: {message}", .path.display(), .line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
}

#[derive(Deserialize)]
struct Policy {
    #[serde(default)]
    protocol_auto_approve: bool,
}

/// Whether the file at `path` sets `protocol_auto_approve = true`. A missing file means
/// the default, false; anything unreadable or invalid is an error (callers fail closed).
pub fn auto_approve(path: &Path) -> Result<bool, PolicyError> {
    let Some(text) = read_bounded(path)? else {
        return Ok(false);
    };
    parse_auto_approve(path, &text)
}

pub fn parse_auto_approve(path: &Path, text: &str) -> Result<bool, PolicyError> {
    match toml::from_str::<Policy>(text) {
        Ok(policy) => Ok(policy.protocol_auto_approve),
        Err(e) => Err(PolicyError::Invalid {
            path: path.to_owned(),
            line: e.span().map(|span| {
                text.as_bytes()[..span.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            }),
            message: e.message().to_owned(),
        }),
    }
}

/// The file's text, `None` when it does not exist. Never blocks on a FIFO, never reads
/// more than the limit.
fn read_bounded(path: &Path) -> Result<Option<String>, PolicyError> {
    let read_err = |source| PolicyError::Read {
        path: path.to_owned(),
        source,
    };
    let file = match File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(PolicyError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(PolicyError::TooLarge {
            path: path.to_owned(),
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| PolicyError::NotUtf8 {
            path: path.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<bool, PolicyError> {
        parse_auto_approve(Path::new("c.toml"), text)
    }

    #[test]
    fn reads_only_the_one_key() {
        assert!(!parse("").unwrap());
        assert!(parse("protocol_auto_approve = true").unwrap());
        assert!(!parse("protocol_auto_approve = false").unwrap());
        assert!(
            parse("protocol_token = 'x'\nunknown = 3\nprotocol_auto_approve = true\n").unwrap()
        );
        // The retired key never turns it on.
        assert!(!parse("bridge_auto_approve = true").unwrap());
    }

    #[test]
    fn wrong_type_or_bad_toml_is_an_error_without_the_text() {
        let e = parse("protocol_token = 'secret-value'\nprotocol_auto_approve = \"yes\"\n")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("line 2"), "{text}");
        assert!(!text.contains("secret-value"), "{text}");
        assert!(parse("protocol_auto_approve = ").is_err());
    }

    #[test]
    fn missing_file_is_false_and_a_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!auto_approve(&dir.path().join("absent.toml")).unwrap());
        assert!(matches!(
            auto_approve(dir.path()),
            Err(PolicyError::NotRegularFile { .. })
        ));
    }
}
