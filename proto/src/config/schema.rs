//! The file's shape: [`Config`], its `[model]` table and its `[[approval_grants]]`, as
//! serde reads them. Defaults are applied by the accessors (`defaults`, `identities`), the
//! checks serde cannot express are in `validate`.

use std::path::PathBuf;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::channels::{CallOrigin, RiskLevel};

use super::ArgvPattern;

/// The tool whose actions are command lines: its grants name the commands they cover.
pub const SHELL_TOOL: &str = "shell.exec";

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
    /// Unprivileged uid for netd (default: [`default_netd_ids`](super::default_netd_ids)).
    pub netd_uid: Option<u32>,
    /// Unprivileged gid for netd (default: [`default_netd_ids`](super::default_netd_ids)).
    pub netd_gid: Option<u32>,
    /// First uid of the range sandboxed calls run as, one uid (and gid) per concurrent
    /// call (default [`DEFAULT_SANDBOX_UID_BASE`](super::DEFAULT_SANDBOX_UID_BASE)).
    pub sandbox_uid_base: Option<u32>,
    /// How many uids the range holds: the most sandboxed calls running at once (default
    /// [`DEFAULT_SANDBOX_UID_COUNT`](super::DEFAULT_SANDBOX_UID_COUNT), at most
    /// [`MAX_SANDBOX_UID_COUNT`](super::MAX_SANDBOX_UID_COUNT)).
    pub sandbox_uid_count: Option<u32>,
    /// Processes one sandboxed call may have at once (default
    /// [`DEFAULT_SANDBOX_MAX_PROCESSES`](super::DEFAULT_SANDBOX_MAX_PROCESSES)).
    pub sandbox_max_processes: Option<u32>,
    /// Memory (data: heap and private mappings) of each process of a sandboxed call, in
    /// MiB (default [`DEFAULT_SANDBOX_MEMORY_MIB`](super::DEFAULT_SANDBOX_MEMORY_MIB)).
    pub sandbox_memory_mib: Option<u64>,
    /// CPU seconds of each process of a sandboxed call (default
    /// [`DEFAULT_SANDBOX_CPU_SECS`](super::DEFAULT_SANDBOX_CPU_SECS)).
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
    /// Audit rows kept at most (at least [`MIN_AUDIT_MAX_ROWS`](super::MIN_AUDIT_MAX_ROWS),
    /// default [`DEFAULT_AUDIT_MAX_ROWS`](super::DEFAULT_AUDIT_MAX_ROWS)); approvald prunes
    /// the oldest beyond it.
    pub audit_max_rows: Option<u64>,
    /// Bytes the audit database and its WAL take at most (at least
    /// [`MIN_AUDIT_MAX_BYTES`](super::MIN_AUDIT_MAX_BYTES), default
    /// [`DEFAULT_AUDIT_MAX_BYTES`](super::DEFAULT_AUDIT_MAX_BYTES)).
    pub audit_max_bytes: Option<u64>,
    /// Address the Web console listens on (default
    /// [`DEFAULT_WEB_HOST`](super::DEFAULT_WEB_HOST), loopback).
    pub web_host: Option<String>,
    /// The Web console's port (default [`DEFAULT_WEB_PORT`](super::DEFAULT_WEB_PORT); 0
    /// asks for any free port).
    pub web_port: Option<u16>,
    /// Allow a Web console listener that is not loopback over plain HTTP (off: the
    /// owner's session cookie would cross the network in clear).
    pub web_allow_insecure_http: bool,
    /// Unprivileged uid of the Web console (default [`default_web_ids`](super::default_web_ids)).
    pub web_uid: Option<u32>,
    /// Unprivileged gid of the Web console (default [`default_web_ids`](super::default_web_ids)).
    pub web_gid: Option<u32>,
    /// On Android, post a notification for each pending approval (default on).
    pub approval_notifications: Option<bool>,
    /// The built-in Agent's model (`[model]`); without it delegated tasks fail.
    pub model: Option<ModelConfig>,
    /// Retired; accepted with any TOML type and ignored.
    #[serde(rename = "bridge_auto_approve")]
    pub(super) retired_bridge_auto_approve: Option<IgnoredAny>,
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
    /// Whether the file still carries the retired `bridge_auto_approve` key (worth a
    /// one-line notice at startup; its value is never looked at).
    pub fn has_retired_bridge_auto_approve(&self) -> bool {
        self.retired_bridge_auto_approve.is_some()
    }
}

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

/// `[model]`: an OpenAI-compatible Chat Completions endpoint for the built-in Agent.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Base URL, `http(s)://host[:port]/path` (default
    /// [`DEFAULT_MODEL_BASE_URL`](super::DEFAULT_MODEL_BASE_URL)).
    pub base_url: Option<String>,
    /// Model name (required).
    pub model: String,
    /// Environment variable of the supervisor holding the key (default
    /// [`DEFAULT_MODEL_API_KEY_ENV`](super::DEFAULT_MODEL_API_KEY_ENV)); ignored when
    /// `api_key` is set.
    pub api_key_env: Option<String>,
    /// The key itself; the file must then be private (0600).
    pub api_key: Option<String>,
    /// Model turns per task (1–[`MAX_MODEL_MAX_STEPS`](super::MAX_MODEL_MAX_STEPS), default 24).
    pub max_steps: Option<u32>,
    /// Seconds one model request may take
    /// (1–[`MAX_MODEL_REQUEST_TIMEOUT_SECS`](super::MAX_MODEL_REQUEST_TIMEOUT_SECS),
    /// default 120).
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
    pub(super) retired_action_prefix: bool,
}

/// `true` for a key that is there, whatever its value.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_token() {
        let c = Config {
            protocol_token: Some("very-secret-token-value-0123456789abcdef".into()),
            ..Config::default()
        };
        assert!(!format!("{c:?}").contains("very-secret"));
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
