//! Timed UI grants through the real tree and the owner's CLI (docs/APPROVALS.md, "Timed
//! UI grants"): a tap in an ordinary app is approved "for UI in this app for N minutes";
//! the next taps there run unasked and their audit rows name the grant; a shell command
//! still asks; revoking, or another app coming to the front, ends the grant; in
//! Settings a tap is high and no grant may follow it. The device is a copy of the
//! stand-ins whose `dumpsys` says which app is in front.

use std::path::Path;

use serde_json::{json, Value};

use nl2sh_tests::{pending_approvals, run_without_terminal, wait_pending, Fixture, Server};

/// Put `package` in front: the copy's `dumpsys` default focus.
fn bring_to_front(standins: &Path, package: &str) {
    let script = standins.join("dumpsys");
    let text = std::fs::read_to_string(&script).unwrap();
    let at = text.find("focus=${NL2SH_STANDIN_FOCUS:-").unwrap();
    let end = at + text[at..].find('\n').unwrap();
    let line = format!("focus=${{NL2SH_STANDIN_FOCUS:-{package}/.Main}}");
    let changed = format!("{}{line}{}", &text[..at], &text[end..]);
    // Written beside and renamed: a running dumpsys keeps reading the old file.
    let next = standins.join("dumpsys.next");
    std::fs::write(&next, changed).unwrap();
    std::fs::set_permissions(&next, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(next, script).unwrap();
}

fn cli(fx: &Fixture, args: &[&str]) -> (Option<i32>, String, String) {
    run_without_terminal(fx, args)
}

fn grants(fx: &Fixture) -> Vec<Value> {
    let (code, out, err) = cli(fx, &["protocol", "ui-grants", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap()
}

fn tap(server: &Server) -> std::thread::JoinHandle<nl2sh_tests::ToolCall> {
    server.invoke_async("android.tap", json!({"x": 30, "y": 40}))
}

#[test]
fn a_timed_ui_grant_covers_taps_in_its_app_until_revoked_or_the_app_changes() {
    let device = tempfile::tempdir().unwrap();
    let standins = nl2sh_tests::android_standins_copy(device.path());
    bring_to_front(&standins, "com.example.chat");
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[("PATH", &nl2sh_tests::path_with(&standins))]);

    // The first tap asks, and may be approved for UI in its app.
    let first = tap(&server);
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["tool"], "android.tap", "{p}");
    assert_eq!(p["risk"], "low", "{p}");
    assert_eq!(p["ui_app"], "com.example.chat", "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    let (code, listing, _) = cli(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0));
    assert!(
        listing.contains("or approve with --ui-minutes N: UI actions in com.example.chat"),
        "{listing}"
    );
    // Out of bounds: a usage error, nothing decided.
    let (code, _, _) = cli(
        &fx,
        &["protocol", "approve", &id, "--yes", "--ui-minutes", "31"],
    );
    assert_eq!(code, Some(2));
    let (code, out, err) = cli(
        &fx,
        &["protocol", "approve", &id, "--yes", "--ui-minutes", "5"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("UI actions of mcp_http in com.example.chat now run unasked for 5 min"),
        "{out}"
    );
    assert!(!first.join().unwrap().is_error);
    let listed = grants(&fx);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["app"], "com.example.chat");
    assert_eq!(listed[0]["origin"], "mcp_http");
    assert!(listed[0]["seconds_left"].as_u64().unwrap() > 290);
    let grant = listed[0]["id"].as_str().unwrap().to_string();
    let (code, out, _) = cli(&fx, &["protocol", "ui-grants"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains(&format!(
            "{grant}  UI actions in com.example.chat  from mcp_http"
        )),
        "{out}"
    );

    // The next taps and keys there run unasked, each counted.
    assert!(
        !server
            .invoke("android.tap", json!({"x": 31, "y": 41}))
            .is_error
    );
    assert!(
        !server
            .invoke("android.key", json!({"key": "BACK"}))
            .is_error
    );
    assert!(pending_approvals(&fx).is_empty());
    assert_eq!(grants(&fx)[0]["used"], 2);
    // A shell command still asks.
    let shell = server.invoke_async("shell.exec", json!({"command": "touch /tmp/nl2sh-never"}));
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["tool"], "shell.exec");
    assert!(p["ui_app"].is_null(), "{p}");
    let (code, _, _) = cli(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(shell.join().unwrap().is_error);

    // Revoked: the next tap asks again.
    let (code, _, _) = cli(&fx, &["protocol", "ui-grants", "--revoke", &grant]);
    assert_eq!(code, Some(0));
    let (code, _, _) = cli(&fx, &["protocol", "ui-grants", "--revoke", &grant]);
    assert_eq!(code, Some(4), "an unknown grant");
    assert!(grants(&fx).is_empty());
    let again = tap(&server);
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    let (code, _, _) = cli(
        &fx,
        &["protocol", "approve", &id, "--yes", "--ui-minutes", "10"],
    );
    assert_eq!(code, Some(0));
    assert!(!again.join().unwrap().is_error);
    assert_eq!(grants(&fx).len(), 1);

    // Another app comes to the front: its tap asks, and the grant has ended.
    bring_to_front(&standins, "com.example.bank");
    let elsewhere = tap(&server);
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["ui_app"], "com.example.bank", "{p}");
    assert!(grants(&fx).is_empty());
    let (code, _, _) = cli(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(elsewhere.join().unwrap().is_error);

    // In Settings a tap is high: no grant may follow it, and asking for one leaves the
    // request pending.
    bring_to_front(&standins, "com.android.settings");
    let settings = tap(&server);
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["risk"], "high", "{p}");
    assert!(p["ui_app"].is_null(), "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    let (code, _, err) = cli(
        &fx,
        &["protocol", "approve", &id, "--yes", "--ui-minutes", "5"],
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("never covers it"), "{err}");
    assert_eq!(pending_approvals(&fx).len(), 1, "still pending");
    let (code, _, _) = cli(&fx, &["protocol", "reject", &id]);
    assert_eq!(code, Some(0));
    assert!(settings.join().unwrap().is_error);
    assert!(grants(&fx).is_empty());

    // The audit names the grant on each action it covered.
    let (code, out, _) = cli(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0));
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let covered: Vec<&Value> = rows
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "granted")
        .collect();
    assert_eq!(covered.len(), 2, "{out}");
    for r in covered {
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("timed UI grant {grant}"))
                && reason.contains("com.example.chat"),
            "{reason}"
        );
    }
    let approved: Vec<&str> = rows
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "approved")
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert!(
        approved
            .iter()
            .any(|r| r.contains("timed UI grant") && r.contains("for 5 min")),
        "{approved:?}"
    );
}

