//! The executor's authority channel over a socketpair: decisions, their audit rows, and
//! hostile input.

use std::path::PathBuf;
use std::sync::Arc;

use nl2sh_approvald::authority::{
    Authority, REASON_AUTO_APPROVED, REASON_CONFIG_UNREADABLE, REASON_READ_ONLY,
};
use nl2sh_approvald::dispatch::serve_executor;
use nl2sh_approvald::dispatch::{answer_cli, LocalOwner};
use nl2sh_approvald::owner::OwnerSessions;
use nl2sh_approvald::store::{AuditKind, AuditRow, Store};
use nl2sh_proto::channels::{
    ActionSummary, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CallResult, CliRequest,
    CliResponse, Confinement, Decision, Identity, ParsedCommand, RiskLevel,
};
use nl2sh_proto::limits::{MAX_ACTION_COMMANDS, MAX_COMMAND_ARGV_BYTES};
use nl2sh_proto::rpc::{RpcClient, RpcError};
use nl2sh_proto::topology::{pair, ExecutorApprovald};

type Client = RpcClient<ExecutorApprovald>;

struct Rig {
    _dir: tempfile::TempDir,
    config: PathBuf,
    authority: Arc<Authority>,
    local: LocalOwner,
    client: Client,
}

impl Rig {
    async fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let local = LocalOwner {
            sessions: Arc::new(OwnerSessions::new()),
            tasks: Arc::new(store.tasks(&[]).unwrap()),
            inbox: Arc::default(),
        };
        let config = dir.path().join("config.toml");
        let authority = Arc::new(Authority::new(store, &config));
        let (a, b) = pair::<ExecutorApprovald>().unwrap();
        tokio::spawn(serve_executor(b, authority.clone()));
        let (client, _) = Client::start(a).await.unwrap();
        Rig {
            _dir: dir,
            config,
            authority,
            local,
            client,
        }
    }

    fn write_config(&self, text: &str) {
        std::fs::write(&self.config, text).unwrap();
    }

    async fn call(&self, req: AuthorityRequest) -> AuthorityResponse {
        self.client.call(&req).await.unwrap()
    }

    /// Send an audit row; approvald answers once it is committed.
    async fn record(&self, req: AuthorityRequest) {
        let answer = self.call(req).await;
        assert!(matches!(answer, AuthorityResponse::Recorded), "{answer:?}");
    }

    /// A request approvald must find out of state: the channel closes, nothing answers.
    async fn call_out_of_state(&self, req: AuthorityRequest) {
        let r = self.client.call(&req).await;
        assert!(matches!(r, Err(RpcError::Closed(_))), "{r:?}");
        // For everyone after it too.
        assert!(self.client.call(&AuthorityRequest::Ping).await.is_err());
    }

    async fn decide(&self, summary: ActionSummary) -> (Decision, String) {
        match self.call(AuthorityRequest::Decide(summary)).await {
            AuthorityResponse::Decided { decision, reason } => (decision, reason),
            other => panic!("expected a decision, got {other:?}"),
        }
    }

    /// Every row queued so far, once committed (read-only decisions are queued in order
    /// without waiting for their commit).
    async fn rows(&self) -> Vec<AuditRow> {
        self.authority.store().flush().await.unwrap();
        self.authority.store().recent(1000).await.unwrap()
    }

    /// Committed decision rows.
    async fn decision_rows(&self) -> Vec<AuditRow> {
        let mut rows = self.rows().await;
        rows.retain(|r| r.record.kind == AuditKind::Decision);
        rows
    }
}

