//! The whole surface netd can reach in the executor: one `match` over `ExecutorRequest`.

use std::sync::Arc;

use tokio::net::UnixStream;

use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse};
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
        ExecutorRequest::Inspect => answer_inspect(runtime),
    }
}

fn answer_inspect(runtime: &Runtime) -> ExecutorResponse {
    ExecutorResponse::Inspect {
        json: runtime.environment.to_json(),
    }
}
