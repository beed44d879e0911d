//! Drawing: [`App::draw`] renders the state into a ratatui frame of any size.
//!
//! Every value that came from the device, a caller, a tool or a model is passed through
//! [`Shown`] before it becomes a span, and long values are wrapped to the width (never
//! cut by the layout: what does not fit scrolls).

use nl2sh_proto::channels::{CallOrigin, PendingApproval, ProtocolState, SettingKind};
use nl2sh_proto::clock::readable_utc;
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{MAX_ACTION_BYTES, MAX_AGENT_TEXT_BYTES, MAX_PENDING_APPROVALS};
use nl2sh_proto::requester;
use nl2sh_proto::stored_text::StoredText;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use crate::app::{
    App, EntryKind, McpItem, Modal, NoteKind, Page, Turn, View, ASK_NOT_RUNNING, SNIPPETS,
};
use crate::task::{Look, Row};
use crate::text::{time_left, width, wrap};

fn shown(text: &str) -> String {
    Shown::new(text).to_string()
}

/// Styles, or none at all without colour.
#[derive(Clone, Copy)]
pub(crate) struct Theme {
    color: bool,
}

impl Theme {
    fn pick(self, style: Style) -> Style {
        if self.color {
            style
        } else {
            Style::default()
        }
    }
    fn plain(self) -> Style {
        Style::default()
    }
    fn heading(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD))
    }
    fn label(self) -> Style {
        self.pick(Style::new().add_modifier(Modifier::BOLD))
    }
    fn selected(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD))
    }
    fn muted(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray))
    }
    fn ok(self) -> Style {
        self.pick(Style::new().fg(Color::Green))
    }
    fn warn(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow))
    }
    fn error(self) -> Style {
        self.pick(Style::new().fg(Color::Red).add_modifier(Modifier::BOLD))
    }
    fn tab(self) -> Style {
        self.pick(Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD))
    }
    fn state(self, state: ProtocolState) -> Style {
        match state {
            ProtocolState::Running => {
                self.pick(Style::new().fg(Color::Green).add_modifier(Modifier::BOLD))
            }
            ProtocolState::Stopped => {
                self.pick(Style::new().fg(Color::Red).add_modifier(Modifier::BOLD))
            }
            ProtocolState::Unknown => {
                self.pick(Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD))
            }
        }
    }
    fn risk(self, risk: &str) -> Style {
        match risk {
            "dangerous" | "critical" => self.error(),
            "medium" | "high" => {
                self.pick(Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD))
            }
            _ => self.label(),
        }
    }
    fn note(self, kind: NoteKind) -> Style {
        match kind {
            NoteKind::Info => self.plain(),
            NoteKind::Ok => self.ok(),
            NoteKind::Error => self.error(),
        }
    }
    fn look(self, look: Look) -> Style {
        match look {
            Look::Plain => self.plain(),
            Look::Heading => self.heading(),
            Look::Label => self.label(),
            Look::Muted => self.muted(),
            Look::Error => self.error(),
        }
    }
}

/// Lines of a page, wrapped to its width, with the range of the selected item.
pub(crate) struct Body {
    pub lines: Vec<Line<'static>>,
    width: usize,
    pub selected: Option<(usize, usize)>,
}

impl Body {
    fn new(width: usize) -> Self {
        Self {
            lines: Vec::new(),
            width: width.max(1),
            selected: None,
        }
    }

    fn blank(&mut self) {
        self.lines.push(Line::default());
    }

    /// `text` wrapped to the width.
    fn text(&mut self, text: &str, style: Style) {
        self.field("", Style::default(), text, style, 0);
    }

    /// `lead` (ours), then `text` wrapped, its further lines indented by `indent`. A
    /// lead too wide for the line gets a line of its own.
    fn field(&mut self, lead: &str, lead_style: Style, text: &str, style: Style, indent: usize) {
        let lead_width = width(lead);
        let indent = indent.min(self.width / 2);
        let rest = self.width - indent;
        if lead_width > 0 && lead_width + 1 > self.width {
            for part in wrap(lead, self.width, self.width) {
                self.lines.push(Line::from(Span::styled(part, lead_style)));
            }
            for part in wrap(text, rest, rest) {
                self.lines.push(Line::from(vec![
                    Span::raw(" ".repeat(indent)),
                    Span::styled(part, style),
                ]));
            }
            return;
        }
        let first = self.width - lead_width;
        for (i, part) in wrap(text, first, rest).into_iter().enumerate() {
            let head = if i == 0 {
                Span::styled(lead.to_string(), lead_style)
            } else {
                Span::raw(" ".repeat(indent))
            };
            self.lines
                .push(Line::from(vec![head, Span::styled(part, style)]));
        }
    }

    fn start(&self) -> usize {
        self.lines.len()
    }

    fn select_from(&mut self, start: usize) {
        self.selected = Some((start, self.lines.len()));
    }
}

/// A request as the owner reads it: who is asking (in words, first), then its id, tool,
/// risk, whose rights it runs with and the time left counting down, then its fields: the
/// command as sent (`shell.exec`; the exact argv under it when `argv`, else a hint) or the
/// action, the reasons, the phrase. Every value escaped. `left`: seconds left, `None`
/// once it no longer waits.
pub(crate) struct Described {
    pub who: String,
    pub head: String,
    pub fields: Vec<(String, String)>,
}

/// A text the caller sent, under `label`, as a shell prints it where every character can
/// be shown (`'\''` with one backslash), else escaped whole and saying so; several lines
/// each behind `| `.
fn as_sent_fields(fields: &mut Vec<(String, String)>, label: &str, text: &str) {
    let sent = nl2sh_proto::display::as_sent(text, MAX_ACTION_BYTES);
    if sent.escaped {
        fields.push((
            format!("{label} (shown escaped: \\\\ is one backslash): "),
            sent.text,
        ));
        return;
    }
    let lines: Vec<&str> = sent.text.split('\n').collect();
    if lines.len() == 1 {
        fields.push((format!("{label}: "), sent.text.clone()));
        return;
    }
    fields.push((format!("{label} ({} lines):", lines.len()), String::new()));
    for line in lines {
        fields.push(("  | ".into(), line.to_string()));
    }
}

