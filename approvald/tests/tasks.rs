//! netd's store channel over a socketpair: tasks (put, get, list, retention, restart),
//! sessions, and redaction on disk.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use nl2sh_approvald::dispatch::{answer_cli, serve_netd, LocalOwner};
use nl2sh_approvald::owner::asks::OwnerInbox;
use nl2sh_approvald::store::sessions::{session_file_name, SESSIONS_DIR};
use nl2sh_approvald::store::tasks::TaskStore;
use nl2sh_approvald::store::{Store, StoreError, DB_FILE};
use nl2sh_proto::channels::{
    CliErrorKind, CliRequest, CliResponse, ContextId, OwnerWork, StoreErrorKind, StoreRequest,
    StoreResponse, TaskId, TaskPage, TaskQuery, TaskRecord, TaskState,
};
use nl2sh_proto::limits::{
    MAX_ID_BYTES, MAX_RETAINED_DOCUMENT_BYTES, MAX_RETAINED_TASKS, MAX_TASK_DOCUMENT_BYTES,
};
use nl2sh_proto::private_dir::PrivateDirError;
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::secret::Secret;
use nl2sh_proto::topology::{pair, NetdApprovald};
use nl2sh_proto::FrameError;

type Client = RpcClient<NetdApprovald>;

/// A store in a temporary state directory and netd's end of its channel.
struct Rig {
    dir: tempfile::TempDir,
    store: Store,
    tasks: Arc<TaskStore>,
    client: Client,
    served: JoinHandle<Result<(), FrameError>>,
    inbox: Arc<OwnerInbox>,
}

impl Rig {
    async fn new() -> Rig {
        Rig::open(tempfile::tempdir().unwrap(), &[]).await
    }

    async fn open(dir: tempfile::TempDir, secrets: &[&str]) -> Rig {
        let store = Store::open(dir.path()).unwrap();
        let secrets: Vec<Secret> = secrets.iter().map(|s| Secret::new(s.to_string())).collect();
        let tasks = Arc::new(store.tasks(&secrets).unwrap());
        let (asker, answerer) = pair::<NetdApprovald>().unwrap();
        let inbox = Arc::new(OwnerInbox::default());
        let served = tokio::spawn(serve_netd(answerer, tasks.clone(), inbox.clone()));
        let (client, _) = Client::start(asker).await.unwrap();
        Rig {
            dir,
            store,
            tasks,
            client,
            served,
            inbox,
        }
    }

    /// Stop serving and close the store (as approvald stopping does); the directory stays.
    async fn close(self) -> tempfile::TempDir {
        drop(self.client);
        self.served.await.unwrap().unwrap();
        self.store.flush().await.unwrap();
        let stopped = self.store.writer_stopped();
        drop(self.store);
        drop(self.tasks);
        // The writer thread closes its connection once the last handle is gone.
        stopped.wait().await;
        self.dir
    }

    async fn call(&self, req: StoreRequest) -> StoreResponse {
        self.client.call(&req).await.unwrap()
    }

    /// PutTask of `record`, its ids taken as created (CreateTask) first: these tests
    /// choose ids, since a page's order among tasks of one update time is by id.
    async fn put(&self, record: TaskRecord) -> Result<(), StoreErrorKind> {
        self.tasks
            .admit_for_test(record.id.clone(), record.context_id.clone());
        match self.call(StoreRequest::PutTask(record)).await {
            StoreResponse::Stored => Ok(()),
            StoreResponse::Failed { kind, .. } => Err(kind),
            other => panic!("no answer to PutTask: {other:?}"),
        }
    }

    async fn put_ok(&self, record: TaskRecord) {
        let id = record.id.clone();
        assert_eq!(self.put(record).await, Ok(()), "{id}");
    }

    async fn get(&self, id: &str) -> Option<TaskRecord> {
        match self.call(StoreRequest::GetTask { id: task_id(id) }).await {
            StoreResponse::Task(task) => task,
            other => panic!("no answer to GetTask: {other:?}"),
        }
    }

    async fn list(&self, query: TaskQuery) -> Result<TaskPage, (StoreErrorKind, String)> {
        match self.call(StoreRequest::ListTasks(query)).await {
            StoreResponse::Tasks(page) => Ok(page),
            StoreResponse::Failed { kind, message } => Err((kind, message)),
            other => panic!("no answer to ListTasks: {other:?}"),
        }
    }

    /// Every page of `query` from the first; the pages.
    async fn walk(&self, mut query: TaskQuery) -> Vec<TaskPage> {
        query.page_token = None;
        let mut pages = Vec::new();
        loop {
            let page = self.list(query.clone()).await.unwrap();
            let next = page.next_page_token.clone();
            pages.push(page);
            if next.is_empty() {
                return pages;
            }
            assert!(pages.len() < 1000, "the walk does not end");
            query.page_token = Some(next);
        }
    }

    async fn load(&self, context: &str) -> Result<Option<String>, StoreErrorKind> {
        match self
            .call(StoreRequest::LoadSession {
                context_id: ContextId(context.into()),
            })
            .await
        {
            StoreResponse::Session(s) => Ok(s),
            StoreResponse::Failed { kind, .. } => Err(kind),
            other => panic!("no answer to LoadSession: {other:?}"),
        }
    }

    async fn save(&self, context: &str, messages_json: &str) -> Result<(), StoreErrorKind> {
        match self
            .call(StoreRequest::SaveSession {
                context_id: ContextId(context.into()),
                messages_json: messages_json.into(),
            })
            .await
        {
            StoreResponse::Stored => Ok(()),
            StoreResponse::Failed { kind, .. } => Err(kind),
            other => panic!("no answer to SaveSession: {other:?}"),
        }
    }

    fn sessions(&self) -> std::path::PathBuf {
        self.dir.path().join(SESSIONS_DIR)
    }

