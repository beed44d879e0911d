//! The interface's state machine: what is shown, what each key does, and what is asked of
//! the [`Device`]. No terminal here: [`App::handle_key`] and [`App::tick`] change the
//! state, [`App::draw`] (in `view.rs`) renders it into any ratatui frame, so the tests
//! drive it with a fake device and ratatui's `TestBackend`.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use nl2sh_proto::channels::{
    CallOrigin, ContextId, PendingApproval, ProtocolState, ProtocolStatus, SettingKind,
    SettingView, TaskId, TaskRecord, UiGrant,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::MAX_AGENT_TEXT_BYTES;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::text::Line;

use crate::device::{Device, DeviceError, DeviceErrorKind, Stopped};
use crate::task::{Look, Row};
use crate::Options;

/// How often the pending requests are read again.
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// How often discovery is read again (the header's status word).
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// Tasks listed on the Tasks page, as the Web console lists them.
pub const TASK_LIMIT: u32 = 50;
/// A request decided here is not shown again for this long, while approvald drops it.
const DECIDED_HIDE: Duration = Duration::from_secs(10);
/// The lengths a timed UI grant may be given for from the Approvals page (`u`), and the
/// one offered first.
pub const UI_GRANT_MINUTES: [u32; 4] = [5, 10, 15, 30];
const UI_GRANT_DEFAULT: u32 = 10;
/// Characters a text entry takes (a token is at most 256).
const MAX_ENTRY_CHARS: usize = 1024;
/// What asking says when no protocol service runs the Agent.
pub(crate) const ASK_NOT_RUNNING: &str = "The protocol service is not running: S on page 1 \
    starts it (with protocol_start_with_service = true) to ask the Agent.";

/// Why a service running now is left alone when this TUI quits.
const NOT_OURS: &str = "it is not the one this TUI started (restarted or started elsewhere since)";

/// The pages, in the order of their numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// 1: "MCP / A2A": status, client configuration, settings.
    Protocols,
    /// 2: pending requests and the grants.
    Approvals,
    /// 3: recent tasks and one task.
    Tasks,
    /// 4: the owner's conversation with the built-in Agent.
    Ask,
}

impl Page {
    pub const ALL: [Page; 4] = [Page::Protocols, Page::Approvals, Page::Tasks, Page::Ask];

    pub fn number(self) -> usize {
        match self {
            Page::Protocols => 1,
            Page::Approvals => 2,
            Page::Tasks => 3,
            Page::Ask => 4,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Page::Protocols => "MCP / A2A",
            Page::Approvals => "Approvals",
            Page::Tasks => "Tasks",
            Page::Ask => "Ask",
        }
    }

    fn from_number(n: usize) -> Option<Page> {
        Page::ALL.get(n.checked_sub(1)?).copied()
    }
}

/// How the interface ended: what to tell the owner once the terminal is restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quit {
    /// A line for the owner (already escaped), if there is something to say.
    pub message: Option<String>,
    /// Stopping the service this TUI started failed.
    pub failed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoteKind {
    Info,
    Ok,
    Error,
}

/// A line for the owner; device text in it is already escaped.
#[derive(Debug, Clone)]
pub(crate) struct Note {
    pub kind: NoteKind,
    pub text: String,
}

impl Note {
    fn new(kind: NoteKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            text: text.into(),
        }
    }
}

/// A pending request and when it expires by our clock.
pub(crate) struct Waiting {
    pub request: PendingApproval,
    pub deadline: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Port,
    /// Typed without echo and never shown back.
    Secret,
    Text,
}

/// What waits for an answer before anything else happens. Not `Debug`: an entry may hold
/// a token being typed.
pub(crate) enum Modal {
    /// Approve or reject a request without a phrase: y/Enter or n/Esc.
    Decide {
        request: PendingApproval,
        approve: bool,
    },
    /// Approve a dangerous or critical request: its phrase typed exactly.
    Phrase {
        request: PendingApproval,
        typed: String,
        error: Option<String>,
    },
    /// Approve a UI action and let its origin's UI actions in `request.ui_app` run
    /// unasked for `minutes` (one of [`UI_GRANT_MINUTES`]; ←→ or +/- change it).
    UiGrant {
        request: PendingApproval,
        minutes: u32,
    },
    /// End the timed UI grant `id` (of `app`) now.
    RevokeUiGrant { id: String, app: String },
    /// Reject every request pending from `origin` (`count` of them when asked).
    RejectOrigin { origin: CallOrigin, count: usize },
    /// Save a switch's new value.
    Toggle {
        key: String,
        label: String,
        value: bool,
    },
    /// Type a setting's value.
    Entry {
        key: String,
        label: String,
        kind: EntryKind,
        typed: String,
        error: Option<String>,
    },
    /// Save a new random token.
    Rotate,
    /// Restart the service (`service restart`) so it runs the saved settings.
    Restart,
    /// Every key, page by page (`?`).
    Help,
    /// The request a question was about is no longer waiting: decided elsewhere (another
    /// console, the CLI), withdrawn, or expired. Nothing was sent; any key closes it.
    Gone { request: PendingApproval, why: Gone },
    /// Quit, stopping the service this TUI started or leaving it running.
    Quit,
    /// The token a rotation saved, shown this once (Enter/Esc closes it; nothing keeps it).
    NewToken { token: nl2sh_proto::Secret },
}

/// Why a request left the pending list without a decision from this TUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gone {
    Expired,
    Elsewhere,
    /// The service stopped (nothing can wait).
    Stopped,
}

impl Gone {
    pub(crate) fn words(self) -> &'static str {
        match self {
            Gone::Expired => "expired before a decision",
            Gone::Elsewhere => {
                "was decided elsewhere (another console or the CLI) or withdrawn by its caller"
            }
            Gone::Stopped => "is gone: the service stopped",
        }
    }
}

impl Modal {
    /// The request the question is about, shown under it.
    pub(crate) fn request(&self) -> Option<&PendingApproval> {
        match self {
            Modal::Decide { request, .. }
            | Modal::Phrase { request, .. }
            | Modal::UiGrant { request, .. }
            | Modal::Gone { request, .. } => Some(request),
            _ => None,
        }
    }

    /// Whether the answer approves the request: it counts only once the whole request
    /// (its end included) has been on the screen.
    pub(crate) fn needs_whole(&self) -> bool {
        matches!(
            self,
            Modal::Decide { approve: true, .. } | Modal::Phrase { .. } | Modal::UiGrant { .. }
        )
    }

    /// Which question this is, so a new one starts scrolled to its top.
    fn key(&self) -> String {
        let kind = match self {
            Modal::Decide { approve, .. } => format!("decide {approve}"),
            Modal::Phrase { .. } => "phrase".into(),
            Modal::UiGrant { .. } => "ui".into(),
            Modal::Gone { .. } => "gone".into(),
            Modal::Help => "help".into(),
            _ => "other".into(),
        };
        let id = self.request().map(|r| r.id.0.as_str()).unwrap_or_default();
        format!("{kind} {id}")
    }
}

/// How far the open question's request is scrolled, and whether its end has been drawn.
/// Kept from frame to frame (drawing sets it), for the question it was drawn for.
#[derive(Default)]
pub(crate) struct ModalView {
    which: RefCell<String>,
    pub scroll: Cell<usize>,
    /// Rows one PgUp/PgDn moves.
    pub page: Cell<usize>,
    /// The request's last line has been on the screen.
    pub seen: Cell<bool>,
    /// An approve was refused because it had not.
    pub refused: Cell<bool>,
}

impl ModalView {
    /// Starts over when `modal` is another question than the one drawn last.
    pub(crate) fn follow(&self, modal: &Modal) {
        let key = modal.key();
        if *self.which.borrow() != key {
            *self.which.borrow_mut() = key;
            self.scroll.set(0);
            self.seen.set(false);
            self.refused.set(false);
        }
    }

