//! The executor's side of executor → approvald: asking for decisions, reporting how calls
//! ended, and the policy snapshot that lets a confined read-only call run without a round
//! trip (see `nl2sh_proto::snapshot` for why that is exact).
//!
//! The names pair with approvald's `Authority`: `decide` ↔ `decide`, `finished` ↔
//! `finished`, `ran` ↔ `ran`, `refresh` ↔ `policy_snapshot`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use nl2sh_proto::channels::{
    ActionSummary, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CallResult,
    ConfigVersion, Decision, PolicySnapshot, RanRecord,
};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::snapshot::MAX_SNAPSHOT_ORIGINS;
use nl2sh_proto::topology::ExecutorApprovald;

pub type AuthorityClient = RpcClient<ExecutorApprovald>;

/// approvald, as the executor reaches it.
pub struct Authority {
    client: AuthorityClient,
    /// The configuration file approvald reads; its version decides whether the snapshot
    /// still applies.
    config_path: PathBuf,
    snapshot: RwLock<Option<PolicySnapshot>>,
    /// A snapshot request is on its way (at most one at a time).
    refreshing: AtomicBool,
}

impl Authority {
    /// No snapshot yet: until [`Self::refresh`] brings one, every call asks approvald.
    pub fn new(client: AuthorityClient, config_path: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            client,
            config_path: config_path.into(),
            snapshot: RwLock::new(None),
            refreshing: AtomicBool::new(false),
        })
    }

    /// If the snapshot lets a confined read-only call from `origin` run now: the version
    /// of the configuration file it was checked against. When the file is not the one the
    /// snapshot was made from, a fresh snapshot is fetched in the background and this
    /// call asks approvald.
    pub fn lets_read(self: &Arc<Self>, origin: CallOrigin) -> Option<ConfigVersion> {
        let now = ConfigVersion::of(&self.config_path);
        let current = {
            let snapshot = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
            match &*snapshot {
                Some(s) if s.lets_read(&now, origin) => return Some(now),
                Some(s) => s.version.same_as(&now),
                None => false,
            }
        };
        if !current {
            self.refresh_in_background();
        }
        None
    }

    fn refresh_in_background(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            this.refresh().await;
            this.refreshing.store(false, Ordering::Release);
        });
    }

    /// Ask approvald for the snapshot of the configuration as it is now. A failure
    /// leaves no snapshot, so every call asks.
    pub async fn refresh(&self) {
        let fresh = match self.client.call(&AuthorityRequest::Policy).await {
            Ok(AuthorityResponse::Policy(s)) if s.reads_unasked.len() <= MAX_SNAPSHOT_ORIGINS => {
                Some(s)
            }
            Ok(other) => {
                tracing::warn!(answer = ?other, "unusable policy snapshot; every call asks");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "no policy snapshot; every call asks");
                None
            }
        };
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = fresh;
    }

    /// approvald's decision for `summary` (recorded before it is given), and its reason.
    pub async fn decide(&self, summary: ActionSummary) -> (Decision, String) {
        match self.client.call(&AuthorityRequest::Decide(summary)).await {
            Ok(AuthorityResponse::Decided { decision, reason }) => (decision, reason),
            Ok(AuthorityResponse::NotRecorded(why)) => {
                (Decision::Refused, format!("approval failed: {why}"))
            }
            // Any other answer closed the channel (and ends the executor).
            Ok(_) => (Decision::Refused, "approval unavailable".into()),
            Err(e) => (Decision::Refused, format!("approval unavailable: {e}")),
        }
    }

    pub async fn withdraw(&self, call_id: CallId) {
        if let Err(e) = self
            .client
            .call(&AuthorityRequest::Withdraw { call_id })
            .await
        {
            tracing::warn!(error = %e, %call_id, "could not withdraw a pending approval");
        }
    }

    /// How a call approvald decided ended; returns once its row is committed, or why it
    /// could not be.
    pub async fn finished(&self, result: CallResult) -> Result<(), String> {
        recorded(self.client.call(&AuthorityRequest::Finished(result)).await)
    }

    /// A call let run under the snapshot of `policy`, and how it ended; returns once its
    /// row is committed, or why it could not be.
    pub async fn ran(
        &self,
        summary: ActionSummary,
        result: CallResult,
        policy: ConfigVersion,
    ) -> Result<(), String> {
        let record = RanRecord {
            summary,
            result,
            policy,
        };
        recorded(self.client.call(&AuthorityRequest::Ran(record)).await)
    }
}

/// What approvald said to an audit row.
fn recorded(answer: Result<AuthorityResponse, nl2sh_proto::rpc::RpcError>) -> Result<(), String> {
    match answer {
        Ok(AuthorityResponse::Recorded) => Ok(()),
        Ok(AuthorityResponse::NotRecorded(why)) => Err(why),
        // Any other answer closed the channel (and ends the executor).
        Ok(_) => Err("approvald answered out of place".into()),
        Err(e) => Err(e.to_string()),
    }
}
