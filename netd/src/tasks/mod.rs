//! The task service: delegated tasks for the built-in Agent, shared by A2A and the MCP
//! task tools (HTTP and stdio).
//!
//! * A task is created SUBMITTED (its ids minted by approvald, which owns the store),
//!   becomes WORKING when its turn comes, and ends COMPLETED, FAILED or CANCELED. Each
//!   transition is stored (PutTask) before anyone can see it, so a terminal task read
//!   back from the store is what the last answer showed.
//! * At most [`MAX_ACTIVE_TASKS`] are active, counting those waiting for their context;
//!   one more is refused at once ([`TaskError::Busy`]).
//! * Tasks of one context run one after another in the order they were stored (their
//!   Agent history is one conversation); different contexts run concurrently.
//! * Every task runs in its own spawned task, never in a request's future: a client that
//!   disconnects (or an MCP request that is cancelled) cancels nothing. Only
//!   [`TaskService::cancel`] and [`TaskService::drain`] fire a task's cancellation token;
//!   the Agent then cancels its executor call (process group killed, pending approval
//!   withdrawn) and the run settles.

pub mod document;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nl2sh_proto::channels::{
    is_owner_id, CallOrigin, ContextId, OwnerWork, TaskId, TaskQuery, TaskState, OWNER_ID_PREFIX,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{
    MAX_ACTIVE_TASKS, MAX_ID_BYTES, MAX_OWNER_TASKS, MAX_TASK_DOCUMENT_BYTES,
};
use nl2sh_proto::requester::ClientName;
use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AgentEnd, AgentJob, AgentRun, AgentStep, StepSender};
use crate::store::{StoreClient, StoreClientError};
use document::{Ending, TaskDoc};

/// How long [`TaskService::cancel`] waits for a cancelled run to settle before it
/// answers with the task as it stands. The Agent settles within its current operation
/// (a killed process group, a withdrawn approval); this only keeps a stuck run from
/// holding the caller forever.
pub const CANCEL_SETTLE_WAIT: Duration = Duration::from_secs(60);

/// Whatever works a task: the built-in [`Agent`] in production, a scripted stand-in in
/// tests.
pub trait Runner: Send + Sync + 'static {
    /// Work `job` until it ends or `cancel` fires (then settle and say so).
    fn work(
        self: Arc<Self>,
        job: AgentJob,
        cancel: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = AgentRun> + Send + 'static>>;
}

impl Runner for Agent {
    fn work(
        self: Arc<Self>,
        job: AgentJob,
        cancel: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = AgentRun> + Send + 'static>> {
        Box::pin(async move { self.run(job, cancel).await })
    }
}

/// A runner that fails every task with one reason: what netd runs when the Agent could
/// not be built, so tasks say why instead of netd refusing to serve the direct tools.
pub struct Unavailable(pub String);

impl Runner for Unavailable {
    fn work(
        self: Arc<Self>,
        _job: AgentJob,
        _cancel: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = AgentRun> + Send + 'static>> {
        Box::pin(async move {
            AgentRun {
                end: AgentEnd::Failed,
                status_text: self.0.clone(),
                result: None,
                history: None,
            }
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("task {0} not found")]
    NotFound(String),
    #[error("task {id} is {state} and cannot be canceled")]
    NotCancelable { id: String, state: &'static str },
    /// The active-task limit. The text names the limit (clients show it).
    #[error(
        "refused: {MAX_ACTIVE_TASKS} active tasks already (the limit, counting tasks \
         waiting for their context or an approval); try again when one ends"
    )]
    Busy,
    /// The owner's own limit ([`MAX_OWNER_TASKS`]).
    #[error(
        "refused: {MAX_OWNER_TASKS} of the owner's tasks are active already; wait for one to end"
    )]
    OwnerBusy,
    #[error("the service is shutting down and takes no new tasks")]
    Draining,
    #[error(transparent)]
    Store(#[from] StoreClientError),
    #[error("the stored task is unreadable")]
    Unreadable,
    /// A protocol caller named one of the owner's own conversations.
    #[error(
        "context ids starting with {OWNER_ID_PREFIX:?} are the device owner's own conversations"
    )]
    OwnersConversation,
}

