//! The built-in Agent: works one delegated task with the configured model (OpenAI-compatible
//! Chat Completions with tool calling) and the device's tools. Every tool call goes to the
//! executor as an ordinary `Invoke` with an Agent origin and the task's id, so it passes
//! the same validation, assessment, locks, approval, identity and audit as a direct call.
//!
//! The task service ([`crate::tasks`]) owns task state, persistence, concurrency and
//! cancellation; this module only runs the conversation for one task and reports how it
//! ended.

use std::sync::Arc;

use nl2sh_proto::channels::{CallOrigin, ContextId, ModelSetup, TaskId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::executor::ExecutorClient;

/// One task for the Agent.
#[derive(Debug, Clone)]
pub struct AgentJob {
    pub task: TaskId,
    pub context: ContextId,
    /// `AgentHttp` or `AgentStdio` (from [`CallOrigin::agent`] of the front door).
    pub origin: CallOrigin,
    /// The user's text (A2A text parts joined with newlines; 1–8192 bytes, checked by the
    /// caller).
    pub text: String,
    /// Earlier complete turns of this context: Chat Completions messages (`user`,
    /// `assistant` with or without `tool_calls`, `tool`), oldest first.
    pub history: Vec<Value>,
}

/// How a task's Agent run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentEnd {
    /// The model gave its final answer (COMPLETED: the Agent returned, not that every
    /// tool succeeded).
    Completed,
    /// No model, no key, unreachable endpoint, bad response, `max_steps` reached, timeout.
    Failed,
    /// Cancelled through [`Agent::run`]'s token; the current operation settled first.
    Canceled,
}

/// What the task service stores for a run.
#[derive(Debug, Clone)]
pub struct AgentRun {
    pub end: AgentEnd,
    /// The text of the task's final status message: the answer, or why it failed or
    /// stopped (names the cause: no `[model]`, no key, which endpoint was unreachable,
    /// `max_steps`).
    pub status_text: String,
    /// `artifacts[0].parts[0].data`: `{session, answer, steps, tool_calls, failed_tools,
    /// evidence}`. `None` when nothing ran (no model configured).
    pub result: Option<Value>,
    /// The context's whole history after this turn (earlier turns, this user message,
    /// every assistant and tool message). `Some` only when the turn completed: an
    /// unfinished turn is never saved as complete history.
    pub history: Option<Vec<Value>>,
}

/// The Agent of this netd: the model client and the executor channel. Shared by every
/// task.
pub struct Agent {
    executor: ExecutorClient,
    model: ModelSetup,
}

impl Agent {
    pub fn new(executor: ExecutorClient, model: ModelSetup) -> Result<Arc<Self>, String> {
        Ok(Arc::new(Self { executor, model }))
    }

    /// Work `job` until the model answers, a budget ends it, or `cancel` fires. Never
    /// panics and never hangs past the configured budgets.
    pub async fn run(&self, job: AgentJob, cancel: CancellationToken) -> AgentRun {
        let _ = (&self.executor, &job, &cancel);
        let why = match &self.model {
            ModelSetup::Unavailable(why) => why.clone(),
            ModelSetup::Ready(_) => "the built-in Agent is not built yet".to_string(),
        };
        AgentRun {
            end: AgentEnd::Failed,
            status_text: why,
            result: None,
            history: None,
        }
    }
}
