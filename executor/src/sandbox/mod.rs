//! The read-only sandbox: where actions run that run without asking anyone (assessed
//! read-only, no person, grant, auto-approve or policy allowance for a mutation). The
//! assessment only decides when to ask; the kernel makes what runs unasked harmless:
//!
//! * its own mount namespace with every mount read-only, a minimal `/dev`, a throwaway
//!   scratch tmpfs as `TMPDIR`, and nl2sh's own files plus [`crate::secrets::SECRET_LOCATIONS`]
//!   masked ([`mounts`]);
//! * an unprivileged identity of its own: each running call takes a uid (and the same
//!   gid) from the reserved range `sandbox_uid_base` .. + `sandbox_uid_count`, never
//!   netd's or another call's, with no groups, no capability at all and no_new_privs
//!   ([`confine`]), so it reads what a stranger to the device reads, and calls cannot
//!   read into, signal or exhaust each other (the process limit is per uid);
//! * a seccomp filter ([`seccomp`]): no IP sockets, no Unix sockets but socketpairs (no
//!   host service is reachable), no file locks, no kernel or mount changes; Landlock
//!   where the kernel has it;
//! * its own PID namespace, so nothing it starts outlives it, and its own IPC namespace.
//!
//! Every sandboxed action is one run of the helper (`nl2sh __nl2sh-sandbox`,
//! [`helper`]), a fresh exec of nl2sh that sets all this up and then runs the payload.
//! [`WARM_TARGET`] of them (up to [`MAX_AHEAD`] while calls outrun the pool) are built
//! ahead of the calls that will use them, with their uid leased and their cgroup
//! prepared, and wait, confined, for their call; a call takes one if one is ready (else
//! builds its own) and another is built off its path.
//! Each serves one call and ends with it, so nothing of one call is seen by the next.
//! If the essential parts (identity, capabilities, no_new_privs, mount namespace) are
//! unavailable, [`Sandbox::availability`] says so and the pipeline asks a person instead
//! of running anything unconfined.
//!
//! This file is the sandbox's face: its settings, errors, and [`Sandbox::run`]. Its jobs
//! each have a room: whether it works here ([`probe`]); the pool of sandboxes built
//! ahead ([`pool`]) and building one ([`build`]); the uids calls run as, leased here and
//! claimed device-wide ([`uids`]); the scans of `/proc` for processes in the uid range
//! ([`procs`]); the shared ceiling and which limit ended a command ([`limits`]). Inside
//! the sandbox, the helper ([`helper`]) builds the view ([`mounts`], [`masks`]) and
//! confines the payload ([`confine`], [`seccomp`], [`cgroup`]).

mod build;
pub mod cgroup;
pub mod confine;
pub mod helper;
mod limits;
pub mod masks;
pub mod mounts;
mod pool;
mod probe;
mod procs;
pub mod seccomp;
mod uids;

use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::{SandboxCall, SandboxCeiling, SandboxLimits, SandboxPayload, UidRange};

use crate::exec::{self, CommandOutput, ExecError, ProcessGroups};
pub use limits::limit_hit;
use limits::Ceiling;
use pool::Pool;
pub use probe::Availability;
pub use procs::{processes_in, range_problem};
use uids::Identities;

