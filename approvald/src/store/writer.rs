//! The group-commit writer: one thread owns the read-write connection, takes every queued
//! record at once, writes them in one transaction with the chain columns, prunes in the
//! same transaction, commits, and only then acknowledges the waiters; and replays the
//! journal at start.
//!
//! The writer rests, lingers and writes batches nobody waits for at nice 19
//! ([`Background`]): calls on their way through the same core preempt it instead of
//! waiting up to a batch's few hundred microseconds behind it, and its wake-ups do not
//! preempt them (docs/AUDIT.md, "Background work yields to calls"). Whoever waits
//! for a commit, and a queue falling behind, hurry it back to its normal priority
//! ([`WriterThread::wake`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nl2sh_proto::clock;
use nl2sh_proto::sys::thread::Background;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::chain::{
    canonical_row_sha256, hashed_values, Head, HASHED_COLUMNS, OPTIONAL_HASHED_COLUMNS,
};
use super::record::AuditRecord;
use super::retention::{self, AuditLimits};
use super::{journal, lock, tail, StoreError};

/// Records that may wait for the writer; more make their senders wait.
pub const QUEUE_CAPACITY: usize = 4096;
/// Most records one transaction takes.
pub const MAX_BATCH: usize = 4096;
/// How long records nobody waits for (read-only calls, outcomes) may wait for company
/// before they are committed. An approvald crash can lose that much of them; a power
/// failure loses more anyway (`synchronous=NORMAL`).
pub const LINGER: Duration = Duration::from_millis(5);
/// The writer is falling behind when a batch, or the queue it has not taken yet, holds
/// more records than this: it then writes at its normal priority until it has caught up.
/// (At nice 19 on a core that calls keep busy, it takes only what they leave, and
/// batches grow; a quarter of the queue leaves room for bursts.)
pub const BEHIND: usize = QUEUE_CAPACITY / 4;

/// What a row is taken to cost until one is measured: a little more than the usual.
pub(crate) const DEFAULT_ROW_BYTES: u64 = 512;

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) batches: AtomicU64,
    pub(crate) records: AtomicU64,
    pub(crate) pruned: AtomicU64,
}

pub(crate) type Ack = oneshot::Sender<Result<(), StoreError>>;

