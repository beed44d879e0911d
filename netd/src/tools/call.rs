//! What the direct-tool MCP tools share: asking the executor for one call and turning its
//! `ToolOutcome` into an MCP result (text content + `structuredContent`, native image
//! blocks for attachments, `isError` when the operation failed).

use std::sync::atomic::{AtomicU64, Ordering};

use nl2sh_proto::channels::{
    Attachment, CallOrigin, ExecutorRequest, ExecutorResponse, ToolOutcome,
};
use nl2sh_proto::limits::MAX_SCREEN_BASE64_BYTES;
use nl2sh_proto::rpc::RpcClient;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub type ExecutorClient = RpcClient<ExecutorRequest, ExecutorResponse>;

/// Call ids are unique for this netd's lifetime; the executor refuses duplicates anyway.
static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

pub fn next_call_id() -> u64 {
    NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed)
}

/// Send `request` (an Invoke or ReadScreen carrying `call_id`) and wait for its outcome.
///
/// `cancel` is the MCP request's cancellation. It is honoured only over stdio, where it
/// means the client sent `notifications/cancelled` (or went away): over stateless HTTP a
/// cancellation cannot reach a running request, and a dropped connection must not stop
/// (or un-approve) work already under way.
pub async fn run(
    executor: &ExecutorClient,
    request: ExecutorRequest,
    call_id: u64,
    origin: CallOrigin,
    cancel: &CancellationToken,
) -> Result<ToolOutcome, String> {
    let call = executor.call(&request);
    tokio::pin!(call);
    let answer = if origin == CallOrigin::McpStdio {
        tokio::select! {
            a = &mut call => a,
            () = cancel.cancelled() => {
                let _ = executor.call(&ExecutorRequest::Cancel { call_id }).await;
                call.await
            }
        }
    } else {
        call.await
    };
    match answer {
        Ok(ExecutorResponse::Outcome(o)) => Ok(o),
        Ok(ExecutorResponse::Error(e)) => Err(e.message),
        Ok(_) => Err("the executor answered out of place".into()),
        Err(e) => Err(format!("the executor is unavailable ({e})")),
    }
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
