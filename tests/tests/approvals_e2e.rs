//! Device-local approvals end to end: a mutation asked for over MCP waits until a person
//! at the device decides with `nl2sh protocol approve/reject`; nothing runs otherwise.

use std::time::{Duration, Instant};

use serde_json::json;

use nl2sh_tests::{
    is_root, pending_approvals, run_on_terminal, run_without_terminal, wait_pending, Fixture,
    Server,
};

/// Invoke on a thread (the call blocks while its approval is pending).
fn touch(path: &std::path::Path) -> serde_json::Value {
    json!({"command": format!("touch {}", path.display())})
}

#[test]
fn approve_from_a_terminal_runs_the_exact_action() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("approved-marker");
    let call = server.invoke_async("shell.exec", touch(&marker));
    let list = wait_pending(&fx, 1);
    let p = &list[0];
    assert_eq!(p["tool"], "shell.exec");
    assert!(
        p["action"]
            .as_str()
            .unwrap()
            .contains(&format!("touch {}", marker.display())),
        "{p}"
    );
    assert_eq!(p["origin"], "mcp_http");
    assert_eq!(p["identity"], "launching_user");
    assert!(p["seconds_left"].as_u64().unwrap() <= 60);
    assert!(p["phrase"].is_null(), "{p}");
    assert!(!marker.exists(), "ran before approval");
    let id = p["id"].as_str().unwrap().to_string();

    // The human-readable list shows the same request and its action verbatim.
    let (code, out, _) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&id) && out.contains("touch"), "{out}");

    // A script cannot approve: no terminal on stdin.
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(7), "{err}");
    assert!(err.contains("interactive terminal"), "{err}");
    assert_eq!(
        pending_approvals(&fx).len(),
        1,
        "a refused approve must leave it pending"
    );
    assert!(!marker.exists());

    let (code, out, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("Approved"), "{out}");
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert!(marker.exists());
    assert!(pending_approvals(&fx).is_empty());
    // Deciding it again: no such request.
    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(4), "{err}");
}

/// A configuration so deep that `protocol/approvals.sock` is far past the 108 bytes a
/// socket address holds: the service starts, and the local commands reach it.
#[test]
fn a_configuration_at_any_depth_serves_its_approvals() {
    let nested: Vec<String> = (0..6)
        .map(|i| format!("a-deeply-nested-configuration-directory-{i}"))
        .collect();
    let fx = Fixture::with_config_at(
        &format!("{}/config.toml", nested.join("/")),
        "approval_timeout_secs = 60\n",
    );
    let server = Server::start(&fx, &[], &[]);
    let sock = fx.state_dir().join("protocol/approvals.sock");
    assert!(sock.as_os_str().len() > 200, "{}", sock.display());
    assert!(std::os::unix::fs::FileTypeExt::is_socket(
        &std::fs::symlink_metadata(&sock).unwrap().file_type()
    ));

    let (code, out, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "No pending approvals.\n"),
        "{err}"
    );

    let marker = fx.dir.path().join("deep-marker");
    let call = server.invoke_async("shell.exec", touch(&marker));
    let id = wait_pending(&fx, 1)[0]["id"].as_str().unwrap().to_string();
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&id) && out.contains("touch"), "{out}");
    assert!(!marker.exists(), "ran before approval");

    let (code, out, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!call.join().unwrap().is_error);
    assert!(marker.exists());
}

#[test]
fn reject_and_expiry_refuse_and_nothing_runs() {
    let fx = Fixture::new("approval_timeout_secs = 2\n");
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("rejected-marker");
    let call = server.invoke_async("shell.exec", touch(&marker));
    let id = wait_pending(&fx, 1)[0]["id"].as_str().unwrap().to_string();
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "reject", &id]);
    assert_eq!(code, Some(0), "{out}{err}");
    let r = call.join().unwrap();
    assert!(r.is_error);
    assert!(
        r.structured["output"].as_str().unwrap().contains("reject"),
        "{r:?}"
    );
    assert!(!marker.exists());

    let started = Instant::now();
    let r = server
        .invoke_async("shell.exec", touch(&marker))
        .join()
        .unwrap();
    assert!(r.is_error);
    assert!(
        r.structured["output"].as_str().unwrap().contains("expire"),
        "{r:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(!marker.exists());
    assert!(pending_approvals(&fx).is_empty());
}

