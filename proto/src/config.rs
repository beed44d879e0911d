//! The configuration file's schema, in one place for the supervisor (which reads it once at
//! startup) and approvald (which re-reads it for every decision, so an edit applies to the
//! next call without a restart): the keys, their types and defaults, the bounded read of
//! the file, and the one parse, whose errors name the file, the line and the key.
//!
//! Every key is optional. Invalid TOML, a value of the wrong type or out of range, and an
//! invalid `[[approval_grants]]` table are errors in both [`ParseMode`]s. The modes differ
//! only in what a file edited after startup may do:
//!
//! * [`ParseMode::Startup`] (the supervisor) refuses unknown top-level keys and an
//!   `approval_timeout_secs` above the limit, so the owner hears of a typo at once;
//! * [`ParseMode::Running`] (approvald, per decision) ignores unknown top-level keys — the
//!   running tree is the build that started, and a key a newer build on disk knows must
//!   not refuse every decision until a restart — and reads a longer timeout as the limit,
//!   which only shortens the wait.
//!
//! The retired top-level `bridge_auto_approve` is accepted with any value and ignored (it
//! never enables `protocol_auto_approve`). A grant's retired `action_prefix` is an error in
//! both modes: ignoring it would widen the grant, and a prefix of a shell line covers
//! whatever follows it. Reading never modifies the file. Messages carry
//! the parser's message without the source excerpt, so a value such as the protocol token
//! never reaches a log line or an audit row.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use crate::channels::{CallOrigin, RiskLevel};
use crate::limits::APPROVAL_TIMEOUT;
use crate::state_layout;

pub use crate::argv_pattern::{ArgvPattern, PatternError};
pub use crate::state_layout::service_dir;

/// The tool whose actions are command lines: its grants name the commands they cover.
pub const SHELL_TOOL: &str = "shell.exec";

/// Largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
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

/// What a key's value is, as `nl2sh config get/set` reads and writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Bool,
    Integer,
    Text,
    /// A string that is never printed nor taken from the command line.
    Credential,
    /// `approval_grants`: a TOML array of tables.
    Grants,
    /// `model`: its keys are set one by one ([`MODEL_KEYS`]).
    Table,
}

/// One key of the file: the one list of them, which [`Config`] and [`ModelConfig`] match
/// field for field (a test checks it) and `nl2sh config` edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub kind: KeyKind,
    /// approvald re-reads it for every decision, so a running service uses it at once.
    pub live: bool,
}

const fn key(name: &'static str, kind: KeyKind, live: bool) -> Key {
    Key { name, kind, live }
}

/// Top-level keys a user may write, in the order error messages list them. The retired
/// `bridge_auto_approve` is deliberately absent: it is tolerated, not offered.
pub const KEYS: &[Key] = &[
    key("protocol_token", KeyKind::Credential, false),
    key("protocol_auto_approve", KeyKind::Bool, true),
    key("protocol_start_with_service", KeyKind::Bool, false),
    key("protocol_service_port", KeyKind::Integer, false),
    key("state_dir", KeyKind::Text, false),
    key("netd_uid", KeyKind::Integer, false),
    key("netd_gid", KeyKind::Integer, false),
    key("sandbox_uid_base", KeyKind::Integer, false),
    key("sandbox_uid_count", KeyKind::Integer, false),
    key("sandbox_max_processes", KeyKind::Integer, false),
    key("sandbox_memory_mib", KeyKind::Integer, false),
    key("sandbox_cpu_secs", KeyKind::Integer, false),
    key("sandbox_total_memory_mib", KeyKind::Integer, false),
    key("sandbox_total_processes", KeyKind::Integer, false),
    key("approval_policy", KeyKind::Text, true),
    key("approval_timeout_secs", KeyKind::Integer, true),
    key("approval_grants", KeyKind::Grants, true),
    key("audit_max_rows", KeyKind::Integer, true),
    key("audit_max_bytes", KeyKind::Integer, true),
    key("web_host", KeyKind::Text, false),
    key("web_port", KeyKind::Integer, false),
    key("web_allow_insecure_http", KeyKind::Bool, false),
    key("web_uid", KeyKind::Integer, false),
    key("web_gid", KeyKind::Integer, false),
    key("approval_notifications", KeyKind::Bool, true),
    key("model", KeyKind::Table, false),
];

/// The keys of the `[model]` table.
pub const MODEL_KEYS: &[Key] = &[
    key("base_url", KeyKind::Text, false),
    key("model", KeyKind::Text, false),
    key("api_key_env", KeyKind::Text, false),
    key("api_key", KeyKind::Credential, false),
    key("max_steps", KeyKind::Integer, false),
    key("request_timeout_secs", KeyKind::Integer, false),
];

/// Whether `name` is one of [`KEYS`].
fn is_known_key(name: &str) -> bool {
    KEYS.iter().any(|k| k.name == name)
}

/// Top-level keys accepted with any value and ignored.
const RETIRED_KEYS: &[&str] = &["bridge_auto_approve"];

/// Keys whose meaning changed: refused at startup with the replacement named (ignored
/// while running, like any key this build does not know).
const REPLACED_KEYS: &[(&str, &str)] = &[
    (
        "sandbox_uid",
        "`sandbox_uid` is retired: each sandboxed call now runs as a uid of its own, taken \
         from the range `sandbox_uid_base` .. + `sandbox_uid_count` (gid = uid); remove it, \
         or set `sandbox_uid_base` to a range nothing else on the device uses",
    ),
    (
        "sandbox_gid",
        "`sandbox_gid` is retired: each sandboxed call's gid equals its uid, from the range \
         `sandbox_uid_base` .. + `sandbox_uid_count`; remove it",
    ),
];

/// Who reads the file, and so how strict the parse is (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseMode {
    /// The supervisor at startup: the whole file must be right.
    Startup,
    /// approvald before a decision: tolerant only where tolerance cannot loosen anything.
    Running,
}

