//! The audit store: files and modes, schema, group commit, and tamper detection.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use nl2sh_approvald::store::{
    AuditKind, AuditRecord, ChainProblem, Store, StoreError, DB_FILE, GENESIS_SHA256,
    SCHEMA_VERSION,
};
use nl2sh_proto::private_dir::PrivateDirError;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn record(call_id: i64) -> AuditRecord {
    let mut r = AuditRecord::new(AuditKind::Decision, call_id);
    r.tool = Some("shell".into());
    r.action = Some(format!("echo {call_id}"));
    r.decision = Some(nl2sh_proto::channels::Decision::Allowed);
    r.requires_root = Some(false);
    r
}

async fn store_with(rows: i64) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..rows {
        store.append(record(i)).await.unwrap();
    }
    (dir, store)
}

#[tokio::test]
async fn creates_schema_with_private_modes() {
    let (dir, store) = store_with(1).await;
    let db = dir.path().join(DB_FILE);
    assert_eq!(store.path(), db);
    assert_eq!(mode(&dir.path().join("protocol")), 0o700);
    assert_eq!(mode(&db), 0o600);
    // The store is open and has written, so the WAL and its index exist; SQLite gives
    // them the database's mode whatever this test process's umask is.
    let wal = dir.path().join("protocol/tasks.sqlite3-wal");
    let shm = dir.path().join("protocol/tasks.sqlite3-shm");
    assert_eq!(mode(&wal), 0o600);
    assert_eq!(mode(&shm), 0o600);

    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('audit') ORDER BY cid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        columns,
        [
            "id",
            "time",
            "call_id",
            "kind",
            "origin",
            "tool",
            "action",
            "arguments_sha256",
            "risk",
            "requires_root",
            "identity",
            "decision",
            "reason",
            "success",
            "exit_code",
            "duration_ms",
            "summary",
            "prev_sha256",
            "row_sha256",
            "task",
            "after_reading",
            "client"
        ]
    );
    let rows = store.recent(10).await.unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, 1);
    assert_eq!(row.prev_sha256, GENESIS_SHA256);
    assert_eq!(row.row_sha256.len(), 64);
    assert_eq!(row.record, record(0));
    // RFC 3339 UTC with milliseconds: 2025-01-02T03:04:05.678Z
    let t = row.time.as_bytes();
    assert_eq!(t.len(), 24, "{}", row.time);
    assert_eq!(
        (t[4], t[7], t[10], t[19], t[23]),
        (b'-', b'-', b'T', b'.', b'Z')
    );
}

#[tokio::test]
async fn a_wider_existing_database_is_tightened() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let db = dir.path().join(DB_FILE);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(mode(&db), 0o600);
    store.append(record(1)).await.unwrap();
}

#[tokio::test]
async fn a_loose_protocol_directory_or_a_symlinked_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let protocol = dir.path().join("protocol");
    std::fs::create_dir(&protocol).unwrap();
    std::fs::set_permissions(&protocol, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::PrivateDir(PrivateDirError::WrongMode { .. }))
    ));
    std::fs::set_permissions(&protocol, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join(DB_FILE)).unwrap();
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::Io { .. })
    ));
    assert!(!dir.path().join("elsewhere").exists());
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::NewerSchema { .. })
    ));
}

#[tokio::test]
async fn concurrent_appends_share_commits_and_keep_one_valid_chain() {
    let (_dir, store) = store_with(0).await;
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..1000)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.append(record(i)).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.records, 1000);
    assert!(
        stats.batches < 1000,
        "every append had its own commit: {stats:?}"
    );
    let rows = store.recent(5000).await.unwrap();
    assert_eq!(rows.len(), 1000);
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    assert_eq!(ids, (1..=1000).collect::<Vec<_>>());
    let mut calls: Vec<i64> = rows.iter().map(|r| r.record.call_id).collect();
    calls.sort_unstable();
    assert_eq!(calls, (0..1000).collect::<Vec<_>>());
    for pair in rows.windows(2) {
        assert_eq!(pair[1].prev_sha256, pair[0].row_sha256);
    }
    let report = store.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 1000);
}

