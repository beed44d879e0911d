//! Fault injection over the real binary: while MCP clients call tools and A2A clients
//! delegate tasks, every worker is SIGKILLed in turn, the approvals socket is fed garbage,
//! and sandboxed commands take every process and all the memory they may. Afterwards: the
//! service answered again on the same URL after each blow, no answered call is missing
//! from the audit, no completed task was lost, no mutation ran (nobody approved one), the
//! audit chain verifies, and nothing of the tree is left running.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use nl2sh_tests::scripted_model::{Reply, ScriptedModel};
use nl2sh_tests::{is_root, try_mcp_post, Fixture, Server};

const KEY_ENV: &str = "NL2SH_FAULTS_MODEL_KEY";
const CALL_LIMIT: Duration = Duration::from_secs(20);

/// `shell.exec` of `command`; its structured result when the call was answered.
fn invoke(addr: SocketAddr, token: &str, command: &str) -> Option<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec",
        "arguments": {"command": command}}}});
    let r = try_mcp_post(addr, token, &body.to_string(), CALL_LIMIT)?;
    (r.status == 200).then(|| r.json()["result"].clone())
}

fn a2a(addr: SocketAddr, token: &str, method: &str, params: Value) -> Option<Value> {
    let r = nl2sh_tests::try_a2a(addr, token, method, params, CALL_LIMIT)?;
    (r.status == 200).then(|| r.json())
}

/// Until the service answers a read again (bounded).
fn answers_again(addr: SocketAddr, token: &str) -> Duration {
    let start = Instant::now();
    loop {
        if invoke(addr, token, "true").is_some_and(|r| r["isError"] == false) {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no answer again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Default)]
struct Seen {
    /// Markers of read calls answered with success.
    answered: Vec<String>,
    /// Mutations asked for (nobody approves them).
    mutations: Vec<std::path::PathBuf>,
    /// Tasks answered COMPLETED.
    completed: Vec<String>,
}

#[test]
fn the_service_survives_dead_workers_hostile_peers_and_greedy_commands() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("the sandbox (and so unasked calls) needs root");
        return;
    }
    let model = ScriptedModel::start((0..400).map(|_| Reply::answer("done")));
    // A uid range of this test's own, so what it finds left running is its own.
    let range = nl2sh_proto::channels::UidRange {
        first: 0x9400_0000 + (std::process::id() % 1000) * 16,
        count: 16,
    };
    let fx = Fixture::new(&format!(
        "approval_timeout_secs = 1\nsandbox_uid_base = {}\nsandbox_uid_count = {}\n\
         [model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
         api_key_env = \"{KEY_ENV}\"\nmax_steps = 2\n",
        range.first,
        range.count,
        model.base_url()
    ));
    let mut server = Server::start(&fx, &[], &[(KEY_ENV, "sk-faults-0123456789")]);
    let (addr, token) = (server.addr, server.token().to_string());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for client in 0..3 {
        let (seen, stop, token) = (seen.clone(), stop.clone(), token.clone());
        clients.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let marker = format!("fault-read-{client}-{n}");
                if let Some(r) = invoke(addr, &token, &format!("echo {marker}")) {
                    if r["isError"] == false {
                        seen.lock().unwrap().answered.push(marker);
                    }
                }
            }
        }));
    }
    {
        let (seen, stop, token) = (seen.clone(), stop.clone(), token.clone());
        let dir = fx.dir.path().to_path_buf();
        clients.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let target = dir.join(format!("mutation-{n}"));
                seen.lock().unwrap().mutations.push(target.clone());
                let _ = invoke(addr, &token, &format!("touch {}", target.display()));
                std::thread::sleep(Duration::from_millis(100));
            }
        }));
    }
    {
        let (seen, stop, token) = (seen.clone(), stop.clone(), token.clone());
        clients.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let params = json!({"message": {"messageId": format!("fault-{n}"),
                    "role": "ROLE_USER", "parts": [{"text": "report the uptime"}]}});
                if let Some(v) = a2a(addr, &token, "SendMessage", params) {
                    let task = &v["result"]["task"];
                    if task["status"]["state"] == "TASK_STATE_COMPLETED" {
                        let id = task["id"].as_str().unwrap_or_default().to_string();
                        seen.lock().unwrap().completed.push(id);
                    }
                }
            }
        }));
    }

    let mut recoveries = Vec::new();
    let blows: [&dyn Fn(&Server); 6] = [
        &|s| kill(s.worker("netd")),
        &|s| kill(s.worker("executor")),
        &|s| kill(s.worker("approvald")),
        // Hostile bytes from the owner's side: a frame approvald cannot decode.
        &|_| garbage_to_approvals_socket(&fx),
        // A command that takes every process and all the memory it may.
        &|s| {
            let _ = invoke(
                s.addr,
                s.token(),
                &format!(
                    "{} & head -c 900000000 /dev/zero | tail -n 1; wait",
                    nl2sh_tests::fork_bomb(400, 5)
                ),
            );
        },
        &|s| kill(s.worker("executor")),
    ];
    for blow in blows {
        std::thread::sleep(Duration::from_millis(400));
        blow(&server);
        recoveries.push(answers_again(addr, &token));
    }
    std::thread::sleep(Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    // Completed tasks are still there, still completed.
    let seen = seen.lock().unwrap();
    for id in &seen.completed {
        let v = a2a(addr, &token, "GetTask", json!({"id": id})).expect("GetTask answers");
        assert_eq!(
            v["result"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{id}: {v}"
        );
    }
    server.signal(libc::SIGTERM);
    assert_eq!(
        server.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        server.stderr()
    );
    let stderr = server.stderr();
    assert!(!stderr.contains("crash loop"), "{stderr}");
    eprintln!(
        "faults: {} reads answered, {} tasks completed, {} mutations asked, recoveries {:?}",
        seen.answered.len(),
        seen.completed.len(),
        seen.mutations.len(),
        recoveries
    );
    assert!(
        seen.answered.len() > 20,
        "too few calls answered to mean anything"
    );
    // No mutation ran: nobody approved one.
    for m in &seen.mutations {
        assert!(!m.exists(), "{} was created without approval", m.display());
    }
    // Every answered call is in the audit.
    audit_lists_each_once(&fx, &seen.answered, "");
    // Nothing of the tree is left: no sandboxed process, no command.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !nl2sh_executor::sandbox::processes_in(range).is_empty() {
        assert!(
            Instant::now() < deadline,
            "sandboxed processes outlived the service"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(nl2sh_tests::processes_with("fault-read-").is_empty());
}

/// Calls answered, each followed at once by a SIGKILL of `worker`; afterwards each is
/// listed exactly once and the chain verifies. With `recovered` (the log lines of the
/// paths that bring a row back), the service log must show one of them.
fn answered_then_killed(worker: &str, recovered: &[&str]) {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let (addr, token) = (server.addr, server.token().to_string());
    let markers: Vec<String> = (0..5).map(|i| format!("{worker}-kill-{i}")).collect();
    for marker in &markers {
        let r = invoke(addr, &token, &format!("echo {marker}")).expect("answered");
        assert_eq!(r["isError"], false, "{r}");
        let killed = server.worker(worker);
        kill(killed);
        // The answer must come from the restarted tree, which is what brings the row
        // back: the dying tree's executor can still answer a sandboxed call for a moment
        // before it notices its peer is gone.
        replaced(&server, worker, killed);
        answers_again(addr, &token);
    }
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(30)).code(), Some(0));
    let stderr = server.stderr();
    assert!(
        recovered.is_empty() || recovered.iter().any(|line| stderr.contains(line)),
        "no row was brought back: {stderr}"
    );
    audit_lists_each_once(&fx, &markers, &stderr);
}

