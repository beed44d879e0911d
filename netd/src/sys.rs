//! The only `unsafe` of this crate: asking the kernel who we are, proving that the way
//! back to root is closed, and the few process-wide settings confinement needs. Runs
//! first thing in [`crate::run`], before any thread.

use crate::error::NetdError;

/// Refuse to go on if this process is root or can become root again.
///
/// The supervisor drops netd's identity between fork and exec (docs/ARCHITECTURE.md, "Starting a worker"); this is the
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
/// another process of the same uid (should one ever run as netd's uid) cannot read its
/// memory, descriptors or environment, nor reach the host's
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

/// Raise the open-file soft limit to the hard limit: every connection costs a descriptor,
/// and the connection cap in [`crate::http`] is sized against this limit. Returns the new
/// soft limit.
pub fn raise_open_file_limit() -> Result<u64, NetdError> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own and pass by pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(NetdError::Io(std::io::Error::last_os_error()));
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we own; raising the soft
        // limit up to the hard limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(NetdError::Io(std::io::Error::last_os_error()));
        }
        limit = raised;
    }
    Ok(rlim_to_u64(limit.rlim_cur))
}

// `rlim_t` is `u64` on 64-bit Linux; the conversion is real on some 32-bit targets.
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn rlim_to_u64(value: libc::rlim_t) -> u64 {
    value as u64
}

/// The current open-file soft limit (0 if it cannot be read).
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own and pass by pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    rlim_to_u64(limit.rlim_cur)
}

/// Who netd runs as, and the process flags confinement relies on.
#[derive(Debug, Clone, Copy)]
pub struct ProcessState {
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    /// Threads of this process, if /proc says.
    pub threads: Option<usize>,
}

/// Read [`ProcessState`] (before the seccomp filter, which refuses these prctl reads).
pub fn process_state() -> ProcessState {
    // SAFETY: geteuid/getegid have no preconditions, touch no memory and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: prctl with integer arguments only; these options only read a flag.
    let no_new_privs = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
    // SAFETY: as above.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) } != 0;
    let threads = std::fs::read_dir("/proc/self/task").ok().map(|d| d.count());
    ProcessState {
        uid,
        gid,
        no_new_privs,
        dumpable,
        threads,
    }
}

/// Does this kernel have seccomp at all? (`PR_GET_SECCOMP` fails with EINVAL without it.)
pub fn kernel_has_seccomp() -> bool {
    // SAFETY: prctl with integer arguments only; reads our seccomp mode.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// TEST HOOK (debug builds only): `execve("/bin/sh", ["sh", "-c", "exit 42"])`. Returns
/// only if the kernel refused it; under netd's filter the process dies instead.
#[cfg(debug_assertions)]
pub fn attempt_execve() -> std::io::Error {
    let path = c"/bin/sh";
    let argv = [
        c"sh".as_ptr(),
        c"-c".as_ptr(),
        c"exit 42".as_ptr(),
        std::ptr::null(),
    ];
    let envp = [std::ptr::null()];
    // SAFETY: every pointer is to a NUL-terminated static string or null, and both
    // arrays end with null, as execve requires. On success this process image is gone,
    // which is what the test hook wants to show cannot happen.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    std::io::Error::last_os_error()
}

/// TEST HOOK (debug builds only): `ptrace(PTRACE_TRACEME)`, the first step of letting a
/// tracer in. Under netd's filter the process dies instead of returning.
#[cfg(debug_assertions)]
pub fn attempt_ptrace() -> std::io::Result<()> {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_TRACEME ignores pid, addr and data; no memory of ours is touched.
    let rc = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
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
