//! The device-local commands: `protocol approvals`, `approve`, `reject` (talking to
//! approvald on protocol/approvals.sock) and `protocol audit` (reading the audit trail).
//! Exit codes a script can act on are in the one table, [`Exit`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nl2sh_proto::channels::{
    ApprovalId, CallOrigin, CliErrorKind, CliRequest, CliResponse, PendingApproval, UiGrant,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::stored_text::StoredText;
use nl2sh_proto::topology::{Asker, CliApprovald};

use crate::config;
use crate::exit::Exit;
use crate::state;

pub(crate) fn fail(code: Exit, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("nl2sh: {message}");
    code.into()
}

pub(crate) fn state_paths(
    config_arg: Option<PathBuf>,
) -> Result<(PathBuf, state::StatePaths), String> {
    let explicit = config_arg.is_some();
    let config_path = config_arg.unwrap_or_else(config::default_config_path);
    let cfg = config::load(&config_path, explicit).map_err(|e| e.to_string())?;
    let dir = config::state_dir(&cfg, &config_path);
    Ok((config_path, state::state_paths(&dir)))
}

pub(crate) async fn connect(
    config_path: &Path,
    sock: &Path,
) -> Result<RpcClient<CliApprovald>, (Exit, String)> {
    let not_running = |why: String| {
        (
            Exit::NotRunning,
            format!(
                "no nl2sh protocol service is running for {} ({why})",
                config_path.display()
            ),
        )
    };
    // Through the socket's directory, so a configuration at any depth is reachable.
    // (Blocking: a local connect completes as soon as approvald's backlog takes it.)
    let stream = nl2sh_proto::unix_socket::connect(sock)
        .and_then(|s| {
            s.set_nonblocking(true)?;
            tokio::net::UnixStream::from_std(s)
        })
        .map_err(|e| not_running(format!("{}: {e}", sock.display())))?;
    let end = Asker::<CliApprovald>::connected(stream)
        .map_err(|e| (Exit::Failure, format!("cannot use {}: {e}", sock.display())))?;
    let (client, _reader) = RpcClient::start(end).await.map_err(|e| {
        (
            Exit::Refused,
            format!(
                "the nl2sh service for {} refused this process ({e}): approvals come only from \
                 a person at the device, in a terminal that nl2sh did not start, as the \
                 service's user",
                config_path.display()
            ),
        )
    })?;
    Ok(client)
}

/// What every CLI call to approvald starts from: the configuration's path, its state
/// paths and a runtime; on failure, the exit code (already reported).
pub(crate) fn local_call(
    config_arg: Option<PathBuf>,
) -> Result<(PathBuf, state::StatePaths, tokio::runtime::Runtime), ExitCode> {
    let (config_path, paths) = state_paths(config_arg).map_err(|e| fail(Exit::Failure, e))?;
    Ok((config_path, paths, runtime()?))
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(Exit::Failure, format!("cannot start: {e}")))
}

pub(crate) async fn ask(
    config_path: &Path,
    sock: &Path,
    req: CliRequest,
) -> Result<CliResponse, (Exit, String)> {
    let client = connect(config_path, sock).await?;
    client
        .call(&req)
        .await
        .map_err(|e| (Exit::Failure, format!("approvald did not answer: {e}")))
}

pub(crate) fn cli_error(kind: CliErrorKind, message: String) -> (Exit, String) {
    let code = match kind {
        CliErrorKind::NoSuchRequest => Exit::NoSuchRequest,
        CliErrorKind::Expired => Exit::Expired,
        CliErrorKind::PhraseRequired | CliErrorKind::WrongPhrase => Exit::Phrase,
        CliErrorKind::InvalidRequest | CliErrorKind::Unavailable => Exit::Failure,
        CliErrorKind::NoAgent => Exit::NotRunning,
    };
    // It may quote what was asked for.
    (code, Shown::new(&message).to_string())
}

async fn pending(config_path: &Path, sock: &Path) -> Result<Vec<PendingApproval>, (Exit, String)> {
    match ask(config_path, sock, CliRequest::ListPending).await? {
        CliResponse::Pending(list) => Ok(list),
        CliResponse::Error { kind, message } => Err(cli_error(kind, message)),
        _ => Err((Exit::Failure, "approvald answered out of place".into())),
    }
}