    /// Whether the request's end was shown; if not, the refusal is shown.
    fn whole_seen(&self) -> bool {
        let seen = self.seen.get();
        self.refused.set(!seen);
        seen
    }

    /// ↑↓ PgUp/PgDn Home/End on the question's request. Whether `code` scrolled.
    fn scroll_key(&self, code: KeyCode, letters: bool) -> bool {
        let top = self.scroll.get();
        let page = self.page.get().max(1);
        let to = match code {
            KeyCode::Down => top.saturating_add(1),
            KeyCode::Char('j') if letters => top.saturating_add(1),
            KeyCode::Up => top.saturating_sub(1),
            KeyCode::Char('k') if letters => top.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') if letters || code == KeyCode::PageDown => {
                top.saturating_add(page)
            }
            KeyCode::PageUp => top.saturating_sub(page),
            KeyCode::Home => 0,
            KeyCode::End => usize::MAX / 2,
            _ => return false,
        };
        self.scroll.set(to);
        true
    }
}

/// What the arrows select on the "MCP / A2A" page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpItem {
    Snippets,
    Setting(String),
    Rotate,
}

/// The client configuration snippets: field, title.
pub(crate) const SNIPPETS: [&str; 4] = [
    "Codex (~/.codex/config.toml)",
    "mcpServers JSON",
    "Start the service",
    "A2A SendMessage (curl)",
];

/// One task opened from the list.
pub(crate) struct Detail {
    pub id: TaskId,
    pub rows: Result<Vec<Row>, String>,
    /// The rows wrapped for the last width drawn.
    pub cache: RefCell<Option<(usize, Vec<Line<'static>>)>>,
}

/// One goal of the Ask page's conversation, and how its task went.
pub(crate) struct Turn {
    /// As typed (escaped when drawn).
    pub goal: String,
    pub task: TaskId,
    /// The task's state as last read: a short word, escaped.
    pub state: String,
    /// The answer and evidence once the task ended; `None` while it runs.
    pub outcome: Option<Vec<Row>>,
}

/// The Ask page: the owner's conversation with the built-in Agent (origin `owner_tui`).
#[derive(Default)]
pub(crate) struct Ask {
    /// The conversation the next goal continues (the Agent keeps its history per
    /// context, as for A2A); `None` until the first goal is taken.
    pub context: Option<ContextId>,
    pub turns: Vec<Turn>,
    /// Cancelling the running task was asked for.
    pub cancelling: bool,
    /// Reading the running task failed (escaped); it is read again at the next poll.
    pub read_error: Option<String>,
    /// Keys go into `input` (so none of them switches pages or quits).
    pub typing: bool,
    /// The goal being typed; kept when typing stops, until it is sent.
    pub input: String,
    /// What to add to the configuration, while the Agent has no model (not escaped).
    pub model_missing: Option<String>,
    /// The ended turns wrapped for the last width drawn: width, turns, lines.
    pub cache: RefCell<Option<(usize, usize, Vec<Line<'static>>)>>,
}

impl Ask {
    /// The task of the last goal, while it runs.
    pub fn running(&self) -> Option<&TaskId> {
        self.turns
            .last()
            .filter(|t| t.outcome.is_none())
            .map(|t| &t.task)
    }
}

/// Which scroll position a view keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    Protocols = 0,
    Approvals = 1,
    Tasks = 2,
    Task = 3,
    Ask = 4,
}

/// The terminal interface's whole state.
pub struct App {
    pub(crate) color: bool,
    pub(crate) page: Page,
    pub(crate) status: ProtocolStatus,
    /// This TUI started the service, and that very process (by its start identity) still
    /// runs it: quitting asks whether to stop it.
    pub(crate) started: bool,
    /// The service this TUI started was replaced by another process (or stopped) since.
    replaced: bool,
    /// What happened at startup, shown on the "MCP / A2A" page.
    pub(crate) startup: Option<Note>,
    pub(crate) token_shown: bool,
    pub(crate) snippet: usize,
    pub(crate) mcp_sel: McpItem,
    pub(crate) settings: Result<Vec<SettingView>, String>,
    pub(crate) waiting: Vec<Waiting>,
    pub(crate) pending_error: Option<String>,
    pub(crate) approval_sel: usize,
    decided: Vec<(String, Instant)>,
    pub(crate) grants: Option<Result<Vec<String>, String>>,
    /// The timed UI grants in force, each with when it ends by this TUI's clock.
    pub(crate) ui_grants: Option<Result<Vec<(UiGrant, Instant)>, String>>,
    /// The grant `x` revokes (`g` moves it).
    pub(crate) ui_sel: usize,
    pub(crate) tasks: Option<Result<Vec<TaskRecord>, String>>,
    pub(crate) task_sel: usize,
    pub(crate) detail: Option<Detail>,
    pub(crate) modal: Option<Modal>,
    pub(crate) modal_view: ModalView,
    /// Requests show the exact argv that runs under the command as sent (`v`).
    pub(crate) show_argv: bool,
    pub(crate) note: Option<Note>,
    pub(crate) ask: Ask,
    clipboard: Vec<String>,
    quit: Option<Quit>,
    pub(crate) now: Instant,
    last_poll: Option<Instant>,
    last_status: Instant,
    /// When the task list was read last (the Tasks page reads it again every 5 s).
    last_tasks: Instant,
    /// Top line of each view, as last drawn (draw keeps the selection visible).
    pub(crate) scroll: [Cell<usize>; 5],
    /// Whether drawing scrolls to the selection (off after PgUp/PgDn until it moves).
    pub(crate) follow: Cell<bool>,
    /// Rows of the page body, as last drawn (what PgUp/PgDn move by).
    pub(crate) body_rows: Cell<usize>,
}

fn shown(text: &str) -> String {
    Shown::new(text).to_string()
}

fn device_error(prefix: &str, e: &DeviceError) -> String {
    format!("{prefix}{}", Shown::new(&e.message))
}

impl App {
    /// The interface at startup: reads discovery and, when `protocol_start_with_service`
    /// is on and nothing runs, starts the managed service (remembering that this TUI
    /// started it); then reads the settings and the pending requests.
    pub fn new(device: &dyn Device, options: Options) -> Self {
        let now = Instant::now();
        let mut app = App {
            color: options.color,
            page: Page::Protocols,
            status: device.status(),
            started: false,
            replaced: false,
            startup: None,
            token_shown: false,
            snippet: 0,
            mcp_sel: McpItem::Snippets,
            settings: Ok(Vec::new()),
            waiting: Vec::new(),
            pending_error: None,
            approval_sel: 0,
            decided: Vec::new(),
            grants: None,
            ui_grants: None,
            ui_sel: 0,
            tasks: None,
            task_sel: 0,
            detail: None,
            modal: None,
            modal_view: ModalView::default(),
            show_argv: false,
            note: None,
            ask: Ask::default(),
            clipboard: Vec::new(),
            quit: None,
            now,
            last_poll: None,
            last_tasks: now,
            last_status: now,
            scroll: Default::default(),
            follow: Cell::new(false),
            body_rows: Cell::new(10),
        };
        if device.start_with_service() && app.status.state != ProtocolState::Running {
            app.start_protocols(device, "protocol_start_with_service = true");
        }
        app.load_settings(device);
        app.mcp_sel = app
            .mcp_items()
            .into_iter()
            .next()
            .unwrap_or(McpItem::Snippets);
        app.poll(device);
        app
    }

