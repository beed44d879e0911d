//! Retention of the audit trail: pruning by rows and by bytes, the anchor that keeps the
//! pruned chain verifiable, the tail file that shows rows cut from the end, the one-time
//! rebuild of a database from before retention, and the limits read from the
//! configuration file.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nl2sh_approvald::store::{
    AuditKind, AuditLimits, AuditRecord, ChainProblem, Store, TailStatus, DB_FILE, SCHEMA_VERSION,
    TAIL_FILE,
};
use nl2sh_proto::channels::{
    AuthorityRequest, CallId, CallResult, Confinement, Decision, RiskLevel,
};

const MIB: u64 = 1024 * 1024;

fn record(call_id: i64, summary_bytes: usize) -> AuditRecord {
    let mut r = AuditRecord::new(AuditKind::Outcome, call_id);
    r.tool = Some("fs.stat".into());
    r.action = Some(format!("stat /sdcard/Download/report-{call_id}.pdf"));
    r.decision = Some(nl2sh_proto::channels::Decision::Allowed);
    r.success = Some(true);
    r.duration_ms = Some(3);
    r.summary = Some("s".repeat(summary_bytes));
    r
}

fn rows_limit(max_rows: u64) -> AuditLimits {
    AuditLimits {
        max_rows,
        max_bytes: 1024 * MIB,
    }
}

/// Queue `n` records after `from` without waiting, then wait for their commit.
async fn fill(store: &Store, from: i64, n: i64, summary_bytes: usize) {
    for i in from..from + n {
        store.append_nowait(record(i, summary_bytes)).await.unwrap();
    }
    store.flush().await.unwrap();
}

fn db(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}

fn sql(dir: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(db(dir)).unwrap();
    conn.execute_batch(statement).unwrap();
}

fn ids(dir: &Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(db(dir)).unwrap();
    let mut stmt = conn.prepare("SELECT id FROM audit ORDER BY id").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn anchor(dir: &Path) -> Option<(i64, String)> {
    let conn = rusqlite::Connection::open(db(dir)).unwrap();
    conn.query_row(
        "SELECT pruned_id, pruned_sha256 FROM audit_anchor",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

/// The database file and its WAL, in bytes.
fn disk_bytes(dir: &Path) -> u64 {
    let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let db = db(dir);
    size(db.clone()) + size(db.with_file_name("tasks.sqlite3-wal"))
}

/// Wait until the writer thread has let go of the database (it stops once every handle
/// is gone and its queue is empty).
async fn close(store: Store) {
    store.flush().await.unwrap();
    let stopped = store.writer_stopped();
    drop(store);
    stopped.wait().await;
}

#[tokio::test]
async fn pruning_by_rows_keeps_the_newest_rows_and_a_verifiable_chain() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.set_limits(rows_limit(640));
    fill(&store, 0, 3000, 10).await;
    store.settle().await.unwrap();
    let kept = ids(dir.path());
    // Pruned once past the limit, down to 1/64 below it: never more than the limit.
    assert!(kept.len() <= 640 && kept.len() >= 630, "{}", kept.len());
    assert_eq!(*kept.last().unwrap(), 3000);
    assert_eq!(kept, (kept[0]..=3000).collect::<Vec<_>>());
    let (anchor_id, _) = anchor(dir.path()).expect("an anchor");
    assert_eq!(anchor_id, kept[0] - 1);
    assert_eq!(store.stats().pruned, 3000 - kept.len() as u64);
    let report = store.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, kept.len() as u64);
    assert_eq!(report.anchor.map(|a| a.id), Some(anchor_id));
    assert_eq!(report.tail, TailStatus::Matches { id: 3000 });
}

#[tokio::test]
async fn pruning_happens_in_the_writers_batches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store.set_limits(rows_limit(1000));
    // Waited-for appends from many tasks: every commit prunes what it passes.
    let tasks: Vec<_> = (0..3000)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.append(record(i, 10)).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    // No settle: what the batches themselves left.
    assert!(ids(dir.path()).len() <= 1000);
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn pruning_by_bytes_keeps_the_files_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let limits = AuditLimits {
        max_rows: 1_000_000,
        max_bytes: 2 * MIB,
    };
    store.set_limits(limits);
    // About 10 MB of rows, in batches of 50.
    for round in 0..200 {
        fill(&store, round * 50, 50, 1000).await;
        let on_disk = disk_bytes(dir.path());
        assert!(
            on_disk <= limits.max_bytes,
            "round {round}: {on_disk} bytes on disk"
        );
    }
    store.settle().await.unwrap();
    let kept = ids(dir.path());
    assert!(kept.len() < 2000, "{}", kept.len());
    assert_eq!(*kept.last().unwrap(), 10_000);
    let on_disk = disk_bytes(dir.path());
    assert!(on_disk <= limits.max_bytes, "{on_disk} bytes on disk");
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn lowering_the_limit_prunes_and_shrinks_without_new_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.set_limits(rows_limit(100_000));
    fill(&store, 0, 20_000, 200).await;
    let before = disk_bytes(dir.path());
    store.set_limits(AuditLimits {
        max_rows: 1000,
        max_bytes: 4 * MIB,
    });
    store.settle().await.unwrap();
    assert!(ids(dir.path()).len() <= 1000);
    // Free pages went back to the file system (the file itself shrinks at checkpoint).
    let conn = rusqlite::Connection::open(db(dir.path())).unwrap();
    let free: i64 = conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert!(free * 4096 <= 256 * 1024, "{free} free pages");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let after = disk_bytes(dir.path());
    assert!(after < before / 4, "{before} -> {after}");
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn nothing_is_pruned_before_limits_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 2000, 10).await;
    store.settle().await.unwrap();
    assert_eq!(ids(dir.path()).len(), 2000);
    assert_eq!(anchor(dir.path()), None);
}

