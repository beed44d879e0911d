//! The messages of every channel. Which channel carries which pair, who asks and who
//! answers, and where each end lives is one table: [`crate::topology`] (its top comment
//! draws the whole tree). What a peer may ask for is exactly the variants of the request
//! type it holds; nothing else decodes, and a request accepts exactly its answer
//! ([`crate::topology::Channel::answers`]); anything else ends the channel.
//!
//! Ids that the audit and approvals key on ([`CallId`]) are minted by the privileged
//! side (the executor); netd's own ids ([`Correlation`]) never leave the netd ⇄ executor
//! channel.
//!
//! JSON values cannot cross in bincode (`deserialize_any`), so structured results travel
//! as bounded JSON text that the receiver parses.

use serde::{Deserialize, Serialize};

use crate::frame::Wire;
use crate::read_sources::ReadSources;
use crate::requester::ClientName;
use crate::secret::Secret;
pub use crate::snapshot::{ConfigVersion, PolicySnapshot};
pub use crate::ui_grants::UiGrant;

macro_rules! wire {
    ($ty:ty, $tag:expr) => {
        impl Wire for $ty {
            const TAG: u16 = $tag;
            const NAME: &'static str = stringify!($ty);
        }
    };
}

/// The id of one tool call as approvald and the audit know it. Minted by the executor for
/// every call it runs; never taken from netd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub u64);

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// netd's own id for a call it asked the executor to run, so it can cancel it. Means
/// nothing beyond the netd ⇄ executor channel; two calls may share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Correlation(pub u64);

/// The short id a person types to approve or reject a pending request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(pub String);

impl AsRef<str> for ApprovalId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ApprovalId {
    fn from(id: &str) -> Self {
        ApprovalId(id.to_string())
    }
}

impl ApprovalId {
    /// Longest id a peer may send (approvald mints 6 characters).
    pub const MAX_LEN: usize = 16;

    /// 1 to [`ApprovalId::MAX_LEN`] lowercase letters and digits: the shape a person can
    /// type, checked by whoever receives an id from another process before showing it.
    pub fn is_well_formed(&self) -> bool {
        (1..=Self::MAX_LEN).contains(&self.0.len())
            && self
                .0
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    }
}

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user id (never confused with a group id or a pid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Uid(pub u32);

/// A group id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Gid(pub u32);

// ---- supervisor ⇄ each worker -------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum ControlRequest {
    /// Sent once, right after the handshake: what this worker needs to serve.
    Start(Box<WorkerSettings>),
    /// Stop taking new work and let in-flight work settle within the grace.
    Drain { grace_ms: u64 },
}
wire!(ControlRequest, 0x0101);

/// A worker's answer to a [`ControlRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub enum ControlResponse {
    Started,
    Drained,
    Refused(String),
}

/// Something a worker tells the supervisor unasked.
#[derive(Debug, Serialize, Deserialize)]
pub enum WorkerEvent {
    /// netd's transport ended by itself (stdin closed in stdio mode): the session is
    /// over and the tree should stop cleanly.
    SessionEnded,
}

/// Everything a worker sends on its control channel: answers (with the id of the request
/// they answer) and events (id 0).
#[derive(Debug, Serialize, Deserialize)]
pub enum FromWorker {
    Answer(ControlResponse),
    Event(WorkerEvent),
}
wire!(FromWorker, 0x0102);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerSettings {
    Netd(NetdSettings),
    Executor(ExecutorSettings),
    Approvald(ApprovaldSettings),
    Web(WebSettings),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NetdTransport {
    /// HTTP on the listener inherited at the netd listener fd.
    Http(HttpSettings),
    /// MCP on the inherited stdin/stdout; no token (the launching user is the caller).
    Stdio,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpSettings {
    /// Bearer token; reaches netd only over this channel.
    pub token: Secret,
    /// Advertised origin, `scheme://host[:port]`, no trailing slash.
    pub advertised_origin: String,
    /// Authorities (`host:port`) a request's Host header may name besides the advertised
    /// one: the listener's own address(es).
    pub local_authorities: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetdSettings {
    pub transport: NetdTransport,
    /// The built-in Agent's model, or why there is none (tasks then fail saying so).
    pub model: ModelSetup,
    /// TEST HOOK, debug builds only (absent from release builds): a confinement
    /// violation netd attempts right after it started (`execve`, `ptrace`,
    /// `open:<path>`), so tests can watch the kernel stop it. Filled by the supervisor
    /// from `NL2SH_TEST_NETD_VIOLATION`.
    #[cfg(debug_assertions)]
    pub test_violation: Option<String>,
}

/// The `[model]` section as netd needs it, with the key resolved by the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ModelSetup {
    Ready(ModelSettings),
    /// No usable model: the reason a task's status message gives (no `[model]`, no key).
    Unavailable(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelSettings {
    /// OpenAI-compatible Chat Completions base URL (`…/v1`); `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
    /// Model turns per task.
    pub max_steps: u32,
    pub request_timeout_secs: u64,
    /// `HTTPS_PROXY` (or `https_proxy`) of the supervisor's environment; may hold
    /// credentials, so it travels like the key.
    pub https_proxy: Option<Secret>,
    /// `NO_PROXY` (or `no_proxy`).
    pub no_proxy: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorSettings {
    /// Path of the configuration file this tree serves. Masked in the read-only sandbox,
    /// and anything that touches it is at least `dangerous`.
    pub config_path: String,
    /// The state directory (approvald's); masked and protected like the configuration.
    pub state_dir: String,
    /// The uids sandboxed calls run as, one per running call (gid = uid).
    pub sandbox_uids: UidRange,
    /// What each sandboxed call may use.
    pub sandbox_limits: SandboxLimits,
    /// What all sandboxed calls together may use.
    pub sandbox_ceiling: SandboxCeiling,
    /// The managed service's directory beside the configuration (`<stem>.service`: its
    /// log holds the token); masked and protected like the state directory.
    pub service_dir: String,
}

/// What one sandboxed call may use. The process count is per call (each call has a uid
/// of its own and the limit counts a uid's processes); memory and CPU time are per
/// process of the call (rlimits: `RLIMIT_DATA`, `RLIMIT_CPU`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxLimits {
    pub processes: u32,
    pub memory_bytes: u64,
    pub cpu_secs: u64,
}

/// What all sandboxed calls together may use: the sandboxes' shared ceiling, enforced by
/// a parent cgroup that holds every call's cgroup where the kernel has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxCeiling {
    pub memory_bytes: u64,
    pub processes: u32,
}

/// `count` uids from `first`: the sandbox's identities, one per concurrent call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UidRange {
    pub first: u32,
    pub count: u32,
}

impl UidRange {
    /// Whether `uid` lies in the range.
    pub fn contains(self, uid: u32) -> bool {
        uid >= self.first && uid - self.first < self.count
    }
}

/// What the Web console needs to serve on its inherited listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebSettings {
    /// The console's own origin, `http://host:port`: the only Origin a change may carry.
    pub origin: String,
    /// Authorities (`host:port`) a request's Host header may name.
    pub local_authorities: Vec<String>,
    /// The listener is not loopback and serves plain HTTP (the owner allowed it with
    /// `web_allow_insecure_http`): every page says so.
    pub insecure_remote: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovaldSettings {
    pub state_dir: String,
    /// Secrets removed from task documents and sessions before they are stored: the
    /// protocol token, the model key, configured credentials.
    pub redact: Vec<Secret>,
    /// Re-read for each decision, so policy changes apply to the next call.
    pub config_path: String,
}

// ---- shared domain types --------------------------------------------------------------

/// Risk of a prepared action (docs/APPROVALS.md, "Risk levels"), ordered from harmless to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RiskLevel {
    ReadOnly,
    Low,
    Medium,
    High,
    Dangerous,
    Critical,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::ReadOnly => "read_only",
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
            RiskLevel::Dangerous => "dangerous",
            RiskLevel::Critical => "critical",
        }
    }
}

