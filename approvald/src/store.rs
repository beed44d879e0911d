//! The state directory's SQLite store, `<state>/protocol/tasks.sqlite3` (docs/ARCHITECTURE.md, "State and who owns it"; docs/AUDIT.md):
//! the hash-chained audit trail, and the delegated tasks ([`tasks`]; Agent sessions live
//! beside it in `<state>/sessions/`, [`sessions`]).
//!
//! * Files: `protocol/` is 0700 and the database 0600, created with those modes before
//!   SQLite opens it. SQLite gives the `-wal`/`-shm` files the database file's mode; a
//!   leftover one with a wider mode is tightened at open, and the approvald process runs
//!   with umask 077 besides (see `crate::run`).
//! * Connection: WAL, `synchronous=NORMAL`, `foreign_keys=ON`, `trusted_schema=OFF`,
//!   `auto_vacuum=INCREMENTAL` (set before anything else, so a new database gets it); the
//!   schema is migrated by `PRAGMA user_version` (this build writes version 4 and refuses
//!   a newer one).
//! * Group commit: one writer thread owns the read-write connection. Callers queue
//!   records on a bounded channel ([`QUEUE_CAPACITY`]; a full queue makes senders wait,
//!   nothing is dropped). The writer takes everything queued at once, writes it in one
//!   transaction, commits, and only then acknowledges each waiter of that batch, so a
//!   burst of calls costs one commit rather than one per call. A batch that nobody waits
//!   for lingers up to [`LINGER`] for more, so a steady stream of calls shares commits
//!   too; a waiter cuts that short.
//! * Journal ([`journal`]): rows answered for before their commit
//!   ([`Store::append_durable`]) are first appended to `protocol/audit-journal`; each
//!   batch records how far into it it got, and [`Store::open`] commits what it never did.
//! * Chain: each row stores `prev_sha256`, the previous row's `row_sha256` (64 zeros for
//!   the first row), and `row_sha256` = SHA-256 of [`canonical_row`] over every other
//!   column; ids follow each other without gaps. Editing, deleting or inserting a row
//!   breaks the chain at that row or the next one, which [`verify_path`] reports. The
//!   `task` column (version 4) is hashed after the others, and only when it is set, so
//!   rows written before it existed keep their hashes.
//! * Retention ([`retention`]): the writer prunes the oldest rows in its batches to keep
//!   within `audit_max_rows` / `audit_max_bytes` ([`Store::set_limits`]), and records the
//!   last pruned row's id and hash in `audit_anchor` in the same transaction; the chain
//!   is verified from that anchor.
//! * Tail ([`tail`]): the id and hash of the newest row are also kept in a file beside
//!   the database, so rows cut from the end, which no chain can show, are detected.
//!   A database that does not match its tail file when it is opened is not repaired:
//!   the writer logs the break and continues after it, leaving a gap in the ids that
//!   [`verify_path`] keeps reporting until retention prunes past it.
//! * Tasks share the writer: a task write is a job on the same queue, run between audit
//!   batches on the same connection (see [`tasks`] for why).

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};

use crate::clock;

pub mod journal;
pub mod redact;
pub mod retention;
pub mod sessions;
pub mod tail;
pub mod tasks;

pub use retention::{
    Anchor, AuditLimits, DEFAULT_AUDIT_MAX_BYTES, DEFAULT_AUDIT_MAX_ROWS, MIN_AUDIT_MAX_BYTES,
    MIN_AUDIT_MAX_ROWS,
};
pub use tail::{TailStatus, TAIL_FILE};

/// The database, relative to the state directory.
pub const DB_FILE: &str = "protocol/tasks.sqlite3";
/// Records that may wait for the writer; more make their senders wait.
pub const QUEUE_CAPACITY: usize = 4096;
/// Most records one transaction takes.
pub const MAX_BATCH: usize = 4096;
/// How long records nobody waits for (read-only calls, outcomes) may wait for company
/// before they are committed. An approvald crash can lose that much of them; a power
/// failure loses more anyway (`synchronous=NORMAL`).
pub const LINGER: Duration = Duration::from_millis(5);
/// Longest text a stored column may hold; a record with a longer one is refused.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// How far back [`Store::has_row`] looks.
pub const RECENT_ROWS_SEARCHED: i64 = 20_000;
/// `PRAGMA user_version` this build writes.
pub const SCHEMA_VERSION: i64 = 4;
/// The first schema version whose databases keep a tail file.
const TAIL_SINCE_VERSION: i64 = 2;
/// What a row is taken to cost until one is measured: a little more than the usual.
const DEFAULT_ROW_BYTES: u64 = 512;
/// `prev_sha256` of the first row.
pub const GENESIS_SHA256: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// First bytes hashed for every row; changes if the canonical form ever does.
const ROW_DOMAIN: &[u8] = b"nl2sh-audit-row-v1\n";

const FILE_MODE: u32 = 0o600;

/// Columns covered by `row_sha256`, in the order they are hashed, inserted and selected.
pub const HASHED_COLUMNS: [&str; 18] = [
    "id",
    "time",
    "call_id",
    "kind",
    "origin",
    "tool",
    "action",
    "arguments_sha256",
    "risk",
    "requires_root",
    "identity",
    "decision",
    "reason",
    "success",
    "exit_code",
    "duration_ms",
    "summary",
    "prev_sha256",
];

/// Columns hashed after [`HASHED_COLUMNS`], each only when it is not NULL: columns added
/// after the chain's form was fixed, so that rows written before them (where they are
/// NULL) hash exactly as they did.
pub const OPTIONAL_HASHED_COLUMNS: [&str; 1] = ["task"];

const SCHEMA_V1: &str = "
CREATE TABLE audit (
    id               INTEGER PRIMARY KEY,
    time             TEXT    NOT NULL,
    call_id          INTEGER NOT NULL,
    kind             TEXT    NOT NULL CHECK (kind IN ('decision', 'outcome')),
    origin           TEXT,
    tool             TEXT,
    action           TEXT,
    arguments_sha256 TEXT,
    risk             TEXT,
    requires_root    INTEGER,
    identity         TEXT,
    decision         TEXT,
    reason           TEXT,
    success          INTEGER,
    exit_code        INTEGER,
    duration_ms      INTEGER,
    summary          TEXT,
    prev_sha256      TEXT    NOT NULL,
    row_sha256       TEXT    NOT NULL
);
CREATE INDEX audit_call_id ON audit (call_id);
";

/// Version 3: rows of kind `call` (a read-only call the executor let run under approvald's
/// policy snapshot: its decision and its outcome in one row). SQLite cannot change a CHECK
/// constraint in place, so the table is rebuilt; every row is copied as it is (ids and
/// hashes unchanged), in the migration's one transaction.
const SCHEMA_V3: &str = "
CREATE TABLE audit_v3 (
    id               INTEGER PRIMARY KEY,
    time             TEXT    NOT NULL,
    call_id          INTEGER NOT NULL,
    kind             TEXT    NOT NULL CHECK (kind IN ('decision', 'outcome', 'call')),
    origin           TEXT,
    tool             TEXT,
    action           TEXT,
    arguments_sha256 TEXT,
    risk             TEXT,
    requires_root    INTEGER,
    identity         TEXT,
    decision         TEXT,
    reason           TEXT,
    success          INTEGER,
    exit_code        INTEGER,
    duration_ms      INTEGER,
    summary          TEXT,
    prev_sha256      TEXT    NOT NULL,
    row_sha256       TEXT    NOT NULL
);
INSERT INTO audit_v3 (id, time, call_id, kind, origin, tool, action, arguments_sha256,
    risk, requires_root, identity, decision, reason, success, exit_code, duration_ms,
    summary, prev_sha256, row_sha256)
  SELECT id, time, call_id, kind, origin, tool, action, arguments_sha256,
    risk, requires_root, identity, decision, reason, success, exit_code, duration_ms,
    summary, prev_sha256, row_sha256 FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v3 RENAME TO audit;
