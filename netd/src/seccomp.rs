//! netd's seccomp filter, as data: an allow-list with one row per system call and the
//! reason netd needs it (as firecracker keeps its policies). Anything not listed kills
//! netd (`SIGSYS`); the supervisor then restarts the workers (docs/ARCHITECTURE.md).
//!
//! The list was found by tracing netd (`strace -f` on the whole test suite: HTTP and
//! stdio, the Rust end-to-end tests and the official MCP Python SDK) after the point where
//! the filter is installed, i.e. after start-up and before the runtime exists; the rows
//! for the Agent's outbound model requests by tracing a confined netd making them (plain
//! HTTP and HTTPS, names from `/etc/hosts`, from DNS and from Android's resolver socket).
//!
//! The filter is installed before netd reads its first frame, so it cannot know the
//! model's URL (it arrives in the settings): the outbound rows allow connecting anywhere
//! and leave the destination to the settings. Two rows depend on how this device
//! resolves names ([`Dns`], decided before the filter): the system resolver reads a few
//! files in `/etc`; Android's resolver is a Unix socket instead.
//!
//! Three filters are installed; the kernel applies the strictest answer of all of them:
//! the errno refusals ([`Verdict::Refuse`], [`Verdict::AllowElseEperm`]), `clone3` →
//! `ENOSYS`, and last the allow-list itself, whose default is to kill the process. The
//! allow-list comes last so the earlier installations need no row of their own.
//!
//! Only these rows are netd's: the rows the Web console needs alike (the event loop,
//! serving HTTP), what a row is and how a table becomes those filters are shared with
//! it, in `nl2sh_http_worker::seccomp`.

use nl2sh_http_worker::seccomp::{ioctl, serving, BpfProgram};
pub use nl2sh_http_worker::seccomp::{Cond, Row, SeccompError, Verdict};
use nl2sh_http_worker::seccomp_row as row;

use Verdict::{Allow, AllowElseEperm, AllowIf, AllowUnlessEperm, Refuse};

/// The rows every supported architecture shares.
pub const COMMON: &[Row] = &[
    // ---- memory -----------------------------------------------------------------------
    row!(SYS_brk, Allow, "malloc grows the heap"),
    row!(
        SYS_mmap,
        AllowUnlessEperm(&[Cond::HasBits(2, libc::PROT_EXEC as u64)]),
        "malloc arenas, large buffers and thread stacks; never executable memory. Refused \
         (EPERM) rather than fatal: glibc's resolver may dlopen an NSS module named in \
         nsswitch.conf (mdns, resolve, sss…), and must find it unloadable and go on \
         without it (Landlock already refuses opening it where present)"
    ),
    row!(
        SYS_mprotect,
        AllowUnlessEperm(&[Cond::HasBits(2, libc::PROT_EXEC as u64)]),
        "guard pages of thread stacks, growing malloc arenas; never executable memory \
         (refused like mmap's)"
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
    // ---- the event loop (mio/tokio) and serving HTTP: the shared rows ------------------
    // `nl2sh_http_worker::seccomp::SERVING` (poller, waker, the runtime's local pair,
    // accept, recv, writev, shutdown, close), chained in by [`table`].
    // ---- descriptors netd already holds -----------------------------------------------
    row!(SYS_read, Allow, "stdin in stdio mode; the runtime's waker"),
    row!(
        SYS_write,
        Allow,
        "logs to stderr; stdout in stdio mode; the runtime's waker"
    ),
    row!(
        SYS_sendto,
        Allow,
        "channel frames and HTTP responses (send)"
    ),
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
            Cond::Eq(1, ioctl(libc::FIONREAD)),
        ]),
        "non-blocking and close-on-exec; FIONREAD, with which glibc's resolver sizes a \
         DNS answer before reading it. Never TIOCSTI or a device's ioctls"
    ),
    row!(
        SYS_newfstatat,
        Allow,
        "fstat of an inherited descriptor (glibc)"
    ),
    row!(SYS_fstat, Allow, "fstat of an inherited descriptor (musl)"),
    // ---- refused: netd opens nothing but the resolver's files (see below) --------------
    row!(
        SYS_openat2,
        Refuse(libc::EPERM),
        "netd opens nothing but the system resolver's files, which glibc and musl open \
         with openat; libraries that try this newer call cope with the refusal"
    ),
    // ---- outbound model requests (the Agent) and name resolution ------------------------
    // Where to is not checked (the filter exists before the model URL is known).
    row!(
        SYS_connect,
        Allow,
        "TCP to the model API or its proxy; UDP to the DNS server (glibc connects its \
         query socket); Android's resolver socket; glibc's nscd probe (AF_UNIX, refused \
         at socket where the system resolver is used)"
    ),
    row!(
        SYS_setsockopt,
        AllowElseEperm(&[
            Cond::Eq(2, libc::TCP_NODELAY as u64),
            Cond::Eq(2, libc::SO_KEEPALIVE as u64),
            Cond::Eq(2, libc::TCP_KEEPIDLE as u64),
            Cond::Eq(2, libc::TCP_KEEPINTVL as u64),
            Cond::Eq(2, libc::TCP_KEEPCNT as u64),
            Cond::Eq(2, libc::TCP_USER_TIMEOUT as u64),
            Cond::Eq(2, libc::IP_RECVERR as u64),
            Cond::Eq(2, libc::IPV6_RECVERR as u64),
        ]),
        "TCP_NODELAY, keep-alive and the user timeout on model connections (hyper, \
         reqwest); IP(V6)_RECVERR on glibc's DNS socket. By option number only (the \
         level is not compared); others, socket filters above all, are refused and the \
         libraries only warn"
    ),
    row!(
        SYS_getsockname,
        Allow,
        "hyper notes a connection's local address; glibc learns the source address it \
         sorts answers by"
    ),
    row!(
        SYS_getpeername,
        Allow,
        "hyper notes a connection's remote address"
    ),
];

