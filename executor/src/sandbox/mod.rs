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

pub mod cgroup;
pub mod confine;
pub mod helper;
pub mod masks;
pub mod mounts;
pub mod seccomp;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::{
    Gid, SandboxCall, SandboxCeiling, SandboxLimits, SandboxPayload, SandboxPlan, Uid, UidRange,
};

use crate::exec::{self, CommandOutput, ExecError, ProcessGroups};

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
/// How long the start-up probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);
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
/// How long a sandbox built ahead may take to set up before it is given up.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15);
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

/// Whether sandboxed actions can run here, and which parts are active.
#[derive(Debug, Clone)]
pub enum Availability {
    /// The parts, as reported by the probe (an object for `nl2sh_inspect`).
    Ready(Value),
    /// Why not; unasked actions that would need the sandbox ask a person instead.
    Unavailable(String),
}

impl Availability {
    pub fn is_ready(&self) -> bool {
        matches!(self, Availability::Ready(_))
    }

    /// The object `nl2sh_inspect` shows.
    pub fn to_json(&self) -> Value {
        match self {
            Availability::Ready(parts) => {
                let mut v = parts.clone();
                v["active"] = Value::Bool(true);
                v
            }
            Availability::Unavailable(why) => serde_json::json!({
                "active": false,
                "reason": why,
                "effect": "read-only commands and file reads wait for local approval",
            }),
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

/// The sandboxes' shared ceiling, and how this device enforces it.
struct Ceiling {
    limits: SandboxCeiling,
    /// Enforced by the kernel (a parent cgroup, these directories, holds every call's),
    /// or why not.
    enforced: Result<Vec<String>, String>,
    /// How many calls may run at once: every uid of the range where the kernel enforces
    /// the ceiling; else as many as fit in it at each call's own limits, at least one
    /// (a floor: without a cgroup, memory is limited per process, not per call).
    slots: u32,
}

impl Ceiling {
    fn new(
        limits: SandboxCeiling,
        enforced: Result<Vec<String>, String>,
        per_call: SandboxLimits,
        uids: u32,
    ) -> Ceiling {
        let slots = if enforced.is_ok() {
            uids
        } else {
            let by_memory = limits.memory_bytes / per_call.memory_bytes.max(1);
            let by_processes = u64::from(limits.processes) / u64::from(per_call.processes.max(1));
            u32::try_from(by_memory.min(by_processes))
                .unwrap_or(u32::MAX)
                .clamp(1, uids.max(1))
        };
        Ceiling {
            limits,
            enforced,
            slots,
        }
    }

    /// For `nl2sh_inspect`.
    fn to_json(&self, uids: u32) -> Value {
        let mut v = serde_json::json!({
            "memory_mib": self.limits.memory_bytes >> 20,
            "processes": self.limits.processes,
            "enforced": self.enforced.is_ok(),
            "calls_at_once": self.slots,
        });
        if let Ok(dirs) = &self.enforced {
            v["cgroup"] = serde_json::json!(dirs);
        }
        v["how"] = Value::String(match &self.enforced {
            Ok(_) => "by the kernel: every call's cgroup is in one parent cgroup with this \
                      memory and process limit"
                .into(),
            Err(why) => format!(
                "not by the kernel ({why}): at most {} of the {uids} sandboxed calls run at \
                 once, so that their own limits add up to no more than it; memory is limited \
                 per process there, so a call of many processes can take more",
                self.slots
            ),
        });
        v
    }
}

/// Sandboxes built ahead: ready, and being built.
#[derive(Default)]
struct Pool {
    /// Off until the probe found the sandbox ready.
    enabled: bool,
    ready: Vec<Built>,
    building: usize,
    /// Calls in [`Shared::take_ahead`]: a sandbox that starts building meanwhile is
    /// raised at once (see [`Shared::fill`]).
    waiting: usize,
    /// How many to keep ready or building now: [`SandboxSettings::ahead`], doubled (up to
    /// [`SandboxSettings::ahead_max`]) each time a call finds none ready.
    target: usize,
    /// When a call last found none ready (while the pool was not merely stale).
    starved_at: Option<Instant>,
    /// When the last sandboxed call ended.
    last_call: Option<Instant>,
    /// The pool's upkeep task runs ([`Shared::keep`]).
    keeper: bool,
}

/// A helper that has set a sandbox up and waits, confined, for its call's frame.
struct Built {
    /// The runtime its pipes and child belong to: only a call on that runtime can use it
    /// (the executor has one for its life; tests start one per call).
    runtime: tokio::runtime::Id,
    /// When it was built: its view of the device (the masks' paths) is from then.
    at: Instant,
    /// Always `Some` until dropped.
    lease: Option<Lease>,
    /// Taken by the call that uses it.
    helper: Option<exec::Started>,
    /// The uid's cgroup counters when it was built.
    counters_before: Option<cgroup::Counters>,
    /// The payload said it is set up and waits ([`READY_BYTE`]). If not, running the
    /// call reports why (the helper's exit status and stderr).
    set_up: bool,
    /// The sandbox's mount namespace, held open by the executor (built ahead only): the
    /// helper is then not the last to leave it, so its exit, which the call's answer waits
    /// for, does not tear the namespace down. That teardown unmounts the view and waits
    /// for an expedited RCU grace period (about 0.35 ms with the helper in D state, seen
    /// with `perf sched`); it happens off the call's path instead ([`Shared::after_answer`]).
    mount_namespace: Option<OwnedFd>,
}

impl Built {
    fn uid(&self) -> Option<u32> {
        self.lease.as_ref().map(|l| l.uid)
    }
}

impl Drop for Built {
    fn drop(&mut self) {
        // Never used (the executor is stopping, a test's runtime ended, the call's future
        // was dropped): end it, not only its helper, and free its uid only once its
        // processes are gone, as after a killed call.
        // Its mount namespace goes on the same thread: closing it waits for a grace period.
        let namespace = self.mount_namespace.take();
        if let Some(helper) = self.helper.take() {
            helper.kill();
            drop(helper);
            let lease = self.lease.take();
            std::thread::spawn(move || {
                drop(namespace);
                if let Some(mut lease) = lease {
                    lease.settle_blocking();
                }
            });
        } else if namespace.is_some() {
            std::thread::spawn(move || drop(namespace));
        }
    }
}

/// A call waiting in [`Shared::take_ahead`], counted in [`Pool::waiting`] while it lives.
struct Waiting<'a>(&'a Shared);

impl<'a> Waiting<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.pool().waiting += 1;
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut pool = self.0.pool();
        pool.waiting = pool.waiting.saturating_sub(1);
    }
}

