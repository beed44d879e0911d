//! The Web console's seccomp filter, as data: an allow-list with one row per system call
//! and the reason the console needs it (netd's, `netd/src/seccomp.rs`, is the model).
//! Anything not listed kills the console (`SIGSYS`); the supervisor then restarts the
//! workers (docs/ARCHITECTURE.md, "Stopping and restarting").
//!
//! The console does much less than netd, so its list is much shorter. Once confined it
//! serves HTTP on its inherited listener and talks over its three inherited channels on
//! one thread: it opens no file, creates no socket but its runtime's local pair,
//! connects nowhere, binds nothing, starts no thread and no process, and reads nothing
//! about itself from `/proc`. Its pages are compiled in; its listener is claimed before
//! the filter exists ([`crate::run`]).
//!
//! The list was found by tracing the console (`strace -f` on `nl2sh --web-only`: the
//! glibc debug and release builds and the static musl debug build, on x86_64: the login,
//! every API page, the static files, a 404, a refused POST, 150 concurrent clients past
//! the connection cap, idle and half-sent requests timing out, a body over the limit,
//! then SIGTERM to the supervisor, which drains the console) after the point where the
//! filter is installed, i.e. after start-up and before the runtime exists. The three
//! differ little: debug builds of std and tokio read descriptor flags (`fcntl`
//! F_GETFD/F_GETFL), the release build returns memory (`madvise`), musl's `fcntl` sets
//! close-on-exec again after duplicating and its malloc maps every allocation. A few
//! rows no trace shows are there for paths a trace does not take: aborting on a panic
//! (the release profile aborts; the confinement tests in `confine.rs` abort under the
//! filter), a crash in std's SIGSEGV handler, musl's malloc past its first bookkeeping
//! area, the clock when the vDSO cannot serve it. Each says so.
//!
//! aarch64 (and riscv64) have no `epoll_wait`, `open` or `stat` family: the `p*` and
//! `*at` forms are the only ones and are what [`COMMON`] lists; the one call the console
//! needs that only x86_64 has, `epoll_wait`, is a shared row.
//!
//! Refusals ([`Verdict::Refuse`]) are installed as filters of their own before the
//! allow-list; the kernel applies the strictest answer of all of them. The allow-list
//! comes last, so installing the earlier ones needs no row.
//!
//! Only these rows are the console's: the rows netd needs alike (the event loop,
//! serving HTTP), what a row is and how a table becomes those filters are shared with
//! it, in `nl2sh_http_worker::seccomp`.

use nl2sh_http_worker::seccomp::{ioctl, serving, BpfProgram};
pub use nl2sh_http_worker::seccomp::{Cond, Row, SeccompError, Verdict};
use nl2sh_http_worker::seccomp_row as row;

use Verdict::{Allow, AllowIf, Refuse};