/// Who asked for a call. Remote origins are never trusted with more than `balanced`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallOrigin {
    /// MCP over HTTP (a remote caller holding the token).
    McpHttp,
    /// MCP over stdio (a local client launched by this user).
    McpStdio,
    /// The built-in Agent, working a task delegated over HTTP (A2A, or MCP `nl2sh_ask`):
    /// remote, like `McpHttp`.
    AgentHttp,
    /// The built-in Agent, working a task delegated over stdio MCP (`nl2sh_ask`).
    AgentStdio,
    /// The built-in Agent, working a goal the owner typed on the terminal console's Ask
    /// page. Local; its mutations wait for the owner's confirmation in that console (never
    /// `protocol_auto_approve`, never a grant: those are the protocol confirmer's).
    OwnerTui,
}

impl CallOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            CallOrigin::McpHttp => "mcp_http",
            CallOrigin::McpStdio => "mcp_stdio",
            CallOrigin::AgentHttp => "agent_http",
            CallOrigin::AgentStdio => "agent_stdio",
            CallOrigin::OwnerTui => "owner_tui",
        }
    }
    /// A caller that reached the device over the network (policy raised to `balanced`).
    pub fn is_remote(self) -> bool {
        matches!(self, CallOrigin::McpHttp | CallOrigin::AgentHttp)
    }
    /// Whether calls from this origin are steps of a task the built-in Agent works.
    pub fn is_agent(self) -> bool {
        matches!(
            self,
            CallOrigin::AgentHttp | CallOrigin::AgentStdio | CallOrigin::OwnerTui
        )
    }
    /// The origin of the Agent's tool calls for a task delegated from `self`.
    pub fn agent(self) -> CallOrigin {
        if self == CallOrigin::OwnerTui {
            CallOrigin::OwnerTui
        } else if self.is_remote() {
            CallOrigin::AgentHttp
        } else {
            CallOrigin::AgentStdio
        }
    }
}

/// The start of every task and context id of the owner's own conversations (the terminal
/// console's Ask page). They live beside the protocol's tasks in one store but in their
/// own namespace: approvald mints them only for the owner, and netd's protocol front
/// doors never show, continue or cancel them (docs/CLI.md, "Ask").
pub const OWNER_ID_PREFIX: &str = "owner-";

/// Whether `id` (a task or context id) is in the owner's namespace.
pub fn is_owner_id(id: &str) -> bool {
    id.starts_with(OWNER_ID_PREFIX)
}

/// The id of a delegated task (A2A `Task.id`), at most `MAX_ID_BYTES`. Not a credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub String);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of a conversation (A2A `contextId`): tasks in one context share Agent history
/// and run one after another. At most `MAX_ID_BYTES`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContextId(pub String);

impl std::fmt::Display for ContextId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity an action runs as; chosen by the tool and its assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Identity {
    /// uid 0.
    Root,
    /// Android's shell user (AID_SHELL 2000).
    Shell,
    /// The uid nl2sh was launched as.
    Launching,
}

impl Identity {
    pub fn as_str(self) -> &'static str {
        match self {
            Identity::Root => "root",
            Identity::Shell => "shell",
            Identity::Launching => "launching_user",
        }
    }
}

/// Where an action runs when it runs without asking anyone (assessed read-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Confinement {
    /// In the read-only sandbox: the caller chose what runs (a command line, a path),
    /// so the kernel, not the assessment, keeps it from changing anything.
    Sandbox,
    /// The tool's own fixed operation (its argv or code chosen by the tool, not the
    /// caller), run as the tool's identity.
    Fixed,
    /// Outside the sandbox with the bound identity, because the caller asked for it or
    /// the sandbox is unavailable. The policy never lets it run without asking.
    Unconfined,
}

