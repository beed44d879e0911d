//! The decision order end to end through the executor's channel: policy, auto-approve,
//! scoped grants, and pending requests settled by the local CLI, by expiry, by the
//! executor's withdrawal, or by approvald stopping.

mod common;

use std::time::Duration;

use common::{summary, Rig};
use nl2sh_approvald::authority::{REASON_AUTO_APPROVED, REASON_CONFIG_UNREADABLE};
use nl2sh_approvald::store::AuditKind;
use nl2sh_proto::channels::{
    ActionSummary, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CallResult,
    CliErrorKind, CliRequest, CliResponse, Confinement, Decision, ParsedCommand, RiskLevel, TaskId,
};
use nl2sh_proto::limits::{
    MAX_PENDING_APPROVALS, MAX_PENDING_APPROVALS_PER_CALLER, OWNER_RESERVED_APPROVALS,
};

const LEVELS: [RiskLevel; 6] = [
    RiskLevel::ReadOnly,
    RiskLevel::Low,
    RiskLevel::Medium,
    RiskLevel::High,
    RiskLevel::Dangerous,
    RiskLevel::Critical,
];

/// With `protocol_auto_approve = true`, every action the policy asks about is
/// auto-approved and every other one is allowed, so the decision shows whether the policy
/// asked.
#[tokio::test]
async fn policy_matrix() {
    let rig = Rig::new().await;
    let mut call_id = 0;
    for policy in ["permissive", "balanced", "strict", ""] {
        let line = if policy.is_empty() {
            String::new()
        } else {
            format!("approval_policy = \"{policy}\"\n")
        };
        rig.write_config(&format!("{line}protocol_auto_approve = true\n"));
        for origin in [CallOrigin::McpHttp, CallOrigin::McpStdio] {
            for risk in LEVELS {
                for root in [false, true] {
                    call_id += 1;
                    let mut s = summary(call_id, risk);
                    s.origin = origin;
                    s.requires_root = root;
                    let (decision, reason) = rig.decide(s).await;
                    let mutation = risk != RiskLevel::ReadOnly;
                    let asks = match (policy, origin) {
                        ("strict", _) => true,
                        // Remote callers get at least balanced.
                        ("permissive", CallOrigin::McpStdio) => {
                            risk >= RiskLevel::Dangerous || (root && mutation)
                        }
                        _ => mutation,
                    };
                    let expected = if asks {
                        Decision::AutoApproved
                    } else {
                        Decision::Allowed
                    };
                    assert_eq!(
                        decision, expected,
                        "policy {policy:?} origin {origin:?} risk {risk:?} root {root}: {reason}"
                    );
                    if asks {
                        assert_eq!(reason, REASON_AUTO_APPROVED);
                    }
                }
            }
        }
    }
    assert_eq!(rig.decisions().await.len(), call_id as usize);
    rig.assert_one_row_per_call().await;
}

/// Without auto-approve, whatever the policy asks about waits for a person; a short
/// timeout lets it expire at once on the paused clock.
#[tokio::test(start_paused = true)]
async fn what_the_policy_asks_about_waits_for_a_person() {
    let rig = Rig::new().await;
    rig.write_config("approval_policy = 'permissive'\napproval_timeout_secs = 1\n");
    let mut s = summary(1, RiskLevel::High);
    s.origin = CallOrigin::McpStdio;
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Allowed);
    // Remote: raised to balanced.
    s.call_id = CallId(2);
    s.origin = CallOrigin::McpHttp;
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Expired);
    s.call_id = CallId(3);
    s.origin = CallOrigin::McpStdio;
    s.risk = RiskLevel::Dangerous;
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Expired);
    s.call_id = CallId(4);
    s.risk = RiskLevel::Low;
    s.requires_root = true;
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Expired);
    s.call_id = CallId(5);
    s.risk = RiskLevel::ReadOnly;
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Allowed);
    rig.write_config("approval_policy = 'strict'\napproval_timeout_secs = 1\n");
    s.call_id = CallId(6);
    assert_eq!(rig.decide(s.clone()).await.0, Decision::Expired);
    rig.assert_one_row_per_call().await;
}

