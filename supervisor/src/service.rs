//! `nl2sh service start|stop|restart|status`: one managed background process per
//! configuration.
//!
//! `start` re-executes this binary as `protocol serve --host 0.0.0.0 --port
//! <protocol_service_port> --managed-service`, detached (a session of its own, stdin
//! /dev/null, stdout and stderr appended to the private `<stem>.service/service.log` beside
//! the configuration, which the service then keeps within its cap: [`service_log`]), and
//! waits until discovery shows that very process announced, or it exited. The process is
//! an ordinary `protocol serve` in every other way: the same lock, the same port
//! fallback, the same drain on SIGTERM. Its transport is announced as
//! "service", which is how `stop` tells it from a standalone `protocol serve` (never
//! stopped, never adopted).
//!
//! Everything here reads discovery (`state::discover`): `protocol/connection.json`, the
//! process start identity and the state directory's lock. `status` reads only; no command
//! prints the token.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::Flock;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

use nl2sh_proto::config::DEFAULT_PROTOCOL_PORT;
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::SHUTDOWN_GRACE;
use nl2sh_proto::private_dir::{open_private_dir, Create, WideMode};
use nl2sh_proto::state_layout;
use nl2sh_proto::sys::pidfd;

use crate::config::{self, Config, ConfigError};
use crate::exit::Exit;
use crate::log_tail;
use crate::running;
use crate::service_log;
use crate::state::{self, ConnectionInfo, Discovered, StatePaths};

/// The transport a managed service announces.
pub const SERVICE_TRANSPORT: &str = "service";
/// The configuration switch `start` requires.
const SWITCH: &str = "protocol_start_with_service";

/// How long `start` waits for the new process to announce itself. A worker has 15 s to
/// start inside `protocol serve`; this leaves room for that to fail and be reported.
const START_WAIT: Duration = Duration::from_secs(30);
/// How long `stop` waits for the process to exit: the supervisor drains netd, the executor
/// and approvald one after the other, each within the grace period plus two seconds.
const STOP_WAIT: Duration = Duration::from_secs(3 * (SHUTDOWN_GRACE.as_secs() + 2) + 5);
/// Discovery polling interval while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Longest wait, once the service announced itself, for its startup block in the log.
const BLOCK_LOG_WAIT: Duration = Duration::from_secs(2);

/// A failed command: its exit code and message.
struct Failure {
    code: Exit,
    message: String,
}

fn failure(code: Exit, message: impl Into<String>) -> Failure {
    Failure {
        code,
        message: message.into(),
    }
}

fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("nl2sh: {}", f.message);
            f.code.into()
        }
    }
}

/// The configuration a command works on, and where its files are.
struct Target {
    /// As given (made absolute): what the started process is told, so it computes the
    /// same state directory.
    config_path: PathBuf,
    /// What announcements name ([`config::identity`]).
    identity: PathBuf,
    state: StatePaths,
    service_dir: PathBuf,
    log: PathBuf,
}

impl Target {
    fn new(config_path: PathBuf, cfg: &Config) -> Self {
        let config_path = config::absolute(&config_path);
        let service_dir = config::service_dir(&config_path);
        Target {
            identity: config::identity(&config_path),
            state: state::state_paths(&config::state_dir(cfg, &config_path)),
            log: service_dir.join(service_log::LOG_NAME),
            service_dir,
            config_path,
        }
    }

    /// `nl2sh --config <path>` for messages.
    fn command(&self, rest: &str) -> String {
        nl2sh_proto::hint::with_config(&self.config_path, rest)
    }

    fn discover(&self) -> Result<Discovered, state::StateError> {
        state::discover(&self.state, &self.identity)
    }
}

/// For status and stop: the configuration as far as it can be read (see
/// [`config::load_for_discovery`]); a file that no longer loads is reported, not fatal.
fn locate_leniently(config_arg: Option<PathBuf>) -> (Target, Config) {
    let path = config_arg.unwrap_or_else(config::default_config_path);
    let (cfg, why) = config::load_for_discovery(&path);
    if let Some(e) = why {
        eprintln!("nl2sh: warning: {e} (looking for the service in the state directory it names, or the default)");
    }
    (Target::new(path, &cfg), cfg)
}

