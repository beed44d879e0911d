//! netd's end of the store channel (netd → approvald): one method per request, each
//! named after the `answer_x` of approvald's store it pairs with. approvald owns the
//! database; netd only asks. The channel already refuses an answer of the wrong kind
//! (and closes); what is checked here is what the channel cannot know: that a task
//! answered is the one asked for, and that sizes are within the limits.

use nl2sh_proto::channels::{
    ContextId, OwnerWork, StoreErrorKind, StoreFailure, StoreRequest, StoreResponse, TaskId,
    TaskPage, TaskQuery, TaskRecord,
};
use nl2sh_proto::limits::{MAX_ID_BYTES, MAX_TASK_DOCUMENT_BYTES};
use nl2sh_proto::rpc::{ChannelEnd, RpcClient, RpcError};
use nl2sh_proto::topology::{Asker, EndError, NetdApprovald};

/// Why the store did not do what netd asked: netd's view, as the client of the store
/// channel (the channel gone, approvald's refusal, an impossible answer). approvald's
/// own `StoreError` is about its database and files.
#[derive(Debug, thiserror::Error)]
pub enum StoreClientError {
    /// The channel is gone (approvald ended): netd ends soon after.
    #[error("the task store is unavailable ({0})")]
    Unavailable(#[from] RpcError),
    /// approvald refused or failed (`StoreResponse::Failed`).
    #[error("the task store refused: {0}")]
    Refused(StoreFailure),
    /// An answer of the right kind that cannot be right (another task than asked for,
    /// more tasks than the page holds, a document over the limit).
    #[error("the task store answered something impossible: {0}")]
    BadAnswer(String),
}

impl StoreClientError {
    /// The store's own kind, for the cases callers tell apart (a bad page token).
    pub fn kind(&self) -> Option<StoreErrorKind> {
        match self {
            StoreClientError::Refused(f) => Some(f.kind),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct StoreClient {
    rpc: RpcClient<NetdApprovald>,
}

/// The channel refuses an answer of the wrong kind before this sees it; this only names
/// the case for the match that unpacks the right one.
fn unreachable_answer(resp: StoreResponse) -> StoreClientError {
    StoreClientError::Unavailable(RpcError::WrongAnswer(format!("{resp:?}")))
}

fn failed(kind: StoreErrorKind, mut message: String) -> StoreClientError {
    // approvald's text goes into logs and error answers: keep it short.
    let kept = nl2sh_proto::text::prefix(&message, 512).len();
    message.truncate(kept);
    StoreClientError::Refused(StoreFailure { kind, message })
}

fn check_record(record: &TaskRecord) -> Result<(), StoreClientError> {
    if record.document.len() > MAX_TASK_DOCUMENT_BYTES {
        return Err(StoreClientError::BadAnswer(format!(
            "a task document of {} bytes",
            record.document.len()
        )));
    }
    if record.id.0.is_empty()
        || record.id.0.len() > MAX_ID_BYTES
        || record.context_id.0.len() > MAX_ID_BYTES
    {
        return Err(StoreClientError::BadAnswer(
            "a task id out of bounds".into(),
        ));
    }
    Ok(())
}

impl StoreClient {
    /// Handshake with approvald and start the channel.
    pub async fn start(end: Asker<NetdApprovald>) -> Result<(Self, ChannelEnd), EndError> {
        let (rpc, ended) = RpcClient::start(end).await?;
        Ok((Self { rpc }, ended))
    }

    /// Liveness: approvald answers once its store is open (`answer_store`'s Ping).
    pub async fn ping(&self) -> Result<(), StoreClientError> {
        match self.rpc.call(&StoreRequest::Ping).await? {
            StoreResponse::Pong => Ok(()),
            other => Err(unreachable_answer(other)),
        }
    }

    /// The ids of a new task, minted by approvald: a fresh task id, and `context_id` or
    /// a fresh one (`answer_create_task`). Nothing is stored until the first `put_task`.
    pub async fn create_task(
        &self,
        context_id: Option<&ContextId>,
    ) -> Result<(TaskId, ContextId), StoreClientError> {
        let req = StoreRequest::CreateTask {
            context_id: context_id.cloned(),
        };
        match self.rpc.call(&req).await? {
            StoreResponse::Created {
                id,
                context_id: created,
            } => {
                let bounded = |s: &str| !s.is_empty() && s.len() <= MAX_ID_BYTES;
                if !bounded(&id.0) || !bounded(&created.0) {
                    return Err(StoreClientError::BadAnswer(
                        "a created task id out of bounds".into(),
                    ));
                }
                if context_id.is_some_and(|asked| *asked != created) {
                    return Err(StoreClientError::BadAnswer(
                        "a task created in another context than the one asked for".into(),
                    ));
                }
                Ok((id, created))
            }
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// Insert or replace one task (`answer_put_task`).
    pub async fn put_task(&self, record: TaskRecord) -> Result<(), StoreClientError> {
        match self.rpc.call(&StoreRequest::PutTask(record)).await? {
            StoreResponse::Stored => Ok(()),
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// One task, or `None` when the store has none by that id (`answer_get_task`).
    pub async fn get_task(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreClientError> {
        let req = StoreRequest::GetTask { id: id.clone() };
        match self.rpc.call(&req).await? {
            StoreResponse::Task(None) => Ok(None),
            StoreResponse::Task(Some(record)) => {
                check_record(&record)?;
                if record.id != *id {
                    return Err(StoreClientError::BadAnswer(
                        "another task than the one asked for".into(),
                    ));
                }
                Ok(Some(record))
            }
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// One page of tasks, newest update first (`answer_list_tasks`).
    pub async fn list_tasks(&self, query: TaskQuery) -> Result<TaskPage, StoreClientError> {
        let page_size = query.page_size as usize;
        match self.rpc.call(&StoreRequest::ListTasks(query)).await? {
            StoreResponse::Tasks(page) => {
                if page.tasks.len() > page_size {
                    return Err(StoreClientError::BadAnswer(format!(
                        "{} tasks on a page of {page_size}",
                        page.tasks.len()
                    )));
                }
                if page.next_page_token.len() > MAX_PAGE_TOKEN_BYTES {
                    return Err(StoreClientError::BadAnswer(
                        "an oversized page token".into(),
                    ));
                }
                page.tasks.iter().try_for_each(check_record)?;
                Ok(page)
            }
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// The Agent history of a context as JSON text, `None` when it has none yet
    /// (`answer_load_session`).
    pub async fn load_session(
        &self,
        context_id: &ContextId,
    ) -> Result<Option<String>, StoreClientError> {
        let req = StoreRequest::LoadSession {
            context_id: context_id.clone(),
        };
        match self.rpc.call(&req).await? {
            StoreResponse::Session(history) => Ok(history),
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// Replace the history of a context with one more complete turn
    /// (`answer_save_session`).
    pub async fn save_session(
        &self,
        context_id: &ContextId,
        messages_json: String,
    ) -> Result<(), StoreClientError> {
        let req = StoreRequest::SaveSession {
            context_id: context_id.clone(),
            messages_json,
        };
        match self.rpc.call(&req).await? {
            StoreResponse::Stored => Ok(()),
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }

    /// The owner's next Ask or cancel from the terminal console; waits until one comes.
    pub async fn next_owner_work(&self) -> Result<OwnerWork, StoreClientError> {
        match self.rpc.call(&StoreRequest::NextOwnerWork).await? {
            StoreResponse::OwnerWork(work) => Ok(work),
            StoreResponse::Failed { kind, message } => Err(failed(kind, message)),
            other => Err(unreachable_answer(other)),
        }
    }
}

/// Longest page token netd passes on, either way: tokens are the store's opaque
/// cursors, far shorter than this.
pub use nl2sh_proto::limits::MAX_PAGE_TOKEN_BYTES;
