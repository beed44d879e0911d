//! What an absent key means, and the bounds a present one must keep: the defaults, the
//! accessors that apply them, and the device facts some of them are sized from.

use std::time::Duration;

use crate::limits::APPROVAL_TIMEOUT;

use super::{Config, ModelConfig};

/// `protocol_service_port` when the key is absent.
pub const DEFAULT_PROTOCOL_PORT: u16 = 8765;
/// `audit_max_rows` when the key is absent: a decision and an outcome row per call, so
/// the last 50,000 calls — days of an agent polling the screen, weeks of ordinary use.
pub const DEFAULT_AUDIT_MAX_ROWS: u64 = 100_000;
/// `audit_max_bytes` when the key is absent. 100,000 rows of a screen-polling agent take
/// 40–50 MiB with the WAL; the byte limit is the backstop for long actions and
/// summaries, and small beside any phone's data partition.
pub const DEFAULT_AUDIT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The least `audit_max_rows` may be: the trail always covers the last 500 calls.
pub const MIN_AUDIT_MAX_ROWS: u64 = 1_000;
/// The least `audit_max_bytes` may be: room for the WAL and a few of the largest rows.
pub const MIN_AUDIT_MAX_BYTES: u64 = 1024 * 1024;

/// The Web console's bind address by default: loopback only.
pub const DEFAULT_WEB_HOST: &str = "127.0.0.1";
/// The Web console's port by default (the protocols' is [`DEFAULT_PROTOCOL_PORT`]).
pub const DEFAULT_WEB_PORT: u16 = 8766;

/// What one sandboxed call may use by default: enough for pipelines and scripts, little
/// enough that a phone carries several at once.
pub const DEFAULT_SANDBOX_MAX_PROCESSES: u32 = 256;
pub const DEFAULT_SANDBOX_MEMORY_MIB: u64 = 512;
pub const DEFAULT_SANDBOX_CPU_SECS: u64 = 300;
pub(super) const SANDBOX_MAX_PROCESSES_RANGE: std::ops::RangeInclusive<u64> = 8..=4096;
pub(super) const SANDBOX_MEMORY_MIB_RANGE: std::ops::RangeInclusive<u64> = 16..=65536;
pub(super) const SANDBOX_CPU_SECS_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;
pub(super) const SANDBOX_TOTAL_MEMORY_MIB_RANGE: std::ops::RangeInclusive<u64> = 64..=1_048_576;
pub(super) const SANDBOX_TOTAL_PROCESSES_RANGE: std::ops::RangeInclusive<u64> = 16..=4_194_304;
/// Where `sandbox_total_memory_mib` is absent: half the device's memory, within these.
const SANDBOX_TOTAL_MEMORY_DEFAULT_MIB: std::ops::RangeInclusive<u64> = 256..=16_384;
/// `sandbox_total_memory_mib` when absent and the device's memory is unknown.
const DEFAULT_SANDBOX_TOTAL_MEMORY_MIB_UNKNOWN: u64 = 2048;
/// Where `sandbox_total_processes` is absent: an eighth of `pid_max`, within these.
const SANDBOX_TOTAL_PROCESSES_DEFAULT: std::ops::RangeInclusive<u64> = 256..=4096;
/// `sandbox_total_processes` when absent and `pid_max` is unknown.
const DEFAULT_SANDBOX_TOTAL_PROCESSES_UNKNOWN: u32 = 4096;

/// The device's memory (`MemTotal` of `/proc/meminfo`), in bytes.
pub fn device_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_field(&meminfo, "MemTotal:")
}

