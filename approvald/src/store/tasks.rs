//! The task store behind netd's `StoreRequest`: delegated tasks (whole A2A `Task`
//! documents) in the `tasks` table of `protocol/tasks.sqlite3`, and the Agent's session
//! history in `<state>/sessions/` ([`super::sessions`]).
//!
//! * Writes run on the audit's writer thread, as jobs on its queue, each in a transaction
//!   of its own between two audit batches. One writer connection means no two writers
//!   contend for SQLite's write lock: a second connection would make every audit commit
//!   that meets a task write sleep in SQLite's busy handler (1 ms, then 2, 5, 10…) rather
//!   than start the moment the task write ends, and a transaction that reads before it
//!   writes (retention's) could fail outright with `SQLITE_BUSY_SNAPSHOT`. A task write
//!   delays the audit batch behind it by its own length either way; everything that
//!   costs more than the SQL (parsing, checking and redacting the document) happens
//!   before the job is queued, off the writer thread.
//! * Reads use read-only connections of their own (WAL readers never wait for the
//!   writer), pooled, on blocking threads.
//! * All blocking work (SQLite reads, JSON, files) runs on tokio's blocking threads, at
//!   most [`STORE_WORKERS`] at once, so netd cannot tie up approvald's runtime thread or
//!   spawn hundreds of threads.
//! * Retention: at most [`MAX_RETAINED_TASKS`] tasks and [`MAX_RETAINED_DOCUMENT_BYTES`]
//!   of documents, checked in the transaction of each write. The oldest terminal tasks
//!   (by update time, then id) go first, never the task just written; a task still
//!   running is never pruned. So that running tasks cannot grow the store without bound,
//!   a write that would grow it past twice the limits ([`CEILING_TASKS`],
//!   [`CEILING_DOCUMENT_BYTES`]) with nothing left to prune is refused (netd runs at most
//!   `MAX_ACTIVE_TASKS` at once, so only a misbehaving netd gets there).
//! * Ids: approvald mints every task id, and a context id when the client gave none
//!   ([`TaskStore::create`], `CreateTask`). A `PutTask` of a task not in the table must
//!   carry ids minted so (and not stored since); netd cannot invent a task. Minted ids
//!   wait for their first write in memory, at most [`MAX_UNSTORED_CREATED`], the oldest
//!   forgotten first: creating stores nothing, and the first write counts against the
//!   limits below like any other.
//! * Restart: [`fail_interrupted`] marks every task that was submitted or working when
//!   approvald last stopped as failed, when the store opens; nothing is resumed or
//!   replayed.
//! * Page tokens: [`super::page_token`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::{json, Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use nl2sh_proto::channels::{
    is_owner_id, ContextId, StoreErrorKind, StoreFailure, TaskId, TaskPage, TaskQuery, TaskRecord,
    TaskState, OWNER_ID_PREFIX,
};
use nl2sh_proto::clock;
use nl2sh_proto::ids;
use nl2sh_proto::limits::{
    MAX_ACTIVE_TASKS, MAX_ID_BYTES, MAX_RETAINED_DOCUMENT_BYTES, MAX_RETAINED_TASKS,
    MAX_STORE_ANSWER_BYTES_IN_FLIGHT, MAX_TASK_DOCUMENT_BYTES,
};
use nl2sh_proto::secret::Secret;

use super::page_token::{decode_token, encode_token, filter_digest, Cursor};
use super::redact::Redactor;
use super::sessions::Sessions;
use super::{Store, StoreError, WriterHandle};

/// Blocking store operations (reads, document checks, session files) at once.
pub const STORE_WORKERS: usize = 4;
pub use nl2sh_proto::limits::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
/// Bytes of documents and ids one page carries at most (a page always carries at least
/// one task), so a page fits a frame whatever `page_size` asks for: fewer tasks come back,
/// with a token for the rest.
pub const MAX_PAGE_BYTES: usize = MAX_TASK_DOCUMENT_BYTES;
/// Running tasks are never pruned; past these, a write that grows the store is refused.
pub const CEILING_TASKS: u64 = 2 * MAX_RETAINED_TASKS as u64;
pub const CEILING_DOCUMENT_BYTES: u64 = 2 * MAX_RETAINED_DOCUMENT_BYTES as u64;
/// Tasks created (`CreateTask`) and not yet written that the store remembers. netd writes
/// each task right after creating it and holds at most `MAX_ACTIVE_TASKS`, so only a
/// misbehaving netd (or one whose first writes failed) ever has the oldest forgotten.
pub const MAX_UNSTORED_CREATED: usize = 4 * MAX_ACTIVE_TASKS;
/// The text of the status message of a task failed by a restart.
pub const RESTART_MESSAGE: &str =
    "nl2sh restarted while this task was running; it was not resumed or replayed";

