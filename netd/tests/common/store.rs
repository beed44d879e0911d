//! An in-process stand-in for approvald's task store, over a real `NetdApprovald`
//! channel pair: HashMap-backed, with the store's semantics (ListTasks newest update
//! first, then id descending; filters; opaque page tokens, bad ones refused;
//! `updated_after_ms` strictly after), and the checks approvald makes on what it is given
//! (columns agree with the document, size). It also records what it was given, and any
//! document or session holding a forbidden string (the protocol token).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use nl2sh_netd::store::StoreClient;
use nl2sh_proto::channels::{
    ContextId, StoreErrorKind, StoreRequest, StoreResponse, TaskId, TaskPage, TaskQuery,
    TaskRecord, TaskState,
};
use nl2sh_proto::limits::MAX_TASK_DOCUMENT_BYTES;
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdApprovald};
use serde_json::Value;

#[derive(Default)]
pub struct Data {
    pub tasks: HashMap<TaskId, TaskRecord>,
    pub sessions: HashMap<ContextId, String>,
    /// Every PutTask, in order: (id, state).
    pub puts: Vec<(TaskId, TaskState)>,
    /// What approvald would have refused, or a secret found.
    pub violations: Vec<String>,
    /// Strings no stored document or session may contain.
    pub forbidden: Vec<String>,
    /// Answer every PutTask with `Failed { Storage }`.
    pub refuse_puts: bool,
}

#[derive(Clone, Default)]
pub struct FakeStore {
    pub data: Arc<Mutex<Data>>,
}

impl FakeStore {
    pub fn new(forbidden: &[&str]) -> Self {
        let store = Self::default();
        store.data().forbidden = forbidden.iter().map(|s| s.to_string()).collect();
        store
    }

    pub fn data(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap()
    }

    /// Serve the store on a fresh channel; netd's client for it.
    pub async fn client(&self) -> StoreClient {
        let (ours, theirs) = pair::<NetdApprovald>().unwrap();
        let me = self.clone();
        tokio::spawn(rpc::serve(theirs, move |req: StoreRequest| {
            let answer = me.answer(req);
            async move { Ok(answer) }
        }));
        let (client, _end) = StoreClient::start(ours).await.unwrap();
        client
    }

    pub fn violations(&self) -> Vec<String> {
        self.data().violations.clone()
    }

    pub fn states_of(&self, id: &str) -> Vec<TaskState> {
        self.data()
            .puts
            .iter()
            .filter(|(t, _)| t.0 == id)
            .map(|(_, s)| *s)
            .collect()
    }

    pub fn stored(&self, id: &str) -> Option<Value> {
        let data = self.data();
        let record = data.tasks.get(&TaskId(id.to_string()))?;
        Some(serde_json::from_str(&record.document).unwrap())
    }

    pub fn session(&self, context: &str) -> Option<String> {
        self.data()
            .sessions
            .get(&ContextId(context.to_string()))
            .cloned()
    }

    /// Put a record straight into the store (as an earlier netd would have).
    pub fn seed(&self, record: TaskRecord) {
        self.data().tasks.insert(record.id.clone(), record);
    }

    fn answer(&self, req: StoreRequest) -> StoreResponse {
        let mut data = self.data();
        match req {
            StoreRequest::Ping => StoreResponse::Pong,
            StoreRequest::PutTask(record) => {
                data.puts.push((record.id.clone(), record.state));
                if data.refuse_puts {
                    return failed(StoreErrorKind::Storage, "disk full (test)");
                }
                if record.document.len() > MAX_TASK_DOCUMENT_BYTES {
                    return failed(StoreErrorKind::TooLarge, "document over 4 MiB");
                }
                if let Err(why) = agrees(&record) {
                    data.violations.push(why);
                    return failed(StoreErrorKind::Invalid, "columns disagree");
                }
                let leaked = data
                    .forbidden
                    .iter()
                    .any(|secret| record.document.contains(secret.as_str()));
                if leaked {
                    data.violations
                        .push(format!("task {} stored with a secret", record.id));
                }
                data.tasks.insert(record.id.clone(), record);
                StoreResponse::Stored
            }
            StoreRequest::GetTask { id } => StoreResponse::Task(data.tasks.get(&id).cloned()),
            StoreRequest::ListTasks(query) => list(&data, &query),
            StoreRequest::LoadSession { context_id } => {
                StoreResponse::Session(data.sessions.get(&context_id).cloned())
            }
            StoreRequest::SaveSession {
                context_id,
                messages_json,
            } => {
                if !matches!(serde_json::from_str(&messages_json), Ok(Value::Array(_))) {
                    data.violations
                        .push("a session that is not a JSON array".to_string());
                }
                if data
                    .forbidden
                    .iter()
                    .any(|secret| messages_json.contains(secret.as_str()))
                {
                    data.violations.push("a session saved with a secret".into());
                }
                data.sessions.insert(context_id, messages_json);
                StoreResponse::Stored
            }
        }
    }
}

