//! The whole surface each peer can reach in approvald: one `match` per channel.

use tokio::net::UnixStream;

use nl2sh_proto::channels::{AuthorityRequest, AuthorityResponse, StoreRequest, StoreResponse};
use nl2sh_proto::rpc;
use nl2sh_proto::FrameError;

/// netd's store channel.
pub async fn serve_netd(stream: UnixStream) -> Result<(), FrameError> {
    rpc::serve(stream, |req: StoreRequest| async move { answer_store(req) }).await
}

pub fn answer_store(req: StoreRequest) -> StoreResponse {
    match req {
        StoreRequest::Ping => StoreResponse::Pong,
    }
}

/// The executor's authority channel.
pub async fn serve_executor(stream: UnixStream) -> Result<(), FrameError> {
    rpc::serve(stream, |req: AuthorityRequest| async move {
        answer_authority(req)
    })
    .await
}

pub fn answer_authority(req: AuthorityRequest) -> AuthorityResponse {
    match req {
        AuthorityRequest::Ping => AuthorityResponse::Pong,
    }
}
