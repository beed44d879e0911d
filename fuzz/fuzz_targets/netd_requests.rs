//! netd's HTTP request handling up to the MCP layer: arbitrary requests (method, target,
//! Host/Origin/Authorization/Content-Type/Accept/MCP headers, body) through netd's real
//! axum router (`tower::ServiceExt::oneshot`, no TCP), with a fake executor on the other
//! end of a real `NetdExecutor` channel answering plausible, input-chosen responses.
//!
//! Inputs are read with `arbitrary::Unstructured`, and every choice's first option is the
//! well-formed one (an exhausted input picks it), so most inputs are an authorized
//! `POST /mcp` with a JSON-RPC body and reach rmcp and the tools; some are A2A requests
//! on `/a2a` (served by the task service over a fake store, tasks failing at once).
//!
//! Properties: nothing panics; every response has a status and a body that ends; a
//! request without the right bearer token never reaches the executor (the fake counts its
//! calls) and is refused with 400/401/413 (401 with `WWW-Authenticate: Bearer`); the
//! public Agent Card answers 200/304/403/405 without reaching the executor; any other
//! path but `/mcp`, `/a2a`, `/a2a/` is 404 without reaching the executor.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use arbitrary::Unstructured;
use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use axum::Router;
use libfuzzer_sys::fuzz_target;
use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::store::StoreClient;
use nl2sh_netd::tasks::{TaskService, Unavailable};
use nl2sh_proto::channels::{
    Attachment, ContextId, ExecutorRequest, ExecutorResponse, HttpSettings, StoreRequest,
    StoreResponse, TaskId, TaskPage, ToolOutcome, ToolSpec,
};
use nl2sh_proto::rpc::{self, ChannelEnd};
use nl2sh_proto::topology::{pair, NetdApprovald, NetdExecutor};
use nl2sh_proto::Secret;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

const TOKEN: &str = "nl2sh-fuzz-token-0123456789abcdefghijklmnop";
const ADVERTISED_ORIGIN: &str = "http://phone.test:8765";
const AGENT_CARD: &str = "/.well-known/agent-card.json";
const ADVERTISED_AUTHORITY: &str = "phone.test:8765";
const LOCAL_AUTHORITY: &str = "127.0.0.1:8765";
const TOOLS: [&str; 4] = [
    "nl2sh_invoke",
    "nl2sh_inspect",
    "nl2sh_tools",
    "nl2sh_read_screen",
];
/// How long a response body may take to end (real time; the fake answers at once).
const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// Requests the fake executor has answered, over the whole process.
static EXECUTOR_CALLS: AtomicU64 = AtomicU64::new(0);
/// What the fake answers, chosen by the current input.
static ANSWERS: Mutex<Option<Answers>> = Mutex::new(None);

/// The fake executor's answers for one input. Always the right kind for the request: a
/// wrong kind closes the channel (by design), which would end every later input's reach.
#[derive(Clone, Default)]
struct Answers {
    inspect: String,
    catalog: Vec<ToolSpec>,
    success: bool,
    output: Option<String>,
    attachments: Vec<Attachment>,
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: Router,
    channel: ChannelEnd,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (router, channel) = runtime.block_on(async {
            let (ours, theirs) = pair::<NetdExecutor>().expect("socketpair");
            tokio::spawn(rpc::serve(theirs, |req: ExecutorRequest| async move {
                EXECUTOR_CALLS.fetch_add(1, Ordering::SeqCst);
                Ok(answer(req))
            }));
            let (executor, channel) = ExecutorClient::start(ours).await.expect("handshake");
            let (ours, theirs) = pair::<NetdApprovald>().expect("socketpair");
            tokio::spawn(rpc::serve(theirs, |req: StoreRequest| async move {
                Ok(store_answer(req))
            }));
            let (store, _) = StoreClient::start(ours).await.expect("handshake");
            let runner = std::sync::Arc::new(Unavailable("no Agent while fuzzing".into()));
            let backends = nl2sh_netd::Backends {
                executor,
                tasks: TaskService::new(store, runner),
            };
            let settings = HttpSettings {
                token: Secret::new(TOKEN.into()),
                advertised_origin: ADVERTISED_ORIGIN.into(),
                local_authorities: vec![LOCAL_AUTHORITY.into()],
            };
            let router = nl2sh_netd::http::router_for(&settings, backends).expect("settings");
            (router, channel)
        });
        Harness {
            runtime,
            router,
            channel,
        }
    })
}

