//! The seccomp allow-list of a worker that confines itself (netd, the Web console), as
//! data: the table a worker writes (one [`Row`] per system call with the reason it needs
//! it, as firecracker keeps its policies), the rows both workers need alike
//! ([`SERVING`]), and the code that turns a table into filters and installs them.
//!
//! Each worker's own rows are in its crate (`netd/src/seccomp.rs`, `web/src/seccomp.rs`):
//! they differ in what the worker does beyond serving (netd's model requests, name
//! resolution and stdio; the console's single thread and its refusals), and each row
//! says why in that worker's words. Anything not listed kills the worker (`SIGSYS`).
//! Refusals with an errno are filters of their own, one per errno, installed before the
//! allow-list: the kernel applies the strictest answer of all of them, and the allow-list
//! comes last so installing the earlier ones needs no row.
//!
//! What the sandbox's deny-list shares with these (the error type, the filter
//! architecture, a 32-bit argument condition) is `nl2sh_proto::seccomp`.

use std::collections::BTreeMap;

use nl2sh_proto::seccomp::{arch, dword};
use seccompiler::{SeccompAction, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};

/// A filter as the kernel loads it: what [`programs`] makes.
pub use seccompiler::BpfProgram;

pub use nl2sh_proto::seccomp::SeccompError;

/// Compiles the items it is given only where seccompiler builds filters: Linux on
/// x86_64, aarch64 and riscv64. A worker's table names system calls other architectures
/// lack (or have under other names), so it exists only there. With
/// `{ … } else { … }`, the second group is compiled everywhere else, to stand in for the
/// first. The one list of those architectures for every crate with a table.
#[macro_export]
macro_rules! cfg_seccomp_filter {
    ({ $($filter:item)* } else { $($none:item)* }) => {
        $(
            #[cfg(all(
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")
            ))]
            $filter
        )*
        $(
            #[cfg(not(all(
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")
            )))]
            $none
        )*
    };
    ($($filter:item)*) => {
        $crate::cfg_seccomp_filter! { { $($filter)* } else {} }
    };
}

/// What a worker may do with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed, whatever the arguments.
    Allow,
    /// Allowed when any of the conditions holds; otherwise the worker is killed.
    AllowIf(&'static [Cond]),
    /// Allowed when any of the conditions holds; otherwise refused with `EPERM`, because
    /// libraries try other forms of the call and cope with a refusal. Only
    /// [`Cond::Eq`] can be negated, so only it may stand here.
    AllowElseEperm(&'static [Cond]),
    /// Allowed, except refused with `EPERM` when any of the conditions holds (a library
    /// tries it and copes with the refusal).
    AllowUnlessEperm(&'static [Cond]),
    /// Always refused with this errno (`EPERM` or `ENOSYS`, the only two built): a
    /// library probes the call and copes.
    Refuse(i32),
}

/// A condition on one argument (index from 0), compared on its low 32 bits: every
/// argument a table checks is an `int` (or flags the kernel reads as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Eq(u8, u64),
    /// All of these bits are set.
    HasBits(u8, u64),
    /// None of these bits is set.
    LacksBits(u8, u64),
    /// The argument is the worker's own process id (known when the filter is built).
    OwnPid(u8),
}

/// One row of a table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub nr: libc::c_long,
    pub name: &'static str,
    pub verdict: Verdict,
    pub why: &'static str,
}

/// `seccomp_row!(SYS_name, verdict, "why")`: a [`seccomp::Row`](Row) for the system call
/// `libc::SYS_name`, named as written so a test or a refusal can say which. `libc` is
/// the calling crate's (every crate with a table depends on it for its constants).
#[macro_export]
macro_rules! seccomp_row {
    ($sys:ident, $verdict:expr, $why:expr) => {
        $crate::seccomp::Row {
            nr: ::libc::$sys,
            name: stringify!($sys),
            verdict: $verdict,
            why: $why,
        }
    };
}

/// An ioctl request as the filter compares it (`Ioctl` is `c_ulong` on glibc and `c_int`
/// on musl).
#[allow(clippy::unnecessary_cast)]
pub const fn ioctl(request: libc::Ioctl) -> u64 {
    request as u64
}