/// A new task, validated by its front door.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// `AgentHttp`, `AgentStdio` or `OwnerTui`: the origin of the Agent's tool calls for
    /// this task.
    pub agent_origin: CallOrigin,
    /// The ids approvald already minted (the owner's Ask); `None`: ask approvald now.
    pub ids: Option<(TaskId, ContextId)>,
    /// Continue this context; `None` starts a new one.
    pub context: Option<ContextId>,
    /// The user's text (1–8192 bytes, checked by the caller).
    pub text: String,
    /// The user's message in the 1.0 shape (`messageId`, `role`, `parts`, …); the
    /// service adds `contextId` and `taskId`.
    pub message: Map<String, Value>,
    /// The delegating client's own name for itself: the Agent's calls carry it to the
    /// owner's approval requests.
    pub client: Option<ClientName>,
}

/// A task's current document and state.
#[derive(Debug, Clone)]
struct Snapshot {
    state: TaskState,
    doc: Arc<Value>,
}

/// A created task, to watch it reach a terminal state.
pub struct TaskHandle {
    id: TaskId,
    rx: watch::Receiver<Snapshot>,
    step: watch::Receiver<Option<AgentStep>>,
    /// The document as stored at creation (SUBMITTED).
    submitted: Arc<Value>,
}

/// Where a task stands while it runs: its state and the Agent's step.
pub struct TaskProgress {
    rx: watch::Receiver<Snapshot>,
    step: watch::Receiver<Option<AgentStep>>,
}

impl TaskProgress {
    pub fn now(&self) -> (TaskState, Option<AgentStep>) {
        (self.rx.borrow().state, self.step.borrow().clone())
    }
}

impl TaskHandle {
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The task as it was created: SUBMITTED (A2A `returnImmediately`).
    pub fn submitted(&self) -> Value {
        (*self.submitted).clone()
    }

    /// To follow the task's state and its Agent's step.
    pub fn progress(&self) -> TaskProgress {
        TaskProgress {
            rx: self.rx.clone(),
            step: self.step.clone(),
        }
    }

    /// The task as it stands.
    pub fn current(&self) -> Value {
        (*self.rx.borrow().doc).clone()
    }

    /// The task once terminal (or as it last stood, if its runner went away).
    pub async fn terminal(mut self) -> Value {
        let _ = self.rx.wait_for(|s| s.state.is_terminal()).await;
        self.current()
    }
}

/// A ListTasks page, documents already parsed.
#[derive(Debug)]
pub struct Page {
    pub tasks: Vec<Value>,
    pub total_size: u64,
    pub next_page_token: String,
}

/// What each active task leaves with the service.
struct Active {
    cancel: CancellationToken,
    snapshot: watch::Receiver<Snapshot>,
}

#[derive(Default)]
struct State {
    active: HashMap<TaskId, Active>,
    /// Submissions counted against the limit while approvald mints their ids.
    reserved: usize,
    /// The owner's submissions not yet active.
    owner_reserved: usize,
    /// Per context, the last task in line and the signal it sends when it (and every
    /// task before it) is done.
    tails: HashMap<ContextId, (TaskId, watch::Receiver<bool>)>,
}

