//! The supervisor's only `unsafe`: what runs in a freshly forked worker or managed service
//! before `exec` (async-signal-safe: raw syscalls on data prepared before `fork`, no
//! allocation, no locks). The pidfd calls `service stop` signals through are proto's
//! (`nl2sh_proto::sys::pidfd`).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Most descriptors a worker inherits (beyond stdio).
pub const MAX_INHERITED: usize = 8;
/// Temporary descriptors are moved above every target number first, so placing one fd
/// can never overwrite another that has not been placed yet.
const SHUFFLE_FLOOR: libc::c_int = 64;

/// An identity to drop to (netd).
#[derive(Debug, Clone, Copy)]
pub struct DropTo {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: [libc::gid_t; 4],
    pub n_groups: usize,
    /// Highest capability number of this kernel (/proc/sys/kernel/cap_last_cap).
    pub cap_last: u32,
}

/// Everything the child does between fork and exec, decided before fork.
#[derive(Debug, Clone, Copy)]
pub struct ChildPlan {
    /// (descriptor in the supervisor, number in the worker)
    pub fds: [(libc::c_int, libc::c_int); MAX_INHERITED],
    pub n_fds: usize,
    /// The supervisor's pid: a worker whose parent already died must not run.
    pub parent: libc::pid_t,
    /// Drop identity and capabilities (only when the supervisor runs as root).
    pub drop_to: Option<DropTo>,
    /// Set no_new_privs (netd), never for the supervisor itself.
    pub no_new_privs: bool,
}

/// Install `plan` as the command's pre-exec hook.
pub fn install(cmd: &mut Command, plan: ChildPlan) {
    let hook = move || child_setup(&plan);
    // SAFETY: `child_setup` only makes async-signal-safe system calls on the copied plan
    // (plain integers and arrays); it allocates nothing and takes no locks, which is what
    // `pre_exec` requires of code that runs in the forked child.
    unsafe {
        cmd.pre_exec(hook);
    }
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn child_setup(plan: &ChildPlan) -> io::Result<()> {
    // 1. Place the inherited channels at their fixed numbers, then close everything else.
    let mut tmp = [-1 as libc::c_int; MAX_INHERITED];
    let mut max_target = 2;
    let n = plan.n_fds.min(MAX_INHERITED);
    for (slot, &(src, _)) in tmp.iter_mut().zip(&plan.fds[..n]) {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor owned by the parent's copy; no memory.
        *slot = unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, SHUFFLE_FLOOR) };
        check(*slot as libc::c_long)?;
    }
    for (&moved, &(_, target)) in tmp.iter().zip(&plan.fds[..n]) {
        // SAFETY: dup2 of an fd we just created; it clears CLOEXEC on `target`.
        check(unsafe { libc::dup2(moved, target) } as libc::c_long)?;
        max_target = max_target.max(target);
    }
    close_from(max_target + 1);

    // 2. Identity, in the order that works (docs/ARCHITECTURE.md, "Starting a worker"): bounding set while still
    //    root, groups, gid, uid, then capability sets, death signal, no_new_privs.
    if let Some(d) = plan.drop_to {
        for cap in 0..=d.cap_last {
            // SAFETY: prctl with integer arguments only.
            let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
            check(rc as libc::c_long)?;
        }
        // SAFETY: setgroups reads `n_groups` ids from a live array in the plan.
        check(unsafe { libc::setgroups(d.n_groups.min(4), d.groups.as_ptr()) } as libc::c_long)?;
        // SAFETY: integer arguments only.
        check(unsafe { libc::setresgid(d.gid, d.gid, d.gid) } as libc::c_long)?;
        // SAFETY: integer arguments only.
        check(unsafe { libc::setresuid(d.uid, d.uid, d.uid) } as libc::c_long)?;
        clear_capabilities()?;
    }
    // Ambient capabilities would survive exec; clear them for every worker. Old kernels
    // without ambient capabilities answer EINVAL, which means there are none.
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(io::Error::last_os_error());
    }
    // Stop requests (a terminal's Ctrl-C, `timeout`, an init system signalling the whole
    // group) are the supervisor's to handle: it drains the workers in order over their
    // control channels. Ignored dispositions survive exec.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing SIG_IGN is async-signal-safe and touches no memory.
        if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    // After the uid change, which clears it.
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } as libc::c_long)?;
    // SAFETY: getppid has no arguments.
    if unsafe { libc::getppid() } != plan.parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    if plan.no_new_privs {
        // SAFETY: prctl with integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)?;
    }
    if plan.drop_to.is_some() {
        // The drop must be irrevocable: regaining root has to fail.
        // SAFETY: integer arguments only.
        if unsafe { libc::setuid(0) } == 0 {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// Empty effective, permitted and inheritable sets (setresuid clears the first two;
/// inheritable must be cleared explicitly).
fn clear_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a v3 header and two data structs, both live on this stack.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    check(rc)
}

/// Close every descriptor from `first` up.
fn close_from(first: libc::c_int) {
    // SAFETY: close_range with integer arguments; closing fds we own in the child.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        )
    };
    if rc == 0 {
        return;
    }
    // Kernels before 5.9: close one by one up to the descriptor limit.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `lim`, which lives on this stack.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        4096
    };
    for fd in first..max {
        // SAFETY: closing a descriptor number; EBADF for unused numbers is harmless.
        unsafe { libc::close(fd) };
    }
}