crate::cfg_seccomp_filter! {
    /// The rows both workers need alike, written once: the event loop of their tokio
    /// runtime (made after the filter is on) and serving HTTP on the inherited listener
    /// with [`crate::connections`]. Each worker's table is its own rows chained with
    /// [`serving`]; a worker lists none of these calls again (its table would not build:
    /// see [`programs`]).
    pub const SERVING: &[Row] = &[
        crate::seccomp_row!(
            SYS_epoll_create1,
            Verdict::Allow,
            "the runtime's poller, made after the filter is on"
        ),
        crate::seccomp_row!(
            SYS_epoll_ctl,
            Verdict::Allow,
            "registers the channels, the listener and connections"
        ),
        crate::seccomp_row!(
            SYS_epoll_pwait,
            Verdict::Allow,
            "waits for events (musl's epoll_wait; the only form on aarch64 and riscv64)"
        ),
        crate::seccomp_row!(SYS_eventfd2, Verdict::Allow, "the runtime's waker"),
        crate::seccomp_row!(
            SYS_socketpair,
            Verdict::AllowIf(&[Cond::Eq(0, libc::AF_UNIX as u64)]),
            "the runtime's signal driver makes a local pair when it starts; AF_UNIX only"
        ),
        crate::seccomp_row!(
            SYS_writev,
            Verdict::Allow,
            "HTTP responses (head and body in one call)"
        ),
        crate::seccomp_row!(
            SYS_recvfrom,
            Verdict::Allow,
            "channel frames and HTTP requests (recv)"
        ),
        crate::seccomp_row!(
            SYS_accept4,
            Verdict::Allow,
            "connections on the inherited listener"
        ),
        crate::seccomp_row!(
            SYS_shutdown,
            Verdict::Allow,
            "half-closes a finished HTTP connection"
        ),
        crate::seccomp_row!(SYS_close, Verdict::Allow, "closes connections"),
    ];

    /// [`SERVING`]'s rows for calls that exist only on x86_64 (aarch64 and riscv64 have
    /// the `p*` forms only).
    #[cfg(target_arch = "x86_64")]
    pub const SERVING_X86_64: &[Row] = &[crate::seccomp_row!(
        SYS_epoll_wait,
        Verdict::Allow,
        "waits for events (glibc)"
    )];
    #[cfg(not(target_arch = "x86_64"))]
    pub const SERVING_X86_64: &[Row] = &[];

    /// The shared rows for this architecture, to chain with a worker's own.
    pub fn serving() -> impl Iterator<Item = &'static Row> + Clone {
        SERVING.iter().chain(SERVING_X86_64.iter())
    }
}

/// What is wrong with `table` as a worker's allow-list, one line each (none: nothing):
/// a call listed twice, a row not named `SYS_…` or without a reason, an `AllowIf` that
/// allows nothing, a refusal with another errno than `EPERM` or `ENOSYS`. Each worker's
/// tests check its table with it.
pub fn table_problems<'a>(table: impl IntoIterator<Item = &'a Row>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut problems = Vec::new();
    for row in table {
        if !seen.insert(row.nr) {
            problems.push(format!("{} listed twice", row.name));
        }
        if !row.name.starts_with("SYS_") {
            problems.push(format!("{} is not named SYS_…", row.name));
        }
        if row.why.trim().len() < 10 {
            problems.push(format!("{} has no reason", row.name));
        }
        match row.verdict {
            Verdict::AllowIf([]) => {
                problems.push(format!("{} allows nothing", row.name));
            }
            Verdict::Refuse(errno) if ![libc::EPERM, libc::ENOSYS].contains(&errno) => {
                problems.push(format!("{} refuses with errno {errno}", row.name));
            }
            _ => {}
        }
    }
    problems
}

