//! End to end over the real binary: the process tree, its privileges, signals and the
//! death of workers.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nl2sh_tests::{alive, initialize_body, is_root, proc_status, Fixture, Server};

#[test]
fn netd_runs_unprivileged_and_the_others_keep_the_supervisor_uid() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let netd = server.worker("netd");
    let executor = server.worker("executor");
    let approvald = server.worker("approvald");
    let my_uid = proc_status(server.pid(), "Uid");
    assert_eq!(proc_status(executor, "Uid"), my_uid);
    assert_eq!(proc_status(approvald, "Uid"), my_uid);
    for f in ["Uid", "Gid"] {
        eprintln!("netd {f}: {}", proc_status(netd, f));
    }
    for f in ["CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"] {
        assert_eq!(proc_status(netd, f), "0000000000000000", "netd {f}");
    }
    assert_eq!(proc_status(netd, "NoNewPrivs"), "1");
    // The supervisor must not set no_new_privs (it would block SELinux transitions).
    assert_eq!(proc_status(server.pid(), "NoNewPrivs"), "0");
    if is_root() {
        for f in ["Uid", "Gid"] {
            let ids: Vec<u32> = proc_status(netd, f)
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            assert!(ids.iter().all(|&id| id == 65534), "netd {f} {ids:?}");
        }
        // The state directory is private to the supervisor's uid...
        let meta = std::fs::metadata(fx.state_dir()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), 0);
        // ...so netd's identity cannot open it.
        let out = std::process::Command::new("ls")
            .arg(fx.state_dir())
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "uid 65534 could list the state directory"
        );
    } else {
        eprintln!("not root: identity drop not exercised");
    }
}

#[test]
fn sigterm_lets_an_in_flight_request_finish_then_exits_zero_leaving_nothing() {
    use std::io::Write;
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let workers = server.workers();
    assert_eq!(workers.len(), 3, "{workers:?}");
    // An in-flight request: headers and half the body sent before the signal.
    let body = initialize_body("2025-11-25");
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    let mut s = std::net::TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.host_header(),
        server.token(),
        body.len()
    )
    .unwrap();
    s.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(rest).unwrap();
    let resp = nl2sh_tests::read_response(&mut s);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert!(resp.json()["result"]["protocolVersion"].is_string());
    let status = server.wait(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", server.stderr());
    for (role, pid) in workers {
        assert!(!alive(pid), "{role} ({pid}) survived the supervisor");
    }
    assert!(!fx.state_dir().join("protocol/connection.json").exists());
}

#[test]
fn sigint_also_stops_cleanly() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let workers = server.workers();
    server.signal(libc::SIGINT);
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
    assert!(workers.iter().all(|(_, pid)| !alive(*pid)));
}