/// First argument of the helper role; never typed by users.
pub const HELPER_ARG: &str = "__nl2sh-sandbox";
/// Exit status of the helper when the sandbox could not be set up (nothing ran).
pub const SETUP_FAILED: u8 = 125;
/// Start of the helper's one stderr line when setting up failed.
pub const SETUP_MARKER: &str = "nl2sh sandbox: ";
/// The byte the confined payload writes first on stdout: set up, waiting for its call.
pub const READY_BYTE: u8 = b'+';
/// Size of the scratch tmpfs (`TMPDIR`) of one sandboxed action.
pub const DEFAULT_SCRATCH_BYTES: u64 = 64 * 1024 * 1024;
/// How many sandboxes are kept built ahead of the calls that will use them.
pub const WARM_TARGET: usize = 2;
/// How many may be kept built ahead while calls come faster than [`WARM_TARGET`] can be
/// rebuilt. Building one takes about 1.5 ms of CPU but 15-30 ms of wall time where joining
/// its cgroup waits for an RCU grace period (cgroup v1, seen with `/proc/<pid>/stack`), so
/// back-to-back calls outrun a pool of two and wait for builds.
pub const MAX_AHEAD: usize = 8;
/// How long the pool stays larger after a call last found none ready; then it is trimmed
/// back to [`WARM_TARGET`] (one timer per growth, nothing while idle).
pub const GROWN_FOR: Duration = Duration::from_secs(10);
/// The oldest a sandbox built ahead may be when a call takes it. Its masks were expanded
/// when it was built (a secret path created since is not hidden in it), so its view is
/// kept recent: for [`KEEP_FRESH_FOR`] after a sandboxed call, sandboxes are rebuilt
/// before they grow this old; after that nothing rebuilds an idle pool (a phone would
/// never sleep), and the first call after a quiet spell builds its own (15-30 ms where
/// joining its cgroup waits for an RCU grace period, against about 3 ms with one ready).
pub const MAX_AHEAD_AGE: Duration = Duration::from_secs(30);
/// How long after a sandboxed call the pool is kept fresh: an agent that thinks between
/// calls for longer than [`MAX_AHEAD_AGE`] would otherwise find every sandbox too old.
/// About two builds (3 ms of CPU) every 25 s, and none once the device is quiet.
pub const KEEP_FRESH_FOR: Duration = Duration::from_secs(300);

/// How sandboxed actions are started and who they run as.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The command that starts the helper: nl2sh's executable and [`HELPER_ARG`]. Tests
    /// put it inside namespaces they own (`unshare --net --uts …`).
    pub helper: Vec<OsString>,
    /// The uids sandboxed calls run as, one per running call (gid = uid).
    pub uids: UidRange,
    /// What each call may use.
    pub limits: SandboxLimits,
    /// What all calls together may use.
    pub ceiling: SandboxCeiling,
    /// nl2sh's own files (configuration, state directory), masked besides the table.
    pub own_files: Vec<String>,
    pub scratch_bytes: u64,
    /// How many sandboxes to keep built ahead of calls ([`WARM_TARGET`] for the executor;
    /// 0: every call builds its own).
    pub ahead: usize,
    /// The most kept built ahead while calls outrun `ahead` ([`MAX_AHEAD`] for the executor).
    pub ahead_max: usize,
    /// How long the pool stays grown after a call found none ready ([`GROWN_FOR`]).
    pub grown_for: Duration,
    /// How long after a call sandboxes are rebuilt before they grow too old
    /// ([`KEEP_FRESH_FOR`]; zero: never).
    pub keep_fresh_for: Duration,
    /// The oldest a sandbox built ahead may be when a call takes it ([`MAX_AHEAD_AGE`]
    /// for the executor).
    pub ahead_max_age: Duration,
}

impl SandboxSettings {
    /// The executor's settings: the helper is the executor's own executable.
    pub fn for_executor(
        uids: UidRange,
        limits: SandboxLimits,
        ceiling: SandboxCeiling,
        own_files: Vec<String>,
    ) -> Self {
        Self {
            helper: vec!["/proc/self/exe".into(), HELPER_ARG.into()],
            uids,
            limits,
            ceiling,
            own_files,
            scratch_bytes: DEFAULT_SCRATCH_BYTES,
            ahead: WARM_TARGET,
            ahead_max: MAX_AHEAD,
            grown_for: GROWN_FOR,
            keep_fresh_for: KEEP_FRESH_FOR,
            ahead_max_age: MAX_AHEAD_AGE,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the read-only sandbox is unavailable: {0}")]
    Unavailable(String),
    #[error("the read-only sandbox could not be set up, so nothing ran: {0}")]
    Setup(String),
    #[error(
        "all {0} sandbox identities are taken by running calls until the deadline; \
         nothing ran (try again, or raise sandbox_uid_count)"
    )]
    Busy(u32),
    #[error(
        "the {0} sandboxed calls the sandboxes' shared ceiling lets run at once here (no \
         cgroup enforces it: sandbox_total_memory_mib / sandbox_memory_mib and \
         sandbox_total_processes / sandbox_max_processes) ran until the deadline; nothing \
         ran (try again)"
    )]
    Full(u32),
    #[error("cancelled while waiting for a sandbox identity; nothing ran")]
    Cancelled,
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// What one sandboxed action needs besides its payload.
pub struct Run<'a> {
    pub cwd: Option<&'a Path>,
    pub stdin: Option<Vec<u8>>,
    pub max_stdout: usize,
    pub max_stderr: usize,
    pub deadline: Instant,
    pub cancel: &'a CancellationToken,
    pub groups: &'a ProcessGroups,
    pub path_var: Option<&'a str>,
}