#[test]
fn dangerous_actions_need_their_exact_phrase() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let victim = fx.dir.path().join("victim");
    std::fs::create_dir_all(victim.join("sub")).unwrap();
    let call = server.invoke_async(
        "shell.exec",
        json!({"command": format!("rm -rf {}", victim.display())}),
    );
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(p["risk"], "dangerous", "{p}");
    let phrase = p["phrase"].as_str().unwrap().to_string();
    assert_eq!(phrase, format!("approve dangerous {id}"));

    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(6), "{err}");
    let (code, _, err) = run_on_terminal(
        &fx,
        &[
            "protocol",
            "approve",
            &id,
            "--phrase",
            "approve dangerous wrong",
        ],
    );
    assert_eq!(code, Some(6), "{err}");
    assert_eq!(
        pending_approvals(&fx).len(),
        1,
        "a wrong phrase must leave it pending"
    );
    assert!(victim.exists());

    let (code, out, err) = run_on_terminal(&fx, &["protocol", "approve", &id, "--phrase", &phrase]);
    assert_eq!(code, Some(0), "{out}{err}");
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert!(!victim.exists());
}

/// Callers over HTTP hold at most their share of the 8 slots: a flood has the rest
/// refused at once, saying why, and the owner rejects all of it with one command.
#[test]
fn an_http_flood_gets_its_share_and_reject_origin_clears_it() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let share = nl2sh_proto::limits::MAX_PENDING_APPROVALS_PER_CALLER;
    let marker = |i: usize| fx.dir.path().join(format!("m{i}"));
    let calls: Vec<_> = (0..share)
        .map(|i| server.invoke_async("shell.exec", touch(&marker(i))))
        .collect();
    let list = wait_pending(&fx, share);
    let started = Instant::now();
    for i in share..10 {
        let r = server
            .invoke_async("shell.exec", touch(&marker(i)))
            .join()
            .unwrap();
        assert!(r.is_error);
        assert!(
            r.structured["output"].as_str().unwrap().contains(
                "callers over HTTP (mcp_http and agent_http together) already hold 3 of the 8 \
                 pending approvals, their share"
            ),
            "{r:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the flood was queued, not refused"
    );
    assert_eq!(pending_approvals(&fx).len(), share);

    // The owner sees who holds the queue.
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("3 of 8 pending: mcp_http 3 (reject every request of one origin"),
        "{out}"
    );

    // Rejecting needs no terminal, as for one request; another origin has nothing to
    // reject, and an unknown one is a usage error.
    let (code, _, err) =
        run_without_terminal(&fx, &["protocol", "reject", "--origin", "agent_http"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no pending request from agent_http"), "{err}");
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "reject", "--origin", "web"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, _) = run_without_terminal(&fx, &["protocol", "reject"]);
    assert_eq!(code, Some(2));
    assert_eq!(pending_approvals(&fx).len(), share);

    let (code, out, err) =
        run_without_terminal(&fx, &["protocol", "reject", "--origin", "mcp_http"]);
    assert_eq!(code, Some(0), "{out}{err}");
    for p in &list {
        let id = p["id"].as_str().unwrap();
        assert!(
            out.contains(&format!(
                "Rejected: {id}  a client that gave no name, over MCP (HTTP)\n    shell.exec  "
            )),
            "{out}"
        );
    }
    assert!(
        out.ends_with("Rejected 3 requests from mcp_http.\n"),
        "{out}"
    );
    for c in calls {
        let r = c.join().unwrap();
        assert!(r.is_error);
        assert!(
            r.structured["output"]
                .as_str()
                .unwrap()
                .contains("rejected at the device, with every request from mcp_http"),
            "{r:?}"
        );
    }
    assert!(pending_approvals(&fx).is_empty());
    assert!((0..10).all(|i| !marker(i).exists()));
    // Each one is its own rejection in the audit.
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let rejected = rows
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "rejected")
        .count();
    assert_eq!(rejected, share, "{out}");
    // Gone: again, nothing to reject.
    let (code, _, _) = run_without_terminal(&fx, &["protocol", "reject", "--origin", "mcp_http"]);
    assert_eq!(code, Some(4));
}

