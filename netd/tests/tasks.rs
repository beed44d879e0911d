//! The task service: contexts run in order while other contexts run alongside, cancelling
//! a waiting task, drain, store failures, a client that goes away, and the MCP task tools
//! (`nl2sh_ask`, `nl2sh_get_task`, `nl2sh_cancel_task`) over netd's real router.

mod common;

use std::time::Duration;

use common::harness::{task_service, Harness};
use common::runner::Script;
use common::schema;
use nl2sh_netd::tasks::{NewTask, TaskError};
use nl2sh_proto::channels::{CallOrigin, ContextId, TaskState};
use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;

fn new_task(text: &str, context: Option<&str>, origin: CallOrigin) -> NewTask {
    NewTask {
        agent_origin: origin,
        ids: None,
        context: context.map(|c| ContextId(c.into())),
        text: text.into(),
        message: Map::from_iter([
            ("messageId".to_string(), json!(format!("m-{text}"))),
            ("role".to_string(), json!("ROLE_USER")),
            ("parts".to_string(), json!([{ "text": text }])),
        ]),
        client: None,
    }
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap()
}

#[tokio::test]
async fn one_context_runs_in_order_while_another_runs_alongside() {
    let h = Harness::start().await;
    let a1 = h.send_text("block:a1", Some("ctx-a"), true).await;
    let a2 = h.send_text("block:a2", Some("ctx-a"), true).await;
    let b1 = h.send_text("block:b1", Some("ctx-b"), true).await;
    // b1 runs while a1 is still working: different contexts are concurrent.
    h.script.wait_for("start:block:a1").await;
    h.script.wait_for("start:block:b1").await;
    // a2 waits for a1.
    assert!(!h.script.events().contains(&"start:block:a2".to_string()));
    let waiting = h.ok("GetTask", json!({"id": a2["id"]})).await;
    assert_eq!(state(&waiting), "TASK_STATE_SUBMITTED");
    h.script.release("a1");
    h.script.wait_for("start:block:a2").await;
    let events = h.script.events();
    let at = |e: &str| events.iter().position(|x| x == e).unwrap();
    assert!(at("end:block:a1") < at("start:block:a2"), "{events:?}");
    // a2 starts from a1's saved turn.
    assert_eq!(h.script.job("block:a2").unwrap().history.len(), 2);
    assert_eq!(h.script.job("block:b1").unwrap().history.len(), 0);
    h.script.release("a2");
    h.script.release("b1");
    for t in [&a1, &a2, &b1] {
        let id = t["id"].as_str().unwrap();
        let done = wait_terminal(&h, id).await;
        assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    }
    assert!(
        h.store.violations().is_empty(),
        "{:?}",
        h.store.violations()
    );
}