fn answer(req: ExecutorRequest) -> ExecutorResponse {
    let a = ANSWERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default();
    match req {
        ExecutorRequest::Inspect => ExecutorResponse::Inspect { json: a.inspect },
        ExecutorRequest::Catalog => ExecutorResponse::Catalog(a.catalog),
        ExecutorRequest::Invoke(call) => ExecutorResponse::Outcome(ToolOutcome {
            success: a.success,
            output: a.output.unwrap_or(call.arguments),
            tool: call.tool,
            attachments: a.attachments,
        }),
        ExecutorRequest::ReadScreen { .. } => ExecutorResponse::Outcome(ToolOutcome {
            tool: "android.screenshot".into(),
            success: a.success,
            output: a.output.unwrap_or_else(|| "{}".into()),
            attachments: a.attachments,
        }),
        ExecutorRequest::Cancel { .. } => ExecutorResponse::Cancelled { found: a.success },
        ExecutorRequest::Progress { .. } => ExecutorResponse::Progress(None),
    }
}

/// A store that keeps nothing: tasks are stored and never found again.
fn store_answer(req: StoreRequest) -> StoreResponse {
    match req {
        StoreRequest::Ping => StoreResponse::Pong,
        // Unique ids, as approvald mints them: netd keys its active tasks by id.
        StoreRequest::CreateTask { context_id } => {
            static CREATED: AtomicU64 = AtomicU64::new(0);
            let n = CREATED.fetch_add(1, Ordering::Relaxed);
            StoreResponse::Created {
                id: TaskId(format!("fuzz-task-{n}")),
                context_id: context_id.unwrap_or_else(|| ContextId(format!("fuzz-context-{n}"))),
            }
        }
        StoreRequest::PutTask(_) | StoreRequest::SaveSession { .. } => StoreResponse::Stored,
        StoreRequest::GetTask { .. } => StoreResponse::Task(None),
        StoreRequest::ListTasks(_) => StoreResponse::Tasks(TaskPage {
            tasks: Vec::new(),
            total_size: 0,
            next_page_token: String::new(),
        }),
        StoreRequest::LoadSession { .. } => StoreResponse::Session(None),
        // The routes never ask for the owner's work (only netd's worker loop does).
        StoreRequest::NextOwnerWork => StoreResponse::Failed {
            kind: nl2sh_proto::channels::StoreErrorKind::Invalid,
            message: "no owner here".into(),
        },
    }
}

// ---- reading the input ------------------------------------------------------------------

/// An index below `n`; 0 (the well-formed choice) once the input is exhausted.
fn pick(u: &mut Unstructured, n: usize) -> usize {
    u.choose_index(n).unwrap_or(0)
}

fn flag(u: &mut Unstructured) -> bool {
    u.arbitrary().unwrap_or(false)
}

fn text(u: &mut Unstructured) -> String {
    u.arbitrary().unwrap_or_default()
}

fn raw<'a>(u: &mut Unstructured<'a>) -> &'a [u8] {
    u.arbitrary().unwrap_or_default()
}

fn number(u: &mut Unstructured) -> Value {
    match pick(u, 5) {
        0 => json!(u.arbitrary::<u8>().unwrap_or(1)),
        1 => json!(u.arbitrary::<i64>().unwrap_or(0)),
        2 => json!(u.arbitrary::<u64>().unwrap_or(u64::MAX)),
        3 => serde_json::Number::from_f64(u.arbitrary().unwrap_or(0.5))
            .map_or(Value::Null, Value::Number),
        _ => json!(-1),
    }
}