/// How long after a sandboxed command has ended the work it leaves behind begins: letting
/// go of its mount namespace and building the next sandbox. Both wake a blocking thread,
/// which, on a core the call's answer also needs (the executor, netd, the client), the
/// scheduler may run first: `perf sched` showed 0.15 ms of it between the command's end
/// and netd's answer. By then the answer has left.
const AFTER_ANSWER: Duration = Duration::from_millis(1);

impl Shared {
    /// The pool, locked; a poisoned lock is taken as it was left.
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After [`AFTER_ANSWER`]: let go of a finished sandbox's mount namespace on a
    /// blocking thread (closing the last reference unmounts its view and waits for a grace
    /// period, which neither the executor's one thread nor the call's answer should wait
    /// for), and, with `refill`, build the next sandboxes.
    fn after_answer(self: &Arc<Self>, namespace: Option<OwnedFd>, refill: bool) {
        if namespace.is_none() && !refill {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(AFTER_ANSWER).await;
            if let Some(namespace) = namespace {
                tokio::task::spawn_blocking(move || drop(namespace));
            }
            if refill {
                shared.pool().last_call = Some(Instant::now());
                shared.fill();
                shared.keep();
            }
        });
    }

    /// Start the pool's one upkeep task unless it runs. It sleeps until the pool next
    /// needs something, and ends once nothing is due (nothing wakes an idle device):
    /// * [`SandboxSettings::grown_for`] after a call last found none ready, the pool goes
    ///   back to [`SandboxSettings::ahead`] ([`Shared::fill`] trims the extra ones);
    /// * for [`SandboxSettings::keep_fresh_for`] after the last call, a sandbox ready ahead
    ///   is rebuilt at 5/6 of [`SandboxSettings::ahead_max_age`], so that the next call
    ///   finds one young enough.
    fn keep(self: &Arc<Self>) {
        if std::mem::replace(&mut self.pool().keeper, true) {
            return;
        }
        let mut keeper = Keeper {
            shared: self.clone(),
            running: true,
        };
        tokio::spawn(async move {
            while let Some(at) = keeper.shared.next_upkeep() {
                tokio::time::sleep_until(at.into()).await;
                keeper.shared.upkeep();
            }
            // `next_upkeep` cleared the flag under the lock that found nothing due.
            keeper.ended();
        });
    }

    /// The age at which a sandbox ready ahead is rebuilt, if the pool is kept fresh.
    fn refresh_age(&self) -> Option<Duration> {
        let age = self.settings.ahead_max_age * 5 / 6;
        (!self.settings.keep_fresh_for.is_zero()
            && age >= MIN_REFRESH_AGE
            && self.settings.ahead > 0)
            .then_some(age)
    }

    /// Until when the pool is kept fresh (the last call's end + `keep_fresh_for`).
    fn fresh_until(&self, pool: &Pool) -> Option<Instant> {
        self.refresh_age()?;
        pool.last_call.map(|at| at + self.settings.keep_fresh_for)
    }

    /// When the pool next needs upkeep; `None` (and the keeper's flag cleared) if never.
    fn next_upkeep(&self) -> Option<Instant> {
        let mut pool = self.pool();
        let now = Instant::now();
        let trim = pool
            .starved_at
            .filter(|_| pool.target > self.settings.ahead)
            .map(|at| at + self.settings.grown_for);
        let refresh = self
            .fresh_until(&pool)
            .filter(|&until| until > now)
            .zip(self.refresh_age())
            .map(|(until, age)| {
                let due = pool.ready.iter().map(|b| b.at + age).min();
                due.unwrap_or(now + age).min(until)
            });
        let next = trim.into_iter().chain(refresh).min();
        if next.is_none() {
            pool.keeper = false;
        }
        next
    }

    /// Rebuild the sandboxes grown too old to wait longer (while the pool is kept fresh),
    /// and refill or trim the pool to its size now.
    fn upkeep(self: &Arc<Self>) {
        let aged: Vec<Built> = {
            let mut pool = self.pool();
            match (self.fresh_until(&pool), self.refresh_age()) {
                (Some(until), Some(age)) if Instant::now() < until => {
                    let (aged, young) = std::mem::take(&mut pool.ready)
                        .into_iter()
                        .partition(|b| b.at.elapsed() >= age);
                    pool.ready = young;
                    aged
                }
                _ => Vec::new(),
            }
        };
        drop(aged);
        self.fill();
    }
}