#[tokio::test]
async fn queued_appends_commit_in_queue_order() {
    let (_dir, store) = store_with(0).await;
    for i in 0..1000 {
        store.append_nowait(record(i)).await.unwrap();
    }
    store.flush().await.unwrap();
    let rows = store.recent(1000).await.unwrap();
    let calls: Vec<i64> = rows.iter().map(|r| r.record.call_id).collect();
    assert_eq!(calls, (0..1000).collect::<Vec<_>>());
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..3 {
        store.append(record(i)).await.unwrap();
    }
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    for i in 3..6 {
        store.append(record(i)).await.unwrap();
    }
    let rows = store.recent(10).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    let report = store.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn verify_finds_an_edited_row() {
    let (dir, store) = store_with(10).await;
    assert!(store.verify().await.unwrap().is_intact());
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute("UPDATE audit SET action = 'rm -rf /' WHERE id = 4", [])
        .unwrap();
    let report = store.verify().await.unwrap();
    let bad = report.first_bad.expect("edit not detected");
    assert_eq!((bad.id, bad.problem), (4, ChainProblem::HashMismatch));
    assert_eq!(report.rows_checked, 4);
}

#[tokio::test]
async fn verify_finds_a_changed_type() {
    let (dir, store) = store_with(5).await;
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    // Same bytes, different storage class (affinity leaves a blob alone).
    conn.execute(
        "UPDATE audit SET action = CAST(action AS BLOB) WHERE id = 3",
        [],
    )
    .unwrap();
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!(bad.id, 3);
}

#[tokio::test]
async fn verify_finds_a_deleted_row_in_the_middle() {
    let (dir, store) = store_with(10).await;
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute("DELETE FROM audit WHERE id = 6", []).unwrap();
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (7, ChainProblem::PrevMismatch));
}

#[tokio::test]
async fn verify_finds_a_deleted_first_row() {
    let (dir, store) = store_with(3).await;
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute("DELETE FROM audit WHERE id = 1", []).unwrap();
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (2, ChainProblem::PrevMismatch));
}

#[tokio::test]
async fn oversized_text_is_refused_before_queueing() {
    let (_dir, store) = store_with(0).await;
    let mut r = record(1);
    r.summary = Some("x".repeat(64 * 1024 + 1));
    assert!(matches!(
        store.append(r.clone()).await,
        Err(StoreError::TooLarge {
            field: "summary",
            ..
        })
    ));
    assert!(matches!(
        store.append_nowait(r).await,
        Err(StoreError::TooLarge { .. })
    ));
    store.flush().await.unwrap();
    assert!(store.recent(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_trail_from_before_tasks_verifies_and_migrates_with_its_hashes() {
    let (dir, store) = store_with(5).await;
    store.flush().await.unwrap();
    let stopped = store.writer_stopped();
    drop(store);
    stopped.wait().await;
    let db = dir.path().join(DB_FILE);
    // What version 3 left: no task, after_reading or client column, no tasks table
    // (versions 4 and 5 had some of them: the same migration adds what is missing).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP TABLE tasks; ALTER TABLE audit DROP COLUMN task; \
         ALTER TABLE audit DROP COLUMN after_reading; ALTER TABLE audit DROP COLUMN client; \
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    // A reader of this build (`audit --verify`, `audit`) reads it as it is.
    let report = nl2sh_approvald::store::verify_path(&db).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 5);
    let rows = nl2sh_approvald::store::recent_path(&db, 10).unwrap();
    assert!(rows.iter().all(|r| r.record.task.is_none()));

    let store = Store::open(dir.path()).unwrap();
    let mut r = record(5);
    r.task = Some("task-1".into());
    r.after_reading = Some(r#"["com.example.chat"]"#.into());
    r.client = Some("Codex 0.47.0".into());
    store.append(r.clone()).await.unwrap();
    let report = store.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 6);
    let rows = store.recent(10).await.unwrap();
    assert_eq!(rows[5].record, r);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let tasks: i64 = conn
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tasks, 0);
    // The note is in the chain: changed, the row no longer verifies.
    conn.execute_batch(r#"UPDATE audit SET after_reading = '["com.other"]' WHERE id = 6"#)
        .unwrap();
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (6, ChainProblem::HashMismatch));
    // And so is the client's name: a row claiming another client no longer verifies.
    conn.execute_batch(
        r#"UPDATE audit SET after_reading = '["com.example.chat"]', client = 'Claude 1' WHERE id = 6"#,
    )
    .unwrap();
    let bad = store.verify().await.unwrap().first_bad.unwrap();
    assert_eq!((bad.id, bad.problem), (6, ChainProblem::HashMismatch));
    conn.execute_batch("UPDATE audit SET client = 'Codex 0.47.0' WHERE id = 6")
        .unwrap();
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn secrets_never_reach_an_audit_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let token = "audit-token-0123456789abcdef0123456789";
    store.redact_audit(&[nl2sh_proto::secret::Secret::new(token.into())]);
    let mut r = record(1);
    r.action = Some(format!(
        "curl -H 'Authorization: Bearer {token}' http://127.0.0.1"
    ));
    r.reason = Some(format!("quoted {token} twice: {token}"));
    r.task = Some("task-1".into());
    store.append(r.clone()).await.unwrap();
    store.append_nowait(r.clone()).await.unwrap();
    store.append_all(vec![r]).await.unwrap();
    store.flush().await.unwrap();
    let rows = store.recent(10).await.unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let action = row.record.action.as_deref().unwrap();
        assert!(action.contains("Bearer [REDACTED]"), "{action}");
        assert!(!row.record.reason.as_deref().unwrap().contains(token));
    }
    assert!(store.verify().await.unwrap().is_intact());
    drop(store);
    for file in ["tasks.sqlite3", "tasks.sqlite3-wal"] {
        let path = dir.path().join("protocol").join(file);
        if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "the token is in {}",
                path.display()
            );
        }
    }
}

