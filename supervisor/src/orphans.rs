//! The supervisor is a child subreaper: any process of the tree whose parent dies (a tool
//! command that daemonized, a `setsid … &`) is re-parented here instead of to init. So it
//! still descends from the supervisor, which is what approvald checks before it lets a
//! peer near approvals.sock, and the supervisor can reap it and end it with the tree.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use nl2sh_proto::procfs::Stat;

/// Make this process the subreaper of everything it starts (before any worker exists).
pub fn become_subreaper() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

/// Direct children of this process that are not `workers` (the workers are waited for by
/// their `Child` handles; reaping one here would steal its status).
fn orphans(workers: &[u32]) -> Vec<Pid> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !workers.contains(pid))
        .filter(|pid| parent_of(*pid) == Some(me))
        .map(|pid| Pid::from_raw(pid as i32))
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    Stat::of(pid)?.ppid().ok()
}

/// Reap orphans that have exited, whenever a child changes state. Runs for the life of
/// the tree.
pub async fn reap(workers: std::sync::Arc<std::sync::Mutex<Vec<u32>>>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut chld = match signal(SignalKind::child()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch for exited orphans");
            return;
        }
    };
    loop {
        // Also every few seconds: a SIGCHLD can be merged with another.
        let _ = tokio::time::timeout(Duration::from_secs(5), chld.recv()).await;
        // The workers of the moment (a restart replaces them).
        let workers = workers.lock().map(|w| w.clone()).unwrap_or_default();
        for pid in orphans(&workers) {
            let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// End every orphan still alive (the tree is stopping): SIGKILL, reap, until none is
/// left (bounded).
pub fn kill_all(workers: &[u32]) -> usize {
    let mut killed = 0;
    for _ in 0..100 {
        let left = orphans(workers);
        if left.is_empty() {
            break;
        }
        for pid in left {
            if kill(pid, Signal::SIGKILL).is_ok() {
                killed += 1;
            }
            while let Ok(WaitStatus::StillAlive) | Err(nix::Error::EINTR) = waitpid(pid, None) {}
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// A child of this process is found by its parent whatever name it runs under: one that
    /// fakes stat fields, one that is not UTF-8 (a process could otherwise hide from the
    /// end of the tree by renaming itself).
    #[test]
    fn a_child_is_ours_whatever_its_name() {
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        for name in [&b"a) R 1 2 (b"[..], b"x\xff\xfe", b"z) Z 1"] {
            let link = dir.path().join(OsStr::from_bytes(name));
            std::os::unix::fs::symlink(sleep, &link).unwrap();
            let mut child = Command::new(&link)
                .arg("30")
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            let pid = child.id();
            // Once it runs under the name (it has the test's before the exec).
            let deadline = Instant::now() + Duration::from_secs(10);
            let comm = String::from_utf8_lossy(name).into_owned();
            while nl2sh_proto::procfs::Stat::of(pid).map(|s| s.comm().into_owned())
                != Some(comm.clone())
            {
                assert!(Instant::now() < deadline, "{comm:?} never ran");
                std::thread::sleep(Duration::from_millis(10));
            }
            let found = parent_of(pid);
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(found, Some(me), "{comm:?}");
        }
    }
}
