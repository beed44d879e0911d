//! The one check for a private directory of the state tree (docs/ARCHITECTURE.md, "State and who owns it": 0700, owned by
//! the process's uid), for the supervisor and approvald alike.
//!
//! The directory is opened with `O_NOFOLLOW | O_DIRECTORY` and everything after that is
//! asked of the descriptor (`fstat`, `fchmod`), never of the path again: a symlink at the
//! last component is refused instead of followed (it could point at another directory of
//! ours, which we would then chmod and fill), and nothing swapped in after the open can
//! change what was checked. Symlinks in earlier components are the owner's choice of path
//! and are followed.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::stat::{fchmod, fstat, Mode, SFlag};

use crate::state_layout::PRIVATE_DIR_MODE;

/// Whether to create the directory when it is missing (always with mode 0700).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// It must exist already.
    Never,
    /// Create it; its parent must exist.
    IfMissing,
    /// Create it and any missing parents (each 0700).
    WithParents,
}

/// What to do with an existing directory whose mode is not 0700.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WideMode {
    /// Set it to 0700 (through the descriptor): for the process that owns the layout.
    Tighten,
    /// Refuse it if group or others have any access: for a process that only uses a
    /// directory another one prepared, where a wider mode means something changed it.
    Refuse,
}

#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error("cannot create directory {}: {source}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("directory {} does not exist", .path.display())]
    Missing { path: PathBuf },
    #[error("{} is a symbolic link; a private directory must be a real directory, so it is not followed", .path.display())]
    Symlink { path: PathBuf },
    #[error("{} is not a directory", .path.display())]
    NotADirectory { path: PathBuf },
    #[error("{} is owned by uid {owner}, not by this process's uid {euid}; refusing to use it", .path.display())]
    WrongOwner {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error("{} has mode {mode:04o}; group and others must have no access (chmod 700 it)", .path.display())]
    WrongMode { path: PathBuf, mode: u32 },
    #[error("cannot {what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Make sure `path` is a private directory of this process's effective uid and return it
