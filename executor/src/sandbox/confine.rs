//! The payload's identity and restrictions, applied in the forked child of the helper
//! (pid 1 of the sandbox's PID namespace) before it runs anything the caller chose.
//! Order: capability bounding and inheritable sets emptied (needs CAP_SETPCAP, so while
//! root) → process limit → groups → gid → uid (which empties the permitted, effective and
//! ambient sets) → parent-death signal → no_new_privs → checks → Landlock → seccomp.
//!
//! No capability is kept: a sandboxed command reads what a stranger to the device reads
//! (world-readable files), so a secret in a place nobody listed is out of its reach as
//! long as its file is private. Privileged read-only diagnostics are fixed tools instead.

use caps::CapSet;
use nl2sh_proto::channels::{Gid, SandboxLimits, Uid};
use serde_json::{json, Value};

use super::seccomp;

/// Seconds between the CPU limit's SIGXCPU and its SIGKILL.
const CPU_KILL_AFTER: u64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{0}: {1}")]
    Caps(&'static str, caps::errors::CapsError),
    #[error("{0}: {1}")]
    Sys(&'static str, nix::Error),
    #[error("{0}")]
    Check(String),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
}

/// What was applied, for the probe and `nl2sh_inspect`.
#[derive(Debug, Clone)]
pub struct Applied {
    pub uid: Uid,
    pub gid: Gid,
    pub seccomp: Result<(), String>,
    pub landlock: String,
}

impl Applied {
    pub fn to_json(&self) -> Value {
        json!({
            "identity": format!("uid {} gid {}, no supplementary groups", self.uid.0, self.gid.0),
            "capabilities": "none (bounding, permitted, effective, inheritable, ambient)",
            "no_new_privs": true,
            "seccomp": match &self.seccomp {
                Ok(()) => "on".to_string(),
                Err(why) => format!("off ({why})"),
            },
            "landlock": self.landlock,
        })
    }
}

fn caps_step(what: &'static str) -> impl FnOnce(caps::errors::CapsError) -> ConfineError {
    move |e| ConfineError::Caps(what, e)
}

fn sys_step(what: &'static str) -> impl FnOnce(nix::Error) -> ConfineError {
    move |e| ConfineError::Sys(what, e)
}

/// Become `uid`/`gid` with no capability, no_new_privs, die with `parent` (0: the parent
/// is outside our PID namespace and cannot be named). Nothing here is best-effort: an
/// error means the payload must not run.
pub fn drop_identity(
    uid: Uid,
    gid: Gid,
    parent: libc::pid_t,
    limits: SandboxLimits,
) -> Result<(), ConfineError> {
    let (uid, gid) = (uid.0, gid.0);
    if uid == 0 || gid == 0 {
        return Err(ConfineError::Check(
            "the sandbox identity must not be root (uid or gid 0)".into(),
        ));
    }
    for cap in caps::runtime::thread_all_supported() {
        caps::drop(None, CapSet::Bounding, cap).map_err(caps_step("clearing the bounding set"))?;
    }
    caps::clear(None, CapSet::Inheritable).map_err(caps_step("clearing inheritable"))?;
    caps::clear(None, CapSet::Ambient).map_err(caps_step("clearing ambient"))?;
    // The process limit counts the processes of a uid, and each running call has a uid
    // of its own, so it is per call: a fork bomb stops here, and other callers' commands
    // still start. Memory and CPU time are per process; the call's timeout ends the rest.
    use nix::sys::resource::{setrlimit, Resource};
    let processes = u64::from(limits.processes);
    setrlimit(Resource::RLIMIT_NPROC, processes, processes)
        .map_err(sys_step("limiting the number of processes"))?;
    setrlimit(
        Resource::RLIMIT_DATA,
        limits.memory_bytes,
        limits.memory_bytes,
    )
    .map_err(sys_step("limiting memory"))?;
    setrlimit(
        Resource::RLIMIT_CPU,
        limits.cpu_secs,
        limits.cpu_secs.saturating_add(CPU_KILL_AFTER),
    )
    .map_err(sys_step("limiting CPU time"))?;
    nix::unistd::setgroups(&[]).map_err(sys_step("clearing supplementary groups"))?;
    let (uid, gid) = (
        nix::unistd::Uid::from_raw(uid),
        nix::unistd::Gid::from_raw(gid),
    );
    nix::unistd::setresgid(gid, gid, gid).map_err(sys_step("setting the gid"))?;
    // Without keepcaps, leaving uid 0 empties the permitted and effective sets.
    nix::sys::prctl::set_keepcaps(false).map_err(sys_step("resetting keepcaps"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(sys_step("setting the uid"))?;
    // Cleared by the uid change, so set now; then make sure the parent did not die
    // before it was set.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(sys_step("setting the parent-death signal"))?;
    if parent != 0 && nix::unistd::getppid().as_raw() != parent {
        return Err(ConfineError::Check("the sandbox helper is gone".into()));
    }
    nix::sys::prctl::set_no_new_privs().map_err(sys_step("setting no_new_privs"))?;
    check_dropped(uid, gid)
}

/// The drop is asserted, not assumed: root cannot be regained and no set holds any
/// capability.
fn check_dropped(uid: nix::unistd::Uid, gid: nix::unistd::Gid) -> Result<(), ConfineError> {
    use nix::unistd::{Gid, Uid};
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok()
        || nix::unistd::setgid(Gid::from_raw(0)).is_ok()
    {
        return Err(ConfineError::Check("root could be regained".into()));
    }
    let ids = nix::unistd::getresuid().map_err(sys_step("reading uids"))?;
    let gids = nix::unistd::getresgid().map_err(sys_step("reading gids"))?;
    if [ids.real, ids.effective, ids.saved] != [uid; 3]
        || [gids.real, gids.effective, gids.saved] != [gid; 3]
    {
        return Err(ConfineError::Check("the identity did not change".into()));
    }
    if !nix::unistd::getgroups()
        .map_err(sys_step("reading groups"))?
        .is_empty()
    {
        return Err(ConfineError::Check("supplementary groups remain".into()));
    }
    for set in [
        CapSet::Permitted,
        CapSet::Effective,
        CapSet::Inheritable,
        CapSet::Ambient,
        CapSet::Bounding,
    ] {
        let held = caps::read(None, set).map_err(caps_step("reading capabilities"))?;
        if !held.is_empty() {
            return Err(ConfineError::Check(format!(
                "capabilities remain in {set:?}: {held:?}"
            )));
        }
    }
    if !nix::sys::prctl::get_no_new_privs().map_err(sys_step("reading no_new_privs"))? {
        return Err(ConfineError::Check("no_new_privs is not set".into()));
    }
    Ok(())
}

/// Landlock, best effort by kernel ABI: no writes outside the scratch directory and the
/// null-like devices (also through another process's `/proc/<pid>/root`), no TCP, no
/// signals to processes outside the sandbox, no abstract Unix sockets outside it.
pub fn landlock(scratch: &str) -> String {
    use landlock::{
        path_beneath_rules, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, ABI,
    };
    let abi = ABI::V6;
    let attempt = || -> Result<RulesetStatus, landlock::RulesetError> {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_write(abi))?
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
            .scope(Scope::AbstractUnixSocket | Scope::Signal)?
            .create()?
            .add_rules(path_beneath_rules([scratch], AccessFs::from_write(abi)))?
            .add_rules(path_beneath_rules(
                ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"],
                AccessFs::WriteFile | AccessFs::Truncate,
            ))?
            .restrict_self()?;
        Ok(status.ruleset)
    };
    match attempt() {
        Ok(RulesetStatus::FullyEnforced) => "on".into(),
        Ok(RulesetStatus::PartiallyEnforced) => "partial (older kernel ABI)".into(),
        Ok(RulesetStatus::NotEnforced) => "off (kernel)".into(),
        Err(e) => format!("off ({e})"),
    }
}

/// Install the seccomp filter, the last step before the payload runs. An architecture
/// without a filter reports it; a filter that fails to install is an error.
pub fn seccomp(ipc_namespace: bool) -> Result<Result<(), String>, ConfineError> {
    match seccomp::install(ipc_namespace) {
        Ok(()) => Ok(Ok(())),
        Err(seccomp::SeccompError::Arch(arch)) => Ok(Err(format!("no filter for {arch}"))),
        Err(e) => Err(e.into()),
    }
}
