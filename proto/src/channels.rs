//! One request/response pair per channel of DESIGN.md §3. What a peer may ask for is
//! exactly the variants of the request type it holds; nothing else decodes.
//!
//! JSON values cannot cross in bincode (`deserialize_any`), so structured results travel
//! as bounded JSON text that the receiver parses.

use serde::{Deserialize, Serialize};

use crate::frame::Wire;
use crate::secret::Secret;

macro_rules! wire {
    ($ty:ty, $tag:expr) => {
        impl Wire for $ty {
            const TAG: u16 = $tag;
            const NAME: &'static str = stringify!($ty);
        }
    };
}

/// Errors a worker reports in its own response type; the channel stays open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteError {
    pub kind: RemoteErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoteErrorKind {
    InvalidRequest,
    Unavailable,
    Internal,
}

// ---- supervisor ⇄ each worker -------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum ControlRequest {
    /// Sent once, right after the handshake: what this worker needs to serve.
    Start(WorkerSettings),
    /// Stop taking new work and let in-flight work settle within the grace.
    Drain { grace_ms: u64 },
}
wire!(ControlRequest, 0x0101);

#[derive(Debug, Serialize, Deserialize)]
pub enum ControlResponse {
    Started,
    Drained,
    Refused(String),
}
wire!(ControlResponse, 0x0102);

#[derive(Debug, Serialize, Deserialize)]
pub enum WorkerSettings {
    Netd(NetdSettings),
    Executor(ExecutorSettings),
    Approvald(ApprovaldSettings),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NetdTransport {
    /// HTTP on the listener inherited at the netd listener fd.
    Http(HttpSettings),
    /// MCP on the inherited stdin/stdout; no token (the launching user is the caller).
    Stdio,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpSettings {
    /// Bearer token; reaches netd only over this channel.
    pub token: Secret,
    /// Advertised origin, `scheme://host[:port]`, no trailing slash.
    pub advertised_origin: String,
    /// Authorities (`host:port`) a request's Host header may name besides the advertised
    /// one: the listener's own address(es).
    pub local_authorities: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NetdSettings {
    pub transport: NetdTransport,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ExecutorSettings {
    /// Path of the configuration file this tree serves, for diagnostics.
    pub config_path: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ApprovaldSettings {
    pub state_dir: String,
}

// ---- netd → executor ------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum ExecutorRequest {
    /// The fixed device environment object plus build identity.
    Inspect,
}
wire!(ExecutorRequest, 0x0201);

#[derive(Debug, Serialize, Deserialize)]
pub enum ExecutorResponse {
    /// JSON object text, at most `MAX_JSON_TEXT_BYTES`.
    Inspect {
        json: String,
    },
    Error(RemoteError),
}
wire!(ExecutorResponse, 0x0202);

// ---- netd → approvald -----------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum StoreRequest {
    /// Liveness: approvald answers once its store is open.
    Ping,
}
wire!(StoreRequest, 0x0301);

#[derive(Debug, Serialize, Deserialize)]
pub enum StoreResponse {
    Pong,
    Error(RemoteError),
}
wire!(StoreResponse, 0x0302);

// ---- executor → approvald -------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum AuthorityRequest {
    /// Liveness: approvald answers once its store is open.
    Ping,
}
wire!(AuthorityRequest, 0x0401);

#[derive(Debug, Serialize, Deserialize)]
pub enum AuthorityResponse {
    Pong,
    Error(RemoteError),
}
wire!(AuthorityResponse, 0x0402);

/// Inherited descriptor numbers of each worker role. The supervisor places channels here
/// and closes everything else; a worker refuses to start without them.
pub mod fds {
    /// Every worker: its supervisor control channel.
    pub const SUPERVISOR: i32 = 3;
    /// netd: client end of netd → executor.
    pub const NETD_EXECUTOR: i32 = 4;
    /// netd: client end of netd → approvald.
    pub const NETD_APPROVALD: i32 = 5;
    /// netd: the TCP listener (HTTP transport only).
    pub const NETD_LISTENER: i32 = 6;
    /// executor: server end of netd → executor.
    pub const EXECUTOR_NETD: i32 = 4;
    /// executor: client end of executor → approvald.
    pub const EXECUTOR_APPROVALD: i32 = 5;
    /// approvald: server end of netd → approvald.
    pub const APPROVALD_NETD: i32 = 4;
    /// approvald: server end of executor → approvald.
    pub const APPROVALD_EXECUTOR: i32 = 5;
}
