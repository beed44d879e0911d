//! Delegated tasks end to end over the real binary: A2A JSON-RPC on `/a2a` against
//! `nl2sh protocol serve`, the built-in Agent asking a scripted OpenAI-compatible model on
//! 127.0.0.1 (tests/src/scripted_model.rs). What a user relies on when a task outlives a
//! request: without a model tasks fail and say why; a task interrupted by a crash fails
//! after the restart and is never replayed; SIGTERM cancels and stores it; the active-task
//! limit refuses at once; old tasks are pruned; a mutation the Agent asks for waits for the
//! owner; no secret reaches the state directory.

use std::path::Path;
use std::time::{Duration, Instant};

use nl2sh_tests::scripted_model::{Reply, ScriptedModel, ToolCall};
use nl2sh_tests::{alive, run_without_terminal, wait_pending, Fixture, Server};
use serde_json::{json, Value};

/// The environment variable the configurations name for the model key.
const KEY_ENV: &str = "NL2SH_DELEGATION_E2E_MODEL_KEY";
const KEY: &str = "sk-delegation-e2e-0123456789abcdefXYZ";
/// The status text of a task a restart found unfinished (approvald's store).
const RESTART_TEXT: &str = "nl2sh restarted while this task was running";

fn model_config(model: &ScriptedModel) -> String {
    model.config(KEY_ENV, 4)
}

/// `protocol serve` with the model key in its environment.
fn start(fx: &Fixture) -> Server {
    Server::start(fx, &[], &[(KEY_ENV, KEY)])
}

/// One A2A JSON-RPC call; the whole answer (`result` or `error`).
fn a2a(server: &Server, method: &str, params: Value) -> Value {
    server.a2a(method, params)
}

fn result(answer: Value) -> Value {
    assert!(answer.get("error").is_none(), "an error: {answer}");
    answer["result"].clone()
}