fn is_uuid_v4(id: &Value) -> bool {
    let id = id.as_str().unwrap();
    id.len() == 36 && &id[14..15] == "4" && id.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[tokio::test]
async fn task_and_context_ids_are_the_stores() {
    let h = Harness::start().await;
    let task = h.send_text("new", None, false).await;
    assert!(
        is_uuid_v4(&task["id"]) && is_uuid_v4(&task["contextId"]),
        "{task}"
    );
    let id = task["id"].as_str().unwrap();
    assert_eq!(h.store.stored(id).await.unwrap(), task);
    // A client's context is continued as given.
    let again = h.send_text("again", Some("client-ctx"), false).await;
    assert_eq!(again["contextId"], "client-ctx");
    assert!(is_uuid_v4(&again["id"]) && again["id"] != task["id"]);
    assert!(
        h.store.violations().is_empty(),
        "{:?}",
        h.store.violations()
    );
}

async fn wait_terminal(h: &Harness, id: &str) -> Value {
    for _ in 0..500 {
        let task = h.ok("GetTask", json!({ "id": id })).await;
        if !matches!(state(&task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING") {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} did not end");
}

#[tokio::test]
async fn a_task_waiting_for_its_context_is_cancelled_without_running() {
    let h = Harness::start().await;
    let first = h.send_text("block:first", Some("ctx-w"), true).await;
    let waiting = h.send_text("block:waiting", Some("ctx-w"), true).await;
    let after = h.send_text("after", Some("ctx-w"), true).await;
    h.script.wait_for("start:block:first").await;
    let canceled = h.ok("CancelTask", json!({"id": waiting["id"]})).await;
    schema::validate_task(&canceled);
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(
        canceled["status"]["message"]["parts"][0]["text"],
        "canceled by request"
    );
    assert!(h.script.job("block:waiting").is_none(), "it never ran");
    // The one behind it still waits for the first.
    let still = h.ok("GetTask", json!({"id": after["id"]})).await;
    assert_eq!(state(&still), "TASK_STATE_SUBMITTED");
    assert!(h.script.job("after").is_none());
    h.script.release("first");
    let done = wait_terminal(&h, after["id"].as_str().unwrap()).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    let events = h.script.events();
    let at = |e: &str| events.iter().position(|x| x == e).unwrap();
    assert!(at("end:block:first") < at("start:after"), "{events:?}");
    assert_eq!(
        state(&wait_terminal(&h, first["id"].as_str().unwrap()).await),
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_nothing() {
    let h = Harness::start().await;
    // A blocking SendMessage whose connection is dropped before the answer.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": {"role": "ROLE_USER", "messageId": "m",
                                             "parts": [{"text": "block:orphan"}]}}})
    .to_string();
    let head = format!(
        "POST /a2a HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n",
        h.addr,
        common::harness::TOKEN,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    h.script.wait_for("start:block:orphan").await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !h.script
            .events()
            .contains(&"cancelled:block:orphan".to_string()),
        "a disconnect cancelled the task"
    );
    h.script.release("orphan");
    h.script.wait_for("end:block:orphan").await;
    let page = h.ok("ListTasks", json!({})).await;
    let task = &page["tasks"][0];
    let done = wait_terminal(&h, task["id"].as_str().unwrap()).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn drain_cancels_every_active_task_and_refuses_new_ones() {
    let script = Script::new();
    let (tasks, store) = task_service(script.clone()).await;
    let running = tasks
        .submit(new_task("block:r", Some("d"), CallOrigin::AgentStdio))
        .await
        .unwrap();
    let queued = tasks
        .submit(new_task("block:q", Some("d"), CallOrigin::AgentStdio))
        .await
        .unwrap();
    let (running_id, queued_id) = (running.id().0.clone(), queued.id().0.clone());
    script.wait_for("start:block:r").await;
    assert_eq!(tasks.active_count(), 2);
    tasks
        .drain(tokio::time::Instant::now() + Duration::from_secs(10))
        .await;
    assert_eq!(tasks.active_count(), 0);
    assert!(script.events().contains(&"cancelled:block:r".to_string()));
    assert!(script.job("block:q").is_none());
    for id in [&running_id, &queued_id] {
        assert_eq!(
            store.states_of(id).last(),
            Some(&TaskState::Canceled),
            "{id}"
        );
        let doc = store.stored(id).await.unwrap();
        schema::validate_task(&doc);
    }
    let queued_doc = store.stored(&queued_id).await.unwrap();
    assert_eq!(
        queued_doc["status"]["message"]["parts"][0]["text"],
        "canceled: the service is shutting down"
    );
    // The stdio origin reached the Agent as AgentStdio.
    assert_eq!(
        script.job("block:r").unwrap().origin,
        CallOrigin::AgentStdio
    );
    let refused = tasks
        .submit(new_task("late", None, CallOrigin::AgentStdio))
        .await;
    assert!(
        matches!(refused, Err(TaskError::Draining)),
        "{:?}",
        refused.err()
    );
}

#[tokio::test]
async fn a_store_that_refuses_fails_the_send_and_frees_the_slot() {
    let h = Harness::start().await;
    h.store.faults().refuse_puts = true;
    let reply = h
        .rpc(
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}}),
        )
        .await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("task store"),
        "{reply}"
    );
    assert_eq!(h.tasks.active_count(), 0);
    assert!(h.script.events().is_empty(), "nothing ran");
    h.store.faults().refuse_puts = false;
    let task = h.send_text("x", None, false).await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn an_unreadable_context_history_fails_the_task() {
    let h = Harness::start().await;
    h.store
        .faults()
        .sessions
        .insert(ContextId("broken".into()), "{not json".into());
    let task = h.send_text("hello", Some("broken"), false).await;
    assert_eq!(state(&task), "TASK_STATE_FAILED");
    assert!(task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("history"));
    assert!(h.script.job("hello").is_none());
}

