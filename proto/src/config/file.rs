//! Reading the file: bounded, never through a FIFO or device, and the errors that name it.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Why a configuration could not be read. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {} does not exist", .path.display())]
    Missing { path: PathBuf },
    #[error("cannot read configuration file {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("configuration file {} is not a regular file", .path.display())]
    NotRegularFile { path: PathBuf },
    #[error(
        "configuration file {} is too large ({size} bytes; the limit is {MAX_CONFIG_BYTES})",
        .path.display()
    )]
    TooLarge { path: PathBuf, size: u64 },
    #[error("configuration file {} is not valid UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    #[error("{}{}: {message}", .path.display(), line_suffix(*.line))]
    Invalid {
        path: PathBuf,
        /// 1-based line of the offending text, when known.
        line: Option<usize>,
        message: String,
    },
}

impl ConfigError {
    /// The same message without the file's path: what a decision's reason may say.
    pub fn detail(&self) -> String {
        match self {
            ConfigError::Missing { .. } => "it does not exist".into(),
            ConfigError::Read { source, .. } => format!("cannot read it: {source}"),
            ConfigError::NotRegularFile { .. } => "it is not a regular file".into(),
            ConfigError::TooLarge { size, .. } => {
                format!("it is too large ({size} bytes; the limit is {MAX_CONFIG_BYTES})")
            }
            ConfigError::NotUtf8 { .. } => "it is not valid UTF-8".into(),
            ConfigError::Invalid {
                line: Some(line),
                message,
                ..
            } => format!("line {line}: {message}"),
            ConfigError::Invalid {
                line: None,
                message,
                ..
            } => message.clone(),
        }
    }
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

/// Read the file without following it into a FIFO or device and without reading more than
/// the limit.
pub fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    let read_err = |source: io::Error| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK so opening a FIFO does not hang; it has no effect on regular-file reads.
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ConfigError::Missing {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(ConfigError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size: meta.len(),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > MAX_CONFIG_BYTES {
        // The file grew while we read it.
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size: read,
        });
    }
    String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::write;
    use crate::config::{load, ParseMode};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn missing_file_is_its_own_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = dir.join("nope.toml");
        let err = load(&p, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::Missing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn non_regular_and_oversized_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let err = load(dir, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");
        assert_eq!(err.detail(), "it is not a regular file");

        let fifo = dir.join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = load(&fifo, ParseMode::Running).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");

        let big = dir.join("big.toml");
        let f = File::create(&big).unwrap();
        f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let err = load(&big, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("big.toml"));

        let bad = write(dir, "bad.toml", "");
        std::fs::write(&bad, [0xff, 0xfe, b'\n']).unwrap();
        assert!(matches!(
            load(&bad, ParseMode::Startup).unwrap_err(),
            ConfigError::NotUtf8 { .. }
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_reads_a_real_file_and_never_rewrites_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let text = "protocol_service_port = 9000\nbridge_auto_approve = true\n# comment\n";
        let p = write(dir, "config.toml", text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = std::fs::metadata(&p).unwrap().modified().unwrap();
        assert_eq!(load(&p, ParseMode::Startup).unwrap().service_port(), 9000);
        assert_eq!(load(&p, ParseMode::Running).unwrap().service_port(), 9000);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