/// Below this [`SandboxSettings::ahead_max_age`] sandboxes are not kept fresh (a test's
/// pool whose sandboxes are always too old would rebuild without pause).
const MIN_REFRESH_AGE: Duration = Duration::from_millis(500);

impl Shared {
    /// Which cgroup limit ended a process of a call, from its counters before and after.
    fn which_limit(&self, before: cgroup::Counters, after: cgroup::Counters) -> Option<String> {
        let ceiling = &self.ceiling;
        let shared = ceiling.enforced.is_ok();
        if after.oom_kills > before.oom_kills {
            return Some(if after.own_memory_limit > before.own_memory_limit {
                format!(
                    "memory: the call reached its {} MiB (sandbox_memory_mib) and the kernel \
                     ended a process",
                    self.settings.limits.memory_bytes >> 20
                )
            } else if shared {
                format!(
                    "memory: the sandboxes' shared memory ceiling of {} MiB \
                     (sandbox_total_memory_mib), which all sandboxed calls running together \
                     reached, and the kernel ended a process of this call",
                    ceiling.limits.memory_bytes >> 20
                )
            } else {
                "memory: the memory limit of nl2sh's own cgroup was reached and the kernel \
                 ended a process of this call"
                    .to_string()
            });
        }
        if after.pids_refused > before.pids_refused {
            return Some(if shared {
                format!(
                    "processes: the sandboxes' shared ceiling of {} processes \
                     (sandbox_total_processes), which all sandboxed calls running together \
                     reached, refused a process of this call",
                    ceiling.limits.processes
                )
            } else {
                "processes: the process limit of nl2sh's own cgroup refused a process of this \
                 call"
                    .to_string()
            });
        }
        None
    }
}

/// The mount namespace of the process `pid` (a helper that has set its sandbox up).
fn mount_namespace_of(pid: Option<u32>) -> Option<OwnedFd> {
    let path = format!("/proc/{}/ns/mnt", pid?);
    match std::fs::File::open(&path) {
        Ok(file) => Some(OwnedFd::from(file)),
        Err(e) => {
            tracing::debug!(error = %e, "the mount namespace of a sandbox built ahead");
            None
        }
    }
}

/// The free uids of the range; a call holds one ([`Lease`]) from before its helper starts
/// until the helper has exited (and with it, every process of the call's PID namespace).
/// Other nl2sh trees on the device may use the same range (two configurations on the
/// defaults): a uid is also claimed device-wide ([`claim`]) while a call runs as it.
struct Identities {
    free: std::sync::Mutex<Vec<u32>>,
    /// Permits for [`Ceiling::slots`] calls at once (all of `free` unless the shared
    /// ceiling is kept by counting calls).
    available: Arc<tokio::sync::Semaphore>,
    /// The uids of the range, and how many may be leased at once.
    count: u32,
    slots: u32,
}

/// One uid of the range, given back when dropped.
struct Lease {
    identities: Arc<Identities>,
    uid: u32,
    /// Processes of the uid outlived the call: never hand it out again.
    quarantined: bool,
    // Fields drop in order: the claim ends before the permit lets the next caller in.
    claim: Option<Claim>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.quarantined {
            tracing::error!(
                uid = self.uid,
                "processes of a finished sandboxed call did not end: its uid stays unused"
            );
            // Held for the executor's life: no other tree may hand the uid out either.
            std::mem::forget(self.claim.take());
            return;
        }
        if let Ok(mut free) = self.identities.free.lock() {
            free.push(self.uid);
        }
    }
}

/// How long a killed call's processes may take to die before its uid is set aside.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

