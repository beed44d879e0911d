//! The task document: an A2A 1.0 `Task` in ProtoJSON (camelCase, enum names as strings,
//! RFC 3339 UTC timestamps with `Z`, no `kind`). The stored document is complete (whole
//! history, artifacts); [`present`] cuts it to what one answer asked for.
//!
//! Message and artifact ids are fresh UUID v4 text ([`new_uuid_v4`]): not credentials,
//! only unique. Task and context ids are the store's: approvald mints them
//! (`StoreClient::create_task`).

use nl2sh_proto::channels::{ContextId, TaskId, TaskRecord, TaskState};
use nl2sh_proto::clock::{now_unix_ms, rfc3339_millis};
use nl2sh_proto::ids::{new_uuid_v4, RandomError};
use serde_json::{json, Map, Value};

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
            updated_ms: now_unix_ms(),
            user_message,
            agent_message: None,
            artifacts: Vec::new(),
        }
    }

    /// Move to `state` now. Timestamps of one task never go backwards, even if the clock
    /// does: listing orders by them.
    pub fn advance(&mut self, state: TaskState) {
        self.state = state;
        self.updated_ms = now_unix_ms().max(self.updated_ms);
    }

    /// The terminal state, with the Agent's message and the result artifact (kept for
    /// failed and canceled runs too, when there is one).
    pub fn finish(&mut self, ending: Ending) -> Result<(), RandomError> {
        let message_id = new_uuid_v4()?;
        self.agent_message = Some(json!({
            "messageId": message_id,
            "contextId": self.context.0,
            "taskId": self.id.0,
            "role": "ROLE_AGENT",
            "parts": [{"text": ending.text}],
        }));
        self.artifacts = match ending.result {
            Some(data) => vec![json!({
                "artifactId": new_uuid_v4()?,
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
            "timestamp": rfc3339_millis(self.updated_ms),
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
