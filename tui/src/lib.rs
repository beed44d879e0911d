//! nl2sh's terminal interface: the owner's console on the device itself, with the pages of
//! the Web console (docs/WEB.md) in a terminal: "MCP / A2A" (status, client configuration,
//! settings), Approvals, Tasks, and Ask (the owner's own conversation with the built-in
//! Agent).
//!
//! [`run`] owns the terminal; [`App`] is the state machine it drives, usable without a
//! terminal (the tests render it with ratatui's `TestBackend` and a fake [`Device`]).
//!
//! Every string that came from the device, a caller, a tool or a model is shown through
//! [`nl2sh_proto::display::Shown`], the one escaping function of the CLI, so what the
//! owner reads is what runs (docs/APPROVALS.md, "How requests are shown").

mod app;
mod device;
mod task;
mod terminal;
mod text;
mod view;

pub use app::{App, Page, Quit, POLL_EVERY, TASK_LIMIT};
pub use device::{Device, DeviceError, DeviceErrorKind, Saved, Stopped};
pub use terminal::run;

/// How the interface looks; the caller decides (`NO_COLOR`, `TERM=dumb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Colours and text attributes; without them, every cell is drawn plain.
    pub color: bool,
}