struct Inner {
    store: StoreClient,
    runner: Arc<dyn Runner>,
    state: Mutex<State>,
    draining: AtomicBool,
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere (which aborts netd anyway).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The service. Cheap to clone; every clone is the same service.
#[derive(Clone)]
pub struct TaskService {
    inner: Arc<Inner>,
}

impl TaskService {
    pub fn new(store: StoreClient, runner: Arc<dyn Runner>) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                runner,
                state: Mutex::new(State::default()),
                draining: AtomicBool::new(false),
            }),
        }
    }

    /// Tasks not yet terminal, including those waiting for their context.
    pub fn active_count(&self) -> usize {
        self.inner.state().active.len()
    }

    /// Create a task: refused at once over the limit or while draining; otherwise
    /// approvald mints its ids (and a context's, when none is given), and it is stored
    /// SUBMITTED before this returns, and runs when its context is free. Dropping the
    /// returned future or handle does not affect a task once created.
    pub async fn submit(&self, new: NewTask) -> Result<TaskHandle, TaskError> {
        let owner = new.agent_origin == CallOrigin::OwnerTui;
        let asked = new.context.filter(|c| !c.0.is_empty());
        if !owner && asked.as_ref().is_some_and(|c| is_owner_id(&c.0)) {
            return Err(TaskError::OwnersConversation);
        }
        let reservation = Reservation::take(&self.inner, owner)?;
        let (id, context) = match new.ids {
            // Only the owner's Ask arrives with ids, and only ids of the owner's.
            Some((id, context)) if owner && is_owner_id(&id.0) && is_owner_id(&context.0) => {
                (id, context)
            }
            Some(_) => return Err(TaskError::OwnersConversation),
            None if owner => return Err(TaskError::OwnersConversation),
            None => self.inner.store.create_task(asked.as_ref()).await?,
        };
        let doc = TaskDoc::new(id.clone(), context.clone(), new.message);
        let submitted = Arc::new(doc.to_json());
        let (tx, rx) = watch::channel(Snapshot {
            state: TaskState::Submitted,
            doc: submitted.clone(),
        });
        let cancel = CancellationToken::new();
        let (step_tx, step_rx) = watch::channel(None);
        {
            let mut state = self.inner.state();
            reservation.release(&mut state);
            // A drain that began while the ids were minted has not seen this task.
            if self.inner.draining.load(Ordering::Acquire) {
                return Err(TaskError::Draining);
            }
            if state.active.contains_key(&id) {
                return Err(TaskError::Store(StoreClientError::BadAnswer(
                    "a created task id already in use".into(),
                )));
            }
            state.active.insert(
                id.clone(),
                Active {
                    cancel: cancel.clone(),
                    snapshot: rx.clone(),
                },
            );
        }
        let (stored_tx, stored_rx) = oneshot::channel();
        let task = Task {
            inner: self.inner.clone(),
            doc,
            text: new.text,
            origin: new.agent_origin,
            client: new.client,
            cancel,
            snapshot: tx,
            step: Arc::new(step_tx),
        };
        // From here on the task's fate is its own spawned future's, whatever happens to
        // the caller's.
        tokio::spawn(task.drive(stored_tx));
        match stored_rx.await {
            Ok(Ok(())) => Ok(TaskHandle {
                id,
                rx,
                step: step_rx,
                submitted,
            }),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(TaskError::Store(StoreClientError::BadAnswer(
                "the task ended before it was stored".into(),
            ))),
        }
    }

    /// The task as it stands: from memory while active, else from the store. The
    /// owner's own tasks are not the protocol's to see.
    pub async fn get(&self, id: &str) -> Result<Value, TaskError> {
        if id.is_empty() || id.len() > MAX_ID_BYTES || is_owner_id(id) {
            return Err(TaskError::NotFound(shown(id)));
        }
        let id = TaskId(id.to_string());
        if let Some(active) = self.inner.state().active.get(&id) {
            return Ok((*active.snapshot.borrow().doc).clone());
        }
        match self.inner.store.get_task(&id).await? {
            Some(record) => parse_document(&record.document),
            None => Err(TaskError::NotFound(shown(&id.0))),
        }
    }

    /// One page of stored tasks, newest update first.
    pub async fn list(&self, query: TaskQuery) -> Result<Page, TaskError> {
        let page = self.inner.store.list_tasks(query).await?;
        let tasks = page
            .tasks
            .iter()
            .map(|r| parse_document(&r.document))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page {
            tasks,
            total_size: page.total_size,
            next_page_token: page.next_page_token,
        })
    }

    /// Cancel an active task and wait (at most [`CANCEL_SETTLE_WAIT`]) for it to
    /// settle; answers the task as it then stands. A terminal task is not cancelable.
    pub async fn cancel(&self, id: &str) -> Result<Value, TaskError> {
        if is_owner_id(id) {
            return Err(TaskError::NotFound(shown(id)));
        }
        self.cancel_any(id).await
    }

    /// Take the owner's work from the terminal console (approvald hands it over as the
    /// answer to a `NextOwnerWork` kept outstanding) until the store channel ends. A
    /// goal becomes a task of origin `owner_tui` under the ids approvald minted; one that
    /// cannot start is stored FAILED with the reason, so the console shows why.
    pub async fn serve_owner(self) {
        loop {
            match self.inner.store.next_owner_work().await {
                Ok(OwnerWork::Ask {
                    id,
                    context_id,
                    text,
                }) => self.start_owner_task(id, context_id, text).await,
                Ok(OwnerWork::Cancel { id }) => {
                    let service = self.clone();
                    tokio::spawn(async move {
                        if let Err(e) = service.cancel_owner(&id.0).await {
                            tracing::info!(error = %e, "the owner's cancel found nothing to cancel");
                        }
                    });
                }
                Err(StoreClientError::Unavailable(_)) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot take the owner's work");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    async fn start_owner_task(&self, id: TaskId, context_id: ContextId, text: String) {
        let Ok(message_id) = nl2sh_proto::ids::new_uuid_v4() else {
            tracing::warn!("no system randomness for a message id; the owner's task is lost");
            return;
        };
        let message = Map::from_iter([
            ("messageId".to_string(), Value::String(message_id)),
            ("role".to_string(), Value::String("ROLE_USER".into())),
            ("parts".to_string(), serde_json::json!([{ "text": text }])),
        ]);
        let new = NewTask {
            agent_origin: CallOrigin::OwnerTui,
            ids: Some((id.clone(), context_id.clone())),
            context: Some(context_id.clone()),
            text,
            message: message.clone(),
            client: None,
        };
        let why = match self.submit(new).await {
            Ok(_) => return,
            Err(e) => e.to_string(),
        };
        tracing::warn!(task = %Shown::new(&id.0), error = %Shown::new(&why), "the owner's task could not start");
        let mut doc = TaskDoc::new(id, context_id, message);
        let stored = match doc.finish(Ending {
            state: TaskState::Failed,
            text: why,
            result: None,
        }) {
            Ok(()) => self.inner.store.put_task(doc.record()).await,
            Err(_) => return,
        };
        if let Err(e) = stored {
            tracing::warn!(error = %e, "cannot store the owner's failed task");
        }
    }

    /// The owner's cancel of one of their own tasks (from the terminal console).
    pub async fn cancel_owner(&self, id: &str) -> Result<Value, TaskError> {
        if !is_owner_id(id) {
            return Err(TaskError::NotFound(shown(id)));
        }
        self.cancel_any(id).await
    }

    async fn cancel_any(&self, id: &str) -> Result<Value, TaskError> {
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Err(TaskError::NotFound(shown(id)));
        }
        let id = TaskId(id.to_string());
        let active = self
            .inner
            .state()
            .active
            .get(&id)
            .map(|a| (a.cancel.clone(), a.snapshot.clone()));
        if let Some((cancel, snapshot)) = active {
            tracing::info!(task = %Shown::new(&id.0), "cancel requested");
            cancel.cancel();
            let mut settled = snapshot.clone();
            let waited = tokio::time::timeout(
                CANCEL_SETTLE_WAIT,
                settled.wait_for(|s| s.state.is_terminal()),
            )
            .await;
            if waited.is_err() {
                tracing::warn!(
                    task = %Shown::new(&id.0),
                    "a cancelled task did not settle in time"
                );
            }
            let doc = (*snapshot.borrow().doc).clone();
            return Ok(doc);
        }
        match self.inner.store.get_task(&id).await? {
            None => Err(TaskError::NotFound(shown(&id.0))),
            // Not active here but not terminal either: nothing runs it any more (a
            // task of an earlier netd; approvald fails those at start).
            Some(record) => Err(TaskError::NotCancelable {
                id: shown(&id.0),
                state: record.state.as_a2a(),
            }),
        }
    }

    /// Stop taking tasks, cancel every active one through the same path as
    /// [`TaskService::cancel`], and wait until they settle or `deadline` passes.
    pub async fn drain(&self, deadline: tokio::time::Instant) {
        self.inner.draining.store(true, Ordering::Release);
        let active: Vec<(CancellationToken, watch::Receiver<Snapshot>)> = self
            .inner
            .state()
            .active
            .values()
            .map(|a| (a.cancel.clone(), a.snapshot.clone()))
            .collect();
        if active.is_empty() {
            return;
        }
        tracing::info!(tasks = active.len(), "cancelling active tasks");
        for (cancel, _) in &active {
            cancel.cancel();
        }
        for (_, mut snapshot) in active {
            let settled = snapshot.wait_for(|s| s.state.is_terminal());
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                tracing::warn!("grace expired with tasks still settling");
                return;
            }
        }
    }
}