pub struct Sandbox {
    shared: Arc<Shared>,
    availability: tokio::sync::OnceCell<Availability>,
}

/// What the calls and the pool's builders share.
struct Shared {
    settings: SandboxSettings,
    identities: Arc<Identities>,
    /// A cgroup per uid where the device lets nl2sh make one (root only): in the shared
    /// parent where [`Ceiling::enforced`], else in nl2sh's own cgroup.
    cgroups: Option<cgroup::Cgroups>,
    ceiling: Ceiling,
    pool: Mutex<Pool>,
    /// Woken when a sandbox built ahead is ready, or a build ended.
    changed: tokio::sync::Notify,
    /// Calls served by a sandbox built ahead (for `nl2sh_inspect` and tests).
    served_ahead: std::sync::atomic::AtomicU64,
    /// The process groups of the sandboxes built ahead (each is killed when its
    /// [`Built`] is dropped unused).
    groups: ProcessGroups,
    /// The executor's nice, if it may put a process group back to it: sandboxes are then
    /// built ahead at nice 19 and raised to this when a call takes (or waits for) one.
    /// Building one (an exec of nl2sh, its loader, namespaces, mounts, filters: about
    /// 1.5 ms of CPU) started as a call ends would otherwise hold that call's answer
    /// back on the same core (seen with `perf sched`: the answer ready, the executor
    /// runnable, the new helper running its whole slice first).
    normal_nice: Option<i32>,
}

impl Sandbox {
    pub fn new(settings: SandboxSettings) -> Self {
        let own = nix::unistd::geteuid()
            .is_root()
            .then(cgroup::Cgroups::detect)
            .flatten();
        // Every call's cgroup in one parent with the shared ceiling; where that parent
        // cannot be made, in nl2sh's own cgroup, and the ceiling is kept by running fewer
        // calls at once.
        let (cgroups, enforced) = match own {
            None => (
                None,
                Err("no cgroup with memory and pids controllers nl2sh may manage".into()),
            ),
            Some(own) => match own.ceiling(settings.uids.first, settings.ceiling) {
                Ok(parent) => {
                    let dirs = parent.dirs();
                    (Some(parent), Ok(dirs))
                }
                Err(e) => {
                    let why = format!("the shared parent cgroup in {}: {e}", own.describe_dirs());
                    tracing::warn!(reason = %why, "the sandboxes' shared ceiling is not enforced by the kernel");
                    (Some(own), Err(why))
                }
            },
        };
        let ceiling = Ceiling::new(
            settings.ceiling,
            enforced,
            settings.limits,
            settings.uids.count,
        );
        Self {
            shared: Arc::new(Shared {
                identities: Identities::new(settings.uids, ceiling.slots),
                cgroups,
                ceiling,
                settings,
                pool: Mutex::new(Pool::default()),
                changed: tokio::sync::Notify::new(),
                served_ahead: std::sync::atomic::AtomicU64::new(0),
                groups: ProcessGroups::default(),
                normal_nice: nl2sh_proto::sys::thread::restorable_nice(),
            }),
            availability: tokio::sync::OnceCell::new(),
        }
    }

    /// The uid range sandboxed calls run as.
    pub fn uids(&self) -> UidRange {
        self.shared.settings.uids
    }

    /// What each call may use.
    pub fn limits(&self) -> SandboxLimits {
        self.shared.settings.limits
    }

    /// What all calls together may use.
    pub fn ceiling(&self) -> SandboxCeiling {
        self.shared.ceiling.limits
    }