/// An arbitrary JSON value, nested at most `depth` deep.
fn value(u: &mut Unstructured, depth: u32) -> Value {
    match pick(u, 7) {
        0 if depth > 0 => Value::Object(object(u, depth - 1)),
        1 => Value::String(text(u)),
        2 => number(u),
        3 => Value::Bool(flag(u)),
        4 => Value::Null,
        5 if depth > 0 => {
            let n = pick(u, 5);
            Value::Array((0..n).map(|_| value(u, depth - 1)).collect())
        }
        _ => Value::String(text(u)),
    }
}

fn object(u: &mut Unstructured, depth: u32) -> Map<String, Value> {
    let n = pick(u, 5);
    (0..n).map(|_| (text(u), value(u, depth))).collect()
}

fn tool_name(u: &mut Unstructured) -> String {
    match pick(u, 8) {
        i @ 0..=3 => TOOLS[i].into(),
        4 => "nl2sh_nothing".into(),
        5 => "n".repeat(128 + pick(u, 3)),
        6 => String::new(),
        _ => text(u),
    }
}

/// The `arguments` of a tools/call of `tool`.
fn tool_arguments(u: &mut Unstructured, tool: &str) -> Option<Value> {
    match pick(u, 6) {
        0 if tool == "nl2sh_invoke" => {
            let inner = match pick(u, 4) {
                0 => Value::Object(object(u, 3)),
                1 => Value::Null,
                2 => json!({"command": "x".repeat(16 * 1024 + pick(u, 64))}),
                _ => value(u, 3),
            };
            let device_tool = match pick(u, 5) {
                0 => json!("shell.exec"),
                1 => json!("fail.me"),
                2 => json!("t".repeat(128 + pick(u, 2))),
                3 => json!(""),
                _ => value(u, 1),
            };
            let mut args = json!({"tool": device_tool, "arguments": inner});
            if flag(u) {
                args[text(u)] = value(u, 1);
            }
            Some(args)
        }
        0 | 1 => None,
        2 => Some(json!({})),
        3 => Some(Value::Object(object(u, 3))),
        _ => Some(value(u, 3)),
    }
}

fn protocol_version(u: &mut Unstructured) -> String {
    match pick(u, 7) {
        0 => "2025-11-25".into(),
        1 => "2025-06-18".into(),
        2 => "2024-11-05".into(),
        3 => "2025-03-26".into(),
        4 => "2026-07-28".into(),
        5 => "banana".into(),
        _ => text(u),
    }
}

fn request_id(u: &mut Unstructured) -> Value {
    match pick(u, 6) {
        0 => json!(u.arbitrary::<u16>().unwrap_or(1)),
        1 => Value::String(text(u)),
        2 => Value::Null,
        3 => number(u),
        4 => Value::Object(object(u, 1)),
        _ => json!(-7),
    }
}

/// The params of an A2A request (SendMessage's message and configuration, the task
/// methods' id and list filters), mostly well-formed.
fn a2a_params(u: &mut Unstructured) -> Value {
    let mut message = json!({
        "role": if flag(u) { json!("ROLE_AGENT") } else { json!("ROLE_USER") },
        "messageId": text(u),
        "parts": match pick(u, 4) {
            0 | 1 => json!([{"text": text(u)}]),
            2 => json!([{"data": value(u, 2)}, {"text": text(u)}]),
            _ => value(u, 2),
        },
    });
    if flag(u) {
        message["contextId"] = value(u, 0);
    }
    if flag(u) {
        message["taskId"] = value(u, 0);
    }
    let mut params = json!({ "message": message });
    if flag(u) {
        params["configuration"] = json!({
            "returnImmediately": flag(u),
            "historyLength": number(u),
            "acceptedOutputModes": value(u, 1),
        });
    }
    for key in [
        "id",
        "historyLength",
        "pageSize",
        "pageToken",
        "status",
        "contextId",
        "includeArtifacts",
        "statusTimestampAfter",
    ] {
        if flag(u) {
            params[key] = value(u, 1);
        }
    }
    params
}

