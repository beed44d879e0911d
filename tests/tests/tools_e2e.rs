//! Every direct tool end to end through the real tree (HTTP, `nl2sh_invoke`), success
//! and failure, and the safety properties users rely on: a mutation without approval is
//! refused and provably not run; timeouts and cancellation kill the whole process group.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use nl2sh_tests::{alive, Fixture, Server, StdioClient};

const AUTO_APPROVE: &str = "protocol_auto_approve = true\n";

fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_dead(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn the_catalog_lists_the_linux_tools_and_no_android_tool_without_its_programs() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let r = server.call_tool("nl2sh_tools", json!({}));
    assert!(!r.is_error, "{r:?}");
    let names: Vec<&str> = r.structured["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in [
        "shell.exec",
        "fs.read",
        "fs.list",
        "fs.stat",
        "fs.write",
        "device.info",
        "process.list",
        "device.kernel_log",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.starts_with("android.")),
        "{names:?}"
    );
    for t in r.structured["tools"].as_array().unwrap() {
        assert_eq!(t["input_schema"]["type"], "object", "{t}");
    }
}

#[test]
fn read_only_tools_run_without_approval() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let dir = fx.dir.path();
    std::fs::write(dir.join("hello.txt"), "hello, file\n").unwrap();

    let r = server.invoke(
        "shell.exec",
        json!({"command": "echo hello; echo oops >&2"}),
    );
    assert!(!r.is_error, "{r:?}");
    let out = r.output();
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(r.structured["tool"], "shell.exec");
    assert_eq!(r.structured["success"], true);

    let path = dir.join("hello.txt");
    let r = server.invoke("fs.read", json!({"path": path, "offset": 7, "length": 4}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["content"], "file");
    assert_eq!(r.output()["size"], 12);
    assert_eq!(r.output()["eof"], false);

    let r = server.invoke("fs.list", json!({"path": dir}));
    let listing = r.output();
    let names: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"hello.txt") && names.contains(&"config.toml"),
        "{names:?}"
    );

    let r = server.invoke("fs.stat", json!({"path": path}));
    assert_eq!(r.output()["type"], "file");
    assert_eq!(r.output()["size"], 12);
    let r = server.invoke("fs.stat", json!({"path": dir.join("absent")}));
    assert_eq!(r.output()["exists"], false);

    // Commands get default signal dispositions, even though the workers ignore stop
    // signals (SIGHUP bit 0, SIGINT bit 1, SIGTERM bit 14 of SigIgn).
    let r = server.invoke(
        "shell.exec",
        json!({"command": "grep SigIgn /proc/self/status"}),
    );
    let line = r.output()["stdout"].as_str().unwrap().to_string();
    let mask = u64::from_str_radix(line.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & (1 | 1 << 1 | 1 << 14), 0, "{line}");

    let r = server.invoke("device.info", json!({}));
    assert!(!r.is_error, "{r:?}");
    assert!(r.output()["memory"]["memtotal_kib"].as_u64().unwrap() > 0);

    let r = server.invoke("process.list", json!({"filter": "nl2sh-netd"}));
    assert!(!r.is_error, "{r:?}");
    let procs = r.output()["processes"].as_array().unwrap().clone();
    assert!(
        procs
            .iter()
            .any(|p| p["pid"] == json!(server.worker("netd"))),
        "{procs:?}"
    );

    // The kernel log, read by the tool as the executor (root here, when the tests are).
    let r = server.invoke(
        "device.kernel_log",
        json!({"lines": 5, "min_level": "debug"}),
    );
    if std::fs::File::open("/dev/kmsg").is_ok() {
        assert!(!r.is_error, "{r:?}");
        let records = r.output()["records"].as_array().unwrap().clone();
        assert!(!records.is_empty() && records.len() <= 5, "{records:?}");
    } else {
        assert!(r.is_error, "{r:?}");
        assert!(
            r.structured["output"]
                .as_str()
                .unwrap()
                .contains("cannot read the kernel log"),
            "{r:?}"
        );
    }
}

