//! A control group per sandbox uid, where the device lets nl2sh make one: the kernel then
//! caps a call's memory and processes as a whole (the rlimits of [`super::confine`] cap
//! each process, and stay as the floor everywhere).
//!
//! * cgroup v2 (a unified hierarchy whose `cgroup.controllers` lists `memory` and `pids`):
//!   `<our cgroup>/nl2sh-sandbox-<uid>` with `memory.max`, `memory.swap.max` and
//!   `pids.max`, once `+memory +pids` could be enabled in our cgroup's `subtree_control`
//!   (the kernel refuses that where our cgroup holds processes and is not the root: systemd
//!   `Delegate=yes` services and Android's root cgroup allow it).
//! * cgroup v1 (the `memory` and `pids` hierarchies mounted on their own, as on many
//!   phones and older Linux): `nl2sh-sandbox-<uid>` under our cgroup in each, with
//!   `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where swap is accounted)
//!   and `pids.max`.
//!
//! The cgroup of a uid is made once and reused by every call that runs as it (one call at a
//! time: the uid's lease). The helper joins it before it enters its namespaces, so
//! everything the call starts is inside. Its OOM-kill counter tells whether the memory cap
//! ended a process.
//!
//! All calls' cgroups live under one parent, `<our cgroup>/nl2sh-sandboxes-<first uid>`
//! ([`Cgroups::ceiling`]), whose `memory.max` / `memory.limit_in_bytes` and `pids.max`
//! are the sandboxes' shared ceiling: however many calls run at once, together they
//! cannot take more than it. It holds no process itself (cgroup v2's "no internal
//! processes" rule), and on v1 `memory.use_hierarchy` is set in it before any call's
//! cgroup is made, so that its children are charged to it. Whether the call's own limit
//! or the shared ceiling ended a process is told by which cgroup's limit was reached
//! ([`Cgroups::counters`]).

use std::io;
use std::path::{Path, PathBuf};

use nl2sh_proto::channels::{SandboxCeiling, SandboxLimits};

/// Where the calls' cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cgroups {
    /// The unified hierarchy: our cgroup's directory.
    V2 { parent: PathBuf },
    /// Our cgroup's directory in the v1 `memory` and `pids` hierarchies.
    V1 { memory: PathBuf, pids: PathBuf },
}

const PREFIX: &str = "nl2sh-sandbox-";
/// The shared parent's name, before the first uid of the range: trees whose calls run as
/// the same uids share it (and its ceiling), as they share those uids' cgroups.
const CEILING_PREFIX: &str = "nl2sh-sandboxes-";
/// Room in a call's `pids.max` beyond its uid's processes, for helpers: its own and
/// earlier calls' still being reaped.
pub const HELPERS: u32 = 8;
/// How close to its limit a v1 cgroup's peak comes when the limit was reached: the kernel
/// charges in batches of 64 pages per CPU.
pub const REACHED: u64 = 2 * 1024 * 1024;

/// A call's counters, read before and after it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Processes of the call the OOM killer ended, whoever's limit was reached.
    pub oom_kills: u64,
    /// Times the call's own memory limit was reached (v2: its `oom` events), or on v1
    /// whether it was (1) since the cgroup was prepared for the call: its peak, reset
    /// then, came within [`REACHED`] of its limit (the kernel there counts no `failcnt`
    /// on every version). An OOM kill without it was the shared ceiling's (or an
    /// ancestor's).
    pub own_memory_limit: u64,
    /// Forks the pids controller refused in the call. The call's own `pids.max` leaves
    /// room for helpers ([`HELPERS`]), so its uid's `RLIMIT_NPROC` refuses first; a
    /// refusal here was the shared ceiling's (or an ancestor's).
    pub pids_refused: u64,
}