async fn pruned_store() -> (tempfile::TempDir, Store, i64) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.set_limits(rows_limit(64));
    fill(&store, 0, 200, 10).await;
    store.settle().await.unwrap();
    let first = ids(dir.path())[0];
    assert!(first > 1);
    assert!(store.verify().await.unwrap().is_intact());
    (dir, store, first)
}

#[tokio::test]
async fn an_edited_anchor_is_detected() {
    let (dir, store, first) = pruned_store().await;
    let (_, sha) = anchor(dir.path()).unwrap();
    sql(
        dir.path(),
        &format!(
            "UPDATE audit_anchor SET pruned_sha256 = '{}'",
            "0".repeat(64)
        ),
    );
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (first, ChainProblem::AnchorMismatch));

    // The right hash under another id: the first row no longer follows it.
    sql(
        dir.path(),
        &format!("UPDATE audit_anchor SET pruned_sha256 = '{sha}', pruned_id = pruned_id - 5"),
    );
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (first, ChainProblem::AnchorMismatch));

    sql(dir.path(), "UPDATE audit_anchor SET pruned_sha256 = 'x'");
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!(bad.problem, ChainProblem::AnchorMalformed);
}

#[tokio::test]
async fn a_deleted_anchor_is_detected() {
    let (dir, store, first) = pruned_store().await;
    sql(dir.path(), "DELETE FROM audit_anchor");
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (first, ChainProblem::PrevMismatch));
}

#[tokio::test]
async fn an_edited_or_deleted_first_remaining_row_is_detected() {
    let (dir, store, first) = pruned_store().await;
    sql(
        dir.path(),
        &format!("UPDATE audit SET action = 'rm -rf /' WHERE id = {first}"),
    );
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (first, ChainProblem::HashMismatch));

    let (dir, store, first) = pruned_store().await;
    sql(dir.path(), &format!("DELETE FROM audit WHERE id = {first}"));
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!(
        (bad.id, bad.problem),
        (first + 1, ChainProblem::AnchorMismatch)
    );

    // An inserted row in the middle, copied from its neighbour.
    let (dir, store, first) = pruned_store().await;
    let middle = first + 10;
    sql(
        dir.path(),
        &format!(
            "DELETE FROM audit WHERE id = {middle}; \
             INSERT INTO audit SELECT {middle}, time, call_id, kind, origin, tool, action, \
             arguments_sha256, risk, requires_root, identity, decision, reason, success, \
             exit_code, duration_ms, summary, prev_sha256, row_sha256, task, after_reading, client FROM audit \
             WHERE id = {}",
            middle - 1
        ),
    );
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!(bad.id, middle);
}

#[tokio::test]
async fn a_cut_tail_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 10, 10).await;
    assert_eq!(
        store.verify().await.unwrap().tail,
        TailStatus::Matches { id: 10 }
    );
    // The chain that is left is intact: only the tail file shows the cut.
    sql(dir.path(), "DELETE FROM audit WHERE id > 7");
    let report = store.verify().await.unwrap();
    assert!(!report.is_intact());
    assert_eq!(report.first_bad, None);
    assert_eq!(
        report.tail,
        TailStatus::Cut {
            last_id: 7,
            written_id: 10
        }
    );
    let text = report.tail.to_string();
    assert!(
        text.contains("the trail ends at row 7 but row 10 was written")
            && text.contains("rows were removed from the end"),
        "{text}"
    );
    // Every row gone.
    sql(dir.path(), "DELETE FROM audit");
    assert_eq!(
        store.verify().await.unwrap().tail,
        TailStatus::Cut {
            last_id: 0,
            written_id: 10
        }
    );
}

