//! Who may talk on `protocol/approvals.sock`, beyond having approvald's uid: approval must
//! come from a person, so no process of the nl2sh tree may approve. The tree is the
//! supervisor (approvald's parent) and everything below it: the workers and every command
//! the executor starts. Those commands run as approvald's uid, so without this check a
//! tool command could run `nl2sh protocol approve ID` (under `script`, for a terminal)
//! and approve its own pending request. The supervisor is a child subreaper, so a tool
//! process that daemonizes is re-parented to it and stays in the tree.
//!
//! A peer is refused when it is the tree root or descends from it. The ancestry is read
//! from `/proc/<pid>/stat`, one parent at a time, up to a process whose parent is 0
//! (pid 1, or the top of our pid namespace). Pids are reused, so every process on the way
//! is held by a pidfd taken before its entry is read and checked after the read to still
//! name a process that has not been reaped: then the entry read was that process's, and
//! a reused pid cannot make a descendant look like an outsider.
//!
//! * The peer's pidfd comes from `SO_PEERPIDFD` (Linux 6.5), which the kernel took at
//!   connect time. Older kernels: `pidfd_open` of the SO_PEERCRED pid (Linux 5.3), which
//!   leaves a window between the peer exiting and that call. No pidfds at all: /proc is
//!   read without the guard (logged at debug).
//! * A parent's pidfd is opened after its pid was read from the child's entry, and then
//!   the child's entry is read again: the child still having that parent means the pidfd
//!   holds the parent, not a newcomer that took over a freed pid.
//! * Anything that cannot be verified refuses the peer (fail closed): a peer that is
//!   already gone, an unreadable /proc entry, a pidfd call failing, a walk longer than
//!   [`MAX_STEPS`], the tree root gone, a /proc of another pid namespace.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

use nl2sh_proto::procfs::{read_stat, Stat, StatError};
use nl2sh_proto::sys::pidfd as sys;

/// Most steps (parents visited, plus re-reads after a parent changed) before a walk is
/// given up and the peer refused.
pub const MAX_STEPS: usize = 4096;

/// A process id, always a valid one (1 ..= `pid_t::MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(libc::pid_t);

impl Pid {
    /// `None` for 0 (no process) and numbers no pid can have.
    pub fn new(pid: u32) -> Option<Pid> {
        libc::pid_t::try_from(pid).ok().and_then(Pid::from_raw)
    }

    /// `None` for 0 and negative numbers.
    pub fn from_raw(pid: libc::pid_t) -> Option<Pid> {
        (pid > 0).then_some(Pid(pid))
    }

    pub fn get(self) -> u32 {
        self.0.unsigned_abs()
    }

    pub fn as_raw(self) -> libc::pid_t {
        self.0
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which peers of the approvals socket are served, besides having approvald's uid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerPolicy {
    /// The uid check only: for approvald run in-process (tests), with no supervisor.
    SameUid,
    /// Also refuse this process (the supervisor) and every process that descends from it.
    OutsideTree(Pid),
}

impl PeerPolicy {
    /// Production: the tree is rooted at approvald's parent, the supervisor. Read this
    /// first thing at start, while the parent is surely still the supervisor.
    pub fn outside_parent_tree() -> Result<PeerPolicy, NoTreeRoot> {
        Pid::new(std::os::unix::process::parent_id())
            .map(PeerPolicy::OutsideTree)
            .ok_or(NoTreeRoot)
    }

    /// The tree root, if peers are checked against one.
    pub fn tree_root(self) -> Option<Pid> {
        match self {
            PeerPolicy::SameUid => None,
            PeerPolicy::OutsideTree(root) => Some(root),
        }
    }
}

/// approvald's parent is not in its pid namespace, so the nl2sh tree cannot be named.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error(
    "approvald's parent is outside its pid namespace: the nl2sh process tree has no visible root"
)]
pub struct NoTreeRoot;