/// A new worker set, all three running, none of them in `old`.
fn wait_new_workers(server: &Server, old: &[(String, i32)]) -> Vec<(String, i32)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = server.workers();
        let fresh = now.len() == 3 && now.iter().all(|(_, p)| !old.iter().any(|(_, o)| o == p));
        if fresh {
            return now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new worker set; have {now:?}; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An MCP initialize on the URL and token the service started with, retried briefly
/// while the new set comes up (the listener stays open: connections wait in its queue).
fn answers_again(server: &Server) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let resp = server.mcp(&initialize_body("2025-11-25"));
        if resp.status == 200 {
            assert!(resp.json()["result"]["protocolVersion"].is_string());
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no answer after the restart: {resp:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn connection_record(fx: &Fixture) -> serde_json::Value {
    let text = std::fs::read_to_string(fx.state_dir().join("protocol/connection.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn killing_any_worker_restarts_the_workers_on_the_same_url() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    for (n, role) in ["netd", "executor", "approvald"].into_iter().enumerate() {
        let workers = server.workers();
        let victim = server.worker(role);
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(victim, libc::SIGKILL) };
        let fresh = wait_new_workers(&server, &workers);
        for (r, pid) in &workers {
            assert!(
                !alive(*pid),
                "{r} ({pid}) of the old set survived {role}'s death"
            );
        }
        answers_again(&server);
        let err = server.stderr();
        assert!(
            err.contains(&format!("worker {role} (pid {victim}) exited unexpectedly")),
            "{role}: {err}"
        );
        assert!(err.contains("signal 9"), "{role}: {err}");
        // Written once the new set has started (it may answer a moment before).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut record = connection_record(&fx);
        while record["restarts"] != n + 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            record = connection_record(&fx);
        }
        assert_eq!(record["restarts"], n + 1, "{record}");
        assert!(
            record["last_restart_cause"]
                .as_str()
                .is_some_and(|c| c.contains(role)),
            "{record}"
        );
        assert_eq!(fresh.len(), 3);
    }
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
    assert!(!fx.state_dir().join("protocol/connection.json").exists());
}

#[test]
fn a_crash_loop_stops_the_service_and_says_why() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let mut last = 0;
    for n in 0..6 {
        let workers = server.workers();
        last = server.worker("executor");
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(last, libc::SIGKILL) };
        // Five deaths in a minute are restarted (each set serves before the next death);
        // the sixth is a crash loop.
        if n < 5 {
            wait_new_workers(&server, &workers);
            answers_again(&server);
        }
    }
    let status = server.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{}", server.stderr());
    let err = server.stderr();
    assert!(
        err.contains("nl2sh: stopping: 6 worker deaths within 60s (last: executor (pid"),
        "{err}"
    );
    assert!(err.contains(&format!("pid {last}")), "{err}");
    // `service status` says it failed, and why.
    let out = fx
        .command(&["service", "status", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["failure"]["restarts"], 5, "{v}");
    assert!(
        v["failure"]["cause"]
            .as_str()
            .is_some_and(|c| c.contains("executor") && c.contains("signal 9")),
        "{v}"
    );
    let out = fx.command(&["service", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("failed: the workers kept dying"), "{text}");
    // A new start clears it.
    let mut again = Server::start(&fx, &[], &[]);
    let out = fx
        .command(&["service", "status", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "running", "{v}");
    again.signal(libc::SIGTERM);
    assert_eq!(again.wait(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn killing_the_supervisor_leaves_no_worker() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let workers = server.workers();
    server.signal(libc::SIGKILL);
    server.wait(Duration::from_secs(10));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while workers.iter().any(|(_, p)| alive(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for (r, pid) in &workers {
        assert!(!alive(*pid), "{r} ({pid}) outlived a killed supervisor");
    }
}

#[test]
fn workers_refuse_to_run_outside_the_tree() {
    let out = std::process::Command::new(nl2sh_tests::nl2sh_bin())
        .args(["__nl2sh-worker", "executor", "info"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no SupervisorExecutor channel inherited at fd 3")
            && err.contains("nl2sh protocol serve"),
        "{err}"
    );
}

#[test]
fn the_oom_killer_takes_a_sandboxed_command_first_and_the_supervisor_last() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("lowering a score needs root");
        return;
    }
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let score = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
            .unwrap()
            .trim()
            .to_string()
    };
    // Lowering a score needs CAP_SYS_RESOURCE, which some containers withhold even from
    // root; the supervisor then keeps the score it was started with.
    let cap_eff =
        u64::from_str_radix(&proc_status(std::process::id() as i32, "CapEff"), 16).unwrap();
    const CAP_SYS_RESOURCE: u32 = 24;
    let can_lower = cap_eff & (1 << CAP_SYS_RESOURCE) != 0;
    assert_eq!(score(server.pid()), if can_lower { "-900" } else { "0" });
    for role in ["netd", "executor", "approvald"] {
        assert_eq!(score(server.worker(role)), "0", "{role}");
    }
    let r = server.call_tool(
        "nl2sh_invoke",
        serde_json::json!({"tool": "shell.exec", "arguments": {"command": "cat /proc/self/oom_score_adj"}}),
    );
    let out = r.output();
    if out["sandboxed"] == true {
        assert_eq!(out["stdout"].as_str().unwrap().trim(), "1000", "{out}");
    }
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn sigterm_answers_a_long_call_in_flight_with_an_error() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let tag = format!(
        "{}.{}",
        40 + std::process::id() % 10,
        std::process::id() % 1000
    );
    let call = server.invoke_async(
        "shell.exec",
        serde_json::json!({"command": format!("sleep {tag}"), "timeout": 600}),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while nl2sh_tests::processes_with(&format!("sleep {tag}")).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the call did not start:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.signal(libc::SIGTERM);
    // Answered (an error: it was cancelled), not cut off, within the grace.
    let r = call.join().expect("the call got an HTTP answer");
    assert!(r.is_error, "{:?}", r.output());
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
    assert!(nl2sh_tests::processes_with(&format!("sleep {tag}")).is_empty());
}
