//! `nl2sh_invoke`: run one device tool directly (no model), through the executor's whole
//! pipeline. netd only bounds and forwards the request.

use nl2sh_proto::channels::{CallOrigin, InvokeRequest};
use nl2sh_proto::limits::{MAX_ARGUMENT_JSON_BYTES, MAX_TOOL_NAME_BYTES};
use nl2sh_proto::requester::ClientName;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::call::{self, ExecutorClient};
use super::progress::Reporter;
use super::Hints;

pub const NAME: &str = "nl2sh_invoke";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "tool": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TOOL_NAME_BYTES,
                "description": format!(
                    "A tool name from nl2sh_tools, e.g. shell.exec: 1-{MAX_TOOL_NAME_BYTES} \
                     UTF-8 bytes"
                )
            },
            "arguments": {
                "type": ["object", "null"],
                "description": format!(
                    "Arguments matching that tool's schema, at most \
                     {MAX_ARGUMENT_JSON_BYTES} bytes as JSON; omitted or null means {{}}"
                )
            }
        },
        "required": ["tool"],
        "additionalProperties": false
    });
    let tool = Tool::new(
        NAME,
        "Run one device tool directly, without a model: {\"tool\": name, \"arguments\": {...}}. \
         Returns {tool, success, output, attachments?}; output may be JSON text. Mutations \
         wait for approval by the device's owner and may be refused.",
        super::object(schema),
    );
    super::describe(
        tool,
        "Invoke a device tool",
        // Any device tool: it may write, delete or kill, and shell.exec (once approved)
        // may reach the network.
        Hints::OPEN_CHANGE,
        call::output_schema(),
    )
}

pub async fn call(
    executor: &ExecutorClient,
    origin: CallOrigin,
    client: Option<ClientName>,
    arguments: Option<&JsonObject>,
    cancel: &CancellationToken,
    reporter: Option<Reporter>,
) -> CallToolResult {
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    if let Some(extra) = arguments.keys().find(|k| *k != "tool" && *k != "arguments") {
        return super::failure(format!(
            "{NAME}: unexpected field {}",
            super::shorten(extra, 64)
        ));
    }
    let tool = match arguments.get("tool") {
        Some(Value::String(t)) if !t.is_empty() => t,
        Some(_) => return super::failure(format!("{NAME}: `tool` must be a non-empty string")),
        None => return super::failure(format!("{NAME}: `tool` is required")),
    };
    if tool.len() > MAX_TOOL_NAME_BYTES {
        return super::failure(format!(
            "{NAME}: tool name is over {MAX_TOOL_NAME_BYTES} bytes"
        ));
    }
    let args_text = match arguments.get("arguments") {
        None | Some(Value::Null) => "{}".to_string(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return super::failure(format!("{NAME}: `arguments` must be an object")),
    };
    // Bounded here, before anything crosses to the executor.
    if args_text.len() > MAX_ARGUMENT_JSON_BYTES {
        return super::failure(format!(
            "{NAME}: arguments are {} bytes of JSON, over the {MAX_ARGUMENT_JSON_BYTES} byte limit",
            args_text.len()
        ));
    }
    let correlation = call::next_correlation();
    let request = InvokeRequest {
        correlation,
        origin,
        task: None,
        tool: tool.clone(),
        arguments: args_text,
        after_reading: Default::default(),
        client,
    };
    match call::run(
        executor,
        correlation,
        origin,
        cancel,
        reporter,
        executor.invoke(request),
    )
    .await
    {
        Ok(outcome) => call::to_result(&outcome, None),
        Err(e) => super::failure(format!("{NAME} failed: {e}")),
    }
}
