//! A2A 1.0 over netd's real router (`serve_http` on 127.0.0.1): the Agent Card, the
//! JSON-RPC envelope and its errors, and the four served methods, with the task service
//! on approvald's real task store and a scripted runner (tests/common). Every payload
//! netd emits is checked against the A2A 1.0 JSON schema (tests/data/a2a-1.0.schema.json).

mod common;

use common::harness::{Harness, ORIGIN, TOKEN};
use common::schema;
use common::send;
use nl2sh_proto::channels::{ContextId, TaskId, TaskRecord, TaskState};
use serde_json::{json, Value};

const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// The ErrorInfo reason an A2A error carries (and that it carries exactly one, in the
/// A2A domain).
fn a2a_reason(error: &Value) -> String {
    let data = error["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{error}"));
    assert_eq!(data.len(), 1, "{error}");
    assert_eq!(data[0]["@type"], ERROR_INFO, "{error}");
    assert_eq!(data[0]["domain"], "a2a-protocol.org", "{error}");
    assert!(data[0]["metadata"].is_object(), "{error}");
    data[0]["reason"].as_str().unwrap().to_string()
}

/// The fields a -32602 names in its google.rpc.BadRequest.
fn violated_fields(error: &Value) -> Vec<String> {
    let data = error["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{error}"));
    let bad = data
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.BadRequest")
        .unwrap_or_else(|| panic!("no BadRequest in {error}"));
    bad["fieldViolations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            assert!(v["description"].is_string(), "{v}");
            v["field"].as_str().unwrap().to_string()
        })
        .collect()
}

fn user_message(text: &str) -> Value {
    json!({"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": text}]})
}

fn no_leaks(h: &Harness) {
    assert!(
        h.store.violations().is_empty(),
        "{:?}",
        h.store.violations()
    );
}

// ---- the Agent Card -------------------------------------------------------------------

async fn get_card(h: &Harness, extra: &[(&str, &str)]) -> common::Reply {
    let host = h.addr.to_string();
    let mut headers = vec![("Host", host.as_str())];
    headers.extend_from_slice(extra);
    send(h.addr, "GET", "/.well-known/agent-card.json", &headers, b"").await
}

#[tokio::test]
async fn the_agent_card_is_public_and_a_valid_1_0_card() {
    let h = Harness::start().await;
    // No token.
    let r = get_card(&h, &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let card = r.json();
    schema::validate("Agent Card", &card);
    for field in [
        "name",
        "description",
        "version",
        "supportedInterfaces",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ] {
        assert!(card.get(field).is_some(), "no {field}: {card}");
    }
    assert_eq!(
        card["supportedInterfaces"][0],
        json!({"url": format!("{ORIGIN}/a2a"), "protocolBinding": "JSONRPC",
               "protocolVersion": "1.0"})
    );
    assert_eq!(
        card["capabilities"],
        json!({"streaming": false, "pushNotifications": false, "extendedAgentCard": false})
    );
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    assert_eq!(
        card["defaultOutputModes"],
        json!(["application/json", "text/plain"])
    );
    assert_eq!(
        card["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}])
    );
    let skills = card["skills"].as_array().unwrap();
    assert!(!skills.is_empty());
    for s in skills {
        for field in ["id", "name", "description", "tags"] {
            assert!(s.get(field).is_some(), "skill without {field}: {s}");
        }
    }
    // 0.3 leftovers would make clients fall back to 0.3.
    for gone in ["url", "preferredTransport", "protocolVersion"] {
        assert!(card.get(gone).is_none(), "{gone} in {card}");
    }
    assert!(!card.to_string().contains(TOKEN));
}

#[tokio::test]
async fn the_card_has_a_strong_etag_and_a_cache_lifetime() {
    let h = Harness::start().await;
    let r = get_card(&h, &[]).await;
    let etag = r.header("etag").unwrap().to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "{etag}"
    );
    let cache = r.header("cache-control").unwrap();
    let max_age: u64 = cache
        .strip_prefix("max-age=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{cache}"));
    assert!(max_age > 0);
    // The same card, the same tag.
    assert_eq!(get_card(&h, &[]).await.header("etag"), Some(etag.as_str()));
    let weak = format!("W/{etag}");
    let listed = format!("\"other\", {etag}");
    for matching in [etag.as_str(), weak.as_str(), listed.as_str(), "*"] {
        let r = get_card(&h, &[("If-None-Match", matching)]).await;
        assert_eq!(r.status, 304, "{matching}: {r:?}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some(etag.as_str()));
        assert!(r.header("cache-control").is_some());
    }
    let r = get_card(&h, &[("If-None-Match", "\"something-else\"")]).await;
    assert_eq!(r.status, 200);
    assert!(!r.body.is_empty());
}

#[tokio::test]
async fn the_card_keeps_the_host_and_origin_rules() {
    let h = Harness::start().await;
    let r = send(
        h.addr,
        "GET",
        "/.well-known/agent-card.json",
        &[("Host", "evil.example")],
        b"",
    )
    .await;
    r.assert_refusal(403);
    let r = get_card(&h, &[("Origin", "http://evil.example")]).await;
    r.assert_refusal(403);
    // The advertised authority and origin are fine.
    let r = send(
        h.addr,
        "GET",
        "/.well-known/agent-card.json",
        &[("Host", "phone.test:8765"), ("Origin", ORIGIN)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
}

// ---- the front door and the envelope --------------------------------------------------

#[tokio::test]
async fn a2a_needs_the_token_and_serves_both_paths() {
    let h = Harness::start().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}});
    let host = h.addr.to_string();
    let r = send(
        h.addr,
        "POST",
        "/a2a",
        &[
            ("Host", &host),
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
        ],
        body.to_string().as_bytes(),
    )
    .await;
    r.assert_refusal(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = h
        .post(
            "/a2a",
            body.to_string().as_bytes(),
            &[("Host", "evil.example")],
        )
        .await;
    r.assert_refusal(403);
    for path in ["/a2a", "/a2a/"] {
        let r = h
            .post(
                path,
                body.to_string().as_bytes(),
                &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
            )
            .await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.json()["error"]["code"], -32001, "{path}");
        assert_eq!(r.json()["id"], 1);
    }
    // Over 32 KiB: the front door's limit.
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                     "params": {"message": user_message(&"x".repeat(33 * 1024))}});
    let r = h
        .post(
            "/a2a",
            big.to_string().as_bytes(),
            &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
        )
        .await;
    r.assert_refusal(413);
}