fn summary(call_id: u64, risk: RiskLevel) -> ActionSummary {
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

#[tokio::test]
async fn ping() {
    let rig = Rig::new().await;
    assert!(matches!(
        rig.call(AuthorityRequest::Ping).await,
        AuthorityResponse::Pong
    ));
}

#[tokio::test]
async fn read_only_is_allowed_and_recorded_before_the_answer() {
    let rig = Rig::new().await;
    let (decision, reason) = rig.decide(summary(7, RiskLevel::ReadOnly)).await;
    assert_eq!(
        (decision, reason.as_str()),
        (Decision::Allowed, REASON_READ_ONLY)
    );
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 1);
    let r = &rows[0].record;
    assert_eq!(r.kind, AuditKind::Decision);
    assert_eq!(r.call_id, 7);
    assert_eq!(r.decision.map(|v| v.as_str()), Some("allowed"));
    assert_eq!(r.reason.as_deref(), Some(REASON_READ_ONLY));
    assert_eq!(r.risk.map(|v| v.as_str()), Some("read_only"));
    assert_eq!(r.origin.map(|v| v.as_str()), Some("mcp_http"));
    assert_eq!(r.identity.map(|v| v.as_str()), Some("launching_user"));
    assert_eq!(r.tool.as_deref(), Some("shell"));
    assert_eq!(r.action.as_deref(), Some("touch /tmp/x"));
    assert_eq!(r.requires_root, Some(false));

    // A configuration that cannot be read fails closed, even for a read-only action: it
    // might have said `approval_policy = "strict"`.
    rig.write_config("protocol_auto_approve = [");
    let (decision, reason) = rig.decide(summary(8, RiskLevel::ReadOnly)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(reason.starts_with(REASON_CONFIG_UNREADABLE), "{reason}");
    assert_eq!(rig.decision_rows().await.len(), 2);
}

#[tokio::test]
async fn medium_waits_for_a_local_decision() {
    let rig = Rig::new().await;
    let client = rig.client.clone();
    let waiting = tokio::spawn(async move {
        client
            .call(&AuthorityRequest::Decide(summary(1, RiskLevel::Medium)))
            .await
            .unwrap()
    });
    let id = loop {
        match answer_cli(&rig.authority, &rig.local, CliRequest::ListPending).await {
            CliResponse::Pending(list) if !list.is_empty() => break list[0].id.clone(),
            _ => tokio::time::sleep(std::time::Duration::from_millis(2)).await,
        }
    };
    // Nothing is recorded while it waits.
    assert!(rig.rows().await.is_empty());
    assert!(matches!(
        answer_cli(
            &rig.authority,
            &rig.local,
            CliRequest::Reject { id: id.clone() }
        )
        .await,
        CliResponse::Done
    ));
    let AuthorityResponse::Decided { decision, reason } = waiting.await.unwrap() else {
        panic!("expected a decision");
    };
    assert_eq!(decision, Decision::Rejected);
    assert!(reason.contains("needs local approval"), "{reason}");
    assert!(reason.contains(&id.0), "{reason}");
    // The decision, and with it the outcome of a call that does not run.
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].record.kind, AuditKind::Decision);
    assert_eq!(
        rows[0].record.decision.map(|v| v.as_str()),
        Some("rejected")
    );
    assert_eq!(rows[1].record.kind, AuditKind::Outcome);
    assert_eq!(
        rows[1].record.decision.map(|v| v.as_str()),
        Some("rejected")
    );
    assert_eq!(rows[1].record.success, Some(false));
    assert_eq!(
        rows[1].record.summary.as_deref(),
        Some("not run (rejected)")
    );
}

