//! The decision-time reading of the configuration file: what one decision is made under.
//!
//! The schema (keys, types, defaults, validation and the error messages) is
//! [`nl2sh_proto::config`], the same parse the supervisor runs at startup; here it runs in
//! [`ParseMode::Running`] for every decision whose file changed, so an edit applies to the
//! next call without a restart. The keys that matter here:
//!
//! * `approval_policy`, `protocol_auto_approve`, `approval_timeout_secs`;
//! * `[[approval_grants]]`, matched against the action as finally assessed;
//! * `audit_max_rows` / `audit_max_bytes`: the authority hands them to the store when a
//!   changed file is read, so the writer never reads them.
//!
//! A missing file means the defaults. Anything unreadable or invalid is an error, and
//! callers fail closed.

use std::path::Path;
use std::time::Duration;

use nl2sh_proto::channels::{ActionSummary, RiskLevel};
use nl2sh_proto::config::{self, Config, ConfigError, ParseMode};
use nl2sh_proto::limits::APPROVAL_TIMEOUT;

pub use nl2sh_proto::config::{
    ApprovalGrant as Grant, ApprovalPolicy, GrantOrigin, GrantRisk, MAX_CONFIG_BYTES,
};

use crate::store::AuditLimits;

/// Why the configuration could not be used; [`ConfigError::detail`] is what a decision's
/// reason says (without the file's path).
pub type PolicyError = ConfigError;

/// What one decision is made under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub approval_policy: ApprovalPolicy,
    pub auto_approve: bool,
    /// How long a pending approval waits: 1 s up to [`APPROVAL_TIMEOUT`].
    pub timeout: Duration,
    pub grants: Vec<Grant>,
    /// How much of the audit trail is kept.
    pub audit_limits: AuditLimits,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            approval_policy: ApprovalPolicy::default(),
            auto_approve: false,
            timeout: APPROVAL_TIMEOUT,
            grants: Vec::new(),
            audit_limits: AuditLimits::default(),
        }
    }
}

impl From<Config> for Policy {
    fn from(config: Config) -> Self {
        let defaults = AuditLimits::default();
        Policy {
            approval_policy: config.approval_policy.unwrap_or_default(),
            auto_approve: config.protocol_auto_approve,
            timeout: config.approval_timeout(),
            audit_limits: AuditLimits {
                max_rows: config.audit_max_rows.unwrap_or(defaults.max_rows),
                max_bytes: config.audit_max_bytes.unwrap_or(defaults.max_bytes),
            },
            grants: config.approval_grants,
        }
    }
}

impl Policy {
    /// The first grant covering `s`, with its index in the file.
    pub fn grant_for(&self, s: &ActionSummary) -> Option<(usize, &Grant)> {
        self.grants.iter().enumerate().find(|(_, g)| covers(g, s))
    }
}

/// Whether `grant` pre-approves the action as finally assessed. Never an action that
/// needs root, never a dangerous or critical one, never above the grant's `max_risk`.
pub fn covers(grant: &Grant, s: &ActionSummary) -> bool {
    if s.requires_root || s.risk >= RiskLevel::Dangerous || s.risk > grant.max_risk.level() {
        return false;
    }
    grant.tool == s.tool
        && grant.action.as_ref().is_none_or(|a| *a == s.action)
        && grant
            .action_prefix
            .as_ref()
            .is_none_or(|p| s.action.starts_with(p.as_str()))
        && grant.origin.is_none_or(|o| o.origin() == s.origin)
}

/// The policy in the file at `path`. A missing file means the defaults; anything
/// unreadable or invalid is an error (callers fail closed).
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    match config::load(path, ParseMode::Running) {
        Ok(config) => Ok(config.into()),
        Err(ConfigError::Missing { .. }) => Ok(Policy::default()),
        Err(e) => Err(e),
    }
}

/// Whether the file at `path` sets `protocol_auto_approve = true`.
pub fn auto_approve(path: &Path) -> Result<bool, PolicyError> {
    load(path).map(|p| p.auto_approve)
}

/// The policy in configuration text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
    config::parse(path, text, ParseMode::Running).map(Policy::from)
}