/// `protocol audit` lists the call of each `echo <marker>` exactly once, and the chain
/// verifies. `log` (the service's stderr, when the test has it) is shown on a failure:
/// how the rows went is in it.
fn audit_lists_each_once(fx: &Fixture, markers: &[String], log: &str) {
    let out = fx
        .command(&["protocol", "audit", "--json", "--limit", "100000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let audit = String::from_utf8_lossy(&out.stdout);
    for marker in markers {
        assert_eq!(
            audit.matches(&format!("echo {marker}'")).count(),
            1,
            "{marker} answered, so listed exactly once; the service said:\n{log}"
        );
    }
    let out = fx
        .command(&["protocol", "audit", "--verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "audit --verify: {out:?}");
}

/// approvald journals a row when it gets it, and the executor keeps it in its outbox
/// until approvald acknowledges it: either brings it back.
const APPROVALD_JOURNAL: &str = "were stored from the journal";
const EXECUTOR_OUTBOX: &str = "audit outbox of the last executor handed to approvald";

#[test]
fn a_call_answered_just_before_approvald_dies_is_in_the_audit() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("the sandbox (and so unasked calls) needs root");
        return;
    }
    // Each kill comes within about a millisecond of its answer, before approvald's writer
    // commits the row: at least one of the five is brought back.
    answered_then_killed("approvald", &[APPROVALD_JOURNAL, EXECUTOR_OUTBOX]);
}

#[test]
fn a_call_answered_just_before_the_executor_dies_is_in_the_audit() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("the sandbox (and so unasked calls) needs root");
        return;
    }
    // approvald has usually read the row by the kill, and commits it as it stops with the
    // worker set; the outbox covers a row the executor had not yet sent.
    answered_then_killed("executor", &[]);
}

/// Wait until `role`'s worker is another process than `killed` (the supervisor restarted
/// the worker set).
fn replaced(server: &Server, role: &str, killed: i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while server
        .workers()
        .iter()
        .all(|(r, pid)| r != role || *pid == killed)
    {
        assert!(Instant::now() < deadline, "{role} was not restarted");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill(pid: i32) {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Connect to the approvals socket as the owner would, and send a frame that is no
/// frame: approvald drops that connection and keeps serving.
fn garbage_to_approvals_socket(fx: &Fixture) {
    let sock = fx.state_dir().join("protocol/approvals.sock");
    if let Ok(mut s) = nl2sh_proto::unix_socket::connect(&sock) {
        let _ = s.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8]);
        let _ = s.write_all(&[0u8; 64]);
    }
}
