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
pub mod read_screen;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};

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

/// A Task (A2A 1.0 JSON) as an MCP result: the object as text and as
/// `structuredContent`. A task that failed is still a successful call: the Task says how
/// it ended.
pub(crate) fn task_result(task: serde_json::Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(task.to_string())]);
    result.structured_content = Some(task);
    result
}

/// The argument schema of the tools that name one task.
pub(crate) fn task_id_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "task_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": nl2sh_proto::limits::MAX_ID_BYTES,
                "description": "The task's id (the `id` of the Task nl2sh_ask returned)"
            }
        },
        "required": ["task_id"],
        "additionalProperties": false
    })
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
        Some(serde_json::Value::String(id)) if !id.is_empty() => Ok(id),
        Some(_) => Err(failure(format!(
            "{tool}: `task_id` must be a non-empty string"
        ))),
        None => Err(failure(format!("{tool}: `task_id` is required"))),
    }
}

/// The argument schema of a tool that takes none: the empty object, nothing else.
pub(crate) fn no_arguments_schema() -> std::sync::Arc<JsonObject> {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert(
        "properties".into(),
        serde_json::Value::Object(JsonObject::new()),
    );
    schema.insert("additionalProperties".into(), false.into());
    std::sync::Arc::new(schema)
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