/// A place under the active-task limit, held while approvald mints a task's ids; given
/// back when the task is active, or when the submission fails or is dropped.
struct Reservation {
    inner: Option<Arc<Inner>>,
    /// A place among the owner's tasks, not the protocol's.
    owner: bool,
}

impl Reservation {
    /// The protocol's tasks and the owner's count against limits of their own, so
    /// callers holding the token cannot starve the owner's Ask, nor the owner theirs.
    fn take(inner: &Arc<Inner>, owner: bool) -> Result<Reservation, TaskError> {
        let mut state = inner.state();
        if inner.draining.load(Ordering::Acquire) {
            return Err(TaskError::Draining);
        }
        let owners = state.active.keys().filter(|id| is_owner_id(&id.0)).count();
        if owner {
            if owners + state.owner_reserved >= MAX_OWNER_TASKS {
                return Err(TaskError::OwnerBusy);
            }
            state.owner_reserved += 1;
        } else {
            if state.active.len() - owners + state.reserved >= MAX_ACTIVE_TASKS {
                return Err(TaskError::Busy);
            }
            state.reserved += 1;
        }
        Ok(Reservation {
            inner: Some(inner.clone()),
            owner,
        })
    }

    /// Give the place back under a lock the caller already holds.
    fn release(mut self, state: &mut State) {
        if self.inner.take().is_some() {
            self.give_back(state);
        }
    }

