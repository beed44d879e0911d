//! The decision-time reading of the configuration file: what one decision is made under.
//!
//! The schema (keys, types, defaults, validation and the error messages) is
//! [`nl2sh_proto::config`], the same parse the supervisor runs at startup; here it runs in
//! [`ParseMode::Running`] for every decision whose file changed, so an edit applies to the
//! next call without a restart. The keys that matter here:
//!
//! * `approval_policy`, `protocol_auto_approve`, `approval_timeout_secs`;
//! * `[[approval_grants]]`, matched against the action as finally assessed: a shell
//!   line by the commands the executor parsed out of it ([`covers_commands`]), never by
//!   its text's prefix;
//! * `audit_max_rows` / `audit_max_bytes`: the authority hands them to the store when a
//!   changed file is read, so the writer never reads them;
//! * `approval_notifications`: whether a pending request posts an Android notification.
//!
//! A missing file means the defaults. Anything unreadable or invalid is an error, and
//! callers fail closed.

use std::path::Path;
use std::time::Duration;

use nl2sh_proto::channels::{ActionSummary, Confinement, ParsedCommand, RiskLevel};
use nl2sh_proto::config::{self, ArgvPattern, Config, ConfigError, ParseMode, SHELL_TOOL};
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
    /// Whether a pending request posts an Android notification (`approval_notifications`;
    /// only on Android, see [`crate::notify`]).
    pub notifications: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            approval_policy: ApprovalPolicy::default(),
            auto_approve: false,
            timeout: APPROVAL_TIMEOUT,
            grants: Vec::new(),
            audit_limits: AuditLimits::default(),
            notifications: true,
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
            notifications: config.approval_notifications(),
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
/// needs root, never a dangerous or critical one, never above the grant's `max_risk`;
/// then every key the grant has must match: `tool` and `action` exactly, `origin`, and
/// `command` as [`covers_commands`] says.
pub fn covers(grant: &Grant, s: &ActionSummary) -> bool {
    if s.requires_root || s.risk >= RiskLevel::Dangerous || s.risk > grant.max_risk.level() {
        return false;
    }
    grant.tool == s.tool
        && grant.origin.is_none_or(|o| o.origin() == s.origin)
        && grant.action.as_ref().is_none_or(|a| *a == s.action)
        && grant
            .command
            .as_ref()
            .is_none_or(|pattern| covers_commands(pattern, s.commands.as_deref()))
        // A grant by tool alone covers what the tool does on its own terms, never an
        // action its caller asked to run `unconfined` (a read with nl2sh's rights of any
        // private file): that takes a grant naming it (`action`, or a shell `command`).
        // The configuration also refuses a shell grant by tool alone.
        && (grant.command.is_some()
            || grant.action.is_some()
            || (s.tool != SHELL_TOOL && s.confinement != Confinement::Unconfined))
}

/// Whether a `command` pattern covers a shell line's parsed commands: each one is matched
/// by the pattern or is [`inert`], and at least one is matched (a grant for `am start`
/// says nothing about a line that does nothing else). A line the executor could not take
/// apart (`None`) is never covered.
pub fn covers_commands(pattern: &ArgvPattern, commands: Option<&[ParsedCommand]>) -> bool {
    let Some(commands) = commands else {
        return false;
    };
    let mut matched = false;
    for command in commands {
        match &command.argv {
            Some(argv) if pattern.matches(argv) => matched = true,
            _ if inert(command) => {}
            _ => return false,
        }
    }
    matched
}

/// Whether a command a grant does not name may run in a line it covers: one that touches
/// nothing (`sleep 1`, `echo done`), read-only by its assessment and with fixed words.
///
/// Not every read-only command: a granted line runs outside the sandbox with real
/// privileges, where a read is no longer harmless. `content query --uri content://sms`,
/// `grep -r … /data`, `screencap -p` and `logcat -d` are read-only, and as root they read
/// what the sandbox keeps from them. Nor every builtin: mksh's `test`, `[`, `let`,
/// `ulimit` and `shift` read `a[$(…)]` in their words as arithmetic and run it.
pub fn inert(command: &ParsedCommand) -> bool {
    let program = command.argv.as_deref().and_then(<[String]>::first);
    command.read_only && program.is_some_and(|p| INERT_PROGRAMS.contains(&p.as_str()))
}