/// The rows every supported architecture shares.
pub const COMMON: &[Row] = &[
    // ---- memory -----------------------------------------------------------------------
    row!(
        SYS_brk,
        Allow,
        "glibc's malloc grows and trims the heap; musl's keeps its bookkeeping there"
    ),
    row!(
        SYS_mmap,
        AllowIf(&[Cond::LacksBits(2, libc::PROT_EXEC as u64)]),
        "musl's malloc for everything, glibc's for large buffers; never executable \
         memory (the console loads no code: nothing dlopens)"
    ),
    row!(
        SYS_mprotect,
        AllowIf(&[Cond::LacksBits(2, libc::PROT_EXEC as u64)]),
        "musl's malloc makes reserved pages of its bookkeeping area usable once the \
         first runs out (its source; not in the traces, which never allocated that \
         much); never executable memory"
    ),
    row!(
        SYS_munmap,
        Allow,
        "free of large buffers (musl: of most); std frees the signal stack at exit"
    ),
    row!(
        SYS_mremap,
        Allow,
        "realloc of large buffers, an API page's JSON as it grows (not in the traces)"
    ),
    row!(
        SYS_madvise,
        Allow,
        "free returns memory: glibc's malloc_trim once the console started, musl's \
         malloc as it frees"
    ),
    // ---- one thread, its signals and its end ------------------------------------------
    row!(
        SYS_futex,
        Allow,
        "std's locks and once-cells (uncontended on one thread, but the exit path wakes)"
    ),
    row!(
        SYS_sigaltstack,
        Allow,
        "std frees the main thread's signal stack as the console exits"
    ),
    row!(
        SYS_rt_sigprocmask,
        Allow,
        "musl blocks and restores signals around some of its calls; abort() blocks \
         them before raising SIGABRT (the release profile aborts on a panic)"
    ),
    row!(
        SYS_rt_sigaction,
        Allow,
        "abort() and std's SIGSEGV handler put the default action back before the signal \
         that ends the console (not in the traces)"
    ),
    row!(
        SYS_rt_sigreturn,
        Allow,
        "return from std's SIGSEGV handler, so a crash ends as SIGSEGV (not in the traces)"
    ),
    row!(
        SYS_getpid,
        Allow,
        "glibc's abort() signals its own process (not in the traces)"
    ),
    row!(
        SYS_gettid,
        Allow,
        "glibc's abort() asks the kernel for the thread to signal (not in the traces)"
    ),
    row!(
        SYS_tgkill,
        AllowIf(&[Cond::OwnPid(0)]),
        "glibc's abort() raises SIGABRT on the console itself; no other process (not in \
         the traces)"
    ),
    row!(
        SYS_tkill,
        AllowIf(&[Cond::OwnPid(0)]),
        "musl's abort() raises SIGABRT on its thread: the console's only thread, whose \
         id is the process id, so no other process or thread (not in the traces)"
    ),
    row!(
        SYS_restart_syscall,
        Allow,
        "the kernel resumes a call a stop signal interrupted (not in the traces)"
    ),
    row!(SYS_exit_group, Allow, "the console exits"),
    // ---- time -------------------------------------------------------------------------
    row!(
        SYS_clock_gettime,
        Allow,
        "timers and log timestamps; the vDSO serves them unless the clock source needs \
         the kernel (not in the traces)"
    ),
    row!(
        SYS_getrandom,
        Allow,
        "std seeds its hash maps' keys once per thread (the runtime's own seed comes from \
         them). In the traces the console's thread did so before the filter, as logging \
         started; a thread that has not (the confinement tests') does it here"
    ),
    // ---- the event loop (mio/tokio) and serving HTTP: the shared rows ------------------
    // `nl2sh_http_worker::seccomp::SERVING` (poller, waker, accept, recv, writev,
    // shutdown, close, and the runtime's local pair: the console makes no other socket,
    // `socket` is not listed), chained in by [`table`].
    // ---- descriptors the console holds ---------------------------------------------------
    row!(
        SYS_read,
        Allow,
        "the runtime's waker resets its eventfd (not in the traces)"
    ),
    row!(SYS_write, Allow, "logs to stderr; the runtime's waker"),
    row!(
        SYS_sendto,
        Allow,
        "channel frames (send); no socket the console holds takes an address"
    ),
    row!(
        SYS_fcntl,
        AllowIf(&[
            Cond::Eq(1, libc::F_GETFD as u64),
            Cond::Eq(1, libc::F_GETFL as u64),
            Cond::Eq(1, libc::F_DUPFD_CLOEXEC as u64),
            Cond::Eq(1, libc::F_SETFD as u64),
        ]),
        "the runtime duplicates its poller and its signal pair (F_DUPFD_CLOEXEC), after \
         which musl sets close-on-exec once more (F_SETFD; clearing it would gain \
         nothing: nothing can exec); debug builds of std and tokio read descriptor flags \
         (F_GETFD, F_GETFL). Never F_SETFL: sockets become non-blocking by ioctl"
    ),
    row!(
        SYS_ioctl,
        AllowIf(&[Cond::Eq(1, ioctl(libc::FIONBIO))]),
        "makes the channels and the listener non-blocking (FIONBIO) as the runtime takes \
         them; nothing else, no terminal or device ioctl"
    ),
    // ---- refused --------------------------------------------------------------------
    row!(
        SYS_newfstatat,
        Refuse(libc::EPERM),
        "nothing is inspected after start: the listener is claimed before the filter. \
         Refused, not fatal, so that claiming it again (what the worker does if that \
         failed) reports an error to the supervisor; a path's metadata stays out of reach"
    ),
    row!(
        SYS_fstat,
        Refuse(libc::EPERM),
        "as newfstatat, for musl, which checks a descriptor with fstat"
    ),
];

/// Every row for this architecture: the console's own, then those it shares with netd
/// (with x86_64's `epoll_wait`, the one call it needs that only x86_64 has).
pub fn table() -> impl Iterator<Item = &'static Row> + Clone {
    COMMON.iter().chain(serving())
}

/// How many system calls the table lets through (with or without conditions).
pub fn allowed_count() -> usize {
    nl2sh_http_worker::seccomp::allowed_count(table())
}

