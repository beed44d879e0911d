//! JSON-RPC errors as A2A 1.0 answers them (always with HTTP 200).
//!
//! A2A's own errors (-32001 … -32009) carry `error.data` as an array holding one
//! `google.rpc.ErrorInfo` (reason: the error's name in UPPER_SNAKE without "Error",
//! domain `a2a-protocol.org`). Invalid params carry a `google.rpc.BadRequest` naming the
//! field. The JSON-RPC errors of the envelope (-32700, -32600, -32601) carry no data.
//!
//! The active-task limit has no A2A error. It is answered -32603 (internal error) with
//! an ErrorInfo of domain `nl2sh`, reason `ACTIVE_TASK_LIMIT` and the limit in its
//! metadata, and a message naming the limit: every client understands -32603 and shows
//! its message; a code of A2A's reserved band (-32001 … -32099) could collide with a
//! later A2A error, and -32000 falls outside the ranges conformance suites accept.

use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::MAX_ACTIVE_TASKS;
use serde_json::{json, Value};

use crate::tasks::TaskError;

#[derive(Debug, Clone, PartialEq)]
pub enum A2aError {
    Parse(String),
    InvalidRequest(String),
    MethodNotFound(String),
    /// `field` in the A2A request's own terms (`message.parts[1].text`).
    InvalidParams {
        field: String,
        message: String,
    },
    Internal(String),
    /// The active-task limit (see the module comment).
    Busy(String),
    TaskNotFound(String),
    TaskNotCancelable(String),
    PushNotificationNotSupported(String),
    UnsupportedOperation(String),
    ContentTypeNotSupported(String),
    VersionNotSupported(String),
}

pub const DOMAIN: &str = "a2a-protocol.org";

impl A2aError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        A2aError::InvalidParams {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn code(&self) -> i64 {
        match self {
            A2aError::Parse(_) => -32700,
            A2aError::InvalidRequest(_) => -32600,
            A2aError::MethodNotFound(_) => -32601,
            A2aError::InvalidParams { .. } => -32602,
            A2aError::Internal(_) | A2aError::Busy(_) => -32603,
            A2aError::TaskNotFound(_) => -32001,
            A2aError::TaskNotCancelable(_) => -32002,
            A2aError::PushNotificationNotSupported(_) => -32003,
            A2aError::UnsupportedOperation(_) => -32004,
            A2aError::ContentTypeNotSupported(_) => -32005,
            A2aError::VersionNotSupported(_) => -32009,
        }
    }

    /// The ErrorInfo reason of A2A's own errors.
    fn a2a_reason(&self) -> Option<&'static str> {
        Some(match self {
            A2aError::TaskNotFound(_) => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            A2aError::PushNotificationNotSupported(_) => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            _ => return None,
        })
    }

    pub fn message(&self) -> &str {
        match self {
            A2aError::Parse(m)
            | A2aError::InvalidRequest(m)
            | A2aError::MethodNotFound(m)
            | A2aError::InvalidParams { message: m, .. }
            | A2aError::Internal(m)
            | A2aError::Busy(m)
            | A2aError::TaskNotFound(m)
            | A2aError::TaskNotCancelable(m)
            | A2aError::PushNotificationNotSupported(m)
            | A2aError::UnsupportedOperation(m)
            | A2aError::ContentTypeNotSupported(m)
            | A2aError::VersionNotSupported(m) => m,
        }
    }

    fn data(&self) -> Option<Value> {
        if let Some(reason) = self.a2a_reason() {
            return Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": DOMAIN,
                "metadata": {},
            }]));
        }
        match self {
            A2aError::InvalidParams { field, message } => Some(json!([{
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": message}],
            }])),
            A2aError::Busy(_) => Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "ACTIVE_TASK_LIMIT",
                "domain": "nl2sh",
                "metadata": {"limit": MAX_ACTIVE_TASKS.to_string()},
            }])),
            _ => None,
        }
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code(), "message": self.message()});
        if let Some(data) = self.data() {
            error["data"] = data;
        }
        error
    }
}

impl From<TaskError> for A2aError {
    fn from(e: TaskError) -> Self {
        let text = e.to_string();
        match e {
            TaskError::NotFound(_) => A2aError::TaskNotFound(text),
            TaskError::NotCancelable { .. } => A2aError::TaskNotCancelable(text),
            TaskError::Busy | TaskError::OwnerBusy => A2aError::Busy(text),
            TaskError::OwnersConversation => A2aError::invalid("message.contextId", text),
            TaskError::Draining | TaskError::Store(_) | TaskError::Unreadable => {
                tracing::warn!(error = %Shown::new(&text), "A2A request failed");
                A2aError::Internal(text)
            }
        }
    }
}