/// The parsed configuration. Absent keys take the defaults of [`Config::default`] and the
/// accessors below.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Fixed protocol token; empty means "generate one on each start".
    pub protocol_token: Option<String>,
    /// Approve every protocol request without asking. Off unless set explicitly.
    pub protocol_auto_approve: bool,
    /// Start MCP/A2A together with the managed TUI/Web service.
    pub protocol_start_with_service: bool,
    /// Listening port; 0 asks for any free port. See [`Config::service_port`].
    pub protocol_service_port: Option<u16>,
    /// State directory; relative paths are relative to the configuration file's directory.
    pub state_dir: Option<PathBuf>,
    /// Unprivileged uid for netd (default: [`default_netd_ids`]).
    pub netd_uid: Option<u32>,
    /// Unprivileged gid for netd (default: [`default_netd_ids`]).
    pub netd_gid: Option<u32>,
    /// First uid of the range sandboxed calls run as, one uid (and gid) per concurrent
    /// call (default [`DEFAULT_SANDBOX_UID_BASE`]).
    pub sandbox_uid_base: Option<u32>,
    /// How many uids the range holds: the most sandboxed calls running at once (default
    /// [`DEFAULT_SANDBOX_UID_COUNT`], at most [`MAX_SANDBOX_UID_COUNT`]).
    pub sandbox_uid_count: Option<u32>,
    /// Processes one sandboxed call may have at once (default
    /// [`DEFAULT_SANDBOX_MAX_PROCESSES`]).
    pub sandbox_max_processes: Option<u32>,
    /// Memory (data: heap and private mappings) of each process of a sandboxed call, in
    /// MiB (default [`DEFAULT_SANDBOX_MEMORY_MIB`]).
    pub sandbox_memory_mib: Option<u64>,
    /// CPU seconds of each process of a sandboxed call (default
    /// [`DEFAULT_SANDBOX_CPU_SECS`]).
    pub sandbox_cpu_secs: Option<u64>,
    /// Memory all sandboxed calls together may use, in MiB: the sandboxes' shared
    /// ceiling (default half the device's memory, see [`Config::sandbox_ceiling_for`]).
    pub sandbox_total_memory_mib: Option<u64>,
    /// Processes all sandboxed calls together may have at once (default an eighth of
    /// the kernel's `pid_max`, see [`Config::sandbox_ceiling_for`]).
    pub sandbox_total_processes: Option<u32>,
    /// Which actions ask for local approval (default `balanced`; remote callers get at
    /// least `balanced`).
    pub approval_policy: Option<ApprovalPolicy>,
    /// Seconds a pending approval waits (1–120; it can only be shortened). See
    /// [`Config::approval_timeout`].
    pub approval_timeout_secs: Option<u64>,
    /// Scoped grants that pre-approve matching actions (never root, dangerous or
    /// critical ones).
    pub approval_grants: Vec<ApprovalGrant>,
    /// Audit rows kept at most (at least [`MIN_AUDIT_MAX_ROWS`], default
    /// [`DEFAULT_AUDIT_MAX_ROWS`]); approvald prunes the oldest beyond it.
    pub audit_max_rows: Option<u64>,
    /// Bytes the audit database and its WAL take at most (at least
    /// [`MIN_AUDIT_MAX_BYTES`], default [`DEFAULT_AUDIT_MAX_BYTES`]).
    pub audit_max_bytes: Option<u64>,
    /// Address the Web console listens on (default [`DEFAULT_WEB_HOST`], loopback).
    pub web_host: Option<String>,
    /// The Web console's port (default [`DEFAULT_WEB_PORT`]; 0 asks for any free port).
    pub web_port: Option<u16>,
    /// Allow a Web console listener that is not loopback over plain HTTP (off: the
    /// owner's session cookie would cross the network in clear).
    pub web_allow_insecure_http: bool,
    /// Unprivileged uid of the Web console (default [`default_web_ids`]).
    pub web_uid: Option<u32>,
    /// Unprivileged gid of the Web console (default [`default_web_ids`]).
    pub web_gid: Option<u32>,
    /// On Android, post a notification for each pending approval (default on).
    pub approval_notifications: Option<bool>,
    /// The built-in Agent's model (`[model]`); without it delegated tasks fail.
    pub model: Option<ModelConfig>,
    /// Retired; accepted with any TOML type and ignored.
    #[serde(rename = "bridge_auto_approve")]
    retired_bridge_auto_approve: Option<IgnoredAny>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field(
                "protocol_token",
                &self.protocol_token.as_ref().map(|_| "<redacted>"),
            )
            .field("protocol_auto_approve", &self.protocol_auto_approve)
            .field(
                "protocol_start_with_service",
                &self.protocol_start_with_service,
            )
            .field("protocol_service_port", &self.protocol_service_port)
            .field("state_dir", &self.state_dir)
            .field("netd_uid", &self.netd_uid)
            .field("netd_gid", &self.netd_gid)
            .field("sandbox_uid_base", &self.sandbox_uid_base)
            .field("sandbox_uid_count", &self.sandbox_uid_count)
            .field("sandbox_max_processes", &self.sandbox_max_processes)
            .field("sandbox_memory_mib", &self.sandbox_memory_mib)
            .field("sandbox_cpu_secs", &self.sandbox_cpu_secs)
            .field("sandbox_total_memory_mib", &self.sandbox_total_memory_mib)
            .field("sandbox_total_processes", &self.sandbox_total_processes)
            .field("approval_policy", &self.approval_policy)
            .field("approval_timeout_secs", &self.approval_timeout_secs)
            .field("approval_grants", &self.approval_grants)
            .field("audit_max_rows", &self.audit_max_rows)
            .field("audit_max_bytes", &self.audit_max_bytes)
            .field("web_host", &self.web_host)
            .field("web_port", &self.web_port)
            .field("web_allow_insecure_http", &self.web_allow_insecure_http)
            .field("web_uid", &self.web_uid)
            .field("web_gid", &self.web_gid)
            .field("approval_notifications", &self.approval_notifications)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The port to listen on: the configured one, else 8765. 0 means "any free port".
    pub fn service_port(&self) -> u16 {
        self.protocol_service_port.unwrap_or(DEFAULT_PROTOCOL_PORT)
    }

    /// Whether the file still carries the retired `bridge_auto_approve` key (worth a
    /// one-line notice at startup; its value is never looked at).
    pub fn has_retired_bridge_auto_approve(&self) -> bool {
        self.retired_bridge_auto_approve.is_some()
    }

    /// (uid, gid, supplementary groups) for netd: the platform defaults with the
    /// `netd_uid` / `netd_gid` overrides applied.
    pub fn netd_ids(&self) -> (u32, u32, Vec<u32>) {
        let (uid, gid, groups) = default_netd_ids();
        (
            self.netd_uid.unwrap_or(uid),
            self.netd_gid.unwrap_or(gid),
            groups,
        )
    }

    /// (uid, gid) of the Web console, defaults applied.
    pub fn web_ids(&self) -> (u32, u32) {
        let (uid, gid) = default_web_ids();
        (self.web_uid.unwrap_or(uid), self.web_gid.unwrap_or(gid))
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

    /// (first uid, count) of the sandbox's uid range, defaults applied.
    pub fn sandbox_uids(&self) -> (u32, u32) {
        (
            self.sandbox_uid_base.unwrap_or(DEFAULT_SANDBOX_UID_BASE),
            self.sandbox_uid_count.unwrap_or(DEFAULT_SANDBOX_UID_COUNT),
        )
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

    /// Checks serde cannot express: `Err((byte offset of the offending key, message))`.
    fn validate(&self, mode: ParseMode, layout: &Layout) -> Result<(), (Option<usize>, String)> {
        let at = |key: &str| layout.key_at(key);
        for (key, value) in [("netd_uid", self.netd_uid), ("netd_gid", self.netd_gid)] {
            if value == Some(0) {
                return Err((
                    at(key),
                    format!(
                        "{key} must not be 0: netd parses network input and never runs as root"
                    ),
                ));
            }
        }
        let (base, count) = self.sandbox_uids();
        if !(1..=MAX_SANDBOX_UID_COUNT).contains(&count) {
            return Err((
                at("sandbox_uid_count"),
                format!("sandbox_uid_count must be between 1 and {MAX_SANDBOX_UID_COUNT}"),
            ));
        }
        let Some(last) = base.checked_add(count - 1).filter(|l| *l < u32::MAX) else {
            return Err((
                at("sandbox_uid_base"),
                "sandbox_uid_base + sandbox_uid_count goes past the largest uid".into(),
            ));
        };
        if base < MIN_SANDBOX_UID_BASE {
            return Err((
                at("sandbox_uid_base"),
                format!(
                    "sandbox_uid_base must be at least {MIN_SANDBOX_UID_BASE}: below it are \
                     root, system users and (on Android) the platform's and apps' uids, \
                     which services trust or files belong to"
                ),
            ));
        }
        for (key, value, range) in [
            (
                "sandbox_max_processes",
                self.sandbox_max_processes.map(u64::from),
                SANDBOX_MAX_PROCESSES_RANGE,
            ),
            (
                "sandbox_memory_mib",
                self.sandbox_memory_mib,
                SANDBOX_MEMORY_MIB_RANGE,
            ),
            (
                "sandbox_cpu_secs",
                self.sandbox_cpu_secs,
                SANDBOX_CPU_SECS_RANGE,
            ),
            (
                "sandbox_total_memory_mib",
                self.sandbox_total_memory_mib,
                SANDBOX_TOTAL_MEMORY_MIB_RANGE,
            ),
            (
                "sandbox_total_processes",
                self.sandbox_total_processes.map(u64::from),
                SANDBOX_TOTAL_PROCESSES_RANGE,
            ),
        ] {
            if value.is_some_and(|v| !range.contains(&v)) {
                return Err((
                    at(key),
                    format!(
                        "{key} must be between {} and {}",
                        range.start(),
                        range.end()
                    ),
                ));
            }
        }
        let (netd_uid, netd_gid, _) = self.netd_ids();
        for (key, id) in [("netd_uid", netd_uid), ("netd_gid", netd_gid)] {
            if (base..=last).contains(&id) {
                return Err((
                    at(key).or(at("sandbox_uid_base")),
                    format!(
                        "{key} {id} lies in the sandbox's uid range {base}..={last}: netd \
                         must never share an identity with a sandboxed command"
                    ),
                ));
            }
        }
        let (web_uid, web_gid) = self.web_ids();
        for (key, id) in [("web_uid", web_uid), ("web_gid", web_gid)] {
            let why = if id == 0 {
                "must not be 0: the Web console parses network input and never runs as root"
                    .to_owned()
            } else if (base..=last).contains(&id) {
                format!("lies in the sandbox's uid range {base}..={last}")
            } else if id == netd_uid || id == netd_gid {
                "is netd's: the Web console and netd each have an identity of their own".into()
            } else {
                continue;
            };
            return Err((at(key), format!("{key} {id} {why}")));
        }
        if let Some(host) = &self.web_host {
            if host.parse::<std::net::IpAddr>().is_err() {
                return Err((
                    at("web_host"),
                    format!("web_host {host:?} is not an IP address"),
                ));
            }
        }
        if self
            .state_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err((at("state_dir"), "state_dir must not be empty".into()));
        }
        if let Some(secs) = self.approval_timeout_secs {
            let max = APPROVAL_TIMEOUT.as_secs();
            // A running reader reads a longer value as the limit (approval_timeout).
            let too_long = mode == ParseMode::Startup && secs > max;
            if secs < 1 || too_long {
                return Err((
                    at("approval_timeout_secs"),
                    format!(
                        "approval_timeout_secs must be between 1 and {max} (it can only shorten the wait)"
                    ),
                ));
            }
        }
        for (key, value, min, why) in [
            (
                "audit_max_rows",
                self.audit_max_rows,
                MIN_AUDIT_MAX_ROWS,
                "the audit trail always keeps at least the last 500 calls",
            ),
            (
                "audit_max_bytes",
                self.audit_max_bytes,
                MIN_AUDIT_MAX_BYTES,
                "the audit database needs room for its WAL and its largest rows",
            ),
        ] {
            if value.is_some_and(|v| v < min) {
                return Err((at(key), format!("{key} must be at least {min} ({why})")));
            }
        }
        if let Some(model) = &self.model {
            model.validate().map_err(|message| (at("model"), message))?;
        }
        for (i, grant) in self.approval_grants.iter().enumerate() {
            let layout = layout.grants.get(i);
            let at = |key: &str| layout.and_then(|g| g.key_at(key).or(Some(g.extent.start)));
            grant.validate().map_err(|(key, message)| {
                (at(key), format!("approval grant {}: {message}", i + 1))
            })?;
        }
        Ok(())
    }
}