/// The filters in installation order (see the module comment), for the console's own
/// pid: one per errno the table refuses with, then the allow-list.
pub fn programs(own_pid: u32) -> Result<Vec<BpfProgram>, SeccompError> {
    nl2sh_http_worker::seccomp::programs(table(), own_pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(nr: libc::c_long) -> Option<Verdict> {
        table().find(|r| r.nr == nr).map(|r| r.verdict)
    }

    /// Not listed (fatal), or listed only to be refused.
    fn not_allowed(nr: libc::c_long) -> bool {
        matches!(verdict(nr), None | Some(Verdict::Refuse(_)))
    }

    #[test]
    fn the_filters_build_for_this_architecture() {
        let programs = programs(std::process::id()).unwrap();
        // The EPERM refusals, then the allow-list.
        assert_eq!(programs.len(), 2);
        assert!(programs.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn every_row_is_listed_once_with_a_reason() {
        let problems = nl2sh_http_worker::seccomp::table_problems(table());
        assert!(problems.is_empty(), "{problems:?}");
        let refused = table()
            .filter(|r| matches!(r.verdict, Verdict::Refuse(_)))
            .count();
        assert_eq!(allowed_count() + refused, table().count());
    }

    #[test]
    fn what_the_console_must_never_do_is_not_allowed() {
        let mut never = vec![
            // Running anything.
            libc::SYS_execve,
            libc::SYS_execveat,
            // Another thread or process, a namespace, another identity.
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_setuid,
            libc::SYS_setgid,
            libc::SYS_setreuid,
            libc::SYS_setregid,
            libc::SYS_setresuid,
            libc::SYS_setresgid,
            libc::SYS_setgroups,
            libc::SYS_setfsuid,
            libc::SYS_capset,
            libc::SYS_prctl,
            libc::SYS_seccomp,
            // The network beyond what it inherited.
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_sendmsg,
            libc::SYS_recvmsg,
            libc::SYS_sendmmsg,
            libc::SYS_setsockopt,
            // Files: none at all.
            libc::SYS_openat,
            libc::SYS_openat2,
            libc::SYS_open_by_handle_at,
            libc::SYS_name_to_handle_at,
            libc::SYS_statx,
            libc::SYS_readlinkat,
            libc::SYS_getdents64,
            libc::SYS_unlinkat,
            libc::SYS_mkdirat,
            libc::SYS_renameat2,
            libc::SYS_linkat,
            libc::SYS_symlinkat,
            libc::SYS_fchmodat,
            libc::SYS_fchownat,
            libc::SYS_truncate,
            libc::SYS_chdir,
            libc::SYS_chroot,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_memfd_create,
            // Other processes.
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_kill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
            libc::SYS_pidfd_open,
            libc::SYS_pidfd_send_signal,
            libc::SYS_pidfd_getfd,
            libc::SYS_kcmp,
            // The kernel's larger surfaces.
            libc::SYS_bpf,
            libc::SYS_io_uring_setup,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_reboot,
            libc::SYS_mbind,
            libc::SYS_personality,
        ];
        if cfg!(target_arch = "x86_64") {
            never.extend(x86_64_only());
        }
        for nr in never {
            assert!(not_allowed(nr), "syscall {nr} must not be allowed");
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn x86_64_only() -> Vec<libc::c_long> {
        vec![
            libc::SYS_open,
            libc::SYS_creat,
            libc::SYS_stat,
            libc::SYS_lstat,
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_uselib,
            libc::SYS_iopl,
            libc::SYS_ioperm,
            libc::SYS_modify_ldt,
        ]
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn x86_64_only() -> Vec<libc::c_long> {
        Vec::new()
    }

    /// The conditions of an `AllowIf` row.
    fn conds(nr: libc::c_long) -> &'static [Cond] {
        match verdict(nr) {
            Some(AllowIf(conds)) => conds,
            other => panic!("syscall {nr}: {other:?}"),
        }
    }

    #[test]
    fn what_is_allowed_is_as_narrow_as_the_console_needs() {
        // Memory is never executable.
        for nr in [libc::SYS_mmap, libc::SYS_mprotect] {
            assert_eq!(conds(nr), [Cond::LacksBits(2, libc::PROT_EXEC as u64)]);
        }
        // Signals only to itself.
        for nr in [libc::SYS_tgkill, libc::SYS_tkill] {
            assert_eq!(conds(nr), [Cond::OwnPid(0)]);
        }
        // The one socket it makes is a local pair.
        assert_eq!(
            conds(libc::SYS_socketpair),
            [Cond::Eq(0, libc::AF_UNIX as u64)]
        );
        // Descriptor flags are read (and close-on-exec set), never the file status
        // flags; no ioctl but FIONBIO.
        for c in conds(libc::SYS_fcntl) {
            let Cond::Eq(1, cmd) = c else { panic!("{c:?}") };
            assert!(
                [
                    libc::F_GETFD,
                    libc::F_GETFL,
                    libc::F_DUPFD_CLOEXEC,
                    libc::F_SETFD
                ]
                .contains(&(*cmd as i32)),
                "{cmd}"
            );
        }
        assert_eq!(conds(libc::SYS_ioctl), [Cond::Eq(1, ioctl(libc::FIONBIO))]);
        // The event loop's wait exists in its form for this architecture.
        assert_eq!(verdict(libc::SYS_epoll_pwait), Some(Allow));
        if cfg!(target_arch = "x86_64") {
            assert!(table().any(|r| r.name == "SYS_epoll_wait"));
        }
        // Far fewer calls than netd's list.
        assert!(allowed_count() < 45, "{}", allowed_count());
    }
}
