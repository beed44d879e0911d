//! The read-only sandbox: where actions run that run without asking anyone (assessed
//! read-only, no person, grant, auto-approve or policy allowance for a mutation). The
//! assessment only decides when to ask; the kernel makes what runs unasked harmless:
//!
//! * its own mount namespace with every mount read-only, a minimal `/dev`, a throwaway
//!   scratch tmpfs as `TMPDIR`, and nl2sh's own files plus [`masks::SECRET_LOCATIONS`]
//!   masked ([`mounts`]);
//! * an unprivileged identity (`sandbox_uid`/`sandbox_gid`) with no groups,
//!   no_new_privs and only `CAP_DAC_READ_SEARCH` ([`confine`]);
//! * a seccomp filter ([`seccomp`]) and Landlock where the kernel has it;
//! * its own PID namespace, so nothing it starts outlives it.
//!
//! Every sandboxed action is one run of the helper (`nl2sh __nl2sh-sandbox`,
//! [`helper`]), a fresh exec of nl2sh that sets all this up and then runs the payload.
//! If the essential parts (identity, capabilities, no_new_privs, mount namespace) are
//! unavailable, [`Sandbox::availability`] says so and the pipeline asks a person instead
//! of running anything unconfined.

pub mod confine;
pub mod helper;
pub mod masks;
pub mod mounts;
pub mod seccomp;

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::{Gid, SandboxPayload, SandboxPlan, Uid};

use crate::runtime::exec::{self, CommandOutput, ExecError, ProcessGroups};

/// First argument of the helper role; never typed by users.
pub const HELPER_ARG: &str = "__nl2sh-sandbox";
/// Exit status of the helper when the sandbox could not be set up (nothing ran).
pub const SETUP_FAILED: u8 = 125;
/// Start of the helper's one stderr line when setting up failed.
pub const SETUP_MARKER: &str = "nl2sh sandbox: ";
/// Size of the scratch tmpfs (`TMPDIR`) of one sandboxed action.
pub const DEFAULT_SCRATCH_BYTES: u64 = 64 * 1024 * 1024;
/// How long the start-up probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// How sandboxed actions are started and who they run as.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The command that starts the helper: nl2sh's executable and [`HELPER_ARG`]. Tests
    /// put it inside namespaces they own (`unshare --net --uts …`).
    pub helper: Vec<OsString>,
    pub uid: Uid,
    pub gid: Gid,
    /// nl2sh's own files (configuration, state directory), masked besides the table.
    pub own_files: Vec<String>,
    pub scratch_bytes: u64,
}

impl SandboxSettings {
    /// The executor's settings: the helper is the executor's own executable.
    pub fn for_executor(uid: Uid, gid: Gid, own_files: Vec<String>) -> Self {
        Self {
            helper: vec!["/proc/self/exe".into(), HELPER_ARG.into()],
            uid,
            gid,
            own_files,
            scratch_bytes: DEFAULT_SCRATCH_BYTES,
        }
    }
}

/// Whether sandboxed actions can run here, and which parts are active.
#[derive(Debug, Clone)]
pub enum Availability {
    /// The parts, as reported by the probe (an object for `nl2sh_inspect`).
    Ready(Value),
    /// Why not; unasked actions that would need the sandbox ask a person instead.
    Unavailable(String),
}

impl Availability {
    pub fn is_ready(&self) -> bool {
        matches!(self, Availability::Ready(_))
    }

