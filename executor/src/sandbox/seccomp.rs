//! The sandbox's seccomp filter, as data: what a reader of the device never needs. Every
//! other system call is allowed (the uid, the capability sets, the read-only mounts and
//! the masks are the main barrier; this closes the doors those leave open). Refused
//! calls fail with `EPERM`, so programs report a plain error instead of dying.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

pub use nl2sh_proto::seccomp::SeccompError;
use nl2sh_proto::seccomp::{arch, dword};

/// `kexec_file_load`: the libc crate names it for every target this filter covers but
/// aarch64 musl (the static phone build); arm64 takes the generic number.
#[cfg(all(target_arch = "aarch64", target_env = "musl"))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = 294;
#[cfg(not(all(target_arch = "aarch64", target_env = "musl")))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = libc::SYS_kexec_file_load;

/// (system call, why a sandboxed reader is refused it)
pub const REFUSED: &[(libc::c_long, &str)] = &[
    // With CAP_DAC_READ_SEARCH these open any file by handle, masks or not; the sandbox
    // holds no capability, but the refusal must not rest on that alone.
    (
        libc::SYS_open_by_handle_at,
        "opens files by handle, around the masks",
    ),
    (
        libc::SYS_name_to_handle_at,
        "makes handles for open_by_handle_at",
    ),
    // Other processes' memory.
    (libc::SYS_ptrace, "controls other processes"),
    (
        libc::SYS_process_vm_writev,
        "writes other processes' memory",
    ),
    (libc::SYS_process_vm_readv, "reads other processes' memory"),
    (libc::SYS_pidfd_getfd, "steals other processes' descriptors"),
    // The mount table is what keeps everything read-only and masked.
    (libc::SYS_mount, "changes mounts"),
    (
        libc::SYS_umount2,
        "removes mounts (would uncover masked secrets)",
    ),
    (libc::SYS_pivot_root, "changes the root"),
    (libc::SYS_chroot, "changes the root"),
    (libc::SYS_open_tree, "clones mounts"),
    (libc::SYS_move_mount, "moves mounts"),
    (libc::SYS_fsopen, "creates file systems"),
    (libc::SYS_fsmount, "mounts file systems"),
    (libc::SYS_fsconfig, "configures file systems"),
    (libc::SYS_fspick, "reconfigures mounted file systems"),
    (
        libc::SYS_mount_setattr,
        "changes mount attributes (read-only)",
    ),
    // New namespaces: a user namespace would give the command capabilities of its own.
    (libc::SYS_unshare, "creates namespaces"),
    (libc::SYS_setns, "enters other namespaces"),
    // The kernel itself.
    (libc::SYS_bpf, "loads kernel programs"),
    (
        libc::SYS_perf_event_open,
        "observes the kernel and other processes",
    ),
    (libc::SYS_kexec_load, "replaces the kernel"),
    (SYS_KEXEC_FILE_LOAD, "replaces the kernel"),
    (libc::SYS_init_module, "loads kernel modules"),
    (libc::SYS_finit_module, "loads kernel modules"),
    (libc::SYS_delete_module, "unloads kernel modules"),
    (libc::SYS_reboot, "reboots the device"),
    (libc::SYS_swapon, "changes swap"),
    (libc::SYS_swapoff, "changes swap"),
    (libc::SYS_acct, "switches process accounting"),
    (libc::SYS_quotactl, "changes disk quotas"),
    (libc::SYS_syslog, "reads or clears the kernel log buffer"),
    // The key store holds secrets of other processes of the same uid.
    (libc::SYS_keyctl, "reads and changes kernel keyrings"),
    (libc::SYS_add_key, "changes kernel keyrings"),
    (libc::SYS_request_key, "reads kernel keyrings"),
    // Time and names of the machine.
    (libc::SYS_settimeofday, "sets the clock"),
    (libc::SYS_clock_settime, "sets the clock"),
    (libc::SYS_clock_adjtime, "adjusts the clock"),
    (libc::SYS_adjtimex, "adjusts the clock"),
    (libc::SYS_sethostname, "renames the machine"),
    (libc::SYS_setdomainname, "renames the machine"),
    // io_uring performs socket and file operations this filter cannot see.
    (
        libc::SYS_io_uring_setup,
        "runs operations outside this filter's view",
    ),
    (
        libc::SYS_io_uring_enter,
        "runs operations outside this filter's view",
    ),
    (
        libc::SYS_io_uring_register,
        "runs operations outside this filter's view",
    ),
    (libc::SYS_userfaultfd, "a classic kernel exploit primitive"),
];