#[test]
fn failures_are_is_error_results_that_say_why() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let r = server.invoke(
        "shell.exec",
        json!({"command": "ls /nonexistent-nl2sh-path"}),
    );
    assert!(r.is_error);
    assert_eq!(r.output()["exit_code"], 2);
    assert!(r.output()["stderr"]
        .as_str()
        .unwrap()
        .contains("nonexistent"));

    let r = server.invoke("fs.read", json!({"path": "/nonexistent-nl2sh-path"}));
    assert!(r.is_error);
    assert!(
        r.output()["error"]
            .as_str()
            .unwrap()
            .contains("cannot open"),
        "{r:?}"
    );

    let r = server.invoke("no.such.tool", json!({}));
    assert!(r.is_error);
    assert!(
        r.output()["error"]
            .as_str()
            .unwrap()
            .contains("nl2sh_tools"),
        "{r:?}"
    );

    let r = server.invoke("shell.exec", json!({"cmd": "ls"}));
    assert!(r.is_error);
    let err = r.output()["error"].as_str().unwrap().to_string();
    assert!(
        err.contains("arguments.command") || err.contains("arguments.cmd"),
        "{err}"
    );

    let r = server.invoke("fs.read", json!({"path": "relative/path"}));
    assert!(r.is_error);
    assert!(
        r.output()["error"].as_str().unwrap().contains("absolute"),
        "{r:?}"
    );

    let r = server.invoke("shell.exec", json!({"command": "echo x", "timeout": 0}));
    assert!(r.is_error);
    assert!(
        r.output()["error"]
            .as_str()
            .unwrap()
            .contains("arguments.timeout"),
        "{r:?}"
    );
}

#[test]
fn a_mutation_without_approval_is_refused_and_not_run() {
    // Nobody approves: each call waits its (short) approval time out and is refused.
    let fx = Fixture::new("approval_timeout_secs = 1\n");
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("marker");
    for command in [
        format!("touch {}", marker.display()),
        format!("echo x > {}", marker.display()),
        format!("ls; touch {}", marker.display()),
        format!("$(echo touch) {}", marker.display()),
        format!("sh -c 'touch {}'", marker.display()),
    ] {
        let r = server.invoke("shell.exec", json!({"command": command}));
        assert!(r.is_error, "{command}: {r:?}");
        let err = r.output()["error"].as_str().unwrap().to_string();
        assert!(err.contains("needs local approval"), "{command}: {err}");
        assert!(!marker.exists(), "{command} ran without approval");
    }
    let r = server.invoke("fs.write", json!({"path": marker, "content": "x"}));
    assert!(r.is_error, "{r:?}");
    assert!(!marker.exists(), "fs.write ran without approval");
}