    fn give_back(&self, state: &mut State) {
        let count = if self.owner {
            &mut state.owner_reserved
        } else {
            &mut state.reserved
        };
        *count = count.saturating_sub(1);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            self.give_back(&mut inner.state());
        }
    }
}

/// An id as error messages show it: bounded.
fn shown(id: &str) -> String {
    nl2sh_proto::text::shortened(id, 64)
}

fn parse_document(text: &str) -> Result<Value, TaskError> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(TaskError::Unreadable),
    }
}

/// One task's own future: everything from its first store write to its last.
struct Task {
    inner: Arc<Inner>,
    doc: TaskDoc,
    text: String,
    origin: CallOrigin,
    client: Option<ClientName>,
    cancel: CancellationToken,
    snapshot: watch::Sender<Snapshot>,
    step: StepSender,
}

impl Task {
    async fn drive(mut self, stored: oneshot::Sender<Result<(), StoreClientError>>) {
        if let Err(e) = self.inner.store.put_task(self.doc.record()).await {
            tracing::warn!(
                task = %Shown::new(&self.doc.id.0),
                error = %Shown::display(&e),
                "task not stored; refused"
            );
            self.inner.state().active.remove(&self.doc.id);
            let _ = stored.send(Err(e));
            return;
        }
        // In line behind the context's last task, and the new last one.
        let (done_tx, done_rx) = watch::channel(false);
        let before = self
            .inner
            .state()
            .tails
            .insert(self.doc.context.clone(), (self.doc.id.clone(), done_rx))
            .map(|(_, rx)| rx);
        let _ = stored.send(Ok(()));
        tracing::info!(task = %Shown::new(&self.doc.id.0), "task submitted");

        let turn = wait_done(before.clone());
        let ending = tokio::select! {
            biased;
            () = self.cancel.cancelled() => Some(self.cancelled_text(None)),
            () = turn => None,
        };
        match ending {
            Some(text) => {
                // Cancelled while waiting: ends now, without running. The next task of
                // the context still waits for the ones before this one.
                self.end(Ending {
                    state: TaskState::Canceled,
                    text,
                    result: None,
                })
                .await;
                wait_done(before).await;
            }
            None => {
                let ending = self.work().await;
                self.end(ending).await;
            }
        }
        let _ = done_tx.send(true);
        let mut state = self.inner.state();
        if state
            .tails
            .get(&self.doc.context)
            .is_some_and(|(last, _)| *last == self.doc.id)
        {
            state.tails.remove(&self.doc.context);
        }
    }