/// States a task can be in while it runs, as stored.
const RUNNING_STATES_SQL: &str = "('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING')";
/// Terminal states, as stored.
const TERMINAL_STATES_SQL: &str =
    "('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED')";

/// A storage failure, logged here (netd only passes it on).
pub(crate) fn storage_failure(what: &str, error: impl std::fmt::Display) -> StoreFailure {
    tracing::error!(error = %error, "task store: {what}");
    StoreFailure::new(StoreErrorKind::Storage, format!("{what}: {error}"))
}

fn sql_error(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreFailure {
    move |e| storage_failure(what, e)
}

/// Tasks and document bytes in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskSpace {
    pub tasks: u64,
    pub document_bytes: u64,
}

impl TaskSpace {
    pub fn measure(conn: &Connection) -> rusqlite::Result<TaskSpace> {
        conn.query_row("SELECT count(*), total(bytes) FROM tasks", [], |r| {
            let tasks: i64 = r.get(0)?;
            let bytes: f64 = r.get(1)?;
            Ok(TaskSpace {
                tasks: u64::try_from(tasks).unwrap_or(0),
                // `total` is a float; documents are at most a few MiB each, exact in f64.
                document_bytes: bytes.max(0.0) as u64,
            })
        })
    }

    /// Within [`MAX_RETAINED_TASKS`] and [`MAX_RETAINED_DOCUMENT_BYTES`].
    pub fn within_limits(&self) -> bool {
        self.tasks <= MAX_RETAINED_TASKS as u64
            && self.document_bytes <= MAX_RETAINED_DOCUMENT_BYTES as u64
    }

    /// Within [`CEILING_TASKS`] and [`CEILING_DOCUMENT_BYTES`].
    pub fn within_ceiling(&self) -> bool {
        self.tasks <= CEILING_TASKS && self.document_bytes <= CEILING_DOCUMENT_BYTES
    }

    /// About how many bytes of database pages these tasks take: their documents, and a
    /// page each for the rest of the row, its two index entries and the unfilled end of
    /// its last page. Only the audit's byte accounting uses it, to leave the tasks out.
    pub fn page_bytes(&self, page_size: u64) -> u64 {
        self.document_bytes
            .saturating_add(self.tasks.saturating_mul(page_size))
    }
}

/// A task checked and redacted, ready to be written.
#[derive(Debug)]
struct Prepared {
    id: String,
    context_id: String,
    state: TaskState,
    updated_ms: i64,
    document: String,
}

/// Tasks created and not yet written: their ids, oldest first.
#[derive(Debug, Default)]
struct Created {
    ids: VecDeque<(TaskId, ContextId)>,
}

impl Created {
    fn add(&mut self, id: TaskId, context_id: ContextId) {
        if self.ids.len() >= MAX_UNSTORED_CREATED {
            if let Some((forgotten, _)) = self.ids.pop_front() {
                tracing::warn!(task = %forgotten, "a created task was never written; forgotten");
            }
        }
        self.ids.push_back((id, context_id));
    }

    fn holds(&self, id: &str, context_id: &str) -> bool {
        self.ids.iter().any(|(i, c)| i.0 == id && c.0 == context_id)
    }

    fn remove(&mut self, id: &str) {
        self.ids.retain(|(i, _)| i.0 != id);
    }
}

/// The task and session store netd reaches. Cheap to share behind an `Arc`.
pub struct TaskStore {
    writer: WriterHandle,
    created: Arc<Mutex<Created>>,
    db_path: PathBuf,
    redactor: Arc<Redactor>,
    sessions: Arc<Sessions>,
    readers: Arc<Mutex<Vec<Connection>>>,
    workers: Semaphore,
    /// Bytes of documents answers hold, read and not yet sent
    /// ([`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`]).
    answer_bytes: Arc<Semaphore>,
    token_key: Arc<[u8; 32]>,
}

/// The share of [`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`] an answer holds until its frame has
/// been written (see `nl2sh_proto::rpc::serve_holding`).
#[derive(Debug)]
pub struct AnswerBytes(Option<OwnedSemaphorePermit>);

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore")
            .field("db_path", &self.db_path)
            .field("redactor", &self.redactor)
            .finish_non_exhaustive()
    }
}

