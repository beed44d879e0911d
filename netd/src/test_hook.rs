//! TEST HOOK, debug builds only; release builds contain none of this module.
//!
//! The supervisor forwards `NL2SH_TEST_NETD_VIOLATION` (netd's own environment is cleared)
//! as `NetdSettings::test_violation`. Right after netd reported `Started`, before it serves
//! anything, it attempts the named violation so an end-to-end test can watch confinement
//! stop it: `execve` (run `/bin/sh`), `ptrace` (PTRACE_TRACEME) or `open:<path>` (open a
//! file or directory, e.g. the state directory).

use nl2sh_http_worker::sys::attempt;

use crate::error::NetdError;

/// Attempt `violation`. If this returns at all, the kernel did not kill netd; the error
/// ends netd with a failure either way, saying whether the attempt was refused or (a
/// confinement bug) succeeded.
pub fn attempt(violation: &str) -> NetdError {
    tracing::warn!(violation, "TEST HOOK: attempting a confinement violation");
    let outcome = if violation == "execve" {
        Err(attempt::execve())
    } else if violation == "ptrace" {
        attempt::ptrace()
    } else if let Some(path) = violation.strip_prefix("open:") {
        std::fs::File::open(path).map(drop)
    } else {
        return NetdError::Settings(format!("unknown test violation {violation:?}"));
    };
    match outcome {
        Ok(()) => {
            tracing::error!(violation, "TEST HOOK: the violation was NOT stopped");
            NetdError::Privileges(format!("test violation {violation} succeeded"))
        }
        Err(e) => {
            tracing::warn!(violation, error = %e, "TEST HOOK: the violation was refused");
            NetdError::Privileges(format!("test violation {violation} refused: {e}"))
        }
    }
}
