//! The device-local commands: `protocol approvals`, `approve`, `reject` (talking to
//! approvald on protocol/approvals.sock) and `protocol audit` (reading the audit trail).
//! Exit codes a script can act on are listed in [`Exit`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nl2sh_proto::channels::{ApprovalId, CliErrorKind, CliRequest, CliResponse, PendingApproval};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::topology::{Asker, CliApprovald};

use crate::config;
use crate::state;

/// Exit codes of the local commands (0 is success; 2 is a usage error, from clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Failure = 1,
    /// No protocol service is running for this configuration.
    NotRunning = 3,
    NoSuchRequest = 4,
    Expired = 5,
    /// The request needs its phrase, or the phrase given was wrong.
    Phrase = 6,
    /// `approve` needs an interactive terminal on stdin.
    NoTerminal = 7,
    /// `audit --verify` found a broken chain.
    Tampered = 8,
    /// approvald closed the connection unanswered: this process is not the service's
    /// uid, or it was started (directly or not) by nl2sh itself, e.g. a tool command.
    Refused = 9,
}

fn fail(code: Exit, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("nl2sh: {message}");
    ExitCode::from(code as u8)
}

fn state_paths(config_arg: Option<PathBuf>) -> Result<(PathBuf, state::StatePaths), String> {
    let explicit = config_arg.is_some();
    let config_path = config_arg.unwrap_or_else(config::default_config_path);
    let cfg = config::load(&config_path, explicit).map_err(|e| e.to_string())?;
    let dir = config::state_dir(&cfg, &config_path);
    Ok((config_path, state::state_paths(&dir)))
}

async fn connect(
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
    let stream = tokio::net::UnixStream::connect(sock)
        .await
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

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(Exit::Failure, format!("cannot start: {e}")))
}

async fn ask(
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

fn cli_error(kind: CliErrorKind, message: String) -> (Exit, String) {
    let code = match kind {
        CliErrorKind::NoSuchRequest => Exit::NoSuchRequest,
        CliErrorKind::Expired => Exit::Expired,
        CliErrorKind::PhraseRequired | CliErrorKind::WrongPhrase => Exit::Phrase,
        CliErrorKind::InvalidRequest => Exit::Failure,
    };
    (code, message)
}

async fn pending(config_path: &Path, sock: &Path) -> Result<Vec<PendingApproval>, (Exit, String)> {
    match ask(config_path, sock, CliRequest::ListPending).await? {
        CliResponse::Pending(list) => Ok(list),
        CliResponse::Error { kind, message } => Err(cli_error(kind, message)),
        CliResponse::Done => Err((Exit::Failure, "approvald answered out of place".into())),
    }
}

fn pending_json(p: &PendingApproval) -> serde_json::Value {
    serde_json::json!({
        "id": p.id, "call_id": p.call_id, "origin": p.origin.as_str(), "task": p.task,
        "tool": p.tool,
        "action": p.action, "risk": p.risk.as_str(), "requires_root": p.requires_root,
        "identity": p.identity.as_str(), "reasons": p.reasons, "seconds_left": p.seconds_left,
        "phrase": p.phrase,
    })
}

/// Text a person reads before deciding; every field of the request, the action verbatim.
fn describe(p: &PendingApproval) -> String {
    let mut s = format!(
        "{id}  {tool}  risk {risk}{root}  as {identity}  from {origin}{task}  {left}s left\n    action: {action}\n",
        id = p.id,
        tool = p.tool,
        risk = p.risk.as_str(),
        root = if p.requires_root { " (requires root)" } else { "" },
        identity = p.identity.as_str(),
        origin = p.origin.as_str(),
        // A task id is the remote caller's text as far as this terminal knows: shown
        // with control characters escaped, so it cannot rewrite what the person reads.
        task = p
            .task
            .as_ref()
            .map(|t| format!(" (task {})", t.0.escape_debug()))
            .unwrap_or_default(),
        left = p.seconds_left,
        action = p.action,
    );
    for r in &p.reasons {
        s.push_str(&format!("    why: {r}\n"));
    }
    if let Some(phrase) = &p.phrase {
        s.push_str(&format!("    approve with: --phrase \"{phrase}\"\n"));
    }
    s
}

/// `nl2sh protocol approvals [--json]`
pub fn approvals(config_arg: Option<PathBuf>, json: bool) -> ExitCode {
    let (config_path, paths) = match state_paths(config_arg) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Failure, e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(pending(&config_path, &paths.approvals_sock)) {
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
            for p in &list {
                print!("{}", describe(p));
            }
            ExitCode::SUCCESS
        }
        Err((code, msg)) => fail(code, msg),
    }
}

