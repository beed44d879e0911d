//! The whole surface each peer can reach in approvald: one `match` per channel. A request
//! out of state (an outcome for a call never let run, a second decision for one call)
//! closes its channel. The Web console's requests have none: every refusal is an answer.

use std::sync::Arc;

use nl2sh_proto::channels::{
    is_owner_id, AuthorityRequest, AuthorityResponse, CliErrorKind, CliRequest, CliResponse,
    ContextId, OwnerAction, OwnerErrorKind, OwnerRequest, OwnerResponse, OwnerWork, StoreRequest,
    StoreResponse,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{MAX_AGENT_TEXT_BYTES, WEB_LOGIN_CODE_TTL};
use nl2sh_proto::rpc::{self, OutOfState};
use nl2sh_proto::topology::{
    Answerer, CliApprovald, ExecutorApprovald, NetdApprovald, WebApprovald,
};
use nl2sh_proto::FrameError;

use crate::authority::Authority;
use crate::owner::asks::{NotTaken, OwnerInbox, HAND_OVER_WAIT};
use crate::owner::sessions::{seconds_ceil, RedeemError};
use crate::owner::{self, refused, OwnerSessions};
use crate::pending::Decider;
use crate::store::tasks::{AnswerBytes, TaskStore};

/// netd's store channel: tasks and sessions. Nothing here creates, lists or decides
/// approvals.
pub async fn serve_netd(
    end: Answerer<NetdApprovald>,
    tasks: Arc<TaskStore>,
    inbox: Arc<OwnerInbox>,
) -> Result<(), FrameError> {
    rpc::serve_holding(end, move |req: StoreRequest| {
        let tasks = tasks.clone();
        let inbox = inbox.clone();
        async move { Ok(answer_store_held(&tasks, &inbox, req).await) }
    })
    .await
}

/// [`answer_store`], with what a large answer holds until it is sent: a task's or a
/// page's share of the store's answer bytes (`MAX_STORE_ANSWER_BYTES_IN_FLIGHT`), so
/// concurrent reads of large tasks queue rather than each holding its copies.
pub async fn answer_store_held(
    tasks: &TaskStore,
    inbox: &OwnerInbox,
    req: StoreRequest,
) -> (StoreResponse, Option<rpc::Hold>) {
    let failed = |e| (StoreResponse::from(e), None);
    let held = |bytes: AnswerBytes| Some(Box::new(bytes) as rpc::Hold);
    match req {
        StoreRequest::GetTask { id } => tasks
            .get_counted(id)
            .await
            .map_or_else(failed, |(record, bytes)| {
                (StoreResponse::Task(record), held(bytes))
            }),
        StoreRequest::ListTasks(query) => tasks
            .list_counted(query)
            .await
            .map_or_else(failed, |(page, bytes)| {
                (StoreResponse::Tasks(page), held(bytes))
            }),
        other => (answer_store(tasks, inbox, other).await, None),
    }
}

/// Every failure is an answer (`Failed`), never a closed channel: a bad document is
/// netd's mistake to report, not a breach of the protocol.
pub async fn answer_store(
    tasks: &TaskStore,
    inbox: &OwnerInbox,
    req: StoreRequest,
) -> StoreResponse {
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
        StoreRequest::NextOwnerWork => StoreResponse::OwnerWork(inbox.next().await),
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
        AuthorityRequest::Waiting { call_id } => {
            Ok(AuthorityResponse::Waiting(authority.waiting(call_id)))
        }
        AuthorityRequest::Policy => {
            Ok(AuthorityResponse::Policy(authority.policy_snapshot().await))
        }
        AuthorityRequest::Ran(ran) => authority.ran(ran).await,
        AuthorityRequest::Recover(row) => Ok(authority.recover(row).await),
        AuthorityRequest::Kept(rows) => authority.kept(rows).await,
    }
}

/// The local CLI over `protocol/approvals.sock`, after the peer's uid and ancestry were
/// checked (see [`crate::socket`]).
pub async fn serve_cli(
    end: Answerer<CliApprovald>,
    authority: Arc<Authority>,
    local: Arc<LocalOwner>,
) -> Result<(), FrameError> {
    let within = Some(crate::socket::HANDSHAKE_TIMEOUT);
    rpc::serve_greeted_within(end, within, move |req: CliRequest| {
        let authority = authority.clone();
        let local = local.clone();
        async move { Ok(answer_cli(&authority, &local, req).await) }
    })
    .await
}

/// What the local owner's commands reach besides decisions: the Web console's sessions
/// and codes (`web login`, `web logout --all`) and the task store (the terminal
/// console's Tasks page).
pub struct LocalOwner {
    pub sessions: Arc<OwnerSessions>,
    pub tasks: Arc<TaskStore>,
    /// The terminal console's Ask, handed to netd's Agent.
    pub inbox: Arc<OwnerInbox>,
}

