//! One file per MCP tool. Each tool module owns its descriptor (name, description,
//! schemas) and turns arguments into a typed request on a worker channel; it never runs
//! anything itself (docs/ARCHITECTURE.md, "The one rule").

pub mod ask;
pub mod call;
pub mod cancel_task;
pub mod catalog;
pub mod get_task;
pub mod inspect;
pub mod invoke;
pub mod progress;
pub mod read_screen;

use std::sync::Arc;

use nl2sh_proto::channels::TaskState;
use nl2sh_proto::limits::MAX_ID_BYTES;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

/// Every tool this build of netd lists, in listing order.
pub fn all() -> Vec<rmcp::model::Tool> {
    vec![
        inspect::tool(),
        catalog::tool(),
        invoke::tool(),
        read_screen::tool(),
        ask::tool(),
        get_task::tool(),
        cancel_task::tool(),
    ]
}

/// What a tool does to its environment, as MCP `ToolAnnotations` hints. Every tool states
/// all four: a hint left out means its default (destructive, open world), which is wrong
/// for most of ours.
pub(crate) struct Hints {
    /// Changes nothing on the device (or anywhere else).
    pub read_only: bool,
    /// May delete or overwrite (as opposed to only adding); meaningful when not read-only.
    pub destructive: bool,
    /// A second call with the same arguments has no further effect.
    pub idempotent: bool,
    /// May reach entities outside the device (the network, a model endpoint).
    pub open_world: bool,
}

impl Hints {
    /// Reads what is on the device and changes nothing: a second call is the same call.
    pub(crate) const LOCAL_READ: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// May change the device and reach beyond it (a command, or the Agent's model).
    pub(crate) const OPEN_CHANGE: Hints = Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
}

/// `tool` with its title (as `title`, and as `annotations.title` for clients before
/// 2025-06-18), its hints and its `outputSchema`: the shape of `structuredContent` in
/// every successful result (an `isError` result may differ).
pub(crate) fn describe(tool: Tool, title: &str, hints: Hints, output_schema: Value) -> Tool {
    let annotations = ToolAnnotations::with_title(title)
        .read_only(hints.read_only)
        .destructive(hints.destructive)
        .idempotent(hints.idempotent)
        .open_world(hints.open_world);
    tool.with_title(title)
        .with_annotations(annotations)
        .with_raw_output_schema(object(output_schema))
}

/// A schema built with `json!` as the object rmcp keeps.
pub(crate) fn object(schema: Value) -> Arc<JsonObject> {
    let Value::Object(schema) = schema else {
        unreachable!("a schema is a JSON object")
    };
    Arc::new(schema)
}

/// The A2A names of every task state, in order.
fn task_states() -> Vec<&'static str> {
    use TaskState::{Canceled, Completed, Failed, Submitted, Working};
    [Submitted, Working, Completed, Failed, Canceled]
        .into_iter()
        .map(|state| match state {
            // A new state fails to compile here: list it above too.
            Submitted | Working | Completed | Failed | Canceled => state.as_a2a(),
        })
        .collect()
}

/// One A2A Message as a task holds it (the user's, normalized, and the Agent's).
fn message_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "messageId": {"type": "string"},
            "contextId": {"type": "string"},
            "taskId": {"type": "string"},
            "role": {"type": "string", "enum": ["ROLE_USER", "ROLE_AGENT"]},
            "parts": {
                "type": "array",
                "items": {"type": "object"},
                "description": "Each part holds one of text, raw, url or data"
            }
        },
        "required": ["messageId", "role", "parts"]
    })
}

/// The `outputSchema` of the task tools: an A2A 1.0 Task in ProtoJSON, as
/// `tasks::document::TaskDoc::to_json` builds it (and as the store keeps it: a document
/// approvald marked failed on restart may have lost its history).
pub(crate) fn task_output_schema() -> Value {
    json!({
        "type": "object",
        "description": "An A2A 1.0 Task (ProtoJSON: camelCase, enum names as strings)",
        "properties": {
            "id": {"type": "string"},
            "contextId": {"type": "string"},
            "status": {
                "type": "object",
                "properties": {
                    "state": {"type": "string", "enum": task_states()},
                    "timestamp": {"type": "string", "format": "date-time"},
                    "message": message_schema()
                },
                "required": ["state", "timestamp"]
            },
            "history": {"type": "array", "items": message_schema()},
            "artifacts": {
                "type": "array",
                "description": "Once the task has ended with a result: artifacts[0].parts[0].data",
                "items": {
                    "type": "object",
                    "properties": {
                        "artifactId": {"type": "string"},
                        "name": {"type": "string"},
                        "parts": {"type": "array", "items": {"type": "object"}}
                    },
                    "required": ["artifactId", "parts"]
                }
            }
        },
        "required": ["id", "contextId", "status"]
    })
}

/// A Task (A2A 1.0 JSON) as an MCP result: the object as text and as
/// `structuredContent`. A task that failed is still a successful call: the Task says how
/// it ended.
pub(crate) fn task_result(task: serde_json::Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(task.to_string())]);
    result.structured_content = Some(task);
    result
}

/// The argument schema of the tools that name one task.
pub(crate) fn task_id_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "task_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_ID_BYTES,
                "description": format!(
                    "The task's id (the `id` of the Task nl2sh_ask returned): \
                     1-{MAX_ID_BYTES} UTF-8 bytes"
                )
            }
        },
        "required": ["task_id"],
        "additionalProperties": false
    }))
}

/// `task_id`, the only argument of the tools that name one task.
pub(crate) fn task_id_argument<'a>(
    tool: &str,
    arguments: Option<&'a JsonObject>,
) -> Result<&'a str, CallToolResult> {
    let Some(arguments) = arguments else {
        return Err(failure(format!("{tool}: `task_id` is required")));
    };
    if let Some(extra) = arguments.keys().find(|k| *k != "task_id") {
        return Err(failure(format!(
            "{tool}: unexpected field {}",
            shorten(extra, 64)
        )));
    }
    match arguments.get("task_id") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id),
        Some(_) => Err(failure(format!(
            "{tool}: `task_id` must be a non-empty string"
        ))),
        None => Err(failure(format!("{tool}: `task_id` is required"))),
    }
}

/// The argument schema of a tool that takes none: the empty object, nothing else.
pub(crate) fn no_arguments_schema() -> Arc<JsonObject> {
    object(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

/// A tool-level failure the caller should read (`isError: true`).
pub(crate) fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// For tools that take no parameters: `None` and `{}` are fine; anything else is an
/// isError result naming the unexpected field(s).
pub(crate) fn expect_no_arguments(
    tool: &str,
    arguments: Option<&JsonObject>,
) -> Result<(), CallToolResult> {
    let Some(arguments) = arguments else {
        return Ok(());
    };
    if arguments.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 4;
    let mut names: Vec<String> = arguments
        .keys()
        .take(SHOWN)
        .map(|k| shorten(k, 64))
        .collect();
    if arguments.len() > SHOWN {
        names.push(format!("and {} more", arguments.len() - SHOWN));
    }
    Err(failure(format!(
        "{tool} takes no arguments; unexpected field{}: {}",
        if arguments.len() == 1 { "" } else { "s" },
        names.join(", ")
    )))
}

/// `s` cut to at most `max` bytes on a char boundary, marked when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    format!("`{}`", nl2sh_proto::text::shortened(s, max))
}
