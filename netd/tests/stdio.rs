//! The MCP server over a byte stream, the way stdio mode runs it (rmcp's async-rw
//! transport, newline-delimited JSON-RPC), with a fake executor.

use std::time::Duration;

mod common;

use nl2sh_netd::executor::ExecutorClient;
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
    let backends = common::harness::backends(executor.clone()).await;

    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_rd, server_wr) = tokio::io::split(server);
    let serving = tokio::spawn(async move {
        let tasks = backends.tasks;
        let running = McpServer::new(executor, tasks, nl2sh_proto::channels::CallOrigin::McpStdio)
            .serve((server_rd, server_wr))
            .await
            .unwrap();
        running.waiting().await.unwrap();
    });

    let (client_rd, mut client_wr) = tokio::io::split(client);
    let mut lines = BufReader::new(client_rd).lines();
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
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("EOF did not end the server")
        .unwrap();
}