/// How many system calls `table` lets through (with or without conditions).
pub fn allowed_count<'a>(table: impl IntoIterator<Item = &'a Row>) -> usize {
    table
        .into_iter()
        .filter(|r| !matches!(r.verdict, Verdict::Refuse(_)))
        .count()
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
/// negated here; a table uses nothing else with [`Verdict::AllowElseEperm`].
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

/// `table`'s filters in installation order, for the worker's own pid: one per errno the
/// table refuses with, in ascending errno order (`EPERM`, then `ENOSYS`), then the
/// allow-list, whose default is to kill the process. A table that lists a call twice, or
/// refuses with another errno, is refused.
pub fn programs<'a>(
    table: impl IntoIterator<Item = &'a Row>,
    own_pid: u32,
) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = arch()?;
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut refusals: BTreeMap<i32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for row in table {
        let nr = key(row.nr);
        // The allow-list lets every form of a refused or partly refused call through;
        // the errno filters refuse what the row refuses.
        let rules = match row.verdict {
            Verdict::Allow => Vec::new(),
            Verdict::AllowIf(conds) => any_of(conds, own_pid)?,
            Verdict::AllowElseEperm(conds) => {
                // Refusing the forms outside `conds`.
                let refused = none_of(conds)?;
                refusals.entry(libc::EPERM).or_default().insert(nr, refused);
                Vec::new()
            }
            Verdict::AllowUnlessEperm(conds) => {
                // Refusing the forms that match `conds`.
                let refused = any_of(conds, own_pid)?;
                refusals.entry(libc::EPERM).or_default().insert(nr, refused);
                Vec::new()
            }
            Verdict::Refuse(errno) => {
                if ![libc::EPERM, libc::ENOSYS].contains(&errno) {
                    return Err(SeccompError::Table(format!(
                        "{}: only EPERM and ENOSYS refusals are built",
                        row.name
                    )));
                }
                refusals.entry(errno).or_default().insert(nr, Vec::new());
                Vec::new()
            }
        };
        if allow.insert(nr, rules).is_some() {
            return Err(SeccompError::Table(format!("{} listed twice", row.name)));
        }
    }
    let mut programs = Vec::with_capacity(refusals.len() + 1);
    for (errno, rules) in refusals {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno.unsigned_abs()),
            arch,
        )?;
        programs.push(filter.try_into()?);
    }
    let allow_list = SeccompFilter::new(
        allow,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        arch,
    )?;
    programs.push(allow_list.try_into()?);
    Ok(programs)
}

/// Install `table`'s filters on every thread of the process (a worker calls this with
/// one; TSYNC makes sure of it). Sets no_new_privs, which the worker already has.
pub fn install<'a>(
    table: impl IntoIterator<Item = &'a Row>,
    own_pid: u32,
) -> Result<(), SeccompError> {
    for program in programs(table, own_pid)? {
        seccompiler::apply_filter_all_threads(&program)?;
    }
    Ok(())
}

/// Confine this process with `table` for good, where the kernel has seccomp: the
/// filter's state in the words of the worker's report (`on (N system calls allowed)`,
/// `off (kernel)`, `off (no filter for <arch>)`) and whether a filter is on. A filter
/// that exists for this architecture and kernel but fails to build or install is an
/// error: the worker refuses to start rather than run without it.
pub fn apply<'a>(
    table: impl IntoIterator<Item = &'a Row> + Clone,
    own_pid: u32,
) -> Result<(String, bool), SeccompError> {
    if !crate::sys::kernel_has_seccomp() {
        return Ok(("off (kernel)".into(), false));
    }
    match install(table.clone(), own_pid) {
        Ok(()) => Ok((
            format!("on ({} system calls allowed)", allowed_count(table)),
            true,
        )),
        Err(SeccompError::Arch(arch)) => Ok((format!("off (no filter for {arch})"), false)),
        Err(e) => Err(e),
    }
}