/// For start and restart: the configuration must load, and enable the service.
fn locate_for_start(config_arg: Option<PathBuf>) -> Result<(Target, Config), Failure> {
    let explicit = config_arg.is_some();
    let path = config_arg.unwrap_or_else(config::default_config_path);
    let cfg = match config::load(&path, explicit) {
        Ok(cfg) => cfg,
        Err(ConfigError::Missing { .. }) => {
            let abs = config::absolute(&path);
            return Err(failure(
                Exit::NotConfigured,
                format!(
                    "configuration file {} does not exist; create it with the managed service \
                     switched on: nl2sh --config {} config set {SWITCH} true",
                    abs.display(),
                    nl2sh_proto::hint::shell_word(&abs.to_string_lossy()),
                ),
            ));
        }
        Err(e) => return Err(failure(Exit::Failure, e.to_string())),
    };
    let target = Target::new(path, &cfg);
    if !cfg.protocol_start_with_service {
        return Err(failure(
            Exit::NotConfigured,
            format!(
                "the managed service is off for {}: {SWITCH} is not true. Turn it on with `{}` \
                 (or set `{SWITCH} = true` in the file), or run `{}` in a terminal instead",
                target.config_path.display(),
                target.command(&format!("config set {SWITCH} true")),
                target.command("protocol serve"),
            ),
        ));
    }
    Ok((target, cfg))
}

// ---------------------------------------------------------------------------------------
// status

pub fn status(config_arg: Option<PathBuf>, json: bool) -> ExitCode {
    let (target, cfg) = locate_leniently(config_arg);
    let found = target.discover();
    let code = match &found {
        Ok(Discovered::Live(_)) => Exit::Success,
        Ok(Discovered::Stale(_)) => Exit::Stale,
        Ok(Discovered::Stopped) => Exit::NotRunning,
        Ok(Discovered::Busy { .. }) | Err(_) => Exit::Unknown,
    };
    if json {
        println!("{}", status_json(&target, &found));
    } else {
        print!("{}", status_text(&target, &cfg, &found));
    }
    if let Err(e) = &found {
        eprintln!("nl2sh: cannot read discovery: {e}");
    }
    code.into()
}

fn since(info: &ConnectionInfo) -> Option<String> {
    info.started_at_ms.map(nl2sh_proto::clock::rfc3339_millis)
}

fn connection_json(info: &ConnectionInfo) -> serde_json::Value {
    // Never the token: ordinary status omits credentials.
    json!({
        "transport": info.transport,
        "mcp_url": info.mcp_url,
        "a2a_url": info.a2a_url,
        "card_url": info.agent_card_url,
        "listen": info.listen,
        "pid": info.pid,
        "version": info.version,
        "since": since(info),
        "restarts": info.restarts,
        "last_restart_cause": info.last_restart_cause,
        // What a client is given (as the Web console's "Connect a client"); the token is
        // read from the client's environment.
        "codex_toml": info.mcp_url.as_deref().map(crate::startup::mcp_toml),
        "mcp_servers_json": info.mcp_url.as_deref().map(crate::startup::mcp_json),
        // Where the token came from (never the token): "generated" is new at every start.
        "token_source": info.token_source,
    })
}

/// The connections of a live process: its protocol transport (none for a Web console
/// alone) and its Web console (transport `web`, `url`), never a token.
fn connections_json(info: &ConnectionInfo) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    if info.transport != crate::serve::WEB_ONLY_TRANSPORT || info.mcp_url.is_some() {
        out.push(connection_json(info));
    }
    if let Some(url) = &info.web_url {
        out.push(json!({
            "transport": "web",
            "url": url,
            "listen": info.web_listen,
            "pid": info.pid,
            "version": info.version,
            "since": since(info),
        }));
    }
    out
}

/// The crash loop that stopped the service, when nothing runs now.
fn failure_of(
    target: &Target,
    found: &Result<Discovered, state::StateError>,
) -> Option<state::FailureRecord> {
    matches!(found, Ok(Discovered::Stopped))
        .then(|| state::read_failure(&target.state))
        .flatten()
}

