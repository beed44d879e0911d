//! netd's real HTTP front door (`serve_http` on 127.0.0.1) with the task service wired
//! to approvald's real task store (behind a test proxy) and a scripted runner, and a fake
//! executor that answers anything.

use std::net::SocketAddr;
use std::sync::Arc;

use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::tasks::{Runner, TaskService};
use nl2sh_netd::{serve_http, Backends};
use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse, HttpSettings, ToolOutcome};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdExecutor};
use nl2sh_proto::Secret;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::runner::Script;
use super::store::StoreProxy;
use super::{send, Reply};

pub const TOKEN: &str = "nl2sh-task-test-token-0123456789abcdefghijklmnop";
pub const ORIGIN: &str = "http://phone.test:8765";

/// netd's HTTP front door on `listener` with `limits`, `executor`, a fresh store and
/// bearer `token`, its origin the listener's own address. Sending on (or dropping) the
/// returned sender stops it; the handle ends with how it stopped.
pub async fn serve_with_limits(
    listener: TcpListener,
    token: &str,
    limits: nl2sh_netd::HttpLimits,
    executor: ExecutorClient,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let addr = listener.local_addr().unwrap();
    let settings = HttpSettings {
        token: Secret::new(token.into()),
        advertised_origin: format!("http://{addr}"),
        local_authorities: vec![addr.to_string()],
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let backends = backends(executor).await;
    let task = tokio::spawn(nl2sh_netd::serve_http_with(
        listener,
        settings,
        limits,
        backends,
        async move {
            let _ = stopped.await;
        },
    ));
    (stop, task)
}

/// An executor that answers every request plausibly (the scripted runner never asks it;
/// the direct MCP tools may).
pub async fn fake_executor() -> ExecutorClient {
    let (ours, theirs) = pair::<NetdExecutor>().unwrap();
    tokio::spawn(rpc::serve(theirs, |req: ExecutorRequest| async move {
        Ok(match req {
            ExecutorRequest::Inspect => ExecutorResponse::Inspect {
                json: r#"{"os":{"name":"test"}}"#.into(),
            },
            ExecutorRequest::Catalog => ExecutorResponse::Catalog(Vec::new()),
            ExecutorRequest::Invoke(call) => ExecutorResponse::Outcome(ToolOutcome {
                success: true,
                output: call.arguments,
                tool: call.tool,
                attachments: Vec::new(),
                read_from: Default::default(),
            }),
            ExecutorRequest::ReadScreen { .. } => ExecutorResponse::Outcome(ToolOutcome {
                tool: "android.screenshot".into(),
                success: false,
                output: "no screen".into(),
                attachments: Vec::new(),
                read_from: Default::default(),
            }),
            ExecutorRequest::Cancel { .. } => ExecutorResponse::Cancelled { found: false },
            ExecutorRequest::Progress { .. } => ExecutorResponse::Progress(None),
        })
    }));
    ExecutorClient::start(ours).await.unwrap().0
}

/// A task service over a fresh store (reporting documents with the test token) and
/// `runner`.
pub async fn task_service(runner: Arc<dyn Runner>) -> (TaskService, StoreProxy) {
    let store = StoreProxy::new(&[TOKEN]);
    let tasks = TaskService::new(store.client().await, runner);
    (tasks, store)
}

/// The routes' backends for tests of the direct tools: `executor`, and tasks that fail
/// at once (no Agent).
pub async fn backends(executor: ExecutorClient) -> Backends {
    let runner = Arc::new(nl2sh_netd::tasks::Unavailable(
        "no Agent in this test".into(),
    ));
    let (tasks, _store) = task_service(runner).await;
    Backends { executor, tasks }
}

pub struct Harness {
    pub addr: SocketAddr,
    pub store: StoreProxy,
    pub script: Arc<Script>,
    pub tasks: TaskService,
    _stop: oneshot::Sender<()>,
}

impl Harness {
    pub async fn start() -> Self {
        let script = Script::new();
        let (tasks, store) = task_service(script.clone()).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = HttpSettings {
            token: Secret::new(TOKEN.into()),
            advertised_origin: ORIGIN.into(),
            local_authorities: vec![addr.to_string()],
        };
        let backends = Backends {
            executor: fake_executor().await,
            tasks: tasks.clone(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(serve_http(listener, settings, backends, async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            store,
            script,
            tasks,
            _stop: stop,
        }
    }

    /// A POST to `path` with the token and the listener's Host; `headers` are added (a
    /// header named there with an empty value is left out instead).
    pub async fn post(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Reply {
        let host = self.addr.to_string();
        let auth = format!("Bearer {TOKEN}");
        let mut all = vec![("Host", host.as_str()), ("Authorization", auth.as_str())];
        for (k, v) in headers {
            all.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            if !v.is_empty() {
                all.push((k, v));
            }
        }
        send(self.addr, "POST", path, &all, body).await
    }

    /// A well-formed A2A 1.0 request on `/a2a`; the JSON-RPC reply (HTTP 200 checked).
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let r = self
            .post(
                "/a2a",
                body.to_string().as_bytes(),
                &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let reply = r.json();
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["id"], 7, "{reply}");
        reply
    }

    /// The `result` of a request that must succeed.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let reply = self.rpc(method, params).await;
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// The `error` of a request that must fail with `code`.
    pub async fn err(&self, method: &str, params: Value, code: i64) -> Value {
        let reply = self.rpc(method, params).await;
        assert_eq!(reply["error"]["code"], code, "{method}: {reply}");
        assert!(reply.get("result").is_none(), "{reply}");
        reply["error"].clone()
    }

    /// SendMessage of one text part; the Task of the result.
    pub async fn send_text(&self, text: &str, context: Option<&str>, immediately: bool) -> Value {
        let mut message = json!({
            "role": "ROLE_USER",
            "messageId": format!("m-{text}"),
            "parts": [{"text": text}],
        });
        if let Some(c) = context {
            message["contextId"] = json!(c);
        }
        let result = self
            .ok(
                "SendMessage",
                json!({"message": message, "configuration": {"returnImmediately": immediately}}),
            )
            .await;
        result["task"].clone()
    }

    /// An MCP `tools/call` on `/mcp` (stateless HTTP); the JSON-RPC `result`.
    pub async fn mcp_tool(&self, name: &str, arguments: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}});
        let r = super::mcp_post(self.addr, TOKEN, &body).await;
        assert_eq!(r.status, 200, "{r:?}");
        let reply = r.json();
        assert!(reply.get("error").is_none(), "{reply}");
        reply["result"].clone()
    }
}
