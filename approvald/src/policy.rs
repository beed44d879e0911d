//! The approval keys of the configuration file, read for each decision so a change applies
//! to the next call without a restart:
//!
//! * `approval_policy = "permissive" | "balanced" | "strict"` (default `balanced`);
//! * `protocol_auto_approve` (bool, default false);
//! * `approval_timeout_secs` (integer ≥ 1, default 120; more than 120 is read as 120);
//! * `[[approval_grants]]` tables: `tool` (required), `action`, `action_prefix`,
//!   `max_risk` (`low` | `medium` | `high`, default `low`), `origin`
//!   (`mcp_http` | `mcp_stdio`). A grant with any other key is invalid;
//! * `audit_max_rows` (integer ≥ 1,000, default 100,000) and `audit_max_bytes` (integer
//!   ≥ 1 MiB, default 64 MiB): how much of the audit trail the store keeps. The authority
//!   hands them to the store when a changed file is read, so the writer never reads them.
//!
//! Other top-level keys are ignored here: the supervisor validates the whole file strictly
//! at startup. Anything unreadable or invalid is an error, and callers fail closed.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use nl2sh_proto::channels::{ActionSummary, CallOrigin, RiskLevel};
use nl2sh_proto::limits::APPROVAL_TIMEOUT;

use crate::store::{AuditLimits, MIN_AUDIT_MAX_BYTES, MIN_AUDIT_MAX_ROWS};

/// Largest configuration file read (the supervisor's limit too).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a regular file", .path.display())]
    NotRegularFile { path: PathBuf },
    #[error("{} is larger than {MAX_CONFIG_BYTES} bytes", .path.display())]
    TooLarge { path: PathBuf },
    #[error("{} is not UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    /// `message` is the parser's message without the source excerpt, so a value such as
    /// the protocol token never reaches a log line.
    #[error("{}{}: {message}", .path.display(), .line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
}

impl PolicyError {
    /// The error without the file's path: what a decision's reason may say.
    pub fn detail(&self) -> String {
        match self {
            PolicyError::Read { source, .. } => format!("cannot read it: {source}"),
            PolicyError::NotRegularFile { .. } => "it is not a regular file".into(),
            PolicyError::TooLarge { .. } => format!("it is larger than {MAX_CONFIG_BYTES} bytes"),
            PolicyError::NotUtf8 { .. } => "it is not UTF-8".into(),
            PolicyError::Invalid {
                line: Some(line),
                message,
                ..
            } => format!("line {line}: {message}"),
            PolicyError::Invalid {
                line: None,
                message,
                ..
            } => message.clone(),
        }
    }
}

/// Which actions ask for a local decision.
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
            (ApprovalPolicy::Permissive, CallOrigin::McpHttp) => ApprovalPolicy::Balanced,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantOrigin {
    McpHttp,
    McpStdio,
}

impl GrantOrigin {
    pub fn origin(self) -> CallOrigin {
        match self {
            GrantOrigin::McpHttp => CallOrigin::McpHttp,
            GrantOrigin::McpStdio => CallOrigin::McpStdio,
        }
    }
}

/// One `[[approval_grants]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Exact tool name.
    pub tool: String,
    /// Exact action text.
    pub action: Option<String>,
    /// The action starts with this.
    pub action_prefix: Option<String>,
    #[serde(default)]
    pub max_risk: GrantRisk,
    pub origin: Option<GrantOrigin>,
}

impl Grant {
    /// Whether this grant pre-approves the action as finally assessed. Never an action
    /// that needs root, never a dangerous or critical one, never above `max_risk`.
    pub fn covers(&self, s: &ActionSummary) -> bool {
        if s.requires_root || s.risk >= RiskLevel::Dangerous || s.risk > self.max_risk.level() {
            return false;
        }
        self.tool == s.tool
            && self.action.as_ref().is_none_or(|a| *a == s.action)
            && self
                .action_prefix
                .as_ref()
                .is_none_or(|p| s.action.starts_with(p.as_str()))
            && self.origin.is_none_or(|o| o.origin() == s.origin)
    }
}

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

impl Policy {
    /// The first grant covering `s`, with its index in the file.
    pub fn grant_for(&self, s: &ActionSummary) -> Option<(usize, &Grant)> {
        self.grants.iter().enumerate().find(|(_, g)| g.covers(s))
    }
}

/// The keys read here; every other key is left to the supervisor.
#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    approval_policy: Option<ApprovalPolicy>,
    #[serde(default)]
    protocol_auto_approve: Option<bool>,
    #[serde(default)]
    approval_timeout_secs: Option<i64>,
    #[serde(default)]
    approval_grants: Option<Vec<toml::Value>>,
    #[serde(default)]
    audit_max_rows: Option<i64>,
    #[serde(default)]
    audit_max_bytes: Option<i64>,
}

