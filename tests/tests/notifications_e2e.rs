//! `android.notifications` through the real tree: reading notifications is a private read,
//! so a call waits for the owner, a grant by tool alone does not cover it, and a grant
//! naming its exact action lets it run unasked (docs/APPROVALS.md, docs/PROTOCOLS.md).
//! The device is the stand-in `dumpsys` (tests/fixtures/android-bin).

use serde_json::json;

use nl2sh_tests::{pending_approvals, run_without_terminal, wait_pending, Fixture, Server};

fn start(fx: &Fixture) -> Server {
    let path = nl2sh_tests::path_with(&nl2sh_tests::android_standins());
    Server::start(fx, &[], &[("PATH", &path)])
}

/// The action a call asks approval for, after checking the call waits and, rejected,
/// reads nothing.
fn asks_and_reads_nothing_when_rejected(fx: &Fixture, server: &Server) -> String {
    let call = server.invoke_async("android.notifications", json!({}));
    let pending = wait_pending(fx, 1);
    let p = &pending[0];
    assert_eq!(p["tool"], "android.notifications", "{p}");
    assert_eq!(p["risk"], "read_only", "{p}");
    assert!(p.to_string().contains("private"), "{p}");
    let action = p["action"].as_str().unwrap().to_string();
    assert!(
        action.ends_with("dumpsys notification --noredact"),
        "{action}"
    );
    let id = p["id"].as_str().unwrap();
    let (code, _, err) = run_without_terminal(fx, &["protocol", "reject", id]);
    assert_eq!(code, Some(0), "{err}");
    let r = call.join().unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(!r.output().to_string().contains("Alice"), "{r:?}");
    action
}

#[test]
fn reading_notifications_asks_and_only_a_grant_naming_it_allows_it() {
    // No grant; then a grant by tool alone: both ask.
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = start(&fx);
    let action = asks_and_reads_nothing_when_rejected(&fx, &server);
    drop(server);
    let fx = Fixture::new(
        "approval_timeout_secs = 60\n\n[[approval_grants]]\ntool = \"android.notifications\"\n",
    );
    let server = start(&fx);
    assert_eq!(asks_and_reads_nothing_when_rejected(&fx, &server), action);
    drop(server);

    // A grant naming the exact action: it runs unasked.
    let grant = format!(
        "approval_timeout_secs = 60\n\n[[approval_grants]]\ntool = \"android.notifications\"\naction = {}\n",
        json!(action)
    );
    let fx = Fixture::new(&grant);
    let server = start(&fx);
    let r = server.invoke("android.notifications", json!({}));
    assert!(!r.is_error, "{r:?}");
    assert!(pending_approvals(&fx).is_empty());
    let out = r.output();
    assert_eq!(out["count"], 3, "{out}");
    let first = &out["notifications"][0];
    assert_eq!(first["package"], "com.google.android.apps.messaging");
    assert_eq!(first["title"], "Alice");
    assert_eq!(
        first["text"],
        "See you at 6?\nBring the keys (the spare ones)"
    );
    assert_eq!(first["posted"], "2026-01-01T10:04:00.123Z");
    assert_eq!(out["notifications"][1]["ongoing"], true);
}