/// A `<name> <n> kB` field of a `/proc/meminfo` text, in bytes.
pub fn meminfo_field(meminfo: &str, name: &str) -> Option<u64> {
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The kernel's largest pid (`/proc/sys/kernel/pid_max`).
pub fn device_pid_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Default `[model]` values (the example configuration).
pub const DEFAULT_MODEL_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL_API_KEY_ENV: &str = "OPENAI_API_KEY";
pub const DEFAULT_MODEL_MAX_STEPS: u32 = 24;
pub const MAX_MODEL_MAX_STEPS: u32 = 200;
pub const DEFAULT_MODEL_REQUEST_TIMEOUT_SECS: u64 = 120;
pub const MAX_MODEL_REQUEST_TIMEOUT_SECS: u64 = 600;

impl Config {
    /// The port to listen on: the configured one, else 8765. 0 means "any free port".
    pub fn service_port(&self) -> u16 {
        self.protocol_service_port.unwrap_or(DEFAULT_PROTOCOL_PORT)
    }

    /// The Web console's bind address as written (checked at startup), else loopback.
    pub fn web_host(&self) -> &str {
        self.web_host.as_deref().unwrap_or(DEFAULT_WEB_HOST)
    }

    /// The Web console's port: the configured one, else 8766. 0 means "any free port".
    pub fn web_port(&self) -> u16 {
        self.web_port.unwrap_or(DEFAULT_WEB_PORT)
    }

    /// Whether pending approvals post Android notifications.
    pub fn approval_notifications(&self) -> bool {
        self.approval_notifications.unwrap_or(true)
    }

    /// What each sandboxed call may use, defaults applied.
    pub fn sandbox_limits(&self) -> crate::channels::SandboxLimits {
        crate::channels::SandboxLimits {
            processes: self
                .sandbox_max_processes
                .unwrap_or(DEFAULT_SANDBOX_MAX_PROCESSES),
            memory_bytes: self
                .sandbox_memory_mib
                .unwrap_or(DEFAULT_SANDBOX_MEMORY_MIB)
                .saturating_mul(1024 * 1024),
            cpu_secs: self.sandbox_cpu_secs.unwrap_or(DEFAULT_SANDBOX_CPU_SECS),
        }
    }

    /// What all sandboxed calls together may use on this device: [`Config::sandbox_ceiling_for`]
    /// with the device's memory (`/proc/meminfo`) and `pid_max`.
    pub fn sandbox_ceiling(&self) -> crate::channels::SandboxCeiling {
        self.sandbox_ceiling_for(device_memory_bytes(), device_pid_max())
    }

    /// What all sandboxed calls together may use on a device with `mem_total` bytes of
    /// memory and `pid_max` (`None`: unknown). Defaults: half the memory, from 256 MiB to
    /// 16 GiB (2 GiB where unknown); an eighth of `pid_max`, from 256 to 4096 (4096 where
    /// unknown). A configured value beyond what the device has is taken as all of it.
    pub fn sandbox_ceiling_for(
        &self,
        mem_total: Option<u64>,
        pid_max: Option<u64>,
    ) -> crate::channels::SandboxCeiling {
        const MIB: u64 = 1024 * 1024;
        let memory_mib = self.sandbox_total_memory_mib.unwrap_or_else(|| {
            mem_total.map_or(DEFAULT_SANDBOX_TOTAL_MEMORY_MIB_UNKNOWN, |total| {
                (total / MIB / 2).clamp(
                    *SANDBOX_TOTAL_MEMORY_DEFAULT_MIB.start(),
                    *SANDBOX_TOTAL_MEMORY_DEFAULT_MIB.end(),
                )
            })
        });
        let mut memory_bytes = memory_mib.saturating_mul(MIB);
        if let Some(total) = mem_total.filter(|t| *t > 0) {
            memory_bytes = memory_bytes.min(total);
        }
        let processes = self.sandbox_total_processes.map_or_else(
            || {
                pid_max.map_or(DEFAULT_SANDBOX_TOTAL_PROCESSES_UNKNOWN, |max| {
                    (max / 8).clamp(
                        *SANDBOX_TOTAL_PROCESSES_DEFAULT.start(),
                        *SANDBOX_TOTAL_PROCESSES_DEFAULT.end(),
                    ) as u32
                })
            },
            |configured| {
                pid_max.filter(|m| *m > 0).map_or(configured, |m| {
                    configured.min(m.min(u64::from(u32::MAX)) as u32)
                })
            },
        );
        crate::channels::SandboxCeiling {
            memory_bytes,
            processes,
        }
    }

    /// How long a pending approval waits: `approval_timeout_secs`, never longer than
    /// [`APPROVAL_TIMEOUT`] whatever a running reader let through.
    pub fn approval_timeout(&self) -> Duration {
        self.approval_timeout_secs.map_or(APPROVAL_TIMEOUT, |secs| {
            Duration::from_secs(secs).min(APPROVAL_TIMEOUT)
        })
    }
}

impl ModelConfig {
    pub fn base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or(DEFAULT_MODEL_BASE_URL)
    }
    pub fn api_key_env(&self) -> &str {
        self.api_key_env
            .as_deref()
            .unwrap_or(DEFAULT_MODEL_API_KEY_ENV)
    }
    pub fn max_steps(&self) -> u32 {
        self.max_steps.unwrap_or(DEFAULT_MODEL_MAX_STEPS)
    }
    pub fn request_timeout_secs(&self) -> u64 {
        self.request_timeout_secs
            .unwrap_or(DEFAULT_MODEL_REQUEST_TIMEOUT_SECS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::parse;
    use std::path::Path;

    #[test]
    fn the_sandboxes_ceiling_is_sized_from_the_device() {
        const MIB: u64 = 1024 * 1024;
        let err = |text: &str| parse(Path::new("c.toml"), text).unwrap_err().to_string();
        let c = parse(Path::new("c.toml"), "").unwrap();
        // Half the memory; an eighth of pid_max.
        let phone = c.sandbox_ceiling_for(Some(8 << 30), Some(32768));
        assert_eq!((phone.memory_bytes, phone.processes), (4 << 30, 4096));
        // Within bounds, whatever the device.
        let small = c.sandbox_ceiling_for(Some(300 * MIB), Some(1024));
        assert_eq!((small.memory_bytes, small.processes), (256 * MIB, 256));
        let large = c.sandbox_ceiling_for(Some(1 << 40), Some(4_194_304));
        assert_eq!((large.memory_bytes, large.processes), (16 << 30, 4096));
        let unknown = c.sandbox_ceiling_for(None, None);
        assert_eq!((unknown.memory_bytes, unknown.processes), (2 << 30, 4096));
        // Configured: as written, but never more than the device has.
        let c = parse(
            Path::new("c.toml"),
            "sandbox_total_memory_mib = 300\nsandbox_total_processes = 100\n",
        )
        .unwrap();
        let set = c.sandbox_ceiling_for(Some(8 << 30), Some(32768));
        assert_eq!((set.memory_bytes, set.processes), (300 * MIB, 100));
        let c = parse(Path::new("c.toml"), "sandbox_total_memory_mib = 65536\n").unwrap();
        assert_eq!(
            c.sandbox_ceiling_for(Some(8 << 30), None).memory_bytes,
            8 << 30
        );
        assert!(err("sandbox_total_memory_mib = 10\n").contains("between 64 and 1048576"));
        assert!(err("sandbox_total_processes = 0\n").contains("between 16 and 4194304"));
        assert_eq!(
            meminfo_field(
                "MemTotal:       24000 kB\nMemAvailable: 12 kB\n",
                "MemAvailable:"
            ),
            Some(12 * 1024)
        );
    }
}
