//! approvald's real task store (`TaskStore` and its `answer_store` dispatch, in a
//! temporary state directory) on a real `NetdApprovald` channel pair, behind a thin
//! proxy. The proxy keeps no tasks and pages nothing: it records what netd sent (each
//! PutTask's state; any document or session holding a forbidden string, the protocol
//! token; anything the store refused as invalid), and injects the faults a test asks for
//! ([`Faults`]), which the real store cannot produce on demand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nl2sh_approvald::dispatch::answer_store;
use nl2sh_approvald::store::tasks::TaskStore;
use nl2sh_approvald::store::Store;
use nl2sh_netd::store::StoreClient;
use nl2sh_proto::channels::{
    ContextId, StoreErrorKind, StoreRequest, StoreResponse, TaskId, TaskRecord, TaskState,
};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{pair, NetdApprovald};
use nl2sh_proto::Secret;
use serde_json::Value;

/// Faults the proxy injects.
#[derive(Default)]
pub struct Faults {
    /// Answer every PutTask with `Failed { Storage }` (a full disk), unstored.
    pub refuse_puts: bool,
    /// LoadSession of these contexts answers this text instead of asking the store (a
    /// damaged session file).
    pub sessions: HashMap<ContextId, String>,
}

/// What netd sent, as the proxy saw it.
#[derive(Default)]
struct Seen {
    /// Every PutTask, in order: (id, state).
    puts: Vec<(TaskId, TaskState)>,
    /// What the store refused as invalid, or a secret sent to it.
    violations: Vec<String>,
}

struct Shared {
    tasks: Arc<TaskStore>,
    /// The owner's Ask and cancels, as approvald hands them to netd.
    inbox: Arc<nl2sh_approvald::owner::asks::OwnerInbox>,
    /// Strings no document or session netd sends may contain.
    forbidden: Vec<String>,
    seen: Mutex<Seen>,
    faults: Mutex<Faults>,
    // The store's writer and its directory live as long as the proxy.
    _store: Store,
    _dir: tempfile::TempDir,
}

#[derive(Clone)]
pub struct StoreProxy {
    shared: Arc<Shared>,
}

impl StoreProxy {
    /// A fresh store in a temporary directory, redacting `forbidden` as approvald
    /// redacts the secrets it is given.
    pub fn new(forbidden: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let secrets: Vec<Secret> = forbidden
            .iter()
            .map(|s| Secret::new(s.to_string()))
            .collect();
        let tasks = Arc::new(store.tasks(&secrets).unwrap());
        Self {
            shared: Arc::new(Shared {
                tasks,
                inbox: Arc::default(),
                forbidden: forbidden.iter().map(|s| s.to_string()).collect(),
                seen: Mutex::new(Seen::default()),
                faults: Mutex::new(Faults::default()),
                _store: store,
                _dir: dir,
            }),
        }
    }

    /// Where the owner's work for netd waits (approvald's own inbox type).
    #[allow(dead_code)]
    pub fn inbox(&self) -> Arc<nl2sh_approvald::owner::asks::OwnerInbox> {
        self.shared.inbox.clone()
    }

    /// The store itself, as the owner's side of approvald reaches it.
    #[allow(dead_code)]
    pub fn tasks(&self) -> Arc<TaskStore> {
        self.shared.tasks.clone()
    }

    pub fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.shared.faults.lock().unwrap()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.shared.seen.lock().unwrap()
    }

    /// Serve the store on a fresh channel; netd's client for it.
    pub async fn client(&self) -> StoreClient {
        let (ours, theirs) = pair::<NetdApprovald>().unwrap();
        let me = self.clone();
        tokio::spawn(rpc::serve(theirs, move |req: StoreRequest| {
            let me = me.clone();
            async move { Ok(me.answer(req).await) }
        }));
        let (client, _end) = StoreClient::start(ours).await.unwrap();
        client
    }

    pub fn violations(&self) -> Vec<String> {
        self.seen().violations.clone()
    }

    /// The state of each PutTask of task `id` netd sent, in order.
    pub fn states_of(&self, id: &str) -> Vec<TaskState> {
        self.seen()
            .puts
            .iter()
            .filter(|(t, _)| t.0 == id)
            .map(|(_, s)| *s)
            .collect()
    }

    /// The task as the store holds it.
    pub async fn stored(&self, id: &str) -> Option<Value> {
        let record = self
            .shared
            .tasks
            .get(TaskId(id.to_string()))
            .await
            .unwrap()?;
        Some(serde_json::from_str(&record.document).unwrap())
    }

    /// The history of `context` as the store holds it.
    pub async fn session(&self, context: &str) -> Option<String> {
        self.shared
            .tasks
            .load_session(ContextId(context.to_string()))
            .await
            .unwrap()
    }

    /// Put a record straight into the store, with an id of the test's choosing (as an
    /// earlier netd would have left it).
    pub async fn seed(&self, record: TaskRecord) {
        let tasks = &self.shared.tasks;
        tasks.admit_for_test(record.id.clone(), record.context_id.clone());
        tasks.put(record).await.unwrap();
    }

    async fn answer(&self, req: StoreRequest) -> StoreResponse {
        match &req {
            StoreRequest::PutTask(record) => {
                self.seen().puts.push((record.id.clone(), record.state));
                if self.faults().refuse_puts {
                    return StoreResponse::Failed {
                        kind: StoreErrorKind::Storage,
                        message: "disk full (test)".into(),
                    };
                }
                if let Err(why) = timestamp_agrees(record) {
                    self.seen().violations.push(why);
                }
                if self.holds_secret(&record.document) {
                    let why = format!("task {} sent with a secret", record.id);
                    self.seen().violations.push(why);
                }
            }
            StoreRequest::SaveSession { messages_json, .. } if self.holds_secret(messages_json) => {
                self.seen()
                    .violations
                    .push("a session sent with a secret".into());
            }
            StoreRequest::LoadSession { context_id } => {
                if let Some(text) = self.faults().sessions.get(context_id) {
                    return StoreResponse::Session(Some(text.clone()));
                }
            }
            _ => {}
        }
        let what = match &req {
            StoreRequest::PutTask(record) => format!("task {}", record.id),
            StoreRequest::SaveSession { context_id, .. } => format!("session {context_id}"),
            _ => String::new(),
        };
        let answer = answer_store(&self.shared.tasks, &self.shared.inbox, req).await;
        if let StoreResponse::Failed {
            kind: StoreErrorKind::Invalid,
            message,
        } = &answer
        {
            if !what.is_empty() {
                self.seen()
                    .violations
                    .push(format!("{what} refused: {message}"));
            }
        }
        answer
    }

    fn holds_secret(&self, text: &str) -> bool {
        self.shared
            .forbidden
            .iter()
            .any(|secret| text.contains(secret.as_str()))
    }
}

/// netd keeps `updated_ms` and the document's `status.timestamp` one instant (the store
/// orders by the column; clients read the document).
fn timestamp_agrees(record: &TaskRecord) -> Result<(), String> {
    let doc: Value = serde_json::from_str(&record.document)
        .map_err(|e| format!("task {} document is not JSON: {e}", record.id))?;
    let ts = doc["status"]["timestamp"].as_str().unwrap_or("");
    let ms = chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("task {}: bad timestamp {ts:?}", record.id))?;
    if ms != record.updated_ms {
        return Err(format!("task {}: column updated_ms disagrees", record.id));
    }
    Ok(())
}
