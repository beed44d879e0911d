//! The audit outbox, `<state>/protocol/audit-outbox`: the last audit row of every call
//! whose answer left before approvald acknowledged that row.
//!
//! A call's answer must not leave before its row is safe from a crash of any worker
//! (docs/AUDIT.md, "Journal and outbox"); waiting for approvald's acknowledgement costs a
//! round trip between two processes on every call. Instead the executor appends the row
//! here (one `write(2)`, [`nl2sh_proto::journal`]), answers, and reports the row to
//! approvald with the other rows gathered meanwhile (`Authority::report`). The file is
//! emptied when every row in it is acknowledged and it has grown to [`EMPTY_AT_BYTES`],
//! and at a clean stop. A restarted executor hands what it finds to approvald
//! ([`ReportedRow`] as `Recover`), which writes the rows its audit does not hold yet,
//! before serving any call.
//!
//! While more than [`MAX_UNACKNOWLEDGED`] rows wait for approvald, a call waits for its
//! own acknowledgement as it would without the outbox, so a stalled approvald holds back
//! answers instead of growing the file.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nl2sh_proto::channels::ReportedRow;
use nl2sh_proto::journal::{encode_entry, open_append, read_entries};

/// The outbox, relative to the state directory.
pub const OUTBOX_FILE: &str = nl2sh_proto::state_layout::AUDIT_OUTBOX.path;
/// Rows that may wait for approvald's acknowledgement after their answers left.
pub const MAX_UNACKNOWLEDGED: usize = 256;
/// The file is emptied, once no row waits, only when it holds this much: emptying it
/// (`ftruncate`) costs more than the call it would follow, and rows approvald has are
/// harmless there (the next start finds them in the audit and skips them).
pub const EMPTY_AT_BYTES: u64 = 64 * 1024;

struct Inner {
    file: File,
    /// Rows appended and not yet acknowledged.
    unacknowledged: usize,
    /// Bytes in the file.
    len: u64,
}

impl Inner {
    /// Empty the file if no row in it waits for approvald.
    fn empty_if_settled(&mut self) {
        if self.unacknowledged > 0 {
            return;
        }
        // O_APPEND: the next row goes to the new end, 0.
        match self.file.set_len(0) {
            Ok(()) => self.len = 0,
            Err(e) => tracing::warn!(error = %e, "cannot empty the audit outbox"),
        }
    }
}

pub struct Outbox {
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// A row in the outbox, to be acknowledged once approvald has it.
#[must_use = "an outbox row is acknowledged, or kept for the next start"]
pub struct Pending {
    /// The row's encoded size.
    bytes: usize,
}

impl Pending {
    /// The row's encoded size, about what it takes in a frame.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Outbox {
    /// Open the outbox of `state_dir`, with the rows an earlier executor left in it.
    /// They stay in the file until [`Outbox::recovered`].
    pub fn open(state_dir: &Path) -> io::Result<(Outbox, Vec<ReportedRow>)> {
        let path = state_dir.join(OUTBOX_FILE);
        let left = read_entries::<ReportedRow>(&path)?;
        if left.garbage_bytes > 0 {
            tracing::warn!(
                path = %path.display(),
                bytes = left.garbage_bytes,
                "the audit outbox ends in an entry that is not whole (a power loss?); it is skipped"
            );
        }
        let file = open_append(&path)?;
        let len = file.metadata()?.len();
        let outbox = Outbox {
            path,
            inner: Mutex::new(Inner {
                file,
                unacknowledged: 0,
                len,
            }),
        };
        Ok((outbox, left.entries))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Plain counters and a file: a panic elsewhere cannot leave them torn.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `row` before its call is answered. `None` when the row is not kept (the
    /// file cannot be written, or too many rows wait already): then the call waits for
    /// approvald's acknowledgement before it is answered.
    pub fn keep(&self, row: &ReportedRow) -> Option<Pending> {
        let bytes = match encode_entry(row) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, "an audit row does not fit the outbox");
                return None;
            }
        };
        let mut inner = self.inner();
        if inner.unacknowledged >= MAX_UNACKNOWLEDGED {
            return None;
        }
        if let Err(e) = inner.file.write_all(&bytes) {
            tracing::warn!(error = %e, path = %self.path.display(), "cannot write the audit outbox");
            return None;
        }
        inner.unacknowledged += 1;
        inner.len += bytes.len() as u64;
        Some(Pending { bytes: bytes.len() })
    }

    /// approvald has the row of `pending`. Once none waits, a file of
    /// [`EMPTY_AT_BYTES`] or more is emptied.
    pub fn acknowledged(&self, pending: Pending) {
        let Pending { .. } = pending;
        let mut inner = self.inner();
        inner.unacknowledged = inner.unacknowledged.saturating_sub(1);
        if inner.len >= EMPTY_AT_BYTES {
            inner.empty_if_settled();
        }
    }

    /// Every row left by an earlier executor is in the audit: empty the file if nothing
    /// of this executor's waits.
    pub fn recovered(&self) {
        self.inner().empty_if_settled();
    }