CREATE INDEX audit_call_id ON audit (call_id);
";

/// Version 4: the task store, and the delegated task an audit row's call belongs to
/// (`audit.task`, added by [`migrate`] when missing). `IF NOT EXISTS`: a database whose
/// version was set back by hand (tests make older databases so) may have them already.
const SCHEMA_V4_TASKS: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id          TEXT    PRIMARY KEY NOT NULL,
    context_id  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    updated_ms  INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    document    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_update ON tasks (updated_ms DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (context_id, updated_ms DESC, id DESC);
";

/// Version 2: the anchor of pruned rows. At most one row; none until something is pruned.
const SCHEMA_V2: &str = "
CREATE TABLE audit_anchor (
    one           INTEGER PRIMARY KEY CHECK (one = 1),
    pruned_id     INTEGER NOT NULL,
    pruned_sha256 TEXT    NOT NULL
);
";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {why}", .path.display())]
    Unsafe { path: PathBuf, why: String },
    #[error(transparent)]
    PrivateDir(#[from] PrivateDirError),
    #[error("store database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "store database {} has schema version {found}; this build knows up to {SCHEMA_VERSION}",
        .path.display()
    )]
    NewerSchema { path: PathBuf, found: i64 },
    #[error("audit field {field} is {len} bytes; the limit is {MAX_TEXT_BYTES}")]
    TooLarge { field: &'static str, len: usize },
    #[error("audit batch was not committed: {0}")]
    Commit(String),
    #[error("the audit writer has stopped")]
    Closed,
    #[error(transparent)]
    Tail(#[from] tail::TailError),
    #[error("the OS random source failed: {0}")]
    Random(String),
}

/// What one audit row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AuditKind {
    /// A decision, recorded before it is answered.
    Decision,
    /// How a decided call ended.
    Outcome,
    /// A read-only call the executor let run under approvald's policy snapshot: its
    /// decision (`allowed`) and its outcome in one row.
    Call,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Decision => "decision",
            AuditKind::Outcome => "outcome",
            AuditKind::Call => "call",
        }
    }
}

/// One row to append; the store adds `id`, `time` and the chain columns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    pub call_id: i64,
    pub kind: AuditKind,
    pub origin: Option<String>,
    pub tool: Option<String>,
    pub action: Option<String>,
    pub arguments_sha256: Option<String>,
    pub risk: Option<String>,
    pub requires_root: Option<bool>,
    pub identity: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub success: Option<bool>,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<i64>,
    pub summary: Option<String>,
    /// The delegated task the call is a step of (`ActionSummary.task`).
    pub task: Option<String>,
}

impl AuditRecord {
    /// A record of `kind` for `call_id` with every other column empty.
    pub fn new(kind: AuditKind, call_id: i64) -> Self {
        Self {
            call_id,
            kind,
            origin: None,
            tool: None,
            action: None,
            arguments_sha256: None,
            risk: None,
            requires_root: None,
            identity: None,
            decision: None,
            reason: None,
            success: None,
            exit_code: None,
            duration_ms: None,
            summary: None,
            task: None,
        }
    }