fn status_json(
    target: &Target,
    found: &Result<Discovered, state::StateError>,
) -> serde_json::Value {
    let holder = |h: &Option<(u32, String)>| {
        h.as_ref()
            .map(|(pid, transport)| json!({"pid": pid, "transport": transport}))
    };
    let failure = failure_of(target, found);
    let (state_word, connections, stale_record, lock_holder, error) = match found {
        Ok(Discovered::Live(info)) => ("running", connections_json(info), None, None, None),
        Ok(Discovered::Stopped) if failure.is_some() => ("failed", vec![], None, None, None),
        Ok(Discovered::Stale(info)) => (
            "stale",
            vec![],
            Some(json!({"pid": info.pid, "transport": info.transport})),
            None,
            None,
        ),
        Ok(Discovered::Stopped) => ("stopped", vec![], None, None, None),
        Ok(Discovered::Busy { holder: h }) => ("unknown", vec![], None, holder(h), None),
        Err(e) => ("unknown", vec![], None, None, Some(e.to_string())),
    };
    let managed =
        matches!(found, Ok(Discovered::Live(info)) if info.transport == SERVICE_TRANSPORT);
    let comparison = match found {
        Ok(Discovered::Live(info)) => running::compare(info, &target.config_path),
        _ => running::Comparison::default(),
    };
    json!({
        "running": matches!(found, Ok(Discovered::Live(_))),
        "stale": matches!(found, Ok(Discovered::Stale(_))),
        "managed": managed,
        "state": state_word,
        "failure": failure.map(|f| json!({
            "cause": f.cause,
            "restarts": f.restarts,
            "pid": f.pid,
            "at": nl2sh_proto::clock::rfc3339_millis(f.at_ms),
        })),
        "connections": connections,
        "stale_record": stale_record,
        "lock_holder": lock_holder,
        "error": error,
        "config_path": target.config_path,
        "state_dir": target.state.root,
        "log": target.log,
        // What the consoles (TUI, module WebUI) need: the keys whose saved value the
        // running process does not use yet, each in words, and the command that applies
        // them; whether every request is approved automatically now.
        "differs_from_saved": comparison.keys(),
        "differences": comparison.differs.iter().map(|d| json!({
            "key": d.key, "saved": d.saved, "running": d.running,
        })).collect::<Vec<_>>(),
        "saved_unreadable": comparison.unreadable,
        "auto_approve": matches!(found, Ok(Discovered::Live(_)))
            && running::auto_approve(&target.config_path),
        "restart_command": target.command("service restart"),
    })
}

/// `service status` as labelled lines ("Status:    running ...").
struct StatusLines(String);

impl StatusLines {
    fn line(&mut self, label: &str, value: &str) {
        use std::fmt::Write as _;
        // `write!` into a String cannot fail.
        let _ = writeln!(self.0, "{:<12}{value}", format!("{label}:"));
    }
}

fn status_text(
    target: &Target,
    cfg: &Config,
    found: &Result<Discovered, state::StateError>,
) -> String {
    let mut out = StatusLines(String::new());
    match found {
        Ok(Discovered::Live(info)) => {
            live_lines(&mut out, info);
            running_lines(&mut out, target, info);
        }
        Ok(Discovered::Stale(info)) => {
            out.line(
                "Status",
                &format!(
                    "not running (stale record: pid {}, transport {}, ended without cleaning \
                     up; the next start replaces it)",
                    info.pid,
                    Shown::new(&info.transport)
                ),
            );
        }
        Ok(Discovered::Stopped) => match failure_of(target, found) {
            Some(f) => out.line(
                "Status",
                &format!(
                    "failed: the workers kept dying and the service stopped itself at {} \
                     after {} restarts (last: {})",
                    nl2sh_proto::clock::rfc3339_millis(f.at_ms),
                    f.restarts,
                    Shown::new(&f.cause)
                ),
            ),
            None => out.line("Status", "not running"),
        },
        Ok(Discovered::Busy { holder }) => {
            let who = holder.as_ref().map_or_else(
                || "a process".to_owned(),
                |(pid, transport)| format!("pid {pid} (transport {})", Shown::new(transport)),
            );
            out.line(
                "Status",
                &format!(
                    "unknown: {who} holds the state directory without a verified record \
                     (starting, stopping, or serving another configuration)"
                ),
            );
        }
        Err(e) => out.line("Status", &format!("unknown: {e}")),
    }
    out.line("Config", &target.config_path.display().to_string());
    out.line("State", &target.state.root.display().to_string());
    out.line(
        "Log",
        &format!(
            "{} (private; holds a generated token)",
            target.log.display()
        ),
    );
    if matches!(found, Ok(Discovered::Stopped | Discovered::Stale(_))) {
        how_to_start_lines(&mut out, target, cfg);
    }
    out.0
}

