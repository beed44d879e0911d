//! Who is asking, and the command as it was sent (issue 40), over the real binary: a
//! 2026-07-28 client names itself in `_meta`, an older one by its `User-Agent`; the owner
//! reads the name, "as you", the command exactly as a shell prints it (`'\''`, not
//! `'\\''`) and the argv it runs, in `protocol approvals` (text and `--json`) and the
//! audit keeps the name in its hash chain.

use serde_json::{json, Value};

use nl2sh_tests::{http, run_without_terminal, wait_pending, Fixture, Server, ToolCall};

/// A `tools/call` of `nl2sh_invoke` on a thread of its own (it waits for the owner), with
/// the MCP headers and `extra`.
fn invoke_with(
    server: &Server,
    params: Value,
    extra: Vec<(&'static str, String)>,
) -> std::thread::JoinHandle<ToolCall> {
    let (addr, host, token) = (
        server.addr,
        server.host_header(),
        server.token().to_string(),
    );
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    std::thread::spawn(move || {
        let bearer = format!("Bearer {token}");
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Authorization", bearer.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend(extra.iter().map(|(k, v)| (*k, v.as_str())));
        let r = http(addr, "POST", "/mcp", &headers, body.to_string().as_bytes());
        ToolCall::from_response(&r)
    })
}

/// A 2026-07-28 call naming its client in `_meta`.
fn modern_invoke(
    server: &Server,
    client: Value,
    command: &str,
) -> std::thread::JoinHandle<ToolCall> {
    let params = json!({
    "name": "nl2sh_invoke",
    "arguments": {"tool": "shell.exec", "arguments": {"command": command}},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client,
    }});
    invoke_with(
        server,
        params,
        vec![
            ("MCP-Protocol-Version", "2026-07-28".to_string()),
            ("Mcp-Method", "tools/call".to_string()),
            ("Mcp-Name", "nl2sh_invoke".to_string()),
        ],
    )
}

/// An older revision's call (no `_meta`), with this `User-Agent`.
fn legacy_invoke(
    server: &Server,
    user_agent: &str,
    command: String,
) -> std::thread::JoinHandle<ToolCall> {
    let params = json!({"name": "nl2sh_invoke",
        "arguments": {"tool": "shell.exec", "arguments": {"command": command}}});
    let extra = vec![
        ("MCP-Protocol-Version", "2025-11-25".to_string()),
        ("User-Agent", user_agent.to_string()),
    ];
    invoke_with(server, params, extra)
}

