//! The only `unsafe` of this crate: what a worker that confines itself (netd, the Web
//! console) asks the kernel about itself before it does, before any thread exists (who it
//! runs as, whether `setuid(0)` works, its process flags, whether the kernel has
//! seccomp), the settings it makes then (non-dumpable, the open-file limit), and, for the
//! confinement tests, the calls the filter must stop ([`attempt`]). What these answers
//! mean is decided in [`crate::confine`]. Its capability sets are read by
//! `nl2sh_proto::sys::process`, which proto's own thread priorities need too.

use std::io;

/// The real uid.
pub fn real_uid() -> u32 {
    // SAFETY: getuid has no preconditions, touches no memory and cannot fail.
    unsafe { libc::getuid() }
}

/// The effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// Try `setuid(0)`; whether it succeeded. It fails for a process whose real, effective
/// and saved uids are not 0 and that holds no CAP_SETUID.
pub fn setuid_root_succeeds() -> bool {
    // SAFETY: setuid takes a plain integer and touches no memory of ours. If it succeeds
    // the caller refuses to start and exits; nothing relies on the identity staying
    // unchanged.
    unsafe { libc::setuid(0) == 0 }
}

/// Make this process non-dumpable: its `/proc/<pid>` entries then belong to root, so
/// another process of the same uid cannot read its memory, descriptors or environment,
/// nor attach to it, nor reach the host's mount namespace through its
/// `/proc/<pid>/root`.
pub fn forbid_inspection() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Who a worker runs as, and the process flags confinement relies on.
#[derive(Debug, Clone, Copy)]
pub struct ProcessState {
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    /// Threads of this process, if /proc says.
    pub threads: Option<usize>,
}

/// Read [`ProcessState`] (before the seccomp filter, which refuses these prctl reads, and
/// before Landlock, which puts /proc out of reach).
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

/// Raise the open-file soft limit to the hard limit: every connection costs a descriptor,
/// and the connection cap ([`crate::connections::HttpLimits::fitted`]) is sized against
/// this limit. Returns the new soft limit.
pub fn raise_open_file_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own and pass by pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we own; raising the soft
        // limit up to the hard limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
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

/// What the confinement tests try under a worker's filter (netd's debug-build test hook,
/// the Web console's confinement tests), each returning only if the kernel let the call
/// return (refused or, a confinement bug, allowed). Debug builds, and test builds that
/// ask for it (feature `test-attempts`), only: release builds contain none of this.
#[cfg(any(debug_assertions, feature = "test-attempts"))]
pub mod attempt {
    use std::io;

    fn result(rc: libc::c_long) -> io::Result<libc::c_long> {
        if rc == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    /// `execve("/bin/sh", ["sh", "-c", "exit 42"])`.
    pub fn execve() -> io::Error {
        let argv = [
            c"sh".as_ptr(),
            c"-c".as_ptr(),
            c"exit 42".as_ptr(),
            std::ptr::null(),
        ];
        let envp = [std::ptr::null()];
        // SAFETY: every pointer is to a NUL-terminated static string or null, and both
        // arrays end with null, as execve requires. Success replaces this process image,
        // which the test would see as exit status 42.
        unsafe { libc::execve(c"/bin/sh".as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        io::Error::last_os_error()
    }

    /// `socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0)`; the descriptor is closed again.
    pub fn socket(domain: libc::c_int) -> io::Result<()> {
        // SAFETY: socket takes integers only.
        let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        result(fd.into())?;
        // SAFETY: we own the descriptor just made and close it once.
        unsafe { libc::close(fd) };
        Ok(())
    }

    /// `ptrace(PTRACE_TRACEME)`, the first step of letting a tracer in.
    pub fn ptrace() -> io::Result<()> {
        let null = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: PTRACE_TRACEME ignores pid, addr and data; no memory of ours is touched.
        result(unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) }).map(drop)
    }

    /// `kill(pid, 0)`: only asks whether `pid` may be signalled.
    pub fn kill(pid: u32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        // SAFETY: kill takes integers only; signal 0 delivers nothing.
        result(unsafe { libc::kill(pid, 0) }.into()).map(drop)
    }

    /// `mmap` of one anonymous page readable, writable and executable.
    pub fn mmap_exec() -> io::Result<()> {
        // SAFETY: a fresh anonymous private mapping touches no existing memory; it is
        // unmapped again before returning.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            libc::munmap(page, 4096);
        }
        Ok(())
    }

    /// `unshare(CLONE_NEWUSER)`: a namespace of its own.
    pub fn unshare() -> io::Result<()> {
        // SAFETY: unshare takes flags only.
        result(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into()).map(drop)
    }

    /// `setuid(0)`.
    pub fn setuid() -> io::Result<()> {
        // SAFETY: setuid takes an integer only.
        result(unsafe { libc::setuid(0) }.into()).map(drop)
    }

    /// `tkill(<process id>, SIGABRT)`: what musl's `abort()` does on the main thread.
    pub fn abort_main_thread() -> io::Result<()> {
        let pid = libc::c_long::from(std::process::id());
        // SAFETY: tkill takes integers only; SIGABRT's default action ends the process.
        result(unsafe { libc::syscall(libc::SYS_tkill, pid, libc::SIGABRT) }).map(drop)
    }

    /// `prctl(PR_SET_DUMPABLE, 1)`: making itself inspectable again.
    pub fn dumpable() -> io::Result<()> {
        // SAFETY: prctl with integer arguments only.
        result(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) }.into()).map(drop)
    }
}

/// Identities a worker must refuse to start with, for the tests that prove it does (run
/// as root, in a child process: the change is for good). Debug builds, and test builds
/// that ask for it (feature `test-attempts`), only.
#[cfg(any(debug_assertions, feature = "test-attempts"))]
pub mod test_identity {
    use std::io;

    /// Become uids `real`, `effective` and `saved` (`setresuid`), keeping the permitted
    /// capabilities across the change if `keep_capabilities` (`PR_SET_KEEPCAPS`, which
    /// the kernel otherwise clears when no uid is 0 any more).
    pub fn switch(
        real: u32,
        effective: u32,
        saved: u32,
        keep_capabilities: bool,
    ) -> io::Result<()> {
        if keep_capabilities {
            // SAFETY: prctl with integer arguments only; touches no memory of ours.
            if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: setresuid takes integers only and touches no memory of ours.
        if unsafe { libc::setresuid(real, effective, saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
