//! `notifications/progress` for a client that asked for them (a `progressToken` in the
//! request's `_meta`): while `nl2sh_invoke`, `nl2sh_read_screen` or `nl2sh_ask` waits,
//! the person at the client sees why, above all "waiting for the owner's approval
//! (request ID, N s left)".
//!
//! netd asks the executor where the call stands ([`ExecutorClient::progress`]) every
//! [`POLL`], and sends a notification when what it would say changes. Polling keeps the
//! channels strictly one answer per request; it costs one small round trip a second,
//! and only for calls whose client asked.

use std::time::Duration;

use nl2sh_proto::channels::{CallStage, Correlation};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use crate::executor::ExecutorClient;

/// How often a followed call's stage is asked for (the countdown's resolution).
pub const POLL: Duration = Duration::from_secs(1);
/// When it is first asked for: most calls have answered by then.
pub const FIRST: Duration = Duration::from_millis(250);

/// Where a request's progress notifications go.
pub struct Reporter {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// Notifications sent: the `progress` value, which must increase with each one.
    sent: u32,
    last: Option<String>,
}

impl Reporter {
    /// A reporter for this request, if its client sent a `progressToken`.
    pub fn for_request(context: &RequestContext<RoleServer>) -> Option<Self> {
        let token = context.meta.get_progress_token()?;
        Some(Self {
            peer: context.peer.clone(),
            token,
            sent: 0,
            last: None,
        })
    }

    /// Send `message`, unless it is what the last notification said. A client that went
    /// away is not an error: the call goes on and answers as usual.
    pub async fn say(&mut self, message: String) {
        if self.last.as_deref() == Some(message.as_str()) {
            return;
        }
        self.sent += 1;
        let param = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent))
            .with_message(message.clone());
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
        self.last = Some(message);
    }

    /// Ask where the call netd knows by `correlation` stands and say it, prefixed by
    /// `prefix` (the Agent's step). Nothing is said for a call not (or no longer)
    /// running, or when the executor does not answer.
    pub async fn follow(
        &mut self,
        executor: &ExecutorClient,
        correlation: Correlation,
        prefix: &str,
    ) {
        if let Ok(Some(stage)) = executor.progress(correlation).await {
            self.say(format!("{prefix}{}", describe(&stage))).await;
        }
    }
}

/// What a call's stage means to the person waiting on it.
pub fn describe(stage: &CallStage) -> String {
    match stage {
        CallStage::Queued => "waiting for another call to finish with what this one uses".into(),
        CallStage::Deciding { wait: None } => "being checked against the owner's policy".into(),
        CallStage::Deciding { wait: Some(wait) } => format!(
            "waiting for the owner's approval (request {}, {} s left)",
            wait.id, wait.seconds_left
        ),
        CallStage::Running => "running".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{ApprovalId, ApprovalWait};

    #[test]
    fn the_approval_wait_names_the_request_and_the_time_left() {
        let wait = ApprovalWait {
            id: ApprovalId("k3xq7a".into()),
            seconds_left: 97,
        };
        assert_eq!(
            describe(&CallStage::Deciding { wait: Some(wait) }),
            "waiting for the owner's approval (request k3xq7a, 97 s left)"
        );
    }
}
