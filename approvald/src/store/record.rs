//! The audit record: what one row says, its bounds, and the redaction of secrets from its
//! text; and reading rows back.

use std::path::Path;

use nl2sh_proto::channels::{CallOrigin, Decision, Identity, RiskLevel};
use nl2sh_proto::stored_text::StoredText;

use super::chain::HASHED_COLUMNS;
use super::redact::Redactor;
use super::schema::{open_read_only, optional_columns};
use super::StoreError;

/// Longest text a stored column may hold; a record with a longer one is refused.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// What one audit row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AuditKind {
    /// A decision, recorded before it is answered.
    Decision,
    /// How a decided call ended.
    Outcome,
    /// A read-only call the executor let run under approvald's policy snapshot: its
    /// decision (`allowed`) and its outcome in one row.
    Call,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Decision => "decision",
            AuditKind::Outcome => "outcome",
            AuditKind::Call => "call",
        }
    }
}

/// One row to append; the store adds `id`, `time` and the chain columns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    pub call_id: i64,
    pub kind: AuditKind,
    #[serde(with = "nl2sh_proto::stored_text::optional")]
    pub origin: Option<CallOrigin>,
    pub tool: Option<String>,
    pub action: Option<String>,
    pub arguments_sha256: Option<String>,
    #[serde(with = "nl2sh_proto::stored_text::optional")]
    pub risk: Option<RiskLevel>,
    pub requires_root: Option<bool>,
    #[serde(with = "nl2sh_proto::stored_text::optional")]
    pub identity: Option<Identity>,
    #[serde(with = "nl2sh_proto::stored_text::optional")]
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    pub success: Option<bool>,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<i64>,
    pub summary: Option<String>,
    /// The delegated task the call is a step of (`ActionSummary.task`).
    pub task: Option<String>,
}

impl AuditRecord {
    /// A record of `kind` for `call_id` with every other column empty.
    pub fn new(kind: AuditKind, call_id: i64) -> Self {
        Self {
            call_id,
            kind,
            origin: None,
            tool: None,
            action: None,
            arguments_sha256: None,
            risk: None,
            requires_root: None,
            identity: None,
            decision: None,
            reason: None,
            success: None,
            exit_code: None,
            duration_ms: None,
            summary: None,
            task: None,
        }
    }

    /// Remove the redactor's secrets from every text a caller or the model could have
    /// put a secret in.
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        if redactor.is_empty() {
            return;
        }
        for text in [
            &mut self.tool,
            &mut self.action,
            &mut self.reason,
            &mut self.summary,
            &mut self.task,
        ]
        .into_iter()
        .flatten()
        {
            redactor.redact_text(text);
        }
    }

    pub(crate) fn check_bounds(&self) -> Result<(), StoreError> {
        let texts = [
            ("tool", &self.tool),
            ("action", &self.action),
            ("arguments_sha256", &self.arguments_sha256),
            ("reason", &self.reason),
            ("summary", &self.summary),
            ("task", &self.task),
        ];
        for (field, text) in texts {
            if let Some(text) = text {
                if text.len() > MAX_TEXT_BYTES {
                    return Err(StoreError::TooLarge {
                        field,
                        len: text.len(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// One stored row, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub time: String,
    pub record: AuditRecord,
    pub prev_sha256: String,
    pub row_sha256: String,
}

/// The last `limit` rows of the database at `path`, oldest first.
pub fn recent_path(path: &Path, limit: usize) -> Result<Vec<AuditRow>, StoreError> {
    let conn = open_read_only(path)?;
    let columns = HASHED_COLUMNS.join(", ");
    let optional = optional_columns(&conn)?.join(", ");
    let sql = format!(
        "SELECT * FROM (SELECT {columns}, row_sha256, {optional} FROM audit \
         ORDER BY id DESC LIMIT ?1) ORDER BY id"
    );
    let mut stmt = conn.prepare(&sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map([limit], |row| {
        let kind: String = row.get(3)?;
        let kind = match kind.as_str() {
            "decision" => AuditKind::Decision,
            "call" => AuditKind::Call,
            _ => AuditKind::Outcome,
        };
        Ok(AuditRow {
            id: row.get(0)?,
            time: row.get(1)?,
            record: AuditRecord {
                call_id: row.get(2)?,
                kind,
                origin: stored(row.get(4)?),
                tool: row.get(5)?,
                action: row.get(6)?,
                arguments_sha256: row.get(7)?,
                risk: stored(row.get(8)?),
                requires_root: row.get(9)?,
                identity: stored(row.get(10)?),
                decision: stored(row.get(11)?),
                reason: row.get(12)?,
                success: row.get(13)?,
                exit_code: row.get(14)?,
                duration_ms: row.get(15)?,
                summary: row.get(16)?,
                task: row.get(19)?,
            },
            prev_sha256: row.get(17)?,
            row_sha256: row.get(18)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// A stored enum column read back; text this build does not know (a newer build's row,
/// or one changed by hand, which `--verify` reports) reads as missing.
fn stored<T: StoredText>(text: Option<String>) -> Option<T> {
    text.as_deref().and_then(T::from_text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `AuditRecord` as builds before the typed columns wrote it into the journal.
    #[derive(serde::Serialize)]
    struct UntypedRecord {
        call_id: i64,
        kind: AuditKind,
        origin: Option<String>,
        tool: Option<String>,
        action: Option<String>,
        arguments_sha256: Option<String>,
        risk: Option<String>,
        requires_root: Option<bool>,
        identity: Option<String>,
        decision: Option<String>,
        reason: Option<String>,
        success: Option<bool>,
        exit_code: Option<i64>,
        duration_ms: Option<i64>,
        summary: Option<String>,
        task: Option<String>,
    }

    #[test]
    fn a_journal_entry_of_an_older_build_reads_as_the_typed_record() {
        let old = UntypedRecord {
            call_id: 7,
            kind: AuditKind::Call,
            origin: Some("agent_http".into()),
            tool: Some("fs.stat".into()),
            action: Some("stat /".into()),
            arguments_sha256: None,
            risk: Some("read_only".into()),
            requires_root: Some(false),
            identity: Some("launching_user".into()),
            decision: Some("allowed".into()),
            reason: None,
            success: Some(true),
            exit_code: Some(0),
            duration_ms: Some(1),
            summary: Some("ok".into()),
            task: None,
        };
        let bytes = nl2sh_proto::journal::encode_entry(&old).unwrap();
        let read = nl2sh_proto::journal::decode_entries::<AuditRecord>(&bytes);
        assert_eq!(read.garbage_bytes, 0);
        let [record] = read.entries.as_slice() else {
            panic!("{:?}", read.entries);
        };
        assert_eq!(record.origin, Some(CallOrigin::AgentHttp));
        assert_eq!(record.risk, Some(RiskLevel::ReadOnly));
        assert_eq!(record.identity, Some(Identity::Launching));
        assert_eq!(record.decision, Some(Decision::Allowed));
        // And what this build writes is the same bytes.
        assert_eq!(nl2sh_proto::journal::encode_entry(record).unwrap(), bytes);
    }
}