/// Why a peer was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The one refusal that is a verdict, not a failure to verify.
    #[error("process {pid} descends from the nl2sh process tree (root {root}, {depth} generation(s) up)")]
    InTree { pid: Pid, root: Pid, depth: usize },
    #[error("the peer's pid is not visible in approvald's pid namespace")]
    NoPid,
    #[error("process {0} is gone")]
    Gone(Pid),
    #[error("the nl2sh tree root {0} is gone")]
    RootGone(Pid),
    #[error("cannot read /proc/{pid}/stat: {source}")]
    Proc {
        pid: Pid,
        #[source]
        source: io::Error,
    },
    #[error("/proc/{pid}/stat: {source}")]
    Stat {
        pid: Pid,
        #[source]
        source: StatError,
    },
    #[error("{call} for process {pid}: {source}")]
    Pidfd {
        call: &'static str,
        pid: Pid,
        #[source]
        source: io::Error,
    },
    #[error("/proc does not show approvald's pid namespace")]
    ForeignProc,
    #[error("gave up after {MAX_STEPS} steps up the ancestry of process {0}")]
    TooDeep(Pid),
}

impl Refusal {
    /// The peer is in the tree (as opposed to: it could not be verified).
    pub fn is_in_tree(&self) -> bool {
        matches!(self, Refusal::InTree { .. })
    }
}

/// The parent pid in the text of `/proc/<pid>/stat` (`None` for 0: no parent in this
/// pid namespace), read by proto's one reader ([`Stat`]: the fields after the command
/// name's last `)`, whatever the name holds).
pub fn ppid_from_stat(stat: &[u8]) -> Result<Option<Pid>, StatError> {
    // `ppid` is at most `pid_t`'s largest: `Pid::new` is `None` for 0 alone.
    Ok(Pid::new(Stat::parse(stat)?.ppid()?))
}

/// Holds a process while its /proc entry is read.
#[derive(Debug)]
enum Guard {
    Pidfd(OwnedFd),
    /// The kernel has no pidfds: nothing to hold.
    Unguarded,
}

impl Guard {
    fn open(pid: Pid, pidfds: bool) -> io::Result<Guard> {
        if !pidfds {
            return Ok(Guard::Unguarded);
        }
        sys::pidfd_open(pid.as_raw()).map(Guard::Pidfd)
    }

    /// Not reaped yet (a zombie still holds its pid, so that is "alive" here). Signal 0
    /// to another user's process fails with EPERM, after the kernel found it.
    fn alive(&self) -> io::Result<bool> {
        let Guard::Pidfd(fd) = self else {
            return Ok(true);
        };
        match sys::pidfd_send_signal(fd.as_fd(), 0) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error()
}

/// The refusal for a failed `pidfd_open` of `pid`.
fn open_failed(pid: Pid, e: io::Error) -> Refusal {
    if errno(&e) == Some(libc::ESRCH) {
        Refusal::Gone(pid)
    } else {
        Refusal::Pidfd {
            call: "pidfd_open",
            pid,
            source: e,
        }
    }
}

/// Whether this kernel has pidfds, probed when serving begins.
fn kernel_has_pidfds() -> bool {
    match sys::pidfd_open(std::process::id().try_into().unwrap_or(libc::pid_t::MAX)) {
        Ok(_) => true,
        Err(e) if errno(&e) == Some(libc::ENOSYS) => false,
        // Supported, but refused (a seccomp filter, say): every check will fail closed.
        Err(_) => true,
    }
}

/// The nl2sh tree to keep out, held for as long as the approvals socket is served.
#[derive(Debug)]
pub struct TreeRoot {
    root: Pid,
    /// `None`: the root was gone (or could not be held) when serving began.
    root_guard: Option<Guard>,
    pidfds: bool,
    /// Whether the "no SO_PEERPIDFD" fallback was logged already.
    fallback_logged: AtomicBool,
}

impl TreeRoot {
    pub fn new(root: Pid) -> TreeRoot {
        let pidfds = kernel_has_pidfds();
        if !pidfds {
            tracing::debug!(
                "this kernel has no pidfds: approvals peers' ancestry is read from /proc \
                 without the guard against reused pids"
            );
        }
        let root_guard = match Guard::open(root, pidfds) {
            Ok(guard) => Some(guard),
            Err(e) => {
                tracing::warn!(
                    root = %root, error = %e,
                    "cannot hold the nl2sh tree root; every approvals peer will be refused"
                );
                None
            }
        };
        TreeRoot {
            root,
            root_guard,
            pidfds,
            fallback_logged: AtomicBool::new(false),
        }
    }

