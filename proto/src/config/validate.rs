//! The checks serde cannot express, each a named function. A failed check gives the byte
//! offset of the key at fault (for the message's line) and the message; the first failure
//! in the order of [`Config::validate`] is the one reported.

use std::ops::RangeInclusive;

use crate::limits::APPROVAL_TIMEOUT;

use super::defaults::{
    SANDBOX_CPU_SECS_RANGE, SANDBOX_MAX_PROCESSES_RANGE, SANDBOX_MEMORY_MIB_RANGE,
    SANDBOX_TOTAL_MEMORY_MIB_RANGE, SANDBOX_TOTAL_PROCESSES_RANGE,
};
use super::locate::Layout;
use super::{
    ApprovalGrant, Config, ModelConfig, ParseMode, MAX_MODEL_MAX_STEPS,
    MAX_MODEL_REQUEST_TIMEOUT_SECS, MAX_SANDBOX_UID_COUNT, MIN_AUDIT_MAX_BYTES, MIN_AUDIT_MAX_ROWS,
    MIN_SANDBOX_UID_BASE, SHELL_TOOL,
};

/// Why a check failed: the byte offset of the key at fault, when known, and the message.
pub(super) type Invalid = (Option<usize>, String);

impl Config {
    /// Every check, in the order their failures are reported.
    pub(super) fn validate(&self, mode: ParseMode, layout: &Layout) -> Result<(), Invalid> {
        self.netd_is_not_root(layout)?;
        let (base, last) = self.sandbox_uid_range(layout)?;
        self.sandbox_limits_in_range(layout)?;
        self.netd_outside_the_sandbox_range(layout, base, last)?;
        self.web_ids_are_its_own(layout, base, last)?;
        self.web_host_is_an_address(layout)?;
        self.state_dir_is_not_empty(layout)?;
        self.approval_timeout_in_range(mode, layout)?;
        self.audit_limits_at_least_their_minimum(layout)?;
        if let Some(model) = &self.model {
            model
                .validate()
                .map_err(|message| (layout.key_at("model"), message))?;
        }
        self.grants_are_valid(layout)
    }

    /// netd parses network input: never as root.
    fn netd_is_not_root(&self, layout: &Layout) -> Result<(), Invalid> {
        for (key, value) in [("netd_uid", self.netd_uid), ("netd_gid", self.netd_gid)] {
            if value == Some(0) {
                return Err((
                    layout.key_at(key),
                    format!(
                        "{key} must not be 0: netd parses network input and never runs as root"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The sandbox's uids: a count within bounds, above the system's and apps' uids, and
    /// not past the largest uid. The range's first and last uid.
    fn sandbox_uid_range(&self, layout: &Layout) -> Result<(u32, u32), Invalid> {
        let (base, count) = self.sandbox_uids();
        if !(1..=MAX_SANDBOX_UID_COUNT).contains(&count) {
            return Err((
                layout.key_at("sandbox_uid_count"),
                format!("sandbox_uid_count must be between 1 and {MAX_SANDBOX_UID_COUNT}"),
            ));
        }
        let Some(last) = base.checked_add(count - 1).filter(|l| *l < u32::MAX) else {
            return Err((
                layout.key_at("sandbox_uid_base"),
                "sandbox_uid_base + sandbox_uid_count goes past the largest uid".into(),
            ));
        };
        if base < MIN_SANDBOX_UID_BASE {
            return Err((
                layout.key_at("sandbox_uid_base"),
                format!(
                    "sandbox_uid_base must be at least {MIN_SANDBOX_UID_BASE}: below it are \
                     root, system users and (on Android) the platform's and apps' uids, \
                     which services trust or files belong to"
                ),
            ));
        }
        Ok((base, last))
    }

    /// What one sandboxed call, and all of them together, may use.
    fn sandbox_limits_in_range(&self, layout: &Layout) -> Result<(), Invalid> {
        let limits: [(&str, Option<u64>, RangeInclusive<u64>); 5] = [
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
        ];
        for (key, value, range) in limits {
            if value.is_some_and(|v| !range.contains(&v)) {
                return Err((
                    layout.key_at(key),
                    format!(
                        "{key} must be between {} and {}",
                        range.start(),
                        range.end()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// netd never shares an identity with a sandboxed command.
    fn netd_outside_the_sandbox_range(
        &self,
        layout: &Layout,
        base: u32,
        last: u32,
    ) -> Result<(), Invalid> {
        let (netd_uid, netd_gid, _) = self.netd_ids();
        for (key, id) in [("netd_uid", netd_uid), ("netd_gid", netd_gid)] {
            if (base..=last).contains(&id) {
                return Err((
                    layout.key_at(key).or(layout.key_at("sandbox_uid_base")),
                    format!(
                        "{key} {id} lies in the sandbox's uid range {base}..={last}: netd \
                         must never share an identity with a sandboxed command"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The Web console's identity: not root, not a sandboxed call's, not netd's.
    fn web_ids_are_its_own(&self, layout: &Layout, base: u32, last: u32) -> Result<(), Invalid> {
        let (netd_uid, netd_gid, _) = self.netd_ids();
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
            return Err((layout.key_at(key), format!("{key} {id} {why}")));
        }
        Ok(())
    }

    fn web_host_is_an_address(&self, layout: &Layout) -> Result<(), Invalid> {
        match &self.web_host {
            Some(host) if host.parse::<std::net::IpAddr>().is_err() => Err((
                layout.key_at("web_host"),
                format!("web_host {host:?} is not an IP address"),
            )),
            _ => Ok(()),
        }
    }

    fn state_dir_is_not_empty(&self, layout: &Layout) -> Result<(), Invalid> {
        if self
            .state_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err((
                layout.key_at("state_dir"),
                "state_dir must not be empty".into(),
            ));
        }
        Ok(())
    }

    /// 1 to the limit; a running reader reads a longer value as the limit
    /// ([`Config::approval_timeout`]).
    fn approval_timeout_in_range(&self, mode: ParseMode, layout: &Layout) -> Result<(), Invalid> {
        if let Some(secs) = self.approval_timeout_secs {
            let max = APPROVAL_TIMEOUT.as_secs();
            let too_long = mode == ParseMode::Startup && secs > max;
            if secs < 1 || too_long {
                return Err((
                    layout.key_at("approval_timeout_secs"),
                    format!(
                        "approval_timeout_secs must be between 1 and {max} (it can only shorten the wait)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn audit_limits_at_least_their_minimum(&self, layout: &Layout) -> Result<(), Invalid> {
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
                    layout.key_at(key),
                    format!("{key} must be at least {min} ({why})"),
                ));
            }
        }
        Ok(())
    }

    /// Each grant's own checks; a failure names the grant and points at its key (or, for a
    /// key it lacks, at the grant).
    fn grants_are_valid(&self, layout: &Layout) -> Result<(), Invalid> {
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

impl ModelConfig {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::{parse, running};
    use crate::config::{
        ApprovalPolicy, ArgvPattern, GrantRisk, DEFAULT_MODEL_BASE_URL, DEFAULT_SANDBOX_UID_BASE,
        DEFAULT_SANDBOX_UID_COUNT,
    };
    use std::path::Path;

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
        assert!(running("sandbox_uid = 65534\n").is_ok());
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
}
