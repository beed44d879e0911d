//! The caps that keep long calls and stuck clients from taking every connection, in
//! process on 127.0.0.1 with low caps and short timeouts (`serve_http_with`): the
//! tool-call cap (503 + Retry-After + JSON-RPC error, cheap requests still answered), a
//! full connection table (a newcomer reads 503, not a reset), a client that stops reading
//! (closed after the write-stall timeout) and the connection lifetime. A fake executor
//! holds `hold` calls until the test releases them. Every bound waited on is generous:
//! these are behavioural checks, not speed tests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::tool_calls::BUSY_CODE;
use nl2sh_netd::HttpLimits;
use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse, ToolOutcome};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdExecutor};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{oneshot, Semaphore};

const TOKEN: &str = "nl2sh-caps-test-token-0123456789abcdefghijklmnop";
/// What "promptly" means here: far above any real answer time, far below a hang.
const PROMPT: Duration = Duration::from_secs(5);
/// Output of the `big` fake tool: the MCP answer carries it twice (text and
/// structuredContent), well over what the loopback socket buffers hold.
const BIG_OUTPUT: usize = 3 * 1024 * 1024;

/// The fake executor's state the tests look at and steer.
struct Executor {
    /// `hold` calls that reached the executor.
    started: AtomicUsize,
    /// Each `hold` call takes one permit to finish.
    release: Semaphore,
}

impl Executor {
    async fn wait_started(&self, n: usize) {
        let deadline = Instant::now() + PROMPT;
        while self.started.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < deadline,
                "{n} calls did not reach the executor"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

struct Server {
    addr: SocketAddr,
    executor: Arc<Executor>,
    _stop: oneshot::Sender<()>,
}

impl Server {
    async fn start(limits: HttpLimits) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Executor {
            started: AtomicUsize::new(0),
            release: Semaphore::new(0),
        });
        let (ours, theirs) = pair::<NetdExecutor>().unwrap();
        let fake = state.clone();
        tokio::spawn(rpc::serve(theirs, move |req: ExecutorRequest| {
            let fake = fake.clone();
            async move {
                Ok(match req {
                    ExecutorRequest::Invoke(call) => {
                        let output = match call.tool.as_str() {
                            "hold" => {
                                fake.started.fetch_add(1, Ordering::SeqCst);
                                fake.release.acquire().await.unwrap().forget();
                                "released".to_string()
                            }
                            "big" => "a".repeat(BIG_OUTPUT),
                            _ => call.arguments,
                        };
                        ExecutorResponse::Outcome(ToolOutcome {
                            success: true,
                            output,
                            tool: call.tool,
                            attachments: Vec::new(),
                            read_from: Default::default(),
                        })
                    }
                    ExecutorRequest::ReadScreen { .. } => ExecutorResponse::Outcome(ToolOutcome {
                        tool: "android.screenshot".into(),
                        success: false,
                        output: "no screen".into(),
                        attachments: Vec::new(),
                        read_from: Default::default(),
                    }),
                    ExecutorRequest::Inspect => ExecutorResponse::Inspect {
                        json: r#"{"os":{"name":"caps"}}"#.into(),
                    },
                    ExecutorRequest::Catalog => ExecutorResponse::Catalog(Vec::new()),
                    ExecutorRequest::Cancel { .. } => ExecutorResponse::Cancelled { found: false },
                    ExecutorRequest::Progress { .. } => ExecutorResponse::Progress(None),
                })
            }
        }));
        let (executor, _end) = ExecutorClient::start(ours).await.unwrap();
        let (stop, _serving) =
            common::harness::serve_with_limits(listener, TOKEN, limits, executor).await;
        Self {
            addr,
            executor: state,
            _stop: stop,
        }
    }

    async fn mcp(&self, body: &Value) -> common::Reply {
        tokio::time::timeout(PROMPT, common::mcp_post(self.addr, TOKEN, body))
            .await
            .unwrap_or_else(|_| panic!("no prompt answer to {body}"))
    }

    /// An authorized request head for a body of `len` bytes, keep-alive.
    fn head(&self, path: &str, len: usize) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nA2A-Version: 1.0\r\nContent-Length: {len}\r\n\r\n",
            self.addr
        )
    }
}

fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

fn invoke(id: u64, tool: &str) -> Value {
    tool_call(id, "nl2sh_invoke", json!({"tool": tool, "arguments": {}}))
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "caps-test", "version": "0"}}})
}

fn a2a(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
}