impl Confinement {
    pub fn as_str(self) -> &'static str {
        match self {
            Confinement::Sandbox => "sandbox",
            Confinement::Fixed => "fixed",
            Confinement::Unconfined => "unconfined",
        }
    }
}

/// One registered tool as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema (2020-12) of the arguments object, as JSON text.
    pub input_schema: String,
}

/// A tool result attachment (screenshots).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    pub data_base64: String,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// A direct tool result (docs/PROTOCOLS.md, "MCP": `tool`, `success`, bounded `output`, optional attachments).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    pub tool: String,
    pub success: bool,
    /// Bounded text; may itself be JSON text.
    pub output: String,
    pub attachments: Vec<Attachment>,
    /// Whose text the output carries: the apps of a screen or notification read, a read
    /// file's path. The Agent notes them for its later calls' approval requests.
    pub read_from: ReadSources,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InvokeRequest {
    /// netd's id for this call, used to cancel it. The executor mints the [`CallId`]
    /// approvald and the audit see.
    pub correlation: Correlation,
    pub origin: CallOrigin,
    /// The delegated task this call is a step of (Agent origins only), shown to the
    /// approver and recorded in the audit.
    pub task: Option<TaskId>,
    pub tool: String,
    /// Arguments object as JSON text (at most `MAX_ARGUMENT_JSON_BYTES`).
    pub arguments: String,
    /// The Agent's calls only: whose device text it had read before this call (shown
    /// to the approver, recorded in the audit). Empty for a direct call.
    pub after_reading: ReadSources,
    /// The client's own name for itself (MCP `clientInfo`, an A2A caller's `User-Agent`;
    /// for the Agent's calls, the client that delegated the task), shown to the approver
    /// and recorded in the audit. It decides nothing.
    pub client: Option<ClientName>,
}

// ---- netd → executor ------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum ExecutorRequest {
    /// The fixed device environment object plus build identity.
    Inspect,
    /// The registered tools and their argument schemas.
    Catalog,
    /// Run one tool through the whole pipeline.
    Invoke(InvokeRequest),
    /// A screen read: text summary plus exactly one image attachment, or a failure.
    ReadScreen {
        correlation: Correlation,
        origin: CallOrigin,
    },
    /// Stop the running calls netd knows by `correlation` (their process groups are
    /// killed; pending approvals withdrawn).
    Cancel { correlation: Correlation },
    /// Where the call netd knows by `correlation` stands, for a caller that asked to
    /// hear of its progress.
    Progress { correlation: Correlation },
}
wire!(ExecutorRequest, 0x0201);

/// Where a running call stands (`ExecutorRequest::Progress`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallStage {
    /// Checked; waiting for other calls to release the resources it uses.
    Queued,
    /// Asked approvald whether it may run; `wait` once a person's decision is pending.
    Deciding { wait: Option<ApprovalWait> },
    /// Running.
    Running,
}

/// A pending approval as the waiting caller may see it: the id the owner types, and how
/// long before it expires (and the call is refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalWait {
    pub id: ApprovalId,
    pub seconds_left: u64,
}

impl ApprovalWait {
    /// A well-formed id and a time no longer than an approval can wait: what a receiver
    /// checks before passing it on.
    pub fn is_plausible(&self) -> bool {
        self.id.is_well_formed() && self.seconds_left <= crate::limits::APPROVAL_TIMEOUT.as_secs()
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum ExecutorResponse {
    /// JSON object text, at most `MAX_JSON_TEXT_BYTES`.
    Inspect {
        json: String,
    },
    Catalog(Vec<ToolSpec>),
    Outcome(ToolOutcome),
    /// Whether a running call with that correlation was found.
    Cancelled {
        found: bool,
    },
    /// Where it stands; `None` when no call by that correlation is running.
    Progress(Option<CallStage>),
}
wire!(ExecutorResponse, 0x0202);

// ---- netd → approvald ----------------------------------------------------------------

/// Lifecycle state of a task (A2A `TaskState`, the subset nl2sh uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
}

impl TaskState {
    /// The A2A 1.0 ProtoJSON name.
    pub fn as_a2a(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
        }
    }
    pub fn from_a2a(name: &str) -> Option<TaskState> {
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
        ]
        .into_iter()
        .find(|state| state.as_a2a() == name)
    }
    /// Completed, failed and canceled tasks never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled
        )
    }
}

/// One stored task: the columns approvald indexes, and the whole A2A `Task` object as JSON
/// text (with complete history and artifacts), at most `MAX_TASK_DOCUMENT_BYTES`.
/// approvald checks that the columns agree with the document and redacts secrets from it
/// before storing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: TaskId,
    pub context_id: ContextId,
    pub state: TaskState,
    /// `status.timestamp`, milliseconds since the Unix epoch (UTC).
    pub updated_ms: i64,
    pub document: String,
}

/// ListTasks filters and page (A2A `ListTasksRequest`, already validated by netd).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskQuery {
    pub context_id: Option<ContextId>,
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is after this (ms since the epoch).
    pub updated_after_ms: Option<i64>,
    /// 1..=100.
    pub page_size: u32,
    /// The opaque token of a previous page's `next_page_token`; `None` for the first page.
    pub page_token: Option<String>,
    /// Also the owner's own tasks ([`OWNER_ID_PREFIX`]); netd always asks without them.
    pub include_owner: bool,
}

/// One page of tasks, newest update first (update time, then id, descending).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    /// Tasks matching the filters, over all pages.
    pub total_size: u64,
    /// `""` on the last page.
    pub next_page_token: String,
}

