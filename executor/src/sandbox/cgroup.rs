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

use std::io;
use std::path::{Path, PathBuf};

use nl2sh_proto::channels::SandboxLimits;

/// Where the calls' cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cgroups {
    /// The unified hierarchy: our cgroup's directory.
    V2 { parent: PathBuf },
    /// Our cgroup's directory in the v1 `memory` and `pids` hierarchies.
    V1 { memory: PathBuf, pids: PathBuf },
}

const PREFIX: &str = "nl2sh-sandbox-";

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
        let make = |dir: &Path| match std::fs::create_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        };
        let memory = limits.memory_bytes.to_string();
        let processes = limits.processes.to_string();
        match self {
            Cgroups::V2 { parent } => {
                let dir = parent.join(&name);
                make(&dir)?;
                std::fs::write(dir.join("memory.max"), &memory)?;
                // No swap: the cap is on memory, not on what can be pushed out.
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                std::fs::write(dir.join("pids.max"), &processes)?;
                Ok(vec![dir.join("cgroup.procs")])
            }
            Cgroups::V1 { memory: m, pids: p } => {
                let (mdir, pdir) = (m.join(&name), p.join(&name));
                make(&mdir)?;
                make(&pdir)?;
                // memory+swap may never be below memory: raising, memsw goes first;
                // lowering, it follows (the one that fails first succeeds second).
                let memsw = mdir.join("memory.memsw.limit_in_bytes");
                let _ = std::fs::write(&memsw, &memory);
                std::fs::write(mdir.join("memory.limit_in_bytes"), &memory)?;
                let _ = std::fs::write(&memsw, &memory);
                std::fs::write(pdir.join("pids.max"), &processes)?;
                Ok(vec![mdir.join("cgroup.procs"), pdir.join("cgroup.procs")])
            }
        }
    }

    /// How many processes the kernel's OOM killer ended in `uid`'s cgroup so far.
    pub fn oom_kills(&self, uid: u32) -> Option<u64> {
        let name = format!("{PREFIX}{uid}");
        let (file, dir) = match self {
            Cgroups::V2 { parent } => ("memory.events", parent.join(name)),
            Cgroups::V1 { memory, .. } => ("memory.oom_control", memory.join(name)),
        };
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
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