impl Cgroups {
    /// What this device offers, from `/proc/self/mountinfo` and `/proc/self/cgroup`; `None`
    /// where nl2sh cannot manage a cgroup for its calls.
    pub fn detect() -> Option<Cgroups> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        Self::from_tables(&mountinfo, &membership).filter(Cgroups::usable)
    }

    /// The hierarchies the tables describe (nothing is checked on disk).
    fn from_tables(mountinfo: &str, membership: &str) -> Option<Cgroups> {
        let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
        let path_of = |controller: &str| {
            membership.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                let listed = if controller.is_empty() {
                    controllers.is_empty()
                } else {
                    controllers.split(',').any(|c| c == controller)
                };
                listed.then(|| path.to_string())
            })
        };
        // v2 first, where it holds the controllers.
        if let (Some(mount), Some(path)) =
            (mounts.iter().find(|m| m.fstype == "cgroup2"), path_of(""))
        {
            if let Some(dir) = mount.dir_of(&path) {
                let controllers =
                    std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
                let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
                if has("memory") && has("pids") {
                    return Some(Cgroups::V2 { parent: dir });
                }
            }
        }
        let v1 = |controller: &str| {
            let mount = mounts.iter().find(|m| {
                m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller)
            })?;
            mount.dir_of(&path_of(controller)?)
        };
        Some(Cgroups::V1 {
            memory: v1("memory")?,
            pids: v1("pids")?,
        })
    }

    /// Whether a call's cgroup can really be made here (made and removed once).
    fn usable(&self) -> bool {
        let probe = format!("{PREFIX}probe-{}", std::process::id());
        match self {
            Cgroups::V2 { parent } => {
                let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
                    .is_ok_and(|s| {
                        s.split_whitespace().any(|c| c == "memory")
                            && s.split_whitespace().any(|c| c == "pids")
                    });
                let enabled = enabled
                    || std::fs::write(parent.join("cgroup.subtree_control"), "+memory +pids")
                        .is_ok();
                enabled && make_and_remove(&parent.join(probe))
            }
            Cgroups::V1 { memory, pids } => {
                make_and_remove(&memory.join(&probe)) && make_and_remove(&pids.join(&probe))
            }
        }
    }

    /// Make (or reuse) the cgroup(s) of `uid` with `limits` set; the `cgroup.procs` files a
    /// process writes its pid to, to join.
    pub fn prepare(&self, uid: u32, limits: SandboxLimits) -> io::Result<Vec<PathBuf>> {
        let name = format!("{PREFIX}{uid}");
        let memory = limits.memory_bytes.to_string();
        // Helpers (root) are in the cgroup too: this call's, and the last call's while it
        // is reaped (seen: the next call's fork refused by the cgroup, not its uid). With
        // room for them, the uid's RLIMIT_NPROC is what the call's own processes reach
        // first.
        let processes = limits.processes.saturating_add(HELPERS).to_string();
        match self {
            Cgroups::V2 { parent } => {
                let dir = parent.join(&name);
                make(&dir)?;
                limit_v2(&dir, &memory, &processes)?;
                Ok(vec![dir.join("cgroup.procs")])
            }
            Cgroups::V1 { memory: m, pids: p } => {
                let (mdir, pdir) = (m.join(&name), p.join(&name));
                make(&mdir)?;
                make(&pdir)?;
                limit_v1(&mdir, &pdir, &memory, &processes)?;
                // The peaks are this call's from here on ([`Counters::own_memory_limit`]).
                for peak in [
                    "memory.max_usage_in_bytes",
                    "memory.memsw.max_usage_in_bytes",
                ] {
                    let _ = std::fs::write(mdir.join(peak), "0");
                }
                Ok(vec![mdir.join("cgroup.procs"), pdir.join("cgroup.procs")])
            }
        }
    }

    /// The counters of `uid`'s cgroup so far (`None` where they cannot be read).
    pub fn counters(&self, uid: u32) -> Option<Counters> {
        let name = format!("{PREFIX}{uid}");
        let read = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(file)).ok();
        let field = |text: &str, key: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                .and_then(|n| n.trim().parse().ok())
        };
        let number =
            |text: Option<String>| -> u64 { text.and_then(|t| t.trim().parse().ok()).unwrap_or(0) };
        let (memory_dir, pids_dir) = match self {
            Cgroups::V2 { parent } => (parent.join(&name), parent.join(&name)),
            Cgroups::V1 { memory, pids } => (memory.join(&name), pids.join(&name)),
        };
        // Where the kernel has it, the local file counts the forks refused in this cgroup
        // whichever limit refused them (newer kernels count `pids.events` where the limit
        // was).
        let pids_events =
            read(&pids_dir, "pids.events.local").or_else(|| read(&pids_dir, "pids.events"));
        let pids_refused = pids_events
            .as_deref()
            .and_then(|t| field(t, "max"))
            .unwrap_or(0);
        Some(match self {
            Cgroups::V2 { .. } => {
                let events = read(&memory_dir, "memory.events")?;
                Counters {
                    oom_kills: field(&events, "oom_kill")?,
                    own_memory_limit: field(&events, "oom").unwrap_or(0),
                    pids_refused,
                }
            }
            Cgroups::V1 { .. } => {
                let control = read(&memory_dir, "memory.oom_control")?;
                let limit = number(read(&memory_dir, "memory.limit_in_bytes"));
                let peak = number(read(&memory_dir, "memory.max_usage_in_bytes"))
                    .max(number(read(&memory_dir, "memory.memsw.max_usage_in_bytes")));
                Counters {
                    oom_kills: field(&control, "oom_kill")?,
                    own_memory_limit: u64::from(limit > 0 && peak.saturating_add(REACHED) >= limit),
                    pids_refused,
                }
            }
        })
    }

    /// Make (or reuse) the sandboxes' shared parent for the range starting at `first_uid`,
    /// with `ceiling` set; the calls' cgroups are then made in it (the returned
    /// [`Cgroups`]).
    pub fn ceiling(&self, first_uid: u32, ceiling: SandboxCeiling) -> io::Result<Cgroups> {
        let name = format!("{CEILING_PREFIX}{first_uid}");
        let memory = ceiling.memory_bytes.to_string();
        let processes = ceiling.processes.to_string();
        let made = match self {
            Cgroups::V2 { parent } => {
                let dir = parent.join(&name);
                make(&dir)?;
                limit_v2(&dir, &memory, &processes)?;
                // It holds no process, so its children may have the controllers.
                std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids")?;
                Cgroups::V2 { parent: dir }
            }
            Cgroups::V1 { memory: m, pids: p } => {
                let (mdir, pdir) = (m.join(&name), p.join(&name));
                make(&mdir)?;
                make(&pdir)?;
                hierarchical(&mdir)?;
                limit_v1(&mdir, &pdir, &memory, &processes)?;
                Cgroups::V1 {
                    memory: mdir,
                    pids: pdir,
                }
            }
        };
        if made.usable() {
            Ok(made)
        } else {
            Err(io::Error::other(format!(
                "no call's cgroup can be made in {}",
                made.describe_dirs()
            )))
        }
    }

    /// The most memory charged to this cgroup (its `memory.peak` on v2,
    /// `memory.max_usage_in_bytes` on v1): of the shared parent, what all calls together
    /// took at most.
    pub fn peak_memory(&self) -> Option<u64> {
        let file = match self {
            Cgroups::V2 { parent } => parent.join("memory.peak"),
            Cgroups::V1 { memory, .. } => memory.join("memory.max_usage_in_bytes"),
        };
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    }

    /// The directories calls' cgroups are made in (memory first).
    pub fn dirs(&self) -> Vec<String> {
        match self {
            Cgroups::V2 { parent } => vec![parent.display().to_string()],
            Cgroups::V1 { memory, pids } => {
                vec![memory.display().to_string(), pids.display().to_string()]
            }
        }
    }

    /// The directories calls' cgroups are made in, in words.
    pub fn describe_dirs(&self) -> String {
        match self {
            Cgroups::V2 { parent } => parent.display().to_string(),
            Cgroups::V1 { memory, pids } => {
                format!("{} and {}", memory.display(), pids.display())
            }
        }
    }

    /// For `nl2sh_inspect`.
    pub fn describe(&self) -> String {
        match self {
            Cgroups::V2 { parent } => format!(
                "cgroup v2 per call under {} (memory.max, pids.max)",
                parent.display()
            ),
            Cgroups::V1 { memory, pids } => format!(
                "cgroup v1 per call under {} and {} (memory.limit_in_bytes, pids.max)",
                memory.display(),
                pids.display()
            ),
        }
    }
}

