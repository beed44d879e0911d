//! What a tool is, as the runtime's pipeline sees it: its registration ([`ToolDef`]), the
//! action it prepares ([`Prepared`]) with the function that runs it, the context that
//! function runs in ([`ExecContext`]: the bound identity or the read-only sandbox, the
//! deadline, cancellation) and what it answers ([`ToolOutput`], [`ToolError`]).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::{Attachment, Confinement, Identity, ParsedCommand, SandboxPayload};
use nl2sh_proto::read_sources::ReadSources;

use super::readers;
use crate::device::DeviceEnv;
use crate::exec;
use crate::risk::Assessment;
use crate::sandbox::{Sandbox, SandboxError};

/// A tool's registration: what callers see in the catalog.
pub struct ToolDef {
    /// Dotted name, at most `MAX_TOOL_NAME_BYTES`.
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema (2020-12 subset understood by [`super::schema`]) of the arguments object.
    pub schema: Value,
}

/// A registered tool.
pub trait Tool: Send + Sync {
    fn def(&self) -> &ToolDef;
    /// Turn validated arguments into an exact action. Called once per call; performs no
    /// side effect (it may look at the file system to resolve paths).
    fn prepare(
        &self,
        args: &Map<String, Value>,
        env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError>;

    /// Whether `prepare` may wait on the file system (resolving every path a command line
    /// names): the pipeline then runs it on a reader ([`readers`]), off the async thread.
    fn prepare_waits_on_files(&self) -> bool {
        false
    }
}

/// What the pipeline needs to decide about and run one action.
pub struct Prepared {
    /// The action exactly as it will run (shown to approvers and audited).
    pub action: String,
    pub assessment: Assessment,
    pub identity: Identity,
    /// Where it runs if it runs without asking: the sandbox for what the caller chose
    /// (a command line, a path), fixed for the tool's own operations.
    pub confinement: Confinement,
    pub resources: Vec<Resource>,
    pub timeout: Duration,
    /// For a command line: the commands it runs, for scoped grants to match
    /// ([`crate::risk::assess_shell_commands`]); `None` for every other action.
    pub commands: Option<Vec<ParsedCommand>>,
    /// What the action carries that its one line cannot show (an `fs.write`'s content),
    /// shown whole to the owner.
    pub data: Option<nl2sh_proto::channels::ActionData>,
    /// For a UI action: the app in front while it was prepared (a timed UI grant names
    /// it). `None` for every other action.
    pub ui_app: Option<String>,
    /// The action as the caller sent it where `action` shows it otherwise (a command
    /// line inside the shell's argv): the owner reads this first.
    pub sent: Option<String>,
    pub run: RunFn,
}

impl Prepared {
    /// The same action, its successful output saying it carries `source`'s text (a read
    /// file's path), for the Agent's later approval requests.
    pub fn reading_from(mut self, source: String) -> Self {
        let run = self.run;
        self.run = Box::new(move |ctx| {
            Box::pin(async move { run(ctx).await.map(|out| out.read_from([source.as_str()])) })
        });
        self
    }
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub type RunFn = Box<dyn FnOnce(ExecContext) -> BoxFuture<Result<ToolOutput, ToolError>> + Send>;

/// A tool's result before it becomes a `ToolOutcome`.
#[derive(Debug, Clone, Default)]
pub struct ToolOutput {
    pub success: bool,
    /// Usually a JSON object's text.
    pub output: String,
    pub attachments: Vec<Attachment>,
    pub exit_code: Option<i32>,
    /// Whose text the output carries (the apps of a screen or notification read, a read
    /// file's path), for the Agent's later approval requests.
    pub read_from: ReadSources,
}

impl ToolOutput {
    pub fn json(success: bool, value: &Value) -> Self {
        Self {
            success,
            output: value.to_string(),
            ..Self::default()
        }
    }