/// What a live process's record says: how it runs, its URLs, pid, restarts, version.
fn live_lines(out: &mut StatusLines, info: &ConnectionInfo) {
    let what = match info.transport.as_str() {
        SERVICE_TRANSPORT => "running (managed service)",
        "stdio" => "running (protocol stdio: a local MCP client's process; no HTTP)",
        crate::serve::WEB_ONLY_TRANSPORT if info.mcp_url.is_some() => {
            "running (nl2sh --web-only, with MCP/A2A; not managed by `nl2sh service`)"
        }
        crate::serve::WEB_ONLY_TRANSPORT => {
            "running (nl2sh --web-only: the Web console alone; MCP/A2A stopped)"
        }
        _ => "running (standalone protocol serve; not managed by `nl2sh service`)",
    };
    out.line("Status", what);
    // What discovery read from connection.json goes through the one escaping
    // function: a file in the state directory is not trusted to be plain text.
    let shown = |s: &str| Shown::new(s).to_string();
    out.line("Transport", &shown(&info.transport));
    for (label, value) in [
        ("MCP URL", &info.mcp_url),
        ("A2A URL", &info.a2a_url),
        ("Agent Card", &info.agent_card_url),
        ("Listening", &info.listen),
    ] {
        if let Some(value) = value {
            out.line(label, &shown(value));
        }
    }
    if let Some(url) = &info.web_url {
        let login = nl2sh_proto::hint::with_config(Path::new(&info.config_path), "web login");
        out.line(
            "Web",
            &format!("{} (log in: {})", shown(url), shown(&login)),
        );
    }
    out.line("PID", &info.pid.to_string());
    if info.restarts > 0 {
        out.line(
            "Restarts",
            &format!(
                "{} (workers restarted; last: {})",
                info.restarts,
                shown(info.last_restart_cause.as_deref().unwrap_or("unknown"))
            ),
        );
    }
    out.line(
        "Version",
        &shown(info.version.as_deref().unwrap_or("unknown")),
    );
    out.line("Since", since(info).as_deref().unwrap_or("unknown"));
    if info.mcp_url.is_some() {
        let generated = if info.transport == SERVICE_TRANSPORT {
            "the generated token in the service log"
        } else {
            "the generated token its startup printed"
        };
        let print = nl2sh_proto::hint::with_config(
            std::path::Path::new(&info.config_path),
            "protocol token",
        );
        out.line(
            "Token",
            &format!(
                "not shown; clients need the configured protocol_token or \
                 NL2SH_PROTOCOL_TOKEN, or {generated} (`{print}` prints the one in use)"
            ),
        );
    }
}

/// What differs between the running process and the saved file, and whether every
/// request is approved automatically.
fn running_lines(out: &mut StatusLines, target: &Target, info: &ConnectionInfo) {
    let comparison = running::compare(info, &target.config_path);
    for d in &comparison.differs {
        out.line(
            "Differs",
            &format!(
                "{}: saved {}, running {}: restart to apply: {}",
                d.key,
                d.saved,
                d.running,
                target.command("service restart")
            ),
        );
    }
    if let Some(why) = &comparison.unreadable {
        out.line(
            "Differs",
            &format!(
                "unknown: the saved file does not load ({})",
                Shown::new(why)
            ),
        );
    }
    if running::auto_approve(&target.config_path) {
        out.line(
            "Approval",
            "every request is approved automatically (protocol_auto_approve)",
        );
    }
}

/// For a stopped service: the command that starts it, and an example URL.
fn how_to_start_lines(out: &mut StatusLines, target: &Target, cfg: &Config) {
    let start = if cfg.protocol_start_with_service {
        target.command("service start")
    } else {
        format!(
            "{} first ({SWITCH} is off), then {}",
            target.command(&format!("config set {SWITCH} true")),
            target.command("service start")
        )
    };
    out.line("Start", &start);
    let port = match cfg.service_port() {
        0 => "<port>".to_owned(),
        p => p.to_string(),
    };
    out.line(
        "Example",
        &format!(
            "http://127.0.0.1:{port}/mcp (default loopback example, on this device once \
             running; default port {DEFAULT_PROTOCOL_PORT})"
        ),
    );
}

// ---------------------------------------------------------------------------------------
// start / stop / restart

pub fn start(config_arg: Option<PathBuf>) -> ExitCode {
    finish((|| {
        let (target, cfg) = locate_for_start(config_arg)?;
        let _control = control_lock(&target)?;
        start_locked(&target, &cfg)
    })())
}

pub fn stop(config_arg: Option<PathBuf>) -> ExitCode {
    finish((|| {
        let (target, _cfg) = locate_leniently(config_arg);
        // Serialise with a start in progress when there can be one (the directory exists).
        let _control = if target.service_dir.exists() {
            Some(control_lock(&target)?)
        } else {
            None
        };
        stop_locked(&target)
    })())
}

