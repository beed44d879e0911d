//! `nl2sh protocol token`: the token the running service accepts, for an owner's console
//! that cannot read the service's log (the root manager's WebUI). Owner-only as
//! `protocol approve` is: it first connects to approvald on approvals.sock, whose peer
//! check refuses another user and every process of the service's own tree (a tool
//! command), and only then reads the token from discovery (`protocol/connection.json`,
//! private to the service's user), as the Web console's Reveal does.

use std::path::PathBuf;
use std::process::ExitCode;

use nl2sh_proto::display::Shown;
use nl2sh_proto::Secret;

use crate::config;
use crate::exit::Exit;
use crate::local::{connect, fail, local_call};
use crate::state::{self, Discovered};

/// Print the running service's token on one line (exit 3 when nothing serves HTTP).
pub fn print(config_arg: Option<PathBuf>) -> ExitCode {
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    if let Err((code, message)) = rt.block_on(connect(&config_path, &paths.approvals_sock)) {
        return fail(code, message);
    }
    let identity = config::identity(&config::absolute(&config_path));
    let info = match state::discover(&paths, &identity) {
        Ok(Discovered::Live(info)) => info,
        Ok(_) => {
            return fail(
                Exit::NotRunning,
                format!("no nl2sh service is running for {}", config_path.display()),
            )
        }
        Err(e) => return fail(Exit::Failure, format!("cannot read discovery: {e}")),
    };
    match info.token.map(Secret::new) {
        Some(token) => {
            println!("{}", token.expose());
            ExitCode::SUCCESS
        }
        None => fail(
            Exit::NotRunning,
            format!(
                "the nl2sh process for {} (pid {}, transport {}) serves no MCP/A2A over HTTP, \
                 so there is no token",
                config_path.display(),
                info.pid,
                Shown::new(&info.transport)
            ),
        ),
    }
}