/// One JSON-RPC message (or something shaped like one), and its method if it has one.
fn message(u: &mut Unstructured, depth: u32) -> (Value, Option<String>) {
    let (method, params, is_request) = match pick(u, 12) {
        0 => {
            let name = tool_name(u);
            let mut params = json!({ "name": name });
            if let Some(a) = tool_arguments(u, &name) {
                params["arguments"] = a;
            }
            ("tools/call".to_string(), Some(params), true)
        }
        1 => {
            let params = json!({
                "protocolVersion": protocol_version(u),
                "capabilities": if flag(u) { value(u, 2) } else { json!({}) },
                "clientInfo": {"name": text(u), "version": "0"}
            });
            ("initialize".into(), Some(params), true)
        }
        2 => {
            let params = flag(u).then(|| json!({"cursor": value(u, 1)}));
            ("tools/list".into(), params, true)
        }
        3 => ("ping".into(), None, true),
        4 => {
            let method = match pick(u, 4) {
                0 => "notifications/initialized".to_string(),
                1 => "notifications/cancelled".into(),
                2 => "notifications/progress".into(),
                _ => text(u),
            };
            let params = flag(u).then(
                || json!({"requestId": request_id(u), "reason": text(u), "progress": number(u)}),
            );
            (method, params, false)
        }
        5 => {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": protocol_version(u),
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"}
            });
            (
                "server/discover".into(),
                Some(json!({ "_meta": meta })),
                true,
            )
        }
        6 => {
            // A response or an error, which a stateless server never asked for.
            let mut m = json!({"jsonrpc": "2.0", "id": request_id(u)});
            if flag(u) {
                m["result"] = value(u, 2);
            } else {
                m["error"] = json!({"code": number(u), "message": text(u)});
            }
            return (m, None);
        }
        7 if depth > 0 => {
            let n = pick(u, 5);
            let batch = (0..n).map(|_| message(u, depth - 1).0).collect();
            return (Value::Array(batch), None);
        }
        8 => return (value(u, 4), None),
        9 => {
            let method = match pick(u, 4) {
                0 => "resources/list".to_string(),
                1 => "prompts/list".into(),
                2 => "logging/setLevel".into(),
                _ => text(u),
            };
            let params = flag(u).then(|| value(u, 3));
            (method, params, flag(u))
        }
        10 => {
            let method = match pick(u, 8) {
                0 => "SendMessage".to_string(),
                1 => "GetTask".into(),
                2 => "ListTasks".into(),
                3 => "CancelTask".into(),
                4 => "SendStreamingMessage".into(),
                5 => "CreateTaskPushNotificationConfig".into(),
                6 => "message/send".into(),
                _ => text(u),
            };
            (method, Some(a2a_params(u)), true)
        }
        _ => ("tools/list".into(), None, true),
    };
    let mut m = json!({"jsonrpc": "2.0", "method": method});
    if is_request {
        m["id"] = request_id(u);
    }
    if let Some(mut p) = params {
        if pick(u, 4) == 3 {
            if let Value::Object(o) = &mut p {
                o.insert(
                    "_meta".into(),
                    json!({"io.modelcontextprotocol/protocolVersion": protocol_version(u)}),
                );
            }
        }
        m["params"] = p;
    }
    match pick(u, 6) {
        1 => m["jsonrpc"] = json!("1.0"),
        2 => {
            m.as_object_mut().map(|o| o.remove("jsonrpc"));
        }
        3 => m[text(u)] = value(u, 1),
        _ => {}
    }
    (m, Some(method))
}