/// Make sure v1 memory cgroup `dir` charges its children to itself (`memory.use_hierarchy`,
/// 1 on every kernel since 5.x; older ones inherit 0 from a root that has it 0, and let it
/// be changed only while the cgroup has no children: the calls' cgroups a previous start
/// made are removed first, where no process is left in them).
fn hierarchical(dir: &Path) -> io::Result<()> {
    let file = dir.join("memory.use_hierarchy");
    let on = || std::fs::read_to_string(&file).is_ok_and(|v| v.trim() == "1");
    if on() {
        return Ok(());
    }
    if std::fs::write(&file, "1").is_err() {
        for entry in std::fs::read_dir(dir)?.flatten() {
            if entry.file_name().to_string_lossy().starts_with(PREFIX) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let _ = std::fs::write(&file, "1");
    }
    if on() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} stays 0: its children would not be charged to it",
            file.display()
        )))
    }
}

fn make_and_remove(dir: &Path) -> bool {
    std::fs::create_dir(dir).is_ok() && std::fs::remove_dir(dir).is_ok()
}

/// One line of `/proc/self/mountinfo`, as far as cgroups need it.
struct Mount {
    root: String,
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (head, tail) = line.split_once(" - ")?;
        let head: Vec<&str> = head.split(' ').collect();
        let mut tail = tail.split(' ');
        Some(Mount {
            root: head.get(3)?.to_string(),
            mount_point: PathBuf::from(head.get(4)?),
            fstype: tail.next()?.to_string(),
            super_options: tail.nth(1).unwrap_or("").to_string(),
        })
    }

    /// The directory of cgroup `path` (as `/proc/self/cgroup` names it) under this mount.
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let rel = if self.root == "/" {
            path
        } else {
            path.strip_prefix(self.root.as_str())?
        };
        let rel = rel.trim_start_matches('/');
        if rel.split('/').any(|c| c == "..") {
            return None;
        }
        Some(if rel.is_empty() {
            self.mount_point.clone()
        } else {
            self.mount_point.join(rel)
        })
    }
}