// ---- MCP task tools --------------------------------------------------------------------

/// The Task of a successful task-tool result: structuredContent, and the same as text.
fn task_of(result: &Value) -> Value {
    assert_ne!(result["isError"], true, "{result}");
    let task = result["structuredContent"].clone();
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, task);
    schema::validate_task(&task);
    task
}

fn error_text(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    result["content"][0]["text"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn mcp_ask_get_and_cancel() {
    let h = Harness::start().await;
    let asked = h
        .mcp_tool(
            "nl2sh_ask",
            json!({"message": "uptime?", "context_id": "mcp-ctx"}),
        )
        .await;
    let task = task_of(&asked);
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    assert_eq!(task["contextId"], "mcp-ctx");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"]["answer"],
        "answer to uptime?"
    );
    let job = h.script.job("uptime?").unwrap();
    assert_eq!(job.origin, CallOrigin::AgentHttp);
    // The same task through A2A and through nl2sh_get_task.
    let id = task["id"].as_str().unwrap();
    let got = task_of(&h.mcp_tool("nl2sh_get_task", json!({ "task_id": id })).await);
    assert_eq!(got, task);
    assert_eq!(h.ok("GetTask", json!({ "id": id })).await, task);
    // A completed task cannot be canceled.
    let refused = h
        .mcp_tool("nl2sh_cancel_task", json!({ "task_id": id }))
        .await;
    assert!(error_text(&refused).contains("cannot be canceled"));
    // A running one can.
    let running = h.send_text("block:mcp", None, true).await;
    h.script.wait_for("start:block:mcp").await;
    let canceled = task_of(
        &h.mcp_tool("nl2sh_cancel_task", json!({"task_id": running["id"]}))
            .await,
    );
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert!(h
        .script
        .events()
        .contains(&"cancelled:block:mcp".to_string()));
    // Unknown ids.
    for tool in ["nl2sh_get_task", "nl2sh_cancel_task"] {
        let r = h.mcp_tool(tool, json!({"task_id": "nope"})).await;
        assert!(error_text(&r).contains("not found"), "{tool}");
    }
    assert!(h.store.violations().is_empty());
}

#[tokio::test]
async fn mcp_ask_returns_a_task_still_working_after_its_wait() {
    // nl2sh_ask waits (bounded) for the end; a task still blocked after the wait comes
    // back as it stands. The wait is tens of seconds, so this drives the tool with a
    // cancelled request instead: the answer is the current task, and the task goes on.
    let script = Script::new();
    let (tasks, store) = task_service(script.clone()).await;
    let stop = tokio_util::sync::CancellationToken::new();
    stop.cancel();
    let args = json!({"message": "block:slow"});
    let result = nl2sh_netd::tools::ask::call(
        &tasks,
        CallOrigin::McpStdio,
        None,
        args.as_object(),
        &stop,
        None,
    )
    .await;
    let result = serde_json::to_value(&result).unwrap();
    let task = task_of(&result);
    assert!(
        matches!(state(&task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{task}"
    );
    script.wait_for("start:block:slow").await;
    assert_eq!(
        script.job("block:slow").unwrap().origin,
        CallOrigin::AgentStdio
    );
    // The client's cancellation did not cancel the task.
    assert_eq!(tasks.active_count(), 1);
    script.release("slow");
    script.wait_for("end:block:slow").await;
    let id = task["id"].as_str().unwrap();
    for _ in 0..500 {
        if store.states_of(id).last() == Some(&TaskState::Completed) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the task did not complete: {:?}", store.states_of(id));
}

#[tokio::test]
async fn mcp_task_tools_check_their_arguments_and_the_limit() {
    let h = Harness::start().await;
    let over = "a".repeat(8193);
    for (tool, args, want) in [
        ("nl2sh_ask", json!({}), "`message` is required"),
        ("nl2sh_ask", json!({"message": ""}), "1-8192"),
        ("nl2sh_ask", json!({ "message": over }), "8193 bytes"),
        ("nl2sh_ask", json!({"message": 5}), "must be a string"),
        (
            "nl2sh_ask",
            json!({"message": "a", "extra": 1}),
            "unexpected field",
        ),
        (
            "nl2sh_ask",
            json!({"message": "a", "context_id": "c".repeat(257)}),
            "256 bytes",
        ),
        ("nl2sh_get_task", json!({}), "`task_id` is required"),
        ("nl2sh_get_task", json!({"task_id": ""}), "non-empty"),
        ("nl2sh_cancel_task", json!({"id": "x"}), "unexpected field"),
    ] {
        let r = h.mcp_tool(tool, args.clone()).await;
        let text = error_text(&r);
        assert!(text.contains(want), "{tool} {args}: {text}");
    }
    assert!(h.script.events().is_empty());
    for i in 0..16 {
        h.send_text(&format!("block:m{i}"), None, true).await;
    }
    let r = h
        .mcp_tool("nl2sh_ask", json!({"message": "seventeenth"}))
        .await;
    assert!(error_text(&r).contains("16 active tasks"), "{r}");
    for i in 0..16 {
        h.script.release(&format!("m{i}"));
    }
}

#[tokio::test]
async fn task_tools_are_listed_with_schemas() {
    let h = Harness::start().await;
    let r = common::mcp_post(
        h.addr,
        common::harness::TOKEN,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let tools = r.json()["result"]["tools"].clone();
    let find = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed"))
    };
    use nl2sh_proto::limits::{MAX_AGENT_TEXT_BYTES, MAX_ID_BYTES};
    let ask = find("nl2sh_ask");
    assert_eq!(ask["inputSchema"]["required"], json!(["message"]));
    assert_eq!(ask["inputSchema"]["additionalProperties"], false);
    let properties = &ask["inputSchema"]["properties"];
    assert_eq!(properties["message"]["maxLength"], MAX_AGENT_TEXT_BYTES);
    assert_eq!(properties["context_id"]["maxLength"], MAX_ID_BYTES);
    assert!(ask["description"]
        .as_str()
        .unwrap()
        .contains("nl2sh_get_task"));
    for name in ["nl2sh_get_task", "nl2sh_cancel_task"] {
        let t = find(name);
        assert_eq!(t["inputSchema"]["required"], json!(["task_id"]), "{name}");
        let id = &t["inputSchema"]["properties"]["task_id"];
        assert_eq!(id["maxLength"], MAX_ID_BYTES, "{name}");
        assert!(!t["description"].as_str().unwrap().is_empty());
        // One Task format: the three tools answer the same object.
        assert_eq!(t["outputSchema"], ask["outputSchema"], "{name}");
    }
    let task = &ask["outputSchema"];
    assert_eq!(task["type"], "object");
    assert_eq!(task["required"], json!(["id", "contextId", "status"]));
    assert_eq!(
        task["properties"]["status"]["required"],
        json!(["state", "timestamp"])
    );
}

/// The task `id` once the store holds it (and, with `terminal`, once it has ended).
async fn stored_task(
    store: &nl2sh_approvald::store::tasks::TaskStore,
    id: &nl2sh_proto::channels::TaskId,
    terminal: bool,
) -> nl2sh_proto::channels::TaskRecord {
    loop {
        match store.get(id.clone()).await.expect("read") {
            Some(t) if !terminal || t.state.is_terminal() => return t,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The owner's Ask (approvald hands it over as the answer to netd's `NextOwnerWork`): it
/// runs as origin `owner_tui` under approvald's owner ids, continues its conversation, is
/// cancelled by the owner, and stays out of every protocol front door.
#[tokio::test]
async fn the_owners_ask_runs_apart_from_the_protocols_tasks() {
    use nl2sh_proto::channels::OwnerWork;
    let h = Harness::start().await;
    tokio::spawn(h.tasks.clone().serve_owner());
    let inbox = h.store.inbox();
    let store = h.store.tasks();
    let within = Duration::from_secs(5);

    let (id, context) = store.create_owner(None).expect("owner ids");
    assert!(id.0.starts_with("owner-") && context.0.starts_with("owner-"));
    inbox
        .hand_over(
            OwnerWork::Ask {
                id: id.clone(),
                context_id: context.clone(),
                text: "done:first".into(),
            },
            within,
        )
        .await
        .expect("netd takes the owner's goal");
    let first = stored_task(&store, &id, true).await;
    assert_eq!(first.state, TaskState::Completed, "{}", first.document);
    let job = h.script.job("done:first").expect("the Agent worked it");
    assert_eq!(job.origin, CallOrigin::OwnerTui);

    // The next goal continues the conversation: the Agent gets its history.
    let (id2, _) = store.create_owner(Some(context.clone())).expect("ids");
    inbox
        .hand_over(
            OwnerWork::Ask {
                id: id2.clone(),
                context_id: context.clone(),
                text: "block:second".into(),
            },
            within,
        )
        .await
        .expect("taken");
    h.script.wait_for("start:block:second").await;
    assert_eq!(h.script.job("block:second").unwrap().history.len(), 2);

    // No protocol front door sees, continues or cancels them.
    h.err("GetTask", json!({"id": id.0}), -32001).await;
    h.err("CancelTask", json!({"id": id2.0}), -32001).await;
    let listed = h.ok("ListTasks", json!({})).await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
    let listed = h.ok("ListTasks", json!({"contextId": context.0})).await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
    let err = h
        .err(
            "SendMessage",
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": context.0,
                               "parts": [{"text": "done:steal"}]}}),
            -32602,
        )
        .await;
    assert!(err.to_string().contains("owner"), "{err}");
    assert!(h.script.job("done:steal").is_none());
    let e = h
        .tasks
        .submit(new_task("done:x", Some(&context.0), CallOrigin::AgentStdio))
        .await
        .err()
        .expect("a protocol task in the owner's conversation");
    assert!(matches!(e, TaskError::OwnersConversation), "{e}");

    // The owner cancels their own task.
    inbox
        .hand_over(OwnerWork::Cancel { id: id2.clone() }, within)
        .await
        .expect("taken");
    let second = stored_task(&store, &id2, true).await;
    assert_eq!(second.state, TaskState::Canceled);
    assert!(
        h.store.violations().is_empty(),
        "{:?}",
        h.store.violations()
    );
}

/// Callers holding the token cannot starve the owner: with the protocol's active tasks
/// at their limit the owner's goal still runs. Past the owner's own limit a goal cannot
/// start, and is stored FAILED with the reason, so the console shows why instead of
/// waiting for nothing.
#[tokio::test]
async fn the_owners_goals_have_a_limit_of_their_own() {
    use nl2sh_proto::channels::OwnerWork;
    use nl2sh_proto::limits::{MAX_ACTIVE_TASKS, MAX_OWNER_TASKS};
    let h = Harness::start().await;
    tokio::spawn(h.tasks.clone().serve_owner());
    for n in 0..MAX_ACTIVE_TASKS {
        h.send_text(&format!("block:t{n}"), None, true).await;
    }
    let store = h.store.tasks();
    let inbox = h.store.inbox();
    let goal = |text: String| {
        let (id, context) = store.create_owner(None).expect("ids");
        let work = OwnerWork::Ask {
            id: id.clone(),
            context_id: context,
            text,
        };
        (id, work)
    };
    let (first, work) = goal("done:the owner's".into());
    inbox
        .hand_over(work, Duration::from_secs(5))
        .await
        .expect("taken");
    assert_eq!(
        stored_task(&store, &first, true).await.state,
        TaskState::Completed
    );

    for n in 0..MAX_OWNER_TASKS {
        let (id, work) = goal(format!("block:o{n}"));
        inbox
            .hand_over(work, Duration::from_secs(5))
            .await
            .expect("taken");
        stored_task(&store, &id, false).await;
    }
    let (late, work) = goal("done:late".into());
    inbox
        .hand_over(work, Duration::from_secs(5))
        .await
        .expect("taken");
    let failed = stored_task(&store, &late, true).await;
    assert_eq!(failed.state, TaskState::Failed);
    assert!(
        failed.document.contains("owner's tasks are active"),
        "{}",
        failed.document
    );
    for n in 0..MAX_ACTIVE_TASKS {
        h.script.release(&format!("t{n}"));
    }
    for n in 0..MAX_OWNER_TASKS {
        h.script.release(&format!("o{n}"));
    }
}
