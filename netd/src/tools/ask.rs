//! `nl2sh_ask`: delegate a task to the built-in Agent. The same task as A2A SendMessage
//! creates (one task service, one Task format): it waits for the task to end for at
//! most [`WAIT`], then answers the Task as it stands; a task still working goes on and
//! is polled with `nl2sh_get_task`.

use std::time::Duration;

use nl2sh_proto::channels::{CallOrigin, ContextId, TaskState};
use nl2sh_proto::ids::new_uuid_v4;
use nl2sh_proto::limits::{MAX_AGENT_TEXT_BYTES, MAX_ID_BYTES};
use nl2sh_proto::requester::ClientName;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::progress::{self, Reporter};
use super::Hints;
use crate::agent::AgentStep;
use crate::executor::ExecutorClient;
use crate::tasks::{NewTask, TaskService};

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

/// `executor` and `reporter` together: the client asked for progress (its
/// `progressToken`), which is said every [`progress::POLL`] while the task runs.
pub async fn call(
    tasks: &TaskService,
    origin: CallOrigin,
    client: Option<ClientName>,
    arguments: Option<&JsonObject>,
    cancel: &CancellationToken,
    progress: Option<(&ExecutorClient, Reporter)>,
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
    let Ok(message_id) = new_uuid_v4() else {
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
            client,
        })
        .await
    {
        Ok(handle) => handle,
        Err(e) => return super::failure(format!("{NAME}: {e}")),
    };
    let current = handle.current();
    let task_id = handle.id().0.clone();
    let watched = handle.progress();
    // The task never depends on this request: a client that goes away, or (over stdio)
    // sends notifications/cancelled for this call, only stops the wait. Cancelling the
    // task is nl2sh_cancel_task's.
    let wait = tokio::time::timeout(WAIT, handle.terminal());
    tokio::pin!(wait);
    let first = tokio::time::Instant::now() + progress::FIRST;
    let mut ticks = tokio::time::interval_at(first, progress::POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut progress = progress;
    let task = loop {
        tokio::select! {
            done = &mut wait => break done.unwrap_or(current),
            () = cancel.cancelled() => break current,
            _ = ticks.tick(), if progress.is_some() => {
                if let Some((executor, reporter)) = progress.as_mut() {
                    // Saying it never holds the answer back (a client that does not read
                    // its stream, a peer slow to say where a call stands).
                    tokio::select! {
                        biased;
                        done = &mut wait => break done.unwrap_or(current),
                        () = cancel.cancelled() => break current,
                        () = say_where(executor, reporter, &task_id, watched.now()) => {}
                    }
                }
            }
        }
    };
    super::task_result(task)
}

/// Say where a delegated task stands: in line, thinking, or the step it runs and where
/// that call stands (waiting for the owner's approval, above all).
async fn say_where(
    executor: &ExecutorClient,
    reporter: &mut Reporter,
    task_id: &str,
    (state, step): (TaskState, Option<AgentStep>),
) {
    // Both are netd's own: the task id it minted, the tool's catalog name (the model's
    // function name was mapped to one before the call was made).
    let task = task_id;
    match (state, step) {
        (TaskState::Submitted, _) => {
            reporter
                .say(format!(
                    "task {task}: waiting for the earlier tasks of its conversation"
                ))
                .await
        }
        (TaskState::Working, Some(step)) => {
            let prefix = format!("task {task}: the Agent runs {}: ", step.tool);
            reporter.follow(executor, step.correlation, &prefix).await
        }
        (TaskState::Working, None) => {
            reporter
                .say(format!("task {task}: the Agent is asking its model"))
                .await
        }
        // Terminal: the answer follows at once.
        _ => {}
    }
}