    /// WORKING: load the context's history, run the Agent, save the history of a
    /// completed turn.
    async fn work(&mut self) -> Ending {
        self.doc.advance(TaskState::Working);
        self.publish();
        if let Err(e) = self.inner.store.put_task(self.doc.record()).await {
            // The run goes on: its terminal state is stored again at the end.
            tracing::warn!(
                task = %Shown::new(&self.doc.id.0),
                error = %Shown::display(&e),
                "WORKING not stored"
            );
        }
        let history = match self.load_history().await {
            Ok(history) => history,
            Err(why) => {
                return Ending {
                    state: TaskState::Failed,
                    text: why,
                    result: None,
                }
            }
        };
        if self.cancel.is_cancelled() {
            return Ending {
                state: TaskState::Canceled,
                text: self.cancelled_text(None),
                result: None,
            };
        }
        let job = AgentJob {
            task: self.doc.id.clone(),
            context: self.doc.context.clone(),
            origin: self.origin,
            client: self.client.clone(),
            text: std::mem::take(&mut self.text),
            history,
            step: self.step.clone(),
        };
        let run = self
            .inner
            .runner
            .clone()
            .work(job, self.cancel.clone())
            .await;
        let state = if self.cancel.is_cancelled() {
            // Cancellation asked is what the task shows, whatever the run reached
            // meanwhile.
            TaskState::Canceled
        } else {
            match run.end {
                AgentEnd::Completed => TaskState::Completed,
                AgentEnd::Failed => TaskState::Failed,
                AgentEnd::Canceled => TaskState::Canceled,
            }
        };
        if state == TaskState::Completed {
            if let Some(history) = run.history {
                // Saved before the task is terminal, so the next task of the context
                // starts from it.
                let text = Value::Array(history).to_string();
                if let Err(e) = self.inner.store.save_session(&self.doc.context, text).await {
                    tracing::warn!(
                        task = %Shown::new(&self.doc.id.0),
                        error = %Shown::display(&e),
                        "history not saved"
                    );
                }
            }
        }
        // A cancelled task says who cancelled it (a request, or the service stopping),
        // with what the Agent reported.
        let text = if state == TaskState::Canceled {
            self.cancelled_text(Some(run.status_text))
        } else {
            run.status_text
        };
        Ending {
            state,
            text,
            result: run.result,
        }
    }