pub(crate) enum Command {
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
pub(crate) struct Queued {
    pub(crate) record: Box<AuditRecord>,
    /// When it was queued (ms since the epoch): the row's `time`.
    pub(crate) time_ms: i64,
    /// Its journal sequence number, when it was journalled.
    pub(crate) seq: Option<u64>,
    pub(crate) ack: Option<Ack>,
}

impl Queued {
    pub(crate) fn new(
        record: AuditRecord,
        seq: Option<u64>,
        time_ms: i64,
        ack: Option<Ack>,
    ) -> Self {
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

/// The writer thread as its senders see it: woken early from its linger, and hurried
/// back from its background priority, when someone waits for it.
#[derive(Clone)]
pub(crate) struct WriterThread {
    thread: std::thread::Thread,
    /// Set by the writer thread itself when it starts, if it may lower its priority.
    background: Arc<OnceLock<Background>>,
    /// Closed when the writer thread ends (its sender is dropped with the thread).
    stopped: tokio::sync::watch::Receiver<()>,
}

/// Resolves once the writer thread has ended, and with it its connection to the database:
/// the store's files may then be opened, copied or edited as a stopped approvald leaves them.
#[derive(Clone)]
pub struct WriterStopped(tokio::sync::watch::Receiver<()>);

impl WriterStopped {
    /// Wait for the writer to end. It ends once every handle to the store is dropped and
    /// its queue is empty.
    pub async fn wait(mut self) {
        while self.0.changed().await.is_ok() {}
    }
}

impl WriterThread {
    pub(crate) fn new(
        thread: std::thread::Thread,
        background: Arc<OnceLock<Background>>,
        stopped: tokio::sync::watch::Receiver<()>,
    ) -> Self {
        WriterThread {
            thread,
            background,
            stopped,
        }
    }

    /// A signal that resolves once the writer thread has ended.
    pub(crate) fn stopped(&self) -> WriterStopped {
        WriterStopped(self.stopped.clone())
    }

    /// Someone waits for the writer: end its linger and put it back at its normal
    /// priority.
    pub(crate) fn wake(&self) {
        self.hurry();
        self.thread.unpark();
    }

    /// Put the writer back at its normal priority if `queue` holds more than [`BEHIND`]
    /// records it has not taken. One atomic load when it does not.
    pub(crate) fn keep_up(&self, queue: &mpsc::Sender<Command>) {
        if queue.max_capacity() - queue.capacity() > BEHIND {
            self.hurry();
        }
    }

    fn hurry(&self) {
        if let Some(background) = self.background.get() {
            if let Err(e) = background.restore() {
                tracing::warn!(error = %e, "cannot put the audit writer back at its normal priority");
            }
        }
    }
}

/// What the task store keeps of the store: a way to queue jobs on the writer thread.
#[derive(Clone)]
pub(crate) struct WriterHandle {
    pub(crate) queue: mpsc::Sender<Command>,
    pub(crate) writer: WriterThread,
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

pub(crate) async fn run_job<T: Send + 'static>(
    queue: &mpsc::Sender<Command>,
    writer: &WriterThread,
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
    writer.wake();
    answered.await.map_err(|_| StoreError::Closed)
}

/// Create the tail file for `head` (a new file, through a rename).
pub(crate) fn write_tail(path: &Path, head: &Head) -> Result<(), StoreError> {
    tail_io(path, head, tail::write)
}

/// [`write_tail`] for the writer's updates after a commit (in place, no rename).
pub(crate) fn update_tail(path: &Path, head: &Head) -> Result<(), StoreError> {
    tail_io(path, head, tail::update)
}

fn tail_io(
    path: &Path,
    head: &Head,
    io: fn(&Path, &tail::Tail) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let t = tail::Tail {
        id: head.id,
        row_sha256: head.sha256.clone(),
    };
    io(path, &t).map_err(|source| StoreError::Io {
        what: "cannot write",
        path: path.to_owned(),
        source,
    })
}

pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) head: Head,
    /// Where the writer says how far it committed the journal.
    pub(crate) journal: Arc<journal::Progress>,
    /// Rows in the trail.
    pub(crate) rows: u64,
    /// About how many bytes of pages a row takes, as last measured.
    pub(crate) row_bytes: u64,
    pub(crate) page_size: u64,
    pub(crate) limits: Arc<Mutex<Option<AuditLimits>>>,
    /// The limits in force here (their WAL settings applied); `None`: prune nothing.
    pub(crate) applied: Option<AuditLimits>,
    /// More pruning is due than the last transaction did.
    pub(crate) backlog: bool,
    /// The database has no auto-vacuum (created before retention): once it is pruned to
    /// the limits, it is rebuilt with `VACUUM`, which also gives back the pages freed by
    /// that first pruning.
    pub(crate) rebuild: bool,
    pub(crate) tail_path: PathBuf,
    /// The last tail write failed (logged once until one succeeds).
    pub(crate) tail_failing: bool,
    pub(crate) counters: Arc<Counters>,
    /// Bytes of pages the task store holds, which the audit's byte limit leaves out.
    pub(crate) task_bytes: Arc<AtomicU64>,
    /// Where this thread's [`Background`] goes when it starts (see [`WriterThread`]).
    pub(crate) background: Arc<OnceLock<Background>>,
    /// Lowering or restoring the priority failed (logged once; no more lowering).
    pub(crate) background_failed: bool,
}

impl Writer {
    pub(crate) fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        if let Some(background) = Background::for_this_thread() {
            let _ = self.background.set(background);
        } else {
            tracing::debug!(
                "audit writer keeps its priority: it could not get it back after lowering it"
            );
        }
        let mut queued = Vec::with_capacity(MAX_BATCH);
        let mut batch = Vec::new();
        self.lower();
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
            if waited_for || batch.len() > BEHIND {
                self.restore();
            }
            self.commit(std::mem::take(&mut batch));
            self.lower();
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
                    self.restore();
                    self.commit(std::mem::take(batch));
                    let _ = done.send(());
                    waited_for = true;
                }
                Command::Settle(done) => {
                    self.restore();
                    self.commit(std::mem::take(batch));
                    while self.housekeep() {}
                    let _ = done.send(());
                    waited_for = true;
                }
                Command::Wake => {}
                // Audit records queued before it are committed first; the job commits
                // its own transaction.
                Command::Task(job) => {
                    self.restore();
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

    /// Go to the background priority, if this thread may (and come back, see
    /// [`Background`]). A failure is logged once, and the writer keeps its priority.
    fn lower(&mut self) {
        if self.background_failed {
            return;
        }
        if let Some(Err(e)) = self.background.get().map(Background::lower) {
            self.background_failed = true;
            tracing::warn!(error = %e, "cannot lower the audit writer's priority; it keeps its normal one");
        }
    }

    /// Back to the normal priority, if lowered.
    fn restore(&mut self) {
        if let Some(Err(e)) = self.background.get().map(Background::restore) {
            self.background_failed = true;
            tracing::error!(error = %e, "cannot put the audit writer back at its normal priority");
        }
    }

    /// Commit `batch` in one transaction, then acknowledge its waiters, at the priority
    /// the writer is at. The records are dropped at the normal priority: their memory
    /// belongs to the threads that made them, and freeing it takes their allocator's
    /// lock, which a lowered thread preempted there would hold for long.
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
        self.restore();
        drop(records);
    }

