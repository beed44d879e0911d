//! The whole surface each peer can reach in approvald: one `match` per channel.

use std::sync::Arc;

use tokio::net::UnixStream;

use nl2sh_proto::channels::{AuthorityRequest, AuthorityResponse, StoreRequest, StoreResponse};
use nl2sh_proto::rpc;
use nl2sh_proto::FrameError;

use crate::authority::Authority;

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
pub async fn serve_executor(
    stream: UnixStream,
    authority: Arc<Authority>,
) -> Result<(), FrameError> {
    rpc::serve(stream, move |req: AuthorityRequest| {
        let authority = authority.clone();
        async move { answer_authority(&authority, req).await }
    })
    .await
}

pub async fn answer_authority(authority: &Authority, req: AuthorityRequest) -> AuthorityResponse {
    match req {
        AuthorityRequest::Ping => AuthorityResponse::Pong,
        AuthorityRequest::Decide(summary) => authority.decide(summary).await,
        AuthorityRequest::Finished(result) => authority.finished(result).await,
        // Nothing can be pending yet: local approvals are not implemented.
        AuthorityRequest::Withdraw { .. } => AuthorityResponse::Recorded,
    }
}