    fn check_bounds(&self) -> Result<(), StoreError> {
        let texts = [
            ("origin", &self.origin),
            ("tool", &self.tool),
            ("action", &self.action),
            ("arguments_sha256", &self.arguments_sha256),
            ("risk", &self.risk),
            ("identity", &self.identity),
            ("decision", &self.decision),
            ("reason", &self.reason),
            ("summary", &self.summary),
            ("task", &self.task),
        ];
        for (field, text) in texts {
            if let Some(text) = text {
                if text.len() > MAX_TEXT_BYTES {
                    return Err(StoreError::TooLarge {
                        field,
                        len: text.len(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// One stored row, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub time: String,
    pub record: AuditRecord,
    pub prev_sha256: String,
    pub row_sha256: String,
}

/// Result of walking the chain and comparing its end with the tail file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Rows read, up to and including the first bad one.
    pub rows_checked: u64,
    /// The first row whose chain check failed; `None` when the chain is intact.
    pub first_bad: Option<BadRow>,
    /// The last pruned row, which the chain starts from; `None` when nothing was pruned.
    pub anchor: Option<Anchor>,
    /// How the end of the trail compares with the tail file.
    pub tail: TailStatus,
}

impl VerifyReport {
    /// The chain is intact and nothing shows rows removed from its end.
    pub fn is_intact(&self) -> bool {
        self.first_bad.is_none() && self.tail.is_ok()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    pub id: i64,
    pub problem: ChainProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChainProblem {
    /// The row's `prev_sha256` is not the hash of the row before it: a row was deleted,
    /// inserted or rewritten before this one.
    #[error(
        "prev_sha256 does not match the previous row (a row before it was removed or rewritten)"
    )]
    PrevMismatch,
    /// The row's content does not hash to its `row_sha256`: the row was edited.
    #[error("row_sha256 does not match the row's content (the row was edited)")]
    HashMismatch,
    /// A chain column is not 64 hex characters, or ids do not increase.
    #[error("the row's chain columns are malformed")]
    Malformed,
    /// The first row does not continue from the anchor (its `prev_sha256` is not the
    /// anchor's hash, or its id is not the next one).
    #[error(
        "it does not continue from the anchor, the record of the last pruned row (the \
         anchor or this row was edited, or rows after the anchor were removed)"
    )]
    AnchorMismatch,
    /// `audit_anchor` holds more than one row, or values of the wrong kind.
    #[error("the anchor of the pruned rows (table audit_anchor) is malformed")]
    AnchorMalformed,
    /// The chain links across missing ids: when approvald opened the trail, it did not
    /// match its tail file (rows cut from the end, or the database replaced), and the
    /// writer continued after a gap so the break stays on record.
    #[error("{}", gap_text(*first_missing, *last_missing))]
    IdGap {
        first_missing: i64,
        last_missing: i64,
    },
}

fn gap_text(first: i64, last: i64) -> String {
    let rows = if first == last {
        format!("row {first} is")
    } else {
        format!("rows {first} to {last} are")
    };
    format!(
        "{rows} missing before it: when approvald reopened the trail it did not match its \
         tail file (rows removed from the end, the database replaced, or the newest commits \
         lost in a power failure), and it continued after a gap"
    )
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Transactions committed.
    pub batches: u64,
    /// Rows committed.
    pub records: u64,
    /// Rows pruned.
    pub pruned: u64,
}

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    records: AtomicU64,
    pruned: AtomicU64,
}

type Ack = oneshot::Sender<Result<(), StoreError>>;

enum Command {
    Append(Queued),
    /// Answered once everything queued before it is committed.
    Flush(oneshot::Sender<()>),
    /// Like `Flush`, and answered once the trail is also within the current limits.
    Settle(oneshot::Sender<()>),
    /// The limits changed: look at them, and prune while idle if they call for it.
    Wake,
    /// A task store write ([`tasks`]): committed batches first, then this, on the
    /// writer's connection. The job answers its own caller.
    Task(TaskJob),
}

/// One audit record waiting for the writer.
struct Queued {
    record: Box<AuditRecord>,
    /// When it was queued (ms since the epoch): the row's `time`.
    time_ms: i64,
    /// Its journal sequence number, when it was journalled.
    seq: Option<u64>,
    ack: Option<Ack>,
}

impl Queued {
    fn new(record: AuditRecord, seq: Option<u64>, time_ms: i64, ack: Option<Ack>) -> Self {
        Queued {
            record: Box::new(record),
            time_ms,
            seq,
            ack,
        }
    }
}

/// A write of the task store, run on the writer thread.
pub(crate) type TaskJob = Box<dyn FnOnce(&mut Connection) + Send>;

/// Handle to the store. Cheap to share behind an `Arc`; the writer thread stops after the
/// last handle is dropped and the queue is empty.
pub struct Store {
    path: PathBuf,
    state_dir: PathBuf,
    queue: mpsc::Sender<Command>,
    counters: Arc<Counters>,
    /// The limits the writer prunes to; `None` until set, and nothing is pruned before.
    limits: Arc<Mutex<Option<AuditLimits>>>,
    /// The writer thread, woken early from its [`LINGER`] when someone waits.
    writer: std::thread::Thread,
    /// About how many bytes of pages the task store holds: the audit's byte limit is
    /// the audit's alone, so retention leaves these out (see [`tasks::TaskSpace`]).
    task_bytes: Arc<AtomicU64>,
    /// Secrets removed from every audit row's text before it is hashed and written (an
    /// action may quote the token if a caller or the model put it in a command line).
    audit_redactor: Arc<std::sync::OnceLock<redact::Redactor>>,
    /// Rows answered for before their commit ([`Store::append_durable`]).
    journal: tokio::sync::Mutex<journal::Journal>,
    /// The last journal write failed (logged once until one succeeds).
    journal_failing: std::sync::atomic::AtomicBool,
}

impl Store {
    /// Open (creating when missing) `<state_dir>/protocol/tasks.sqlite3`, migrate its
    /// schema, compare it with its tail file, mark the tasks that were running when the
    /// last approvald stopped as failed ([`tasks::fail_interrupted`]) and start the
    /// writer thread. Nothing is pruned until [`Store::set_limits`] says how much to keep.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let path = state_dir.join(DB_FILE);
        if let Some(dir) = path.parent() {
            // Prepared by the supervisor; a wider mode now means something changed it.
            open_private_dir(dir, Create::IfMissing, WideMode::Refuse)?;
        }
        create_private_file(&path)?;
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Before WAL is turned on, which writes the header: later a new database could
        // only get it by a rebuild. On an existing database this changes nothing.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        configure(&conn, &path)?;
        let tail_path = tail::tail_path(&path);
        let tail_temp = tail::temp_path(&path);
        match std::fs::remove_file(&tail_temp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(path = %tail_temp.display(), error = %e, "cannot remove a leftover file");
            }
            _ => {}
        }
        let version = schema_version(&conn)?;
        // Read before anything is written: a tail file without a database (or beside an
        // older one) means the database was removed or replaced.
        let found = tail::read(&tail_path);
        let fresh_tail = version < TAIL_SINCE_VERSION && matches!(found, Ok(None));
        if fresh_tail {
            // The tail file exists before the schema says there is one.
            let head = if version == 0 {
                Head::genesis()
            } else {
                read_head(&conn, &AnchorRead::None)?
            };
            write_tail(&tail_path, &tail_temp, &head)?;
        }
        migrate(&mut conn, &path)?;
        let interrupted = tasks::fail_interrupted(&mut conn, clock::now_unix_ms())?;
        if interrupted > 0 {
            tracing::warn!(
                tasks = interrupted,
                "tasks that were running when nl2sh stopped are now failed; none is resumed or replayed"
            );
        }
        let task_bytes = Arc::new(AtomicU64::new(
            tasks::TaskSpace::measure(&conn)?.page_bytes(page_size_of(&conn)?),
        ));
        for side in [
            suffixed(&path, "-wal"),
            suffixed(&path, "-shm"),
            tail_path.clone(),
        ] {
            tighten_existing(&side)?;
        }
        let anchor = read_anchor(&conn)?;
        let mut head = read_head(&conn, &anchor)?;
        let status = match &found {
            _ if fresh_tail => TailStatus::Matches { id: head.id },
            Ok(t) => tail::check(&conn, t.as_ref(), true, anchor.one())?,
            Err(e) => TailStatus::Malformed(e.to_string()),
        };
        if !status.is_ok() {
            // Not repaired, and not hidden: the next row gets an id past the break, so
            // the gap stays in the chain for `--verify` to report.
            head.id = match status {
                TailStatus::Cut { written_id, .. } => written_id,
                _ => head.id.saturating_add(1),
            };
            tracing::error!(
                path = %path.display(),
                problem = %status,
                next_id = head.id.saturating_add(1),
                "the audit trail does not match its tail file; continuing after a gap in the ids"
            );
        }
        let rows: i64 = conn.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))?;
        let rows = u64::try_from(rows).unwrap_or(0);
        let page_size = page_size_of(&conn)?;
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let row_bytes = (u64::try_from(pages).unwrap_or(0) * page_size)
            .checked_div(rows)
            .unwrap_or(DEFAULT_ROW_BYTES);
        let auto_vacuum: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
        let (replayed, last_seq) = replay_journal(&mut conn, state_dir, &mut head)?;
        if replayed > 0 {
            write_tail(&tail_path, &tail_temp, &head)?;
        }
        let rows = rows + replayed;
        let progress = journal::Progress::starting_at(last_seq);
        let journal =
            journal::Journal::create(state_dir, last_seq, progress.clone()).map_err(|source| {
                StoreError::Io {
                    what: "cannot start the audit journal in",
                    path: state_dir.join(journal::JOURNAL_FILE),
                    source,
                }
            })?;
        let (queue, rx) = mpsc::channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let limits = Arc::new(Mutex::new(None));
        let writer = Writer {
            conn,
            head,
            journal: progress,
            rows,
            row_bytes,
            page_size,
            limits: limits.clone(),
            applied: None,
            backlog: false,
            // 0 is NONE: a database from before retention, rebuilt once it is pruned.
            rebuild: auto_vacuum == 0,
            tail_path,
            tail_temp,
            tail_failing: false,
            counters: counters.clone(),
            task_bytes: task_bytes.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("approvald-store".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::Io {
                what: "cannot start the writer for",
                path: path.clone(),
                source,
            })?
            .thread()
            .clone();
        Ok(Store {
            audit_redactor: Arc::new(std::sync::OnceLock::new()),
            journal: tokio::sync::Mutex::new(journal),
            journal_failing: std::sync::atomic::AtomicBool::new(false),
            path,
            state_dir: state_dir.to_owned(),
            queue,
            counters,
            limits,
            writer,
            task_bytes,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state directory the store lives in.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The task and session store over this database, redacting `redact` from what it
    /// writes. It shares the writer thread (and keeps it running while it lives).
    pub fn tasks(
        &self,
        redact: &[nl2sh_proto::secret::Secret],
    ) -> Result<tasks::TaskStore, StoreError> {
        tasks::TaskStore::new(self, redact)
    }

    pub(crate) fn writer_handle(&self) -> WriterHandle {
        WriterHandle {
            queue: self.queue.clone(),
            writer: self.writer.clone(),
            task_bytes: self.task_bytes.clone(),
        }
    }

    /// How much to keep from now on. Cheap when nothing changed; a change wakes the
    /// writer, which prunes (while no records wait) down to the new limits.
    pub fn set_limits(&self, limits: AuditLimits) {
        {
            let mut current = lock(&self.limits);
            if *current == Some(limits) {
                return;
            }
            *current = Some(limits);
        }
        // A full queue wakes the writer anyway.
        let _ = self.queue.try_send(Command::Wake);
    }

    /// The limits the writer prunes to, if set.
    pub fn limits(&self) -> Option<AuditLimits> {
        *lock(&self.limits)
    }

    /// From now on, remove `secrets` from the text of every audit row appended (set once;
    /// later calls are ignored).
    pub fn redact_audit(&self, secrets: &[nl2sh_proto::secret::Secret]) {
        let _ = self.audit_redactor.set(redact::Redactor::new(secrets));
    }

    fn redacted(&self, mut record: AuditRecord) -> AuditRecord {
        if let Some(redactor) = self.audit_redactor.get().filter(|r| !r.is_empty()) {
            for text in [
                &mut record.origin,
                &mut record.tool,
                &mut record.action,
                &mut record.reason,
                &mut record.summary,
                &mut record.task,
            ]
            .into_iter()
            .flatten()
            {
                redactor.redact_text(text);
            }
        }
        record
    }

    /// Queue `record` and resolve once the batch holding it is committed.
    pub async fn append(&self, record: AuditRecord) -> Result<(), StoreError> {
        self.append_all(vec![record]).await
    }

    /// Queue `records` in order and resolve once every one of them is committed.
    pub async fn append_all(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        let queued = self
            .prepared(records)?
            .into_iter()
            .map(|record| Queued::new(record, None, clock::now_unix_ms(), None))
            .collect();
        self.enqueue(queued, true).await
    }

    /// `records` redacted, once each is within the bounds of a row.
    fn prepared(&self, records: Vec<AuditRecord>) -> Result<Vec<AuditRecord>, StoreError> {
        let records: Vec<AuditRecord> = records.into_iter().map(|r| self.redacted(r)).collect();
        for record in &records {
            record.check_bounds()?;
        }
        Ok(records)
    }

    /// Queue `queued` in order; with `wait`, resolve once every one is committed (waking
    /// the writer from its linger), else once queued.
    async fn enqueue(&self, queued: Vec<Queued>, wait: bool) -> Result<(), StoreError> {
        let mut waits = Vec::new();
        for mut q in queued {
            if wait {
                let (ack, done) = oneshot::channel();
                q.ack = Some(ack);
                waits.push(done);
            }
            self.queue
                .send(Command::Append(q))
                .await
                .map_err(|_| StoreError::Closed)?;
        }
        if wait {
            self.writer.unpark();
        }
        for done in waits {
            done.await.map_err(|_| StoreError::Closed)??;
        }
        Ok(())
    }

    /// Queue `record` without waiting for its commit (it is still committed in queue
    /// order). Waits only while the queue is full.
    pub async fn append_nowait(&self, record: AuditRecord) -> Result<(), StoreError> {
        let queued = self
            .prepared(vec![record])?
            .into_iter()
            .map(|record| Queued::new(record, None, clock::now_unix_ms(), None))
            .collect();
        self.enqueue(queued, false).await
    }

    /// Journal `records` in order ([`journal`]) and queue them for the writer; resolve
    /// once they are journalled, before their commit. From then on they survive a crash
    /// of approvald: the next start commits whatever the writer had not. Where the
    /// journal cannot be written, waits for the commit instead, as [`Store::append_all`].
    pub async fn append_durable(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        let records = self.prepared(records)?;
        // Held until the records are queued, so that the writer gets them in journal order.
        let mut journal = self.journal.lock().await;
        let mut queued = Vec::with_capacity(records.len());
        let mut failed = false;
        for record in records {
            let time_ms = clock::now_unix_ms();
            // After a failed write, no more: a journalled entry queued without its
            // sequence number would never be marked applied, and be replayed again.
            let written = if failed {
                None
            } else {
                Some(journal.append(&record, time_ms))
            };
            let seq = match written {
                None => None,
                Some(Ok(seq)) => Some(seq),
                Some(Err(e)) => {
                    if !self.journal_failing.swap(true, Ordering::Relaxed) {
                        tracing::error!(error = %e, "cannot write the audit journal; answers wait for their commit");
                    }
                    failed = true;
                    None
                }
            };
            queued.push(Queued::new(record, seq, time_ms, None));
        }
        if !failed {
            self.journal_failing.store(false, Ordering::Relaxed);
        }
        // Without the journal, every record of the call waits for its commit.
        self.enqueue(queued, failed).await
    }

    /// At a clean stop, once everything is flushed: remove the journal if the writer
    /// committed every entry of it.
    pub async fn close_journal(&self) {
        self.journal.lock().await.close();
    }

    /// Resolve once every record queued before this call is committed (or failed).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        self.queue
            .send(Command::Flush(ack))
            .await
            .map_err(|_| StoreError::Closed)?;
        self.writer.unpark();
        done.await.map_err(|_| StoreError::Closed)
    }

    /// Like [`Store::flush`], and resolve only once the trail is within the current
    /// limits too: pruned, free pages released, a database from before retention
    /// rebuilt. For tests, benchmarks and tools; the service never waits for this.
    pub async fn settle(&self) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        self.queue
            .send(Command::Settle(ack))
            .await
            .map_err(|_| StoreError::Closed)?;
        self.writer.unpark();
        done.await.map_err(|_| StoreError::Closed)
    }

    /// Walk the committed chain on a separate read-only connection, and compare its
    /// end with the tail file.
    pub async fn verify(&self) -> Result<VerifyReport, StoreError> {
        let path = self.path.clone();
        blocking(move || verify_path(&path)).await
    }

    /// The last `limit` committed rows, oldest first.
    pub async fn recent(&self, limit: usize) -> Result<Vec<AuditRow>, StoreError> {
        let path = self.path.clone();
        blocking(move || recent_path(&path, limit)).await
    }

    /// Whether the audit already holds a `kind` row of call `call_id`, among its last
    /// [`RECENT_ROWS_SEARCHED`] rows (a row being recovered is among the newest). Asked
    /// on the writer's connection, after everything queued before.
    pub async fn has_row(&self, call_id: i64, kind: AuditKind) -> Result<bool, StoreError> {
        let found = run_job(&self.queue, &self.writer, move |conn| {
            conn.query_row(
                "SELECT 1 FROM audit WHERE call_id = ?1 AND kind = ?2
                 AND id > (SELECT coalesce(max(id), 0) FROM audit) - ?3 LIMIT 1",
                rusqlite::params![call_id, kind.as_str(), RECENT_ROWS_SEARCHED],
                |_| Ok(()),
            )
            .optional()
        })
        .await??;
        Ok(found.is_some())
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            batches: self.counters.batches.load(Ordering::Relaxed),
            records: self.counters.records.load(Ordering::Relaxed),
            pruned: self.counters.pruned.load(Ordering::Relaxed),
        }
    }
}