async fn raw(h: &Harness, body: &[u8], headers: &[(&str, &str)]) -> Value {
    let r = h.post("/a2a", body, headers).await;
    assert_eq!(r.status, 200, "{r:?}");
    let reply = r.json();
    assert_eq!(reply["jsonrpc"], "2.0");
    assert!(reply.get("result").is_none(), "{reply}");
    reply
}

const JSON_1_0: [(&str, &str); 2] = [("Content-Type", "application/json"), ("A2A-Version", "1.0")];

#[tokio::test]
async fn content_type_is_checked_before_the_body_is_parsed() {
    let h = Harness::start().await;
    for content_type in ["text/plain", "", "application/x-www-form-urlencoded"] {
        let reply = raw(
            &h,
            b"this is not JSON",
            &[("Content-Type", content_type), ("A2A-Version", "1.0")],
        )
        .await;
        assert_eq!(reply["error"]["code"], -32005, "{content_type}: {reply}");
        assert_eq!(a2a_reason(&reply["error"]), "CONTENT_TYPE_NOT_SUPPORTED");
        assert_eq!(reply["id"], Value::Null);
    }
    // A JSON body sent as text/plain is refused all the same.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}});
    let reply = raw(
        &h,
        body.to_string().as_bytes(),
        &[("Content-Type", "text/plain"), ("A2A-Version", "1.0")],
    )
    .await;
    assert_eq!(reply["error"]["code"], -32005);
    // JSON with parameters, or a +json type, is JSON.
    for content_type in ["application/json; charset=utf-8", "application/a2a+json"] {
        let r = h
            .post(
                "/a2a",
                body.to_string().as_bytes(),
                &[("Content-Type", content_type), ("A2A-Version", "1.0")],
            )
            .await;
        assert_eq!(r.json()["error"]["code"], -32001, "{content_type}");
    }
}

