//! The tail file, `protocol/audit-tail.json` (0600): the id and hash of the newest row
//! written, kept outside the database. The chain alone cannot show rows cut from its
//! end, or the whole database swapped for an older copy; a database that ends before the
//! row this file names can.
//!
//! * Written by the writer after every committed batch (once its waiters are answered,
//!   before the next batch): a fixed-length record overwritten in place with one write
//!   (created through a temporary file and `rename` the first time, by the one writer of
//!   private files). A reader that sees a
//!   torn record reads again. A reader reads it *before* the database, so a commit
//!   landing in between only puts the database ahead, which is fine. Replacing the file
//!   by `rename` on every batch cost a block I/O each on ext4 (`auto_da_alloc` starts the
//!   new file's writeback at the rename).
//! * Not fsynced after a commit (its creation, by the shared writer of private files, is:
//!   a rare write, once per database or after the file went missing). It vouches for
//!   rows that are themselves not fsynced at commit (WAL with `synchronous=NORMAL`): syncing it alone would make it outlive those rows at a power
//!   failure and cry "cut" every time, and syncing both on every batch costs two flash
//!   flushes per call. A crash of approvald loses neither (both are in the page cache). A
//!   power failure can lose the newest commits, and then possibly not the tail file:
//!   `--verify` reports that as a cut, and its message says a power failure is the
//!   innocent explanation.
//! * A database that keeps a tail file says so by its schema version (2 and later); the
//!   file is first written before the database is migrated to that version, so such a
//!   database without one means the file was removed.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::chain::{is_sha256_hex, GENESIS_SHA256};
use super::retention::Anchor;
use nl2sh_proto::private_file::{self, Owner};
use nl2sh_proto::state_layout;

/// The tail file, relative to the state directory.
pub const TAIL_FILE: &str = state_layout::AUDIT_TAIL.path;
const FORMAT: &str = "nl2sh-audit-tail-v1";
/// A real tail file is [`RECORD_BYTES`] long.
const MAX_TAIL_BYTES: u64 = 1024;

/// The tail file beside the database at `db`.
pub fn tail_path(db: &Path) -> PathBuf {
    db.with_file_name(state_layout::AUDIT_TAIL.name())
}

/// Where builds before the shared private-file writer made the tail file's temporary
/// file; a leftover one is removed at open.
pub(super) fn legacy_temp_path(db: &Path) -> PathBuf {
    db.with_file_name(format!("{}.tmp", state_layout::AUDIT_TAIL.name()))
}

/// The newest row written: what the tail file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    pub id: i64,
    pub row_sha256: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    format: String,
    id: i64,
    row_sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is malformed: {why}", .path.display())]
    Malformed { path: PathBuf, why: String },
}

/// The tail file at `path`; `None` when there is none. A record overwritten while it
/// was read can come out torn; it is read again before it is called malformed.
pub fn read(path: &Path) -> Result<Option<Tail>, TailError> {
    let mut tries = 0;
    loop {
        match read_once(path) {
            Err(TailError::Malformed { .. }) if tries < 2 => tries += 1,
            other => return other,
        }
    }
}

fn read_once(path: &Path) -> Result<Option<Tail>, TailError> {
    let io_err = |source| TailError::Io {
        path: path.to_owned(),
        source,
    };
    let malformed = |why: String| TailError::Malformed {
        path: path.to_owned(),
        why,
    };
    let file = match File::options()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    if !file.metadata().map_err(io_err)?.is_file() {
        return Err(malformed("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TAIL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_TAIL_BYTES {
        return Err(malformed(format!("larger than {MAX_TAIL_BYTES} bytes")));
    }
    let on_disk: OnDisk =
        serde_json::from_slice(&bytes).map_err(|e| malformed(format!("not a tail record: {e}")))?;
    if on_disk.format != FORMAT {
        return Err(malformed(format!("unknown format {:?}", on_disk.format)));
    }
    if on_disk.id < 0 || !is_sha256_hex(&on_disk.row_sha256) {
        return Err(malformed("bad id or hash".into()));
    }
    Ok(Some(Tail {
        id: on_disk.id,
        row_sha256: on_disk.row_sha256,
    }))
}

/// Bytes of a tail record on disk: the JSON padded with spaces, then a newline. A fixed
/// length lets an update overwrite the record in place.
const RECORD_BYTES: usize = 192;

fn record(tail: &Tail) -> io::Result<Vec<u8>> {
    let mut text = serde_json::to_vec(&OnDisk {
        format: FORMAT.to_owned(),
        id: tail.id,
        row_sha256: tail.row_sha256.clone(),
    })
    .map_err(io::Error::other)?;
    if text.len() >= RECORD_BYTES {
        return Err(io::Error::other("tail record too long"));
    }
    text.resize(RECORD_BYTES - 1, b' ');
    text.push(b'\n');
    Ok(text)
}

/// Create the tail file at `path` (mode 0600), by the one writer of private files
/// (`nl2sh_proto::private_file`: a temporary file, then `rename`).
pub(super) fn write(path: &Path, tail: &Tail) -> io::Result<()> {
    private_file::replace(path, &record(tail)?, Owner::Writer)
}

/// Update the tail file after a commit: the record overwritten in place, in one write of
/// a fixed length within one sector. Not a rename: on ext4 replacing a file by rename
/// starts the new file's writeback at once (`auto_da_alloc`), a block I/O per commit. A
/// missing or odd file is created anew through [`write`].
pub(super) fn update(path: &Path, tail: &Tail) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    // Missing, or something else (a symlink planted there): replaced by a new file.
    let Ok(file) = opened else {
        return write(path, tail);
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != RECORD_BYTES as u64 {
        drop(file);
        return write(path, tail);
    }
    file.write_all_at(&record(tail)?, 0)
}

/// How the end of the trail compares with the tail file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailStatus {
    /// The newest row written, `id`, is in the trail unchanged (the trail may have grown
    /// since).
    Matches { id: i64 },
    /// The newest row written has since been pruned: the trail has moved past it.
    Pruned { id: i64 },
    /// No tail file, and the database predates them: a cut tail cannot be detected.
    NotKept,
    /// The database keeps a tail file, and it is gone.
    Missing,
    /// The trail ends at `last_id`, before `written_id`.
    Cut { last_id: i64, written_id: i64 },
    /// Row `id` is not the row that was written as row `id`.
    Differs { id: i64 },
    /// The tail file cannot be understood.
    Malformed(String),
}

impl TailStatus {
    /// Whether this shows nothing removed or replaced.
    pub fn is_ok(&self) -> bool {
        matches!(
            self,
            TailStatus::Matches { .. } | TailStatus::Pruned { .. } | TailStatus::NotKept
        )
    }
}

impl std::fmt::Display for TailStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TailStatus::Matches { id } => {
                write!(f, "the newest row written, row {id}, is in the trail")
            }
            TailStatus::Pruned { id } => write!(
                f,
                "the newest row written when the tail file was last updated, row {id}, has \
                 since been pruned"
            ),
            TailStatus::NotKept => write!(
                f,
                "no tail file: this database was written by an older build that kept none, \
                 so rows removed from its end cannot be detected"
            ),
            TailStatus::Missing => write!(
                f,
                "the tail file ({TAIL_FILE}) is missing, though this database keeps one: it \
                 was removed, so rows removed from the end cannot be ruled out"
            ),
            TailStatus::Cut {
                last_id,
                written_id,
            } => write!(
                f,
                "the trail ends at row {last_id} but row {written_id} was written: rows were \
                 removed from the end (or the database was replaced by an older copy; a \
                 power failure that lost the newest commits looks the same)"
            ),
            TailStatus::Differs { id } => write!(
                f,
                "row {id} is not the row that was written as row {id} (its hash differs \
                 from the tail file's): the database was replaced or rewritten"
            ),
            TailStatus::Malformed(why) => write!(f, "the tail file is unusable: {why}"),
        }
    }
}