/// `bind` where nothing netd runs needs it: netd listens only on its inherited socket.
const NO_BIND: Row = row!(
    SYS_bind,
    Refuse(libc::EPERM),
    "never granted: netd listens only on its inherited socket (glibc's resolver does not \
     bind; Android's resolver is a Unix socket)"
);

/// `bind` for musl's resolver, which binds its UDP query socket to an ephemeral port and
/// fails every lookup when refused. A bound socket gains netd nothing: `listen` stays
/// unlisted (fatal), so a TCP socket bound this way accepts no one, and Landlock refuses
/// TCP binds where the kernel has it.
#[cfg(target_env = "musl")]
const RESOLVER_BIND: Row = row!(
    SYS_bind,
    Allow,
    "musl's resolver binds its UDP query socket (port 0); listen stays fatal"
);
#[cfg(not(target_env = "musl"))]
const RESOLVER_BIND: Row = NO_BIND;

/// `open` (x86_64 only) for the system resolver: musl's `fopen` there uses `open`, with
/// the flags in the second argument; the same read-only opens as `openat`, which
/// Landlock limits to the resolver's files.
#[cfg(target_arch = "x86_64")]
const RESOLVER_OPEN_X86: Row = row!(
    SYS_open,
    AllowElseEperm(&[Cond::Eq(1, RESOLVER_OPEN), Cond::Eq(1, RESOLVER_OPEN_MUSL)]),
    "musl on x86_64 opens the resolver's files with open, not openat: read-only, \
     close-on-exec only, and Landlock allows exactly those files"
);
#[cfg(target_arch = "x86_64")]
const NO_OPEN_X86: Row = row!(
    SYS_open,
    Refuse(libc::EPERM),
    "refused like openat where netd reads no file"
);

/// How names are resolved on this device, which decides some rows of the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dns {
    /// The C library's `getaddrinfo`, reading its files: only where Landlock limits what
    /// an open may reach to exactly those files (seccomp cannot see paths).
    System,
    /// The C library's `getaddrinfo` without its files (no Landlock here): every open
    /// stays refused, so names resolve only through a name server on 127.0.0.1.
    SystemWithoutFiles,
    /// Android's resolver daemon over `/dev/socket/dnsproxyd`: no files to read.
    AndroidDnsProxy,
}

/// Flags of the only opens the system resolver makes (`fopen(path, "rce")`); musl adds
/// `O_LARGEFILE` itself.
const RESOLVER_OPEN: u64 = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
#[cfg(target_env = "musl")]
const RESOLVER_OPEN_MUSL: u64 = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE) as u64;
#[cfg(not(target_env = "musl"))]
const RESOLVER_OPEN_MUSL: u64 = RESOLVER_OPEN;