/// What the task store keeps of the store: a way to queue jobs on the writer thread.
#[derive(Clone)]
pub(crate) struct WriterHandle {
    queue: mpsc::Sender<Command>,
    writer: std::thread::Thread,
    pub(crate) task_bytes: Arc<AtomicU64>,
}

impl WriterHandle {
    /// Run `job` on the writer thread, after everything queued before it, and return its
    /// answer. Waits while the queue is full.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        run_job(&self.queue, &self.writer, job).await
    }
}

async fn run_job<T: Send + 'static>(
    queue: &mpsc::Sender<Command>,
    writer: &std::thread::Thread,
    job: impl FnOnce(&mut Connection) -> T + Send + 'static,
) -> Result<T, StoreError> {
    let (answer, answered) = oneshot::channel();
    let job: TaskJob = Box::new(move |conn: &mut Connection| {
        let _ = answer.send(job(conn));
    });
    queue
        .send(Command::Task(job))
        .await
        .map_err(|_| StoreError::Closed)?;
    writer.unpark();
    answered.await.map_err(|_| StoreError::Closed)
}

fn page_size_of(conn: &Connection) -> Result<u64, StoreError> {
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(u64::try_from(page_size).unwrap_or(4096).max(512))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain values: a panic elsewhere cannot leave them torn.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut side = path.to_owned().into_os_string();
    side.push(suffix);
    PathBuf::from(side)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| StoreError::Closed)?
}