    /// Whether the kernel enforces the shared ceiling here: the parent cgroup's
    /// directories (memory first), else why not.
    pub fn ceiling_enforced(&self) -> Result<Vec<String>, String> {
        self.shared.ceiling.enforced.clone()
    }

    /// How many calls may run at once ([`Ceiling::slots`]).
    pub fn calls_at_once(&self) -> u32 {
        self.shared.ceiling.slots
    }

    /// The most memory all calls together have had charged at once, where the kernel
    /// enforces the ceiling (the shared parent cgroup's peak).
    pub fn peak_memory(&self) -> Option<u64> {
        self.shared.ceiling.enforced.as_ref().ok()?;
        self.shared.cgroups.as_ref()?.peak_memory()
    }

    /// How many sandboxes are kept ready or building now (grows while calls outrun the
    /// pool, see [`MAX_AHEAD`]).
    pub fn ahead_target(&self) -> usize {
        let pool = self.shared.pool();
        pool.target.max(self.shared.settings.ahead)
    }

    /// How many sandboxes are built ahead and ready now.
    pub fn ready_ahead(&self) -> usize {
        self.shared.pool().ready.len()
    }

    /// The helpers of the sandboxes built ahead and ready (their pids).
    pub fn ready_helpers(&self) -> Vec<u32> {
        let pool = self.shared.pool();
        pool.ready
            .iter()
            .filter_map(|b| b.helper.as_ref()?.id())
            .collect()
    }

    /// How many calls a sandbox built ahead has served.
    pub fn served_ahead(&self) -> u64 {
        self.shared
            .served_ahead
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Run `payload` in the sandbox: in one built ahead if one is ready (and another is
    /// then built off this call's path), else in one built now. A helper that could not
    /// set the sandbox up is a [`SandboxError::Setup`]; the payload's own failure is an
    /// ordinary output.
    pub async fn run(
        &self,
        payload: SandboxPayload,
        run: Run<'_>,
    ) -> Result<CommandOutput, SandboxError> {
        let probe = matches!(payload, SandboxPayload::Probe);
        let mut sandbox = self.shared.sandbox_for(probe, &run).await?;
        let call = SandboxCall {
            cwd: run.cwd.map(|c| c.display().to_string()),
            path_var: run.path_var.map(str::to_string),
            payload,
        };
        let mut stdin = nl2sh_proto::frame::encode(0, &call)
            .map_err(|e| SandboxError::Setup(format!("encoding the call: {e}")))?;
        stdin.extend(run.stdin.unwrap_or_default());
        let Some(mut helper) = sandbox.helper.take() else {
            return Err(SandboxError::Setup("a sandbox was used twice".into()));
        };
        helper.began = Instant::now();
        let out = exec::finish(
            helper,
            Some(stdin),
            run.max_stdout,
            run.max_stderr,
            run.deadline,
            run.cancel,
        )
        .await;
        // The next call's sandbox is built once this one's command has ended and its
        // answer has left, not while it runs (the executor has one thread: building then
        // would delay this call).
        self.shared
            .after_answer(sandbox.mount_namespace.take(), !probe);
        // A payload that ended by itself (its helper's exit record, or the helper's own
        // exit) ended after its PID namespace was torn down. A run that was killed
        // (timeout, cancellation) or whose payload died of a signal may still have
        // processes dying, and the uid is free again only once they are gone.
        if out.as_ref().map_or(true, |o| {
            o.exit_code.is_none() || o.timed_out || o.cancelled
        }) {
            if let Some(lease) = sandbox.lease.as_mut() {
                lease.settle().await;
            }
        }
        let mut out = out?;
        let after = sandbox
            .uid()
            .and_then(|uid| self.shared.cgroups.as_ref()?.counters(uid));
        if let (Some(before), Some(after)) = (sandbox.counters_before, after) {
            out.limit = self.shared.which_limit(before, after).or(out.limit);
        }
        if out.exit_code == Some(i32::from(SETUP_FAILED)) {
            if let Some(why) = String::from_utf8_lossy(&out.stderr.bytes)
                .lines()
                .find_map(|l| l.strip_prefix(SETUP_MARKER))
            {
                return Err(SandboxError::Setup(why.to_string()));
            }
        }
        Ok(out)
    }
}