#[tokio::test(start_paused = true)]
async fn scoped_grants() {
    let rig = Rig::new().await;
    rig.write_config(
        r#"
approval_timeout_secs = 1
protocol_token = "abcdefghijklmnopqrstuvwxyz0123456789"

[[approval_grants]]
tool = "shell"
action = "touch /tmp/x"

[[approval_grants]]
tool = "shell.exec"
command = ["rm", "/tmp/scratch/*"]
max_risk = "high"
origin = "mcp_stdio"

[[approval_grants]]
tool = "fs.write"
max_risk = "medium"
origin = "mcp_http"
"#,
    );
    let next = std::cell::Cell::new(0);
    let decide = |tool: &str, action: &str, risk, origin, root| {
        next.set(next.get() + 1);
        let mut s = summary(next.get(), risk);
        s.tool = tool.into();
        s.action = action.into();
        s.origin = origin;
        s.requires_root = root;
        s
    };
    // A shell line with the commands the executor parsed out of it.
    let line = |commands: &[(&[&str], bool)], risk, origin, root| {
        let action = commands
            .iter()
            .map(|(argv, _)| argv.join(" "))
            .collect::<Vec<_>>()
            .join("; ");
        let mut s = decide(
            "shell.exec",
            &format!("/bin/sh -c '{action}'"),
            risk,
            origin,
            root,
        );
        s.commands = Some(
            commands
                .iter()
                .map(|(argv, read_only)| ParsedCommand {
                    argv: Some(argv.iter().map(|w| w.to_string()).collect()),
                    read_only: *read_only,
                })
                .collect(),
        );
        s
    };
    use CallOrigin::{McpHttp as Http, McpStdio as Stdio};
    use RiskLevel::*;
    let rm: &[&str] = &["rm", "/tmp/scratch/a"];
    let mut cases = vec![
        // Grant 1: exact action, default max_risk low, any origin.
        (decide("shell", "touch /tmp/x", Low, Http, false), Some(1)),
        (decide("shell", "touch /tmp/x", Low, Stdio, false), Some(1)),
        (decide("shell", "touch /tmp/x", Medium, Http, false), None),
        (decide("shell", "touch /tmp/xy", Low, Http, false), None),
        (decide("shell", "touch /tmp/x", Low, Http, true), None),
        (decide("Shell", "touch /tmp/x", Low, Http, false), None),
    ];
    cases.extend([
        // Grant 2: a command pattern, up to high, stdio only.
        (line(&[(rm, false)], High, Stdio, false), Some(2)),
        (line(&[(rm, false)], Medium, Stdio, false), Some(2)),
        (
            line(
                &[(rm, false), (&["rm", "/tmp/scratch/b"], false)],
                Medium,
                Stdio,
                false,
            ),
            Some(2),
        ),
        (
            line(
                &[(rm, false), (&["sleep", "1"], true)],
                Medium,
                Stdio,
                false,
            ),
            Some(2),
        ),
        // A read the grant does not name runs as root outside the sandbox: it waits.
        (
            line(
                &[(rm, false), (&["cat", "/etc/hostname"], true)],
                Medium,
                Stdio,
                false,
            ),
            None,
        ),
        (line(&[(rm, false)], High, Http, false), None),
        (
            line(&[(&["rm", "/tmp/other"], false)], Low, Stdio, false),
            None,
        ),
        (
            line(&[(&["rm", "/tmp/scratch/a/b"], false)], Low, Stdio, false),
            None,
        ),
        (
            line(&[(&["rm", "/tmp/scratch/.."], false)], Low, Stdio, false),
            None,
        ),
        (
            line(
                &[(&["rm", "-rf", "/tmp/scratch/a"], false)],
                Low,
                Stdio,
                false,
            ),
            None,
        ),
        (
            line(
                &[(rm, false), (&["touch", "/tmp/scratch/a"], false)],
                Low,
                Stdio,
                false,
            ),
            None,
        ),
        (line(&[(rm, false)], Dangerous, Stdio, false), None),
        (line(&[(rm, false)], Critical, Stdio, false), None),
        (line(&[(rm, false)], Low, Stdio, true), None),
    ]);
    // A read asked to run unconfined: nothing in it is the grant's command.
    let mut unconfined = line(&[(&["cat", "/etc/hostname"], true)], ReadOnly, Stdio, false);
    unconfined.confinement = Confinement::Unconfined;
    cases.push((unconfined, None));
    // The executor could not take the line apart: nothing to match.
    let mut unparsed = line(&[(rm, false)], Low, Stdio, false);
    unparsed.commands = None;
    cases.push((unparsed, None));
    // A command the executor would not let a grant match (expanded, redirected…).
    let mut opaque = line(&[(rm, false)], Low, Stdio, false);
    if let Some(commands) = opaque.commands.as_mut() {
        commands.push(ParsedCommand {
            argv: None,
            read_only: false,
        });
    }
    cases.push((opaque, None));
    cases.extend([
        // Grant 3: any action of the tool, up to medium, http only.
        (decide("fs.write", "write /a", Medium, Http, false), Some(3)),
        (decide("fs.write", "write /a", High, Http, false), None),
        (decide("fs.write", "write /a", Low, Stdio, false), None),
    ]);
    for (s, grant) in cases {
        let what = format!(
            "{} {:?} {:?} {:?} root {}",
            s.action, s.commands, s.risk, s.origin, s.requires_root
        );
        let (decision, reason) = rig.decide(s).await;
        match grant {
            Some(n) => {
                assert_eq!(decision, Decision::Granted, "{what}: {reason}");
                assert!(
                    reason.contains(&format!("approval grant {n} ")),
                    "{what}: {reason}"
                );
            }
            // Not covered: it asked, and nobody answered.
            None => assert_eq!(decision, Decision::Expired, "{what}: {reason}"),
        }
    }
    rig.assert_one_row_per_call().await;
}