#[tokio::test]
async fn auto_approve_is_read_for_every_decision() {
    let rig = Rig::new().await;
    rig.write_config(
        "protocol_token = 'abcdefghijklmnopqrstuvwxyz0123456789'\nprotocol_auto_approve = true\n",
    );
    let (decision, reason) = rig.decide(summary(1, RiskLevel::Critical)).await;
    assert_eq!(
        (decision, reason.as_str()),
        (Decision::AutoApproved, REASON_AUTO_APPROVED)
    );
    assert_eq!(rig.decision_rows().await.len(), 1);

    // Off again: a mutation asks (and, nobody deciding within a second, expires).
    rig.write_config("protocol_auto_approve = false\napproval_timeout_secs = 1\n");
    let (decision, reason) = rig.decide(summary(2, RiskLevel::Medium)).await;
    assert_eq!(decision, Decision::Expired, "{reason}");
    assert!(reason.contains("needs local approval"), "{reason}");
    assert!(reason.contains("expired"), "{reason}");
    assert_eq!(rig.decision_rows().await.len(), 2);

    rig.write_config("protocol_auto_approve = true\n");
    let (decision, _) = rig.decide(summary(3, RiskLevel::Low)).await;
    assert_eq!(decision, Decision::AutoApproved);

    // Invalid or unreadable configuration fails closed.
    rig.write_config("protocol_auto_approve = \"yes\"\n");
    let (decision, reason) = rig.decide(summary(4, RiskLevel::Low)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(reason.starts_with(REASON_CONFIG_UNREADABLE), "{reason}");
    assert!(reason.contains("configuration could not be read"));
    assert!(reason.contains("line 1"), "{reason}");
    assert!(!reason.contains("config.toml"), "{reason}");

    std::fs::remove_file(&rig.config).unwrap();
    std::fs::create_dir(&rig.config).unwrap();
    let (decision, reason) = rig.decide(summary(5, RiskLevel::Low)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(reason.starts_with(REASON_CONFIG_UNREADABLE), "{reason}");

    let rows = rig.decision_rows().await;
    let decisions: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.record.call_id,
                r.record.decision.unwrap().as_str().to_string(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (1, "auto_approved".to_string()),
            (2, "expired".to_string()),
            (3, "auto_approved".to_string()),
            (4, "refused".to_string()),
            (5, "refused".to_string()),
        ]
    );
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn finished_records_an_outcome_with_what_ran() {
    let rig = Rig::new().await;
    assert_eq!(
        rig.decide(summary(9, RiskLevel::ReadOnly)).await.0,
        Decision::Allowed
    );
    rig.record(AuthorityRequest::Finished(CallResult {
        call_id: CallId(9),
        success: true,
        exit_code: Some(0),
        duration_ms: 12,
        summary: "exit 0".into(),
    }))
    .await;
    rig.authority.store().flush().await.unwrap();
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 2);
    let outcome = &rows[1].record;
    assert_eq!(outcome.kind, AuditKind::Outcome);
    assert_eq!(outcome.call_id, 9);
    assert_eq!(outcome.tool.as_deref(), Some("shell"));
    assert_eq!(outcome.decision.map(|v| v.as_str()), Some("allowed"));
    assert_eq!(outcome.reason, None);
    assert_eq!(
        (outcome.success, outcome.exit_code, outcome.duration_ms),
        (Some(true), Some(0), Some(12))
    );
    assert_eq!(outcome.summary.as_deref(), Some("exit 0"));
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn out_of_state_messages_close_the_executor_channel_and_record_nothing() {
    let finished = |id: u64| {
        AuthorityRequest::Finished(CallResult {
            call_id: CallId(id),
            success: false,
            exit_code: None,
            duration_ms: 1,
            summary: "cancelled".into(),
        })
    };
    // An outcome for a call approvald never decided.
    let rig = Rig::new().await;
    rig.call_out_of_state(finished(10)).await;
    assert!(rig.rows().await.is_empty());
    // A second outcome for one call.
    let rig = Rig::new().await;
    assert_eq!(
        rig.decide(summary(9, RiskLevel::ReadOnly)).await.0,
        Decision::Allowed
    );
    rig.record(finished(9)).await;
    rig.call_out_of_state(finished(9)).await;
    assert_eq!(rig.rows().await.len(), 2);
    // An outcome for a call that was refused (its outcome was recorded with it).
    let rig = Rig::new().await;
    rig.write_config("approval_timeout_secs = [");
    let (decision, _) = rig.decide(summary(3, RiskLevel::Medium)).await;
    assert_eq!(decision, Decision::Refused);
    rig.call_out_of_state(finished(3)).await;
    assert_eq!(rig.rows().await.len(), 2);
    // A second decision for one call.
    let rig = Rig::new().await;
    assert_eq!(
        rig.decide(summary(4, RiskLevel::ReadOnly)).await.0,
        Decision::Allowed
    );
    rig.call_out_of_state(AuthorityRequest::Decide(summary(4, RiskLevel::ReadOnly)))
        .await;
    assert_eq!(rig.decision_rows().await.len(), 1);
}

#[tokio::test]
async fn hostile_fields_are_refused_and_leave_no_row() {
    let rig = Rig::new().await;
    rig.write_config("protocol_auto_approve = true\n");
    let mut cases = Vec::new();
    let mut s = summary(1, RiskLevel::Medium);
    s.tool = "t".repeat(129);
    cases.push(s);
    let mut s = summary(2, RiskLevel::ReadOnly);
    s.action = "a".repeat(16 * 1024 + 1);
    cases.push(s);
    let mut s = summary(3, RiskLevel::ReadOnly);
    s.action = "a".repeat(4 * 1024 * 1024);
    cases.push(s);
    let mut s = summary(4, RiskLevel::ReadOnly);
    s.arguments_sha256 = "z".repeat(64);
    cases.push(s);
    let mut s = summary(5, RiskLevel::ReadOnly);
    s.arguments_sha256 = "ab".repeat(64 * 1024);
    cases.push(s);
    let mut s = summary(6, RiskLevel::ReadOnly);
    s.tool = String::new();
    cases.push(s);
    cases.push(summary(u64::MAX, RiskLevel::ReadOnly));
    // Parsed commands past the executor's own limits: more of them, or a longer one.
    let command = |argv: Vec<String>| ParsedCommand {
        argv: Some(argv),
        read_only: true,
    };
    let mut s = summary(7, RiskLevel::ReadOnly);
    s.commands = Some(vec![command(vec!["ls".into()]); MAX_ACTION_COMMANDS + 1]);
    cases.push(s);
    let mut s = summary(8, RiskLevel::ReadOnly);
    s.commands = Some(vec![command(vec!["x".repeat(MAX_COMMAND_ARGV_BYTES)])]);
    cases.push(s);
    let mut s = summary(9, RiskLevel::ReadOnly);
    s.commands = Some(vec![command(vec![String::new(); 64 * 1024])]);
    cases.push(s);
    for s in cases {
        let rig = Rig::new().await;
        rig.write_config("protocol_auto_approve = true\n");
        rig.call_out_of_state(AuthorityRequest::Decide(s)).await;
        assert!(rig.rows().await.is_empty());
    }
    let results = [
        CallResult {
            call_id: CallId(1),
            success: true,
            exit_code: None,
            duration_ms: 1,
            summary: "s".repeat(4 * 1024 + 1),
        },
        CallResult {
            call_id: CallId(1),
            success: true,
            exit_code: None,
            duration_ms: u64::MAX,
            summary: String::new(),
        },
        CallResult {
            call_id: CallId(u64::MAX),
            success: true,
            exit_code: None,
            duration_ms: 1,
            summary: String::new(),
        },
    ];
    for r in results {
        let rig = Rig::new().await;
        assert_eq!(
            rig.decide(summary(1, RiskLevel::ReadOnly)).await.0,
            Decision::Allowed
        );
        rig.call_out_of_state(AuthorityRequest::Finished(r)).await;
        // Only the decision is stored.
        assert_eq!(rig.rows().await.len(), 1);
    }
    drop(rig);
}

#[tokio::test]
async fn the_limits_themselves_are_accepted() {
    let rig = Rig::new().await;
    let mut s = summary(1, RiskLevel::ReadOnly);
    s.tool = "t".repeat(128);
    s.action = "a".repeat(16 * 1024);
    s.arguments_sha256 = "ABCDEF0123456789".repeat(4);
    s.commands = Some(vec![
        ParsedCommand {
            argv: Some(vec!["x".repeat(MAX_COMMAND_ARGV_BYTES - 1)]),
            read_only: true,
        };
        MAX_ACTION_COMMANDS
    ]);
    let (decision, _) = rig.decide(s).await;
    assert_eq!(decision, Decision::Allowed);
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 1);
    // Stored in one spelling.
    assert_eq!(
        rows[0].record.arguments_sha256.as_deref(),
        Some("abcdef0123456789".repeat(4).as_str())
    );
}

#[tokio::test]
async fn concurrent_decisions_each_leave_one_row() {
    let rig = Rig::new().await;
    rig.write_config("protocol_auto_approve = true\n");
    let calls: Vec<_> = (1..=200u64)
        .map(|i| {
            let client = rig.client.clone();
            let risk = if i % 2 == 0 {
                RiskLevel::ReadOnly
            } else {
                RiskLevel::High
            };
            tokio::spawn(async move {
                client
                    .call(&AuthorityRequest::Decide(summary(i, risk)))
                    .await
                    .unwrap()
            })
        })
        .collect();
    for call in calls {
        assert!(matches!(
            call.await.unwrap(),
            AuthorityResponse::Decided { .. }
        ));
    }
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 200);
    let mut ids: Vec<i64> = rows.iter().map(|r| r.record.call_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=200).collect::<Vec<_>>());
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
}