impl TaskStore {
    pub(super) fn new(store: &Store, redact: &[Secret]) -> Result<TaskStore, StoreError> {
        let redactor = Arc::new(Redactor::new(redact));
        let sessions = Sessions::open(store.state_dir(), redactor.clone())?;
        let token_key = ids::random_bytes::<32>().map_err(|e| StoreError::Random(e.to_string()))?;
        Ok(TaskStore {
            writer: store.writer_handle(),
            created: Arc::new(Mutex::new(Created::default())),
            db_path: store.path().to_owned(),
            redactor,
            sessions: Arc::new(sessions),
            readers: Arc::new(Mutex::new(Vec::new())),
            workers: Semaphore::new(STORE_WORKERS),
            answer_bytes: Arc::new(Semaphore::new(MAX_STORE_ANSWER_BYTES_IN_FLIGHT)),
            token_key: Arc::new(token_key),
        })
    }

    /// Run `work` on a blocking thread, at most [`STORE_WORKERS`] at once.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, StoreFailure> + Send + 'static,
    ) -> Result<T, StoreFailure> {
        let _permit = self
            .workers
            .acquire()
            .await
            .map_err(|e| storage_failure("the store is closing", e))?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| storage_failure("a store worker failed", e))?
    }

    /// Run `read` on a pooled read-only connection, on a blocking thread.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&mut Connection) -> Result<T, StoreFailure> + Send + 'static,
    ) -> Result<T, StoreFailure> {
        let readers = self.readers.clone();
        let db_path = self.db_path.clone();
        self.blocking(move || {
            let pooled = super::lock(&readers).pop();
            let mut conn = match pooled {
                Some(conn) => conn,
                None => super::schema::open_read_only(&db_path)
                    .map_err(|e| storage_failure("cannot open the task store", e))?,
            };
            let result = read(&mut conn);
            // A connection that failed is not trusted again; a fresh one is opened.
            if !matches!(&result, Err(e) if e.kind == StoreErrorKind::Storage) {
                let mut pool = super::lock(&readers);
                if pool.len() < STORE_WORKERS {
                    pool.push(conn);
                }
            }
            result
        })
        .await
    }

    /// `CreateTask`: a fresh task id, and `context_id` or a fresh one; remembered until
    /// the task's first write. Stores nothing.
    pub fn create(
        &self,
        context_id: Option<ContextId>,
    ) -> Result<(TaskId, ContextId), StoreFailure> {
        self.create_in(context_id, "")
    }

    /// A task of the owner's own conversation (the terminal console's Ask): ids in the
    /// owner's namespace ([`OWNER_ID_PREFIX`]), continuing `context_id` (which must be
    /// one) or a fresh one. Remembered until the task's first write, as `create`'s are.
    pub fn create_owner(
        &self,
        context_id: Option<ContextId>,
    ) -> Result<(TaskId, ContextId), StoreFailure> {
        self.create_in(context_id, OWNER_ID_PREFIX)
    }

    /// Ids in the namespace `prefix` names: the protocol's (`""`) or the owner's. A given
    /// context must be of that namespace.
    fn create_in(
        &self,
        context_id: Option<ContextId>,
        prefix: &str,
    ) -> Result<(TaskId, ContextId), StoreFailure> {
        let owner = !prefix.is_empty();
        let context_id = match context_id {
            Some(given) => {
                check_id("context id", &given.0)?;
                if is_owner_id(&given.0) != owner {
                    return Err(StoreFailure::invalid(if owner {
                        "not one of the owner's conversations".to_owned()
                    } else {
                        format!(
                            "context ids starting with {OWNER_ID_PREFIX:?} are the owner's own \
                             conversations"
                        )
                    }));
                }
                if self.redactor.found_in(&given.0) {
                    return Err(StoreFailure::invalid(
                        "a context id must not contain a protected secret",
                    ));
                }
                given
            }
            None => ContextId(format!("{prefix}{}", mint_id()?)),
        };
        let id = TaskId(format!("{prefix}{}", mint_id()?));
        super::lock(&self.created).add(id.clone(), context_id.clone());
        Ok((id, context_id))
    }

    /// Take `id` in `context_id` as created here, as an earlier approvald would have: for
    /// tests that seed tasks with ids of their own choosing (a page's order among tasks
    /// of one update time is by id). Nothing netd sends reaches it.
    #[doc(hidden)]
    pub fn admit_for_test(&self, id: TaskId, context_id: ContextId) {
        super::lock(&self.created).add(id, context_id);
    }

    /// `PutTask`: check, redact, insert or replace, then prune to the limits.
    pub async fn put(&self, record: TaskRecord) -> Result<(), StoreFailure> {
        let redactor = self.redactor.clone();
        let prepared = self.blocking(move || prepare(record, &redactor)).await?;
        let task_bytes = self.writer.task_bytes.clone();
        let created = self.created.clone();
        self.writer
            .run(move |conn| {
                let space = write_task(conn, &prepared, &created)?;
                if let Ok(page_size) = super::page_size_of(conn) {
                    task_bytes.store(space.page_bytes(page_size), Ordering::Relaxed);
                }
                Ok(())
            })
            .await
            .map_err(|e| storage_failure("the store's writer is gone", e))?
    }

    /// `GetTask`.
    pub async fn get(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreFailure> {
        self.get_counted(id).await.map(|(record, _)| record)
    }

    /// `GetTask`, with the document's share of [`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`]:
    /// taken before the document is read (its size is a column of its own), to be held
    /// until the answer is sent.
    pub async fn get_counted(
        &self,
        id: TaskId,
    ) -> Result<(Option<TaskRecord>, AnswerBytes), StoreFailure> {
        check_id("task id", &id.0)?;
        let sized = id.clone();
        let bytes = self
            .read(move |conn| {
                conn.query_row("SELECT bytes FROM tasks WHERE id = ?1", [&sized.0], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()
                .map_err(sql_error("cannot read the task"))
            })
            .await?;
        let Some(bytes) = bytes else {
            return Ok((None, AnswerBytes(None)));
        };
        let mut held = self
            .answer_bytes(usize::try_from(bytes).unwrap_or(usize::MAX))
            .await?;
        let record = self
            .read(move |conn| {
                let row = select_task(conn, &id).map_err(sql_error("cannot read the task"))?;
                row.map(|(context_id, state, updated_ms, document)| {
                    stored_record(id.0, context_id, state, updated_ms, document)
                })
                .transpose()
            })
            .await?;
        // Replaced by a larger document between the two reads: count the difference.
        let read = record.as_ref().map_or(0, |r| r.document.len());
        let counted = held.0.as_ref().map_or(0, |p| p.num_permits());
        if read > counted {
            let more = self.answer_bytes(read - counted).await?;
            if let (Some(held), Some(more)) = (held.0.as_mut(), more.0) {
                held.merge(more);
            }
        }
        Ok((record, held))
    }

    /// A share of [`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`] for an answer of `bytes` (at most
    /// the whole budget), waiting for it while others hold it.
    async fn answer_bytes(&self, bytes: usize) -> Result<AnswerBytes, StoreFailure> {
        let share = bytes.clamp(1, MAX_STORE_ANSWER_BYTES_IN_FLIGHT);
        let share = u32::try_from(share).unwrap_or(u32::MAX);
        let permit = self
            .answer_bytes
            .clone()
            .acquire_many_owned(share)
            .await
            .map_err(|e| storage_failure("the store is closing", e))?;
        Ok(AnswerBytes(Some(permit)))
    }

    /// `ListTasks`: newest update first, keyset pages.
    pub async fn list(&self, query: TaskQuery) -> Result<TaskPage, StoreFailure> {
        self.list_counted(query).await.map(|(page, _)| page)
    }

    /// `ListTasks`, with the page's share of [`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`]: the
    /// largest page's before the read, what the page holds after it.
    pub async fn list_counted(
        &self,
        query: TaskQuery,
    ) -> Result<(TaskPage, AnswerBytes), StoreFailure> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&query.page_size) {
            return Err(StoreFailure::invalid(format!(
                "page_size must be {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}, not {}",
                query.page_size
            )));
        }
        if let Some(context_id) = &query.context_id {
            check_id("context id", &context_id.0)?;
        }
        let filters = filter_digest(&query);
        // An empty token is no token: in ProtoJSON an empty string and an absent field
        // are the same value, so a client may send `"pageToken": ""` for the first page.
        let after = match query.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => Some(decode_token(&self.token_key, &filters, token)?),
        };
        let key = self.token_key.clone();
        let mut held = self.answer_bytes(MAX_PAGE_BYTES).await?;
        let page = self
            .read(move |conn| list_page(conn, &query, after, &key, &filters))
            .await?;
        let bytes: usize = page.tasks.iter().map(|t| t.document.len()).sum();
        if let Some(permit) = held.0.as_mut() {
            // The rest of the reservation goes back at once.
            let keep = bytes.clamp(1, permit.num_permits());
            drop(permit.split(permit.num_permits() - keep));
        }
        Ok((page, held))
    }

    /// `LoadSession`.
    pub async fn load_session(
        &self,
        context_id: ContextId,
    ) -> Result<Option<String>, StoreFailure> {
        check_id("context id", &context_id.0)?;
        let sessions = self.sessions.clone();
        self.blocking(move || sessions.load(&context_id)).await
    }

    /// `SaveSession`.
    pub async fn save_session(
        &self,
        context_id: ContextId,
        messages_json: String,
    ) -> Result<(), StoreFailure> {
        check_id("context id", &context_id.0)?;
        let sessions = self.sessions.clone();
        self.blocking(move || sessions.save(&context_id, messages_json))
            .await
    }
}

