//! The Web console over the real binary: how it starts (`--web-only`, `service start`),
//! who becomes the owner (`nl2sh web login`, one-time codes, sessions), what a page of
//! another origin or a tool command can do (nothing), and the owner's actions (approve,
//! reject, settings) as the page sends them. The browser itself is tested in
//! tests/python/test_web_console.py.

use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use nl2sh_tests::{
    http, mcp_post, pending_approvals, processes_with, run_on_terminal, run_without_terminal,
    wait_gone, wait_pending, Fixture, ToolCall,
};

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A `nl2sh --web-only` in the foreground, ended with its test.
struct Console {
    fx: Fixture,
    child: Child,
    web: SocketAddr,
    protocols: Option<SocketAddr>,
}

impl Console {
    /// `--web-only` with `extra` configuration; MCP/A2A too when `protocols`.
    fn start(protocols: bool, extra: &str) -> Console {
        let config = format!(
            "web_port = 0\nprotocol_service_port = 0\nprotocol_token = \"{TOKEN}\"\n\
             protocol_start_with_service = {protocols}\napproval_timeout_secs = 60\n{extra}"
        );
        let fx = Fixture::new(&config);
        let child = fx
            .command(&["--web-only"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nl2sh --web-only");
        let mut console = Console {
            fx,
            child,
            web: SocketAddr::from(([127, 0, 0, 1], 0)),
            protocols: None,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (code, v) = console.status();
            if code == Some(0) {
                let port_of = |c: &Value| {
                    c["listen"]
                        .as_str()
                        .and_then(|l| l.rsplit_once(':'))
                        .and_then(|(_, p)| p.parse::<u16>().ok())
                };
                let conns = v["connections"].as_array().cloned().unwrap_or_default();
                let web = conns.iter().find(|c| c["transport"] == "web");
                if let Some(port) = web.and_then(port_of) {
                    console.web = SocketAddr::from(([127, 0, 0, 1], port));
                    console.protocols = conns
                        .iter()
                        .find(|c| c["mcp_url"].is_string())
                        .and_then(port_of)
                        .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
                    assert_eq!(console.protocols.is_some(), protocols, "{v}");
                    return console;
                }
            }
            assert!(Instant::now() < deadline, "the console did not start: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status(&self) -> (Option<i32>, Value) {
        let (code, out, _) = run_without_terminal(&self.fx, &["service", "status", "--json"]);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null))
    }

    fn origin(&self) -> String {
        format!("http://{}", self.web)
    }

    /// A one-time code from `nl2sh web login`.
    fn login_code(&self) -> String {
        let (code, out, err) = run_without_terminal(&self.fx, &["web", "login"]);
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("within 120 s"), "{out}");
        let link = out
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("http://"))
            .expect("a login link");
        assert!(
            link.starts_with(&format!("{}/#login=", self.origin())),
            "{link}"
        );
        link.rsplit_once("#login=").unwrap().1.to_string()
    }

    fn get(&self, path: &str, cookie: Option<&str>) -> nl2sh_test_http::Response {
        let host = self.web.to_string();
        let cookie = cookie.map(|c| format!("nl2sh_session={c}"));
        let mut headers = vec![("Host", host.as_str())];
        if let Some(c) = &cookie {
            headers.push(("Cookie", c));
        }
        http(self.web, "GET", path, &headers, b"")
    }

    /// A POST as the console's page sends it, `headers` added or replacing.
    fn post(&self, path: &str, body: &Value, extra: &[(&str, &str)]) -> nl2sh_test_http::Response {
        let host = self.web.to_string();
        let origin = self.origin();
        let mut headers: Vec<(&str, &str)> = vec![
            ("Host", &host),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
        ];
        for (k, v) in extra {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            if !v.is_empty() {
                headers.push((k, v));
            }
        }
        http(
            self.web,
            "POST",
            path,
            &headers,
            body.to_string().as_bytes(),
        )
    }

