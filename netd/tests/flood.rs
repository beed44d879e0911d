//! Slow and flooding clients against the HTTP front door, in-process on 127.0.0.1 with
//! short limits (`serve_http_with`): idle floods over the connection cap, slow heads,
//! slow bodies, keep-alive, and a drain with idle connections open. Every bound waited
//! on is generous: these are behavioural checks, not speed tests.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod common;

use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::HttpLimits;
use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse, ToolOutcome};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdExecutor};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TOKEN: &str = "nl2sh-test-token-0123456789abcdefghijklmnop";
/// The cap used here; floods open several times as many connections.
const CAP: usize = 32;
/// How long the `slow.tool` fake takes to answer.
const SLOW_TOOL: Duration = Duration::from_millis(1500);
/// Slack on every timing bound (loaded CI machines).
const MARGIN: Duration = Duration::from_secs(3);

fn limits() -> HttpLimits {
    HttpLimits {
        header_read: Duration::from_secs(2),
        body_read: Duration::from_secs(1),
        idle: Duration::from_secs(1),
        max_connections: CAP,
        reserved_for_authorized: 4,
        ..HttpLimits::default()
    }
}

struct Server {
    addr: SocketAddr,
    limits: HttpLimits,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(limits: HttpLimits) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = pair::<NetdExecutor>().unwrap();
        tokio::spawn(rpc::serve(theirs, |req: ExecutorRequest| async move {
            Ok(match req {
                ExecutorRequest::Invoke(call) => {
                    if call.tool == "slow.tool" {
                        tokio::time::sleep(SLOW_TOOL).await;
                    }
                    ExecutorResponse::Outcome(ToolOutcome {
                        success: true,
                        output: call.arguments,
                        tool: call.tool,
                        attachments: Vec::new(),
                        read_from: Default::default(),
                    })
                }
                ExecutorRequest::Inspect => ExecutorResponse::Inspect {
                    json: r#"{"os":{"name":"flood"}}"#.into(),
                },
                _ => ExecutorResponse::Cancelled { found: false },
            })
        }));
        let (executor, _end) = ExecutorClient::start(ours).await.unwrap();
        let (stop, task) =
            common::harness::serve_with_limits(listener, TOKEN, limits, executor).await;
        Self {
            addr,
            limits,
            stop: Some(stop),
            task,
        }
    }

    /// An authorized MCP POST on a fresh connection (`Connection: close`).
    async fn mcp(&self, body: &Value) -> common::Reply {
        common::mcp_post(self.addr, TOKEN, body).await
    }

    /// An authorized request head for a body of `len` bytes, keep-alive.
    fn head(&self, len: usize) -> String {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {len}\r\n\r\n",
            self.addr
        )
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood-test", "version": "0"}}})
}

fn invoke(tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "nl2sh_invoke", "arguments": {"tool": tool, "arguments": {"n": 1}}}})
}

/// `n` connections that connect and then say nothing.
async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(TcpStream::connect(addr).await.unwrap());
    }
    out
}

/// Wait until `stream` is closed by the server (EOF or reset); the time it took, or
/// `None` if it stayed open for `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    let outcome = tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    outcome.ok().map(|()| start.elapsed())
}

/// Read one response with a Content-Length body from a kept-alive connection.
async fn read_one_response(stream: &mut TcpStream) -> (u16, Value) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .expect("a Content-Length");
                if raw.len() >= end + 4 + len {
                    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                    let body = serde_json::from_slice(&raw[end + 4..end + 4 + len]).unwrap();
                    return (status, body);
                }
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a full response");
            raw.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    read.expect("no response in time")
}

#[tokio::test]
async fn an_idle_flood_over_the_cap_leaves_authorized_requests_answering() {
    let s = Server::start(limits()).await;
    let mut flood = idle_connections(s.addr, 3 * CAP).await;

    let start = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), s.mcp(&initialize()))
        .await
        .expect("initialize did not answer within 5 s under an idle flood");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
    eprintln!(
        "initialize answered in {:?} under the flood",
        start.elapsed()
    );

    // Every flooding connection is closed: the oldest at once (for room), the rest when
    // idle.
    let limit = s.limits.idle + MARGIN;
    for (i, stream) in flood.iter_mut().enumerate() {
        assert!(
            closed_within(stream, limit).await.is_some(),
            "flood connection {i} still open after {limit:?}"
        );
    }
}

