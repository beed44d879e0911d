//! The file: read bounded, edited under a lock of its own, saved atomically and private,
//! owned by whoever owned it.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::Flock;
use nix::libc;
use nl2sh_proto::config::{self as schema, ConfigError};
use nl2sh_proto::flock::lock_exclusive_within;
use nl2sh_proto::private_file::{self, Owner};
use nl2sh_proto::state_layout::{config_lock, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE};

use super::{EditError, LOCK_POLL, LOCK_WAIT};

/// The file's text, or "" when it does not exist yet.
pub fn read_text(path: &Path) -> Result<String, EditError> {
    match schema::read_bounded(path) {
        Ok(text) => Ok(text),
        Err(ConfigError::Missing { .. }) => Ok(String::new()),
        Err(e) => Err(EditError::Read(e)),
    }
}

/// The file an edit replaces: a symlinked configuration is edited where it points, so
/// the link stays a link.
pub fn write_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EditError {
    let path = path.to_owned();
    move |source| EditError::Io { what, path, source }
}

/// The directory of `path`, created (0700, with its parents) when missing.
fn config_dir(path: &Path) -> Result<PathBuf, EditError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(&dir)
            .map_err(io_err("cannot create directory", &dir))?;
    }
    Ok(dir)
}

/// Take the exclusive lock on [`config_lock`] (created 0600, never removed: removing a
/// lock file lets two editors lock two different files). Held from reading the file to
/// renaming its new version over it, so concurrent edits apply one after another and
/// none is lost. A file of its own because the rename replaces the configuration's inode,
/// and a lock on that would be a lock on a file no longer there.
pub fn lock_for_edit(path: &Path) -> Result<Flock<File>, EditError> {
    config_dir(path)?;
    let lock = config_lock(path);
    let open = |create_new: bool| {
        OpenOptions::new()
            .write(true)
            .create_new(create_new)
            .mode(PRIVATE_FILE_MODE)
            // No link followed, and no FIFO to hang on: whoever can write the directory
            // may have put anything there.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&lock)
    };
    let (file, created) = match open(true) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
            open(false).map_err(io_err("cannot open the lock file", &lock))?,
            false,
        ),
        Err(e) => return Err(io_err("cannot create the lock file", &lock)(e)),
    };
    let meta = file
        .metadata()
        .map_err(io_err("cannot inspect the lock file", &lock))?;
    // A hard link to another file (root would chown or lock that) or anything but a plain
    // file is not our lock.
    if !meta.file_type().is_file() || meta.nlink() != 1 {
        return Err(io_err("refusing the lock file", &lock)(io::Error::other(
            "it is not a plain file of its own (a link, a FIFO or a device)",
        )));
    }
    // Root editing another user's configuration leaves a lock it made theirs, as `save`
    // leaves the file: they must still be able to take it. Never one it found.
    if created {
        if let Owner::Keep { uid, gid } = owner_kept(path) {
            if nix::unistd::geteuid().is_root() {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                    .map_err(io_err("cannot chown", &lock))?;
            }
        }
    }
    match lock_exclusive_within(file, LOCK_WAIT, LOCK_POLL) {
        Ok(held) => Ok(held),
        Err((_, Errno::EWOULDBLOCK)) => Err(EditError::Locked {
            path: path.to_owned(),
            lock,
        }),
        Err((_, errno)) => Err(io_err("cannot lock", &lock)(io::Error::from(errno))),
    }
}

/// Replace `path` with `text` atomically: a 0600 temporary file beside it, fsync, rename,
/// fsync of the directory. Creates the directory (0700) when missing. The owner of a file
/// root edits for another uid stays that uid. Callers that read the file first hold
/// [`lock_for_edit`] around both.
pub fn save(path: &Path, text: &str) -> Result<(), EditError> {
    config_dir(path)?;
    private_file::replace(path, text.as_bytes(), owner_kept(path))
        .map_err(io_err("cannot write", path))
}

/// Who the edited file stays owned by: root editing another user's configuration keeps
/// it theirs. Only a plain file counts (callers pass the symlink's target,
/// [`write_target`]): a link itself would otherwise hand root's new file to whoever owns
/// what it points at.
fn owner_kept(path: &Path) -> Owner {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() && meta.uid() != nix::unistd::geteuid().as_raw() => {
            Owner::Keep {
                uid: meta.uid(),
                gid: meta.gid(),
            }
        }
        _ => Owner::Writer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_edit_waits_for_the_lock_and_then_applies_to_the_file_as_left() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        fs::write(&path, "protocol_service_port = 1\n").unwrap();
        let held = lock_for_edit(&path).unwrap();
        let editing = {
            let path = path.clone();
            std::thread::spawn(move || super::super::apply(&path, "approval_policy", "strict"))
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!editing.is_finished(), "the edit did not wait for the lock");
        // What the holder writes meanwhile is what the waiting edit starts from.
        save(&path, "protocol_service_port = 2\n").unwrap();
        drop(held);
        editing.join().unwrap().unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "protocol_service_port = 2\napproval_policy = \"strict\"\n"
        );
    }

    #[test]
    fn a_lock_file_someone_else_left_is_never_a_link_or_a_fifo() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        fs::write(&path, "").unwrap();
        // A hard link to another file: refused, and that file untouched.
        let other = tmp.path().join("precious");
        fs::write(&other, "keep").unwrap();
        fs::hard_link(&other, config_lock(&path)).unwrap();
        let before = fs::metadata(&other).unwrap();
        let e = lock_for_edit(&path).unwrap_err().to_string();
        assert!(e.contains("not a plain file of its own"), "{e}");
        let after = fs::metadata(&other).unwrap();
        assert_eq!((after.uid(), after.mode()), (before.uid(), before.mode()));
        // A FIFO: refused at once, not waited on.
        fs::remove_file(config_lock(&path)).unwrap();
        nix::unistd::mkfifo(
            &config_lock(&path),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let e = lock_for_edit(&path).unwrap_err().to_string();
        assert!(e.contains("lock file"), "{e}");
        // A plain one of its own is the lock.
        fs::remove_file(config_lock(&path)).unwrap();
        drop(lock_for_edit(&path).unwrap());
        drop(lock_for_edit(&path).unwrap());
    }
}
