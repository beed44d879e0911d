//! netd's seccomp filter, as data: an allow-list with one row per system call and the
//! reason netd needs it (as firecracker keeps its policies). Anything not listed kills
//! netd (`SIGSYS`); the supervisor then reports the death and stops the tree.
//!
//! The list was found by tracing netd (`strace -f` on the whole test suite: HTTP and
//! stdio, the Rust end-to-end tests and the official MCP Python SDK) after the point where
//! the filter is installed, i.e. after start-up and before the runtime exists.
//!
//! Three filters are installed; the kernel applies the strictest answer of all of them:
//! the errno refusals ([`Verdict::Refuse`], [`Verdict::AllowElseEperm`]), `clone3` →
//! `ENOSYS`, and last the allow-list itself, whose default is to kill the process. The
//! allow-list comes last so the earlier installations need no row of their own.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What netd may do with one system call.
#[derive(Debug, Clone, Copy)]
pub enum Verdict {
    /// Allowed, whatever the arguments.
    Allow,
    /// Allowed when any of the conditions holds; otherwise netd is killed.
    AllowIf(&'static [Cond]),
    /// Allowed when any of the conditions holds; otherwise refused with `EPERM`, because
    /// libraries try other forms of the call and cope with a refusal.
    AllowElseEperm(&'static [Cond]),
    /// Always refused with this errno: a library probes the call and copes.
    Refuse(i32),
}

/// A condition on one argument (index from 0), compared on its low 32 bits: every
/// argument checked here is an `int` (or flags the kernel reads as one).
#[derive(Debug, Clone, Copy)]
pub enum Cond {
    Eq(u8, u64),
    /// All of these bits are set.
    HasBits(u8, u64),
    /// None of these bits is set.
    LacksBits(u8, u64),
    /// The argument is netd's own process id (known when the filter is built).
    OwnPid(u8),
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub nr: libc::c_long,
    pub name: &'static str,
    pub verdict: Verdict,
    pub why: &'static str,
}

macro_rules! row {
    ($sys:ident, $verdict:expr, $why:expr) => {
        Row {
            nr: libc::$sys,
            name: stringify!($sys),
            verdict: $verdict,
            why: $why,
        }
    };
}

use Verdict::{Allow, AllowElseEperm, AllowIf, Refuse};

/// An ioctl request as the filter compares it (`Ioctl` is `c_ulong` on glibc and `c_int`
/// on musl).
#[allow(clippy::unnecessary_cast)]
const fn ioctl(request: libc::Ioctl) -> u64 {
    request as u64
}

/// The rows every supported architecture shares.
pub const COMMON: &[Row] = &[
    // ---- memory -----------------------------------------------------------------------
    row!(SYS_brk, Allow, "malloc grows the heap"),
    row!(
        SYS_mmap,
        AllowIf(&[Cond::LacksBits(2, libc::PROT_EXEC as u64)]),
        "malloc arenas, large buffers and thread stacks; never executable memory"
    ),
    row!(
        SYS_mprotect,
        AllowIf(&[Cond::LacksBits(2, libc::PROT_EXEC as u64)]),
        "guard pages of thread stacks, growing malloc arenas; never executable memory"
    ),
    row!(SYS_munmap, Allow, "free of large buffers and thread stacks"),
    row!(
        SYS_mremap,
        Allow,
        "realloc of large buffers (tool output, screenshots)"
    ),
    row!(
        SYS_madvise,
        Allow,
        "free returns memory; ended threads release their stacks"
    ),
    // ---- threads (tokio's blocking pool: stdin/stdout in stdio mode) -------------------
    row!(
        SYS_clone,
        AllowIf(&[Cond::HasBits(0, libc::CLONE_THREAD as u64)]),
        "new threads only (CLONE_THREAD); never a new process"
    ),
    row!(
        SYS_clone3,
        Refuse(libc::ENOSYS),
        "its flags sit behind a pointer no filter can read; glibc then falls back to clone, \
         whose flags the row above checks"
    ),
    row!(
        SYS_set_robust_list,
        Allow,
        "glibc registers every new thread"
    ),
    row!(SYS_rseq, Allow, "glibc registers every new thread"),
    row!(SYS_gettid, Allow, "std and glibc name the current thread"),
    row!(SYS_getpid, Allow, "abort() signals its own process"),
    row!(
        SYS_tgkill,
        AllowIf(&[Cond::OwnPid(0)]),
        "glibc's abort() (panic = abort) raises SIGABRT on netd itself; no other \
         process. musl's abort uses tkill, not listed: there a panic ends netd with SIGSYS"
    ),
    row!(
        SYS_sched_getaffinity,
        Allow,
        "glibc sizes malloc arenas when a new thread first allocates"
    ),
    row!(
        SYS_sched_yield,
        Allow,
        "spin loops in std and tokio yield the CPU"
    ),
    row!(
        SYS_sigaltstack,
        Allow,
        "std's stack-overflow guard, per thread"
    ),
    row!(
        SYS_rt_sigprocmask,
        Allow,
        "glibc blocks signals around thread creation and abort"
    ),
    row!(
        SYS_rt_sigaction,
        Allow,
        "glibc installs its own handlers on first thread use"
    ),
    row!(SYS_rt_sigreturn, Allow, "return from a signal handler"),
    row!(SYS_futex, Allow, "locks, condition variables, thread join"),
    row!(SYS_exit, Allow, "a thread ends"),
    row!(SYS_exit_group, Allow, "netd exits, all threads at once"),
    row!(
        SYS_restart_syscall,
        Allow,
        "the kernel resumes a call a signal interrupted"
    ),
    row!(
        SYS_prctl,
        AllowElseEperm(&[
            Cond::Eq(0, libc::PR_SET_NAME as u64),
            Cond::Eq(0, libc::PR_SET_NO_NEW_PRIVS as u64),
        ]),
        "std names threads (PR_SET_NAME); seccompiler sets no_new_privs before each filter \
         (it only ever restricts). Other options are refused, PR_SET_DUMPABLE above all, \
         and libraries cope with the refusal"
    ),
    // ---- time and randomness ----------------------------------------------------------
    row!(
        SYS_clock_gettime,
        Allow,
        "timers; the vDSO falls back to the call when the clock source needs the kernel"
    ),
    row!(
        SYS_gettimeofday,
        Allow,
        "log timestamps, same vDSO fallback"
    ),
    row!(SYS_getrandom, Allow, "hash map keys, request ids"),
    // ---- the event loop (mio/tokio) ---------------------------------------------------
    row!(
        SYS_epoll_create1,
        Allow,
        "the runtime's poller, made after the filter is on"
    ),
    row!(
        SYS_epoll_ctl,
        Allow,
        "registers channels, the listener and connections"
    ),
    row!(
        SYS_epoll_pwait,
        Allow,
        "waits for events (musl's epoll_wait)"
    ),
    row!(SYS_eventfd2, Allow, "the runtime's waker"),
    row!(
        SYS_socketpair,
        AllowIf(&[Cond::Eq(0, libc::AF_UNIX as u64)]),
        "the runtime's signal driver makes a local pair when it starts; AF_UNIX only"
    ),
    // ---- descriptors netd already holds -----------------------------------------------
    row!(SYS_read, Allow, "stdin in stdio mode; the runtime's waker"),
    row!(
        SYS_write,
        Allow,
        "logs to stderr; stdout in stdio mode; the runtime's waker"
    ),
    row!(
        SYS_writev,
        Allow,
        "HTTP responses (head and body in one call)"
    ),
    row!(
        SYS_recvfrom,
        Allow,
        "channel frames and HTTP requests (recv)"
    ),
    row!(
        SYS_sendto,
        Allow,
        "channel frames and HTTP responses (send)"
    ),
    row!(SYS_accept4, Allow, "connections on the inherited listener"),
    row!(
        SYS_shutdown,
        Allow,
        "half-closes a finished HTTP connection"
    ),
    row!(SYS_close, Allow, "closes connections"),
    row!(
        SYS_getsockopt,
        Allow,
        "checks an inherited descriptor's socket type and listening state"
    ),
    row!(
        SYS_fcntl,
        AllowIf(&[
            Cond::Eq(1, libc::F_GETFD as u64),
            Cond::Eq(1, libc::F_SETFD as u64),
            Cond::Eq(1, libc::F_GETFL as u64),
            Cond::Eq(1, libc::F_SETFL as u64),
            Cond::Eq(1, libc::F_DUPFD_CLOEXEC as u64),
        ]),
        "close-on-exec and non-blocking flags; duplicating the runtime's poller"
    ),
    row!(
        SYS_ioctl,
        AllowIf(&[
            Cond::Eq(1, ioctl(libc::FIONBIO)),
            Cond::Eq(1, ioctl(libc::FIOCLEX)),
        ]),
        "non-blocking and close-on-exec only (never TIOCSTI or a device's ioctls)"
    ),
    row!(
        SYS_newfstatat,
        Allow,
        "fstat of an inherited descriptor (glibc)"
    ),
    row!(SYS_fstat, Allow, "fstat of an inherited descriptor (musl)"),
    // ---- refused: netd opens nothing once started ---------------------------------------
    row!(
        SYS_openat,
        Refuse(libc::EPERM),
        "netd opens no file once started; libraries that try (glibc's CPU count, time \
         zone, locale) cope with the refusal. Landlock refuses the same where present"
    ),
    row!(
        SYS_openat2,
        Refuse(libc::EPERM),
        "refused like openat (same opens, newer call)"
    ),
    // ---- not yet: outbound model API connections (delegation issue) ---------------------
    // When netd calls a model API itself, these rows come in, each with its argument
    // restriction, and Landlock gets the matching rules (ConnectTcp on the model's port,
    // read access to the resolver files):
    //   socket      AF_INET / AF_INET6, SOCK_STREAM (and SOCK_DGRAM for DNS) only
    //   connect     the model API, the resolver
    //   getsockopt  SO_ERROR after a non-blocking connect (already allowed above)
    //   setsockopt  TCP_NODELAY, keep-alive
    //   getsockname, getpeername
    //   DNS: openat of /etc/resolv.conf, /etc/hosts, /etc/nsswitch.conf, /etc/gai.conf
    //   (read-only; Landlock read rules for exactly those), sendmmsg/recvfrom on UDP, poll.
    //   glibc's NSS would dlopen libnss_* (executable mmap): resolve with a resolver that
    //   does not load code, or resolve before the filter.
    //   Android (static musl, no /etc/resolv.conf): its own resolver path (DESIGN.md §9).
];

/// Rows for calls that exist only on x86_64 (aarch64 and riscv64 have the `*at` and
/// `p*` forms only).
#[cfg(target_arch = "x86_64")]
pub const ARCH: &[Row] = &[
    row!(SYS_epoll_wait, Allow, "waits for events (glibc)"),
    row!(
        SYS_open,
        Refuse(libc::EPERM),
        "refused like openat (glibc and musl use openat)"
    ),
];

#[cfg(not(target_arch = "x86_64"))]
pub const ARCH: &[Row] = &[];

/// Every row, common ones first.
pub fn table() -> impl Iterator<Item = &'static Row> {
    COMMON.iter().chain(ARCH.iter())
}

/// How many system calls the table lets through (with or without conditions).
pub fn allowed_count() -> usize {
    table()
        .filter(|r| !matches!(r.verdict, Verdict::Refuse(_)))
        .count()
}

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp filter for this architecture ({0})")]
    Arch(&'static str),
    #[error("seccomp table: {0}")]
    Table(String),
    #[error("building the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
}

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH))
}