/// The policy in the file at `path`. A missing file means the defaults; anything
/// unreadable or invalid is an error (callers fail closed).
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    let Some(text) = read_bounded(path)? else {
        return Ok(Policy::default());
    };
    parse(path, &text)
}

/// Whether the file at `path` sets `protocol_auto_approve = true`.
pub fn auto_approve(path: &Path) -> Result<bool, PolicyError> {
    load(path).map(|p| p.auto_approve)
}

pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
    let invalid = |line, message: String| PolicyError::Invalid {
        path: path.to_owned(),
        line,
        message,
    };
    let raw = toml::from_str::<Raw>(text).map_err(|e| {
        let line = e.span().map(|span| {
            text.as_bytes()[..span.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        invalid(line, e.message().to_owned())
    })?;
    let timeout = match raw.approval_timeout_secs {
        None => APPROVAL_TIMEOUT,
        Some(secs) if secs < 1 => {
            return Err(invalid(
                None,
                format!("approval_timeout_secs must be at least 1, not {secs}"),
            ))
        }
        // Never longer than the product limit, whatever the file says.
        Some(secs) => Duration::from_secs(secs.unsigned_abs()).min(APPROVAL_TIMEOUT),
    };
    let mut grants = Vec::new();
    for (i, value) in raw
        .approval_grants
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let n = i + 1;
        let grant: Grant = value.try_into().map_err(|e: toml::de::Error| {
            invalid(None, format!("approval grant {n}: {}", e.message()))
        })?;
        if grant.tool.is_empty() {
            return Err(invalid(
                None,
                format!("approval grant {n}: `tool` must not be empty"),
            ));
        }
        grants.push(grant);
    }
    let defaults = AuditLimits::default();
    let at_least = |key: &str, value: Option<i64>, min: u64, default: u64| match value {
        None => Ok(default),
        Some(v) => u64::try_from(v)
            .ok()
            .filter(|v| *v >= min)
            .ok_or_else(|| invalid(None, format!("{key} must be at least {min}, not {v}"))),
    };
    let audit_limits = AuditLimits {
        max_rows: at_least(
            "audit_max_rows",
            raw.audit_max_rows,
            MIN_AUDIT_MAX_ROWS,
            defaults.max_rows,
        )?,
        max_bytes: at_least(
            "audit_max_bytes",
            raw.audit_max_bytes,
            MIN_AUDIT_MAX_BYTES,
            defaults.max_bytes,
        )?,
    };
    Ok(Policy {
        approval_policy: raw.approval_policy.unwrap_or_default(),
        auto_approve: raw.protocol_auto_approve.unwrap_or(false),
        timeout,
        grants,
        audit_limits,
    })
}

/// Compatibility wrapper: only `protocol_auto_approve` of [`parse`].
pub fn parse_auto_approve(path: &Path, text: &str) -> Result<bool, PolicyError> {
    parse(path, text).map(|p| p.auto_approve)
}

/// The file's text, `None` when it does not exist. Never blocks on a FIFO, never reads
/// more than the limit.
fn read_bounded(path: &Path) -> Result<Option<String>, PolicyError> {
    let read_err = |source| PolicyError::Read {
        path: path.to_owned(),
        source,
    };
    let file = match File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(PolicyError::NotRegularFile {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(PolicyError::TooLarge {
            path: path.to_owned(),
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| PolicyError::NotUtf8 {
            path: path.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{Confinement, Identity};

    fn parse_text(text: &str) -> Result<Policy, PolicyError> {
        parse(Path::new("c.toml"), text)
    }

    fn auto(text: &str) -> Result<bool, PolicyError> {
        parse_auto_approve(Path::new("c.toml"), text)
    }

    fn summary(tool: &str, action: &str, risk: RiskLevel) -> ActionSummary {
        ActionSummary {
            call_id: nl2sh_proto::channels::CallId(1),
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
    fn wrong_type_or_bad_toml_is_an_error_without_the_text() {
        let e =
            auto("protocol_token = 'secret-value'\nprotocol_auto_approve = \"yes\"\n").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("line 2"), "{text}");
        assert!(!text.contains("secret-value"), "{text}");
        assert!(e.detail().starts_with("line 2: "), "{}", e.detail());
        assert!(!e.detail().contains("c.toml"));
        assert!(auto("protocol_auto_approve = ").is_err());
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
            assert!(parse_text(bad).is_err(), "{bad}");
        }
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
        ] {
            let e = parse_text(text).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }
}
