//! The configuration file: where it lives, what it may contain, and where its state goes.
//!
//! Every key is optional. Unknown keys and invalid TOML are rejected with the file, line and
//! key in the message; the one exception is the retired top-level `bridge_auto_approve`,
//! which is accepted with any value and ignored (it never enables `protocol_auto_approve`).
//! Loading never rewrites the file.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;

use nl2sh_approvald::store::{MIN_AUDIT_MAX_BYTES, MIN_AUDIT_MAX_ROWS};

/// Largest configuration file we read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// `protocol_service_port` when the key is absent.
#[allow(dead_code, reason = "used through Config::service_port")]
pub const DEFAULT_PROTOCOL_PORT: u16 = 8765;
/// Configuration path on a rooted Android device.
const ANDROID_CONFIG_PATH: &str = "/data/adb/nl2sh/config.toml";
/// Last-resort configuration path on other systems.
const SYSTEM_CONFIG_PATH: &str = "/etc/nl2sh/config.toml";

/// Top-level keys a user may write, in the order error messages list them. The retired
/// `bridge_auto_approve` is deliberately absent: it is tolerated, not offered.
const KNOWN_KEYS: &[&str] = &[
    "protocol_token",
    "protocol_auto_approve",
    "protocol_start_with_service",
    "protocol_service_port",
    "state_dir",
    "netd_uid",
    "netd_gid",
    "sandbox_uid",
    "sandbox_gid",
    "approval_policy",
    "approval_timeout_secs",
    "approval_grants",
    "audit_max_rows",
    "audit_max_bytes",
];