/// Journal entries as approvald leaves them when it dies after answering for them and
/// before its writer commits them.
fn journal_bytes(entries: impl IntoIterator<Item = (u64, i64, AuditRecord)>) -> Vec<u8> {
    use nl2sh_approvald::store::journal::Entry;
    use nl2sh_proto::journal::encode_entry as encode;
    let mut bytes = Vec::new();
    for (seq, time_ms, record) in entries {
        bytes.extend(
            encode(&Entry {
                seq,
                time_ms,
                record,
            })
            .unwrap(),
        );
    }
    bytes
}

#[tokio::test]
async fn rows_journalled_but_never_committed_are_stored_once_at_the_next_start() {
    use nl2sh_approvald::store::journal::JOURNAL_FILE;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join(JOURNAL_FILE);
    {
        let store = Store::open(dir.path()).unwrap();
        store
            .append_durable(vec![record(1), record(2), record(3)])
            .await
            .unwrap();
        // The journal holds them before any commit, privately.
        assert_eq!(mode(&journal), 0o600);
        store.flush().await.unwrap();
        assert_eq!(store.recent(10).await.unwrap().len(), 3);
    }
    // approvald died: its journal still holds rows 1-3 (committed: the writer's last
    // batch recorded them as applied) and rows 4-5 that never reached the database,
    // then a torn entry (a power loss can leave one).
    let time_ms = 1_767_225_600_123; // 2026-01-01T00:00:00.123Z
    let mut bytes = journal_bytes([
        (1, time_ms, record(1)),
        (2, time_ms, record(2)),
        (3, time_ms, record(3)),
        (4, time_ms, record(4)),
        (5, time_ms + 1, record(5)),
    ]);
    let torn = journal_bytes([(6, time_ms, record(6))]);
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(&journal, bytes).unwrap();
    let db = dir.path().join(DB_FILE);
    assert_eq!(
        nl2sh_approvald::store::journal_pending(&db).unwrap().len(),
        2
    );

    let store = Store::open(dir.path()).unwrap();
    let rows = store.recent(10).await.unwrap();
    let calls: Vec<i64> = rows.iter().map(|r| r.record.call_id).collect();
    assert_eq!(calls, vec![1, 2, 3, 4, 5], "each row once, in order");
    assert_eq!(
        rows[3].time, "2026-01-01T00:00:00.123Z",
        "the time it was answered"
    );
    assert_eq!(rows[4].time, "2026-01-01T00:00:00.124Z");
    assert!(store.verify().await.unwrap().is_intact());
    assert_eq!(
        nl2sh_approvald::store::journal_pending(&db).unwrap().len(),
        0
    );
    // New rows continue after the replayed ones, and a second start replays nothing.
    store.append_durable(vec![record(7)]).await.unwrap();
    store.flush().await.unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    let calls: Vec<i64> = store
        .recent(10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.record.call_id)
        .collect();
    assert_eq!(calls, vec![1, 2, 3, 4, 5, 7]);
    assert!(store.verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn a_clean_stop_leaves_no_journal_and_durable_rows_are_redacted_before_it() {
    use nl2sh_approvald::store::journal::JOURNAL_FILE;
    use nl2sh_proto::secret::Secret;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let token = "journal-secret-0123456789abcdef0123456789";
    store.redact_audit(&[Secret::new(token.to_owned())]);
    let mut r = record(1);
    r.action = Some(format!("echo {token}"));
    store.append_durable(vec![r]).await.unwrap();
    let journalled = std::fs::read(dir.path().join(JOURNAL_FILE)).unwrap();
    assert!(!String::from_utf8_lossy(&journalled).contains(token));
    store.flush().await.unwrap();
    store.close_journal().await;
    assert!(!dir.path().join(JOURNAL_FILE).exists());
    let rows = store.recent(10).await.unwrap();
    assert!(!rows[0].record.action.as_deref().unwrap().contains(token));
}

/// `writer_stopped` resolves once the last handle is gone and the writer has closed the
/// database, not before: tests and tools wait on it instead of sleeping.
#[tokio::test]
async fn the_writer_stops_after_the_last_handle_and_says_so() {
    let (dir, store) = store_with(3).await;
    let tasks = store.tasks(&[]).unwrap();
    let stopped = store.writer_stopped();
    store.flush().await.unwrap();
    let wal = dir.path().join(DB_FILE).with_extension("sqlite3-wal");
    assert!(wal.exists(), "no write-ahead log while the store is open");
    drop(store);
    // A task store handle still holds the queue: the writer keeps running.
    let early = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        stopped.clone().wait(),
    )
    .await;
    assert!(early.is_err(), "the writer stopped while a handle remained");
    drop(tasks);
    stopped.wait().await;
    // Closed: the last connection to a WAL database checkpoints and removes the log.
    let wal = dir.path().join(DB_FILE).with_extension("sqlite3-wal");
    assert!(!wal.exists(), "{} is still there", wal.display());
}