/// The body bytes, and the JSON-RPC method when the body is one well-formed message.
fn body(u: &mut Unstructured) -> (Vec<u8>, Option<String>) {
    match pick(u, 8) {
        6 => return (raw(u).to_vec(), None),
        7 => return (Vec::new(), None),
        _ => {}
    }
    let (m, method) = message(u, 2);
    let mut bytes = serde_json::to_vec(&m).expect("a Value serializes");
    match pick(u, 6) {
        1 => {
            let cut = pick(u, bytes.len().max(1));
            bytes.truncate(cut);
            return (bytes, None);
        }
        2 => bytes.extend_from_slice(raw(u)),
        3 => {
            // Around the 32 KiB body limit.
            let pad = 32 * 1024 - bytes.len().min(32 * 1024) + pick(u, 3);
            bytes.splice(1..1, std::iter::repeat_n(b' ', pad));
        }
        4 => {
            let i = pick(u, bytes.len().max(1));
            if let Some(b) = bytes.get_mut(i) {
                *b = u.arbitrary().unwrap_or(0);
            }
            return (bytes, None);
        }
        _ => {}
    }
    (bytes, method)
}

fn method(u: &mut Unstructured) -> Method {
    match pick(u, 10) {
        0..=3 => Method::POST,
        4 => Method::GET,
        5 => Method::DELETE,
        6 => Method::PUT,
        7 => Method::OPTIONS,
        8 => Method::HEAD,
        _ => Method::from_bytes(raw(u)).unwrap_or(Method::PATCH),
    }
}

fn target(u: &mut Unstructured) -> Uri {
    let t = match pick(u, 12) {
        0 | 1 => "/mcp".to_string(),
        2 => format!("/mcp?{}", pick(u, 100)),
        3 => format!("http://{ADVERTISED_AUTHORITY}/mcp"),
        4 => "http://evil.example/mcp".into(),
        5 => "/".into(),
        6 => "/mcp/".into(),
        7 => "/%6Dcp".into(),
        9 => "/a2a".into(),
        10 => "/a2a/".into(),
        11 => AGENT_CARD.into(),
        _ => text(u),
    };
    t.parse().unwrap_or_else(|_| Uri::from_static("/mcp"))
}

/// Append `value` under `name` if it is a valid header value.
fn put(headers: &mut axum::http::HeaderMap, name: HeaderName, value: &[u8]) {
    if let Ok(v) = HeaderValue::from_bytes(value) {
        headers.append(name, v);
    }
}

fn authorization(u: &mut Unstructured, headers: &mut axum::http::HeaderMap) {
    let good = format!("Bearer {TOKEN}");
    let value = match pick(u, 13) {
        0 | 1 => good.clone(),
        2 => format!("bearer {TOKEN}"),
        3 => format!("BEARER  \t{TOKEN} \t"),
        4 => return,
        5 => format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        6 => format!("Bearer {TOKEN}x"),
        7 => format!("Basic {TOKEN}"),
        8 => format!("Bearer{TOKEN}"),
        9 => {
            put(headers, header::AUTHORIZATION, good.as_bytes());
            good
        }
        10 => format!("Bearer {}", text(u)),
        11 => "Bearer ".into(),
        _ => {
            put(headers, header::AUTHORIZATION, raw(u));
            return;
        }
    };
    put(headers, header::AUTHORIZATION, value.as_bytes());
}

fn host(u: &mut Unstructured, headers: &mut axum::http::HeaderMap) {
    let value = match pick(u, 10) {
        0 | 1 => LOCAL_AUTHORITY.to_string(),
        2 => ADVERTISED_AUTHORITY.into(),
        3 => "PHONE.test:8765".into(),
        4 => "phone.test".into(),
        5 => "evil.example".into(),
        6 => return,
        7 => {
            put(headers, header::HOST, LOCAL_AUTHORITY.as_bytes());
            LOCAL_AUTHORITY.into()
        }
        8 => "user@127.0.0.1:8765".into(),
        _ => {
            put(headers, header::HOST, raw(u));
            return;
        }
    };
    put(headers, header::HOST, value.as_bytes());
}

