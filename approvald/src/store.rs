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
//!
//! This file is the front ([`Store`] and its API); the parts live beside it: `schema`
//! (schema, migrations, connection settings), `record` (the audit record, its bounds and
//! redaction, reading rows back), `writer` (the group-commit writer and journal replay),
//! `chain` (the canonical row, the hash chain and verify), `files` (file modes and
//! opening), `page_token` (ListTasks page tokens).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use tokio::sync::{mpsc, oneshot};

use nl2sh_proto::clock;
use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};

mod chain;
mod files;
pub mod journal;
mod page_token;
mod record;
pub mod redact;
pub mod retention;
mod schema;
pub mod sessions;
pub mod tail;
pub mod tasks;
mod writer;
pub use writer::WriterStopped;

pub use chain::{
    canonical_row, verify_path, BadRow, ChainProblem, VerifyReport, GENESIS_SHA256, HASHED_COLUMNS,
    OPTIONAL_HASHED_COLUMNS,
};
pub use record::{recent_path, AuditKind, AuditRecord, AuditRow, MAX_TEXT_BYTES};
pub use retention::{
    Anchor, AuditLimits, DEFAULT_AUDIT_MAX_BYTES, DEFAULT_AUDIT_MAX_ROWS, MIN_AUDIT_MAX_BYTES,
    MIN_AUDIT_MAX_ROWS,
};
pub use schema::SCHEMA_VERSION;
pub use tail::{TailStatus, TAIL_FILE};
pub(crate) use writer::WriterHandle;
pub use writer::{journal_pending, LINGER, MAX_BATCH, QUEUE_CAPACITY};

use chain::{read_anchor, read_head, AnchorRead, Head};
use files::{create_private_file, suffixed, tighten_existing};
use schema::{configure, migrate, schema_version, TAIL_SINCE_VERSION};
use writer::{
    replay_journal, run_job, write_tail, Command, Counters, Queued, Writer, WriterThread,
    DEFAULT_ROW_BYTES,
};

/// The database, relative to the state directory.
pub const DB_FILE: &str = nl2sh_proto::state_layout::TASKS_DB.path;
/// How far back [`Store::has_row`] looks.
pub const RECENT_ROWS_SEARCHED: i64 = 20_000;

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

