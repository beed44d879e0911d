//! The privilege boundary wired in process, as the topology table has it: ids that the
//! audit keys on are minted by the executor, never taken from netd; read-only calls
//! decided from approvald's policy snapshot are recorded once, and an edit to the
//! configuration applies to the very next call.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nl2sh_approvald::authority::{
    Authority, MAX_KEPT_ROWS, REASON_CONFIG_UNREADABLE, REASON_READ_ONLY,
};
use nl2sh_approvald::store::{AuditKind, AuditRow, Store};
use nl2sh_proto::channels::{
    ActionSummary, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CallResult,
    ConfigVersion, Confinement, Correlation, Decision, ExecutorRequest, ExecutorResponse, Identity,
    InvokeRequest, RanRecord, ReportedRow, RiskLevel, ToolOutcome,
};
use nl2sh_proto::journal::{encode_entry, read_entries};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::topology::{pair, ExecutorApprovald};
use nl2sh_proto::FrameError;

use nl2sh_executor::runtime::outbox::OUTBOX_FILE;
use nl2sh_tests::in_process::{wire as wire_in, wire_observed, Wired};

async fn wire() -> Wired {
    wire_in(None).await
}

fn stat(correlation: u64, path: &Path) -> ExecutorRequest {
    ExecutorRequest::Invoke(InvokeRequest {
        correlation: Correlation(correlation),
        origin: CallOrigin::McpHttp,
        task: None,
        after_reading: Default::default(),
        client: None,
        tool: "fs.stat".into(),
        arguments: serde_json::json!({ "path": path }).to_string(),
    })
}

async fn outcome(w: &Wired, req: &ExecutorRequest) -> ToolOutcome {
    match w.executor.call(req).await {
        Ok(ExecutorResponse::Outcome(o)) => o,
        other => panic!("{other:?}"),
    }
}

async fn rows(w: &Wired) -> Vec<AuditRow> {
    recent_rows(w, 100).await
}

/// The newest `limit` rows, once approvald has committed what it queued without waiting
/// and the rows the executor is still gathering.
async fn recent_rows(w: &Wired, limit: usize) -> Vec<AuditRow> {
    w.authority.flush_answered().await.unwrap();
    w.authority.store().recent(limit).await.unwrap()
}

/// How many calls have a `call` row among `rows`.
fn calls_in(rows: &[AuditRow]) -> usize {
    let mut ids = ids_of(rows, &[AuditKind::Call]);
    ids.dedup();
    ids.len()
}

fn ids_of(rows: &[AuditRow], kinds: &[AuditKind]) -> Vec<i64> {
    let mut ids: Vec<i64> = rows
        .iter()
        .filter(|r| kinds.contains(&r.record.kind))
        .map(|r| r.record.call_id)
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn two_invokes_with_one_netd_id_are_two_audited_calls() {
    for with_snapshot in [false, true] {
        let w = wire().await;
        if with_snapshot {
            w.link.refresh().await;
        }
        // A compromised netd reuses one id for two calls, at once and one after the other.
        let root = Path::new("/");
        let (first, second) = (stat(7, root), stat(7, root));
        let (a, b) = tokio::join!(outcome(&w, &first), outcome(&w, &second));
        let c = outcome(&w, &stat(7, root)).await;
        for o in [a, b, c] {
            assert!(o.success, "{o:?}");
        }
        let rows = rows(&w).await;
        // Decided from the snapshot, one `call` row holds both; decided by approvald, a
        // decision row and an outcome row. (Without a snapshot at first, the executor
        // fetches one after the first call, so later calls may take either way.)
        let decided = ids_of(&rows, &[AuditKind::Decision, AuditKind::Call]);
        let finished = ids_of(&rows, &[AuditKind::Outcome, AuditKind::Call]);
        if with_snapshot {
            assert_eq!(ids_of(&rows, &[AuditKind::Call]).len(), 3, "{rows:?}");
        }
        let mut distinct = decided.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "three calls, three ids: {rows:?}");
        assert_eq!(decided, finished, "each call has its own outcome");
        assert!(!decided.contains(&7), "netd's id reached the audit");
    }
}