/// The chain position new rows continue from.
#[derive(Debug, Clone)]
struct Head {
    id: i64,
    sha256: String,
}

impl Head {
    fn genesis() -> Self {
        Head {
            id: 0,
            sha256: GENESIS_SHA256.to_owned(),
        }
    }
}

fn write_tail(path: &Path, temp: &Path, head: &Head) -> Result<(), StoreError> {
    let t = tail::Tail {
        id: head.id,
        row_sha256: head.sha256.clone(),
    };
    tail::write(path, temp, &t).map_err(|source| StoreError::Io {
        what: "cannot write",
        path: path.to_owned(),
        source,
    })
}

/// [`write_tail`] for the writer's updates after a commit (in place, no rename).
fn update_tail(path: &Path, temp: &Path, head: &Head) -> Result<(), StoreError> {
    let t = tail::Tail {
        id: head.id,
        row_sha256: head.sha256.clone(),
    };
    tail::update(path, temp, &t).map_err(|source| StoreError::Io {
        what: "cannot write",
        path: path.to_owned(),
        source,
    })
}

struct Writer {
    conn: Connection,
    head: Head,
    /// Where the writer says how far it committed the journal.
    journal: Arc<journal::Progress>,
    /// Rows in the trail.
    rows: u64,
    /// About how many bytes of pages a row takes, as last measured.
    row_bytes: u64,
    page_size: u64,
    limits: Arc<Mutex<Option<AuditLimits>>>,
    /// The limits in force here (their WAL settings applied); `None`: prune nothing.
    applied: Option<AuditLimits>,
    /// More pruning is due than the last transaction did.
    backlog: bool,
    /// The database has no auto-vacuum (created before retention): once it is pruned to
    /// the limits, it is rebuilt with `VACUUM`, which also gives back the pages freed by
    /// that first pruning.
    rebuild: bool,
    tail_path: PathBuf,
    tail_temp: PathBuf,
    /// The last tail write failed (logged once until one succeeds).
    tail_failing: bool,
    counters: Arc<Counters>,
    /// Bytes of pages the task store holds, which the audit's byte limit leaves out.
    task_bytes: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut queued = Vec::with_capacity(MAX_BATCH);
        let mut batch = Vec::new();
        loop {
            self.refresh_limits();
            // Catching up with lowered limits, and the one-time rebuild, only while no
            // record waits: a batch never waits for more than one pruning transaction.
            while rx.is_empty() && self.housekeep() {}
            // Waits for at least one command, then takes whatever else is already queued,
            // up to what one transaction may hold under the limits.
            if rx.blocking_recv_many(&mut queued, self.batch_cap()) == 0 {
                break;
            }
            self.refresh_limits();
            let mut waited_for = self.take(&mut queued, &mut batch);
            // Records nobody waits for linger a moment, so that a stream of calls shares
            // one commit (and one tail write) instead of paying for its own. Whoever
            // waits for a commit wakes the writer (`unpark`), ending the linger at once.
            let deadline = Instant::now() + LINGER;
            while !waited_for && !batch.is_empty() && batch.len() < self.batch_cap() {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    break;
                };
                std::thread::park_timeout(left);
                let room = self.batch_cap().saturating_sub(batch.len());
                while queued.len() < room {
                    match rx.try_recv() {
                        Ok(command) => queued.push(command),
                        Err(_) => break,
                    }
                }
                waited_for = self.take(&mut queued, &mut batch);
            }
            self.commit(std::mem::take(&mut batch));
        }
        tracing::debug!("audit writer stopped: every handle is gone and the queue is empty");
    }

    /// Move `queued` commands into `batch`, committing at each barrier. Whether anyone
    /// waits for a commit (an acknowledged record, or a barrier).
    fn take(&mut self, queued: &mut Vec<Command>, batch: &mut Vec<Queued>) -> bool {
        let mut waited_for = false;
        for command in queued.drain(..) {
            match command {
                Command::Append(q) => {
                    waited_for |= q.ack.is_some();
                    batch.push(q);
                }
                // A flush is a barrier: commit what came before it, then answer it.
                Command::Flush(done) => {
                    self.commit(std::mem::take(batch));
                    let _ = done.send(());
                    waited_for = true;
                }
                Command::Settle(done) => {
                    self.commit(std::mem::take(batch));
                    while self.housekeep() {}
                    let _ = done.send(());
                    waited_for = true;
                }
                Command::Wake => {}
                // Audit records queued before it are committed first; the job commits
                // its own transaction.
                Command::Task(job) => {
                    self.commit(std::mem::take(batch));
                    job(&mut self.conn);
                    waited_for = true;
                }
            }
        }
        waited_for
    }

    /// Take up the limits last set, if they changed: size the WAL to them and look
    /// again at whether pruning is due.
    fn refresh_limits(&mut self) {
        let current = *lock(&self.limits);
        if current == self.applied {
            return;
        }
        if let Some(limits) = current {
            let applied = self
                .conn
                .pragma_update(
                    None,
                    "wal_autocheckpoint",
                    limits.wal_autocheckpoint_pages(self.page_size),
                )
                .and_then(|()| {
                    self.conn
                        .pragma_update(None, "journal_size_limit", limits.journal_size_limit())
                });
            if let Err(e) = applied {
                tracing::warn!(error = %e, "cannot size the audit WAL to the limits");
            }
            tracing::debug!(
                max_rows = limits.max_rows,
                max_bytes = limits.max_bytes,
                "audit retention limits"
            );
        }
        self.applied = current;
        self.backlog = current.is_some();
    }

    /// Records one transaction takes at most.
    fn batch_cap(&self) -> usize {
        self.applied
            .map_or(MAX_BATCH, |l| retention::batch_rows(&l, self.row_bytes))
    }

    /// How to prune in a transaction holding `rows` rows; `None` before limits are set.
    fn pruning(&self, rows: u64) -> Option<Pruning> {
        self.applied.map(|limits| Pruning {
            limits,
            rows,
            page_size: self.page_size,
            max: 2 * self.batch_cap() as u64,
            other_bytes: self.task_bytes.load(Ordering::Relaxed),
        })
    }

    /// Take in what a pruning transaction measured and did.
    fn pruned(&mut self, rows_then: u64, (pruned, used): (Option<retention::Pruned>, u64)) {
        if let Some(per_row) = used.checked_div(rows_then) {
            self.row_bytes = per_row.max(1);
        }
        if let Some(pruned) = pruned {
            self.backlog = pruned.more;
            self.rows = self.rows.saturating_sub(pruned.rows);
            self.counters
                .pruned
                .fetch_add(pruned.rows, Ordering::Relaxed);
        }
    }

    /// One step of pruning left over, or the rebuild; whether there was one.
    fn housekeep(&mut self) -> bool {
        let Some(pruning) = self.pruning(self.rows) else {
            return false;
        };
        if self.backlog {
            match prune_only(&mut self.conn, &pruning) {
                Ok(done) => {
                    let progress = done.0.is_some();
                    self.pruned(pruning.rows, done);
                    if progress {
                        return true;
                    }
                    self.backlog = false;
                }
                Err(e) => {
                    // Tried again with the next batch, not in a loop here.
                    tracing::error!(error = %e, "audit rows not pruned");
                    self.backlog = false;
                    return false;
                }
            }
        }
        if self.rebuild {
            self.rebuild = false;
            rebuild(&self.conn);
            return true;
        }
        false
    }

    fn commit(&mut self, batch: Vec<Queued>) {
        if batch.is_empty() {
            return;
        }
        let journalled = batch.iter().filter_map(|q| q.seq).max();
        let (records, acks): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|q| ((q.time_ms, q.record), q.ack))
            .unzip();
        let rows = self.rows + records.len() as u64;
        let pruning = self.pruning(rows);
        let result = write_batch(
            &mut self.conn,
            &self.head,
            &records,
            journalled,
            pruning.as_ref(),
        );
        let outcome = match result {
            Ok((head, pruned)) => {
                self.head = head;
                self.rows = rows;
                if let Some(done) = pruned {
                    self.pruned(rows, done);
                }
                self.counters.batches.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .records
                    .fetch_add(records.len() as u64, Ordering::Relaxed);
                if let Some(seq) = journalled {
                    self.journal.commit_up_to(seq);
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, rows = records.len(), "audit batch not committed");
                Err(e.to_string())
            }
        };
        let committed = outcome.is_ok();
        for ack in acks.into_iter().flatten() {
            let _ = ack.send(outcome.clone().map_err(StoreError::Commit));
        }
        // After the acknowledgements: nobody waits on the tail file (a reader accepts a
        // database ahead of it), and a rename costs about 0.1 ms on ext4. A flush is
        // answered only after this.
        if committed {
            self.update_tail();
        }
    }

    /// Record the new head in the tail file. A failure leaves the file behind the
    /// database, which `--verify` accepts; it is logged once until a write succeeds.
    fn update_tail(&mut self) {
        match update_tail(&self.tail_path, &self.tail_temp, &self.head) {
            Ok(()) if self.tail_failing => {
                self.tail_failing = false;
                tracing::info!("audit tail file written again");
            }
            Ok(()) => {}
            Err(e) if !self.tail_failing => {
                self.tail_failing = true;
                tracing::error!(error = %e, "audit tail file not updated; a cut tail may go unnoticed");
            }
            Err(_) => {}
        }
    }
}

