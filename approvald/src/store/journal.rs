//! The audit journal, `<state>/protocol/audit-journal`: audit rows that approvald has
//! answered for but the writer has not committed yet.
//!
//! An answered call's row must survive a crash of any worker (docs/AUDIT.md, "Journal and outbox"). Committing
//! one SQLite transaction per call before its answer costs about 100 µs of CPU (WAL frames
//! for every page the row touches, and the checkpoints they bring); appending the row here
//! with one `write(2)` costs a few. The writer still commits rows in batches; each batch
//! records, in the same transaction, the highest journal sequence number it holds
//! (`audit_journal.applied`), so replaying the journal at the next start stores exactly
//! the rows that never reached the database, once.
//!
//! * Entries: [`nl2sh_proto::journal`]'s (sequence number, time, record), one `write(2)`
//!   each. The journal is as durable as the database (`synchronous=NORMAL`): a process
//!   crash loses nothing, a power failure may lose the last moments of both.
//! * Files: 0600 in the private `protocol/` directory.
//!   When the file passes [`ROTATE_BYTES`] it is renamed to `audit-journal.1` (when no
//!   such file is left) and a new one started; `.1` is removed once the writer has
//!   committed its last entry. At a clean stop, with every entry committed, both go.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nl2sh_proto::journal::{encode_entry, open_append, read_entries, remove, Entries};
use nl2sh_proto::state_layout;
use serde::{Deserialize, Serialize};

use super::AuditRecord;

/// The journal, relative to the state directory.
pub const JOURNAL_FILE: &str = state_layout::AUDIT_JOURNAL.path;
/// The file is rotated once it holds this many bytes.
pub const ROTATE_BYTES: u64 = 256 * 1024;

/// One journalled row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    /// When approvald answered for the row (ms since the epoch): the row's `time`.
    pub time_ms: i64,
    pub record: AuditRecord,
}

/// What the journal files held.
pub type Contents = Entries<Entry>;

/// The two files of the journal in `state_dir`: the older one first.
pub fn paths(state_dir: &Path) -> [PathBuf; 2] {
    [
        state_layout::AUDIT_JOURNAL_OLDER.in_dir(state_dir),
        state_layout::AUDIT_JOURNAL.in_dir(state_dir),
    ]
}

/// Every entry of both files, older file first, and the garbage bytes found. A missing
/// file holds nothing.
pub fn read_all(state_dir: &Path) -> io::Result<Contents> {
    let mut all = Contents::default();
    for path in paths(state_dir) {
        let read = read_entries::<Entry>(&path)?;
        all.entries.extend(read.entries);
        all.garbage_bytes += read.garbage_bytes;
    }
    Ok(all)
}

/// Entries of [`read_all`] past `applied`, in sequence order, each once.
pub fn unapplied(mut read: Contents, applied: u64) -> Vec<Entry> {
    read.entries.retain(|e| e.seq > applied);
    read.entries.sort_by_key(|e| e.seq);
    read.entries.dedup_by_key(|e| e.seq);
    read.entries
}

/// What the writer shares with the journal: the highest sequence number committed.
#[derive(Debug, Default)]
pub struct Progress {
    committed: AtomicU64,
}

impl Progress {
    pub fn starting_at(applied: u64) -> Arc<Self> {
        Arc::new(Progress {
            committed: AtomicU64::new(applied),
        })
    }

    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    pub fn commit_up_to(&self, seq: u64) {
        self.committed.fetch_max(seq, Ordering::AcqRel);
    }
}

/// The open journal: appended to by approvald's tasks, one at a time.
pub struct Journal {
    older: PathBuf,
    current: PathBuf,
    file: File,
    /// Bytes in the current file.
    len: u64,
    /// The last sequence number given out.
    last_seq: u64,
    /// The last sequence number the older file holds, while it exists.
    older_last: Option<u64>,
    progress: Arc<Progress>,
    /// [`Journal::close`] removed the files: the next append opens a new one.
    closed: bool,
}

impl Journal {
    /// Start an empty journal (after the replay removed the files), numbering from
    /// `last_seq + 1`.
    pub fn create(state_dir: &Path, last_seq: u64, progress: Arc<Progress>) -> io::Result<Self> {
        let [older, current] = paths(state_dir);
        remove(&older)?;
        remove(&current)?;
        let file = open_append(&current)?;
        Ok(Journal {
            older,
            current,
            file,
            len: 0,
            last_seq,
            older_last: None,
            progress,
            closed: false,
        })
    }