/// Compare the trail in `conn` (in one read snapshot with `anchor`) with `tail`, read
/// before that snapshot began. `keeps_tail`: the database's schema says it has one.
pub(super) fn check(
    conn: &Connection,
    tail: Option<&Tail>,
    keeps_tail: bool,
    anchor: Option<&Anchor>,
) -> rusqlite::Result<TailStatus> {
    let Some(tail) = tail else {
        return Ok(if keeps_tail {
            TailStatus::Missing
        } else {
            TailStatus::NotKept
        });
    };
    let last: Option<i64> = conn.query_row("SELECT max(id) FROM audit", [], |r| r.get(0))?;
    let last_id = last.or(anchor.map(|a| a.id)).unwrap_or(0);
    if tail.id > last_id {
        return Ok(TailStatus::Cut {
            last_id,
            written_id: tail.id,
        });
    }
    let id = tail.id;
    if let Some(a) = anchor {
        if id < a.id {
            return Ok(TailStatus::Pruned { id });
        }
        if id == a.id {
            return Ok(if a.row_sha256 == tail.row_sha256 {
                TailStatus::Matches { id }
            } else {
                TailStatus::Differs { id }
            });
        }
    }
    // Read as a value: a row whose hash column was given another type differs.
    let stored: Option<Value> = if id == 0 {
        Some(Value::Text(GENESIS_SHA256.to_owned()))
    } else {
        conn.query_row("SELECT row_sha256 FROM audit WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?
    };
    Ok(if stored == Some(Value::Text(tail.row_sha256.clone())) {
        TailStatus::Matches { id }
    } else {
        TailStatus::Differs { id }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn tail(id: i64, fill: char) -> Tail {
        Tail {
            id,
            row_sha256: fill.to_string().repeat(64),
        }
    }

    #[test]
    fn updates_overwrite_the_record_in_place_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-tail.json");
        assert_eq!(read(&path).unwrap(), None);
        // The first update creates it (mode 0600), later ones keep the same file.
        update(&path, &tail(1, 'a')).unwrap();
        let first = std::fs::metadata(&path).unwrap();
        assert_eq!(first.mode() & 0o777, 0o600);
        assert_eq!(first.len(), RECORD_BYTES as u64);
        for id in 2..=50 {
            update(&path, &tail(id, 'b')).unwrap();
        }
        let last = std::fs::metadata(&path).unwrap();
        assert_eq!((last.ino(), last.len()), (first.ino(), first.len()));
        assert_eq!(read(&path).unwrap(), Some(tail(50, 'b')));
        // A file of another length (an older build's, or an edited one) is replaced.
        std::fs::write(&path, b"{}").unwrap();
        update(&path, &tail(51, 'c')).unwrap();
        assert_eq!(read(&path).unwrap(), Some(tail(51, 'c')));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), RECORD_BYTES as u64);
        // A symlink planted in its place is replaced, not followed.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        update(&path, &tail(52, 'd')).unwrap();
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");
        assert_eq!(read(&path).unwrap(), Some(tail(52, 'd')));
        // Garbage stays malformed after the retries.
        std::fs::write(&path, b"not json").unwrap();
        assert!(matches!(read(&path), Err(TailError::Malformed { .. })));
    }
}