#[test]
fn a_client_that_disconnects_leaves_its_request_pending_and_unrun() {
    use std::io::Write;
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("disconnected-marker");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec", "arguments": touch(&marker)}}})
    .to_string();
    {
        let mut s = std::net::TcpStream::connect(server.addr).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            server.host_header(),
            server.token(),
            body.len()
        )
        .unwrap();
        wait_pending(&fx, 1);
    } // the client goes away
    std::thread::sleep(Duration::from_millis(300));
    let list = wait_pending(&fx, 1);
    assert!(!marker.exists());
    let id = list[0]["id"].as_str().unwrap();
    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", id]);
    assert_eq!(code, Some(0), "{err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the approved call did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn grants_cover_their_commands_only_never_dangerous_and_follow_config_edits() {
    let grant = "approval_timeout_secs = 60\n\n[[approval_grants]]\ntool = \"shell.exec\"\ncommand = [\"touch\", \"**\"]\nmax_risk = \"high\"\n";
    let fx = Fixture::new(grant);
    let server = Server::start(&fx, &[], &[]);
    let dir = fx.dir.path();
    let marker = dir.join("granted-marker");
    let r = server.invoke("shell.exec", touch(&marker));
    assert!(!r.is_error, "{r:?}");
    assert!(
        marker.exists(),
        "a matching grant must run without a prompt"
    );
    let two = [dir.join("one"), dir.join("two")];
    let r = server.invoke(
        "shell.exec",
        json!({"command": format!(
            "touch {} && sleep 0 && touch {}; echo done",
            two[0].display(),
            two[1].display()
        )}),
    );
    assert!(!r.is_error, "{r:?}");
    assert!(two.iter().all(|m| m.exists()));

    // What rides along with a granted command waits for a person, as the attack on the
    // retired `action_prefix` did not.
    let rider = dir.join("rider");
    let lines = [
        format!(
            "touch {}; mkdir {}",
            dir.join("a").display(),
            rider.display()
        ),
        format!(
            "touch {} && ln -s /etc/passwd {}",
            dir.join("b").display(),
            rider.display()
        ),
        format!(
            "touch {} $(mkdir {})",
            dir.join("c").display(),
            rider.display()
        ),
        format!("touch {} > {}", dir.join("d").display(), rider.display()),
        format!("X=1; export X; touch {}", dir.join("e").display()),
        // Read-only, but it would read as root, outside the sandbox.
        format!("touch {}; cat /etc/hostname", dir.join("f").display()),
    ];
    // In turns of the share of pending approvals one caller over HTTP may hold.
    for turn in lines.chunks(nl2sh_proto::limits::MAX_PENDING_APPROVALS_PER_CALLER) {
        let calls: Vec<_> = turn
            .iter()
            .map(|line| server.invoke_async("shell.exec", json!({ "command": line })))
            .collect();
        let pending = wait_pending(&fx, turn.len());
        for p in &pending {
            run_without_terminal(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
        }
        for call in calls {
            assert!(call.join().unwrap().is_error);
        }
    }
    assert!(!rider.exists());
    for name in ["a", "b", "c", "d", "e", "f"] {
        assert!(!dir.join(name).exists(), "{name}");
    }

    // Dangerous is never covered, whatever the grant says.
    let victim = dir.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let text = grant.replace("[\"touch\", \"**\"]", "[\"rm\", \"**\"]");
    std::fs::write(fx.config(), &text).unwrap();
    let call = server.invoke_async(
        "shell.exec",
        json!({"command": format!("rm -rf {}", victim.display())}),
    );
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["risk"], "dangerous");
    run_without_terminal(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    assert!(call.join().unwrap().is_error);
    assert!(victim.exists());

    // Editing the configuration changes the next decision without a restart.
    std::fs::write(fx.config(), "approval_timeout_secs = 60\n").unwrap();
    let second = dir.join("second-marker");
    let call = server.invoke_async("shell.exec", touch(&second));
    let p = wait_pending(&fx, 1).remove(0);
    run_without_terminal(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    assert!(call.join().unwrap().is_error);
    assert!(!second.exists());

    // A retired `action_prefix` written into the running service's file is refused, never
    // read as a wider grant: nothing runs until the file is fixed.
    std::fs::write(
        fx.config(),
        "[[approval_grants]]\ntool = \"shell.exec\"\naction_prefix = \"/bin/sh -c 'touch \"\n",
    )
    .unwrap();
    let third = dir.join("third-marker");
    let r = server.invoke("shell.exec", touch(&third));
    assert!(r.is_error);
    let said = format!("{} {:?}", r.structured, r.content);
    assert!(said.contains("`action_prefix` is retired"), "{said}");
    assert!(!third.exists());
}

#[test]
fn a_retired_action_prefix_refuses_startup() {
    let fx = Fixture::new(
        "[[approval_grants]]\ntool = \"shell.exec\"\naction_prefix = \"/bin/sh -c 'am start \"\n",
    );
    let err = Server::start_args(&fx, &["protocol", "serve", "--port", "0"], &[])
        .err()
        .unwrap();
    assert!(
        err.1
            .contains("config.toml:3: approval grant 1: `action_prefix` is retired"),
        "{}",
        err.1
    );
    assert!(err.1.contains("command = [\"ls\", \"**\"]"), "{}", err.1);
}

#[test]
fn local_commands_say_when_no_service_runs() {
    let fx = Fixture::new("");
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("no nl2sh protocol service is running"),
        "{err}"
    );
    let (code, _, _) = run_on_terminal(&fx, &["protocol", "approve", "abcdef"]);
    assert_eq!(code, Some(3));
}

#[test]
fn the_approvals_socket_serves_only_the_same_uid() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("needs root to act as another uid");
        return;
    }
    let fx = Fixture::new("");
    let _server = Server::start(&fx, &[], &[]);
    let sock = fx.state_dir().join("protocol/approvals.sock");
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    // Open the path up so only SO_PEERCRED stands between uid 65534 and approvald.
    use std::os::unix::fs::PermissionsExt;
    for d in [
        fx.dir.path().to_path_buf(),
        fx.state_dir(),
        fx.state_dir().join("protocol"),
    ] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({:?})\ns.settimeout(5)\n\
         try:\n  s.sendall(b'\\x00\\x00\\x00\\x10' + b'x'*16)\n  d=s.recv(100)\nexcept Exception:\n  d=b''\n\
         sys.exit(0 if d==b'' else 1)\n",
        sock.display().to_string()
    );
    use std::os::unix::process::CommandExt;
    let status = std::process::Command::new("python3")
        .args(["-c", &script])
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "approvald answered a connection from another uid"
    );
}