fn reject(fx: &Fixture, id: &str) {
    let (code, out, err) = run_without_terminal(fx, &["protocol", "reject", id]);
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn the_owner_reads_who_asks_and_the_command_as_it_was_sent() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let target = tempfile::tempdir().unwrap();
    let file = target.path().join("it's here");
    // A shell's own quoting of a name with a quote in it.
    let command = format!(
        "touch '{}'",
        file.display().to_string().replace('\'', r"'\''")
    );
    let call = modern_invoke(
        &server,
        json!({"name": "codex-cli", "title": "Codex", "version": "0.47.0"}),
        &command,
    );
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        p["client"],
        json!({"name": "Codex", "version": "0.47.0"}),
        "{p}"
    );
    assert_eq!(p["sent"], command.as_str(), "{p}");
    let shown = &p["shown"];
    assert_eq!(
        shown["who"], "Codex 0.47.0 (by its own name) over MCP (HTTP)",
        "{p}"
    );
    assert_eq!(shown["as"], "as you", "{p}");
    assert_eq!(shown["command"], command.as_str(), "{p}");
    assert_eq!(shown["command_escaped"], false, "{p}");
    // The argv, as a shell prints it: each `'` of the command as `'\''`, one backslash.
    let runs = format!("/bin/sh -c '{}'", command.replace('\'', r"'\''"));
    assert_eq!(p["action"], runs.as_str(), "{p}");
    assert_eq!(shown["action"], runs.as_str(), "{p}");
    assert_eq!(shown["action_escaped"], false, "{p}");

    let (code, listing, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = listing.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == format!("{id}  Codex 0.47.0 (by its own name) over MCP (HTTP)"))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        lines[at + 1].starts_with("    shell.exec  risk ") && lines[at + 1].contains("  as you  "),
        "{listing}"
    );
    assert_eq!(
        lines[at + 2],
        format!("    command: {command}"),
        "{listing}"
    );
    assert_eq!(lines[at + 3], format!("    runs: {runs}"), "{listing}");
    assert!(!listing.contains(r"'\\''"), "{listing}");

    reject(&fx, &id);
    let answer = call.join().unwrap();
    assert!(answer.is_error, "{answer:?}");
    assert!(!file.exists());

    // The audit keeps the name, in the row's hash chain.
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .flat_map(|v: Value| match v {
            Value::Array(rows) => rows,
            row => vec![row],
        })
        .collect();
    let decision = rows
        .iter()
        .find(|r| r["kind"] == "decision" && r["tool"] == "shell.exec")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(decision["client"], "Codex 0.47.0", "{decision}");
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "audit", "--verify"]);
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn an_older_client_is_named_by_its_user_agent_and_a_script_shows_line_by_line() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let target = tempfile::tempdir().unwrap();
    let command = format!("cd {}\ntouch made-by-script", target.path().display());
    let call = legacy_invoke(&server, "my-orchestrator/2.1 (linux)", command.clone());
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        p["shown"]["who"], "my-orchestrator 2.1 (by its own name) over MCP (HTTP)",
        "{p}"
    );
    assert_eq!(p["shown"]["command"], command.as_str(), "{p}");
    let (code, listing, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    let expected = format!(
        "    command (2 lines):\n      | cd {}\n      | touch made-by-script\n",
        target.path().display()
    );
    assert!(listing.contains(&expected), "{listing}");
    reject(&fx, &id);
    let _ = call.join().unwrap();

    // With a directory, the argv (which names it) is what the owner reads first.
    let params = json!({"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec",
        "arguments": {"command": "touch x", "cwd": target.path()}}});
    let call = invoke_with(&server, params, Vec::new());
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert!(p["shown"]["command"].is_null(), "{p}");
    let (code, listing, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    let expected = format!(
        "    action: /bin/sh -c 'touch x' (in {})\n",
        target.path().display()
    );
    assert!(listing.contains(&expected), "{listing}");
    reject(&fx, &id);
    let _ = call.join().unwrap();

    // Blank lines that would scroll the start of the request off a terminal: the command
    // and its argv each shown escaped, on one line.
    let padded = format!("touch made-by-padding{}echo fine", "\n".repeat(60));
    let call = legacy_invoke(&server, "curl/8.5.0", padded);
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(p["shown"]["command_escaped"], true, "{p}");
    let (code, listing, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    let one_line = format!(
        "    command (shown escaped: \\\\ is one backslash): touch made-by-padding{}echo fine\n",
        r"\n".repeat(60)
    );
    assert!(listing.contains(&one_line), "{listing}");
    assert!(listing.lines().count() < 12, "{listing}");
    reject(&fx, &id);
    let _ = call.join().unwrap();

    // A character that cannot be shown: the whole command escaped, and said so.
    let call = legacy_invoke(&server, "curl/8.5.0", "touch x\u{202e}y\tz".into());
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        p["shown"]["who"], "curl 8.5.0 (by its own name) over MCP (HTTP)",
        "{p}"
    );
    assert_eq!(p["shown"]["command"], r"touch x\u{202e}y\tz", "{p}");
    assert_eq!(p["shown"]["command_escaped"], true, "{p}");
    let (code, listing, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        listing.contains(r"    command (shown escaped: \\ is one backslash): touch x\u{202e}y\tz"),
        "{listing}"
    );
    reject(&fx, &id);
    let _ = call.join().unwrap();
}