/// Why the store did not do what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreErrorKind {
    /// A document or session over its limit.
    TooLarge,
    /// A page token this store did not issue (or for other filters).
    BadPageToken,
    /// The request contradicts itself (columns disagree with the document, bad id).
    Invalid,
    /// Disk full, database broken.
    Storage,
}

/// Why a store request failed: what approvald answers (`StoreResponse::Failed`) and what
/// netd's store client hands its callers. One type on both sides of the channel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StoreFailure {
    pub kind: StoreErrorKind,
    pub message: String,
}

impl StoreFailure {
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Invalid, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::TooLarge, message)
    }
}

impl From<StoreFailure> for StoreResponse {
    fn from(f: StoreFailure) -> Self {
        StoreResponse::Failed {
            kind: f.kind,
            message: f.message,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum StoreRequest {
    /// Liveness: approvald answers once its store is open.
    Ping,
    /// Mint the id of a new task (`Created`): approvald owns the store, so it names what
    /// goes in it. `context_id` is the client's context to continue, 1 to `MAX_ID_BYTES`
    /// bytes; `None` has approvald mint one too. Nothing is stored until the task's first
    /// `PutTask`, which must carry exactly these ids.
    CreateTask {
        context_id: Option<ContextId>,
    },
    /// Insert or replace a task (retention prunes the oldest terminal tasks after it). A
    /// task not in the store yet must have been created by `CreateTask` (and not stored
    /// since), under the context it was created in.
    PutTask(TaskRecord),
    GetTask {
        id: TaskId,
    },
    ListTasks(TaskQuery),
    /// The Agent history of a context: a JSON array of Chat Completions messages.
    LoadSession {
        context_id: ContextId,
    },
    /// Replace the history of a context with `messages_json` (a complete turn only).
    SaveSession {
        context_id: ContextId,
        messages_json: String,
    },
    /// Wait for the owner's next Ask or cancellation (answered `OwnerWork` when one
    /// comes; netd keeps one of these outstanding while it can run the Agent).
    NextOwnerWork,
}
wire!(StoreRequest, 0x0301);

/// Work the owner gave the built-in Agent from the terminal console, handed to netd.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum OwnerWork {
    /// A goal: run it as the task `id` (created, not yet stored) in `context_id`.
    Ask {
        id: TaskId,
        context_id: ContextId,
        text: String,
    },
    /// Cancel the owner's task `id`.
    Cancel { id: TaskId },
}

#[derive(Debug, Serialize, Deserialize)]
pub enum StoreResponse {
    Pong,
    /// The ids of a task `CreateTask` created: a fresh task id (UUID v4 text) and the
    /// context asked for, or a fresh one.
    Created {
        id: TaskId,
        context_id: ContextId,
    },
    /// A task or session was stored (as redacted).
    Stored,
    Task(Option<TaskRecord>),
    Tasks(TaskPage),
    /// `None`: the context has no history yet.
    Session(Option<String>),
    OwnerWork(OwnerWork),
    Failed {
        kind: StoreErrorKind,
        message: String,
    },
}
wire!(StoreResponse, 0x0302);

// ---- executor → approvald -------------------------------------------------------------

/// What the executor is about to do, exactly, and how it was judged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionSummary {
    pub call_id: CallId,
    pub origin: CallOrigin,
    /// The delegated task this call is a step of, if any.
    pub task: Option<TaskId>,
    /// Whose device text the Agent had read before this call (Agent calls only).
    pub after_reading: ReadSources,
    /// The client's own name for itself ([`InvokeRequest::client`]).
    pub client: Option<ClientName>,
    pub tool: String,
    /// The action as it will run (argv rendered, or an operation description).
    pub action: String,
    /// The action as the caller sent it, where that differs from `action`: a
    /// `shell.exec` command line, which `action` shows inside the shell's argv.
    pub sent: Option<String>,
    /// SHA-256 (hex) of the arguments JSON text.
    pub arguments_sha256: String,
    pub risk: RiskLevel,
    pub requires_root: bool,
    pub identity: Identity,
    /// Where it runs if the policy lets it run without asking.
    pub confinement: Confinement,
    /// Why the assessment chose this level (shown to the approver), bounded.
    pub reasons: Vec<String>,
    /// For `shell.exec`: every command the line may run, as parsed, for scoped grants
    /// to match (each must be matched, or be inert: `sleep 1`, `echo`). `None` for other
    /// tools, and for a line that could not be taken apart fully (no command grant covers
    /// it). At most [`MAX_ACTION_COMMANDS`](crate::limits::MAX_ACTION_COMMANDS).
    pub commands: Option<Vec<ParsedCommand>>,
    /// Data the action carries that its one line cannot show (what `fs.write` writes, the
    /// text `android.text` types), whole: the owner sees it before deciding.
    pub data: Option<ActionData>,
    /// For a UI action ([`crate::ui_grants::UI_ACTION_TOOLS`]): the app in front when it
    /// was prepared, which a timed UI grant names. `None` for every other action, and
    /// when the app in front could not be read.
    pub ui_app: Option<String>,
}

/// Data an action carries, whole (at most
/// [`MAX_ARGUMENT_JSON_BYTES`](crate::limits::MAX_ARGUMENT_JSON_BYTES): it came in the
/// call's arguments). Shown to the owner through [`crate::carried`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionData {
    /// What it is, in a word the owner reads before it: `content`, `text`.
    pub what: String,
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`, lowercase hex.
    pub sha256: String,
}

impl ActionData {
    pub fn new(what: &str, bytes: Vec<u8>) -> Self {
        let sha256 = Self::digest(&bytes);
        Self {
            what: what.to_string(),
            bytes,
            sha256,
        }
    }

    /// Whether it is what a receiver may take: bounded, a known word, its hash right.
    pub fn is_well_formed(&self) -> bool {
        self.bytes.len() <= crate::limits::MAX_ARGUMENT_JSON_BYTES
            && matches!(self.what.as_str(), "content" | "text")
            && self.sha256 == Self::digest(&self.bytes)
    }

    fn digest(bytes: &[u8]) -> String {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(bytes))
    }
}

/// One command a shell line may run (a simple command, wherever it sits: a list, a
/// pipeline, a substitution, a nested `sh -c` script, a loop or function body; and the
/// words of a `case`, `for` or `[[`, which the shell evaluates itself, with no argv).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedCommand {
    /// The program and its arguments, exactly as they reach it. `None` when a grant may
    /// not match it: a word the shell expands (variables, substitutions, globs, `~`,
    /// braces), variable assignments before it, a redirection that writes, or anything
    /// earlier in the line that changes what it means (a `cd`, an `export`, an alias or
    /// function). At most
    /// [`MAX_COMMAND_ARGV_BYTES`](crate::limits::MAX_COMMAND_ARGV_BYTES).
    pub argv: Option<Vec<String>>,
    /// Its own assessment (with what runs inside it) is read-only and needs no root.
    pub read_only: bool,
}

impl ParsedCommand {
    /// The bytes [`MAX_COMMAND_ARGV_BYTES`](crate::limits::MAX_COMMAND_ARGV_BYTES)
    /// bounds: each word and one more for its end.
    pub fn argv_bytes(argv: &[String]) -> usize {
        argv.iter().map(|word| word.len() + 1).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[must_use]
pub enum Decision {
    /// The policy does not ask about it (read-only under `balanced`): runs.
    Allowed,
    /// `protocol_auto_approve = true`: runs.
    AutoApproved,
    /// A scoped grant in the local configuration covers it: runs.
    Granted,
    /// Approved by a person at the device (`nl2sh protocol approve`): runs.
    Approved,
    /// Refused without asking (pending queue full, configuration unreadable, …).
    Refused,
    /// Rejected by a person at the device.
    Rejected,
    /// Nobody decided within the approval timeout.
    Expired,
    /// The call was cancelled while its approval was pending.
    Withdrawn,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::AutoApproved => "auto_approved",
            Decision::Granted => "granted",
            Decision::Approved => "approved",
            Decision::Refused => "refused",
            Decision::Rejected => "rejected",
            Decision::Expired => "expired",
            Decision::Withdrawn => "withdrawn",
        }
    }
    /// Only these let an action run; every other outcome, including any failure to
    /// decide, means it does not.
    pub fn runs(self) -> bool {
        matches!(
            self,
            Decision::Allowed | Decision::AutoApproved | Decision::Granted | Decision::Approved
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallResult {
    pub call_id: CallId,
    pub success: bool,
    /// Exit status of the command, when one ran.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Short, bounded description (never output contents).
    pub summary: String,
}

/// A read-only call decided from the policy snapshot, after it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RanRecord {
    pub summary: ActionSummary,
    pub result: CallResult,
    /// The version of the snapshot it was decided from.
    pub policy: ConfigVersion,
}

/// A call's last audit row as the executor keeps it until approvald has it: what
/// [`AuthorityRequest::Ran`] or [`AuthorityRequest::Finished`] reported, with what
/// approvald needs to write the row without remembering the call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ReportedRow {
    Ran(RanRecord),
    Finished {
        summary: ActionSummary,
        decision: Decision,
        result: CallResult,
    },
}

impl ReportedRow {
    pub fn call_id(&self) -> CallId {
        match self {
            ReportedRow::Ran(ran) => ran.summary.call_id,
            ReportedRow::Finished { summary, .. } => summary.call_id,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum AuthorityRequest {
    /// Liveness: approvald answers once its store is open.
    Ping,
    /// Decide whether `action` may run, and record the decision before answering.
    Decide(ActionSummary),
    /// How a call approvald decided ended; answered once its outcome row is committed.
    Finished(CallResult),
    /// The call was cancelled: drop its pending approval (it is then `Withdrawn`).
    Withdraw { call_id: CallId },
    /// Is a person's decision on this call pending? (For the caller's progress.)
    Waiting { call_id: CallId },
    /// The policy snapshot for the configuration file as approvald reads it now.
    Policy,
    /// A confined read-only call the executor let run under snapshot `policy`, and how it
    /// ended; approvald records both in one audit row and answers once it is committed.
    Ran(RanRecord),
    /// At the executor's start: a row an earlier executor answered for, that approvald
    /// may never have received. Written unless the audit already holds it; answered once
    /// it is committed.
    Recover(ReportedRow),
    /// The last rows of calls whose answers have left, kept in the executor's outbox
    /// until approvald has them (1 to [`crate::limits::MAX_KEPT_ROWS`], oldest first):
    /// each checked as `Ran` or `Finished` would be, all journalled, then answered.
    Kept(Vec<ReportedRow>),
}
wire!(AuthorityRequest, 0x0401);

#[derive(Debug, Serialize, Deserialize)]
pub enum AuthorityResponse {
    Pong,
    /// The decision (already recorded) and a reason a user can read.
    Decided {
        decision: Decision,
        reason: String,
    },
    Recorded,
    /// The store could not record it (disk full, database broken): the decision is not
    /// given, and the action does not run.
    NotRecorded(String),
    Policy(PolicySnapshot),
    /// The pending approval of the call asked about, if one is pending.
    Waiting(Option<ApprovalWait>),
}
wire!(AuthorityResponse, 0x0402);

// ---- local CLI → approvald (protocol/approvals.sock, same uid only) -------------------

/// A request waiting for a person at the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// Short id the person types (`nl2sh protocol approve ID`).
    pub id: ApprovalId,
    pub call_id: CallId,
    pub origin: CallOrigin,
    /// The delegated task this call is a step of, if any.
    pub task: Option<TaskId>,
    /// Whose device text the Agent had read before this call (Agent calls only).
    pub after_reading: ReadSources,
    /// The client's own name for itself ([`InvokeRequest::client`]).
    pub client: Option<ClientName>,
    /// The goal of `task` (its first message from the user), cut to
    /// [`crate::requester::GOAL_SHOWN_BYTES`] and more.
    pub goal: Option<String>,
    pub tool: String,
    /// The action exactly as it will run.
    pub action: String,
    /// The action as the caller sent it ([`ActionSummary::sent`]).
    pub sent: Option<String>,
    pub risk: RiskLevel,
    pub requires_root: bool,
    pub identity: Identity,
    /// Why the assessment chose this level.
    pub reasons: Vec<String>,
    pub seconds_left: u64,
    /// The exact phrase `approve` must be given (dangerous and critical actions).
    pub phrase: Option<String>,
    /// What the action carries (an `fs.write`'s content), whole.
    pub data: Option<ActionData>,
    /// Set when the request may be approved with a timed UI grant
    /// ([`CliRequest::ApproveForUi`]): the app in front, which the grant would name.
    pub ui_app: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum CliRequest {
    ListPending,
    Approve {
        id: ApprovalId,
        phrase: Option<String>,
    },
    Reject {
        id: ApprovalId,
    },
    /// Commit every audit row approvald has answered for, after waiting
    /// [`crate::limits::KEPT_ROWS_ARRIVE`] for the rows the executor is still gathering,
    /// then answer `Done`: what `protocol audit` reads afterwards holds every call
    /// answered before it asked.
    FlushAudit,
    /// A one-time Web console login code (`nl2sh web login`): single use, valid for
    /// [`crate::limits::WEB_LOGIN_CODE_TTL`].
    WebLogin,
    /// Revoke every Web console session (`nl2sh web logout --all`).
    WebLogoutAll,
    /// The newest tasks (at most 100), for the owner's terminal console.
    Tasks {
        limit: u32,
    },
    /// One task, for the owner's terminal console.
    Task {
        id: TaskId,
    },
    /// A goal for the built-in Agent from the terminal console's Ask page (origin
    /// `owner_tui`), continuing the owner's conversation `context_id` or a new one.
    /// Answered `Asked` once netd has taken it; `Unavailable` when no netd runs the Agent.
    Ask {
        context_id: Option<ContextId>,
        text: String,
    },
    /// Cancel one of the owner's tasks (`Done` once netd has been told).
    CancelTask {
        id: TaskId,
    },
    /// Reject every pending request from `origin` (`protocol reject --origin`), each on
    /// its own as `Reject` would. Answered `Rejected` with those it rejected.
    RejectOrigin {
        origin: CallOrigin,
    },
    /// Approve request `id` (with its phrase, when it has one) and let UI actions of the
    /// same origin in the app it names run unasked for `minutes`
    /// ([`crate::ui_grants`]). Refused, leaving the request pending, when the request is
    /// not one a timed UI grant may follow.
    ApproveForUi {
        id: ApprovalId,
        phrase: Option<String>,
        minutes: u32,
    },
    /// The timed UI grants in force.
    UiGrants,
    /// End timed UI grant `id` now.
    RevokeUiGrant {
        id: String,
    },
}
wire!(CliRequest, 0x0501);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CliErrorKind {
    NoSuchRequest,
    Expired,
    PhraseRequired,
    WrongPhrase,
    InvalidRequest,
    /// approvald could not do it (the store failed).
    Unavailable,
    /// Nothing runs the built-in Agent to take the owner's Ask (no protocol service).
    NoAgent,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum CliResponse {
    Pending(Vec<PendingApproval>),
    /// A login code for the Web console, and how long it is valid.
    LoginCode {
        code: Secret,
        valid_secs: u64,
    },
    /// Sessions revoked.
    LoggedOut {
        sessions: u64,
    },
    Tasks(Vec<TaskRecord>),
    /// The task asked for, or `None` when there is no such task.
    Task(Option<TaskRecord>),
    /// The Agent took the owner's goal as task `id` in conversation `context_id`.
    Asked {
        id: TaskId,
        context_id: ContextId,
    },
    /// The request was approved (or rejected) and its call released.
    Done,
    Error {
        kind: CliErrorKind,
        message: String,
    },
    /// The requests `RejectOrigin` rejected (none when none was pending), oldest first.
    Rejected(Vec<PendingApproval>),
    /// The timed UI grants in force, oldest first.
    UiGrants(Vec<UiGrant>),
}
wire!(CliResponse, 0x0502);

// ---- Web console → approvald: the owner's requests ------------------------------------

/// Proof that a request comes from an owner's browser session: the session secret from
/// its cookie and, for changes, the session's CSRF token. approvald keeps only hashes of
/// both and checks them on every request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnerProof {
    pub session: Secret,
    pub csrf: Option<Secret>,
}

/// The CSRF token of a session: SHA-256 of a fixed label and the session secret, in hex.
/// Derived rather than stored, so the console can hand it to its page again after a
/// reload, approvald can check it from the session alone, and a page of another origin,
/// which cannot read the HttpOnly cookie, cannot compute it.
pub fn csrf_for(session: &Secret) -> Secret {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"nl2sh web csrf v1\0");
    hash.update(session.expose().as_bytes());
    Secret::new(hex::encode(hash.finalize()))
}

#[derive(Debug, Serialize, Deserialize)]
pub enum OwnerRequest {
    /// Trade a one-time login code (from `nl2sh web login`) for a session.
    RedeemLogin { code: Secret },
    /// Whether the session is live (and the CSRF token right, when given).
    Check { proof: OwnerProof },
    /// End this session (needs the CSRF token).
    Logout { proof: OwnerProof },
    /// Something the owner does; [`OwnerAction::changes`] ones need the CSRF token.
    Act {
        proof: OwnerProof,
        action: OwnerAction,
    },
}
wire!(OwnerRequest, 0x0701);

#[derive(Debug, Serialize, Deserialize)]
pub enum OwnerAction {
    ListPending,
    Decide {
        id: ApprovalId,
        approve: bool,
        phrase: Option<String>,
    },
    /// The configured grants, each as one line of text.
    Grants,
    /// The newest tasks (at most 100).
    Tasks {
        limit: u32,
    },
    Task {
        id: TaskId,
    },
    /// The newest audit rows (at most 500).
    Audit {
        limit: u32,
    },
    VerifyAudit,
    /// The "MCP / A2A" settings as the file has them.
    Settings,
    /// Validate and save one setting exactly as `nl2sh config set` does.
    SaveSetting {
        key: String,
        value: Secret,
    },
    /// Save a new random `protocol_token` (never shown back).
    RotateToken,
    /// Reject every pending request from `origin`, each on its own.
    RejectOrigin {
        origin: CallOrigin,
    },
    /// As [`CliRequest::ApproveForUi`].
    ApproveForUi {
        id: ApprovalId,
        phrase: Option<String>,
        minutes: u32,
    },
    /// The timed UI grants in force.
    UiGrants,
    /// End timed UI grant `id` now.
    RevokeUiGrant {
        id: String,
    },
}

impl OwnerAction {
    /// Whether the action changes something (and so needs the session's CSRF token).
    pub fn changes(&self) -> bool {
        matches!(
            self,
            OwnerAction::Decide { .. }
                | OwnerAction::RejectOrigin { .. }
                | OwnerAction::ApproveForUi { .. }
                | OwnerAction::RevokeUiGrant { .. }
                | OwnerAction::SaveSetting { .. }
                | OwnerAction::RotateToken
        )
    }
}

/// One setting of the "MCP / A2A" category as the owner sees it: its value, and how the
/// consoles show and edit it (they keep no list of their own; the list and its order are
/// the configuration editor's, `nl2sh_approvald::config_edit::OWNER_SETTINGS`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingView {
    pub key: String,
    /// The value in the file, or the default (`set`/`not set` for a credential).
    pub value: String,
    /// Whether the file sets it (else `value` is the default).
    pub set: bool,
    pub credential: bool,
    /// Applies at the next decision; otherwise a restart is needed.
    pub live: bool,
    /// What the consoles call it.
    pub label: String,
    /// How a console edits it.
    pub kind: SettingKind,
    /// What a value means, shown with the field.
    pub help: Option<String>,
    /// What turning it on does, shown with it wherever it is shown; a console asks before
    /// it turns on a switch that has one.
    pub warning: Option<String>,
}

/// How a console edits a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettingKind {
    /// On or off: `true` or `false`.
    Switch,
    /// A TCP port, 0 to 65535.
    Port,
    /// A credential: typed, never shown (`value` says only whether it is set).
    Secret,
    /// Any text.
    Text,
}

impl SettingKind {
    /// Its name in the Web console's API.
    pub fn as_str(self) -> &'static str {
        match self {
            SettingKind::Switch => "switch",
            SettingKind::Port => "port",
            SettingKind::Secret => "secret",
            SettingKind::Text => "text",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnerErrorKind {
    /// No such session, or it expired or was revoked: log in again.
    NotLoggedIn,
    /// A change without the session's CSRF token.
    BadCsrf,
    /// Too many failed login attempts; wait.
    RateLimited,
    NoSuchRequest,
    Expired,
    PhraseRequired,
    WrongPhrase,
    /// The request itself is wrong (an unknown key, a value that does not validate).
    Invalid,
    NoSuchTask,
    /// approvald could not do it (the store or the file failed).
    Unavailable,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum OwnerResponse {
    LoggedIn {
        session: Secret,
        csrf: Secret,
        expires_in_secs: u64,
    },
    /// The session is live.
    Owner {
        expires_in_secs: u64,
    },
    Done,
    Pending(Vec<PendingApproval>),
    Grants(Vec<String>),
    Tasks(Vec<TaskRecord>),
    Task(TaskRecord),
    /// Audit rows, newest first, each a JSON object as `protocol audit --json` prints it.
    Audit(Vec<String>),
    Verified {
        intact: bool,
        message: String,
    },
    Settings(Vec<SettingView>),
    Saved {
        message: String,
        restart_needed: bool,
    },
    Refused {
        kind: OwnerErrorKind,
        message: String,
    },
    /// The requests `RejectOrigin` rejected (none when none was pending), oldest first.
    Rejected(Vec<PendingApproval>),
    /// The timed UI grants in force, oldest first.
    UiGrants(Vec<UiGrant>),
}
wire!(OwnerResponse, 0x0702);

// ---- Web console → supervisor: discovery ------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub enum DiscoveryRequest {
    /// What runs for this configuration now (read afresh).
    Discover,
}
wire!(DiscoveryRequest, 0x0801);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProtocolState {
    Running,
    Stopped,
    Unknown,
}

/// The protocol service of this configuration as discovery sees it: what the Web
/// console's "MCP / A2A" page shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProtocolStatus {
    pub state: ProtocolState,
    /// `http`, `service` or `stdio` when running.
    pub transport: Option<String>,
    pub version: String,
    pub mcp_url: Option<String>,
    pub a2a_url: Option<String>,
    pub card_url: Option<String>,
    pub listen: Option<String>,
    pub pid: Option<u32>,
    pub since: Option<String>,
    /// The live token (HTTP only); the console shows it only to a verified owner who
    /// asks for it.
    pub token: Option<Secret>,
    pub config_path: String,
    /// One line for the owner (why stopped or unknown, or where it listens).
    pub detail: String,
    /// Client configuration for the running service; when it is not running over HTTP,
    /// for the default loopback origin, and `examples` says so.
    pub snippets: ClientSnippets,
    pub examples: bool,
    /// What the running process uses against the saved file, and whether it approves
    /// every request automatically.
    pub running: RunningState,
}

/// What the running process uses that the saved file no longer says (issue 40: "saved
/// 8770, running 8765: restart to apply"), never a token's text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningState {
    /// The settings that apply at the next start, each with both values in words.
    pub differs: Vec<SettingDiffers>,
    /// `protocol_auto_approve` as approvald applies it now (false when nothing runs).
    pub auto_approve: bool,
    /// `nl2sh --config <path> service restart`, the path quoted for a shell.
    pub restart_command: String,
    /// Where the HTTP token in use came from: "environment", "configuration",
    /// "generated" (new at every start); none when nothing serves HTTP.
    pub token_source: Option<String>,
}

/// One setting whose saved value the running process does not use yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingDiffers {
    pub key: String,
    pub saved: String,
    pub running: String,
}

/// What the owner copies into a client. None of it holds the token: each names the
/// `NL2SH_PROTOCOL_TOKEN` environment variable the client reads it from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientSnippets {
    /// `~/.codex/config.toml`.
    pub codex_toml: String,
    /// An `mcpServers` JSON document.
    pub mcp_servers_json: String,
    /// The command that starts the service for this configuration.
    pub startup_command: String,
    /// A curl command with an A2A 1.0 `SendMessage` request body.
    pub a2a_request: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum DiscoveryResponse {
    Protocols(Box<ProtocolStatus>),
}
wire!(DiscoveryResponse, 0x0802);

// ---- executor → sandbox helper (the plan on the helper's stdin) ------------------------

/// What one run of the sandbox helper (`nl2sh __nl2sh-sandbox`) sets up. The executor
/// writes it as one frame on the helper's stdin, then (at once, or when a call takes the
/// sandbox ready-made) a [`SandboxCall`] frame; whatever follows that is the command's
/// standard input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxPlan {
    /// The unprivileged identity the payload runs as (never 0).
    pub uid: Uid,
    pub gid: Gid,
    /// Paths (absolute; a `*` matches within one component) hidden from the payload.
    pub masks: Vec<String>,
    /// Size of the private scratch tmpfs that is `TMPDIR`.
    pub scratch_bytes: u64,
    pub limits: SandboxLimits,
    /// `cgroup.procs` files the helper joins before anything else, so the whole call is
    /// in the uid's cgroup (empty where the device gives nl2sh none).
    pub cgroup_procs: Vec<String>,
}
wire!(SandboxPlan, 0x0601);

/// What the call does in a sandbox set up by a [`SandboxPlan`]: read by the confined
/// payload process, after everything was set up and before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxCall {
    /// Working directory of the payload.
    pub cwd: Option<String>,
    /// `PATH` for an executed program (the launching shell's); `None` keeps the helper's.
    pub path_var: Option<String>,
    pub payload: SandboxPayload,
}
wire!(SandboxCall, 0x0602);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SandboxPayload {
    /// Set everything up and report which parts are active (JSON on stdout).
    Probe,
    /// Execute a program (argv\[0\] looked up on PATH).
    Exec { argv: Vec<String> },
    /// `fs.read` as the sandbox identity (JSON on stdout).
    ReadFile {
        path: String,
        offset: u64,
        length: u64,
    },
    /// `fs.list` as the sandbox identity (JSON on stdout).
    ListDir {
        path: String,
        hidden: bool,
        limit: u64,
    },
}

/// Inherited descriptor numbers of each worker role (the [`crate::topology`] table uses
/// them). The supervisor places channels here and closes everything else; a worker
/// refuses to start without them.
pub mod fds {
    /// Every worker: its supervisor control channel.
    pub const SUPERVISOR: i32 = 3;
    /// netd: client end of netd → executor.
    pub const NETD_EXECUTOR: i32 = 4;
    /// netd: client end of netd → approvald.
    pub const NETD_APPROVALD: i32 = 5;
    /// netd: the TCP listener (HTTP transport only).
    pub const NETD_LISTENER: i32 = 6;
    /// executor: server end of netd → executor.
    pub const EXECUTOR_NETD: i32 = 4;
    /// executor: client end of executor → approvald.
    pub const EXECUTOR_APPROVALD: i32 = 5;
    /// approvald: server end of netd → approvald.
    pub const APPROVALD_NETD: i32 = 4;
    /// approvald: server end of executor → approvald.
    pub const APPROVALD_EXECUTOR: i32 = 5;
    /// approvald: server end of web → approvald.
    pub const APPROVALD_WEB: i32 = 6;
    /// web: client end of web → approvald.
    pub const WEB_APPROVALD: i32 = 4;
    /// web: client end of web → supervisor (discovery).
    pub const WEB_SUPERVISOR: i32 = 5;
    /// web: the Web console's TCP listener.
    pub const WEB_LISTENER: i32 = 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers: the hashes are lowercase hex of SHA-256 (a receiver compares the
    /// text, so its form is part of the contract).
    #[test]
    fn hashes_are_lowercase_hex_of_sha256() {
        let data = ActionData::new("content", b"hello".to_vec());
        assert_eq!(
            data.sha256,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert!(data.is_well_formed());
        let mut upper = data.clone();
        upper.sha256 = upper.sha256.to_uppercase();
        assert!(!upper.is_well_formed());
        assert_eq!(
            csrf_for(&Secret::new("session-secret".into())).expose(),
            "aab98ce486619bdf546176911431370cc5f74a1821fc194d4f715d76c99650ca"
        );
    }
}