impl Lease {
    /// Wait until no process runs with this lease's uid; if some still do after
    /// [`SETTLE_TIMEOUT`], the uid is never handed out again by this tree.
    async fn settle(&mut self) {
        let until = Instant::now() + SETTLE_TIMEOUT;
        while !self.settled(until) {
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// [`Lease::settle`] on a thread of its own (from a `Drop`).
    fn settle_blocking(&mut self) {
        let until = Instant::now() + SETTLE_TIMEOUT;
        while !self.settled(until) {
            std::thread::sleep(SETTLE_POLL);
        }
    }

    /// No process runs as the uid (true), or `until` passed and it is quarantined (true).
    fn settled(&mut self, until: Instant) -> bool {
        let only = UidRange {
            first: self.uid,
            count: 1,
        };
        if processes_in(only).is_empty() {
            return true;
        }
        if Instant::now() >= until {
            self.quarantined = true;
            return true;
        }
        false
    }
}

const SETTLE_POLL: Duration = Duration::from_millis(5);

/// How long a caller waits before looking again when every free uid of the range is
/// claimed by another tree.
const CLAIM_RETRY: Duration = Duration::from_millis(50);

/// Where the device-wide claims live: a root-only directory on a tmpfs, so nothing
/// survives a reboot and no unprivileged process can take a claim (an abstract socket
/// name, which any app could bind, would let it deny every uid). `/run` on Linux; Android
/// has none, and its `/dev` is a tmpfs.
fn claims_dir() -> &'static Path {
    if Path::new("/run").is_dir() {
        Path::new("/run/nl2sh-sandbox-uids")
    } else {
        Path::new("/dev/nl2sh-sandbox-uids")
    }
}

/// Claim `uid` for one call, device-wide: an exclusive `flock` on `<uid>.lock` in
/// [`claims_dir`]. The kernel releases it when the file closes or its process dies, so a
/// crashed tree leaves no stale claim; sandboxed commands can take no lock at all.
fn claim(uid: u32) -> Option<Claim> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = claims_dir();
    if !dir.is_dir() {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(format!("{uid}.lock")))
        .ok()?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()
}

/// A held claim; dropping it releases the lock.
type Claim = nix::fcntl::Flock<std::fs::File>;

impl Identities {
    fn new(range: UidRange, slots: u32) -> Arc<Self> {
        // Lowest uids first (popped from the end), so a quiet device reuses a few.
        let free: Vec<u32> = (0..range.count)
            .rev()
            .filter_map(|i| range.first.checked_add(i))
            .collect();
        let slots = slots.min(range.count);
        let available = Arc::new(tokio::sync::Semaphore::new(free.len().min(slots as usize)));
        Arc::new(Identities {
            free: std::sync::Mutex::new(free),
            available,
            count: range.count,
            slots,
        })
    }

    /// What a call that waited in vain for a uid is told.
    fn busy(&self) -> SandboxError {
        if self.slots < self.count {
            SandboxError::Full(self.slots)
        } else {
            SandboxError::Busy(self.count)
        }
    }

    /// A free uid claimed device-wide, for `permit`; `None` if every free one is claimed
    /// by another tree.
    fn claim_one(
        self: &Arc<Self>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Lease, tokio::sync::OwnedSemaphorePermit> {
        let claimed = self.free.lock().ok().and_then(|mut free| {
            let at = (0..free.len())
                .rev()
                .find_map(|i| Some((i, claim(free[i])?)))?;
            Some((free.remove(at.0), at.1))
        });
        match claimed {
            Some((uid, claim)) => Ok(Lease {
                identities: self.clone(),
                uid,
                quarantined: false,
                claim: Some(claim),
                _permit: permit,
            }),
            None => Err(permit),
        }
    }

    /// A uid now, without waiting (for a sandbox built ahead), or `None`.
    fn try_lease(self: &Arc<Self>) -> Option<Lease> {
        let permit = self.available.clone().try_acquire_owned().ok()?;
        self.claim_one(permit).ok()
    }

    async fn lease(
        self: &Arc<Self>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Lease, SandboxError> {
        loop {
            let permit = tokio::select! {
                permit = self.available.clone().acquire_owned() => {
                    permit.map_err(|_| self.busy())?
                }
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(self.busy())
                }
                () = cancel.cancelled() => return Err(SandboxError::Cancelled),
            };
            match self.claim_one(permit) {
                Ok(lease) => return Ok(lease),
                // Every uid this tree has free runs another tree's call: wait for one.
                Err(permit) => drop(permit),
            }
            tokio::select! {
                () = tokio::time::sleep(CLAIM_RETRY) => {}
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(SandboxError::Busy(self.count))
                }
                () = cancel.cancelled() => return Err(SandboxError::Cancelled),
            }
        }
    }
}

/// The pool's upkeep task ([`Shared::keep`]): if it is dropped before it ended (its
/// runtime ended), its flag is cleared so that a later call may start another.
struct Keeper {
    shared: Arc<Shared>,
    running: bool,
}

impl Keeper {
    /// Ended by itself: its flag is already cleared (and may be another keeper's now).
    fn ended(&mut self) {
        self.running = false;
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if self.running {
            let mut pool = self.shared.pool();
            pool.keeper = false;
        }
    }
}