#[tokio::test]
async fn parse_errors_batches_and_bad_envelopes() {
    let h = Harness::start().await;
    let reply = raw(&h, b"{\"jsonrpc\": \"2.0\", ", &JSON_1_0).await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], Value::Null);
    assert!(reply["error"].get("data").is_none());
    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}]);
    let reply = raw(&h, batch.to_string().as_bytes(), &JSON_1_0).await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    for bad in [
        json!({"id": 1, "method": "GetTask"}),
        json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
        json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": "x"}),
        json!("GetTask"),
    ] {
        let reply = raw(&h, bad.to_string().as_bytes(), &JSON_1_0).await;
        assert_eq!(reply["error"]["code"], -32600, "{bad}: {reply}");
    }
    // Unknown methods, 0.3 names included.
    for method in ["message/send", "tasks/get", "Nope"] {
        let body = json!({"jsonrpc": "2.0", "id": "s-1", "method": method, "params": {}});
        let reply = raw(&h, body.to_string().as_bytes(), &JSON_1_0).await;
        assert_eq!(reply["error"]["code"], -32601, "{method}");
        assert_eq!(reply["id"], "s-1");
    }
    // Params that are not an object.
    let e = h.err("GetTask", json!(["x"]), -32602).await;
    assert_eq!(violated_fields(&e), ["params"]);
}

#[tokio::test]
async fn only_a2a_1_0_is_served() {
    let h = Harness::start().await;
    let body = json!({"jsonrpc": "2.0", "id": 42, "method": "GetTask", "params": {"id": "x"}});
    for version in [
        None,
        Some(""),
        Some("0.3"),
        Some("2.0"),
        Some("1"),
        Some("1.1"),
        Some("v1.0"),
    ] {
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(v) = version {
            headers.push(("A2A-Version", v));
        }
        let reply = raw(&h, body.to_string().as_bytes(), &headers).await;
        assert_eq!(reply["error"]["code"], -32009, "{version:?}: {reply}");
        assert_eq!(a2a_reason(&reply["error"]), "VERSION_NOT_SUPPORTED");
        assert_eq!(reply["id"], 42, "the id is echoed");
    }
    for version in ["1.0", "1.0.3", " 1.0 "] {
        let r = h
            .post(
                "/a2a",
                body.to_string().as_bytes(),
                &[
                    ("Content-Type", "application/json"),
                    ("A2A-Version", version),
                ],
            )
            .await;
        // Past the version check: the task is unknown.
        assert_eq!(r.json()["error"]["code"], -32001, "{version}");
    }
}

#[tokio::test]
async fn unsupported_operations_and_push_notifications() {
    let h = Harness::start().await;
    for method in [
        "SendStreamingMessage",
        "SubscribeToTask",
        "GetExtendedAgentCard",
    ] {
        let params = json!({"message": user_message("hi"), "id": "x"});
        let e = h.err(method, params, -32004).await;
        assert_eq!(a2a_reason(&e), "UNSUPPORTED_OPERATION", "{method}");
    }
    for method in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        let e = h.err(method, json!({"taskId": "x"}), -32003).await;
        assert_eq!(
            a2a_reason(&e),
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "{method}"
        );
    }
    // Nothing ran.
    assert!(h.script.events().is_empty());
}

// ---- SendMessage ----------------------------------------------------------------------