#[test]
fn with_protocol_auto_approve_mutations_run() {
    let fx = Fixture::new(AUTO_APPROVE);
    let server = Server::start(&fx, &[], &[]);
    let marker = fx.dir.path().join("marker");
    let r = server.invoke(
        "shell.exec",
        json!({"command": format!("touch {}", marker.display())}),
    );
    assert!(!r.is_error, "{r:?}");
    assert!(marker.exists());

    let file = fx.dir.path().join("written.txt");
    let r = server.invoke(
        "fs.write",
        json!({"path": file, "content": "one\n", "permissions": "0600"}),
    );
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["mode"], "0600");
    // create refuses an existing file; append and overwrite do what they say.
    let r = server.invoke("fs.write", json!({"path": file, "content": "two\n"}));
    assert!(r.is_error, "{r:?}");
    let r = server.invoke(
        "fs.write",
        json!({"path": file, "content": "two\n", "mode": "append"}),
    );
    assert!(!r.is_error, "{r:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");
    let r = server.invoke(
        "fs.write",
        json!({"path": file, "content": "//4A", "encoding": "base64", "mode": "overwrite"}),
    );
    assert!(!r.is_error, "{r:?}");
    assert_eq!(std::fs::read(&file).unwrap(), vec![0xffu8, 0xfe, 0]);
    // Not UTF-8, so it comes back as base64; the file is private (in a private
    // directory), so it is read unconfined, which auto-approve lets run.
    let r = server.invoke("fs.read", json!({"path": file, "unconfined": true}));
    assert_eq!(r.output()["encoding"], "base64");
    assert_eq!(r.output()["content"], "//4A");
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let fx = Fixture::new(AUTO_APPROVE);
    let server = Server::start(&fx, &[], &[]);
    let pidfile = fx.dir.path().join("sleep.pid");
    let command = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let r = server.invoke("shell.exec", json!({"command": command, "timeout": 1}));
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.output()["timed_out"], true, "{r:?}");
    let pid: i32 = wait_for_file(&pidfile).parse().unwrap();
    assert!(
        wait_dead(pid),
        "the sleep grandchild ({pid}) survived the timeout"
    );
}

#[test]
fn output_is_bounded_with_an_explicit_marker() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let r = server.invoke("shell.exec", json!({"command": "seq 1 100000"}));
    assert!(!r.is_error, "{r:?}");
    let out = r.output();
    assert_eq!(out["stdout_truncated"], true);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.len() < 64 * 1024);
    assert!(
        stdout.ends_with("more bytes]"),
        "{}",
        &stdout[stdout.len() - 80..]
    );
}

#[test]
fn stopping_the_service_kills_running_commands() {
    let fx = Fixture::new(AUTO_APPROVE);
    let mut server = Server::start(&fx, &[], &[]);
    let pidfile = fx.dir.path().join("sleep.pid");
    let command = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let addr = server.addr;
    let token = server.token().to_string();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nl2sh_invoke", "arguments": {"tool": "shell.exec",
        "arguments": {"command": command, "timeout": 600}}}})
    .to_string();
    let caller = std::thread::spawn(move || nl2sh_tests::mcp_post(addr, &token, &body));
    let pid: i32 = wait_for_file(&pidfile).parse().unwrap();
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert!(
        wait_dead(pid),
        "a running command ({pid}) outlived the service"
    );
    let _ = caller.join();
}

#[test]
fn over_stdio_tools_run_as_the_launching_user_and_eof_stops_the_tree() {
    let fx = Fixture::new(AUTO_APPROVE);
    let mut s = StdioClient::start(&fx);
    let id_u = |s: &mut StdioClient, id: i64, arguments: Value| {
        s.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "nl2sh_invoke", "arguments": {"tool": "shell.exec", "arguments": arguments}}}),
        );
        let r = s.response(id);
        let output: Value =
            serde_json::from_str(r["result"]["structuredContent"]["output"].as_str().unwrap())
                .unwrap();
        output
    };
    // Approved (here by protocol_auto_approve), a command runs as the launching user.
    let output = id_u(&mut s, 1, json!({"command": "id -u", "unconfined": true}));
    // SAFETY: getuid has no arguments.
    let uid = unsafe { libc::getuid() };
    assert_eq!(output["stdout"].as_str().unwrap().trim(), uid.to_string());
    assert_eq!(output["sandboxed"], false);
    // Unasked, a read-only command runs in the sandbox, as its identity (which needs root;
    // without it nothing runs unasked and auto-approve lets it run as the user).
    let output = id_u(&mut s, 2, json!({"command": "id -u"}));
    if uid == 0 {
        assert_eq!(output["sandboxed"], true, "{output}");
        let sandbox_uid: u32 = output["stdout"].as_str().unwrap().trim().parse().unwrap();
        assert!(
            sandbox_uid >= nl2sh_proto::config::DEFAULT_SANDBOX_UID_BASE,
            "a uid of the sandbox's range: {output}"
        );
    }
    drop(s.stdin);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stdio server did not stop at EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cancelling_a_call_over_stdio_kills_its_process_group() {
    let fx = Fixture::new(AUTO_APPROVE);
    let mut s = StdioClient::start(&fx);
    let pidfile = fx.dir.path().join("sleep.pid");
    let command = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    s.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "nl2sh_invoke", "arguments": {"tool": "shell.exec",
        "arguments": {"command": command, "timeout": 600}}}}),
    );
    let pid: i32 = wait_for_file(&pidfile).parse().unwrap();
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "test"}}),
    );
    assert!(
        wait_dead(pid),
        "the sleep grandchild ({pid}) survived cancellation"
    );
    let _ = s.child.kill();
    let _ = s.child.wait();
}