/// `nl2sh protocol approve ID [--phrase P]` and `nl2sh protocol reject ID`.
pub fn decide(
    config_arg: Option<PathBuf>,
    id: String,
    approve: bool,
    phrase: Option<String>,
) -> ExitCode {
    // One-time device-local approval means a person at a terminal, not a script.
    if approve && !nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
        return fail(
            Exit::NoTerminal,
            "approve needs an interactive terminal on stdin: an approval is a person's decision \
             at the device, which a script or a remote agent must not make",
        );
    }
    let (config_path, paths) = match state_paths(config_arg) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Failure, e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let sock = paths.approvals_sock;
    let result = rt.block_on(async {
        // Show exactly what is being decided.
        let list = pending(&config_path, &sock).await?;
        let Some(p) = list.iter().find(|p| p.id.0 == id) else {
            return Err((
                Exit::NoSuchRequest,
                format!("no pending request {id:?} (see `nl2sh protocol approvals`)"),
            ));
        };
        let shown = describe(p);
        let req = if approve {
            CliRequest::Approve {
                id: ApprovalId(id.clone()),
                phrase,
            }
        } else {
            CliRequest::Reject {
                id: ApprovalId(id.clone()),
            }
        };
        match ask(&config_path, &sock, req).await? {
            CliResponse::Done => Ok(shown),
            CliResponse::Error { kind, message } => Err(cli_error(kind, message)),
            CliResponse::Pending(_) => {
                Err((Exit::Failure, "approvald answered out of place".into()))
            }
        }
    });
    match result {
        Ok(shown) => {
            print!("{} {shown}", if approve { "Approved" } else { "Rejected" });
            ExitCode::SUCCESS
        }
        Err((code, msg)) => fail(code, msg),
    }
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
            return Ok(nl2sh_approvald::clock::rfc3339_millis(now_ms - ms));
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
    let mut problems = Vec::new();
    if let Some(bad) = &report.first_bad {
        problems.push(format!(
            "audit trail broken at row {}: {}",
            bad.id, bad.problem
        ));
    }
    if !report.tail.is_ok() {
        problems.push(format!("audit trail broken: {}", report.tail));
    }
    if let Some((first, rest)) = problems.split_first() {
        for line in rest {
            eprintln!("nl2sh: {line}");
        }
        return fail(Exit::Tampered, first);
    }
    let pruned = match &report.anchor {
        Some(a) => format!(
            "; rows 1 to {} were pruned by retention, and the chain is verified from the \
             anchor they left",
            a.id
        ),
        None => String::new(),
    };
    println!(
        "audit trail intact: {} rows verified{pruned}",
        report.rows_checked
    );
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
    let (_, paths) = match state_paths(config_arg) {
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
        .map(|s| parse_since(&s, nl2sh_approvald::clock::now_unix_ms()))
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
            .map(|r| {
                let c = &r.record;
                serde_json::json!({
                    "id": r.id, "time": r.time, "call_id": c.call_id, "kind": c.kind.as_str(),
                    "origin": c.origin, "tool": c.tool, "action": c.action,
                    "arguments_sha256": c.arguments_sha256, "risk": c.risk,
                    "requires_root": c.requires_root, "identity": c.identity,
                    "decision": c.decision, "reason": c.reason, "success": c.success,
                    "exit_code": c.exit_code, "duration_ms": c.duration_ms, "summary": c.summary,
                    "task": c.task,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return ExitCode::SUCCESS;
    }
    for r in &rows {
        let c = &r.record;
        // A decision row says what was decided; an outcome row how it ended; a `call` row
        // (decided from the policy snapshot) both, in that order.
        let decided = || {
            format!(
                "{} {} risk={} as={} from={}: {}",
                c.decision.as_deref().unwrap_or("?"),
                c.tool.as_deref().unwrap_or("?"),
                c.risk.as_deref().unwrap_or("?"),
                c.identity.as_deref().unwrap_or("?"),
                c.origin.as_deref().unwrap_or("?"),
                c.action.as_deref().unwrap_or(""),
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
                c.summary.as_deref().unwrap_or(""),
            )
        };
        let what = match c.kind.as_str() {
            "decision" => decided(),
            "call" => format!("{} -> {}", decided(), ended()),
            _ => format!("outcome {}", ended()),
        };
        println!("{:>6} {} call {} {what}", r.id, r.time, c.call_id);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_approval_shows_its_task_escaped() {
        let mut p = PendingApproval {
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
        };
        let shown = describe(&p);
        assert!(
            shown.contains("from agent_http (task t-1\\u{1b}[2J)  100s left"),
            "{shown}"
        );
        assert!(!shown.contains('\u{1b}'));
        assert_eq!(pending_json(&p)["task"], "t-1\u{1b}[2J");
        p.task = None;
        assert!(describe(&p).contains("from agent_http  100s left"));
        assert!(pending_json(&p)["task"].is_null());
    }

    #[test]
    fn since_accepts_ages_and_rfc3339() {
        let now = 1_796_000_000_000; // 2026-11-30T…
        assert_eq!(
            parse_since("0s", now).unwrap(),
            nl2sh_approvald::clock::rfc3339_millis(now)
        );
        assert_eq!(
            parse_since("2h", now).unwrap(),
            nl2sh_approvald::clock::rfc3339_millis(now - 7_200_000)
        );
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