pub fn restart(config_arg: Option<PathBuf>) -> ExitCode {
    finish((|| {
        // Refuse before stopping anything: a restart that cannot start must not stop.
        let (target, cfg) = locate_for_start(config_arg)?;
        let _control = control_lock(&target)?;
        stop_locked(&target)?;
        start_locked(&target, &cfg)
    })())
}

/// `<service dir>/control.lock`, held by start, stop and restart so two of them for one
/// configuration never interleave (for example a boot script and a person).
fn control_lock(target: &Target) -> Result<Flock<File>, Failure> {
    open_private_dir(&target.service_dir, Create::IfMissing, WideMode::Tighten)
        .map_err(|e| failure(Exit::Failure, e.to_string()))?;
    let path = state_layout::SERVICE_CONTROL_LOCK.in_dir(&target.service_dir);
    let file = state::open_private_file(&path, false)
        .map_err(|e| failure(Exit::Failure, e.to_string()))?;
    match nl2sh_proto::flock::lock_exclusive_within(file, START_WAIT + STOP_WAIT, POLL) {
        Ok(lock) => Ok(lock),
        Err((_, Errno::EWOULDBLOCK)) => Err(failure(
            Exit::Failure,
            format!(
                "another `nl2sh service` command for {} is still running",
                target.config_path.display()
            ),
        )),
        Err((_, errno)) => Err(failure(
            Exit::Failure,
            format!("cannot lock {}: {errno}", path.display()),
        )),
    }
}

/// Discovery, waiting (within `limit`) while the state directory is held by a managed
/// service that is starting or stopping.
fn settle(target: &Target, limit: Duration) -> Result<Discovered, Failure> {
    let deadline = Instant::now() + limit;
    loop {
        let found = target
            .discover()
            .map_err(|e| failure(Exit::Failure, format!("cannot read discovery: {e}")))?;
        let transitional =
            matches!(&found, Discovered::Busy { holder: Some((_, t)) } if t == SERVICE_TRANSPORT);
        if !transitional || Instant::now() >= deadline {
            return Ok(found);
        }
        std::thread::sleep(POLL);
    }
}

fn standalone_conflict(target: &Target, info: &ConnectionInfo, action: &str) -> Failure {
    let what = if info.transport == "stdio" {
        "`protocol stdio`"
    } else {
        "a standalone `protocol serve`"
    };
    failure(
        Exit::Failure,
        format!(
            "{what} (pid {}, transport {}) is serving {}; {action}. It is not managed by \
             `nl2sh service` and is left running: stop it where it was started (Ctrl-C, or \
             `kill -TERM {}`), then use `{}`",
            info.pid,
            Shown::new(&info.transport),
            target.config_path.display(),
            info.pid,
            target.command("service start"),
        ),
    )
}

fn busy_failure(target: &Target, holder: &Option<(u32, String)>) -> Failure {
    let who = holder.as_ref().map_or_else(
        || "another process".to_owned(),
        |(pid, transport)| format!("pid {pid} (transport {})", Shown::new(transport)),
    );
    failure(
        Exit::Failure,
        format!(
            "state directory {} is held by {who} without a verified record for {}; it may \
             serve another configuration with the same state_dir. Nothing was changed",
            target.state.root.display(),
            target.config_path.display()
        ),
    )
}