#[test]
fn a_second_protocol_process_on_the_same_state_is_refused_even_over_stdio() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let out = fx
        .command(&["protocol", "stdio"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("pid {}", server.pid())) && err.contains("http"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdio wrote to stdout: {:?}",
        out.stdout
    );
}

#[test]
fn the_catalog_is_discovered_again_on_demand() {
    let fx = Fixture::new("");
    let bin = fx.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = nl2sh_tests::path_with(&bin);
    let server = Server::start(&fx, &[], &[("PATH", &path)]);
    let android = |server: &Server| {
        let r = server.call_tool("nl2sh_tools", json!({}));
        r.structured["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"].as_str().unwrap().starts_with("android."))
            .count()
    };
    assert_eq!(android(&server), 0);
    // The Android programs appear on PATH after start (a package was installed).
    for entry in std::fs::read_dir(nl2sh_tests::android_standins()).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), bin.join(entry.file_name())).unwrap();
    }
    assert!(android(&server) >= 11, "android tools did not appear");
    let r = server.invoke("android.packages", json!({}));
    assert!(!r.is_error, "{r:?}");
    // Privileged diagnostics with a fixed command line answer without a prompt; a
    // service whose dump is private is refused with the way to ask for it.
    let r = server.invoke("android.logcat", json!({"lines": 5, "buffer": "crash"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["count"], 4, "{r:?}");
    let r = server.invoke("android.dumpsys", json!({"service": "battery"}));
    assert!(!r.is_error, "{r:?}");
    assert!(r.output()["text"].as_str().unwrap().contains("level: 87"));
    let r = server.invoke("android.dumpsys", json!({"service": "clipboard"}));
    assert!(r.is_error, "{r:?}");
    let said = r.structured["output"].as_str().unwrap();
    assert!(
        said.contains("unconfined") && said.contains("approval"),
        "{said}"
    );
}

#[test]
fn cancelling_a_call_withdraws_its_pending_approval() {
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let mut s = StdioClient::start(&fx);
    let marker = fx.dir.path().join("withdrawn-marker");
    s.send(
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "nl2sh_invoke", "arguments": {"tool": "shell.exec",
        "arguments": {"command": format!("touch {}", marker.display())}}}}),
    );
    let pending = nl2sh_tests::wait_pending(&fx, 1);
    assert_eq!(pending[0]["origin"], "mcp_stdio");
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 8, "reason": "test"}}),
    );
    nl2sh_tests::wait_pending(&fx, 0);
    // Approving the withdrawn id is impossible, and nothing ran.
    let id = pending[0]["id"].as_str().unwrap();
    let (code, _, _) = nl2sh_tests::run_on_terminal(&fx, &["protocol", "approve", id]);
    assert_ne!(code, Some(0));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists());
    let (_, out, _) = nl2sh_tests::run_without_terminal(&fx, &["protocol", "audit", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert!(
        rows.iter().any(|r| r["decision"] == "withdrawn"),
        "{rows:?}"
    );
    let _ = s.child.kill();
    let _ = s.child.wait();
}
