//! The pidfd system calls and `SO_PEERPIDFD`, used by approvald's `peer` module to tell
//! who is on the other end of `approvals.sock` (approvald itself has no `unsafe`). Each wrapper
//! returns an owned descriptor or an `io::Error` carrying the raw errno, so callers can
//! tell "not supported by this kernel" (`ENOSYS`, `ENOPROTOOPT`) from "that process is
//! gone" (`ESRCH`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `pidfd_open(pid, 0)` (Linux 5.3): a descriptor that refers to the process `pid` names
/// right now, and keeps referring to that process even after the pid is reused.
/// `ENOSYS` when the kernel has no pidfds, `ESRCH` when there is no such process.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    let flags: libc::c_uint = 0;
    // SAFETY: pidfd_open takes two integers and reads or writes no memory of ours; the
    // syscall number comes from libc for this architecture.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    own(rc)
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)` (Linux 5.1). With `sig == 0` nothing is
/// sent: `Ok` (or `EPERM`, for a process of another user) means the process has not been
/// reaped yet, so its pid still names it; `ESRCH` means it is gone.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    let info: *const libc::siginfo_t = std::ptr::null();
    let flags: libc::c_uint = 0;
    // SAFETY: the descriptor is borrowed, so it stays open for the call; a null siginfo
    // is allowed (the kernel fills in a default one) and nothing else is a pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            info,
            flags,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt(SOL_SOCKET, SO_PEERPIDFD)` (Linux 6.5): a pidfd for the process that
/// connected to `socket` (the one SO_PEERCRED names), taken by the kernel at connect
/// time, so it cannot be a later process that reused the pid. `ENOPROTOOPT` on older
/// kernels.
pub fn peer_pidfd(socket: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let int_len = std::mem::size_of::<libc::c_int>();
    let mut len = libc::socklen_t::try_from(int_len).map_err(io::Error::other)?;
    // SAFETY: `fd` and `len` are live locals of the sizes the kernel is told (`len` is
    // the size of `fd`); the socket descriptor is borrowed, so it stays open.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            std::ptr::from_mut(&mut fd).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let owned = own(libc::c_long::from(fd))?;
    if usize::try_from(len).ok() != Some(int_len) {
        // `owned` is closed on the way out.
        return Err(io::Error::other(format!(
            "SO_PEERPIDFD returned {len} bytes, expected {int_len}"
        )));
    }
    Ok(owned)
}

/// Own the descriptor a successful call returned.
fn own(fd: libc::c_long) -> io::Result<OwnedFd> {
    let raw = libc::c_int::try_from(fd)
        .ok()
        .filter(|raw| *raw >= 0)
        .ok_or_else(|| io::Error::other(format!("the kernel returned descriptor {fd}")))?;
    // SAFETY: the call that returned `raw` just created it for us (pidfd_open, or the
    // SO_PEERPIDFD getsockopt, install a new descriptor); nothing else owns or closes it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Make the process that `cmd` starts a child subreaper (kept across `exec`), so
/// orphans below it are re-parented to it as they are below the supervisor (tests).
pub fn subreaper_on_spawn(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let hook = || {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: the hook makes one async-signal-safe system call (prctl) and allocates
    // nothing (an errno `io::Error` is a plain integer), which is what `pre_exec`
    // requires of code that runs in the forked child.
    unsafe {
        cmd.pre_exec(hook);
    }
}
