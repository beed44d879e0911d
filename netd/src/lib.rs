//! netd: the only nl2sh process that parses network bytes (docs/ARCHITECTURE.md, "The one rule"). It owns the
//! inherited TCP listener (or stdin/stdout), checks limits, the bearer token, Host and
//! Origin, speaks MCP with rmcp and A2A 1.0, runs delegated tasks with the built-in
//! Agent (task state stored by approvald), and asks the executor for everything else
//! over typed channels. It runs unprivileged and refuses to start otherwise, and
//! confines itself (seccomp allow-list, Landlock) before it reads a single byte from
//! anyone.

#![forbid(unsafe_code)]

pub mod a2a;
pub mod agent;
pub mod confine;
pub mod error;
pub mod executor;
pub mod http;
pub mod mcp;
nl2sh_http_worker::cfg_seccomp_filter! {
    pub mod seccomp;
}
pub mod store;
pub mod tasks;
#[cfg(debug_assertions)]
mod test_hook;
pub mod tool_calls;
pub mod tools;
pub mod worker;

use std::process::ExitCode;
use std::time::Duration;

pub use error::NetdError;
pub use http::{serve_http, serve_http_with, Backends, HttpLimits};
pub use mcp::McpServer;

/// Entry point of the hidden `netd` role, on its ends of the tree's channels (inherited
/// in production: `NetdEnds::inherited()`). Returns success only after a clean drain (or
/// the end of stdin in stdio mode).
pub fn run(ends: nl2sh_proto::topology::NetdEnds) -> ExitCode {
    // Before any thread exists (setuid and capabilities act per thread) and before the
    // first frame: netd running as root, able to become root again, or holding a
    // capability refuses rather than parse a stranger's bytes with privilege; what a
    // parser bug could reach from here on is fixed now (logged as `netd confined`).
    if let Err(e) = confine::apply() {
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
