//! The task document: an A2A 1.0 `Task` in ProtoJSON (camelCase, enum names as strings,
//! RFC 3339 UTC timestamps with `Z`, no `kind`). The stored document is complete (whole
//! history, artifacts); [`present`] cuts it to what one answer asked for.

use chrono::{DateTime, SecondsFormat, Utc};
use nl2sh_proto::channels::{ContextId, TaskId, TaskRecord, TaskState};
use serde_json::{json, Map, Value};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// `ms` as RFC 3339 UTC with milliseconds and `Z` (`2026-01-02T03:04:05.678Z`).
pub fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An RFC 3339 timestamp (any offset, any fraction) as the smallest whole millisecond
/// at or after it: a filter "at or after `text`" keeps exactly the tasks whose stored
/// millisecond is at least this.
pub fn parse_rfc3339_ceil_ms(text: &str) -> Option<i64> {
    let t = DateTime::parse_from_rfc3339(text).ok()?;
    let ms = t.timestamp_millis();
    let sub_ms = t.timestamp_subsec_nanos() % 1_000_000;
    Some(if sub_ms > 0 { ms.saturating_add(1) } else { ms })
}

/// A new random id in the UUID v4 text form, for messages and artifacts: they are not
/// credentials, only unique. Task and context ids are the store's: approvald mints them
/// (`StoreClient::create_task`).
pub fn new_id() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    Ok(uuid::Builder::from_random_bytes(b).into_uuid().to_string())
}

/// How a task ended, for its final status message and artifacts.
#[derive(Debug, Clone)]
pub struct Ending {
    pub state: TaskState,
    /// The Agent's answer, or why the task failed or stopped.
    pub text: String,
    /// `artifacts[0].parts[0].data`.
    pub result: Option<Value>,
}

/// One task as netd keeps it while it is active; [`TaskDoc::to_json`] is the stored
/// document.
#[derive(Debug, Clone)]
pub struct TaskDoc {
    pub id: TaskId,
    pub context: ContextId,
    pub state: TaskState,
    pub updated_ms: i64,
    /// The user's message, normalized to the 1.0 shape, with `contextId` and `taskId`.
    pub user_message: Map<String, Value>,
    /// The Agent's final message (terminal states only).
    pub agent_message: Option<Value>,
    pub artifacts: Vec<Value>,
}

impl TaskDoc {
    pub fn new(id: TaskId, context: ContextId, mut user_message: Map<String, Value>) -> Self {
        user_message.insert("contextId".into(), Value::String(context.0.clone()));
        user_message.insert("taskId".into(), Value::String(id.0.clone()));
        Self {
            id,
            context,
            state: TaskState::Submitted,
            updated_ms: now_ms(),
            user_message,
            agent_message: None,
            artifacts: Vec::new(),
        }
    }

    /// Move to `state` now. Timestamps of one task never go backwards, even if the clock
    /// does: listing orders by them.
    pub fn advance(&mut self, state: TaskState) {
        self.state = state;
        self.updated_ms = now_ms().max(self.updated_ms);
    }

    /// The terminal state, with the Agent's message and the result artifact (kept for
    /// failed and canceled runs too, when there is one).
    pub fn finish(&mut self, ending: Ending) -> Result<(), getrandom::Error> {
        let message_id = new_id()?;
        self.agent_message = Some(json!({
            "messageId": message_id,
            "contextId": self.context.0,
            "taskId": self.id.0,
            "role": "ROLE_AGENT",
            "parts": [{"text": ending.text}],
        }));
        self.artifacts = match ending.result {
            Some(data) => vec![json!({
                "artifactId": new_id()?,
                "name": "result",
                "parts": [{"data": data, "mediaType": "application/json"}],
            })],
            None => Vec::new(),
        };
        self.advance(ending.state);
        Ok(())
    }

    pub fn to_json(&self) -> Value {
        let mut status = json!({
            "state": self.state.as_a2a(),
            "timestamp": rfc3339(self.updated_ms),
        });
        let mut history = vec![Value::Object(self.user_message.clone())];
        if let Some(agent) = &self.agent_message {
            status["message"] = agent.clone();
            history.push(agent.clone());
        }
        let mut task = json!({
            "id": self.id.0,
            "contextId": self.context.0,
            "status": status,
            "history": history,
        });
        if !self.artifacts.is_empty() {
            task["artifacts"] = Value::Array(self.artifacts.clone());
        }
        task
    }

    pub fn record(&self) -> TaskRecord {
        TaskRecord {
            id: self.id.clone(),
            context_id: self.context.clone(),
            state: self.state,
            updated_ms: self.updated_ms,
            document: self.to_json().to_string(),
        }
    }
}

/// What one answer shows of a task.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// `None`: the whole history; 0: none (the key is omitted); n: the n newest.
    pub history_length: Option<usize>,
    pub artifacts: bool,
}

impl View {
    pub const FULL: View = View {
        history_length: None,
        artifacts: true,
    };
}

/// `task` cut to `view`.
pub fn present(task: &Value, view: View) -> Value {
    let mut task = task.clone();
    let Some(object) = task.as_object_mut() else {
        return task;
    };
    match view.history_length {
        Some(0) => {
            object.remove("history");
        }
        Some(n) => {
            if let Some(Value::Array(history)) = object.get_mut("history") {
                let drop = history.len().saturating_sub(n);
                history.drain(..drop);
            }
        }
        None => {}
    }
    if !view.artifacts {
        object.remove("artifacts");
    }
    task
}

/// The state named in a document, for documents read back from the store.
pub fn state_of(task: &Value) -> Option<TaskState> {
    task.get("status")?
        .get("state")?
        .as_str()
        .and_then(TaskState::from_a2a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_z() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            parse_rfc3339_ceil_ms("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339_ceil_ms("2023-11-14T23:13:20.1231+01:00"),
            Some(1_700_000_000_124)
        );
        for bad in ["", "yesterday", "2023-11-14", "2023-11-14T22:13:20"] {
            assert_eq!(parse_rfc3339_ceil_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_are_uuid_v4_text_and_differ() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
    }

    #[test]
    fn present_cuts_history_and_artifacts() {
        let mut doc = TaskDoc::new(
            TaskId("t".into()),
            ContextId("c".into()),
            Map::from_iter([("messageId".to_string(), json!("m"))]),
        );
        doc.finish(Ending {
            state: TaskState::Completed,
            text: "done".into(),
            result: Some(json!({"answer": 42})),
        })
        .unwrap();
        let full = doc.to_json();
        assert_eq!(full["history"].as_array().unwrap().len(), 2);
        assert_eq!(full["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(full["artifacts"][0]["parts"][0]["data"]["answer"], 42);
        assert_eq!(full["history"][0]["taskId"], "t");
        let cut = present(
            &full,
            View {
                history_length: Some(1),
                artifacts: false,
            },
        );
        assert_eq!(cut["history"].as_array().unwrap().len(), 1);
        assert_eq!(cut["history"][0]["role"], "ROLE_AGENT");
        assert!(cut.get("artifacts").is_none());
        let none = present(
            &full,
            View {
                history_length: Some(0),
                artifacts: true,
            },
        );
        assert!(none.get("history").is_none());
        assert_eq!(state_of(&full), Some(TaskState::Completed));
    }
}
