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
pub mod http;
pub mod views;
pub mod worker;

use std::process::ExitCode;

/// Entry point of the hidden `web` role, on its ends of the tree's channels (inherited
/// in production: `WebEnds::inherited()`).
pub fn run(ends: nl2sh_proto::topology::WebEnds) -> ExitCode {
    // The supervisor dropped our identity before exec; a console running as root (a
    // misconfigured launch) refuses rather than parse a browser's bytes with privilege.
    if nix::unistd::geteuid().is_root() || nix::unistd::getuid().is_root() {
        tracing::error!("web refuses to start: it must not run as root");
        return ExitCode::FAILURE;
    }
    nl2sh_proto::worker::run_single_threaded(
        "web",
        worker::serve(ends, worker::Listener::Inherited),
    )
}
