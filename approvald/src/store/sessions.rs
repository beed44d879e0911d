//! The Agent's history per context: `<state>/sessions/<sha256 hex of the context id>.json`,
//! a JSON array of Chat Completions messages (docs/ARCHITECTURE.md, "State and who owns it").
//!
//! * Context ids are hostile text: only their hash names a file, so no id can reach
//!   another path, and the directory listing shows no id.
//! * `sessions/` is 0700 (checked with the one private-directory check; a symlink there is
//!   refused), and every file in it is 0600. Everything is done relative to the checked
//!   directory's descriptor, never by its path again, and without following symlinks.
//! * A save is atomic, by the one writer of private files (`nl2sh_proto::private_file`):
//!   a new 0600 file beside the old one, written and fsynced, renamed over it, then the
//!   directory fsynced. A reader sees the old history or the new one, never part of one;
//!   a crash leaves at most a temporary file, removed by the next save.
//! * Bounded: after each save, the [`MAX_SESSION_FILES`] most recently written files are
//!   kept, within [`MAX_SESSION_BYTES`] together, and older ones are deleted (their
//!   contexts start over with no history). The file just written is always kept. Tasks
//!   are kept under the same bounds, so the contexts of the retained tasks normally keep
//!   their history.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};
use serde_json::Value;
use sha2::{Digest, Sha256};

use nl2sh_proto::channels::{ContextId, StoreFailure};
use nl2sh_proto::limits::{
    MAX_RETAINED_DOCUMENT_BYTES, MAX_RETAINED_TASKS, MAX_TASK_DOCUMENT_BYTES,
};
use nl2sh_proto::private_dir::{open_private_dir, Create, WideMode};
use nl2sh_proto::private_file::{self, Owner, TEMP_SUFFIX};
use nl2sh_proto::state_layout;

use super::redact::Redactor;
use super::tasks::storage_failure;
use super::StoreError;

/// The sessions directory, relative to the state directory.
pub const SESSIONS_DIR: &str = state_layout::SESSIONS_DIR.path;
/// Session files kept at most (one per context): as many as tasks are.
pub const MAX_SESSION_FILES: usize = MAX_RETAINED_TASKS;
/// Bytes of session files kept at most: as many as of task documents.
pub const MAX_SESSION_BYTES: u64 = MAX_RETAINED_DOCUMENT_BYTES as u64;
/// One session file at most.
pub const MAX_SESSION_FILE_BYTES: usize = MAX_TASK_DOCUMENT_BYTES;

const SUFFIX: &str = state_layout::SESSION_FILE_SUFFIX;

pub(crate) struct Sessions {
    dir: PathBuf,
    redactor: Arc<Redactor>,
    /// Saves one at a time: a save's pruning then never meets another's temporary file.
    saving: Mutex<()>,
}

/// The file name of `context`'s history.
pub fn session_file_name(context: &ContextId) -> String {
    format!(
        "{}{SUFFIX}",
        hex::encode(Sha256::digest(context.0.as_bytes()))
    )
}