fn start_locked(target: &Target, cfg: &Config) -> Result<(), Failure> {
    match settle(target, START_WAIT)? {
        Discovered::Live(info) if info.transport == SERVICE_TRANSPORT => {
            println!("The managed service is already running; nothing was started.");
            print!("{}", status_text(target, cfg, &Ok(Discovered::Live(info))));
            return Ok(());
        }
        Discovered::Live(info) => {
            return Err(standalone_conflict(
                target,
                &info,
                "the managed service was not started",
            ))
        }
        Discovered::Busy { holder } => return Err(busy_failure(target, &holder)),
        Discovered::Stale(_) | Discovered::Stopped => {}
    }
    let (log, offset) = service_log::open_for_start(&target.service_dir, &target.config_path)
        .map_err(|e| failure(Exit::Failure, e.to_string()))?;
    let mut child = spawn_service(target, cfg, log)?;
    let pid = child.id();
    let deadline = Instant::now() + START_WAIT;
    let mut live_since = None;
    loop {
        let exited = child
            .try_wait()
            .map_err(|e| failure(Exit::Failure, format!("cannot wait for pid {pid}: {e}")))?;
        let found = target.discover().ok();
        match (&found, exited) {
            // Announced, and its startup block (the token a user looks for) is in the log,
            // which a thread of the service copies there a moment later; a log that never
            // gets it (a full disk) does not hold the start up for long.
            (Some(Discovered::Live(info)), _)
                if info.pid == pid
                    && (crate::startup::holds_whole_block(&log_tail::log_since(
                        &target.log,
                        offset,
                    )) || live_since.get_or_insert_with(Instant::now).elapsed()
                        >= BLOCK_LOG_WAIT) =>
            {
                println!("Started the managed service.");
                print!(
                    "{}",
                    status_text(target, cfg, &Ok(Discovered::Live(info.clone())))
                );
                return Ok(());
            }
            // Another start won the state directory at the same moment: it runs.
            (Some(Discovered::Live(info)), Some(_)) if info.transport == SERVICE_TRANSPORT => {
                println!("The managed service is already running; nothing was started.");
                print!(
                    "{}",
                    status_text(target, cfg, &Ok(Discovered::Live(info.clone())))
                );
                return Ok(());
            }
            (_, Some(status)) => {
                remove_own_record(target, pid);
                return Err(failure(
                    Exit::Failure,
                    format!(
                        "the managed service exited during startup ({status}); nothing is left \
                         running. The end of {}:\n{}",
                        target.log.display(),
                        log_tail::log_tail(&target.log, offset)
                    ),
                ));
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            terminate(&mut child);
            remove_own_record(target, pid);
            return Err(failure(
                Exit::Failure,
                format!(
                    "the managed service (pid {pid}) did not announce itself within {} s and was \
                     stopped. The end of {}:\n{}",
                    START_WAIT.as_secs(),
                    target.log.display(),
                    log_tail::log_tail(&target.log, offset)
                ),
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// This binary as `protocol serve` on 0.0.0.0:<protocol_service_port>, detached.
fn spawn_service(target: &Target, cfg: &Config, log: File) -> Result<Child, Failure> {
    let err_log = log.try_clone().map_err(|e| {
        failure(
            Exit::Failure,
            format!("cannot use {}: {e}", target.log.display()),
        )
    })?;
    let mut cmd = detached_nl2sh(&target.config_path, log, err_log);
    cmd.args(["protocol", "serve", "--host", "0.0.0.0", "--port"])
        .arg(cfg.service_port().to_string())
        .arg("--managed-service");
    cmd.spawn().map_err(|e| {
        failure(
            Exit::Failure,
            format!("cannot start the managed service: {e}"),
        )
    })
}

/// This binary as `nl2sh --config <config_path> …`, detached (a session of its own, stdin
/// /dev/null, its output to `log`), to be given the rest of its arguments.
fn detached_nl2sh(config_path: &std::path::Path, log: File, err_log: File) -> Command {
    // This binary by its path, so the process is named nl2sh; /proc/self/exe if that path
    // is gone (replaced on disk while this command ran).
    let exe = std::env::current_exe()
        .ok()
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let mut cmd = Command::new(exe);
    cmd.arg0("nl2sh")
        .arg("--config")
        .arg(config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err_log))
        // Holds no mount busy; every path it uses is absolute.
        .current_dir("/");
    crate::sys::detach(&mut cmd);
    cmd
}

/// `nl2sh --config <config_path> service restart` in a session of its own, its output
/// appended to the service log: what the owner's "Restart now" runs from inside the
/// service it stops. The child's pid.
pub fn restart_in_background(config_path: &std::path::Path) -> io::Result<u32> {
    use std::os::unix::fs::OpenOptionsExt;
    let log_path = config::service_dir(config_path).join(service_log::LOG_NAME);
    let log = fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&log_path)?;
    let err_log = log.try_clone()?;
    let mut cmd = detached_nl2sh(config_path, log, err_log);
    cmd.args(["service", "restart"]);
    let child = cmd.spawn()?;
    let pid = child.id();
    // Not waited for here: it outlives this process, which it stops.
    drop(child);
    Ok(pid)
}

/// End a child that did not come up: SIGTERM (it drains), then its whole group.
fn terminate(child: &mut Child) {
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    let deadline = Instant::now() + STOP_WAIT;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
            return;
        }
        std::thread::sleep(POLL);
    }
    // It leads its own session and group; its workers are in that group.
    let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
    let _ = child.wait();
}

/// After a failed start: a record our child left (it was killed) goes too. Only when it
/// names that child and nothing holds the lock.
fn remove_own_record(target: &Target, pid: u32) {
    if let Ok(Discovered::Stale(info)) = target.discover() {
        if info.pid == pid {
            let _ = fs::remove_file(&target.state.connection_json);
        }
    }
}

fn stop_locked(target: &Target) -> Result<(), Failure> {
    match settle(target, STOP_WAIT)? {
        Discovered::Live(info) if info.transport == SERVICE_TRANSPORT => {
            signal_and_wait(target, &info)?;
            println!("Stopped the managed service (pid {}).", info.pid);
            Ok(())
        }
        Discovered::Live(info) => Err(standalone_conflict(
            target,
            &info,
            "`service stop` stops only the managed service",
        )),
        Discovered::Busy { holder } => Err(busy_failure(target, &holder)),
        Discovered::Stale(info) => {
            println!(
                "The managed service is not running (a stale record of pid {} is left; the \
                 next start replaces it).",
                info.pid
            );
            Ok(())
        }
        Discovered::Stopped => {
            println!("The managed service is not running.");
            Ok(())
        }
    }
}

/// The managed service's start identity: its pid and its start time (field 22 of
/// `/proc/<pid>/stat`), as discovery verifies a process. A pid alone can name a later
/// process: one a `service restart` started in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartIdentity {
    pub pid: u32,
    pub start_time: u64,
}

/// The managed service running for `config_path` now, by its start identity.
pub fn running_identity(config_path: &std::path::Path) -> Option<StartIdentity> {
    let (cfg, _) = config::load_for_discovery(config_path);
    match Target::new(config_path.to_owned(), &cfg).discover() {
        Ok(Discovered::Live(info)) if info.transport == SERVICE_TRANSPORT => Some(StartIdentity {
            pid: info.pid,
            start_time: info.start_time,
        }),
        _ => None,
    }
}

/// What [`stop_if_same`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopIfSame {
    /// It was that process: it is stopped.
    Stopped,
    /// Nothing runs any more.
    Gone,
    /// Another process serves now (pid): it is left running.
    Other(u32),
}