#[tokio::test]
async fn a_cut_tail_after_pruning_is_detected() {
    let (dir, store, _) = pruned_store().await;
    sql(dir.path(), "DELETE FROM audit WHERE id > 190");
    let report = store.verify().await.unwrap();
    assert_eq!(
        report.tail,
        TailStatus::Cut {
            last_id: 190,
            written_id: 200
        }
    );
}

#[tokio::test]
async fn a_database_replaced_by_an_older_copy_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 5, 10).await;
    let older = dir.path().join("older.sqlite3");
    sql(dir.path(), &format!("VACUUM INTO '{}'", older.display()));
    fill(&store, 5, 5, 10).await;
    close(store).await;
    let db = db(dir.path());
    for side in ["tasks.sqlite3-wal", "tasks.sqlite3-shm"] {
        let _ = std::fs::remove_file(db.with_file_name(side));
    }
    std::fs::rename(&older, &db).unwrap();
    let report = nl2sh_approvald::store::verify_path(&db).unwrap();
    assert_eq!(
        report.tail,
        TailStatus::Cut {
            last_id: 5,
            written_id: 10
        }
    );
    // A different row under the newest id: the hash gives it away.
    sql(
        dir.path(),
        "UPDATE audit SET row_sha256 = prev_sha256 WHERE id = 5",
    );
    std::fs::write(
        dir.path().join(TAIL_FILE),
        format!(
            "{{\"format\":\"nl2sh-audit-tail-v1\",\"id\":5,\"row_sha256\":\"{}\"}}\n",
            "a".repeat(64)
        ),
    )
    .unwrap();
    let report = nl2sh_approvald::store::verify_path(&db).unwrap();
    assert_eq!(report.tail, TailStatus::Differs { id: 5 });
}

#[tokio::test]
async fn reopening_a_cut_trail_keeps_the_break_on_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 10, 10).await;
    close(store).await;
    sql(dir.path(), "DELETE FROM audit WHERE id > 7");
    let store = Store::open(dir.path()).unwrap();
    // Before anything new is written, the tail file still tells.
    assert!(matches!(
        store.verify().await.unwrap().tail,
        TailStatus::Cut { .. }
    ));
    fill(&store, 10, 2, 10).await;
    assert_eq!(ids(dir.path()), [1, 2, 3, 4, 5, 6, 7, 11, 12]);
    let report = store.verify().await.unwrap();
    assert_eq!(report.tail, TailStatus::Matches { id: 12 });
    let bad = report.first_bad.expect("the gap is reported");
    assert_eq!(
        (bad.id, bad.problem),
        (
            11,
            ChainProblem::IdGap {
                first_missing: 8,
                last_missing: 10
            }
        )
    );
    assert!(bad.problem.to_string().contains("rows 8 to 10 are missing"));
}

#[tokio::test]
async fn a_removed_database_is_not_taken_for_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 10, 10).await;
    close(store).await;
    for name in ["tasks.sqlite3", "tasks.sqlite3-wal", "tasks.sqlite3-shm"] {
        let _ = std::fs::remove_file(dir.path().join("protocol").join(name));
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.verify().await.unwrap().tail,
        TailStatus::Cut {
            last_id: 0,
            written_id: 10
        }
    );
    fill(&store, 10, 1, 10).await;
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!(
        (bad.id, bad.problem),
        (
            11,
            ChainProblem::IdGap {
                first_missing: 1,
                last_missing: 10
            }
        )
    );
}

#[tokio::test]
async fn a_missing_tail_file_fails_only_a_database_that_keeps_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 5, 10).await;
    close(store).await;
    std::fs::remove_file(dir.path().join(TAIL_FILE)).unwrap();
    let report = nl2sh_approvald::store::verify_path(&db(dir.path())).unwrap();
    assert_eq!(report.tail, TailStatus::Missing);
    assert!(!report.is_intact());

    // The same database as an older build left it: no anchor table, version 1.
    sql(
        dir.path(),
        "DROP TABLE audit_anchor; PRAGMA user_version = 1;",
    );
    let report = nl2sh_approvald::store::verify_path(&db(dir.path())).unwrap();
    assert_eq!(report.tail, TailStatus::NotKept);
    assert!(report.is_intact(), "{report:?}");
    assert!(report.tail.to_string().contains("older build"));
}

#[tokio::test]
async fn a_malformed_tail_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 3, 10).await;
    std::fs::write(dir.path().join(TAIL_FILE), "{\"id\": 3}").unwrap();
    let report = store.verify().await.unwrap();
    assert!(
        matches!(report.tail, TailStatus::Malformed(_)),
        "{report:?}"
    );
    assert!(!report.is_intact());
}