/// Handle to the store. Cheap to share behind an `Arc`; the writer thread stops after the
/// last handle is dropped and the queue is empty.
pub struct Store {
    path: PathBuf,
    state_dir: PathBuf,
    queue: mpsc::Sender<Command>,
    counters: Arc<Counters>,
    /// The limits the writer prunes to; `None` until set, and nothing is pruned before.
    limits: Arc<Mutex<Option<AuditLimits>>>,
    /// The writer thread, woken early from its [`LINGER`] (and hurried back from its
    /// background priority) when someone waits.
    writer: WriterThread,
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
        let mut conn = open_database(&path)?;
        let tail_path = tail::tail_path(&path);
        remove_legacy_tail_temp(&path);
        let version = schema_version(&conn)?;
        // Read before anything is written: a tail file without a database (or beside an
        // older one) means the database was removed or replaced.
        let found = tail::read(&tail_path);
        let fresh_tail = version < TAIL_SINCE_VERSION && matches!(found, Ok(None));
        if fresh_tail {
            write_first_tail(&conn, version, &tail_path)?;
        }
        migrate(&mut conn, &path)?;
        fail_interrupted_tasks(&mut conn)?;
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
        let mut head = resume_chain(&conn, &path, &found, fresh_tail)?;
        let size = AuditSize::measure(&conn)?;
        let (replayed, last_seq) = replay_journal(&mut conn, state_dir, &mut head)?;
        if replayed > 0 {
            write_tail(&tail_path, &head)?;
        }
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
        let background = Arc::new(std::sync::OnceLock::new());
        let writer = Writer {
            conn,
            head,
            journal: progress,
            rows: size.rows + replayed,
            row_bytes: size.row_bytes,
            page_size: size.page_size,
            limits: limits.clone(),
            applied: None,
            backlog: false,
            // 0 is NONE: a database from before retention, rebuilt once it is pruned.
            rebuild: size.auto_vacuum == 0,
            tail_path,
            tail_failing: false,
            counters: counters.clone(),
            task_bytes: task_bytes.clone(),
            background: background.clone(),
            background_failed: false,
        };
        let writer = start_writer(writer, rx, &path, background)?;
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
        if let Some(redactor) = self.audit_redactor.get() {
            record.redact(redactor);
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
            self.writer.wake();
        } else {
            self.writer.keep_up(&self.queue);
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

    /// A signal that resolves once the writer thread has ended: after every handle to
    /// the store is dropped and its queue is empty, the database is closed.
    pub fn writer_stopped(&self) -> WriterStopped {
        self.writer.stopped()
    }

    /// Resolve once every record queued before this call is committed (or failed).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        self.queue
            .send(Command::Flush(ack))
            .await
            .map_err(|_| StoreError::Closed)?;
        self.writer.wake();
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
        self.writer.wake();
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

/// The database at `path`, opened read-write (its directory and the file private, made
/// when missing) and configured.
fn open_database(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent() {
        // Prepared by the supervisor; a wider mode now means something changed it.
        open_private_dir(dir, Create::IfMissing, WideMode::Refuse)?;
    }
    create_private_file(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Before WAL is turned on, which writes the header: later a new database could
    // only get it by a rebuild. On an existing database this changes nothing.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    configure(&conn, path)?;
    Ok(conn)
}

/// The temporary tail file an older approvald wrote beside the database, if one was left.
fn remove_legacy_tail_temp(db: &Path) {
    let tail_temp = tail::legacy_temp_path(db);
    match std::fs::remove_file(&tail_temp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            tracing::warn!(path = %tail_temp.display(), error = %e, "cannot remove a leftover file");
        }
        _ => {}
    }
}

/// The tail file of a database whose schema (`version`) predates it: it exists before
/// the schema says there is one.
fn write_first_tail(conn: &Connection, version: i64, tail_path: &Path) -> Result<(), StoreError> {
    let head = if version == 0 {
        Head::genesis()
    } else {
        read_head(conn, &AnchorRead::None)?
    };
    write_tail(tail_path, &head)
}

/// The tasks that were running when the last approvald stopped, now failed.
fn fail_interrupted_tasks(conn: &mut Connection) -> Result<(), StoreError> {
    let interrupted = tasks::fail_interrupted(conn, clock::now_unix_ms())?;
    if interrupted > 0 {
        tracing::warn!(
            tasks = interrupted,
            "tasks that were running when nl2sh stopped are now failed; none is resumed or replayed"
        );
    }
    Ok(())
}

/// The head of the audit chain, compared with the tail file `found` at opening
/// (`fresh_tail`: written by this opening). A mismatch is not repaired, and not hidden:
/// the next row gets an id past the break, so the gap stays in the chain for `--verify`
/// to report.
fn resume_chain(
    conn: &Connection,
    path: &Path,
    found: &Result<Option<tail::Tail>, tail::TailError>,
    fresh_tail: bool,
) -> Result<Head, StoreError> {
    let anchor = read_anchor(conn)?;
    let mut head = read_head(conn, &anchor)?;
    let status = match found {
        _ if fresh_tail => TailStatus::Matches { id: head.id },
        Ok(t) => tail::check(conn, t.as_ref(), true, anchor.one())?,
        Err(e) => TailStatus::Malformed(e.to_string()),
    };
    if !status.is_ok() {
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
    Ok(head)
}

/// How large the audit table is, for the writer's pruning.
struct AuditSize {
    rows: u64,
    /// About how many bytes of pages a row takes.
    row_bytes: u64,
    page_size: u64,
    /// The database's `auto_vacuum` mode (0: NONE).
    auto_vacuum: i64,
}

impl AuditSize {
    fn measure(conn: &Connection) -> Result<AuditSize, StoreError> {
        let rows: i64 = conn.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))?;
        let rows = u64::try_from(rows).unwrap_or(0);
        let page_size = page_size_of(conn)?;
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let row_bytes = (u64::try_from(pages).unwrap_or(0) * page_size)
            .checked_div(rows)
            .unwrap_or(DEFAULT_ROW_BYTES);
        let auto_vacuum: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
        Ok(AuditSize {
            rows,
            row_bytes,
            page_size,
            auto_vacuum,
        })
    }
}

/// `writer` running on a thread of its own, taking commands from `rx`.
fn start_writer(
    writer: Writer,
    rx: mpsc::Receiver<Command>,
    path: &Path,
    background: Arc<std::sync::OnceLock<nl2sh_proto::sys::thread::Background>>,
) -> Result<WriterThread, StoreError> {
    let (stopped_tx, stopped) = tokio::sync::watch::channel(());
    let thread = std::thread::Builder::new()
        .name("approvald-store".into())
        .spawn(move || {
            writer.run(rx);
            // Dropped last, once the connection is closed: `WriterStopped` resolves.
            drop(stopped_tx);
        })
        .map_err(|source| StoreError::Io {
            what: "cannot start the writer for",
            path: path.to_owned(),
            source,
        })?
        .thread()
        .clone();
    Ok(WriterThread::new(thread, background, stopped))
}

fn page_size_of(conn: &Connection) -> Result<u64, StoreError> {
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(u64::try_from(page_size).unwrap_or(4096).max(512))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain values: a panic elsewhere cannot leave them torn.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| StoreError::Closed)?
}