/// The built-in Agent drives an app the way an outside agent does: its first tap asks,
/// the owner approves it for UI in that app, and its next UI steps there run unasked,
/// each audited as covered by the grant; the grant is the Agent's origin's alone.
#[test]
fn the_agent_works_an_app_under_a_timed_ui_grant() {
    use nl2sh_tests::scripted_model::{Reply, ScriptedModel, ToolCall};
    const KEY_ENV: &str = "NL2SH_UI_GRANTS_E2E_MODEL_KEY";
    let device = tempfile::tempdir().unwrap();
    let standins = nl2sh_tests::android_standins_copy(device.path());
    bring_to_front(&standins, "com.example.chat");
    let model = ScriptedModel::start([
        Reply::tool_calls([ToolCall::new(
            "c_tap",
            "android__tap",
            json!({"x": 30, "y": 40}),
        )]),
        Reply::tool_calls([ToolCall::new(
            "c_swipe",
            "android__swipe",
            json!({"x1": 100, "y1": 900, "x2": 100, "y2": 300}),
        )]),
        Reply::tool_calls([ToolCall::new(
            "c_back",
            "android__key",
            json!({"key": "BACK"}),
        )]),
        Reply::answer("Scrolled the chat and went back."),
    ]);
    let fx = Fixture::new(&model.config(KEY_ENV, 6));
    let path = nl2sh_tests::path_with(&standins);
    let server = Server::start(
        &fx,
        &[],
        &[("PATH", &path), (KEY_ENV, "sk-ui-grants-e2e-0123456789")],
    );
    let answer = server.a2a(
        "SendMessage",
        json!({"message": {"messageId": "m-ui", "role": "ROLE_USER",
                "parts": [{"text": "Scroll my chat, then go back."}]},
               "configuration": {"returnImmediately": true}}),
    );
    let task = answer["result"]["task"]["id"].as_str().unwrap().to_string();
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["origin"], "agent_http", "{p}");
    assert_eq!(p["tool"], "android.tap", "{p}");
    assert_eq!(p["ui_app"], "com.example.chat", "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    let (code, out, err) = cli(
        &fx,
        &["protocol", "approve", &id, "--yes", "--ui-minutes", "5"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let done = loop {
        let t = server.a2a("GetTask", json!({"id": task}))["result"].clone();
        if t["status"]["state"] == "TASK_STATE_COMPLETED" {
            break t;
        }
        assert!(pending_approvals(&fx).is_empty(), "a covered step asked");
        assert!(std::time::Instant::now() < deadline, "{t}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let data = &done["artifacts"][0]["parts"][0]["data"];
    assert_eq!(data["tool_calls"], 3, "{data}");
    assert_eq!(data["failed_tools"], json!([]), "{data}");
    let listed = grants(&fx);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["origin"], "agent_http");
    assert_eq!(listed[0]["used"], 2);
    // A direct caller's tap in the same app is not covered by the Agent's grant.
    let direct = tap(&server);
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["origin"], "mcp_http", "{p}");
    let (code, _, _) = cli(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(direct.join().unwrap().is_error);
    let (code, out, _) = cli(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0));
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let covered: Vec<&str> = rows
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "granted")
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    assert_eq!(covered, ["android.swipe", "android.key"], "{out}");
}