/// An id as the store accepts it: 1 to [`MAX_ID_BYTES`] bytes.
pub(super) fn check_id(what: &str, id: &str) -> Result<(), StoreFailure> {
    if id.is_empty() {
        return Err(StoreFailure::invalid(format!("the {what} is empty")));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(StoreFailure::invalid(format!(
            "the {what} is {} bytes; the limit is {MAX_ID_BYTES}",
            id.len()
        )));
    }
    Ok(())
}

/// Check `record` (ids, size, the document against its columns) and redact it.
fn prepare(record: TaskRecord, redactor: &Redactor) -> Result<Prepared, StoreFailure> {
    let TaskRecord {
        id,
        context_id,
        state,
        updated_ms,
        document,
    } = record;
    check_id("task id", &id.0)?;
    check_id("context id", &context_id.0)?;
    if redactor.found_in(&id.0) || redactor.found_in(&context_id.0) {
        return Err(StoreFailure::invalid(
            "a task or context id must not contain a protected secret",
        ));
    }
    if document.len() > MAX_TASK_DOCUMENT_BYTES {
        return Err(StoreFailure::too_large(format!(
            "the task document is {} bytes; the limit is {MAX_TASK_DOCUMENT_BYTES}",
            document.len()
        )));
    }
    let mut value: Value = serde_json::from_str(&document)
        .map_err(|e| StoreFailure::invalid(format!("the task document is not JSON: {e}")))?;
    check_agrees(&value, &id.0, &context_id.0, state)?;
    let document = redactor
        .redact_json(document, &mut value)
        .map_err(|e| StoreFailure::invalid(format!("the task document cannot be stored: {e}")))?;
    if document.len() > MAX_TASK_DOCUMENT_BYTES {
        return Err(StoreFailure::too_large(format!(
            "the task document is {} bytes with its secrets redacted; the limit is \
             {MAX_TASK_DOCUMENT_BYTES}",
            document.len()
        )));
    }
    // Redaction never touches these unless a secret is spelled in them.
    check_agrees(&value, &id.0, &context_id.0, state)?;
    Ok(Prepared {
        id: id.0,
        context_id: context_id.0,
        state,
        updated_ms,
        document,
    })
}

