//! The store's files: created 0600 without following a symlink, and checked (a regular
//! file owned by us; a wider mode tightened) before SQLite opens them.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nl2sh_proto::state_layout::PRIVATE_FILE_MODE;

use super::StoreError;

pub(crate) fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut side = path.to_owned().into_os_string();
    side.push(suffix);
    PathBuf::from(side)
}

pub(crate) fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Create `path` with mode 0600 if missing (never through a symlink), and check that it
/// is a regular file owned by us; a wider mode is tightened.
pub(crate) fn create_private_file(path: &Path) -> Result<(), StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| StoreError::Io {
            what: "cannot create",
            path: path.to_owned(),
            source,
        })?;
    make_private(&file, path)
}

/// Tighten `path` if it exists (SQLite's `-wal`/`-shm` left by an earlier run).
pub(crate) fn tighten_existing(path: &Path) -> Result<(), StoreError> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => make_private(&file, path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Io {
            what: "cannot open",
            path: path.to_owned(),
            source,
        }),
    }
}

pub(crate) fn make_private(file: &File, path: &Path) -> Result<(), StoreError> {
    let io_err = |what| {
        move |source| StoreError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    };
    let meta = file.metadata().map_err(io_err("cannot inspect"))?;
    let me = euid();
    if !meta.file_type().is_file() || meta.uid() != me {
        return Err(StoreError::Unsafe {
            path: path.to_owned(),
            why: format!("must be a regular file owned by uid {me}"),
        });
    }
    if meta.mode() & 0o777 != PRIVATE_FILE_MODE {
        file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(io_err("cannot restrict the mode of"))?;
        tracing::warn!(path = %path.display(), mode = format!("{:o}", meta.mode() & 0o777), "tightened to 0600");
    }
    Ok(())
}
