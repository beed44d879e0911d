//! The Web console: the device owner's pages in a browser (docs/WEB.md). A role of its
//! own in the tree, with its own unprivileged uid (neither netd's nor a sandboxed
//! call's). It serves a fixed set of pages and a small JSON API on its own listener, and
//! decides nothing itself:
//!
//! * who is the owner is approvald's to say: every API request carries the session
//!   cookie (and, for a change, the CSRF token) to approvald over `WebApprovald`, which
//!   keeps only hashes of both and answers or refuses;
//! * what runs for this configuration is the supervisor's to say (`WebSupervisor`,
//!   discovery read afresh);
//! * netd is never reached, and the Web console gains nothing of netd's channels.
//!
//! Reaching the port makes nobody the owner: a session starts only from a one-time code
//! that `nl2sh web login` gets from approvald over `approvals.sock`, whose peer check
//! refuses every process of the tree.

#![forbid(unsafe_code)]

pub mod assets;
pub mod confine;
pub mod http;
nl2sh_http_worker::cfg_seccomp_filter! {
    pub mod seccomp;
}
pub mod views;
pub mod worker;

use std::process::ExitCode;

use nl2sh_proto::channels::fds;
use nl2sh_proto::sys::{take_inherited, Expect};

/// Entry point of the hidden `web` role, on its ends of the tree's channels (inherited
/// in production: `WebEnds::inherited()`).
pub fn run(ends: nl2sh_proto::topology::WebEnds) -> ExitCode {
    // The listener is claimed now, like the channels: once confined the console inspects
    // no descriptor (the filter refuses fstat). If it cannot be, the worker tries again
    // after `Start` and tells the supervisor why it refuses.
    let listener = match take_inherited(fds::WEB_LISTENER, Expect::TcpListener) {
        Ok(fd) => worker::Listener::Given(std::net::TcpListener::from(fd)),
        Err(e) => {
            tracing::warn!(error = %e, "web: no inherited listener");
            worker::Listener::Inherited
        }
    };
    // Before the runtime and any thread exist, and before a byte is read from anyone:
    // a console running as root, able to become root again, or holding a capability
    // refuses rather than parse a browser's bytes with privilege; what a parser bug
    // could reach from here on is fixed now (docs/SECURITY.md; logged as `web confined`).
    if let Err(e) = confine::apply() {
        tracing::error!(error = %e, "web refuses to start");
        return ExitCode::FAILURE;
    }
    nl2sh_proto::worker::run_single_threaded("web", worker::serve(ends, listener))
}
