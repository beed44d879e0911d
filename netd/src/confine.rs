//! netd confines itself once, in [`crate::run`], after the identity check
//! ([`verify_unprivileged`], [`forbid_inspection`]) and before the runtime exists or the
//! first frame is read: open-file limit raised, then Landlock (best effort by kernel ABI),
//! then the seccomp allow-list ([`crate::seccomp`]) last, so the earlier steps need no
//! rows of their own. Threads created later inherit all of it.
//!
//! What is active is kept for `nl2sh_inspect` (its `netd` object) and logged once.
//!
//! All of it is in place before netd reads its first frame, so no rule can depend on the
//! settings that frame brings (the model's URL, its proxy): outbound connections are
//! allowed to any address and port, and the settings decide where they go. What the
//! rules do depend on is how this device resolves names ([`name_service`]), which is
//! decided here, before the filter, once.

use std::sync::OnceLock;

use crate::agent::dns::{NameService, RESOLV_CONF};

use nl2sh_proto::sys::process;
use serde_json::{json, Value};

use crate::error::NetdError;
use crate::sys;

/// Refuse to go on if this process is root or can become root again.
///
/// The supervisor drops netd's identity between fork and exec (docs/ARCHITECTURE.md,
/// "Starting a worker"); this is the worker's own check that it happened: the effective
/// uid is not 0, and `setuid(0)` fails (which also covers a real or saved uid of 0, and a
/// retained CAP_SETUID). Call before any thread exists: setuid acts per thread.
pub fn verify_unprivileged() -> Result<(), NetdError> {
    let euid = process::effective_uid();
    if euid == 0 {
        return Err(NetdError::Privileges("netd must not run as root".into()));
    }
    process::verify_no_way_back(euid).map_err(|e| NetdError::Privileges(e.to_string()))
}

/// Make netd non-dumpable, so another process of its uid (should one ever run as netd's
/// uid) cannot read its memory, descriptors or environment
/// ([`process::forbid_inspection`]).
pub fn forbid_inspection() -> Result<(), NetdError> {
    process::forbid_inspection()
        .map_err(|e| NetdError::Privileges(format!("cannot make netd non-dumpable: {e}")))
}

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
    /// How the Agent's model client resolves names under these rules.
    pub name_resolution: String,
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
            "name_resolution": self.name_resolution,
        })
    }
}

static APPLIED: OnceLock<Report> = OnceLock::new();
static NAMES: OnceLock<NameService> = OnceLock::new();

/// How the Agent's model client resolves names: what confinement was set up for, or,
/// when netd runs in-process without confinement, what this device offers.
pub fn name_service() -> NameService {
    NAMES.get().cloned().unwrap_or_else(NameService::detect)
}

/// The files glibc's `getaddrinfo` reads (found with `strace -f` on a confined netd):
/// Landlock lets netd read these and nothing else.
pub const RESOLVER_FILES: &[&str] = &[
    RESOLV_CONF,
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];