/// Refused only where the kernel could not give the call an IPC namespace of its own:
/// System V IPC and POSIX message queues would be the device's, and what a call made
/// there would outlive it (and pin memory).
pub const REFUSED_WITHOUT_IPC_NAMESPACE: &[(libc::c_long, &str)] = &[
    (
        libc::SYS_shmget,
        "creates shared memory that outlives the call",
    ),
    (
        libc::SYS_msgget,
        "creates message queues that outlive the call",
    ),
    (libc::SYS_semget, "creates semaphores that outlive the call"),
    (libc::SYS_mq_open, "opens the device's POSIX message queues"),
];

/// File locks block the device's own writers (a lock on any readable file is held for
/// the whole call). Refused with `ENOLCK` ("No locks available"), which programs that
/// lock treat as a lock failure: `flock(1)`, SQLite opening a database, anything that
/// serializes through `lockf`. Only `flock` and the locking `fcntl` commands; `F_GETLK`
/// and every other `fcntl` command work.
pub const LOCK_CALL: (libc::c_long, &str) = (libc::SYS_flock, "locks files");
/// `fcntl` commands refused like `flock`: `F_SETLK`, `F_SETLKW`, their 64-bit
/// compatibility numbers (x32), the open-file-description locks and leases.
pub const LOCK_FCNTL_COMMANDS: &[u64] = &[6, 7, 13, 14, 37, 38, 1024];

/// The one socket family a sandboxed reader may open: netlink, for kernel queries, and
/// only in [`NETLINK_PROTOCOLS`]. Every other family is refused: IP (nothing leaves the
/// device unasked), packet, Bluetooth, vsock, … and Unix sockets, through which a command
/// would reach the device's services (journald, syslog, D-Bus, a root manager's daemon);
/// `socketpair` keeps pipes between a command's own processes working.
pub const SOCKET_FAMILIES: &[(libc::c_int, &str)] =
    &[(libc::AF_NETLINK, "kernel queries (ip, ss)")];

/// Netlink protocols allowed: routing (`ip addr`, `ip route`) and socket diagnostics
/// (`ss`). Not the ones that reach user-space daemons (`NETLINK_USERSOCK`, uevents).
pub const NETLINK_PROTOCOLS: &[(libc::c_int, &str)] = &[
    (libc::NETLINK_ROUTE, "ip addr, ip route"),
    (libc::NETLINK_SOCK_DIAG, "ss"),
];

/// `clone` flags that create namespaces (refused like `unshare`).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

/// The x32 ABI on x86_64 reaches the same calls under other numbers; refuse those too.
// `c_long` is `i64` only on 64-bit targets; the conversion is real elsewhere.
#[allow(clippy::useless_conversion)]
fn with_x32(nr: libc::c_long) -> Vec<i64> {
    let mut out = vec![i64::from(nr)];
    if cfg!(target_arch = "x86_64") {
        out.push(i64::from(nr) | 0x4000_0000);
    }
    out
}

/// The filters, in the order they are installed: the refusals with `EPERM`, the locks
/// with `ENOLCK`, then `clone3` with `ENOSYS` (its flags are behind a pointer a filter
/// cannot read; C libraries fall back to `clone`, whose flags the first filter checks).
/// Without an IPC namespace (`ipc_namespace` false) System V IPC is refused too.
pub fn programs(ipc_namespace: bool) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = arch()?;
    Ok(vec![
        refusals(ipc_namespace, arch)?.try_into()?,
        locks(arch)?.try_into()?,
        clone3(arch)?.try_into()?,
    ])
}

