//! Audit retention under load: approvald's `Authority` and SQLite store in this process,
//! driven like an agent polling the screen (`android.screen_dump`, read-only, allowed
//! unasked: the executor lets it run from approvald's policy snapshot and reports it
//! afterwards, one `call` row), with the limits in the configuration file the authority
//! reads.
//!
//! Run: `cargo bench -p nl2sh-tests --bench audit` (about 15 s; the store is in this
//! process, so no release build of the binary is needed).
//!
//! 1. `audit_max_rows = 20000`: 100,000 calls. Prints calls/s and rows/s (until every row
//!    is committed), the database and `-wal` sizes, the rows kept, and PASS/MISS for the
//!    rows kept against the limit and the files against `audit_max_bytes`.
//! 2. `audit_max_bytes = 4 MiB` (rows at their default): 100,000 calls, the same figures.
//! 3. Without retention (limits too large to matter): 20,000 calls, for the bytes a call
//!    costs; the load test that motivated retention left 465 MB after 626,000 calls.
//! 4. A database from before retention (no anchor, no auto-vacuum, no tail file) of
//!    200,000 rows, opened under `audit_max_rows = 20000`: how long pruning and the
//!    one-time rebuild take, and the file size before and after.
//!
//! Every phase ends with `--verify`'s check; a broken chain fails the bench, a missed
//! limit only prints MISS.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nl2sh_approvald::authority::Authority;
use nl2sh_approvald::store::{self, AuditLimits, Store, DB_FILE, TAIL_FILE};
use nl2sh_proto::channels::{
    ActionSummary, CallId, CallOrigin, CallResult, Confinement, Identity, RanRecord, RiskLevel,
};

const MIB: u64 = 1024 * 1024;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    rt.block_on(async {
        println!("audit retention, in process (approvald Authority + Store)\n");
        run_limited(
            "1. audit_max_rows = 20000",
            "audit_max_rows = 20000\n",
            100_000,
        )
        .await;
        run_limited(
            "2. audit_max_bytes = 4 MiB",
            "audit_max_bytes = 4194304\n",
            100_000,
        )
        .await;
        run_limited(
            "3. without retention (limits out of reach)",
            "audit_max_rows = 1000000000\naudit_max_bytes = 1099511627776\n",
            20_000,
        )
        .await;
        legacy_migration(200_000, 20_000).await;
    });
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}

/// What a screen-polling agent's call looks like to the authority.
fn screen_dump(call_id: u64) -> ActionSummary {
    ActionSummary {
        data: None,
        ui_app: None,
        call_id: CallId(call_id),
        task: None,
        after_reading: Default::default(),
        client: None,
        sent: None,
        origin: CallOrigin::McpHttp,
        tool: "android.screen_dump".into(),
        action: format!(
            "/system/bin/uiautomator dump /data/local/tmp/nl2sh-window-4242-{call_id}.xml"
        ),
        arguments_sha256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a".into(),
        risk: RiskLevel::ReadOnly,
        requires_root: false,
        identity: Identity::Shell,
        confinement: Confinement::Fixed,
        reasons: Vec::new(),
        commands: None,
    }
}

fn finished(call_id: u64) -> CallResult {
    CallResult {
        call_id: CallId(call_id),
        success: true,
        exit_code: Some(0),
        duration_ms: 180 + call_id % 40,
        summary: "ok".into(),
    }
}

struct Sizes {
    db: u64,
    wal: u64,
}

