//! The only `unsafe` of this crate, and only in its tests: the system calls the
//! confinement tests (`confine.rs`) try under the filter. What the console asks the
//! kernel about itself before it confines itself (who it runs as, its capabilities, its
//! process flags) is shared with netd, in `nl2sh_proto::sys::process`.

/// What the confinement tests try under the filter, each returning only if the kernel
/// let the call return (refused or, a confinement bug, allowed).
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
        // arrays end with null, as execve requires. Success replaces this test process,
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
