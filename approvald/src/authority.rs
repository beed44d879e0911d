//! Approval authority: decides whether an action the executor prepared may run, records
//! the decision (committed before it is answered), and records how decided calls ended.
//!
//! Decision rule for now: read-only actions are allowed; anything else runs only when the
//! configuration says `protocol_auto_approve = true` (re-read for every decision); the
//! rest is refused, because the local approval path does not exist yet. A configuration
//! that cannot be read refuses (fail closed).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use nl2sh_proto::channels::{
    ActionSummary, AuthorityResponse, CallResult, Decision, RemoteError, RemoteErrorKind, RiskLevel,
};
use nl2sh_proto::limits::MAX_TOOL_NAME_BYTES;

use crate::policy;
use crate::store::{AuditKind, AuditRecord, Store};

/// Rendered action text.
pub const MAX_ACTION_BYTES: usize = 16 * 1024;
/// Outcome summary text.
pub const MAX_SUMMARY_BYTES: usize = 4 * 1024;
/// Decided calls remembered until their outcome arrives, so the outcome row can repeat
/// what ran. The oldest is forgotten first; its outcome row then carries only the call id.
pub const MAX_REMEMBERED_CALLS: usize = 512;

pub const REASON_READ_ONLY: &str = "read-only";
pub const REASON_AUTO_APPROVED: &str = "protocol_auto_approve = true";
pub const REASON_NO_APPROVER: &str = "needs local approval, which is not available yet";
pub const REASON_CONFIG_UNREADABLE: &str =
    "the configuration could not be read, so nothing is approved automatically";

pub struct Authority {
    store: Store,
    config_path: PathBuf,
    decided: Mutex<Remembered>,
}

/// Decided calls by call id, with an insertion sequence for eviction.
#[derive(Default)]
struct Remembered {
    next_seq: u64,
    calls: HashMap<u64, (u64, ActionSummary, Decision)>,
}