fn headers(u: &mut Unstructured, body: &[u8], rpc_method: Option<&str>) -> axum::http::HeaderMap {
    let mut h = axum::http::HeaderMap::new();
    authorization(u, &mut h);
    host(u, &mut h);
    match pick(u, 8) {
        0..=2 => {}
        3 => put(&mut h, header::ORIGIN, ADVERTISED_ORIGIN.as_bytes()),
        4 => put(&mut h, header::ORIGIN, b"http://evil.example"),
        5 => put(&mut h, header::ORIGIN, b"null"),
        6 => {
            put(&mut h, header::ORIGIN, ADVERTISED_ORIGIN.as_bytes());
            put(&mut h, header::ORIGIN, ADVERTISED_ORIGIN.as_bytes());
        }
        _ => put(&mut h, header::ORIGIN, raw(u)),
    }
    let content_type: &[u8] = match pick(u, 6) {
        0 | 1 => b"application/json",
        2 => b"Application/JSON; charset=utf-8",
        3 => b"text/plain",
        4 => b"",
        _ => raw(u),
    };
    if !content_type.is_empty() {
        put(&mut h, header::CONTENT_TYPE, content_type);
    }
    let accept: &[u8] = match pick(u, 6) {
        0 | 1 => b"application/json, text/event-stream",
        2 => b"application/json",
        3 => b"text/event-stream;q=0.5, application/json;q=0.9",
        4 => b"",
        _ => raw(u),
    };
    if !accept.is_empty() {
        put(&mut h, header::ACCEPT, accept);
    }
    match pick(u, 6) {
        0 | 1 => {}
        2 => put(
            &mut h,
            header::CONTENT_LENGTH,
            body.len().to_string().as_bytes(),
        ),
        3 => put(
            &mut h,
            header::CONTENT_LENGTH,
            (32 * 1024 + pick(u, 3)).to_string().as_bytes(),
        ),
        4 => put(&mut h, header::CONTENT_LENGTH, b"nope"),
        _ => put(&mut h, header::CONTENT_LENGTH, raw(u)),
    }
    match pick(u, 4) {
        0 | 1 => put(&mut h, HeaderName::from_static("a2a-version"), b"1.0"),
        2 => {}
        _ => put(&mut h, HeaderName::from_static("a2a-version"), raw(u)),
    }
    if pick(u, 3) == 0 {
        let v = protocol_version(u);
        put(
            &mut h,
            HeaderName::from_static("mcp-protocol-version"),
            v.as_bytes(),
        );
    }
    match pick(u, 5) {
        0 | 1 => {}
        2 => put(
            &mut h,
            HeaderName::from_static("mcp-method"),
            rpc_method.unwrap_or("tools/list").as_bytes(),
        ),
        3 => {
            let name = tool_name(u);
            put(&mut h, HeaderName::from_static("mcp-method"), b"tools/call");
            put(&mut h, HeaderName::from_static("mcp-name"), name.as_bytes());
        }
        _ => put(&mut h, HeaderName::from_static("mcp-method"), raw(u)),
    }
    match pick(u, 4) {
        0 | 1 => {}
        2 => put(&mut h, HeaderName::from_static("mcp-session-id"), raw(u)),
        _ => put(
            &mut h,
            HeaderName::from_static("mcp-session-id"),
            b"session-1",
        ),
    }
    // A few more, any name.
    for _ in 0..pick(u, 3) {
        let name = match pick(u, 3) {
            0 => HeaderName::from_static("mcp-param-region"),
            1 => HeaderName::from_static("last-event-id"),
            _ => match HeaderName::from_bytes(raw(u)) {
                Ok(n) => n,
                Err(_) => continue,
            },
        };
        put(&mut h, name, raw(u));
    }
    h
}

