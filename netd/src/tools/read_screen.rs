//! `nl2sh_read_screen`: a text summary and exactly one native PNG/JPEG image block, or an
//! error.

use nl2sh_proto::channels::CallOrigin;
use nl2sh_proto::limits::MAX_SCREEN_BASE64_BYTES;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use tokio_util::sync::CancellationToken;

use super::call::{self, ExecutorClient};
use super::progress::Reporter;
use super::Hints;

pub const NAME: &str = "nl2sh_read_screen";

pub fn tool() -> Tool {
    let tool = Tool::new(
        NAME,
        format!(
            "Capture the device screen: a short text summary and one JPEG image (quality 80, \
             longest side at most 1280 px, smaller when needed to stay under {} MiB of \
             base64), with {{tool, success, output, attachments}} as structured content; the \
             output's `map` {{image: [W,H], screen: [x1,y1,x2,y2]}}, `scale` and `device` \
             place image pixels on the screen. Fails on devices without a screen.",
            MAX_SCREEN_BASE64_BYTES / (1024 * 1024)
        ),
        super::no_arguments_schema(),
    );
    super::describe(
        tool,
        "Read the screen",
        // A screenshot changes nothing and reaches nothing off the device.
        Hints::LOCAL_READ,
        call::output_schema(),
    )
}

pub async fn call(
    executor: &ExecutorClient,
    origin: CallOrigin,
    arguments: Option<&JsonObject>,
    cancel: &CancellationToken,
    reporter: Option<Reporter>,
) -> CallToolResult {
    if let Err(refused) = super::expect_no_arguments(NAME, arguments) {
        return refused;
    }
    let correlation = call::next_correlation();
    let reading = executor.read_screen(correlation, origin);
    let outcome = match call::run(executor, correlation, origin, cancel, reporter, reading).await {
        Ok(o) => o,
        Err(e) => return super::failure(format!("{NAME} failed: {e}")),
    };
    if !outcome.success {
        return call::to_result(&outcome, None);
    }
    if outcome.attachments.len() != 1 {
        return super::failure(format!(
            "{NAME} failed: expected one image, got {}",
            outcome.attachments.len()
        ));
    }
    let a = &outcome.attachments[0];
    let summary = format!(
        "Screen captured: {}x{} {} ({} bytes of base64).",
        a.width.map_or("?".into(), |w| w.to_string()),
        a.height.map_or("?".into(), |h| h.to_string()),
        if a.media_type == "image/jpeg" {
            "JPEG"
        } else {
            "PNG"
        },
        a.data_base64.len()
    );
    call::to_result(&outcome, Some(summary))
}