#[tokio::test(start_paused = true)]
async fn retired_and_unscoped_shell_grants_refuse_every_decision() {
    let rig = Rig::new().await;
    let s = |id| summary(id, RiskLevel::Low);
    // A running service reads an edited file before each decision: a grant it can no
    // longer read the way it was meant is refused, never read wider.
    for (id, (text, needle)) in (1..).zip([
        (
            "[[approval_grants]]\ntool = 'shell'\naction_prefix = 'touch '\n",
            "`action_prefix` is retired",
        ),
        (
            "[[approval_grants]]\ntool = 'shell.exec'\nmax_risk = 'high'\n",
            "a `shell.exec` grant must say which commands it covers",
        ),
        (
            "[[approval_grants]]\ntool = 'shell.exec'\ncommand = ['ls', '**', '-l']\n",
            "`**` may only be the last element",
        ),
    ]) {
        rig.write_config(text);
        let (decision, reason) = rig.decide(s(id)).await;
        assert_eq!(decision, Decision::Refused, "{text}");
        assert!(reason.starts_with(REASON_CONFIG_UNREADABLE), "{reason}");
        assert!(reason.contains("approval grant 1"), "{reason}");
        assert!(reason.contains(needle), "{reason}");
    }
    rig.assert_one_row_per_call().await;
}

#[tokio::test(start_paused = true)]
async fn editing_the_configuration_changes_the_next_decision() {
    let rig = Rig::new().await;
    let s = |id| summary(id, RiskLevel::Low);
    rig.write_config("approval_timeout_secs = 1\n[[approval_grants]]\ntool = 'shell'\n");
    assert_eq!(rig.decide(s(1)).await.0, Decision::Granted);
    rig.write_config("approval_timeout_secs = 1\n");
    assert_eq!(rig.decide(s(2)).await.0, Decision::Expired);
    rig.write_config("protocol_auto_approve = true\n");
    assert_eq!(rig.decide(s(3)).await.0, Decision::AutoApproved);
    rig.write_config("approval_timeout_secs = 1\napproval_policy = 'strict'\n");
    assert_eq!(
        rig.decide(summary(4, RiskLevel::ReadOnly)).await.0,
        Decision::Expired
    );
    rig.write_config("approval_policy = 'balanced'\n");
    assert_eq!(
        rig.decide(summary(5, RiskLevel::ReadOnly)).await.0,
        Decision::Allowed
    );
    // A grant with a key approvald does not know: the grant is invalid, and the decision
    // fails closed with a reason naming it.
    rig.write_config("[[approval_grants]]\ntool = 'shell'\nmax_rsik = 'medium'\n");
    let (decision, reason) = rig.decide(s(6)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(reason.starts_with(REASON_CONFIG_UNREADABLE), "{reason}");
    assert!(reason.contains("approval grant 1"), "{reason}");
    assert!(reason.contains("max_rsik"), "{reason}");
    rig.write_config("approval_timeout_secs = 0\n");
    let (decision, reason) = rig.decide(s(7)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(reason.contains("approval_timeout_secs"), "{reason}");
    rig.write_config("approval_policy = 'lax'\n");
    assert_eq!(rig.decide(s(8)).await.0, Decision::Refused);
    // A timeout above the limit is read as the limit, never longer.
    rig.write_config("approval_timeout_secs = 100000\n");
    let waiting = rig.decide_later(s(9));
    let pending = rig.wait_pending(1).await;
    assert_eq!(pending[0].seconds_left, 120);
    tokio::time::advance(Duration::from_secs(121)).await;
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Expired);
    assert!(reason.contains("within 120 s"), "{reason}");
    rig.assert_one_row_per_call().await;
    assert_eq!(rig.decisions().await.len(), 9);
}

#[tokio::test]
async fn approve_runs_it_and_records_one_row() {
    let rig = Rig::new().await;
    let mut s = summary(11, RiskLevel::Medium);
    s.reasons = vec!["touch creates or updates files".into()];
    let waiting = rig.decide_later(s);
    let pending = rig.wait_pending(1).await;
    let p = &pending[0];
    assert_eq!(p.id.0.len(), 6);
    assert!(p
        .id
        .0
        .bytes()
        .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)));
    assert_eq!(p.call_id, CallId(11));
    assert_eq!(p.tool, "shell");
    assert_eq!(p.action, "touch /tmp/x");
    assert_eq!(p.risk, RiskLevel::Medium);
    assert_eq!(p.origin, CallOrigin::McpHttp);
    assert_eq!(p.reasons, ["touch creates or updates files"]);
    assert_eq!(p.phrase, None);
    assert!((119..=120).contains(&p.seconds_left), "{}", p.seconds_left);
    assert!(rig.rows().await.is_empty(), "no row while pending");
    // No phrase is needed for medium.
    rig.approve(&p.id.0, None).await.unwrap();
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Approved);
    assert!(reason.contains(&p.id.0), "{reason}");
    assert!(rig.pending().await.is_empty());
    // Settled requests cannot be settled again.
    assert_eq!(
        rig.approve(&p.id.0, None).await,
        Err(CliErrorKind::NoSuchRequest)
    );
    assert_eq!(rig.reject(&p.id.0).await, Err(CliErrorKind::NoSuchRequest));
    assert_eq!(
        rig.approve("zzzzzz", None).await,
        Err(CliErrorKind::NoSuchRequest)
    );
    assert_eq!(
        rig.approve("a".repeat(10_000), None).await,
        Err(CliErrorKind::InvalidRequest)
    );
    let rows = rig.rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].record.decision.map(|v| v.as_str()),
        Some("approved")
    );
    assert_eq!(rows[0].record.call_id, 11);
    assert!(rows[0].record.reason.as_deref().unwrap().contains(&p.id.0));
}

