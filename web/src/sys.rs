//! The only `unsafe` of this crate: asking the kernel who we are, proving that the way
//! back to root is closed, and the process-wide settings confinement needs. Runs first
//! thing in [`crate::run`], before any thread or runtime.

/// Refuse to go on if this process is root, can become root again, or holds any
/// capability.
///
/// The supervisor drops the console's identity between fork and exec
/// (docs/ARCHITECTURE.md, "Starting a worker"); this is the console's own check that it
/// happened: neither the real nor the effective uid is 0, `setuid(0)` fails (which also
/// covers a saved uid of 0 and a retained CAP_SETUID), and the effective and permitted
/// capability sets are empty (with no_new_privs nothing can refill them).
pub fn verify_unprivileged() -> Result<(), String> {
    // SAFETY: getuid/geteuid have no preconditions, touch no memory and cannot fail.
    let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if uid == 0 || euid == 0 {
        return Err(format!("it must not run as root (uid {uid}, euid {euid})"));
    }
    // SAFETY: setuid takes a plain integer and touches no memory of ours. If it succeeds
    // we are about to exit anyway; nothing relies on the identity staying unchanged.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(format!(
            "setuid(0) succeeded from euid {euid}: privileges were not dropped"
        ));
    }
    let caps = capabilities()?;
    if caps.effective != 0 || caps.permitted != 0 {
        return Err(format!(
            "it holds capabilities (effective {:#x}, permitted {:#x})",
            caps.effective, caps.permitted
        ));
    }
    Ok(())
}

/// The capability sets of this thread, 64 bits each.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
}

/// `struct __user_cap_header_struct` of `<linux/capability.h>`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `<linux/capability.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two data structs, 64 capabilities.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Read this thread's capability sets (`capget`; libc has no wrapper).
pub fn capabilities() -> Result<Capabilities, String> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget reads the header we own and, for version 3, writes exactly two
    // data structs into the array we own; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot read its capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    let wide = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    Ok(Capabilities {
        effective: wide(data[0].effective, data[1].effective),
        permitted: wide(data[0].permitted, data[1].permitted),
    })
}

/// Make this process non-dumpable: its `/proc/<pid>` entries then belong to root, so
/// another process of the same uid cannot read its memory, descriptors or environment
/// (the session cookies it passes on), nor attach to it.
pub fn forbid_inspection() -> Result<(), String> {
    // SAFETY: prctl with integer arguments only; touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(format!(
            "cannot make itself non-dumpable: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Who the console runs as, and the process flags confinement relies on.
#[derive(Debug, Clone, Copy)]
pub struct ProcessState {
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    /// Threads of this process, if /proc says.
    pub threads: Option<usize>,
}

/// Read [`ProcessState`] (before the seccomp filter, which refuses these calls).
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

/// What the confinement tests try under the filter, each returning only if the kernel
/// let the call return (refused or, a confinement bug, allowed).
#[cfg(test)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        // SAFETY: see verify_unprivileged.
        let euid = unsafe { libc::geteuid() };
        let result = verify_unprivileged();
        if euid == 0 {
            assert!(result.is_err());
        } else if capabilities().is_ok_and(|c| c.effective == 0 && c.permitted == 0) {
            // An ordinary test user cannot become root, so the check passes.
            assert!(result.is_ok(), "{result:?}");
        }
    }

    #[test]
    fn reads_its_own_capabilities() {
        let caps = capabilities().unwrap();
        // SAFETY: see verify_unprivileged.
        if unsafe { libc::geteuid() } == 0 {
            // Root (outside a user namespace that strips it) holds some.
            assert_ne!(caps.permitted, 0, "{caps:?}");
        }
        assert_eq!(caps.effective & !caps.permitted, 0, "{caps:?}");
    }
}