/// A request for a program: the exact text, and under `shown` the same text fields as a
/// person is to read them (the one escaping function, as `describe` and the Web console
/// show them). The root manager's WebUI shows only `shown`, so it has no escaping of its
/// own.
fn pending_json(p: &PendingApproval) -> serde_json::Value {
    let shown = |text: &str| Shown::new(text).to_string();
    let mut v = serde_json::json!({
        "id": p.id, "call_id": p.call_id, "origin": p.origin.as_str(), "task": p.task,
        "tool": p.tool,
        "action": p.action, "risk": p.risk.as_str(), "requires_root": p.requires_root,
        "identity": p.identity.as_str(), "reasons": p.reasons, "seconds_left": p.seconds_left,
        "phrase": p.phrase,
        "data": p.data.as_ref().map(nl2sh_proto::carried::json),
        "after_reading": p.after_reading.as_slice(),
        "ui_app": p.ui_app,
        "client": p.client.as_ref().map(|c| serde_json::json!({"name": c.name, "version": c.version})),
        "goal": p.goal, "sent": p.sent,
        "shown": {
            "id": shown(&p.id.0),
            "tool": shown(&p.tool),
            "task": p.task.as_ref().map(|t| shown(&t.0)),
            "after_reading": p.after_reading.words().map(|w| shown(&w)),
            "ui_app": p.ui_app.as_deref().map(shown),
            "reasons": p.reasons.iter().map(|r| shown(r)).collect::<Vec<_>>(),
        },
    });
    if let Some(shown) = v["shown"].as_object_mut() {
        shown.extend(nl2sh_proto::requester::shown_request(p));
    }
    v
}

/// An action is shown whole: the executor refuses one longer than the approval channel
/// carries, so the cut (marked) never happens to a real one.
const ACTION_MAX_BYTES: usize = nl2sh_proto::limits::MAX_ACTION_BYTES;

/// Text a person reads before deciding: every field of the request, each through the one
/// escaping function, so no control, bidi or invisible character in a caller's text can
/// change what the terminal shows (the action is what runs, byte for byte otherwise).
fn describe(p: &PendingApproval) -> String {
    let who = nl2sh_proto::requester::who(
        p.origin,
        p.client.as_ref(),
        p.task.as_ref(),
        p.goal.as_deref(),
    );
    let mut s = format!(
        "{id}  {who}\n    {tool}  risk {risk}{root}  {as_words}  {left}s left\n",
        id = Shown::new(&p.id.0),
        who = Shown::new(&who),
        tool = Shown::new(&p.tool),
        risk = p.risk.as_str(),
        root = if p.requires_root {
            " (requires root)"
        } else {
            ""
        },
        as_words = nl2sh_proto::requester::as_words(p.identity),
        left = p.seconds_left,
    );
    match &p.sent {
        Some(sent) => {
            s.push_str(&as_sent_field("command", sent));
            s.push_str(&as_sent_field("runs", &p.action));
        }
        None => s.push_str(&as_sent_field("action", &p.action)),
    }
    if let Some(words) = p.after_reading.words() {
        s.push_str(&format!(
            "    note: the Agent asks {}\n",
            Shown::new(&words)
        ));
    }
    if let Some(data) = &p.data {
        use nl2sh_proto::carried::{header, lines, LISTED_LINES};
        s.push_str(&format!("    {}\n", header(data)));
        let lines = lines(data);
        for line in lines.iter().take(LISTED_LINES) {
            s.push_str(&format!("      | {line}\n"));
        }
        if lines.len() > LISTED_LINES {
            s.push_str(&format!(
                "      … {} more lines: all of them in `protocol approvals --json`, the terminal \
                 console or the Web console\n",
                lines.len() - LISTED_LINES
            ));
        }
    }
    for r in &p.reasons {
        s.push_str(&format!("    why: {}\n", Shown::new(r)));
    }
    if let Some(phrase) = &p.phrase {
        s.push_str(&format!(
            "    approve with: --phrase \"{}\"\n",
            Shown::new(phrase)
        ));
    }
    if let Some(app) = &p.ui_app {
        s.push_str(&format!(
            "    or approve with --ui-minutes N: UI actions in {} for N minutes (1-{})\n",
            Shown::new(app),
            nl2sh_proto::ui_grants::MAX_UI_GRANT_MINUTES
        ));
    }
    s
}

/// One field of text the owner may paste back ([`nl2sh_proto::display::as_sent`]): on its
/// line when it has one, else each line under it behind `| ` (so no line of it can look
/// like a field of its own); an escaped one says so.
fn as_sent_field(label: &str, text: &str) -> String {
    let shown = nl2sh_proto::display::as_sent(text, ACTION_MAX_BYTES);
    if shown.escaped {
        return format!(
            "    {label} (shown escaped: \\\\ is one backslash): {}\n",
            shown.text
        );
    }
    let lines: Vec<&str> = shown.text.split('\n').collect();
    if lines.len() == 1 {
        return format!("    {label}: {}\n", shown.text);
    }
    let mut s = format!("    {label} ({} lines):\n", lines.len());
    for line in lines {
        s.push_str(&format!("      | {line}\n"));
    }
    s
}

