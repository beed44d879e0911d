//! A test rig: a store in a temporary state directory, an authority reading
//! `config.toml` beside it, and an executor-side client over a socketpair.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use nl2sh_approvald::authority::Authority;
use nl2sh_approvald::dispatch::{answer_cli, serve_executor, LocalOwner};
use nl2sh_approvald::notify::Notifier;
use nl2sh_approvald::owner::OwnerSessions;
use nl2sh_approvald::store::{AuditKind, AuditRow, Store};
use nl2sh_proto::channels::{
    ActionSummary, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CliErrorKind,
    CliRequest, CliResponse, Confinement, Decision, Identity, PendingApproval, RiskLevel,
};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::topology::{pair, ExecutorApprovald};

pub type Client = RpcClient<ExecutorApprovald>;

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub authority: Arc<Authority>,
    pub sessions: Arc<OwnerSessions>,
    /// What the local owner's commands reach (the same sessions, and the task store).
    pub local: Arc<LocalOwner>,
    pub client: Client,
}

impl Rig {
    pub async fn new() -> Rig {
        Self::with_notifier(Notifier::off()).await
    }

    /// A rig whose pending requests post through `notifier`.
    pub async fn with_notifier(notifier: Notifier) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let tasks = Arc::new(store.tasks(&[]).unwrap());
        let config = dir.path().join("config.toml");
        let authority = Arc::new(Authority::new(store, &config).with_notifier(notifier));
        let (a, b) = pair::<ExecutorApprovald>().unwrap();
        tokio::spawn(serve_executor(b, authority.clone()));
        let (client, _) = Client::start(a).await.unwrap();
        let sessions = Arc::new(OwnerSessions::new());
        let local = Arc::new(LocalOwner {
            sessions: sessions.clone(),
            tasks,
            inbox: Arc::default(),
        });
        Rig {
            dir,
            config,
            authority,
            sessions,
            local,
            client,
        }
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(&self.config, text).unwrap();
    }

    pub async fn call(&self, req: AuthorityRequest) -> AuthorityResponse {
        self.client.call(&req).await.unwrap()
    }

    /// Send an audit row (`Finished`, `Ran`); approvald answers once it is committed.
    pub async fn record(&self, req: AuthorityRequest) {
        let answer = self.client.call(&req).await;
        assert!(
            matches!(answer, Ok(AuthorityResponse::Recorded)),
            "{answer:?}"
        );
    }

    pub async fn decide(&self, summary: ActionSummary) -> (Decision, String) {
        decided(self.call(AuthorityRequest::Decide(summary)).await)
    }

    /// Start a decision that is expected to wait; its answer comes from the handle.
    pub fn decide_later(&self, summary: ActionSummary) -> JoinHandle<(Decision, String)> {
        let client = self.client.clone();
        tokio::spawn(async move {
            decided(
                client
                    .call(&AuthorityRequest::Decide(summary))
                    .await
                    .unwrap(),
            )
        })
    }

    pub async fn cli(&self, req: CliRequest) -> CliResponse {
        answer_cli(&self.authority, &self.local, req).await
    }

    pub async fn pending(&self) -> Vec<PendingApproval> {
        match self.cli(CliRequest::ListPending).await {
            CliResponse::Pending(list) => list,
            other => panic!("expected a list, got {other:?}"),
        }
    }

    /// Wait until `n` requests are pending; they are returned oldest first.
    pub async fn wait_pending(&self, n: usize) -> Vec<PendingApproval> {
        for _ in 0..5000 {
            let list = self.pending().await;
            if list.len() >= n {
                return list;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!(
            "{n} pending approvals never appeared: {:?}",
            self.pending().await
        );
    }

    pub async fn approve(
        &self,
        id: impl AsRef<str>,
        phrase: Option<&str>,
    ) -> Result<(), CliErrorKind> {
        cli_result(
            self.cli(CliRequest::Approve {
                id: id.as_ref().into(),
                phrase: phrase.map(str::to_owned),
            })
            .await,
        )
    }

    pub async fn reject(&self, id: impl AsRef<str>) -> Result<(), CliErrorKind> {
        cli_result(
            self.cli(CliRequest::Reject {
                id: id.as_ref().into(),
            })
            .await,
        )
    }

    /// Committed rows, without flushing: what a decision answer guarantees is on disk.
    pub async fn rows(&self) -> Vec<AuditRow> {
        self.authority.store().recent(10_000).await.unwrap()
    }

    /// (call id, decision) of every decision row, in order.
    pub async fn decisions(&self) -> Vec<(i64, String)> {
        self.rows()
            .await
            .into_iter()
            .filter(|r| r.record.kind == AuditKind::Decision)
            .map(|r| {
                (
                    r.record.call_id,
                    r.record.decision.unwrap().as_str().to_string(),
                )
            })
            .collect()
    }

    /// Every call id has exactly one decision row.
    pub async fn assert_one_row_per_call(&self) {
        let mut ids: Vec<i64> = self
            .decisions()
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "a call has more than one decision row");
        assert!(self.authority.store().verify().await.unwrap().is_intact());
    }
}

pub fn cli_result(resp: CliResponse) -> Result<(), CliErrorKind> {
    match resp {
        CliResponse::Done => Ok(()),
        CliResponse::Error { kind, .. } => Err(kind),
        other => panic!("expected Done or an error, got {other:?}"),
    }
}

pub fn decided(resp: AuthorityResponse) -> (Decision, String) {
    match resp {
        AuthorityResponse::Decided { decision, reason } => (decision, reason),
        other => panic!("expected a decision, got {other:?}"),
    }
}

pub fn summary(call_id: u64, risk: RiskLevel) -> ActionSummary {
    ActionSummary {
        data: None,
        ui_app: None,
        call_id: CallId(call_id),
        task: None,
        after_reading: Default::default(),
        client: None,
        sent: None,
        origin: CallOrigin::McpHttp,
        tool: "shell".into(),
        action: "touch /tmp/x".into(),
        arguments_sha256: "0123456789abcdef".repeat(4),
        risk,
        requires_root: false,
        identity: Identity::Launching,
        confinement: Confinement::Fixed,
        reasons: Vec::new(),
        commands: None,
    }
}