/// What fails with `EPERM`: the calls of [`REFUSED`] (and, without an IPC namespace,
/// [`REFUSED_WITHOUT_IPC_NAMESPACE`]), sockets but those of [`SOCKET_FAMILIES`], datagram
/// or non-Unix socketpairs, and `clone` with a namespace flag.
fn refusals(ipc_namespace: bool, arch: TargetArch) -> Result<SeccompFilter, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let without_ns: &[(libc::c_long, &str)] = if ipc_namespace {
        &[]
    } else {
        REFUSED_WITHOUT_IPC_NAMESPACE
    };
    for (nr, _) in REFUSED.iter().chain(without_ns) {
        for n in with_x32(*nr) {
            rules.insert(n, Vec::new());
        }
    }
    // socket(domain, type, protocol): refused unless the domain is one of SOCKET_FAMILIES
    // and, for netlink, the protocol one of NETLINK_PROTOCOLS.
    let other_family: Vec<SeccompCondition> = SOCKET_FAMILIES
        .iter()
        .map(|(family, _)| dword(0, SeccompCmpOp::Ne, *family as u64))
        .collect::<Result<_, _>>()?;
    let mut other_netlink = vec![dword(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?];
    for (protocol, _) in NETLINK_PROTOCOLS {
        other_netlink.push(dword(2, SeccompCmpOp::Ne, *protocol as u64)?);
    }
    for n in with_x32(libc::SYS_socket) {
        rules.insert(
            n,
            vec![
                SeccompRule::new(other_family.clone())?,
                SeccompRule::new(other_netlink.clone())?,
            ],
        );
    }
    // socketpair(domain, type, …): Unix stream and seqpacket pairs only. A datagram
    // socket can send to any named socket on the device whatever it is connected to.
    const SOCK_TYPE_MASK: u64 = 0xf;
    for n in with_x32(libc::SYS_socketpair) {
        rules.insert(
            n,
            vec![
                SeccompRule::new(vec![dword(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])?,
                SeccompRule::new(vec![dword(
                    1,
                    SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                    libc::SOCK_DGRAM as u64,
                )?])?,
            ],
        );
    }
    // clone(flags, …) with any namespace flag.
    let namespaces: Vec<SeccompRule> = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let bit = *flag as u64;
            Ok(SeccompRule::new(vec![dword(
                0,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )?])?)
        })
        .collect::<Result<_, SeccompError>>()?;
    for n in with_x32(libc::SYS_clone) {
        rules.insert(n, namespaces.clone());
    }
    Ok(SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?)
}

/// What fails with `ENOLCK`: file locks ([`LOCK_CALL`], and `fcntl` with one of
/// [`LOCK_FCNTL_COMMANDS`]).
fn locks(arch: TargetArch) -> Result<SeccompFilter, SeccompError> {
    let mut locks: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for n in with_x32(LOCK_CALL.0) {
        locks.insert(n, Vec::new());
    }
    let lock_commands: Vec<SeccompRule> = LOCK_FCNTL_COMMANDS
        .iter()
        .map(|cmd| Ok(SeccompRule::new(vec![dword(1, SeccompCmpOp::Eq, *cmd)?])?))
        .collect::<Result<_, SeccompError>>()?;
    for n in with_x32(libc::SYS_fcntl) {
        locks.insert(n, lock_commands.clone());
    }
    Ok(SeccompFilter::new(
        locks,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOLCK as u32),
        arch,
    )?)
}

/// `clone3` fails with `ENOSYS`.
fn clone3(arch: TargetArch) -> Result<SeccompFilter, SeccompError> {
    let mut clone3 = BTreeMap::new();
    for n in with_x32(libc::SYS_clone3) {
        clone3.insert(n, Vec::new());
    }
    Ok(SeccompFilter::new(
        clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?)
}

/// Install the filters on the calling thread (which sets no_new_privs first).
pub fn install(ipc_namespace: bool) -> Result<(), SeccompError> {
    for program in programs(ipc_namespace)? {
        seccompiler::apply_filter(&program)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_machine() {
        for ipc_namespace in [true, false] {
            let programs = programs(ipc_namespace).unwrap();
            assert_eq!(programs.len(), 3);
            assert!(programs.iter().all(|p| !p.is_empty()));
        }
        let programs = programs(true).unwrap();
        assert!(programs.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn every_refusal_is_explained_once() {
        let mut seen = std::collections::HashSet::new();
        for (nr, why) in REFUSED.iter().chain(REFUSED_WITHOUT_IPC_NAMESPACE) {
            assert!(seen.insert(*nr), "syscall {nr} listed twice");
            assert!(!why.is_empty());
        }
        assert!(!SOCKET_FAMILIES.iter().any(|(f, _)| *f == libc::AF_INET));
        assert!(!SOCKET_FAMILIES.iter().any(|(f, _)| *f == libc::AF_INET6));
        assert!(!SOCKET_FAMILIES.iter().any(|(f, _)| *f == libc::AF_UNIX));
    }
}