/// The `netd` object of `nl2sh_inspect`: what [`apply`] did, or, when netd runs
/// in-process (tests wiring workers together), that nothing was applied.
pub fn report_json() -> Value {
    match APPLIED.get() {
        Some(report) => report.to_json(),
        None => {
            let state = process::process_state();
            Report {
                seccomp: "off (netd runs in-process)".into(),
                landlock: "off (netd runs in-process)".into(),
                uid: state.uid,
                gid: state.gid,
                no_new_privs: state.no_new_privs,
                dumpable: state.dumpable,
                open_files: sys::open_file_limit(),
                name_resolution: name_service().describe(),
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
    apply_for(NameService::detect())
}

/// [`apply`], with name resolution through `names` (a way to confine netd for
/// Android's resolver on any machine).
pub fn apply_for(names: NameService) -> Result<&'static Report, NetdError> {
    let open_files = sys::raise_open_file_limit()?;
    let threads = process::process_state().threads;
    let (landlock, files_confined) = landlock(&names);
    // Landlock binds the calling thread and those it creates; a thread that already
    // existed would escape it (the filter is synchronized to every thread). Without
    // /proc the count is unknown; netd has started no thread of its own by here. Where
    // Landlock enforces nothing there is nothing to escape, and a thread netd did not
    // start may be its host's: qemu-user keeps one of its own in every process.
    if files_confined {
        if let Some(threads) = threads.filter(|&n| n != 1) {
            return Err(NetdError::Privileges(format!(
                "confinement must come before any thread; {threads} exist"
            )));
        }
    }
    // seccomp cannot see paths: the resolver's files may be opened only where Landlock
    // keeps every other path out of reach.
    let names = match names {
        NameService::System if !files_confined => NameService::SystemWithoutFiles,
        other => other,
    };
    if names == NameService::SystemWithoutFiles {
        tracing::warn!(
            "no Landlock: netd may not read /etc/resolv.conf or /etc/hosts, so the model's \
             host name resolves only through a name server on 127.0.0.1 (an IP address in \
             model.base_url always works)"
        );
    }
    let names = NAMES.get_or_init(|| names).clone();
    // Read before the filter: it refuses these prctl reads.
    let state = process::process_state();
    let (seccomp, filtered) = seccomp(&names)?;
    let report = Report {
        seccomp,
        landlock,
        uid: state.uid,
        gid: state.gid,
        // Installing the filter sets no_new_privs if it was not set already.
        no_new_privs: state.no_new_privs || filtered,
        dumpable: state.dumpable,
        open_files,
        name_resolution: names.describe(),
    };
    Ok(APPLIED.get_or_init(|| report))
}

nl2sh_proto::cfg_seccomp_filter! {
    {
        /// The filter's state for the report, and whether it is on.
        fn seccomp(names: &NameService) -> Result<(String, bool), NetdError> {
            use crate::seccomp::{table, Dns};
            let dns = match names {
                NameService::System => Dns::System,
                NameService::SystemWithoutFiles => Dns::SystemWithoutFiles,
                NameService::DnsProxyd(_) => Dns::AndroidDnsProxy,
            };
            nl2sh_proto::seccomp::apply(table(dns), std::process::id())
                .map_err(|e| NetdError::Privileges(e.to_string()))
        }
    } else {
        fn seccomp(_names: &NameService) -> Result<(String, bool), NetdError> {
            Ok(nl2sh_proto::seccomp::no_filter())
        }
    }
}

/// The newest Landlock ABI this build knows; older kernels enforce what they have.
const LANDLOCK_ABI: landlock::ABI = landlock::ABI::V10;

/// Landlock with every filesystem right handled: once started netd creates, writes and
/// executes nothing (its channels, listener and stdio are inherited) and reads only what
/// name resolution needs: the resolver files with the system resolver (and, when
/// `/etc/resolv.conf` is a link elsewhere, that directory: resolvers replace the file
/// there by renaming), or connecting to Android's resolver socket. TCP bind is handled
/// with no rule: netd only accepts on its inherited listener. TCP connect is not handled:
/// the model's port is in the settings, which arrive after this. Signals and abstract
/// Unix sockets are scoped to netd itself. Also says whether reads are confined to the
/// rules (else netd must not open anything: see [`apply_for`]).
fn landlock(names: &NameService) -> (String, bool) {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus,
        RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    let (readable, sockets): (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) = match names {
        NameService::System => (resolver_paths(), Vec::new()),
        NameService::SystemWithoutFiles => (Vec::new(), Vec::new()),
        NameService::DnsProxyd(socket) => (Vec::new(), vec![socket.clone()]),
    };
    let attempt = || -> Result<RestrictionStatus, landlock::RulesetError> {
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
            .handle_access(AccessNet::BindTcp)?
            .scope(Scope::from_all(LANDLOCK_ABI))?
            .create()?
            .add_rules(path_beneath_rules(&readable, AccessFs::ReadFile))?
            .add_rules(path_beneath_rules(&sockets, AccessFs::ResolveUnix))?
            .restrict_self()
    };
    let newest = LANDLOCK_ABI as i32;
    match attempt() {
        Ok(status) => {
            let kernel = match status.landlock {
                LandlockStatus::Available { effective_abi, .. } => Some(effective_abi as i32),
                _ => None,
            };
            // Reading files is in every Landlock ABI: enforced at all means reads are
            // limited to the rules.
            match (status.ruleset, kernel) {
                (RulesetStatus::FullyEnforced, _) => ("on".into(), true),
                (RulesetStatus::PartiallyEnforced, Some(abi)) => (
                    format!(
                        "partial (kernel ABI {abi} of {newest}: rights newer than the kernel are not enforced)"
                    ),
                    true,
                ),
                (RulesetStatus::PartiallyEnforced, None) => ("partial".into(), true),
                (RulesetStatus::NotEnforced, _) => ("off (kernel)".into(), false),
            }
        }
        Err(e) => (format!("off ({e})"), false),
    }
}

/// What the system resolver may read: [`RESOLVER_FILES`] that exist, and the directory
/// `/etc/resolv.conf` links into when that is not `/etc` (systemd-resolved's
/// `/run/systemd/resolve`, resolvconf's `/run/resolvconf`): the file there is replaced
/// by renaming, and a rule on the file alone would not cover its successor. A plain
/// `/etc/resolv.conf` that is replaced while netd runs becomes unreadable until netd
/// restarts (glibc then falls back to its default name server).
fn resolver_paths() -> Vec<std::path::PathBuf> {
    let mut paths: Vec<std::path::PathBuf> = RESOLVER_FILES
        .iter()
        .map(std::path::PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    if let Ok(real) = std::fs::canonicalize(RESOLV_CONF) {
        if let Some(dir) = real.parent() {
            if dir != std::path::Path::new("/etc") && dir != std::path::Path::new("/") {
                paths.push(dir.to_path_buf());
            }
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        let result = verify_unprivileged();
        if process::effective_uid() == 0 {
            assert!(matches!(result, Err(NetdError::Privileges(_))));
        } else {
            // An ordinary test user cannot become root, so the check passes.
            assert!(result.is_ok(), "{result:?}");
        }
    }
}