/// open (read-only, close-on-exec), so a caller can keep working below the very directory
/// that was checked.
///
/// Refused: a symlink at `path`, anything but a directory, a directory owned by another
/// uid; a mode other than 0700 is tightened or refused as `wide` says.
pub fn open_private_dir(
    path: &Path,
    create: Create,
    wide: WideMode,
) -> Result<OwnedFd, PrivateDirError> {
    if create != Create::Never {
        let made = DirBuilder::new()
            .recursive(create == Create::WithParents)
            .mode(PRIVATE_DIR_MODE)
            .create(path);
        match made {
            // Whatever is there already is judged by the open below.
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(PrivateDirError::Create {
                    path: path.to_owned(),
                    source: e,
                })
            }
            _ => {}
        }
    }
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            // With O_DIRECTORY, Linux answers ENOTDIR for a symlink at the last component
            // (ELOOP without it). It is refused either way; lstat only picks the message.
            let is_symlink =
                || std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            let path = path.to_owned();
            match e.raw_os_error().map(Errno::from_raw) {
                Some(Errno::ELOOP | Errno::ENOTDIR) if is_symlink() => {
                    PrivateDirError::Symlink { path }
                }
                Some(Errno::ENOTDIR) => PrivateDirError::NotADirectory { path },
                Some(Errno::ENOENT) => PrivateDirError::Missing { path },
                _ => PrivateDirError::Io {
                    what: "open directory",
                    path,
                    source: e,
                },
            }
        })?;
    let dir = OwnedFd::from(dir);
    let io_err = |what, errno: Errno| PrivateDirError::Io {
        what,
        path: path.to_owned(),
        source: io::Error::from(errno),
    };
    let st = fstat(&dir).map_err(|e| io_err("inspect", e))?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
        return Err(PrivateDirError::NotADirectory {
            path: path.to_owned(),
        });
    }
    let euid = nix::unistd::geteuid().as_raw();
    if st.st_uid != euid {
        return Err(PrivateDirError::WrongOwner {
            path: path.to_owned(),
            owner: st.st_uid,
            euid,
        });
    }
    let mode = st.st_mode & 0o7777;
    match wide {
        WideMode::Tighten if mode != PRIVATE_DIR_MODE => {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "tightening directory mode to 0700"
            );
            fchmod(&dir, Mode::from_bits_truncate(PRIVATE_DIR_MODE))
                .map_err(|e| io_err("chmod", e))?;
        }
        WideMode::Refuse if mode & 0o077 != 0 => {
            return Err(PrivateDirError::WrongMode {
                path: path.to_owned(),
                mode,
            });
        }
        _ => {}
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A fresh directory under the system temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            use std::time::{SystemTime, UNIX_EPOCH};
            let n = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let dir = std::env::temp_dir().join(format!(
                "nl2sh-private-dir-{tag}-{}-{n}",
                std::process::id()
            ));
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn missing_directories_are_created_0700() {
        let base = Scratch::new("create");
        let dir = base.0.join("one");
        let fd = open_private_dir(&dir, Create::IfMissing, WideMode::Refuse).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // The descriptor is the directory at the path.
        let st = fstat(&fd).unwrap();
        assert_eq!(st.st_ino, fs::metadata(&dir).unwrap().ino());

        let deep = base.0.join("a/b/c");
        assert!(matches!(
            open_private_dir(&deep, Create::IfMissing, WideMode::Tighten),
            Err(PrivateDirError::Create { .. })
        ));
        open_private_dir(&deep, Create::WithParents, WideMode::Tighten).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&base.0.join(p)), 0o700, "{p}");
        }
        // Opening an existing one again is fine.
        open_private_dir(&deep, Create::WithParents, WideMode::Refuse).unwrap();
    }

    #[test]
    fn a_symlink_to_a_directory_is_refused_and_its_target_left_alone() {
        let base = Scratch::new("symlink");
        let target = base.0.join("target");
        fs::create_dir(&target).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(target.join("keep"), "x").unwrap();
        let link = base.0.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for create in [Create::Never, Create::IfMissing, Create::WithParents] {
            let err = open_private_dir(&link, create, WideMode::Tighten).unwrap_err();
            assert!(
                matches!(err, PrivateDirError::Symlink { .. }),
                "{create:?}: {err:?}"
            );
            assert!(
                err.to_string().contains(&link.display().to_string()),
                "{err}"
            );
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
        assert_eq!(mode(&target), 0o755);
        assert_eq!(fs::read_to_string(target.join("keep")).unwrap(), "x");
        assert_eq!(fs::read_dir(&target).unwrap().count(), 1);
    }

    #[test]
    fn a_regular_file_is_refused() {
        let base = Scratch::new("file");
        let file = base.0.join("file");
        fs::write(&file, "x").unwrap();
        for create in [Create::Never, Create::IfMissing, Create::WithParents] {
            let err = open_private_dir(&file, create, WideMode::Tighten).unwrap_err();
            assert!(
                matches!(err, PrivateDirError::NotADirectory { .. }),
                "{create:?}: {err:?}"
            );
        }
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
    }

    #[test]
    fn a_wide_mode_is_tightened_or_refused() {
        let base = Scratch::new("mode");
        let dir = base.0.join("d");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        let err = open_private_dir(&dir, Create::Never, WideMode::Refuse).unwrap_err();
        assert!(
            matches!(err, PrivateDirError::WrongMode { mode: 0o750, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("0750"), "{err}");
        assert_eq!(mode(&dir), 0o750, "refusing changes nothing");

        open_private_dir(&dir, Create::IfMissing, WideMode::Tighten).unwrap();
        assert_eq!(mode(&dir), 0o700);

        // Owner-only modes other than 0700 pass a refusing check and are normalised by a
        // tightening one.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o500)).unwrap();
        open_private_dir(&dir, Create::Never, WideMode::Refuse).unwrap();
        assert_eq!(mode(&dir), 0o500);
        open_private_dir(&dir, Create::Never, WideMode::Tighten).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn a_missing_directory_is_refused_without_create() {
        let base = Scratch::new("missing");
        let dir = base.0.join("absent");
        let err = open_private_dir(&dir, Create::Never, WideMode::Tighten).unwrap_err();
        assert!(matches!(err, PrivateDirError::Missing { .. }), "{err:?}");
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(!dir.exists());
    }

    #[test]
    fn a_foreign_owner_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            crate::test_skip::skip("needs root to make a directory owned by someone else");
            return;
        }
        let base = Scratch::new("owner");
        let dir = base.0.join("d");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = open_private_dir(&dir, Create::IfMissing, WideMode::Tighten).unwrap_err();
        assert!(
            matches!(err, PrivateDirError::WrongOwner { owner: 65534, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        assert_eq!(mode(&dir), 0o755, "a foreign directory is not chmodded");
    }
}
