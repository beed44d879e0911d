//! The whole surface each peer can reach in approvald: one `match` per channel. A request
//! out of state (an outcome for a call never let run, a second decision for one call)
//! closes its channel.

use std::sync::Arc;

use nl2sh_proto::channels::{
    AuthorityRequest, AuthorityResponse, CliErrorKind, CliRequest, CliResponse, StoreRequest,
    StoreResponse,
};
use nl2sh_proto::rpc::{self, OutOfState};
use nl2sh_proto::topology::{Answerer, CliApprovald, ExecutorApprovald, NetdApprovald};
use nl2sh_proto::FrameError;

use crate::authority::Authority;
use crate::store::tasks::TaskStore;

/// netd's store channel: tasks and sessions. Nothing here creates, lists or decides
/// approvals.
pub async fn serve_netd(
    end: Answerer<NetdApprovald>,
    tasks: Arc<TaskStore>,
) -> Result<(), FrameError> {
    rpc::serve(end, move |req: StoreRequest| {
        let tasks = tasks.clone();
        async move { Ok(answer_store(&tasks, req).await) }
    })
    .await
}

/// Every failure is an answer (`Failed`), never a closed channel: a bad document is
/// netd's mistake to report, not a breach of the protocol.
pub async fn answer_store(tasks: &TaskStore, req: StoreRequest) -> StoreResponse {
    let failed = StoreResponse::from;
    match req {
        StoreRequest::Ping => StoreResponse::Pong,
        StoreRequest::CreateTask { context_id } => {
            tasks
                .create(context_id)
                .map_or_else(failed, |(id, context_id)| StoreResponse::Created {
                    id,
                    context_id,
                })
        }
        StoreRequest::PutTask(record) => tasks
            .put(record)
            .await
            .map_or_else(failed, |()| StoreResponse::Stored),
        StoreRequest::GetTask { id } => {
            tasks.get(id).await.map_or_else(failed, StoreResponse::Task)
        }
        StoreRequest::ListTasks(query) => tasks
            .list(query)
            .await
            .map_or_else(failed, StoreResponse::Tasks),
        StoreRequest::LoadSession { context_id } => tasks
            .load_session(context_id)
            .await
            .map_or_else(failed, StoreResponse::Session),
        StoreRequest::SaveSession {
            context_id,
            messages_json,
        } => tasks
            .save_session(context_id, messages_json)
            .await
            .map_or_else(failed, |()| StoreResponse::Stored),
    }
}

/// The executor's authority channel.
pub async fn serve_executor(
    end: Answerer<ExecutorApprovald>,
    authority: Arc<Authority>,
) -> Result<(), FrameError> {
    rpc::serve(end, move |req: AuthorityRequest| {
        let authority = authority.clone();
        async move { answer_authority(&authority, req).await }
    })
    .await
}

pub async fn answer_authority(
    authority: &Authority,
    req: AuthorityRequest,
) -> Result<AuthorityResponse, OutOfState> {
    match req {
        AuthorityRequest::Ping => Ok(AuthorityResponse::Pong),
        AuthorityRequest::Decide(summary) => authority.decide(summary).await,
        AuthorityRequest::Finished(result) => authority.finished(result).await,
        AuthorityRequest::Withdraw { call_id } => Ok(authority.withdraw(call_id)),
        AuthorityRequest::Policy => {
            Ok(AuthorityResponse::Policy(authority.policy_snapshot().await))
        }
        AuthorityRequest::Ran(ran) => authority.ran(ran).await,
        AuthorityRequest::Recover(row) => Ok(authority.recover(row).await),
    }
}

/// The local CLI over `protocol/approvals.sock`, after the peer's uid and ancestry were
/// checked (see [`crate::socket`]).
pub async fn serve_cli(
    end: Answerer<CliApprovald>,
    authority: Arc<Authority>,
) -> Result<(), FrameError> {
    let within = Some(crate::socket::HANDSHAKE_TIMEOUT);
    rpc::serve_greeted_within(end, within, move |req: CliRequest| {
        let authority = authority.clone();
        async move { Ok(answer_cli(&authority, req).await) }
    })
    .await
}

pub async fn answer_cli(authority: &Authority, req: CliRequest) -> CliResponse {
    let done = |r: Result<(), _>| match r {
        Ok(()) => CliResponse::Done,
        Err((kind, message)) => CliResponse::Error { kind, message },
    };
    match req {
        CliRequest::ListPending => CliResponse::Pending(authority.list_pending()),
        CliRequest::Approve { id, phrase } => done(authority.approve(&id, phrase.as_deref())),
        CliRequest::Reject { id } => done(authority.reject(&id)),
        CliRequest::FlushAudit => match authority.store().flush().await {
            Ok(()) => CliResponse::Done,
            Err(e) => CliResponse::Error {
                kind: CliErrorKind::Unavailable,
                message: format!("the audit could not be committed: {e}"),
            },
        },
    }
}