#[tokio::test]
async fn reject_does_not_run_it() {
    let rig = Rig::new().await;
    let waiting = rig.decide_later(summary(1, RiskLevel::High));
    let id = rig.wait_pending(1).await[0].id.clone();
    rig.reject(&id).await.unwrap();
    let (decision, _) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Rejected);
    assert!(!decision.runs());
    assert_eq!(
        rig.approve(&id, None).await,
        Err(CliErrorKind::NoSuchRequest)
    );
    assert_eq!(rig.decisions().await, [(1, "rejected".to_string())]);
}

#[tokio::test(start_paused = true)]
async fn expiry_never_approves() {
    let rig = Rig::new().await;
    rig.write_config("approval_timeout_secs = 5\n");
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    let id = rig.wait_pending(1).await[0].id.clone();
    assert_eq!(rig.pending().await[0].seconds_left, 5);
    tokio::time::advance(Duration::from_millis(3500)).await;
    assert_eq!(rig.pending().await[0].seconds_left, 2);
    tokio::time::advance(Duration::from_secs(2)).await;
    // Past the expiry instant: approving is refused whether or not the waiter has woken.
    assert_eq!(rig.approve(&id, None).await, Err(CliErrorKind::Expired));
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Expired);
    assert!(reason.contains("within 5 s"), "{reason}");
    assert!(rig.pending().await.is_empty());
    // Remembered for a while as expired, then forgotten.
    assert_eq!(rig.approve(&id, None).await, Err(CliErrorKind::Expired));
    assert_eq!(rig.reject(&id).await, Err(CliErrorKind::Expired));
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(
        rig.approve(&id, None).await,
        Err(CliErrorKind::NoSuchRequest)
    );
    assert_eq!(rig.decisions().await, [(1, "expired".to_string())]);
}

#[tokio::test]
async fn dangerous_and_critical_need_the_exact_phrase() {
    let rig = Rig::new().await;
    for (call_id, risk) in [(1, RiskLevel::Dangerous), (2, RiskLevel::Critical)] {
        let waiting = rig.decide_later(summary(call_id, risk));
        let p = rig.wait_pending(1).await.remove(0);
        let phrase = format!("approve {} {}", risk.as_str(), p.id);
        assert_eq!(p.phrase.as_deref(), Some(phrase.as_str()));
        assert_eq!(
            rig.approve(&p.id.0, None).await,
            Err(CliErrorKind::PhraseRequired)
        );
        assert_eq!(rig.pending().await.len(), 1, "still pending");
        for wrong in [
            String::new(),
            "approve".into(),
            format!("approve high {}", p.id),
            format!("approve {} zzzzzz", risk.as_str()),
            format!("{phrase} "),
            phrase.to_uppercase(),
        ] {
            assert_eq!(
                rig.approve(&p.id.0, Some(&wrong)).await,
                Err(CliErrorKind::WrongPhrase),
                "{wrong:?}"
            );
        }
        assert_eq!(rig.pending().await.len(), 1, "still pending");
        assert!(!waiting.is_finished());
        rig.approve(&p.id.0, Some(&phrase)).await.unwrap();
        let (decision, _) = waiting.await.unwrap();
        assert_eq!(decision, Decision::Approved);
    }
    assert_eq!(
        rig.decisions().await,
        [(1, "approved".to_string()), (2, "approved".to_string())]
    );
}

