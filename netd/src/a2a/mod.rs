//! A2A 1.0 over JSON-RPC 2.0 (`POST /a2a`, `POST /a2a/`), behind the front door's
//! Bearer/Host/Origin guard and 32 KiB body limit (`http::guard`), and the public Agent
//! Card ([`card`]).
//!
//! A request is checked in this order, first failure wins; every answer is HTTP 200:
//!
//! 1. `Content-Type` must be JSON (`application/json`, or `application/*+json`) →
//!    else -32005, before the body is parsed;
//! 2. the body must be JSON → else -32700; a batch (array) → -32600;
//! 3. the envelope: an object with `"jsonrpc": "2.0"`, a string `method`, an `id` that is
//!    a string, number or null (nl2sh's methods all answer, so an id is required), and
//!    `params`, if present, an object or array → else -32600;
//! 4. `A2A-Version`: only major.minor counts and only 1.0 is served; absent or empty
//!    means 0.3 → -32009 (the id is echoed from here on);
//! 5. the method: `SendMessage`, `GetTask`, `ListTasks`, `CancelTask` are served;
//!    `SendStreamingMessage`, `SubscribeToTask`, `GetExtendedAgentCard` → -32004; the
//!    push-notification config methods → -32003; anything else → -32601.
//!
//! Error codes and their `error.data` are [`error`]'s. Task execution never depends on
//! the request: a blocking SendMessage whose client goes away leaves its task running.

pub mod card;
pub mod error;
pub mod params;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use nl2sh_proto::channels::{CallOrigin, StoreErrorKind};
use nl2sh_proto::display::Shown;
use nl2sh_proto::requester::ClientName;
use serde_json::{json, Value};

pub use error::A2aError;

use crate::tasks::document::present;
use crate::tasks::{NewTask, TaskError, TaskService};

/// The header naming the A2A version a client speaks.
pub const VERSION_HEADER: &str = "a2a-version";

/// What the A2A routes share.
#[derive(Clone)]
pub struct A2a {
    pub tasks: TaskService,
}

pub async fn serve(State(a2a): State<A2a>, headers: HeaderMap, body: Bytes) -> Response {
    let (id, outcome) = answer(&a2a, &headers, &body).await;
    let mut reply = json!({"jsonrpc": "2.0", "id": id});
    match outcome {
        Ok(result) => reply["result"] = result,
        Err(e) => reply["error"] = e.to_json(),
    }
    let mut response = Response::new(Body::from(reply.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The request's id (null until it is known) and the result or error.
async fn answer(a2a: &A2a, headers: &HeaderMap, body: &[u8]) -> (Value, Result<Value, A2aError>) {
    if !is_json(headers) {
        return (
            Value::Null,
            Err(A2aError::ContentTypeNotSupported(
                "Content-Type must be application/json".into(),
            )),
        );
    }
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return (
                Value::Null,
                Err(A2aError::Parse(format!("the body is not JSON: {e}"))),
            )
        }
    };
    let (id, method, params) = match envelope(&request) {
        Ok(parts) => parts,
        Err(e) => return (Value::Null, Err(e)),
    };
    let id = id.clone();
    if let Err(e) = check_version(headers) {
        return (id, Err(e));
    }
    let outcome = dispatch(a2a, method, params, caller_name(headers)).await;
    if let Err(e) = &outcome {
        tracing::debug!(method = %Shown::new(method).max_bytes(64), code = e.code(), "A2A error");
    }
    (id, outcome)
}

fn is_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(text) = value.to_str() else {
        return false;
    };
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The JSON-RPC 2.0 envelope: id, method, params.
fn envelope(request: &Value) -> Result<(&Value, &str, Option<&Value>), A2aError> {
    let object = match request {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(A2aError::InvalidRequest(
                "batch requests are not supported".into(),
            ))
        }
        _ => {
            return Err(A2aError::InvalidRequest(
                "a request must be a JSON-RPC 2.0 object".into(),
            ))
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(A2aError::InvalidRequest(
            "\"jsonrpc\" must be \"2.0\"".into(),
        ));
    }
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err(A2aError::InvalidRequest(
                "\"id\" must be a string, a number or null".into(),
            ))
        }
        None => {
            return Err(A2aError::InvalidRequest(
                "\"id\" is required: every A2A method answers".into(),
            ))
        }
    };
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return Err(A2aError::InvalidRequest(
            "\"method\" must be a string".into(),
        ));
    };
    let params = object.get("params");
    if let Some(p) = params {
        if !matches!(p, Value::Object(_) | Value::Array(_) | Value::Null) {
            return Err(A2aError::InvalidRequest(
                "\"params\" must be an object".into(),
            ));
        }
    }
    Ok((id, method, params))
}

