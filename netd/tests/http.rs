//! The HTTP front door and MCP server in-process: `serve_http` on 127.0.0.1 with a fake
//! executor on the other end of a socketpair, spoken to with hand-written HTTP/1.1.

use std::net::SocketAddr;
use std::time::Duration;

mod common;

use common::schema::schema_errors;
use common::{executor_part, send, Reply};
use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::serve_http;
use nl2sh_proto::channels::{
    ApprovalId, ApprovalWait, CallStage, ExecutorRequest, ExecutorResponse, HttpSettings,
};
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
    /// As `Device`, but describes a pending approval implausibly (an id with terminal
    /// escapes, a wait of u64::MAX seconds), as a compromised executor might.
    Implausible,
    /// As `Device`, but never answers where a call stands.
    StuckProgress,
}

/// What the real executor answers (`executor/src/inspect.rs`, with `sandbox`), in shape.
fn device() -> Value {
    json!({
        "os": {"name": "linux", "pretty_name": "Test OS 7", "id": "testos", "version_id": null},
        "kernel": {"sysname": "Linux", "release": "6.1.0", "version": "#1 SMP"},
        "architecture": "aarch64",
        "hostname": null,
        "android": {"ro.build.version.sdk": "34"},
        "uid": 2000,
        "euid": 2000,
        "root": {"is_root": false, "available": false, "su_path": null},
        "sandbox": {"active": false, "reason": "no user namespaces", "effect": "ask"},
        "build_identity": {
            "version": "0.1.0", "git_commit": null, "git_dirty": null, "build_id": null,
            "target": null, "profile": null, "executable_sha256": null,
            "protocol_version": 1, "uid": 2000
        }
    })
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
            Fake::Device | Fake::Failing | Fake::Implausible | Fake::StuckProgress => {
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
                            // `slow.me` takes long enough for a follower to hear of it.
                            if call.tool == "slow.me" {
                                tokio::time::sleep(Duration::from_millis(1600)).await;
                            }
                            // `image.me` answers an image of unknown size.
                            let attachments = if call.tool == "image.me" {
                                vec![nl2sh_proto::channels::Attachment {
                                    media_type: "image/jpeg".into(),
                                    data_base64: "/9j/4AAQ".into(),
                                    width: None,
                                    height: None,
                                }]
                            } else {
                                Vec::new()
                            };
                            ExecutorResponse::Outcome(nl2sh_proto::channels::ToolOutcome {
                                success: call.tool != "fail.me",
                                output: call.arguments,
                                tool: call.tool,
                                attachments,
                                read_from: Default::default(),
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
                                read_from: Default::default(),
                            })
                        }
                        (ExecutorRequest::Cancel { .. }, _) => {
                            ExecutorResponse::Cancelled { found: false }
                        }
                        (ExecutorRequest::Progress { .. }, Fake::StuckProgress) => {
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                        // Every call waits for the owner's request abc234.
                        (ExecutorRequest::Progress { .. }, fake) => {
                            let (id, seconds_left) = match fake {
                                Fake::Implausible => ("\u{1b}]0;approved\u{7}", u64::MAX),
                                _ => ("abc234", 42),
                            };
                            ExecutorResponse::Progress(Some(CallStage::Deciding {
                                wait: Some(ApprovalWait {
                                    id: ApprovalId(id.into()),
                                    seconds_left,
                                }),
                            }))
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

// ---- progress ---------------------------------------------------------------------------

/// The JSON-RPC messages of an SSE body, in order.
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

/// A slow call whose client sent a progress token: the answer is a stream of
/// notifications that say what the call waits for, then the result.
async fn progress_of_a_slow_call(fake: Fake, modern_client: bool) -> (Vec<Value>, Value) {
    let s = Server::start(fake).await;
    let arguments = json!({"tool": "slow.me", "arguments": {}});
    let r = if modern_client {
        let mut call = modern(
            3,
            "tools/call",
            json!({"name": "nl2sh_invoke", "arguments": arguments}),
        );
        call["params"]["_meta"]["progressToken"] = json!("p-1");
        s.modern_post(&call, &[]).await
    } else {
        let mut call = tools_call("nl2sh_invoke", Some(arguments));
        call["params"]["_meta"] = json!({"progressToken": "p-1"});
        s.mcp(&call, &[V]).await
    };
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("text/event-stream"),
        "{r:?}"
    );
    let mut messages = sse_messages(&r.body);
    let last = messages.pop().unwrap();
    assert_eq!(last["id"], 3, "{r:?}");
    (messages, last["result"].clone())
}

#[tokio::test]
async fn a_slow_call_says_it_waits_for_the_owners_approval() {
    for modern_client in [true, false] {
        let (notes, result) = progress_of_a_slow_call(Fake::Device, modern_client).await;
        assert_eq!(result["isError"], false, "{result}");
        // 1.6 s of waiting, asked after 0.25 s and then every second: said once (the
        // second answer is the same, so it is not repeated).
        assert_eq!(notes.len(), 1, "{notes:?}");
        let note = &notes[0];
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "p-1");
        assert_eq!(note["params"]["progress"], 1.0);
        assert_eq!(
            note["params"]["message"],
            "waiting for the owner's approval (request abc234, 42 s left)"
        );
    }
}

#[tokio::test]
async fn an_implausible_approval_from_the_executor_is_not_passed_on() {
    let (notes, _) = progress_of_a_slow_call(Fake::Implausible, true).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        notes[0]["params"]["message"],
        "being checked against the owner's policy"
    );
}