    /// Log in: (session cookie value, CSRF token).
    fn log_in(&self) -> (String, String) {
        let code = self.login_code();
        let r = self.post("/api/login", &json!({ "code": code }), &[]);
        assert_eq!(r.status, 200, "{r:?}");
        let cookie = r
            .header("set-cookie")
            .expect("a session cookie")
            .to_string();
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
            assert!(cookie.contains(flag), "{cookie}");
        }
        let session = cookie
            .strip_prefix("nl2sh_session=")
            .and_then(|c| c.split(';').next())
            .expect("nl2sh_session=…")
            .to_string();
        (session, r.json()["csrf"].as_str().unwrap().to_string())
    }

    /// A change as the owner's page makes it.
    fn change(
        &self,
        session: &str,
        csrf: &str,
        path: &str,
        body: &Value,
    ) -> nl2sh_test_http::Response {
        let cookie = format!("nl2sh_session={session}");
        self.post(path, body, &[("Cookie", &cookie), ("X-CSRF-Token", csrf)])
    }

    fn invoke_async(&self, tool: &str, arguments: Value) -> std::thread::JoinHandle<ToolCall> {
        let addr = self.protocols.expect("MCP/A2A run");
        let tool = tool.to_string();
        std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "nl2sh_invoke", "arguments": {"tool": tool, "arguments": arguments}}});
            ToolCall::from_response(&mcp_post(addr, TOKEN, &body.to_string()))
        })
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let needle = self.fx.config().display().to_string();
        let _ = wait_gone(std::slice::from_ref(&needle), Duration::from_secs(10));
    }
}

#[test]
fn the_pages_carry_a_strict_policy_and_no_inline_script() {
    let c = Console::start(false, "");
    for path in ["/", "/app.js", "/app.css"] {
        let r = c.get(path, None);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let csp = r.header("content-security-policy").unwrap_or_default();
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
    }
    let html = c.get("/", None).body;
    // Every script is a file of the console's own, and nothing runs from an attribute.
    let lower = html.to_ascii_lowercase();
    for (i, _) in lower.match_indices("<script") {
        let tag = &lower[i..lower[i..].find('>').map_or(lower.len(), |e| i + e)];
        assert!(tag.contains("src=\"/app.js\""), "inline script: {tag}");
    }
    assert!(!lower.contains("<style"), "inline style block");
    assert!(!lower.contains(" style="), "inline style attribute");
    for attribute in [" onclick=", " onload=", " onerror=", "javascript:"] {
        assert!(!lower.contains(attribute), "{attribute}");
    }
    // Nothing from elsewhere.
    assert!(
        !lower.contains("http://") && !lower.contains("https://"),
        "{html}"
    );
    let r = c.get("/nothing-here", None);
    r.assert_refusal(404);
    assert!(r.header("content-security-policy").is_some());
}

#[test]
fn a_login_code_works_once_and_only_for_its_session() {
    let c = Console::start(false, "");
    // Reaching the port makes nobody the owner.
    c.get("/api/session", None).assert_refusal(401);
    c.get("/api/approvals", None).assert_refusal(401);
    c.get("/api/connection", Some(&"ab".repeat(32)))
        .assert_refusal(401);

    let code = c.login_code();
    let r = c.post("/api/login", &json!({ "code": code }), &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let session = r
        .header("set-cookie")
        .and_then(|h| h.strip_prefix("nl2sh_session="))
        .and_then(|h| h.split(';').next())
        .unwrap()
        .to_string();
    // Used once: a second use (a copied link, a replayed request) is refused.
    c.post("/api/login", &json!({ "code": code }), &[])
        .assert_refusal(401);

    let r = c.get("/api/session", Some(&session));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["csrf"].as_str().map(str::len), Some(64));
    let r = c.get("/api/connection", Some(&session));
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["examples"], true);
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("protocol_start_with_service"),
        "{v}"
    );
    assert!(
        !r.body.contains(TOKEN),
        "the token is never in the page data"
    );

    // `web logout --all` ends it.
    let (code, out, err) = run_without_terminal(&c.fx, &["web", "logout", "--all"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("Ended 1 Web console session"), "{out}");
    c.get("/api/session", Some(&session)).assert_refusal(401);
}