/// Only major.minor counts; absent or empty is 0.3. This server speaks 1.0 only.
fn check_version(headers: &HeaderMap) -> Result<(), A2aError> {
    let value = headers
        .get(VERSION_HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
        .unwrap_or_default();
    let shown = if value.is_empty() {
        "0.3 (no A2A-Version header)".to_string()
    } else {
        bounded(&value).to_string()
    };
    let mut numbers = value.split('.');
    let major = numbers.next().and_then(|n| n.parse::<u32>().ok());
    let minor = numbers.next().and_then(|n| n.parse::<u32>().ok());
    if (major, minor) == (Some(1), Some(0)) {
        return Ok(());
    }
    Err(A2aError::VersionNotSupported(format!(
        "A2A version {shown} is not supported; this server speaks A2A 1.0 (send \
         A2A-Version: 1.0)"
    )))
}

/// The caller's own name for itself: A2A has no field for it, so its HTTP `User-Agent`
/// (shown to the owner as what it is: a name it gave, deciding nothing).
fn caller_name(headers: &HeaderMap) -> Option<ClientName> {
    let agent = headers.get(header::USER_AGENT)?.to_str().ok()?;
    ClientName::from_user_agent(agent)
}

async fn dispatch(
    a2a: &A2a,
    method: &str,
    params: Option<&Value>,
    client: Option<ClientName>,
) -> Result<Value, A2aError> {
    match method {
        "SendMessage" => send_message(a2a, params::object(params)?, client).await,
        "GetTask" => {
            let (id, view) = params::get(params::object(params)?)?;
            Ok(present(&a2a.tasks.get(&id).await?, view))
        }
        "ListTasks" => list_tasks(a2a, params::object(params)?).await,
        "CancelTask" => {
            let id = params::cancel(params::object(params)?)?;
            Ok(a2a.tasks.cancel(&id).await?)
        }
        "SendStreamingMessage" | "SubscribeToTask" => Err(A2aError::UnsupportedOperation(
            "streaming is not supported; use SendMessage, then GetTask".into(),
        )),
        "GetExtendedAgentCard" => Err(A2aError::UnsupportedOperation(
            "there is no extended agent card".into(),
        )),
        m if m.contains("TaskPushNotificationConfig") => Err(
            A2aError::PushNotificationNotSupported("push notifications are not supported".into()),
        ),
        m => Err(A2aError::MethodNotFound(format!(
            "method {:?} not found",
            bounded(m)
        ))),
    }
}

async fn send_message(
    a2a: &A2a,
    params: &serde_json::Map<String, Value>,
    client: Option<ClientName>,
) -> Result<Value, A2aError> {
    let send = params::send(params)?;
    if let Some(task_id) = &send.continues {
        // A2A: an unknown taskId is TaskNotFound; a known one would continue a task,
        // which nl2sh does not do (every message makes a new task).
        a2a.tasks.get(task_id).await?;
        return Err(A2aError::UnsupportedOperation(
            "continuing a task is not supported: every message starts a new task; reuse \
             contextId to continue the conversation"
                .into(),
        ));
    }
    let handle = a2a
        .tasks
        .submit(NewTask {
            agent_origin: CallOrigin::AgentHttp,
            ids: None,
            context: send.context,
            text: send.text,
            message: send.message,
            client,
        })
        .await?;
    let task = if send.return_immediately {
        handle.submitted()
    } else {
        handle.terminal().await
    };
    Ok(json!({ "task": present(&task, send.view) }))
}

async fn list_tasks(a2a: &A2a, params: &serde_json::Map<String, Value>) -> Result<Value, A2aError> {
    let list = params::list(params)?;
    let Some(query) = list.query else {
        return Ok(json!({
            "tasks": [], "nextPageToken": "", "pageSize": list.page_size, "totalSize": 0,
        }));
    };
    let page = match a2a.tasks.list(query).await {
        Ok(page) => page,
        Err(TaskError::Store(e)) if e.kind() == Some(StoreErrorKind::BadPageToken) => {
            return Err(A2aError::invalid("pageToken", "pageToken is not valid"))
        }
        Err(e) => return Err(e.into()),
    };
    let tasks: Vec<Value> = page.tasks.iter().map(|t| present(t, list.view)).collect();
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": page.next_page_token,
        "pageSize": list.page_size,
        "totalSize": page.total_size,
    }))
}

/// Client text in messages and logs, bounded.
fn bounded(text: &str) -> &str {
    nl2sh_proto::text::prefix(text, 64)
}