pub async fn answer_cli(authority: &Authority, local: &LocalOwner, req: CliRequest) -> CliResponse {
    let sessions = &local.sessions;
    let done = |r: Result<(), _>| match r {
        Ok(()) => CliResponse::Done,
        Err((kind, message)) => CliResponse::Error { kind, message },
    };
    match req {
        CliRequest::ListPending => {
            CliResponse::Pending(owner::pending(authority, &local.tasks).await)
        }
        CliRequest::Approve { id, phrase } => done(authority.approve(&id, phrase.as_deref())),
        CliRequest::Reject { id } => done(authority.reject(&id)),
        CliRequest::ApproveForUi {
            id,
            phrase,
            minutes,
        } => done(authority.approve_for_ui(&id, phrase.as_deref(), minutes, Decider::Cli)),
        CliRequest::UiGrants => CliResponse::UiGrants(authority.ui_grants()),
        CliRequest::RevokeUiGrant { id } => done(authority.revoke_ui_grant(&id, Decider::Cli)),
        CliRequest::RejectOrigin { origin } => {
            CliResponse::Rejected(authority.reject_origin(origin, Decider::Cli))
        }
        CliRequest::FlushAudit => match authority.flush_answered().await {
            Ok(()) => CliResponse::Done,
            Err(e) => CliResponse::Error {
                kind: CliErrorKind::Unavailable,
                message: format!("the audit could not be committed: {e}"),
            },
        },
        // Only a person outside the nl2sh process tree reaches this socket, so no tool
        // command can log in to the console.
        CliRequest::WebLogin => match sessions.issue_code() {
            Ok(code) => {
                tracing::info!(
                    valid_secs = WEB_LOGIN_CODE_TTL.as_secs(),
                    "Web console login code issued"
                );
                CliResponse::LoginCode {
                    code,
                    valid_secs: WEB_LOGIN_CODE_TTL.as_secs(),
                }
            }
            Err(e) => CliResponse::Error {
                kind: CliErrorKind::Unavailable,
                message: format!("no login code could be made: the OS random source failed: {e}"),
            },
        },
        CliRequest::WebLogoutAll => {
            let ended = sessions.logout_all();
            tracing::info!(sessions = ended, "every Web console session ended");
            CliResponse::LoggedOut { sessions: ended }
        }
        CliRequest::Tasks { limit } => match owner::tasks(&local.tasks, limit).await {
            OwnerResponse::Tasks(list) => CliResponse::Tasks(list),
            other => cli_refusal(other),
        },
        CliRequest::Task { id } => match owner::task(&local.tasks, id).await {
            OwnerResponse::Task(task) => CliResponse::Task(Some(task)),
            OwnerResponse::Refused {
                kind: OwnerErrorKind::NoSuchTask,
                ..
            } => CliResponse::Task(None),
            other => cli_refusal(other),
        },
        CliRequest::Ask { context_id, text } => ask(local, context_id, text).await,
        CliRequest::CancelTask { id } => {
            if !is_owner_id(&id.0) {
                return CliResponse::Error {
                    kind: CliErrorKind::InvalidRequest,
                    message: "only the owner's own tasks (from Ask) are cancelled here".into(),
                };
            }
            match local
                .inbox
                .hand_over(OwnerWork::Cancel { id }, HAND_OVER_WAIT)
                .await
            {
                Ok(()) => CliResponse::Done,
                Err(e) => not_taken(e),
            }
        }
    }
}

/// The owner's goal for the Agent: ids minted in the owner's namespace, then handed to
/// netd, which stores the task and runs it.
async fn ask(local: &LocalOwner, context_id: Option<ContextId>, text: String) -> CliResponse {
    let invalid = |message: String| CliResponse::Error {
        kind: CliErrorKind::InvalidRequest,
        message,
    };
    if text.trim().is_empty() || text.len() > MAX_AGENT_TEXT_BYTES {
        return invalid(format!(
            "a goal is 1 to {MAX_AGENT_TEXT_BYTES} bytes of text, not {}",
            text.len()
        ));
    }
    let (id, context_id) = match local.tasks.create_owner(context_id) {
        Ok(ids) => ids,
        Err(e) => return invalid(e.message),
    };
    let work = OwnerWork::Ask {
        id: id.clone(),
        context_id: context_id.clone(),
        text,
    };
    match local.inbox.hand_over(work, HAND_OVER_WAIT).await {
        Ok(()) => {
            tracing::info!(task = %Shown::new(&id.0), "the owner asked the Agent");
            CliResponse::Asked { id, context_id }
        }
        Err(e) => not_taken(e),
    }
}