    /// Append `record` as answered at `time_ms`; its sequence number once it is written.
    pub fn append(&mut self, record: &AuditRecord, time_ms: i64) -> io::Result<u64> {
        if self.closed {
            self.file = open_append(&self.current)?;
            self.closed = false;
        }
        self.tidy();
        let seq = self.last_seq + 1;
        let bytes = encode_entry(&Entry {
            seq,
            time_ms,
            record: record.clone(),
        })?;
        // One write of a whole entry; O_APPEND puts it after the last one.
        self.file.write_all(&bytes)?;
        self.last_seq = seq;
        self.len += bytes.len() as u64;
        Ok(seq)
    }

    /// Drop the older file once its entries are committed, and start a new file when
    /// the current one is full and the older one is gone. A failure here is retried at
    /// the next append; the entries stay readable either way.
    fn tidy(&mut self) {
        if let Some(last) = self.older_last {
            if self.progress.committed() >= last {
                match remove(&self.older) {
                    Ok(()) => self.older_last = None,
                    Err(e) => tracing::warn!(error = %e, "cannot remove a committed audit journal"),
                }
            }
        }
        if self.len < ROTATE_BYTES || self.older_last.is_some() {
            return;
        }
        let rotated =
            std::fs::rename(&self.current, &self.older).and_then(|()| open_append(&self.current));
        match rotated {
            Ok(file) => {
                self.file = file;
                self.len = 0;
                self.older_last = Some(self.last_seq);
            }
            Err(e) => tracing::warn!(error = %e, "cannot rotate the audit journal"),
        }
    }

    /// At a clean stop: remove both files if every entry is committed. Appending after
    /// this starts the current file again.
    pub fn close(&mut self) {
        if self.progress.committed() < self.last_seq {
            return;
        }
        for path in [&self.older, &self.current] {
            if let Err(e) = remove(path) {
                tracing::warn!(error = %e, path = %path.display(), "cannot remove the audit journal");
            }
        }
        self.older_last = None;
        self.len = 0;
        self.closed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AuditKind;

    fn entry(seq: u64) -> Entry {
        let mut record = AuditRecord::new(AuditKind::Call, seq as i64);
        record.action = Some(format!("ls /tmp/{seq}"));
        Entry {
            seq,
            time_ms: 1_700_000_000_000 + seq as i64,
            record,
        }
    }

    #[test]
    fn unapplied_keeps_each_entry_past_the_applied_one_once() {
        let read = Contents {
            entries: vec![entry(3), entry(1), entry(4), entry(3), entry(2)],
            garbage_bytes: 0,
        };
        let seqs: Vec<u64> = unapplied(read, 2).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
    }

    #[test]
    fn rotates_and_drops_the_older_file_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("protocol")).unwrap();
        let progress = Progress::starting_at(0);
        let mut journal = Journal::create(dir.path(), 0, progress.clone()).unwrap();
        let [older, current] = paths(dir.path());
        let mut record = AuditRecord::new(AuditKind::Call, 1);
        record.summary = Some("x".repeat(4000));
        let mut last = 0;
        while !older.exists() {
            last = journal.append(&record, 0).unwrap();
            assert!(last < 1000, "never rotated");
        }
        // Every entry so far is still readable, across both files.
        assert_eq!(read_all(dir.path()).unwrap().entries.len() as u64, last);
        // Not committed: the older file stays, however much is appended.
        for _ in 0..20 {
            last = journal.append(&record, 0).unwrap();
        }
        assert!(older.exists());
        progress.commit_up_to(last - 1);
        journal.append(&record, 0).unwrap();
        assert!(!older.exists(), "committed older file kept");
        assert!(current.exists());
        // A clean stop with an entry not committed keeps the journal.
        let seq = journal.append(&record, 0).unwrap();
        progress.commit_up_to(seq - 1);
        journal.close();
        assert!(current.exists());
        drop(journal);
        let mut journal = Journal::create(dir.path(), seq, progress.clone()).unwrap();
        let seq = journal.append(&record, 0).unwrap();
        progress.commit_up_to(seq);
        journal.close();
        assert!(!current.exists() && !older.exists());
    }
}