/// The document is a JSON object whose `id`, `contextId` and `status.state` are the
/// record's columns.
fn check_agrees(
    value: &Value,
    id: &str,
    context_id: &str,
    state: TaskState,
) -> Result<(), StoreFailure> {
    let Some(task) = value.as_object() else {
        return Err(StoreFailure::invalid(
            "the task document is not a JSON object",
        ));
    };
    if task.get("id").and_then(Value::as_str) != Some(id) {
        return Err(StoreFailure::invalid(
            "the task document's id is not the record's task id",
        ));
    }
    if task.get("contextId").and_then(Value::as_str) != Some(context_id) {
        return Err(StoreFailure::invalid(
            "the task document's contextId is not the record's context id",
        ));
    }
    let stated = task
        .get("status")
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str);
    if stated != Some(state.as_a2a()) {
        return Err(StoreFailure::invalid(format!(
            "the task document's status.state is not {}, the record's state",
            state.as_a2a()
        )));
    }
    Ok(())
}

/// Insert or replace `task` and prune, in one transaction; the space in use after it. A
/// task not in the table must be one of `created` (writes run one at a time on the
/// writer thread, so nothing comes between this check and the insert).
fn write_task(
    conn: &mut Connection,
    task: &Prepared,
    created: &Mutex<Created>,
) -> Result<TaskSpace, StoreFailure> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error("cannot begin a task write"))?;
    let before = TaskSpace::measure(&tx).map_err(sql_error("cannot measure the task store"))?;
    let existing: Option<(SqlValue, SqlValue)> = tx
        .query_row(
            "SELECT context_id, state FROM tasks WHERE id = ?1",
            [&task.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql_error("cannot read the task"))?;
    if let Some((context_id, state)) = existing {
        if context_id != SqlValue::Text(task.context_id.clone()) {
            return Err(StoreFailure::invalid(
                "the task is stored under another context; a task's context never changes",
            ));
        }
        let state = match state {
            SqlValue::Text(s) => TaskState::from_a2a(&s),
            _ => None,
        };
        if let Some(state) = state.filter(|s| s.is_terminal()) {
            // A retry of the write that finished it changes nothing, and is no error.
            let same: bool = tx
                .query_row(
                    "SELECT state = ?2 AND updated_ms = ?3 AND document = ?4 FROM tasks \
                     WHERE id = ?1",
                    rusqlite::params![task.id, task.state.as_a2a(), task.updated_ms, task.document],
                    |r| r.get(0),
                )
                .map_err(sql_error("cannot read the task"))?;
            if same {
                return Ok(before);
            }
            return Err(StoreFailure::invalid(format!(
                "the task is {} already; a finished task never changes",
                state.as_a2a()
            )));
        }
    } else if !super::lock(created).holds(&task.id, &task.context_id) {
        return Err(StoreFailure::invalid(
            "no such task was created (CreateTask), in this context, and left unwritten; \
             task ids are minted by the store",
        ));
    }
    tx.execute(
        "INSERT INTO tasks (id, context_id, state, updated_ms, bytes, document) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (id) DO UPDATE SET context_id = excluded.context_id, \
         state = excluded.state, updated_ms = excluded.updated_ms, bytes = excluded.bytes, \
         document = excluded.document",
        rusqlite::params![
            task.id,
            task.context_id,
            task.state.as_a2a(),
            task.updated_ms,
            task.document.len() as i64,
            task.document
        ],
    )
    .map_err(sql_error("cannot write the task"))?;
    let (after, pruned) = prune(&tx, &task.id).map_err(sql_error("cannot prune old tasks"))?;
    if !after.within_ceiling()
        && (after.tasks > before.tasks || after.document_bytes > before.document_bytes)
    {
        // Dropping the transaction rolls the write back.
        return Err(StoreFailure::too_large(format!(
            "the task store is full of unfinished tasks, which are never pruned: this write \
             would make it {} tasks with {} bytes of documents, past {CEILING_TASKS} tasks \
             or {CEILING_DOCUMENT_BYTES} bytes",
            after.tasks, after.document_bytes
        )));
    }
    tx.commit().map_err(sql_error("cannot commit the task"))?;
    super::lock(created).remove(&task.id);
    if pruned > 0 {
        tracing::debug!(pruned, tasks = after.tasks, "old finished tasks pruned");
    }
    Ok(after)
}

