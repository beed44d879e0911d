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
//!
//! The rooms: `keys` (the one list of keys), `schema` (the file's shape as serde reads
//! it), `defaults` and `identities` (what an absent key means, the bounds, the platform's
//! uids), `validate` (the checks serde cannot express), `locate` (where an error is in the
//! text), `file` (the bounded read and its errors). This file is the front: the parse and
//! where a configuration's state directory is.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::de::DeTable;

use crate::state_layout;

mod defaults;
mod file;
mod identities;
mod keys;
mod locate;
mod schema;
mod validate;

pub use crate::argv_pattern::{ArgvPattern, PatternError};
pub use crate::state_layout::service_dir;
pub use defaults::{
    device_memory_bytes, device_pid_max, meminfo_field, DEFAULT_AUDIT_MAX_BYTES,
    DEFAULT_AUDIT_MAX_ROWS, DEFAULT_MODEL_API_KEY_ENV, DEFAULT_MODEL_BASE_URL,
    DEFAULT_MODEL_MAX_STEPS, DEFAULT_MODEL_REQUEST_TIMEOUT_SECS, DEFAULT_PROTOCOL_PORT,
    DEFAULT_SANDBOX_CPU_SECS, DEFAULT_SANDBOX_MAX_PROCESSES, DEFAULT_SANDBOX_MEMORY_MIB,
    DEFAULT_WEB_HOST, DEFAULT_WEB_PORT, MAX_MODEL_MAX_STEPS, MAX_MODEL_REQUEST_TIMEOUT_SECS,
    MIN_AUDIT_MAX_BYTES, MIN_AUDIT_MAX_ROWS,
};
pub use file::{read_bounded, ConfigError, MAX_CONFIG_BYTES};
pub use identities::{
    default_netd_ids, default_web_ids, DEFAULT_SANDBOX_UID_BASE, DEFAULT_SANDBOX_UID_COUNT,
    MAX_SANDBOX_UID_COUNT, MIN_SANDBOX_UID_BASE,
};
pub use keys::{Key, KeyKind, KEYS, MODEL_KEYS};
pub use locate::line_at;
pub use schema::{
    ApprovalGrant, ApprovalPolicy, Config, GrantOrigin, GrantRisk, ModelConfig, SHELL_TOOL,
};

use keys::{is_known_key, REPLACED_KEYS, RETIRED_KEYS};
use locate::{describe_toml_error, key_before, Layout};

/// Who reads the file, and so how strict the parse is (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseMode {
    /// The supervisor at startup: the whole file must be right.
    Startup,
    /// approvald before a decision: tolerant only where tolerance cannot loosen anything.
    Running,
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

/// `path` made absolute against the working directory (without touching the file system
/// beyond reading the working directory), so a background process started elsewhere finds
/// the same file and state directory.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
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

/// Helpers of the tests of every room.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};

    use super::{Config, ConfigError, ParseMode};

    /// The supervisor's parse: the whole file must be right.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        super::parse(path, text, ParseMode::Startup)
    }

    /// approvald's parse before a decision.
    pub fn running(text: &str) -> Result<Config, ConfigError> {
        super::parse(Path::new("c.toml"), text, ParseMode::Running)
    }

    pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{parse, running};
    use super::*;
    use crate::limits::APPROVAL_TIMEOUT;
    use std::time::Duration;

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
}
