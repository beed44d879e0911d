//! The params of the four served methods, read from ProtoJSON into what the task service
//! takes. Unknown fields are ignored (as ProtoJSON readers commonly allow); the fields
//! nl2sh reads must have their ProtoJSON type (int32 as a number or a decimal string,
//! enums as their name or number), else -32602 naming the field.

use nl2sh_proto::channels::{ContextId, TaskQuery, TaskState};
use nl2sh_proto::limits::{
    MAX_AGENT_TEXT_BYTES, MAX_ID_BYTES, MAX_PAGE_SIZE, MAX_PAGE_TOKEN_BYTES, MIN_PAGE_SIZE,
};
use serde_json::{Map, Value};

use super::error::A2aError;
use crate::tasks::document::View;
use nl2sh_proto::clock::parse_rfc3339_ceil_ms;

/// `pageSize` when the request names none (the A2A default).
pub const DEFAULT_PAGE_SIZE: u32 = 50;

/// Output modes nl2sh can answer in: the result is JSON, the answer text.
const OUTPUT_MODES: [&str; 6] = [
    "application/json",
    "text/plain",
    "*/*",
    "*",
    "application/*",
    "text/*",
];

type Obj = Map<String, Value>;

/// The params object; absent params read as `{}`.
pub fn object(params: Option<&Value>) -> Result<&Obj, A2aError> {
    static EMPTY: std::sync::OnceLock<Obj> = std::sync::OnceLock::new();
    match params {
        None | Some(Value::Null) => Ok(EMPTY.get_or_init(Obj::new)),
        Some(Value::Object(o)) => Ok(o),
        Some(_) => Err(A2aError::invalid("params", "params must be an object")),
    }
}

/// A present, non-null field.
fn field<'a>(o: &'a Obj, name: &str) -> Option<&'a Value> {
    o.get(name).filter(|v| !v.is_null())
}

fn string<'a>(o: &'a Obj, name: &str, path: &str) -> Result<Option<&'a str>, A2aError> {
    match field(o, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(A2aError::invalid(path, format!("{path} must be a string"))),
    }
}

fn boolean(o: &Obj, name: &str, path: &str) -> Result<Option<bool>, A2aError> {
    match field(o, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(A2aError::invalid(path, format!("{path} must be a boolean"))),
    }
}

/// An int32 in ProtoJSON: a number or a decimal string.
fn int32(o: &Obj, name: &str, path: &str) -> Result<Option<i64>, A2aError> {
    let bad = || A2aError::invalid(path, format!("{path} must be an integer"));
    let n = match field(o, name) {
        None => return Ok(None),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(bad)?,
        Some(Value::String(s)) => s.trim().parse::<i64>().map_err(|_| bad())?,
        Some(_) => return Err(bad()),
    };
    if i32::try_from(n).is_err() {
        return Err(bad());
    }
    Ok(Some(n))
}

fn history_length(o: &Obj, path: &str) -> Result<Option<usize>, A2aError> {
    match int32(o, "historyLength", path)? {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::invalid(path, format!("{path} must be 0 or more"))),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
    }
}

/// A task id param: required, non-empty. One longer than any id cannot name a task.
fn task_id(o: &Obj) -> Result<String, A2aError> {
    match string(o, "id", "id")? {
        Some(id) if !id.is_empty() => Ok(id.to_string()),
        _ => Err(A2aError::invalid("id", "id is required")),
    }
}

fn strings(o: &Obj, name: &str, path: &str) -> Result<Option<Vec<String>>, A2aError> {
    let bad = || A2aError::invalid(path, format!("{path} must be an array of strings"));
    match field(o, name) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(bad()),
    }
}

/// SendMessage, read.
#[derive(Debug)]
pub struct Send {
    pub text: String,
    /// The user's message, normalized to the 1.0 shape (without contextId/taskId, which
    /// the task service sets).
    pub message: Obj,
    pub context: Option<ContextId>,
    /// `message.taskId`: a task this message claims to continue (nl2sh does not continue
    /// tasks; the caller answers -32001 for an unknown one and -32004 otherwise).
    pub continues: Option<String>,
    pub return_immediately: bool,
    pub view: View,
}

