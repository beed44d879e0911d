//! `nl2sh_ask`: delegate a task to the built-in Agent. The same task as A2A SendMessage
//! creates (one task service, one Task format): it waits for the task to end for at
//! most [`WAIT`], then answers the Task as it stands; a task still working goes on and
//! is polled with `nl2sh_get_task`.

use std::time::Duration;

use nl2sh_proto::channels::{CallOrigin, ContextId};
use nl2sh_proto::limits::{MAX_AGENT_TEXT_BYTES, MAX_ID_BYTES};
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::Hints;
use crate::tasks::{document, NewTask, TaskService};

pub const NAME: &str = "nl2sh_ask";

/// How long `nl2sh_ask` waits for a terminal state. Below the 60 s default request
/// timeout of the official TypeScript MCP SDK (the shortest common client default), so
/// the client gets the Task (with its id to poll) instead of a timeout.
pub const WAIT: Duration = Duration::from_secs(50);

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_AGENT_TEXT_BYTES,
                "description": format!(
                    "What the device's Agent should do, in plain language: \
                     1-{MAX_AGENT_TEXT_BYTES} UTF-8 bytes"
                )
            },
            "context_id": {
                "type": ["string", "null"],
                "maxLength": MAX_ID_BYTES,
                "description": format!(
                    "Continue this conversation (the contextId of an earlier task), at most \
                     {MAX_ID_BYTES} UTF-8 bytes; omit it (or give null or \"\") to start a \
                     new one"
                )
            }
        },
        "required": ["message"],
        "additionalProperties": false
    });
    let tool = Tool::new(
        NAME,
        format!(
            "Delegate a task to the device's built-in Agent, which works it with the device \
             tools (a model call per step). Returns the A2A Task: id, contextId, status \
             (TASK_STATE_SUBMITTED/WORKING/COMPLETED/FAILED/CANCELED), history, and on \
             completion artifacts[0].parts[0].data with the answer, steps and tool calls. \
             Waits up to {} s; a task still working then keeps running: poll \
             nl2sh_get_task with its id. Tasks of one context_id run one after another and \
             share history. Mutations wait for approval by the device's owner.",
            WAIT.as_secs()
        ),
        super::object(schema),
    );
    super::describe(
        tool,
        "Ask the device's Agent",
        // The Agent calls a model endpoint and may run any device tool (mutations once
        // approved); every call starts a new task.
        Hints::OPEN_CHANGE,
        super::task_output_schema(),
    )
}

pub async fn call(
    tasks: &TaskService,
    origin: CallOrigin,
    arguments: Option<&JsonObject>,
    cancel: &CancellationToken,
) -> CallToolResult {
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    if let Some(extra) = arguments
        .keys()
        .find(|k| *k != "message" && *k != "context_id")
    {
        return super::failure(format!(
            "{NAME}: unexpected field {}",
            super::shorten(extra, 64)
        ));
    }
    let text = match arguments.get("message") {
        Some(Value::String(m)) if !m.is_empty() && m.len() <= MAX_AGENT_TEXT_BYTES => m,
        Some(Value::String(m)) => {
            return super::failure(format!(
                "{NAME}: `message` is {} bytes; it must be 1-{MAX_AGENT_TEXT_BYTES} UTF-8 bytes",
                m.len()
            ))
        }
        Some(_) => return super::failure(format!("{NAME}: `message` must be a string")),
        None => return super::failure(format!("{NAME}: `message` is required")),
    };
    let context = match arguments.get("context_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if c.len() > MAX_ID_BYTES => {
            return super::failure(format!("{NAME}: `context_id` is over {MAX_ID_BYTES} bytes"))
        }
        Some(Value::String(c)) if c.is_empty() => None,
        Some(Value::String(c)) => Some(ContextId(c.clone())),
        Some(_) => return super::failure(format!("{NAME}: `context_id` must be a string")),
    };
    let Ok(message_id) = document::new_id() else {
        return super::failure(format!("{NAME} failed: no system randomness for an id"));
    };
    let message = Map::from_iter([
        ("messageId".to_string(), Value::String(message_id)),
        ("role".to_string(), Value::String("ROLE_USER".into())),
        ("parts".to_string(), json!([{ "text": text }])),
    ]);
    let handle = match tasks
        .submit(NewTask {
            agent_origin: origin.agent(),
            ids: None,
            context,
            text: text.clone(),
            message,
        })
        .await
    {
        Ok(handle) => handle,
        Err(e) => return super::failure(format!("{NAME}: {e}")),
    };
    let current = handle.current();
    // The task never depends on this request: a client that goes away, or (over stdio)
    // sends notifications/cancelled for this call, only stops the wait. Cancelling the
    // task is nl2sh_cancel_task's.
    let task = tokio::select! {
        done = tokio::time::timeout(WAIT, handle.terminal()) => done.unwrap_or(current),
        () = cancel.cancelled() => current,
    };
    super::task_result(task)
}
