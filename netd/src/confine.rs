//! netd confines itself once, in [`crate::run`], before the runtime exists or the first
//! frame is read: its open-file limit raised (the connection cap is fitted to it), then
//! the routine both confined HTTP workers share (`nl2sh_http_worker::confine`: not root,
//! no way back to root, no capabilities; non-dumpable; Landlock with netd's `rules`;
//! the seccomp allow-list of [`crate::seccomp`] last). Threads created later inherit all
//! of it.
//!
//! What is active is kept for `nl2sh_inspect` (its `netd` object) and logged once.
//!
//! All of it is in place before netd reads its first frame, so no rule can depend on the
//! settings that frame brings (the model's URL, its proxy): outbound connections are
//! allowed to any address and port, and the settings decide where they go. What the
//! rules do depend on is how this device resolves names ([`name_service`]), which is
//! decided here, before the filter, once.

use std::sync::OnceLock;

use nl2sh_http_worker::confine::{self, AccessNet, Rules};
use nl2sh_http_worker::seccomp::Row;
use nl2sh_http_worker::sys;
use serde_json::{json, Value};

use crate::agent::dns::{NameService, RESOLV_CONF};
use crate::error::NetdError;

/// What [`apply`] put in place.
#[derive(Debug, Clone)]
pub struct Report {
    /// What the shared routine did (it also logged it).
    pub confined: confine::Report,
    /// How the Agent's model client resolves names under these rules.
    pub name_resolution: String,
}

impl Report {
    pub fn to_json(&self) -> Value {
        let confined = &self.confined;
        json!({
            "seccomp": confined.seccomp,
            "landlock": confined.landlock,
            "uid": confined.uid,
            "gid": confined.gid,
            "no_new_privs": confined.no_new_privs,
            "dumpable": confined.dumpable,
            "open_files_limit": confined.open_files,
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
            let state = sys::process_state();
            Report {
                confined: confine::Report {
                    seccomp: "off (netd runs in-process)".into(),
                    landlock: "off (netd runs in-process)".into(),
                    uid: state.uid,
                    gid: state.gid,
                    no_new_privs: state.no_new_privs,
                    dumpable: state.dumpable,
                    open_files: sys::open_file_limit(),
                },
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
        Some(report) => report.confined.open_files,
        None => sys::open_file_limit(),
    }
}

/// Confine this process for good. Landlock is best effort (kernels without it, Android's
/// among them, run without and say so); root, a way back to it or a capability, or a
/// seccomp filter that exists for this architecture and kernel but fails to install,
/// stops netd from starting.
pub fn apply() -> Result<&'static Report, NetdError> {
    apply_for(NameService::detect())
}

/// [`apply`], with name resolution through `names` (a way to confine netd for
/// Android's resolver on any machine).
pub fn apply_for(names: NameService) -> Result<&'static Report, NetdError> {
    sys::raise_open_file_limit()?;
    let rules = rules(&names);
    let mut chosen = None;
    let confined = confine::confine("netd", &rules, |landlock| {
        let names = names_under(names, landlock.enforced);
        let table = table(&names);
        chosen = Some(NAMES.get_or_init(|| names).clone());
        table
    })
    .map_err(|e| NetdError::Privileges(e.to_string()))?;
    let name_resolution = chosen.unwrap_or_else(name_service).describe();
    Ok(APPLIED.get_or_init(|| Report {
        confined,
        name_resolution,
    }))
}

/// `names`, as far as Landlock (`files_confined`) lets netd use them: seccomp cannot see
/// paths, so the resolver's files may be opened only where Landlock keeps every other
/// path out of reach.
fn names_under(names: NameService, files_confined: bool) -> NameService {
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
    names
}

nl2sh_http_worker::cfg_seccomp_filter! {
    {
        /// netd's seccomp table for names resolved with `names`.
        fn table(names: &NameService) -> impl Iterator<Item = &'static Row> + Clone {
            use crate::seccomp::Dns;
            crate::seccomp::table(match names {
                NameService::System => Dns::System,
                NameService::SystemWithoutFiles => Dns::SystemWithoutFiles,
                NameService::DnsProxyd(_) => Dns::AndroidDnsProxy,
            })
        }
    } else {
        /// No table where no filter is built.
        fn table(_names: &NameService) -> std::iter::Empty<&'static Row> {
            std::iter::empty()
        }
    }
}