/// The parsed configuration. Absent keys take the defaults of [`Config::default`].
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
    /// Identity of the read-only sandbox (default: [`default_sandbox_ids`]).
    pub sandbox_uid: Option<u32>,
    pub sandbox_gid: Option<u32>,
    /// Which actions ask for local approval (remote callers get at least `balanced`).
    pub approval_policy: Option<ApprovalPolicy>,
    /// Seconds a pending approval waits (1–120; it can only be shortened).
    pub approval_timeout_secs: Option<u64>,
    /// Scoped grants that pre-approve matching actions (never root, dangerous or
    /// critical ones). approvald re-reads them for every decision.
    pub approval_grants: Vec<ApprovalGrant>,
    /// Audit rows kept at most (at least [`MIN_AUDIT_MAX_ROWS`]); approvald prunes the
    /// oldest beyond it and re-reads it for every decision.
    pub audit_max_rows: Option<u64>,
    /// Bytes the audit database and its WAL take at most (at least
    /// [`MIN_AUDIT_MAX_BYTES`]).
    pub audit_max_bytes: Option<u64>,
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
            .field("sandbox_uid", &self.sandbox_uid)
            .field("sandbox_gid", &self.sandbox_gid)
            .field("audit_max_rows", &self.audit_max_rows)
            .field("audit_max_bytes", &self.audit_max_bytes)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The port to listen on: the configured one, else 8765. 0 means "any free port".
    #[allow(dead_code, reason = "port default for managed startup")]
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

    /// (uid, gid) of the read-only sandbox: the platform defaults with the
    /// `sandbox_uid` / `sandbox_gid` overrides applied.
    pub fn sandbox_ids(&self) -> (u32, u32) {
        let (uid, gid) = default_sandbox_ids();
        (
            self.sandbox_uid.unwrap_or(uid),
            self.sandbox_gid.unwrap_or(gid),
        )
    }

    /// Checks serde cannot express. `line` finds a key's line for the message.
    fn validate(
        &self,
        line_of: impl Fn(&str) -> Option<usize>,
    ) -> Result<(), (Option<usize>, String)> {
        if self.netd_uid == Some(0) {
            return Err((
                line_of("netd_uid"),
                "netd_uid must not be 0: netd parses network input and never runs as root".into(),
            ));
        }
        if self.netd_gid == Some(0) {
            return Err((
                line_of("netd_gid"),
                "netd_gid must not be 0: netd parses network input and never runs as root".into(),
            ));
        }
        for (key, value) in [
            ("sandbox_uid", self.sandbox_uid),
            ("sandbox_gid", self.sandbox_gid),
        ] {
            if value == Some(0) {
                return Err((
                    line_of(key),
                    format!(
                        "{key} must not be 0: the read-only sandbox never runs as root \
                         (systemd, polkit, su and Android's services trust uid 0)"
                    ),
                ));
            }
        }
        if self
            .state_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err((line_of("state_dir"), "state_dir must not be empty".into()));
        }
        if let Some(t) = self.approval_timeout_secs {
            if !(1..=nl2sh_proto::limits::APPROVAL_TIMEOUT.as_secs()).contains(&t) {
                return Err((
                    line_of("approval_timeout_secs"),
                    format!(
                        "approval_timeout_secs must be between 1 and {} (it can only shorten the wait)",
                        nl2sh_proto::limits::APPROVAL_TIMEOUT.as_secs()
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
                return Err((
                    line_of(key),
                    format!("{key} must be at least {min} ({why})"),
                ));
            }
        }
        for g in &self.approval_grants {
            if g.tool.is_empty() {
                return Err((
                    line_of("approval_grants"),
                    "an approval grant needs a tool".into(),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    Permissive,
    Balanced,
    Strict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantRisk {
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantOrigin {
    McpHttp,
    McpStdio,
}

/// One `[[approval_grants]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "validated here; approvald applies them")]
pub struct ApprovalGrant {
    pub tool: String,
    pub action: Option<String>,
    pub action_prefix: Option<String>,
    pub max_risk: Option<GrantRisk>,
    pub origin: Option<GrantOrigin>,
}

/// Why a configuration could not be loaded. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {} does not exist", .path.display())]
    Missing { path: PathBuf },
    #[error("cannot read configuration file {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
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

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

/// Whether this is an Android device (decided at run time, never at compile time).
pub fn is_android() -> bool {
    nl2sh_proto::platform::is_android()
}

/// (uid, gid, supplementary groups) for netd: Android AID_NOBODY with AID_INET (3003) so
/// paranoid networking still lets it use IP sockets; elsewhere `nobody`.
pub fn default_netd_ids() -> (u32, u32, Vec<u32>) {
    netd_ids_for(is_android())
}

fn netd_ids_for(android: bool) -> (u32, u32, Vec<u32>) {
    if android {
        (9999, 9999, vec![3003])
    } else {
        (65534, 65534, Vec::new())
    }
}

/// The read-only sandbox's identity when the configuration does not set one: `nobody`
/// (65534) on Linux, AID_NOBODY (9999) on Android — never shell (2000), which Android's
/// services trust to inject input and change settings.
pub fn default_sandbox_ids() -> (u32, u32) {
    if is_android() {
        (9999, 9999)
    } else {
        (65534, 65534)
    }
}

/// The configuration path used when `--config` is not given.
pub fn default_config_path() -> PathBuf {
    default_config_path_for(
        is_android(),
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

fn default_config_path_for(
    android: bool,
    xdg_config_home: Option<OsString>,
    home: Option<OsString>,
) -> PathBuf {
    if android {
        return PathBuf::from(ANDROID_CONFIG_PATH);
    }
    // XDG Base Directory: a relative XDG_CONFIG_HOME is invalid and must be ignored.
    if let Some(xdg) = xdg_config_home.map(PathBuf::from) {
        if xdg.is_absolute() {
            return xdg.join("nl2sh").join("config.toml");
        }
    }
    if let Some(home) = home.map(PathBuf::from) {
        if home.is_absolute() {
            return home.join(".config").join("nl2sh").join("config.toml");
        }
    }
    PathBuf::from(SYSTEM_CONFIG_PATH)
}

/// Load `path`. A missing file is an error when the path was given explicitly and means
/// "all defaults" when it is the default path. The file is never modified.
pub fn load(path: &Path, explicit: bool) -> Result<Config, ConfigError> {
    let text = match read_bounded(path) {
        Ok(text) => text,
        Err(ConfigError::Missing { .. }) if !explicit => return Ok(Config::default()),
        Err(e) => return Err(e),
    };
    let config = parse(path, &text)?;
    warn_if_token_readable_by_others(path, &config);
    Ok(config)
}

/// Parse configuration text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let config: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
        path: path.to_owned(),
        line: e.span().map(|span| line_at(text, span.start)),
        message: describe_toml_error(
            e.message(),
            e.span().and_then(|span| key_before(text, span.start)),
        ),
    })?;
    config
        .validate(|key| key_line(text, key))
        .map_err(|(line, message)| ConfigError::Invalid {
            path: path.to_owned(),
            line,
            message,
        })?;
    Ok(config)
}

/// Read the file without following it into a FIFO or device and without reading more than
/// the limit.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
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
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        // The file grew while we read it.
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
        path: path.to_owned(),
    })
}

fn warn_if_token_readable_by_others(path: &Path, config: &Config) {
    let has_token = config
        .protocol_token
        .as_deref()
        .is_some_and(|t| !t.is_empty());
    if !has_token {
        return;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", meta.mode() & 0o7777),
                "configuration file holds protocol_token but is readable by other users; chmod 600 it"
            );
        }
    }
}

/// 1-based line number of byte offset `offset` in `text`.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// 1-based line of the first line that assigns top-level `key` (good enough for messages).
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.strip_prefix(key)
                .or_else(|| {
                    line.strip_prefix('"')
                        .and_then(|l| l.strip_prefix(key))
                        .and_then(|l| l.strip_prefix('"'))
                })
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

/// The key assigned on the line of byte `offset` when `offset` is in its value, so a
/// type or value error can name the field.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..offset];
    let (key, _) = before.split_once('=')?;
    let key = key.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'"'))
    };
    bare(key).then_some(key)
}

