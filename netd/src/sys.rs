//! The only `unsafe` of this crate: asking the kernel who we are and proving that the
//! way back to root is closed. Runs first thing in [`crate::run`], before any thread.

use crate::error::NetdError;

/// Refuse to go on if this process is root or can become root again.
///
/// The supervisor drops netd's identity between fork and exec (DESIGN.md §9); this is the
/// worker's own check that it happened: the effective uid is not 0, and `setuid(0)`
/// fails (which also covers a real or saved uid of 0, and a retained CAP_SETUID).
pub fn verify_unprivileged() -> Result<(), NetdError> {
    // SAFETY: geteuid has no preconditions, touches no memory and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return Err(NetdError::Privileges("netd must not run as root".into()));
    }
    // SAFETY: setuid takes a plain integer and touches no memory of ours. If it succeeds
    // we are about to exit anyway; nothing relies on the identity staying unchanged.
    let rc = unsafe { libc::setuid(0) };
    if rc == 0 {
        return Err(NetdError::Privileges(format!(
            "setuid(0) succeeded from euid {euid}: privileges were not dropped"
        )));
    }
    Ok(())
}

/// Make this process non-dumpable: its `/proc/<pid>` entries then belong to root, so
/// another process of the same uid (the read-only sandbox runs as `nobody` too, by
/// default) cannot read its memory, descriptors or environment, nor reach the host's
/// mount namespace through its `/proc/<pid>/root`.
pub fn forbid_inspection() -> Result<(), NetdError> {
    // SAFETY: prctl with integer arguments only; touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(NetdError::Privileges(format!(
            "cannot make netd non-dumpable: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        // SAFETY: see verify_unprivileged.
        let euid = unsafe { libc::geteuid() };
        let result = verify_unprivileged();
        if euid == 0 {
            assert!(matches!(result, Err(NetdError::Privileges(_))));
        } else {
            // An ordinary test user cannot become root, so the check passes.
            assert!(result.is_ok(), "{result:?}");
        }
    }
}