#[test]
fn guessing_codes_is_rate_limited_and_cannot_lock_the_owner_out() {
    let c = Console::start(false, "");
    let code = c.login_code();
    let mut statuses = Vec::new();
    for i in 0..12 {
        let r = c.post("/api/login", &json!({ "code": format!("{i:064x}") }), &[]);
        statuses.push(r.status);
    }
    assert!(statuses[..10].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[10..].iter().all(|s| *s == 429), "{statuses:?}");
    // A flood of wrong codes (any local program reaches the port) does not lock the
    // owner out: the link `web login` gave still works.
    let r = c.post("/api/login", &json!({ "code": code }), &[]);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn another_origin_cannot_change_anything() {
    let c = Console::start(false, "");
    let (session, csrf) = c.log_in();
    let cookie = format!("nl2sh_session={session}");
    let body = json!({"key": "protocol_service_port", "value": "9123"});
    let before = std::fs::read_to_string(c.fx.config()).unwrap();
    // A page of another site: its own Origin.
    c.post(
        "/api/settings",
        &body,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Origin", "http://evil.example"),
        ],
    )
    .assert_refusal(403);
    // A request with no Origin at all (not a browser page of ours).
    c.post(
        "/api/settings",
        &body,
        &[("Cookie", &cookie), ("X-CSRF-Token", &csrf), ("Origin", "")],
    )
    .assert_refusal(403);
    // Without the CSRF token, or with another session's.
    c.post("/api/settings", &body, &[("Cookie", &cookie)])
        .assert_refusal(403);
    c.post(
        "/api/settings",
        &body,
        &[("Cookie", &cookie), ("X-CSRF-Token", &"0".repeat(64))],
    )
    .assert_refusal(403);
    // A form's content type.
    c.post(
        "/api/settings",
        &body,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
    )
    .assert_refusal(415);
    // A DNS-rebinding page: another Host.
    let r = http(
        c.web,
        "GET",
        "/api/session",
        &[("Host", "attacker.example:80"), ("Cookie", &cookie)],
        b"",
    );
    r.assert_refusal(403);
    assert_eq!(std::fs::read_to_string(c.fx.config()).unwrap(), before);
    // The owner's own page does it.
    let r = c.change(&session, &csrf, "/api/settings", &body);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["restart_needed"], true);
    assert!(std::fs::read_to_string(c.fx.config())
        .unwrap()
        .contains("protocol_service_port = 9123"));
}