fn answers(u: &mut Unstructured) -> Answers {
    let inspect = match pick(u, 5) {
        0 | 1 => r#"{"os":{"name":"fuzzos"},"sandbox":{"active":true}}"#.to_string(),
        2 => "[1,2]".into(),
        3 => value(u, 3).to_string(),
        _ => text(u),
    };
    let catalog = (0..pick(u, 4))
        .map(|_| ToolSpec {
            name: if flag(u) {
                text(u)
            } else {
                "shell.exec".into()
            },
            description: text(u),
            input_schema: match pick(u, 3) {
                0 => r#"{"type":"object"}"#.into(),
                1 => value(u, 2).to_string(),
                _ => text(u),
            },
        })
        .collect();
    let attachments = (0..pick(u, 3))
        .map(|_| Attachment {
            media_type: match pick(u, 4) {
                0 => "image/png".into(),
                1 => "image/jpeg".into(),
                2 => "image/gif".into(),
                _ => text(u),
            },
            data_base64: text(u),
            width: u.arbitrary().unwrap_or(None),
            height: u.arbitrary().unwrap_or(None),
        })
        .collect();
    Answers {
        inspect,
        catalog,
        success: pick(u, 3) != 2,
        output: flag(u).then(|| text(u)),
        attachments,
    }
}

/// Does this request carry the right token? Independent of netd's parser: exactly one
/// Authorization header, the scheme `Bearer` in any case, one space, then the token with
/// optional surrounding blanks.
fn has_right_token(headers: &axum::http::HeaderMap) -> bool {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(v), None) = (all.next(), all.next()) else {
        return false;
    };
    let b = v.as_bytes();
    b.len() > 7
        && b[..6].eq_ignore_ascii_case(b"bearer")
        && b[6] == b' '
        && b[7..].trim_ascii() == TOKEN.as_bytes()
}

fuzz_target!(|data: &[u8]| {
    let h = harness();
    let mut u = Unstructured::new(data);
    let method = method(&mut u);
    let uri = target(&mut u);
    let (body, rpc_method) = body(&mut u);
    let headers = headers(&mut u, &body, rpc_method.as_deref());
    *ANSWERS.lock().unwrap_or_else(|p| p.into_inner()) = Some(answers(&mut u));

    let protected = matches!(uri.path(), "/mcp" | "/a2a" | "/a2a/");
    let card = uri.path() == AGENT_CARD;
    let authorized = has_right_token(&headers);
    let mut request = Request::new(Body::from(body));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;

    let before = EXECUTOR_CALLS.load(Ordering::SeqCst);
    let (status, www_authenticate) = h.runtime.block_on(async {
        let response = h
            .router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|never| match never {});
        let status = response.status();
        let challenge = response.headers().get(header::WWW_AUTHENTICATE).cloned();
        let read = axum::body::to_bytes(response.into_body(), usize::MAX);
        match tokio::time::timeout(BODY_DEADLINE, read).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("{status}: the response body failed: {e}"),
            Err(_) => panic!("{status}: the response body did not end in {BODY_DEADLINE:?}"),
        }
        (status, challenge)
    });
    let calls = EXECUTOR_CALLS.load(Ordering::SeqCst) - before;

    if card {
        assert!(
            matches!(status.as_u16(), 200 | 304 | 403 | 405),
            "the Agent Card answered {status}"
        );
    } else if !protected {
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    if !protected || !authorized {
        assert_eq!(
            calls, 0,
            "a request without the right token reached the executor"
        );
    }
    if protected && !authorized {
        assert!(
            matches!(status.as_u16(), 400 | 401 | 413),
            "an unauthorized request got {status}"
        );
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(
                www_authenticate.as_ref().map(|v| v.as_bytes()),
                Some(&b"Bearer"[..])
            );
        }
    }
    assert!(
        !h.channel.is_finished(),
        "the fake executor's channel closed: a harness bug (a wrong kind of answer?)"
    );
});