/// Stops the managed service for `config_path` only when it is still the process
/// `started` (a console stops the service it started, never one a `service restart`
/// elsewhere put in its place). Under the control lock, so no start or restart runs
/// between the check and the signal. Prints nothing (the console owns the terminal).
pub fn stop_if_same(
    config_path: &std::path::Path,
    started: StartIdentity,
) -> Result<StopIfSame, String> {
    let (cfg, _) = config::load_for_discovery(config_path);
    let target = Target::new(config_path.to_owned(), &cfg);
    if !target.service_dir.exists() {
        return Ok(StopIfSame::Gone);
    }
    let _control = control_lock(&target).map_err(|f| f.message)?;
    match settle(&target, STOP_WAIT).map_err(|f| f.message)? {
        Discovered::Live(info)
            if info.pid == started.pid
                && info.start_time == started.start_time
                && info.transport == SERVICE_TRANSPORT =>
        {
            signal_and_wait(&target, &info).map_err(|f| f.message)?;
            Ok(StopIfSame::Stopped)
        }
        Discovered::Live(info) => Ok(StopIfSame::Other(info.pid)),
        Discovered::Busy { holder } => {
            Ok(holder.map_or(StopIfSame::Gone, |(pid, _)| StopIfSame::Other(pid)))
        }
        Discovered::Stale(_) | Discovered::Stopped => Ok(StopIfSame::Gone),
    }
}