    pub fn root(&self) -> Pid {
        self.root
    }

    /// Whether the walk is guarded by pidfds (false: the kernel has none).
    pub fn guarded(&self) -> bool {
        self.pidfds
    }

    /// Check the process connected to `socket`, which SO_PEERCRED says is `cred_pid`.
    pub fn check_peer(&self, socket: BorrowedFd<'_>, cred_pid: libc::pid_t) -> Result<(), Refusal> {
        let pid = Pid::from_raw(cred_pid).ok_or(Refusal::NoPid)?;
        let guard = if !self.pidfds {
            tracing::debug!(peer_pid = %pid, "no pidfds: checking the peer's ancestry unguarded");
            Guard::Unguarded
        } else {
            match sys::peer_pidfd(socket) {
                Ok(fd) => Guard::Pidfd(fd),
                Err(e) if errno(&e) == Some(libc::ENOPROTOOPT) => {
                    if !self.fallback_logged.swap(true, Ordering::Relaxed) {
                        tracing::debug!(
                            "this kernel has no SO_PEERPIDFD: approvals peers are held by \
                             pidfd_open of their pid, after connecting"
                        );
                    }
                    Guard::open(pid, true).map_err(|e| open_failed(pid, e))?
                }
                Err(e) => {
                    return Err(Refusal::Pidfd {
                        call: "SO_PEERPIDFD",
                        pid,
                        source: e,
                    })
                }
            }
        };
        self.walk(pid, guard)
    }

    /// Check process `pid` as it is now (its pidfd is opened first).
    pub fn check_pid(&self, pid: Pid) -> Result<(), Refusal> {
        let guard = Guard::open(pid, self.pidfds).map_err(|e| open_failed(pid, e))?;
        self.walk(pid, guard)
    }

    fn root_alive(&self) -> Result<(), Refusal> {
        let alive = match &self.root_guard {
            None => false,
            Some(guard) => guard.alive().map_err(|source| Refusal::Pidfd {
                call: "pidfd_send_signal",
                pid: self.root,
                source,
            })?,
        };
        if alive {
            Ok(())
        } else {
            Err(Refusal::RootGone(self.root))
        }
    }

    fn walk(&self, start: Pid, guard: Guard) -> Result<(), Refusal> {
        // The root gone means its descendants were re-parented out of the tree.
        self.root_alive()?;
        proc_is_ours()?;
        self.walk_up(start, guard)?;
        // ... and that may have happened during the walk.
        self.root_alive()
    }

