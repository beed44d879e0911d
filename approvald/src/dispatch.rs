//! The whole surface each peer can reach in approvald: one `match` per channel.

use std::sync::Arc;

use tokio::net::UnixStream;

use nl2sh_proto::channels::{
    AuthorityRequest, AuthorityResponse, CliRequest, CliResponse, StoreRequest, StoreResponse,
};
use nl2sh_proto::rpc;
use nl2sh_proto::FrameError;

use crate::authority::Authority;

/// netd's store channel. Nothing here creates, lists or decides approvals.
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
        AuthorityRequest::Withdraw { call_id } => authority.withdraw(call_id),
    }
}

/// The local CLI over `protocol/approvals.sock`, after the peer's uid and the handshake
/// were checked (see [`crate::socket`]).
pub async fn serve_cli(stream: UnixStream, authority: Arc<Authority>) -> Result<(), FrameError> {
    rpc::serve(stream, move |req: CliRequest| {
        let authority = authority.clone();
        async move { answer_cli(&authority, req) }
    })
    .await
}

pub fn answer_cli(authority: &Authority, req: CliRequest) -> CliResponse {
    let done = |r: Result<(), _>| match r {
        Ok(()) => CliResponse::Done,
        Err((kind, message)) => CliResponse::Error { kind, message },
    };
    match req {
        CliRequest::ListPending => CliResponse::Pending(authority.list_pending()),
        CliRequest::Approve { id, phrase } => done(authority.approve(&id, phrase.as_deref())),
        CliRequest::Reject { id } => done(authority.reject(&id)),
    }
}