/// What `approve`/`reject` prints before it sends the decision: the request as
/// `approvals` shows it.
fn deciding(p: &PendingApproval, approve: bool) -> String {
    let verb = if approve { "Approving:" } else { "Rejecting:" };
    format!("{verb} {}", describe(p))
}

/// What it prints once approvald has taken the decision.
fn decided(id: &str, approve: bool) -> String {
    let verb = if approve { "Approved" } else { "Rejected" };
    format!("{verb} {}.", Shown::new(id))
}

/// `nl2sh protocol approvals [--json]`
pub fn approvals(config_arg: Option<PathBuf>, json: bool) -> ExitCode {
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let pending = rt.block_on(pending(&config_path, &paths.approvals_sock));
    // The one banner every console shows while it is on (approvald reads the file for
    // every decision, so the saved value is the one in force).
    if !json && pending.is_ok() && crate::running::auto_approve(&config_path) {
        println!(
            "Every request is approved automatically (protocol_auto_approve = true in {}).",
            Shown::new(&config_path.display().to_string())
        );
    }
    match pending {
        Ok(list) if json => {
            let v: Vec<_> = list.iter().map(pending_json).collect();
            println!("{}", serde_json::Value::Array(v));
            ExitCode::SUCCESS
        }
        Ok(list) if list.is_empty() => {
            println!("No pending approvals.");
            ExitCode::SUCCESS
        }
        Ok(list) => {
            print!("{}", per_origin(&list, &config_path));
            for p in &list {
                print!("{}", describe(p));
            }
            ExitCode::SUCCESS
        }
        Err((code, msg)) => fail(code, msg),
    }
}

/// What `approve` or `reject` sends.
pub enum Decision {
    Approve {
        phrase: Option<String>,
        /// Also a timed UI grant for this many minutes.
        ui_minutes: Option<u32>,
    },
    Reject,
}

/// `nl2sh protocol approve ID [--phrase P] [--ui-minutes N]`.
pub fn approve(
    config_arg: Option<PathBuf>,
    id: String,
    phrase: Option<String>,
    confirmed: bool,
    ui_minutes: Option<u32>,
) -> ExitCode {
    decide(
        config_arg,
        id,
        Decision::Approve { phrase, ui_minutes },
        confirmed,
    )
}

/// `nl2sh protocol approve ID …` and `nl2sh protocol reject ID`.
pub fn decide(
    config_arg: Option<PathBuf>,
    id: String,
    decision: Decision,
    confirmed: bool,
) -> ExitCode {
    let approve = matches!(decision, Decision::Approve { .. });
    // One-time device-local approval means a person at a terminal, not a script, unless
    // the person confirmed elsewhere (`--yes`: the root manager's WebUI, which runs the
    // CLI outside the service's tree). Either way approvald refuses every process of the
    // service's own tree, so a tool command cannot approve with or without `--yes`.
    if approve && !confirmed && !nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
        return fail(
            Exit::NoTerminal,
            "approve needs an interactive terminal on stdin: an approval is a person's decision \
             at the device, which a script or a remote agent must not make (a console that \
             asked the person itself passes --yes)",
        );
    }
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let sock = paths.approvals_sock;
    let result = rt.block_on(async {
        let list = pending(&config_path, &sock).await?;
        let Some(p) = list.iter().find(|p| p.id.0 == id) else {
            return Err((
                Exit::NoSuchRequest,
                format!(
                    "no pending request {} (see `{}`)",
                    Shown::new(&id),
                    hint(&config_path, "protocol approvals")
                ),
            ));
        };
        // What is decided is on the screen before the decision is sent, so the person
        // sees it even when the decision then fails or runs something at once.
        print!("{}", deciding(p, approve));
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // One approve flow in every console: a `high` request is confirmed once more after
        // the whole of it is on the screen (a `dangerous` or `critical` one by its phrase).
        if approve && !confirmed && p.risk == nl2sh_proto::channels::RiskLevel::High {
            confirm_high(&id)?;
        }
        let id = ApprovalId(id.clone());
        let (req, granted) = match decision {
            Decision::Approve {
                phrase,
                ui_minutes: Some(minutes),
            } => (
                CliRequest::ApproveForUi {
                    id,
                    phrase,
                    minutes,
                },
                Some(ui_grant_words(p, minutes, &config_path)),
            ),
            Decision::Approve {
                phrase,
                ui_minutes: None,
            } => (CliRequest::Approve { id, phrase }, None),
            Decision::Reject => (CliRequest::Reject { id }, None),
        };
        match ask(&config_path, &sock, req).await? {
            CliResponse::Done => Ok(granted),
            CliResponse::Error { kind, message } => Err(cli_error(kind, message)),
            _ => Err((Exit::Failure, "approvald answered out of place".into())),
        }
    });
    match result {
        Ok(granted) => {
            println!("{}", decided(&id, approve));
            if let Some(words) = granted {
                println!("{words}");
            }
            ExitCode::SUCCESS
        }
        Err((code, msg)) => fail(code, msg),
    }
}