#[tokio::test]
async fn the_tail_file_is_private_and_follows_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let tail = dir.path().join(TAIL_FILE);
    // Written at creation, before the first row.
    assert!(tail.exists());
    assert_eq!(
        std::fs::metadata(&tail).unwrap().permissions().mode() & 0o777,
        0o600
    );
    for n in 1..=3 {
        store.append(record(n, 10)).await.unwrap();
        // Written after the commit is acknowledged, before a flush is answered.
        store.flush().await.unwrap();
        let text = std::fs::read_to_string(&tail).unwrap();
        assert!(text.contains(&format!("\"id\":{n},")), "{text}");
    }
    assert!(!dir.path().join("protocol/audit-tail.json.tmp").exists());
}

#[tokio::test]
async fn verify_while_writing_and_pruning_never_sees_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store.set_limits(rows_limit(1000));
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..20_000 {
                store.append_nowait(record(i, 10)).await.unwrap();
                if i % 500 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            store.flush().await.unwrap();
        })
    };
    while !writer.is_finished() {
        let report = store.verify().await.unwrap();
        assert!(report.is_intact(), "{report:?}");
    }
    writer.await.unwrap();
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn a_database_from_before_retention_is_migrated_pruned_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    fill(&store, 0, 20_000, 200).await;
    close(store).await;
    // Make it what an older build left: schema 1, no anchor table, no auto-vacuum, no
    // tail file.
    sql(
        dir.path(),
        "DROP TABLE audit_anchor; PRAGMA user_version = 1; PRAGMA auto_vacuum = NONE; VACUUM;",
    );
    std::fs::remove_file(dir.path().join(TAIL_FILE)).unwrap();
    let conn = rusqlite::Connection::open(db(dir.path())).unwrap();
    let auto: i64 = conn
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .unwrap();
    assert_eq!(auto, 0);
    drop(conn);
    let before = disk_bytes(dir.path());

    let store = Store::open(dir.path()).unwrap();
    assert!(dir.path().join(TAIL_FILE).exists());
    store.set_limits(rows_limit(2000));
    store.settle().await.unwrap();
    let conn = rusqlite::Connection::open(db(dir.path())).unwrap();
    let (version, auto): (i64, i64) = conn
        .query_row(
            "SELECT * FROM pragma_user_version, pragma_auto_vacuum",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, auto), (SCHEMA_VERSION, 2));
    drop(conn);
    assert!(ids(dir.path()).len() <= 2000);
    let after = disk_bytes(dir.path());
    assert!(after < before / 5, "{before} -> {after}");
    let report = store.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.tail, TailStatus::Matches { id: 20_000 });
    // And it goes on from there.
    fill(&store, 20_000, 10, 10).await;
    assert!(store.verify().await.unwrap().is_intact());
}

fn read_only_call(call_id: u64) -> nl2sh_proto::channels::ActionSummary {
    let mut s = common::summary(call_id, RiskLevel::ReadOnly);
    s.confinement = Confinement::Sandbox;
    s.action = format!("stat /sdcard/DCIM/IMG_{call_id:05}.jpg");
    s
}

#[tokio::test]
async fn the_limits_come_from_the_configuration_file() {
    let rig = common::Rig::new().await;
    rig.write_config("audit_max_rows = 1000\n");
    for id in 1..=700u64 {
        let (decision, _) = rig.decide(read_only_call(id)).await;
        assert_eq!(decision, Decision::Allowed);
        rig.record(AuthorityRequest::Finished(CallResult {
            call_id: CallId(id),
            success: true,
            exit_code: Some(0),
            duration_ms: 2,
            summary: "ok".into(),
        }))
        .await;
    }
    let store = rig.authority.store();
    store.settle().await.unwrap();
    assert_eq!(
        store.limits(),
        Some(AuditLimits {
            max_rows: 1000,
            max_bytes: AuditLimits::default().max_bytes
        })
    );
    let rows = rig.rows().await;
    assert!(rows.len() <= 1000 && rows.len() > 900, "{}", rows.len());
    assert_eq!(rows.last().unwrap().record.call_id, 700);
    assert!(store.verify().await.unwrap().is_intact());

    // A changed file applies to the next decision.
    rig.write_config("audit_max_rows = 1000\naudit_max_bytes = 2097152\n");
    assert_eq!(rig.decide(read_only_call(701)).await.0, Decision::Allowed);
    assert_eq!(store.limits().map(|l| l.max_bytes), Some(2 * MIB));

    // A value below the minimum makes the file invalid: decisions fail closed, and the
    // last good limits stay.
    rig.write_config("audit_max_rows = 10\n");
    let (decision, reason) = rig.decide(read_only_call(702)).await;
    assert_eq!(decision, Decision::Refused);
    assert!(
        reason.contains("audit_max_rows must be at least 1000"),
        "{reason}"
    );
    assert_eq!(store.limits().map(|l| l.max_rows), Some(1000));
}