#[tokio::test]
async fn a_request_in_flight_survives_a_flood() {
    let s = Server::start(limits()).await;
    let addr = s.addr;
    let call =
        tokio::spawn(async move { common::mcp_post(addr, TOKEN, &invoke("slow.tool")).await });
    // Let the call reach the executor, then flood well past the cap.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _flood = idle_connections(s.addr, 4 * CAP).await;
    let r = s.mcp(&initialize()).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = tokio::time::timeout(SLOW_TOOL + MARGIN, call)
        .await
        .expect("the call in flight did not finish")
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let result = &r.json()["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["tool"], "slow.tool", "{result}");
}

#[tokio::test]
async fn a_slow_head_is_cut_at_the_header_timeout() {
    // Idle longer than the header timeout, so only the header timer can close it.
    let limits = HttpLimits {
        idle: Duration::from_secs(30),
        ..limits()
    };
    let s = Server::start(limits).await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
    let start = Instant::now();
    // One byte every 200 ms: never idle, never a complete head.
    let trickle = async {
        for b in b"X-Slow: ".iter().cycle() {
            if stream.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut probe = [0u8; 256];
            match tokio::time::timeout(Duration::from_millis(1), stream.read(&mut probe)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                _ => {}
            }
        }
    };
    let cut = tokio::time::timeout(limits.header_read + MARGIN, trickle).await;
    assert!(
        cut.is_ok(),
        "a trickled head was not cut within {:?}",
        limits.header_read + MARGIN
    );
    let took = start.elapsed();
    assert!(
        took >= limits.header_read - Duration::from_millis(300),
        "cut after {took:?}, before the header timeout"
    );
}

#[tokio::test]
async fn a_silent_connection_is_closed_when_idle() {
    let s = Server::start(limits()).await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let took = closed_within(&mut stream, s.limits.idle + MARGIN)
        .await
        .expect("a silent connection stayed open");
    assert!(
        took >= s.limits.idle - Duration::from_millis(300),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_slow_authorized_body_is_408() {
    let s = Server::start(limits()).await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream.write_all(s.head(100).as_bytes()).await.unwrap();
    stream.write_all(b"{\"jsonrpc\"").await.unwrap();
    let (status, body) =
        tokio::time::timeout(s.limits.body_read + MARGIN, read_one_response(&mut stream))
            .await
            .expect("no answer to a stalled body");
    assert_eq!(status, 408, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("in time"),
        "{body}"
    );
}

#[tokio::test]
async fn a_kept_alive_connection_serves_again_then_closes_when_idle() {
    let s = Server::start(limits()).await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    for _ in 0..2 {
        let body = initialize().to_string();
        stream
            .write_all(s.head(body.len()).as_bytes())
            .await
            .unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        let (status, reply) = read_one_response(&mut stream).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
        // Well within the idle timeout.
        tokio::time::sleep(s.limits.idle / 4).await;
    }
    assert!(
        closed_within(&mut stream, s.limits.idle + MARGIN)
            .await
            .is_some(),
        "an idle kept-alive connection stayed open"
    );
}

#[tokio::test]
async fn a_drain_does_not_wait_for_idle_connections() {
    // Idle longer than the test's bound: only the drain can close these.
    let limits = HttpLimits {
        idle: Duration::from_secs(60),
        header_read: Duration::from_secs(60),
        ..limits()
    };
    let mut s = Server::start(limits).await;
    let _idle = idle_connections(s.addr, 8).await;
    let r = s.mcp(&initialize()).await;
    assert_eq!(r.status, 200, "{r:?}");
    let _ = s.stop.take().unwrap().send(());
    let ended = tokio::time::timeout(Duration::from_secs(5), &mut s.task)
        .await
        .expect("the drain waited for idle connections");
    ended.unwrap().unwrap();
    // Nothing listens any more.
    assert!(TcpStream::connect(s.addr).await.is_err());
}