/// (uid, gid, supplementary groups) for netd: Android AID_NOBODY with AID_INET (3003) so
/// paranoid networking still lets it use IP sockets; elsewhere `nobody`.
pub fn default_netd_ids() -> (u32, u32, Vec<u32>) {
    netd_ids_for(crate::platform::is_android())
}

fn netd_ids_for(android: bool) -> (u32, u32, Vec<u32>) {
    if android {
        (9999, 9999, vec![3003])
    } else {
        (65534, 65534, Vec::new())
    }
}

/// The Web console's bind address by default: loopback only.
pub const DEFAULT_WEB_HOST: &str = "127.0.0.1";
/// The Web console's port by default (the protocols' is [`DEFAULT_PROTOCOL_PORT`]).
pub const DEFAULT_WEB_PORT: u16 = 8766;

/// (uid, gid) of the Web console by default: the uid just below the sandbox's default
/// range, in the same unassigned region (see [`DEFAULT_SANDBOX_UID_BASE`]), so it is
/// neither netd's, nor a sandboxed call's, nor any user's or app's.
pub fn default_web_ids() -> (u32, u32) {
    (DEFAULT_SANDBOX_UID_BASE - 1, DEFAULT_SANDBOX_UID_BASE - 1)
}

/// First uid of the sandbox's range by default, on Linux and Android alike: 0x9000_0000.
/// Nothing allocates there: systemd leaves uids from 2^31 up unassigned (its container
/// and foreign ranges end below), and an Android uid is `user id × 100000 + app id` with
/// user ids of at most 21473, so every Android uid is below 2,147,400,000.
pub const DEFAULT_SANDBOX_UID_BASE: u32 = 0x9000_0000;
/// Uids in the range by default: sandboxed calls that may run at once.
pub const DEFAULT_SANDBOX_UID_COUNT: u32 = 64;
pub const MAX_SANDBOX_UID_COUNT: u32 = 65536;
/// What one sandboxed call may use by default: enough for pipelines and scripts, little
/// enough that a phone carries several at once.
pub const DEFAULT_SANDBOX_MAX_PROCESSES: u32 = 256;
pub const DEFAULT_SANDBOX_MEMORY_MIB: u64 = 512;
pub const DEFAULT_SANDBOX_CPU_SECS: u64 = 300;
const SANDBOX_MAX_PROCESSES_RANGE: std::ops::RangeInclusive<u64> = 8..=4096;
const SANDBOX_MEMORY_MIB_RANGE: std::ops::RangeInclusive<u64> = 16..=65536;
const SANDBOX_CPU_SECS_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;
const SANDBOX_TOTAL_MEMORY_MIB_RANGE: std::ops::RangeInclusive<u64> = 64..=1_048_576;
const SANDBOX_TOTAL_PROCESSES_RANGE: std::ops::RangeInclusive<u64> = 16..=4_194_304;
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
/// The lowest allowed base: above Linux's regular users (60000) and Android's per-app
/// range of user 0 (10000–19999) and isolated processes (90000–99999).
pub const MIN_SANDBOX_UID_BASE: u32 = 100_000;

/// `approval_policy`: which actions ask for a local decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    /// Asks only for dangerous/critical actions and for anything that needs root and is
    /// not read-only.
    Permissive,
    /// Runs read-only actions; asks for every mutation.
    #[default]
    Balanced,
    /// Asks for everything.
    Strict,
}

// What each value means is part of the key's definition, so it lives with it (approvald
// decides with it; a policy snapshot elsewhere would read it the same way).
impl ApprovalPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Permissive => "permissive",
            ApprovalPolicy::Balanced => "balanced",
            ApprovalPolicy::Strict => "strict",
        }
    }

    /// The policy that applies to a call from `origin`: remote callers get at least
    /// `balanced`.
    pub fn for_origin(self, origin: CallOrigin) -> ApprovalPolicy {
        match (self, origin) {
            (ApprovalPolicy::Permissive, origin) if origin.is_remote() => ApprovalPolicy::Balanced,
            (policy, _) => policy,
        }
    }

    /// Whether an action of `risk` (needing root or not) asks for a decision.
    pub fn asks(self, risk: RiskLevel, requires_root: bool) -> bool {
        let mutation = risk != RiskLevel::ReadOnly;
        match self {
            ApprovalPolicy::Strict => true,
            ApprovalPolicy::Balanced => mutation,
            ApprovalPolicy::Permissive => {
                risk >= RiskLevel::Dangerous || (requires_root && mutation)
            }
        }
    }
}

/// Default `[model]` values (the issue's example configuration).
pub const DEFAULT_MODEL_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL_API_KEY_ENV: &str = "OPENAI_API_KEY";
pub const DEFAULT_MODEL_MAX_STEPS: u32 = 24;
pub const MAX_MODEL_MAX_STEPS: u32 = 200;
pub const DEFAULT_MODEL_REQUEST_TIMEOUT_SECS: u64 = 120;
pub const MAX_MODEL_REQUEST_TIMEOUT_SECS: u64 = 600;

