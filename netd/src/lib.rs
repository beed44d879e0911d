//! netd: the only nl2sh process that parses network bytes (DESIGN.md §1). It owns the
//! inherited TCP listener (or stdin/stdout), checks limits, the bearer token, Host and
//! Origin, speaks MCP with rmcp, and asks the executor for everything else over typed
//! channels. It runs unprivileged and refuses to start otherwise.

#![deny(unsafe_code)]

pub mod error;
pub mod executor;
pub mod http;
pub mod mcp;
#[allow(unsafe_code)] // the one room for it in this crate, each block with a SAFETY comment
mod sys;
pub mod tools;
pub mod worker;

use std::process::ExitCode;
use std::time::Duration;

pub use error::NetdError;
pub use http::serve_http;
pub use mcp::McpServer;

/// Entry point of the hidden `netd` role, on its ends of the tree's channels (inherited
/// in production: `NetdEnds::inherited()`). Returns success only after a clean drain (or
/// the end of stdin in stdio mode).
pub fn run(ends: nl2sh_proto::topology::NetdEnds) -> ExitCode {
    // Before any thread exists: setuid and capabilities act per thread.
    if let Err(e) = sys::verify_unprivileged().and_then(|()| sys::forbid_inspection()) {
        tracing::error!(error = %e, "netd refuses to start");
        return ExitCode::FAILURE;
    }
    // One thread: on a two-core phone the other processes of the tree need the other
    // core, and two netd threads mostly wake each other (measured by benches/invoke.rs).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "netd: cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(worker::serve(ends, worker::Listener::Inherited));
    // A pending stdin read cannot be cancelled; do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => {
            tracing::info!("netd stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "netd stopped");
            ExitCode::FAILURE
        }
    }
}