/// Let a write to a closed pipe end this process quietly, as it ends `cat` or `ls`:
/// `nl2sh service status | head -1` then stops at the broken pipe instead of failing on
/// it. Only for the one-shot commands; the service itself keeps SIGPIPE ignored (a peer
/// that hangs up is an error it handles, not its end). A program it starts gets Rust's
/// own setting back at its start.
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL installs no handler (nothing of ours runs in signal context); the
    // call changes one process-wide disposition and has no memory effects.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Name the process so `ps` and /proc/<pid>/comm show its role.
pub fn set_process_name(role: &str) {
    let mut buf = [0u8; 16];
    let name = format!("nl2sh-{role}");
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from `buf`.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// `close_range` flag: mark instead of close (Linux 5.11). Not in every libc target module.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Make the command's child a background service: a session of its own (no controlling
/// terminal, so a closing terminal's SIGHUP never reaches it) and every inherited
/// descriptor above stderr closed at exec (a root manager's script may leave some open).
/// The umask is left as the caller's, so tools behave as under `protocol serve` from the
/// same shell; the service's own files get explicit modes.
pub fn detach(cmd: &mut Command) {
    // SAFETY: `detach_setup` makes only async-signal-safe system calls with integer
    // arguments; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(detach_setup);
    }
}

fn detach_setup() -> io::Result<()> {
    // SAFETY: setsid has no arguments; a forked child is never a group leader, so it
    // succeeds.
    check(unsafe { libc::setsid() } as libc::c_long)?;
    // No signal blocked: std leaves the parent's mask to the child, and a caller that
    // reads SIGTERM from a signalfd (the terminal console) blocks it, which would leave
    // the service deaf to `service stop`.
    let mut none = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set on this stack; sigprocmask then reads it.
    // Both are async-signal-safe.
    unsafe {
        check(libc::sigemptyset(none.as_mut_ptr()) as libc::c_long)?;
        check(
            libc::sigprocmask(libc::SIG_SETMASK, none.as_ptr(), std::ptr::null_mut())
                as libc::c_long,
        )?;
    }
    // Marked close-on-exec rather than closed: std's exec-error pipe must stay usable.
    // SAFETY: close_range with integer arguments, on this child's descriptor table.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc != 0 {
        // Kernels before 5.11: one by one up to the descriptor limit.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into `lim`, which lives on this stack.
        let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur.min(1 << 16) as libc::c_int
        } else {
            4096
        };
        for fd in 3..max {
            // SAFETY: setting a descriptor flag by number; EBADF for unused numbers.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}