#[tokio::test]
async fn send_message_blocks_until_the_task_ends() {
    let h = Harness::start().await;
    let params = json!({"message": {
        "role": "ROLE_USER", "messageId": "msg-1",
        "parts": [{"text": "free space?"}, {"text": "in MiB", "metadata": {"k": "v"}}],
        "metadata": {"client": "test"}}});
    let result = h.ok("SendMessage", params).await;
    schema::validate("Send Message Response", &result);
    let task = &result["task"];
    schema::validate_task(task);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let id = task["id"].as_str().unwrap();
    let context = task["contextId"].as_str().unwrap();
    assert!(!id.is_empty() && !context.is_empty() && id != context);
    // The user's message as received (parts joined for the Agent), then the answer.
    let history = task["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{task}");
    assert_eq!(history[0]["role"], "ROLE_USER");
    assert_eq!(history[0]["messageId"], "msg-1");
    assert_eq!(history[0]["taskId"], id);
    assert_eq!(history[0]["contextId"], context);
    assert_eq!(history[0]["parts"][1]["metadata"], json!({"k": "v"}));
    assert_eq!(history[0]["metadata"], json!({"client": "test"}));
    assert_eq!(history[1]["role"], "ROLE_AGENT");
    assert_eq!(history[1], task["status"]["message"]);
    let answer = "answer to free space?\nin MiB";
    assert_eq!(history[1]["parts"], json!([{ "text": answer }]));
    let artifact = &task["artifacts"][0];
    assert_eq!(artifact["name"], "result");
    assert_eq!(artifact["parts"][0]["mediaType"], "application/json");
    assert_eq!(artifact["parts"][0]["data"]["answer"], answer);
    // The Agent got the joined text, the context, and the HTTP Agent origin.
    let job = h.script.job("free space?\nin MiB").unwrap();
    assert_eq!(job.task, TaskId(id.into()));
    assert_eq!(job.context, ContextId(context.into()));
    assert_eq!(job.origin, nl2sh_proto::channels::CallOrigin::AgentHttp);
    assert!(job.history.is_empty());
    // Stored at each step; the last stored document is the answer.
    assert_eq!(
        h.store.states_of(id),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    assert_eq!(h.store.stored(id).await.unwrap(), *task);
    // The completed turn is the context's history now.
    let session: Value = serde_json::from_str(&h.store.session(context).await.unwrap()).unwrap();
    assert_eq!(session.as_array().unwrap().len(), 2);
    no_leaks(&h);
}

#[tokio::test]
async fn return_immediately_then_poll_with_get_task() {
    let h = Harness::start().await;
    let task = h.send_text("block:poll", None, true).await;
    schema::validate_task(&task);
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{task}");
    assert!(task.get("artifacts").is_none());
    let id = task["id"].as_str().unwrap().to_string();
    h.script.wait_for("start:block:poll").await;
    let now = h.ok("GetTask", json!({ "id": id })).await;
    schema::validate_task(&now);
    assert_eq!(now["status"]["state"], "TASK_STATE_WORKING");
    h.script.release("poll");
    let done = poll_until_terminal(&h, &id).await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        done["artifacts"][0]["parts"][0]["data"]["answer"],
        "answer to block:poll"
    );
    no_leaks(&h);
}

