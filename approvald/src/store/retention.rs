//! Retention: how much of the audit trail is kept (`audit_max_rows`, `audit_max_bytes`),
//! and pruning the oldest rows to stay within that.
//!
//! * Pruning runs on the writer thread, inside the transaction of a batch (or, to catch
//!   up after a limit was lowered, in small transactions while the queue is empty), so it
//!   costs the calls nothing. It deletes the oldest rows and records the last deleted
//!   row's id and hash in `audit_anchor` in the same transaction, so the chain stays
//!   verifiable from the anchor.
//! * It prunes only once a limit is passed, and then down to a little below it (1/64 of
//!   the rows, 1/16 of the bytes), so a quiet device does not rewrite the oldest page on
//!   every call.
//! * Bytes: `audit_max_bytes` covers the database file and its `-wal`. The pages in use
//!   are kept under the limit less room for the WAL ([`AuditLimits::wal_budget`], where it
//!   is checkpointed and cut back) and for free pages waiting for reuse
//!   ([`AuditLimits::free_budget`], beyond which they are given back to the file system
//!   with `incremental_vacuum`). Counting pages is two header reads per batch. The task
//!   store shares the file under limits of its own; its pages (as it estimates them) are
//!   left out.
//! * One transaction's pages pass through the WAL before they reach the database, so a
//!   batch is capped to a quarter of the WAL's share ([`batch_rows`]): under the default
//!   limits some 2,600 ordinary rows (a burst; a call is two rows), under a few MiB a few
//!   hundred. A transaction prunes at most twice its batch, so it always keeps up with its
//!   own growth, and catching up after a lowered limit holds up a waiting batch only
//!   briefly.

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, Transaction};

use super::MAX_BATCH;

// The keys' defaults and minimums are part of the configuration schema.
pub use nl2sh_proto::config::{
    DEFAULT_AUDIT_MAX_BYTES, DEFAULT_AUDIT_MAX_ROWS, MIN_AUDIT_MAX_BYTES, MIN_AUDIT_MAX_ROWS,
};

/// Fewest rows a batch may be cut to by [`batch_rows`].
const MIN_BATCH_ROWS: usize = 64;

/// The WAL is checkpointed (and cut back) well before it reaches this.
const MAX_WAL_BUDGET: u64 = 4 * 1024 * 1024;
/// Free pages kept for reuse at most.
const MAX_FREE_BUDGET: u64 = 2 * 1024 * 1024;

/// How much of the audit trail is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditLimits {
    /// Rows kept at most (decision and outcome rows alike).
    pub max_rows: u64,
    /// Bytes of the database file and its WAL at most (the WAL can pass its share for a
    /// moment during a burst, until its next checkpoint).
    pub max_bytes: u64,
}

impl Default for AuditLimits {
    fn default() -> Self {
        Self {
            max_rows: DEFAULT_AUDIT_MAX_ROWS,
            max_bytes: DEFAULT_AUDIT_MAX_BYTES,
        }
    }
}

impl AuditLimits {
    /// The WAL's share of `max_bytes`.
    pub fn wal_budget(&self) -> u64 {
        (self.max_bytes / 8).min(MAX_WAL_BUDGET)
    }

    /// The share of `max_bytes` free pages may hold before they are released.
    pub fn free_budget(&self) -> u64 {
        (self.max_bytes / 16).min(MAX_FREE_BUDGET)
    }

    /// Bytes of pages in use that the trail is kept under.
    pub fn used_budget(&self) -> u64 {
        self.max_bytes
            .saturating_sub(self.wal_budget())
            .saturating_sub(self.free_budget())
    }

    /// `wal_autocheckpoint` in pages: half the WAL's share, leaving the other half for
    /// the transaction that passes it.
    pub(super) fn wal_autocheckpoint_pages(&self, page_size: u64) -> i64 {
        let pages = self.wal_budget() / 2 / page_size.max(1);
        i64::try_from(pages.max(16)).unwrap_or(i64::MAX)
    }

    /// `journal_size_limit`: the WAL is cut back to this after a checkpoint resets it.
    pub(super) fn journal_size_limit(&self) -> i64 {
        i64::try_from(self.wal_budget() / 2).unwrap_or(i64::MAX)
    }
}

