//! The audit record: what one row says, its bounds, and the redaction of secrets from its
//! text; and reading rows back.

use std::path::Path;

use nl2sh_proto::channels::{CallOrigin, Decision, Identity, RiskLevel};
use nl2sh_proto::read_sources::ReadSources;
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
    /// Whose device text the Agent had read before the call
    /// (`ActionSummary.after_reading`, in [`ReadSources::to_stored`]'s form).
    pub after_reading: Option<String>,
    /// The client's own name for itself (`ActionSummary.client`, in
    /// [`ClientName::to_stored`](nl2sh_proto::requester::ClientName::to_stored)'s form).
    pub client: Option<String>,
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
            after_reading: None,
            client: None,
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
            &mut self.after_reading,
            &mut self.client,
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
            ("after_reading", &self.after_reading),
            ("client", &self.client),
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

impl AuditRow {
    /// The row as `protocol audit --json` prints it, and the Web console's audit page
    /// receives it: one object, every column by name, enums as their stored text.
    pub fn to_json(&self) -> serde_json::Value {
        let c = &self.record;
        serde_json::json!({
            "id": self.id, "time": self.time, "call_id": c.call_id, "kind": c.kind.as_str(),
            "origin": c.origin.map(|v| v.as_str()), "tool": c.tool, "action": c.action,
            "arguments_sha256": c.arguments_sha256, "risk": c.risk.map(|v| v.as_str()),
            "requires_root": c.requires_root, "identity": c.identity.map(|v| v.as_str()),
            "decision": c.decision.map(|v| v.as_str()), "reason": c.reason, "success": c.success,
            "exit_code": c.exit_code, "duration_ms": c.duration_ms, "summary": c.summary,
            "task": c.task,
            "after_reading": ReadSources::from_stored(c.after_reading.as_deref()).as_slice(),
            "client": c.client,
        })
    }
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
                after_reading: row.get(20)?,
                client: row.get(21)?,
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
    fn a_row_as_json_names_every_column() {
        let mut record = AuditRecord::new(AuditKind::Decision, 9);
        record.origin = Some(CallOrigin::McpHttp);
        record.tool = Some("shell.exec".into());
        record.action = Some("touch /tmp/\u{1b}x".into());
        record.risk = Some(RiskLevel::Medium);
        record.requires_root = Some(false);
        record.identity = Some(Identity::Launching);
        record.decision = Some(Decision::Approved);
        record.reason = Some("approved at the device (request abc234)".into());
        record.task = Some("t-1".into());
        record.after_reading = Some(r#"["com.example.chat"]"#.into());
        record.client = Some("Codex 0.47.0".into());
        let row = AuditRow {
            id: 3,
            time: "2026-01-02T03:04:05.006Z".into(),
            record,
            prev_sha256: "0".repeat(64),
            row_sha256: "1".repeat(64),
        };
        assert_eq!(
            row.to_json(),
            serde_json::json!({
                "id": 3, "time": "2026-01-02T03:04:05.006Z", "call_id": 9, "kind": "decision",
                "origin": "mcp_http", "tool": "shell.exec", "action": "touch /tmp/\u{1b}x",
                "arguments_sha256": null, "risk": "medium", "requires_root": false,
                "identity": "launching_user", "decision": "approved",
                "reason": "approved at the device (request abc234)", "success": null,
                "exit_code": null, "duration_ms": null, "summary": null, "task": "t-1",
                "after_reading": ["com.example.chat"], "client": "Codex 0.47.0",
            })
        );
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
        assert_eq!(record.after_reading, None);
        assert_eq!(record.client, None);
        // And what this build writes is the same bytes, and two more: the newer fields.
        let written = nl2sh_proto::journal::encode_entry(record).unwrap();
        assert_eq!(written.len(), bytes.len() + 2);
        let read = nl2sh_proto::journal::decode_entries::<AuditRecord>(&written);
        assert_eq!(read.entries.as_slice(), std::slice::from_ref(record));
    }

    #[test]
    fn a_journal_entry_from_before_the_client_column_reads_with_its_sources() {
        let mut record = AuditRecord::new(AuditKind::Call, 8);
        record.after_reading = Some(r#"["com.example.chat"]"#.into());
        let mut entry = nl2sh_proto::journal::encode_entry(&record).unwrap();
        // The same record as the build before `client` wrote it: one byte less, and the
        // entry's length and checksum made again over what is left.
        let body_len = u32::from_le_bytes(entry[..4].try_into().unwrap()) as usize;
        let body = entry[4..4 + body_len - 1].to_vec();
        entry.clear();
        entry.extend_from_slice(&(body.len() as u32).to_le_bytes());
        entry.extend_from_slice(&body);
        let sum = <sha2::Sha256 as sha2::Digest>::digest(&body);
        entry.extend_from_slice(&sum[..entry_sum_bytes(&record)]);
        let read = nl2sh_proto::journal::decode_entries::<AuditRecord>(&entry);
        assert_eq!(read.garbage_bytes, 0);
        assert_eq!(read.entries, vec![record]);
    }

    /// The checksum's length in an entry: what the encoder adds past the length and body.
    fn entry_sum_bytes(record: &AuditRecord) -> usize {
        let entry = nl2sh_proto::journal::encode_entry(record).unwrap();
        let body_len = u32::from_le_bytes(entry[..4].try_into().unwrap()) as usize;
        entry.len() - 4 - body_len
    }
}
