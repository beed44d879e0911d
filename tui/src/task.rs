//! One task as the owner reads it: its A2A Task document (status message, history,
//! artifacts) turned into rows of escaped text.

use nl2sh_proto::channels::TaskRecord;
use nl2sh_proto::clock::readable_utc;
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::MAX_TASK_DOCUMENT_BYTES;
use serde_json::Value;

/// How a row looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    Plain,
    Heading,
    Label,
    Muted,
    Error,
}

/// One logical row: `lead` (ours) then `text` (escaped), wrapped to the width with
/// continuation lines indented by `indent`.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub lead: String,
    pub text: String,
    pub indent: usize,
    pub look: Look,
}

/// Text from the document, escaped; nothing a task can hold is cut.
fn shown(text: &str) -> String {
    Shown::new(text)
        .max_bytes(MAX_TASK_DOCUMENT_BYTES)
        .to_string()
}

/// `TASK_STATE_INPUT_REQUIRED` → `input required`.
pub(crate) fn short_state(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let rest = upper.strip_prefix("TASK_STATE_").unwrap_or(&upper);
    let word = rest.to_ascii_lowercase().replace('_', " ");
    match word.as_str() {
        "" => "unknown".to_string(),
        "cancelled" => "canceled".to_string(),
        _ => word,
    }
}

fn row(rows: &mut Vec<Row>, lead: &str, text: String, indent: usize, look: Look) {
    rows.push(Row {
        lead: lead.to_string(),
        text,
        indent,
        look,
    });
}

fn blank(rows: &mut Vec<Row>) {
    row(rows, "", String::new(), 0, Look::Plain);
}

/// A non-empty string value.
fn text_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The task's state as a short word, escaped: the document's (which may say `input
/// required`), else the stored column's.
pub(crate) fn state(record: &TaskRecord) -> String {
    let document: Option<Value> = serde_json::from_str(&record.document).ok();
    state_in(document.as_ref(), record)
}

fn state_in(task: Option<&Value>, record: &TaskRecord) -> String {
    let word = text_of(task.and_then(|t| t.pointer("/status/state")))
        .map(short_state)
        .unwrap_or_else(|| short_state(record.state.as_a2a()));
    shown(&word)
}

/// A row of `label` (padded to 10 columns) and `value`.
fn kv(rows: &mut Vec<Row>, label: &str, value: String) {
    row(rows, &format!("{label:<10}"), value, 10, Look::Plain);
}

/// The rows of one task.
pub(crate) fn rows(record: &TaskRecord) -> Vec<Row> {
    let mut rows = Vec::new();
    let document: Result<Value, _> = serde_json::from_str(&record.document);
    let task = match document {
        Ok(Value::Object(ref task)) => task,
        Ok(_) | Err(_) => return unreadable(record),
    };
    let status = task.get("status").and_then(Value::as_object);
    kv(
        &mut rows,
        "Task",
        shown(text_of(task.get("id")).unwrap_or(&record.id.0)),
    );
    kv(&mut rows, "State", state_in(document.as_ref().ok(), record));
    kv(
        &mut rows,
        "Updated",
        text_of(status.and_then(|s| s.get("timestamp")))
            .map(shown)
            .unwrap_or_else(|| readable_utc(record.updated_ms)),
    );
    kv(
        &mut rows,
        "Context",
        shown(text_of(task.get("contextId")).unwrap_or(&record.context_id.0)),
    );

    if let Some(message) = status
        .and_then(|s| s.get("message"))
        .filter(|m| !m.is_null())
    {
        blank(&mut rows);
        row(&mut rows, "", "Status message".into(), 0, Look::Heading);
        parts(&mut rows, message.get("parts"), 2);
    }
    history(&mut rows, task.get("history"));
    artifacts(&mut rows, task.get("artifacts"));
    rows
}

