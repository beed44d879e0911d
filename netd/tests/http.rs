//! The HTTP front door and MCP server in-process: `serve_http` on 127.0.0.1 with a fake
//! executor on the other end of a socketpair, spoken to with hand-written HTTP/1.1.

use std::net::SocketAddr;
use std::time::Duration;

mod common;

use common::{executor_part, send, Reply};
use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::serve_http;
use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse, HttpSettings};
use nl2sh_proto::frame::read_frame;
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdExecutor};
use nl2sh_proto::Secret;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TOKEN: &str = "nl2sh-test-token-0123456789abcdefghijklmnop";
const ADVERTISED_ORIGIN: &str = "http://phone.test:8765";
const ADVERTISED_AUTHORITY: &str = "phone.test:8765";

#[derive(Clone, Copy)]
enum Fake {
    /// Inspect answers the object of [`device`].
    Device,
    /// Inspect is answered with something else (a catalog): the channel refuses it.
    Failing,
    /// The executor closes the channel on the first request, without answering.
    Gone,
}

fn device() -> Value {
    json!({"os": {"name": "testos", "version": 7}, "identity": {"uid": 2000}, "tools": ["sh"]})
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(fake: Fake) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = pair::<NetdExecutor>().unwrap();
        match fake {
            Fake::Gone => {
                // Take one request, then close the channel without answering.
                tokio::spawn(async move {
                    let Ok(mut theirs) = theirs.greet().await else {
                        return;
                    };
                    let _ = read_frame::<ExecutorRequest, _>(&mut theirs).await;
                });
            }
            Fake::Device | Fake::Failing => {
                tokio::spawn(rpc::serve(theirs, move |req: ExecutorRequest| async move {
                    Ok(match (req, fake) {
                        (_, Fake::Failing) => ExecutorResponse::Catalog(Vec::new()),
                        (ExecutorRequest::Inspect, _) => ExecutorResponse::Inspect {
                            json: device().to_string(),
                        },
                        (ExecutorRequest::Catalog, _) => {
                            ExecutorResponse::Catalog(vec![nl2sh_proto::channels::ToolSpec {
                                name: "shell.exec".into(),
                                description: "run".into(),
                                input_schema: r#"{"type":"object"}"#.into(),
                            }])
                        }
                        // Echo the call so tests can see exactly what crossed the channel.
                        (ExecutorRequest::Invoke(call), _) => {
                            ExecutorResponse::Outcome(nl2sh_proto::channels::ToolOutcome {
                                success: call.tool != "fail.me",
                                output: call.arguments,
                                tool: call.tool,
                                attachments: Vec::new(),
                            })
                        }
                        (ExecutorRequest::ReadScreen { .. }, _) => {
                            ExecutorResponse::Outcome(nl2sh_proto::channels::ToolOutcome {
                                tool: "android.screenshot".into(),
                                success: true,
                                output: "{}".into(),
                                attachments: vec![nl2sh_proto::channels::Attachment {
                                    media_type: "image/png".into(),
                                    data_base64: "iVBORw0KGgo=".into(),
                                    width: Some(2),
                                    height: Some(3),
                                }],
                            })
                        }
                        (ExecutorRequest::Cancel { .. }, _) => {
                            ExecutorResponse::Cancelled { found: false }
                        }
                    })
                }));
            }
        }
        let (executor, _end) = ExecutorClient::start(ours).await.unwrap();
        let settings = HttpSettings {
            token: Secret::new(TOKEN.into()),
            advertised_origin: ADVERTISED_ORIGIN.into(),
            local_authorities: vec![addr.to_string()],
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let backends = common::harness::backends(executor).await;
        let task = tokio::spawn(serve_http(listener, settings, backends, async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    fn local_host(&self) -> String {
        self.addr.to_string()
    }

    /// A well-formed MCP POST with the token and the listener's own Host.
    async fn mcp(&self, body: &Value, extra: &[(&str, &str)]) -> Reply {
        let host = self.local_host();
        let auth = format!("Bearer {TOKEN}");
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        for (name, value) in extra {
            headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            headers.push((name, value));
        }
        send(
            self.addr,
            "POST",
            "/mcp",
            &headers,
            body.to_string().as_bytes(),
        )
        .await
    }

    async fn initialize(&self, version: &str) -> Reply {
        self.mcp(&initialize(version), &[]).await
    }
}

fn initialize(version: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "netd-test", "version": "0"}
        }
    })
}

fn tools_call(name: &str, arguments: Option<Value>) -> Value {
    let mut params = json!({ "name": name });
    if let Some(a) = arguments {
        params["arguments"] = a;
    }
    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
}

const V: (&str, &str) = ("MCP-Protocol-Version", "2025-11-25");

// ---- the front door -------------------------------------------------------------------