pub(crate) fn describe(r: &PendingApproval, left: Option<u64>, argv: bool) -> Described {
    let who = requester::who(
        r.origin,
        r.client.as_ref(),
        r.task.as_ref(),
        r.goal.as_deref(),
    );
    let head = format!(
        "{id}  {tool}  risk {risk}{root}  {as_words}  {left}",
        id = Shown::new(&r.id.0),
        tool = Shown::new(&r.tool),
        risk = r.risk.as_str(),
        root = if r.requires_root {
            " (requires root)"
        } else {
            ""
        },
        as_words = requester::as_words(r.identity),
        left = left.map_or_else(|| "no longer waiting".to_string(), time_left),
    );
    let mut fields = Vec::new();
    match &r.sent {
        Some(sent) => {
            as_sent_fields(&mut fields, "command", sent);
            if argv {
                as_sent_fields(&mut fields, "runs", &r.action);
            } else {
                fields.push(("".into(), "v: the exact argv that runs".into()));
            }
        }
        None => as_sent_fields(&mut fields, "action", &r.action),
    }
    if let Some(words) = r.after_reading.words() {
        fields.push(("note: ".into(), format!("the Agent asks {}", shown(&words))));
    }
    // What it carries, whole (an `fs.write`'s content): its size and hash, each line.
    if let Some(data) = &r.data {
        fields.push(("".into(), nl2sh_proto::carried::header(data)));
        for line in nl2sh_proto::carried::lines(data) {
            fields.push(("  | ".into(), line));
        }
    }
    for reason in &r.reasons {
        fields.push(("why: ".into(), shown(reason)));
    }
    if let Some(phrase) = &r.phrase {
        fields.push(("phrase: ".into(), shown(phrase)));
    }
    if let Some(app) = &r.ui_app {
        fields.push((
            "UI: ".into(),
            format!(
                "u approves it and lets UI actions from {} in {} run unasked for some minutes",
                r.origin.as_str(),
                shown(app)
            ),
        ));
    }
    Described {
        who: shown(&who),
        head,
        fields,
    }
}

