//! The whole surface netd can reach in the executor: one `match` over `ExecutorRequest`.

use std::sync::Arc;

use tokio::net::UnixStream;

use nl2sh_proto::channels::{CallOrigin, ExecutorRequest, ExecutorResponse, InvokeRequest};
use nl2sh_proto::rpc;
use nl2sh_proto::FrameError;

use crate::Runtime;

/// Serve netd's requests until the channel closes (Ok) or carries a hostile frame (Err).
pub async fn serve_netd(stream: UnixStream, runtime: Arc<Runtime>) -> Result<(), FrameError> {
    rpc::serve(stream, move |req: ExecutorRequest| {
        let runtime = runtime.clone();
        async move { answer(&runtime, req).await }
    })
    .await
}

pub async fn answer(runtime: &Runtime, req: ExecutorRequest) -> ExecutorResponse {
    match req {
        ExecutorRequest::Inspect => answer_inspect(runtime).await,
        ExecutorRequest::Catalog => ExecutorResponse::Catalog(runtime.pipeline.catalog()),
        ExecutorRequest::Invoke(call) => {
            ExecutorResponse::Outcome(runtime.pipeline.invoke(call).await)
        }
        ExecutorRequest::ReadScreen { call_id, origin } => {
            answer_read_screen(runtime, call_id, origin).await
        }
        ExecutorRequest::Cancel { call_id } => ExecutorResponse::Cancelled {
            found: runtime.pipeline.cancel(call_id),
        },
    }
}

async fn answer_inspect(runtime: &Runtime) -> ExecutorResponse {
    let sandbox = runtime.pipeline.sandbox_status().await.to_json();
    ExecutorResponse::Inspect {
        json: runtime.environment.to_json_with(&[("sandbox", sandbox)]),
    }
}

/// A screen read is the screenshot tool through the same pipeline; its result must carry
/// exactly one image, or it is a failure.
async fn answer_read_screen(
    runtime: &Runtime,
    call_id: u64,
    origin: CallOrigin,
) -> ExecutorResponse {
    let call = InvokeRequest {
        call_id,
        origin,
        tool: crate::tools::android::SCREEN_READ_TOOL.into(),
        arguments: "{}".into(),
    };
    let mut outcome = runtime.pipeline.invoke(call).await;
    if outcome.success && outcome.attachments.len() != 1 {
        outcome.success = false;
        outcome.output = serde_json::json!({
            "error": format!("the screen read returned {} images instead of one", outcome.attachments.len())
        })
        .to_string();
        outcome.attachments.clear();
    }
    ExecutorResponse::Outcome(outcome)
}
