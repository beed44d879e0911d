//! The limits of sandboxed calls: the shared ceiling all of them stay under together
//! ([`Ceiling`]: enforced by a parent cgroup where the device allows one, else by running
//! fewer calls at once) and, for a result, which limit most likely ended a command.

use serde_json::Value;

use nl2sh_proto::channels::{SandboxCeiling, SandboxLimits};

use super::{cgroup, Shared};
use crate::exec::CommandOutput;

/// The sandboxes' shared ceiling, and how this device enforces it.
pub(super) struct Ceiling {
    pub(super) limits: SandboxCeiling,
    /// Enforced by the kernel (a parent cgroup, these directories, holds every call's),
    /// or why not.
    pub(super) enforced: Result<Vec<String>, String>,
    /// How many calls may run at once: every uid of the range where the kernel enforces
    /// the ceiling; else as many as fit in it at each call's own limits, at least one
    /// (a floor: without a cgroup, memory is limited per process, not per call).
    pub(super) slots: u32,
}

impl Ceiling {
    pub(super) fn new(
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
    pub(super) fn to_json(&self, uids: u32) -> Value {
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

impl Shared {
    /// Which cgroup limit ended a process of a call, from its counters before and after.
    pub(super) fn which_limit(
        &self,
        before: cgroup::Counters,
        after: cgroup::Counters,
    ) -> Option<String> {
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
}
