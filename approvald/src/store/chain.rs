//! The hash chain: the canonical form of a row, the head new rows continue from, the
//! anchor of pruned rows, and verifying the chain against its tail file.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::Connection;
use sha2::{Digest, Sha256};

use super::record::AuditRecord;
use super::retention::Anchor;
use super::schema::{open_read_only, optional_columns, schema_version, TAIL_SINCE_VERSION};
use super::tail::{self, TailStatus};
use super::StoreError;

/// `prev_sha256` of the first row.
pub const GENESIS_SHA256: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// First bytes hashed for every row; changes if the canonical form ever does.
pub(crate) const ROW_DOMAIN: &[u8] = b"nl2sh-audit-row-v1\n";

/// Columns covered by `row_sha256`, in the order they are hashed, inserted and selected.
pub const HASHED_COLUMNS: [&str; 18] = [
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
];

/// Columns hashed after [`HASHED_COLUMNS`], each only when it is not NULL: columns added
/// after the chain's form was fixed, so that rows written before them (where they are
/// NULL) hash exactly as they did.
pub const OPTIONAL_HASHED_COLUMNS: [&str; 3] = ["task", "after_reading", "client"];

/// Result of walking the chain and comparing its end with the tail file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Rows read, up to and including the first bad one.
    pub rows_checked: u64,
    /// The first row whose chain check failed; `None` when the chain is intact.
    pub first_bad: Option<BadRow>,
    /// The last pruned row, which the chain starts from; `None` when nothing was pruned.
    pub anchor: Option<Anchor>,
    /// How the end of the trail compares with the tail file.
    pub tail: TailStatus,
}

impl VerifyReport {
    /// The chain is intact and nothing shows rows removed from its end.
    pub fn is_intact(&self) -> bool {
        self.first_bad.is_none() && self.tail.is_ok()
    }

    /// What is wrong, one line each: the first row whose check failed, and the tail
    /// file's finding when the end does not match. Empty when intact.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(bad) = &self.first_bad {
            problems.push(format!(
                "audit trail broken at row {}: {}",
                bad.id, bad.problem
            ));
        }
        if !self.tail.is_ok() {
            problems.push(format!("audit trail broken: {}", self.tail));
        }
        problems
    }

    /// The intact trail, in words: the rows verified, and from which anchor when older
    /// rows were pruned.
    pub fn intact_line(&self) -> String {
        let pruned = match &self.anchor {
            Some(a) => format!(
                "; rows 1 to {} were pruned by retention, and the chain is verified from the \
                 anchor they left",
                a.id
            ),
            None => String::new(),
        };
        format!(
            "audit trail intact: {} rows verified{pruned}",
            self.rows_checked
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    pub id: i64,
    pub problem: ChainProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChainProblem {
    /// The row's `prev_sha256` is not the hash of the row before it: a row was deleted,
    /// inserted or rewritten before this one.
    #[error(
        "prev_sha256 does not match the previous row (a row before it was removed or rewritten)"
    )]
    PrevMismatch,
    /// The row's content does not hash to its `row_sha256`: the row was edited.
    #[error("row_sha256 does not match the row's content (the row was edited)")]
    HashMismatch,
    /// A chain column is not 64 hex characters, or ids do not increase.
    #[error("the row's chain columns are malformed")]
    Malformed,
    /// The first row does not continue from the anchor (its `prev_sha256` is not the
    /// anchor's hash, or its id is not the next one).
    #[error(
        "it does not continue from the anchor, the record of the last pruned row (the \
         anchor or this row was edited, or rows after the anchor were removed)"
    )]
    AnchorMismatch,
    /// `audit_anchor` holds more than one row, or values of the wrong kind.
    #[error("the anchor of the pruned rows (table audit_anchor) is malformed")]
    AnchorMalformed,
    /// The chain links across missing ids: when approvald opened the trail, it did not
    /// match its tail file (rows cut from the end, or the database replaced), and the
    /// writer continued after a gap so the break stays on record.
    #[error("{}", gap_text(*first_missing, *last_missing))]
    IdGap {
        first_missing: i64,
        last_missing: i64,
    },
}