/// A task whose document is not a JSON object: the stored columns, why, and the document
/// whole.
fn unreadable(record: &TaskRecord) -> Vec<Row> {
    let mut rows = Vec::new();
    let why = match serde_json::from_str::<Value>(&record.document) {
        Err(e) => format!(
            "the task document is not valid JSON: {}",
            shown(&e.to_string())
        ),
        Ok(_) => "the task document is not a JSON object".to_string(),
    };
    kv(&mut rows, "Task", shown(&record.id.0));
    kv(&mut rows, "State", short_state(record.state.as_a2a()));
    kv(&mut rows, "Updated", readable_utc(record.updated_ms));
    kv(&mut rows, "Context", shown(&record.context_id.0));
    blank(&mut rows);
    row(&mut rows, "", why, 0, Look::Error);
    blank(&mut rows);
    row(&mut rows, "", "Document".to_string(), 0, Look::Heading);
    row(&mut rows, "  ", shown(&record.document), 2, Look::Plain);
    rows
}

/// The task's goal ([`nl2sh_proto::requester::goal_of`], the one reading of it every
/// console shares), escaped: line breaks are named, so it stays one line.
pub(crate) fn goal(record: &TaskRecord) -> Option<String> {
    nl2sh_proto::requester::goal_of(&record.document).map(|g| shown(&g))
}

/// The task's messages, each under its role.
fn history(rows: &mut Vec<Row>, history: Option<&Value>) {
    blank(rows);
    row(rows, "", "History".into(), 0, Look::Heading);
    let history = history
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if history.is_empty() {
        row(rows, "  ", "No messages.".into(), 2, Look::Muted);
    }
    for message in history {
        let role = text_of(message.get("role")).unwrap_or("");
        let upper = role.to_ascii_uppercase();
        let role = upper
            .strip_prefix("ROLE_")
            .unwrap_or(&upper)
            .to_ascii_lowercase();
        let role = if role.is_empty() {
            "unknown".into()
        } else {
            role
        };
        row(rows, "  ", shown(&role), 2, Look::Label);
        parts(rows, message.get("parts"), 4);
    }
}

/// The task's artifacts, each under its name.
fn artifacts(rows: &mut Vec<Row>, artifacts: Option<&Value>) {
    blank(rows);
    row(rows, "", "Artifacts".into(), 0, Look::Heading);
    let artifacts = artifacts
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if artifacts.is_empty() {
        row(rows, "  ", "No artifacts.".into(), 2, Look::Muted);
    }
    for artifact in artifacts {
        let name = text_of(artifact.get("name"))
            .or_else(|| text_of(artifact.get("artifactId")))
            .unwrap_or("artifact");
        row(rows, "  ", shown(name), 2, Look::Label);
        if let Some(description) = text_of(artifact.get("description")) {
            row(rows, "    ", shown(description), 4, Look::Muted);
        }
        parts(rows, artifact.get("parts"), 4);
    }
}

/// How an Agent's task ended, for the Ask page: its answer (the final status message),
/// then its evidence (what each tool call returned, from the result artifact), each line
/// escaped. A document that cannot be read is shown whole, as on the Tasks page.
pub(crate) fn outcome(record: &TaskRecord) -> Vec<Row> {
    let Ok(task @ Value::Object(_)) = serde_json::from_str::<Value>(&record.document) else {
        return rows(record);
    };
    let mut rows = Vec::new();
    let message = task.pointer("/status/message").filter(|m| !m.is_null());
    match message {
        Some(message) => parts(&mut rows, message.get("parts"), 2),
        None => row(&mut rows, "  ", "(no answer)".into(), 2, Look::Muted),
    }
    // The result artifact's data: `{answer, answer_status, evidence: {entries, ...}}`.
    let data = task
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("parts").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| p.get("data"))
        .find(|d| d.get("evidence").is_some());
    let Some(evidence) = data.and_then(|d| d.get("evidence")) else {
        return rows;
    };
    let entries = evidence
        .get("entries")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let total = evidence
        .get("total_tool_calls")
        .and_then(Value::as_u64)
        .unwrap_or(entries.len() as u64);
    let heading = match total {
        0 => "Evidence: no tool was called".to_string(),
        1 => "Evidence: 1 tool call".to_string(),
        n => format!("Evidence: {n} tool calls"),
    };
    row(&mut rows, "  ", heading, 2, Look::Heading);
    if total > 0 {
        row(
            &mut rows,
            "  ",
            "What the tools returned; the answer above is the model's own analysis of it.".into(),
            2,
            Look::Muted,
        );
    }
    for (i, entry) in entries.iter().enumerate() {
        let field = |key: &str| text_of(entry.get(key)).map(shown).unwrap_or_default();
        let mut head = format!("{}  {}", field("tool"), field("result"));
        if entry.get("output_truncated").and_then(Value::as_bool) == Some(true) {
            head.push_str("  (output cut)");
        }
        row(&mut rows, &format!("    {}. ", i + 1), head, 6, Look::Label);
        if let Some(output) = text_of(entry.get("output")) {
            for line in output.split('\n') {
                row(&mut rows, "       ", shown(line), 7, Look::Plain);
            }
        }
    }
    let left_out = total.saturating_sub(entries.len() as u64);
    if left_out > 0 {
        row(
            &mut rows,
            "    ",
            format!("… {left_out} more not kept"),
            4,
            Look::Muted,
        );
    }
    rows
}