/// Programs that print their words, wait, or do nothing. (`sleep` parses a plain number,
/// also as mksh's builtin; `echo` only prints, also in mksh.)
const INERT_PROGRAMS: &[&str] = &["sleep", "echo", "true", "false", ":", "pwd"];

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
    use nl2sh_proto::channels::{CallOrigin, Identity};

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
            data: None,
            ui_app: None,
            call_id: nl2sh_proto::channels::CallId(1),
            task: None,
            after_reading: Default::default(),
            client: None,
            sent: None,
            origin: CallOrigin::McpStdio,
            tool: tool.into(),
            action: action.into(),
            arguments_sha256: "a".repeat(64),
            risk,
            requires_root: false,
            identity: Identity::Launching,
            confinement: Confinement::Sandbox,
            reasons: Vec::new(),
            commands: None,
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
    fn notifications_default_on() {
        assert!(parse_text("").unwrap().notifications);
        assert!(
            parse_text("approval_notifications = true")
                .unwrap()
                .notifications
        );
        assert!(
            !parse_text("approval_notifications = false")
                .unwrap()
                .notifications
        );
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
            "[[approval_grants]]\ntool = 'shell.exec'\ncommand = ['touch', '/tmp/*']\n\
             max_risk = 'medium'\norigin = 'mcp_stdio'\n\
             [[approval_grants]]\ntool = 'fs.write'\naction = 'write /tmp/a'\n",
        )
        .unwrap();
        assert_eq!(p.grants.len(), 2);
        assert_eq!(p.grants[1].max_risk, GrantRisk::Low);
        let s = shell(
            "touch /tmp/x",
            RiskLevel::Medium,
            vec![cmd(&["touch", "/tmp/x"])],
        );
        assert_eq!(p.grant_for(&s).map(|(i, _)| i), Some(0));
        let mut remote = s.clone();
        remote.origin = CallOrigin::McpHttp;
        assert!(p.grant_for(&remote).is_none());
        let s2 = shell(
            "touch /etc/x",
            RiskLevel::Medium,
            vec![cmd(&["touch", "/etc/x"])],
        );
        assert!(p.grant_for(&s2).is_none());
        let s3 = shell(
            "touch /tmp/x",
            RiskLevel::High,
            vec![cmd(&["touch", "/tmp/x"])],
        );
        assert!(p.grant_for(&s3).is_none());
        let s4 = summary("fs.write", "write /tmp/a", RiskLevel::Low);
        assert_eq!(p.grant_for(&s4).map(|(i, _)| i), Some(1));
        let s5 = summary("fs.write", "write /tmp/ab", RiskLevel::Low);
        assert!(p.grant_for(&s5).is_none());
        let mut root = s4.clone();
        root.requires_root = true;
        assert!(p.grant_for(&root).is_none());
    }

    fn shell(action: &str, risk: RiskLevel, commands: Vec<ParsedCommand>) -> ActionSummary {
        let mut s = summary("shell.exec", &format!("/bin/sh -c '{action}'"), risk);
        s.commands = Some(commands);
        s
    }

    /// A command a grant may match.
    fn cmd(argv: &[&str]) -> ParsedCommand {
        ParsedCommand {
            argv: Some(argv.iter().map(|w| w.to_string()).collect()),
            read_only: false,
        }
    }

    /// A read-only command.
    fn read(argv: &[&str]) -> ParsedCommand {
        ParsedCommand {
            read_only: true,
            ..cmd(argv)
        }
    }

    /// A command no grant may match (expanded words, assignments, a writing redirection…).
    fn opaque(read_only: bool) -> ParsedCommand {
        ParsedCommand {
            argv: None,
            read_only,
        }
    }

    fn grant(text: &str) -> Grant {
        let mut p = parse_text(&format!(
            "[[approval_grants]]\ntool = 'shell.exec'\n{text}\n"
        ))
        .unwrap();
        p.grants.remove(0)
    }

    #[test]
    fn a_command_grant_covers_a_line_only_if_it_covers_every_command_in_it() {
        let ls = grant("command = ['ls', '**']\nmax_risk = 'high'");
        let high = RiskLevel::High;
        // What the executor sends for these lines (the executor's own tests check that).
        let covered = [
            ("ls /tmp", vec![cmd(&["ls", "/tmp"])]),
            ("ls", vec![cmd(&["ls"])]),
            (
                "ls /tmp && sleep 1 && echo done",
                vec![
                    cmd(&["ls", "/tmp"]),
                    read(&["sleep", "1"]),
                    read(&["echo", "done"]),
                ],
            ),
            (
                "ls -la /tmp && ls /",
                vec![cmd(&["ls", "-la", "/tmp"]), cmd(&["ls", "/"])],
            ),
            ("(ls /data)", vec![read(&["ls", "/data"])]),
        ];
        for (line, commands) in covered {
            assert!(covers(&ls, &shell(line, high, commands)), "{line}");
        }
        let pending = [
            (
                "ls /tmp; touch F",
                vec![cmd(&["ls", "/tmp"]), cmd(&["touch", "F"])],
            ),
            ("ls && mkdir d", vec![cmd(&["ls"]), cmd(&["mkdir", "d"])]),
            ("ls || cp a b", vec![cmd(&["ls"]), cmd(&["cp", "a", "b"])]),
            ("ls | tee F", vec![cmd(&["ls"]), cmd(&["tee", "F"])]),
            ("ls > F", vec![opaque(false)]),
            ("ls $(touch F)", vec![cmd(&["touch", "F"]), opaque(false)]),
            ("LD_PRELOAD=x ls", vec![opaque(false)]),
            ("$PROG", vec![opaque(false)]),
            ("eval touch F", vec![cmd(&["touch", "F"]), opaque(false)]),
            // Nothing in it is matched: a grant for `ls` says nothing about a line that
            // only reads with other programs, even when it is to run unconfined.
            ("cat /etc/hostname", vec![read(&["cat", "/etc/hostname"])]),
            // A read the grant does not name: it would run as root, outside the sandbox.
            (
                "ls /tmp; cat /etc/hostname",
                vec![cmd(&["ls", "/tmp"]), read(&["cat", "/etc/hostname"])],
            ),
            ("ls /tmp/*", vec![opaque(true)]),
            ("", vec![]),
            // The name, exactly.
            ("/bin/ls /tmp", vec![cmd(&["/bin/ls", "/tmp"])]),
            ("lsof", vec![cmd(&["lsof"])]),
        ];
        for (line, commands) in pending {
            assert!(!covers(&ls, &shell(line, high, commands)), "{line}");
        }
        // A line the executor could not take apart is never covered.
        let mut s = shell("ls", high, vec![]);
        s.commands = None;
        assert!(!covers(&ls, &s));
        // Still never root, dangerous or critical, nor above max_risk, nor another tool.
        let ok = shell("ls /tmp", high, vec![cmd(&["ls", "/tmp"])]);
        assert!(covers(&ls, &ok));
        for change in [
            |s: &mut ActionSummary| s.requires_root = true,
            |s: &mut ActionSummary| s.risk = RiskLevel::Dangerous,
            |s: &mut ActionSummary| s.risk = RiskLevel::Critical,
            |s: &mut ActionSummary| s.tool = "shell".into(),
        ] {
            let mut s = ok.clone();
            change(&mut s);
            assert!(!covers(&ls, &s), "{s:?}");
        }
        let low = grant("command = ['ls', '**']");
        assert!(!covers(&low, &ok));
        assert!(covers(
            &low,
            &shell("ls /tmp", RiskLevel::Low, vec![cmd(&["ls", "/tmp"])])
        ));
    }

    #[test]
    fn an_exact_command_grant_covers_exactly_that_command() {
        let am = grant("command = ['am', 'start', '-n', 'com.example/.Main']");
        let low = RiskLevel::Low;
        let line = |argv: &[&str]| shell("am …", low, vec![cmd(argv)]);
        assert!(covers(
            &am,
            &line(&["am", "start", "-n", "com.example/.Main"])
        ));
        for argv in [
            &["am", "start", "-n", "com.example/.Main", "--user", "0"][..],
            &["am", "start", "-n", "com.other/.Main"],
            &["am", "start", "-n"],
            &["/tmp/am", "start", "-n", "com.example/.Main"],
            &["/system/bin/am", "start", "-n", "com.example/.Main"],
            &["am", "start", "-n com.example/.Main"],
        ] {
            assert!(!covers(&am, &line(argv)), "{argv:?}");
        }
        // Together with `action`, both must match.
        let both = grant("command = ['ls', '**']\naction = \"/bin/sh -c 'ls /tmp'\"");
        assert!(covers(
            &both,
            &shell("ls /tmp", low, vec![cmd(&["ls", "/tmp"])])
        ));
        assert!(!covers(&both, &shell("ls /", low, vec![cmd(&["ls", "/"])])));
        // An exact `action` alone covers that text, whatever its commands.
        let exact = grant("action = \"/bin/sh -c 'ls /tmp; touch F'\"");
        let mut s = shell("ls /tmp; touch F", low, vec![]);
        s.commands = None;
        assert!(covers(&exact, &s));
        s.action.push(' ');
        assert!(!covers(&exact, &s));
    }

    #[test]
    fn only_inert_commands_come_along_unnamed() {
        let am = grant("command = ['am', 'start', '**']");
        let low = RiskLevel::Low;
        let with = |other: ParsedCommand| {
            covers(
                &am,
                &shell("am start; …", low, vec![cmd(&["am", "start"]), other]),
            )
        };
        for other in [
            read(&["sleep", "1"]),
            read(&["echo", "done"]),
            read(&["echo", "a[$(touch F)]"]),
            read(&["true"]),
            read(&["false"]),
            read(&[":"]),
            read(&["pwd"]),
        ] {
            assert!(with(other.clone()), "{other:?}");
        }
        for other in [
            // Not read-only, or its words not fixed.
            cmd(&["sleep", "1"]),
            opaque(true),
            // Read-only in the sandbox, and reading what the sandbox hides as root.
            read(&["cat", "/etc/hostname"]),
            read(&["content", "query", "--uri", "content://sms"]),
            read(&["grep", "-r", "pass", "/data"]),
            read(&["screencap", "-p"]),
            read(&["logcat", "-d"]),
            read(&["dumpsys", "account"]),
            read(&["ls", "/data/data"]),
            // Builtins that evaluate their words: mksh's `test` and `let` run the `$(…)`
            // of an array subscript in arithmetic.
            read(&["[", "a[$(touch F)]", "-eq", "0", "]"]),
            read(&["test", "a[$(touch F)]", "-eq", "0"]),
            read(&["let", "a[$(touch F)]"]),
            read(&["ulimit", "-t", "a[$(touch F)]"]),
            read(&["typeset", "-i", "x=a[$(touch F)]"]),
            read(&["read", "x"]),
            read(&["cd", "/"]),
            read(&["export", "X=1"]),
            read(&["eval", "ls"]),
            read(&["command", "ls"]),
            read(&["/bin/sleep", "1"]),
        ] {
            assert!(!with(other.clone()), "{other:?}");
        }
        // What the grant names is matched whatever it is.
        let test = grant("command = ['test', '-e', '/sdcard/x']");
        assert!(covers(
            &test,
            &shell(
                "test -e /sdcard/x",
                low,
                vec![cmd(&["test", "-e", "/sdcard/x"])]
            )
        ));
    }

    #[test]
    fn other_tools_keep_their_grants_by_tool() {
        let p = parse_text(
            "[[approval_grants]]\ntool = 'fs.write'\nmax_risk = 'medium'\norigin = 'mcp_http'\n",
        )
        .unwrap();
        let mut s = summary("fs.write", "write /a", RiskLevel::Medium);
        s.origin = CallOrigin::McpHttp;
        assert!(p.grant_for(&s).is_some());
        s.risk = RiskLevel::High;
        assert!(p.grant_for(&s).is_none());
    }

    #[test]
    fn a_grant_by_tool_never_covers_an_unconfined_call() {
        let p = parse_text("[[approval_grants]]\ntool = 'fs.read'\n").unwrap();
        // A read the tool would run in the sandbox is the grant's; one its caller asked to
        // run with nl2sh's rights (any private file) is not.
        let mut s = summary(
            "fs.read",
            "read 4 bytes of /x from offset 0",
            RiskLevel::Low,
        );
        assert!(p.grant_for(&s).is_some());
        s.confinement = Confinement::Unconfined;
        s.action = "read 4 bytes of /data/data/app/db from offset 0 (unconfined)".into();
        assert!(p.grant_for(&s).is_none());
        // Named exactly, the owner said which.
        let exact = parse_text(&format!(
            "[[approval_grants]]\ntool = 'fs.read'\naction = '{}'\n",
            s.action
        ))
        .unwrap();
        assert!(exact.grant_for(&s).is_some());
    }
}