/// Delete the oldest terminal tasks (by update time, then id), never `keep`, until the
/// table is within its limits or none is left to delete. The space after it, and how
/// many were deleted.
fn prune(tx: &Transaction<'_>, keep: &str) -> rusqlite::Result<(TaskSpace, u64)> {
    let mut space = TaskSpace::measure(tx)?;
    if space.within_limits() {
        return Ok((space, 0));
    }
    let mut victims = Vec::new();
    {
        let mut oldest = tx.prepare(&format!(
            "SELECT id, bytes FROM tasks WHERE state IN {TERMINAL_STATES_SQL} AND id <> ?1 \
             ORDER BY updated_ms ASC, id ASC"
        ))?;
        let mut rows = oldest.query([keep])?;
        let mut left = space;
        while !left.within_limits() {
            let Some(row) = rows.next()? else { break };
            let id: SqlValue = row.get(0)?;
            let bytes: i64 = row.get::<_, Option<i64>>(1)?.unwrap_or(0);
            left.tasks = left.tasks.saturating_sub(1);
            left.document_bytes = left
                .document_bytes
                .saturating_sub(u64::try_from(bytes).unwrap_or(0));
            victims.push(id);
        }
    }
    let mut delete = tx.prepare("DELETE FROM tasks WHERE id = ?1")?;
    for id in &victims {
        delete.execute([id])?;
    }
    if !victims.is_empty() {
        space = TaskSpace::measure(tx)?;
    }
    Ok((space, victims.len() as u64))
}

/// The stored columns of task `id`: context id, state, update time, document.
type TaskColumns = (SqlValue, SqlValue, SqlValue, SqlValue);

