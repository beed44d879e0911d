//! How a worker that parses a stranger's bytes (netd, the Web console) confines itself,
//! once, before its runtime exists or the first frame is read: [`confine`], with the
//! worker's Landlock [`Rules`] and its seccomp table in and a [`Report`] out.
//!
//! In this order: the identity check ([`verify_unprivileged`]: not root, no way back to
//! root, no capabilities), made non-dumpable, then Landlock (best effort by kernel ABI),
//! then the seccomp allow-list last, so the earlier steps need no rows of their own.
//! Threads created later inherit all of it. The rules and the table are the worker's own
//! (`netd/src/confine.rs`, `web/src/confine.rs`); which table may depend on what Landlock
//! achieved (netd reads its resolver's files only where Landlock limits opens to them).

use std::io;
use std::path::PathBuf;

use nl2sh_proto::seccomp::SeccompError;
use nl2sh_proto::sys::process::capabilities;

use crate::seccomp::Row;
use crate::sys;

/// What a worker's [`Rules`] name: network rights (`AccessNet::BindTcp.into()`, or
/// `AccessNet::from_all(LANDLOCK_ABI)` with `Access` in scope).
pub use landlock::{Access, AccessNet, BitFlags};

/// A way back to privilege, for which a worker refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("it must not run as root (uid {uid}, euid {euid})")]
    Root { uid: u32, euid: u32 },
    #[error("setuid(0) succeeded from euid {euid}: privileges were not dropped")]
    WayBack { euid: u32 },
    #[error("it holds capabilities (effective {effective:#x}, permitted {permitted:#x})")]
    Capabilities { effective: u64, permitted: u64 },
    #[error("cannot read its capabilities: {0}")]
    ReadCapabilities(io::Error),
}

/// Refuse to go on if this process is root, can become root again, or holds any
/// capability: the one check of both workers.
///
/// The supervisor drops a worker's identity between fork and exec (docs/ARCHITECTURE.md,
/// "Starting a worker"); this is the worker's own check that it happened: neither the
/// real nor the effective uid is 0, `setuid(0)` fails (which also covers a saved uid of
/// 0 and a retained CAP_SETUID), and the effective and permitted capability sets are
/// empty (with no_new_privs nothing can refill them). Call before any thread exists:
/// setuid and capabilities act per thread.
pub fn verify_unprivileged() -> Result<(), PrivilegeError> {
    let uid = sys::real_uid();
    let euid = sys::effective_uid();
    if uid == 0 || euid == 0 {
        return Err(PrivilegeError::Root { uid, euid });
    }
    if sys::setuid_root_succeeds() {
        return Err(PrivilegeError::WayBack { euid });
    }
    let caps = capabilities().map_err(PrivilegeError::ReadCapabilities)?;
    if caps.effective != 0 || caps.permitted != 0 {
        return Err(PrivilegeError::Capabilities {
            effective: caps.effective,
            permitted: caps.permitted,
        });
    }
    Ok(())
}

/// Why a worker refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error(transparent)]
    Privileges(#[from] PrivilegeError),
    #[error("cannot make itself non-dumpable: {0}")]
    Dumpable(io::Error),
    #[error("confinement must come before any thread; {0} exist")]
    Threads(usize),
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
}

/// The newest Landlock ABI this build knows; older kernels enforce what they have.
pub const LANDLOCK_ABI: landlock::ABI = landlock::ABI::V10;

/// A worker's Landlock ruleset: every file system right of [`LANDLOCK_ABI`] is handled,
/// and signals and abstract Unix sockets are scoped to the worker; what else is handled
/// and what is granted is the worker's.
pub struct Rules {
    /// Network rights handled, with no port granted.
    pub net: BitFlags<AccessNet>,
    /// Files (or directories, for everything beneath) the worker may read.
    pub readable: Vec<PathBuf>,
    /// Unix sockets the worker may connect to.
    pub sockets: Vec<PathBuf>,
    /// Enforce on every thread of the process where the kernel can (ABI 8), not only on
    /// the calling one and those it creates.
    pub all_threads: bool,
    /// What kernel ABI `abi` enforces of these rules, in words for the report (`None`:
    /// "on" says it all, and "partial" only that newer rights are not enforced).
    pub describe: fn(abi: i32, all_threads: bool) -> Option<String>,
}

/// What Landlock achieved.
#[derive(Debug, Clone)]
pub struct Landlock {
    /// For the report.
    pub report: String,
    /// Anything at all is enforced (reading files is in every ABI: enforced at all means
    /// reads are limited to the rules).
    pub enforced: bool,
    /// On every thread of the process, not only the calling one.
    pub all_threads: bool,
}

