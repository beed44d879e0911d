//! netd confines itself once, in [`crate::run`], after the identity check and before the
//! runtime exists or the first frame is read: open-file limit raised, then Landlock (best
//! effort by kernel ABI), then the seccomp allow-list ([`crate::seccomp`]) last, so the
//! earlier steps need no rows of their own. Threads created later inherit all of it.
//!
//! What is active is kept for `nl2sh_inspect` (its `netd` object) and logged once.

use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::error::NetdError;
use crate::sys;

/// What [`apply`] put in place.
#[derive(Debug, Clone)]
pub struct Report {
    pub seccomp: String,
    pub landlock: String,
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    pub open_files: u64,
}

impl Report {
    pub fn to_json(&self) -> Value {
        json!({
            "seccomp": self.seccomp,
            "landlock": self.landlock,
            "uid": self.uid,
            "gid": self.gid,
            "no_new_privs": self.no_new_privs,
            "dumpable": self.dumpable,
            "open_files_limit": self.open_files,
        })
    }
}

static APPLIED: OnceLock<Report> = OnceLock::new();

/// The `netd` object of `nl2sh_inspect`: what [`apply`] did, or, when netd runs
/// in-process (tests wiring workers together), that nothing was applied.
pub fn report_json() -> Value {
    match APPLIED.get() {
        Some(report) => report.to_json(),
        None => {
            let state = sys::process_state();
            Report {
                seccomp: "off (netd runs in-process)".into(),
                landlock: "off (netd runs in-process)".into(),
                uid: state.uid,
                gid: state.gid,
                no_new_privs: state.no_new_privs,
                dumpable: state.dumpable,
                open_files: sys::open_file_limit(),
            }
            .to_json()
        }
    }
}

/// The open-file soft limit netd works with: the one [`apply`] raised (the filter refuses
/// reading it again), or the current one when netd runs in-process.
pub fn open_file_limit() -> u64 {
    match APPLIED.get() {
        Some(report) => report.open_files,
        None => sys::open_file_limit(),
    }
}

/// Confine this process for good. Landlock is best effort (kernels without it, Android's
/// among them, run without and say so); a seccomp filter that exists for this
/// architecture and kernel but fails to install stops netd from starting.
pub fn apply() -> Result<&'static Report, NetdError> {
    let open_files = sys::raise_open_file_limit()?;
    // Landlock binds the calling thread and those it creates; a thread that already
    // existed would escape it (the filter is synchronized to every thread). Without
    // /proc the count is unknown; netd has started no thread of its own by here.
    if let Some(threads) = sys::process_state().threads.filter(|&n| n != 1) {
        return Err(NetdError::Privileges(format!(
            "confinement must come before any thread; {threads} exist"
        )));
    }
    let landlock = landlock();
    // Read before the filter: it refuses these prctl reads.
    let state = sys::process_state();
    let (seccomp, filtered) = seccomp()?;
    let report = Report {
        seccomp,
        landlock,
        uid: state.uid,
        gid: state.gid,
        // Installing the filter sets no_new_privs if it was not set already.
        no_new_privs: state.no_new_privs || filtered,
        dumpable: state.dumpable,
        open_files,
    };
    Ok(APPLIED.get_or_init(|| report))
}

#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    )
))]
/// The filter's state for the report, and whether it is on.
fn seccomp() -> Result<(String, bool), NetdError> {
    use crate::seccomp;
    if !sys::kernel_has_seccomp() {
        return Ok(("off (kernel)".into(), false));
    }
    match seccomp::install(std::process::id()) {
        Ok(()) => Ok((
            format!("on ({} system calls allowed)", seccomp::allowed_count()),
            true,
        )),
        Err(seccomp::SeccompError::Arch(arch)) => {
            Ok((format!("off (no filter for {arch})"), false))
        }
        Err(e) => Err(NetdError::Privileges(e.to_string())),
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    )
)))]
fn seccomp() -> Result<(String, bool), NetdError> {
    // seccompiler builds filters for x86_64, aarch64 and riscv64 only.
    Ok((
        format!("off (no filter for {})", std::env::consts::ARCH),
        false,
    ))
}

/// The newest Landlock ABI this build knows; older kernels enforce what they have.
const LANDLOCK_ABI: landlock::ABI = landlock::ABI::V10;

/// Landlock with every filesystem right handled and no rule: once started netd opens,
/// creates, executes nothing (its channels, listener and stdio are inherited). TCP and
/// UDP bind/connect are handled with no rule: netd only accepts on its inherited listener.
/// Signals and abstract Unix sockets are scoped to netd itself.
fn landlock() -> String {
    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, RestrictionStatus,
        Ruleset, RulesetAttr, RulesetStatus, Scope,
    };
    let attempt = || -> Result<RestrictionStatus, landlock::RulesetError> {
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
            .handle_access(AccessNet::from_all(LANDLOCK_ABI))?
            .scope(Scope::from_all(LANDLOCK_ABI))?
            .create()?
            .restrict_self()
    };
    let newest = LANDLOCK_ABI as i32;
    match attempt() {
        Ok(status) => {
            let kernel = match status.landlock {
                LandlockStatus::Available { effective_abi, .. } => Some(effective_abi as i32),
                _ => None,
            };
            match (status.ruleset, kernel) {
                (RulesetStatus::FullyEnforced, _) => "on".into(),
                (RulesetStatus::PartiallyEnforced, Some(abi)) => format!(
                    "partial (kernel ABI {abi} of {newest}: rights newer than the kernel are not enforced)"
                ),
                (RulesetStatus::PartiallyEnforced, None) => "partial".into(),
                (RulesetStatus::NotEnforced, _) => "off (kernel)".into(),
            }
        }
        Err(e) => format!("off ({e})"),
    }
}
