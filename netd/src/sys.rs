//! The only `unsafe` of this crate: the open-file limit netd sizes its connection cap
//! against, and the debug builds' confinement test hooks. What netd asks the kernel
//! about itself before it confines itself (who it runs as, whether the way back to root
//! is closed) is shared with the Web console, in `nl2sh_proto::sys::process`.

use crate::error::NetdError;

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