    /// Rows waiting for approvald now.
    fn unacknowledged(&self) -> usize {
        self.inner().unacknowledged
    }

    /// Wait (up to `limit`) until approvald has acknowledged every row: at a clean stop,
    /// so the outbox is left empty.
    pub async fn settle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.unacknowledged() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.inner().empty_if_settled();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{
        ActionSummary, CallId, CallOrigin, CallResult, ConfigVersion, Confinement, Identity,
        RanRecord, RiskLevel,
    };

    fn row(id: u64) -> ReportedRow {
        let summary = ActionSummary {
            data: None,
            ui_app: None,
            call_id: CallId(id),
            task: None,
            after_reading: Default::default(),
            client: None,
            sent: None,
            origin: CallOrigin::McpHttp,
            tool: "shell.exec".into(),
            action: format!("/bin/sh -c 'ls {id}'"),
            arguments_sha256: "0123456789abcdef".repeat(4),
            risk: RiskLevel::ReadOnly,
            requires_root: false,
            identity: Identity::Launching,
            confinement: Confinement::Sandbox,
            reasons: Vec::new(),
            commands: None,
        };
        ReportedRow::Ran(RanRecord {
            result: CallResult {
                call_id: CallId(id),
                success: true,
                exit_code: Some(0),
                duration_ms: 1,
                summary: "ok".into(),
            },
            summary,
            policy: ConfigVersion::of(Path::new("/nonexistent")),
        })
    }

    fn ids(rows: &[ReportedRow]) -> Vec<u64> {
        rows.iter().map(|r| r.call_id().0).collect()
    }

    fn state_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("protocol")).unwrap();
        dir
    }

    #[test]
    fn rows_not_acknowledged_are_found_by_the_next_executor() {
        let dir = state_dir();
        let (outbox, left) = Outbox::open(dir.path()).unwrap();
        assert!(left.is_empty());
        let one = outbox.keep(&row(1)).unwrap();
        let _two = outbox.keep(&row(2)).unwrap();
        outbox.acknowledged(one);
        // Row 2 still waits, so the file still holds both: the next start asks approvald
        // about each, and approvald writes only what it lacks.
        drop(outbox);
        let (outbox, left) = Outbox::open(dir.path()).unwrap();
        assert_eq!(ids(&left), vec![1, 2]);
        // Recovered: the file is emptied, and new rows come after nothing.
        outbox.recovered();
        let three = outbox.keep(&row(3)).unwrap();
        drop(outbox);
        let (outbox, left) = Outbox::open(dir.path()).unwrap();
        assert_eq!(ids(&left), vec![3]);
        drop(three);
        drop(outbox);
    }

    #[test]
    fn a_grown_file_is_emptied_once_every_row_is_acknowledged() {
        let dir = state_dir();
        let (outbox, _) = Outbox::open(dir.path()).unwrap();
        let path = dir.path().join(OUTBOX_FILE);
        let len = || std::fs::metadata(&path).unwrap().len();
        // Small: acknowledged rows stay (emptying costs more than they do).
        let a = outbox.keep(&row(1)).unwrap();
        outbox.acknowledged(a);
        assert!(len() > 0);
        // Grown past EMPTY_AT_BYTES: emptied once nothing waits, not before.
        let mut waiting = Vec::new();
        while len() < EMPTY_AT_BYTES {
            waiting.push(outbox.keep(&row(2)).unwrap());
            if waiting.len() > 1 {
                outbox.acknowledged(waiting.remove(0));
            }
        }
        assert!(len() >= EMPTY_AT_BYTES);
        outbox.acknowledged(waiting.remove(0));
        assert_eq!(len(), 0);
        // Appending goes on at the new end.
        let c = outbox.keep(&row(3)).unwrap();
        let (_, left) = Outbox::open(dir.path()).unwrap();
        assert_eq!(ids(&left), vec![3]);
        outbox.acknowledged(c);
    }

    #[tokio::test]
    async fn settling_waits_for_every_acknowledgement_and_empties_the_file() {
        let dir = state_dir();
        let (outbox, _) = Outbox::open(dir.path()).unwrap();
        let outbox = std::sync::Arc::new(outbox);
        let pending = outbox.keep(&row(1)).unwrap();
        assert!(!outbox.settle(Duration::from_millis(20)).await);
        let later = outbox.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.acknowledged(pending);
        });
        assert!(outbox.settle(Duration::from_secs(5)).await);
        let len = std::fs::metadata(dir.path().join(OUTBOX_FILE))
            .unwrap()
            .len();
        assert_eq!(len, 0);
    }

    #[test]
    fn a_full_outbox_keeps_no_more_rows() {
        let dir = state_dir();
        let (outbox, _) = Outbox::open(dir.path()).unwrap();
        let kept: Vec<Pending> = (0..MAX_UNACKNOWLEDGED as u64)
            .map(|i| outbox.keep(&row(i)).unwrap())
            .collect();
        assert!(
            outbox.keep(&row(9999)).is_none(),
            "the call must wait instead"
        );
        for p in kept {
            outbox.acknowledged(p);
        }
        assert!(outbox.keep(&row(10_000)).is_some());
    }
}