fn capped(max_tool_calls: usize) -> HttpLimits {
    HttpLimits {
        max_tool_calls,
        ..HttpLimits::default()
    }
}

/// The 503 of a call refused by the tool-call cap, for request `id`.
fn assert_busy(r: &common::Reply, id: u64, cap: usize) {
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let reply = r.json();
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply["id"], id, "{reply}");
    assert_eq!(reply["error"]["code"], BUSY_CODE, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("nl2sh is busy: {cap} tool calls are running")),
        "{message}"
    );
    assert_eq!(
        reply["error"]["data"]["reason"], "TOOL_CALL_LIMIT",
        "{reply}"
    );
    assert_eq!(reply["error"]["data"]["limit"], cap, "{reply}");
}

#[tokio::test]
async fn calls_over_the_cap_are_refused_promptly_and_cheap_requests_still_answer() {
    const CAP: usize = 2;
    let s = Server::start(capped(CAP)).await;
    let addr = s.addr;
    let held: Vec<_> = (0..CAP as u64)
        .map(|i| {
            tokio::spawn(
                async move { common::mcp_post(addr, TOKEN, &invoke(10 + i, "hold")).await },
            )
        })
        .collect();
    s.executor.wait_started(CAP).await;

    // One more of each counted tool: refused at once.
    let r = s.mcp(&invoke(42, "hold")).await;
    assert_busy(&r, 42, CAP);
    let r = s.mcp(&tool_call(43, "nl2sh_read_screen", json!({}))).await;
    assert_busy(&r, 43, CAP);
    assert_eq!(s.executor.started.load(Ordering::SeqCst), CAP);

    // Everything cheap still answers.
    let r = s.mcp(&initialize()).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
    let r = s
        .mcp(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert!(r.status < 300, "{r:?}");
    let r = s
        .mcp(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["result"]["tools"].as_array().unwrap().len() >= 7);
    for (name, arguments) in [
        ("nl2sh_inspect", json!({})),
        ("nl2sh_tools", json!({})),
        ("nl2sh_get_task", json!({"task_id": "no-such-task"})),
    ] {
        let r = s.mcp(&tool_call(3, name, arguments)).await;
        assert_eq!(r.status, 200, "{name}: {r:?}");
        assert!(r.json()["result"].is_object(), "{name}: {r:?}");
    }
    let host = addr.to_string();
    let auth = format!("Bearer {TOKEN}");
    let a2a_headers = [
        ("Host", host.as_str()),
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("A2A-Version", "1.0"),
    ];
    for (method, params, expect_error) in [
        ("ListTasks", json!({}), None),
        ("GetTask", json!({"id": "no-such-task"}), Some(-32001)),
        ("CancelTask", json!({"id": "no-such-task"}), Some(-32001)),
    ] {
        let body = a2a(method, params).to_string();
        let r = tokio::time::timeout(
            PROMPT,
            common::send(addr, "POST", "/a2a", &a2a_headers, body.as_bytes()),
        )
        .await
        .expect("no prompt A2A answer");
        assert_eq!(r.status, 200, "{method}: {r:?}");
        assert_eq!(r.json()["error"]["code"].as_i64(), expect_error, "{r:?}");
    }
    let r = tokio::time::timeout(
        PROMPT,
        common::send(
            addr,
            "GET",
            "/.well-known/agent-card.json",
            &[("Host", &host)],
            b"",
        ),
    )
    .await
    .expect("no prompt Agent Card");
    assert_eq!(r.status, 200, "{r:?}");

    // The held calls finish normally, and their slots are free again.
    s.executor.release.add_permits(CAP);
    for call in held {
        let r = tokio::time::timeout(PROMPT, call).await.unwrap().unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
    }
    s.executor.release.add_permits(1);
    let r = s.mcp(&invoke(44, "hold")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["result"]["structuredContent"]["output"],
        "released"
    );
}

#[tokio::test]
async fn a_call_keeps_its_slot_after_its_client_left() {
    let s = Server::start(capped(1)).await;
    let addr = s.addr;
    let gone = tokio::spawn(async move { common::mcp_post(addr, TOKEN, &invoke(1, "hold")).await });
    s.executor.wait_started(1).await;
    // The client goes away; the call goes on in the executor, and still counts.
    gone.abort();
    let _ = gone.await;
    let r = s.mcp(&invoke(2, "hold")).await;
    assert_busy(&r, 2, 1);
    // When it ends, its slot is free.
    s.executor.release.add_permits(2);
    let deadline = Instant::now() + PROMPT;
    loop {
        let r = s.mcp(&invoke(3, "hold")).await;
        if r.status == 200 {
            assert_eq!(r.json()["result"]["isError"], false, "{r:?}");
            break;
        }
        assert_busy(&r, 3, 1);
        assert!(Instant::now() < deadline, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_full_connection_table_answers_a_newcomer_503() {
    const CONNECTIONS: usize = 8;
    let s = Server::start(HttpLimits {
        max_connections: CONNECTIONS,
        reserved_for_authorized: 2,
        // The stalled bodies below must stay in flight for the whole test.
        body_read: Duration::from_secs(60),
        ..HttpLimits::default()
    })
    .await;
    // Every slot busy: authorized requests whose body never comes.
    let mut stalled = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(s.addr).await.unwrap();
        stream
            .write_all(s.head("/mcp", 100).as_bytes())
            .await
            .unwrap();
        stalled.push(stream);
    }
    // Let netd read those heads (nothing to observe from outside until the body timeout).
    tokio::time::sleep(Duration::from_millis(300)).await;

    for _ in 0..3 {
        let r = s.mcp(&initialize()).await;
        assert_eq!(r.status, 503, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
        assert_eq!(r.header("connection"), Some("close"), "{r:?}");
        let error = r.json()["error"].as_str().unwrap().to_string();
        assert!(
            error.contains(&format!("all {CONNECTIONS} connections are in use")),
            "{error}"
        );
    }
    // The busy connections were left alone.
    for (i, stream) in stalled.iter_mut().enumerate() {
        let mut probe = [0u8; 64];
        match tokio::time::timeout(Duration::from_millis(50), stream.read(&mut probe)).await {
            Err(_) => {}
            Ok(other) => panic!("stalled connection {i} was disturbed: {other:?}"),
        }
    }
    // Room again once they close.
    drop(stalled);
    let deadline = Instant::now() + PROMPT;
    loop {
        let r = s.mcp(&initialize()).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{r:?}");
        assert!(Instant::now() < deadline, "no room after the table emptied");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_write_stall_timeout() {
    let write_stall = Duration::from_secs(1);
    let s = Server::start(HttpLimits {
        write_stall,
        ..HttpLimits::default()
    })
    .await;
    // A small receive window, so netd's writes fill it and the socket buffers quickly.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(s.addr).await.unwrap();
    let body = invoke(1, "big").to_string();
    stream
        .write_all(s.head("/mcp", body.len()).as_bytes())
        .await
        .unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    // Read nothing for well past the stall timeout.
    tokio::time::sleep(write_stall + Duration::from_secs(3)).await;

    // Then everything there is: what was buffered before netd gave up, then the end.
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection is still open");
    let head_end = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("part of the response was sent");
    let head = String::from_utf8_lossy(&received[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    assert!(length > 2 * BIG_OUTPUT, "{length}");
    let got = received.len() - head_end - 4;
    assert!(
        got < length,
        "the whole response ({length} bytes) arrived: the connection was not cut"
    );
}

#[tokio::test]
async fn no_request_is_read_after_the_lifetime_but_one_in_flight_finishes() {
    let lifetime = Duration::from_secs(1);
    let s = Server::start(HttpLimits {
        lifetime,
        // Only the lifetime may close these connections.
        idle: Duration::from_secs(60),
        ..HttpLimits::default()
    })
    .await;

    // A call in flight when the lifetime ends is answered, then the connection closes.
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let body = invoke(1, "hold").to_string();
    stream
        .write_all(s.head("/mcp", body.len()).as_bytes())
        .await
        .unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    s.executor.wait_started(1).await;
    tokio::time::sleep(lifetime + Duration::from_millis(500)).await;
    s.executor.release.add_permits(1);
    let mut raw = Vec::new();
    tokio::time::timeout(PROMPT, stream.read_to_end(&mut raw))
        .await
        .expect("the connection stayed open after its lifetime")
        .unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("released"), "{text}");

    // A kept-alive connection idle past its lifetime is closed without a new request.
    // Timed from before the connection exists, so the lifetime (which starts at accept)
    // has fully passed when it closes: no slack needed.
    let start = Instant::now();
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(PROMPT, stream.read(&mut buf))
        .await
        .expect("an idle connection outlived its lifetime");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    assert!(start.elapsed() >= lifetime, "closed before its lifetime");
}