fn is_session_name(name: &str) -> bool {
    name.strip_suffix(SUFFIX).is_some_and(|hash| {
        hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

impl Sessions {
    /// Check (creating when missing) `<state_dir>/sessions`.
    pub(crate) fn open(state_dir: &Path, redactor: Arc<Redactor>) -> Result<Sessions, StoreError> {
        let dir = state_dir.join(SESSIONS_DIR);
        open_private_dir(&dir, Create::IfMissing, WideMode::Refuse)?;
        Ok(Sessions {
            dir,
            redactor,
            saving: Mutex::new(()),
        })
    }

    /// The directory, checked again (it may have been replaced since).
    fn open_dir(&self) -> Result<OwnedFd, StoreFailure> {
        open_private_dir(&self.dir, Create::IfMissing, WideMode::Refuse)
            .map_err(|e| storage_failure("the sessions directory is unusable", e))
    }

    /// The history of `context`, or `None` when it has none.
    pub(crate) fn load(&self, context: &ContextId) -> Result<Option<String>, StoreFailure> {
        let dir = self.open_dir()?;
        let name = session_file_name(context);
        let fd = match openat(
            &dir,
            name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(storage_failure("cannot open a session file", e)),
        };
        let mut file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| storage_failure("cannot inspect a session file", e))?;
        if !meta.file_type().is_file() {
            return Err(storage_failure(
                "a session file is unusable",
                "it is not a regular file",
            ));
        }
        if meta.len() > MAX_SESSION_FILE_BYTES as u64 {
            return Err(storage_failure(
                "a session file is unusable",
                format!(
                    "it is {} bytes; the limit is {MAX_SESSION_FILE_BYTES}",
                    meta.len()
                ),
            ));
        }
        let mut text = String::with_capacity(meta.len() as usize);
        // Bounded even if the file grows meanwhile.
        (&mut file)
            .take(MAX_SESSION_FILE_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .map_err(|e| storage_failure("cannot read a session file", e))?;
        if text.len() > MAX_SESSION_FILE_BYTES {
            return Err(storage_failure(
                "a session file is unusable",
                "it grew past the limit while it was read",
            ));
        }
        Ok(Some(text))
    }

    /// Replace the history of `context` with `messages_json` (a JSON array), redacted.
    pub(crate) fn save(
        &self,
        context: &ContextId,
        messages_json: String,
    ) -> Result<(), StoreFailure> {
        if messages_json.len() > MAX_SESSION_FILE_BYTES {
            return Err(StoreFailure::too_large(format!(
                "the session is {} bytes; the limit is {MAX_SESSION_FILE_BYTES}",
                messages_json.len()
            )));
        }
        let mut value: Value = serde_json::from_str(&messages_json)
            .map_err(|e| StoreFailure::invalid(format!("the session is not JSON: {e}")))?;
        if !value.is_array() {
            return Err(StoreFailure::invalid(
                "a session must be a JSON array of messages",
            ));
        }
        let text = self
            .redactor
            .redact_json(messages_json, &mut value)
            .map_err(|e| StoreFailure::invalid(format!("the session cannot be stored: {e}")))?;
        if text.len() > MAX_SESSION_FILE_BYTES {
            return Err(StoreFailure::too_large(format!(
                "the session is {} bytes with its secrets redacted; the limit is \
                 {MAX_SESSION_FILE_BYTES}",
                text.len()
            )));
        }
        let _saving = super::lock(&self.saving);
        let dir = self.open_dir()?;
        let name = session_file_name(context);
        private_file::replace_at(&dir, &name, text.as_bytes(), Owner::Writer)
            .map_err(|e| storage_failure("cannot write a session file", e))?;
        if let Err(e) = prune(&dir, &name) {
            // The new history is saved; only old ones may linger until the next save.
            tracing::warn!(error = %e, "old sessions not pruned");
        }
        Ok(())
    }
}

/// Delete leftover temporary files, and the session files beyond the bounds, oldest
/// written first; never `keep`.
fn prune(dir: &OwnedFd, keep: &str) -> Result<(), Errno> {
    let mut listing = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut files = Vec::new();
    let mut leftovers = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name.starts_with('.') && name.ends_with(TEMP_SUFFIX) {
            leftovers.push(name.to_owned());
        } else if is_session_name(name) {
            let Ok(st) = fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            files.push((
                (st.st_mtime, st.st_mtime_nsec),
                name.to_owned(),
                u64::try_from(st.st_size).unwrap_or(0),
            ));
        }
    }
    drop(listing);
    for name in leftovers {
        let _ = unlinkat(dir, name.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    // Newest first; the one just written leads whatever its time says.
    files.sort_by(|a, b| {
        (b.1 == keep)
            .cmp(&(a.1 == keep))
            .then(b.0.cmp(&a.0))
            .then(b.1.cmp(&a.1))
    });
    let mut kept = 0usize;
    let mut bytes = 0u64;
    let mut pruned = 0usize;
    let mut full = false;
    for (_, name, size) in files {
        // Once one does not fit, every older one goes too.
        full = full || kept >= MAX_SESSION_FILES || bytes.saturating_add(size) > MAX_SESSION_BYTES;
        if name == keep || !full {
            kept += 1;
            bytes = bytes.saturating_add(size);
            continue;
        }
        unlinkat(dir, name.as_str(), UnlinkatFlags::NoRemoveDir)?;
        pruned += 1;
    }
    if pruned > 0 {
        tracing::debug!(pruned, kept, "old sessions pruned");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_hash_of_the_id_only() {
        let name = session_file_name(&ContextId("../../etc/passwd\0\n".into()));
        assert!(is_session_name(&name), "{name}");
        assert!(!name.contains('/'));
        assert_eq!(
            session_file_name(&ContextId("abc".into())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.json"
        );
        assert!(!is_session_name("x.json"));
        assert!(!is_session_name(&format!(".{name}.00.tmp")));
    }
}