fn failed(kind: StoreErrorKind, message: &str) -> StoreResponse {
    StoreResponse::Failed {
        kind,
        message: message.into(),
    }
}

/// approvald's check: the columns say what the document says.
fn agrees(record: &TaskRecord) -> Result<(), String> {
    let doc: Value = serde_json::from_str(&record.document)
        .map_err(|e| format!("task {} document is not JSON: {e}", record.id))?;
    let ts = doc["status"]["timestamp"].as_str().unwrap_or("");
    let ms = chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("task {}: bad timestamp {ts:?}", record.id))?;
    let checks = [
        (doc["id"] == record.id.0.as_str(), "id"),
        (
            doc["contextId"] == record.context_id.0.as_str(),
            "contextId",
        ),
        (doc["status"]["state"] == record.state.as_a2a(), "state"),
        (ms == record.updated_ms, "timestamp"),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, what)) => Err(format!("task {}: column {what} disagrees", record.id)),
        None => Ok(()),
    }
}

fn filters_hash(q: &TaskQuery) -> u64 {
    let mut h = DefaultHasher::new();
    q.context_id.hash(&mut h);
    q.state.map(TaskState::as_a2a).hash(&mut h);
    q.updated_after_ms.hash(&mut h);
    h.finish()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// `v1.<updated_ms>.<hex id>.<filters>`: the last task of the page before.
fn cursor(token: &str, q: &TaskQuery) -> Option<(i64, String)> {
    let mut parts = token.split('.');
    if parts.next()? != "v1" {
        return None;
    }
    let updated: i64 = parts.next()?.parse().ok()?;
    let id = unhex(parts.next()?)?;
    let filters: u64 = parts.next()?.parse().ok()?;
    (parts.next().is_none() && filters == filters_hash(q)).then_some((updated, id))
}

fn list(data: &Data, q: &TaskQuery) -> StoreResponse {
    let mut matching: Vec<&TaskRecord> = data
        .tasks
        .values()
        .filter(|r| q.context_id.as_ref().is_none_or(|c| r.context_id == *c))
        .filter(|r| q.state.is_none_or(|s| r.state == s))
        .filter(|r| q.updated_after_ms.is_none_or(|after| r.updated_ms > after))
        .collect();
    matching.sort_by(|a, b| (b.updated_ms, &b.id.0).cmp(&(a.updated_ms, &a.id.0)));
    let total_size = matching.len() as u64;
    let start = match &q.page_token {
        None => 0,
        Some(token) => match cursor(token, q) {
            Some((updated, id)) => matching
                .iter()
                .position(|r| (r.updated_ms, r.id.0.as_str()) < (updated, id.as_str()))
                .unwrap_or(matching.len()),
            None => return failed(StoreErrorKind::BadPageToken, "not a page token"),
        },
    };
    let page: Vec<TaskRecord> = matching
        .iter()
        .skip(start)
        .take(q.page_size as usize)
        .map(|r| (*r).clone())
        .collect();
    let more = start + page.len() < matching.len();
    let next_page_token = match (more, page.last()) {
        (true, Some(last)) => format!(
            "v1.{}.{}.{}",
            last.updated_ms,
            hex(last.id.0.as_bytes()),
            filters_hash(q)
        ),
        _ => String::new(),
    };
    StoreResponse::Tasks(TaskPage {
        tasks: page,
        total_size,
        next_page_token,
    })
}