#[tokio::test]
async fn declared_oversized_body_is_413_before_anything_else() {
    let s = Server::start(Fake::Device).await;
    let declared = (32 * 1024 + 1024).to_string();
    // No token, wrong Host: the size is checked first. Only the head is sent.
    let r = send(
        s.addr,
        "POST",
        "/mcp",
        &[("Host", "evil.example"), ("Content-Length", &declared)],
        b"",
    )
    .await;
    r.assert_refusal(413);
}

#[tokio::test]
async fn a_33_kib_body_is_413() {
    let s = Server::start(Fake::Device).await;
    let padding = "x".repeat(33 * 1024);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_pad": padding}});
    let r = s.mcp(&body, &[]).await;
    r.assert_refusal(413);
}

#[tokio::test]
async fn a_chunked_body_over_32_kib_is_413_while_streaming() {
    let s = Server::start(Fake::Device).await;
    let host = s.local_host();
    let auth = format!("Bearer {TOKEN}");
    let mut body = Vec::new();
    for _ in 0..33 {
        body.extend_from_slice(b"400\r\n");
        body.extend_from_slice(&[b' '; 1024]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let r = send(
        s.addr,
        "POST",
        "/mcp",
        &[
            ("Host", &host),
            ("Authorization", &auth),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Transfer-Encoding", "chunked"),
        ],
        &body,
    )
    .await;
    r.assert_refusal(413);
}

#[tokio::test]
async fn missing_or_wrong_token_is_401_with_challenge() {
    let s = Server::start(Fake::Device).await;
    let host = s.local_host();
    let body = initialize("2025-11-25").to_string();
    let wrong = format!("Bearer {TOKEN}x");
    let short = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    let basic = format!("Basic {TOKEN}");
    for auth in [
        None,
        Some(wrong.as_str()),
        Some(short.as_str()),
        Some(basic.as_str()),
        Some("Bearer "),
    ] {
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        let r = send(s.addr, "POST", "/mcp", &headers, body.as_bytes()).await;
        r.assert_refusal(401);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{auth:?}");
    }
}

#[tokio::test]
async fn token_is_checked_before_host() {
    let s = Server::start(Fake::Device).await;
    let body = initialize("2025-11-25").to_string();
    // Bad Host and no token: 401, not 403.
    let r = send(
        s.addr,
        "POST",
        "/mcp",
        &[
            ("Host", "evil.example"),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
    .await;
    r.assert_refusal(401);
    // Bad Host with the token: 403.
    let auth = format!("Bearer {TOKEN}");
    let r = send(
        s.addr,
        "POST",
        "/mcp",
        &[("Host", "evil.example"), ("Authorization", &auth)],
        body.as_bytes(),
    )
    .await;
    r.assert_refusal(403);
}

#[tokio::test]
async fn bad_host_is_403() {
    let s = Server::start(Fake::Device).await;
    let auth = format!("Bearer {TOKEN}");
    let body = initialize("2025-11-25").to_string();
    let other_port = format!("127.0.0.1:{}", s.addr.port().wrapping_add(1));
    for host in [
        "evil.example",
        "127.0.0.1",
        "localhost",
        "phone.test",
        "phone.test:80",
        other_port.as_str(),
    ] {
        let r = send(
            s.addr,
            "POST",
            "/mcp",
            &[
                ("Host", host),
                ("Authorization", &auth),
                ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
        .await;
        r.assert_refusal(403);
    }
}

#[tokio::test]
async fn bad_origin_is_403() {
    let s = Server::start(Fake::Device).await;
    for origin in [
        "http://evil.example",
        "null",
        "https://phone.test:8765",
        "http://phone.test",
    ] {
        let r = s.initialize_with(&[("Origin", origin)]).await;
        r.assert_refusal(403);
    }
}

impl Server {
    async fn initialize_with(&self, extra: &[(&str, &str)]) -> Reply {
        self.mcp(&initialize("2025-11-25"), extra).await
    }
}

#[tokio::test]
async fn good_token_host_and_origin_are_served() {
    let s = Server::start(Fake::Device).await;
    // The listener's own address.
    let r = s.initialize_with(&[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["serverInfo"]["name"], "nl2sh");
    // The advertised authority, any case.
    for host in [ADVERTISED_AUTHORITY, "PHONE.test:8765"] {
        let r = s.mcp(&initialize("2025-11-25"), &[("Host", host)]).await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    // The advertised origin.
    let r = s.initialize_with(&[("Origin", ADVERTISED_ORIGIN)]).await;
    assert_eq!(r.status, 200, "{r:?}");
}

#[tokio::test]
async fn other_paths_are_404() {
    let s = Server::start(Fake::Device).await;
    let host = s.local_host();
    for path in ["/", "/sse", "/mcp/", "/.well-known/agent.json", "/a2a/x"] {
        let r = send(s.addr, "GET", path, &[("Host", &host)], b"").await;
        r.assert_refusal(404);
    }
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    let mut s = Server::start(Fake::Device).await;
    if let Some(stop) = s.stop.take() {
        let _ = stop.send(());
    }
    let ended = tokio::time::timeout(Duration::from_secs(5), &mut s.task).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    assert!(TcpStream::connect(s.addr).await.is_err());
}

// ---- MCP ----------------------------------------------------------------------------

#[tokio::test]
async fn initialize_echoes_each_supported_version() {
    let s = Server::start(Fake::Device).await;
    for version in ["2025-11-25", "2025-06-18", "2024-11-05"] {
        let r = s.initialize(version).await;
        assert_eq!(r.status, 200, "{r:?}");
        let result = &r.json()["result"];
        assert_eq!(result["protocolVersion"], version);
        assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(result["capabilities"]["tools"].is_object());
        assert!(result["capabilities"].get("resources").is_none());
        assert!(result["capabilities"].get("prompts").is_none());
    }
}

#[tokio::test]
async fn initialize_with_another_version_gets_ours() {
    let s = Server::start(Fake::Device).await;
    for version in [
        "2025-03-26",
        "2026-07-28",
        "1999-01-01",
        "2099-12-31",
        "banana",
    ] {
        let r = s.initialize(version).await;
        assert_eq!(r.status, 200, "{version}: {r:?}");
        assert_eq!(
            r.json()["result"]["protocolVersion"],
            "2025-11-25",
            "{version}"
        );
    }
}

#[tokio::test]
async fn server_discover_at_2026_07_28_is_refused_cleanly() {
    let s = Server::start(Fake::Device).await;
    let discover = json!({
        "jsonrpc": "2.0", "id": 9, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "netd-test", "version": "0"}
        }}
    });
    // A 2026-07-28 client sends the SEP-2243 headers with it.
    let r = s
        .mcp(
            &discover,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "server/discover"),
            ],
        )
        .await;
    assert!(r.status < 500, "{r:?}");
    let v = r.json();
    assert_eq!(v["id"], 9);
    assert_eq!(v["error"]["code"], -32022, "{v}");
    assert_eq!(
        v["error"]["data"]["supported"],
        json!(["2025-11-25", "2025-06-18", "2024-11-05"])
    );

    // An ordinary request that declares 2026-07-28 gets the same answer.
    let list = json!({
        "jsonrpc": "2.0", "id": 10, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let r = s
        .mcp(
            &list,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
        )
        .await;
    assert!(r.status < 500, "{r:?}");
    assert_eq!(r.json()["error"]["code"], -32022);
}

#[tokio::test]
async fn tools_list_shows_the_direct_and_the_task_tools() {
    let s = Server::start(Fake::Device).await;
    let r = s
        .mcp(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            &[V],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let tools = r.json()["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nl2sh_inspect",
            "nl2sh_tools",
            "nl2sh_invoke",
            "nl2sh_read_screen",
            "nl2sh_ask",
            "nl2sh_get_task",
            "nl2sh_cancel_task"
        ]
    );
    assert_eq!(
        tools[0]["inputSchema"],
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[tokio::test]
async fn tools_lists_the_executor_catalog_with_parsed_schemas() {
    let s = Server::start(Fake::Device).await;
    let r = s.mcp(&tools_call("nl2sh_tools", None), &[V]).await;
    let result = r.json()["result"].clone();
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"tools": [{"name": "shell.exec", "description": "run",
                          "input_schema": {"type": "object"}}]})
    );
}

#[tokio::test]
async fn invoke_forwards_tool_and_arguments_and_maps_success() {
    let s = Server::start(Fake::Device).await;
    let args = json!({"tool": "shell.exec", "arguments": {"command": "ls"}});
    let r = s.mcp(&tools_call("nl2sh_invoke", Some(args)), &[V]).await;
    let result = r.json()["result"].clone();
    assert_ne!(result["isError"], true, "{result}");
    let structured = &result["structuredContent"];
    assert_eq!(structured["tool"], "shell.exec");
    assert_eq!(structured["success"], true);
    // The fake echoes the arguments text it received.
    let echoed: Value = serde_json::from_str(structured["output"].as_str().unwrap()).unwrap();
    assert_eq!(echoed, json!({"command": "ls"}));
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, structured);

    let args = json!({"tool": "fail.me", "arguments": {}});
    let r = s.mcp(&tools_call("nl2sh_invoke", Some(args)), &[V]).await;
    let result = r.json()["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["success"], false);
}

#[tokio::test]
async fn invoke_refuses_bad_shapes_and_oversized_arguments_before_the_executor() {
    let s = Server::start(Fake::Failing).await;
    let big = "x".repeat(17 * 1024);
    let cases = [
        (json!({}), "`tool` is required"),
        (json!({"tool": 5}), "`tool` must be a non-empty string"),
        (
            json!({"tool": "a", "arguments": [1]}),
            "`arguments` must be an object",
        ),
        (json!({"tool": "a", "extra": 1}), "unexpected field"),
        (json!({"tool": "a".repeat(129)}), "over 128 bytes"),
    ];
    for (args, want) in cases {
        let r = s
            .mcp(&tools_call("nl2sh_invoke", Some(args.clone())), &[V])
            .await;
        let result = r.json()["result"].clone();
        assert_eq!(result["isError"], true, "{args}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(want), "{args}: {text}");
        // The failing fake would have said "probe failed" had anything reached it.
        assert!(
            !text.contains("probe failed"),
            "{args} reached the executor"
        );
    }
    // 17 KiB of arguments fits the 32 KiB body but not the 16 KiB argument limit.
    let args = json!({"tool": "shell.exec", "arguments": {"command": big}});
    let r = s.mcp(&tools_call("nl2sh_invoke", Some(args)), &[V]).await;
    let result = r.json()["result"].clone();
    assert_eq!(result["isError"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("16384 byte limit"), "{text}");
}

#[tokio::test]
async fn read_screen_is_a_summary_and_one_image_block() {
    let s = Server::start(Fake::Device).await;
    let r = s.mcp(&tools_call("nl2sh_read_screen", None), &[V]).await;
    let result = r.json()["result"].clone();
    assert_ne!(result["isError"], true, "{result}");
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{content:?}");
    assert_eq!(content[0]["type"], "text");
    assert!(content[0]["text"].as_str().unwrap().contains("2x3 PNG"));
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["mimeType"], "image/png");
    assert_eq!(content[1]["data"], "iVBORw0KGgo=");
}

#[tokio::test]
async fn inspect_returns_the_executors_object() {
    let s = Server::start(Fake::Device).await;
    for arguments in [None, Some(json!({}))] {
        let r = s.mcp(&tools_call("nl2sh_inspect", arguments), &[V]).await;
        assert_eq!(r.status, 200, "{r:?}");
        let result = r.json()["result"].clone();
        assert_eq!(executor_part(&result["structuredContent"]), device());
        assert_ne!(result["isError"], true);
        let content = result["content"].as_array().unwrap();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0]["type"], "text");
        let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(executor_part(&text), device());
    }
}

#[tokio::test]
async fn inspect_without_the_version_header_still_works() {
    // Stateless HTTP: rmcp assumes 2025-03-26 for a request without the header.
    let s = Server::start(Fake::Device).await;
    let r = s.mcp(&tools_call("nl2sh_inspect", None), &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        executor_part(&r.json()["result"]["structuredContent"]),
        device()
    );
}

#[tokio::test]
async fn a_wrong_answer_from_the_executor_is_an_error_result() {
    let s = Server::start(Fake::Failing).await;
    let r = s.mcp(&tools_call("nl2sh_inspect", None), &[V]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let result = r.json()["result"].clone();
    assert_eq!(result["isError"], true);
    // The channel refused it (and closed: netd then ends, and the tree with it).
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no answer to Inspect"),
        "{result}"
    );
}

#[tokio::test]
async fn closed_executor_channel_is_an_error_result() {
    let s = Server::start(Fake::Gone).await;
    let r = s.mcp(&tools_call("nl2sh_inspect", None), &[V]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let result = r.json()["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert!(result["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("unavailable"));
}

#[tokio::test]
async fn unexpected_arguments_are_an_error_result_naming_them() {
    let s = Server::start(Fake::Device).await;
    let r = s
        .mcp(
            &tools_call("nl2sh_inspect", Some(json!({"verbose": true}))),
            &[V],
        )
        .await;
    let result = r.json()["result"].clone();
    assert_eq!(result["isError"], true);
    assert!(result["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("verbose"));
    assert!(result.get("structuredContent").is_none());
}

#[tokio::test]
async fn unknown_and_overlong_tool_names_are_invalid_params() {
    let s = Server::start(Fake::Device).await;
    let long = "n".repeat(129);
    for name in ["nl2sh_nothing", long.as_str()] {
        let r = s.mcp(&tools_call(name, None), &[V]).await;
        assert!(r.status < 500, "{r:?}");
        let v = r.json();
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(v.get("result").is_none());
    }
    // Exactly 128 bytes is a name we check, just not one we have.
    let r = s.mcp(&tools_call(&"n".repeat(128), None), &[V]).await;
    assert_eq!(r.json()["error"]["code"], -32602);
}