/// SIGTERM to the announced process (it cancels its tasks, drains and closes its
/// listeners), then wait for it to exit and release the state directory.
fn signal_and_wait(target: &Target, info: &ConnectionInfo) -> Result<(), Failure> {
    // A pidfd names one process; verified after opening it, the signal can only reach
    // the verified process, never a later one that reused the pid.
    let pidfd = libc::pid_t::try_from(info.pid)
        .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))
        .and_then(pidfd::pidfd_open);
    if !state::process_is_live(info.pid, info.start_time) {
        return Ok(()); // it ended on its own meanwhile
    }
    let sent = match &pidfd {
        Ok(fd) => pidfd::pidfd_send_signal(fd.as_fd(), libc::SIGTERM),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(()),
        // No pidfd here (kernels before 5.3, or a seccomp filter that refuses it): the
        // identity was verified just now.
        Err(_) => i32::try_from(info.pid)
            .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))
            .and_then(|pid| kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(io::Error::from)),
    };
    match sent {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(()),
        Err(e) => {
            return Err(failure(
                Exit::Failure,
                format!("cannot signal the managed service (pid {}): {e}", info.pid),
            ))
        }
    }
    let deadline = Instant::now() + STOP_WAIT;
    loop {
        let gone = !state::process_is_live(info.pid, info.start_time)
            && !state::lock_is_held(&target.state).unwrap_or(true);
        if gone {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(failure(
                Exit::Failure,
                format!(
                    "the managed service (pid {}) did not exit within {} s of SIGTERM; it is \
                     still draining or stuck. `kill -KILL {}` ends it without draining",
                    info.pid,
                    STOP_WAIT.as_secs(),
                    info.pid
                ),
            ));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(transport: &str) -> ConnectionInfo {
        ConnectionInfo {
            pid: 4242,
            start_time: 1,
            uid: 0,
            config_path: "/c/config.toml".into(),
            transport: transport.into(),
            mcp_url: Some("http://127.0.0.7:8765/mcp".into()),
            a2a_url: Some("http://127.0.0.7:8765/a2a".into()),
            agent_card_url: Some("http://127.0.0.7:8765/.well-known/agent-card.json".into()),
            token: Some("secret-token-value-0123456789abcdef".into()),
            version: Some("9.9.9".into()),
            started_at_ms: Some(0),
            listen: Some("0.0.0.0:8765".into()),
            restarts: 2,
            last_restart_cause: Some("executor (pid 7) killed by signal 9".into()),
            web_url: None,
            web_listen: None,
            token_source: Some("generated".into()),
            requested_port: Some(8765),
        }
    }

    fn target() -> Target {
        Target::new(PathBuf::from("/c/config.toml"), &Config::default())
    }

    #[test]
    fn status_output_never_holds_the_token() {
        let t = target();
        let live = Ok(Discovered::Live(info(SERVICE_TRANSPORT)));
        let text = status_text(&t, &Config::default(), &live);
        let json = status_json(&t, &live).to_string();
        for out in [&text, &json] {
            assert!(!out.contains("secret-token-value"), "{out}");
        }
        assert!(
            text.contains("Status:     running (managed service)"),
            "{text}"
        );
        assert!(
            text.contains("MCP URL:    http://127.0.0.7:8765/mcp"),
            "{text}"
        );
        assert!(
            text.contains("Since:      1970-01-01T00:00:00.000Z"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["running"], true);
        assert_eq!(v["managed"], true);
        assert_eq!(
            v["connections"][0]["card_url"],
            "http://127.0.0.7:8765/.well-known/agent-card.json"
        );
        assert_eq!(v["connections"][0]["pid"], 4242);
        assert_eq!(v["connections"][0]["version"], "9.9.9");
        assert_eq!(t.log, PathBuf::from("/c/config.service/service.log"));
    }

    #[test]
    fn stdio_claims_no_http_and_stale_is_not_running() {
        let t = target();
        let mut stdio = info("stdio");
        stdio.mcp_url = None;
        stdio.a2a_url = None;
        stdio.agent_card_url = None;
        stdio.listen = None;
        let found = Ok(Discovered::Live(stdio));
        let text = status_text(&t, &Config::default(), &found);
        assert!(!text.contains("http://"), "{text}");
        assert!(text.contains("no HTTP"), "{text}");
        let v = status_json(&t, &found);
        assert_eq!(v["connections"][0]["transport"], "stdio");
        assert!(v["connections"][0]["mcp_url"].is_null());
        assert_eq!(v["managed"], false);

        let stale = Ok(Discovered::Stale(info(SERVICE_TRANSPORT)));
        let v = status_json(&t, &stale);
        assert_eq!(
            (v["running"].as_bool(), v["stale"].as_bool()),
            (Some(false), Some(true))
        );
        assert_eq!(v["connections"].as_array().map(Vec::len), Some(0));
        let text = status_text(&t, &Config::default(), &stale);
        assert!(
            text.contains("not running (stale record: pid 4242"),
            "{text}"
        );
        // Stopped: a clearly labelled loopback example, and how to turn the switch on.
        let text = status_text(&t, &Config::default(), &Ok(Discovered::Stopped));
        assert!(
            text.contains("http://127.0.0.1:8765/mcp (default loopback example"),
            "{text}"
        );
        assert!(
            text.contains("config set protocol_start_with_service true"),
            "{text}"
        );
    }
}