#[test]
fn settings_are_validated_and_saved_as_config_set_does() {
    let c = Console::start(false, "bridge_auto_approve = true\n");
    let (session, csrf) = c.log_in();
    let r = c.get("/api/settings", Some(&session));
    assert_eq!(r.status, 200, "{r:?}");
    let keys: Vec<String> = r.json()["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "protocol_start_with_service",
            "protocol_service_port",
            "protocol_token",
            "protocol_auto_approve",
            "approval_notifications"
        ]
    );
    assert!(!r.body.contains(TOKEN));
    // Out of range, the wrong type, or a key outside the console's category: refused,
    // the file untouched.
    let before = std::fs::read_to_string(c.fx.config()).unwrap();
    for (key, value) in [
        ("protocol_service_port", "70000"),
        ("protocol_auto_approve", "perhaps"),
        ("netd_uid", "0"),
        ("protocol_token", "short"),
    ] {
        let r = c.change(
            &session,
            &csrf,
            "/api/settings",
            &json!({"key": key, "value": value}),
        );
        r.assert_refusal(400);
        assert_eq!(r.json()["kind"], "invalid", "{key}: {r:?}");
    }
    assert_eq!(std::fs::read_to_string(c.fx.config()).unwrap(), before);
    // A live key applies at once; the retired key goes with the first save.
    let r = c.change(
        &session,
        &csrf,
        "/api/settings",
        &json!({"key": "protocol_auto_approve", "value": "false"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["restart_needed"], false);
    let text = std::fs::read_to_string(c.fx.config()).unwrap();
    assert!(!text.contains("bridge_auto_approve"), "{text}");
    assert!(
        r.json()["message"].as_str().unwrap().contains("retired"),
        "{r:?}"
    );
    // A token is saved but never shown back; rotating writes a new one.
    let new_token = "f".repeat(64);
    let r = c.change(
        &session,
        &csrf,
        "/api/settings",
        &json!({"key": "protocol_token", "value": new_token}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(!r.body.contains(&new_token), "{r:?}");
    assert!(std::fs::read_to_string(c.fx.config())
        .unwrap()
        .contains(&new_token));
    let r = c.change(&session, &csrf, "/api/settings/rotate-token", &json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let text = std::fs::read_to_string(c.fx.config()).unwrap();
    assert!(
        !text.contains(&new_token) && text.contains("protocol_token"),
        "{text}"
    );
    let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(c.fx.config()).unwrap());
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn the_owner_approves_and_rejects_from_the_console() {
    let c = Console::start(true, "");
    let (session, csrf) = c.log_in();
    // The MCP / A2A page shows the real endpoints, and the token only when asked.
    let v = c.get("/api/connection", Some(&session)).json();
    assert_eq!(v["state"], "running", "{v}");
    assert_eq!(v["examples"], false);
    let mcp_url = v["mcp_url"].as_str().unwrap();
    assert!(
        mcp_url.ends_with(&format!(":{}/mcp", c.protocols.unwrap().port())),
        "{v}"
    );
    assert!(v["snippets"]["codex_toml"]
        .as_str()
        .unwrap()
        .contains(mcp_url));
    let r = c.change(&session, &csrf, "/api/connection/token", &json!({}));
    assert_eq!(r.json()["token"], TOKEN);
    c.post(
        "/api/connection/token",
        &json!({}),
        &[("Cookie", &format!("nl2sh_session={session}"))],
    )
    .assert_refusal(403);

    // A request created over MCP appears with its action as the CLI shows it.
    let marker = c.fx.dir.path().join("approved\u{202e}marker");
    let call = c.invoke_async(
        "shell.exec",
        json!({"command": format!("touch '{}'", marker.display())}),
    );
    wait_pending(&c.fx, 1);
    let v = c.get("/api/approvals", Some(&session)).json();
    let p = &v["pending"][0];
    assert!(
        p["action"]
            .as_str()
            .unwrap()
            .contains("approved\\u{202e}marker"),
        "{p}"
    );
    assert_eq!(p["origin"], "mcp_http");
    let id = p["id"].as_str().unwrap().to_string();
    // Without the CSRF token nothing is decided.
    c.post(
        &format!("/api/approvals/{id}"),
        &json!({"decision": "approve"}),
        &[("Cookie", &format!("nl2sh_session={session}"))],
    )
    .assert_refusal(403);
    assert!(!marker.exists());
    let r = c.change(
        &session,
        &csrf,
        &format!("/api/approvals/{id}"),
        &json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let result = call.join().unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(marker.exists(), "the approved command ran");
    // Decided: a second decision finds nothing.
    c.change(
        &session,
        &csrf,
        &format!("/api/approvals/{id}"),
        &json!({"decision": "approve"}),
    )
    .assert_refusal(404);

    // A dangerous one needs its exact phrase; a wrong one leaves it pending.
    let victim = c.fx.dir.path().join("victim");
    std::fs::create_dir_all(victim.join("sub")).unwrap();
    let call = c.invoke_async(
        "shell.exec",
        json!({"command": format!("rm -rf {}", victim.display())}),
    );
    let p = wait_pending(&c.fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    let path = format!("/api/approvals/{id}");
    let r = c.change(&session, &csrf, &path, &json!({"decision": "approve"}));
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("phrase_required"))
    );
    let r = c.change(
        &session,
        &csrf,
        &path,
        &json!({"decision": "approve", "phrase": "approve dangerous nope"}),
    );
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("wrong_phrase"))
    );
    assert!(victim.exists());
    // Reject: the command never runs.
    let r = c.change(&session, &csrf, &path, &json!({"decision": "reject"}));
    assert_eq!(r.status, 200, "{r:?}");
    let result = call.join().unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(victim.exists(), "a rejected command ran");

    // The audit page has both decisions, and its chain verifies.
    let rows = c.get("/api/audit?limit=50", Some(&session)).json();
    let decisions: Vec<&str> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["decision"].as_str())
        .collect();
    assert!(
        decisions.contains(&"approved") && decisions.contains(&"rejected"),
        "{rows}"
    );
    let r = c.change(&session, &csrf, "/api/audit/verify", &json!({}));
    assert_eq!(r.json()["intact"], true, "{r:?}");
}

/// The console rejects every request of one origin at once, only with the session's CSRF
/// token from the console's own origin; each is its own rejection in the audit.
#[test]
fn the_owner_rejects_a_whole_origin_from_the_console() {
    let c = Console::start(true, "");
    let (session, csrf) = c.log_in();
    let cookie = format!("nl2sh_session={session}");
    let share = nl2sh_proto::limits::MAX_PENDING_APPROVALS_PER_CALLER;
    let marker = |i: usize| c.fx.dir.path().join(format!("flood-{i}"));
    let calls: Vec<_> = (0..share)
        .map(|i| {
            c.invoke_async(
                "shell.exec",
                json!({"command": format!("touch {}", marker(i).display())}),
            )
        })
        .collect();
    wait_pending(&c.fx, share);
    let v = c.get("/api/approvals", Some(&session)).json();
    assert_eq!(v["limit"], 8, "{v}");
    let path = "/api/approvals/reject-origin";
    let body = json!({"origin": "mcp_http"});
    // Without the token, from another site, or without a session: refused, nothing done.
    c.post(path, &body, &[("Cookie", &cookie)])
        .assert_refusal(403);
    c.post(
        path,
        &body,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Origin", "http://evil.example"),
        ],
    )
    .assert_refusal(403);
    c.post(path, &body, &[("X-CSRF-Token", &csrf)])
        .assert_refusal(401);
    // An origin that is not one.
    let r = c.change(&session, &csrf, path, &json!({"origin": "web"}));
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"].as_str().unwrap().contains("mcp_http"),
        "{r:?}"
    );
    assert_eq!(pending_approvals(&c.fx).len(), share);
    // Another origin: nothing to reject.
    let r = c.change(&session, &csrf, path, &json!({"origin": "agent_http"}));
    assert_eq!((r.status, r.json()["rejected"].as_u64()), (200, Some(0)));
    assert_eq!(pending_approvals(&c.fx).len(), share);

    let r = c.change(&session, &csrf, path, &body);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["rejected"], share, "{r:?}");
    assert_eq!(r.json()["ids"].as_array().unwrap().len(), share);
    for call in calls {
        assert!(call.join().unwrap().is_error);
    }
    assert!((0..share).all(|i| !marker(i).exists()));
    assert!(pending_approvals(&c.fx).is_empty());
    let rows = c.get("/api/audit?limit=50", Some(&session)).json();
    let rejected = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "rejected")
        .count();
    assert_eq!(rejected, share, "{rows}");
}