fn dword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn condition(cond: Cond, own_pid: u32) -> Result<SeccompCondition, SeccompError> {
    match cond {
        Cond::Eq(arg, value) => dword(arg, SeccompCmpOp::Eq, value),
        Cond::HasBits(arg, bits) => dword(arg, SeccompCmpOp::MaskedEq(bits), bits),
        Cond::LacksBits(arg, bits) => dword(arg, SeccompCmpOp::MaskedEq(bits), 0),
        Cond::OwnPid(arg) => dword(arg, SeccompCmpOp::Eq, u64::from(own_pid)),
    }
}

/// Any one of `conds` (a rule per condition: seccompiler ORs rules).
fn any_of(conds: &[Cond], own_pid: u32) -> Result<Vec<SeccompRule>, SeccompError> {
    conds
        .iter()
        .map(|c| Ok(SeccompRule::new(vec![condition(*c, own_pid)?])?))
        .collect()
}

/// None of `conds` (one rule whose conditions all must hold). Only equalities can be
/// negated here; the table uses nothing else with [`Verdict::AllowElseEperm`].
fn none_of(conds: &[Cond]) -> Result<Vec<SeccompRule>, SeccompError> {
    let negated = conds
        .iter()
        .map(|c| match c {
            Cond::Eq(arg, value) => dword(*arg, SeccompCmpOp::Ne, *value),
            other => Err(SeccompError::Table(format!(
                "cannot negate the condition {other:?}"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![SeccompRule::new(negated)?])
}

// `c_long` is `i64` on every architecture this module builds a filter for.
#[allow(clippy::useless_conversion)]
fn key(nr: libc::c_long) -> i64 {
    i64::from(nr)
}

/// The filters in installation order (see the module comment), for netd's own pid.
pub fn programs(own_pid: u32) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = arch()?;
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for row in table() {
        let nr = key(row.nr);
        match row.verdict {
            Verdict::Allow => {
                allow.insert(nr, Vec::new());
            }
            Verdict::AllowIf(conds) => {
                allow.insert(nr, any_of(conds, own_pid)?);
            }
            Verdict::AllowElseEperm(conds) => {
                // The allow-list lets every form through; the errno filter refuses the
                // forms outside `conds`.
                allow.insert(nr, Vec::new());
                eperm.insert(nr, none_of(conds)?);
            }
            Verdict::Refuse(errno) => {
                allow.insert(nr, Vec::new());
                let refusals = if errno == libc::ENOSYS {
                    &mut enosys
                } else if errno == libc::EPERM {
                    &mut eperm
                } else {
                    return Err(SeccompError::Table(format!(
                        "{}: only EPERM and ENOSYS refusals are built",
                        row.name
                    )));
                };
                refusals.insert(nr, Vec::new());
            }
        }
    }
    let refuse = |rules, errno: i32| -> Result<BpfProgram, SeccompError> {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )?;
        Ok(filter.try_into()?)
    };
    let allow_list = SeccompFilter::new(
        allow,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        arch,
    )?;
    Ok(vec![
        refuse(eperm, libc::EPERM)?,
        refuse(enosys, libc::ENOSYS)?,
        allow_list.try_into()?,
    ])
}

/// Install the filters on every thread of the process (there is one when netd calls
/// this; TSYNC makes sure of it). Sets no_new_privs, which netd already has.
pub fn install(own_pid: u32) -> Result<(), SeccompError> {
    for program in programs(own_pid)? {
        seccompiler::apply_filter_all_threads(&program)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_build_for_this_architecture() {
        let programs = programs(std::process::id()).unwrap();
        assert_eq!(programs.len(), 3);
        assert!(programs.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn every_row_is_listed_once_with_a_reason() {
        let mut seen = std::collections::HashSet::new();
        for row in table() {
            assert!(seen.insert(row.nr), "{} listed twice", row.name);
            assert!(row.name.starts_with("SYS_"), "{}", row.name);
            assert!(row.why.trim().len() >= 10, "{} has no reason", row.name);
            if let Verdict::Refuse(errno) = row.verdict {
                assert!([libc::EPERM, libc::ENOSYS].contains(&errno), "{}", row.name);
            }
        }
    }

    #[test]
    fn what_netd_must_never_do_is_not_listed() {
        let never = [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_kill,
            libc::SYS_setuid,
            libc::SYS_unshare,
            libc::SYS_mount,
            libc::SYS_bpf,
            libc::SYS_io_uring_setup,
        ];
        for nr in never {
            assert!(
                table().all(|r| r.nr != nr),
                "syscall {nr} must not be listed"
            );
        }
        // The allowed count excludes the refusals.
        let refused = table()
            .filter(|r| matches!(r.verdict, Verdict::Refuse(_)))
            .count();
        assert_eq!(allowed_count() + refused, table().count());
    }
}