/// Records one transaction takes at most under `limits`, for rows of about `row_bytes`.
pub fn batch_rows(limits: &AuditLimits, row_bytes: u64) -> usize {
    let rows = limits.wal_budget() / 4 / row_bytes.max(64);
    usize::try_from(rows)
        .unwrap_or(MAX_BATCH)
        .clamp(MIN_BATCH_ROWS, MAX_BATCH)
}

/// How many of the oldest rows to prune when the trail holds `rows` rows in `used_bytes`
/// of pages: none while within both limits; once past one, enough to get a little
/// below it. Never more than `rows - 1`: the newest row always stays.
pub fn rows_to_prune(rows: u64, used_bytes: u64, limits: &AuditLimits) -> u64 {
    let mut n = 0;
    if rows > limits.max_rows {
        let low_water = limits.max_rows - limits.max_rows / 64;
        n = rows - low_water;
    }
    let budget = limits.used_budget();
    if used_bytes > budget && rows > 0 {
        let low_water = budget - budget / 16;
        // Rows in proportion to the bytes to free, rounded up (u128: no overflow).
        let excess = u128::from(used_bytes - low_water);
        let by_bytes = (excess * u128::from(rows)).div_ceil(u128::from(used_bytes));
        n = n.max(u64::try_from(by_bytes).unwrap_or(u64::MAX));
    }
    n.min(rows.saturating_sub(1))
}

/// The row the chain continues from after rows were pruned: the last pruned row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// Id of the last pruned row; the first remaining row has the next id.
    pub id: i64,
    /// Its `row_sha256`: the first remaining row's `prev_sha256`.
    pub row_sha256: String,
}

/// What one transaction pruned.
#[derive(Debug)]
pub(super) struct Pruned {
    pub rows: u64,
    /// More was due than one transaction prunes.
    pub more: bool,
}

/// Bytes of the pages in use (`page_count - freelist_count`).
pub(super) fn used_bytes(tx: &Transaction<'_>, page_size: u64) -> rusqlite::Result<u64> {
    let pages: i64 = tx.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = tx.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    Ok(u64::try_from(pages.saturating_sub(free)).unwrap_or(0) * page_size)
}