/// SendMessage's params, checked in this order (the first failure is the answer): the
/// configuration, the message and its role, its id, the task it claims to continue,
/// its context, its parts, then what is kept of the rest.
pub fn send(params: &Obj) -> Result<Send, A2aError> {
    let config = send_configuration(params)?;
    let message = user_message(params)?;
    let message_id = message_id(message)?;
    let continues = string(message, "taskId", "message.taskId")?
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let context = context_id(message)?;
    let (text, parts) = text_parts(message)?;
    Ok(Send {
        text,
        message: normalized(message, message_id, parts)?,
        context,
        continues,
        return_immediately: config.return_immediately,
        view: View {
            history_length: config.history_length,
            artifacts: true,
        },
    })
}

/// What SendMessage's `configuration` asks for.
#[derive(Debug, Default)]
struct SendConfiguration {
    return_immediately: bool,
    history_length: Option<usize>,
}

/// `configuration`: no push notifications; an output mode nl2sh answers in, if any are
/// named; `historyLength` and `returnImmediately`.
fn send_configuration(params: &Obj) -> Result<SendConfiguration, A2aError> {
    let config = match field(params, "configuration") {
        None => return Ok(SendConfiguration::default()),
        Some(Value::Object(config)) => config,
        Some(_) => {
            return Err(A2aError::invalid(
                "configuration",
                "configuration must be an object",
            ))
        }
    };
    if field(config, "taskPushNotificationConfig").is_some() {
        return Err(A2aError::PushNotificationNotSupported(
            "push notifications are not supported".into(),
        ));
    }
    if let Some(modes) = strings(
        config,
        "acceptedOutputModes",
        "configuration.acceptedOutputModes",
    )? {
        let acceptable = modes.iter().any(|m| {
            let essence = m.split(';').next().unwrap_or("").trim();
            OUTPUT_MODES
                .iter()
                .any(|ours| ours.eq_ignore_ascii_case(essence))
        });
        if !modes.is_empty() && !acceptable {
            return Err(A2aError::ContentTypeNotSupported(
                "none of acceptedOutputModes is served: answers are application/json \
                 and text/plain"
                    .into(),
            ));
        }
    }
    let history_length = history_length(config, "configuration.historyLength")?;
    let return_immediately = boolean(
        config,
        "returnImmediately",
        "configuration.returnImmediately",
    )?
    .unwrap_or(false);
    Ok(SendConfiguration {
        return_immediately,
        history_length,
    })
}

/// `message`: an object from the user (`ROLE_USER`, or its number 1).
fn user_message(params: &Obj) -> Result<&Obj, A2aError> {
    let message = match field(params, "message") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err(A2aError::invalid("message", "message must be an object")),
        None => return Err(A2aError::invalid("message", "message is required")),
    };
    let role_ok = match field(message, "role") {
        Some(Value::String(r)) => r == "ROLE_USER",
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    };
    if !role_ok {
        return Err(A2aError::invalid(
            "message.role",
            "message.role must be ROLE_USER",
        ));
    }
    Ok(message)
}

/// `message.messageId`: required, non-empty, at most [`MAX_ID_BYTES`].
fn message_id(message: &Obj) -> Result<&str, A2aError> {
    let message_id = match string(message, "messageId", "message.messageId")? {
        Some(id) if !id.is_empty() => id,
        _ => {
            return Err(A2aError::invalid(
                "message.messageId",
                "message.messageId is required",
            ))
        }
    };
    if message_id.len() > MAX_ID_BYTES {
        return Err(A2aError::invalid(
            "message.messageId",
            format!("message.messageId is over {MAX_ID_BYTES} bytes"),
        ));
    }
    Ok(message_id)
}

