//! What the terminal interface asks of the device. The supervisor implements [`Device`]
//! over local files and approvald's local socket; the tests use a fake.
//!
//! Every string these calls return came from the device, a caller, a tool or a model: the
//! interface shows each one through [`nl2sh_proto::display::Shown`].

use nl2sh_proto::channels::{
    CallOrigin, ContextId, PendingApproval, ProtocolStatus, SettingView, TaskId, TaskRecord,
    UiGrant,
};

/// What the TUI asks of the device. Calls block briefly (local files and a local socket).
pub trait Device {
    /// Discovery now (as `service status` reads it), with the live token when one serves HTTP.
    fn status(&self) -> ProtocolStatus;
    fn pending(&self) -> Result<Vec<PendingApproval>, DeviceError>;
    fn decide(&self, id: &str, approve: bool, phrase: Option<&str>) -> Result<(), DeviceError>;
    /// Reject every request pending from `origin`, each on its own (as
    /// `protocol reject --origin`); answers those rejected, none when none waited.
    fn reject_origin(&self, origin: CallOrigin) -> Result<Vec<PendingApproval>, DeviceError>;
    /// Approve request `id` (with its phrase, when it has one) and let UI actions of its
    /// origin in the app it names (`PendingApproval::ui_app`) run unasked for `minutes`.
    fn approve_for_ui(
        &self,
        id: &str,
        phrase: Option<&str>,
        minutes: u32,
    ) -> Result<(), DeviceError>;
    /// The timed UI grants in force, oldest first.
    fn ui_grants(&self) -> Result<Vec<UiGrant>, DeviceError>;
    /// End timed UI grant `id` now (`NoSuchRequest` when none has that id).
    fn revoke_ui_grant(&self, id: &str) -> Result<(), DeviceError>;
    fn grants(&self) -> Result<Vec<String>, DeviceError>;
    fn tasks(&self, limit: u32) -> Result<Vec<TaskRecord>, DeviceError>;
    fn task(&self, id: &TaskId) -> Result<TaskRecord, DeviceError>;
    /// The "MCP / A2A" settings (protocol_start_with_service, protocol_service_port, protocol_token (credential: value "set"/"not set"), protocol_auto_approve, approval_notifications).
    fn settings(&self) -> Result<Vec<SettingView>, DeviceError>;
    /// Validate and save as `nl2sh config set` does.
    fn save_setting(&self, key: &str, value: &str) -> Result<Saved, DeviceError>;
    /// Save a new random token: the token (for the owner to see once) and what was saved.
    fn rotate_token(&self) -> Result<(nl2sh_proto::Secret, Saved), DeviceError>;
    /// protocol_start_with_service from the configuration.
    fn start_with_service(&self) -> bool;
    /// Start the managed service for this configuration; Ok(true) when this call started it, Ok(false) when one already ran (reused, never stopped by the TUI).
    /// The device remembers the start identity (pid and start time) of a service it started.
    fn start_protocols(&self) -> Result<bool, DeviceError>;
    /// Stop the managed service this TUI started: only when the process running is still
    /// that one by its start identity (pid and start time); another (a `service restart`
    /// elsewhere) is left running.
    fn stop_protocols(&self) -> Result<Stopped, DeviceError>;
    /// Whether the service this TUI started still runs: the same process, by its start
    /// identity. False once it ended or another process took its place.
    fn owns_service(&self) -> bool;
    /// Restart the managed service as `nl2sh --config X service restart` does; a service
    /// this TUI started stays this TUI's (its new start identity is remembered).
    fn restart_protocols(&self) -> Result<(), DeviceError>;
    /// `None` when the built-in Agent has a model; otherwise what to add to the
    /// configuration (one or two lines, shown on the Ask page).
    fn model_missing(&self) -> Option<String>;
    /// Give the built-in Agent a goal as the owner (origin `owner_tui`), continuing the
    /// conversation `context` (`None`: a new one). Answers the new task's id and its
    /// conversation's. `NotRunning` when no protocol service runs the Agent.
    fn ask(
        &self,
        context: Option<&ContextId>,
        text: &str,
    ) -> Result<(TaskId, ContextId), DeviceError>;
    /// Cancel an owner task: its command's process group is killed and a pending
    /// approval of it withdrawn. The task ends CANCELED (read it with [`Device::task`]).
    fn cancel_task(&self, id: &TaskId) -> Result<(), DeviceError>;
}

/// Why a [`Device`] call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceErrorKind {
    /// Nothing runs for this configuration (no approvald to ask).
    NotRunning,
    /// No request with that id waits: decided elsewhere, or gone.
    NoSuchRequest,
    /// The request expired before the decision reached it.
    Expired,
    /// A dangerous or critical request needs its phrase.
    PhraseRequired,
    /// The phrase given is not the request's.
    WrongPhrase,
    /// The value or request does not validate.
    Invalid,
    /// Refused: not a person (another user, or a process nl2sh started).
    Refused,
    /// Anything else (the message says what).
    Failed,
}

/// A failed [`Device`] call: its kind and a message for the owner (shown escaped).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct DeviceError {
    pub kind: DeviceErrorKind,
    pub message: String,
}

impl DeviceError {
    pub fn new(kind: DeviceErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// What a saved setting (or a rotated token) answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub message: String,
    pub restart_needed: bool,
}

/// How quitting left the service this TUI started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// It was still the one this TUI started: stopped.
    Stopped,
    /// It had ended already.
    Gone,
    /// Another process serves now (its pid): not this TUI's, left running.
    Replaced(u32),
}