/// Compatibility wrapper: only `protocol_auto_approve` of [`parse`].
pub fn parse_auto_approve(path: &Path, text: &str) -> Result<bool, PolicyError> {
    parse(path, text).map(|p| p.auto_approve)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{CallOrigin, Confinement, Identity};

    // The parse's own tests (messages, modes, the policy matrix) are in
    // nl2sh_proto::config; these cover what this module makes of it.

    fn parse_text(text: &str) -> Result<Policy, PolicyError> {
        parse(Path::new("c.toml"), text)
    }

    fn auto(text: &str) -> Result<bool, PolicyError> {
        parse_auto_approve(Path::new("c.toml"), text)
    }

    fn summary(tool: &str, action: &str, risk: RiskLevel) -> ActionSummary {
        ActionSummary {
            call_id: nl2sh_proto::channels::CallId(1),
            task: None,
            origin: CallOrigin::McpStdio,
            tool: tool.into(),
            action: action.into(),
            arguments_sha256: "a".repeat(64),
            risk,
            requires_root: false,
            identity: Identity::Launching,
            confinement: Confinement::Sandbox,
            reasons: Vec::new(),
        }
    }

    #[test]
    fn reads_only_its_keys() {
        assert!(!auto("").unwrap());
        assert!(auto("protocol_auto_approve = true").unwrap());
        assert!(!auto("protocol_auto_approve = false").unwrap());
        assert!(auto("protocol_token = 'x'\nunknown = 3\nprotocol_auto_approve = true\n").unwrap());
        // The retired key never turns it on.
        assert!(!auto("bridge_auto_approve = true").unwrap());
        assert_eq!(parse_text("").unwrap(), Policy::default());
    }

    #[test]
    fn missing_file_is_the_default_and_a_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            load(&dir.path().join("absent.toml")).unwrap(),
            Policy::default()
        );
        assert!(matches!(
            load(dir.path()),
            Err(PolicyError::NotRegularFile { .. })
        ));
    }

    #[test]
    fn policy_and_timeout() {
        let p = parse_text("approval_policy = 'strict'\napproval_timeout_secs = 5\n").unwrap();
        assert_eq!(p.approval_policy, ApprovalPolicy::Strict);
        assert_eq!(p.timeout, Duration::from_secs(5));
        let p =
            parse_text("approval_policy = 'permissive'\napproval_timeout_secs = 9999\n").unwrap();
        assert_eq!(p.approval_policy, ApprovalPolicy::Permissive);
        assert_eq!(p.timeout, APPROVAL_TIMEOUT);
        assert_eq!(
            parse_text("approval_timeout_secs = 120").unwrap().timeout,
            APPROVAL_TIMEOUT
        );
        assert_eq!(
            parse_text("approval_timeout_secs = 1").unwrap().timeout,
            Duration::from_secs(1)
        );
        // Bad values are the shared parse's to refuse (nl2sh_proto::config's tests); here,
        // only that approvald's reading refuses them too.
        assert!(parse_text("approval_policy = 'lenient'").is_err());
    }

    #[test]
    fn audit_limits_default_and_are_validated() {
        assert_eq!(parse_text("").unwrap().audit_limits, AuditLimits::default());
        let p = parse_text("audit_max_rows = 1000\naudit_max_bytes = 1048576\n").unwrap();
        assert_eq!(
            p.audit_limits,
            AuditLimits {
                max_rows: 1000,
                max_bytes: 1024 * 1024
            }
        );
        let p = parse_text("audit_max_rows = 250000\n").unwrap();
        assert_eq!(p.audit_limits.max_rows, 250_000);
        assert_eq!(p.audit_limits.max_bytes, AuditLimits::default().max_bytes);
        for (bad, needle) in [
            (
                "audit_max_rows = 999",
                "audit_max_rows must be at least 1000",
            ),
            ("audit_max_rows = -1", "audit_max_rows"),
            ("audit_max_rows = 0", "audit_max_rows"),
            (
                "audit_max_bytes = 1048575",
                "audit_max_bytes must be at least",
            ),
            ("audit_max_bytes = 1.5e9", "invalid type"),
            ("audit_max_rows = '5000'", "invalid type"),
        ] {
            let e = parse_text(bad).unwrap_err();
            assert!(e.to_string().contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn grants_parse_and_match() {
        let p = parse_text(
            "[[approval_grants]]\ntool = 'shell.exec'\naction_prefix = 'touch /tmp/'\n\
             max_risk = 'medium'\norigin = 'mcp_stdio'\n\
             [[approval_grants]]\ntool = 'fs.write'\naction = 'write /tmp/a'\n",
        )
        .unwrap();
        assert_eq!(p.grants.len(), 2);
        assert_eq!(p.grants[1].max_risk, GrantRisk::Low);
        let s = summary("shell.exec", "touch /tmp/x", RiskLevel::Medium);
        assert_eq!(p.grant_for(&s).map(|(i, _)| i), Some(0));
        let mut remote = s.clone();
        remote.origin = CallOrigin::McpHttp;
        assert!(p.grant_for(&remote).is_none());
        let s2 = summary("shell.exec", "touch /etc/x", RiskLevel::Medium);
        assert!(p.grant_for(&s2).is_none());
        let s3 = summary("shell.exec", "touch /tmp/x", RiskLevel::High);
        assert!(p.grant_for(&s3).is_none());
        let s4 = summary("fs.write", "write /tmp/a", RiskLevel::Low);
        assert_eq!(p.grant_for(&s4).map(|(i, _)| i), Some(1));
        let s5 = summary("fs.write", "write /tmp/ab", RiskLevel::Low);
        assert!(p.grant_for(&s5).is_none());
        let mut root = s4.clone();
        root.requires_root = true;
        assert!(p.grant_for(&root).is_none());
    }
}