/// How one transaction prunes.
struct Pruning {
    limits: AuditLimits,
    /// Rows in the trail in that transaction, before pruning.
    rows: u64,
    page_size: u64,
    /// Most rows to prune.
    max: u64,
    /// Bytes of pages that hold other tables (the tasks), left out of the audit's bytes.
    other_bytes: u64,
}

/// What a pruning transaction did, and the bytes of pages in use it measured.
type PruneResult = (Option<retention::Pruned>, u64);

/// Insert `records` (each with its time) after `head` in one transaction, record
/// `journalled` as the last journal entry applied, and prune as `pruning` says, all in the
/// same transaction. The new head on commit, and what pruning did.
fn write_batch(
    conn: &mut Connection,
    head: &Head,
    records: &[(i64, Box<AuditRecord>)],
    journalled: Option<u64>,
    pruning: Option<&Pruning>,
) -> Result<(Head, Option<PruneResult>), rusqlite::Error> {
    let tx = conn.transaction()?;
    let mut head = head.clone();
    {
        let sql = format!(
            "INSERT INTO audit ({}, {}, row_sha256) VALUES ({})",
            HASHED_COLUMNS.join(", "),
            OPTIONAL_HASHED_COLUMNS.join(", "),
            vec!["?"; HASHED_COLUMNS.len() + OPTIONAL_HASHED_COLUMNS.len() + 1].join(", ")
        );
        let mut insert = tx.prepare_cached(&sql)?;
        for (time_ms, record) in records {
            let id = head.id + 1;
            let time = clock::rfc3339_millis(*time_ms);
            let mut values = hashed_values(id, &time, record, &head.sha256);
            let sha256 = canonical_row_sha256(&values);
            values.push(Value::Text(sha256.clone()));
            insert.execute(rusqlite::params_from_iter(values.iter()))?;
            head = Head { id, sha256 };
        }
    }
    if let Some(seq) = journalled {
        set_journal_applied(&tx, seq)?;
    }
    let pruned = pruning.map(|p| prune_in(&tx, p)).transpose()?;
    tx.commit()?;
    Ok((head, pruned))
}

/// The journal's bookkeeping, beside the schema rather than in it: a build that does not
/// know the journal leaves the table alone.
const JOURNAL_TABLE: &str = "CREATE TABLE IF NOT EXISTS audit_journal (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    applied INTEGER NOT NULL
)";

/// Commit the journal's entries that never reached the database (approvald stopped
/// before its writer did), after `head`. How many rows that added, and the last journal
/// sequence number seen or applied, which new entries follow.
fn replay_journal(
    conn: &mut Connection,
    state_dir: &Path,
    head: &mut Head,
) -> Result<(u64, u64), StoreError> {
    conn.execute_batch(JOURNAL_TABLE)?;
    let applied = journal_applied(conn)?;
    let path = state_dir.join(journal::JOURNAL_FILE);
    let read = journal::read_all(state_dir).map_err(|source| StoreError::Io {
        what: "cannot read",
        path: path.clone(),
        source,
    })?;
    if read.garbage_bytes > 0 {
        tracing::warn!(
            path = %path.display(),
            bytes = read.garbage_bytes,
            "the audit journal ends in an entry that is not whole (a power loss?); it is skipped"
        );
    }
    let seen = read.entries.iter().map(|e| e.seq).max().unwrap_or(0);
    let pending = journal::unapplied(read, applied);
    let mut replayed = 0u64;
    for chunk in pending.chunks(MAX_BATCH) {
        let records: Vec<(i64, Box<AuditRecord>)> = chunk
            .iter()
            .map(|e| (e.time_ms, Box::new(e.record.clone())))
            .collect();
        let last = chunk.last().map(|e| e.seq);
        let (new_head, _) = write_batch(conn, head, &records, last, None)?;
        *head = new_head;
        replayed += chunk.len() as u64;
    }
    if replayed > 0 {
        tracing::warn!(
            rows = replayed,
            "audit rows answered before approvald stopped were stored from the journal"
        );
    }
    Ok((replayed, applied.max(seen)))
}

/// Audit rows in the journal of the database `db` that it does not hold yet: rows
/// approvald answered for before it stopped, stored at its next start. For readers
/// of the database while the service is not running.
pub fn journal_pending(db: &Path) -> Result<Vec<journal::Entry>, StoreError> {
    let state_dir = db
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| StoreError::Io {
            what: "cannot find the state directory of",
            path: db.to_owned(),
            source: io::ErrorKind::NotFound.into(),
        })?;
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let has_table: bool = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_journal'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let applied = if has_table {
        journal_applied(&conn)?
    } else {
        0
    };
    let read = journal::read_all(state_dir).map_err(|source| StoreError::Io {
        what: "cannot read",
        path: state_dir.join(journal::JOURNAL_FILE),
        source,
    })?;
    Ok(journal::unapplied(read, applied))
}

fn journal_applied(conn: &Connection) -> Result<u64, rusqlite::Error> {
    let applied: Option<i64> = conn
        .query_row("SELECT applied FROM audit_journal WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(applied.and_then(|a| u64::try_from(a).ok()).unwrap_or(0))
}

fn set_journal_applied(tx: &Transaction<'_>, seq: u64) -> Result<(), rusqlite::Error> {
    let seq = i64::try_from(seq).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO audit_journal (id, applied) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET applied = max(applied, excluded.applied)",
        [seq],
    )?;
    Ok(())
}

fn prune_in(tx: &Transaction<'_>, p: &Pruning) -> Result<PruneResult, rusqlite::Error> {
    let done = retention::prune(tx, p.rows, &p.limits, p.page_size, p.max, p.other_bytes)?;
    if done.0.is_some() {
        retention::release_free_pages(tx, &p.limits, p.page_size)?;
    }
    Ok(done)
}

