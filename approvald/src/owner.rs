//! What the owner may do from the Web console, once [`sessions`] has checked the request's
//! proof: the same things the CLI does (list and decide pending requests, read the audit
//! and the tasks), and the "MCP / A2A" settings through the configuration editor
//! ([`crate::config_edit`]).
//!
//! The console itself is unprivileged and holds no state: every request carries the
//! session secret from its cookie, checked here (never there), so a console that was
//! taken over can do no more than the sessions it is handed allow.
//!
//! Every answer fits a frame: lists that could outgrow one (tasks, audit rows) are cut
//! at [`MAX_ANSWER_BYTES`], newest kept.

pub mod asks;
pub mod sessions;

use std::path::Path;

use nl2sh_proto::announcement::{self, ConnectionInfo};
use nl2sh_proto::channels::{
    ApprovalId, CliErrorKind, OwnerErrorKind, OwnerResponse, PendingApproval, StoreErrorKind,
    StoreFailure, TaskId, TaskQuery, TaskRecord,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{MAX_JSON_TEXT_BYTES, MAX_PAGE_SIZE, MAX_WEB_BODY_BYTES};
use nl2sh_proto::secret::Secret;
use nl2sh_proto::state_layout;

use crate::authority::Authority;
use crate::config_edit::{self, SavedSetting, SettingRefused};
use crate::pending::Decider;
use crate::policy::{self, Grant};
use crate::store::tasks::TaskStore;
use crate::store::VerifyReport;

pub use sessions::OwnerSessions;

/// Most tasks one answer lists.
pub const MAX_TASKS_LISTED: u32 = MAX_PAGE_SIZE;
/// Most audit rows one answer holds.
pub const MAX_AUDIT_ROWS: u32 = 500;
/// Bytes of task documents, or of audit rows' JSON, one answer holds at most: a frame
/// (5 MiB) must hold the answer, and 100 tasks of 4 MiB or 500 rows of escaped 16 KiB
/// actions would not fit. What does not fit is left out, oldest first.
pub const MAX_ANSWER_BYTES: usize = MAX_JSON_TEXT_BYTES;
/// Longest setting key looked at (the editor knows the real keys; this only bounds what
/// reaches it).
pub const MAX_SETTING_KEY_BYTES: usize = 128;

pub fn refused(kind: OwnerErrorKind, message: impl Into<String>) -> OwnerResponse {
    OwnerResponse::Refused {
        kind,
        message: message.into(),
    }
}

/// The CLI's error kinds as the console's.
pub fn owner_kind(kind: CliErrorKind) -> OwnerErrorKind {
    match kind {
        CliErrorKind::NoSuchRequest => OwnerErrorKind::NoSuchRequest,
        CliErrorKind::Expired => OwnerErrorKind::Expired,
        CliErrorKind::PhraseRequired => OwnerErrorKind::PhraseRequired,
        CliErrorKind::WrongPhrase => OwnerErrorKind::WrongPhrase,
        CliErrorKind::InvalidRequest => OwnerErrorKind::Invalid,
        CliErrorKind::Unavailable | CliErrorKind::NoAgent => OwnerErrorKind::Unavailable,
    }
}

fn store_refused(failure: StoreFailure) -> OwnerResponse {
    let kind = match failure.kind {
        StoreErrorKind::Invalid | StoreErrorKind::BadPageToken => OwnerErrorKind::Invalid,
        StoreErrorKind::TooLarge | StoreErrorKind::Storage => OwnerErrorKind::Unavailable,
    };
    refused(kind, failure.message)
}

/// Approve or reject pending request `id` from the console: the CLI's path, with the
/// phrase rules unchanged, and the console named in the recorded reason.
pub fn decide(
    authority: &Authority,
    id: &ApprovalId,
    approve: bool,
    phrase: Option<&str>,
) -> OwnerResponse {
    let decided = if approve {
        authority.approve_by(id, phrase, Decider::Web)
    } else {
        authority.reject_by(id, Decider::Web)
    };
    done(decided)
}

/// `Done`, or the refusal in the console's terms.
pub fn done(r: Result<(), (CliErrorKind, String)>) -> OwnerResponse {
    match r {
        Ok(()) => OwnerResponse::Done,
        Err((kind, message)) => refused(owner_kind(kind), message),
    }
}

/// The configured grants, one line each, read as a decision reads the file.
pub async fn grants(config_path: &Path) -> OwnerResponse {
    let path = config_path.to_owned();
    match tokio::task::spawn_blocking(move || policy::load(&path)).await {
        Ok(Ok(policy)) => OwnerResponse::Grants(policy.grants.iter().map(grant_line).collect()),
        Ok(Err(e)) => refused(
            OwnerErrorKind::Unavailable,
            format!(
                "the configuration cannot be used, so no grant applies until it is fixed: {}",
                e.detail()
            ),
        ),
        Err(_) => refused(
            OwnerErrorKind::Unavailable,
            "the configuration could not be read",
        ),
    }
}

/// One grant as a line: its tool, what it names (a command pattern, an exact action, or
/// everything the tool does), the highest risk it covers, and the one caller it is for.
/// Texts from the file go through the one escaping function.
pub fn grant_line(grant: &Grant) -> String {
    let covers = match (&grant.command, &grant.action) {
        (Some(command), _) => format!("command {}", Shown::display(command)),
        (None, Some(action)) => format!("action \"{}\"", Shown::new(action)),
        (None, None) => "any action".into(),
    };
    let origin = grant
        .origin
        .map(|o| format!(", only from {}", o.origin().as_str()))
        .unwrap_or_default();
    format!(
        "{}: {covers} (up to {} risk{origin})",
        Shown::new(&grant.tool),
        grant.max_risk.level().as_str()
    )
}

/// The newest tasks, `limit` clamped to 1..=[`MAX_TASKS_LISTED`], within
/// [`MAX_ANSWER_BYTES`] of documents.
pub async fn tasks(tasks: &TaskStore, limit: u32) -> OwnerResponse {
    let query = TaskQuery {
        context_id: None,
        state: None,
        updated_after_ms: None,
        page_size: limit.clamp(1, MAX_TASKS_LISTED),
        page_token: None,
        // The owner sees every task: the protocol's and their own.
        include_owner: true,
    };
    match tasks.list(query).await {
        Ok(page) => OwnerResponse::Tasks(within_budget(page.tasks, |t: &TaskRecord| {
            t.document.len() + t.id.0.len() + t.context_id.0.len()
        })),
        Err(e) => store_refused(e),
    }
}

/// Pending requests, oldest first, each Agent step with its task's goal (read from the
/// task store; a task it cannot read shows without one).
pub async fn pending(authority: &Authority, tasks: &TaskStore) -> Vec<PendingApproval> {
    let mut list = authority.list_pending();
    for p in &mut list {
        if let Some(id) = &p.task {
            if let Ok(Some(task)) = tasks.get(id.clone()).await {
                p.goal = nl2sh_proto::requester::goal_of(&task.document);
            }
        }
    }
    list
}

pub async fn task(tasks: &TaskStore, id: TaskId) -> OwnerResponse {
    match tasks.get(id).await {
        Ok(Some(task)) => OwnerResponse::Task(task),
        Ok(None) => refused(OwnerErrorKind::NoSuchTask, "no such task"),
        Err(e) => store_refused(e),
    }
}

/// The newest audit rows, newest first, `limit` clamped to 1..=[`MAX_AUDIT_ROWS`], each
/// the JSON object `protocol audit --json` prints. Committed first, like the CLI's
/// `audit`, so every call answered so far is there.
pub async fn audit(authority: &Authority, limit: u32) -> OwnerResponse {
    let store = authority.store();
    if let Err(e) = authority.flush_answered().await {
        return refused(
            OwnerErrorKind::Unavailable,
            format!("the audit could not be committed: {e}"),
        );
    }
    let limit = usize::try_from(limit.clamp(1, MAX_AUDIT_ROWS)).unwrap_or(1);
    match store.recent(limit).await {
        Ok(rows) => {
            let rows = rows.iter().rev().map(|r| r.to_json().to_string()).collect();
            OwnerResponse::Audit(within_budget(rows, String::len))
        }
        Err(e) => refused(
            OwnerErrorKind::Unavailable,
            format!("the audit cannot be read: {e}"),
        ),
    }
}

/// `protocol audit --verify`, committed first like it: whether the chain is intact, in
/// one line.
pub async fn verify_audit(authority: &Authority) -> OwnerResponse {
    let store = authority.store();
    if let Err(e) = authority.flush_answered().await {
        return refused(
            OwnerErrorKind::Unavailable,
            format!("the audit could not be committed: {e}"),
        );
    }
    match store.verify().await {
        Ok(report) => OwnerResponse::Verified {
            intact: report.is_intact(),
            message: verified_line(&report),
        },
        Err(e) => refused(
            OwnerErrorKind::Unavailable,
            format!("the audit cannot be verified: {e}"),
        ),
    }
}

/// What `protocol audit --verify` says, on one line: the rows verified, or the first
/// place the chain breaks (and the tail file's finding when that is broken too).
pub fn verified_line(report: &VerifyReport) -> String {
    let problems = report.problems();
    if !problems.is_empty() {
        return problems.join("; ");
    }
    format!("{}; {}", report.intact_line(), report.tail)
}

/// The settings as the configuration editor reads them.
pub async fn settings(config_path: &Path) -> OwnerResponse {
    let path = config_path.to_owned();
    match tokio::task::spawn_blocking(move || config_edit::settings(&path)).await {
        Ok(Ok(list)) => OwnerResponse::Settings(list),
        Ok(Err(message)) => refused(OwnerErrorKind::Unavailable, message),
        Err(_) => refused(
            OwnerErrorKind::Unavailable,
            "the settings could not be read",
        ),
    }
}

/// Save `key = value` with the configuration editor, as `nl2sh config set` does. The value
/// may be a credential: it is never logged, and only the key is.
pub async fn save_setting(
    config_path: &Path,
    state_dir: &Path,
    key: String,
    value: Secret,
) -> OwnerResponse {
    if key.is_empty() || key.len() > MAX_SETTING_KEY_BYTES {
        return refused(
            OwnerErrorKind::Invalid,
            format!("a setting's key is 1 to {MAX_SETTING_KEY_BYTES} bytes"),
        );
    }
    if value.expose().len() > MAX_WEB_BODY_BYTES {
        return refused(
            OwnerErrorKind::Invalid,
            format!("a setting's value is at most {MAX_WEB_BODY_BYTES} bytes"),
        );
    }
    let path = config_path.to_owned();
    let state_dir = state_dir.to_owned();
    let shown_key = Shown::new(&key).to_string();
    let saved = tokio::task::spawn_blocking(move || {
        config_edit::save_setting(&path, &key, value.expose(), &|| running_here(&state_dir))
    })
    .await;
    if matches!(saved, Ok(Ok(_))) {
        tracing::info!(key = %shown_key, "setting saved from the Web console");
    }
    saved_answer(saved)
}

/// A new random `protocol_token` (never shown back).
pub async fn rotate_token(config_path: &Path, state_dir: &Path) -> OwnerResponse {
    let path = config_path.to_owned();
    let state_dir = state_dir.to_owned();
    let saved = tokio::task::spawn_blocking(move || {
        config_edit::rotate_token(&path, &|| running_here(&state_dir))
    })
    .await;
    if matches!(saved, Ok(Ok(_))) {
        tracing::info!("protocol token rotated from the Web console");
    }
    saved_answer(saved)
}

/// The protocol process approvald runs in, as its announcement says: approvald lives only
/// as long as its supervisor, which holds the state directory, so the record there (once
/// written) is its own and needs no liveness check.
fn running_here(state_dir: &Path) -> Option<ConnectionInfo> {
    announcement::read_record(&state_layout::CONNECTION_JSON.in_dir(state_dir))
        .ok()
        .flatten()
}

fn saved_answer(
    saved: Result<Result<SavedSetting, SettingRefused>, tokio::task::JoinError>,
) -> OwnerResponse {
    match saved {
        Ok(Ok(SavedSetting {
            message,
            restart_needed,
        })) => OwnerResponse::Saved {
            message,
            restart_needed,
        },
        Ok(Err(SettingRefused::Invalid(message))) => refused(OwnerErrorKind::Invalid, message),
        Ok(Err(SettingRefused::Failed(message))) => refused(OwnerErrorKind::Unavailable, message),
        Err(_) => refused(
            OwnerErrorKind::Unavailable,
            "the setting could not be saved",
        ),
    }
}

/// The first items (newest) whose sizes add up to at most [`MAX_ANSWER_BYTES`]; the
/// first one always (each fits a frame on its own).
fn within_budget<T>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<T> {
    let mut total = 0usize;
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        total = total.saturating_add(size(&item));
        if total > MAX_ANSWER_BYTES && !kept.is_empty() {
            break;
        }
        kept.push(item);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> Grant {
        let mut policy = policy::parse(Path::new("c.toml"), text).unwrap();
        policy.grants.remove(0)
    }

    #[test]
    fn grants_read_as_one_line_each() {
        assert_eq!(
            grant_line(&grant(
                "[[approval_grants]]\ntool = 'shell.exec'\ncommand = ['ls', '-l', '*']\n"
            )),
            r#"shell.exec: command ["ls", "-l", "*"] (up to low risk)"#
        );
        assert_eq!(
            grant_line(&grant(
                "[[approval_grants]]\ntool = 'fs.write'\nmax_risk = 'medium'\norigin = 'mcp_stdio'\n"
            )),
            "fs.write: any action (up to medium risk, only from mcp_stdio)"
        );
        assert_eq!(
            grant_line(&grant(
                "[[approval_grants]]\ntool = 'shell.exec'\naction = \"am start\\u001b[2J\"\nmax_risk = 'high'\n"
            )),
            r#"shell.exec: action "am start\x1b[2J" (up to high risk)"#
        );
    }

    #[test]
    fn answers_stay_within_their_budget() {
        let big = MAX_ANSWER_BYTES / 3;
        let kept = within_budget(vec![big, big, big, big, 1], |n| *n);
        assert_eq!(kept, vec![big, big, big]);
        // One item over the budget still goes alone.
        assert_eq!(
            within_budget(vec![MAX_ANSWER_BYTES + 1, 1], |n| *n),
            vec![MAX_ANSWER_BYTES + 1]
        );
        assert_eq!(
            within_budget(Vec::<usize>::new(), |n| *n),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn cli_error_kinds_map_to_the_consoles() {
        for (cli, owner) in [
            (CliErrorKind::NoSuchRequest, OwnerErrorKind::NoSuchRequest),
            (CliErrorKind::Expired, OwnerErrorKind::Expired),
            (CliErrorKind::PhraseRequired, OwnerErrorKind::PhraseRequired),
            (CliErrorKind::WrongPhrase, OwnerErrorKind::WrongPhrase),
            (CliErrorKind::InvalidRequest, OwnerErrorKind::Invalid),
            (CliErrorKind::Unavailable, OwnerErrorKind::Unavailable),
        ] {
            assert_eq!(owner_kind(cli), owner);
        }
    }
}