#[tokio::test]
async fn a_stage_that_never_comes_does_not_hold_the_answer_back() {
    let s = Server::start(Fake::StuckProgress).await;
    let arguments = json!({"tool": "slow.me", "arguments": {}});
    let mut call = modern(
        3,
        "tools/call",
        json!({"name": "nl2sh_invoke", "arguments": arguments}),
    );
    call["params"]["_meta"]["progressToken"] = json!("p-1");
    // The answer comes when the call ends (1.6 s), not when the stage query would.
    let answered = tokio::time::timeout(Duration::from_secs(20), s.modern_post(&call, &[])).await;
    let r = answered.expect("the answer waited for a stage that never came");
    assert_eq!(r.status, 200, "{r:?}");
    // Nothing was said, so it is one JSON answer.
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
}

#[tokio::test]
async fn without_a_progress_token_a_slow_call_is_one_json_answer() {
    let s = Server::start(Fake::Device).await;
    let arguments = json!({"tool": "slow.me", "arguments": {}});
    let r = s
        .mcp(&tools_call("nl2sh_invoke", Some(arguments)), &[V])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(r.json()["result"]["isError"], false);
}

// ---- MCP 2026-07-28 (stateless, per-request `_meta`) ----------------------------------

const MODERN: &str = "2026-07-28";

/// The `_meta` every 2026-07-28 request carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "netd-test", "version": "0"}
    })
}

/// A 2026-07-28 request: `params` with the `_meta` above.
fn modern(id: u64, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = modern_meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

impl Server {
    /// A 2026-07-28 POST with the headers such a client sends (the version, `Mcp-Method`
    /// and, for `tools/call`, `Mcp-Name`), then `extra` (which may replace them).
    async fn modern_post(&self, body: &Value, extra: &[(&str, &str)]) -> Reply {
        let method = body["method"].as_str().unwrap_or_default().to_string();
        let name = body["params"]["name"].as_str().map(str::to_string);
        let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", &method)];
        if let Some(name) = name.as_deref() {
            headers.push(("Mcp-Name", name));
        }
        for (k, v) in extra {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k, v));
        }
        self.mcp(body, &headers).await
    }
}

#[tokio::test]
async fn server_discover_names_every_revision_with_caching_hints() {
    let s = Server::start(Fake::Device).await;
    let r = s
        .modern_post(&modern(9, "server/discover", json!({})), &[])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["id"], 9);
    let result = &v["result"];
    assert_eq!(result["resultType"], "complete", "{v}");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"])
    );
    assert!(result["capabilities"]["tools"].is_object(), "{v}");
    assert!(result["capabilities"].get("prompts").is_none());
    assert!(result["capabilities"].get("resources").is_none());
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "nl2sh");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(result["ttlMs"], nl2sh_netd::mcp::LIST_TTL_MS);
    assert_eq!(result["cacheScope"], "public");
}

