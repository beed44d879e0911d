//! The one writer of a private file of the state tree or the configuration (mode 0600),
//! for every process that keeps one.
//!
//! A file is replaced, never rewritten in place: a new 0600 file beside it (created with
//! `O_EXCL | O_NOFOLLOW`, so nothing planted at the temporary name is followed), written
//! and fsynced, renamed over the old one, then the directory fsynced. A reader sees the
//! old file or the new one, whole; a crash leaves at most a temporary file, whose name
//! starts with `.` and ends with [`TEMP_SUFFIX`], for the owner to clear. Everything is
//! asked of the directory's descriptor, so a directory swapped after it was opened
//! cannot redirect the write.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, Mode};
use nix::unistd::{fchown, fsync, unlinkat, Gid, Uid, UnlinkatFlags};

use crate::state_layout::PRIVATE_FILE_MODE;

/// How a temporary file's name ends (it starts with `.` and the file's own name).
pub const TEMP_SUFFIX: &str = ".tmp";

/// Who owns the new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The writing process.
    Writer,
    /// This uid and gid (root editing a file that belongs to another user keeps it
    /// theirs). Only root can give a file away; for anyone else it is the writer anyway.
    Keep { uid: u32, gid: u32 },
}

/// Replace the file `name` in the directory `dir` with `bytes`, as the module says.
pub fn replace_at(dir: &impl AsFd, name: &str, bytes: &[u8], owner: Owner) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a file name"),
        ));
    }
    let dir = dir.as_fd();
    let temp = format!(".{name}.{}{TEMP_SUFFIX}", unique_suffix());
    let fd = openat(
        dir,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(PRIVATE_FILE_MODE),
    )?;
    let mut file = File::from(fd);
    let written = (|| -> io::Result<()> {
        // The umask can only have removed bits; make it exactly 0600.
        fchmod(file.as_fd(), Mode::from_bits_truncate(PRIVATE_FILE_MODE))?;
        if let Owner::Keep { uid, gid } = owner {
            if nix::unistd::geteuid().is_root() && uid != 0 {
                fchown(
                    file.as_fd(),
                    Some(Uid::from_raw(uid)),
                    Some(Gid::from_raw(gid)),
                )?;
            }
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    drop(file);
    if let Err(e) = written {
        let _ = unlinkat(dir, temp.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    fsync(dir)?;
    Ok(())
}

/// [`replace_at`] for a path: its directory is opened (`O_DIRECTORY`; earlier symlinks
/// in the path are the owner's choice and followed) and the last component replaced.
pub fn replace(path: &Path, bytes: &[u8], owner: Owner) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let dir = open_dir(dir)?;
    replace_at(&dir, name, bytes, owner)
}

/// The directory and the file name of `path`.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not end in a file name", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(OwnedFd::from(file))
}

/// Random enough that two writers of one file (two processes, or a leftover from a
/// crash) never pick the same temporary name; `O_EXCL` refuses it if they ever do.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{now:08x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(TEMP_SUFFIX))
            .collect()
    }

    #[test]
    fn a_file_is_replaced_whole_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace(&path, b"new", Owner::Writer).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(mode(&path), 0o600);
        assert!(leftovers(dir.path()).is_empty());
        // Created where there was nothing.
        let fresh = dir.path().join("fresh");
        replace(&fresh, b"x", Owner::Writer).unwrap();
        assert_eq!(mode(&fresh), 0o600);
    }

    #[test]
    fn a_symlink_at_the_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        replace(&link, b"new", Owner::Writer).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn names_that_are_not_one_component_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path()).unwrap();
        for bad in ["", ".", "..", "a/b"] {
            let e = replace_at(&fd, bad, b"x", Owner::Writer).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(replace(Path::new("/"), b"x", Owner::Writer).is_err());
    }

    #[test]
    fn a_failed_write_leaves_what_was_there_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"old").unwrap();
        // A directory with a file in it where the file is: the rename fails.
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("x"), b"kept").unwrap();
        assert!(replace(&sub, b"new", Owner::Writer).is_err());
        assert!(leftovers(dir.path()).is_empty());
        assert!(std::fs::metadata(&sub).unwrap().is_dir());
        assert_eq!(std::fs::read(sub.join("x")).unwrap(), b"kept");
        // A neighbour is untouched.
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
    }
}