/// `message.contextId`, if present and not empty: at most [`MAX_ID_BYTES`].
fn context_id(message: &Obj) -> Result<Option<ContextId>, A2aError> {
    match string(message, "contextId", "message.contextId")? {
        Some(c) if c.len() > MAX_ID_BYTES => Err(A2aError::invalid(
            "message.contextId",
            format!("message.contextId is over {MAX_ID_BYTES} bytes"),
        )),
        Some(c) if !c.is_empty() => Ok(Some(ContextId(c.to_string()))),
        _ => Ok(None),
    }
}

/// The user's message in the 1.0 shape, as the task keeps it: its id, the user role,
/// `parts` (already normalized), and the `metadata`, `extensions` and
/// `referenceTaskIds` it carried (each checked for its type).
fn normalized(message: &Obj, message_id: &str, parts: Vec<Value>) -> Result<Obj, A2aError> {
    let mut normalized = Obj::new();
    normalized.insert("messageId".into(), Value::String(message_id.to_string()));
    normalized.insert("role".into(), Value::String("ROLE_USER".into()));
    normalized.insert("parts".into(), Value::Array(parts));
    match field(message, "metadata") {
        None => {}
        Some(m @ Value::Object(_)) => {
            normalized.insert("metadata".into(), m.clone());
        }
        Some(_) => {
            return Err(A2aError::invalid(
                "message.metadata",
                "message.metadata must be an object",
            ))
        }
    }
    for name in ["extensions", "referenceTaskIds"] {
        let path = format!("message.{name}");
        if let Some(list) = strings(message, name, &path)? {
            normalized.insert(name.into(), list.into());
        }
    }
    Ok(normalized)
}

/// The text of the parts joined with newlines, and the parts normalized. A part that is
/// not text (raw, url, data) is a content type nl2sh does not take.
fn text_parts(message: &Obj) -> Result<(String, Vec<Value>), A2aError> {
    let parts = match field(message, "parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        Some(Value::Array(_)) | None => {
            return Err(A2aError::invalid(
                "message.parts",
                "message.parts must hold at least one text part",
            ))
        }
        Some(_) => {
            return Err(A2aError::invalid(
                "message.parts",
                "message.parts must be an array",
            ))
        }
    };
    let mut texts = Vec::with_capacity(parts.len());
    let mut normalized = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let path = format!("message.parts[{i}]");
        let Value::Object(part) = part else {
            return Err(A2aError::invalid(
                &path,
                format!("{path} must be an object"),
            ));
        };
        let others = ["raw", "url", "data"]
            .iter()
            .filter(|k| field(part, k).is_some())
            .count();
        let text = match (field(part, "text"), others) {
            (Some(Value::String(t)), 0) => t,
            (Some(Value::String(_)), _) => {
                return Err(A2aError::invalid(
                    &path,
                    format!("{path} must be exactly one of text, raw, url or data"),
                ))
            }
            (Some(_), _) => {
                return Err(A2aError::invalid(
                    format!("{path}.text"),
                    format!("{path}.text must be a string"),
                ))
            }
            (None, 0) => {
                return Err(A2aError::invalid(
                    &path,
                    format!("{path} has no content (text, raw, url or data)"),
                ))
            }
            (None, _) => {
                return Err(A2aError::ContentTypeNotSupported(format!(
                    "{path} is not a text part: only text parts are accepted"
                )))
            }
        };
        let mut kept = Obj::new();
        kept.insert("text".into(), Value::String(text.clone()));
        for (key, is_right) in [
            ("metadata", Value::is_object as fn(&Value) -> bool),
            ("mediaType", Value::is_string),
            ("filename", Value::is_string),
        ] {
            match field(part, key) {
                None => {}
                Some(v) if is_right(v) => {
                    kept.insert(key.into(), v.clone());
                }
                Some(_) => {
                    return Err(A2aError::invalid(
                        format!("{path}.{key}"),
                        format!("{path}.{key} has the wrong type"),
                    ))
                }
            }
        }
        texts.push(text.as_str());
        normalized.push(Value::Object(kept));
    }
    let text = texts.join("\n");
    if text.is_empty() || text.len() > MAX_AGENT_TEXT_BYTES {
        return Err(A2aError::invalid(
            "message.parts",
            format!(
                "the text parts joined are {} bytes; they must be 1-{MAX_AGENT_TEXT_BYTES} \
                 UTF-8 bytes",
                text.len()
            ),
        ));
    }
    Ok((text, normalized))
}

