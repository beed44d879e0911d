//! The executor's side of executor → approvald: asking for decisions, reporting how calls
//! ended, and the policy snapshot that lets a confined read-only call run without a round
//! trip (see `nl2sh_proto::snapshot` for why that is exact).
//!
//! The names pair with approvald's `Authority`: `decide` ↔ `decide`, `report` ↔
//! `kept` (or `finished` or `ran`), `recover` ↔ `recover`, `refresh` ↔ `policy_snapshot`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use nl2sh_proto::channels::{
    ActionSummary, ApprovalWait, AuthorityRequest, AuthorityResponse, CallId, CallOrigin,
    ConfigVersion, Decision, PolicySnapshot, ReportedRow,
};

use super::outbox::{Outbox, Pending};
use nl2sh_proto::limits::{KEPT_ROWS_LINGER, MAX_KEPT_ROWS, MAX_KEPT_ROWS_BYTES};
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
    /// Where answered calls' rows wait for approvald ([`Outbox`]); without one, an answer
    /// waits for approvald's acknowledgement.
    outbox: Option<Arc<Outbox>>,
    /// Rows kept in the outbox and not yet sent to approvald.
    gathered: Mutex<Gathered>,
}

/// Answered calls' rows gathered for [`KEPT_ROWS_LINGER`] and reported together, so
/// that a stream of calls wakes approvald once, not once each.
#[derive(Default)]
struct Gathered {
    rows: Vec<(ReportedRow, Pending)>,
    /// A task is on its way to report them (at most one at a time).
    reporting: bool,
}

impl Authority {
    /// No snapshot yet: until [`Self::refresh`] brings one, every call asks approvald.
    pub fn new(client: AuthorityClient, config_path: impl Into<PathBuf>) -> Arc<Self> {
        Self::with_outbox(client, config_path, None)
    }