/// Ask the person at the terminal to confirm a `high` request shown above; anything but
/// `y` or `yes` (or the end of input) sends nothing.
fn confirm_high(id: &str) -> Result<(), (Exit, String)> {
    print!("This request is high risk. Approve it? Type y and Enter (anything else: no): ");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => {
            println!();
            Err((
                Exit::Failure,
                format!(
                    "not approved: you did not confirm; nothing was sent and request {} still waits",
                    Shown::new(id)
                ),
            ))
        }
    }
}

/// What `approve --ui-minutes` says it gave.
fn ui_grant_words(p: &PendingApproval, minutes: u32, config_path: &Path) -> String {
    format!(
        "UI actions of {} in {} now run unasked for {minutes} min, until another app comes \
         to the front (`{}` lists it, `--revoke ID` ends it).",
        p.origin.as_str(),
        Shown::new(p.ui_app.as_deref().unwrap_or("?")),
        hint(config_path, "protocol ui-grants")
    )
}

/// `nl2sh --config PATH REST`, shown: the command a message suggests, for this
/// configuration (its path may hold any character).
fn hint(config_path: &Path, rest: &str) -> String {
    Shown::new(&nl2sh_proto::hint::with_config(config_path, rest)).to_string()
}

/// `nl2sh protocol ui-grants [--json]`.
pub fn ui_grants(config_arg: Option<PathBuf>, json: bool) -> ExitCode {
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let answer = rt.block_on(ask(
        &config_path,
        &paths.approvals_sock,
        CliRequest::UiGrants,
    ));
    let grants = match answer {
        Ok(CliResponse::UiGrants(list)) => list,
        Ok(CliResponse::Error { kind, message }) => {
            let (code, msg) = cli_error(kind, message);
            return fail(code, msg);
        }
        Ok(_) => return fail(Exit::Failure, "approvald answered out of place"),
        Err((code, msg)) => return fail(code, msg),
    };
    if json {
        let list: Vec<serde_json::Value> = grants.iter().map(ui_grant_json).collect();
        println!("{}", serde_json::Value::from(list));
    } else if grants.is_empty() {
        println!("No timed UI grants.");
    } else {
        for g in &grants {
            println!("{}", describe_ui_grant(g));
        }
    }
    ExitCode::SUCCESS
}

/// `nl2sh protocol ui-grants --revoke ID`.
pub fn revoke_ui_grant(config_arg: Option<PathBuf>, id: &str) -> ExitCode {
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let req = CliRequest::RevokeUiGrant { id: id.to_string() };
    match rt.block_on(ask(&config_path, &paths.approvals_sock, req)) {
        Ok(CliResponse::Done) => {
            println!("Revoked timed UI grant {}.", Shown::new(id));
            ExitCode::SUCCESS
        }
        Ok(CliResponse::Error { kind, message }) => {
            let (code, msg) = cli_error(kind, message);
            fail(code, msg)
        }
        Ok(_) => fail(Exit::Failure, "approvald answered out of place"),
        Err((code, msg)) => fail(code, msg),
    }
}

fn ui_grant_json(g: &UiGrant) -> serde_json::Value {
    serde_json::json!({
        "id": g.id, "app": g.app, "origin": g.origin.as_str(), "minutes": g.minutes,
        "seconds_left": g.seconds_left, "used": g.used,
        "shown": {"id": Shown::new(&g.id).to_string(), "app": Shown::new(&g.app).to_string()},
    })
}

/// One grant as `ui-grants` lists it.
fn describe_ui_grant(g: &UiGrant) -> String {
    format!(
        "{id}  UI actions in {app}  from {origin}  {left} of {minutes} min  {used} covered",
        id = Shown::new(&g.id),
        app = Shown::new(&g.app),
        origin = g.origin.as_str(),
        left = nl2sh_proto::clock::time_left(g.seconds_left),
        minutes = g.minutes,
        used = g.used,
    )
}