impl Rules {
    /// Restrict this process with the rules, as far as the kernel can: what
    /// [`confine`] does after its identity check (the confinement tests' children call
    /// it directly, as root may run them).
    pub fn restrict_self(&self) -> Landlock {
        use landlock::{
            path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, LandlockStatus,
            RestrictSelfAttr, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
            RulesetStatus, Scope,
        };
        let attempt = || -> Result<RestrictionStatus, landlock::RulesetError> {
            Ruleset::default()
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
                .handle_access(self.net)?
                .scope(Scope::from_all(LANDLOCK_ABI))?
                .create()?
                .add_rules(path_beneath_rules(&self.readable, AccessFs::ReadFile))?
                .add_rules(path_beneath_rules(&self.sockets, AccessFs::ResolveUnix))?
                .all_threads(self.all_threads)?
                .restrict_self()
        };
        let off = |report: String| Landlock {
            report,
            enforced: false,
            all_threads: false,
        };
        let status = match attempt() {
            Ok(status) => status,
            Err(e) => return off(format!("off ({e})")),
        };
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => Some(effective_abi as i32),
            _ => None,
        };
        let what = abi.map(|abi| (abi, (self.describe)(abi, status.all_threads)));
        let newest = LANDLOCK_ABI as i32;
        let report = match (status.ruleset, what) {
            (RulesetStatus::NotEnforced, _) => return off("off (kernel)".into()),
            (RulesetStatus::FullyEnforced, Some((_, Some(what)))) => format!("on ({what})"),
            (RulesetStatus::FullyEnforced, _) => "on".into(),
            (RulesetStatus::PartiallyEnforced, Some((abi, what))) => format!(
                "partial (kernel ABI {abi} of {newest}: {})",
                what.as_deref()
                    .unwrap_or("rights newer than the kernel are not enforced")
            ),
            (RulesetStatus::PartiallyEnforced, None) => "partial".into(),
        };
        Landlock {
            report,
            enforced: true,
            all_threads: status.all_threads,
        }
    }
}

/// What [`confine`] put in place.
#[derive(Debug, Clone)]
pub struct Report {
    pub seccomp: String,
    pub landlock: String,
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    /// The open-file soft limit the worker works with (the filter refuses reading it
    /// later).
    pub open_files: u64,
}

impl Report {
    /// The one line a worker says it with.
    fn log(&self, worker: &str) {
        tracing::info!(
            seccomp = %self.seccomp,
            landlock = %self.landlock,
            uid = self.uid,
            gid = self.gid,
            no_new_privs = self.no_new_privs,
            dumpable = self.dumpable,
            open_files_limit = self.open_files,
            "{worker} confined"
        );
    }
}

/// Confine this process for good (see the module comment), and say so in one line
/// naming `worker`. Landlock is best effort (kernels without it, many phones' among
/// them, run without and say so); any sign of privilege, or a seccomp filter that exists
/// for this architecture and kernel but fails to install, stops the worker from
/// starting. `table_for` names the worker's seccomp table once Landlock is done.
pub fn confine<T>(
    worker: &str,
    rules: &Rules,
    table_for: impl FnOnce(&Landlock) -> T,
) -> Result<Report, ConfineError>
where
    T: IntoIterator<Item = &'static Row> + Clone,
{
    // Before any thread exists: setuid and capabilities act per thread.
    verify_unprivileged()?;
    // Its `/proc/<pid>` then belongs to root: what it holds (the protocol token, the
    // session cookies it passes on) is out of reach of another process of its uid.
    sys::forbid_inspection().map_err(ConfineError::Dumpable)?;
    // Read before the filter, which refuses these calls (and /proc is out of reach after
    // Landlock).
    let state = sys::process_state();
    let open_files = sys::open_file_limit();
    let landlock = rules.restrict_self();
    // Landlock binds the threads it is enforced on; where the kernel cannot enforce it
    // on every thread (before ABI 8, or not asked to), a thread that already existed
    // would escape it. The worker has started none by here; where Landlock enforces
    // nothing there is nothing to escape, and a thread the worker did not start may be
    // its host's (qemu-user keeps one).
    if landlock.enforced && !landlock.all_threads {
        if let Some(threads) = state.threads.filter(|&n| n != 1) {
            return Err(ConfineError::Threads(threads));
        }
    }
    let (seccomp, filtered) = seccomp(table_for(&landlock))?;
    let report = Report {
        seccomp,
        landlock: landlock.report,
        uid: state.uid,
        gid: state.gid,
        // Landlock and the filter both set no_new_privs if it was not set already.
        no_new_privs: state.no_new_privs || filtered || landlock.enforced,
        dumpable: state.dumpable,
        open_files,
    };
    report.log(worker);
    Ok(report)
}

crate::cfg_seccomp_filter! {
    {
        /// The filter's state for the report, and whether it is on.
        fn seccomp<T>(table: T) -> Result<(String, bool), ConfineError>
        where
            T: IntoIterator<Item = &'static Row> + Clone,
        {
            Ok(crate::seccomp::apply(table, std::process::id())?)
        }
    } else {
        fn seccomp<T>(_table: T) -> Result<(String, bool), ConfineError> {
            Ok(crate::seccomp::no_filter())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        let result = verify_unprivileged();
        if sys::effective_uid() == 0 {
            assert!(
                matches!(result, Err(PrivilegeError::Root { .. })),
                "{result:?}"
            );
        } else if capabilities().is_ok_and(|c| c.effective == 0 && c.permitted == 0) {
            // An ordinary test user cannot become root, so the check passes.
            assert!(result.is_ok(), "{result:?}");
        }
    }

    #[test]
    fn the_messages_say_what_was_found() {
        let root = PrivilegeError::Root { uid: 0, euid: 0 };
        assert_eq!(root.to_string(), "it must not run as root (uid 0, euid 0)");
        let caps = PrivilegeError::Capabilities {
            effective: 0,
            permitted: 0x20,
        };
        assert_eq!(
            caps.to_string(),
            "it holds capabilities (effective 0x0, permitted 0x20)"
        );
    }
}