    /// Like [`Self::new`], answering calls once their rows are in `outbox`.
    pub fn with_outbox(
        client: AuthorityClient,
        config_path: impl Into<PathBuf>,
        outbox: Option<Arc<Outbox>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            config_path: config_path.into(),
            snapshot: RwLock::new(None),
            refreshing: AtomicBool::new(false),
            outbox,
            gathered: Mutex::new(Gathered::default()),
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
    pub async fn decide(&self, summary: ActionSummary) -> Decided {
        match self.client.call(&AuthorityRequest::Decide(summary)).await {
            Ok(AuthorityResponse::Decided { decision, reason }) => Decided { decision, reason },
            Ok(AuthorityResponse::NotRecorded(why)) => {
                Decided::refused(format!("approval failed: {why}"))
            }
            // Any other answer closed the channel (and ends the executor).
            Ok(_) => Decided::refused("approval unavailable"),
            Err(e) => Decided::refused(format!("approval unavailable: {e}")),
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

    /// The pending approval of `call_id`, if a person's decision is pending. An answer
    /// that is not plausible (an id no one could type, a wait longer than any approval)
    /// is dropped, not passed on.
    pub async fn waiting(&self, call_id: CallId) -> Option<ApprovalWait> {
        match self
            .client
            .call(&AuthorityRequest::Waiting { call_id })
            .await
        {
            Ok(AuthorityResponse::Waiting(Some(wait))) if wait.is_plausible() => Some(wait),
            Ok(AuthorityResponse::Waiting(Some(_))) => {
                tracing::warn!(%call_id, "approvald described a pending approval implausibly");
                None
            }
            _ => None,
        }
    }

    /// A call's last audit row. Returns once the row is safe from a crash of any worker:
    /// kept in the outbox (then reported to approvald with the rows of other calls
    /// answered within [`KEPT_ROWS_LINGER`], as `Kept`), or else reported alone as `Ran`
    /// or `Finished` and acknowledged by approvald; or why it could not be.
    pub async fn report(self: &Arc<Self>, row: ReportedRow) -> Result<(), String> {
        let kept = self
            .outbox
            .as_ref()
            .and_then(|outbox| Some((outbox.clone(), outbox.keep(&row)?)));
        let Some((outbox, pending)) = kept else {
            let request = match row {
                ReportedRow::Ran(ran) => AuthorityRequest::Ran(ran),
                ReportedRow::Finished { result, .. } => AuthorityRequest::Finished(result),
            };
            return recorded(self.client.call(&request).await);
        };
        let start = {
            let mut gathered = lock(&self.gathered);
            gathered.rows.push((row, pending));
            !std::mem::replace(&mut gathered.reporting, true)
        };
        if start {
            tokio::spawn(self.clone().report_gathered(outbox));
        }
        Ok(())
    }

    /// Report the gathered rows to approvald, [`KEPT_ROWS_LINGER`] after the first of
    /// them (at once when a full report waits), until none is left.
    async fn report_gathered(self: Arc<Self>, outbox: Arc<Outbox>) {
        loop {
            // The answer of the call that brought the row leaves first (registering the
            // timer costs the runtime a wake-up of its own).
            tokio::task::yield_now().await;
            if lock(&self.gathered).rows.len() < MAX_KEPT_ROWS {
                tokio::time::sleep(KEPT_ROWS_LINGER).await;
            }
            let batch = {
                let mut gathered = lock(&self.gathered);
                if gathered.rows.is_empty() {
                    gathered.reporting = false;
                    return;
                }
                let mut bytes = 0;
                let count = gathered
                    .rows
                    .iter()
                    .take(MAX_KEPT_ROWS)
                    .take_while(|(_, pending)| {
                        bytes += pending.bytes();
                        bytes <= MAX_KEPT_ROWS_BYTES
                    })
                    .count()
                    // A row is far smaller than the frame; one always goes.
                    .max(1);
                gathered.rows.drain(..count).collect::<Vec<_>>()
            };
            let (rows, pending): (Vec<ReportedRow>, Vec<Pending>) = batch.into_iter().unzip();
            let first = rows[0].call_id();
            match recorded(self.client.call(&AuthorityRequest::Kept(rows)).await) {
                Ok(()) => pending.into_iter().for_each(|p| outbox.acknowledged(p)),
                Err(why) => {
                    tracing::error!(call_id = %first, rows = pending.len(), error = %why, "approvald did not record answered calls' rows; they stay in the outbox for the next start");
                    // Never acknowledged: the file is not emptied while this executor runs.
                    drop(pending);
                }
            }
        }
    }

    /// Hand approvald the rows an earlier executor left in the outbox, before any call;
    /// the outbox is emptied once approvald has every one.
    pub async fn recover(&self, rows: Vec<ReportedRow>) {
        let Some(outbox) = &self.outbox else {
            return;
        };
        let total = rows.len();
        let mut failed = 0;
        for row in rows {
            let call_id = row.call_id();
            if let Err(why) = recorded(self.client.call(&AuthorityRequest::Recover(row)).await) {
                tracing::error!(%call_id, error = %why, "an answered call's row was not recovered; it stays in the outbox");
                failed += 1;
            }
        }
        if total > 0 {
            tracing::info!(
                rows = total,
                failed,
                "audit outbox of the last executor handed to approvald"
            );
        }
        if failed == 0 {
            outbox.recovered();
        }
    }

    /// Wait (up to `limit`) until approvald has every row this executor answered for.
    pub async fn settle(&self, limit: std::time::Duration) -> bool {
        match &self.outbox {
            Some(outbox) => outbox.settle(limit).await,
            None => true,
        }
    }
}

/// The decision on one call and its reason, which a refusal quotes.
#[must_use = "a call runs or is refused on its decision"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub decision: Decision,
    pub reason: String,
}

impl Decided {
    /// Refused, saying why (no authority, or none that could decide).
    pub fn refused(reason: impl Into<String>) -> Self {
        Self {
            decision: Decision::Refused,
            reason: reason.into(),
        }
    }

    /// Let run unasked by approvald's policy snapshot: nothing to say.
    pub fn allowed() -> Self {
        Self {
            decision: Decision::Allowed,
            reason: String::new(),
        }
    }

    /// Whether the action may run.
    pub fn runs(&self) -> bool {
        self.decision.runs()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Rows and a flag: a panic elsewhere cannot leave them torn.
    m.lock().unwrap_or_else(|p| p.into_inner())
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