/// The key help in lines of at most `columns`, broken between its " · " items.
fn pack(help: &str, columns: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for item in help.split(" · ") {
        if !line.is_empty() && width(&line) + 3 + width(item) <= columns {
            line.push_str(" · ");
            line.push_str(item);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        let mut parts = wrap(item, columns, columns);
        line = parts.pop().unwrap_or_default();
        lines.extend(parts);
    }
    lines.push(line);
    lines
}

impl App {
    fn theme(&self) -> Theme {
        Theme { color: self.color }
    }

    /// Renders the whole interface into `frame`, whatever its size.
    pub fn draw(&self, frame: &mut Frame) {
        let area = frame.area();
        if area.width == 0 || area.height == 0 {
            return;
        }
        let theme = self.theme();
        let w = usize::from(area.width);
        let h = usize::from(area.height);

        let help = self.footer(w, if h >= 8 { 2 } else { 1 });
        // While every request is approved automatically, a banner under the pages.
        let banner = self.status.running.auto_approve && h >= 4;
        let header_rows = if h >= 8 { 2 } else { 1 } + usize::from(banner);
        let footer_rows = help.len().min(if h >= 8 { 2 } else { usize::from(h >= 3) });
        let note_lines = self
            .note
            .as_ref()
            .map(|n| wrap(&n.text, w, w))
            .unwrap_or_default();
        let room = h.saturating_sub(header_rows + footer_rows);
        let note_rows = note_lines.len().min(room.saturating_sub(3));
        let body_rows = room.saturating_sub(note_rows);

        let rows = |from: usize, count: usize| Rect {
            x: area.x,
            y: area.y + from as u16,
            width: area.width,
            height: count as u16,
        };

        // The page.
        let view = self.view();
        let body = self.body(view, w);
        let total = body.lines.len();
        let top = self.scroll_top(view, body.selected, total, body_rows);
        self.body_rows.set(body_rows);
        let visible: Vec<Line> = body.lines.into_iter().skip(top).take(body_rows).collect();
        frame.render_widget(Paragraph::new(visible), rows(header_rows, body_rows));

        // The header: version and status, then the pages (and where the view is).
        let position = (total > body_rows).then(|| {
            format!(
                " {}-{}/{} PgUp/PgDn",
                top + 1,
                (top + body_rows).min(total),
                total
            )
        });
        let mut header = vec![self.title_line(w)];
        if h >= 8 {
            header.push(self.tabs_line(w, position.as_deref()));
        }
        if banner {
            header.push(self.auto_approve_banner(w));
        }
        frame.render_widget(Paragraph::new(header), rows(0, header_rows));

        // The note, then the keys.
        if note_rows > 0 {
            self.draw_note(frame, &note_lines, rows(header_rows + body_rows, note_rows));
        }
        if footer_rows > 0 {
            let lines: Vec<Line> = help
                .into_iter()
                .take(footer_rows)
                .map(|l| Line::from(Span::styled(l, theme.muted())))
                .collect();
            frame.render_widget(Paragraph::new(lines), rows(h - footer_rows, footer_rows));
        }

        if let Some(modal) = &self.modal {
            self.modal_view.follow(modal);
            let between = h.saturating_sub(header_rows + footer_rows);
            let region = if between >= 3 {
                rows(header_rows, between)
            } else {
                area
            };
            self.draw_modal(frame, region, modal);
        }
    }

    /// The first line of `view`'s page to show (of `total`, `body_rows` at a time): where
    /// it was left, moved to keep the selected item (`selected` lines) in sight while the
    /// view follows the selection; remembered for the next frame.
    fn scroll_top(
        &self,
        view: View,
        selected: Option<(usize, usize)>,
        total: usize,
        body_rows: usize,
    ) -> usize {
        let cell = &self.scroll[view as usize];
        let mut top = cell.get();
        if self.follow.get() {
            if let Some((start, end)) = selected {
                if start < top {
                    top = start;
                } else if end > top + body_rows {
                    top = if end - start > body_rows {
                        start
                    } else {
                        end - body_rows
                    };
                }
            }
        }
        top = top.min(total.saturating_sub(body_rows));
        cell.set(top);
        top
    }

    /// The note's lines in `rect`, the last saying so when it does not fit.
    fn draw_note(&self, frame: &mut Frame, note_lines: &[String], rect: Rect) {
        let note_rows = usize::from(rect.height);
        let style = self
            .theme()
            .note(self.note.as_ref().map_or(NoteKind::Info, |n| n.kind));
        let mut lines: Vec<Line> = note_lines
            .iter()
            .take(note_rows)
            .map(|l| Line::from(Span::styled(l.clone(), style)))
            .collect();
        if note_lines.len() > note_rows {
            if let Some(last) = lines.last_mut() {
                *last = Line::from(Span::styled(
                    "… (the message goes on: make the terminal larger)",
                    style,
                ));
            }
        }
        frame.render_widget(Paragraph::new(lines), rect);
    }

    fn title_line(&self, w: usize) -> Line<'static> {
        let theme = self.theme();
        let word = match self.status.state {
            ProtocolState::Running => "Running",
            ProtocolState::Stopped => "Stopped",
            ProtocolState::Unknown => "Unknown",
        };
        let mut spans = vec![
            Span::styled(
                format!("nl2sh {}", Shown::new(&self.status.version)),
                theme.label(),
            ),
            Span::raw(" · "),
            Span::styled(word, theme.state(self.status.state)),
        ];
        let waiting = self.waiting.len();
        if self.started {
            // Left out where it would push the count of waiting requests off the line.
            let used: usize = spans.iter().map(Span::width).sum();
            let started = " (started by this TUI)";
            let count = if waiting > 0 { 12 } else { 0 };
            if used + started.len() + count <= w {
                spans.push(Span::raw(started));
            }
        }
        if waiting > 0 {
            let used: usize = spans.iter().map(Span::width).sum();
            let text = format!("{waiting} waiting");
            let pad = w.saturating_sub(used + text.len()).max(2);
            spans.push(Span::raw(" ".repeat(pad)));
            spans.push(Span::styled(text, theme.warn()));
        }
        Line::from(spans)
    }

    fn tabs_line(&self, w: usize, position: Option<&str>) -> Line<'static> {
        let theme = self.theme();
        let mut spans = Vec::new();
        for page in Page::ALL {
            let mut name = format!("{} {}", page.number(), page.title());
            if page == Page::Approvals && !self.waiting.is_empty() {
                name.push_str(&format!(" ({})", self.waiting.len()));
            }
            if page == self.page {
                spans.push(Span::styled(format!("[{name}]"), theme.tab()));
            } else {
                spans.push(Span::raw(format!(" {name} ")));
            }
            spans.push(Span::raw(" "));
        }
        if let Some(position) = position {
            let used: usize = spans.iter().map(Span::width).sum();
            // Without "PgUp/PgDn" where the whole does not fit (60 columns).
            let short = position.split(" PgUp").next().unwrap_or(position);
            if let Some(text) = [position, short].into_iter().find(|t| used + width(t) <= w) {
                spans.push(Span::raw(" ".repeat(w - used - width(text))));
                spans.push(Span::styled(text.to_string(), theme.muted()));
            }
        }
        Line::from(spans)
    }

    /// "Every request is approved automatically (protocol_auto_approve)", across the
    /// whole width, shortened where it does not fit.
    fn auto_approve_banner(&self, w: usize) -> Line<'static> {
        let text = [
            "Every request is approved automatically (protocol_auto_approve)",
            "Every request is approved automatically",
            "Auto-approving every request",
        ]
        .into_iter()
        .find(|t| width(t) + 2 <= w)
        .unwrap_or("AUTO-APPROVE ON");
        let pad = w.saturating_sub(width(text) + 2);
        Line::from(Span::styled(
            format!("! {text}{}", " ".repeat(pad)),
            self.theme().pick(
                Style::new()
                    .fg(Color::White)
                    .bg(Color::Red)
                    .add_modifier(Modifier::BOLD),
            ),
        ))
    }

    /// The footer's `rows` lines: the keys of what is shown, as many as fit, and on the
    /// page itself always `?: help · q: quit` at the end (every key is in the help).
    fn footer(&self, w: usize, rows: usize) -> Vec<String> {
        let help = self.help();
        let tail = match &self.modal {
            None if !(self.page == Page::Ask && self.ask.typing) => "?: help · q: quit",
            _ => "",
        };
        if tail.is_empty() {
            return pack(help, w);
        }
        let rows = rows.max(1);
        let mut out = vec![String::new()];
        for item in help.split(" · ") {
            loop {
                let last_row = out.len() == rows;
                let room = if last_row {
                    w.saturating_sub(width(tail) + 3)
                } else {
                    w
                };
                let Some(line) = out.last_mut() else { break };
                let need = match line.is_empty() {
                    true => width(item),
                    false => width(line) + 3 + width(item),
                };
                if need <= room {
                    if !line.is_empty() {
                        line.push_str(" · ");
                    }
                    line.push_str(item);
                } else if !last_row && !line.is_empty() {
                    out.push(String::new());
                    continue;
                }
                // What does not fit is left out: `?` lists every key.
                break;
            }
        }
        if let Some(line) = out.last_mut() {
            if !line.is_empty() {
                line.push_str(" · ");
            }
            line.push_str(tail);
        }
        out
    }

    /// The keys of what is shown.
    fn help(&self) -> &'static str {
        match &self.modal {
            Some(Modal::Phrase { .. }) => {
                "Type the phrase · Enter: approve · ↓/PgDn: read it all · Tab: argv · \
                 Esc: cancel · Ctrl-C: quit"
            }
            Some(Modal::Entry { .. }) => {
                "Type the value · Enter: save · Backspace: erase · Esc: cancel · Ctrl-C: quit"
            }
            Some(Modal::UiGrant { .. }) => {
                "←→/+-: minutes · y/Enter: approve · n/Esc: cancel · Ctrl-C: quit"
            }
            Some(Modal::Quit) => "s/y/Enter: stop and quit · l: leave it running · n/Esc: cancel",
            Some(Modal::Help) => "↑↓ PgUp/PgDn: scroll · Esc/?: close · Ctrl-C: quit",
            Some(Modal::Gone { .. } | Modal::NewToken { .. }) => "Enter/Esc: close · Ctrl-C: quit",
            Some(Modal::Decide { approve: true, .. }) => {
                "↑↓ PgUp/PgDn: read it all · y/Enter: approve · n/Esc: cancel · v: argv · \
                 Ctrl-C: quit"
            }
            Some(_) => "y/Enter: yes · n/Esc: no · Ctrl-C: quit",
            None => match self.page {
                Page::Protocols if self.status.state == ProtocolState::Running => {
                    "↑↓/jk: select · Enter: edit · R: restart · ←→: snippet · c: copy · \
                     t: token · r: refresh · Tab/h/l/1-4: page · PgUp/PgDn: scroll"
                }
                Page::Protocols => {
                    "S: start the service · ↑↓/jk: select · Enter: edit · r: refresh · \
                     Tab/h/l/1-4: page · PgUp/PgDn: scroll"
                }
                Page::Approvals => {
                    "a: approve · r: reject · ↑↓/jk: select · v: argv · \
                     u: approve + UI grant · R: reject its origin · g: next UI grant · \
                     x: revoke it · Tab/h/l/1-4: page · PgUp/PgDn: scroll"
                }
                Page::Tasks if self.detail.is_some() => {
                    "Esc: back · ↑↓/jk PgUp/PgDn: scroll · r: reload · Tab/h/l/1-4: page"
                }
                Page::Tasks => {
                    "Enter: open · ↑↓/jk: select · r: refresh · Tab/h/l/1-4: page · \
                     PgUp/PgDn: scroll"
                }
                Page::Ask if self.ask.typing => {
                    "Type a goal · Enter: send · Backspace: erase · Esc: stop typing · \
                     Ctrl-C: quit"
                }
                Page::Ask if self.ask_request().is_some() => {
                    "a: approve · r: reject · Esc: cancel the task · /,i: type · \
                     ↑↓/jk PgUp/PgDn: scroll · Tab/h/l/1-4: page"
                }
                Page::Ask if self.ask.running().is_some() => {
                    "Esc: cancel the task · /,i: type · ↑↓/jk PgUp/PgDn: scroll · \
                     Tab/h/l/1-4: page"
                }
                Page::Ask if self.ask.model_missing.is_some() => {
                    "↑↓/jk PgUp/PgDn: scroll · Tab/h/l/1-4: page"
                }
                Page::Ask => {
                    "/,i: type a goal · n: new conversation · ↑↓/jk PgUp/PgDn: scroll · \
                     Tab/h/l/1-4: page"
                }
            },
        }
    }

    fn body(&self, view: View, w: usize) -> Body {
        match view {
            View::Protocols => self.protocols_body(w),
            View::Approvals => self.approvals_body(w),
            View::Tasks => self.tasks_body(w),
            View::Task => self.task_body(w),
            View::Ask => self.ask_body(w),
        }
    }

    /// The Protocols page: the state (and, running, the endpoints and the token), the
    /// client snippets, the settings.
    fn protocols_body(&self, w: usize) -> Body {
        let theme = self.theme();
        let mut body = Body::new(w);
        let running = self.status.state == ProtocolState::Running;
        if running {
            self.running_status(&mut body);
        } else {
            self.stopped_status(&mut body);
        }
        if let Some(note) = &self.startup {
            body.text(&note.text, theme.note(note.kind));
        }
        if running {
            self.connect_snippet(&mut body);
        }
        self.settings_list(&mut body);
        body
    }

    /// How the protocols run, and each endpoint, the PID, the configuration, the token.
    fn running_status(&self, body: &mut Body) {
        let theme = self.theme();
        let st = &self.status;
        let transport = st.transport.as_deref().unwrap_or("");
        let text = if transport == "stdio" {
            "A local client runs nl2sh over stdio; no HTTP endpoint".to_string()
        } else {
            let at = st
                .mcp_url
                .as_deref()
                .or(st.listen.as_deref())
                .map(|u| format!(" at {}", Shown::new(u)))
                .unwrap_or_default();
            let how = if transport == "service" {
                "Running as the service over HTTP"
            } else {
                "Running over HTTP"
            };
            format!("{how}{at}")
        };
        body.field(
            "● Running  ",
            theme.state(st.state),
            &text,
            theme.plain(),
            2,
        );
        if !st.detail.is_empty() {
            body.field("  ", theme.plain(), &shown(&st.detail), theme.muted(), 2);
        }
        self.not_applied(body);
        let kv = |body: &mut Body, label: &str, value: &str| {
            body.field(
                &format!("  {label:<16}"),
                theme.label(),
                value,
                theme.plain(),
                18,
            );
        };
        kv(body, "Version", &shown(&st.version));
        for (label, value) in [
            ("Transport", &st.transport),
            ("MCP URL", &st.mcp_url),
            ("A2A URL", &st.a2a_url),
            ("Agent Card URL", &st.card_url),
            ("Listen", &st.listen),
        ] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                kv(body, label, &shown(value));
            }
        }
        if let Some(pid) = st.pid {
            kv(body, "PID", &pid.to_string());
        }
        if let Some(since) = st.since.as_deref().filter(|v| !v.is_empty()) {
            kv(body, "Since", &shown(since));
        }
        if !st.config_path.is_empty() {
            kv(body, "Configuration", &shown(&st.config_path));
        }
        let token = match &st.token {
            None => "no HTTP token (not running over HTTP)".to_string(),
            Some(_) if !self.token_shown => "hidden (t reveals it)".to_string(),
            Some(token) => format!("{}  (t hides it)", Shown::new(token.expose())),
        };
        kv(body, "Token", &token);
    }

    /// The saved settings the running service does not use yet, and how to apply them.
    fn not_applied(&self, body: &mut Body) {
        let theme = self.theme();
        let differs = &self.status.running.differs;
        if differs.is_empty() {
            return;
        }
        body.text(
            "Running differs from saved: a restart applies the saved settings.",
            theme.warn(),
        );
        for d in differs {
            body.field(
                &format!("  {:<16} ", shown(&d.key)),
                theme.label(),
                &format!("saved {}, running {}", shown(&d.saved), shown(&d.running)),
                theme.warn(),
                18,
            );
        }
        let command = &self.status.running.restart_command;
        let how = if command.is_empty() {
            "R restarts it now.".to_string()
        } else {
            format!("R restarts it now (as {} does).", shown(command))
        };
        body.field("  ", theme.plain(), &how, theme.warn(), 2);
    }

    /// One line: the protocols are not running, and why.
    fn stopped_status(&self, body: &mut Body) {
        let theme = self.theme();
        let st = &self.status;
        let (word, fallback) = match st.state {
            ProtocolState::Stopped => ("○ Stopped  ", "Stopped"),
            _ => ("? Unknown  ", "State unknown"),
        };
        let detail = if st.detail.is_empty() {
            fallback.to_string()
        } else {
            shown(&st.detail)
        };
        body.field(word, theme.state(st.state), &detail, theme.plain(), 2);
    }

    /// The selected client snippet, to copy.
    fn connect_snippet(&self, body: &mut Body) {
        let theme = self.theme();
        body.blank();
        let start = body.start();
        let selected = self.mcp_sel == McpItem::Snippets;
        let lead = if selected { "> " } else { "  " };
        let title = format!(
            "Connect a client  < {}/{} {} >",
            self.snippet + 1,
            SNIPPETS.len(),
            SNIPPETS[self.snippet]
        );
        body.field(
            lead,
            theme.selected(),
            &title,
            if selected {
                theme.selected()
            } else {
                theme.heading()
            },
            2,
        );
        if self.status.examples {
            body.field(
                "  ",
                theme.plain(),
                "Example (the service does not serve HTTP): for the default loopback address.",
                theme.warn(),
                2,
            );
        }
        for line in self.snippet_text(self.snippet).split('\n') {
            body.field("  ", theme.plain(), &shown(line), theme.plain(), 2);
        }
        body.field(
            "  ",
            theme.plain(),
            "c copies it (OSC 52) · ←/→ shows another",
            theme.muted(),
            2,
        );
        if selected {
            body.select_from(start);
        }
    }

    /// The settings, each with its value, and the token's rotation.
    fn settings_list(&self, body: &mut Body) {
        let theme = self.theme();
        body.blank();
        body.text("Settings", theme.heading());
        match &self.settings {
            Err(e) => body.text(e, theme.error()),
            Ok(settings) if settings.is_empty() => body.text("No settings.", theme.muted()),
            Ok(settings) => {
                for s in settings {
                    let start = body.start();
                    let selected = self.mcp_sel == McpItem::Setting(s.key.clone());
                    let label = shown(&s.label);
                    let lead = format!("{}{label:<39} ", if selected { "> " } else { "  " });
                    let mut value = shown(&s.value);
                    if !s.set && s.kind != SettingKind::Secret {
                        value.push_str(" (default)");
                    }
                    body.field(
                        &lead,
                        if selected {
                            theme.selected()
                        } else {
                            theme.plain()
                        },
                        &value,
                        theme.label(),
                        4,
                    );
                    if let Some(warning) = &s.warning {
                        body.field("    ", theme.plain(), &shown(warning), theme.warn(), 4);
                    }
                    if selected {
                        body.select_from(start);
                    }
                }
                if settings.iter().any(|s| s.key == "protocol_token") {
                    let start = body.start();
                    let selected = self.mcp_sel == McpItem::Rotate;
                    body.field(
                        if selected { "> " } else { "  " },
                        theme.selected(),
                        "Rotate token: save a new random one (never shown)",
                        if selected {
                            theme.selected()
                        } else {
                            theme.plain()
                        },
                        4,
                    );
                    if selected {
                        body.select_from(start);
                    }
                }
            }
        }
    }

    fn approvals_body(&self, w: usize) -> Body {
        let theme = self.theme();
        let mut body = Body::new(w);
        if let Some(e) = &self.pending_error {
            body.text(e, theme.error());
        }
        if self.waiting.is_empty() && self.pending_error.is_none() {
            body.text("No requests are waiting.", theme.muted());
        } else if !self.waiting.is_empty() {
            body.text(&self.per_origin(), theme.label());
            body.blank();
        }
        for (i, waiting) in self.waiting.iter().enumerate() {
            let start = body.start();
            let selected = i == self.approval_sel;
            let lead_style = if selected {
                theme.selected()
            } else {
                theme.plain()
            };
            self.request(
                &mut body,
                &waiting.request,
                Some(self.seconds_left(waiting)),
                (if selected { "> " } else { "  " }, lead_style),
                "    ",
            );
            if selected {
                body.select_from(start);
            }
            body.blank();
        }
        body.blank();
        body.text("Timed UI grants", theme.heading());
        match &self.ui_grants {
            None => body.text("Loading…", theme.muted()),
            Some(Err(e)) => body.text(e, theme.error()),
            Some(Ok(list)) if list.is_empty() => {
                body.text("No timed UI grants are in force.", theme.muted())
            }
            Some(Ok(list)) => {
                for (i, (g, ends)) in list.iter().enumerate() {
                    let selected = i == self.ui_sel;
                    let actions = if g.used == 1 { "action" } else { "actions" };
                    let left = self.grant_seconds_left(*ends);
                    body.field(
                        if selected { "> " } else { "  " },
                        if selected {
                            theme.selected()
                        } else {
                            theme.plain()
                        },
                        &format!(
                            "{}  from {}  {}:{:02} left of {} min  {} {actions}  (grant {})",
                            shown(&g.app),
                            g.origin.as_str(),
                            left / 60,
                            left % 60,
                            g.minutes,
                            g.used,
                            shown(&g.id)
                        ),
                        theme.plain(),
                        4,
                    );
                }
            }
        }
        body.blank();
        body.text("Grants (read-only)", theme.heading());
        match &self.grants {
            None => body.text("Loading…", theme.muted()),
            Some(Err(e)) => body.text(e, theme.error()),
            Some(Ok(grants)) if grants.is_empty() => body.text("No grants.", theme.muted()),
            Some(Ok(grants)) => {
                for grant in grants {
                    body.field("  - ", theme.plain(), &shown(grant), theme.plain(), 4);
                }
            }
        }
        body
    }

    /// How many requests wait, of the limit, and how many each origin holds: who fills the
    /// queue (R rejects every request of the selected one's origin).
    fn per_origin(&self) -> String {
        let counts: Vec<String> = CallOrigin::ALL
            .iter()
            .copied()
            .filter_map(|origin| {
                let n = self
                    .waiting
                    .iter()
                    .filter(|w| w.request.origin == origin)
                    .count();
                (n > 0).then(|| format!("{} {n}", origin.as_str()))
            })
            .collect();
        format!(
            "{} of {MAX_PENDING_APPROVALS} pending: {}",
            self.waiting.len(),
            counts.join(", ")
        )
    }

    /// A request as the Approvals page shows it (every value escaped by [`describe`]):
    /// its first line after `lead`, then its fields, each after `pad`. The Approvals
    /// page, the Ask page and the confirmations all show a request through this.
    fn request(
        &self,
        body: &mut Body,
        r: &PendingApproval,
        left: Option<u64>,
        (lead, lead_style): (&str, Style),
        pad: &str,
    ) {
        let theme = self.theme();
        let d = describe(r, left, self.show_argv);
        let indent = width(pad);
        // Who is asking first, as a phone's prompt names the app.
        body.field(lead, lead_style, &d.who, theme.label(), indent);
        body.field(
            pad,
            theme.plain(),
            &d.head,
            theme.risk(r.risk.as_str()),
            indent,
        );
        for (label, value) in d.fields {
            let lead = format!("{pad}{label}");
            let indent = width(&lead);
            let style = if label.is_empty() && value.starts_with("v: ") {
                theme.muted()
            } else {
                theme.plain()
            };
            body.field(&lead, theme.label(), &value, style, indent);
        }
    }

    /// The Ask page: what to add without a model, the conversation (the ended goals
    /// wrapped once per width), then the live part it scrolls to: the running task with
    /// the request it waits on, and the goal being typed.
    fn ask_body(&self, w: usize) -> Body {
        let theme = self.theme();
        let ask = &self.ask;
        let mut body = Body::new(w);
        if let Some(missing) = &ask.model_missing {
            body.text(
                "The built-in Agent has no model configured, so it cannot be asked. Add to \
                 the configuration:",
                theme.warn(),
            );
            for line in missing.split('\n') {
                body.field("  ", theme.plain(), &shown(line), theme.label(), 2);
            }
            body.blank();
        }
        match &ask.context {
            Some(context) => body.field(
                "Conversation ",
                theme.heading(),
                &shown(&context.0),
                theme.heading(),
                2,
            ),
            None => body.text("A new conversation", theme.heading()),
        }
        let ended = ask.turns.len() - usize::from(ask.running().is_some());
        self.ended_turns(&mut body, w, ended);
        let start = body.start();
        if let Some(turn) = ask.turns.get(ended) {
            self.running_turn(&mut body, turn);
        }
        body.blank();
        if ask.model_missing.is_none() {
            self.goal_input(&mut body);
        }
        // Drawing scrolls to the live part; while typing, to the end of the goal.
        body.select_from(if ask.typing {
            body.start().saturating_sub(1)
        } else {
            start
        });
        body
    }

    /// The first `ended` turns, wrapped once per width `w` (and kept for the next frame).
    fn ended_turns(&self, body: &mut Body, w: usize, ended: usize) {
        let mut cache = self.ask.cache.borrow_mut();
        match &*cache {
            Some((width, turns, lines)) if *width == w && *turns == ended => {
                body.lines.extend(lines.iter().cloned());
            }
            _ => {
                let mut turns = Body::new(w);
                for turn in &self.ask.turns[..ended] {
                    self.turn(&mut turns, turn);
                }
                body.lines.extend(turns.lines.iter().cloned());
                *cache = Some((w, ended, turns.lines));
            }
        }
    }

    /// The task running now, and the request it waits on.
    fn running_turn(&self, body: &mut Body, turn: &Turn) {
        let theme = self.theme();
        self.turn(body, turn);
        if let Some(e) = &self.ask.read_error {
            body.field("  ", theme.plain(), e, theme.error(), 2);
        }
        if let Some(waiting) = self.ask_request() {
            body.field(
                "  ",
                theme.plain(),
                "The Agent waits for your confirmation:",
                theme.warn(),
                2,
            );
            self.request(
                body,
                &waiting.request,
                Some(self.seconds_left(waiting)),
                ("  ", theme.plain()),
                "    ",
            );
            body.field(
                "  ",
                theme.plain(),
                "a: approve · r: reject",
                theme.selected(),
                2,
            );
        }
    }

    /// The goal being typed (or what to press to type one).
    fn goal_input(&self, body: &mut Body) {
        let theme = self.theme();
        let ask = &self.ask;
        if self.status.state == ProtocolState::Stopped {
            body.text(ASK_NOT_RUNNING, theme.warn());
        }
        let input = Shown::new(&ask.input)
            .max_bytes(MAX_AGENT_TEXT_BYTES)
            .to_string();
        if ask.typing {
            body.field(
                "> ",
                theme.selected(),
                &format!("{input}_"),
                theme.plain(),
                2,
            );
        } else if !input.is_empty() {
            body.field(
                "> ",
                theme.muted(),
                &format!("{input}  (/ or i goes on typing)"),
                theme.muted(),
                2,
            );
        } else {
            body.text("/ or i: type a goal for the Agent", theme.muted());
        }
    }

    /// One goal and, once its task ended, the answer and evidence.
    fn turn(&self, body: &mut Body, turn: &Turn) {
        let theme = self.theme();
        body.blank();
        let goal = Shown::new(&turn.goal)
            .max_bytes(MAX_AGENT_TEXT_BYTES)
            .to_string();
        body.field("You    ", theme.label(), &goal, theme.plain(), 7);
        let mut state = format!("{} · task {}", turn.state, Shown::new(&turn.task.0));
        let style = match turn.state.as_str() {
            "completed" => theme.ok(),
            "failed" | "canceled" | "rejected" => theme.error(),
            _ => theme.warn(),
        };
        match &turn.outcome {
            Some(rows) => {
                body.field("Agent  ", theme.label(), &state, style, 7);
                self.rows(body, rows);
            }
            None => {
                if self.ask.cancelling {
                    state.push_str(" · Cancelling… (Esc again: stop waiting for it)");
                }
                body.field("Agent  ", theme.label(), &state, style, 7);
            }
        }
    }

    fn tasks_body(&self, w: usize) -> Body {
        let theme = self.theme();
        let mut body = Body::new(w);
        match &self.tasks {
            None => body.text("Loading…", theme.muted()),
            Some(Err(e)) => body.text(e, theme.error()),
            Some(Ok(tasks)) if tasks.is_empty() => body.text("No tasks yet.", theme.muted()),
            Some(Ok(tasks)) => {
                body.text(
                    &format!("The newest {} tasks (Enter opens one)", tasks.len()),
                    theme.heading(),
                );
                for (i, task) in tasks.iter().enumerate() {
                    let start = body.start();
                    let selected = i == self.task_sel;
                    let line = format!(
                        "{}  {}  {}",
                        Shown::new(&task.id.0),
                        crate::task::short_state(task.state.as_a2a()),
                        readable_utc(task.updated_ms)
                    );
                    body.field(
                        if selected { "> " } else { "  " },
                        theme.selected(),
                        &line,
                        if selected {
                            theme.selected()
                        } else {
                            theme.plain()
                        },
                        4,
                    );
                    // The goal on one line, cut to the width (Enter shows it whole).
                    let goal = crate::task::goal(task)
                        .map(|g| format!("\u{201c}{g}\u{201d}"))
                        .unwrap_or_else(|| "(no goal in its history)".to_string());
                    let room = w.saturating_sub(4).max(1);
                    let mut parts = wrap(&goal, room, room);
                    let mut line = parts.remove(0);
                    if !parts.is_empty() {
                        let keep = wrap(&line, room.saturating_sub(1).max(1), room)
                            .into_iter()
                            .next()
                            .unwrap_or_default();
                        line = format!("{keep}…");
                    }
                    body.field("    ", theme.plain(), &line, theme.plain(), 4);
                    if selected {
                        body.select_from(start);
                    }
                }
            }
        }
        body
    }

    fn task_body(&self, w: usize) -> Body {
        let theme = self.theme();
        let mut body = Body::new(w);
        let Some(detail) = &self.detail else {
            return body;
        };
        let rows: &[Row] = match &detail.rows {
            Err(e) => {
                body.text(
                    &format!("Task {}", Shown::new(&detail.id.0)),
                    theme.heading(),
                );
                body.text(e, theme.error());
                return body;
            }
            Ok(rows) => rows,
        };
        if let Some((cached_width, lines)) = &*detail.cache.borrow() {
            if *cached_width == w {
                body.lines = lines.clone();
                return body;
            }
        }
        self.rows(&mut body, rows);
        *detail.cache.borrow_mut() = Some((w, body.lines.clone()));
        body
    }

    /// A task's rows (see `task.rs`), each wrapped to the width.
    fn rows(&self, body: &mut Body, rows: &[Row]) {
        let theme = self.theme();
        for row in rows {
            let style = theme.look(row.look);
            let lead_style = if row.look == Look::Plain && !row.lead.trim().is_empty() {
                theme.label()
            } else {
                style
            };
            body.field(&row.lead, lead_style, &row.text, style, row.indent);
        }
    }

    /// A question over the page: everything between the header and the footer is
    /// cleared first, so no page text shows beside, above or below it. Its question and
    /// keys stay at the top; the request under them scrolls (↑↓ PgUp/PgDn), and whether
    /// its end has been on the screen is kept: an approve counts only after that.
    fn draw_modal(&self, frame: &mut Frame, area: Rect, modal: &Modal) {
        let theme = self.theme();
        frame.render_widget(Clear, area);
        if area.width == 0 || area.height == 0 {
            return;
        }
        let outer_w = usize::from(area.width);
        let bordered = outer_w >= 12 && area.height >= 5;
        let inner_w = if bordered { outer_w - 2 } else { outer_w };
        let mut head = Body::new(inner_w);
        let mut rest = Body::new(inner_w);
        let title = self.modal_body(modal, &mut head);
        if let Some(r) = modal.request() {
            rest.blank();
            self.modal_request(&mut rest, r);
        } else if matches!(modal, Modal::Help) {
            help_lines(&mut rest, theme);
        }
        let max_inner_h = usize::from(area.height) - if bordered { 2 } else { 0 };
        let mut lines = head.lines;
        lines.truncate(max_inner_h);
        let room = max_inner_h - lines.len();
        let total = rest.lines.len();
        let state = &self.modal_view;
        if total <= room {
            lines.extend(rest.lines);
            state.seen.set(true);
            state.page.set(room.max(1));
        } else if room >= 2 {
            let shown_rows = room - 1;
            let top = state.scroll.get().min(total - shown_rows);
            state.scroll.set(top);
            state.page.set(shown_rows.saturating_sub(1).max(1));
            let end = top + shown_rows;
            if end >= total {
                state.seen.set(true);
            }
            lines.extend(rest.lines.into_iter().skip(top).take(shown_rows));
            let refused = state.refused.get() && !state.seen.get();
            let below = total - end;
            let text = if refused {
                format!("Not approved: read to the end first · {below} more lines (↓/PgDn)")
            } else if modal.needs_whole() && !state.seen.get() {
                format!(
                    "lines {}-{end} of {total} · {below} more below (↓/PgDn)",
                    top + 1
                )
            } else {
                format!("lines {}-{end} of {total} · ↑↓ PgUp/PgDn: scroll", top + 1)
            };
            let style = if refused { theme.error() } else { theme.warn() };
            lines.push(Line::from(Span::styled(
                crate::text::wrap(&text, inner_w, inner_w)
                    .into_iter()
                    .next()
                    .unwrap_or_default(),
                style,
            )));
        } else if total > 0 {
            // No room for the request at all: an approve cannot count.
            state.seen.set(false);
            lines.truncate(max_inner_h.saturating_sub(1));
            lines.push(Line::from(Span::styled(
                "… the request does not fit: make the terminal larger",
                theme.warn(),
            )));
        }
        let outer_h = (lines.len() + if bordered { 2 } else { 0 }) as u16;
        let rect = Rect {
            x: area.x,
            y: area.y + (area.height - outer_h) / 2,
            width: area.width,
            height: outer_h,
        };
        let paragraph = Paragraph::new(lines);
        if bordered {
            let block = Block::bordered()
                .title(Span::styled(format!(" {title} "), theme.label()))
                .border_style(theme.warn());
            frame.render_widget(paragraph.block(block), rect);
        } else {
            frame.render_widget(paragraph, rect);
        }
    }

    /// The modal's question and keys (the request it is about follows, scrolling), and
    /// its title.
    fn modal_body(&self, modal: &Modal, body: &mut Body) -> &'static str {
        let theme = self.theme();
        match modal {
            Modal::Decide {
                request: r,
                approve,
            } => {
                let verb = if *approve { "Approve" } else { "Reject" };
                body.text(
                    &format!("{verb} request {}?", Shown::new(&r.id.0)),
                    theme.label(),
                );
                body.text(
                    &format!("y/Enter: {} · n/Esc: cancel", verb.to_lowercase()),
                    theme.muted(),
                );
                if *approve {
                    "Approve"
                } else {
                    "Reject"
                }
            }
            Modal::Phrase {
                request: r,
                typed,
                error,
            } => {
                self.phrase_question(body, r, typed, error.as_deref());
                "Approve with the phrase"
            }
            Modal::UiGrant {
                request: r,
                minutes,
            } => {
                self.ui_grant_question(body, r, *minutes);
                "Approve + UI grant"
            }
            Modal::RevokeUiGrant { id, app } => {
                self.revoke_question(body, id, app);
                "Revoke a UI grant"
            }
            Modal::RejectOrigin { origin, count } => {
                let requests = if *count == 1 { "request" } else { "requests" };
                body.text(
                    &format!(
                        "Reject every request from {}? {count} {requests} now, and any that \
                         came since; each is rejected and audited on its own.",
                        origin.as_str()
                    ),
                    theme.label(),
                );
                body.text("y/Enter: reject them all · n/Esc: cancel", theme.muted());
                "Reject by origin"
            }
            Modal::Toggle { key, label, value } => {
                let word = if *value { "on" } else { "off" };
                body.text(
                    &format!("Turn {word} \"{label}\"? ({} = {value})", Shown::new(key)),
                    theme.label(),
                );
                if let Some(warning) = self.setting_warning(key).filter(|_| *value) {
                    body.text(&shown(warning), theme.error());
                    body.text("Only for callers you fully trust.", theme.warn());
                }
                body.text("y/Enter: save · n/Esc: cancel", theme.muted());
                "Change a setting"
            }
            Modal::Entry {
                key,
                label,
                kind,
                typed,
                error,
            } => {
                self.entry_question(body, (key, label), *kind, typed, error.as_deref());
                "Change a setting"
            }
            Modal::Rotate | Modal::NewToken { .. } => self.token_question(modal, body),
            Modal::Help | Modal::Gone { .. } | Modal::Restart | Modal::Quit => {
                self.service_question(modal, body)
            }
        }
    }

    /// The token's rotation: the question, then the new token shown this once.
    fn token_question(&self, modal: &Modal, body: &mut Body) -> &'static str {
        let theme = self.theme();
        match modal {
            Modal::Rotate => {
                body.text(
                    "Save a new random token? It is shown once, now; clients using the old \
                     token stop working once the service restarts.",
                    theme.label(),
                );
                body.text("y/Enter: rotate · n/Esc: cancel", theme.muted());
                "Rotate the token"
            }
            Modal::NewToken { token } => {
                body.text(
                    "The new token, shown this once (copy it now for your clients):",
                    theme.label(),
                );
                body.blank();
                body.text(&Shown::new(token.expose()).to_string(), theme.plain());
                body.blank();
                body.text(
                    "It takes effect when the service restarts (R on this page).",
                    theme.muted(),
                );
                "New token"
            }
            _ => "",
        }
    }

    /// The help's head, a request no longer waiting, the restart and quit questions.
    fn service_question(&self, modal: &Modal, body: &mut Body) -> &'static str {
        let theme = self.theme();
        match modal {
            Modal::Help => {
                body.text("Every key, page by page", theme.label());
                "Help"
            }
            Modal::Gone { request, why } => {
                body.text(
                    &format!(
                        "Request {} {}: nothing was sent from here.",
                        Shown::new(&request.id.0),
                        why.words()
                    ),
                    theme.warn(),
                );
                body.text("Enter/Esc: close", theme.muted());
                "No longer waiting"
            }
            Modal::Restart => {
                body.text(
                    "Restart the service now, as `service restart` does? It runs the saved \
                     settings; requests waiting now are rejected and running tasks end.",
                    theme.label(),
                );
                body.text("y/Enter: restart · n/Esc: cancel", theme.muted());
                "Restart the service"
            }
            Modal::Quit => {
                body.text(
                    "Quit: this TUI started the service. Stop it, or leave it running?",
                    theme.label(),
                );
                body.text("s/y/Enter: stop it and quit", theme.plain());
                body.text("l: leave it running and quit", theme.plain());
                body.text("n/Esc: cancel (stay here)", theme.plain());
                "Quit"
            }
            _ => "",
        }
    }

    /// Revoking timed UI grant `id`: the question.
    fn revoke_question(&self, body: &mut Body, id: &str, app: &str) {
        let theme = self.theme();
        body.text(
            &format!(
                "Revoke timed UI grant {} for {}? Its UI actions ask again.",
                Shown::new(id),
                Shown::new(app)
            ),
            theme.label(),
        );
        body.text("y/Enter: revoke · n/Esc: cancel", theme.muted());
    }

    /// Approving with a timed UI grant: the question, the minutes to pick, what ends it.
    fn ui_grant_question(&self, body: &mut Body, r: &PendingApproval, minutes: u32) {
        let theme = self.theme();
        body.text(
            &format!(
                "Approve request {} and let UI actions (taps, gestures, text, keys) \
                 from {} in {} run unasked for {minutes} min?",
                Shown::new(&r.id.0),
                r.origin.as_str(),
                r.ui_app.as_deref().map(shown).unwrap_or_default()
            ),
            theme.label(),
        );
        let choices: Vec<String> = crate::app::UI_GRANT_MINUTES
            .iter()
            .map(|m| {
                if *m == minutes {
                    format!("[{m} min]")
                } else {
                    format!(" {m} min ")
                }
            })
            .collect();
        body.text(&choices.join(" "), theme.plain());
        body.text(
            "It ends when the time is up, when another app comes to the front, or \
             with x on the Approvals page. A tap in Settings, an installer, a \
             permission dialog or the lock screen still asks.",
            theme.muted(),
        );
        body.text(
            "←→/+-: minutes · y/Enter: approve · n/Esc: cancel",
            theme.muted(),
        );
    }

    /// A request in a modal, with its time left.
    fn modal_request(&self, body: &mut Body, r: &PendingApproval) {
        let theme = self.theme();
        let left = self
            .waiting
            .iter()
            .find(|w| w.request.id == r.id)
            .map(|w| self.seconds_left(w));
        self.request(body, r, left, ("", theme.plain()), "  ");
    }

    /// What was typed (`shown_text`, already escaped or masked): its end, where the
    /// cursor is.
    fn typed_line(&self, body: &mut Body, shown_text: String) {
        let theme = self.theme();
        let room = body.width.saturating_sub(3).max(1);
        let mut tail: Vec<char> = Vec::new();
        let mut used = 0;
        for c in shown_text.chars().rev() {
            let cw = crate::text::char_width(c);
            if used + cw > room {
                break;
            }
            used += cw;
            tail.push(c);
        }
        let tail: String = tail.into_iter().rev().collect();
        body.lines.push(Line::from(vec![
            Span::styled("> ", theme.selected()),
            Span::raw(tail),
            Span::styled("_", theme.selected()),
        ]));
    }

    /// The phrase to type for request `r`, what was typed, and the request.
    fn phrase_question(
        &self,
        body: &mut Body,
        r: &PendingApproval,
        typed: &str,
        error: Option<&str>,
    ) {
        let theme = self.theme();
        body.text(
            &format!(
                "Request {} is {}: type its phrase exactly to approve it.",
                Shown::new(&r.id.0),
                r.risk.as_str()
            ),
            theme.label(),
        );
        body.field(
            "Phrase: ",
            theme.label(),
            &shown(r.phrase.as_deref().unwrap_or_default()),
            theme.warn(),
            2,
        );
        self.typed_line(body, shown(typed));
        if let Some(e) = error {
            body.text(e, theme.error());
        }
        body.text("Enter: approve · Esc: cancel", theme.muted());
    }

    /// A setting's value being typed (a secret masked).
    fn entry_question(
        &self,
        body: &mut Body,
        (key, label): (&str, &str),
        kind: EntryKind,
        typed: &str,
        error: Option<&str>,
    ) {
        let theme = self.theme();
        body.text(&format!("{label} ({})", Shown::new(key)), theme.label());
        match kind {
            EntryKind::Port => {
                body.text(
                    "A port from 0 to 65535; 0 picks any free port.",
                    theme.muted(),
                );
                self.typed_line(body, shown(typed));
            }
            EntryKind::Secret => {
                body.text(
                    "32-256 printable characters, no spaces. It is not shown as you \
                     type, nor ever after. Clients using the old token stop working.",
                    theme.muted(),
                );
                self.typed_line(body, "*".repeat(typed.chars().count()));
            }
            EntryKind::Text => self.typed_line(body, shown(typed)),
        }
        if let Some(e) = error {
            body.text(e, theme.error());
        }
        body.text("Enter: save · Esc: cancel", theme.muted());
    }
}