fn select_task(conn: &Connection, id: &TaskId) -> rusqlite::Result<Option<TaskColumns>> {
    conn.query_row(
        "SELECT context_id, state, updated_ms, document FROM tasks WHERE id = ?1",
        [&id.0],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()
}

/// A stored row as a record; a row that is not what this store writes is a storage error.
fn stored_record(
    id: String,
    context_id: SqlValue,
    state: SqlValue,
    updated_ms: SqlValue,
    document: SqlValue,
) -> Result<TaskRecord, StoreFailure> {
    let broken = || {
        storage_failure(
            "a stored task is damaged",
            "its columns are not what this store writes",
        )
    };
    let (
        SqlValue::Text(context_id),
        SqlValue::Text(state),
        SqlValue::Integer(updated_ms),
        SqlValue::Text(document),
    ) = (context_id, state, updated_ms, document)
    else {
        return Err(broken());
    };
    let state = TaskState::from_a2a(&state).ok_or_else(broken)?;
    Ok(TaskRecord {
        id: TaskId(id),
        context_id: ContextId(context_id),
        state,
        updated_ms,
        document,
    })
}

/// The `WHERE` conditions and their parameters for `query`'s filters.
fn filter_sql(query: &TaskQuery) -> (Vec<String>, Vec<SqlValue>) {
    let mut conditions = Vec::new();
    let mut params = Vec::new();
    if let Some(context_id) = &query.context_id {
        params.push(SqlValue::Text(context_id.0.clone()));
        conditions.push(format!("context_id = ?{}", params.len()));
    }
    if let Some(state) = query.state {
        params.push(SqlValue::Text(state.as_a2a().to_owned()));
        conditions.push(format!("state = ?{}", params.len()));
    }
    if let Some(after) = query.updated_after_ms {
        params.push(SqlValue::Integer(after));
        conditions.push(format!("updated_ms > ?{}", params.len()));
    }
    if !query.include_owner {
        // Every owner task has an owner context (`create_owner`).
        params.push(SqlValue::Text(OWNER_ID_PREFIX.to_owned()));
        let n = params.len();
        conditions.push(format!("substr(context_id, 1, length(?{n})) <> ?{n}"));
    }
    (conditions, params)
}

fn where_clause(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    }
}

/// One page, read in one snapshot: the count, the keys of the page (and one more, to
/// know whether another page follows), then the documents of the page.
fn list_page(
    conn: &mut Connection,
    query: &TaskQuery,
    after: Option<Cursor>,
    key: &[u8; 32],
    filters: &[u8; 32],
) -> Result<TaskPage, StoreFailure> {
    let tx = conn
        .transaction()
        .map_err(sql_error("cannot begin reading tasks"))?;
    let (mut conditions, mut params) = filter_sql(query);
    let total: i64 = tx
        .query_row(
            &format!("SELECT count(*) FROM tasks {}", where_clause(&conditions)),
            rusqlite::params_from_iter(params.iter()),
            |r| r.get(0),
        )
        .map_err(sql_error("cannot count tasks"))?;
    if let Some(after) = &after {
        params.push(SqlValue::Integer(after.updated_ms));
        let ms = params.len();
        params.push(SqlValue::Text(after.id.clone()));
        let id = params.len();
        conditions.push(format!(
            "(updated_ms < ?{ms} OR (updated_ms = ?{ms} AND id < ?{id}))"
        ));
    }
    params.push(SqlValue::Integer(i64::from(query.page_size) + 1));
    let limit = params.len();
    let keys: Vec<(String, i64, i64)> = {
        let mut stmt = tx
            .prepare(&format!(
                "SELECT id, updated_ms, bytes + length(CAST(id AS BLOB)) \
                 + length(CAST(context_id AS BLOB)) FROM tasks {} \
                 ORDER BY updated_ms DESC, id DESC LIMIT ?{limit}",
                where_clause(&conditions)
            ))
            .map_err(sql_error("cannot list tasks"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                ))
            })
            .map_err(sql_error("cannot list tasks"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql_error("cannot list tasks"))?
    };
    // As many as asked for, and as fit a frame; never none while any is left.
    let mut taken = 0;
    let mut bytes = 0usize;
    for (_, _, size) in keys.iter().take(query.page_size as usize) {
        let size = usize::try_from(*size).unwrap_or(usize::MAX);
        if taken > 0 && bytes.saturating_add(size) > MAX_PAGE_BYTES {
            break;
        }
        bytes = bytes.saturating_add(size);
        taken += 1;
    }
    let mut tasks = Vec::with_capacity(taken);
    {
        let mut read = tx
            .prepare("SELECT context_id, state, updated_ms, document FROM tasks WHERE id = ?1")
            .map_err(sql_error("cannot read a task"))?;
        for (id, _, _) in &keys[..taken] {
            let (context_id, state, updated_ms, document) = read
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .map_err(sql_error("cannot read a task"))?;
            tasks.push(stored_record(
                id.clone(),
                context_id,
                state,
                updated_ms,
                document,
            )?);
        }
    }
    let next_page_token = match (keys.len() > taken, tasks.last()) {
        (true, Some(last)) => encode_token(
            key,
            filters,
            &Cursor {
                updated_ms: last.updated_ms,
                id: last.id.0.clone(),
            },
        ),
        _ => String::new(),
    };
    Ok(TaskPage {
        tasks,
        total_size: u64::try_from(total).unwrap_or(0),
        next_page_token,
    })
}