#[tokio::test]
async fn a_read_under_the_snapshot_is_one_row_and_an_edit_applies_to_the_next_call() {
    let w = wire().await;
    w.link.refresh().await;
    let o = outcome(&w, &stat(1, Path::new("/"))).await;
    assert!(o.success, "{o:?}");
    let first = rows(&w).await;
    assert_eq!(
        first.len(),
        1,
        "one row for a read under the snapshot: {first:?}"
    );
    let row = &first[0].record;
    assert_eq!(row.kind, AuditKind::Call);
    assert_eq!(row.decision.map(|v| v.as_str()), Some("allowed"));
    assert_eq!(row.reason.as_deref(), Some(REASON_READ_ONLY));
    assert_eq!(row.success, Some(true));
    assert_eq!(row.tool.as_deref(), Some("fs.stat"));

    // The owner breaks the configuration: the very next read is refused by approvald,
    // whose decision says why (the snapshot no longer matches the file).
    std::fs::write(&w.config, "approval_policy = [\n").unwrap();
    let o = outcome(&w, &stat(2, Path::new("/"))).await;
    assert!(!o.success, "{o:?}");
    assert!(o.output.contains(REASON_CONFIG_UNREADABLE), "{}", o.output);

    // Strict asks even for reads: once fixed to strict, nothing runs unasked. With no
    // one to ask (the approval times out in 1 s), the read expires instead of running.
    std::fs::write(
        &w.config,
        "approval_policy = 'strict'\napproval_timeout_secs = 1\n",
    )
    .unwrap();
    let o = outcome(&w, &stat(3, Path::new("/"))).await;
    assert!(!o.success, "{o:?}");
    assert!(o.output.contains("not run"), "{}", o.output);
    // A fresh snapshot of the strict file lets nothing through either.
    w.link.refresh().await;
    let o = outcome(&w, &stat(4, Path::new("/"))).await;
    assert!(!o.success, "{o:?}");
    let all = rows(&w).await;
    assert_eq!(
        ids_of(&all, &[AuditKind::Call]).len(),
        1,
        "only the first read ran under a snapshot: {all:?}"
    );
    assert_eq!(ids_of(&all, &[AuditKind::Decision]).len(), 3, "{all:?}");

    // Back to balanced: reads run unasked again, from a fresh snapshot.
    std::fs::write(&w.config, "approval_policy = 'balanced'\n").unwrap();
    let o = outcome(&w, &stat(5, Path::new("/"))).await;
    assert!(o.success, "{o:?}");
}

fn read_only_summary(call_id: u64) -> ActionSummary {
    ActionSummary {
        data: None,
        ui_app: None,
        call_id: CallId(call_id),
        task: None,
        after_reading: Default::default(),
        client: None,
        sent: None,
        origin: CallOrigin::McpHttp,
        tool: "fs.stat".into(),
        action: "stat /".into(),
        arguments_sha256: "a".repeat(64),
        risk: RiskLevel::ReadOnly,
        requires_root: false,
        identity: Identity::Launching,
        confinement: Confinement::Fixed,
        reasons: Vec::new(),
        commands: None,
    }
}

fn ran(summary: ActionSummary, policy: ConfigVersion) -> AuthorityRequest {
    let call_id = summary.call_id;
    AuthorityRequest::Ran(RanRecord {
        summary,
        result: CallResult {
            call_id,
            success: true,
            exit_code: None,
            duration_ms: 1,
            summary: "ok".into(),
        },
        policy,
    })
}

/// A `Ran` notice that no snapshot covers closes the channel (approvald's side).
async fn hostile_ran(
    setup: impl FnOnce(&Path),
    req: impl FnOnce(ConfigVersion) -> AuthorityRequest,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    setup(&config);
    let authority = Arc::new(Authority::new(Store::open(dir.path()).unwrap(), &config));
    let (asker, answerer) = pair::<ExecutorApprovald>().unwrap();
    let server = tokio::spawn(nl2sh_approvald::dispatch::serve_executor(
        answerer,
        authority.clone(),
    ));
    let (client, _) = RpcClient::start(asker).await.unwrap();
    let version = match client.call(&AuthorityRequest::Policy).await {
        Ok(AuthorityResponse::Policy(s)) => s.version,
        other => panic!("{other:?}"),
    };
    // Out of state: the channel closes instead of answering.
    assert!(client.call(&req(version)).await.is_err());
    let end = server.await.unwrap();
    authority.store().flush().await.unwrap();
    assert!(
        authority.store().recent(10).await.unwrap().is_empty(),
        "nothing recorded"
    );
    match end {
        Err(FrameError::OutOfPlace(why)) => why,
        other => panic!("channel not closed: {other:?}"),
    }
}