    /// Starts the managed service (at startup, `why` the switch; later the owner's key).
    fn start_protocols(&mut self, device: &dyn Device, why: &str) {
        self.startup = Some(match device.start_protocols() {
            Ok(true) => {
                tracing::debug!("the TUI started the protocol service");
                self.started = true;
                Note::new(
                    NoteKind::Ok,
                    format!(
                        "Started the service ({why}); quitting asks whether to stop it or \
                         leave it running."
                    ),
                )
            }
            Ok(false) => Note::new(
                NoteKind::Info,
                "The service was already running; quitting leaves it running.",
            ),
            Err(e) => Note::new(
                NoteKind::Error,
                device_error("Could not start the service: ", &e),
            ),
        });
        self.status = device.status();
        self.last_status = self.now;
    }

    /// The page shown.
    pub fn page(&self) -> Page {
        self.page
    }

    /// Set once the owner quit (and what the TUI started was stopped): restore the
    /// terminal, then print the message.
    pub fn quit(&self) -> Option<&Quit> {
        self.quit.as_ref()
    }

    /// Texts the owner asked to copy since the last call: the runner writes each to the
    /// terminal as OSC 52.
    pub fn take_clipboard(&mut self) -> Vec<String> {
        std::mem::take(&mut self.clipboard)
    }

    /// Whether this TUI started the service (so quitting stops it).
    pub fn started_protocols(&self) -> bool {
        self.started
    }

    /// Time passing: [`App::tick_at`] now.
    pub fn tick(&mut self, device: &dyn Device) {
        self.tick_at(device, Instant::now());
    }

    /// Time passing, by the clock `now`: the pending requests are read again every
    /// [`POLL_EVERY`] (their seconds left count down in between), discovery every 5 s.
    pub fn tick_at(&mut self, device: &dyn Device, now: Instant) {
        self.now = now;
        if self
            .last_poll
            .is_none_or(|at| now.saturating_duration_since(at) >= POLL_EVERY)
        {
            self.poll(device);
        }
        if now.saturating_duration_since(self.last_status) >= STATUS_EVERY {
            self.refresh_status(device);
        }
        if self.page == Page::Tasks
            && self.detail.is_none()
            && now.saturating_duration_since(self.last_tasks) >= STATUS_EVERY
        {
            self.load_tasks(device);
        }
    }

    /// Discovery again, what `service status --json` adds, and whether the service this
    /// TUI started still runs (a `service restart` elsewhere puts another in its place,
    /// which this TUI then never stops).
    fn refresh_status(&mut self, device: &dyn Device) {
        self.status = device.status();
        self.last_status = self.now;
        if self.status.token.is_none() {
            self.token_shown = false;
        }
        if self.started && !device.owns_service() {
            self.started = false;
            self.replaced = true;
            let text = if self.status.state == ProtocolState::Running {
                "The service this TUI started was replaced (restarted or started elsewhere): \
                 the one running now is not this TUI's, and quitting leaves it running."
            } else {
                "The service this TUI started has stopped (stopped elsewhere)."
            };
            self.startup = Some(Note::new(NoteKind::Info, text));
        }
        self.fix_mcp_sel();
    }

    /// Reads the pending requests (and, on the Approvals page, the grants).
    fn poll(&mut self, device: &dyn Device) {
        let now = self.now;
        self.last_poll = Some(now);
        self.decided
            .retain(|(_, at)| now.saturating_duration_since(*at) < DECIDED_HIDE);
        let selected = self
            .waiting
            .get(self.approval_sel)
            .map(|w| w.request.id.0.clone());
        match device.pending() {
            Ok(list) => {
                self.pending_error = None;
                let vanished: Vec<(PendingApproval, Gone)> = self
                    .waiting
                    .iter()
                    .filter(|w| !list.iter().any(|p| p.id == w.request.id))
                    .filter(|w| !self.decided.iter().any(|(id, _)| *id == w.request.id.0))
                    .map(|w| {
                        let why = if w.deadline <= now {
                            Gone::Expired
                        } else {
                            Gone::Elsewhere
                        };
                        (w.request.clone(), why)
                    })
                    .collect();
                self.vanished(vanished);
                self.waiting = list
                    .into_iter()
                    .filter(|p| !self.decided.iter().any(|(id, _)| *id == p.id.0))
                    .map(|p| Waiting {
                        deadline: now + Duration::from_secs(p.seconds_left),
                        request: p,
                    })
                    .collect();
            }
            Err(e) => {
                self.pending_error = Some(match e.kind {
                    DeviceErrorKind::NotRunning => {
                        device_error("Nothing is running, so no request can wait: ", &e)
                    }
                    _ => device_error("Cannot read the pending requests: ", &e),
                });
                if e.kind == DeviceErrorKind::NotRunning {
                    let gone = std::mem::take(&mut self.waiting)
                        .into_iter()
                        .map(|w| (w.request, Gone::Stopped))
                        .collect();
                    self.vanished(gone);
                }
            }
        }
        if let Some(id) = selected {
            if let Some(at) = self.waiting.iter().position(|w| w.request.id.0 == id) {
                self.approval_sel = at;
            }
        }
        self.approval_sel = self.approval_sel.min(self.waiting.len().saturating_sub(1));
        if self.page == Page::Approvals {
            self.grants = Some(
                device
                    .grants()
                    .map_err(|e| device_error("Cannot read the grants: ", &e)),
            );
            self.ui_grants = Some(
                device
                    .ui_grants()
                    .map(|list| {
                        list.into_iter()
                            .map(|g| {
                                let ends = now + Duration::from_secs(g.seconds_left);
                                (g, ends)
                            })
                            .collect::<Vec<_>>()
                    })
                    .map_err(|e| device_error("Cannot read the timed UI grants: ", &e)),
            );
            self.fix_ui_sel();
        }
        if self.page == Page::Ask {
            self.check_model(device);
        }
        // On every page: the answer is in the conversation when the owner comes back.
        self.read_task(device);
    }

    /// Requests that left the list without a decision from here: the open question about
    /// one says so (instead of vanishing, whatever was typed with it); others get a note.
    fn vanished(&mut self, gone: Vec<(PendingApproval, Gone)>) {
        for (request, why) in gone {
            let asked = self
                .modal
                .as_ref()
                .and_then(Modal::request)
                .is_some_and(|r| r.id == request.id);
            if asked && !matches!(self.modal, Some(Modal::Gone { .. })) {
                self.modal = Some(Modal::Gone { request, why });
            } else {
                self.set_note(
                    NoteKind::Info,
                    format!("Request {} {}.", shown(&request.id.0), why.words()),
                );
            }
        }
    }

    /// The timed UI grants listed now (none when they could not be read).
    pub(crate) fn ui_grants_now(&self) -> &[(UiGrant, Instant)] {
        match &self.ui_grants {
            Some(Ok(list)) => list,
            _ => &[],
        }
    }

    fn fix_ui_sel(&mut self) {
        self.ui_sel = self
            .ui_sel
            .min(self.ui_grants_now().len().saturating_sub(1));
    }

    /// Seconds until a listed grant ends, by this TUI's clock.
    pub(crate) fn grant_seconds_left(&self, ends: Instant) -> u64 {
        ends.saturating_duration_since(self.now).as_secs()
    }

    fn check_model(&mut self, device: &dyn Device) {
        self.ask.model_missing = device.model_missing();
        if self.ask.model_missing.is_some() {
            self.ask.typing = false;
        }
    }

    /// Reads the running task: its state, and once it ended, its answer and evidence.
    fn read_task(&mut self, device: &dyn Device) {
        let Some(id) = self.ask.running().cloned() else {
            return;
        };
        match device.task(&id) {
            Ok(record) => {
                self.ask.read_error = None;
                let ended = record.state.is_terminal();
                if let Some(turn) = self.ask.turns.last_mut() {
                    turn.state = crate::task::state(&record);
                    turn.outcome = ended.then(|| crate::task::outcome(&record));
                }
                if ended {
                    self.ask.cancelling = false;
                    self.follow.set(true);
                }
            }
            // Asked, but netd has not stored it yet: still submitted.
            Err(e)
                if e.kind == DeviceErrorKind::Invalid
                    && self
                        .ask
                        .turns
                        .last()
                        .is_some_and(|t| t.state == "submitted") => {}
            Err(e) => self.ask.read_error = Some(device_error("Cannot read the task: ", &e)),
        }
    }

