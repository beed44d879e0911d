//! A scripted OpenAI-compatible Chat Completions server for tests: it answers
//! `POST /v1/chat/completions` with the next reply of its script and records every
//! request it received (path, `Authorization` header, body), so a test can say what the
//! model answers and check what the model was sent. It binds 127.0.0.1 on a free port and
//! runs on its own thread, so sync and async tests use it alike.
//!
//! ```no_run
//! use nl2sh_tests::scripted_model::{Reply, ScriptedModel, ToolCall};
//! let model = ScriptedModel::start([
//!     Reply::tool_calls([ToolCall::new("call_1", "fs__stat", serde_json::json!({"path": "/"}))]),
//!     Reply::answer("/ is a directory"),
//! ]);
//! // … point the Agent at model.base_url() …
//! let sent = model.requests();
//! assert_eq!(sent[1].tool_results()[0]["tool_call_id"], "call_1");
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// One tool call in a scripted reply.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
    /// The function name the model uses (`fs__stat`, not `fs.stat`).
    pub name: String,
    /// The arguments JSON text exactly as the model sends it (may be invalid on purpose).
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: &str, name: &str, arguments: Value) -> Self {
        Self::raw(id, name, &arguments.to_string())
    }

    /// A call whose arguments text is sent as given, JSON or not.
    pub fn raw(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// What the model does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A final answer: an assistant message with this text and no tool calls.
    Answer(String),
    /// An assistant message asking for these tool calls (no text).
    ToolCalls(Vec<ToolCall>),
    /// This HTTP status with this body.
    Status(u16, String),
    /// 200 with this body as is (malformed responses).
    Raw(String),
    /// Wait, then reply.
    Delay(Duration, Box<Reply>),
    /// Never answer (until the server is dropped).
    Hang,
}

impl Reply {
    pub fn answer(text: &str) -> Self {
        Reply::Answer(text.into())
    }
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Reply::ToolCalls(calls.into_iter().collect())
    }
    pub fn delayed(by: Duration, then: Reply) -> Self {
        Reply::Delay(by, Box::new(then))
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    /// The body as JSON (`Null` if it was not JSON, or when bodies are not kept: see
    /// [`ScriptedModel::keep_bodies`]).
    pub body: Value,
    /// The body's length in bytes, as received.
    pub body_bytes: usize,
}

impl Request {
    /// `messages` of the body.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The `tool` messages of the body, in order.
    pub fn tool_results(&self) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .collect()
    }

    /// The function names offered in `tools`.
    pub fn offered_functions(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Shared {
    /// Bodies are not kept (only their sizes) when set.
    sizes_only: std::sync::atomic::AtomicBool,
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    arrived: Condvar,
}

/// The running server; dropping it stops it (hanging requests are then dropped too).
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedModel {
    /// Start a server that answers with `replies`, in order. More can be pushed later.
    pub fn start(replies: impl IntoIterator<Item = Reply>) -> Self {
        let shared = Arc::new(Shared::default());
        shared.script.lock().expect("script").extend(replies);
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind the scripted model");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("scripted model runtime");
            rt.block_on(serve(listener, state, stopped));
        });
        Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>/v1`: the `base_url` to configure.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A configuration (60 s approvals) whose `[model]` is this stand-in, its key in
    /// `key_env`, at most `max_steps` steps a task.
    pub fn config(&self, key_env: &str, max_steps: u32) -> String {
        format!(
            "approval_timeout_secs = 60\n\
             [model]\n\
             base_url = \"{}\"\n\
             model = \"scripted\"\n\
             api_key_env = \"{key_env}\"\n\
             max_steps = {max_steps}\n\
             request_timeout_secs = 120\n",
            self.base_url()
        )
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Add a reply at the end of the script.
    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().expect("script").push_back(reply);
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().expect("script").len()
    }

    /// Keep each request's body (the default) or only its size: a test that makes netd
    /// send large bodies keeps the sizes.
    pub fn keep_bodies(&self, keep: bool) {
        self.shared
            .sizes_only
            .store(!keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().expect("requests").clone()
    }

    /// Wait until at least `n` requests arrived (panics after `limit`).
    pub fn wait_requests(&self, n: usize, limit: Duration) -> Vec<Request> {
        let deadline = Instant::now() + limit;
        let mut requests = self.shared.requests.lock().expect("requests");
        while requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the scripted model got {} requests, not {n}, within {limit:?}",
                requests.len()
            );
            requests = self
                .shared
                .arrived
                .wait_timeout(requests, left)
                .expect("requests")
                .0;
        }
        requests.clone()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stopped: tokio::sync::watch::Receiver<bool>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    let handler_stop = stopped.clone();
    let app = axum::Router::new()
        .fallback(
            move |method: axum::http::Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let shared = shared.clone();
                let stopped = handler_stop.clone();
                async move { handle(shared, stopped, method, uri, headers, body).await }
            },
        )
        // A model takes what it is sent: the sizes are what some tests measure.
        .layer(axum::extract::DefaultBodyLimit::disable());
    let mut until = stopped;
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = until.wait_for(|s| *s).await;
        })
        .await;
}

async fn handle(
    shared: Arc<Shared>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body_bytes = body.len();
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    drop(body);
    let model = parsed["model"].as_str().unwrap_or("scripted").to_string();
    let body = if shared.sizes_only.load(std::sync::atomic::Ordering::Relaxed) {
        Value::Null
    } else {
        parsed
    };
    {
        let mut requests = shared.requests.lock().expect("requests");
        requests.push(Request {
            method: method.to_string(),
            path: uri.path().to_string(),
            authorization: headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body,
            body_bytes,
        });
        shared.arrived.notify_all();
    }
    if method != axum::http::Method::POST || uri.path() != "/v1/chat/completions" {
        return error(StatusCode::NOT_FOUND, "scripted model: no such endpoint");
    }
    let next = shared.script.lock().expect("script").pop_front();
    let Some(mut reply) = next else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted model: no reply left in the script",
        );
    };
    loop {
        match reply {
            Reply::Delay(by, then) => {
                tokio::select! {
                    _ = tokio::time::sleep(by) => {}
                    _ = stopped.wait_for(|s| *s) => return error(StatusCode::SERVICE_UNAVAILABLE, "stopping"),
                }
                reply = *then;
            }
            Reply::Hang => {
                let _ = stopped.wait_for(|s| *s).await;
                return error(StatusCode::SERVICE_UNAVAILABLE, "stopping");
            }
            Reply::Answer(text) => {
                return completion(
                    &model,
                    json!({"role": "assistant", "content": text}),
                    "stop",
                )
            }
            Reply::ToolCalls(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })
                    })
                    .collect();
                let message = json!({"role": "assistant", "content": null, "tool_calls": calls});
                return completion(&model, message, "tool_calls");
            }
            Reply::Status(status, body) => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return (status, [("content-type", "application/json")], body).into_response();
            }
            Reply::Raw(body) => {
                return (StatusCode::OK, [("content-type", "application/json")], body)
                    .into_response()
            }
        }
    }
}

fn completion(model: &str, message: Value, finish: &str) -> Response {
    let body = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    });
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "scripted"}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}