/// A request from `origin`.
fn from(call_id: u64, origin: CallOrigin) -> ActionSummary {
    let mut s = summary(call_id, RiskLevel::Medium);
    s.origin = origin;
    if origin.is_agent() {
        s.task = Some(TaskId(format!("task-{call_id}")));
    }
    s
}

/// Wait until call `call_id` is pending.
async fn wait_call(rig: &Rig, call_id: u64) {
    for _ in 0..5000 {
        if rig
            .pending()
            .await
            .iter()
            .any(|p| p.call_id == CallId(call_id))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!(
        "call {call_id} never became pending: {:?}",
        rig.pending().await
    );
}

/// Pending requests per origin, as the owner's listings count them.
async fn held_by(rig: &Rig, origin: CallOrigin) -> usize {
    rig.pending()
        .await
        .iter()
        .filter(|p| p.origin == origin)
        .count()
}

const HTTP_SHARE_FULL: &str = "needs local approval, but callers over HTTP (mcp_http and \
    agent_http together) already hold 3 of the 8 pending approvals, their share (the rest are \
    for other callers and the device owner); decide or let them expire first";

#[tokio::test]
async fn at_most_eight_pending_and_the_ninth_is_refused_at_once() {
    assert_eq!(
        MAX_PENDING_APPROVALS - OWNER_RESERVED_APPROVALS - 2 * MAX_PENDING_APPROVALS_PER_CALLER,
        0,
        "this test fills every share"
    );
    let rig = Rig::new().await;
    // Every share full: HTTP, stdio and the owner's.
    let origins = [
        CallOrigin::McpHttp,
        CallOrigin::AgentHttp,
        CallOrigin::McpHttp,
        CallOrigin::McpStdio,
        CallOrigin::AgentStdio,
        CallOrigin::McpStdio,
        CallOrigin::OwnerTui,
        CallOrigin::OwnerTui,
    ];
    assert_eq!(origins.len(), MAX_PENDING_APPROVALS);
    let mut waiting = Vec::new();
    for (i, origin) in origins.into_iter().enumerate() {
        let call_id = i as u64 + 1;
        waiting.push(rig.decide_later(from(call_id, origin)));
        wait_call(&rig, call_id).await;
    }
    let pending = rig.wait_pending(MAX_PENDING_APPROVALS).await;
    // Oldest first; ids are distinct.
    let mut ids: Vec<_> = pending.iter().map(|p| p.id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), MAX_PENDING_APPROVALS);
    // The owner too is refused once all 8 wait.
    let (decision, reason) = rig.decide(from(100, CallOrigin::OwnerTui)).await;
    assert_eq!(decision, Decision::Refused);
    assert_eq!(
        reason,
        "needs local approval, but 8 approvals are already pending; decide or let them \
         expire first"
    );
    assert_eq!(rig.pending().await.len(), MAX_PENDING_APPROVALS);
    // Settling one makes room for one more.
    rig.reject(&pending[0].id).await.unwrap();
    let tenth = rig.decide_later(from(101, CallOrigin::McpHttp));
    wait_call(&rig, 101).await;
    let now = rig.pending().await;
    assert_eq!(now.len(), MAX_PENDING_APPROVALS);
    assert_eq!(now.last().unwrap().call_id, CallId(101), "newest last");
    for p in now {
        rig.reject(&p.id.0).await.unwrap();
    }
    for w in waiting {
        assert_eq!(w.await.unwrap().0, Decision::Rejected);
    }
    assert_eq!(tenth.await.unwrap().0, Decision::Rejected);
    assert_eq!(rig.decisions().await.len(), MAX_PENDING_APPROVALS + 2);
    rig.assert_one_row_per_call().await;
}

