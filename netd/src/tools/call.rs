//! What the direct-tool MCP tools share: asking the executor for one call and turning its
//! `ToolOutcome` into an MCP result (text content + `structuredContent`, native image
//! blocks for attachments, `isError` when the operation failed).

use std::future::Future;

use nl2sh_proto::channels::{Attachment, CallOrigin, Correlation, ToolOutcome};
use nl2sh_proto::limits::{MAX_SCREEN_BASE64_BYTES, MAX_TOOL_OUTPUT_BYTES};
use nl2sh_proto::rpc::RpcError;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::progress::{self, Reporter};
pub use crate::executor::{next_correlation, ExecutorClient};

/// Wait for `call` (an invoke or screen read netd knows by `correlation`) to answer.
///
/// `cancel` is the MCP request's cancellation. It is honoured only over stdio, where it
/// means the client sent `notifications/cancelled` (or went away): over stateless HTTP a
/// cancellation cannot reach a running request, and a dropped connection must not stop
/// (or un-approve) work already under way. A stopping service cancels every call
/// ([`ExecutorClient::stop_calls`]), so each answers its caller before the grace ends.
///
/// With a `reporter` (the client sent a `progressToken`), where the call stands is said
/// every [`progress::POLL`] while it waits.
pub async fn run(
    executor: &ExecutorClient,
    correlation: Correlation,
    origin: CallOrigin,
    cancel: &CancellationToken,
    mut reporter: Option<Reporter>,
    call: impl Future<Output = Result<ToolOutcome, RpcError>>,
) -> Result<ToolOutcome, String> {
    tokio::pin!(call);
    let request_cancelled = async {
        if origin == CallOrigin::McpStdio {
            cancel.cancelled().await
        } else {
            std::future::pending().await
        }
    };
    tokio::pin!(request_cancelled);
    // A call that answers within the first moment says nothing (and its answer stays one
    // JSON body rather than a stream).
    let first = tokio::time::Instant::now() + progress::FIRST;
    let mut ticks = tokio::time::interval_at(first, progress::POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let answer = loop {
        tokio::select! {
            a = &mut call => break a,
            () = &mut request_cancelled => {
                let _ = executor.cancel(correlation).await;
                break call.await;
            }
            () = executor.stopping().cancelled() => {
                let _ = executor.cancel(correlation).await;
                break call.await;
            }
            _ = ticks.tick(), if reporter.is_some() => {
                if let Some(reporter) = reporter.as_mut() {
                    // The call may answer while its stage is asked: it wins the next turn.
                    tokio::select! {
                        biased;
                        a = &mut call => break a,
                        () = reporter.follow(executor, correlation, "") => {}
                    }
                }
            }
        }
    };
    answer.map_err(|e| format!("the executor is unavailable ({e})"))
}

/// Attachment metadata for `structuredContent` (the data itself goes in image blocks).
fn attachment_meta(a: &Attachment) -> Value {
    json!({
        "media_type": a.media_type,
        "width": a.width,
        "height": a.height,
        "base64_bytes": a.data_base64.len(),
    })
}

/// Only PNG/JPEG within the screen cap become image blocks; anything else is refused.
fn image_block(a: &Attachment) -> Result<ContentBlock, String> {
    if a.media_type != "image/png" && a.media_type != "image/jpeg" {
        return Err(format!(
            "attachment of type {:?} is not PNG or JPEG",
            a.media_type
        ));
    }
    if a.data_base64.len() > MAX_SCREEN_BASE64_BYTES {
        return Err(format!(
            "image is {} bytes of base64, over the {MAX_SCREEN_BASE64_BYTES} byte limit",
            a.data_base64.len()
        ));
    }
    Ok(ContentBlock::image(
        a.data_base64.clone(),
        a.media_type.clone(),
    ))
}

/// The `outputSchema` of the direct result object ([`structured`]), for `nl2sh_invoke`
/// and `nl2sh_read_screen`.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": "The device tool that ran"},
            "success": {"type": "boolean"},
            "output": {
                "type": "string",
                "description": format!(
                    "What the tool answered, often JSON text; longer output is cut to \
                     {MAX_TOOL_OUTPUT_BYTES} bytes and marked"
                )
            },
            "attachments": {
                "type": "array",
                "description": "One per image block that follows the text block",
                "items": {
                    "type": "object",
                    "properties": {
                        "media_type": {"type": "string"},
                        "width": {"type": ["integer", "null"]},
                        "height": {"type": ["integer", "null"]},
                        "base64_bytes": {"type": "integer"}
                    },
                    "required": ["media_type", "width", "height", "base64_bytes"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["tool", "success", "output"],
        "additionalProperties": false
    })
}

/// The direct result object: `tool`, `success`, bounded `output`, optional attachments.
pub fn structured(o: &ToolOutcome) -> Value {
    let mut v = json!({"tool": o.tool, "success": o.success, "output": o.output});
    if !o.attachments.is_empty() {
        v["attachments"] = Value::Array(o.attachments.iter().map(attachment_meta).collect());
    }
    v
}

/// An outcome as an MCP result: the object as text and as `structuredContent`, then one
/// image block per attachment; `isError` when the operation failed.
pub fn to_result(o: &ToolOutcome, summary: Option<String>) -> CallToolResult {
    let value = structured(o);
    let mut content = vec![ContentBlock::text(
        summary.unwrap_or_else(|| value.to_string()),
    )];
    for a in &o.attachments {
        match image_block(a) {
            Ok(block) => content.push(block),
            Err(e) => return super::failure(format!("{}: {e}", o.tool)),
        }
    }
    let mut result = if o.success {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(value);
    result
}