    fn walk_up(&self, start: Pid, mut guard: Guard) -> Result<(), Refusal> {
        let mut pid = start;
        let mut depth = 0;
        for _ in 0..MAX_STEPS {
            if pid == self.root {
                return Err(Refusal::InTree {
                    pid: start,
                    root: self.root,
                    depth,
                });
            }
            let Some(parent) = parent_of(pid, &guard)? else {
                return Ok(());
            };
            let parent_guard = match Guard::open(parent, self.pidfds) {
                Ok(g) => g,
                // Reaped since: `pid` has another parent by now; read it again.
                Err(e) if errno(&e) == Some(libc::ESRCH) => continue,
                Err(e) => return Err(open_failed(parent, e)),
            };
            // Still the parent after the pidfd was opened: the pidfd holds that parent,
            // not a process that took over its pid.
            if parent_of(pid, &guard)? != Some(parent) {
                continue;
            }
            pid = parent;
            guard = parent_guard;
            depth += 1;
        }
        Err(Refusal::TooDeep(start))
    }
}

/// The parent of `pid`, read from /proc while `guard` holds the process.
fn parent_of(pid: Pid, guard: &Guard) -> Result<Option<Pid>, Refusal> {
    let stat = read_stat(pid.get()).map_err(|source| Refusal::Proc { pid, source })?;
    // After the read: not reaped yet means the entry read was that process's.
    let alive = guard.alive().map_err(|source| Refusal::Pidfd {
        call: "pidfd_send_signal",
        pid,
        source,
    })?;
    if !alive {
        return Err(Refusal::Gone(pid));
    }
    ppid_from_stat(&stat).map_err(|source| Refusal::Stat { pid, source })
}

/// /proc must be mounted for approvald's pid namespace, or its pids name other processes
/// than SO_PEERCRED and pidfd_open do.
fn proc_is_ours() -> Result<(), Refusal> {
    let link = std::fs::read_link("/proc/self").map_err(|_| Refusal::ForeignProc)?;
    let shown: Option<u32> = link.to_str().and_then(|s| s.parse().ok());
    if shown == Some(std::process::id()) {
        Ok(())
    } else {
        Err(Refusal::ForeignProc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    fn pid(p: u32) -> Pid {
        Pid::new(p).unwrap()
    }

    fn own_pid() -> Pid {
        pid(std::process::id())
    }

    /// A child that lives until it is killed (or 30 s pass).
    struct Sleeper(Child);

    impl Sleeper {
        fn spawn(cmd: &mut Command) -> Sleeper {
            Sleeper(
                cmd.stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        }

        fn sleep() -> Sleeper {
            Sleeper::spawn(Command::new("sleep").arg("30"))
        }

        fn pid(&self) -> Pid {
            pid(self.0.id())
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Kill (by pidfd) a process this test started that is not our child.
    fn kill(p: Pid) {
        if let Ok(fd) = sys::pidfd_open(p.as_raw()) {
            let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
        }
    }

    fn ppid(p: Pid) -> Option<Pid> {
        let stat = read_stat(p.get()).ok()?;
        ppid_from_stat(&stat).ok().flatten()
    }

    fn comm(p: Pid) -> String {
        std::fs::read_to_string(format!("/proc/{p}/comm"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// A child of `parent` running `name`, waiting for it to appear.
    fn child_of(parent: Pid, name: &str) -> Pid {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                let Some(p) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .and_then(Pid::new)
                else {
                    continue;
                };
                if ppid(p) == Some(parent) && comm(p) == name {
                    return p;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no {name} child of {parent} appeared");
    }

    /// The parsing is proto's (`procfs`, tested there with hostile names); here, what a
    /// walk up the tree takes from it: a parent, none (0), or a refusal.
    #[test]
    fn the_parent_read_from_a_stat_line() {
        let ok = |s: &str| ppid_from_stat(s.as_bytes());
        assert_eq!(
            ok("1234 (bash) S 1000 1234 1234 34816 1234 4194304 0 0").unwrap(),
            Some(pid(1000))
        );
        // A command name that fakes fields: only what follows the last ')' counts.
        assert_eq!(
            ok("5 (a) R 1 2 (b) S 77 5 5 0 -1 4194560\n").unwrap(),
            Some(pid(77))
        );
        assert_eq!(ok("1 (systemd) S 0 1 1 0 -1 4194560").unwrap(), None);
        assert_eq!(ok("12 bash S 1"), Err(StatError::NoCommand));
        assert_eq!(ok("12 (bash) S"), Err(StatError::Missing("parent pid")));
        for bad in ["-1", "2147483648"] {
            assert!(
                matches!(
                    ok(&format!("12 (bash) S {bad} 1")),
                    Err(StatError::Bad { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn pids() {
        assert_eq!(Pid::new(0), None);
        assert_eq!(Pid::new(u32::MAX), None);
        assert_eq!(Pid::from_raw(-1), None);
        assert_eq!(Pid::new(7).map(Pid::get), Some(7));
        assert_eq!(pid(7).to_string(), "7");
    }

    #[test]
    fn the_reading_process_and_the_root_itself_are_in_the_tree() {
        let tree = TreeRoot::new(own_pid());
        let r = tree.check_pid(own_pid());
        assert!(matches!(r, Err(Refusal::InTree { depth: 0, .. })), "{r:?}");
    }

    #[test]
    fn a_grandchild_is_in_the_tree() {
        let sh = Sleeper::spawn(Command::new("sh").args(["-c", "sleep 30 & wait"]));
        let grandchild = child_of(sh.pid(), "sleep");
        let r = TreeRoot::new(sh.pid()).check_pid(grandchild);
        assert!(matches!(r, Err(Refusal::InTree { depth: 1, .. })), "{r:?}");
        let r = TreeRoot::new(own_pid()).check_pid(grandchild);
        assert!(matches!(r, Err(Refusal::InTree { depth: 2, .. })), "{r:?}");
        // Rooted elsewhere: the walk reaches the top.
        let other = Sleeper::sleep();
        TreeRoot::new(other.pid()).check_pid(grandchild).unwrap();
        TreeRoot::new(other.pid()).check_pid(own_pid()).unwrap();
        kill(grandchild);
    }

    #[test]
    fn a_process_reparented_to_a_subreaper_is_in_the_tree() {
        let mut cmd = Command::new("sh");
        // The inner shell starts a sleep and exits: the sleep is orphaned, then the
        // outer shell becomes `sleep`, still a subreaper.
        cmd.args(["-c", "sh -c 'sleep 30 &'; exec sleep 31"]);
        sys::subreaper_on_spawn(&mut cmd);
        let reaper = Sleeper::spawn(&mut cmd);
        let deadline = Instant::now() + Duration::from_secs(10);
        while comm(reaper.pid()) != "sleep" {
            assert!(Instant::now() < deadline, "the outer shell never exec'd");
            std::thread::sleep(Duration::from_millis(10));
        }
        let orphan = child_of(reaper.pid(), "sleep");
        let r = TreeRoot::new(reaper.pid()).check_pid(orphan);
        assert!(matches!(r, Err(Refusal::InTree { depth: 1, .. })), "{r:?}");
        let r = TreeRoot::new(own_pid()).check_pid(orphan);
        assert!(matches!(r, Err(Refusal::InTree { depth: 2, .. })), "{r:?}");
        kill(orphan);
    }

    #[test]
    fn a_dead_process_is_refused() {
        let other = Sleeper::sleep();
        let tree = TreeRoot::new(other.pid());
        if !tree.guarded() {
            eprintln!("skipped: no pidfds in this kernel");
            return;
        }
        let mut child = Command::new("true").spawn().unwrap();
        let p = pid(child.id());
        // Held before it dies, as a peer is by SO_PEERPIDFD.
        let guard = Guard::open(p, true).unwrap();
        child.wait().unwrap();
        let r = tree.walk(p, guard);
        // Gone, or its /proc entry is already gone; never served.
        assert!(
            matches!(r, Err(Refusal::Gone(_) | Refusal::Proc { .. })),
            "{r:?}"
        );
        // Opening it now fails (unless the pid was reused at once).
        if let Err(r) = tree.check_pid(p) {
            assert!(!r.is_in_tree(), "{r}");
        }
    }

    #[test]
    fn a_gone_root_refuses_everyone() {
        let mut child = Command::new("true").spawn().unwrap();
        let root = pid(child.id());
        let tree = TreeRoot::new(root);
        child.wait().unwrap();
        let r = tree.check_pid(own_pid());
        if tree.guarded() {
            assert!(matches!(r, Err(Refusal::RootGone(_))), "{r:?}");
        }
        // Gone before serving began.
        let tree = TreeRoot::new(root);
        if tree.guarded() {
            let r = tree.check_pid(own_pid());
            assert!(matches!(r, Err(Refusal::RootGone(_))), "{r:?}");
        }
    }

    #[test]
    fn the_policy_names_the_parent() {
        let policy = PeerPolicy::outside_parent_tree().unwrap();
        assert_eq!(
            policy.tree_root().map(Pid::get),
            Some(std::os::unix::process::parent_id())
        );
        assert_eq!(PeerPolicy::SameUid.tree_root(), None);
    }
}
