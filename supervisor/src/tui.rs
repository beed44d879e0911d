//! `nl2sh` with no subcommand, on a terminal: the owner's terminal console
//! (docs/CLI.md, "The terminal console"). The screens are the `nl2sh-tui` crate's; this
//! module is what they ask of the device, answered the way the CLI commands answer:
//! discovery as `service status` reads it, approvals over `protocol/approvals.sock` like
//! `protocol approve` (so approvald's peer check applies: a tool command running this
//! console is refused), tasks from approvald over the same socket, settings through the
//! same editor as `config set`, and the managed service started and stopped by
//! `service start`/`stop`.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use nl2sh_proto::channels::{
    ApprovalId, CallOrigin, CliErrorKind, CliRequest, CliResponse, ContextId, PendingApproval,
    ProtocolStatus, SettingView, TaskId, TaskRecord, UiGrant,
};
use nl2sh_tui::{Device, DeviceError, DeviceErrorKind, Saved, Stopped};

use crate::config;
use crate::discovery::Discovery;
use crate::exit::Exit;
use crate::local::{ask, runtime, state_paths};
use crate::service::{self, StartIdentity, StopIfSame};
use crate::state::{self, Discovered, StatePaths};
use nl2sh_approvald::config_edit::{self, SavedSetting, SettingRefused};

/// What the terminal console asks of this device.
pub struct LocalDevice {
    config_path: PathBuf,
    paths: StatePaths,
    discovery: Discovery,
    rt: tokio::runtime::Runtime,
    /// The start identity of the service this console started (and may stop).
    started: std::cell::Cell<Option<StartIdentity>>,
}

fn failed(message: impl std::fmt::Display) -> DeviceError {
    DeviceError {
        kind: DeviceErrorKind::Failed,
        message: message.to_string(),
    }
}

/// Reaching approvald failed (exit code and message, as the CLI reports it).
fn cli_failure((code, message): (Exit, String)) -> DeviceError {
    let kind = match code {
        Exit::NotRunning => DeviceErrorKind::NotRunning,
        Exit::Refused => DeviceErrorKind::Refused,
        _ => DeviceErrorKind::Failed,
    };
    DeviceError { kind, message }
}

/// approvald's refusal as the console's error kind.
fn refusal(kind: CliErrorKind, message: String) -> DeviceError {
    let kind = match kind {
        CliErrorKind::NoSuchRequest => DeviceErrorKind::NoSuchRequest,
        CliErrorKind::Expired => DeviceErrorKind::Expired,
        CliErrorKind::PhraseRequired => DeviceErrorKind::PhraseRequired,
        CliErrorKind::WrongPhrase => DeviceErrorKind::WrongPhrase,
        CliErrorKind::InvalidRequest => DeviceErrorKind::Invalid,
        CliErrorKind::Unavailable => DeviceErrorKind::Failed,
        CliErrorKind::NoAgent => DeviceErrorKind::NotRunning,
    };
    // The console shows it through the one escaping function.
    DeviceError { kind, message }
}

impl LocalDevice {
    pub fn open(config_arg: Option<PathBuf>) -> Result<LocalDevice, String> {
        let (config_path, paths) = state_paths(config_arg)?;
        let rt = runtime().map_err(|_| "cannot start the runtime".to_owned())?;
        let absolute = config::absolute(&config_path);
        let discovery = Discovery {
            paths: paths.clone(),
            identity: config::identity(&absolute),
            config_path: config_path.clone(),
        };
        Ok(LocalDevice {
            config_path,
            paths,
            discovery,
            rt,
            started: std::cell::Cell::new(None),
        })
    }

    fn cli(&self, request: CliRequest) -> Result<CliResponse, DeviceError> {
        let answer = self
            .rt
            .block_on(ask(&self.config_path, &self.paths.approvals_sock, request))
            .map_err(cli_failure)?;
        match answer {
            CliResponse::Error { kind, message } => Err(refusal(kind, message)),
            other => Ok(other),
        }
    }