fn message(text: &str) -> Value {
    json!({"messageId": format!("m-{}", unique()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// SendMessage; the task it answers (SUBMITTED with `immediately`, else terminal).
fn send(server: &Server, text: &str, immediately: bool) -> Value {
    let answer = a2a(
        server,
        "SendMessage",
        json!({"message": message(text), "configuration": {"returnImmediately": immediately}}),
    );
    result(answer)["task"].clone()
}

fn get(server: &Server, id: &str) -> Value {
    result(a2a(server, "GetTask", json!({"id": id})))
}

fn id(task: &Value) -> String {
    task["id"].as_str().expect("task id").to_string()
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// The text of the task's status message.
fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Poll GetTask until the task is in `want` (within `limit`).
fn wait_state(server: &Server, task: &str, want: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let t = get(server, task);
        if state(&t) == want {
            return t;
        }
        assert!(Instant::now() < deadline, "task never {want}: {t}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM and require the drained exit 0.
/// SIGTERM, exit 0; the service's whole log (stderr).
fn stop(mut server: Server) -> String {
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(30));
    let log = server.stderr();
    assert_eq!(status.code(), Some(0), "exit after SIGTERM; stderr:\n{log}");
    log
}

/// Every file under the state directory but `connection.json` (which holds the token for
/// owner UIs by design), with what it must not contain.
fn assert_no_secrets(state_dir: &Path, secrets: &[&str]) {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(state_dir, &mut files);
    assert!(
        files.iter().any(|p| p.ends_with("protocol/tasks.sqlite3")),
        "no task store in {files:?}"
    );
    for path in files {
        if path.file_name().is_some_and(|n| n == "connection.json") {
            continue;
        }
        let blob = std::fs::read(&path).unwrap();
        for secret in secrets {
            let found = blob.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "a secret is in {}", path.display());
        }
    }
}

#[test]
fn without_a_model_section_a_task_fails_naming_it() {
    let fx = Fixture::new("");
    let server = start(&fx);
    let task = send(&server, "How is the device?", false);
    assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
    assert!(status_text(&task).contains("[model]"), "{task}");
    // GetTask says the same, from the store.
    let again = get(&server, &id(&task));
    assert_eq!(state(&again), "TASK_STATE_FAILED");
    assert_eq!(status_text(&again), status_text(&task));
    stop(server);
}

#[test]
fn without_the_key_variable_a_task_fails_naming_it() {
    let fx = Fixture::new(
        "[model]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         api_key_env = \"NL2SH_DELEGATION_E2E_UNSET_KEY\"\n",
    );
    let server = Server::start(&fx, &[], &[]);
    let task = send(&server, "How is the device?", false);
    assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
    assert!(
        status_text(&task).contains("NL2SH_DELEGATION_E2E_UNSET_KEY"),
        "{task}"
    );
    stop(server);
}

#[test]
fn a_task_running_when_the_tree_is_killed_fails_after_the_restart_and_is_not_replayed() {
    let model = ScriptedModel::start([Reply::Hang]);
    let fx = Fixture::new(&model_config(&model));
    let mut server = start(&fx);
    let first_token = server.token().to_string();
    let task = send(&server, "Take your time over this one.", true);
    let task_id = id(&task);
    model.wait_requests(1, Duration::from_secs(20));
    wait_state(
        &server,
        &task_id,
        "TASK_STATE_WORKING",
        Duration::from_secs(10),
    );

    let workers = server.workers();
    assert_eq!(workers.len(), 3, "{workers:?}");
    server.signal(libc::SIGKILL);
    server.wait(Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    while workers.iter().any(|(_, pid)| alive(*pid)) {
        assert!(
            Instant::now() < deadline,
            "workers outlived the supervisor: {workers:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The same configuration and state directory again.
    model.push(Reply::answer("A fresh answer."));
    let server = start(&fx);
    let after = get(&server, &task_id);
    assert_eq!(state(&after), "TASK_STATE_FAILED", "{after}");
    assert!(status_text(&after).contains(RESTART_TEXT), "{after}");
    // Not cancelable either: nothing runs it any more.
    let cancel = a2a(&server, "CancelTask", json!({"id": task_id}));
    assert_eq!(cancel["error"]["code"], -32002, "{cancel}");

    // The next request the model sees is a new task's: nothing was replayed before it.
    let fresh = send(&server, "A new question.", false);
    assert_eq!(state(&fresh), "TASK_STATE_COMPLETED", "{fresh}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "the model was asked again: {requests:?}");
    let second = requests[1].body.to_string();
    assert!(second.contains("A new question."), "{second}");
    assert!(!second.contains("Take your time"), "replayed: {second}");
    let token = server.token().to_string();
    stop(server);
    assert_no_secrets(&fx.state_dir(), &[KEY, &first_token, &token]);
}

#[test]
fn sigterm_cancels_a_running_task_drains_and_exits_zero() {
    let model = ScriptedModel::start([Reply::Hang]);
    let fx = Fixture::new(&model_config(&model));
    let server = start(&fx);
    let token = server.token().to_string();
    let task_id = id(&send(&server, "Keep working until told.", true));
    model.wait_requests(1, Duration::from_secs(20));
    wait_state(
        &server,
        &task_id,
        "TASK_STATE_WORKING",
        Duration::from_secs(10),
    );
    stop(server);

    let server = start(&fx);
    let after = get(&server, &task_id);
    assert_eq!(state(&after), "TASK_STATE_CANCELED", "{after}");
    // Stored by the drain, not failed by the restart, and it says so.
    assert!(!status_text(&after).contains(RESTART_TEXT), "{after}");
    assert!(
        status_text(&after).contains("the service is shutting down"),
        "{after}"
    );
    assert_eq!(model.requests().len(), 1, "the model was asked again");
    stop(server);
    assert_no_secrets(&fx.state_dir(), &[KEY, &token]);
}

#[test]
fn the_seventeenth_active_task_is_refused_at_once_naming_the_limit() {
    let model = ScriptedModel::start((0..17).map(|_| Reply::Hang));
    let fx = Fixture::new(&model_config(&model));
    let server = start(&fx);
    let ids: Vec<String> = (0..16)
        .map(|i| {
            let task = send(&server, &format!("slow task {i}"), true);
            assert_eq!(state(&task), "TASK_STATE_SUBMITTED", "{task}");
            id(&task)
        })
        .collect();

    let refused = a2a(
        &server,
        "SendMessage",
        json!({"message": message("one too many"), "configuration": {"returnImmediately": true}}),
    );
    let error = &refused["error"];
    assert_eq!(error["code"], -32603, "{refused}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("16 active tasks"),
        "{refused}"
    );
    assert_eq!(error["data"][0]["reason"], "ACTIVE_TASK_LIMIT", "{refused}");
    assert_eq!(error["data"][0]["metadata"]["limit"], "16", "{refused}");
    // The MCP front door shares the limit.
    let ask = server.call_tool("nl2sh_ask", json!({"message": "one too many"}));
    assert!(ask.is_error, "{ask:?}");
    let shown = format!("{:?}", ask.content);
    assert!(shown.contains("16 active tasks"), "{shown}");
    // Nothing of the refused ones was stored.
    let listed = result(a2a(&server, "ListTasks", json!({})));
    assert_eq!(listed["totalSize"], 16, "{listed}");

    // A slot freed by a cancel takes the next task.
    let canceled = result(a2a(&server, "CancelTask", json!({"id": ids[0]})));
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{canceled}");
    let next = send(&server, "now there is room", true);
    assert_eq!(state(&next), "TASK_STATE_SUBMITTED", "{next}");
    let token = server.token().to_string();
    stop(server);
    assert_no_secrets(&fx.state_dir(), &[KEY, &token]);
}

#[test]
fn retention_keeps_the_newest_two_hundred_tasks() {
    // Without a model every task fails at once, so 205 go through quickly.
    let fx = Fixture::new("");
    let server = start(&fx);
    let ids: Vec<String> = (0..205)
        .map(|i| {
            let task = send(&server, &format!("task {i}"), false);
            assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
            id(&task)
        })
        .collect();

    let first = result(a2a(&server, "ListTasks", json!({"pageSize": 100})));
    assert_eq!(first["totalSize"], 200, "{}", first["totalSize"]);
    let token = first["nextPageToken"].as_str().unwrap().to_string();
    assert!(!token.is_empty());
    let second = result(a2a(
        &server,
        "ListTasks",
        json!({"pageSize": 100, "pageToken": token}),
    ));
    assert_eq!(second["totalSize"], 200);
    assert_eq!(second["nextPageToken"], "");
    let listed: Vec<String> = first["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["tasks"].as_array().unwrap())
        .map(id)
        .collect();
    // Newest first: the last 200 sent, in reverse.
    let newest: Vec<String> = ids[5..].iter().rev().cloned().collect();
    assert_eq!(listed, newest);
    for old in &ids[..5] {
        let gone = a2a(&server, "GetTask", json!({"id": old}));
        assert_eq!(gone["error"]["code"], -32001, "{gone}");
    }
    stop(server);
}

#[test]
fn a_mutation_the_agent_asks_for_waits_for_the_owner_who_rejects_it() {
    let model = ScriptedModel::start([]);
    let fx = Fixture::new(&model_config(&model));
    let server = start(&fx);
    let token = server.token().to_string();
    let target = tempfile::tempdir().unwrap();
    let marker = target.path().join("x");
    let command = format!("touch {}", marker.display());
    model.push(Reply::tool_calls([ToolCall::new(
        "call_1",
        "shell__exec",
        json!({ "command": command }),
    )]));
    // The answer repeats the secrets: the stored task must not.
    model.push(Reply::answer(&format!(
        "The owner refused it. (key {KEY}, token {token})"
    )));

    let task_id = id(&send(
        &server,
        &format!("Create {} please; my token is {token}", marker.display()),
        true,
    ));
    let pending = wait_pending(&fx, 1);
    let p = &pending[0];
    assert_eq!(p["task"], task_id.as_str(), "{p}");
    assert_eq!(p["origin"], "agent_http", "{p}");
    assert_eq!(p["tool"], "shell.exec", "{p}");
    assert!(p["action"].as_str().unwrap().contains(&command), "{p}");
    let approval = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        state(&get(&server, &task_id)),
        "TASK_STATE_WORKING",
        "a task waiting for approval is working"
    );
    // The person's list names the task too.
    let (code, out, err) = run_without_terminal(&fx, &["protocol", "approvals"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&approval) && out.contains(&format!("  the Agent, task {task_id}, goal ")),
        "{out}"
    );

    let (code, out, err) = run_without_terminal(&fx, &["protocol", "reject", &approval]);
    assert_eq!(code, Some(0), "{out}{err}");
    let done = wait_state(
        &server,
        &task_id,
        "TASK_STATE_COMPLETED",
        Duration::from_secs(20),
    );
    assert!(!marker.exists(), "the rejected command ran");
    let data = &done["artifacts"][0]["parts"][0]["data"];
    assert_eq!(data["tool_calls"], 1, "{data}");
    let failed = data["failed_tools"].as_array().expect("failed_tools");
    assert_eq!(failed.len(), 1, "{data}");
    assert_eq!(failed[0]["tool"], "shell.exec", "{data}");
    assert_eq!(failed[0]["call_id"], "call_1", "{data}");
    let why = failed[0]["error"].as_str().unwrap();
    assert!(
        why.contains("rejected") && why.contains(&approval),
        "{data}"
    );
    // The model heard of the refusal before it answered.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_call_id"], "call_1");
    // Redacted in what the client reads back.
    let shown = done.to_string();
    assert!(!shown.contains(KEY) && !shown.contains(&token), "{shown}");
    // Nor in the service's log, though the user's text and the model's answer held both.
    let log = stop(server);
    assert!(
        log.contains("task ended"),
        "the log was not captured:\n{log}"
    );
    assert!(!log.contains(KEY), "the model key is in the log");
    assert!(!log.contains(&token), "the token is in the log");
    assert_no_secrets(&fx.state_dir(), &[KEY, &token]);
}