/// One sandbox being built for the pool; counted until the build ends, however it ends
/// (a runtime shutting down drops the task mid-way).
struct Building(Arc<Shared>);

impl Drop for Building {
    fn drop(&mut self) {
        let mut pool = self.0.pool();
        pool.building = pool.building.saturating_sub(1);
        drop(pool);
        self.0.changed.notify_waiters();
    }
}

impl Shared {
    /// Build a sandbox as `lease`'s uid: prepare its cgroup, start the helper and give
    /// it the plan. It then sets everything up and waits for its call's frame.
    ///
    /// With `wait`, it returns once the payload says it is set up ([`Built::set_up`]),
    /// or failed to (at most [`BUILD_TIMEOUT`]); without, at once, and the call's run
    /// waits for the setup under the call's deadline.
    async fn build(
        &self,
        lease: Lease,
        groups: &ProcessGroups,
        wait: bool,
    ) -> Result<Built, SandboxError> {
        let (built, frame) = self.start(lease, groups, false)?;
        self.hand_plan(built, &frame, wait).await
    }

    /// The synchronous part of [`Shared::build`] (cgroup files, the spawn): for a sandbox
    /// built ahead it runs on a blocking thread, off the executor's one thread, lowered
    /// to the background priority, which the helper inherits (see
    /// [`Shared::normal_nice`]).
    fn start(
        &self,
        lease: Lease,
        groups: &ProcessGroups,
        ahead: bool,
    ) -> Result<(Built, Vec<u8>), SandboxError> {
        let _lowered = self.normal_nice.filter(|_| ahead).and_then(|normal| {
            nl2sh_proto::sys::thread::LoweredThread::new(normal)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot lower a sandbox built ahead"))
                .ok()
        });
        let Some((program, args)) = self.settings.helper.split_first() else {
            return Err(SandboxError::Unavailable("no helper configured".into()));
        };
        let uid = lease.uid;
        // Set for every call, not once per uid: another tree may have run a call as this
        // uid meanwhile, with limits of its own.
        let cgroup_procs = match &self.cgroups {
            Some(c) => c
                .prepare(uid, self.settings.limits)
                .map_err(|e| SandboxError::Setup(format!("the call's cgroup: {e}")))?
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            None => Vec::new(),
        };
        let counters_before = self.cgroups.as_ref().and_then(|c| c.counters(uid));
        let plan = SandboxPlan {
            cgroup_procs,
            uid: Uid(uid),
            gid: Gid(uid),
            masks: masks::patterns(&self.settings.own_files),
            scratch_bytes: self.settings.scratch_bytes,
            limits: self.settings.limits,
        };
        let frame = nl2sh_proto::frame::encode(0, &plan)
            .map_err(|e| SandboxError::Setup(format!("encoding the plan: {e}")))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        exec::own_group(&mut cmd);
        let mut helper = exec::start(cmd, true, None, groups)?;
        helper.exit_record = true;
        // Owned from here on: dropped (cancelled) mid-way, it ends the helper and settles.
        let built = Built {
            runtime: tokio::runtime::Handle::current().id(),
            at: Instant::now(),
            lease: Some(lease),
            helper: Some(helper),
            counters_before,
            set_up: false,
            mount_namespace: None,
        };
        Ok((built, frame))
    }

    /// Give a started helper its plan; with `wait`, wait until it says it is set up.
    async fn hand_plan(
        &self,
        mut built: Built,
        frame: &[u8],
        wait: bool,
    ) -> Result<Built, SandboxError> {
        // A helper that died before reading it, or failed to set up, is reported by its
        // exit status (and its stderr) when the call is run.
        if let Some(helper) = built.helper.as_mut() {
            if let Err(e) = helper.write_stdin(frame).await {
                tracing::debug!(error = %e, "the sandbox helper did not take its plan");
            }
            if wait {
                let said = tokio::time::timeout(BUILD_TIMEOUT, helper.read_stdout_byte()).await;
                built.set_up = matches!(said, Ok(Ok(Some(READY_BYTE))));
                if built.set_up {
                    built.mount_namespace = mount_namespace_of(helper.id());
                }
            } else {
                // Its "set up" byte is then the first of its output: not output.
                helper.preamble = Some(READY_BYTE);
            }
        }
        Ok(built)
    }

    /// Put `built`'s helper, and the payload process it forked, back at the executor's
    /// priority: a call's command never runs lowered.
    fn raise(&self, built: &Built) {
        let (Some(normal), Some(group)) = (
            self.normal_nice,
            built.helper.as_ref().and_then(exec::Started::group),
        ) else {
            return;
        };
        if let Err(e) = group.set_nice(normal) {
            // Gone already (the call then reports how it ended), or refused: the command
            // runs at the background priority, slower but confined the same.
            tracing::warn!(error = %e, ?group, "cannot put a sandbox back at the normal priority");
        }
    }