fn sizes(state: &Path) -> Sizes {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let db = state.join(DB_FILE);
    Sizes {
        db: size(&db),
        wal: size(&db.with_file_name("tasks.sqlite3-wal")),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / MIB as f64)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

async fn run_limited(title: &str, config: &str, calls: u64) {
    let work = tempfile::Builder::new()
        .prefix("nl2sh-bench-audit-")
        .tempdir()
        .expect("tempdir");
    let config_path = work.path().join("config.toml");
    std::fs::write(&config_path, config).expect("config");
    let state = work.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let store = Store::open(&state).expect("store");
    let authority = Arc::new(Authority::new(store, &config_path));

    let started = Instant::now();
    let snapshot = authority.policy_snapshot().await;
    assert_eq!(
        snapshot.reads_unasked,
        [CallOrigin::McpHttp, CallOrigin::McpStdio],
        "reads run unasked under this configuration"
    );
    for id in 1..=calls {
        let ran = RanRecord {
            summary: screen_dump(id),
            result: finished(id),
            policy: snapshot.version,
        };
        if let Err(e) = authority.ran(ran).await {
            panic!("call {id}: {e:?}");
        }
    }
    let queued = started.elapsed();
    authority.store().flush().await.expect("flush");
    let committed = started.elapsed();
    let limits = authority
        .store()
        .limits()
        .expect("limits set from the config");
    let stats = authority.store().stats();
    let at_end = sizes(&state);
    let report = verify(&state);
    let kept = report.rows_checked;

    println!("{title}: {calls} calls, {calls} rows");
    println!(
        "   {:>9.0} calls/s on the call path ({:.2} s), {:>9.0} rows/s committed ({:.2} s, {} batches)",
        calls as f64 / queued.as_secs_f64(),
        queued.as_secs_f64(),
        stats.records as f64 / committed.as_secs_f64(),
        committed.as_secs_f64(),
        stats.batches,
    );
    let total = at_end.db + at_end.wal;
    println!(
        "   database {} + wal {} = {}: {} bytes on disk per call kept",
        mib(at_end.db),
        mib(at_end.wal),
        mib(total),
        total / kept.max(1),
    );
    println!(
        "   rows kept {kept} (pruned {}), limit {}: {}",
        stats.pruned,
        limits.max_rows,
        verdict(kept <= limits.max_rows)
    );
    println!(
        "   files {} against audit_max_bytes {}: {}",
        mib(total),
        mib(limits.max_bytes),
        verdict(total <= limits.max_bytes)
    );
    println!("   {}", report.summary);
    println!();
}

struct Verified {
    rows_checked: u64,
    summary: String,
}

/// `--verify`'s check; the bench fails if the trail does not verify.
fn verify(state: &Path) -> Verified {
    let started = Instant::now();
    let report = store::verify_path(&state.join(DB_FILE)).expect("verify");
    assert!(report.is_intact(), "the trail does not verify: {report:?}");
    Verified {
        rows_checked: report.rows_checked,
        summary: format!(
            "--verify: intact in {:.0} ms, {} rows after the anchor at row {}; {}",
            started.elapsed().as_secs_f64() * 1e3,
            report.rows_checked,
            report.anchor.as_ref().map_or(0, |a| a.id),
            report.tail
        ),
    }
}

/// Run the sqlite3 tool on `db`.
fn sqlite3(db: &Path, sql: &str) {
    let status = std::process::Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the sqlite3 tool is needed for phase 4");
    assert!(status.success(), "sqlite3 {sql}");
}

/// A trail as an older build left it, then opened by this one.
async fn legacy_migration(rows: u64, max_rows: u64) {
    let work = tempfile::Builder::new()
        .prefix("nl2sh-bench-audit-")
        .tempdir()
        .expect("tempdir");
    let state = work.path();
    let store = Store::open(state).expect("store");
    for id in 1..=rows / 2 {
        let mut decision = store::AuditRecord::new(store::AuditKind::Decision, id as i64);
        let s = screen_dump(id);
        decision.origin = Some(s.origin);
        decision.tool = Some(s.tool.clone());
        decision.action = Some(s.action.clone());
        decision.arguments_sha256 = Some(s.arguments_sha256.clone());
        decision.risk = Some(s.risk);
        decision.requires_root = Some(false);
        decision.identity = Some(s.identity);
        let mut outcome = decision.clone();
        outcome.kind = store::AuditKind::Outcome;
        decision.decision = Some(nl2sh_proto::channels::Decision::Allowed);
        decision.reason = Some("read-only".into());
        outcome.decision = Some(nl2sh_proto::channels::Decision::Allowed);
        outcome.success = Some(true);
        outcome.exit_code = Some(0);
        outcome.duration_ms = Some(200);
        outcome.summary = Some("ok".into());
        store.append_nowait(decision).await.expect("append");
        store.append_nowait(outcome).await.expect("append");
    }
    store.flush().await.expect("flush");
    drop(store);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // What a build before retention wrote: schema 1, no anchor table, no auto-vacuum, no
    // tail file.
    let db = state.join(DB_FILE);
    sqlite3(
        &db,
        "DROP TABLE audit_anchor; PRAGMA user_version = 1; PRAGMA auto_vacuum = NONE; \
         VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
    );
    std::fs::remove_file(state.join(TAIL_FILE)).expect("tail file");
    let before = sizes(state);

    let started = Instant::now();
    let store = Store::open(state).expect("reopen");
    let opened = started.elapsed();
    store.set_limits(AuditLimits {
        max_rows,
        ..AuditLimits::default()
    });
    store.settle().await.expect("settle");
    let settled = started.elapsed();
    let after = sizes(state);
    let report = verify(state);
    println!(
        "4. a {rows}-row database from before retention, opened with audit_max_rows = {max_rows}"
    );
    println!(
        "   open (migration) {:.0} ms; pruning and the one-time rebuild done after {:.2} s",
        opened.as_secs_f64() * 1e3,
        settled.as_secs_f64()
    );
    println!(
        "   database + wal {} -> {}, rows kept {}: {}",
        mib(before.db + before.wal),
        mib(after.db + after.wal),
        report.rows_checked,
        verdict(report.rows_checked <= max_rows)
    );
    println!("   {}", report.summary);
    println!();
}