/// `[model]`: an OpenAI-compatible Chat Completions endpoint for the built-in Agent.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Base URL, `http(s)://host[:port]/path` (default [`DEFAULT_MODEL_BASE_URL`]).
    pub base_url: Option<String>,
    /// Model name (required).
    pub model: String,
    /// Environment variable of the supervisor holding the key (default
    /// [`DEFAULT_MODEL_API_KEY_ENV`]); ignored when `api_key` is set.
    pub api_key_env: Option<String>,
    /// The key itself; the file must then be private (0600).
    pub api_key: Option<String>,
    /// Model turns per task (1–[`MAX_MODEL_MAX_STEPS`], default 24).
    pub max_steps: Option<u32>,
    /// Seconds one model request may take (1–[`MAX_MODEL_REQUEST_TIMEOUT_SECS`], default 120).
    pub request_timeout_secs: Option<u64>,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_steps", &self.max_steps)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .finish()
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

    fn validate(&self) -> Result<(), String> {
        let url = self.base_url();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        match rest {
            Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {}
            _ => {
                return Err(format!(
                    "model.base_url must be an http:// or https:// URL with a host, got {url:?}"
                ))
            }
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("model.base_url must not contain spaces or control characters".into());
        }
        if self.model.trim().is_empty() {
            return Err("model.model must name the model (for example \"gpt-4.1-mini\")".into());
        }
        if self.api_key_env.as_deref().is_some_and(str::is_empty) {
            return Err("model.api_key_env must not be empty".into());
        }
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            return Err(
                "model.api_key must not be empty (or leave it out and use api_key_env)".into(),
            );
        }
        if !(1..=MAX_MODEL_MAX_STEPS).contains(&self.max_steps()) {
            return Err(format!(
                "model.max_steps must be between 1 and {MAX_MODEL_MAX_STEPS}"
            ));
        }
        if !(1..=MAX_MODEL_REQUEST_TIMEOUT_SECS).contains(&self.request_timeout_secs()) {
            return Err(format!(
                "model.request_timeout_secs must be between 1 and {MAX_MODEL_REQUEST_TIMEOUT_SECS}"
            ));
        }
        Ok(())
    }
}

/// The most a grant may cover; `dangerous` and `critical` never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantRisk {
    #[default]
    Low,
    Medium,
    High,
}

impl GrantRisk {
    pub fn level(self) -> RiskLevel {
        match self {
            GrantRisk::Low => RiskLevel::Low,
            GrantRisk::Medium => RiskLevel::Medium,
            GrantRisk::High => RiskLevel::High,
        }
    }
}

/// The callers a grant may be limited to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantOrigin {
    McpHttp,
    McpStdio,
    AgentHttp,
    AgentStdio,
}

impl GrantOrigin {
    pub fn origin(self) -> CallOrigin {
        match self {
            GrantOrigin::McpHttp => CallOrigin::McpHttp,
            GrantOrigin::McpStdio => CallOrigin::McpStdio,
            GrantOrigin::AgentHttp => CallOrigin::AgentHttp,
            GrantOrigin::AgentStdio => CallOrigin::AgentStdio,
        }
    }
}

/// One `[[approval_grants]]` table. Any other key makes the grant invalid, in both modes:
/// a misspelt limit must not widen a grant. Every key given must match (see
/// `nl2sh_approvald::policy::covers` for what a grant covers).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalGrant {
    /// Exact tool name.
    pub tool: String,
    /// Exact action text.
    pub action: Option<String>,
    /// `shell.exec` only: the program and arguments of every command the line runs (but
    /// inert ones such as `sleep 1`).
    pub command: Option<ArgvPattern>,
    /// The highest risk covered (default `low`).
    #[serde(default)]
    pub max_risk: GrantRisk,
    pub origin: Option<GrantOrigin>,
    /// The retired `action_prefix`, with any value: present means refused.
    #[serde(rename = "action_prefix", default, deserialize_with = "present")]
    retired_action_prefix: bool,
}

impl ApprovalGrant {
    /// Checks serde cannot express: `Err((the key at fault, message))`.
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.retired_action_prefix {
            return Err((
                "action_prefix",
                "`action_prefix` is retired: a prefix of a shell line can cover more than it \
                 says (`ls /tmp; touch F` starts with `ls `); use `command = [\"ls\", \"**\"]` \
                 (the program and its arguments) or an exact `action`"
                    .into(),
            ));
        }
        if self.tool.is_empty() {
            return Err(("tool", "`tool` must not be empty".into()));
        }
        if self.command.is_some() && self.tool != SHELL_TOOL {
            return Err((
                "command",
                format!(
                    "`command` applies only to `tool = \"{SHELL_TOOL}\"` (other tools' actions \
                     are not command lines; name them with `action`)"
                ),
            ));
        }
        if self.tool == SHELL_TOOL && self.command.is_none() && self.action.is_none() {
            return Err((
                "tool",
                format!(
                    "a `{SHELL_TOOL}` grant must say which commands it covers: \
                     `command = [\"ls\", \"**\"]` (the program and its arguments) or an exact \
                     `action`; by tool alone it would run any command line the assessment \
                     rates low enough"
                ),
            ));
        }
        Ok(())
    }
}

/// `true` for a key that is there, whatever its value.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// Why a configuration could not be read. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {} does not exist", .path.display())]
    Missing { path: PathBuf },
    #[error("cannot read configuration file {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("configuration file {} is not a regular file", .path.display())]
    NotRegularFile { path: PathBuf },
    #[error(
        "configuration file {} is too large ({size} bytes; the limit is {MAX_CONFIG_BYTES})",
        .path.display()
    )]
    TooLarge { path: PathBuf, size: u64 },
    #[error("configuration file {} is not valid UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    #[error("{}{}: {message}", .path.display(), line_suffix(*.line))]
    Invalid {
        path: PathBuf,
        /// 1-based line of the offending text, when known.
        line: Option<usize>,
        message: String,
    },
}

impl ConfigError {
    /// The same message without the file's path: what a decision's reason may say.
    pub fn detail(&self) -> String {
        match self {
            ConfigError::Missing { .. } => "it does not exist".into(),
            ConfigError::Read { source, .. } => format!("cannot read it: {source}"),
            ConfigError::NotRegularFile { .. } => "it is not a regular file".into(),
            ConfigError::TooLarge { size, .. } => {
                format!("it is too large ({size} bytes; the limit is {MAX_CONFIG_BYTES})")
            }
            ConfigError::NotUtf8 { .. } => "it is not valid UTF-8".into(),
            ConfigError::Invalid {
                line: Some(line),
                message,
                ..
            } => format!("line {line}: {message}"),
            ConfigError::Invalid {
                line: None,
                message,
                ..
            } => message.clone(),
        }
    }
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

/// The state directory of the configuration at `config_path`: the `state_dir` key if set
/// (relative to the configuration file's directory), else `<config dir>/<stem>.state`.
/// The one derivation: every command and process for one configuration finds the same
/// directory.
pub fn state_dir(config: &Config, config_path: &Path) -> PathBuf {
    match &config.state_dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => state_layout::config_dir(config_path).join(dir),
        None => state_layout::default_state_dir(config_path),
    }
}

/// Read and parse the file at `path`. A missing file is [`ConfigError::Missing`]; what
/// that means (defaults, or an error) is the caller's choice.
pub fn load(path: &Path, mode: ParseMode) -> Result<Config, ConfigError> {
    let text = read_bounded(path)?;
    parse(path, &text, mode)
}