    /// Record the new head in the tail file. A failure leaves the file behind the
    /// database, which `--verify` accepts; it is logged once until a write succeeds.
    fn update_tail(&mut self) {
        match update_tail(&self.tail_path, &self.head) {
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
pub(crate) struct Pruning {
    pub(crate) limits: AuditLimits,
    /// Rows in the trail in that transaction, before pruning.
    pub(crate) rows: u64,
    pub(crate) page_size: u64,
    /// Most rows to prune.
    pub(crate) max: u64,
    /// Bytes of pages that hold other tables (the tasks), left out of the audit's bytes.
    pub(crate) other_bytes: u64,
}

/// What a pruning transaction did, and the bytes of pages in use it measured.
pub(crate) type PruneResult = (Option<retention::Pruned>, u64);

/// Insert `records` (each with its time) after `head` in one transaction, record
/// `journalled` as the last journal entry applied, and prune as `pruning` says, all in the
/// same transaction. The new head on commit, and what pruning did.
pub(crate) fn write_batch(
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
pub(crate) const JOURNAL_TABLE: &str = "CREATE TABLE IF NOT EXISTS audit_journal (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    applied INTEGER NOT NULL
)";

/// Commit the journal's entries that never reached the database (approvald stopped
/// before its writer did), after `head`. How many rows that added, and the last journal
/// sequence number seen or applied, which new entries follow.
pub(crate) fn replay_journal(
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

pub(crate) fn journal_applied(conn: &Connection) -> Result<u64, rusqlite::Error> {
    let applied: Option<i64> = conn
        .query_row("SELECT applied FROM audit_journal WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(applied.and_then(|a| u64::try_from(a).ok()).unwrap_or(0))
}

pub(crate) fn set_journal_applied(tx: &Transaction<'_>, seq: u64) -> Result<(), rusqlite::Error> {
    let seq = i64::try_from(seq).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO audit_journal (id, applied) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET applied = max(applied, excluded.applied)",
        [seq],
    )?;
    Ok(())
}

pub(crate) fn prune_in(tx: &Transaction<'_>, p: &Pruning) -> Result<PruneResult, rusqlite::Error> {
    let done = retention::prune(tx, p.rows, &p.limits, p.page_size, p.max, p.other_bytes)?;
    if done.0.is_some() {
        retention::release_free_pages(tx, &p.limits, p.page_size)?;
    }
    Ok(done)
}

/// A pruning transaction of its own, while no batch waits.
pub(crate) fn prune_only(
    conn: &mut Connection,
    p: &Pruning,
) -> Result<PruneResult, rusqlite::Error> {
    let tx = conn.transaction()?;
    let done = prune_in(&tx, p)?;
    tx.commit()?;
    Ok(done)
}

/// Turn on incremental auto-vacuum in a database created without it, by rebuilding it
/// (`VACUUM`, which also drops its free pages), then checkpoint so the file shrinks and
/// the WAL that held the copy is cut back. Runs once, after the first pruning, so only
/// what is kept is copied. A failure leaves the database as it was, logged.
pub(crate) fn rebuild(conn: &Connection) {
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use nl2sh_proto::sys::thread::{nice_of, this_thread, BACKGROUND_NICE};

    use super::super::{AuditKind, AuditRecord, Store};

    /// Poll `f` until it holds, for at most 10 s.
    async fn eventually(mut f: impl FnMut() -> bool) -> bool {
        let give_up = Instant::now() + Duration::from_secs(10);
        while Instant::now() < give_up {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        f()
    }

    #[tokio::test]
    async fn the_writer_rests_lowered_commits_unwaited_rows_and_works_for_waiters_at_its_normal_priority(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // The writer thread starts at the nice of the thread that opened the store.
        let normal = nice_of(this_thread()).unwrap();
        // A job someone waits for runs at the normal priority.
        let handle = store.writer_handle();
        let (writer, nice_in_job) = handle
            .run(|_| {
                let t = this_thread();
                (t, nice_of(t).unwrap())
            })
            .await
            .unwrap();
        assert_eq!(nice_in_job, normal);
        let lowers = store.writer.background.get().is_some();
        // Whether it may lower itself is the kernel's call (root, or RLIMIT_NICE).
        let rest = if lowers { BACKGROUND_NICE } else { normal };
        assert!(
            eventually(|| nice_of(writer).unwrap() == rest).await,
            "the writer rests at nice {rest}: it is at {}",
            nice_of(writer).unwrap()
        );
        // Rows nobody waits for are still committed while it rests lowered (this test's
        // thread leaves the core free), and it rests lowered again after them.
        for call in 0..3 {
            let mut r = AuditRecord::new(AuditKind::Decision, call);
            r.tool = Some("fs".into());
            store.append_nowait(r).await.unwrap();
        }
        assert!(eventually(|| store.stats().records == 3).await);
        assert!(eventually(|| nice_of(writer).unwrap() == rest).await);
        // A record someone waits for hurries it back to the normal priority.
        store.writer.wake();
        assert_eq!(nice_of(writer).unwrap(), normal);
        store.flush().await.unwrap();
        assert!(store.has_row(2, AuditKind::Decision).await.unwrap());
    }
}