/// GetTask: the id and what to show.
pub fn get(params: &Obj) -> Result<(String, View), A2aError> {
    let id = task_id(params)?;
    let history_length = history_length(params, "historyLength")?;
    Ok((
        id,
        View {
            history_length,
            artifacts: true,
        },
    ))
}

/// CancelTask: the id.
pub fn cancel(params: &Obj) -> Result<String, A2aError> {
    task_id(params)
}

/// ListTasks, read. `query` is `None` when the filters can match nothing nl2sh stores
/// (a state nl2sh never uses), so the store need not be asked.
#[derive(Debug)]
pub struct List {
    pub query: Option<TaskQuery>,
    pub page_size: u32,
    pub view: View,
}

pub fn list(params: &Obj) -> Result<List, A2aError> {
    let context_id = match string(params, "contextId", "contextId")? {
        Some(c) if c.len() > MAX_ID_BYTES => {
            return Err(A2aError::invalid(
                "contextId",
                format!("contextId is over {MAX_ID_BYTES} bytes"),
            ))
        }
        Some(c) if !c.is_empty() => Some(ContextId(c.to_string())),
        _ => None,
    };
    // Some(None): a state that no stored task has.
    let state: Option<Option<TaskState>> = match field(params, "status") {
        None => None,
        Some(Value::String(s)) if s == "TASK_STATE_UNSPECIFIED" => None,
        Some(Value::String(s)) => match TaskState::from_a2a(s) {
            Some(state) => Some(Some(state)),
            None if A2A_ONLY_STATES.contains(&s.as_str()) => Some(None),
            None => return Err(A2aError::invalid("status", "status is not a task state")),
        },
        Some(Value::Number(n)) => match n.as_i64() {
            Some(0) => None,
            Some(1) => Some(Some(TaskState::Submitted)),
            Some(2) => Some(Some(TaskState::Working)),
            Some(3) => Some(Some(TaskState::Completed)),
            Some(4) => Some(Some(TaskState::Failed)),
            Some(5) => Some(Some(TaskState::Canceled)),
            Some(6..=8) => Some(None),
            _ => return Err(A2aError::invalid("status", "status is not a task state")),
        },
        Some(_) => return Err(A2aError::invalid("status", "status is not a task state")),
    };
    let page_size = match int32(params, "pageSize", "pageSize")? {
        None => DEFAULT_PAGE_SIZE,
        Some(n) if (i64::from(MIN_PAGE_SIZE)..=i64::from(MAX_PAGE_SIZE)).contains(&n) => {
            u32::try_from(n).unwrap_or(DEFAULT_PAGE_SIZE)
        }
        Some(_) => {
            return Err(A2aError::invalid(
                "pageSize",
                format!("pageSize must be {MIN_PAGE_SIZE}-{MAX_PAGE_SIZE}"),
            ))
        }
    };
    let page_token = match string(params, "pageToken", "pageToken")? {
        Some(t) if t.len() > MAX_PAGE_TOKEN_BYTES => {
            return Err(A2aError::invalid("pageToken", "pageToken is not valid"))
        }
        Some(t) if !t.is_empty() => Some(t.to_string()),
        _ => None,
    };
    let history_length = history_length(params, "historyLength")?;
    let updated_after_ms = match string(params, "statusTimestampAfter", "statusTimestampAfter")? {
        None => None,
        Some(t) => {
            let at_or_after = parse_rfc3339_ceil_ms(t).ok_or_else(|| {
                A2aError::invalid(
                    "statusTimestampAfter",
                    "statusTimestampAfter must be an RFC 3339 timestamp",
                )
            })?;
            // The store keeps tasks strictly after its bound; A2A asks for at or after.
            Some(at_or_after.saturating_sub(1))
        }
    };
    let artifacts = boolean(params, "includeArtifacts", "includeArtifacts")?.unwrap_or(false);
    let query = match state {
        Some(None) => None,
        state => Some(TaskQuery {
            context_id,
            state: state.flatten(),
            updated_after_ms,
            page_size,
            page_token,
            // The owner's own conversations are never the protocol's to list.
            include_owner: false,
        }),
    };
    Ok(List {
        query,
        page_size,
        view: View {
            history_length,
            artifacts,
        },
    })
}

