//! The store's schema and its migrations (`PRAGMA user_version`), and the settings of
//! every connection to it.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::chain::OPTIONAL_HASHED_COLUMNS;
use super::StoreError;

/// `PRAGMA user_version` this build writes.
pub const SCHEMA_VERSION: i64 = 6;
/// The first schema version whose databases keep a tail file.
pub(crate) const TAIL_SINCE_VERSION: i64 = 2;

pub(crate) const SCHEMA_V1: &str = "
CREATE TABLE audit (
    id               INTEGER PRIMARY KEY,
    time             TEXT    NOT NULL,
    call_id          INTEGER NOT NULL,
    kind             TEXT    NOT NULL CHECK (kind IN ('decision', 'outcome')),
    origin           TEXT,
    tool             TEXT,
    action           TEXT,
    arguments_sha256 TEXT,
    risk             TEXT,
    requires_root    INTEGER,
    identity         TEXT,
    decision         TEXT,
    reason           TEXT,
    success          INTEGER,
    exit_code        INTEGER,
    duration_ms      INTEGER,
    summary          TEXT,
    prev_sha256      TEXT    NOT NULL,
    row_sha256       TEXT    NOT NULL
);
CREATE INDEX audit_call_id ON audit (call_id);
";

/// Version 3: rows of kind `call` (a read-only call the executor let run under approvald's
/// policy snapshot: its decision and its outcome in one row). SQLite cannot change a CHECK
/// constraint in place, so the table is rebuilt; every row is copied as it is (ids and
/// hashes unchanged), in the migration's one transaction.
pub(crate) const SCHEMA_V3: &str = "
CREATE TABLE audit_v3 (
    id               INTEGER PRIMARY KEY,
    time             TEXT    NOT NULL,
    call_id          INTEGER NOT NULL,
    kind             TEXT    NOT NULL CHECK (kind IN ('decision', 'outcome', 'call')),
    origin           TEXT,
    tool             TEXT,
    action           TEXT,
    arguments_sha256 TEXT,
    risk             TEXT,
    requires_root    INTEGER,
    identity         TEXT,
    decision         TEXT,
    reason           TEXT,
    success          INTEGER,
    exit_code        INTEGER,
    duration_ms      INTEGER,
    summary          TEXT,
    prev_sha256      TEXT    NOT NULL,
    row_sha256       TEXT    NOT NULL
);
INSERT INTO audit_v3 (id, time, call_id, kind, origin, tool, action, arguments_sha256,
    risk, requires_root, identity, decision, reason, success, exit_code, duration_ms,
    summary, prev_sha256, row_sha256)
  SELECT id, time, call_id, kind, origin, tool, action, arguments_sha256,
    risk, requires_root, identity, decision, reason, success, exit_code, duration_ms,
    summary, prev_sha256, row_sha256 FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v3 RENAME TO audit;
CREATE INDEX audit_call_id ON audit (call_id);
";

/// Version 4: the task store, and the delegated task an audit row's call belongs to
/// (`audit.task`, added by [`migrate`] when missing). `IF NOT EXISTS`: a database whose
/// version was set back by hand (tests make older databases so) may have them already.
pub(crate) const SCHEMA_V4_TASKS: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id          TEXT    PRIMARY KEY NOT NULL,
    context_id  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    updated_ms  INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    document    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_update ON tasks (updated_ms DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (context_id, updated_ms DESC, id DESC);
";

/// Version 2: the anchor of pruned rows. At most one row; none until something is pruned.
pub(crate) const SCHEMA_V2: &str = "
CREATE TABLE audit_anchor (
    one           INTEGER PRIMARY KEY CHECK (one = 1),
    pruned_id     INTEGER NOT NULL,
    pruned_sha256 TEXT    NOT NULL
);
";

pub(crate) fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

pub(crate) fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "trusted_schema", false)?;
    Ok(conn)
}

/// [`OPTIONAL_HASHED_COLUMNS`] as a query selects them: `NULL` for one a database from
/// before it does not have (read-only readers, such as `audit --verify`, do not migrate).
pub(crate) fn optional_columns(conn: &Connection) -> Result<Vec<&'static str>, StoreError> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('audit')")?;
    let present: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(OPTIONAL_HASHED_COLUMNS
        .iter()
        .map(|c| {
            if present.iter().any(|p| p == c) {
                *c
            } else {
                "NULL"
            }
        })
        .collect())
}

pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.busy_timeout(Duration::from_secs(5))?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Unsafe {
            path: path.to_owned(),
            why: format!("SQLite kept journal_mode {mode}; WAL is required"),
        });
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The store appends and rarely reads: a small page cache keeps approvald small.
    conn.pragma_update(None, "cache_size", -256)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "trusted_schema", false)?;
    Ok(())
}

pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found: version,
        });
    }
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    if version < 1 {
        tx.execute_batch(SCHEMA_V1)?;
    }
    if version < 2 {
        tx.execute_batch(SCHEMA_V2)?;
    }
    if version < 3 {
        tx.execute_batch(SCHEMA_V3)?;
    }
    // Each optional hashed column a database from before it lacks (`task` came with
    // version 4, `after_reading` with 5, `client` with 6).
    for (column, selected) in OPTIONAL_HASHED_COLUMNS.iter().zip(optional_columns(&tx)?) {
        if selected == "NULL" {
            tx.execute_batch(&format!("ALTER TABLE audit ADD COLUMN {column} TEXT"))?;
        }
    }
    if version < 4 {
        tx.execute_batch(SCHEMA_V4_TASKS)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    tracing::info!(path = %path.display(), from = version, to = SCHEMA_VERSION, "store database migrated");
    Ok(())
}