/// `nl2sh protocol reject --origin ORIGIN`: every request of that origin pending now,
/// each rejected (and audited) on its own. Like `reject ID` it needs no terminal: a
/// rejection never runs anything.
pub fn reject_origin(config_arg: Option<PathBuf>, origin: &str) -> ExitCode {
    let Some(origin) = CallOrigin::from_text(origin) else {
        return fail(Exit::Usage, format!("no origin {}", Shown::new(origin)));
    };
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let req = CliRequest::RejectOrigin { origin };
    let answer = rt.block_on(ask(&config_path, &paths.approvals_sock, req));
    let rejected = match answer {
        Ok(CliResponse::Rejected(list)) => list,
        Ok(CliResponse::Error { kind, message }) => {
            let (code, msg) = cli_error(kind, message);
            return fail(code, msg);
        }
        Ok(_) => return fail(Exit::Failure, "approvald answered out of place"),
        Err((code, msg)) => return fail(code, msg),
    };
    if rejected.is_empty() {
        return fail(
            Exit::NoSuchRequest,
            format!(
                "no pending request from {} (see `{}`)",
                origin.as_str(),
                hint(&config_path, "protocol approvals")
            ),
        );
    }
    for p in &rejected {
        print!("Rejected: {}", describe(p));
    }
    println!("{}", rejected_origin(rejected.len(), origin));
    ExitCode::SUCCESS
}

/// The last line of `reject --origin`.
fn rejected_origin(n: usize, origin: CallOrigin) -> String {
    let requests = if n == 1 { "request" } else { "requests" };
    format!("Rejected {n} {requests} from {}.", origin.as_str())
}

/// The first line of `approvals` when requests wait: how many of the limit, and how many
/// each origin holds, so the owner sees who fills the queue.
fn per_origin(list: &[PendingApproval], config_path: &Path) -> String {
    let counts: Vec<String> = CallOrigin::ALL
        .iter()
        .copied()
        .filter_map(|origin| {
            let n = list.iter().filter(|p| p.origin == origin).count();
            (n > 0).then(|| format!("{} {n}", origin.as_str()))
        })
        .collect();
    format!(
        "{} of {} pending: {} (reject every request of one origin: `{}`)\n",
        list.len(),
        nl2sh_proto::limits::MAX_PENDING_APPROVALS,
        counts.join(", "),
        hint(config_path, "protocol reject --origin ORIGIN")
    )
}

/// `--since`: RFC 3339 UTC (`2026-11-30T10:00:00Z`) or an age such as `90s`, `15m`, `2h`,
/// `7d`. Returns the stored time format (RFC 3339 with milliseconds) for comparison.
pub fn parse_since(s: &str, now_ms: i64) -> Result<String, String> {
    let s = s.trim();
    let unit = |c: char| match c {
        's' => Some(1_000i64),
        'm' => Some(60_000),
        'h' => Some(3_600_000),
        'd' => Some(86_400_000),
        _ => None,
    };
    if let Some(last) = s.chars().last() {
        if let (Some(mult), Ok(n)) = (unit(last), s[..s.len() - 1].parse::<i64>()) {
            let ms = n.checked_mul(mult).ok_or("--since is too far back")?;
            return Ok(nl2sh_proto::clock::rfc3339_millis(
                now_ms.saturating_sub(ms),
            ));
        }
    }
    let b = s.as_bytes();
    let shape_ok = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && s.ends_with('Z');
    if !shape_ok {
        return Err(format!(
            "--since {s:?}: use RFC 3339 UTC like 2026-11-30T10:00:00Z, or an age like 15m"
        ));
    }
    // Stored times carry milliseconds; a whole-second bound compares as .000.
    Ok(if b.len() == 20 {
        format!("{}.000Z", &s[..19])
    } else {
        s.to_string()
    })
}

/// What `audit --verify` prints: on stdout when the chain is intact and its end matches
/// the tail file (or the database predates tail files, which is said), otherwise every
/// problem found on stderr, with exit code 8.
fn report_verified(report: &nl2sh_approvald::store::VerifyReport) -> ExitCode {
    let problems = report.problems();
    if let Some((first, rest)) = problems.split_first() {
        for line in rest {
            eprintln!("nl2sh: {line}");
        }
        return fail(Exit::Tampered, first);
    }
    println!("{}", report.intact_line());
    println!("{}", report.tail);
    ExitCode::SUCCESS
}