    async fn load_history(&self) -> Result<Vec<Value>, String> {
        match self.inner.store.load_session(&self.doc.context).await {
            Ok(None) => Ok(Vec::new()),
            Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Array(messages)) => Ok(messages),
                _ => Err("the stored history of this context is unreadable".into()),
            },
            Err(e) => Err(format!("cannot load the history of this context: {e}")),
        }
    }

    fn cancelled_text(&self, agent: Option<String>) -> String {
        let why = if self.inner.draining.load(Ordering::Acquire) {
            "canceled: the service is shutting down"
        } else {
            "canceled by request"
        };
        match agent {
            Some(text) if !text.is_empty() => format!("{why} ({text})"),
            _ => why.to_string(),
        }
    }

    /// The terminal state: stored, then shown, then the slot is free.
    async fn end(&mut self, ending: Ending) {
        let fallback_state = if ending.state == TaskState::Completed {
            TaskState::Failed
        } else {
            ending.state
        };
        if self.doc.finish(ending).is_err() {
            self.doc.agent_message = None;
            self.doc.artifacts.clear();
            self.doc.advance(fallback_state);
        }
        let mut record = self.doc.record();
        if record.document.len() > MAX_TASK_DOCUMENT_BYTES {
            self.too_large(fallback_state, record.document.len());
            record = self.doc.record();
        }
        let mut stored = true;
        if let Err(e) = self.inner.store.put_task(record).await {
            tracing::warn!(
                task = %Shown::new(&self.doc.id.0),
                error = %Shown::display(&e),
                "terminal state not stored"
            );
            stored = false;
            if e.kind() == Some(nl2sh_proto::channels::StoreErrorKind::TooLarge) {
                self.too_large(fallback_state, 0);
                match self.inner.store.put_task(self.doc.record()).await {
                    Ok(()) => stored = true,
                    Err(e) => tracing::warn!(
                        task = %Shown::new(&self.doc.id.0),
                        error = %Shown::display(&e),
                        "shortened task not stored"
                    ),
                }
            }
        }
        if !stored {
            // Never answer COMPLETED for a task the store lost. FAILED is what the store
            // says after a restart (it holds WORKING); said now too, if it takes it.
            self.without_result(
                TaskState::Failed,
                "the task's end could not be stored (nl2sh's store was unavailable), so it \
                 is reported FAILED, as the store reports it after a restart"
                    .into(),
            );
            if let Err(e) = self.inner.store.put_task(self.doc.record()).await {
                tracing::warn!(
                    task = %Shown::new(&self.doc.id.0),
                    error = %Shown::display(&e),
                    "FAILED not stored either; the store reports WORKING until a restart"
                );
            }
        }
        tracing::info!(
            task = %Shown::new(&self.doc.id.0),
            state = self.doc.state.as_a2a(),
            "task ended"
        );
        self.publish();
        self.inner.state().active.remove(&self.doc.id);
    }

    /// The document without its result, saying why.
    fn too_large(&mut self, state: TaskState, bytes: usize) {
        let text = if bytes > 0 {
            format!(
                "the task's result made its document {bytes} bytes, over the \
                 {MAX_TASK_DOCUMENT_BYTES} byte limit; the result was not kept"
            )
        } else {
            "the store refused the task's document as too large; the result was not kept"
                .to_string()
        };
        self.without_result(state, text);
    }

    /// End in `state` without the result, the Agent's message saying `text` instead.
    fn without_result(&mut self, state: TaskState, text: String) {
        self.doc.artifacts.clear();
        if let Some(Value::Object(message)) = &mut self.doc.agent_message {
            message.insert("parts".into(), serde_json::json!([{ "text": text }]));
        }
        self.doc.advance(state);
    }

    fn publish(&self) {
        let snapshot = Snapshot {
            state: self.doc.state,
            doc: Arc::new(self.doc.to_json()),
        };
        self.snapshot.send_replace(snapshot);
    }
}

/// Resolves once the task behind `signal` (and so every one before it) is done.
async fn wait_done(signal: Option<watch::Receiver<bool>>) {
    if let Some(mut signal) = signal {
        // A dropped sender means its task is gone: done as well.
        let _ = signal.wait_for(|done| *done).await;
    }
}