/// Parse configuration text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str, mode: ParseMode) -> Result<Config, ConfigError> {
    let invalid = |at: Option<usize>, message: String| ConfigError::Invalid {
        path: path.to_owned(),
        line: at.map(|offset| line_at(text, offset)),
        message,
    };
    let mut doc = DeTable::parse(text).map_err(|e| {
        let at = e.span().map(|span| span.start);
        let key = at.and_then(|offset| key_before(text, offset));
        invalid(at, describe_toml_error(e.message(), key, None))
    })?;
    let layout = Layout::of(doc.get_ref());
    if mode == ParseMode::Startup {
        if let Some((key, message)) = REPLACED_KEYS
            .iter()
            .find(|(key, _)| doc.get_ref().get(*key).is_some())
        {
            return Err(invalid(layout.key_at(key), (*message).to_string()));
        }
    }
    if mode == ParseMode::Running {
        let unknown: Vec<String> = doc
            .get_ref()
            .iter()
            .map(|(key, _)| key.get_ref().to_string())
            .filter(|key| !is_known_key(key) && !RETIRED_KEYS.contains(&key.as_str()))
            .collect();
        for key in unknown {
            doc.get_mut().remove(key.as_str());
        }
    }
    let config = Config::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| {
        let at = e.span().map(|span| span.start);
        let key = at.and_then(|offset| key_before(text, offset));
        let grant = at.and_then(|offset| layout.grant_at(offset));
        invalid(at, describe_toml_error(e.message(), key, grant))
    })?;
    config
        .validate(mode, &layout)
        .map_err(|(at, message)| invalid(at, message))?;
    Ok(config)
}

/// Read the file without following it into a FIFO or device and without reading more than
/// the limit.
pub fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    let read_err = |source: io::Error| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK so opening a FIFO does not hang; it has no effect on regular-file reads.
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ConfigError::Missing {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(ConfigError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size: meta.len(),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > MAX_CONFIG_BYTES {
        // The file grew while we read it.
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size: read,
        });
    }
    String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
        path: path.to_owned(),
    })
}

/// Where things are in the text, taken from the parsed document before it is consumed, so
/// a validation error can give a line and an error inside a grant can say which grant.
struct Layout {
    /// Top-level keys with the byte offset of each.
    keys: Vec<(String, usize)>,
    grants: Vec<GrantLayout>,
}

struct GrantLayout {
    /// From the grant's `[[approval_grants]]` header (or `{`) to the end of its last value.
    extent: Range<usize>,
    /// Its keys with the byte offset of each.
    keys: Vec<(String, usize)>,
}

impl GrantLayout {
    fn key_at(&self, key: &str) -> Option<usize> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, at)| *at)
    }
}

impl Layout {
    fn of(doc: &DeTable<'_>) -> Layout {
        let keys = doc
            .iter()
            .map(|(key, _)| (key.get_ref().to_string(), key.span().start))
            .collect();
        let grants = match doc.get("approval_grants").map(|v| v.get_ref()) {
            Some(DeValue::Array(grants)) => grants
                .iter()
                .map(|grant| {
                    // An array-of-tables element's span is only its header: widen it to
                    // its keys and values.
                    let mut extent = grant.span();
                    let mut keys = Vec::new();
                    if let DeValue::Table(table) = grant.get_ref() {
                        for (key, value) in table.iter() {
                            extent.start = extent.start.min(key.span().start);
                            extent.end = extent.end.max(key.span().end).max(value.span().end);
                            keys.push((key.get_ref().to_string(), key.span().start));
                        }
                    }
                    GrantLayout { extent, keys }
                })
                .collect(),
            _ => Vec::new(),
        };
        Layout { keys, grants }
    }

    fn key_at(&self, key: &str) -> Option<usize> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, at)| *at)
    }

    /// The 1-based number of the grant whose text holds byte `offset`.
    fn grant_at(&self, offset: usize) -> Option<usize> {
        self.grants
            .iter()
            .position(|g| g.extent.contains(&offset))
            .map(|i| i + 1)
    }
}

/// 1-based line number of byte offset `offset` in `text` (the line of a parser's error
/// span, for messages that must not quote the text).
pub fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The key assigned just before byte `offset` on its line when `offset` is in its value, so
/// a type or value error can name the field.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset.min(text.len()))?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let (assigned, _) = before.get(line_start..)?.rsplit_once('=')?;
    // Inside an inline table only the last key counts.
    let key = assigned.rsplit(['{', ',']).next()?.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'"'))
    };
    bare(key).then_some(key)
}