/// Ten callers holding the token flood the queue (direct calls and delegated tasks
/// alike): they get their share and no more, and the owner's own Ask still finds room.
#[tokio::test]
async fn a_remote_flood_cannot_take_the_owners_slots() {
    let rig = Rig::new().await;
    let mut flood = Vec::new();
    let mut refused = 0;
    for call_id in 1..=10u64 {
        let origin = if call_id % 2 == 0 {
            CallOrigin::AgentHttp
        } else {
            CallOrigin::McpHttp
        };
        let handle = rig.decide_later(from(call_id, origin));
        if call_id as usize <= MAX_PENDING_APPROVALS_PER_CALLER {
            wait_call(&rig, call_id).await;
            flood.push(handle);
        } else {
            let (decision, reason) = handle.await.unwrap();
            assert_eq!(decision, Decision::Refused, "call {call_id}");
            assert_eq!(reason, HTTP_SHARE_FULL);
            refused += 1;
        }
    }
    assert_eq!(refused, 10 - MAX_PENDING_APPROVALS_PER_CALLER);
    assert_eq!(rig.pending().await.len(), MAX_PENDING_APPROVALS_PER_CALLER);
    // The owner's Ask gets in while the flood holds all it may.
    let owner: Vec<_> = (0..OWNER_RESERVED_APPROVALS as u64)
        .map(|n| {
            let handle = rig.decide_later(from(20 + n, CallOrigin::OwnerTui));
            (20 + n, handle)
        })
        .collect();
    for (call_id, _) in &owner {
        wait_call(&rig, *call_id).await;
    }
    // Rejecting the flood only lets it refill its own share.
    let first = rig.pending().await[0].clone();
    assert_eq!(first.origin, CallOrigin::McpHttp);
    rig.reject(&first.id.0).await.unwrap();
    let refill = rig.decide_later(from(30, CallOrigin::AgentHttp));
    wait_call(&rig, 30).await;
    let (decision, reason) = rig.decide(from(31, CallOrigin::McpHttp)).await;
    assert_eq!(
        (decision, reason.as_str()),
        (Decision::Refused, HTTP_SHARE_FULL)
    );
    assert_eq!(
        held_by(&rig, CallOrigin::McpHttp).await + held_by(&rig, CallOrigin::AgentHttp).await,
        MAX_PENDING_APPROVALS_PER_CALLER
    );
    assert_eq!(
        held_by(&rig, CallOrigin::OwnerTui).await,
        OWNER_RESERVED_APPROVALS
    );
    for p in rig.pending().await {
        rig.reject(&p.id.0).await.unwrap();
    }
    for (_, handle) in owner {
        assert_eq!(handle.await.unwrap().0, Decision::Rejected);
    }
    for handle in flood.into_iter().chain([refill]) {
        assert_eq!(handle.await.unwrap().0, Decision::Rejected);
    }
    // Every refusal is audited as one.
    let refusals = rig
        .decisions()
        .await
        .into_iter()
        .filter(|(_, d)| d == "refused")
        .count();
    assert_eq!(refusals, 10 - MAX_PENDING_APPROVALS_PER_CALLER + 1);
    rig.assert_one_row_per_call().await;
}