/// netd's Landlock rules: once started netd creates, writes and executes nothing (its
/// channels, listener and stdio are inherited) and reads only what name resolution
/// needs: the resolver files with the system resolver (and, when `/etc/resolv.conf` is a
/// link elsewhere, that directory: resolvers replace the file there by renaming), or
/// connecting to Android's resolver socket. TCP bind is handled with no rule: netd only
/// accepts on its inherited listener. TCP connect is not handled: the model's port is in
/// the settings, which arrive after this. Enforced on the calling thread and those it
/// creates: netd has started none when it confines itself, and says so if one exists.
fn rules(names: &NameService) -> Rules {
    let (readable, sockets) = match names {
        NameService::System => (resolver_paths(), Vec::new()),
        NameService::SystemWithoutFiles => (Vec::new(), Vec::new()),
        NameService::DnsProxyd(socket) => (Vec::new(), vec![socket.clone()]),
    };
    Rules {
        net: AccessNet::BindTcp.into(),
        readable,
        sockets,
        all_threads: false,
        // "on", or which rights an older kernel leaves out.
        describe: |_, _| None,
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
    use std::process::{Command, Stdio};

    use super::*;

    const CHILD: &str = "NL2SH_NETD_IDENTITY_CHILD";
    /// This file's child entry point, as libtest names it.
    const ENTRY: &str = "confine::tests::child";
    /// An uid no test machine gives a login.
    const NOBODY: u32 = 65534;

    /// The child's side: nothing unless started by [`outcome_as`]. Takes the identity it
    /// is told to, then confines itself as netd does at start and prints the outcome:
    /// for good, so never in the test process itself.
    #[test]
    fn child() {
        let Ok(identity) = std::env::var(CHILD) else {
            return;
        };
        use nl2sh_http_worker::sys::test_identity::switch;
        let switched = match identity.as_str() {
            "as-is" => Ok(()),
            // Real and effective uids dropped, the saved uid still root: setuid(0)
            // would bring root back.
            "saved-root" => switch(NOBODY, NOBODY, 0, false),
            // Every uid dropped, the permitted capabilities kept.
            "capabilities" => switch(NOBODY, NOBODY, NOBODY, true),
            "ordinary" => switch(NOBODY, NOBODY, NOBODY, false),
            other => panic!("unknown identity {other:?}"),
        };
        if let Err(e) = switched {
            println!("OUTCOME cannot switch: {e}");
            std::process::exit(2);
        }
        println!("OUTCOME {:?}", apply().map(|r| &r.confined.uid));
        std::process::exit(0);
    }

    /// What [`apply`] answered in a child that took `identity`.
    fn outcome_as(identity: &str) -> String {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([ENTRY, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, identity)
            // A panic under the filter must not go looking for debug info.
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{identity}: {stdout}\n{stderr}");
        let Some((_, outcome)) = stdout.split_once("OUTCOME ") else {
            panic!("{identity}: no outcome: {stdout}\n{stderr}");
        };
        outcome.lines().next().unwrap_or("").to_owned()
    }

    /// Past the identity check: confined, or stopped by the child's own test threads
    /// (libtest runs the child on a thread of its own, and confinement must come before
    /// any thread where Landlock enforces anything).
    fn accepted(outcome: &str) -> bool {
        outcome.starts_with("Ok(") || outcome.contains("confinement must come before any thread")
    }

    /// netd refuses to start as root, with a way back to root, or holding a capability,
    /// and gets past the identity check as an ordinary uid.
    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        if sys::effective_uid() != 0 {
            // An ordinary test user cannot become root, so the check passes; no other
            // identity can be taken to test.
            let outcome = outcome_as("as-is");
            assert!(accepted(&outcome), "{outcome}");
            return;
        }
        let refused = [
            ("as-is", "it must not run as root (uid 0, euid 0)"),
            ("saved-root", "setuid(0) succeeded from euid 65534"),
            (
                "capabilities",
                "it holds capabilities (effective 0x0, permitted 0x",
            ),
        ];
        for (identity, why) in refused {
            let outcome = outcome_as(identity);
            assert!(
                outcome.starts_with("Err(Privileges(") && outcome.contains(why),
                "{identity}: {outcome}"
            );
        }
        let outcome = outcome_as("ordinary");
        assert!(accepted(&outcome), "{outcome}");
    }
}