/// `nl2sh protocol audit [--since T] [--limit N] [--json] [--verify]`
pub fn audit(
    config_arg: Option<PathBuf>,
    since: Option<String>,
    limit: usize,
    json: bool,
    verify: bool,
) -> ExitCode {
    let (config_path, paths) = match state_paths(config_arg) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Failure, e),
    };
    let db = paths.tasks_db;
    if !db.exists() {
        return fail(
            Exit::Failure,
            format!(
                "no audit trail at {} (the service has not run with this configuration)",
                db.display()
            ),
        );
    }
    settle_audit(&config_path, &paths.approvals_sock, &db);
    if verify {
        return match nl2sh_approvald::store::verify_path(&db) {
            Ok(report) => report_verified(&report),
            Err(e) => fail(
                Exit::Failure,
                format!("cannot verify {}: {e}", db.display()),
            ),
        };
    }
    let since = match since
        .map(|s| parse_since(&s, nl2sh_proto::clock::now_unix_ms()))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return fail(Exit::Failure, e),
    };
    let rows = match nl2sh_approvald::store::recent_path(&db, limit) {
        Ok(rows) => rows,
        Err(e) => return fail(Exit::Failure, format!("cannot read {}: {e}", db.display())),
    };
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| since.as_ref().is_none_or(|s| r.time >= *s))
        .collect();
    if json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(nl2sh_approvald::store::AuditRow::to_json)
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return ExitCode::SUCCESS;
    }
    for r in &rows {
        println!("{}", audit_line(r));
    }
    ExitCode::SUCCESS
}

/// Make the database hold every call answered so far before it is read: a running
/// service commits what it journalled; with none running, say how many answered rows
/// wait in the journal for the next start. Reading goes on either way.
fn settle_audit(config_path: &Path, sock: &Path, db: &Path) {
    let flushed = match runtime() {
        Ok(rt) => rt.block_on(async {
            match ask(config_path, sock, CliRequest::FlushAudit).await {
                Ok(CliResponse::Done) => Ok(()),
                Ok(CliResponse::Error { kind, message }) => Err(cli_error(kind, message)),
                Ok(_) => Err((Exit::Failure, "approvald answered out of place".into())),
                Err(e) => Err(e),
            }
        }),
        Err(_) => Err((Exit::Failure, "cannot start".into())),
    };
    match flushed {
        Ok(()) => {}
        Err((Exit::NotRunning, _)) => {
            match nl2sh_approvald::store::journal_pending(db).map(|pending| pending.len()) {
                Ok(0) => {}
                Ok(n) => eprintln!(
                    "nl2sh: {n} answered calls are not in this list yet: their rows wait in the \
                 audit journal, which the service stores when it starts"
                ),
                Err(e) => eprintln!("nl2sh: cannot read the audit journal: {e}"),
            }
        }
        Err((_, why)) => eprintln!(
            "nl2sh: the service did not commit the last calls' rows first ({why}); the \
             newest may be missing from this list"
        ),
    }
}

