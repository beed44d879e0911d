//! Android notifications of pending requests, through a stand-in for `cmd` that records
//! its argv: posted when a request starts waiting, replaced once it is settled, never
//! when the configuration turns them off, and never in a decision's way.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{summary, Rig};
use nl2sh_approvald::notify::{Notifier, TITLE_PENDING, TITLE_SETTLED};
use nl2sh_proto::channels::{Decision, RiskLevel};

/// The stand-ins, written once before any test starts a process (a script still open for
/// writing in a forked child cannot be executed: ETXTBSY).
struct Scripts {
    dir: tempfile::TempDir,
    /// Appends its argv (NUL after each, RS after the last) to `calls-<tag>` beside it;
    /// tags hold the request's random id, so each test reads its own.
    record: PathBuf,
    /// Never finishes on its own.
    hang: PathBuf,
}

fn scripts() -> &'static Scripts {
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        };
        let record = write(
            "record",
            &format!(
                r#"out='{}'/calls-"$7"; {{ printf '%s\000' "$@"; printf '\036'; }} >> "$out""#,
                dir.path().display()
            ),
        );
        let hang = write("hang", "exec sleep 60");
        Scripts { dir, record, hang }
    })
}

/// What the recorder was asked for request `id`, in order.
fn calls(id: &str) -> Vec<Vec<String>> {
    let path = scripts().dir.path().join(format!("calls-nl2sh-{id}"));
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    String::from_utf8(bytes)
        .unwrap()
        .split('\u{1e}')
        .filter(|call| !call.is_empty())
        .map(|call| {
            call.strip_suffix('\0')
                .unwrap_or(call)
                .split('\0')
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

async fn wait_calls(id: &str, n: usize) -> Vec<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = calls(id);
        if got.len() >= n {
            return got;
        }
        assert!(Instant::now() < deadline, "{n} calls never came: {got:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn post(title: &str, id: &str, text: &str) -> Vec<String> {
    [
        "notification",
        "post",
        "-S",
        "bigtext",
        "-t",
        title,
        &format!("nl2sh-{id}"),
        text,
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn recording_rig() -> Rig {
    Rig::with_notifier(Notifier::with_program(&scripts().record)).await
}

#[tokio::test]
async fn a_pending_request_is_posted_and_replaced_once_decided() {
    let rig = recording_rig().await;
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    let p = rig.wait_pending(1).await.remove(0);
    let id = p.id.0.clone();
    let got = wait_calls(&id, 1).await;
    let text = format!(
        "shell: touch /tmp/x\nrisk medium, from mcp_http\napprove within 120 s: nl2sh protocol approve {id}"
    );
    assert_eq!(got, [post(TITLE_PENDING, &id, &text)]);
    rig.approve(&id, None).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Approved);
    let got = wait_calls(&id, 2).await;
    assert_eq!(
        got[1],
        post(TITLE_SETTLED, &id, "shell: touch /tmp/x\napproved")
    );
    // Nothing more comes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(calls(&id).len(), 2);
}

#[tokio::test]
async fn an_expired_request_is_replaced_saying_so() {
    let rig = recording_rig().await;
    rig.write_config("approval_timeout_secs = 1\n");
    let mut s = summary(2, RiskLevel::Dangerous);
    s.action = "rm -rf /data/x\u{1b}[2K".into();
    let waiting = rig.decide_later(s);
    let id = rig.wait_pending(1).await.remove(0).id.0;
    assert_eq!(waiting.await.unwrap().0, Decision::Expired);
    let got = wait_calls(&id, 2).await;
    assert!(
        got[0][7].starts_with("shell: rm -rf /data/x\\x1b[2K\nrisk dangerous, from mcp_http\n"),
        "{:?}",
        got[0][7]
    );
    assert!(
        got[0][7].ends_with(&format!(
            "approve within 1 s: nl2sh protocol approve {id} --phrase \"approve dangerous {id}\""
        )),
        "{:?}",
        got[0][7]
    );
    assert_eq!(got[1][5], TITLE_SETTLED);
    assert_eq!(got[1][6], format!("nl2sh-{id}"));
    assert!(got[1][7].ends_with("\nexpired: nobody decided it in time, so it did not run"));
}

#[tokio::test]
async fn nothing_is_posted_when_the_configuration_says_no() {
    let rig = recording_rig().await;
    rig.write_config("approval_notifications = false\n");
    let waiting = rig.decide_later(summary(3, RiskLevel::Medium));
    let p = rig.wait_pending(1).await.remove(0);
    rig.reject(&p.id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(calls(&p.id.0).is_empty());
}

/// A command that hangs, or one that is not there, never holds up or fails a decision.
#[tokio::test]
async fn a_hanging_or_missing_program_is_no_decisions_concern() {
    let scripts = scripts();
    for program in [scripts.hang.clone(), PathBuf::from("/nonexistent/cmd")] {
        let rig = Rig::with_notifier(Notifier::with_program(&program)).await;
        let started = Instant::now();
        let waiting = rig.decide_later(summary(4, RiskLevel::Medium));
        let p = rig.wait_pending(1).await.remove(0);
        rig.approve(&p.id, None).await.unwrap();
        assert_eq!(waiting.await.unwrap().0, Decision::Approved);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{}: {:?}",
            program.display(),
            started.elapsed()
        );
    }
}