#[tokio::test]
async fn a_2026_client_lists_and_calls_tools_without_initialize() {
    let s = Server::start(Fake::Device).await;
    let r = s
        .modern_post(&modern(2, "tools/list", json!({})), &[])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let modern_list = r.json()["result"].clone();
    assert_eq!(modern_list["resultType"], "complete");
    assert_eq!(modern_list["ttlMs"], nl2sh_netd::mcp::LIST_TTL_MS);
    assert_eq!(modern_list["cacheScope"], "public");
    // The same tools, in the same order, as the older revisions list.
    assert_eq!(modern_list["tools"], json!(s.tools().await));

    // The older revisions' answer has none of 2026-07-28's fields.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let legacy = s.mcp(&list, &[V]).await.json()["result"].clone();
    for field in ["resultType", "ttlMs", "cacheScope"] {
        assert!(legacy.get(field).is_none(), "{field} in {legacy}");
    }

    let call = modern(3, "tools/call", json!({"name": "nl2sh_inspect"}));
    let r = s.modern_post(&call, &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let result = &r.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["structuredContent"]["os"], device()["os"]);

    let call = modern(
        4,
        "tools/call",
        json!({"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec", "arguments": {"command": "id"}}}),
    );
    let r = s.modern_post(&call, &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
}

#[tokio::test]
async fn a_base64_encoded_mcp_name_is_decoded_before_it_is_compared() {
    let s = Server::start(Fake::Device).await;
    let call = modern(3, "tools/call", json!({"name": "nl2sh_inspect"}));
    // "nl2sh_inspect" in the revision's sentinel encoding.
    let encoded = "=?base64?bmwyc2hfaW5zcGVjdA==?=";
    let r = s.modern_post(&call, &[("Mcp-Name", encoded)]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["result"]["structuredContent"]["os"],
        device()["os"]
    );
    // The same sentinel naming another tool is a mismatch.
    let other = "=?base64?bmwyc2hfaW52b2tl?="; // nl2sh_invoke
    let r = s.modern_post(&call, &[("Mcp-Name", other)]).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );
}

/// What a hostile or broken 2026-07-28 client sends, and the revision's answer to each:
/// HTTP status and JSON-RPC error code, the request's id echoed.
#[tokio::test]
async fn malformed_and_mismatched_2026_requests_get_the_revisions_errors() {
    let s = Server::start(Fake::Device).await;
    let call = || modern(7, "tools/call", json!({"name": "nl2sh_inspect"}));
    let without = |key: &str| {
        let mut body = call();
        body["params"]["_meta"].as_object_mut().unwrap().remove(key);
        body
    };
    let with_version = |version: &str| {
        let mut body = call();
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(version);
        body
    };
    let no_meta = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": "nl2sh_inspect"}});
    // What, the body, headers to replace ("" leaves one out), HTTP status, JSON-RPC code.
    type Case<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>, u16, i64);
    let cases: Vec<Case> = vec![
        ("no _meta", no_meta, vec![], 400, -32602),
        (
            "no client capabilities",
            without("io.modelcontextprotocol/clientCapabilities"),
            vec![],
            400,
            -32602,
        ),
        (
            "no version in _meta",
            without("io.modelcontextprotocol/protocolVersion"),
            vec![],
            400,
            -32602,
        ),
        // The headers say one thing, the body another: a gateway routing on the header
        // would see a different request than the one served.
        (
            "version header differs",
            with_version("2025-11-25"),
            vec![],
            400,
            -32020,
        ),
        (
            "no version header",
            call(),
            vec![("MCP-Protocol-Version", "")],
            400,
            -32020,
        ),
        (
            "Mcp-Method differs",
            call(),
            vec![("Mcp-Method", "tools/list")],
            400,
            -32020,
        ),
        (
            "Mcp-Name differs",
            call(),
            vec![("Mcp-Name", "nl2sh_invoke")],
            400,
            -32020,
        ),
        (
            "Mcp-Name missing",
            call(),
            vec![("Mcp-Name", "")],
            400,
            -32020,
        ),
        (
            "unknown version",
            with_version("2099-01-01"),
            vec![("MCP-Protocol-Version", "2099-01-01")],
            400,
            -32022,
        ),
        (
            "capabilities not an object",
            {
                let mut body = call();
                body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                    json!("all");
                body
            },
            vec![],
            400,
            -32602,
        ),
    ];
    for (what, body, headers, status, code) in cases {
        let mut sent: Vec<(&str, &str)> = Vec::new();
        let method = body["method"].as_str().unwrap().to_string();
        let name = body["params"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for (k, v) in [
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", method.as_str()),
            ("Mcp-Name", name.as_str()),
        ] {
            match headers.iter().find(|(h, _)| h.eq_ignore_ascii_case(k)) {
                Some((_, "")) => {}
                Some(&(h, v)) => sent.push((h, v)),
                None => sent.push((k, v)),
            }
        }
        let r = s.mcp(&body, &sent).await;
        let v = r.json();
        assert_eq!(
            (r.status, v["error"]["code"].as_i64()),
            (status, Some(code)),
            "{what}: {r:?}"
        );
        assert_eq!(v["id"], 7, "{what}: {v}");
        if code == -32022 {
            assert_eq!(v["error"]["data"]["requested"], "2099-01-01", "{v}");
            assert_eq!(
                v["error"]["data"]["supported"],
                json!(["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"])
            );
        }
    }
    // None of it hurt the service.
    let r = s.modern_post(&call(), &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
}

#[tokio::test]
async fn methods_2026_removed_or_never_served_are_404_method_not_found() {
    let s = Server::start(Fake::Device).await;
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/list",
        "prompts/list",
        "completion/complete",
        "subscriptions/listen",
        "unknown/method",
    ] {
        let r = s.modern_post(&modern(11, method, json!({})), &[]).await;
        let v = r.json();
        assert_eq!(
            (r.status, v["error"]["code"].as_i64()),
            (404, Some(-32601)),
            "{method}: {r:?}"
        );
        assert_eq!(v["id"], 11);
    }
    // The older revisions' ping still answers (after their handshake, per request).
    let ping = json!({"jsonrpc": "2.0", "id": 12, "method": "ping"});
    let r = s.mcp(&ping, &[V]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json().get("result").is_some(), "{r:?}");
}

