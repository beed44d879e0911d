//! Append-only journal files of whole entries: how a worker keeps a record it has
//! answered for across its own death until the record reaches its owner (approvald's
//! audit journal, the executor's audit outbox).
//!
//! * Entry: `len` (u32 LE) | body (bincode) | the first 8 bytes of the body's SHA-256.
//!   An entry is appended with one `write(2)` on an `O_APPEND` file, so a killed process
//!   leaves whole entries (its writes are in the page cache); a torn or garbled entry can
//!   only come from a power loss or a kernel crash, and ends the reading of its file.
//! * Files: 0600, opened without following a symlink, close-on-exec.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::state_layout::PRIVATE_FILE_MODE;

/// Longest entry body read back; a longer length is taken for garbage.
pub const MAX_ENTRY_BYTES: usize = 1024 * 1024;
const SUM_BYTES: usize = 8;

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// The bytes of `entry` as it is appended.
pub fn encode_entry<T: Serialize>(entry: &T) -> io::Result<Vec<u8>> {
    let body = bincode::serde::encode_to_vec(entry, config())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_ENTRY_BYTES)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "journal entry too long"))?;
    let mut out = Vec::with_capacity(4 + body.len() + SUM_BYTES);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&Sha256::digest(&body)[..SUM_BYTES]);
    Ok(out)
}

/// What journal bytes held: their whole entries in order, and how many bytes after the
/// last of them could not be read as one.
#[derive(Debug)]
pub struct Entries<T> {
    pub entries: Vec<T>,
    pub garbage_bytes: usize,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            entries: Vec::new(),
            garbage_bytes: 0,
        }
    }
}

/// Decode every whole entry of `bytes`, stopping at the first that is not one.
pub fn decode_entries<T: DeserializeOwned>(bytes: &[u8]) -> Entries<T> {
    let mut read = Entries::default();
    let mut at = 0;
    while at < bytes.len() {
        match decode_one(&bytes[at..]) {
            Some((entry, used)) => {
                read.entries.push(entry);
                at += used;
            }
            None => {
                read.garbage_bytes = bytes.len() - at;
                break;
            }
        }
    }
    read
}

/// Optional fields added at the end of a journalled record since journals were first
/// written: an entry may lack up to this many.
const TRAILING_FIELDS_ADDED: usize = 2;

fn decode_one<T: DeserializeOwned>(bytes: &[u8]) -> Option<(T, usize)> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    if len > MAX_ENTRY_BYTES {
        return None;
    }
    let body = bytes.get(4..4 + len)?;
    let sum = bytes.get(4 + len..4 + len + SUM_BYTES)?;
    if Sha256::digest(body)[..SUM_BYTES] != *sum {
        return None;
    }
    let entry = match bincode::serde::decode_from_slice::<T, _>(body, config()) {
        Ok((entry, used)) if used == len => entry,
        // An entry of a build from before the record gained its last fields, each an
        // `Option` (the audit record's `after_reading`, then `client`): read with those
        // fields `None` (bincode's one byte 0 each), so a journal a crash left reads
        // across the upgrade.
        _ => (1..=TRAILING_FIELDS_ADDED).find_map(|missing| {
            let mut older = Vec::with_capacity(len + missing);
            older.extend_from_slice(body);
            older.resize(len + missing, 0);
            match bincode::serde::decode_from_slice::<T, _>(&older, config()) {
                Ok((entry, used)) if used == len + missing => Some(entry),
                _ => None,
            }
        })?,
    };
    Some((entry, 4 + len + SUM_BYTES))
}

/// Open `path` for appending, creating it 0600; never through a symlink.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The entries of the file at `path` (none when it does not exist); never through a
/// symlink.
pub fn read_entries<T: DeserializeOwned>(path: &Path) -> io::Result<Entries<T>> {
    let mut bytes = Vec::new();
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(decode_entries(&bytes))
}

/// Remove `path`; a missing file is fine.
pub fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(entries: &[(u64, String)]) -> Vec<u8> {
        entries
            .iter()
            .flat_map(|e| encode_entry(e).unwrap())
            .collect()
    }

    #[test]
    fn entries_read_back_in_order() {
        let entries = vec![(1u64, "a".to_string()), (2, "b".into()), (3, "c".into())];
        let read = decode_entries::<(u64, String)>(&bytes_of(&entries));
        assert_eq!(read.entries, entries);
        assert_eq!(read.garbage_bytes, 0);
    }

    #[test]
    fn a_torn_or_changed_entry_ends_the_reading() {
        let one = bytes_of(&[(1, "one".into())]);
        let two = bytes_of(&[(2, "two".into())]);
        let three = bytes_of(&[(3, "three".into())]);
        let mut torn = one.clone();
        torn.extend_from_slice(&two[..two.len() - 3]);
        let read = decode_entries::<(u64, String)>(&torn);
        assert_eq!(read.entries, vec![(1, "one".to_string())]);
        assert_eq!(read.garbage_bytes, two.len() - 3);
        let mut changed = one.clone();
        let mut bad = two.clone();
        bad[6] ^= 0x40;
        changed.extend_from_slice(&bad);
        changed.extend_from_slice(&three);
        assert_eq!(decode_entries::<(u64, String)>(&changed).entries.len(), 1);
        let mut huge = one;
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_entries::<(u64, String)>(&huge).entries.len(), 1);
    }

    #[test]
    fn files_are_private_and_never_followed_through_a_symlink() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        open_append(&path)
            .unwrap()
            .write_all(&bytes_of(&[(1, "x".into())]))
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            read_entries::<(u64, String)>(&path).unwrap().entries.len(),
            1
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(open_append(&link).is_err());
        assert!(read_entries::<(u64, String)>(&link).is_err());
        assert!(read_entries::<(u64, String)>(&dir.path().join("none"))
            .unwrap()
            .entries
            .is_empty());
    }
}
