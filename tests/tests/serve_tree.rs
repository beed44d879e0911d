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

#[test]
fn killing_any_worker_takes_the_whole_tree_down_with_a_named_error() {
    for role in ["netd", "executor", "approvald"] {
        let fx = Fixture::new("");
        let mut server = Server::start(&fx, &[], &[]);
        let workers = server.workers();
        let victim = server.worker(role);
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(victim, libc::SIGKILL) };
        let status = server.wait(Duration::from_secs(20));
        assert_ne!(status.code(), Some(0), "{role}: supervisor exited 0");
        let err = server.stderr();
        assert!(
            err.contains(&format!("worker {role} (pid {victim}) exited unexpectedly")),
            "{role}: {err}"
        );
        assert!(err.contains("signal 9"), "{role}: {err}");
        std::thread::sleep(Duration::from_millis(100));
        for (r, pid) in &workers {
            assert!(!alive(*pid), "{r} ({pid}) survived after {role} was killed");
        }
        assert!(!fx.state_dir().join("protocol/connection.json").exists());
    }
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
