//! The built-in Agent in process, against a scripted OpenAI-compatible model and the real
//! executor and approvald wired as in the tree (no sandbox: fixed reads such as `fs.stat`
//! run unasked, commands wait for approval, which the test gives or refuses as the owner
//! at the device would). What the model answers is scripted; what it was sent is checked.
//! Every server binds 127.0.0.1 and every connection goes to loopback.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nl2sh_approvald::authority::Authority;
use nl2sh_approvald::store::AuditRow;
use nl2sh_netd::agent::dns::NameService;
use nl2sh_netd::agent::{Agent, AgentEnd, AgentJob, AgentRun, SYSTEM_PROMPT};
use nl2sh_netd::executor::ExecutorClient;
use nl2sh_proto::channels::{
    ApprovalId, CallOrigin, CallStage, ContextId, ExecutorRequest, InvokeRequest, ModelSettings,
    ModelSetup, PendingApproval, TaskId,
};
use nl2sh_proto::rpc::{self, OutOfState};
use nl2sh_proto::topology::{pair, NetdExecutor};
use nl2sh_proto::Secret;
use nl2sh_tests::scripted_model::{Reply, Request, ScriptedModel, ToolCall};
use nl2sh_tests::{is_root, processes_with};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-agent-test-key-0123456789abcdefXYZ";

/// approvald's authority and the executor, wired as in the tree, and netd's end of the
/// executor channel (through a tap that keeps every call netd asked the executor to
/// run).
struct Wired {
    dir: tempfile::TempDir,
    authority: Arc<Authority>,
    executor: ExecutorClient,
    invoked: Arc<Mutex<Vec<InvokeRequest>>>,
}

async fn wire() -> Wired {
    let base = nl2sh_tests::in_process::wire(Some("")).await;
    let real = base.executor;
    let invoked = Arc::new(Mutex::new(Vec::new()));
    let (asker, answerer) = pair::<NetdExecutor>().unwrap();
    let seen = invoked.clone();
    tokio::spawn(rpc::serve(answerer, move |req: ExecutorRequest| {
        if let ExecutorRequest::Invoke(call) = &req {
            seen.lock().unwrap().push(call.clone());
        }
        let real = real.clone();
        async move { real.call(&req).await.map_err(|e| OutOfState(e.to_string())) }
    }));
    let (executor, _) = ExecutorClient::start(asker).await.unwrap();
    Wired {
        dir: base.dir,
        authority: base.authority,
        executor,
        invoked,
    }
}

impl Wired {
    fn invoked(&self) -> Vec<InvokeRequest> {
        self.invoked.lock().unwrap().clone()
    }

    fn agent(&self, model: &ScriptedModel, max_steps: u32, timeout_secs: u64) -> Arc<Agent> {
        self.agent_at(&model.base_url(), max_steps, timeout_secs)
    }

    fn agent_at(&self, base_url: &str, max_steps: u32, timeout_secs: u64) -> Arc<Agent> {
        let settings = ModelSettings {
            base_url: base_url.into(),
            model: "scripted-1".into(),
            api_key: Secret::new(KEY.into()),
            max_steps,
            request_timeout_secs: timeout_secs,
            https_proxy: None,
            no_proxy: None,
        };
        Agent::with_name_service(
            self.executor.clone(),
            ModelSetup::Ready(settings),
            NameService::System,
        )
        .unwrap()
    }

    async fn audit(&self) -> Vec<AuditRow> {
        self.authority.flush_answered().await.unwrap();
        self.authority.store().recent(100).await.unwrap()
    }

