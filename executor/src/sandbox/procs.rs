//! Scans of `/proc` for processes with an id in the sandbox's uid range: whether a
//! finished call's uid is free again, and whether something that is not nl2sh's runs in
//! the range (then it cannot be the sandbox's).

use std::time::Duration;

use nl2sh_proto::channels::UidRange;

use super::uids::claim;

/// [`range_problem`], if it lasts: a call of another tree that was just killed leaves its
/// processes running (unclaimed) for a moment, and must not turn the sandbox off for good.
pub(super) async fn lasting_range_problem(range: UidRange) -> Option<String> {
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