/// A2A task states that nl2sh never gives a task.
const A2A_ONLY_STATES: [&str; 3] = [
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Obj {
        match v {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    fn msg(parts: Value) -> Obj {
        obj(json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": parts}}))
    }

    #[test]
    fn text_parts_join_with_newlines() {
        let s = send(&msg(
            json!([{"text": "a"}, {"text": "b", "mediaType": "text/plain"}]),
        ))
        .unwrap();
        assert_eq!(s.text, "a\nb");
        assert_eq!(s.message["parts"][1]["mediaType"], "text/plain");
        assert!(!s.return_immediately);
    }

    #[test]
    fn non_text_parts_and_bad_parts() {
        let e = send(&msg(json!([{"data": {"x": 1}}]))).unwrap_err();
        assert_eq!(e.code(), -32005);
        let e = send(&msg(json!([{"url": "http://x"}]))).unwrap_err();
        assert_eq!(e.code(), -32005);
        for bad in [
            json!([]),
            json!([{"text": 3}]),
            json!([{"text": "a", "data": 1}]),
            json!([{}]),
            json!(["a"]),
        ] {
            assert_eq!(send(&msg(bad.clone())).unwrap_err().code(), -32602, "{bad}");
        }
    }

    #[test]
    fn text_size_bounds() {
        let ok = "é".repeat(MAX_AGENT_TEXT_BYTES / 2);
        assert!(send(&msg(json!([{ "text": ok }]))).is_ok());
        let over = format!("{ok}x");
        assert_eq!(
            send(&msg(json!([{ "text": over }]))).unwrap_err().code(),
            -32602
        );
        assert_eq!(
            send(&msg(json!([{"text": ""}]))).unwrap_err().code(),
            -32602
        );
        // Two parts of 4096 bytes plus the newline: 8193.
        let half = "a".repeat(4096);
        let e = send(&msg(json!([{ "text": half }, { "text": half }]))).unwrap_err();
        assert_eq!(e.code(), -32602);
    }

    #[test]
    fn list_reads_int32_as_number_or_string() {
        let l = list(&obj(json!({"pageSize": "7", "historyLength": 2}))).unwrap();
        assert_eq!(l.page_size, 7);
        assert_eq!(l.view.history_length, Some(2));
        assert!(!l.view.artifacts);
        for bad in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": "x"}),
            json!({"pageSize": 1.5}),
            json!({"status": "DONE"}),
            json!({"historyLength": -1}),
            json!({"statusTimestampAfter": "yesterday"}),
        ] {
            assert_eq!(list(&obj(bad.clone())).unwrap_err().code(), -32602, "{bad}");
        }
        let none = list(&obj(json!({"status": "TASK_STATE_REJECTED"}))).unwrap();
        assert!(none.query.is_none());
        let l = list(&obj(
            json!({"statusTimestampAfter": "1970-01-01T00:00:01Z"}),
        ))
        .unwrap();
        assert_eq!(l.query.unwrap().updated_after_ms, Some(999));
    }
}