pub(crate) fn gap_text(first: i64, last: i64) -> String {
    let rows = if first == last {
        format!("row {first} is")
    } else {
        format!("rows {first} to {last} are")
    };
    format!(
        "{rows} missing before it: when approvald reopened the trail it did not match its \
         tail file (rows removed from the end, the database replaced, or the newest commits \
         lost in a power failure), and it continued after a gap"
    )
}

/// The chain position new rows continue from.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub(crate) id: i64,
    pub(crate) sha256: String,
}

impl Head {
    pub(crate) fn genesis() -> Self {
        Head {
            id: 0,
            sha256: GENESIS_SHA256.to_owned(),
        }
    }
}

/// The values of [`HASHED_COLUMNS`] and then [`OPTIONAL_HASHED_COLUMNS`] for a new row,
/// in order.
pub(crate) fn hashed_values(id: i64, time: &str, r: &AuditRecord, prev: &str) -> Vec<Value> {
    let text = |s: &Option<String>| s.clone().map_or(Value::Null, Value::Text);
    let int = |i: Option<i64>| i.map_or(Value::Null, Value::Integer);
    let flag = |b: Option<bool>| int(b.map(i64::from));
    let stored = |t: Option<&'static str>| t.map_or(Value::Null, |t| Value::Text(t.to_owned()));
    vec![
        Value::Integer(id),
        Value::Text(time.to_owned()),
        Value::Integer(r.call_id),
        Value::Text(r.kind.as_str().to_owned()),
        stored(r.origin.map(|v| v.as_str())),
        text(&r.tool),
        text(&r.action),
        text(&r.arguments_sha256),
        stored(r.risk.map(|v| v.as_str())),
        flag(r.requires_root),
        stored(r.identity.map(|v| v.as_str())),
        stored(r.decision.map(|v| v.as_str())),
        text(&r.reason),
        flag(r.success),
        int(r.exit_code),
        int(r.duration_ms),
        text(&r.summary),
        Value::Text(prev.to_owned()),
        text(&r.task),
        text(&r.after_reading),
        text(&r.client),
    ]
}