/// Forged and oversized `_meta`: what a client claims about itself is data, never
/// authority, and the body limit bounds it like any other field.
#[tokio::test]
async fn forged_and_oversized_meta_change_nothing() {
    let s = Server::start(Fake::Device).await;
    // A client naming itself with terminal escapes, claiming every capability, sending
    // keys of the server's own namespace and a progress token of the wrong type.
    let mut call = modern(
        5,
        "tools/call",
        json!({"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec", "arguments": {"command": "id"}}}),
    );
    let meta = &mut call["params"]["_meta"];
    meta["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "\u{1b}[2J\u{1b}]0;owner approved\u{7}", "version": "9\n9"});
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({"sampling": {}, "elicitation": {}, "roots": {}, "experimental": {"nl2sh/root": {}}});
    meta["io.modelcontextprotocol/serverInfo"] = json!({"name": "evil", "version": "0"});
    meta["progressToken"] = json!({"not": "a token"});
    let r = s.modern_post(&call, &[]).await;
    // Served like any call (the fake executor echoes the arguments it was given: only the
    // tool's own arguments crossed the channel, no _meta).
    assert_eq!(r.status, 200, "{r:?}");
    let result = &r.json()["result"];
    assert_eq!(result["isError"], false, "{r:?}");
    let output = result["structuredContent"]["output"].as_str().unwrap();
    assert_eq!(output, r#"{"command":"id"}"#);

    // A _meta that makes the body 33 KiB is refused before it is parsed.
    let mut big = modern(6, "tools/list", json!({}));
    big["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] =
        json!("x".repeat(33 * 1024));
    let r = s.modern_post(&big, &[]).await;
    r.assert_refusal(413);

    // Deep nesting inside _meta, within the size limit, is a parse error, not a crash.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"x":{}{}}}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let host = s.local_host();
    let auth = format!("Bearer {TOKEN}");
    let r = send(
        s.addr,
        "POST",
        "/mcp",
        &[
            ("Host", host.as_str()),
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/list"),
        ],
        deep.as_bytes(),
    )
    .await;
    assert!((400..500).contains(&r.status), "{r:?}");

    // The service still answers.
    let r = s
        .modern_post(&modern(9, "tools/list", json!({})), &[])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
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

// ---- tool metadata: hints, output schemas, and results that conform to them ----------

impl Server {
    /// Every tool `tools/list` shows, in order.
    async fn tools(&self) -> Vec<Value> {
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let r = self.mcp(&list, &[V]).await;
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["result"]["tools"].as_array().unwrap().clone()
    }

    /// The `result` of a `tools/call` (a JSON-RPC error fails the test).
    async fn call(&self, name: &str, arguments: Option<Value>) -> Value {
        let r = self.mcp(&tools_call(name, arguments), &[V]).await;
        assert_eq!(r.status, 200, "{r:?}");
        let reply = r.json();
        assert!(reply.get("error").is_none(), "{name}: {reply}");
        reply["result"].clone()
    }
}

fn named<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

/// Title, readOnly, destructive, idempotent, openWorld: what each tool says it does.
const HINTS: &[(&str, &str, [bool; 4])] = &[
    (
        "nl2sh_inspect",
        "Inspect device",
        [true, false, true, false],
    ),
    (
        "nl2sh_tools",
        "List device tools",
        [true, false, true, false],
    ),
    (
        "nl2sh_invoke",
        "Invoke a device tool",
        [false, true, false, true],
    ),
    (
        "nl2sh_read_screen",
        "Read the screen",
        [true, false, true, false],
    ),
    (
        "nl2sh_ask",
        "Ask the device's Agent",
        [false, true, false, true],
    ),
    ("nl2sh_get_task", "Get a task", [true, false, true, false]),
    (
        "nl2sh_cancel_task",
        "Cancel a task",
        [false, false, false, false],
    ),
];

#[tokio::test]
async fn every_tool_states_its_title_and_all_four_hints() {
    let s = Server::start(Fake::Device).await;
    let tools = s.tools().await;
    assert_eq!(tools.len(), HINTS.len());
    for (name, title, [read_only, destructive, idempotent, open_world]) in HINTS {
        let tool = named(&tools, name);
        assert_eq!(tool["title"], *title, "{name}");
        assert_eq!(
            tool["annotations"],
            json!({
                "title": title,
                "readOnlyHint": read_only,
                "destructiveHint": destructive,
                "idempotentHint": idempotent,
                "openWorldHint": open_world,
            }),
            "{name}"
        );
    }
}

#[tokio::test]
async fn every_tool_lists_a_self_contained_object_output_schema() {
    let s = Server::start(Fake::Device).await;
    for tool in s.tools().await {
        let name = tool["name"].as_str().unwrap();
        let schema = &tool["outputSchema"];
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        // Only keywords the checker below knows, and no reference to anything outside.
        assert_checkable(schema, name);
        for schema in [schema, &tool["inputSchema"]] {
            let text = schema.to_string();
            assert!(
                !text.contains("$ref") && !text.contains("$defs"),
                "{name}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn input_schemas_state_the_limits_netd_enforces() {
    use nl2sh_proto::limits::{MAX_AGENT_TEXT_BYTES, MAX_ID_BYTES, MAX_TOOL_NAME_BYTES};
    let s = Server::start(Fake::Device).await;
    let tools = s.tools().await;
    let none = json!({"type": "object", "properties": {}, "additionalProperties": false});
    for name in ["nl2sh_inspect", "nl2sh_tools", "nl2sh_read_screen"] {
        assert_eq!(named(&tools, name)["inputSchema"], none, "{name}");
    }
    let invoke = &named(&tools, "nl2sh_invoke")["inputSchema"];
    assert_eq!(invoke["required"], json!(["tool"]));
    assert_eq!(invoke["additionalProperties"], false);
    let tool = &invoke["properties"]["tool"];
    assert_eq!(
        (&tool["type"], &tool["minLength"], &tool["maxLength"]),
        (&json!("string"), &json!(1), &json!(MAX_TOOL_NAME_BYTES))
    );
    assert_eq!(
        invoke["properties"]["arguments"]["type"],
        json!(["object", "null"])
    );
    let ask = &named(&tools, "nl2sh_ask")["inputSchema"];
    let message = &ask["properties"]["message"];
    assert_eq!(
        (&message["minLength"], &message["maxLength"]),
        (&json!(1), &json!(MAX_AGENT_TEXT_BYTES))
    );
    let context = &ask["properties"]["context_id"];
    assert_eq!(context["type"], json!(["string", "null"]));
    assert_eq!(context["maxLength"], MAX_ID_BYTES);
    for name in ["nl2sh_get_task", "nl2sh_cancel_task"] {
        let id = &named(&tools, name)["inputSchema"]["properties"]["task_id"];
        assert_eq!(
            (&id["minLength"], &id["maxLength"]),
            (&json!(1), &json!(MAX_ID_BYTES)),
            "{name}"
        );
    }
    // The descriptions say bytes (JSON Schema lengths count characters).
    for d in [
        &tool["description"],
        &invoke["properties"]["arguments"]["description"],
        &message["description"],
        &context["description"],
    ] {
        assert!(d.as_str().unwrap().contains(" bytes"), "{d}");
    }
}

/// A successful result: not `isError`, `structuredContent` present, and (unless
/// `summary`) the same object as its first, text, block.
fn assert_success(name: &str, result: &Value, summary: bool) {
    assert_eq!(result["isError"], false, "{name}: {result}");
    let structured = &result["structuredContent"];
    assert!(structured.is_object(), "{name}: {result}");
    assert_eq!(result["content"][0]["type"], "text", "{name}: {result}");
    if !summary {
        let text = result["content"][0]["text"].as_str().unwrap();
        let text: Value = serde_json::from_str(text).unwrap();
        assert_eq!(&text, structured, "{name}");
    }
}

#[tokio::test]
async fn direct_tool_results_conform_to_their_output_schemas() {
    let s = Server::start(Fake::Device).await;
    let tools = s.tools().await;
    let cases = [
        ("nl2sh_inspect", None, true),
        ("nl2sh_inspect", Some(json!({})), true),
        ("nl2sh_tools", None, true),
        (
            "nl2sh_invoke",
            Some(json!({"tool": "shell.exec", "arguments": {"command": "ls"}})),
            true,
        ),
        (
            "nl2sh_invoke",
            Some(json!({"tool": "shell.exec", "arguments": null})),
            true,
        ),
        ("nl2sh_invoke", Some(json!({"tool": "image.me"})), true),
        ("nl2sh_read_screen", Some(json!({})), true),
        // Failures carry the same object; the schema binds only successes, but they fit.
        ("nl2sh_invoke", Some(json!({"tool": "fail.me"})), false),
    ];
    let mut attachments = 0;
    for (name, arguments, succeeds) in cases {
        let result = s.call(name, arguments.clone()).await;
        if succeeds {
            assert_success(name, &result, name == "nl2sh_read_screen");
        } else {
            assert_eq!(result["isError"], true, "{name}: {result}");
        }
        let structured = &result["structuredContent"];
        assert_conforms(&named(&tools, name)["outputSchema"], structured, name);
        attachments += structured
            .get("attachments")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
    }
    // The image cases were real: one from the screen, one from image.me.
    assert_eq!(attachments, 2);
}

#[tokio::test]
async fn task_tool_results_conform_to_their_output_schemas() {
    use common::harness::{Harness, TOKEN};
    let h = Harness::start().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let tools = common::mcp_post(h.addr, TOKEN, &list).await.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .clone();
    let check = |name: &str, result: &Value| {
        assert_success(name, result, false);
        assert_conforms(
            &named(&tools, name)["outputSchema"],
            &result["structuredContent"],
            name,
        );
        result["structuredContent"].clone()
    };
    let state = |task: &Value| task["status"]["state"].as_str().unwrap().to_string();

    // Completed (an answer artifact), then the same conversation again, then failed.
    let done = check(
        "nl2sh_ask",
        &h.mcp_tool(
            "nl2sh_ask",
            json!({"message": "uptime?", "context_id": null}),
        )
        .await,
    );
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert!(done["artifacts"].is_array() && done["status"]["message"].is_object());
    let again = json!({"message": "and now?", "context_id": done["contextId"]});
    let again = check("nl2sh_ask", &h.mcp_tool("nl2sh_ask", again).await);
    assert_eq!(again["contextId"], done["contextId"]);
    let failed = check(
        "nl2sh_ask",
        &h.mcp_tool("nl2sh_ask", json!({"message": "fail:no model"}))
            .await,
    );
    assert_eq!(state(&failed), "TASK_STATE_FAILED");
    for task in [&done, &failed] {
        let got = check(
            "nl2sh_get_task",
            &h.mcp_tool("nl2sh_get_task", json!({"task_id": task["id"]}))
                .await,
        );
        assert_eq!(&got, task);
    }
    // Still working (no status message, no artifact), then canceled.
    let running = h.send_text("block:schema", None, true).await;
    h.script.wait_for("start:block:schema").await;
    let working = check(
        "nl2sh_get_task",
        &h.mcp_tool("nl2sh_get_task", json!({"task_id": running["id"]}))
            .await,
    );
    assert_eq!(state(&working), "TASK_STATE_WORKING");
    assert!(working["status"].get("message").is_none() && working.get("artifacts").is_none());
    let canceled = check(
        "nl2sh_cancel_task",
        &h.mcp_tool("nl2sh_cancel_task", json!({"task_id": running["id"]}))
            .await,
    );
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");

    // Without an Agent the task fails at once, with no result artifact.
    let s = Server::start(Fake::Device).await;
    let tools = s.tools().await;
    let result = s
        .call("nl2sh_ask", Some(json!({"message": "anyone?"})))
        .await;
    assert_success("nl2sh_ask", &result, false);
    let task = &result["structuredContent"];
    assert_eq!(state(task), "TASK_STATE_FAILED", "{task}");
    assert!(task.get("artifacts").is_none(), "{task}");
    assert_conforms(
        &named(&tools, "nl2sh_ask")["outputSchema"],
        task,
        "nl2sh_ask",
    );
}

// A checker for exactly the JSON Schema keywords netd's output schemas use: `type` (a
// name or a list of names), `properties`, `required`, `additionalProperties: false`,
// `items`, `enum`, `format: date-time`, and `description`. Anything else panics, so
// nothing passes unchecked.

const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "format",
    "description",
];

/// Panics unless every keyword in `schema` (at any depth) is one the checker knows.
fn assert_checkable(schema: &Value, at: &str) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{at}: a schema must be an object: {schema}"));
    for (key, rule) in object {
        assert!(
            KEYWORDS.contains(&key.as_str()),
            "{at}: keyword {key} is unknown to the checker"
        );
        match key.as_str() {
            "properties" => {
                for (name, sub) in rule.as_object().unwrap() {
                    assert_checkable(sub, &format!("{at}.{name}"));
                }
            }
            "items" => assert_checkable(rule, &format!("{at}[]")),
            "additionalProperties" => assert_eq!(rule, false, "{at}"),
            "format" => assert_eq!(rule, "date-time", "{at}"),
            _ => {}
        }
    }
}

fn assert_conforms(schema: &Value, value: &Value, name: &str) {
    let errors = schema_errors(schema, value);
    assert!(
        errors.is_empty(),
        "{name}: the result does not match its outputSchema:\n{}\n{value:#}",
        errors.join("\n")
    );
}

#[test]
fn the_schema_checker_finds_what_is_wrong() {
    let schema = json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "enum": ["a", "b"]},
            "n": {"type": ["integer", "null"]},
            "t": {"type": "string", "format": "date-time"},
            "list": {"type": "array", "items": {"type": "boolean"}}
        },
        "required": ["s"],
        "additionalProperties": false
    });
    let good = json!({"s": "a", "n": null, "t": "2026-01-02T03:04:05.678Z", "list": [true]});
    assert!(schema_errors(&schema, &good).is_empty());
    assert!(schema_errors(&schema, &json!({"s": "b", "n": 3})).is_empty());
    for bad in [
        json!([]),
        json!({}),
        json!({"s": "c"}),
        json!({"s": 1}),
        json!({"s": "a", "n": 1.5}),
        json!({"s": "a", "n": "1"}),
        json!({"s": "a", "t": "yesterday"}),
        json!({"s": "a", "list": [true, 1]}),
        json!({"s": "a", "list": {}}),
        json!({"s": "a", "extra": 1}),
    ] {
        assert!(!schema_errors(&schema, &bad).is_empty(), "{bad}");
    }
}