/// Rows for the system resolver.
pub const SYSTEM_RESOLVER: &[Row] = &[
    row!(
        SYS_socket,
        AllowElseEperm(&[
            Cond::Eq(0, libc::AF_INET as u64),
            Cond::Eq(0, libc::AF_INET6 as u64),
        ]),
        "TCP to the model API, UDP (and TCP) to the DNS server. Others are refused and \
         glibc copes: AF_NETLINK (its interface-address probe: answers are then sorted \
         without it) and AF_UNIX (its nscd probe: no cache daemon then)"
    ),
    row!(
        SYS_openat,
        AllowElseEperm(&[Cond::Eq(2, RESOLVER_OPEN), Cond::Eq(2, RESOLVER_OPEN_MUSL),]),
        "read-only, close-on-exec opens only: glibc's resolver reads /etc/resolv.conf, \
         hosts, nsswitch.conf, host.conf and gai.conf when it resolves. Landlock allows \
         reading exactly those files and nothing else (where the kernel has it); any other \
         flags are refused as before (libraries cope: CPU count, time zone, locale)"
    ),
    row!(
        SYS_sendmmsg,
        Allow,
        "glibc sends the A and AAAA queries in one call"
    ),
    row!(
        SYS_ppoll,
        Allow,
        "glibc's resolver waits for DNS answers (its poll, on aarch64 and riscv64)"
    ),
    row!(
        SYS_uname,
        Allow,
        "glibc's resolver takes the default search domain from the host name when \
         resolv.conf names none"
    ),
    row!(
        SYS_lseek,
        Allow,
        "glibc rewinds /etc/hosts before reading it"
    ),
    RESOLVER_BIND,
];

/// Rows for the system resolver where it may not read its files.
pub const SYSTEM_RESOLVER_WITHOUT_FILES: &[Row] = &[
    SYSTEM_RESOLVER[0],
    NO_OPENS,
    SYSTEM_RESOLVER[2],
    SYSTEM_RESOLVER[3],
    SYSTEM_RESOLVER[4],
    SYSTEM_RESOLVER[5],
    RESOLVER_BIND,
];

/// `openat` where netd reads no file.
const NO_OPENS: Row = row!(
    SYS_openat,
    Refuse(libc::EPERM),
    "netd opens no file once started (names are resolved over a socket, or Landlock is \
     missing and cannot limit opens to the resolver's files); libraries that try (CPU \
     count, time zone, locale, glibc's resolver) cope with the refusal"
);

/// Rows for Android's resolver daemon.
pub const ANDROID_RESOLVER: &[Row] = &[
    row!(
        SYS_socket,
        AllowElseEperm(&[
            Cond::Eq(0, libc::AF_INET as u64),
            Cond::Eq(0, libc::AF_INET6 as u64),
            Cond::Eq(0, libc::AF_UNIX as u64),
        ]),
        "TCP to the model API; AF_UNIX to Android's resolver socket (dnsproxyd); \
         anything else is refused"
    ),
    NO_OPENS,
    NO_BIND,
];

/// Rows for calls that exist only on x86_64 (aarch64 and riscv64 have the `*at` and
/// `p*` forms only).
#[cfg(target_arch = "x86_64")]
pub const ARCH: &[Row] = &[row!(SYS_poll, Allow, "glibc's resolver waits for DNS answers")];

/// The x86_64 `open` row for each way of resolving names.
#[cfg(target_arch = "x86_64")]
fn arch_open(dns: Dns) -> &'static [Row] {
    match dns {
        Dns::System => std::slice::from_ref(&RESOLVER_OPEN_X86),
        Dns::SystemWithoutFiles | Dns::AndroidDnsProxy => std::slice::from_ref(&NO_OPEN_X86),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn arch_open(_dns: Dns) -> &'static [Row] {
    &[]
}

#[cfg(not(target_arch = "x86_64"))]
pub const ARCH: &[Row] = &[];

/// Every row for a device that resolves names with `dns`: netd's common ones, the rows
/// shared with the Web console, then those that depend on `dns` and the architecture.
pub fn table(dns: Dns) -> impl Iterator<Item = &'static Row> + Clone {
    let resolver = match dns {
        Dns::System => SYSTEM_RESOLVER,
        Dns::SystemWithoutFiles => SYSTEM_RESOLVER_WITHOUT_FILES,
        Dns::AndroidDnsProxy => ANDROID_RESOLVER,
    };
    COMMON
        .iter()
        .chain(serving())
        .chain(resolver.iter())
        .chain(ARCH.iter())
        .chain(arch_open(dns).iter())
}

/// How many system calls the table lets through (with or without conditions).
pub fn allowed_count(dns: Dns) -> usize {
    nl2sh_http_worker::seccomp::allowed_count(table(dns))
}