    /// `nl2sh --config P service ARGS` (its own process: what it prints must not reach
    /// the console's screen), its output kept for the message.
    fn service(&self, args: &[&str]) -> Result<String, DeviceError> {
        let exe = std::env::current_exe().map_err(failed)?;
        let out = Command::new(exe)
            .arg("--config")
            .arg(&self.config_path)
            .arg("service")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(failed)?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(failed(text.trim()))
        }
    }

    /// After `service start` or `restart` printed `out`: the start identity of the
    /// process it started, when it started one and that one runs now (the `PID` it
    /// printed is the one discovery finds).
    fn started_by(&self, out: &str) -> Option<StartIdentity> {
        // `restart` prints the stop first.
        if !out.lines().any(|l| l == "Started the managed service.") {
            return None;
        }
        let pid: u32 = out
            .lines()
            .find_map(|l| l.strip_prefix("PID:")?.trim().parse().ok())?;
        service::running_identity(&self.config_path).filter(|id| id.pid == pid)
    }
}

impl Device for LocalDevice {
    fn status(&self) -> ProtocolStatus {
        self.discovery.status()
    }

    fn pending(&self) -> Result<Vec<PendingApproval>, DeviceError> {
        match self.cli(CliRequest::ListPending)? {
            CliResponse::Pending(list) => Ok(list),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn decide(&self, id: &str, approve: bool, phrase: Option<&str>) -> Result<(), DeviceError> {
        let id = ApprovalId(id.to_owned());
        let request = if approve {
            CliRequest::Approve {
                id,
                phrase: phrase.map(str::to_owned),
            }
        } else {
            CliRequest::Reject { id }
        };
        match self.cli(request)? {
            CliResponse::Done => Ok(()),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn reject_origin(&self, origin: CallOrigin) -> Result<Vec<PendingApproval>, DeviceError> {
        match self.cli(CliRequest::RejectOrigin { origin })? {
            CliResponse::Rejected(list) => Ok(list),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn approve_for_ui(
        &self,
        id: &str,
        phrase: Option<&str>,
        minutes: u32,
    ) -> Result<(), DeviceError> {
        let request = CliRequest::ApproveForUi {
            id: ApprovalId(id.to_owned()),
            phrase: phrase.map(str::to_owned),
            minutes,
        };
        match self.cli(request)? {
            CliResponse::Done => Ok(()),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn ui_grants(&self) -> Result<Vec<UiGrant>, DeviceError> {
        match self.cli(CliRequest::UiGrants)? {
            CliResponse::UiGrants(list) => Ok(list),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn revoke_ui_grant(&self, id: &str) -> Result<(), DeviceError> {
        match self.cli(CliRequest::RevokeUiGrant { id: id.to_owned() })? {
            CliResponse::Done => Ok(()),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn grants(&self) -> Result<Vec<String>, DeviceError> {
        let cfg = config::load(&self.config_path, true).map_err(failed)?;
        Ok(cfg
            .approval_grants
            .iter()
            .map(nl2sh_approvald::owner::grant_line)
            .collect())
    }

    fn tasks(&self, limit: u32) -> Result<Vec<TaskRecord>, DeviceError> {
        match self.cli(CliRequest::Tasks { limit })? {
            CliResponse::Tasks(list) => Ok(list),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn task(&self, id: &TaskId) -> Result<TaskRecord, DeviceError> {
        match self.cli(CliRequest::Task { id: id.clone() })? {
            CliResponse::Task(Some(task)) => Ok(task),
            CliResponse::Task(None) => Err(DeviceError {
                kind: DeviceErrorKind::Invalid,
                message: "no such task".into(),
            }),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn settings(&self) -> Result<Vec<SettingView>, DeviceError> {
        config_edit::settings(&self.config_path).map_err(failed)
    }

    fn save_setting(&self, key: &str, value: &str) -> Result<Saved, DeviceError> {
        let running = || crate::config_edit::running(&self.config_path);
        saved(config_edit::save_setting(
            &self.config_path,
            key,
            value,
            &running,
        ))
    }

    fn rotate_token(&self) -> Result<(nl2sh_proto::Secret, Saved), DeviceError> {
        let running = || crate::config_edit::running(&self.config_path);
        let (token, setting) = config_edit::rotate_token(&self.config_path, &running)
            .map_err(|e| saved(Err(e)).err().unwrap_or_else(|| failed(String::new())))?;
        Ok((token, saved(Ok(setting))?))
    }

    fn start_with_service(&self) -> bool {
        config::load_for_discovery(&self.config_path)
            .0
            .protocol_start_with_service
    }

    fn start_protocols(&self) -> Result<bool, DeviceError> {
        let identity = config::identity(&config::absolute(&self.config_path));
        if matches!(
            state::discover(&self.paths, &identity),
            Ok(Discovered::Live(_))
        ) {
            return Ok(false); // reused, never stopped by the console
        }
        let out = self.service(&["start"])?;
        let started = self.started_by(&out);
        self.started.set(started);
        Ok(started.is_some())
    }

    fn stop_protocols(&self) -> Result<Stopped, DeviceError> {
        let Some(started) = self.started.get() else {
            return Ok(Stopped::Gone);
        };
        let stopped = service::stop_if_same(&self.config_path, started).map_err(failed)?;
        self.started.set(None);
        Ok(match stopped {
            StopIfSame::Stopped => Stopped::Stopped,
            StopIfSame::Gone => Stopped::Gone,
            StopIfSame::Other(pid) => Stopped::Replaced(pid),
        })
    }

    fn owns_service(&self) -> bool {
        self.started
            .get()
            .is_some_and(|id| service::running_identity(&self.config_path) == Some(id))
    }

    fn restart_protocols(&self) -> Result<(), DeviceError> {
        let owned = self.owns_service();
        let out = self.service(&["restart"])?;
        if owned {
            self.started.set(self.started_by(&out));
        }
        Ok(())
    }

    fn model_missing(&self) -> Option<String> {
        // The key is read from the service's environment, which this process cannot see:
        // a missing key shows as the task's failure, with the same words.
        let (cfg, _) = config::load_for_discovery(&self.config_path);
        cfg.model.is_none().then(|| {
            format!(
                "[model]\nmodel = \"gpt-4.1-mini\"\napi_key_env = \"OPENAI_API_KEY\"\n\
                 (in {}; docs/CONFIGURATION.md has every key), then restart the service.",
                self.config_path.display()
            )
        })
    }

    fn ask(
        &self,
        context: Option<&ContextId>,
        text: &str,
    ) -> Result<(TaskId, ContextId), DeviceError> {
        let request = CliRequest::Ask {
            context_id: context.cloned(),
            text: text.to_owned(),
        };
        match self.cli(request)? {
            CliResponse::Asked { id, context_id } => Ok((id, context_id)),
            _ => Err(failed("approvald answered out of place")),
        }
    }

    fn cancel_task(&self, id: &TaskId) -> Result<(), DeviceError> {
        match self.cli(CliRequest::CancelTask { id: id.clone() })? {
            CliResponse::Done => Ok(()),
            _ => Err(failed("approvald answered out of place")),
        }
    }
}

fn saved(result: Result<SavedSetting, SettingRefused>) -> Result<Saved, DeviceError> {
    match result {
        Ok(s) => Ok(Saved {
            message: s.message,
            restart_needed: s.restart_needed,
        }),
        Err(SettingRefused::Invalid(message)) => Err(DeviceError {
            kind: DeviceErrorKind::Invalid,
            message,
        }),
        Err(SettingRefused::Failed(message)) => Err(failed(message)),
    }
}

/// Whether stdin and stdout are both terminals: the console needs a person at one.
pub fn on_a_terminal() -> bool {
    nix::unistd::isatty(std::io::stdin()).unwrap_or(false)
        && nix::unistd::isatty(std::io::stdout()).unwrap_or(false)
}

/// Open the console for the configuration.
pub fn run(config_arg: Option<PathBuf>) -> ExitCode {
    let device = match LocalDevice::open(config_arg) {
        Ok(d) => d,
        Err(e) => return crate::local::fail(Exit::Failure, e),
    };
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb");
    nl2sh_tui::run(&device, nl2sh_tui::Options { color })
}