/// One caller at its share does not keep another out, and with nobody else waiting the
/// owner may use every slot, the others' included.
#[tokio::test]
async fn one_caller_cannot_exceed_its_share_while_another_still_gets_in() {
    let rig = Rig::new().await;
    let mut waiting = Vec::new();
    for call_id in 1..=MAX_PENDING_APPROVALS_PER_CALLER as u64 {
        waiting.push(rig.decide_later(from(call_id, CallOrigin::McpStdio)));
        wait_call(&rig, call_id).await;
    }
    let (decision, reason) = rig.decide(from(10, CallOrigin::AgentStdio)).await;
    assert_eq!(decision, Decision::Refused);
    assert_eq!(
        reason,
        "needs local approval, but stdio clients (mcp_stdio and agent_stdio together) already \
         hold 3 of the 8 pending approvals, their share (the rest are for other callers and the \
         device owner); decide or let them expire first"
    );
    // The HTTP caller still gets in.
    waiting.push(rig.decide_later(from(11, CallOrigin::McpHttp)));
    wait_call(&rig, 11).await;
    // The owner fills the rest, beyond its reserve.
    for call_id in 12..=15u64 {
        waiting.push(rig.decide_later(from(call_id, CallOrigin::OwnerTui)));
        wait_call(&rig, call_id).await;
    }
    assert_eq!(rig.pending().await.len(), MAX_PENDING_APPROVALS);
    // Then the HTTP caller, under its share, finds the queue full.
    let (decision, reason) = rig.decide(from(16, CallOrigin::AgentHttp)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(
        reason.contains("8 approvals are already pending"),
        "{reason}"
    );
    for p in rig.pending().await {
        rig.reject(&p.id.0).await.unwrap();
    }
    for handle in waiting {
        assert_eq!(handle.await.unwrap().0, Decision::Rejected);
    }
    rig.assert_one_row_per_call().await;
}

/// `reject --origin`: every request of that origin, no other, each rejected and audited on
/// its own; what was rejected is answered.
#[tokio::test]
async fn reject_by_origin_rejects_exactly_that_origins_requests() {
    let rig = Rig::new().await;
    let origins = [
        (1, CallOrigin::McpHttp),
        (2, CallOrigin::AgentHttp),
        (3, CallOrigin::McpHttp),
        (4, CallOrigin::McpStdio),
        (5, CallOrigin::OwnerTui),
    ];
    let mut waiting = Vec::new();
    for (call_id, origin) in origins {
        waiting.push((call_id, origin, rig.decide_later(from(call_id, origin))));
        wait_call(&rig, call_id).await;
    }
    let before = rig.pending().await;
    let rejected = match rig
        .cli(CliRequest::RejectOrigin {
            origin: CallOrigin::McpHttp,
        })
        .await
    {
        CliResponse::Rejected(list) => list,
        other => panic!("{other:?}"),
    };
    let expected: Vec<_> = before
        .iter()
        .filter(|p| p.origin == CallOrigin::McpHttp)
        .cloned()
        .collect();
    assert_eq!(rejected, expected, "those rejected, as they were listed");
    assert_eq!(
        rejected.iter().map(|p| p.call_id).collect::<Vec<_>>(),
        [CallId(1), CallId(3)]
    );
    let left = rig.pending().await;
    assert_eq!(
        left.iter().map(|p| p.call_id).collect::<Vec<_>>(),
        [CallId(2), CallId(4), CallId(5)]
    );
    // Nothing of that origin left: an empty answer, not an error.
    assert!(matches!(
        rig.cli(CliRequest::RejectOrigin {
            origin: CallOrigin::McpHttp
        })
        .await,
        CliResponse::Rejected(list) if list.is_empty()
    ));
    let mut rest = Vec::new();
    for (call_id, origin, handle) in waiting {
        if origin == CallOrigin::McpHttp {
            let (decision, reason) = handle.await.unwrap();
            let id = &before
                .iter()
                .find(|p| p.call_id == CallId(call_id))
                .unwrap()
                .id;
            assert_eq!(decision, Decision::Rejected);
            assert_eq!(
                reason,
                format!(
                    "needs local approval: rejected at the device, with every request from \
                     mcp_http (request {id})"
                )
            );
        } else {
            rest.push(handle);
        }
    }
    // Each rejection is its own audit row; the others are still undecided.
    let decisions = rig.decisions().await;
    assert_eq!(
        decisions,
        [(1, "rejected".to_string()), (3, "rejected".to_string())]
    );
    for p in left {
        rig.reject(&p.id.0).await.unwrap();
    }
    for handle in rest {
        assert_eq!(handle.await.unwrap().0, Decision::Rejected);
    }
    rig.assert_one_row_per_call().await;
}

#[tokio::test]
async fn withdraw_settles_a_pending_request() {
    let rig = Rig::new().await;
    let waiting = rig.decide_later(summary(5, RiskLevel::Medium));
    let other = rig.decide_later(summary(6, RiskLevel::Medium));
    let pending = rig.wait_pending(2).await;
    let id = pending
        .iter()
        .find(|p| p.call_id == CallId(5))
        .unwrap()
        .id
        .clone();
    assert!(matches!(
        rig.call(AuthorityRequest::Withdraw { call_id: CallId(5) })
            .await,
        AuthorityResponse::Recorded
    ));
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Withdrawn);
    assert!(reason.contains("cancelled"), "{reason}");
    let left = rig.pending().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].call_id, CallId(6));
    assert_eq!(
        rig.approve(&id, None).await,
        Err(CliErrorKind::NoSuchRequest)
    );
    // Unknown and already decided call ids are fine.
    for call_id in [5, 999] {
        assert!(matches!(
            rig.call(AuthorityRequest::Withdraw {
                call_id: CallId(call_id)
            })
            .await,
            AuthorityResponse::Recorded
        ));
    }
    rig.reject(&left[0].id).await.unwrap();
    assert_eq!(other.await.unwrap().0, Decision::Rejected);
    assert_eq!(
        rig.decisions().await,
        [(5, "withdrawn".to_string()), (6, "rejected".to_string())]
    );
}