#[test]
fn a_tool_command_cannot_get_a_login_code() {
    let c = Console::start(true, "");
    let out = c.fx.dir.path().join("login-attempt");
    // The command runs with the service's own identity (approved from a terminal): the
    // strongest a tool command gets. It is still in the service's process tree.
    let cmd = format!(
        "{} --config {} web login > {} 2>&1; echo \"exit $?\" >> {}",
        nl2sh_tests::nl2sh_bin().display(),
        c.fx.config().display(),
        out.display(),
        out.display()
    );
    let call = c.invoke_async("shell.exec", json!({ "command": cmd }));
    let p = wait_pending(&c.fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    // It names the configuration, so it is at least dangerous: approved with its phrase.
    let mut args = vec!["protocol", "approve", &id];
    if let Some(phrase) = p["phrase"].as_str() {
        args.extend(["--phrase", phrase]);
    }
    let (code, o, e) = run_on_terminal(&c.fx, &args);
    assert_eq!(code, Some(0), "{o}{e}");
    let _ = call.join().unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        !text.contains("#login="),
        "a tool command got a login code: {text}"
    );
    assert!(text.contains("refused this process"), "{text}");
    assert!(!text.contains("exit 0"), "{text}");
}

#[test]
fn service_start_serves_the_console_and_stop_closes_both_listeners() {
    let fx = Fixture::new(
        "protocol_start_with_service = true\nprotocol_service_port = 0\nweb_port = 0\n",
    );
    let run = |args: &[&str]| run_without_terminal(&fx, args);
    let (code, out, err) = run(&["service", "start"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (_, status, _) = run(&["service", "status", "--json"]);
    let v: Value = serde_json::from_str(&status).unwrap();
    let conns = v["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2, "{v}");
    assert_eq!(conns[0]["transport"], "service");
    assert_eq!(conns[1]["transport"], "web");
    let url = conns[1]["url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{v}");
    let port: u16 = url.rsplit_once(':').unwrap().1.parse().unwrap();
    let web = SocketAddr::from(([127, 0, 0, 1], port));
    let pid = conns[0]["pid"].as_i64().unwrap() as i32;
    assert_eq!(
        nl2sh_tests::children_of(pid).len(),
        4,
        "the tree has its Web console"
    );
    let host = web.to_string();
    assert_eq!(http(web, "GET", "/", &[("Host", &host)], b"").status, 200);
    let (_, text, _) = run(&["service", "status"]);
    assert!(text.contains(&format!("Web:        {url}")), "{text}");

    let (code, out, err) = run(&["service", "stop"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        std::net::TcpStream::connect_timeout(&web, Duration::from_secs(2)).is_err(),
        "the Web listener outlived the service"
    );
    let needle = fx.config().display().to_string();
    assert!(processes_with(&needle).is_empty());
}

#[test]
fn a_console_that_cannot_start_leaves_nothing_listening() {
    // A non-loopback console without the explicit opt-in refuses startup, and the
    // protocol listener it would have shared the process with is never left open.
    let fx = Fixture::new(
        "protocol_start_with_service = true\nprotocol_service_port = 0\nweb_port = 0\n\
         web_host = \"0.0.0.0\"\n",
    );
    let (code, out, err) = run_without_terminal(&fx, &["--web-only"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("web_allow_insecure_http"), "{err}");
    let (code, _, _) = run_without_terminal(&fx, &["service", "status"]);
    assert_eq!(code, Some(3));
    // `web login` says there is nothing to log in to.
    let (code, _, err) = run_without_terminal(&fx, &["web", "login"]);
    assert_eq!(code, Some(3), "{err}");
}

#[test]
fn a_killed_console_is_restarted_on_the_same_port_and_its_sessions_end() {
    let c = Console::start(false, "");
    let (session, _) = c.log_in();
    let web_worker = || {
        nl2sh_tests::children_of(c.child.id() as i32)
            .into_iter()
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "nl2sh-web")
            })
    };
    let old = web_worker().expect("a web worker");
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(old, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let fresh = web_worker().filter(|pid| *pid != old);
        let host = c.web.to_string();
        let up = nl2sh_test_http::try_send(
            c.web,
            "GET",
            "/",
            &[("Host", &host)],
            b"",
            Duration::from_secs(2),
        )
        .is_ok_and(|r| r.status == 200);
        if fresh.is_some() && up {
            break;
        }
        assert!(Instant::now() < deadline, "the console did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The worker set restarted as a whole: approvald's sessions went with it.
    c.get("/api/session", Some(&session)).assert_refusal(401);
    let (session, _) = c.log_in();
    assert_eq!(c.get("/api/session", Some(&session)).status, 200);
    let (_, v) = c.status();
    let web = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["transport"] == "web")
        .cloned()
        .unwrap();
    assert_eq!(web["url"], c.origin(), "{v}");
}

#[test]
fn web_only_names_the_console_or_the_standalone_process_already_running() {
    // A managed service already serves the console: --web-only says where.
    let fx = Fixture::new(
        "protocol_start_with_service = true\nprotocol_service_port = 0\nweb_port = 0\n",
    );
    let (code, out, err) = run_without_terminal(&fx, &["service", "start"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = run_without_terminal(&fx, &["--web-only"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("already serves the Web console"), "{err}");
    assert!(err.contains("nl2sh web login"), "{err}");
    let (code, _, _) = run_without_terminal(&fx, &["service", "stop"]);
    assert_eq!(code, Some(0));

    // A standalone protocol serve: left alone, and named.
    let fx = Fixture::new("web_port = 0\n");
    let server = nl2sh_tests::Server::start(&fx, &[], &[]);
    let (code, out, err) = run_without_terminal(&fx, &["--web-only"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("standalone nl2sh protocol process"), "{err}");
    assert!(
        nl2sh_tests::alive(server.pid()),
        "--web-only stopped a standalone process"
    );
}

#[test]
fn a_console_that_keeps_dying_is_dropped_and_mcp_goes_on() {
    let c = Console::start(true, "");
    let web_worker = || {
        nl2sh_tests::children_of(c.child.id() as i32)
            .into_iter()
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "nl2sh-web")
            })
    };
    let mut last = None;
    for death in 1..=4 {
        // A fresh console (not the one just killed) before each kill.
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid = loop {
            if let Some(pid) = web_worker().filter(|p| Some(*p) != last) {
                break pid;
            }
            assert!(Instant::now() < deadline, "no console before death {death}");
            // Polled often, so some kills land while a worker set is still starting:
            // those deaths count too.
            std::thread::sleep(Duration::from_millis(5));
        };
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        last = Some(pid);
    }
    // The fourth death within the window: the workers come back without a console.
    // (`restarts` counts the sets that started; a set whose console was killed while it
    // started never did.)
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, v) = c.status();
        let conns = v["connections"].as_array().cloned().unwrap_or_default();
        let restarted = conns
            .first()
            .and_then(|c| c["restarts"].as_u64())
            .is_some_and(|r| r >= 1);
        if code == Some(0) && restarted && !conns.iter().any(|c| c["transport"] == "web") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the console was not dropped: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(web_worker().is_none(), "a console still runs");
    assert!(
        std::net::TcpStream::connect_timeout(&c.web, Duration::from_secs(2)).is_err(),
        "the console's port is still open"
    );
    // MCP/A2A go on.
    let r = mcp_post(
        c.protocols.unwrap(),
        TOKEN,
        &nl2sh_tests::initialize_body("2025-11-25"),
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn the_connection_says_what_runs_against_what_is_saved_and_automatic_approval() {
    let c = Console::start(true, "");
    let (session, csrf) = c.log_in();
    let connection = || {
        let r = c.get("/api/connection", Some(&session));
        assert_eq!(r.status, 200, "{r:?}");
        r.json()
    };
    let v = connection();
    assert_eq!(v["auto_approve"], false, "{v}");
    assert_eq!(v["differs_from_saved"], json!([]), "{v}");
    assert_eq!(v["token_source"], "configuration", "{v}");
    assert_eq!(
        v["restart_command"],
        format!("nl2sh --config {} service restart", c.fx.config().display())
    );
    let running = c.protocols.expect("MCP/A2A run").port();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let saved = free.local_addr().unwrap().port();
    drop(free);
    for (key, value) in [
        ("protocol_service_port", saved.to_string()),
        ("protocol_auto_approve", "true".into()),
    ] {
        let r = c.change(
            &session,
            &csrf,
            "/api/settings",
            &json!({"key": key, "value": value}),
        );
        assert_eq!(r.status, 200, "{r:?}");
    }
    let v = connection();
    assert_eq!(v["auto_approve"], true, "{v}");
    assert_eq!(
        v["differs_from_saved"],
        json!(["protocol_service_port"]),
        "{v}"
    );
    assert_eq!(
        v["differences"][0],
        json!({"key": "protocol_service_port", "saved": saved.to_string(),
               "running": running.to_string()})
    );
    assert!(!v.to_string().contains(TOKEN), "{v}");
}