#[test]
fn audit_lists_every_call_answered_before_it_was_run() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    // Answered rows are journalled and committed in batches a few ms later; the listing
    // asks the service to commit them first, so none of 40 calls answered at once is
    // missing when it is run the moment the last answer arrived.
    let calls: Vec<_> = (0..40)
        .map(|i| server.invoke_async("shell.exec", json!({"command": format!("echo listed-{i}")})))
        .collect();
    for call in calls {
        assert!(!call.join().unwrap().is_error);
    }
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    for i in 0..40 {
        assert!(
            out.contains(&format!("echo listed-{i}'")),
            "call {i} was answered but is not listed: {out}"
        );
    }
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn every_call_is_audited_once_with_decision_and_outcome_and_edits_are_detected() {
    const TOKEN: &str = "audit-test-token-0123456789abcdef0123456789";
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let mut token_server = Server::start(&fx, &[], &[("NL2SH_PROTOCOL_TOKEN", TOKEN)]);
    // An explicit token is not printed; the harness needs it to call.
    token_server.token = Some(TOKEN.into());
    let marker = fx.dir.path().join("audit-marker");
    assert!(
        !token_server
            .invoke("shell.exec", json!({"command": "echo audited"}))
            .is_error
    );
    let call = token_server.invoke_async("shell.exec", touch(&marker));
    let id = wait_pending(&fx, 1)[0]["id"].as_str().unwrap().to_string();
    run_without_terminal(&fx, &["protocol", "reject", &id]);
    assert!(call.join().unwrap().is_error);
    std::thread::sleep(Duration::from_millis(300));

    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    // The read ran unasked in the sandbox, under approvald's policy snapshot: one row
    // holds its decision and its outcome.
    let calls: Vec<_> = rows.iter().filter(|r| r["kind"] == "call").collect();
    assert_eq!(calls.len(), 1, "{rows:?}");
    assert_eq!(calls[0]["decision"], "allowed");
    assert_eq!(calls[0]["success"], true);
    assert_eq!(calls[0]["action"], "/bin/sh -c 'echo audited'");
    // The mutation was asked about: a decision row, and an outcome row.
    let decisions: Vec<_> = rows.iter().filter(|r| r["kind"] == "decision").collect();
    let outcomes: Vec<_> = rows.iter().filter(|r| r["kind"] == "outcome").collect();
    assert_eq!(decisions.len(), 1, "{rows:?}");
    assert_eq!(decisions[0]["decision"], "rejected");
    // Each decided call has exactly one outcome.
    for d in &decisions {
        let n = outcomes
            .iter()
            .filter(|o| o["call_id"] == d["call_id"])
            .count();
        assert_eq!(n, 1, "call {} has {n} outcomes", d["call_id"]);
    }
    let db = fx.state_dir().join("protocol/tasks.sqlite3");
    let bytes = std::fs::read(&db).unwrap();
    let wal = std::fs::read(db.with_extension("sqlite3-wal")).unwrap_or_default();
    for hay in [&bytes, &wal] {
        assert!(
            !hay.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "the token is in the database"
        );
    }
    let (code, out, _) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(0), "{out}");

    // Edit one row with the sqlite3 tool: --verify names it.
    let target = decisions[0]["id"].as_i64().unwrap();
    let status = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg(format!(
            "UPDATE audit SET decision = 'approved' WHERE id = {target};"
        ))
        .status()
        .expect("the sqlite3 tool is needed for this test (.ci/run installs it)");
    assert!(status.success());
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(8), "{err}");
    assert!(err.contains(&format!("row {target}")), "{err}");
}