    /// Ids of the stored tasks, straight from the database.
    fn stored_ids(&self) -> Vec<String> {
        let conn = rusqlite::Connection::open(self.dir.path().join(DB_FILE)).unwrap();
        let mut stmt = conn.prepare("SELECT id FROM tasks ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

fn task_id(id: &str) -> TaskId {
    TaskId(id.into())
}

fn timestamp(ms: i64) -> String {
    nl2sh_proto::clock::rfc3339_millis(ms)
}

/// An A2A task document.
fn document(id: &str, context: &str, state: TaskState, ms: i64, text: &str) -> Value {
    json!({
        "id": id,
        "contextId": context,
        "status": { "state": state.as_a2a(), "timestamp": timestamp(ms) },
        "history": [{
            "messageId": format!("m-{id}"),
            "role": "ROLE_USER",
            "parts": [{ "text": text }],
        }],
        "artifacts": [],
    })
}

fn record_with(id: &str, context: &str, state: TaskState, ms: i64, doc: &Value) -> TaskRecord {
    TaskRecord {
        id: task_id(id),
        context_id: ContextId(context.into()),
        state,
        updated_ms: ms,
        document: doc.to_string(),
    }
}

fn record(id: &str, context: &str, state: TaskState, ms: i64) -> TaskRecord {
    record_with(
        id,
        context,
        state,
        ms,
        &document(id, context, state, ms, "list the files"),
    )
}

/// A record whose document is exactly `bytes` long.
fn record_of_size(id: &str, state: TaskState, ms: i64, bytes: usize) -> TaskRecord {
    let mut doc = document(id, "ctx", state, ms, "");
    doc["pad"] = json!("");
    let base = doc.to_string().len();
    doc["pad"] = json!("x".repeat(bytes - base));
    let r = record_with(id, "ctx", state, ms, &doc);
    assert_eq!(r.document.len(), bytes);
    r
}

fn query(page_size: u32) -> TaskQuery {
    TaskQuery {
        context_id: None,
        state: None,
        updated_after_ms: None,
        page_size,
        page_token: None,
        include_owner: false,
    }
}

fn ids(tasks: &[TaskRecord]) -> Vec<String> {
    tasks.iter().map(|t| t.id.0.clone()).collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn a_task_round_trips_and_updates() {
    let rig = Rig::new().await;
    assert!(matches!(
        rig.call(StoreRequest::Ping).await,
        StoreResponse::Pong
    ));
    assert_eq!(rig.get("t1").await, None);
    let working = record("t1", "c1", TaskState::Working, 1_000);
    rig.put_ok(working.clone()).await;
    assert_eq!(rig.get("t1").await, Some(working));
    let done = record("t1", "c1", TaskState::Completed, 2_000);
    rig.put_ok(done.clone()).await;
    assert_eq!(rig.get("t1").await, Some(done));
    assert_eq!(rig.get("t2").await, None);
    assert_eq!(rig.stored_ids(), ["t1"]);
}

impl Rig {
    async fn create(&self, context: Option<&str>) -> Result<(TaskId, ContextId), StoreErrorKind> {
        let context_id = context.map(|c| ContextId(c.into()));
        match self.call(StoreRequest::CreateTask { context_id }).await {
            StoreResponse::Created { id, context_id } => Ok((id, context_id)),
            StoreResponse::Failed { kind, .. } => Err(kind),
            other => panic!("no answer to CreateTask: {other:?}"),
        }
    }

    /// PutTask as netd sends it: no ids taken as created first.
    async fn put_as_sent(&self, record: TaskRecord) -> Result<(), StoreErrorKind> {
        match self.call(StoreRequest::PutTask(record)).await {
            StoreResponse::Stored => Ok(()),
            StoreResponse::Failed { kind, .. } => Err(kind),
            other => panic!("no answer to PutTask: {other:?}"),
        }
    }
}

fn is_uuid_v4(id: &str) -> bool {
    id.len() == 36
        && id.chars().enumerate().all(|(n, c)| match n {
            8 | 13 | 18 | 23 => c == '-',
            14 => c == '4',
            19 => "89ab".contains(c),
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

#[tokio::test]
async fn the_store_mints_task_ids_and_contexts_when_none_is_given() {
    let rig = Rig::open(tempfile::tempdir().unwrap(), &["s3cr3t-token"]).await;
    let (id, context) = rig.create(None).await.unwrap();
    assert!(is_uuid_v4(&id.0), "{id}");
    assert!(is_uuid_v4(&context.0), "{context}");
    assert_ne!(id.0, context.0);
    // A client's context is continued as given.
    let (other, kept) = rig.create(Some("client-ctx")).await.unwrap();
    assert_eq!(kept.0, "client-ctx");
    assert!(is_uuid_v4(&other.0) && other != id);
    // Created, not stored: nothing is in the table until the first write.
    assert!(rig.stored_ids().is_empty());
    assert_eq!(rig.get(&id.0).await, None);
    // A context the store would refuse in a record is refused here too.
    let long = "c".repeat(MAX_ID_BYTES + 1);
    for bad in ["", long.as_str(), "ctx-s3cr3t-token"] {
        assert_eq!(
            rig.create(Some(bad)).await,
            Err(StoreErrorKind::Invalid),
            "{bad:?}"
        );
    }
    // The first write carries the created ids; later ones update the task.
    let submitted = record(&id.0, &context.0, TaskState::Submitted, 1);
    assert_eq!(rig.put_as_sent(submitted).await, Ok(()));
    let working = record(&id.0, &context.0, TaskState::Working, 2);
    assert_eq!(rig.put_as_sent(working.clone()).await, Ok(()));
    assert_eq!(rig.get(&id.0).await, Some(working));
}

#[tokio::test]
async fn a_task_the_store_did_not_create_is_refused() {
    let rig = Rig::new().await;
    // An id netd made up.
    let invented = record("made-up", "c", TaskState::Submitted, 1);
    assert_eq!(
        rig.put_as_sent(invented).await,
        Err(StoreErrorKind::Invalid)
    );
    // A created id in another context than it was created in.
    let (id, context) = rig.create(Some("mine")).await.unwrap();
    let moved = record(&id.0, "theirs", TaskState::Submitted, 1);
    assert_eq!(rig.put_as_sent(moved).await, Err(StoreErrorKind::Invalid));
    assert!(rig.stored_ids().is_empty());
    // A created id is good for one task: once written, it is an update like any other.
    rig.put_as_sent(record(&id.0, &context.0, TaskState::Completed, 2))
        .await
        .unwrap();
    assert_eq!(rig.stored_ids(), std::slice::from_ref(&id.0));
    // Ids are forgotten by a restart: a created id not written before it is refused.
    let (lost, lost_context) = rig.create(None).await.unwrap();
    let rig = Rig::open(rig.close().await, &[]).await;
    let late = record(&lost.0, &lost_context.0, TaskState::Submitted, 3);
    assert_eq!(rig.put_as_sent(late).await, Err(StoreErrorKind::Invalid));
    // Tasks stored before the restart are still updated (none here is running).
    assert_eq!(rig.stored_ids(), [id.0]);
}

#[tokio::test]
async fn bad_documents_and_ids_are_refused_and_store_nothing() {
    let rig = Rig::new().await;
    // The limits themselves are accepted.
    rig.put_ok(record_of_size(
        "big",
        TaskState::Working,
        1,
        MAX_TASK_DOCUMENT_BYTES,
    ))
    .await;
    let longest = "i".repeat(MAX_ID_BYTES);
    rig.put_ok(record(
        &longest,
        &"c".repeat(MAX_ID_BYTES),
        TaskState::Working,
        1,
    ))
    .await;
    assert_eq!(
        rig.put(record_of_size(
            "bigger",
            TaskState::Working,
            1,
            MAX_TASK_DOCUMENT_BYTES + 1
        ))
        .await,
        Err(StoreErrorKind::TooLarge)
    );

    let good = record("t", "c", TaskState::Working, 5);
    let doc = document("t", "c", TaskState::Working, 5, "hi");
    let mut cases: Vec<(&str, TaskRecord)> = Vec::new();
    let mut r = good.clone();
    r.id = task_id("other");
    cases.push(("the document's id differs", r));
    let mut r = good.clone();
    r.context_id = ContextId("other".into());
    cases.push(("the document's contextId differs", r));
    let mut r = good.clone();
    r.state = TaskState::Submitted;
    cases.push(("the document's state differs", r));
    let mut d = doc.clone();
    d["status"]["state"] = json!("working");
    cases.push((
        "a state that is no A2A name",
        record_with("t", "c", TaskState::Working, 5, &d),
    ));
    let mut d = doc.clone();
    d.as_object_mut().unwrap().remove("status");
    cases.push((
        "no status",
        record_with("t", "c", TaskState::Working, 5, &d),
    ));
    let mut d = doc.clone();
    d["id"] = json!(7);
    cases.push((
        "a numeric id",
        record_with("t", "c", TaskState::Working, 5, &d),
    ));
    let mut r = good.clone();
    r.document = "[1, 2]".into();
    cases.push(("an array", r));
    let mut r = good.clone();
    r.document = "{\"id\": \"t\",".into();
    cases.push(("no JSON", r));
    let mut r = good.clone();
    r.document = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    cases.push(("nested past serde_json's depth limit", r));
    cases.push(("an empty id", record("", "c", TaskState::Working, 5)));
    cases.push(("an empty context", record("t", "", TaskState::Working, 5)));
    let too_long = "i".repeat(MAX_ID_BYTES + 1);
    cases.push((
        "an id too long",
        record(&too_long, "c", TaskState::Working, 5),
    ));
    cases.push((
        "a context id too long",
        record("t", &too_long, TaskState::Working, 5),
    ));
    for (why, r) in cases {
        assert_eq!(rig.put(r).await, Err(StoreErrorKind::Invalid), "{why}");
    }
    assert_eq!(rig.get("t").await, None);
    let mut stored = rig.stored_ids();
    stored.sort();
    let mut expected = vec!["big".to_string(), longest];
    expected.sort();
    assert_eq!(stored, expected);
    // Reading with a bad id is refused too, and the store goes on.
    for bad in [String::new(), too_long] {
        assert!(matches!(
            rig.call(StoreRequest::GetTask { id: TaskId(bad) }).await,
            StoreResponse::Failed {
                kind: StoreErrorKind::Invalid,
                ..
            }
        ));
    }
    rig.put_ok(good).await;
}

#[tokio::test]
async fn a_finished_task_never_changes_and_a_task_keeps_its_context() {
    let rig = Rig::new().await;
    rig.put_ok(record("t", "c", TaskState::Working, 1)).await;
    assert_eq!(
        rig.put(record("t", "other", TaskState::Working, 2)).await,
        Err(StoreErrorKind::Invalid)
    );
    for terminal in [TaskState::Completed, TaskState::Failed, TaskState::Canceled] {
        let id = terminal.as_a2a();
        rig.put_ok(record(id, "c", TaskState::Working, 1)).await;
        let done = record(id, "c", terminal, 2);
        rig.put_ok(done.clone()).await;
        // A retry of the same write changes nothing and is no error.
        rig.put_ok(done.clone()).await;
        let mut changed = done.clone();
        changed.document = document(id, "c", terminal, 2, "another text").to_string();
        for again in [
            record(id, "c", TaskState::Working, 3),
            record(id, "c", TaskState::Completed, 3),
            record(id, "c", terminal, 3),
            changed,
        ] {
            assert_eq!(rig.put(again).await, Err(StoreErrorKind::Invalid));
        }
        assert_eq!(rig.get(id).await, Some(done));
    }
}

#[tokio::test]
async fn a_walk_over_250_tasks_in_pages_of_7_returns_each_once_in_order() {
    let rig = Rig::new().await;
    // Running tasks, so retention keeps all 250 (finished ones would be pruned to 200);
    // update times shared by three tasks each, so ties are ordered by id.
    let mut expected = Vec::new();
    for i in 0..250i64 {
        let state = if i % 2 == 0 {
            TaskState::Working
        } else {
            TaskState::Submitted
        };
        let id = format!("task-{:03}", (i * 37) % 250);
        let ms = 1_700_000_000_000 + i / 3;
        rig.put_ok(record(&id, &format!("ctx-{}", i % 5), state, ms))
            .await;
        expected.push((ms, id));
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();

    let started = Instant::now();
    let pages = rig.walk(query(7)).await;
    let took = started.elapsed();
    println!(
        "walk over 250 tasks in pages of 7: {} pages in {:.1} ms ({:.2} ms a page)",
        pages.len(),
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3 / pages.len() as f64
    );
    assert_eq!(pages.len(), 36);
    for (n, page) in pages.iter().enumerate() {
        assert_eq!(page.total_size, 250);
        assert_eq!(page.tasks.len(), if n < 35 { 7 } else { 250 - 35 * 7 });
        assert_eq!(page.next_page_token.is_empty(), n == 35);
    }
    let walked: Vec<String> = pages.iter().flat_map(|p| ids(&p.tasks)).collect();
    assert_eq!(walked, expected);

    // Filters: a context, a state, a time; and all three.
    let mut q = query(7);
    q.context_id = Some(ContextId("ctx-3".into()));
    let pages = rig.walk(q.clone()).await;
    assert!(pages.iter().all(|p| p.total_size == 50));
    let walked: Vec<TaskRecord> = pages.into_iter().flat_map(|p| p.tasks).collect();
    assert_eq!(walked.len(), 50);
    assert!(walked.iter().all(|t| t.context_id.0 == "ctx-3"));
    q.state = Some(TaskState::Working);
    // Contexts i % 5 == 3 and states i % 2 == 0: i % 10 == 8.
    let walked: Vec<TaskRecord> = rig
        .walk(q.clone())
        .await
        .into_iter()
        .flat_map(|p| p.tasks)
        .collect();
    assert_eq!(walked.len(), 25);
    assert!(walked.iter().all(|t| t.state == TaskState::Working));
    let cut = 1_700_000_000_000 + 200 / 3;
    q.updated_after_ms = Some(cut);
    let page = rig.list(q.clone()).await.unwrap();
    // i in 201..250 with i % 10 == 8: 208, 218, 228, 238, 248 (i = 200 has ms == cut).
    assert_eq!(page.total_size, 5);
    assert_eq!(page.tasks.len(), 5);
    assert_eq!(page.next_page_token, "");
    assert!(page.tasks.iter().all(|t| t.updated_ms > cut));
    let mut q = query(100);
    q.state = Some(TaskState::Completed);
    let none = rig.list(q).await.unwrap();
    assert_eq!((none.tasks.len(), none.total_size), (0, 0));
    assert_eq!(none.next_page_token, "");
}

#[tokio::test]
async fn page_sizes_and_tokens_are_checked() {
    let rig = Rig::new().await;
    for i in 0..10 {
        rig.put_ok(record(&format!("t{i}"), "c", TaskState::Working, i))
            .await;
    }
    for size in [0, 101, u32::MAX] {
        let (kind, message) = rig.list(query(size)).await.unwrap_err();
        assert_eq!(kind, StoreErrorKind::Invalid);
        assert!(message.contains("page_size"), "{message}");
    }
    assert_eq!(rig.list(query(1)).await.unwrap().tasks.len(), 1);
    assert_eq!(rig.list(query(100)).await.unwrap().tasks.len(), 10);

    let first = rig.list(query(3)).await.unwrap();
    let token = first.next_page_token.clone();
    assert!(!token.is_empty());
    let with = |token: &str, q: TaskQuery| TaskQuery {
        page_token: Some(token.to_string()),
        ..q
    };
    // The same filters may change the page size.
    let second = rig.list(with(&token, query(5))).await.unwrap();
    assert_eq!(ids(&second.tasks), ["t6", "t5", "t4", "t3", "t2"]);

    let mut tampered = token.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'a' { b'b' } else { b'a' };
    let tampered = String::from_utf8(tampered).unwrap();
    let mut other_filters = Vec::new();
    let mut q = query(3);
    q.context_id = Some(ContextId("c".into()));
    other_filters.push(q);
    let mut q = query(3);
    q.state = Some(TaskState::Working);
    other_filters.push(q);
    let mut q = query(3);
    q.updated_after_ms = Some(-1);
    other_filters.push(q);
    for q in other_filters {
        // The same tasks match, but the token was issued for other filters.
        assert_eq!(rig.list(q.clone()).await.unwrap().total_size, 10);
        let (kind, _) = rig.list(with(&token, q)).await.unwrap_err();
        assert_eq!(kind, StoreErrorKind::BadPageToken);
    }
    // An empty token asks for the first page (ProtoJSON cannot tell it from none).
    assert_eq!(rig.list(with("", query(3))).await.unwrap(), first);
    let junk = [
        tampered,
        "not a token".into(),
        "00".into(),
        token[..token.len() - 2].to_string(),
        format!("{token}00"),
        "0".repeat(100_000),
    ];
    for bad in junk {
        let (kind, _) = rig.list(with(&bad, query(3))).await.unwrap_err();
        assert_eq!(kind, StoreErrorKind::BadPageToken, "{bad:.60}");
    }
    // Another store (another approvald, or this one after a restart) did not issue it.
    let other = Rig::new().await;
    for i in 0..10 {
        other
            .put_ok(record(&format!("t{i}"), "c", TaskState::Working, i))
            .await;
    }
    let (kind, _) = other.list(with(&token, query(3))).await.unwrap_err();
    assert_eq!(kind, StoreErrorKind::BadPageToken);
}

#[tokio::test]
async fn a_page_holds_what_fits_a_frame_and_the_walk_the_rest() {
    let rig = Rig::new().await;
    let size = 3 * 1024 * 1024;
    for i in 0..3 {
        rig.put_ok(record_of_size(
            &format!("t{i}"),
            TaskState::Working,
            i,
            size,
        ))
        .await;
    }
    let pages = rig.walk(query(100)).await;
    assert_eq!(pages.len(), 3);
    for page in &pages {
        assert_eq!(page.tasks.len(), 1);
        assert_eq!(page.total_size, 3);
    }
    let walked: Vec<String> = pages.iter().flat_map(|p| ids(&p.tasks)).collect();
    assert_eq!(walked, ["t2", "t1", "t0"]);
}

#[tokio::test]
async fn retention_prunes_the_oldest_finished_tasks_past_200_and_never_a_running_one() {
    let rig = Rig::new().await;
    // Running tasks older than everything else.
    for i in 0..10 {
        let state = if i % 2 == 0 {
            TaskState::Working
        } else {
            TaskState::Submitted
        };
        rig.put_ok(record(&format!("run-{i}"), "c", state, i)).await;
    }
    // 200 finished ones, three to an update time: ties go by id.
    for i in 0..200i64 {
        let state = [TaskState::Completed, TaskState::Failed, TaskState::Canceled][i as usize % 3];
        let id = format!("done-{i:03}");
        rig.put_ok(record(&id, "c", state, 1_000 + i / 3)).await;
    }
    let stored = rig.stored_ids();
    assert_eq!(stored.len(), MAX_RETAINED_TASKS);
    for i in 0..10 {
        assert!(stored.contains(&format!("run-{i}")), "run-{i} was pruned");
    }
    // The ten oldest finished ones went, oldest first.
    for i in 0..200 {
        let id = format!("done-{i:03}");
        assert_eq!(stored.contains(&id), i >= 10, "{id}");
    }
    // At equal update times the smaller id is the older: of done-009..011 (time 1003),
    // done-009 went above, and done-010 goes before done-011.
    rig.put_ok(record("done-200", "c", TaskState::Completed, 1_066))
        .await;
    let stored = rig.stored_ids();
    assert!(!stored.contains(&"done-010".to_string()));
    assert!(stored.contains(&"done-011".to_string()));

    // A task written with an old time is not pruned by its own write.
    rig.put_ok(record("ancient", "c", TaskState::Completed, -5))
        .await;
    let stored = rig.stored_ids();
    assert!(stored.contains(&"ancient".to_string()));
    assert!(!stored.contains(&"done-011".to_string()));
    assert_eq!(stored.len(), MAX_RETAINED_TASKS);
    // …but by the next one.
    rig.put_ok(record("newer", "c", TaskState::Completed, 5_000))
        .await;
    assert!(!rig.stored_ids().contains(&"ancient".to_string()));

    // Running tasks finishing become prunable like any other.
    let page = rig.list(query(100)).await.unwrap();
    assert_eq!(page.total_size, MAX_RETAINED_TASKS as u64);
}

#[tokio::test]
async fn retention_prunes_by_document_bytes() {
    let rig = Rig::new().await;
    let size = 4 * 1024 * 1024 - 100 * 1024;
    let fit = MAX_RETAINED_DOCUMENT_BYTES / size;
    assert_eq!(fit, 16);
    rig.put_ok(record_of_size("running", TaskState::Working, 0, size))
        .await;
    for i in 1..=fit {
        rig.put_ok(record_of_size(
            &format!("done-{i:02}"),
            TaskState::Completed,
            i as i64,
            size,
        ))
        .await;
    }
    // 17 documents do not fit: the oldest finished one went, not the older running one.
    let stored = rig.stored_ids();
    assert_eq!(stored.len(), fit);
    assert!(stored.contains(&"running".to_string()));
    assert!(!stored.contains(&"done-01".to_string()));
    assert!(stored.contains(&"done-02".to_string()));
    let conn = rusqlite::Connection::open(rig.dir.path().join(DB_FILE)).unwrap();
    let bytes: i64 = conn
        .query_row("SELECT sum(length(document)) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert!(bytes as usize <= MAX_RETAINED_DOCUMENT_BYTES);
}

#[tokio::test]
async fn running_tasks_cannot_grow_the_store_without_bound() {
    let rig = Rig::new().await;
    let ceiling = 2 * MAX_RETAINED_TASKS;
    for i in 0..ceiling {
        rig.put_ok(record(
            &format!("run-{i:03}"),
            "c",
            TaskState::Working,
            i as i64,
        ))
        .await;
    }
    assert_eq!(
        rig.put(record("one-more", "c", TaskState::Working, 0))
            .await,
        Err(StoreErrorKind::TooLarge)
    );
    // The tasks there go on: they can finish, and then make room.
    rig.put_ok(record("run-000", "c", TaskState::Completed, 1_000))
        .await;
    assert_eq!(rig.stored_ids().len(), ceiling);
    rig.put_ok(record("one-more", "c", TaskState::Working, 0))
        .await;
    let stored = rig.stored_ids();
    assert_eq!(stored.len(), ceiling);
    assert!(!stored.contains(&"run-000".to_string()));
}

#[tokio::test]
async fn a_restart_fails_running_tasks_and_leaves_finished_ones() {
    let rig = Rig::new().await;
    let states = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
    ];
    let mut before = Vec::new();
    for state in states {
        let r = record(state.as_a2a(), "c", state, 1_000);
        rig.put_ok(r.clone()).await;
        before.push(r);
    }
    let dir = rig.close().await;
    let started = nl2sh_proto::clock::now_unix_ms();
    let rig = Rig::open(dir, &[]).await;
    let mut message_ids = Vec::new();
    for old in &before {
        let now = rig.get(&old.id.0).await.unwrap();
        if old.state.is_terminal() {
            assert_eq!(&now, old, "a finished task changed");
            continue;
        }
        assert_eq!(now.state, TaskState::Failed);
        assert!(now.updated_ms >= started, "{}", now.updated_ms);
        let doc: Value = serde_json::from_str(&now.document).unwrap();
        let was: Value = serde_json::from_str(&old.document).unwrap();
        // Everything but the status is kept.
        assert_eq!(doc["history"], was["history"]);
        assert_eq!(doc["id"], was["id"]);
        assert_eq!(doc["contextId"], was["contextId"]);
        let status = &doc["status"];
        assert_eq!(status["state"], "TASK_STATE_FAILED");
        assert_eq!(status["timestamp"], timestamp(now.updated_ms));
        assert!(status["timestamp"].as_str().unwrap().ends_with('Z'));
        let message = &status["message"];
        assert_eq!(message["role"], "ROLE_AGENT");
        assert_eq!(
            message["parts"],
            json!([{ "text": "nl2sh restarted while this task was running; it was not resumed or replayed" }])
        );
        message_ids.push(message["messageId"].as_str().unwrap().to_string());
    }
    assert_eq!(message_ids.len(), 2);
    assert_ne!(message_ids[0], message_ids[1]);
    assert!(message_ids.iter().all(|m| !m.is_empty()));
    // A failed task is a finished one now.
    let again = record("TASK_STATE_WORKING", "c", TaskState::Working, 9_000);
    assert_eq!(rig.put(again).await, Err(StoreErrorKind::Invalid));
    let mut q = query(10);
    q.state = Some(TaskState::Failed);
    assert_eq!(rig.list(q).await.unwrap().total_size, 3);

    // A second restart finds nothing running and changes nothing.
    let after: Vec<_> = {
        let mut v = Vec::new();
        for old in &before {
            v.push(rig.get(&old.id.0).await.unwrap());
        }
        v
    };
    let rig = Rig::open(rig.close().await, &[]).await;
    for task in after {
        assert_eq!(rig.get(&task.id.0).await, Some(task));
    }
}

/// A protocol token with a quote and a backslash, and a model key.
const TOKEN: &str = "tok\"en\\abcdefghijklmnopqrstuvwxyz0123456789";
const MODEL_KEY: &str = "sk-test-0123456789abcdef0123456789abcdef";

fn escaped(secret: &str) -> String {
    let quoted = Value::String(secret.into()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn secrets_never_reach_the_disk() {
    let rig = Rig::open(tempfile::tempdir().unwrap(), &[TOKEN, MODEL_KEY, ""]).await;
    assert_ne!(escaped(TOKEN), TOKEN);
    let leak = format!("the token is {TOKEN} and the key {MODEL_KEY}");
    let doc = document("t", "c", TaskState::Working, 1, &leak);
    rig.put_ok(record_with("t", "c", TaskState::Working, 1, &doc))
        .await;
    // A second task: the secret as a key, and spelled with other escapes.
    let mut doc = document("u", "c", TaskState::Completed, 2, "x");
    doc[MODEL_KEY] = json!(1);
    let mut text = doc.to_string();
    let spelled: String = MODEL_KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    text.pop();
    text.push_str(&format!(",\"spelled\":\"{spelled}\"}}"));
    rig.put_ok(TaskRecord {
        id: task_id("u"),
        context_id: ContextId("c".into()),
        state: TaskState::Completed,
        updated_ms: 2,
        document: text,
    })
    .await;
    // An id holding a secret is refused rather than stored.
    assert_eq!(
        rig.put(record(
            &format!("id-{MODEL_KEY}"),
            "c",
            TaskState::Working,
            1
        ))
        .await,
        Err(StoreErrorKind::Invalid)
    );
    let session = json!([
        { "role": "user", "content": leak },
        { "role": "assistant", "content": format!("echo {}", escaped(TOKEN)) },
    ])
    .to_string();
    rig.save("c", &session).await.unwrap();

    let stored = rig.get("t").await.unwrap();
    assert!(stored
        .document
        .contains("the token is [REDACTED] and the key [REDACTED]"));
    let u: Value = serde_json::from_str(&rig.get("u").await.unwrap().document).unwrap();
    assert_eq!(u["[REDACTED]"], 1);
    assert_eq!(u["spelled"], "[REDACTED]");
    let loaded: Value = serde_json::from_str(&rig.load("c").await.unwrap().unwrap()).unwrap();
    assert_eq!(
        loaded[0]["content"],
        "the token is [REDACTED] and the key [REDACTED]"
    );
    // The escaped form inside a string (JSON text in JSON, as in tool-call arguments).
    assert_eq!(loaded[1]["content"], "echo [REDACTED]");

    let dir = rig.close().await;
    let mut files = vec![
        dir.path().join(DB_FILE),
        dir.path().join(format!("{DB_FILE}-wal")),
    ];
    files.extend(
        std::fs::read_dir(dir.path().join(SESSIONS_DIR))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    let mut read = 0;
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        read += 1;
        for secret in [TOKEN, MODEL_KEY] {
            for form in [secret.to_string(), escaped(secret)] {
                assert!(!contains(&bytes, &form), "{form} in {}", file.display());
            }
        }
        assert!(!contains(&bytes, &spelled), "{}", file.display());
    }
    assert!(read >= 2, "{files:?}");
}

#[tokio::test]
async fn sessions_round_trip_privately_and_atomically() {
    let rig = Rig::new().await;
    let context = "ctx/../../etc\n";
    assert_eq!(rig.load(context).await, Ok(None));
    let first = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    rig.save(context, first).await.unwrap();
    assert_eq!(rig.load(context).await, Ok(Some(first.to_string())));
    let dir = rig.sessions();
    assert_eq!(mode(&dir), 0o700);
    let file = dir.join(session_file_name(&ContextId(context.into())));
    assert_eq!(mode(&file), 0o600);
    let inode = std::fs::metadata(&file).unwrap().ino();

    // Replaced by a new file renamed over the old one, not rewritten in place.
    let second =
        "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"}]";
    rig.save(context, second).await.unwrap();
    assert_eq!(rig.load(context).await, Ok(Some(second.to_string())));
    assert_ne!(std::fs::metadata(&file).unwrap().ino(), inode);
    assert_eq!(mode(&file), 0o600);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [session_file_name(&ContextId(context.into()))]);

    assert_eq!(rig.load("another").await, Ok(None));
    for bad in ["{\"role\":\"user\"}", "\"text\"", "3", "[", ""] {
        assert_eq!(
            rig.save(context, bad).await,
            Err(StoreErrorKind::Invalid),
            "{bad}"
        );
    }
    let huge = format!("[\"{}\"]", "x".repeat(MAX_TASK_DOCUMENT_BYTES));
    assert_eq!(
        rig.save(context, &huge).await,
        Err(StoreErrorKind::TooLarge)
    );
    let long = "c".repeat(MAX_ID_BYTES + 1);
    assert_eq!(rig.save(&long, "[]").await, Err(StoreErrorKind::Invalid));
    assert_eq!(rig.load(&long).await, Err(StoreErrorKind::Invalid));
    assert_eq!(rig.save("", "[]").await, Err(StoreErrorKind::Invalid));
    // The refused saves left the history as it was.
    assert_eq!(rig.load(context).await, Ok(Some(second.to_string())));

    // A leftover temporary file (a crash mid-save) is removed by the next save.
    std::fs::write(dir.join(".leftover.json.0011.tmp"), "[").unwrap();
    rig.save("another", "[]").await.unwrap();
    assert!(!dir.join(".leftover.json.0011.tmp").exists());
}

#[tokio::test]
async fn only_the_most_recently_written_sessions_are_kept() {
    let rig = Rig::new().await;
    let max = MAX_RETAINED_TASKS;
    for i in 0..max {
        rig.save(&format!("ctx-{i}"), "[]").await.unwrap();
    }
    assert_eq!(std::fs::read_dir(rig.sessions()).unwrap().count(), max);
    // Write times a second apart, oldest first (the clock's resolution may be coarser
    // than the saves above).
    let base = std::time::SystemTime::now() - Duration::from_secs(10_000);
    for i in 0..max {
        let path = rig
            .sessions()
            .join(session_file_name(&ContextId(format!("ctx-{i}"))));
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(base + Duration::from_secs(i as u64))
            .unwrap();
    }
    // Rewriting an old one makes it the newest.
    rig.save("ctx-0", "[1]").await.unwrap();
    for i in max..max + 5 {
        rig.save(&format!("ctx-{i}"), "[]").await.unwrap();
        assert_eq!(std::fs::read_dir(rig.sessions()).unwrap().count(), max);
    }
    for i in 0..max + 5 {
        let kept = rig.load(&format!("ctx-{i}")).await.unwrap().is_some();
        assert_eq!(kept, i == 0 || i > 5, "ctx-{i}");
    }
}

#[tokio::test]
async fn a_symlinked_or_open_sessions_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join(SESSIONS_DIR)).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(matches!(
        store.tasks(&[]),
        Err(StoreError::PrivateDir(PrivateDirError::Symlink { .. }))
    ));
    std::fs::remove_file(dir.path().join(SESSIONS_DIR)).unwrap();
    std::fs::create_dir(dir.path().join(SESSIONS_DIR)).unwrap();
    std::fs::set_permissions(
        dir.path().join(SESSIONS_DIR),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert!(matches!(
        store.tasks(&[]),
        Err(StoreError::PrivateDir(PrivateDirError::WrongMode { .. }))
    ));
    std::fs::set_permissions(
        dir.path().join(SESSIONS_DIR),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    assert!(store.tasks(&[]).is_ok());
}

#[tokio::test]
async fn concurrent_large_writes_are_each_answered() {
    // More large writes at once than the store has workers: they wait their turn, each
    // is answered, and a ping sent meanwhile is answered too.
    let rig = Arc::new(Rig::new().await);
    let mut writes = Vec::new();
    for i in 0..8 {
        let rig = rig.clone();
        writes.push(tokio::spawn(async move {
            rig.put(record_of_size(
                &format!("t{i}"),
                TaskState::Working,
                i,
                2 * 1024 * 1024,
            ))
            .await
        }));
    }
    assert!(matches!(
        rig.call(StoreRequest::Ping).await,
        StoreResponse::Pong
    ));
    for w in writes {
        assert_eq!(w.await.unwrap(), Ok(()));
    }
    assert_eq!(rig.list(query(100)).await.unwrap().total_size, 8);
}

#[tokio::test]
async fn audit_rows_record_the_task_of_a_call() {
    use nl2sh_approvald::store::AuditKind;
    use nl2sh_proto::channels::{
        AuthorityRequest, AuthorityResponse, CallId, CallResult, Confinement, Decision, RanRecord,
        RiskLevel,
    };
    let rig = common::Rig::new().await;
    rig.write_config("protocol_auto_approve = true\n");
    let mut s = common::summary(1, RiskLevel::Medium);
    s.task = Some(task_id("task-7"));
    assert_eq!(rig.decide(s).await.0, Decision::AutoApproved);
    rig.record(AuthorityRequest::Finished(CallResult {
        call_id: CallId(1),
        success: true,
        exit_code: Some(0),
        duration_ms: 1,
        summary: "ok".into(),
    }))
    .await;
    // A read-only call that ran under a snapshot: one `call` row.
    let AuthorityResponse::Policy(snapshot) = rig.call(AuthorityRequest::Policy).await else {
        panic!("no snapshot");
    };
    let mut read = common::summary(2, RiskLevel::ReadOnly);
    read.confinement = Confinement::Sandbox;
    read.task = Some(task_id("task-8"));
    rig.record(AuthorityRequest::Ran(RanRecord {
        summary: read,
        result: CallResult {
            call_id: CallId(2),
            success: true,
            exit_code: Some(0),
            duration_ms: 1,
            summary: "ok".into(),
        },
        policy: snapshot.version,
    }))
    .await;
    // And one without a task.
    assert_eq!(
        rig.decide(common::summary(3, RiskLevel::Medium)).await.0,
        Decision::AutoApproved
    );
    rig.authority.store().flush().await.unwrap();
    let rows = rig.rows().await;
    let seen: Vec<(AuditKind, i64, Option<&str>)> = rows
        .iter()
        .map(|r| (r.record.kind, r.record.call_id, r.record.task.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (AuditKind::Decision, 1, Some("task-7")),
            (AuditKind::Outcome, 1, Some("task-7")),
            (AuditKind::Call, 2, Some("task-8")),
            (AuditKind::Decision, 3, None),
        ]
    );
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
    // The task is covered by the row's hash.
    let db = rig.dir.path().join(DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE audit SET task = 'task-9' WHERE id = 3", [])
        .unwrap();
    let bad = rig
        .authority
        .store()
        .verify()
        .await
        .unwrap()
        .first_bad
        .unwrap();
    assert_eq!(bad.id, 3);
    conn.execute("UPDATE audit SET task = NULL WHERE id = 3", [])
        .unwrap();
    assert_eq!(
        rig.authority
            .store()
            .verify()
            .await
            .unwrap()
            .first_bad
            .unwrap()
            .id,
        3
    );
    conn.execute("UPDATE audit SET task = 'task-8' WHERE id = 3", [])
        .unwrap();
    assert!(rig.authority.store().verify().await.unwrap().is_intact());
    conn.execute("UPDATE audit SET task = 'x' WHERE id = 4", [])
        .unwrap();
    assert_eq!(
        rig.authority
            .store()
            .verify()
            .await
            .unwrap()
            .first_bad
            .unwrap()
            .id,
        4
    );
}

#[tokio::test]
async fn task_documents_do_not_count_against_the_audit_byte_limit() {
    use nl2sh_approvald::store::{AuditKind, AuditLimits, AuditRecord};
    let rig = Rig::new().await;
    // 31 MiB of tasks in the file, twice the audit's byte limit below.
    for i in 0..8 {
        rig.put_ok(record_of_size(
            &format!("t{i}"),
            TaskState::Completed,
            i,
            4 * 1024 * 1024 - 100 * 1024,
        ))
        .await;
    }
    rig.store.set_limits(AuditLimits {
        max_rows: 1_000_000,
        max_bytes: 16 * 1024 * 1024,
    });
    for i in 0..500 {
        let mut r = AuditRecord::new(AuditKind::Decision, i);
        r.action = Some(format!("echo {i}"));
        rig.store.append_nowait(r).await.unwrap();
    }
    rig.store.settle().await.unwrap();
    // The audit's own rows are far within its limit: none pruned.
    assert_eq!(rig.store.stats().pruned, 0);
    assert_eq!(rig.store.recent(1000).await.unwrap().len(), 500);
    assert!(rig.store.verify().await.unwrap().is_intact());
    assert_eq!(rig.list(query(100)).await.unwrap().total_size, 8);
}

#[tokio::test]
async fn the_owners_consoles_list_tasks_newest_first_and_read_one() {
    use nl2sh_approvald::owner;
    use nl2sh_proto::channels::{OwnerErrorKind, OwnerResponse};
    let rig = Rig::new().await;
    rig.put_ok(record("old", "c1", TaskState::Completed, 1_000))
        .await;
    rig.put_ok(record("new", "c2", TaskState::Working, 3_000))
        .await;
    rig.put_ok(record("mid", "c1", TaskState::Failed, 2_000))
        .await;
    let listed = |answer| match answer {
        OwnerResponse::Tasks(list) => ids(&list),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        listed(owner::tasks(&rig.tasks, 50).await),
        ["new", "mid", "old"]
    );
    assert_eq!(listed(owner::tasks(&rig.tasks, 2).await), ["new", "mid"]);
    match owner::task(&rig.tasks, task_id("mid")).await {
        OwnerResponse::Task(one) => {
            assert_eq!(one, record("mid", "c1", TaskState::Failed, 2_000))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        owner::task(&rig.tasks, task_id("none")).await,
        OwnerResponse::Refused {
            kind: OwnerErrorKind::NoSuchTask,
            ..
        }
    ));
}

/// The owner's own conversations (the terminal console's Ask) live in the same store
/// under their own ids: netd's CreateTask cannot continue one, and netd's listings never
/// show them, whatever the filters; the owner's listing does.
#[tokio::test]
async fn the_owners_tasks_are_in_a_namespace_of_their_own() {
    let rig = Rig::new().await;
    let refused = rig
        .call(StoreRequest::CreateTask {
            context_id: Some(ContextId("owner-123".into())),
        })
        .await;
    assert!(
        matches!(&refused, StoreResponse::Failed { kind: StoreErrorKind::Invalid, message }
            if message.contains("owner")),
        "{refused:?}"
    );
    let (id, context) = rig.tasks.create_owner(None).unwrap();
    assert!(id.0.starts_with("owner-") && context.0.starts_with("owner-"));
    // Continuing a protocol context as the owner's is refused too.
    assert!(rig
        .tasks
        .create_owner(Some(ContextId("ctx".into())))
        .is_err());
    let (id2, same) = rig.tasks.create_owner(Some(context.clone())).unwrap();
    assert_eq!(same, context);
    rig.put_ok(record(&id.0, &context.0, TaskState::Completed, 1_000))
        .await;
    rig.put_ok(record(&id2.0, &context.0, TaskState::Working, 2_000))
        .await;
    rig.put_ok(record("t-proto", "ctx", TaskState::Completed, 3_000))
        .await;

    let page = rig.list(query(100)).await.unwrap();
    assert_eq!(ids(&page.tasks), ["t-proto"]);
    assert_eq!(page.total_size, 1);
    let mut by_context = query(100);
    by_context.context_id = Some(context.clone());
    assert!(rig.list(by_context).await.unwrap().tasks.is_empty());

    let mut owner = query(1);
    owner.include_owner = true;
    let first = rig.list(owner.clone()).await.unwrap();
    assert_eq!(first.total_size, 3);
    // A page token of the owner's listing is no token of netd's.
    let mut netd = query(1);
    netd.page_token = Some(first.next_page_token.clone());
    assert!(matches!(
        rig.list(netd).await,
        Err((StoreErrorKind::BadPageToken, _))
    ));
    owner.page_token = Some(first.next_page_token);
    assert_eq!(rig.list(owner).await.unwrap().tasks.len(), 1);
}

/// The owner's Ask over approvals.sock is handed to the netd that waits for it with
/// `NextOwnerWork`, under owner ids; refused plainly when no netd takes it, when the
/// goal is empty or too long, and a cancel only names the owner's own tasks.
// Paused time: the hand-over wait runs out at once, and exactly when it should.
#[tokio::test(start_paused = true)]
async fn the_owners_ask_is_handed_to_the_waiting_netd() {
    use nl2sh_approvald::authority::Authority;
    use nl2sh_approvald::owner::OwnerSessions;
    let rig = Rig::new().await;
    let local = LocalOwner {
        sessions: Arc::new(OwnerSessions::new()),
        tasks: rig.tasks.clone(),
        inbox: rig.inbox.clone(),
    };
    let other = tempfile::tempdir().unwrap();
    let authority = Authority::new(
        Store::open(other.path()).unwrap(),
        rig.dir.path().join("config.toml"),
    );
    let ask = |text: &str, context: Option<ContextId>| CliRequest::Ask {
        context_id: context,
        text: text.into(),
    };

    // Nobody waits: refused as "no Agent" once the hand-over wait is out.
    let started = tokio::time::Instant::now();
    let answer = answer_cli(&authority, &local, ask("list my files", None)).await;
    assert!(
        matches!(&answer, CliResponse::Error { kind: CliErrorKind::NoAgent, message }
            if message.contains("not running")),
        "{answer:?}"
    );
    assert_eq!(
        started.elapsed(),
        nl2sh_approvald::owner::asks::HAND_OVER_WAIT,
        "refused before, or long after, the hand-over wait ran out"
    );

    let long = "x".repeat(8193);
    let invalid = [ask("", None), ask("   ", None), ask(&long, None)]
        .into_iter()
        .chain([CliRequest::CancelTask {
            id: TaskId("t-proto".into()),
        }]);
    for request in invalid {
        let answer = answer_cli(&authority, &local, request).await;
        assert!(
            matches!(
                answer,
                CliResponse::Error {
                    kind: CliErrorKind::InvalidRequest,
                    ..
                }
            ),
            "{answer:?}"
        );
    }

    // netd waits: the goal is its answer, under the ids the owner was given.
    let netd = tokio::spawn({
        let client = rig.client.clone();
        async move { client.call(&StoreRequest::NextOwnerWork).await.unwrap() }
    });
    let answer = answer_cli(&authority, &local, ask("list my files", None)).await;
    let CliResponse::Asked { id, context_id } = answer else {
        panic!("not asked: {answer:?}");
    };
    match netd.await.unwrap() {
        StoreResponse::OwnerWork(OwnerWork::Ask {
            id: got,
            context_id: got_context,
            text,
        }) => {
            assert_eq!(
                (got, got_context, text.as_str()),
                (id.clone(), context_id.clone(), "list my files")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(id.0.starts_with("owner-"));
    let netd = tokio::spawn({
        let client = rig.client.clone();
        async move { client.call(&StoreRequest::NextOwnerWork).await.unwrap() }
    });
    let answer = answer_cli(
        &authority,
        &local,
        CliRequest::CancelTask { id: id.clone() },
    )
    .await;
    assert!(matches!(answer, CliResponse::Done), "{answer:?}");
    assert!(matches!(
        netd.await.unwrap(),
        StoreResponse::OwnerWork(OwnerWork::Cancel { id: got }) if got == id
    ));
}