async fn poll_until_terminal(h: &Harness, id: &str) -> Value {
    for _ in 0..500 {
        let task = h.ok("GetTask", json!({ "id": id })).await;
        let state = task["status"]["state"].as_str().unwrap().to_string();
        if !matches!(
            state.as_str(),
            "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"
        ) {
            schema::validate_task(&task);
            return task;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("task {id} did not end");
}

#[tokio::test]
async fn history_length_cuts_the_history() {
    let h = Harness::start().await;
    let result = h
        .ok(
            "SendMessage",
            json!({"message": user_message("one"), "configuration": {"historyLength": 0}}),
        )
        .await;
    let task = &result["task"];
    schema::validate_task(task);
    assert!(task.get("history").is_none(), "{task}");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let id = task["id"].as_str().unwrap();
    let one = h.ok("GetTask", json!({"id": id, "historyLength": 1})).await;
    let history = one["history"].as_array().unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["role"], "ROLE_AGENT");
    // ProtoJSON int32 may come as a string.
    let one = h
        .ok("GetTask", json!({"id": id, "historyLength": "1"}))
        .await;
    assert_eq!(one["history"].as_array().unwrap().len(), 1);
    let all = h.ok("GetTask", json!({ "id": id })).await;
    assert_eq!(all["history"].as_array().unwrap().len(), 2);
    let none = h.ok("GetTask", json!({"id": id, "historyLength": 0})).await;
    assert!(none.get("history").is_none());
    h.err("GetTask", json!({"id": id, "historyLength": -1}), -32602)
        .await;
}

#[tokio::test]
async fn text_is_1_to_8192_bytes() {
    let h = Harness::start().await;
    let max = "a".repeat(8192);
    let result = h
        .ok("SendMessage", json!({ "message": user_message(&max) }))
        .await;
    assert_eq!(result["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let over = "a".repeat(8193);
    let e = h
        .err(
            "SendMessage",
            json!({ "message": user_message(&over) }),
            -32602,
        )
        .await;
    assert_eq!(violated_fields(&e), ["message.parts"]);
    assert!(e["message"].as_str().unwrap().contains("8192"), "{e}");
    // Joined with a newline, two parts of 4096 bytes are 8193.
    let half = "b".repeat(4096);
    let message = json!({"role": "ROLE_USER", "messageId": "m",
                         "parts": [{"text": half}, {"text": half}]});
    h.err("SendMessage", json!({ "message": message }), -32602)
        .await;
    h.err(
        "SendMessage",
        json!({ "message": user_message("") }),
        -32602,
    )
    .await;
    // Only the one 8192-byte task ran.
    assert_eq!(h.script.jobs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn only_text_parts_are_accepted() {
    let h = Harness::start().await;
    for part in [
        json!({"data": {"x": 1}, "mediaType": "application/json"}),
        json!({"url": "https://example.com/a.png", "mediaType": "image/png"}),
        json!({"raw": "aGVsbG8=", "filename": "a.txt"}),
    ] {
        let message = json!({"role": "ROLE_USER", "messageId": "m",
                             "parts": [{"text": "look"}, part]});
        let e = h
            .err("SendMessage", json!({ "message": message }), -32005)
            .await;
        assert_eq!(a2a_reason(&e), "CONTENT_TYPE_NOT_SUPPORTED");
    }
    assert!(h.script.events().is_empty());
}

#[tokio::test]
async fn continuing_a_task_is_unsupported() {
    let h = Harness::start().await;
    let first = h.send_text("first", None, false).await;
    let mut message = user_message("again");
    message["taskId"] = first["id"].clone();
    let e = h
        .err("SendMessage", json!({ "message": message }), -32004)
        .await;
    assert_eq!(a2a_reason(&e), "UNSUPPORTED_OPERATION");
    assert!(e["message"].as_str().unwrap().contains("contextId"), "{e}");
    // A taskId nobody knows is TaskNotFound (A2A 1.0), and nothing runs.
    let mut message = user_message("again");
    message["taskId"] = json!("no-such-task");
    let e = h
        .err("SendMessage", json!({ "message": message }), -32001)
        .await;
    assert_eq!(a2a_reason(&e), "TASK_NOT_FOUND");
}

#[tokio::test]
async fn invalid_messages_name_the_field() {
    let h = Harness::start().await;
    let long = "x".repeat(257);
    let cases = [
        (json!({}), "message"),
        (json!({"message": "hi"}), "message"),
        (
            json!({"message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": "a"}]}}),
            "message.role",
        ),
        (
            json!({"message": {"messageId": "m", "parts": [{"text": "a"}]}}),
            "message.role",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "a"}]}}),
            "message.messageId",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "messageId": "", "parts": [{"text": "a"}]}}),
            "message.messageId",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "messageId": long, "parts": [{"text": "a"}]}}),
            "message.messageId",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "messageId": "m", "contextId": long,
                               "parts": [{"text": "a"}]}}),
            "message.contextId",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": []}}),
            "message.parts",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": 1}]}}),
            "message.parts[0].text",
        ),
        (
            json!({"message": user_message("a"), "configuration": {"historyLength": "x"}}),
            "configuration.historyLength",
        ),
        (
            json!({"message": user_message("a"), "configuration": {"returnImmediately": "yes"}}),
            "configuration.returnImmediately",
        ),
    ];
    for (params, field) in cases {
        let e = h.err("SendMessage", params.clone(), -32602).await;
        assert_eq!(violated_fields(&e), [field], "{params}");
    }
    // The integer form of ROLE_USER is ProtoJSON too.
    let message = json!({"role": 1, "messageId": "m", "parts": [{"text": "numeric role"}]});
    let result = h.ok("SendMessage", json!({ "message": message })).await;
    assert_eq!(result["task"]["history"][0]["role"], "ROLE_USER");
}