/// The filters in installation order (see the module comment), for netd's own pid.
pub fn programs(own_pid: u32, dns: Dns) -> Result<Vec<BpfProgram>, SeccompError> {
    nl2sh_http_worker::seccomp::programs(table(dns), own_pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Dns; 3] = [Dns::System, Dns::SystemWithoutFiles, Dns::AndroidDnsProxy];

    fn verdict(dns: Dns, nr: libc::c_long) -> Option<Verdict> {
        table(dns).find(|r| r.nr == nr).map(|r| r.verdict)
    }

    #[test]
    fn the_filters_build_for_this_architecture() {
        for dns in ALL {
            let programs = programs(std::process::id(), dns).unwrap();
            assert_eq!(programs.len(), 3);
            assert!(programs.iter().all(|p| !p.is_empty()));
        }
    }

    #[test]
    fn every_row_is_listed_once_with_a_reason() {
        for dns in ALL {
            let problems = nl2sh_http_worker::seccomp::table_problems(table(dns));
            assert!(problems.is_empty(), "{dns:?}: {problems:?}");
        }
    }

    #[test]
    fn what_netd_must_never_do_is_not_allowed() {
        let never = [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_listen,
            libc::SYS_kill,
            libc::SYS_setuid,
            libc::SYS_unshare,
            libc::SYS_mount,
            libc::SYS_bpf,
            libc::SYS_io_uring_setup,
            libc::SYS_memfd_create,
        ];
        for dns in ALL {
            for nr in never {
                // Not listed (fatal), or listed only to be refused.
                assert!(
                    matches!(verdict(dns, nr), None | Some(Verdict::Refuse(_))),
                    "syscall {nr} must not be allowed"
                );
            }
            // The allowed count excludes the refusals.
            let refused = table(dns)
                .filter(|r| matches!(r.verdict, Verdict::Refuse(_)))
                .count();
            assert_eq!(allowed_count(dns) + refused, table(dns).count());
        }
    }

    #[test]
    fn bind_only_for_musl_resolver() {
        for dns in ALL {
            let allowed = matches!(verdict(dns, libc::SYS_bind), Some(Verdict::Allow));
            let expected = cfg!(target_env = "musl") && dns != Dns::AndroidDnsProxy;
            assert_eq!(allowed, expected, "{dns:?}");
        }
    }

    #[test]
    fn sockets_and_opens_are_as_narrow_as_name_resolution_allows() {
        let domains = |dns| match verdict(dns, libc::SYS_socket) {
            Some(Verdict::AllowElseEperm(conds)) => conds
                .iter()
                .map(|c| match c {
                    Cond::Eq(0, d) => *d as i32,
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(domains(Dns::System), [libc::AF_INET, libc::AF_INET6]);
        assert_eq!(
            domains(Dns::AndroidDnsProxy),
            [libc::AF_INET, libc::AF_INET6, libc::AF_UNIX]
        );
        assert_eq!(domains(Dns::SystemWithoutFiles), domains(Dns::System));
        // Android's resolver needs no file, nor does netd without Landlock; the system
        // resolver may read, never write.
        for dns in [Dns::AndroidDnsProxy, Dns::SystemWithoutFiles] {
            assert!(matches!(
                verdict(dns, libc::SYS_openat),
                Some(Verdict::Refuse(libc::EPERM))
            ));
        }
        // Otherwise the system resolver's rows are the same with or without its files.
        let names = |dns| table(dns).map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(Dns::System), names(Dns::SystemWithoutFiles));
        match verdict(Dns::System, libc::SYS_openat) {
            Some(Verdict::AllowElseEperm(conds)) => {
                for c in conds {
                    let Cond::Eq(2, flags) = c else {
                        panic!("{c:?}")
                    };
                    let flags = *flags as i32;
                    assert_eq!(flags & libc::O_ACCMODE, libc::O_RDONLY);
                    assert_eq!(flags & (libc::O_CREAT | libc::O_TRUNC | libc::O_PATH), 0);
                    assert_ne!(flags & libc::O_CLOEXEC, 0);
                }
            }
            other => panic!("{other:?}"),
        }
        // Executable memory stays refused either way.
        for dns in ALL {
            for nr in [libc::SYS_mmap, libc::SYS_mprotect] {
                assert!(matches!(
                    verdict(dns, nr),
                    Some(Verdict::AllowUnlessEperm([Cond::HasBits(2, bits)])) if *bits == libc::PROT_EXEC as u64
                ));
            }
        }
    }
}