/// serde's unknown-field message lists every declared field, including the retired one;
/// list only the keys a user may write. Other messages get the key they concern.
fn describe_toml_error(message: &str, key: Option<&str>) -> String {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            let field = &rest[..end];
            let expected = KNOWN_KEYS
                .iter()
                .map(|k| format!("`{k}`"))
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

/// The state directory of the configuration at `config_path`: the `state_dir` key if set
/// (relative to the configuration file's directory), else `<config dir>/<stem>.state`.
pub fn state_dir(config: &Config, config_path: &Path) -> PathBuf {
    let config_dir = config_path.parent().unwrap_or(Path::new(""));
    match &config.state_dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => config_dir.join(dir),
        None => {
            let mut name = config_path
                .file_stem()
                .filter(|s| !s.is_empty())
                .map(|s| s.to_os_string())
                .unwrap_or_else(|| OsString::from("nl2sh"));
            name.push(".state");
            config_dir.join(name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nl2sh-config-test-{tag}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn rand_suffix() -> u64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
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
    }

    #[test]
    fn approval_keys_parse_and_are_validated() {
        let text = r#"
approval_policy = "strict"
approval_timeout_secs = 30

[[approval_grants]]
tool = "shell.exec"
action_prefix = "/bin/sh -c 'touch /tmp/"
max_risk = "medium"
origin = "mcp_stdio"
"#;
        let c = parse(Path::new("c.toml"), text).unwrap();
        assert_eq!(c.approval_policy, Some(ApprovalPolicy::Strict));
        assert_eq!(c.approval_timeout_secs, Some(30));
        assert_eq!(c.approval_grants.len(), 1);
        assert_eq!(c.approval_grants[0].max_risk, Some(GrantRisk::Medium));
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
    fn unknown_table_is_rejected() {
        let text = "protocol_service_port = 1\n[model]\nkey = 1\n";
        let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(msg.contains("c.toml:"), "{msg}");
        assert!(msg.contains("unknown field `model`"), "{msg}");
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
    fn loading_never_rewrites_the_file() {
        let dir = tempdir("norewrite");
        let text = "bridge_auto_approve = true\n# comment\n";
        let p = write(&dir, "config.toml", text);
        let before = std::fs::metadata(&p).unwrap().modified().unwrap();
        load(&p, true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
        std::fs::remove_dir_all(dir).unwrap();
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
    fn missing_file_default_vs_explicit() {
        let dir = tempdir("missing");
        let p = dir.join("nope.toml");
        assert_eq!(load(&p, false).unwrap(), Config::default());
        let msg = load(&p, true).unwrap_err().to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn non_regular_and_oversized_files_are_refused() {
        let dir = tempdir("nonreg");
        let err = load(&dir, true).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");

        let fifo = dir.join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = load(&fifo, true).unwrap_err();
        assert!(matches!(err, ConfigError::NotRegularFile { .. }), "{err:?}");

        let big = dir.join("big.toml");
        let f = File::create(&big).unwrap();
        f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let err = load(&big, true).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("big.toml"));

        let bad = write(&dir, "bad.toml", "");
        std::fs::write(&bad, [0xff, 0xfe, b'\n']).unwrap();
        assert!(matches!(
            load(&bad, true).unwrap_err(),
            ConfigError::NotUtf8 { .. }
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_reads_a_real_file() {
        let dir = tempdir("real");
        let p = write(&dir, "config.toml", "protocol_service_port = 9000\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load(&p, true).unwrap().service_port(), 9000);
        assert_eq!(load(&p, false).unwrap().service_port(), 9000);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn default_paths() {
        assert_eq!(
            default_config_path_for(true, Some("/x".into()), Some("/home/u".into())),
            PathBuf::from("/data/adb/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("/x".into()), Some("/home/u".into())),
            PathBuf::from("/x/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("rel".into()), Some("/home/u".into())),
            PathBuf::from("/home/u/.config/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("".into()), None),
            PathBuf::from("/etc/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, None, Some("".into())),
            PathBuf::from("/etc/nl2sh/config.toml")
        );
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
}