fn not_taken(e: NotTaken) -> CliResponse {
    let kind = match e {
        NotTaken::NoAgent => CliErrorKind::NoAgent,
        NotTaken::Full => CliErrorKind::Unavailable,
    };
    CliResponse::Error {
        kind,
        message: e.to_string(),
    }
}

/// An owner action's refusal as the CLI's error.
fn cli_refusal(answer: OwnerResponse) -> CliResponse {
    let message = match answer {
        OwnerResponse::Refused { message, .. } => message,
        other => format!("approvald answered out of place: {other:?}"),
    };
    CliResponse::Error {
        kind: CliErrorKind::Unavailable,
        message,
    }
}

/// The Web console's owner channel. Every request but a login carries its session's
/// proof, checked before anything else is looked at; changes need the CSRF token too.
/// Nothing here is ever out of state (a refusal is an answer), so only a broken frame
/// ends the channel. A console that closes its end, even before it greeted (it exited,
/// or was never started), is a peer exiting: `Ok`.
pub async fn serve_web(
    end: Answerer<WebApprovald>,
    authority: Arc<Authority>,
    tasks: Arc<TaskStore>,
    sessions: Arc<OwnerSessions>,
) -> Result<(), FrameError> {
    let served = rpc::serve(end, move |req: OwnerRequest| {
        let authority = authority.clone();
        let tasks = tasks.clone();
        let sessions = sessions.clone();
        async move { Ok(answer_web(&authority, &tasks, &sessions, req).await) }
    })
    .await;
    match served {
        // Only the handshake can end that way: closed before its hello, or gone while
        // ours was written.
        Err(FrameError::Closed) => Ok(()),
        Err(FrameError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

pub async fn answer_web(
    authority: &Authority,
    tasks: &TaskStore,
    sessions: &OwnerSessions,
    req: OwnerRequest,
) -> OwnerResponse {
    let no = |why: owner::sessions::Refused| refused(why.kind(), why.to_string());
    let (proof, action) = match req {
        OwnerRequest::RedeemLogin { code } => {
            return match sessions.redeem(&code) {
                Ok(login) => {
                    tracing::info!("Web console session started");
                    OwnerResponse::LoggedIn {
                        session: login.session,
                        csrf: login.csrf,
                        expires_in_secs: seconds_ceil(login.expires_in),
                    }
                }
                Err(RedeemError::Refused(why)) => no(why),
                Err(e @ RedeemError::Random(_)) => {
                    refused(OwnerErrorKind::Unavailable, e.to_string())
                }
            }
        }
        OwnerRequest::Check { proof } => {
            return match sessions.check(&proof, false) {
                Ok(left) => OwnerResponse::Owner {
                    expires_in_secs: seconds_ceil(left),
                },
                Err(why) => no(why),
            }
        }
        OwnerRequest::Logout { proof } => {
            return match sessions.logout(&proof) {
                Ok(()) => {
                    tracing::info!("Web console session ended by its owner");
                    OwnerResponse::Done
                }
                Err(why) => no(why),
            }
        }
        OwnerRequest::Act { proof, action } => (proof, action),
    };
    if let Err(why) = sessions.check(&proof, action.changes()) {
        return no(why);
    }
    let config_path = authority.config_path();
    match action {
        OwnerAction::ListPending => OwnerResponse::Pending(owner::pending(authority, tasks).await),
        OwnerAction::Decide {
            id,
            approve,
            phrase,
        } => owner::decide(authority, &id, approve, phrase.as_deref()),
        OwnerAction::RejectOrigin { origin } => {
            OwnerResponse::Rejected(authority.reject_origin(origin, Decider::Web))
        }
        OwnerAction::ApproveForUi {
            id,
            phrase,
            minutes,
        } => owner::done(authority.approve_for_ui(&id, phrase.as_deref(), minutes, Decider::Web)),
        OwnerAction::UiGrants => OwnerResponse::UiGrants(authority.ui_grants()),
        OwnerAction::RevokeUiGrant { id } => {
            owner::done(authority.revoke_ui_grant(&id, Decider::Web))
        }
        OwnerAction::Grants => owner::grants(config_path).await,
        OwnerAction::Tasks { limit } => owner::tasks(tasks, limit).await,
        OwnerAction::Task { id } => owner::task(tasks, id).await,
        OwnerAction::Audit { limit } => owner::audit(authority, limit).await,
        OwnerAction::VerifyAudit => owner::verify_audit(authority).await,
        OwnerAction::Settings => owner::settings(config_path).await,
        OwnerAction::SaveSetting { key, value } => {
            owner::save_setting(config_path, authority.store().state_dir(), key, value).await
        }
        OwnerAction::RotateToken => {
            owner::rotate_token(config_path, authority.store().state_dir()).await
        }
    }
}
