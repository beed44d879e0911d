//! The crate's error type. Every failure that ends the worker is one of these; the
//! message never contains a secret (the token only ever travels inside `Secret`).

use nl2sh_proto::rpc::RpcError;
use nl2sh_proto::FrameError;

#[derive(Debug, thiserror::Error)]
pub enum NetdError {
    /// Privilege check failed: netd must never run with a way back to root.
    #[error("privileges: {0}")]
    Privileges(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("channel: {0}")]
    Frame(#[from] FrameError),
    #[error("rpc: {0}")]
    Rpc(#[from] RpcError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreClientError),
    #[error(transparent)]
    End(#[from] nl2sh_proto::topology::EndError),
    #[error(transparent)]
    Worker(#[from] nl2sh_proto::worker::WorkerError),
    /// A peer said something that is not allowed at this point of the lifecycle.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A peer channel ended while netd was serving; the supervisor takes the tree down.
    #[error("{0} channel closed")]
    PeerGone(&'static str),
    #[error("invalid settings: {0}")]
    Settings(String),
    #[error("timed out: {0}")]
    Timeout(&'static str),
}