#[tokio::test]
async fn a_call_no_snapshot_lets_run_closes_the_channel_and_records_nothing() {
    let balanced = |_: &Path| {};
    // A mutation reported as run under the snapshot.
    let why = hostile_ran(balanced, |v| {
        let mut s = read_only_summary(1);
        s.risk = RiskLevel::Low;
        ran(s, v)
    })
    .await;
    assert!(why.contains("no call a policy snapshot lets run"), "{why}");
    // A read outside the sandbox.
    let why = hostile_ran(balanced, |v| {
        let mut s = read_only_summary(1);
        s.confinement = Confinement::Unconfined;
        ran(s, v)
    })
    .await;
    assert!(why.contains("no call a policy snapshot lets run"), "{why}");
    // A snapshot approvald never gave (another version of the file).
    let why = hostile_ran(balanced, |_| {
        ran(read_only_summary(1), ConfigVersion::Unknown)
    })
    .await;
    assert!(why.contains("did not give"), "{why}");
    // Under strict, the snapshot lets no read run.
    let strict = |p: &Path| std::fs::write(p, "approval_policy = 'strict'\n").unwrap();
    let why = hostile_ran(strict, |v| ran(read_only_summary(1), v)).await;
    assert!(why.contains("did not give"), "{why}");
}

/// A `Kept` report is checked whole before anything in it is written: an empty one, one
/// over the limit, one with a single row no snapshot lets run, or one that holds a call
/// twice closes the channel and records nothing, not even the good rows beside it.
#[tokio::test]
async fn a_kept_report_out_of_bounds_or_with_one_bad_row_closes_the_channel_and_records_nothing() {
    let balanced = |_: &Path| {};
    let rows_of = |v: ConfigVersion, ids: std::ops::Range<u64>| -> Vec<ReportedRow> {
        ids.map(|id| match ran(read_only_summary(id), v) {
            AuthorityRequest::Ran(r) => ReportedRow::Ran(r),
            other => panic!("{other:?}"),
        })
        .collect()
    };
    let why = hostile_ran(balanced, |_| AuthorityRequest::Kept(Vec::new())).await;
    assert!(why.contains("0 kept rows in one report"), "{why}");
    let over = MAX_KEPT_ROWS as u64 + 1;
    let why = hostile_ran(balanced, |v| {
        AuthorityRequest::Kept(rows_of(v, 1..over + 1))
    })
    .await;
    assert!(why.contains(&format!("{over} kept rows")), "{why}");
    let why = hostile_ran(balanced, |v| {
        let mut rows = rows_of(v, 1..3);
        let mut mutation = read_only_summary(3);
        mutation.risk = RiskLevel::Low;
        match ran(mutation, v) {
            AuthorityRequest::Ran(r) => rows.push(ReportedRow::Ran(r)),
            other => panic!("{other:?}"),
        }
        AuthorityRequest::Kept(rows)
    })
    .await;
    assert!(why.contains("no call a policy snapshot lets run"), "{why}");
    // One call reported twice in one report.
    let why = hostile_ran(balanced, |v| {
        let mut rows = rows_of(v, 1..3);
        rows.push(rows[0].clone());
        AuthorityRequest::Kept(rows)
    })
    .await;
    assert!(why.contains("a second decision for call 1"), "{why}");
}