/// Make `dir` unless it is there.
fn make(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// A v2 cgroup's memory (without swap) and process limits.
fn limit_v2(dir: &Path, memory: &str, processes: &str) -> io::Result<()> {
    std::fs::write(dir.join("memory.max"), memory)?;
    // No swap: the cap is on memory, not on what can be pushed out.
    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
    std::fs::write(dir.join("pids.max"), processes)
}

/// A v1 memory cgroup's memory and memory+swap limits, and its pids cgroup's limit.
fn limit_v1(mdir: &Path, pdir: &Path, memory: &str, processes: &str) -> io::Result<()> {
    // memory+swap may never be below memory: raising, memsw goes first; lowering, it
    // follows (the one that fails first succeeds second).
    let memsw = mdir.join("memory.memsw.limit_in_bytes");
    let _ = std::fs::write(&memsw, memory);
    std::fs::write(mdir.join("memory.limit_in_bytes"), memory)?;
    let _ = std::fs::write(&memsw, memory);
    std::fs::write(pdir.join("pids.max"), processes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn v1_hierarchies_are_found_under_our_own_cgroups() {
        let membership = "8:pids:/\n4:memory:/svc/a\n0::/\n";
        assert_eq!(
            Cgroups::from_tables(HYBRID, membership),
            Some(Cgroups::V1 {
                memory: PathBuf::from("/sys/fs/cgroup/memory/svc/a"),
                pids: PathBuf::from("/sys/fs/cgroup/pids"),
            })
        );
        // Without a pids hierarchy there is nothing to cap processes with.
        let only_memory = HYBRID.lines().next().unwrap_or_default();
        assert_eq!(Cgroups::from_tables(only_memory, membership), None);
    }

    #[test]
    fn a_mount_of_part_of_the_tree_maps_paths_below_its_root() {
        let mount =
            Mount::parse("35 31 0:32 /svc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory")
                .unwrap();
        assert_eq!(
            mount.dir_of("/svc/a"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/a"))
        );
        assert_eq!(mount.dir_of("/other"), None);
        assert_eq!(mount.dir_of("/svc/../x"), None);
    }
}