#[tokio::test]
async fn a_withdrawal_that_overtakes_its_decision_still_withdraws_it() {
    let rig = Rig::new().await;
    rig.authority.withdraw(CallId(42));
    let (decision, _) = rig.decide(summary(42, RiskLevel::Medium)).await;
    assert_eq!(decision, Decision::Withdrawn);
    assert!(rig.pending().await.is_empty());
    // It applies to that call only: the next one asks normally.
    let waiting = rig.decide_later(summary(43, RiskLevel::Medium));
    let id = rig.wait_pending(1).await[0].id.clone();
    rig.reject(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
}

#[tokio::test]
async fn a_second_decision_for_a_call_in_progress_closes_the_channel() {
    let rig = Rig::new().await;
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    rig.wait_pending(1).await;
    let second = rig
        .client
        .call(&AuthorityRequest::Decide(summary(1, RiskLevel::Medium)))
        .await;
    assert!(second.is_err(), "{second:?}");
    // The executor's channel is gone (and with it, in the tree, the executor); the first
    // request is still only a person's to decide, and nothing was decided twice.
    assert!(waiting.await.is_err());
    assert_eq!(rig.pending().await.len(), 1);
    rig.authority.withdraw(CallId(1));
    // The first request's own task records its (withdrawn) decision after this returns.
    let mut decisions = Vec::new();
    for _ in 0..500 {
        rig.authority.store().flush().await.unwrap();
        decisions = rig.decisions().await;
        if !decisions.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(decisions, [(1, "withdrawn".to_string())]);
}

#[tokio::test]
async fn stopping_refuses_what_is_pending_and_records_it() {
    let rig = Rig::new().await;
    let waiting = rig.decide_later(summary(1, RiskLevel::Critical));
    rig.wait_pending(1).await;
    rig.authority.stop(Duration::from_secs(5)).await;
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Refused);
    assert!(reason.contains("stopping"), "{reason}");
    // stop() returned only after the decision was recorded.
    assert_eq!(rig.decisions().await, [(1, "refused".to_string())]);
    // Nothing new becomes pending.
    let (decision, _) = rig.decide(summary(2, RiskLevel::Medium)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(rig.pending().await.is_empty());
}

#[tokio::test]
async fn a_restarted_authority_knows_no_pending_request() {
    let rig = Rig::new().await;
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    let id = rig.wait_pending(1).await[0].id.clone();
    // A new approvald over the same state directory: pending requests lived only in the
    // old process, so nothing can approve them.
    let store = nl2sh_approvald::store::Store::open(rig.dir.path()).unwrap();
    let restarted = nl2sh_approvald::authority::Authority::new(store, &rig.config);
    assert!(restarted.list_pending().is_empty());
    assert_eq!(
        restarted.approve(&id, None).map_err(|(kind, _)| kind),
        Err(CliErrorKind::NoSuchRequest)
    );
    rig.reject(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
}

/// Every call has one decision row and one outcome row: a call that runs gets its outcome
/// from the executor, a call that does not run gets it with its decision (an outcome
/// from the executor for it would be out of state: see decide.rs).
#[tokio::test]
async fn every_call_has_one_decision_and_one_outcome() {
    let rig = Rig::new().await;
    let finished = |call_id| {
        AuthorityRequest::Finished(CallResult {
            call_id: CallId(call_id),
            success: true,
            exit_code: Some(0),
            duration_ms: 3,
            summary: "ok".into(),
        })
    };
    // Runs.
    assert_eq!(
        rig.decide(summary(1, RiskLevel::ReadOnly)).await.0,
        Decision::Allowed
    );
    rig.record(finished(1)).await;
    // Rejected: the executor does not run it.
    let waiting = rig.decide_later(summary(2, RiskLevel::Medium));
    let id = rig.wait_pending(1).await[0].id.clone();
    rig.reject(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
    // Withdrawn.
    let waiting = rig.decide_later(summary(3, RiskLevel::Medium));
    rig.wait_pending(1).await;
    rig.authority.withdraw(CallId(3));
    assert_eq!(waiting.await.unwrap().0, Decision::Withdrawn);
    rig.authority.store().flush().await.unwrap();

    let rows = rig.rows().await;
    let kinds: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.record.call_id,
                r.record.kind,
                r.record.decision.unwrap().as_str().to_string(),
                r.record.success,
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (1, AuditKind::Decision, "allowed".into(), None),
            (1, AuditKind::Outcome, "allowed".into(), Some(true)),
            (2, AuditKind::Decision, "rejected".into(), None),
            (2, AuditKind::Outcome, "rejected".into(), Some(false)),
            (3, AuditKind::Decision, "withdrawn".into(), None),
            (3, AuditKind::Outcome, "withdrawn".into(), Some(false)),
        ]
    );
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
}