    /// The same output, saying whose text it carries.
    pub fn read_from<'s>(mut self, sources: impl IntoIterator<Item = &'s str>) -> Self {
        let sources: Vec<&str> = sources.into_iter().collect();
        for source in sources.iter().rev() {
            self.read_from.note(source);
        }
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Exec(#[from] exec::ExecError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// Everything a run function may use: the bound identity (or the sandbox), the deadline,
/// cancellation.
pub struct ExecContext {
    pub identity: Identity,
    pub setup: crate::sys::ChildSetup,
    /// Set when the action runs because it was assessed read-only and nobody was asked:
    /// then whatever the caller chose runs in the read-only sandbox.
    pub sandbox: Option<Arc<Sandbox>>,
    pub deadline: Instant,
    pub cancel: CancellationToken,
    pub groups: Arc<exec::ProcessGroups>,
    pub env: Arc<DeviceEnv>,
}

/// Largest JSON answer of a sandboxed file operation (a 32 KiB read in base64, or a
/// listing of 1000 entries).
const MAX_SANDBOX_JSON_BYTES: usize = 512 * 1024;

impl ExecContext {
    /// Whether this call runs in the read-only sandbox.
    pub fn sandboxed(&self) -> bool {
        self.sandbox.is_some()
    }

    /// Run a command under this call's identity (or in the sandbox), deadline and
    /// cancellation.
    pub async fn run(&self, spec: exec::CommandSpec) -> Result<exec::CommandOutput, ToolError> {
        match &self.sandbox {
            Some(sandbox) => {
                let run = self.sandbox_run(
                    spec.cwd.as_deref(),
                    spec.stdin,
                    spec.max_stdout,
                    spec.max_stderr,
                );
                Ok(sandbox
                    .run(SandboxPayload::Exec { argv: spec.argv }, run)
                    .await?)
            }
            None => Ok(exec::run(
                spec,
                self.setup,
                self.deadline,
                &self.cancel,
                &self.groups,
                self.env.path_var.as_deref(),
            )
            .await?),
        }
    }

    fn sandbox_run<'a>(
        &'a self,
        cwd: Option<&'a std::path::Path>,
        stdin: Option<Vec<u8>>,
        max_stdout: usize,
        max_stderr: usize,
    ) -> crate::sandbox::Run<'a> {
        crate::sandbox::Run {
            cwd,
            stdin,
            max_stdout,
            max_stderr,
            deadline: self.deadline,
            cancel: &self.cancel,
            groups: &self.groups,
            path_var: self.env.path_var.as_deref(),
        }
    }

    /// A file operation as the sandbox identity: its JSON answer, or its error.
    pub async fn sandboxed_json(
        &self,
        sandbox: &Sandbox,
        payload: SandboxPayload,
    ) -> Result<Value, ToolError> {
        let run = self.sandbox_run(None, None, MAX_SANDBOX_JSON_BYTES, 4096);
        let out = sandbox.run(payload, run).await?;
        if out.timed_out {
            return Err(ToolError::Failed("timed out".into()));
        }
        let answer: Value = serde_json::from_slice(&out.stdout.bytes).map_err(|_| {
            ToolError::Failed(format!(
                "the sandboxed operation failed: {}",
                out.stderr.text().trim()
            ))
        })?;
        match answer.get("error").and_then(Value::as_str) {
            Some(error) => Err(ToolError::Failed(format!(
                "{error} (read in the read-only sandbox)"
            ))),
            None => Ok(answer),
        }
    }

    /// Run a blocking file-system operation off the async thread, on a reader
    /// ([`readers`]).
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        readers::run(f)
            .await
            .map_err(|e| ToolError::Failed(format!("operation aborted: {e}")))?
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
/// What a prepared action holds while it runs ([`Prepared::resources`]); the runtime's
/// locks (`runtime/locks.rs`) keep two calls from holding one at once.
pub enum Resource {
    /// The device screen and UI automation.
    Screen,
    /// A file-system path being written.
    Path(PathBuf),
}

impl Resource {
    pub(crate) fn describe(&self) -> String {
        match self {
            Resource::Screen => "the screen".into(),
            Resource::Path(p) => p.display().to_string(),
        }
    }
}