/// Mark every task that was submitted or working as failed (see the module docs), in one
/// transaction; how many there were.
pub(super) fn fail_interrupted(conn: &mut Connection, now_ms: i64) -> Result<usize, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let ids: Vec<SqlValue> = {
        let mut stmt = tx.prepare(&format!(
            "SELECT id FROM tasks WHERE state IN {RUNNING_STATES_SQL}"
        ))?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let timestamp = clock::rfc3339_millis(now_ms);
    for (n, id) in ids.iter().enumerate() {
        let (context_id, document): (SqlValue, SqlValue) = tx.query_row(
            "SELECT context_id, document FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let message_id = restart_message_id(now_ms, n);
        let document = failed_document(id, &context_id, &document, &timestamp, &message_id);
        tx.execute(
            "UPDATE tasks SET state = ?2, updated_ms = ?3, bytes = ?4, document = ?5 \
             WHERE id = ?1",
            rusqlite::params![
                id,
                TaskState::Failed.as_a2a(),
                now_ms,
                document.len() as i64,
                document
            ],
        )?;
    }
    tx.commit()?;
    Ok(ids.len())
}

/// `document` with its status replaced by a failed one saying why. A document that is not
/// a JSON object (damaged) is replaced by the least task that says so.
fn failed_document(
    id: &SqlValue,
    context_id: &SqlValue,
    document: &SqlValue,
    timestamp: &str,
    message_id: &str,
) -> String {
    let parsed = match document {
        SqlValue::Text(text) => serde_json::from_str::<Value>(text).ok(),
        _ => None,
    };
    let mut task = match parsed {
        Some(Value::Object(task)) => task,
        _ => {
            let text = |v: &SqlValue| match v {
                SqlValue::Text(s) => Value::String(s.clone()),
                _ => Value::Null,
            };
            let mut task = Map::new();
            task.insert("id".into(), text(id));
            task.insert("contextId".into(), text(context_id));
            task
        }
    };
    task.insert(
        "status".into(),
        json!({
            "state": TaskState::Failed.as_a2a(),
            "timestamp": timestamp,
            "message": {
                "messageId": message_id,
                "role": "ROLE_AGENT",
                "parts": [{ "text": RESTART_MESSAGE }],
            },
        }),
    );
    Value::Object(task).to_string()
}

/// A fresh task or context id. Without the OS random source there is none: an id made
/// from the time could repeat one in the table.
fn mint_id() -> Result<String, StoreFailure> {
    ids::new_uuid_v4().map_err(|e| storage_failure("no system randomness for a new id", e))
}

/// A fresh message id, or, should the OS random source fail, one made unique by the time
/// and position.
fn restart_message_id(now_ms: i64, n: usize) -> String {
    ids::new_uuid_v4().unwrap_or_else(|_| format!("nl2sh-restart-{now_ms}-{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_uuid_v4_text_and_differ() {
        let a = mint_id().unwrap();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
        assert_ne!(a, mint_id().unwrap());
    }

    #[test]
    fn the_oldest_unwritten_creations_are_forgotten_past_the_limit() {
        let mut created = Created::default();
        for n in 0..=MAX_UNSTORED_CREATED {
            created.add(TaskId(format!("t{n}")), ContextId("c".into()));
        }
        assert_eq!(created.ids.len(), MAX_UNSTORED_CREATED);
        assert!(!created.holds("t0", "c"));
        assert!(created.holds("t1", "c"));
        assert!(!created.holds("t1", "other"));
        created.remove("t1");
        assert!(!created.holds("t1", "c"));
    }

    #[test]
    fn restart_ids_are_uuids() {
        let id = restart_message_id(0, 0);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert_ne!(id, restart_message_id(0, 0));
    }

    #[test]
    fn a_damaged_document_fails_as_a_minimal_task() {
        let doc = failed_document(
            &SqlValue::Text("t".into()),
            &SqlValue::Text("c".into()),
            &SqlValue::Text("not json".into()),
            "2026-01-01T00:00:00.000Z",
            "m",
        );
        let v: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["id"], "t");
        assert_eq!(v["contextId"], "c");
        assert_eq!(v["status"]["state"], "TASK_STATE_FAILED");
        assert_eq!(v["status"]["message"]["parts"][0]["text"], RESTART_MESSAGE);
    }
}