/// A message's or an artifact's parts: text as its lines, data as indented JSON, a file
/// by its name. Each line is escaped on its own, so a line break in a part is a line on
/// the screen and every other control character is named.
fn parts(rows: &mut Vec<Row>, parts: Option<&Value>, indent: usize) {
    let lead = " ".repeat(indent);
    let parts = parts
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if parts.is_empty() {
        row(rows, &lead, "(no content)".into(), indent, Look::Muted);
    }
    let lines = |rows: &mut Vec<Row>, text: &str| {
        for line in text.split('\n') {
            row(rows, &lead, shown(line), indent, Look::Plain);
        }
    };
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            lines(rows, text);
        } else if let Some(data) = part.get("data") {
            lines(rows, &pretty(data));
        } else if let Some(file) = part.get("file") {
            let name = ["name", "uri", "fileWithUri"]
                .iter()
                .find_map(|k| file.get(*k).and_then(Value::as_str))
                .unwrap_or("file");
            let mut text = format!("File: {}", shown(name));
            if let Some(media) = file.get("mimeType").and_then(Value::as_str) {
                text.push_str(&format!(" ({})", shown(media)));
            }
            row(rows, &lead, text, indent, Look::Plain);
        } else {
            lines(rows, &pretty(part));
        }
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{ContextId, TaskId, TaskState};

    fn record(document: &str) -> TaskRecord {
        TaskRecord {
            id: TaskId("t-1".into()),
            context_id: ContextId("c-1".into()),
            state: TaskState::Completed,
            updated_ms: 1_700_000_000_000,
            document: document.into(),
        }
    }

    fn text(rows: &[Row]) -> String {
        rows.iter()
            .map(|r| format!("{}{}\n", r.lead, r.text))
            .collect()
    }

    #[test]
    fn states_are_short_words() {
        assert_eq!(short_state("TASK_STATE_COMPLETED"), "completed");
        assert_eq!(short_state("TASK_STATE_INPUT_REQUIRED"), "input required");
        assert_eq!(short_state("task_state_cancelled"), "canceled");
        assert_eq!(short_state(""), "unknown");
    }

    #[test]
    fn a_document_shows_status_history_and_artifacts() {
        let doc = serde_json::json!({
            "id": "t-1", "contextId": "c-1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2023-11-14T22:13:20.000Z",
                "message": {"role": "ROLE_AGENT", "parts": [{"text": "done\nsecond line\u{1b}[2J"}]}},
            "history": [
                {"role": "ROLE_USER", "parts": [{"text": "list /tmp"}]},
                {"role": "ROLE_AGENT", "parts": [{"text": "done"}]}
            ],
            "artifacts": [{"artifactId": "a", "name": "result",
                "parts": [{"data": {"answer": 42, "evidence": {"entries": []}}}]}]
        });
        let out = text(&rows(&record(&doc.to_string())));
        for want in [
            "State     completed",
            "Updated   2023-11-14T22:13:20.000Z",
            "Status message",
            "  done\n  second line\\x1b[2J\n",
            "  user\n    list /tmp",
            "  agent",
            "  result\n    {",
            "\"answer\": 42",
            "\"evidence\"",
        ] {
            assert!(out.contains(want), "{want:?} not in\n{out}");
        }
        assert!(!out.contains('\u{1b}'));
    }

    #[test]
    fn a_broken_document_is_shown_escaped() {
        let out = text(&rows(&record("{not json\u{202e}")));
        assert!(out.contains("not valid JSON"));
        assert!(out.contains("{not json\\u{202e}"));
        assert!(out.contains("State     completed"));
    }
}
