//! The policy snapshot (docs/ARCHITECTURE.md, "The policy snapshot"; executor → approvald): which read-only calls
//! approvald lets run without asking, as of one version of the configuration file.
//!
//! Why: a read-only call the policy does not ask about is the hot path of direct tool use
//! (an agent polling the screen), and asking approvald for each one is a round trip
//! whose answer is known. With the snapshot the executor lets such a call run at once
//! (in the read-only sandbox, or as a fixed read) and sends approvald one audit record
//! afterwards. approvald stays the only place that decides anything else, and the only
//! writer of the audit.
//!
//! Exactness: the snapshot names the file version it was computed from, and the executor
//! compares that with the file as it is now (one `stat`) before every call it decides
//! from it. Any difference (an edit, a replacement, the file appearing or vanishing)
//! sends that call to approvald as before, which re-reads the file, and the executor
//! fetches a fresh snapshot. An edit therefore applies to the next call, as it does
//! when approvald decides.

use serde::{Deserialize, Serialize};

use crate::channels::CallOrigin;

/// What identifies one version of a file: a change to its content moves at least one of
/// these (an in-place edit changes mtime and ctime, a replacement changes the inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

/// The configuration file as one side saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigVersion {
    /// There is no file (the embedded defaults apply).
    Absent,
    File(FileStamp),
    /// It could not be examined, or changed while it was read: matches nothing, so a
    /// snapshot of it never lets a call skip approvald.
    Unknown,
}

impl ConfigVersion {
    /// The version of the file at `path` now (follows symlinks, as reading it does).
    pub fn of(path: &std::path::Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => ConfigVersion::File(FileStamp {
                dev: m.dev(),
                ino: m.ino(),
                size: m.size(),
                mtime: (m.mtime(), m.mtime_nsec()),
                ctime: (m.ctime(), m.ctime_nsec()),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigVersion::Absent,
            Err(_) => ConfigVersion::Unknown,
        }
    }

    /// Whether two observations are of the same, known version.
    pub fn same_as(&self, other: &ConfigVersion) -> bool {
        *self != ConfigVersion::Unknown && self == other
    }
}

/// More origins than exist are a malformed snapshot.
pub const MAX_SNAPSHOT_ORIGINS: usize = 8;

/// approvald's answer to "which read-only calls run unasked" for one configuration
/// version. A read-only call qualifies only if it runs confined (in the read-only
/// sandbox, or a fixed read); approvald computes the list with the same function it
/// decides with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySnapshot {
    pub version: ConfigVersion,
    /// Origins whose confined read-only calls the policy lets run without asking. Empty
    /// when the configuration cannot be used (every call then goes to approvald, which
    /// refuses it and says why).
    pub reads_unasked: Vec<CallOrigin>,
}

impl PolicySnapshot {
    /// Whether a confined read-only call from `origin` may run without asking, given the
    /// configuration file's version now.
    pub fn lets_read(&self, now: &ConfigVersion, origin: CallOrigin) -> bool {
        self.version.same_as(now)
            && self.reads_unasked.len() <= MAX_SNAPSHOT_ORIGINS
            && self.reads_unasked.contains(&origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_a_replacement_or_a_removal_changes_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert_eq!(ConfigVersion::of(&path), ConfigVersion::Absent);
        std::fs::write(&path, "approval_policy = 'balanced'\n").unwrap();
        let first = ConfigVersion::of(&path);
        assert!(matches!(first, ConfigVersion::File(_)));
        assert!(first.same_as(&ConfigVersion::of(&path)));
        // Same size, new content: mtime/ctime move (nanosecond timestamps).
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(&path, "approval_policy = 'strict'  \n").unwrap();
        let edited = ConfigVersion::of(&path);
        assert!(!first.same_as(&edited));
        // Replaced by rename: a new inode.
        let other = dir.path().join("new.toml");
        std::fs::write(&other, "approval_policy = 'strict'  \n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(!edited.same_as(&ConfigVersion::of(&path)));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ConfigVersion::of(&path), ConfigVersion::Absent);
    }

    #[test]
    fn an_unknown_version_matches_nothing_not_even_itself() {
        let snapshot = PolicySnapshot {
            version: ConfigVersion::Unknown,
            reads_unasked: vec![CallOrigin::McpHttp],
        };
        assert!(!snapshot.lets_read(&ConfigVersion::Unknown, CallOrigin::McpHttp));
        let snapshot = PolicySnapshot {
            version: ConfigVersion::Absent,
            reads_unasked: vec![CallOrigin::McpStdio],
        };
        assert!(snapshot.lets_read(&ConfigVersion::Absent, CallOrigin::McpStdio));
        assert!(!snapshot.lets_read(&ConfigVersion::Absent, CallOrigin::McpHttp));
        assert!(!snapshot.lets_read(&ConfigVersion::Unknown, CallOrigin::McpStdio));
    }
}