    /// Wait for the pending approval of `task`.
    async fn pending_for(&self, task: &str) -> PendingApproval {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(p) = self
                .authority
                .list_pending()
                .into_iter()
                .find(|p| p.task.as_ref().map(|t| t.0.as_str()) == Some(task))
            {
                return p;
            }
            assert!(Instant::now() < deadline, "no pending approval for {task}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn job(task: &str, text: &str, history: Vec<Value>) -> AgentJob {
    AgentJob {
        task: TaskId(task.into()),
        context: ContextId(format!("ctx-{task}")),
        origin: CallOrigin::AgentHttp,
        client: None,
        text: text.into(),
        history,
        step: Arc::new(tokio::sync::watch::channel(None).0),
    }
}

async fn run(agent: &Agent, job: AgentJob) -> AgentRun {
    let run = agent.run(job, CancellationToken::new()).await;
    assert_no_key(&run);
    run
}

/// The key is in no text, result or history the task service would store.
fn assert_no_key(run: &AgentRun) {
    assert!(!run.status_text.contains(KEY), "{}", run.status_text);
    let result = run
        .result
        .as_ref()
        .map(Value::to_string)
        .unwrap_or_default();
    assert!(!result.contains(KEY), "{result}");
    let history = serde_json::to_string(&run.history).unwrap();
    assert!(!history.contains(KEY), "{history}");
}

fn result(run: &AgentRun) -> &Value {
    run.result.as_ref().expect("result data")
}

/// What the model was sent: the Authorization header carries the configured key, the
/// system prompt comes first, and the device's tools are offered by function name.
fn check_request(r: &Request) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {KEY}")));
    assert_eq!(r.body["model"], "scripted-1");
    assert_eq!(r.body["tool_choice"], "auto");
    let messages = r.messages();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[0]["content"], SYSTEM_PROMPT);
    assert_eq!(
        messages.iter().filter(|m| m["role"] == "system").count(),
        1,
        "one system prompt"
    );
    let offered = r.offered_functions();
    for f in ["fs__stat", "shell__exec"] {
        assert!(
            offered.iter().any(|o| o == f),
            "{f} not offered: {offered:?}"
        );
    }
    assert!(offered.iter().all(|o| !o.contains('.')), "{offered:?}");
}

