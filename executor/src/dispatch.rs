//! The whole surface netd can reach in the executor: one `match` over `ExecutorRequest`.
//! Each `answer_x` here pairs with netd's `x` in its executor client
//! (`netd/src/executor.rs`).

use std::sync::Arc;

use nl2sh_proto::channels::{
    CallOrigin, Correlation, ExecutorRequest, ExecutorResponse, InvokeRequest,
};
use nl2sh_proto::rpc::{self, OutOfState};
use nl2sh_proto::topology::{Answerer, NetdExecutor};
use nl2sh_proto::FrameError;

use crate::Runtime;

/// Serve netd's requests until the channel closes (Ok) or carries a hostile frame (Err).
pub async fn serve_netd(
    end: Answerer<NetdExecutor>,
    runtime: Arc<Runtime>,
) -> Result<(), FrameError> {
    rpc::serve(end, move |req: ExecutorRequest| {
        let runtime = runtime.clone();
        async move { Ok::<_, OutOfState>(answer(&runtime, req).await) }
    })
    .await
}

pub async fn answer(runtime: &Runtime, req: ExecutorRequest) -> ExecutorResponse {
    match req {
        ExecutorRequest::Inspect => answer_inspect(runtime).await,
        ExecutorRequest::Catalog => answer_catalog(runtime),
        ExecutorRequest::Invoke(call) => answer_invoke(runtime, call).await,
        ExecutorRequest::ReadScreen {
            correlation,
            origin,
        } => answer_read_screen(runtime, correlation, origin).await,
        ExecutorRequest::Cancel { correlation } => answer_cancel(runtime, correlation),
        ExecutorRequest::Progress { correlation } => answer_progress(runtime, correlation).await,
    }
}

async fn answer_progress(runtime: &Runtime, correlation: Correlation) -> ExecutorResponse {
    ExecutorResponse::Progress(runtime.pipeline.progress(correlation).await)
}

fn answer_catalog(runtime: &Runtime) -> ExecutorResponse {
    ExecutorResponse::Catalog(runtime.pipeline.catalog())
}

async fn answer_invoke(runtime: &Runtime, call: InvokeRequest) -> ExecutorResponse {
    ExecutorResponse::Outcome(runtime.pipeline.invoke(call).await)
}

fn answer_cancel(runtime: &Runtime, correlation: Correlation) -> ExecutorResponse {
    ExecutorResponse::Cancelled {
        found: runtime.pipeline.cancel(correlation),
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
    correlation: Correlation,
    origin: CallOrigin,
) -> ExecutorResponse {
    let call = InvokeRequest {
        correlation,
        origin,
        task: None,
        tool: crate::tools::android::SCREEN_READ_TOOL.into(),
        arguments: "{}".into(),
        after_reading: Default::default(),
        client: None,
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
