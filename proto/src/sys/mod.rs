//! This crate's only `unsafe`: taking over descriptors a worker inherited from the
//! supervisor (claiming ownership of an fd number), the pidfd calls in [`pidfd`], this
//! process's capability sets in [`process`], and a thread's background priority in
//! [`thread`].

pub mod pidfd;
pub mod process;
pub mod thread;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// What an inherited descriptor must be before we claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    UnixStream,
    TcpListener,
}

/// Claim `fd` as ours after checking it is an open socket of the expected kind, and mark
/// it close-on-exec so nothing this process spawns inherits it.
pub fn take_inherited(fd: i32, expect: Expect) -> io::Result<OwnedFd> {
    // SAFETY: fstat writes into a zeroed, properly sized stat buffer; a bad fd is reported
    // through the return value, not undefined behaviour.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above; `st` outlives the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "inherited fd {fd} is not open: {}",
                io::Error::last_os_error()
            ),
        ));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {fd} is not a socket"),
        ));
    }
    let (want_domain, want_type) = match expect {
        Expect::UnixStream => (Some(libc::AF_UNIX), libc::SOCK_STREAM),
        Expect::TcpListener => (None, libc::SOCK_STREAM),
    };
    let domain = sockopt(fd, libc::SO_DOMAIN)?;
    let ty = sockopt(fd, libc::SO_TYPE)?;
    if want_domain.is_some_and(|d| d != domain) || ty != want_type {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {fd} is not a {expect:?} (domain {domain}, type {ty})"),
        ));
    }
    if expect == Expect::TcpListener {
        if domain != libc::AF_INET && domain != libc::AF_INET6 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fd {fd} is not TCP"),
            ));
        }
        if sockopt(fd, libc::SO_ACCEPTCONN)? != 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fd {fd} is not listening"),
            ));
        }
    }
    // SAFETY: F_SETFD on an fd we just checked is open; no memory is involved.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd is open (fstat succeeded), it was placed here for this process by the
    // supervisor, and nothing else in this process owns it: each number is taken once at
    // start-up by the role's entry point.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockopt(fd: i32, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes and `len` states the buffer size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Wrap an inherited channel for tokio.
pub fn inherited_channel(fd: i32) -> io::Result<tokio::net::UnixStream> {
    let owned = take_inherited(fd, Expect::UnixStream)?;
    let std = std::os::unix::net::UnixStream::from(owned);
    std.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(std)
}

/// At most two malloc arenas per process (glibc; elsewhere nothing to do). glibc gives
/// every thread that allocates its own arena, each holding freed memory of its own; a
/// worker has one runtime thread and a few short-lived helpers, which two arenas serve.
/// Call before threads exist.
pub fn limit_heap_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes only allocator tuning.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Give the heap memory freed since start back to the kernel (glibc keeps it otherwise):
/// called once a worker has started, after the allocations of starting up.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn refuses_a_closed_fd_and_a_non_socket() {
        assert!(take_inherited(987_654, Expect::UnixStream).is_err());
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let fd = file.into_raw_fd();
        assert!(take_inherited(fd, Expect::UnixStream).is_err());
        // SAFETY: test-only; we own this fd and close it once.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn accepts_a_unix_stream_and_refuses_it_as_a_listener() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = a.into_raw_fd();
        assert!(take_inherited(fd, Expect::TcpListener).is_err());
        let owned = take_inherited(fd, Expect::UnixStream).unwrap();
        drop(owned);
    }
}