    /// The pending request of the running task, shown on the Ask page.
    pub(crate) fn ask_request(&self) -> Option<&Waiting> {
        let id = self.ask.running()?;
        self.waiting
            .iter()
            .find(|w| w.request.task.as_ref() == Some(id))
    }

    /// Seconds a request has left by the clock of the last tick.
    pub(crate) fn seconds_left(&self, w: &Waiting) -> u64 {
        let left = w.deadline.saturating_duration_since(self.now);
        left.as_millis().div_ceil(1000) as u64
    }

    /// The settings as the device sends them: in their order, with their labels, kinds
    /// and warnings (the console keeps no list of its own).
    fn load_settings(&mut self, device: &dyn Device) {
        self.settings = device
            .settings()
            .map_err(|e| device_error("The settings could not be read: ", &e));
        self.fix_mcp_sel();
    }

    /// The warning the setting `key` carries, as it was sent.
    pub(crate) fn setting_warning(&self, key: &str) -> Option<&str> {
        let settings = self.settings.as_ref().ok()?;
        settings.iter().find(|s| s.key == key)?.warning.as_deref()
    }

    /// Reads the task list again, the selection staying on the same task.
    fn load_tasks(&mut self, device: &dyn Device) {
        let selected = match &self.tasks {
            Some(Ok(list)) => list.get(self.task_sel).map(|t| t.id.clone()),
            _ => None,
        };
        self.tasks = Some(
            device
                .tasks(TASK_LIMIT)
                .map_err(|e| device_error("Cannot read the tasks: ", &e)),
        );
        let len = self
            .tasks
            .as_ref()
            .map_or(0, |t| t.as_ref().map_or(0, Vec::len));
        if let (Some(id), Some(Ok(list))) = (selected, &self.tasks) {
            if let Some(at) = list.iter().position(|t| t.id == id) {
                self.task_sel = at;
            }
        }
        self.task_sel = self.task_sel.min(len.saturating_sub(1));
        self.last_tasks = self.now;
    }

    /// Whether the client configuration is shown: only while the protocols run.
    pub(crate) fn shows_snippets(&self) -> bool {
        self.status.state == ProtocolState::Running
    }

    /// What the arrows move through on the "MCP / A2A" page, top to bottom.
    pub(crate) fn mcp_items(&self) -> Vec<McpItem> {
        let mut items = Vec::new();
        if self.shows_snippets() {
            items.push(McpItem::Snippets);
        }
        if let Ok(settings) = &self.settings {
            items.extend(settings.iter().map(|s| McpItem::Setting(s.key.clone())));
            if settings.iter().any(|s| s.key == "protocol_token") {
                items.push(McpItem::Rotate);
            }
        }
        items
    }

    fn fix_mcp_sel(&mut self) {
        let items = self.mcp_items();
        if !items.contains(&self.mcp_sel) {
            if let Some(first) = items.into_iter().next() {
                self.mcp_sel = first;
            }
        }
    }

    pub(crate) fn snippet_text(&self, index: usize) -> &str {
        let s = &self.status.snippets;
        match index {
            0 => &s.codex_toml,
            1 => &s.mcp_servers_json,
            2 => &s.startup_command,
            _ => &s.a2a_request,
        }
    }

    pub(crate) fn view(&self) -> View {
        match self.page {
            Page::Protocols => View::Protocols,
            Page::Approvals => View::Approvals,
            Page::Tasks if self.detail.is_some() => View::Task,
            Page::Tasks => View::Tasks,
            Page::Ask => View::Ask,
        }
    }

    fn set_note(&mut self, kind: NoteKind, text: impl Into<String>) {
        self.note = Some(Note::new(kind, text));
    }

    // ---- keys ------------------------------------------------------------------------

