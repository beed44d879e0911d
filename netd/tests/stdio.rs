//! The MCP server over a byte stream, the way stdio mode runs it (rmcp's async-rw
//! transport, newline-delimited JSON-RPC), with a fake executor.

use std::time::Duration;

mod common;

use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::tool_calls::ToolCalls;
use nl2sh_netd::McpServer;
use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdExecutor};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

/// Send one message; for a request, read its one-line answer.
async fn ask(
    wr: &mut tokio::io::WriteHalf<tokio::io::DuplexStream>,
    lines: &mut Lines,
    msg: Value,
) -> Option<Value> {
    wr.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
    msg.get("id")?;
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    Some(serde_json::from_str(&line).unwrap())
}

/// The MCP server over a byte stream with `executor`, counting tool calls against
/// `calls`, as stdio mode runs it; the client's ends, and the server's task.
async fn serve_stream(
    executor: ExecutorClient,
    calls: ToolCalls,
) -> (
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
    Lines,
    tokio::task::JoinHandle<bool>,
) {
    let backends = common::harness::backends(executor.clone()).await;
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_rd, server_wr) = tokio::io::split(server);
    let serving = tokio::spawn(async move {
        let origin = nl2sh_proto::channels::CallOrigin::McpStdio;
        let running = McpServer::new(executor, backends.tasks, origin, calls)
            .serve((server_rd, server_wr))
            .await
            .unwrap();
        // Whether the session ended cleanly.
        running.waiting().await.is_ok()
    });
    let (client_rd, client_wr) = tokio::io::split(client);
    (client_wr, BufReader::new(client_rd).lines(), serving)
}

#[tokio::test]
async fn initialize_then_inspect_then_eof_ends_the_server() {
    let (ours, theirs) = pair::<NetdExecutor>().unwrap();
    tokio::spawn(rpc::serve(theirs, |req: ExecutorRequest| async move {
        match req {
            ExecutorRequest::Inspect => Ok(ExecutorResponse::Inspect {
                json: r#"{"os":{"name":"stdio"}}"#.into(),
            }),
            other => panic!("unexpected {other:?}"),
        }
    }));
    let (executor, _end) = ExecutorClient::start(ours).await.unwrap();
    let (mut client_wr, mut lines, serving) = serve_stream(executor, ToolCalls::default()).await;
    let init = ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    )
    .await
    .unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let call = ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "nl2sh_inspect"}}),
    )
    .await
    .unwrap();
    let structured = call["result"]["structuredContent"].clone();
    assert!(structured["netd"].is_object(), "{structured}");
    let mut executor_part = structured.as_object().unwrap().clone();
    executor_part.remove("netd");
    assert_eq!(
        Value::Object(executor_part),
        json!({"os": {"name": "stdio"}})
    );

    // Stdin reaching EOF.
    client_wr.shutdown().await.unwrap();
    let clean = tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("EOF did not end the server")
        .unwrap();
    assert!(clean, "the session did not end cleanly");
}

#[tokio::test]
async fn over_stdio_a_call_over_the_cap_is_a_tool_error() {
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let started = std::sync::Arc::new(tokio::sync::Notify::new());
    let gate = release.clone();
    let reached = started.clone();
    let (ours, theirs) = pair::<NetdExecutor>().unwrap();
    tokio::spawn(rpc::serve(theirs, move |req: ExecutorRequest| {
        let gate = gate.clone();
        let reached = reached.clone();
        async move {
            match req {
                ExecutorRequest::Invoke(call) => {
                    reached.notify_one();
                    gate.acquire().await.unwrap().forget();
                    Ok(ExecutorResponse::Outcome(
                        nl2sh_proto::channels::ToolOutcome {
                            tool: call.tool,
                            success: true,
                            output: "released".into(),
                            attachments: Vec::new(),
                            read_from: Default::default(),
                        },
                    ))
                }
                ExecutorRequest::Inspect => Ok(ExecutorResponse::Inspect {
                    json: r#"{"os":{"name":"stdio"}}"#.into(),
                }),
                other => panic!("unexpected {other:?}"),
            }
        }
    }));
    let (executor, _end) = ExecutorClient::start(ours).await.unwrap();
    let (mut client_wr, mut lines, _serving) = serve_stream(executor, ToolCalls::new(1)).await;
    ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    )
    .await
    .unwrap();
    ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let invoke = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "nl2sh_invoke", "arguments": {"tool": "hold"}}})
    };
    // The first call holds the only slot (its answer comes after the release).
    client_wr
        .write_all(format!("{}\n", invoke(2)).as_bytes())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the first call did not reach the executor");
    let refused = ask(&mut client_wr, &mut lines, invoke(3)).await.unwrap();
    assert_eq!(refused["id"], 3, "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("nl2sh is busy: 1 tool calls are running"),
        "{text}"
    );
    // Cheap calls still answer.
    let inspect = ask(
        &mut client_wr,
        &mut lines,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "nl2sh_inspect"}}),
    )
    .await
    .unwrap();
    assert_eq!(inspect["result"]["isError"], false, "{inspect}");
    release.add_permits(1);
    let held = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let held: Value = serde_json::from_str(&held).unwrap();
    assert_eq!(held["id"], 2, "{held}");
    assert_eq!(held["result"]["isError"], false, "{held}");
}