/// A pruning transaction of its own, while no batch waits.
fn prune_only(conn: &mut Connection, p: &Pruning) -> Result<PruneResult, rusqlite::Error> {
    let tx = conn.transaction()?;
    let done = prune_in(&tx, p)?;
    tx.commit()?;
    Ok(done)
}

/// Turn on incremental auto-vacuum in a database created without it, by rebuilding it
/// (`VACUUM`, which also drops its free pages), then checkpoint so the file shrinks and
/// the WAL that held the copy is cut back. Runs once, after the first pruning, so only
/// what is kept is copied. A failure leaves the database as it was, logged.
fn rebuild(conn: &Connection) {
    let pages = |conn: &Connection| {
        conn.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
            .unwrap_or(0)
    };
    let before = pages(conn);
    let started = std::time::Instant::now();
    let done = conn
        .pragma_update(None, "auto_vacuum", "INCREMENTAL")
        .and_then(|()| conn.execute_batch("VACUUM"))
        .and_then(|()| conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())));
    match done {
        Ok(()) => tracing::info!(
            pages_before = before,
            pages_after = pages(conn),
            ms = started.elapsed().as_millis() as u64,
            "audit store rebuilt with incremental auto-vacuum"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "audit store not rebuilt; it will be tried at the next start")
        }
    }
}

/// The values of [`HASHED_COLUMNS`] and then [`OPTIONAL_HASHED_COLUMNS`] for a new row,
/// in order.
fn hashed_values(id: i64, time: &str, r: &AuditRecord, prev: &str) -> Vec<Value> {
    let text = |s: &Option<String>| s.clone().map_or(Value::Null, Value::Text);
    let int = |i: Option<i64>| i.map_or(Value::Null, Value::Integer);
    let flag = |b: Option<bool>| int(b.map(i64::from));
    vec![
        Value::Integer(id),
        Value::Text(time.to_owned()),
        Value::Integer(r.call_id),
        Value::Text(r.kind.as_str().to_owned()),
        text(&r.origin),
        text(&r.tool),
        text(&r.action),
        text(&r.arguments_sha256),
        text(&r.risk),
        flag(r.requires_root),
        text(&r.identity),
        text(&r.decision),
        text(&r.reason),
        flag(r.success),
        int(r.exit_code),
        int(r.duration_ms),
        text(&r.summary),
        Value::Text(prev.to_owned()),
        text(&r.task),
    ]
}