#[tokio::test]
async fn output_modes_and_push_configuration() {
    let h = Harness::start().await;
    let e = h
        .err(
            "SendMessage",
            json!({"message": user_message("a"),
                   "configuration": {"acceptedOutputModes": ["image/png", "audio/wav"]}}),
            -32005,
        )
        .await;
    assert_eq!(a2a_reason(&e), "CONTENT_TYPE_NOT_SUPPORTED");
    for modes in [
        json!([]),
        json!(["text/plain"]),
        json!(["image/png", "application/json"]),
    ] {
        let result = h
            .ok(
                "SendMessage",
                json!({"message": user_message("a"),
                       "configuration": {"acceptedOutputModes": modes}}),
            )
            .await;
        assert_eq!(result["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    }
    let e = h
        .err(
            "SendMessage",
            json!({"message": user_message("a"),
                   "configuration": {"taskPushNotificationConfig": {"url": "https://x"}}}),
            -32003,
        )
        .await;
    assert_eq!(a2a_reason(&e), "PUSH_NOTIFICATION_NOT_SUPPORTED");
}

#[tokio::test]
async fn a_failed_run_keeps_its_reason_and_result() {
    let h = Harness::start().await;
    let task = h.send_text("fail:model down", None, false).await;
    schema::validate_task(&task);
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "the model endpoint is unreachable"
    );
    assert!(task["artifacts"][0]["parts"][0]["data"].is_object());
    // A failed turn is not saved as history.
    assert!(h
        .store
        .session(task["contextId"].as_str().unwrap())
        .await
        .is_none());
}

// ---- GetTask / CancelTask ---------------------------------------------------------------

#[tokio::test]
async fn unknown_tasks_are_not_found() {
    let h = Harness::start().await;
    let long = "y".repeat(300);
    for id in ["no-such-task", long.as_str()] {
        let e = h.err("GetTask", json!({ "id": id }), -32001).await;
        assert_eq!(a2a_reason(&e), "TASK_NOT_FOUND");
        let e = h.err("CancelTask", json!({ "id": id }), -32001).await;
        assert_eq!(a2a_reason(&e), "TASK_NOT_FOUND");
    }
    for params in [json!({}), json!({"id": ""}), json!({"id": 5})] {
        let e = h.err("GetTask", params.clone(), -32602).await;
        assert_eq!(violated_fields(&e), ["id"], "{params}");
        h.err("CancelTask", params, -32602).await;
    }
}

#[tokio::test]
async fn cancel_a_running_task() {
    let h = Harness::start().await;
    let task = h.send_text("block:cancel-me", None, true).await;
    let id = task["id"].as_str().unwrap().to_string();
    h.script.wait_for("start:block:cancel-me").await;
    let canceled = h.ok("CancelTask", json!({ "id": id })).await;
    schema::validate_task(&canceled);
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    // The runner saw its token fire and settled before the answer came.
    let events = h.script.events();
    assert!(
        events.contains(&"cancelled:block:cancel-me".to_string())
            && events.contains(&"end:block:cancel-me".to_string()),
        "{events:?}"
    );
    assert_eq!(
        canceled["status"]["message"]["parts"][0]["text"],
        "canceled by request (stopped: the current step was cancelled)"
    );
    assert_eq!(
        h.store.states_of(&id).last(),
        Some(&TaskState::Canceled),
        "CANCELED is stored"
    );
    let again = h.ok("GetTask", json!({ "id": id })).await;
    assert_eq!(again, canceled);
    // Terminal now: not cancelable.
    let e = h.err("CancelTask", json!({ "id": id }), -32002).await;
    assert_eq!(a2a_reason(&e), "TASK_NOT_CANCELABLE");
    assert_eq!(h.tasks.active_count(), 0);
}

#[tokio::test]
async fn a_completed_task_is_not_cancelable() {
    let h = Harness::start().await;
    let task = h.send_text("quick", None, false).await;
    let e = h.err("CancelTask", json!({"id": task["id"]}), -32002).await;
    assert_eq!(a2a_reason(&e), "TASK_NOT_CANCELABLE");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("TASK_STATE_COMPLETED"),
        "{e}"
    );
}

// ---- ListTasks --------------------------------------------------------------------------

/// A stored task as an earlier netd left it: `updated_ms` and id chosen by the test.
fn seeded(id: &str, context: &str, state: TaskState, updated_ms: i64) -> TaskRecord {
    let timestamp = chrono::DateTime::from_timestamp_millis(updated_ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let user = json!({"messageId": format!("m-{id}"), "contextId": context, "taskId": id,
                      "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    let mut doc = json!({
        "id": id, "contextId": context,
        "status": {"state": state.as_a2a(), "timestamp": timestamp},
        "history": [user],
    });
    if state.is_terminal() {
        let agent = json!({"messageId": format!("a-{id}"), "contextId": context,
                           "taskId": id, "role": "ROLE_AGENT", "parts": [{"text": "bye"}]});
        doc["status"]["message"] = agent.clone();
        doc["history"].as_array_mut().unwrap().push(agent);
        doc["artifacts"] = json!([{"artifactId": format!("r-{id}"), "name": "result",
            "parts": [{"data": {"answer": "bye"}, "mediaType": "application/json"}]}]);
    }
    TaskRecord {
        id: TaskId(id.into()),
        context_id: ContextId(context.into()),
        state,
        updated_ms,
        document: doc.to_string(),
    }
}

/// Seven tasks: t1..t7 at 1000..=1005 ms (t4 and t5 tie at 1003), contexts A and B.
async fn seed_seven(h: &Harness) {
    let rows = [
        ("t1", "A", TaskState::Completed, 1000),
        ("t2", "B", TaskState::Failed, 1001),
        ("t3", "A", TaskState::Completed, 1002),
        ("t4", "B", TaskState::Completed, 1003),
        ("t5", "A", TaskState::Canceled, 1003),
        ("t6", "A", TaskState::Completed, 1004),
        ("t7", "B", TaskState::Completed, 1005),
    ];
    for (id, context, state, ms) in rows {
        h.store.seed(seeded(id, context, state, ms)).await;
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

async fn list(h: &Harness, params: Value) -> Value {
    let page = h.ok("ListTasks", params).await;
    schema::validate("List Tasks Response", &page);
    for t in page["tasks"].as_array().unwrap() {
        schema::validate_task(t);
    }
    for field in ["tasks", "nextPageToken", "pageSize", "totalSize"] {
        assert!(page.get(field).is_some(), "no {field}: {page}");
    }
    page
}

#[tokio::test]
async fn list_tasks_pages_newest_first() {
    let h = Harness::start().await;
    seed_seven(&h).await;
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let mut params = json!({"pageSize": 3});
        if !token.is_empty() {
            params["pageToken"] = json!(token);
        }
        let page = list(&h, params).await;
        assert_eq!(page["totalSize"], 7);
        assert_eq!(page["pageSize"], 3);
        seen.extend(ids(&page));
        // Artifacts only when asked for.
        assert!(page["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("artifacts").is_none()));
        pages += 1;
        token = page["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    // Update time descending; the tie at 1003 by id descending.
    assert_eq!(seen, ["t7", "t6", "t5", "t4", "t3", "t2", "t1"]);
    // The default page holds everything, and the last page's token is "".
    let page = list(&h, json!({})).await;
    assert_eq!(page["pageSize"], 50);
    assert_eq!(ids(&page).len(), 7);
    assert_eq!(page["nextPageToken"], "");
    let page = list(&h, json!({"includeArtifacts": true, "pageSize": "2"})).await;
    assert_eq!(ids(&page), ["t7", "t6"]);
    assert_eq!(
        page["tasks"][0]["artifacts"][0]["parts"][0]["data"]["answer"],
        "bye"
    );
    let page = list(&h, json!({"historyLength": 0})).await;
    assert!(page["tasks"][0].get("history").is_none());
    let page = list(&h, json!({"historyLength": 1})).await;
    assert_eq!(page["tasks"][0]["history"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn list_tasks_filters() {
    let h = Harness::start().await;
    seed_seven(&h).await;
    let page = list(&h, json!({"contextId": "A"})).await;
    assert_eq!(ids(&page), ["t6", "t5", "t3", "t1"]);
    assert_eq!(page["totalSize"], 4);
    let page = list(&h, json!({"status": "TASK_STATE_COMPLETED"})).await;
    assert_eq!(ids(&page), ["t7", "t6", "t4", "t3", "t1"]);
    let page = list(&h, json!({"status": "TASK_STATE_FAILED", "contextId": "B"})).await;
    assert_eq!(ids(&page), ["t2"]);
    // At or after the timestamp.
    let page = list(
        &h,
        json!({"statusTimestampAfter": "1970-01-01T00:00:01.003Z"}),
    )
    .await;
    assert_eq!(ids(&page), ["t7", "t6", "t5", "t4"]);
    let page = list(
        &h,
        json!({"statusTimestampAfter": "1970-01-01T01:00:01.0035+01:00"}),
    )
    .await;
    assert_eq!(ids(&page), ["t7", "t6"]);
    // A state nl2sh never gives a task matches nothing.
    let page = list(&h, json!({"status": "TASK_STATE_INPUT_REQUIRED"})).await;
    assert_eq!(ids(&page), Vec::<String>::new());
    assert_eq!(page["totalSize"], 0);
    assert_eq!(page["nextPageToken"], "");
    // Pages under a filter walk the filtered set.
    let first = list(&h, json!({"contextId": "A", "pageSize": 3})).await;
    assert_eq!(ids(&first), ["t6", "t5", "t3"]);
    let second = list(
        &h,
        json!({"contextId": "A", "pageSize": 3, "pageToken": first["nextPageToken"]}),
    )
    .await;
    assert_eq!(ids(&second), ["t1"]);
    assert_eq!(second["nextPageToken"], "");
}

#[tokio::test]
async fn list_tasks_refuses_bad_page_sizes_and_tokens() {
    let h = Harness::start().await;
    seed_seven(&h).await;
    for (params, field) in [
        (json!({"pageSize": 0}), "pageSize"),
        (json!({"pageSize": 101}), "pageSize"),
        (json!({"pageSize": -1}), "pageSize"),
        (json!({"pageToken": "garbage"}), "pageToken"),
        (json!({"status": "TASK_STATE_DONE"}), "status"),
        (
            json!({"statusTimestampAfter": "yesterday"}),
            "statusTimestampAfter",
        ),
        (json!({"includeArtifacts": "yes"}), "includeArtifacts"),
    ] {
        let e = h.err("ListTasks", params.clone(), -32602).await;
        assert_eq!(violated_fields(&e), [field], "{params}");
    }
    // A token from another filter is not a token for this one.
    let page = list(&h, json!({"pageSize": 2})).await;
    let token = page["nextPageToken"].clone();
    h.err(
        "ListTasks",
        json!({"pageSize": 2, "contextId": "A", "pageToken": token}),
        -32602,
    )
    .await;
    let page = list(&h, json!({"pageSize": 100})).await;
    assert_eq!(ids(&page).len(), 7);
}

#[tokio::test]
async fn tasks_sent_are_listed_with_their_context() {
    let h = Harness::start().await;
    let a = h.send_text("one", Some("ctx-list"), false).await;
    let b = h.send_text("two", Some("ctx-list"), false).await;
    h.send_text("elsewhere", None, false).await;
    let page = list(&h, json!({"contextId": "ctx-list"})).await;
    let listed = ids(&page);
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&a["id"].as_str().unwrap().to_string()));
    assert!(listed.contains(&b["id"].as_str().unwrap().to_string()));
    // The second turn started from the first one's history.
    assert_eq!(h.script.job("two").unwrap().history.len(), 2);
    no_leaks(&h);
}

// ---- the active-task limit ----------------------------------------------------------------

#[tokio::test]
async fn the_17th_active_task_is_refused_at_once() {
    let h = Harness::start().await;
    let mut ids = Vec::new();
    for i in 0..16 {
        // Half of them wait for their context: they count too.
        let context = format!("limit-{}", i % 8);
        let task = h
            .send_text(&format!("block:{i}"), Some(&context), true)
            .await;
        ids.push(task["id"].as_str().unwrap().to_string());
    }
    assert_eq!(h.tasks.active_count(), 16);
    let e = h
        .err(
            "SendMessage",
            json!({ "message": user_message("one too many") }),
            -32603,
        )
        .await;
    assert!(
        e["message"].as_str().unwrap().contains("16 active tasks"),
        "{e}"
    );
    let info = &e["data"][0];
    assert_eq!(info["@type"], ERROR_INFO);
    assert_eq!(info["reason"], "ACTIVE_TASK_LIMIT");
    assert_eq!(info["metadata"]["limit"], "16");
    // Nothing was created for it.
    assert!(h.script.job("one too many").is_none());
    assert_eq!(h.tasks.active_count(), 16);
    // One ends: room for one more.
    h.script.release("0");
    poll_until_terminal(&h, &ids[0]).await;
    let task = h.send_text("now there is room", None, false).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    for i in 1..16 {
        h.script.release(&i.to_string());
    }
    for id in &ids {
        poll_until_terminal(&h, id).await;
    }
    assert_eq!(h.tasks.active_count(), 0);
}

#[test]
fn the_schema_check_rejects_what_a2a_1_0_forbids() {
    // 0.3's `kind`, a lowercase state and a timestamp that is not RFC 3339.
    let bad = json!({"id": "t", "kind": "task",
        "status": {"state": "completed", "timestamp": "yesterday"}});
    assert_eq!(
        schema::errors("Task", &bad).len(),
        3,
        "{:?}",
        schema::errors("Task", &bad)
    );
    let part = json!({"text": "a", "type": "text"});
    assert_eq!(schema::errors("Part", &part).len(), 1);
    let good = json!({"id": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z"}});
    assert!(schema::errors("Task", &good).is_empty());
}