/// The bytes `row_sha256` is computed over: [`ROW_DOMAIN`], then for each column of
/// [`HASHED_COLUMNS`] in order its name, `=`, and its value as a type byte followed by
/// `n` (NULL, nothing more), `i` + 8-byte big-endian two's complement, `r` + 8-byte
/// big-endian IEEE-754 bits, `t`/`b` + 8-byte big-endian length + the UTF-8/blob bytes;
/// then each column of [`OPTIONAL_HASHED_COLUMNS`] the same way, but only when it is not
/// NULL (a NULL one adds nothing, so rows from before it hash as they did).
/// Every value delimits itself and names its column, so distinct rows never serialise
/// alike.
pub fn canonical_row(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(ROW_DOMAIN);
    let fixed = HASHED_COLUMNS.len();
    let names = HASHED_COLUMNS.iter().chain(OPTIONAL_HASHED_COLUMNS.iter());
    for (i, (name, value)) in names.zip(values).enumerate() {
        if i >= fixed && *value == Value::Null {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        match value {
            Value::Null => out.push(b'n'),
            Value::Integer(i) => {
                out.push(b'i');
                out.extend_from_slice(&i.to_be_bytes());
            }
            Value::Real(f) => {
                out.push(b'r');
                out.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            Value::Text(s) => {
                out.push(b't');
                out.extend_from_slice(&(s.len() as u64).to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(b'b');
                out.extend_from_slice(&(b.len() as u64).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

pub(crate) fn canonical_row_sha256(values: &[Value]) -> String {
    hex::encode(Sha256::digest(canonical_row(values)))
}

pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Text of a value that should be text; anything else reads as "" (it then matches no
/// hash, so the chain breaks there instead of the store failing).
pub(crate) fn text_or_empty(v: Value) -> String {
    match v {
        Value::Text(s) => s,
        _ => String::new(),
    }
}

/// The newest row, else the anchor (everything pruned), else the start of the chain.
pub(crate) fn read_head(conn: &Connection, anchor: &AnchorRead) -> Result<Head, StoreError> {
    let mut stmt = conn.prepare("SELECT id, row_sha256 FROM audit ORDER BY id DESC LIMIT 1")?;
    let mut rows = stmt.query([])?;
    if let Some(row) = rows.next()? {
        return Ok(Head {
            id: row.get(0)?,
            sha256: text_or_empty(row.get(1)?),
        });
    }
    Ok(match anchor.one() {
        Some(a) => Head {
            id: a.id,
            sha256: a.row_sha256.clone(),
        },
        None => Head::genesis(),
    })
}

/// What `audit_anchor` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnchorRead {
    /// Nothing was pruned (or the database predates the table).
    None,
    One(Anchor),
    Malformed,
}

impl AnchorRead {
    pub(crate) fn one(&self) -> Option<&Anchor> {
        match self {
            AnchorRead::One(a) => Some(a),
            _ => None,
        }
    }
}

pub(crate) fn read_anchor(conn: &Connection) -> Result<AnchorRead, StoreError> {
    let exists: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit_anchor'",
        [],
        |r| r.get(0),
    )?;
    if exists == 0 {
        return Ok(AnchorRead::None);
    }
    let mut stmt = conn.prepare("SELECT pruned_id, pruned_sha256 FROM audit_anchor LIMIT 2")?;
    let found: Vec<(Value, Value)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(match found.as_slice() {
        [] => AnchorRead::None,
        [(Value::Integer(id), Value::Text(sha))] if *id >= 0 && is_sha256_hex(sha) => {
            AnchorRead::One(Anchor {
                id: *id,
                row_sha256: sha.clone(),
            })
        }
        _ => AnchorRead::Malformed,
    })
}

/// Walk the whole chain of the database at `path` (read-only) from its anchor, report the
/// first row that breaks it, and compare its end with the tail file beside it. Also what
/// `protocol audit --verify` runs.
pub fn verify_path(path: &Path) -> Result<VerifyReport, StoreError> {
    // The tail file first: a commit between the two reads only puts the database ahead.
    let tail = match tail::read(&tail::tail_path(path)) {
        Ok(t) => Ok(t),
        Err(tail::TailError::Malformed { why, .. }) => Err(why),
        Err(e) => return Err(e.into()),
    };
    let mut conn = open_read_only(path)?;
    // One snapshot for the anchor, the rows and the end: the writer may prune meanwhile.
    let tx = conn.transaction()?;
    let version = schema_version(&tx)?;
    let anchor = read_anchor(&tx)?;
    let (rows_checked, first_bad) = walk_chain(&tx, &anchor)?;
    let tail = match tail {
        Ok(t) => tail::check(&tx, t.as_ref(), version >= TAIL_SINCE_VERSION, anchor.one())?,
        Err(why) => TailStatus::Malformed(why),
    };
    Ok(VerifyReport {
        rows_checked,
        first_bad,
        anchor: anchor.one().cloned(),
        tail,
    })
}

/// Rows read and the first bad one, starting from `anchor`.
pub(crate) fn walk_chain(
    conn: &Connection,
    anchor: &AnchorRead,
) -> Result<(u64, Option<BadRow>), StoreError> {
    let (mut expected_prev, mut expected_id) = match anchor {
        AnchorRead::None => (GENESIS_SHA256.to_owned(), 1),
        AnchorRead::One(a) => (a.row_sha256.clone(), a.id.saturating_add(1)),
        AnchorRead::Malformed => {
            let first: Option<i64> =
                conn.query_row("SELECT min(id) FROM audit", [], |r| r.get(0))?;
            let bad = BadRow {
                id: first.unwrap_or(0),
                problem: ChainProblem::AnchorMalformed,
            };
            return Ok((0, Some(bad)));
        }
    };
    let anchored = matches!(anchor, AnchorRead::One(_));
    let sql = format!(
        "SELECT {}, {}, row_sha256 FROM audit ORDER BY id",
        HASHED_COLUMNS.join(", "),
        optional_columns(conn)?.join(", ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut last_id = i64::MIN;
    let mut checked = 0u64;
    let fixed = HASHED_COLUMNS.len();
    let n = fixed + OPTIONAL_HASHED_COLUMNS.len();
    while let Some(row) = rows.next()? {
        checked += 1;
        let first = checked == 1;
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(row.get::<_, Value>(i)?);
        }
        let stored: Value = row.get(n)?;
        // `id` is the INTEGER PRIMARY KEY (the rowid), so it is always an integer.
        let id: i64 = row.get(0)?;
        let bad = |problem| Ok((checked, Some(BadRow { id, problem })));
        let (Value::Text(prev), Value::Text(stored)) = (&values[fixed - 1], &stored) else {
            return bad(ChainProblem::Malformed);
        };
        if !is_sha256_hex(prev) || !is_sha256_hex(stored) || id <= last_id {
            return bad(ChainProblem::Malformed);
        }
        if *prev != expected_prev {
            return bad(if first && anchored {
                ChainProblem::AnchorMismatch
            } else {
                ChainProblem::PrevMismatch
            });
        }
        if canonical_row_sha256(&values) != *stored {
            return bad(ChainProblem::HashMismatch);
        }
        if id != expected_id {
            return bad(if first && anchored {
                ChainProblem::AnchorMismatch
            } else if id < expected_id {
                ChainProblem::Malformed
            } else {
                ChainProblem::IdGap {
                    first_missing: expected_id,
                    last_missing: id - 1,
                }
            });
        }
        expected_prev = stored.clone();
        expected_id = id.saturating_add(1);
        last_id = id;
    }
    Ok((checked, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_separates_null_empty_and_neighbours() {
        let mut a = vec![Value::Null; HASHED_COLUMNS.len()];
        let mut b = a.clone();
        b[4] = Value::Text(String::new());
        assert_ne!(canonical_row(&a), canonical_row(&b));
        // Moving text across a column boundary changes the bytes.
        a[4] = Value::Text("ab".into());
        a[5] = Value::Text("c".into());
        b[4] = Value::Text("a".into());
        b[5] = Value::Text("bc".into());
        assert_ne!(canonical_row(&a), canonical_row(&b));
        // An integer and its text spelling differ.
        a[2] = Value::Integer(1);
        b = a.clone();
        b[2] = Value::Text("1".into());
        assert_ne!(canonical_row(&a), canonical_row(&b));
    }

    #[test]
    fn a_null_optional_column_hashes_as_before_it_existed() {
        let mut old = vec![Value::Null; HASHED_COLUMNS.len()];
        old[0] = Value::Integer(1);
        old[17] = Value::Text(GENESIS_SHA256.into());
        let mut new = old.clone();
        new.push(Value::Null);
        assert_eq!(canonical_row(&old), canonical_row(&new));
        let with_task = |t: &str| {
            let mut v = old.clone();
            v.push(Value::Text(t.into()));
            canonical_row(&v)
        };
        assert_ne!(with_task(""), canonical_row(&old));
        assert_ne!(with_task("a"), with_task("b"));
        // The task cannot pose as the end of another column.
        let mut shifted = old.clone();
        shifted[17] = Value::Text(format!("{GENESIS_SHA256}x"));
        assert_ne!(with_task("x"), canonical_row(&shifted));
    }

    #[test]
    fn genesis_is_64_zeros() {
        assert!(is_sha256_hex(GENESIS_SHA256));
        assert!(GENESIS_SHA256.bytes().all(|b| b == b'0'));
    }
}