/// The bytes `row_sha256` is computed over: [`ROW_DOMAIN`], then for each column of
/// [`HASHED_COLUMNS`] in order its name, `=`, and its value as a type byte followed by
/// `n` (NULL, nothing more), `i` + 8-byte big-endian two's complement, `r` + 8-byte
/// big-endian IEEE-754 bits, `t`/`b` + 8-byte big-endian length + the UTF-8/blob bytes;
/// then each column of [`OPTIONAL_HASHED_COLUMNS`] the same way, but only when it is not
/// NULL (a NULL one adds nothing, so rows from before it hash as they did).
/// Every value delimits itself and names its column, so distinct rows never serialise
/// alike.
pub fn canonical_row(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(ROW_DOMAIN);
    let fixed = HASHED_COLUMNS.len();
    let names = HASHED_COLUMNS.iter().chain(OPTIONAL_HASHED_COLUMNS.iter());
    for (i, (name, value)) in names.zip(values).enumerate() {
        if i >= fixed && *value == Value::Null {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        match value {
            Value::Null => out.push(b'n'),
            Value::Integer(i) => {
                out.push(b'i');
                out.extend_from_slice(&i.to_be_bytes());
            }
            Value::Real(f) => {
                out.push(b'r');
                out.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            Value::Text(s) => {
                out.push(b't');
                out.extend_from_slice(&(s.len() as u64).to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(b'b');
                out.extend_from_slice(&(b.len() as u64).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

fn canonical_row_sha256(values: &[Value]) -> String {
    hex::encode(Sha256::digest(canonical_row(values)))
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Text of a value that should be text; anything else reads as "" (it then matches no
/// hash, so the chain breaks there instead of the store failing).
fn text_or_empty(v: Value) -> String {
    match v {
        Value::Text(s) => s,
        _ => String::new(),
    }
}

/// The newest row, else the anchor (everything pruned), else the start of the chain.
fn read_head(conn: &Connection, anchor: &AnchorRead) -> Result<Head, StoreError> {
    let mut stmt = conn.prepare("SELECT id, row_sha256 FROM audit ORDER BY id DESC LIMIT 1")?;
    let mut rows = stmt.query([])?;
    if let Some(row) = rows.next()? {
        return Ok(Head {
            id: row.get(0)?,
            sha256: text_or_empty(row.get(1)?),
        });
    }
    Ok(match anchor.one() {
        Some(a) => Head {
            id: a.id,
            sha256: a.row_sha256.clone(),
        },
        None => Head::genesis(),
    })
}

/// What `audit_anchor` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AnchorRead {
    /// Nothing was pruned (or the database predates the table).
    None,
    One(Anchor),
    Malformed,
}

impl AnchorRead {
    fn one(&self) -> Option<&Anchor> {
        match self {
            AnchorRead::One(a) => Some(a),
            _ => None,
        }
    }
}

fn read_anchor(conn: &Connection) -> Result<AnchorRead, StoreError> {
    let exists: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit_anchor'",
        [],
        |r| r.get(0),
    )?;
    if exists == 0 {
        return Ok(AnchorRead::None);
    }
    let mut stmt = conn.prepare("SELECT pruned_id, pruned_sha256 FROM audit_anchor LIMIT 2")?;
    let found: Vec<(Value, Value)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(match found.as_slice() {
        [] => AnchorRead::None,
        [(Value::Integer(id), Value::Text(sha))] if *id >= 0 && is_sha256_hex(sha) => {
            AnchorRead::One(Anchor {
                id: *id,
                row_sha256: sha.clone(),
            })
        }
        _ => AnchorRead::Malformed,
    })
}

fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "trusted_schema", false)?;
    Ok(conn)
}

/// Walk the whole chain of the database at `path` (read-only) from its anchor, report the
/// first row that breaks it, and compare its end with the tail file beside it. Also what
/// `protocol audit --verify` runs.
pub fn verify_path(path: &Path) -> Result<VerifyReport, StoreError> {
    // The tail file first: a commit between the two reads only puts the database ahead.
    let tail = match tail::read(&tail::tail_path(path)) {
        Ok(t) => Ok(t),
        Err(tail::TailError::Malformed { why, .. }) => Err(why),
        Err(e) => return Err(e.into()),
    };
    let mut conn = open_read_only(path)?;
    // One snapshot for the anchor, the rows and the end: the writer may prune meanwhile.
    let tx = conn.transaction()?;
    let version = schema_version(&tx)?;
    let anchor = read_anchor(&tx)?;
    let (rows_checked, first_bad) = walk_chain(&tx, &anchor)?;
    let tail = match tail {
        Ok(t) => tail::check(&tx, t.as_ref(), version >= TAIL_SINCE_VERSION, anchor.one())?,
        Err(why) => TailStatus::Malformed(why),
    };
    Ok(VerifyReport {
        rows_checked,
        first_bad,
        anchor: anchor.one().cloned(),
        tail,
    })
}

/// Rows read and the first bad one, starting from `anchor`.
fn walk_chain(conn: &Connection, anchor: &AnchorRead) -> Result<(u64, Option<BadRow>), StoreError> {
    let (mut expected_prev, mut expected_id) = match anchor {
        AnchorRead::None => (GENESIS_SHA256.to_owned(), 1),
        AnchorRead::One(a) => (a.row_sha256.clone(), a.id.saturating_add(1)),
        AnchorRead::Malformed => {
            let first: Option<i64> =
                conn.query_row("SELECT min(id) FROM audit", [], |r| r.get(0))?;
            let bad = BadRow {
                id: first.unwrap_or(0),
                problem: ChainProblem::AnchorMalformed,
            };
            return Ok((0, Some(bad)));
        }
    };
    let anchored = matches!(anchor, AnchorRead::One(_));
    let sql = format!(
        "SELECT {}, {}, row_sha256 FROM audit ORDER BY id",
        HASHED_COLUMNS.join(", "),
        optional_columns(conn)?.join(", ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut last_id = i64::MIN;
    let mut checked = 0u64;
    let fixed = HASHED_COLUMNS.len();
    let n = fixed + OPTIONAL_HASHED_COLUMNS.len();
    while let Some(row) = rows.next()? {
        checked += 1;
        let first = checked == 1;
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(row.get::<_, Value>(i)?);
        }
        let stored: Value = row.get(n)?;
        // `id` is the INTEGER PRIMARY KEY (the rowid), so it is always an integer.
        let id: i64 = row.get(0)?;
        let bad = |problem| Ok((checked, Some(BadRow { id, problem })));
        let (Value::Text(prev), Value::Text(stored)) = (&values[fixed - 1], &stored) else {
            return bad(ChainProblem::Malformed);
        };
        if !is_sha256_hex(prev) || !is_sha256_hex(stored) || id <= last_id {
            return bad(ChainProblem::Malformed);
        }
        if *prev != expected_prev {
            return bad(if first && anchored {
                ChainProblem::AnchorMismatch
            } else {
                ChainProblem::PrevMismatch
            });
        }
        if canonical_row_sha256(&values) != *stored {
            return bad(ChainProblem::HashMismatch);
        }
        if id != expected_id {
            return bad(if first && anchored {
                ChainProblem::AnchorMismatch
            } else if id < expected_id {
                ChainProblem::Malformed
            } else {
                ChainProblem::IdGap {
                    first_missing: expected_id,
                    last_missing: id - 1,
                }
            });
        }
        expected_prev = stored.clone();
        expected_id = id.saturating_add(1);
        last_id = id;
    }
    Ok((checked, None))
}

/// [`OPTIONAL_HASHED_COLUMNS`] as a query selects them: `NULL` for one a database from
/// before it does not have (read-only readers, such as `audit --verify`, do not migrate).
fn optional_columns(conn: &Connection) -> Result<Vec<&'static str>, StoreError> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('audit')")?;
    let present: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(OPTIONAL_HASHED_COLUMNS
        .iter()
        .map(|c| {
            if present.iter().any(|p| p == c) {
                *c
            } else {
                "NULL"
            }
        })
        .collect())
}

/// The last `limit` rows of the database at `path`, oldest first.
pub fn recent_path(path: &Path, limit: usize) -> Result<Vec<AuditRow>, StoreError> {
    let conn = open_read_only(path)?;
    let columns = HASHED_COLUMNS.join(", ");
    let optional = optional_columns(&conn)?.join(", ");
    let sql = format!(
        "SELECT * FROM (SELECT {columns}, row_sha256, {optional} FROM audit \
         ORDER BY id DESC LIMIT ?1) ORDER BY id"
    );
    let mut stmt = conn.prepare(&sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map([limit], |row| {
        let kind: String = row.get(3)?;
        let kind = match kind.as_str() {
            "decision" => AuditKind::Decision,
            "call" => AuditKind::Call,
            _ => AuditKind::Outcome,
        };
        Ok(AuditRow {
            id: row.get(0)?,
            time: row.get(1)?,
            record: AuditRecord {
                call_id: row.get(2)?,
                kind,
                origin: row.get(4)?,
                tool: row.get(5)?,
                action: row.get(6)?,
                arguments_sha256: row.get(7)?,
                risk: row.get(8)?,
                requires_root: row.get(9)?,
                identity: row.get(10)?,
                decision: row.get(11)?,
                reason: row.get(12)?,
                success: row.get(13)?,
                exit_code: row.get(14)?,
                duration_ms: row.get(15)?,
                summary: row.get(16)?,
                task: row.get(19)?,
            },
            prev_sha256: row.get(17)?,
            row_sha256: row.get(18)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

fn configure(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.busy_timeout(Duration::from_secs(5))?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Unsafe {
            path: path.to_owned(),
            why: format!("SQLite kept journal_mode {mode}; WAL is required"),
        });
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The store appends and rarely reads: a small page cache keeps approvald small.
    conn.pragma_update(None, "cache_size", -256)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "trusted_schema", false)?;
    Ok(())
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found: version,
        });
    }
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    if version < 1 {
        tx.execute_batch(SCHEMA_V1)?;
    }
    if version < 2 {
        tx.execute_batch(SCHEMA_V2)?;
    }
    if version < 3 {
        tx.execute_batch(SCHEMA_V3)?;
    }
    if version < 4 {
        if optional_columns(&tx)?.contains(&"NULL") {
            tx.execute_batch("ALTER TABLE audit ADD COLUMN task TEXT")?;
        }
        tx.execute_batch(SCHEMA_V4_TASKS)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    tracing::info!(path = %path.display(), from = version, to = SCHEMA_VERSION, "store database migrated");
    Ok(())
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Create `path` with mode 0600 if missing (never through a symlink), and check that it
/// is a regular file owned by us; a wider mode is tightened.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
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
fn tighten_existing(path: &Path) -> Result<(), StoreError> {
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

fn make_private(file: &File, path: &Path) -> Result<(), StoreError> {
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
    if meta.mode() & 0o777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))
            .map_err(io_err("cannot restrict the mode of"))?;
        tracing::warn!(path = %path.display(), mode = format!("{:o}", meta.mode() & 0o777), "tightened to 0600");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_separates_null_empty_and_neighbours() {
        let mut a = vec![Value::Null; HASHED_COLUMNS.len()];
        let mut b = a.clone();
        b[4] = Value::Text(String::new());
        assert_ne!(canonical_row(&a), canonical_row(&b));
        // Moving text across a column boundary changes the bytes.
        a[4] = Value::Text("ab".into());
        a[5] = Value::Text("c".into());
        b[4] = Value::Text("a".into());
        b[5] = Value::Text("bc".into());
        assert_ne!(canonical_row(&a), canonical_row(&b));
        // An integer and its text spelling differ.
        a[2] = Value::Integer(1);
        b = a.clone();
        b[2] = Value::Text("1".into());
        assert_ne!(canonical_row(&a), canonical_row(&b));
    }

    #[test]
    fn a_null_optional_column_hashes_as_before_it_existed() {
        let mut old = vec![Value::Null; HASHED_COLUMNS.len()];
        old[0] = Value::Integer(1);
        old[17] = Value::Text(GENESIS_SHA256.into());
        let mut new = old.clone();
        new.push(Value::Null);
        assert_eq!(canonical_row(&old), canonical_row(&new));
        let with_task = |t: &str| {
            let mut v = old.clone();
            v.push(Value::Text(t.into()));
            canonical_row(&v)
        };
        assert_ne!(with_task(""), canonical_row(&old));
        assert_ne!(with_task("a"), with_task("b"));
        // The task cannot pose as the end of another column.
        let mut shifted = old.clone();
        shifted[17] = Value::Text(format!("{GENESIS_SHA256}x"));
        assert_ne!(with_task("x"), canonical_row(&shifted));
    }

    #[test]
    fn genesis_is_64_zeros() {
        assert!(is_sha256_hex(GENESIS_SHA256));
        assert!(GENESIS_SHA256.bytes().all(|b| b == b'0'));
    }
}