/// The tool result the model got for `call_id` in request `r`: `{success, output}`.
fn tool_result(r: &Request, call_id: &str) -> Value {
    let m = r
        .tool_results()
        .into_iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool result for {call_id}: {:?}", r.messages()));
    serde_json::from_str(m["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_plain_answer_completes_in_one_step_with_history() {
    let w = wire().await;
    let model = ScriptedModel::start([Reply::answer("The device is fine.")]);
    let agent = w.agent(&model, 5, 30);
    let r = run(&agent, job("t-plain", "How is the device?", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Completed, "{}", r.status_text);
    assert_eq!(r.status_text, "The device is fine.");
    let data = result(&r);
    assert_eq!(data["session"], "ctx-t-plain");
    assert_eq!(data["answer"], "The device is fine.");
    assert_eq!(data["answer_status"], "unverified_model_analysis");
    assert_eq!(data["steps"], 1);
    assert_eq!(data["tool_calls"], 0);
    assert_eq!(data["failed_tools"], json!([]));
    assert_eq!(data["evidence"]["total_tool_calls"], 0);
    assert_eq!(data["evidence"]["entries_truncated"], false);
    let history = r.history.unwrap();
    assert_eq!(
        history,
        vec![
            json!({"role": "user", "content": "How is the device?"}),
            json!({"role": "assistant", "content": "The device is fine."}),
        ]
    );
    let sent = model.requests();
    assert_eq!(sent.len(), 1);
    check_request(&sent[0]);
    assert_eq!(sent[0].messages().len(), 2);
}

#[tokio::test]
async fn a_tool_round_reaches_the_model_and_is_evidence() {
    let w = wire().await;
    let target = w.dir.path().to_path_buf();
    let model = ScriptedModel::start([
        Reply::tool_calls([ToolCall::new(
            "call_stat",
            "fs__stat",
            json!({"path": target}),
        )]),
        Reply::answer("It is a directory."),
    ]);
    let agent = w.agent(&model, 5, 30);
    let r = run(&agent, job("t-round", "What is the test dir?", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Completed, "{}", r.status_text);
    let sent = model.requests();
    assert_eq!(sent.len(), 2);
    check_request(&sent[1]);
    // The second request carries the assistant's call and the tool's real result.
    let got = tool_result(&sent[1], "call_stat");
    assert_eq!(got["success"], true, "{got}");
    let output: Value = serde_json::from_str(got["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["type"], "directory", "{output}");
    assert_eq!(output["exists"], true);
    let messages = sent[1].messages();
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_stat");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "fs__stat");

    let data = result(&r);
    assert_eq!(data["steps"], 2);
    assert_eq!(data["tool_calls"], 1);
    assert_eq!(data["failed_tools"], json!([]));
    let entry = &data["evidence"]["entries"][0];
    assert_eq!(entry["tool"], "fs.stat");
    assert_eq!(entry["call_id"], "call_stat");
    assert_eq!(entry["result"], "success");
    assert_eq!(entry["output_truncated"], false);
    assert!(
        entry["output"].as_str().unwrap().contains("\"directory\""),
        "{entry}"
    );
    // The history holds the whole turn: user, call, result, answer.
    let history = r.history.unwrap();
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    // netd asked the executor for exactly this call, as the Agent's step of this task.
    let invoked = w.invoked();
    assert_eq!(invoked.len(), 1);
    assert_eq!(invoked[0].tool, "fs.stat");
    assert_eq!(invoked[0].origin, CallOrigin::AgentHttp);
    assert_eq!(invoked[0].task, Some(TaskId("t-round".into())));
    let args: Value = serde_json::from_str(&invoked[0].arguments).unwrap();
    assert_eq!(args, json!({"path": target}));
    // The executor ran it as the Agent's call.
    let rows = w.audit().await;
    let row = rows
        .iter()
        .find(|r| r.record.tool.as_deref() == Some("fs.stat"))
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(
        row.record.origin.map(|v| v.as_str()),
        Some("agent_http"),
        "{row:?}"
    );
}

#[tokio::test]
async fn failing_and_unknown_tools_are_listed_and_the_executor_never_sees_the_unknown() {
    let w = wire().await;
    let model = ScriptedModel::start([
        Reply::tool_calls([
            // A relative path: the executor's own validation refuses it.
            ToolCall::new("call_bad", "fs__stat", json!({"path": "relative/path"})),
            ToolCall::new("call_unknown", "no__such__tool", json!({})),
            ToolCall::raw("call_args", "fs__stat", "{\"path\": "),
            ToolCall::raw("call_array", "fs__stat", "[1, 2]"),
        ]),
        Reply::answer("Some tools failed."),
    ]);
    let agent = w.agent(&model, 5, 30);
    let r = run(&agent, job("t-fail", "Try things", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Completed, "{}", r.status_text);
    let sent = model.requests();
    for id in ["call_bad", "call_unknown", "call_args", "call_array"] {
        let got = tool_result(&sent[1], id);
        assert_eq!(got["success"], false, "{id}: {got}");
    }
    assert!(tool_result(&sent[1], "call_unknown")["output"]
        .as_str()
        .unwrap()
        .contains("unknown tool"));
    assert!(tool_result(&sent[1], "call_args")["output"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    let data = result(&r);
    assert_eq!(data["tool_calls"], 4);
    let failed = data["failed_tools"].as_array().unwrap();
    let ids: Vec<&str> = failed
        .iter()
        .map(|f| f["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_bad", "call_unknown", "call_args", "call_array"]);
    assert_eq!(failed[0]["tool"], "fs.stat");
    assert_eq!(failed[1]["tool"], "no__such__tool");
    assert!(!failed[0]["error"].as_str().unwrap().is_empty());
    for e in data["evidence"]["entries"].as_array().unwrap() {
        assert_eq!(e["result"], "failure", "{e}");
    }
    // Only the call with a known tool and object arguments reached the executor (whose
    // own validation refused it).
    let invoked = w.invoked();
    assert_eq!(invoked.len(), 1, "{invoked:?}");
    assert_eq!(invoked[0].tool, "fs.stat");
    assert_eq!(invoked[0].arguments, r#"{"path":"relative/path"}"#);
}

#[tokio::test]
async fn a_rejected_mutation_reaches_the_model_as_a_refusal() {
    let w = wire().await;
    let victim: PathBuf = w.dir.path().join("created-by-the-agent");
    let model = ScriptedModel::start([
        Reply::tool_calls([ToolCall::new(
            "call_touch",
            "shell__exec",
            json!({"command": format!("touch {}", victim.display())}),
        )]),
        Reply::answer("The owner refused."),
    ]);
    let agent = w.agent(&model, 5, 30);
    // The step the Agent shows, as a caller following the task (MCP progress) reads it.
    let (shown, step) = tokio::sync::watch::channel(None);
    let mut asked = job("t-reject", "Create a file", Vec::new());
    asked.step = Arc::new(shown);
    let running = tokio::spawn({
        let agent = agent.clone();
        async move { run(&agent, asked).await }
    });
    // The owner at the device sees the Agent's request, with its task, and refuses it.
    let pending = w.pending_for("t-reject").await;
    assert_eq!(pending.origin, CallOrigin::AgentHttp);
    assert_eq!(pending.tool, "shell.exec");
    assert!(pending.action.contains("touch"), "{}", pending.action);
    // Meanwhile the follower sees the step, and the executor says it waits for exactly
    // that request, with no more time than an approval has.
    let running_step = step.borrow().clone().expect("the Agent shows its step");
    assert_eq!(running_step.tool, "shell.exec");
    let stage = w.executor.progress(running_step.correlation).await.unwrap();
    let Some(CallStage::Deciding { wait: Some(wait) }) = stage else {
        panic!("not waiting for the owner: {stage:?}");
    };
    assert_eq!(wait.id, pending.id);
    assert!(wait.seconds_left >= 1 && wait.seconds_left <= pending.seconds_left + 1);
    w.authority
        .reject(&ApprovalId(pending.id.0.clone()))
        .unwrap();
    let r = running.await.unwrap();
    // Once the call answered, there is no step and nothing by its correlation.
    assert!(step.borrow().is_none());
    let after = w.executor.progress(running_step.correlation).await.unwrap();
    assert_eq!(after, None);
    assert_eq!(r.end, AgentEnd::Completed, "{}", r.status_text);
    assert_eq!(r.status_text, "The owner refused.");
    assert!(!victim.exists(), "the rejected command ran");
    let sent = model.requests();
    let got = tool_result(&sent[1], "call_touch");
    assert_eq!(got["success"], false, "{got}");
    assert!(
        got["output"].as_str().unwrap().contains("reject"),
        "the model is told it was rejected: {got}"
    );
    let data = result(&r);
    assert_eq!(data["failed_tools"][0]["call_id"], "call_touch");
    assert_eq!(data["evidence"]["entries"][0]["result"], "failure");
}

#[tokio::test]
async fn a_slow_model_is_cancelled_mid_request() {
    let w = wire().await;
    let model = ScriptedModel::start([Reply::Hang]);
    let agent = w.agent(&model, 5, 600);
    let cancel = CancellationToken::new();
    let running = tokio::spawn({
        let (agent, cancel) = (agent.clone(), cancel.clone());
        async move {
            agent
                .run(job("t-slow", "Think hard", Vec::new()), cancel)
                .await
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.requests().is_empty() {
        assert!(Instant::now() < deadline, "the model was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cancel.cancel();
    // The model never answers: only the cancellation can end the run.
    let r = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the run did not end after cancellation")
        .unwrap();
    assert_no_key(&r);
    assert_eq!(r.end, AgentEnd::Canceled, "{}", r.status_text);
    assert!(r.history.is_none(), "an unfinished turn is no history");
    let data = result(&r);
    assert_eq!(data["steps"], 1);
    assert!(data["answer"].is_null());
}

/// The process group of `pid` (field 5 of /proc/<pid>/stat).
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(2)?.parse().ok()
}

fn group_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&pid: &i32| process_group(pid) == Some(pgid))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_command_is_cancelled_and_its_process_group_is_gone() {
    if !is_root() {
        // Approved commands run with the launching identity; the group check reads
        // /proc of processes the executor may have started as someone else.
        nl2sh_proto::test_skip::skip("needs root");
        return;
    }
    let w = wire().await;
    // A duration no other test uses, to find exactly these sleeps.
    let seconds = format!("1000{}", std::process::id() % 1000);
    let sleep = format!("sleep {seconds}");
    let model = ScriptedModel::start([Reply::tool_calls([ToolCall::new(
        "call_sleep",
        "shell__exec",
        json!({"command": format!("{sleep} & {sleep}; wait"), "timeout": 600}),
    )])]);
    let agent = w.agent(&model, 5, 30);
    let cancel = CancellationToken::new();
    let running = tokio::spawn({
        let (agent, cancel) = (agent.clone(), cancel.clone());
        async move {
            agent
                .run(job("t-sleep", "Wait a while", Vec::new()), cancel)
                .await
        }
    });
    let pending = w.pending_for("t-sleep").await;
    w.authority
        .approve(&ApprovalId(pending.id.0.clone()), pending.phrase.as_deref())
        .unwrap();
    // Both sleeps run in the command's own process group.
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleeps = loop {
        let found: Vec<i32> = processes_with(&seconds)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c == format!("sleep\0{seconds}\0").as_bytes())
            })
            .collect();
        if found.len() == 2 {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "the sleeps did not start: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let pgid = process_group(sleeps[0]).unwrap();
    assert!(group_members(pgid).len() >= 2);
    cancel.cancel();
    let r = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the run did not end after cancellation")
        .unwrap();
    assert_no_key(&r);
    assert_eq!(r.end, AgentEnd::Canceled, "{}", r.status_text);
    // The call settled before the run ended: the group is gone already (reaped or
    // dying: a zombie has no command line).
    let left: Vec<i32> = group_members(pgid)
        .into_iter()
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| !c.is_empty()))
        .collect();
    assert!(left.is_empty(), "still running in group {pgid}: {left:?}");
    let data = result(&r);
    let entry = &data["evidence"]["entries"][0];
    assert_eq!(entry["call_id"], "call_sleep");
    // It answered (stopped) before the run ended, so it has a result: a failure that
    // says it was cancelled.
    assert_eq!(entry["result"], "failure", "{entry}");
    assert!(
        entry["output"]
            .as_str()
            .unwrap()
            .contains("\"cancelled\":true"),
        "{entry}"
    );
    assert!(r.history.is_none());
}

#[tokio::test]
async fn a_second_message_carries_the_earlier_turn() {
    let w = wire().await;
    let model = ScriptedModel::start([
        Reply::answer("The first answer."),
        Reply::answer("The second answer."),
    ]);
    let agent = w.agent(&model, 5, 30);
    let first = run(&agent, job("t-one", "First question", Vec::new())).await;
    assert_eq!(first.end, AgentEnd::Completed);
    let history = first.history.unwrap();
    let second = run(&agent, job("t-two", "Second question", history.clone())).await;
    assert_eq!(second.end, AgentEnd::Completed);
    let sent = model.requests();
    let messages = sent[1].messages();
    check_request(&sent[1]);
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[1]["content"], "First question");
    assert_eq!(messages[2]["content"], "The first answer.");
    assert_eq!(messages[3]["content"], "Second question");
    let mut expected = history;
    expected.push(json!({"role": "user", "content": "Second question"}));
    expected.push(json!({"role": "assistant", "content": "The second answer."}));
    assert_eq!(second.history.unwrap(), expected);
}

#[tokio::test]
async fn max_steps_ends_the_run_with_what_it_did() {
    let w = wire().await;
    let dir = w.dir.path().display().to_string();
    let model = ScriptedModel::start((0..3).map(|i| {
        Reply::tool_calls([ToolCall::new(
            &format!("call_{i}"),
            "fs__stat",
            json!({"path": dir}),
        )])
    }));
    let agent = w.agent(&model, 2, 30);
    let r = run(&agent, job("t-steps", "Loop", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert!(r.status_text.contains("max_steps (2)"), "{}", r.status_text);
    assert!(r.history.is_none());
    let data = result(&r);
    assert_eq!(data["steps"], 2);
    assert_eq!(data["tool_calls"], 2);
    assert_eq!(data["evidence"]["entries"][1]["result"], "success");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn model_failures_fail_the_task_saying_why_without_the_key() {
    let w = wire().await;
    // An endpoint nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("http://127.0.0.1:{port}/v1");
    let agent = w.agent_at(&nowhere, 5, 30);
    let r = run(&agent, job("t-nowhere", "Hello", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert!(r.status_text.contains(&nowhere), "{}", r.status_text);
    assert!(r.status_text.contains("refused"), "{}", r.status_text);

    // An HTTP error that echoes the key: status and excerpt, the key redacted.
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}});
    let model = ScriptedModel::start([
        Reply::Status(401, body.to_string()),
        Reply::delayed(Duration::from_secs(10), Reply::answer("too late")),
        Reply::Raw("{\"choices\": \"nope\"}".into()),
    ]);
    let agent = w.agent(&model, 5, 1);
    let r = run(&agent, job("t-401", "Hello", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert!(r.status_text.contains("HTTP 401"), "{}", r.status_text);
    assert!(
        r.status_text
            .contains("Incorrect API key provided: <redacted>"),
        "{}",
        r.status_text
    );
    // A model slower than request_timeout_secs.
    let r = run(&agent, job("t-slow-answer", "Hello", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert!(
        r.status_text.contains("request_timeout_secs (1 s)"),
        "{}",
        r.status_text
    );
    // A malformed response.
    let agent = w.agent(&model, 5, 30);
    let r = run(&agent, job("t-malformed", "Hello", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert!(
        r.status_text.contains("unusable response"),
        "{}",
        r.status_text
    );
    assert!(r.status_text.contains("choices"), "{}", r.status_text);
    assert_eq!(result(&r)["steps"], 1);
}

#[tokio::test]
async fn no_model_fails_at_once_with_the_reason() {
    let w = wire().await;
    let agent = Agent::with_name_service(
        w.executor.clone(),
        ModelSetup::Unavailable("no [model] section in the configuration".into()),
        NameService::System,
    )
    .unwrap();
    let r = run(&agent, job("t-none", "Hello", Vec::new())).await;
    assert_eq!(r.end, AgentEnd::Failed);
    assert_eq!(r.status_text, "no [model] section in the configuration");
    assert!(r.result.is_none());
    assert!(r.history.is_none());
    assert!(w.invoked().is_empty(), "nothing ran");
}