    /// A sandbox built ahead, if one is ready (for this runtime, and at most
    /// [`SandboxSettings::ahead_max_age`] old; the others are put aside in `unusable`);
    /// else whether one is being built.
    fn take_ready(&self, unusable: &mut Vec<Built>) -> Result<Built, bool> {
        let here = tokio::runtime::Handle::current().id();
        let max_age = self.settings.ahead_max_age;
        let mut pool = self.pool();
        let (usable, old): (Vec<Built>, Vec<Built>) = std::mem::take(&mut pool.ready)
            .into_iter()
            .partition(|b| b.runtime == here && b.at.elapsed() < max_age);
        pool.ready = usable;
        unusable.extend(old);
        pool.ready.pop().ok_or(pool.building > 0)
    }

    /// A call found no sandbox ready although none had merely grown old: calls come
    /// faster than the pool is rebuilt. Keep more built ahead for a while.
    fn starved(self: &Arc<Self>) {
        let mut pool = self.pool();
        let base = self.settings.ahead;
        if base == 0 {
            return;
        }
        pool.target = (pool.target.max(base) * 2).min(self.settings.ahead_max.max(base));
        pool.starved_at = Some(Instant::now());
        drop(pool);
        self.keep();
    }

    /// A sandbox built ahead: one ready now, or the next one being built (it is further
    /// along than one this call would start), unless none is being built.
    async fn take_ahead(
        self: &Arc<Self>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Option<Built> {
        let _waiting = Waiting::new(self);
        let mut unusable = Vec::new();
        let mut counted = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let found = self.take_ready(&mut unusable);
            if !unusable.is_empty() {
                // Ending them (signals, closing pipes, a thread each) is not this call's
                // wait.
                let old = std::mem::take(&mut unusable);
                counted = true;
                tokio::spawn(async move {
                    tokio::time::sleep(AFTER_ANSWER).await;
                    drop(old);
                });
            }
            if found.is_err() && !counted {
                counted = true;
                self.starved();
            }
            match found {
                Ok(built) => {
                    self.raise(&built);
                    return Some(built);
                }
                Err(false) => return None,
                // This call waits for the sandboxes being built ahead (all in `groups`):
                // they no longer run in the background.
                Err(true) => {
                    if let Some(normal) = self.normal_nice {
                        self.groups.set_nice_all(normal);
                    }
                }
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline.into()) => return None,
                () = cancel.cancelled() => return None,
            }
        }
    }

    /// Build sandboxes ahead until [`SandboxSettings::ahead`] are ready or being built, off the
    /// caller's path. A uid is taken only if one is free at once: calls come first.
    fn fill(self: &Arc<Self>) {
        let mut pool = self.pool();
        let grown = pool
            .starved_at
            .is_some_and(|at| at.elapsed() < self.settings.grown_for);
        if !grown {
            pool.target = self.settings.ahead;
        }
        let target = pool.target.max(self.settings.ahead);
        // Grown for a burst that has passed: the extra ones go (the oldest first).
        if pool.ready.len() > target {
            pool.ready.sort_by_key(|b| std::cmp::Reverse(b.at));
            let extra = pool.ready.split_off(target);
            drop(pool);
            drop(extra);
            pool = self.pool();
        }
        while pool.enabled && pool.ready.len() + pool.building < target {
            let Some(lease) = self.identities.try_lease() else {
                return;
            };
            pool.building += 1;
            let slot = Building(self.clone());
            tokio::spawn(async move {
                let shared = slot.0.clone();
                let started =
                    tokio::task::spawn_blocking(move || shared.start(lease, &shared.groups, true))
                        .await;
                let built = match started {
                    Ok(Ok((built, frame))) => {
                        // Its group joined `groups` when it was spawned; a call that
                        // began waiting since may have raised the groups before that.
                        let waiting = slot.0.pool().waiting;
                        if waiting > 0 {
                            slot.0.raise(&built);
                        }
                        slot.0.hand_plan(built, &frame, true).await
                    }
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(SandboxError::Setup(format!("building ahead: {e}"))),
                };
                {
                    let mut pool = slot.0.pool();
                    match built {
                        Ok(built) if built.set_up => pool.ready.push(built),
                        // Calls build their own, and say why it fails.
                        failed => {
                            let why = match &failed {
                                Ok(_) => "the helper did not set up".to_string(),
                                Err(e) => e.to_string(),
                            };
                            tracing::warn!(
                                error = %why,
                                "a sandbox built ahead failed: no more are built ahead"
                            );
                            pool.enabled = false;
                        }
                    }
                }
                slot.0.changed.notify_waiters();
            });
        }
    }
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

    /// Probe once (the first caller waits for it), then answer from memory. Once it is
    /// ready, sandboxes are built ahead of calls.
    pub async fn availability(&self) -> &Availability {
        let found = self.availability.get_or_init(|| self.probe()).await;
        if found.is_ready() {
            let first = {
                let mut pool = self.shared.pool();
                !std::mem::replace(&mut pool.enabled, true)
            };
            if first {
                self.shared.fill();
            }
        }
        found
    }

    async fn probe(&self) -> Availability {
        let euid = nix::unistd::geteuid().as_raw();
        let found = if euid != 0 {
            Availability::Unavailable(format!(
                "nl2sh runs as uid {euid}, not root, so it cannot switch to the sandbox identity"
            ))
        } else if let Some(why) = lasting_range_problem(self.shared.settings.uids).await {
            Availability::Unavailable(why)
        } else {
            let cancel = CancellationToken::new();
            let groups = ProcessGroups::default();
            let run = Run {
                cwd: None,
                stdin: None,
                max_stdout: 16 * 1024,
                max_stderr: 4 * 1024,
                deadline: Instant::now() + PROBE_TIMEOUT,
                cancel: &cancel,
                groups: &groups,
                path_var: None,
            };
            match self.run(SandboxPayload::Probe, run).await {
                Ok(out) if out.success() => {
                    match serde_json::from_slice::<Value>(&out.stdout.bytes) {
                        Ok(mut parts) if parts.is_object() => {
                            parts["cgroup"] = serde_json::json!(match &self.shared.cgroups {
                                Some(c) => c.describe(),
                                None =>
                                    "none here: the limits are per process (rlimits)".to_string(),
                            });
                            let r = self.shared.settings.uids;
                            parts["ceiling"] = self.shared.ceiling.to_json(r.count);
                            parts["identity"] = serde_json::json!(format!(
                                "a uid of its own per running call, from {} to {} ({} at \
                                 once; gid = uid), no supplementary groups",
                                r.first,
                                u64::from(r.first) + u64::from(r.count) - 1,
                                r.count
                            ));
                            Availability::Ready(parts)
                        }
                        _ => Availability::Unavailable(format!(
                            "the probe answered {:?}",
                            out.stdout.text()
                        )),
                    }
                }
                Ok(out) => Availability::Unavailable(format!(
                    "the probe failed ({}): {}",
                    describe_status(&out),
                    out.stderr.text().trim()
                )),
                Err(e) => Availability::Unavailable(e.to_string()),
            }
        };
        match &found {
            Availability::Ready(parts) => {
                tracing::info!(parts = %parts, "read-only sandbox active")
            }
            Availability::Unavailable(why) => tracing::warn!(
                reason = %why,
                "read-only sandbox unavailable: read-only commands will wait for local approval"
            ),
        }
        found
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
        // The probe builds its own and fills nothing: the pool starts only once the
        // probe has said yes.
        let probe = matches!(payload, SandboxPayload::Probe);
        let ahead = if probe {
            None
        } else {
            self.shared.take_ahead(run.deadline, run.cancel).await
        };
        let mut sandbox = match ahead {
            Some(built) => {
                self.shared
                    .served_ahead
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                built
            }
            None => {
                let lease = self
                    .shared
                    .identities
                    .lease(run.deadline, run.cancel)
                    .await?;
                self.shared.build(lease, run.groups, false).await?
            }
        };
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

/// [`range_problem`], if it lasts: a call of another tree that was just killed leaves its
/// processes running (unclaimed) for a moment, and must not turn the sandbox off for good.
async fn lasting_range_problem(range: UidRange) -> Option<String> {
    for _ in 0..STRANGER_CHECKS {
        range_problem(range)?;
        tokio::time::sleep(STRANGER_RECHECK).await;
    }
    range_problem(range)
}

/// A process in the range counts as another program's once it is still there after this
/// many checks this far apart.
const STRANGER_CHECKS: u32 = 4;
const STRANGER_RECHECK: Duration = Duration::from_millis(250);

/// Why the uid range cannot be the sandbox's, if it cannot: uid 0 in it, or a process
/// already running with a uid or gid in it that no nl2sh tree's running call claims (it
/// could signal or inspect a sandboxed call, and reach the device's unmasked files
/// through that call's `/proc/<pid>/root`).
pub fn range_problem(range: UidRange) -> Option<String> {
    if range.count == 0
        || range.contains(0)
        || range
            .first
            .checked_add(range.count - 1)
            .is_none_or(|l| l == u32::MAX)
    {
        return Some(format!(
            "the sandbox uid range {}+{} is empty, holds root or wraps around",
            range.first, range.count
        ));
    }
    let strangers: Vec<u32> = processes_in(range)
        .into_iter()
        .filter(|(pid, ids)| {
            // A call of this or another tree holds its uid's claim while it runs; a
            // process whose uid is unclaimed is not one (unless it just ended).
            ids.iter().any(|id| claim(*id).is_some()) && process_ids(*pid).is_some()
        })
        .map(|(pid, _)| pid)
        .take(16)
        .collect();
    if strangers.is_empty() {
        return None;
    }
    Some(format!(
        "{} process(es) not started by nl2sh run with an id in the sandbox's uid range \
         {}..={} (pids {:?}); set sandbox_uid_base to a range nothing else on the device uses",
        strangers.len(),
        range.first,
        u64::from(range.first) + u64::from(range.count) - 1,
        strangers
    ))
}

/// Processes whose real, effective, saved or file-system uid or gid lies in `range`, from
/// `/proc/<pid>/status`, with those ids.
pub fn processes_in(range: UidRange) -> Vec<(u32, Vec<u32>)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let ids: Vec<u32> = process_ids(pid)?
                .into_iter()
                .filter(|id| range.contains(*id))
                .collect();
            (!ids.is_empty()).then_some((pid, ids))
        })
        .collect()
}