    /// One key. Ctrl-C quits at once (stopping what this TUI started); with a question
    /// or an entry open, the key answers it; otherwise the page's keys apply.
    pub fn handle_key(&mut self, key: KeyEvent, device: &dyn Device) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('c' | 'C'))
        {
            self.quit_now(device, true);
            return;
        }
        if let Some(modal) = self.modal.take() {
            self.modal_key(modal, key, device);
            return;
        }
        if self.page == Page::Ask && self.ask.typing {
            self.input_key(key, device);
            return;
        }
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('q') if plain => {
                if self.started && device.owns_service() {
                    self.modal = Some(Modal::Quit);
                } else {
                    // Another process may run the service now: not this TUI's to stop.
                    self.replaced |= self.started;
                    self.started = false;
                    self.quit_now(device, false);
                }
                return;
            }
            // h/l too (on the "MCP / A2A" page ←→ and s pick a snippet).
            KeyCode::Tab | KeyCode::Char('l') if plain => {
                let next = Page::ALL[self.page.number() % Page::ALL.len()];
                self.set_page(next, device);
                return;
            }
            KeyCode::BackTab | KeyCode::Char('h') if plain => {
                let prev = Page::ALL[(self.page.number() + Page::ALL.len() - 2) % Page::ALL.len()];
                self.set_page(prev, device);
                return;
            }
            KeyCode::Char(c @ '1'..='4') if plain => {
                if let Some(page) = c.to_digit(10).and_then(|n| Page::from_number(n as usize)) {
                    self.set_page(page, device);
                }
                return;
            }
            KeyCode::PageDown | KeyCode::PageUp | KeyCode::Home | KeyCode::End => {
                self.scroll_key(key.code);
                return;
            }
            KeyCode::Char('?') if plain => {
                self.modal = Some(Modal::Help);
                return;
            }
            KeyCode::Char('v') if plain && matches!(self.page, Page::Approvals | Page::Ask) => {
                self.show_argv = !self.show_argv;
                return;
            }
            // h/l move between pages; on the "MCP / A2A" page ←→ (and s) pick a snippet.
            _ => {}
        }
        if !plain {
            return;
        }
        match self.page {
            Page::Protocols => self.protocols_key(key.code, device),
            Page::Approvals => self.approvals_key(key.code),
            Page::Tasks => self.tasks_key(key.code, device),
            Page::Ask => self.ask_key(key.code, device),
        }
    }

    fn set_page(&mut self, page: Page, device: &dyn Device) {
        if page != self.page {
            self.note = None;
            self.token_shown = false;
            self.follow.set(false);
        }
        self.page = page;
        match page {
            Page::Approvals => self.poll(device),
            Page::Tasks if self.tasks.is_none() => self.load_tasks(device),
            Page::Ask => {
                self.check_model(device);
                // The newest part of the conversation.
                self.follow.set(true);
            }
            _ => {}
        }
    }

    fn scroll_key(&mut self, code: KeyCode) {
        let cell = &self.scroll[self.view() as usize];
        let page = self.body_rows.get().saturating_sub(1).max(1);
        let top = cell.get();
        cell.set(match code {
            KeyCode::PageDown => top.saturating_add(page),
            KeyCode::PageUp => top.saturating_sub(page),
            KeyCode::Home => 0,
            _ => usize::MAX,
        });
        self.follow.set(false);
    }

    fn protocols_key(&mut self, code: KeyCode, device: &dyn Device) {
        match code {
            KeyCode::Char('t') => {
                if self.status.token.is_some() && self.shows_snippets() {
                    self.token_shown = !self.token_shown;
                } else {
                    self.set_note(
                        NoteKind::Info,
                        "No HTTP token: nothing serves MCP/A2A over HTTP now.",
                    );
                }
            }
            KeyCode::Char('r') => {
                self.refresh_status(device);
                self.load_settings(device);
                self.set_note(NoteKind::Info, "Refreshed.");
            }
            KeyCode::Char('S') => {
                if self.status.state == ProtocolState::Running {
                    self.set_note(
                        NoteKind::Info,
                        "The service is running already (R restarts it).",
                    );
                } else {
                    self.start_protocols(device, "S pressed");
                    self.refresh_status(device);
                    self.note = None;
                }
            }
            KeyCode::Char('R') => {
                if self.status.state == ProtocolState::Running {
                    self.modal = Some(Modal::Restart);
                } else {
                    self.set_note(NoteKind::Info, "The service is not running: S starts it.");
                }
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_mcp(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_mcp(1),
            KeyCode::Left if self.shows_snippets() => {
                self.snippet = (self.snippet + SNIPPETS.len() - 1) % SNIPPETS.len();
                self.mcp_sel = McpItem::Snippets;
                self.follow.set(true);
            }
            KeyCode::Right | KeyCode::Char('s') if self.shows_snippets() => {
                self.snippet = (self.snippet + 1) % SNIPPETS.len();
                self.mcp_sel = McpItem::Snippets;
                self.follow.set(true);
            }
            KeyCode::Char('c') => self.copy_snippet(),
            KeyCode::Enter => match self.mcp_sel.clone() {
                McpItem::Snippets => self.copy_snippet(),
                McpItem::Setting(key) => self.edit_setting(&key),
                McpItem::Rotate => self.modal = Some(Modal::Rotate),
            },
            KeyCode::Esc => self.note = None,
            _ => {}
        }
    }

    fn move_mcp(&mut self, by: isize) {
        let items = self.mcp_items();
        if items.is_empty() {
            return;
        }
        let at = items.iter().position(|i| *i == self.mcp_sel).unwrap_or(0);
        let to = at.saturating_add_signed(by).min(items.len() - 1);
        self.mcp_sel = items[to].clone();
        self.follow.set(true);
    }

    fn copy_snippet(&mut self) {
        if !self.shows_snippets() {
            self.set_note(
                NoteKind::Info,
                "The client configuration is shown while the service runs.",
            );
            return;
        }
        let text = self.snippet_text(self.snippet).to_string();
        if text.is_empty() {
            self.set_note(NoteKind::Info, "Nothing to copy.");
            return;
        }
        self.clipboard.push(text);
        self.mcp_sel = McpItem::Snippets;
        self.set_note(
            NoteKind::Ok,
            format!(
                "Copied \"{}\" (OSC 52). If your terminal ignores OSC 52, select the text on the screen.",
                SNIPPETS[self.snippet]
            ),
        );
    }

    fn edit_setting(&mut self, key: &str) {
        let Ok(settings) = &self.settings else {
            return;
        };
        let Some(s) = settings.iter().find(|s| s.key == key) else {
            return;
        };
        let label = shown(&s.label);
        let entry = |kind, typed: String| Modal::Entry {
            key: s.key.clone(),
            label: label.clone(),
            kind,
            typed,
            error: None,
        };
        self.modal = Some(match s.kind {
            SettingKind::Switch => Modal::Toggle {
                key: s.key.clone(),
                label: label.clone(),
                value: s.value != "true",
            },
            SettingKind::Port => {
                let current = if s.value.bytes().all(|b| b.is_ascii_digit()) {
                    s.value.clone()
                } else {
                    String::new()
                };
                entry(EntryKind::Port, current)
            }
            SettingKind::Secret => entry(EntryKind::Secret, String::new()),
            SettingKind::Text => entry(EntryKind::Text, s.value.clone()),
        });
    }

    fn approvals_key(&mut self, code: KeyCode) {
        match code {
            KeyCode::Up | KeyCode::Char('k') => {
                self.approval_sel = self.approval_sel.saturating_sub(1);
                self.follow.set(true);
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.approval_sel =
                    (self.approval_sel + 1).min(self.waiting.len().saturating_sub(1));
                self.follow.set(true);
            }
            KeyCode::Char(c @ ('a' | 'r')) => match self.waiting.get(self.approval_sel) {
                Some(w) => self.confirm(w.request.clone(), c == 'a'),
                None => self.set_note(NoteKind::Info, "No request is waiting."),
            },
            // Approve with a timed UI grant: only a request that may be followed by one.
            KeyCode::Char('u') => match self.waiting.get(self.approval_sel) {
                Some(w) if w.request.ui_app.is_some() => {
                    self.follow.set(true);
                    self.modal = Some(Modal::UiGrant {
                        request: w.request.clone(),
                        minutes: UI_GRANT_DEFAULT,
                    });
                }
                Some(w) => self.set_note(
                    NoteKind::Info,
                    format!(
                        "Request {} cannot be approved with a timed UI grant: only a tap, \
                         gesture, text or key in an ordinary app, at medium risk or below.",
                        shown(&w.request.id.0)
                    ),
                ),
                None => self.set_note(NoteKind::Info, "No request is waiting."),
            },
            KeyCode::Char('g') => {
                let n = self.ui_grants_now().len();
                if n == 0 {
                    self.set_note(NoteKind::Info, "No timed UI grant is in force.");
                } else {
                    self.ui_sel = (self.ui_sel + 1) % n;
                }
            }
            KeyCode::Char('x') => match self.ui_grants_now().get(self.ui_sel) {
                Some((g, _)) => {
                    self.modal = Some(Modal::RevokeUiGrant {
                        id: g.id.clone(),
                        app: g.app.clone(),
                    });
                }
                None => self.set_note(NoteKind::Info, "No timed UI grant is in force."),
            },
            // Every request of the selected one's origin: a flood is cleared at once.
            KeyCode::Char('R') => match self.waiting.get(self.approval_sel) {
                Some(w) => {
                    let origin = w.request.origin;
                    let count = self
                        .waiting
                        .iter()
                        .filter(|w| w.request.origin == origin)
                        .count();
                    self.follow.set(true);
                    self.modal = Some(Modal::RejectOrigin { origin, count });
                }
                None => self.set_note(NoteKind::Info, "No request is waiting."),
            },
            KeyCode::Esc => self.note = None,
            _ => {}
        }
    }

    /// Asks the owner to confirm approving or rejecting `request`: approving a dangerous
    /// or critical one takes its phrase. The one confirmer of the Approvals and Ask pages.
    fn confirm(&mut self, request: PendingApproval, approve: bool) {
        self.follow.set(true);
        self.modal = Some(if approve && request.phrase.is_some() {
            Modal::Phrase {
                request,
                typed: String::new(),
                error: None,
            }
        } else {
            Modal::Decide { request, approve }
        });
    }

    /// A key on the Ask page while not typing.
    fn ask_key(&mut self, code: KeyCode, device: &dyn Device) {
        let cell = &self.scroll[View::Ask as usize];
        match code {
            KeyCode::Char('/' | 'i') | KeyCode::Enter => {
                if self.ask.model_missing.is_some() {
                    self.set_note(
                        NoteKind::Info,
                        "The Agent has no model: add one as shown, then come back to this page.",
                    );
                } else {
                    self.ask.typing = true;
                    self.note = None;
                    self.follow.set(true);
                }
            }
            KeyCode::Char(c @ ('a' | 'r')) => match self.ask_request() {
                Some(w) => self.confirm(w.request.clone(), c == 'a'),
                None => self.set_note(NoteKind::Info, "No request of this task is waiting."),
            },
            KeyCode::Char('n') => {
                if self.ask.running().is_some() {
                    self.set_note(
                        NoteKind::Info,
                        "A task is running: Esc cancels it, then n starts a new conversation.",
                    );
                } else {
                    self.ask = Ask {
                        input: std::mem::take(&mut self.ask.input),
                        model_missing: self.ask.model_missing.take(),
                        ..Ask::default()
                    };
                    self.follow.set(true);
                    self.set_note(
                        NoteKind::Info,
                        "A new conversation: the Agent starts without the earlier goals.",
                    );
                }
            }
            KeyCode::Esc => self.cancel_task(device),
            KeyCode::Up | KeyCode::Char('k') => {
                cell.set(cell.get().saturating_sub(1));
                self.follow.set(false);
            }
            KeyCode::Down | KeyCode::Char('j') => {
                cell.set(cell.get().saturating_add(1));
                self.follow.set(false);
            }
            _ => {}
        }
    }

    /// Esc on the Ask page: cancels the running task (netd kills its command's process
    /// group); pressed again while that is under way, stops waiting for it here.
    fn cancel_task(&mut self, device: &dyn Device) {
        let Some(id) = self.ask.running().cloned() else {
            self.note = None;
            return;
        };
        if self.ask.cancelling {
            self.ask.cancelling = false;
            self.ask.read_error = None;
            if let Some(turn) = self.ask.turns.last_mut() {
                turn.outcome = Some(vec![Row {
                    lead: "  ".into(),
                    text: "No longer followed here: the Tasks page shows how it ends.".into(),
                    indent: 2,
                    look: Look::Muted,
                }]);
            }
            self.note = None;
            return;
        }
        match device.cancel_task(&id) {
            Ok(()) => {
                self.ask.cancelling = true;
                self.follow.set(true);
                self.note = None;
            }
            Err(e) => self.set_note(
                NoteKind::Error,
                device_error("Could not cancel the task: ", &e),
            ),
        }
    }

    /// A key while typing a goal: every printable character is text.
    fn input_key(&mut self, key: KeyEvent, device: &dyn Device) {
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::PageUp | KeyCode::PageDown => {
                self.scroll_key(key.code);
                return;
            }
            KeyCode::Enter => self.send(device),
            KeyCode::Esc => {
                self.ask.typing = false;
                if self.ask.input.is_empty() {
                    self.note = None;
                } else {
                    self.set_note(NoteKind::Info, "Not sent: / or i goes on typing.");
                }
            }
            KeyCode::Backspace => {
                self.ask.input.pop();
            }
            KeyCode::Char(c) if plain && !c.is_control() => {
                if self.ask.input.len() + c.len_utf8() > MAX_AGENT_TEXT_BYTES {
                    self.set_note(
                        NoteKind::Error,
                        format!(
                            "A goal is at most {MAX_AGENT_TEXT_BYTES} bytes (as over A2A): \
                             this one is full."
                        ),
                    );
                } else {
                    self.ask.input.push(c);
                }
            }
            _ => {}
        }
        self.follow.set(true);
    }

    /// Enter while typing: the goal to the Agent, continuing the conversation.
    fn send(&mut self, device: &dyn Device) {
        if self.ask.input.trim().is_empty() {
            self.set_note(NoteKind::Info, "Type a goal first.");
            return;
        }
        if self.ask.running().is_some() {
            self.set_note(
                NoteKind::Info,
                "The Agent is still on the last goal: send this one when it ends \
                 (or Esc, then Esc again to cancel it).",
            );
            return;
        }
        match device.ask(self.ask.context.as_ref(), &self.ask.input) {
            Ok((task, context)) => {
                self.ask.context = Some(context);
                self.ask.turns.push(Turn {
                    goal: std::mem::take(&mut self.ask.input),
                    task,
                    state: "submitted".into(),
                    outcome: None,
                });
                self.ask.typing = false;
                self.ask.read_error = None;
                self.note = None;
                // The Tasks page lists it when it is opened next.
                self.tasks = None;
                self.read_task(device);
            }
            Err(e) => {
                let text = match e.kind {
                    DeviceErrorKind::NotRunning => ASK_NOT_RUNNING.to_string(),
                    _ => device_error("The Agent was not asked: ", &e),
                };
                self.set_note(NoteKind::Error, text);
            }
        }
    }

    fn tasks_key(&mut self, code: KeyCode, device: &dyn Device) {
        if self.detail.is_some() {
            let cell = &self.scroll[View::Task as usize];
            match code {
                KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => {
                    self.detail = None;
                    self.follow.set(true);
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    cell.set(cell.get().saturating_sub(1));
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    cell.set(cell.get().saturating_add(1));
                }
                KeyCode::Char('r') => {
                    if let Some(id) = self.detail.as_ref().map(|d| d.id.clone()) {
                        self.open_task(&id, device);
                    }
                }
                _ => {}
            }
            return;
        }
        let len = match &self.tasks {
            Some(Ok(list)) => list.len(),
            _ => 0,
        };
        match code {
            KeyCode::Up | KeyCode::Char('k') => {
                self.task_sel = self.task_sel.saturating_sub(1);
                self.follow.set(true);
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.task_sel = (self.task_sel + 1).min(len.saturating_sub(1));
                self.follow.set(true);
            }
            KeyCode::Char('r') => {
                self.load_tasks(device);
                self.set_note(NoteKind::Info, "Refreshed.");
            }
            KeyCode::Enter => {
                let id = match &self.tasks {
                    Some(Ok(list)) => list.get(self.task_sel).map(|t| t.id.clone()),
                    _ => None,
                };
                if let Some(id) = id {
                    self.scroll[View::Task as usize].set(0);
                    self.open_task(&id, device);
                }
            }
            KeyCode::Esc => self.note = None,
            _ => {}
        }
    }

    fn open_task(&mut self, id: &TaskId, device: &dyn Device) {
        let rows = match device.task(id) {
            Ok(record) => Ok(crate::task::rows(&record)),
            Err(e) => Err(device_error("Cannot read the task: ", &e)),
        };
        self.detail = Some(Detail {
            id: id.clone(),
            rows,
            cache: RefCell::new(None),
        });
    }

    /// A key in the timed-UI-grant question: approve, cancel, or pick the minutes.
    fn ui_grant_key(
        &mut self,
        request: PendingApproval,
        minutes: u32,
        key: KeyEvent,
        device: &dyn Device,
        (yes, no, plain): (bool, bool, bool),
    ) {
        let at = UI_GRANT_MINUTES
            .iter()
            .position(|m| *m == minutes)
            .unwrap_or(1);
        let last = UI_GRANT_MINUTES.len() - 1;
        match key.code {
            _ if yes && !self.modal_view.whole_seen() => {
                self.modal = Some(Modal::UiGrant { request, minutes });
            }
            _ if yes => self.approve_for_ui(device, &request, minutes),
            _ if no => self.set_note(NoteKind::Info, "Cancelled: nothing was sent."),
            KeyCode::Right | KeyCode::Char('+' | 'l') if plain => {
                self.modal = Some(Modal::UiGrant {
                    request,
                    minutes: UI_GRANT_MINUTES[(at + 1).min(last)],
                });
            }
            KeyCode::Left | KeyCode::Char('-' | 'h') if plain => {
                self.modal = Some(Modal::UiGrant {
                    request,
                    minutes: UI_GRANT_MINUTES[at.saturating_sub(1)],
                });
            }
            _ => self.modal = Some(Modal::UiGrant { request, minutes }),
        }
    }

    /// A key in the question whether to revoke timed UI grant `id`.
    fn revoke_key(
        &mut self,
        id: String,
        app: String,
        device: &dyn Device,
        (yes, no): (bool, bool),
    ) {
        if yes {
            match device.revoke_ui_grant(&id) {
                Ok(()) => self.set_note(
                    NoteKind::Ok,
                    format!("Revoked: UI actions in {} ask again.", shown(&app)),
                ),
                Err(e) if e.kind == DeviceErrorKind::NoSuchRequest => {
                    self.set_note(NoteKind::Info, "That grant had ended already.")
                }
                Err(e) => self.set_note(NoteKind::Error, device_error("Not revoked: ", &e)),
            }
            self.poll(device);
        } else if no {
            self.set_note(NoteKind::Info, "Not revoked.");
        } else {
            self.modal = Some(Modal::RevokeUiGrant { id, app });
        }
    }

    fn modal_key(&mut self, modal: Modal, key: KeyEvent, device: &dyn Device) {
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        let yes = matches!(key.code, KeyCode::Enter | KeyCode::Char('y' | 'Y')) && plain;
        let no = matches!(key.code, KeyCode::Esc | KeyCode::Char('n' | 'N')) && plain;
        if plain && self.view_key(&modal, key.code) {
            self.modal = Some(modal);
            return;
        }
        match modal {
            Modal::Decide { request, approve } => {
                if yes && approve && !self.modal_view.whole_seen() {
                    self.modal = Some(Modal::Decide { request, approve });
                } else if yes {
                    self.decide(device, &request, approve, None);
                } else if no {
                    self.set_note(NoteKind::Info, "Cancelled: nothing was sent.");
                } else {
                    self.modal = Some(Modal::Decide { request, approve });
                }
            }
            Modal::Phrase {
                request,
                typed,
                error,
            } => self.phrase_key(request, typed, error, key, device),
            Modal::UiGrant { request, minutes } => {
                self.ui_grant_key(request, minutes, key, device, (yes, no, plain))
            }
            Modal::RevokeUiGrant { id, app } => self.revoke_key(id, app, device, (yes, no)),
            Modal::RejectOrigin { origin, count } => {
                if yes {
                    self.reject_origin(device, origin);
                } else if no {
                    self.set_note(NoteKind::Info, "Cancelled: nothing was sent.");
                } else {
                    self.modal = Some(Modal::RejectOrigin { origin, count });
                }
            }
            m @ (Modal::Toggle { .. } | Modal::Rotate | Modal::Restart) => {
                self.settings_modal_key(m, (yes, no), device)
            }
            Modal::Entry {
                key: k,
                label,
                kind,
                typed,
                error,
            } => self.entry_key((k, label, kind), typed, error, key, device),
            Modal::Help => {
                if !(no || key.code == KeyCode::Enter || key.code == KeyCode::Char('?')) {
                    self.modal = Some(Modal::Help);
                }
            }
            Modal::Gone { request, why } => {
                if !(no || yes || key.code == KeyCode::Char('q')) {
                    self.modal = Some(Modal::Gone { request, why });
                }
            }
            Modal::NewToken { token } => {
                if !(no || yes) {
                    self.modal = Some(Modal::NewToken { token });
                }
            }
            Modal::Quit => match key.code {
                KeyCode::Char('s' | 'y') | KeyCode::Enter if plain => self.quit_now(device, true),
                KeyCode::Char('l') if plain => self.quit_now(device, false),
                _ if no => self.note = None,
                _ => self.modal = Some(Modal::Quit),
            },
        }
    }

    /// Keys that change how a question shows its request: ↑↓ PgUp/PgDn (j k Space where
    /// nothing is typed) scroll it; v, or Tab while a phrase is typed, shows or hides the
    /// exact argv. Whether `code` was one.
    fn view_key(&mut self, modal: &Modal, code: KeyCode) -> bool {
        let letters = match modal {
            Modal::Phrase { .. } => false,
            Modal::Decide { .. } | Modal::UiGrant { .. } | Modal::Gone { .. } | Modal::Help => true,
            _ => return false,
        };
        if self.modal_view.scroll_key(code, letters) {
            return true;
        }
        let argv = match code {
            KeyCode::Tab => true,
            KeyCode::Char('v') => letters,
            _ => false,
        };
        if argv && modal.request().is_some() {
            self.show_argv = !self.show_argv;
            return true;
        }
        false
    }

    /// y or n to a setting's switch, a rotation or a restart.
    fn settings_modal_key(&mut self, modal: Modal, (yes, no): (bool, bool), device: &dyn Device) {
        if !yes && !no {
            self.modal = Some(modal);
            return;
        }
        match modal {
            Modal::Toggle { key, value, .. } if yes => {
                self.save(device, &key, if value { "true" } else { "false" })
            }
            Modal::Toggle { .. } => self.set_note(NoteKind::Info, "Not saved."),
            Modal::Rotate if yes => match device.rotate_token() {
                Ok((token, saved)) => {
                    self.saved(device, &saved);
                    self.modal = Some(Modal::NewToken { token });
                }
                Err(e) => self.set_note(NoteKind::Error, device_error("Not rotated: ", &e)),
            },
            Modal::Rotate => self.set_note(NoteKind::Info, "Not rotated."),
            Modal::Restart if yes => self.restart(device),
            Modal::Restart => self.set_note(NoteKind::Info, "Not restarted."),
            other => self.modal = Some(other),
        }
    }

    /// A key in the phrase modal: typing, Enter (approve with the phrase, when it is the
    /// request's), Esc.
    fn phrase_key(
        &mut self,
        request: PendingApproval,
        mut typed: String,
        mut error: Option<String>,
        key: KeyEvent,
        device: &dyn Device,
    ) {
        match key.code {
            KeyCode::Esc => {
                self.set_note(NoteKind::Info, "Cancelled: nothing was sent.");
                return;
            }
            KeyCode::Enter => {
                let phrase = request.phrase.as_deref().unwrap_or_default();
                if typed.is_empty() {
                    error = Some("Type the phrase shown to approve.".into());
                } else if typed != phrase {
                    error = Some(
                        "That is not the phrase (nothing was sent): type it exactly as shown."
                            .into(),
                    );
                } else if !self.modal_view.whole_seen() {
                    error = Some(
                        "Not approved yet: read the whole request first (↓/PgDn to its end)."
                            .into(),
                    );
                } else {
                    match device.decide(&request.id.0, true, Some(&typed)) {
                        Ok(()) => {
                            self.decided_ok(&request, true);
                            return;
                        }
                        Err(e)
                            if matches!(
                                e.kind,
                                DeviceErrorKind::WrongPhrase | DeviceErrorKind::PhraseRequired
                            ) =>
                        {
                            error = Some(device_error("Refused: ", &e));
                        }
                        Err(e) => {
                            self.decide_failed(&request, &e);
                            return;
                        }
                    }
                }
            }
            _ => {
                if edit(&mut typed, key) {
                    error = None;
                }
            }
        }
        // Still asking: what was typed, and what is wrong with it.
        self.modal = Some(Modal::Phrase {
            request,
            typed,
            error,
        });
    }

    /// A key in the entry modal of setting `k`: typing, Enter (save, once the value is
    /// of its kind), Esc.
    fn entry_key(
        &mut self,
        (k, label, kind): (String, String, EntryKind),
        mut typed: String,
        mut error: Option<String>,
        key: KeyEvent,
        device: &dyn Device,
    ) {
        match key.code {
            KeyCode::Esc => {
                typed.clear();
                self.set_note(NoteKind::Info, "Not saved.");
                return;
            }
            KeyCode::Enter => {
                let value = match kind {
                    EntryKind::Port => typed.trim().to_string(),
                    _ => typed.clone(),
                };
                let check = match kind {
                    EntryKind::Port if !valid_port(&value) => {
                        Some("Enter a port number from 0 to 65535 (0 picks any free port).")
                    }
                    EntryKind::Secret if value.is_empty() => {
                        Some("Type the new token first (or use \"Rotate token\" for a random one).")
                    }
                    _ => None,
                };
                if let Some(message) = check {
                    error = Some(message.into());
                } else {
                    match device.save_setting(&k, &value) {
                        Ok(saved) => {
                            typed.clear();
                            self.saved(device, &saved);
                            return;
                        }
                        Err(e) => error = Some(device_error("Not saved: ", &e)),
                    }
                }
            }
            _ => {
                if edit(&mut typed, key) {
                    error = None;
                }
            }
        }
        // Still asking: what was typed, and what is wrong with it.
        self.modal = Some(Modal::Entry {
            key: k,
            label,
            kind,
            typed,
            error,
        });
    }

    fn decide(
        &mut self,
        device: &dyn Device,
        request: &PendingApproval,
        approve: bool,
        phrase: Option<&str>,
    ) {
        match device.decide(&request.id.0, approve, phrase) {
            Ok(()) => self.decided_ok(request, approve),
            Err(e) => self.decide_failed(request, &e),
        }
    }

    fn approve_for_ui(&mut self, device: &dyn Device, request: &PendingApproval, minutes: u32) {
        match device.approve_for_ui(&request.id.0, request.phrase.as_deref(), minutes) {
            Ok(()) => {
                self.decided_ok(request, true);
                let app = request.ui_app.as_deref().map(shown).unwrap_or_default();
                self.set_note(
                    NoteKind::Ok,
                    format!(
                        "Approved {}; UI actions from {} in {app} run unasked for {minutes} min.",
                        shown(&request.id.0),
                        request.origin.as_str()
                    ),
                );
                self.poll(device);
            }
            Err(e) => self.decide_failed(request, &e),
        }
    }

    /// Rejects every request of `origin` pending now, those that came since the question
    /// too: the owner asked to clear that origin.
    fn reject_origin(&mut self, device: &dyn Device, origin: CallOrigin) {
        match device.reject_origin(origin) {
            Ok(rejected) if rejected.is_empty() => self.set_note(
                NoteKind::Info,
                format!("No request from {} was waiting.", origin.as_str()),
            ),
            Ok(rejected) => {
                for r in &rejected {
                    tracing::debug!(id = %Shown::new(&r.id.0), "rejected from the TUI by origin");
                    self.decided.push((r.id.0.clone(), self.now));
                }
                self.waiting
                    .retain(|w| !rejected.iter().any(|r| r.id == w.request.id));
                self.approval_sel = self.approval_sel.min(self.waiting.len().saturating_sub(1));
                let n = rejected.len();
                let requests = if n == 1 { "request" } else { "requests" };
                self.set_note(
                    NoteKind::Ok,
                    format!("Rejected {n} {requests} from {}.", origin.as_str()),
                );
            }
            Err(e) => self.set_note(NoteKind::Error, device_error("Not rejected: ", &e)),
        }
    }

    fn decided_ok(&mut self, request: &PendingApproval, approve: bool) {
        let id = &request.id.0;
        tracing::debug!(id = %Shown::new(id), approve, "decided from the TUI");
        self.decided.push((id.clone(), self.now));
        self.waiting.retain(|w| w.request.id.0 != *id);
        self.approval_sel = self.approval_sel.min(self.waiting.len().saturating_sub(1));
        let verb = if approve { "Approved" } else { "Rejected" };
        self.set_note(NoteKind::Ok, format!("{verb} {}.", shown(id)));
    }

    fn decide_failed(&mut self, request: &PendingApproval, e: &DeviceError) {
        let id = shown(&request.id.0);
        let text = match e.kind {
            DeviceErrorKind::NoSuchRequest => {
                format!("Request {id}: decided elsewhere or gone.")
            }
            DeviceErrorKind::Expired => {
                format!("Request {id} expired before the decision reached it.")
            }
            DeviceErrorKind::WrongPhrase => {
                device_error(&format!("Request {id}: wrong phrase: "), e)
            }
            DeviceErrorKind::PhraseRequired => {
                device_error(&format!("Request {id} needs its phrase: "), e)
            }
            DeviceErrorKind::NotRunning => device_error("Nothing is running: ", e),
            DeviceErrorKind::Refused => device_error("Refused: ", e),
            DeviceErrorKind::Invalid | DeviceErrorKind::Failed => {
                device_error(&format!("Request {id} was not decided: "), e)
            }
        };
        if matches!(
            e.kind,
            DeviceErrorKind::NoSuchRequest | DeviceErrorKind::Expired
        ) {
            // It will not come back: drop it now rather than at the next poll.
            self.decided.push((request.id.0.clone(), self.now));
            self.waiting.retain(|w| w.request.id != request.id);
            self.approval_sel = self.approval_sel.min(self.waiting.len().saturating_sub(1));
        }
        self.set_note(NoteKind::Error, text);
    }

    fn save(&mut self, device: &dyn Device, key: &str, value: &str) {
        match device.save_setting(key, value) {
            Ok(saved) => self.saved(device, &saved),
            Err(e) => self.set_note(NoteKind::Error, device_error("Not saved: ", &e)),
        }
    }

    fn saved(&mut self, device: &dyn Device, saved: &crate::device::Saved) {
        let mut text = if saved.message.is_empty() {
            "Saved.".to_string()
        } else {
            shown(&saved.message)
        };
        if saved.restart_needed {
            text.push_str(if self.status.state == ProtocolState::Running {
                " Restart needed: R restarts the service now."
            } else {
                " It applies when the service starts (S starts it)."
            });
            self.refresh_status(device);
        }
        self.set_note(NoteKind::Ok, text);
        self.load_settings(device);
    }

    /// `service restart`, as the owner asked: the service runs the saved settings. A
    /// service this TUI started stays its own.
    fn restart(&mut self, device: &dyn Device) {
        match device.restart_protocols() {
            Ok(()) => self.set_note(
                NoteKind::Ok,
                "Restarted: the service runs the saved settings.",
            ),
            Err(e) => self.set_note(NoteKind::Error, device_error("Not restarted: ", &e)),
        }
        self.refresh_status(device);
        self.load_settings(device);
    }

    /// Quit now; with `stop`, stop the service this TUI started first (only that very
    /// process: another one running now is left alone, and the message says so).
    fn quit_now(&mut self, device: &dyn Device, stop: bool) {
        self.modal = None;
        let quit = if self.replaced && !self.started {
            let running = device.status().state == ProtocolState::Running;
            Quit {
                message: running.then(|| format!("Left the service running: {NOT_OURS}.")),
                failed: false,
            }
        } else if self.started && !stop {
            Quit {
                message: Some("Left the service this TUI started running.".into()),
                failed: false,
            }
        } else if self.started {
            match device.stop_protocols() {
                Ok(stopped) => {
                    self.started = false;
                    let message = match stopped {
                        Stopped::Stopped => "Stopped the service this TUI started.".to_string(),
                        Stopped::Gone => {
                            "The service this TUI started had stopped already.".to_string()
                        }
                        Stopped::Replaced(pid) => {
                            format!("Left the service running (pid {pid}): {NOT_OURS}.")
                        }
                    };
                    Quit {
                        message: Some(message),
                        failed: false,
                    }
                }
                Err(e) => Quit {
                    message: Some(device_error(
                        "Could not stop the service this TUI started: ",
                        &e,
                    )),
                    failed: true,
                },
            }
        } else {
            Quit {
                message: None,
                failed: false,
            }
        };
        self.quit = Some(quit);
    }
}

/// Whether `value` is a port number: 1–5 digits, at most 65535.
fn valid_port(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 5
        && value.bytes().all(|b| b.is_ascii_digit())
        && value.parse::<u32>().is_ok_and(|p| p <= 65535)
}

/// A key typed into an entry: a character appended, Backspace erasing one. Whether the
/// text changed.
fn edit(typed: &mut String, key: KeyEvent) -> bool {
    if key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return false;
    }
    match key.code {
        KeyCode::Backspace => typed.pop().is_some(),
        KeyCode::Char(c) if !c.is_control() && typed.chars().count() < MAX_ENTRY_CHARS => {
            typed.push(c);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        for ok in ["0", "1", "8765", "65535", "00080"] {
            assert!(valid_port(ok), "{ok}");
        }
        for bad in ["", "65536", "70000", "-1", "123456", "80a", " 80", "+80"] {
            assert!(!valid_port(bad), "{bad}");
        }
    }
}