    /// The object `nl2sh_inspect` shows.
    pub fn to_json(&self) -> Value {
        match self {
            Availability::Ready(parts) => {
                let mut v = parts.clone();
                v["active"] = Value::Bool(true);
                v
            }
            Availability::Unavailable(why) => serde_json::json!({
                "active": false,
                "reason": why,
                "effect": "read-only commands and file reads wait for local approval",
            }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the read-only sandbox is unavailable: {0}")]
    Unavailable(String),
    #[error("the read-only sandbox could not be set up, so nothing ran: {0}")]
    Setup(String),
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// What one sandboxed action needs besides its payload.
pub struct Run<'a> {
    pub cwd: Option<&'a Path>,
    pub stdin: Option<Vec<u8>>,
    pub max_stdout: usize,
    pub max_stderr: usize,
    pub deadline: Instant,
    pub cancel: &'a CancellationToken,
    pub groups: &'a ProcessGroups,
    pub path_var: Option<&'a str>,
}

pub struct Sandbox {
    settings: SandboxSettings,
    availability: tokio::sync::OnceCell<Availability>,
}

impl Sandbox {
    pub fn new(settings: SandboxSettings) -> Self {
        Self {
            settings,
            availability: tokio::sync::OnceCell::new(),
        }
    }

    /// Probe once (the first caller waits for it), then answer from memory.
    pub async fn availability(&self) -> &Availability {
        self.availability.get_or_init(|| self.probe()).await
    }

    async fn probe(&self) -> Availability {
        let euid = nix::unistd::geteuid().as_raw();
        let found = if euid != 0 {
            Availability::Unavailable(format!(
                "nl2sh runs as uid {euid}, not root, so it cannot switch to the sandbox identity"
            ))
        } else if self.settings.uid.0 == 0 || self.settings.gid.0 == 0 {
            Availability::Unavailable("sandbox_uid and sandbox_gid must not be 0".into())
        } else {
            let cancel = CancellationToken::new();
            let groups = ProcessGroups::default();
            let run = Run {
                cwd: None,
                stdin: None,
                max_stdout: 16 * 1024,
                max_stderr: 4 * 1024,
                deadline: Instant::now() + PROBE_TIMEOUT,
                cancel: &cancel,
                groups: &groups,
                path_var: None,
            };
            match self.run(SandboxPayload::Probe, run).await {
                Ok(out) if out.success() => {
                    match serde_json::from_slice::<Value>(&out.stdout.bytes) {
                        Ok(mut parts) if parts.is_object() => {
                            let exposed = dumpable_processes_of(self.settings.uid);
                            if !exposed.is_empty() {
                                parts["shared_uid"] = serde_json::json!(format!(
                                    "{} other process(es) run as uid {} and can be inspected \
                                     by it (pids {:?}): through their /proc/<pid>/root a \
                                     sandboxed command reads the device's files without the \
                                     masks; set sandbox_uid to a uid nothing else uses",
                                    exposed.len(),
                                    self.settings.uid.0,
                                    exposed
                                ));
                            }
                            Availability::Ready(parts)
                        }
                        _ => Availability::Unavailable(format!(
                            "the probe answered {:?}",
                            out.stdout.text()
                        )),
                    }
                }
                Ok(out) => Availability::Unavailable(format!(
                    "the probe failed ({}): {}",
                    describe_status(&out),
                    out.stderr.text().trim()
                )),
                Err(e) => Availability::Unavailable(e.to_string()),
            }
        };
        match &found {
            Availability::Ready(parts) => {
                tracing::info!(parts = %parts, "read-only sandbox active")
            }
            Availability::Unavailable(why) => tracing::warn!(
                reason = %why,
                "read-only sandbox unavailable: read-only commands will wait for local approval"
            ),
        }
        found
    }

    /// The plan for one action.
    fn plan(&self, payload: SandboxPayload, cwd: Option<&Path>) -> SandboxPlan {
        SandboxPlan {
            uid: self.settings.uid,
            gid: self.settings.gid,
            masks: masks::patterns(&self.settings.own_files),
            scratch_bytes: self.settings.scratch_bytes,
            cwd: cwd.map(|c| c.display().to_string()),
            payload,
        }
    }

    /// Run `payload` in the sandbox. A helper that could not set the sandbox up is a
    /// [`SandboxError::Setup`]; the payload's own failure is an ordinary output.
    pub async fn run(
        &self,
        payload: SandboxPayload,
        run: Run<'_>,
    ) -> Result<CommandOutput, SandboxError> {
        let Some((program, args)) = self.settings.helper.split_first() else {
            return Err(SandboxError::Unavailable("no helper configured".into()));
        };
        let frame = nl2sh_proto::frame::encode(0, &self.plan(payload, run.cwd))
            .map_err(|e| SandboxError::Setup(format!("encoding the plan: {e}")))?;
        let mut stdin = frame;
        stdin.extend(run.stdin.unwrap_or_default());
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        exec::own_group(&mut cmd);
        let out = exec::run_command(
            cmd,
            exec::Io {
                stdin: Some(stdin),
                max_stdout: run.max_stdout,
                max_stderr: run.max_stderr,
                path_var: run.path_var,
            },
            run.deadline,
            run.cancel,
            run.groups,
        )
        .await?;
        if out.exit_code == Some(i32::from(SETUP_FAILED)) {
            if let Some(why) = String::from_utf8_lossy(&out.stderr.bytes)
                .lines()
                .find_map(|l| l.strip_prefix(SETUP_MARKER))
            {
                return Err(SandboxError::Setup(why.to_string()));
            }
        }
        Ok(out)
    }
}

/// Processes (at most 16 named) running as `uid` whose `/proc` entries that uid can open
/// (they are dumpable, so owned by `uid`): another process of the sandbox identity could
/// reach into them, and through `/proc/<pid>/root` into the unmasked mount namespace.
pub fn dumpable_processes_of(uid: Uid) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == uid.0))
        .take(16)
        .collect()
}

fn describe_status(out: &CommandOutput) -> String {
    match (out.exit_code, out.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ if out.timed_out => "timed out".into(),
        _ => "no status".into(),
    }
}