/// [`apply`]'s answer where seccompiler builds no filter (see [`cfg_seccomp_filter`]),
/// so a worker has no table.
pub fn no_filter() -> (String, bool) {
    (
        format!("off (no filter for {})", std::env::consts::ARCH),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::seccomp_row as row;
    use Verdict::{Allow, AllowElseEperm, AllowIf, AllowUnlessEperm, Refuse};

    const TABLE: &[Row] = &[
        row!(SYS_read, Allow, "reads"),
        row!(
            SYS_tgkill,
            AllowIf(&[Cond::OwnPid(0)]),
            "signals only itself"
        ),
        row!(
            SYS_mmap,
            AllowUnlessEperm(&[Cond::HasBits(2, libc::PROT_EXEC as u64)]),
            "never executable"
        ),
        row!(
            SYS_socket,
            AllowElseEperm(&[Cond::Eq(0, libc::AF_INET as u64)]),
            "IPv4 only"
        ),
        row!(SYS_clone3, Refuse(libc::ENOSYS), "falls back to clone"),
        row!(SYS_openat, Refuse(libc::EPERM), "opens nothing"),
    ];

    fn error(table: &[Row]) -> String {
        match programs(table, std::process::id()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("built"),
        }
    }

    #[test]
    fn one_filter_per_refusing_errno_then_the_allow_list() {
        let built = programs(TABLE, std::process::id()).unwrap();
        // EPERM, ENOSYS, the allow-list.
        assert_eq!(built.len(), 3);
        assert!(built.iter().all(|p| !p.is_empty()));
        let allows_only = &TABLE[..2];
        assert_eq!(programs(allows_only, std::process::id()).unwrap().len(), 1);
        assert_eq!(allowed_count(TABLE), 4);
    }

    #[test]
    fn a_table_that_cannot_be_built_is_refused() {
        let twice = [TABLE[0], TABLE[0]];
        assert!(error(&twice).contains("SYS_read listed twice"));
        let einval = [row!(SYS_bind, Refuse(libc::EINVAL), "refused")];
        assert!(error(&einval).contains("only EPERM and ENOSYS"));
        let negated = [row!(
            SYS_socket,
            AllowElseEperm(&[Cond::LacksBits(1, 1)]),
            "cannot be negated"
        )];
        assert!(error(&negated).contains("cannot negate"));
    }

    #[test]
    fn what_is_wrong_with_a_table_is_said() {
        let good = row!(SYS_read, Allow, "reads its channels");
        assert!(table_problems(&[good, TABLE[1], TABLE[2]]).is_empty());
        let bad = [
            good,
            Row {
                name: "read",
                ..good
            },
            row!(SYS_write, Allow, "?"),
            row!(SYS_close, AllowIf(&[]), "allows nothing at all"),
            row!(SYS_bind, Refuse(libc::EINVAL), "refused with EINVAL"),
        ];
        let einval = format!("SYS_bind refuses with errno {}", libc::EINVAL);
        assert_eq!(
            table_problems(&bad),
            [
                "read listed twice",
                "read is not named SYS_…",
                "SYS_write has no reason",
                "SYS_close allows nothing",
                einval.as_str(),
            ]
        );
    }

    #[test]
    fn a_row_names_its_call() {
        assert_eq!(TABLE[0].nr, libc::SYS_read);
        assert_eq!(TABLE[0].name, "SYS_read");
    }
    crate::cfg_seccomp_filter! {
        /// What both workers are granted alike stays within serving: no new socket but
        /// the runtime's local pair, nothing that starts a thread, a process or a
        /// connection.
        #[test]
        fn the_shared_rows_serve_and_nothing_more() {
            assert_eq!(table_problems(serving()), Vec::<String>::new());
            let seen: std::collections::HashSet<_> = serving().map(|r| r.nr).collect();
            let never = [
                libc::SYS_socket,
                libc::SYS_connect,
                libc::SYS_bind,
                libc::SYS_listen,
                libc::SYS_clone,
                libc::SYS_clone3,
                libc::SYS_execve,
                libc::SYS_openat,
            ];
            for nr in never {
                assert!(!seen.contains(&nr), "syscall {nr} is shared");
            }
            let socketpair = serving().find(|r| r.nr == libc::SYS_socketpair);
            assert_eq!(
                socketpair.map(|r| r.verdict),
                Some(AllowIf(&[Cond::Eq(0, libc::AF_UNIX as u64)]))
            );
            assert_eq!(allowed_count(serving()), seen.len());
            assert_eq!(programs(serving(), std::process::id()).unwrap().len(), 1);
        }
    }
}