/// Every key of the console, for `?`.
const KEYS: &[(&str, &[(&str, &str)])] = &[
    (
        "Everywhere",
        &[
            ("Tab l / Shift-Tab h", "next / previous page"),
            ("1 2 3 4", "MCP / A2A, Approvals, Tasks, Ask"),
            ("PgUp PgDn Home End", "scroll the page"),
            ("?", "this help"),
            ("q", "quit (asks first when this TUI started the service)"),
            (
                "Ctrl-C",
                "quit at once (stops the service this TUI started)",
            ),
        ],
    ),
    (
        "1 MCP / A2A",
        &[
            ("↑↓ j k", "select a snippet or a setting"),
            ("Enter", "edit the setting (or copy the snippet)"),
            ("← → s", "another client snippet"),
            ("c", "copy the snippet (OSC 52)"),
            ("t", "show or hide the token"),
            ("S", "start the service (when it is stopped)"),
            ("R", "restart the service: it runs the saved settings"),
            ("r", "read the status and settings again"),
        ],
    ),
    (
        "2 Approvals",
        &[
            ("↑↓ j k", "select a request"),
            ("a", "approve (asks; the whole request is shown first)"),
            ("r", "reject (asks)"),
            ("u", "approve + timed UI grant"),
            ("R", "reject every request of its origin"),
            ("g / x", "select / revoke a timed UI grant"),
            ("v", "show or hide the exact argv under a command"),
        ],
    ),
    (
        "3 Tasks",
        &[
            ("↑↓ j k", "select a task"),
            ("Enter", "open it (Esc back)"),
            ("r", "read the list (or the task) again"),
        ],
    ),
    (
        "4 Ask",
        &[
            ("/ i Enter", "type a goal (Enter sends, Esc stops typing)"),
            ("a / r", "approve / reject what the Agent asks"),
            ("Esc", "cancel the running task"),
            ("n", "a new conversation"),
        ],
    ),
    (
        "In a question",
        &[
            (
                "↑↓ PgUp PgDn",
                "read the request to its end (an approve counts only then)",
            ),
            ("y Enter / n Esc", "yes / no"),
            (
                "v (Tab)",
                "show or hide the exact argv (Tab while typing a phrase)",
            ),
            ("typing", "the phrase of a dangerous or critical request"),
        ],
    ),
];

fn help_lines(body: &mut Body, theme: Theme) {
    for (title, keys) in KEYS {
        body.blank();
        body.text(title, theme.heading());
        for (key, what) in *keys {
            body.field(
                &format!("  {key:<20} "),
                theme.label(),
                what,
                theme.plain(),
                23,
            );
        }
    }
}