impl Remembered {
    fn insert(&mut self, summary: ActionSummary, decision: Decision) {
        if self.calls.len() >= MAX_REMEMBERED_CALLS && !self.calls.contains_key(&summary.call_id) {
            let oldest = self.calls.iter().min_by_key(|(_, (seq, ..))| *seq);
            if let Some((&id, _)) = oldest {
                self.calls.remove(&id);
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.calls.insert(summary.call_id, (seq, summary, decision));
    }

    fn take(&mut self, call_id: u64) -> Option<(ActionSummary, Decision)> {
        self.calls.remove(&call_id).map(|(_, s, d)| (s, d))
    }
}

impl Authority {
    pub fn new(store: Store, config_path: impl Into<PathBuf>) -> Self {
        Self {
            store,
            config_path: config_path.into(),
            decided: Mutex::new(Remembered::default()),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Decide, record the decision, and only then answer it.
    pub async fn decide(&self, summary: ActionSummary) -> AuthorityResponse {
        let call_id = match check_action(&summary) {
            Ok(id) => id,
            Err(why) => return invalid(why),
        };
        let (decision, reason) = self.judge(&summary).await;
        let mut record = AuditRecord::new(AuditKind::Decision, call_id);
        describe_action(&mut record, &summary);
        record.decision = Some(decision.as_str().to_owned());
        record.reason = Some(reason.to_owned());
        if let Err(e) = self.store.append(record).await {
            tracing::error!(error = %e, call_id, "decision not recorded; not answering it");
            return AuthorityResponse::Error(RemoteError {
                kind: RemoteErrorKind::Unavailable,
                message: "the decision could not be recorded, so it is not given".into(),
            });
        }
        tracing::info!(
            call_id,
            tool = %summary.tool,
            risk = summary.risk.as_str(),
            decision = decision.as_str(),
            "decided"
        );
        self.remembered().insert(summary, decision);
        AuthorityResponse::Decided {
            decision,
            reason: reason.to_owned(),
        }
    }

    /// Queue the outcome row (committed in order, not awaited) and answer `Recorded`.
    pub async fn finished(&self, result: CallResult) -> AuthorityResponse {
        let (call_id, duration_ms) = match check_result(&result) {
            Ok(ids) => ids,
            Err(why) => return invalid(why),
        };
        let mut record = AuditRecord::new(AuditKind::Outcome, call_id);
        if let Some((summary, decision)) = self.remembered().take(result.call_id) {
            describe_action(&mut record, &summary);
            record.decision = Some(decision.as_str().to_owned());
        }
        record.success = Some(result.success);
        record.exit_code = result.exit_code.map(i64::from);
        record.duration_ms = Some(duration_ms);
        record.summary = Some(result.summary);
        match self.store.append_nowait(record).await {
            Ok(()) => AuthorityResponse::Recorded,
            Err(e) => {
                tracing::error!(error = %e, call_id, "outcome not recorded");
                AuthorityResponse::Error(RemoteError {
                    kind: RemoteErrorKind::Unavailable,
                    message: "the outcome could not be recorded".into(),
                })
            }
        }
    }

    async fn judge(&self, summary: &ActionSummary) -> (Decision, &'static str) {
        if summary.risk == RiskLevel::ReadOnly {
            return (Decision::Allowed, REASON_READ_ONLY);
        }
        let path = self.config_path.clone();
        let auto = tokio::task::spawn_blocking(move || policy::auto_approve(&path)).await;
        match auto {
            Ok(Ok(true)) => (Decision::AutoApproved, REASON_AUTO_APPROVED),
            Ok(Ok(false)) => (Decision::Refused, REASON_NO_APPROVER),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "configuration unreadable; refusing");
                (Decision::Refused, REASON_CONFIG_UNREADABLE)
            }
            Err(e) => {
                tracing::error!(error = %e, "configuration reader failed; refusing");
                (Decision::Refused, REASON_CONFIG_UNREADABLE)
            }
        }
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Remembered> {
        // The map is consistent after every statement; a panic elsewhere cannot tear it.
        self.decided.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn invalid(why: String) -> AuthorityResponse {
    tracing::warn!(why = %why, "invalid authority request");
    AuthorityResponse::Error(RemoteError {
        kind: RemoteErrorKind::InvalidRequest,
        message: why,
    })
}

fn describe_action(record: &mut AuditRecord, s: &ActionSummary) {
    record.origin = Some(s.origin.as_str().to_owned());
    record.tool = Some(s.tool.clone());
    record.action = Some(s.action.clone());
    record.arguments_sha256 = Some(s.arguments_sha256.to_ascii_lowercase());
    record.risk = Some(s.risk.as_str().to_owned());
    record.requires_root = Some(s.requires_root);
    record.identity = Some(s.identity.as_str().to_owned());
}

fn check_call_id(call_id: u64) -> Result<i64, String> {
    i64::try_from(call_id).map_err(|_| format!("call id {call_id} is out of range"))
}

fn check_len(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!(
            "{field} is {} bytes; the limit is {max}",
            text.len()
        ));
    }
    Ok(())
}

/// Everything a decision row stores is bounded and well-formed; the call id as stored.
fn check_action(s: &ActionSummary) -> Result<i64, String> {
    let call_id = check_call_id(s.call_id)?;
    if s.tool.is_empty() {
        return Err("tool name is empty".into());
    }
    check_len("tool name", &s.tool, MAX_TOOL_NAME_BYTES)?;
    check_len("action", &s.action, MAX_ACTION_BYTES)?;
    if s.arguments_sha256.len() != 64 || !s.arguments_sha256.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err("arguments_sha256 must be 64 hexadecimal characters".into());
    }
    Ok(call_id)
}

/// The call id and duration as stored.
fn check_result(r: &CallResult) -> Result<(i64, i64), String> {
    let call_id = check_call_id(r.call_id)?;
    check_len("summary", &r.summary, MAX_SUMMARY_BYTES)?;
    let duration =
        i64::try_from(r.duration_ms).map_err(|_| "duration_ms is out of range".to_string())?;
    Ok((call_id, duration))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{CallOrigin, Identity};

    fn summary(call_id: u64) -> ActionSummary {
        ActionSummary {
            call_id,
            origin: CallOrigin::McpHttp,
            tool: "shell".into(),
            action: "true".into(),
            arguments_sha256: "a".repeat(64),
            risk: RiskLevel::Medium,
            requires_root: false,
            identity: Identity::Launching,
            reasons: Vec::new(),
        }
    }

    #[test]
    fn remembered_calls_are_bounded_oldest_first() {
        let mut r = Remembered::default();
        for id in 0..(MAX_REMEMBERED_CALLS as u64 + 10) {
            r.insert(summary(id), Decision::Allowed);
        }
        assert_eq!(r.calls.len(), MAX_REMEMBERED_CALLS);
        assert!(r.take(9).is_none());
        assert!(r.take(10).is_some());
        assert!(r.take(10).is_none());
    }

    #[test]
    fn checks() {
        assert!(check_action(&summary(1)).is_ok());
        assert!(check_action(&summary(u64::MAX)).is_err());
        let mut s = summary(1);
        s.arguments_sha256 = "g".repeat(64);
        assert!(check_action(&s).is_err());
        s.arguments_sha256 = "a".repeat(63);
        assert!(check_action(&s).is_err());
        let mut s = summary(1);
        s.tool = "t".repeat(MAX_TOOL_NAME_BYTES + 1);
        assert!(check_action(&s).is_err());
        let mut s = summary(1);
        s.tool.clear();
        assert!(check_action(&s).is_err());
        let r = CallResult {
            call_id: 1,
            success: true,
            exit_code: Some(0),
            duration_ms: u64::MAX,
            summary: String::new(),
        };
        assert!(check_result(&r).is_err());
    }
}