/// One row of `audit` as text, on one line: every stored text through the one escaping
/// function (the action whole, as `approvals` shows it).
fn audit_line(r: &nl2sh_approvald::store::AuditRow) -> String {
    let c = &r.record;
    let text =
        |t: &Option<String>, missing| Shown::new(t.as_deref().unwrap_or(missing)).to_string();
    // A decision row says what was decided; an outcome row how it ended; a `call` row
    // (decided from the policy snapshot) both, in that order.
    let decided = || {
        format!(
            "{} {} risk={} as={} from={}: {}",
            c.decision.map_or("?", |v| v.as_str()),
            text(&c.tool, "?"),
            c.risk.map_or("?", |v| v.as_str()),
            c.identity.map_or("?", |v| v.as_str()),
            c.origin.map_or("?", |v| v.as_str()),
            Shown::new(c.action.as_deref().unwrap_or("")).max_bytes(ACTION_MAX_BYTES),
        )
    };
    let ended = || {
        format!(
            "{} in {}ms: {}",
            if c.success == Some(true) {
                "ok"
            } else {
                "failed"
            },
            c.duration_ms.unwrap_or(0),
            text(&c.summary, ""),
        )
    };
    let what = match c.kind.as_str() {
        "decision" => decided(),
        "call" => format!("{} -> {}", decided(), ended()),
        _ => format!("outcome {}", ended()),
    };
    format!(
        "{:>6} {} call {} {what}",
        r.id,
        Shown::new(&r.time),
        c.call_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> PendingApproval {
        PendingApproval {
            data: None,
            ui_app: None,
            id: ApprovalId("abc123".into()),
            call_id: nl2sh_proto::channels::CallId(7),
            origin: nl2sh_proto::channels::CallOrigin::AgentHttp,
            task: Some(nl2sh_proto::channels::TaskId("t-1\u{1b}[2J".into())),
            tool: "shell".into(),
            action: "touch /tmp/x".into(),
            risk: nl2sh_proto::channels::RiskLevel::Medium,
            requires_root: false,
            identity: nl2sh_proto::channels::Identity::Launching,
            reasons: Vec::new(),
            seconds_left: 100,
            phrase: None,
            after_reading: Default::default(),
            client: None,
            goal: None,
            sent: None,
        }
    }

    #[test]
    fn a_pending_approval_shows_its_task_escaped() {
        let mut p = request();
        let shown = describe(&p);
        assert!(
            shown.starts_with(
                r"abc123  the Agent, task t-1\x1b[2J, for a client that gave no name, over HTTP"
            ),
            "{shown}"
        );
        assert!(!shown.contains('\u{1b}'));
        // `--json` keeps the exact text, and has it as a person reads it under `shown`.
        assert_eq!(pending_json(&p)["task"], "t-1\u{1b}[2J");
        assert_eq!(pending_json(&p)["shown"]["task"], r"t-1\x1b[2J");
        p.task = None;
        assert!(describe(&p)
            .starts_with("abc123  the Agent, for a client that gave no name, over HTTP\n"));
        assert!(pending_json(&p)["task"].is_null());
        assert!(pending_json(&p)["shown"]["task"].is_null());
    }

    #[test]
    fn what_the_agent_had_read_is_said_escaped() {
        let mut p = request();
        assert!(!describe(&p).contains("note:"));
        assert!(pending_json(&p)["shown"]["after_reading"].is_null());
        let mut read = nl2sh_proto::read_sources::ReadSources::default();
        read.note("/sdcard/Download/a\u{1b}[2Jb.txt");
        read.note("com.example.chat");
        p.after_reading = read;
        let shown = describe(&p);
        assert!(
            shown.contains(
                "\n    note: the Agent asks after reading text from com.example.chat, /sdcard/Download/a\\x1b[2Jb.txt\n"
            ),
            "{shown}"
        );
        assert!(!shown.contains('\u{1b}'));
        let json = pending_json(&p);
        assert_eq!(
            json["after_reading"],
            serde_json::json!(["com.example.chat", "/sdcard/Download/a\u{1b}[2Jb.txt"])
        );
        assert_eq!(
            json["shown"]["after_reading"],
            "after reading text from com.example.chat, /sdcard/Download/a\\x1b[2Jb.txt"
        );
    }

    #[test]
    fn the_json_form_has_every_text_field_escaped_under_shown() {
        let mut p = request();
        p.id = ApprovalId("abc\u{202e}1".into());
        p.tool = "sh\u{200b}ell".into();
        p.action = "rm -rf /data/cache\u{fe0f} /data/b\u{e0100}uild".into();
        p.reasons = vec!["why\u{e0041}\nnot".into()];
        let v = pending_json(&p);
        assert_eq!(v["shown"]["id"], r"abc\u{202e}1");
        assert_eq!(v["shown"]["tool"], r"sh\u{200b}ell");
        assert_eq!(
            v["shown"]["action"],
            r"rm -rf /data/cache\u{fe0f} /data/b\u{e0100}uild"
        );
        assert_eq!(v["shown"]["reasons"][0], r"why\u{e0041}\nnot");
        // The exact text is still there for a program.
        assert_eq!(v["action"], p.action);
    }

    /// The attack: a CR and an erase-line paint a fake `action:` line, a newline and a
    /// fake `why:` line follow, and SGR 8 conceals the real reasons.
    const SPOOF: &str = "/bin/sh -c 'touch F # \r\u{1b}[2K    action: /bin/sh -c ls\n    why: \
                         read_only: ls\u{1b}[8m'";

    #[test]
    fn every_field_of_a_request_is_shown_escaped_on_its_own_line() {
        let mut p = request();
        p.tool = "shell\u{202e}exec".into();
        p.action = SPOOF.into();
        p.reasons = vec![
            "low: touch\u{85}writes F".into(),
            "medium: \u{200b}why:".into(),
        ];
        p.phrase = Some("approve dangerous abc123".into());
        p.id = ApprovalId("abc\u{7}123".into());
        let shown = describe(&p);
        assert_eq!(
            shown,
            concat!(
                r"abc\x07123  the Agent, task t-1\x1b[2J, for a client that gave no name, over HTTP",
                "\n",
                r"    shell\u{202e}exec  risk medium  as you  100s left",
                "\n",
                r"    action (shown escaped: \\ is one backslash): /bin/sh -c 'touch F # \r\x1b[2K    action: /bin/sh -c ls\n    why: read_only: ls\x1b[8m'",
                "\n",
                r"    why: low: touch\u{85}writes F",
                "\n",
                r"    why: medium: \u{200b}why:",
                "\n",
                "    approve with: --phrase \"approve dangerous abc123\"\n",
            )
        );
        assert_eq!(pending_json(&p)["action"], SPOOF);
    }

    #[test]
    fn an_action_is_shown_whole_up_to_its_bound() {
        let mut p = request();
        // The longest action the executor sends is shown whole.
        p.action = format!("echo {}", "x".repeat(ACTION_MAX_BYTES - "echo ".len()));
        assert!(describe(&p).contains(&p.action));
        p.action = "y".repeat(ACTION_MAX_BYTES + 1);
        let shown = describe(&p);
        assert!(
            shown.contains(&format!(
                " … [cut: {} bytes in all]\n",
                ACTION_MAX_BYTES + 1
            )),
            "{}",
            &shown[shown.len() - 200..]
        );
    }

    #[test]
    fn approve_and_reject_say_what_they_decide_then_that_it_is_done() {
        let mut p = request();
        p.action = SPOOF.into();
        let before = deciding(&p, true);
        assert!(
            before.starts_with("Approving: abc123  the Agent, task t-1\\x1b[2J, for a client that gave no name, over HTTP\n    shell  risk medium  "),
            "{before}"
        );
        assert!(before.ends_with(&describe(&p)), "{before}");
        assert!(before.contains(r"\r\x1b[2K"), "{before}");
        assert!(!before.contains(['\r', '\u{1b}']), "{before}");
        assert!(deciding(&p, false).starts_with("Rejecting: abc123  "));
        assert_eq!(decided("abc123", true), "Approved abc123.");
        assert_eq!(decided("abc\u{1b}", false), r"Rejected abc\x1b.");
    }

    #[test]
    fn an_audit_row_is_one_line_with_its_texts_escaped() {
        use nl2sh_approvald::store::{AuditKind, AuditRecord, AuditRow};
        let mut record = AuditRecord::new(AuditKind::Call, 3);
        record.decision = Some(nl2sh_proto::channels::Decision::Allowed);
        record.tool = Some("shell\u{2028}.exec".into());
        record.risk = Some(nl2sh_proto::channels::RiskLevel::ReadOnly);
        record.identity = Some(nl2sh_proto::channels::Identity::Launching);
        record.origin = Some(nl2sh_proto::channels::CallOrigin::McpHttp);
        record.action = Some(SPOOF.into());
        record.success = Some(true);
        record.duration_ms = Some(2);
        record.summary = Some("exit 0\n\u{1b}]0;owned\u{7}".into());
        let row = AuditRow {
            id: 9,
            time: "2026-11-30T01:51:43.245Z".into(),
            record,
            prev_sha256: String::new(),
            row_sha256: String::new(),
        };
        assert_eq!(
            audit_line(&row),
            concat!(
                r"     9 2026-11-30T01:51:43.245Z call 3 allowed shell\u{2028}.exec risk=read_only ",
                r"as=launching_user from=mcp_http: /bin/sh -c 'touch F # \r\x1b[2K    action: ",
                r"/bin/sh -c ls\n    why: read_only: ls\x1b[8m' -> ok in 2ms: exit 0\n\x1b]0;owned\x07"
            )
        );
    }

    #[test]
    fn since_accepts_ages_and_rfc3339() {
        let now = 1_796_000_000_000; // 2026-11-30T…
        assert_eq!(
            parse_since("0s", now).unwrap(),
            nl2sh_proto::clock::rfc3339_millis(now)
        );
        assert_eq!(
            parse_since("2h", now).unwrap(),
            nl2sh_proto::clock::rfc3339_millis(now - 7_200_000)
        );
        // An age past any clock (negative ones too) is the end of the range, not a panic.
        for (age, at) in [
            ("-106751991000d", "9999-12-31T23:59:59.999Z"),
            ("100000000000d", "0000-01-01T00:00:00.000Z"),
        ] {
            assert_eq!(parse_since(age, now).unwrap(), at, "{age}");
        }
        assert_eq!(
            parse_since("2026-11-30T10:00:00Z", now).unwrap(),
            "2026-11-30T10:00:00.000Z"
        );
        assert_eq!(
            parse_since("2026-11-30T10:00:00.250Z", now).unwrap(),
            "2026-11-30T10:00:00.250Z"
        );
        for bad in [
            "",
            "yesterday",
            "10x",
            "2026-11-30",
            "2026-11-30T10:00:00+01:00",
        ] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }
}