/// The message for a parser error. serde's unknown-field message for the top level lists
/// every declared field, including the retired one: list only the keys a user may write.
/// An error inside a grant says which grant; others get the key they concern.
fn describe_toml_error(message: &str, key: Option<&str>, grant: Option<usize>) -> String {
    let message = message.trim_end();
    let names_field =
        message.starts_with("unknown field `") || message.starts_with("missing field `");
    if let Some(n) = grant {
        return match key {
            Some(key) if !names_field => format!("approval grant {n}: `{key}`: {message}"),
            _ => format!("approval grant {n}: {message}"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            let field = &rest[..end];
            let expected = KEYS
                .iter()
                .map(|k| format!("`{}`", k.name))
                .collect::<Vec<_>>()
                .join(", ");
            return format!("unknown field `{field}`, expected one of {expected}");
        }
    }
    match key {
        Some(key) => format!("`{key}`: {message}"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The field names serde knows a struct by: what the file may hold.
    fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
        use serde::de::value::Error;
        use serde::de::{Error as _, Visitor};
        struct Probe<'a>(&'a mut &'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for Probe<'_> {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                *self.0 = fields;
                Err(Error::custom("probed"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                enum identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(Probe(&mut fields));
        fields
    }

    #[test]
    fn state_dir_rules() {
        let mut c = Config::default();
        assert_eq!(
            state_dir(&c, Path::new("/data/adb/nl2sh/config.toml")),
            PathBuf::from("/data/adb/nl2sh/config.state")
        );
        assert_eq!(
            state_dir(&c, Path::new("/tmp/t/other.conf.toml")),
            PathBuf::from("/tmp/t/other.conf.state")
        );
        assert_eq!(
            state_dir(&c, Path::new("config.toml")),
            PathBuf::from("config.state")
        );
        c.state_dir = Some("sub/state".into());
        assert_eq!(
            state_dir(&c, Path::new("/etc/nl2sh/config.toml")),
            PathBuf::from("/etc/nl2sh/sub/state")
        );
        c.state_dir = Some("/var/lib/nl2sh".into());
        assert_eq!(
            state_dir(&c, Path::new("/etc/nl2sh/config.toml")),
            PathBuf::from("/var/lib/nl2sh")
        );
    }

    #[test]
    fn the_key_table_is_the_structs_fields() {
        let mut top: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        top.extend(RETIRED_KEYS);
        assert_eq!(fields_of::<Config>(), top.as_slice());
        let model: Vec<&str> = MODEL_KEYS.iter().map(|k| k.name).collect();
        assert_eq!(fields_of::<ModelConfig>(), model.as_slice());
    }

    /// The supervisor's parse: the whole file must be right.
    fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        super::parse(path, text, ParseMode::Startup)
    }

    /// approvald's parse before a decision.
    fn running(text: &str) -> Result<Config, ConfigError> {
        super::parse(Path::new("c.toml"), text, ParseMode::Running)
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse(Path::new("config.toml"), "").unwrap();
        assert_eq!(c, Config::default());
        assert!(!c.protocol_auto_approve);
        assert!(!c.protocol_start_with_service);
        assert_eq!(c.service_port(), 8765);
        assert_eq!(c.protocol_token, None);
        assert_eq!(c.approval_timeout(), APPROVAL_TIMEOUT);
        assert_eq!(running("").unwrap(), Config::default());
    }

    #[test]
    fn approval_keys_parse_and_are_validated() {
        let text = r#"
approval_policy = "strict"
approval_timeout_secs = 30

[[approval_grants]]
tool = "shell.exec"
command = ["touch", "/tmp/*"]
max_risk = "medium"
origin = "mcp_stdio"
"#;
        let c = parse(Path::new("c.toml"), text).unwrap();
        assert_eq!(c.approval_policy, Some(ApprovalPolicy::Strict));
        assert_eq!(c.approval_timeout_secs, Some(30));
        assert_eq!(c.approval_grants.len(), 1);
        assert_eq!(c.approval_grants[0].max_risk, GrantRisk::Medium);
        assert_eq!(
            c.approval_grants[0].command.as_ref().map(|p| p.to_string()),
            Some(r#"["touch", "/tmp/*"]"#.to_string())
        );
        let bad = [
            ("approval_timeout_secs = 121\n", "approval_timeout_secs", 1),
            ("approval_timeout_secs = 0\n", "approval_timeout_secs", 1),
            ("\napproval_policy = \"lenient\"\n", "lenient", 2),
            (
                "[[approval_grants]]\ntool = \"x\"\nmax_risk = \"critical\"\n",
                "critical",
                3,
            ),
            (
                "[[approval_grants]]\ntool = \"x\"\nrisk = \"low\"\n",
                "risk",
                3,
            ),
            ("[[approval_grants]]\naction = \"x\"\n", "tool", 1),
            (
                "[[approval_grants]]\ntool = \"\"\n",
                "`tool` must not be empty",
                2,
            ),
        ];
        for (text, needle, line) in bad {
            let err = parse(Path::new("c.toml"), text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(err.contains(&format!("c.toml:{line}")), "{text:?}: {err}");
        }
    }

    #[test]
    fn audit_limits_parse_and_are_validated() {
        let c = parse(Path::new("c.toml"), "").unwrap();
        assert_eq!((c.audit_max_rows, c.audit_max_bytes), (None, None));
        let text = "audit_max_rows = 20000\naudit_max_bytes = 8388608\n";
        let c = parse(Path::new("c.toml"), text).unwrap();
        assert_eq!(c.audit_max_rows, Some(20_000));
        assert_eq!(c.audit_max_bytes, Some(8 * 1024 * 1024));
        let c = parse(
            Path::new("c.toml"),
            "audit_max_rows = 1000\naudit_max_bytes = 1048576\n",
        )
        .unwrap();
        assert_eq!(c.audit_max_rows, Some(MIN_AUDIT_MAX_ROWS));
        assert_eq!(c.audit_max_bytes, Some(MIN_AUDIT_MAX_BYTES));
        let bad = [
            (
                "audit_max_rows = 999\n",
                "audit_max_rows must be at least 1000",
                1,
            ),
            (
                "\naudit_max_rows = 0\n",
                "audit_max_rows must be at least",
                2,
            ),
            (
                "\n\naudit_max_bytes = 4096\n",
                "audit_max_bytes must be at least 1048576",
                3,
            ),
            (
                "audit_max_rows = -5\n",
                "`audit_max_rows`: invalid value",
                1,
            ),
            (
                "\naudit_max_bytes = 1.5\n",
                "`audit_max_bytes`: invalid type",
                2,
            ),
            (
                "audit_max_bytes = \"64M\"\n",
                "`audit_max_bytes`: invalid type",
                1,
            ),
        ];
        for (text, needle, line) in bad {
            let err = parse(Path::new("c.toml"), text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(
                err.starts_with(&format!("c.toml:{line}: ")),
                "{text:?}: {err}"
            );
            // The same message while running: one set of rules.
            assert_eq!(running(text).unwrap_err().to_string(), err, "{text:?}");
        }
        // Offered in the unknown-key message.
        let msg = parse(Path::new("c.toml"), "audit_max_row = 1\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`audit_max_rows`, `audit_max_bytes`"), "{msg}");
    }

    #[test]
    fn all_keys_parse() {
        let text = r#"
protocol_token = "abc"
protocol_auto_approve = true
protocol_start_with_service = true
protocol_service_port = 0
state_dir = "st"
netd_uid = 2000
netd_gid = 2001
"#;
        let c = parse(Path::new("c.toml"), text).unwrap();
        assert_eq!(c.protocol_token.as_deref(), Some("abc"));
        assert!(c.protocol_auto_approve);
        assert!(c.protocol_start_with_service);
        assert_eq!(c.service_port(), 0);
        assert_eq!(c.state_dir.as_deref(), Some(Path::new("st")));
        let (uid, gid, _) = c.netd_ids();
        assert_eq!((uid, gid), (2000, 2001));
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let text = "protocol_auto_approve = false\n\nprotcol_token = \"x\"\n";
        let err = parse(Path::new("/etc/x/config.toml"), text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("/etc/x/config.toml:3: unknown field `protcol_token`, expected one of `protocol_token`"),
            "{msg}"
        );
        assert!(!msg.contains("bridge_auto_approve"), "{msg}");
    }

    #[test]
    fn model_section() {
        let ok = parse(
            Path::new("c.toml"),
            "[model]\nmodel = \"gpt-4.1-mini\"\nmax_steps = 3\n",
        )
        .unwrap();
        let model = ok.model.unwrap();
        assert_eq!(model.base_url(), DEFAULT_MODEL_BASE_URL);
        assert_eq!(model.api_key_env(), "OPENAI_API_KEY");
        assert_eq!((model.max_steps(), model.request_timeout_secs()), (3, 120));
        for (text, needle) in [
            ("[model]\nmodel = \"m\"\nkey = 1\n", "unknown field `key`"),
            ("[model]\nmax_steps = 3\n", "missing field `model`"),
            (
                "[model]\nmodel = \"m\"\nmax_steps = 0\n",
                "max_steps must be between 1 and",
            ),
            (
                "[model]\nmodel = \"m\"\nrequest_timeout_secs = 601\n",
                "request_timeout_secs must be between 1 and 600",
            ),
            (
                "[model]\nmodel = \"m\"\nbase_url = \"ftp://x\"\n",
                "model.base_url must be",
            ),
            ("[model]\nmodel = \" \"\n", "model.model must name"),
            (
                "[model]\nmodel = \"m\"\napi_key = \"\"\n",
                "model.api_key must not be empty",
            ),
        ] {
            let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
            assert!(msg.contains(needle), "{text:?}: {msg}");
        }
        let msg = parse(
            Path::new("c.toml"),
            "[model]\nmodel = \"m\"\napi_key = \"sk-secret-value\"\nmax_steps = 0\n",
        )
        .unwrap_err()
        .to_string();
        assert!(!msg.contains("sk-secret-value"), "{msg}");
        let debug = format!(
            "{:?}",
            parse(
                Path::new("c.toml"),
                "[model]\nmodel = \"m\"\napi_key = \"sk-secret-value\"\n"
            )
            .unwrap()
        );
        assert!(!debug.contains("sk-secret-value"), "{debug}");
    }

    #[test]
    fn unknown_table_is_rejected() {
        let text = "protocol_service_port = 1\n[agent]\nkey = 1\n";
        let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(msg.contains("c.toml:"), "{msg}");
        assert!(msg.contains("unknown field `agent`"), "{msg}");
        // A table after the grants is not blamed on the last grant.
        let text = "[[approval_grants]]\ntool = 'x'\n[agent]\nkey = 1\n";
        let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(msg.starts_with("c.toml:3: unknown field `agent`"), "{msg}");
    }

    #[test]
    fn invalid_toml_has_right_line() {
        let text = "protocol_auto_approve = false\nprotocol_service_port = 8765\nstate_dir = \"unterminated\n";
        let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(msg.starts_with("c.toml:3: "), "{msg}");
    }

    #[test]
    fn wrong_type_has_right_line_and_key() {
        let text = "\n\nprotocol_auto_approve = \"yes\"\n";
        let err = parse(Path::new("c.toml"), text).unwrap_err();
        match &err {
            ConfigError::Invalid { line, .. } => assert_eq!(*line, Some(3)),
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with("c.toml:3: `protocol_auto_approve`: invalid type"),
            "{err}"
        );
        let out_of_range = "protocol_service_port = 70000\n";
        let msg = parse(Path::new("c.toml"), out_of_range)
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("c.toml:1: `protocol_service_port`: "),
            "{msg}"
        );
    }

    #[test]
    fn retired_bridge_auto_approve_is_ignored_with_any_type() {
        for value in ["true", "false", "\"yes\"", "1", "[true]", "{ a = true }"] {
            let text = format!("bridge_auto_approve = {value}\n");
            let c = parse(Path::new("c.toml"), &text).unwrap();
            assert!(!c.protocol_auto_approve, "{value}");
            assert!(c.has_retired_bridge_auto_approve());
            let c = running(&text).unwrap();
            assert!(!c.protocol_auto_approve, "{value}");
        }
        let c = parse(
            Path::new("c.toml"),
            "bridge_auto_approve = true\nprotocol_auto_approve = false\n",
        )
        .unwrap();
        assert!(!c.protocol_auto_approve);
    }

    #[test]
    fn retired_field_only_at_top_level() {
        let msg = parse(Path::new("c.toml"), "[x]\nbridge_auto_approve = true\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("unknown field `x`"), "{msg}");
    }

    #[test]
    fn netd_root_is_refused() {
        let msg = parse(Path::new("c.toml"), "\nnetd_uid = 0\n")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("c.toml:2: netd_uid must not be 0"), "{msg}");
        assert!(parse(Path::new("c.toml"), "netd_gid = 0\n").is_err());
        assert!(parse(Path::new("c.toml"), "state_dir = \"\"\n").is_err());
    }

    #[test]
    fn the_sandbox_uid_range_is_checked() {
        let err = |text: &str| parse(Path::new("c.toml"), text).unwrap_err().to_string();
        let c = parse(Path::new("c.toml"), "").unwrap();
        assert_eq!(
            c.sandbox_uids(),
            (DEFAULT_SANDBOX_UID_BASE, DEFAULT_SANDBOX_UID_COUNT)
        );
        let c = parse(
            Path::new("c.toml"),
            "sandbox_uid_base = 200000\nsandbox_uid_count = 8\n",
        )
        .unwrap();
        assert_eq!(c.sandbox_uids(), (200_000, 8));
        // The retired single identity names its replacement at startup.
        let msg = err("\n\nsandbox_gid = 65534\n");
        assert!(
            msg.starts_with("c.toml:3: `sandbox_gid` is retired")
                && msg.contains("sandbox_uid_base"),
            "{msg}"
        );
        assert!(err("sandbox_uid = 65534\n").contains("sandbox_uid_base"));
        // Running readers ignore it, like any key this build does not know.
        assert!(config_running("sandbox_uid = 65534\n").is_ok());
        let msg = err("\nsandbox_uid_base = 0\n");
        assert!(
            msg.starts_with("c.toml:2: sandbox_uid_base must be at least"),
            "{msg}"
        );
        assert!(err("sandbox_uid_base = 65534\n").contains("at least 100000"));
        assert!(err("sandbox_uid_count = 0\n").contains("between 1 and 65536"));
        assert!(err("sandbox_max_processes = 4\n").contains("between 8 and 4096"));
        assert!(err("sandbox_memory_mib = 0\n").contains("between 16 and 65536"));
        assert!(err("sandbox_cpu_secs = 0\n").contains("between 1 and 3600"));
        let c = parse(
            Path::new("c.toml"),
            "sandbox_max_processes = 64\nsandbox_memory_mib = 100\nsandbox_cpu_secs = 7\n",
        )
        .unwrap();
        let l = c.sandbox_limits();
        assert_eq!(
            (l.processes, l.memory_bytes, l.cpu_secs),
            (64, 100 << 20, 7)
        );
        assert!(err("sandbox_uid_count = 65537\n").contains("between 1 and 65536"));
        assert!(
            err("sandbox_uid_base = 4294967290\nsandbox_uid_count = 8\n")
                .contains("past the largest uid")
        );
        let msg = err("netd_uid = 200003\nsandbox_uid_base = 200000\nsandbox_uid_count = 8\n");
        assert!(
            msg.starts_with("c.toml:1: netd_uid 200003 lies in the sandbox"),
            "{msg}"
        );
    }

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

    fn config_running(text: &str) -> Result<Config, ConfigError> {
        super::parse(Path::new("c.toml"), text, ParseMode::Running)
    }

    #[test]
    fn missing_file_is_its_own_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = dir.join("nope.toml");
        let err = load(&p, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::Missing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn non_regular_and_oversized_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let err = load(dir, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");
        assert_eq!(err.detail(), "it is not a regular file");

        let fifo = dir.join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = load(&fifo, ParseMode::Running).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");

        let big = dir.join("big.toml");
        let f = File::create(&big).unwrap();
        f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let err = load(&big, ParseMode::Startup).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("big.toml"));

        let bad = write(dir, "bad.toml", "");
        std::fs::write(&bad, [0xff, 0xfe, b'\n']).unwrap();
        assert!(matches!(
            load(&bad, ParseMode::Startup).unwrap_err(),
            ConfigError::NotUtf8 { .. }
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_reads_a_real_file_and_never_rewrites_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let text = "protocol_service_port = 9000\nbridge_auto_approve = true\n# comment\n";
        let p = write(dir, "config.toml", text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = std::fs::metadata(&p).unwrap().modified().unwrap();
        assert_eq!(load(&p, ParseMode::Startup).unwrap().service_port(), 9000);
        assert_eq!(load(&p, ParseMode::Running).unwrap().service_port(), 9000);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn netd_defaults_per_platform() {
        assert_eq!(netd_ids_for(true), (9999, 9999, vec![3003]));
        assert_eq!(netd_ids_for(false), (65534, 65534, vec![]));
        let c = Config {
            netd_uid: Some(2000),
            ..Config::default()
        };
        let (uid, gid, groups) = c.netd_ids();
        let (_, dgid, dgroups) = default_netd_ids();
        assert_eq!((uid, gid, groups), (2000, dgid, dgroups));
    }

    #[test]
    fn debug_redacts_token() {
        let c = Config {
            protocol_token: Some("very-secret-token-value-0123456789abcdef".into()),
            ..Config::default()
        };
        assert!(!format!("{c:?}").contains("very-secret"));
    }

    // approvald's reading, before each decision.

    #[test]
    fn running_ignores_unknown_top_level_keys_only() {
        let auto = |text: &str| running(text).map(|c| c.protocol_auto_approve);
        assert!(!auto("").unwrap());
        assert!(auto("protocol_auto_approve = true").unwrap());
        assert!(!auto("protocol_auto_approve = false").unwrap());
        assert!(auto("protocol_token = 'x'\nunknown = 3\nprotocol_auto_approve = true\n").unwrap());
        // The retired key never turns it on.
        assert!(!auto("bridge_auto_approve = true").unwrap());
        // The startup parse refuses what the running one ignores.
        assert!(parse(Path::new("c.toml"), "unknown = 3\n").is_err());
        // Unknown keys inside a grant stay errors: they could be a misspelt limit.
        assert!(running("[[approval_grants]]\ntool = 'a'\nmax_rsik = 'low'\n").is_err());
    }

    #[test]
    fn running_reads_a_longer_timeout_as_the_limit() {
        for (text, timeout) in [
            ("approval_timeout_secs = 5", Duration::from_secs(5)),
            ("approval_timeout_secs = 1", Duration::from_secs(1)),
            ("approval_timeout_secs = 120", APPROVAL_TIMEOUT),
            ("approval_timeout_secs = 9999", APPROVAL_TIMEOUT),
        ] {
            assert_eq!(running(text).unwrap().approval_timeout(), timeout, "{text}");
        }
        assert!(parse(Path::new("c.toml"), "approval_timeout_secs = 9999").is_err());
        for bad in [
            "approval_policy = 'lenient'",
            "approval_policy = 'Balanced'",
            "approval_policy = 1",
            "approval_timeout_secs = 0",
            "approval_timeout_secs = -5",
            "approval_timeout_secs = 1.5",
            "approval_timeout_secs = '60'",
            "approval_grants = 3",
            "[approval_grants]\ntool = 'x'",
        ] {
            assert!(running(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wrong_type_or_bad_toml_is_an_error_without_the_text() {
        let e = running("protocol_token = 'secret-value'\nprotocol_auto_approve = \"yes\"\n")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("c.toml:2: "), "{text}");
        assert!(!text.contains("secret-value"), "{text}");
        assert!(e.detail().starts_with("line 2: "), "{}", e.detail());
        assert!(!e.detail().contains("c.toml"));
        assert!(running("protocol_auto_approve = ").is_err());
    }

    #[test]
    fn invalid_grants_are_errors_naming_the_grant() {
        for (text, needle) in [
            (
                "[[approval_grants]]\ntool = 'a'\n[[approval_grants]]\ntool = 'b'\nextra = 1\n",
                "approval grant 2",
            ),
            ("[[approval_grants]]\naction = 'x'\n", "approval grant 1"),
            ("[[approval_grants]]\ntool = ''\n", "approval grant 1"),
            (
                "[[approval_grants]]\ntool = 'a'\nmax_risk = 'dangerous'\n",
                "approval grant 1",
            ),
            (
                "[[approval_grants]]\ntool = 'a'\nmax_risk = 'critical'\n",
                "approval grant 1",
            ),
            (
                "[[approval_grants]]\ntool = 'a'\norigin = 'a2a'\n",
                "approval grant 1",
            ),
            (
                "approval_grants = [{ tool = 'a' }, { tool = 'b', risk = 1 }]\n",
                "approval grant 2: unknown field `risk`",
            ),
        ] {
            let e = running(text).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
            assert!(e.detail().starts_with("line "), "{text}: {e}");
            assert_eq!(
                parse(Path::new("c.toml"), text).unwrap_err().to_string(),
                e.to_string()
            );
        }
        let e = running("[[approval_grants]]\ntool = 'a'\n\n[[approval_grants]]\ntool = 'b'\nmax_risk = 'critical'\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.toml:6: approval grant 2: `max_risk`: unknown variant `critical`"),
            "{e}"
        );
    }

    #[test]
    fn action_prefix_is_retired_with_the_replacement_named() {
        for value in ["\"/bin/sh -c 'ls \"", "\"\"", "3", "[\"x\"]"] {
            let text = format!(
                "approval_timeout_secs = 5\n\n[[approval_grants]]\ntool = \"shell.exec\"\n\
                 action_prefix = {value}\nmax_risk = \"low\"\n"
            );
            let startup = parse(Path::new("c.toml"), &text).unwrap_err().to_string();
            assert!(
                startup.starts_with(
                    "c.toml:5: approval grant 1: `action_prefix` is retired: a prefix of a \
                     shell line can cover more than it says"
                ),
                "{startup}"
            );
            assert!(
                startup.contains("use `command = [\"ls\", \"**\"]` (the program and its arguments) or an exact `action`"),
                "{startup}"
            );
            // The same while running: a running service never reads it as a wider grant.
            assert_eq!(running(&text).unwrap_err().to_string(), startup);
        }
        // Beside a `command` or an `action` it is refused all the same.
        for with in ["command = ['ls', '**']", "action = 'x'"] {
            let text = format!(
                "[[approval_grants]]\ntool = 'shell.exec'\n{with}\naction_prefix = 'ls '\n"
            );
            let e = running(&text).unwrap_err().to_string();
            assert!(
                e.starts_with("c.toml:4: approval grant 1: `action_prefix` is retired"),
                "{e}"
            );
        }
        let e = running(
            "approval_grants = [{ tool = 'fs.write' }, { tool = 'x', action_prefix = 'a' }]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.toml:1: approval grant 2: `action_prefix` is retired"),
            "{e}"
        );
    }

    #[test]
    fn shell_grants_name_their_commands() {
        // By tool alone a shell grant would let the assessment decide what runs.
        let text = "[[approval_grants]]\ntool = 'fs.write'\n\n[[approval_grants]]\n\
                    tool = 'shell.exec'\nmax_risk = 'high'\n";
        for e in [
            parse(Path::new("c.toml"), text).unwrap_err(),
            running(text).unwrap_err(),
        ] {
            let e = e.to_string();
            assert!(
                e.starts_with(
                    "c.toml:5: approval grant 2: a `shell.exec` grant must say which commands it covers"
                ),
                "{e}"
            );
            assert!(e.contains("`command = [\"ls\", \"**\"]`"), "{e}");
        }
        // `command` is for command lines only.
        let e = running("[[approval_grants]]\ntool = 'fs.write'\ncommand = ['ls']\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "c.toml:3: approval grant 1: `command` applies only to `tool = \"shell.exec\"`"
            ),
            "{e}"
        );
        // What is accepted.
        let c = running(
            "[[approval_grants]]\ntool = 'shell.exec'\naction = \"/bin/sh -c 'ls'\"\n\
             [[approval_grants]]\ntool = 'shell.exec'\ncommand = ['am', 'start', '-n', 'com.example/.Main']\n\
             [[approval_grants]]\ntool = 'shell.exec'\ncommand = [\n  'ls',\n  '**',\n]\naction = 'x'\n\
             [[approval_grants]]\ntool = 'fs.write'\nmax_risk = 'high'\n",
        )
        .unwrap();
        assert_eq!(c.approval_grants.len(), 4);
        assert_eq!(
            c.approval_grants[1]
                .command
                .as_ref()
                .map(ArgvPattern::program),
            Some("am")
        );
    }

    #[test]
    fn bad_command_patterns_are_refused_naming_the_grant_and_line() {
        for (pattern, needle) in [
            ("[]", "`command` is empty"),
            (
                "['']",
                "the program (the first element of `command`) is empty",
            ),
            ("['*', 'x']", "cannot hold `*`"),
            ("['**']", "cannot hold `*`"),
            ("['ls', '**', '-l']", "`**` may only be the last element"),
            (
                "['ls', '/a/**']",
                "element 2 of `command` holds `**` within other text",
            ),
            (
                "['ls', \"a\\u0000b\"]",
                "element 2 of `command` holds a NUL",
            ),
            ("'ls **'", "invalid type"),
            ("['ls', 3]", "invalid type"),
        ] {
            let text = format!(
                "[[approval_grants]]\ntool = 'fs.stat'\n\n[[approval_grants]]\ntool = 'shell.exec'\n\
                 command = {pattern}\n"
            );
            let e = running(&text).unwrap_err().to_string();
            assert!(
                e.starts_with("c.toml:6: approval grant 2: `command`: "),
                "{pattern}: {e}"
            );
            assert!(e.contains(needle), "{pattern}: {e}");
            assert_eq!(
                parse(Path::new("c.toml"), &text).unwrap_err().to_string(),
                e
            );
        }
    }

    #[test]
    fn policy_matrix() {
        use ApprovalPolicy::*;
        use RiskLevel::*;
        let levels = [ReadOnly, Low, Medium, High, Dangerous, Critical];
        for risk in levels {
            for root in [false, true] {
                assert!(Strict.asks(risk, root));
                assert_eq!(
                    Balanced.asks(risk, root),
                    risk != ReadOnly,
                    "{risk:?} {root}"
                );
                assert_eq!(
                    Permissive.asks(risk, root),
                    risk >= Dangerous || (root && risk != ReadOnly),
                    "{risk:?} {root}"
                );
            }
        }
        assert_eq!(Permissive.for_origin(CallOrigin::McpHttp), Balanced);
        assert_eq!(Permissive.for_origin(CallOrigin::McpStdio), Permissive);
        assert_eq!(Strict.for_origin(CallOrigin::McpHttp), Strict);
        assert_eq!(Balanced.for_origin(CallOrigin::McpStdio), Balanced);
    }
}
