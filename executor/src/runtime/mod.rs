//! The Tool Runtime: one pipeline for every call, in this order —
//! registration → argument validation → preparation → risk assessment → resource locks →
//! approval → privilege binding → execution → audit.
//!
//! A tool only registers (name, description, schema) and prepares (turns validated
//! arguments into an exact action with its assessment, identity, resources and a run
//! function). Everything else is here, shared by every tool.

pub mod authority;
pub mod exec;
pub mod locks;
pub mod outbox;
pub mod pipeline;
pub mod readers;
pub mod schema;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::{Attachment, Confinement, Identity, ParsedCommand, SandboxPayload};

use crate::device::DeviceEnv;
use crate::risk::Assessment;
use crate::sandbox::{Sandbox, SandboxError};

/// A tool's registration: what callers see in the catalog.
pub struct ToolDef {
    /// Dotted name, at most `MAX_TOOL_NAME_BYTES`.
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema (2020-12 subset understood by [`schema`]) of the arguments object.
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
    pub resources: Vec<locks::Resource>,
    pub timeout: Duration,
    /// For a command line: the commands it runs, for scoped grants to match
    /// ([`crate::risk::assess_shell_commands`]); `None` for every other action.
    pub commands: Option<Vec<ParsedCommand>>,
    /// What the action carries that its one line cannot show (an `fs.write`'s content),
    /// shown whole to the owner.
    pub data: Option<nl2sh_proto::channels::ActionData>,
    pub run: RunFn,
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
}

impl ToolOutput {
    pub fn json(success: bool, value: &Value) -> Self {
        Self {
            success,
            output: value.to_string(),
            ..Self::default()
        }
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

/// Argument accessors for prepared tools (arguments are already schema-validated, so a
/// mismatch here is a schema bug, reported as invalid arguments rather than a panic).
pub struct Args<'a>(pub &'a Map<String, Value>);

impl Args<'_> {
    pub fn str(&self, key: &str) -> Result<&str, ToolError> {
        self.opt_str(key)?
            .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` is required")))
    }
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{key}` must be a string"
            ))),
        }
    }
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                ToolError::InvalidArguments(format!("`{key}` must be a non-negative integer"))
            }),
        }
    }
    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` must be an integer"))),
        }
    }
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{key}` must be a boolean"
            ))),
        }
    }
    /// A timeout in seconds, bounded by `MAX_TOOL_TIMEOUT`.
    pub fn timeout(&self, key: &str) -> Result<Duration, ToolError> {
        use nl2sh_proto::limits::{DEFAULT_TOOL_TIMEOUT, MAX_TOOL_TIMEOUT};
        Ok(match self.opt_u64(key)? {
            None => DEFAULT_TOOL_TIMEOUT,
            Some(0) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`{key}` must be at least 1"
                )))
            }
            Some(s) => Duration::from_secs(s).min(MAX_TOOL_TIMEOUT),
        })
    }
}

/// An absolute, lexically normalised path (no `.`/`..`), so locks, assessment and the
/// action text all name the same file.
pub fn normalize_path(raw: &str, cwd: Option<&std::path::Path>) -> Result<PathBuf, ToolError> {
    use std::path::Component;
    if raw.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`path` must not be empty".into(),
        ));
    }
    if raw.contains('\0') {
        return Err(ToolError::InvalidArguments(
            "`path` contains a NUL byte".into(),
        ));
    }
    let p = std::path::Path::new(raw);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        match cwd {
            Some(c) => c.join(p),
            None => {
                return Err(ToolError::InvalidArguments(format!(
                    "`path` must be absolute (got {raw:?})"
                )))
            }
        }
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise_lexically() {
        assert_eq!(
            normalize_path("/a/./b/../c", None).unwrap(),
            PathBuf::from("/a/c")
        );
        assert_eq!(
            normalize_path("/../../etc", None).unwrap(),
            PathBuf::from("/etc")
        );
        assert!(normalize_path("rel", None).is_err());
        assert_eq!(
            normalize_path("x/../y", Some(std::path::Path::new("/tmp"))).unwrap(),
            PathBuf::from("/tmp/y")
        );
        assert!(normalize_path("", None).is_err());
        assert!(normalize_path("/a\0b", None).is_err());
    }
}