/// Prune the oldest rows `limits` call for (at most `max`) and move the anchor to the
/// last of them, in `tx`. `rows` is how many rows the trail holds; `other_bytes` is what
/// the pages of other tables in the file (the task store, which has limits of its own)
/// take, left out of the trail's bytes. Also returns the bytes of pages in use by the
/// trail it measured before pruning.
pub(super) fn prune(
    tx: &Transaction<'_>,
    rows: u64,
    limits: &AuditLimits,
    page_size: u64,
    max: u64,
    other_bytes: u64,
) -> rusqlite::Result<(Option<Pruned>, u64)> {
    let used = used_bytes(tx, page_size)?.saturating_sub(other_bytes);
    let due = rows_to_prune(rows, used, limits);
    if due == 0 {
        return Ok((None, used));
    }
    let n = due.min(max.max(1));
    let Some(first) = tx.query_row("SELECT min(id) FROM audit", [], |r| {
        r.get::<_, Option<i64>>(0)
    })?
    else {
        return Ok((None, used));
    };
    // Ids are consecutive except where a break was found at open (see `Store::open`);
    // across such a gap this prunes fewer rows, and the next transaction goes on.
    let cutoff = first.saturating_add(i64::try_from(n).unwrap_or(i64::MAX) - 1);
    let last: Option<(i64, Value)> = tx
        .query_row(
            "SELECT id, row_sha256 FROM audit WHERE id <= ?1 ORDER BY id DESC LIMIT 1",
            [cutoff],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((id, row_sha256)) = last else {
        return Ok((None, used));
    };
    // A hash edited into another type makes a malformed anchor, which `verify` reports,
    // rather than a writer that can no longer commit.
    let row_sha256 = super::chain::text_or_empty(row_sha256);
    let deleted = tx.execute("DELETE FROM audit WHERE id <= ?1", [id])?;
    tx.execute(
        "INSERT INTO audit_anchor (one, pruned_id, pruned_sha256) VALUES (1, ?1, ?2) \
         ON CONFLICT (one) DO UPDATE SET pruned_id = excluded.pruned_id, \
         pruned_sha256 = excluded.pruned_sha256",
        rusqlite::params![id, row_sha256],
    )?;
    let pruned = Pruned {
        rows: deleted as u64,
        more: due > n,
    };
    Ok((Some(pruned), used))
}

/// Give free pages beyond [`AuditLimits::free_budget`] back to the file system (the file
/// shrinks at the next checkpoint). A database created before retention has no
/// auto-vacuum until it is rebuilt, and this does nothing there.
pub(super) fn release_free_pages(
    tx: &Transaction<'_>,
    limits: &AuditLimits,
    page_size: u64,
) -> rusqlite::Result<()> {
    let free: i64 = tx.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let free = u64::try_from(free).unwrap_or(0);
    let budget_pages = limits.free_budget() / page_size.max(1);
    if free <= budget_pages {
        return Ok(());
    }
    // Keep half the budget for the next batches to reuse rather than regrow the file.
    let release = i64::try_from(free - budget_pages / 2).unwrap_or(i64::MAX);
    // `pragma` steps to the end: incremental_vacuum frees one page per step.
    tx.pragma(None, "incremental_vacuum", release, |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn nothing_is_pruned_within_the_limits() {
        let l = AuditLimits::default();
        assert_eq!(rows_to_prune(0, 0, &l), 0);
        assert_eq!(rows_to_prune(l.max_rows, l.used_budget(), &l), 0);
    }

    #[test]
    fn past_the_row_limit_prunes_to_a_little_below_it() {
        let l = AuditLimits {
            max_rows: 6_400,
            max_bytes: 64 * MIB,
        };
        assert_eq!(rows_to_prune(6_401, MIB, &l), 101);
        assert_eq!(rows_to_prune(10_000, MIB, &l), 3_700);
    }

    #[test]
    fn past_the_byte_limit_prunes_in_proportion() {
        let l = AuditLimits {
            max_rows: 1_000_000,
            max_bytes: 16 * MIB,
        };
        let budget = l.used_budget();
        assert_eq!(budget, 16 * MIB - 2 * MIB - MIB);
        // Twice the budget: down to 15/16 of it, so 17/32 of the rows go.
        assert_eq!(rows_to_prune(10_000, 2 * budget, &l), 5_313);
        // Never the newest row.
        assert_eq!(rows_to_prune(3, u64::MAX / 2, &l), 2);
        assert_eq!(rows_to_prune(1, u64::MAX, &l), 0);
    }

    #[test]
    fn batches_fit_a_quarter_of_the_wal() {
        // The default limits leave ordinary batches alone…
        assert_eq!(batch_rows(&AuditLimits::default(), 256), MAX_BATCH);
        assert_eq!(batch_rows(&AuditLimits::default(), 400), 2621);
        // …a small byte limit cuts them down.
        let small = AuditLimits {
            max_rows: 1_000_000,
            max_bytes: 4 * MIB,
        };
        assert_eq!(batch_rows(&small, 512), 256);
        assert_eq!(batch_rows(&small, 1_000_000), MIN_BATCH_ROWS);
        assert_eq!(batch_rows(&small, 0), 2048);
    }

    #[test]
    fn budgets_fit_the_smallest_limit() {
        let l = AuditLimits {
            max_rows: MIN_AUDIT_MAX_ROWS,
            max_bytes: MIN_AUDIT_MAX_BYTES,
        };
        assert_eq!(l.wal_budget(), 128 * 1024);
        assert_eq!(l.free_budget(), 64 * 1024);
        assert_eq!(l.used_budget(), 832 * 1024);
        assert_eq!(l.wal_autocheckpoint_pages(4096), 16);
        let d = AuditLimits::default();
        assert_eq!(d.wal_budget(), 4 * MIB);
        assert_eq!(d.wal_autocheckpoint_pages(4096), 512);
    }
}