/// Every uid and gid of `pid` (real, effective, saved, file system), if it still exists
/// and is not a zombie: a process that has ended can do nothing, however long its parent
/// (or, once the tree is gone, init) takes to reap it.
fn process_ids(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let zombie = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|state| state.trim_start().starts_with('Z'));
    if zombie {
        return None;
    }
    Some(
        status
            .lines()
            .filter_map(|l| l.strip_prefix("Uid:").or_else(|| l.strip_prefix("Gid:")))
            .flat_map(str::split_whitespace)
            .filter_map(|id| id.parse::<u32>().ok())
            .collect(),
    )
}

fn describe_status(out: &CommandOutput) -> String {
    match (out.exit_code, out.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ if out.timed_out => "timed out".into(),
        _ => "no status".into(),
    }
}

/// Which of a call's limits most likely ended a failed command, in words for its result:
/// the kernel's signal for CPU time, the program's own complaint for memory and processes
/// (an allocation or a fork that failed).
pub fn limit_hit(out: &CommandOutput, limits: SandboxLimits) -> Option<String> {
    if let Some(limit) = &out.limit {
        return Some(limit.clone());
    }
    let stderr = out.stderr.text().to_ascii_lowercase();
    if out.signal == Some(libc::SIGXCPU) {
        return Some(format!(
            "cpu: a process used its {} s of CPU time (sandbox_cpu_secs)",
            limits.cpu_secs
        ));
    }
    let says = |needles: &[&str]| needles.iter().any(|n| stderr.contains(n));
    if says(&[
        "cannot allocate memory",
        "memory exhausted",
        "out of memory",
        "memoryerror",
        "bad_alloc",
    ]) {
        return Some(format!(
            "memory: a process reached its {} MiB (sandbox_memory_mib)",
            limits.memory_bytes >> 20
        ));
    }
    if says(&[
        "cannot fork",
        "fork: resource temporarily unavailable",
        "fork failed",
        "resource temporarily unavailable",
    ]) {
        return Some(format!(
            "processes: the call reached its {} processes (sandbox_max_processes)",
            limits.processes
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn per_call(memory_mib: u64, processes: u32) -> SandboxLimits {
        SandboxLimits {
            processes,
            memory_bytes: memory_mib * MIB,
            cpu_secs: 300,
        }
    }

    fn ceiling(memory_mib: u64, processes: u32) -> SandboxCeiling {
        SandboxCeiling {
            memory_bytes: memory_mib * MIB,
            processes,
        }
    }

    #[test]
    fn without_a_cgroup_the_ceiling_bounds_how_many_calls_run_at_once() {
        let none = || Err("no cgroup".to_string());
        // 4 GiB at 512 MiB a call: 8; 4096 processes at 256: 16; the fewer wins.
        let c = Ceiling::new(ceiling(4096, 4096), none(), per_call(512, 256), 64);
        assert_eq!(c.slots, 8);
        let c = Ceiling::new(ceiling(4096, 1024), none(), per_call(512, 256), 64);
        assert_eq!(c.slots, 4);
        // A ceiling below one call's limit still lets one call run; never more than uids.
        let c = Ceiling::new(ceiling(256, 4096), none(), per_call(512, 256), 64);
        assert_eq!(c.slots, 1);
        let c = Ceiling::new(ceiling(1 << 20, 1 << 20), none(), per_call(16, 8), 64);
        assert_eq!(c.slots, 64);
        let json = c.to_json(64);
        assert_eq!(json["enforced"], false, "{json}");
        assert!(json["how"]
            .as_str()
            .unwrap()
            .starts_with("not by the kernel (no cgroup)"));
        // Where the kernel enforces it, every uid may run a call.
        let c = Ceiling::new(
            ceiling(256, 16),
            Ok(vec!["/sys/fs/cgroup/x".into()]),
            per_call(512, 256),
            64,
        );
        assert_eq!(c.slots, 64);
        assert_eq!(c.to_json(64)["cgroup"][0], "/sys/fs/cgroup/x");
    }

    #[test]
    fn a_call_that_waited_in_vain_is_told_which_bound_held_it() {
        let range = UidRange {
            first: 0x9500_0000,
            count: 64,
        };
        assert!(matches!(
            Identities::new(range, 4).busy(),
            SandboxError::Full(4)
        ));
        assert!(matches!(
            Identities::new(range, 64).busy(),
            SandboxError::Busy(64)
        ));
        assert_eq!(Identities::new(range, 4).available.available_permits(), 4);
        assert_eq!(
            Identities::new(range, 100).available.available_permits(),
            64
        );
    }
}