/// `protocol audit --json` until it lists `n` rows (outcome rows are written after the
/// call has answered).
fn wait_audit_rows(fx: &Fixture, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, out, err) = run_without_terminal(fx, &["protocol", "audit", "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
        if rows.len() >= n {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "{} audit rows, not {n}",
            rows.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn verify_reports_rows_cut_from_the_end_even_after_a_restart() {
    // The retention keys pass the supervisor's strict schema and approvald reads them.
    let fx = Fixture::new("audit_max_rows = 1000\naudit_max_bytes = 8388608\n");
    let config = fx.config();
    let mut server = Server::start(&fx, &[], &[]);
    // Six reads under the policy snapshot: one row each.
    for _ in 0..6 {
        assert!(!server.invoke("fs.stat", json!({"path": config})).is_error);
    }
    let rows = wait_audit_rows(&fx, 6);
    assert_eq!(rows.last().unwrap()["id"], 6, "{rows:?}");
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("audit trail intact: 6 rows verified"), "{out}");
    assert!(out.contains("row 6, is in the trail"), "{out}");

    // Cut the last two rows with the sqlite3 tool: the chain that is left is intact, the
    // tail file beside the database is not.
    let db = fx.state_dir().join("protocol/tasks.sqlite3");
    let status = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("DELETE FROM audit WHERE id > 4;")
        .status()
        .expect("the sqlite3 tool is needed for this test (.ci/run installs it)");
    assert!(status.success());
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(8), "{err}");
    assert!(
        err.contains(
            "the trail ends at row 4 but row 6 was written: rows were removed from the end"
        ),
        "{err}"
    );

    // A restart does not paper over it: new rows continue after the missing ids.
    server.signal(libc::SIGTERM);
    assert!(server.wait(Duration::from_secs(15)).success());
    let server = Server::start(&fx, &[], &[]);
    assert!(!server.invoke("fs.stat", json!({"path": config})).is_error);
    let rows = wait_audit_rows(&fx, 5);
    assert_eq!(rows[4]["id"], 7, "{rows:?}");
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(8), "{err}");
    assert!(
        err.contains("audit trail broken at row 7: rows 5 to 6 are missing"),
        "{err}"
    );
}

/// One approve flow: a `high` request is confirmed once more at the terminal after the
/// whole of it is shown; without that `y`, nothing is sent and it still waits.
#[test]
fn a_high_request_is_approved_only_after_the_person_confirms() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("high-marker");
    let command = format!("awk 'BEGIN {{ system(\"touch {}\") }}'", marker.display());
    let call = server.invoke_async("shell.exec", json!({"command": command}));
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["risk"], "high", "{p}");
    let id = p["id"].as_str().unwrap().to_string();

    // n, the end of input (Ctrl-D), a near miss.
    for typed in ["n\n", "\u{4}", "yess\n"] {
        let (code, out, err) =
            nl2sh_tests::run_on_terminal_typing(&fx, &["protocol", "approve", &id], typed);
        assert_eq!(code, Some(1), "{typed:?}: {out}{err}");
        assert!(out.contains("runs: /bin/sh -c 'awk '"), "{out}");
        assert!(
            out.contains("This request is high risk. Approve it?"),
            "{out}"
        );
        assert!(
            err.contains(&format!(
                "not approved: you did not confirm; nothing was sent and request {id} still waits"
            )),
            "{err}"
        );
        assert_eq!(pending_approvals(&fx).len(), 1, "{typed:?}");
        assert!(!marker.exists());
    }
    let (code, out, err) =
        nl2sh_tests::run_on_terminal_typing(&fx, &["protocol", "approve", &id], "y\n");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.ends_with(&format!("Approved {id}.\n")), "{out}");
    let answer = call.join().unwrap();
    assert!(!answer.is_error, "{answer:?}");
    assert!(marker.exists());
}