/// Rows of calls answered while approvald is busy reach it in a few `Kept` reports, not a
/// request each (one wake of approvald for a stream of calls), each within the limit;
/// the answers do not wait for approvald; every row is acknowledged, and all are in the
/// audit when the owner reads it. approvald holds its answer to the reports until every
/// call is answered, so the count does not depend on how fast the calls run.
#[tokio::test]
async fn rows_of_calls_answered_together_reach_approvald_in_few_reports() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (open, gate) = tokio::sync::watch::channel(false);
    let observed = seen.clone();
    let w = wire_observed(None, move |req| {
        let what = match req {
            AuthorityRequest::Kept(rows) => format!("kept {}", rows.len()),
            AuthorityRequest::Ran(_) => "ran".into(),
            AuthorityRequest::Policy => "policy".into(),
            other => format!("{other:?}"),
        };
        let held = what.starts_with("kept ");
        observed.lock().unwrap().push(what);
        let mut gate = gate.clone();
        Box::pin(async move {
            if held {
                let _ = gate.wait_for(|open| *open).await;
            }
        })
    })
    .await;
    w.link.refresh().await;
    let mut running = tokio::task::JoinSet::new();
    for i in 0..100 {
        let executor = w.executor.clone();
        let req = stat(100 + i, Path::new("/"));
        running.spawn(async move { executor.call(&req).await });
    }
    let answered = async {
        while let Some(answer) = running.join_next().await {
            match answer.unwrap() {
                Ok(ExecutorResponse::Outcome(o)) => assert!(o.success, "{o:?}"),
                other => panic!("{other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), answered)
        .await
        .expect("the answers waited for approvald");
    // Every call answered while approvald held at most the first report.
    open.send(true).unwrap();
    assert!(
        w.link.settle(Duration::from_secs(5)).await,
        "every row acknowledged"
    );
    let seen = seen.lock().unwrap().clone();
    let kept: Vec<usize> = seen
        .iter()
        .filter_map(|s| s.strip_prefix("kept ")?.parse().ok())
        .collect();
    assert_eq!(kept.iter().sum::<usize>(), 100, "{seen:?}");
    // The first report, then the other rows in reports of at most 64.
    assert!(
        kept.len() <= 3,
        "100 rows in {} reports: {seen:?}",
        kept.len()
    );
    assert!(kept.iter().all(|&n| n <= MAX_KEPT_ROWS), "{seen:?}");
    assert!(!seen.iter().any(|s| s == "ran"), "{seen:?}");
    let rows = rows(&w).await;
    assert_eq!(calls_in(&rows), 100, "{rows:?}");
    // The owner's flush waits for rows still gathering: a call answered just before it
    // is in what the owner reads.
    assert!(outcome(&w, &stat(500, Path::new("/"))).await.success);
    let rows = recent_rows(&w, 200).await;
    assert_eq!(calls_in(&rows), 101, "{rows:?}");
}

/// The sender keeps to the channel's limits: a shell line whose quoted action is longer
/// than the approval channel carries (6,000 `'` become 24,000 bytes once quoted) is
/// refused with a clear error, and both channels stay up for the next call.
#[tokio::test]
async fn an_action_over_the_channel_limit_is_refused_and_the_channel_stays_up() {
    // Everything is asked of approvald (strict) and auto-approved: a decision row proves
    // the channel answered, and the oversize call would have run had it been sent.
    let w = wire_in(Some(
        "approval_policy = \"strict\"\nprotocol_auto_approve = true\n",
    ))
    .await;
    let proof = w.dir.path().join("ran");
    let command = format!("touch {} #{}", proof.display(), "'".repeat(6000));
    let req = ExecutorRequest::Invoke(InvokeRequest {
        correlation: Correlation(1),
        origin: CallOrigin::McpHttp,
        task: None,
        after_reading: Default::default(),
        client: None,
        tool: "shell.exec".into(),
        arguments: serde_json::json!({ "command": command }).to_string(),
    });
    let o = outcome(&w, &req).await;
    assert!(!o.success, "{o:?}");
    assert!(
        o.output.contains("the limit is 16384") && o.output.contains("shorten it"),
        "{}",
        o.output
    );
    assert!(!proof.exists());
    // The executor → approvald channel still answers: the next call is decided there.
    let o = outcome(&w, &stat(2, Path::new("/"))).await;
    assert!(o.success, "{o:?}");
    let rows = rows(&w).await;
    let decided: Vec<_> = rows
        .iter()
        .filter(|r| r.record.kind == AuditKind::Decision)
        .collect();
    assert_eq!(decided.len(), 1, "{rows:?}");
    assert_eq!(decided[0].record.tool.as_deref(), Some("fs.stat"));
}

/// Nothing answered is missing from the audit: the moment 40 concurrent calls have their
/// answers, every one of them is in the database (read from the file, not through the
/// writer), both the read-only calls decided from the snapshot and those approvald
/// decided.
#[tokio::test]
async fn every_answered_call_is_already_in_the_audit() {
    for with_snapshot in [true, false] {
        let w = wire().await;
        if with_snapshot {
            w.link.refresh().await;
        }
        let root = Path::new("/");
        let mut running = tokio::task::JoinSet::new();
        for i in 0..40 {
            let executor = w.executor.clone();
            let req = stat(100 + i, root);
            running.spawn(async move { executor.call(&req).await });
        }
        while let Some(answer) = running.join_next().await {
            match answer.unwrap() {
                Ok(ExecutorResponse::Outcome(o)) => assert!(o.success, "{o:?}"),
                other => panic!("{other:?}"),
            }
        }
        // No flush: what the answers promised is already kept, in the executor's outbox,
        // approvald's journal or the database, whichever it has reached. Read in that
        // order, the order a row moves in, so that none is missed between two reads.
        let outbox = read_entries::<ReportedRow>(&w.dir.path().join(OUTBOX_FILE)).unwrap();
        let db = w.authority.store().path().to_owned();
        let journalled = nl2sh_approvald::store::journal_pending(&db).unwrap();
        let rows = w.authority.store().recent(500).await.unwrap();
        let finished = [AuditKind::Outcome, AuditKind::Call];
        let mut kept = ids_of(&rows, &finished);
        kept.extend(
            journalled
                .iter()
                .filter(|e| finished.contains(&e.record.kind))
                .map(|e| e.record.call_id),
        );
        kept.extend(outbox.entries.iter().map(|r| r.call_id().0 as i64));
        kept.sort_unstable();
        kept.dedup();
        assert_eq!(kept.len(), 40, "with snapshot {with_snapshot}: {rows:?}");
    }
}

fn reported(call_id: u64, ran: bool) -> ReportedRow {
    let summary = ActionSummary {
        data: None,
        ui_app: None,
        call_id: CallId(call_id),
        task: None,
        after_reading: Default::default(),
        client: None,
        sent: None,
        origin: CallOrigin::McpHttp,
        tool: "shell.exec".into(),
        action: format!("/bin/sh -c 'echo recovered-{call_id}'"),
        arguments_sha256: "0123456789abcdef".repeat(4),
        risk: if ran {
            RiskLevel::ReadOnly
        } else {
            RiskLevel::Medium
        },
        requires_root: false,
        identity: Identity::Launching,
        confinement: if ran {
            Confinement::Sandbox
        } else {
            Confinement::Unconfined
        },
        reasons: Vec::new(),
        commands: None,
    };
    let result = CallResult {
        call_id: CallId(call_id),
        success: true,
        exit_code: Some(0),
        duration_ms: 3,
        summary: "exit 0".into(),
    };
    if ran {
        ReportedRow::Ran(RanRecord {
            summary,
            result,
            policy: ConfigVersion::Absent,
        })
    } else {
        ReportedRow::Finished {
            summary,
            decision: Decision::Approved,
            result,
        }
    }
}

/// An executor that died after answering leaves its rows in the outbox; the next one
/// hands them to approvald, which writes each row its audit lacks, once, and the outbox
/// is emptied.
#[tokio::test]
async fn rows_an_earlier_executor_left_in_its_outbox_are_written_once() {
    let w = wire().await;
    // One of them reached approvald before the executor died: a real call's.
    w.link.refresh().await;
    assert!(outcome(&w, &stat(1, Path::new("/"))).await.success);
    assert!(w.link.settle(Duration::from_secs(5)).await);
    let before = rows(&w).await;
    let [reached] = ids_of(&before, &[AuditKind::Call])[..] else {
        panic!("{before:?}")
    };
    let reached = reached as u64;
    let left = [
        reported(reached, true),
        reported(902, true),
        reported(903, false),
    ];
    let path = w.dir.path().join(OUTBOX_FILE);
    let bytes: Vec<u8> = left.iter().flat_map(|r| encode_entry(r).unwrap()).collect();
    std::fs::write(&path, bytes).unwrap();
    let found = read_entries::<ReportedRow>(&path).unwrap().entries;
    assert_eq!(found.len(), 3);
    w.link.recover(found).await;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "outbox emptied");
    let rows = rows(&w).await;
    let mut calls = vec![902, reached as i64];
    calls.sort_unstable();
    assert_eq!(ids_of(&rows, &[AuditKind::Call]), calls, "{rows:?}");
    assert_eq!(ids_of(&rows, &[AuditKind::Outcome]), vec![903], "{rows:?}");
    let outcome = rows.iter().find(|r| r.record.call_id == 903).unwrap();
    assert_eq!(
        outcome.record.decision.map(|v| v.as_str()),
        Some("approved")
    );
    assert_eq!(
        outcome.record.action.as_deref(),
        Some("/bin/sh -c 'echo recovered-903'")
    );
    assert!(w.authority.store().verify().await.unwrap().is_intact());
}

/// An outbox row approvald refuses (a mutation reported as a read the snapshot let run,
/// an outcome of a refused call: a file edited, or written by a build with other rules)
/// is not written, and does not close the channel: that would restart the workers into
/// the same file, for good.
#[tokio::test]
async fn a_refused_outbox_row_is_not_written_and_the_service_goes_on() {
    let w = wire().await;
    let mutation_as_read = match reported(911, false) {
        ReportedRow::Finished {
            summary, result, ..
        } => ReportedRow::Ran(RanRecord {
            summary,
            result,
            policy: ConfigVersion::Absent,
        }),
        other => panic!("{other:?}"),
    };
    let refused_outcome = match reported(912, false) {
        ReportedRow::Finished {
            summary, result, ..
        } => ReportedRow::Finished {
            summary,
            decision: Decision::Refused,
            result,
        },
        other => panic!("{other:?}"),
    };
    let path = w.dir.path().join(OUTBOX_FILE);
    let left = [mutation_as_read, refused_outcome, reported(913, true)];
    let bytes: Vec<u8> = left.iter().flat_map(|r| encode_entry(r).unwrap()).collect();
    std::fs::write(&path, bytes).unwrap();
    w.link
        .recover(read_entries::<ReportedRow>(&path).unwrap().entries)
        .await;
    // The channel is up: a call is answered and audited.
    w.link.refresh().await;
    assert!(outcome(&w, &stat(1, Path::new("/"))).await.success);
    assert!(w.link.settle(Duration::from_secs(5)).await);
    let rows = rows(&w).await;
    let ids: Vec<i64> = rows.iter().map(|r| r.record.call_id).collect();
    assert!(ids.contains(&913), "{rows:?}");
    assert!(!ids.contains(&911) && !ids.contains(&912), "{rows:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
}

/// Text made of `pieces` random shell and path fragments, from xorshift `state`
/// (reproducible without a dependency; tests print the seed on failure).
fn random_text(state: &mut u64, pieces: u64) -> String {
    const PIECES: &[&str] = &[
        "'",
        "\"",
        "\\",
        "$(",
        ")",
        "`",
        ";",
        "&&",
        "||",
        "|",
        "&",
        ">",
        ">>",
        "<",
        "<<EOF\n",
        "\n",
        "\r",
        "\t",
        " ",
        "*",
        "?",
        "~",
        "{a,b}",
        "$x",
        "${x:=y}",
        "$((1+1))",
        "ls",
        "touch",
        "rm -rf",
        "sh -c",
        "eval",
        "\u{1b}[2K",
        "\u{202e}",
        "é",
        "😀",
        "\0",
        "--",
        "-n",
        "/etc/passwd",
        "/proc/self/root",
        "..",
        "/",
        "x",
        "EOF\n",
    ];
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let count = next() % pieces;
    let mut text = String::new();
    for _ in 0..count {
        text.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
    }
    text
}

fn random_seed() -> u64 {
    0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id())
}

fn invoke(correlation: u64, tool: &str, arguments: serde_json::Value) -> ExecutorRequest {
    ExecutorRequest::Invoke(InvokeRequest {
        correlation: Correlation(correlation),
        origin: CallOrigin::McpHttp,
        task: None,
        after_reading: Default::default(),
        client: None,
        tool: tool.into(),
        arguments: arguments.to_string(),
    })
}

/// Random tool arguments through the real executor → approvald path never close a
/// channel: every call is answered (the configuration is unusable, so approvald refuses
/// every decision and nothing runs), and approvald still decides the last one.
#[tokio::test]
async fn random_tool_arguments_never_close_a_channel() {
    let w = wire_in(Some("approval_policy = [unusable\n")).await;
    let seed = random_seed();
    let mut state = seed;
    let tools = ["shell.exec", "fs.read", "fs.list", "fs.stat", "fs.write"];
    for i in 0..300u64 {
        let text = random_text(&mut state, 2000);
        let tool = tools[(state % tools.len() as u64) as usize];
        let arguments = match tool {
            "shell.exec" => serde_json::json!({ "command": text }),
            "fs.write" => serde_json::json!({ "path": format!("/{text}"), "content": text }),
            _ => serde_json::json!({ "path": format!("/{text}") }),
        };
        match w.executor.call(&invoke(i, tool, arguments)).await {
            Ok(ExecutorResponse::Outcome(o)) => {
                assert!(!o.success, "seed {seed:#x}, call {i}: {o:?}")
            }
            other => panic!(
                "seed {seed:#x}, call {i} ({tool}, {} bytes): {other:?}",
                text.len()
            ),
        }
    }
    let o = outcome(&w, &stat(1000, Path::new("/"))).await;
    assert!(o.output.contains(REASON_CONFIG_UNREADABLE), "{o:?}");
}

/// `fs.stat`, a read the policy snapshot lets run unasked (here, without the sandbox, the
/// one kind that does), of 200 files named with random shell and terminal text, all at
/// once: each call's row, with that text in its action, goes to approvald in a gathered
/// `Kept` report, and no report closes the channel (approvald refuses a whole report for
/// one bad row): every call runs, every row is acknowledged and in the audit, and the
/// next call still runs.
#[tokio::test]
async fn random_names_reported_together_never_close_a_channel() {
    let w = wire().await;
    w.link.refresh().await;
    let seed = random_seed();
    let mut state = seed ^ 0x5851_f42d_4c95_7f2d;
    let files = tempfile::tempdir().unwrap();
    let mut running = tokio::task::JoinSet::new();
    for i in 0..200u64 {
        // A file name: no `/` or NUL, at most 255 bytes, and unique.
        let mut name: String = random_text(&mut state, 40)
            .chars()
            .filter(|c| *c != '/' && *c != '\0')
            .collect();
        while name.len() > 240 {
            name.pop();
        }
        let path = files.path().join(format!("{i}-{name}"));
        std::fs::write(&path, b"x").unwrap();
        let executor = w.executor.clone();
        let req = stat(i, &path);
        running.spawn(async move { (i, executor.call(&req).await) });
    }
    while let Some(answer) = running.join_next().await {
        match answer.unwrap() {
            (_, Ok(ExecutorResponse::Outcome(o))) if o.success => {}
            (i, other) => panic!("seed {seed:#x}, call {i}: {other:?}"),
        }
    }
    assert!(
        w.link.settle(Duration::from_secs(10)).await,
        "seed {seed:#x}: rows not acknowledged"
    );
    assert!(outcome(&w, &stat(1000, Path::new("/"))).await.success);
    let rows = recent_rows(&w, 500).await;
    assert_eq!(calls_in(&rows), 201, "seed {seed:#x}: {rows:?}");
}

/// What netd says the Agent had read is its word, checked like the task id: a direct
/// call may not carry it, an oversized one is refused before anything is decided, and an
/// Agent call's note reaches its audit row as sent.
#[tokio::test]
async fn the_agents_read_sources_are_checked_and_audited() {
    let w = wire().await;
    let root = Path::new("/");
    let with = |origin: CallOrigin, task: Option<&str>, sources: Vec<String>| {
        let ExecutorRequest::Invoke(mut call) = stat(1, root) else {
            unreachable!()
        };
        call.origin = origin;
        call.task = task.map(|t| nl2sh_proto::channels::TaskId(t.into()));
        call.after_reading = sources.into();
        ExecutorRequest::Invoke(call)
    };
    let direct = with(CallOrigin::McpHttp, None, vec!["com.example.chat".into()]);
    let o = outcome(&w, &direct).await;
    assert!(!o.success && o.output.contains("only the Agent"), "{o:?}");
    let five = (0..5).map(|i| format!("com.app{i}")).collect();
    let o = outcome(&w, &with(CallOrigin::AgentHttp, Some("t-1"), five)).await;
    assert!(!o.success && o.output.contains("limit is 4"), "{o:?}");
    let long = vec!["x".repeat(256)];
    let o = outcome(&w, &with(CallOrigin::AgentHttp, Some("t-1"), long)).await;
    assert!(!o.success, "{o:?}");
    assert!(
        rows(&w).await.is_empty(),
        "a refused call reached the audit"
    );

    let read = vec!["com.example.chat".to_string(), "/sdcard/notes.txt".into()];
    let o = outcome(&w, &with(CallOrigin::AgentHttp, Some("t-1"), read)).await;
    assert!(o.success, "{o:?}");
    let rows = rows(&w).await;
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(
            row.to_json()["after_reading"],
            serde_json::json!(["com.example.chat", "/sdcard/notes.txt"]),
            "{row:?}"
        );
    }
}
