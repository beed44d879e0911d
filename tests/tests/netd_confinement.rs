//! End to end over the real binary: netd confined (seccomp allow-list, Landlock, raised
//! open-file limit), what it reports in `nl2sh_inspect`, what happens when it tries what
//! the filter forbids (debug-build test hook), and the front door under an idle flood.
//! Every server binds 127.0.0.1 and every connection goes to loopback.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nl2sh_tests::{initialize_body, is_root, proc_status, Fixture, Server};
use serde_json::json;

/// Architectures netd has a seccomp filter for.
const FILTERED: bool = cfg!(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
));

#[test]
fn netd_is_confined_and_says_so() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let netd = server.worker("netd");

    let r = server.call_tool("nl2sh_inspect", json!({}));
    assert!(!r.is_error, "{:?}", r.structured);
    let report = &r.structured["netd"];
    let seccomp = report["seccomp"].as_str().unwrap();
    let landlock = report["landlock"].as_str().unwrap();
    if FILTERED {
        assert!(seccomp.starts_with("on ("), "{report}");
    }
    assert!(
        landlock == "on" || landlock.starts_with("partial") || landlock.starts_with("off"),
        "{report}"
    );
    assert_eq!(report["no_new_privs"], true, "{report}");
    assert_eq!(report["dumpable"], false, "{report}");
    assert_ne!(report["uid"], 0, "{report}");
    // The executor's part is still there.
    assert!(r.structured["sandbox"].is_object(), "{:?}", r.structured);

    // The kernel agrees: filter mode, and netd's own filters on top of none inherited.
    if FILTERED {
        assert_eq!(proc_status(netd, "Seccomp"), "2");
        let filters: u32 = proc_status(netd, "Seccomp_filters").parse().unwrap();
        assert!(filters >= 3, "{filters} filters");
    }
    // The open-file soft limit was raised to the hard limit (readable by root only: netd
    // is not dumpable).
    if is_root() {
        let limits = std::fs::read_to_string(format!("/proc/{netd}/limits")).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[3], fields[4], "soft limit not raised: {line}");
        assert_eq!(
            report["open_files_limit"].to_string(),
            fields[3],
            "{report}"
        );
    }
    // Said once at start, too.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.stderr().contains("netd confined") {
        assert!(Instant::now() < deadline, "{}", server.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start a server whose netd attempts `violation` right after it started; the
/// supervisor's exit status and stderr.
#[cfg(debug_assertions)]
fn run_violation(fx: &Fixture, violation: &str) -> (std::process::ExitStatus, String) {
    let args = ["protocol", "serve", "--host", "127.0.0.1", "--port", "0"];
    let env = [("NL2SH_TEST_NETD_VIOLATION", violation)];
    // netd dies; the supervisor restarts the workers (the violation is attempted by the
    // first netd only) and keeps serving; then it is stopped.
    let want = "workers restarted on the same listener";
    match Server::start_args(fx, &args, &env) {
        Ok(mut server) => {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !server.stderr().contains(want) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            server.signal(libc::SIGTERM);
            let status = server.wait(Duration::from_secs(20));
            (status, server.stderr())
        }
        Err((code, stderr)) => {
            use std::os::unix::process::ExitStatusExt;
            // The supervisor ended before its startup block was read.
            let status = std::process::ExitStatus::from_raw(code.unwrap_or(1) << 8);
            (status, stderr)
        }
    }
}

#[cfg(debug_assertions)]
fn assert_netd_died(status: std::process::ExitStatus, stderr: &str, how: &str) {
    // The service outlived its netd: restarted, then stopped cleanly.
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("workers restarted on the same listener"),
        "{stderr}"
    );
    let named = stderr
        .lines()
        .any(|l| l.contains("nl2sh: worker netd (pid ") && l.contains(how));
    assert!(named, "no `worker netd (pid N) … {how}` line:\n{stderr}");
    assert!(!stderr.contains("NOT stopped"), "{stderr}");
}

#[cfg(debug_assertions)]
#[test]
fn an_execve_from_netd_kills_it_and_runs_nothing() {
    if !FILTERED {
        nl2sh_proto::test_skip::skip("netd has no seccomp filter for this architecture");
        return;
    }
    let fx = Fixture::new("");
    let (status, stderr) = run_violation(&fx, "execve");
    // SIGSYS: the call never ran. Had `sh -c 'exit 42'` run, netd would have exited 42.
    let how = format!("exited unexpectedly: killed by signal {}", libc::SIGSYS);
    assert_netd_died(status, &stderr, &how);
    assert!(!stderr.contains("exit status 42"), "{stderr}");
}

#[cfg(debug_assertions)]
#[test]
fn a_ptrace_from_netd_kills_it() {
    if !FILTERED {
        nl2sh_proto::test_skip::skip("netd has no seccomp filter for this architecture");
        return;
    }
    let fx = Fixture::new("");
    let (status, stderr) = run_violation(&fx, "ptrace");
    let how = format!("exited unexpectedly: killed by signal {}", libc::SIGSYS);
    assert_netd_died(status, &stderr, &how);
}

#[cfg(debug_assertions)]
#[test]
fn netd_cannot_open_the_state_directory() {
    if !FILTERED {
        nl2sh_proto::test_skip::skip("netd has no seccomp filter for this architecture");
        return;
    }
    let fx = Fixture::new("");
    let (status, stderr) = run_violation(&fx, "open-state");
    // Where Landlock works, netd may open the system resolver's files and nothing else:
    // Landlock refuses (EACCES). Without it, the filter refuses every open (EPERM).
    // Either way netd then ends with a failure, and the workers are restarted.
    assert_netd_died(status, &stderr, "exited unexpectedly: exit status 1");
    let landlock = stderr
        .lines()
        .find(|l| l.contains("netd confined"))
        .is_some_and(|l| l.contains("landlock=on") || l.contains("landlock=partial"));
    let errno = if landlock {
        "os error 13)"
    } else {
        "os error 1)"
    };
    assert!(
        stderr.contains("the violation was refused") && stderr.contains(errno),
        "{stderr}"
    );
}

#[test]
fn an_idle_flood_over_the_cap_leaves_the_owner_answering() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    // More idle connections than netd's cap (256) allows, from the same address as the
    // owner: the oldest give way, the owner's request gets in.
    let flood: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(server.addr).expect("connect"))
        .collect();
    let start = Instant::now();
    let addr = server.addr;
    let token = server.token().to_string();
    let answer = std::thread::spawn(move || {
        nl2sh_tests::mcp_post(addr, &token, &initialize_body("2025-11-25"))
    });
    let deadline = start + Duration::from_secs(5);
    while !answer.is_finished() {
        assert!(
            Instant::now() < deadline,
            "initialize did not answer within 5 s under an idle flood"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = answer.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
    eprintln!(
        "initialize answered in {:?} under the flood",
        start.elapsed()
    );
    // The oldest flooding connection was closed to make room, long before any timeout.
    let mut oldest = flood.into_iter().next().unwrap();
    oldest
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 16];
    match oldest.read(&mut buf) {
        Ok(0) => {}
        Err(e)
            if e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("the oldest idle connection is still open: {other:?}"),
    }
}

/// What one connection got: nothing yet, an answer, or an end without one.
#[derive(Debug, PartialEq)]
enum Heard {
    Nothing,
    Answer(String),
    ClosedSilently(String),
}

/// Read what `stream` has for us now, without waiting for more than `settle`.
fn heard(stream: &mut TcpStream, settle: Duration) -> Heard {
    stream.set_read_timeout(Some(settle)).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if raw.is_empty() {
                    return Heard::Nothing;
                }
                break;
            }
            // A reset after the answer still leaves the answer.
            Err(e) if raw.is_empty() => return Heard::ClosedSilently(e.to_string()),
            Err(_) => break,
        }
    }
    if raw.is_empty() {
        return Heard::ClosedSilently("end of stream".into());
    }
    Heard::Answer(String::from_utf8_lossy(&raw).into_owned())
}

#[test]
fn a_full_table_of_busy_connections_answers_newcomers_503_not_a_reset() {
    use std::io::Write;
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    // Busy, authorized connections: a request head whose body never comes keeps its
    // request in flight until the body timeout (10 s). More than the cap (256), in
    // batches, so netd has read each batch's heads before the next arrives.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 100\r\n\r\n",
        server.host_header(),
        server.token()
    );
    // netd's connection cap: its default limits.
    let cap = nl2sh_netd::HttpLimits::default().max_connections;
    let total = cap + 44;
    let mut streams = Vec::with_capacity(total);
    for batch in 0..total.div_ceil(32) {
        for _ in 0..32.min(total - batch * 32) {
            let mut s = TcpStream::connect(server.addr).expect("connect");
            // A refused connection may already be closed; what it heard is checked below.
            let _ = s.write_all(head.as_bytes());
            streams.push(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));

    let mut busy = 0;
    let mut refused = 0;
    for (i, s) in streams.iter_mut().enumerate() {
        match heard(s, Duration::from_millis(1)) {
            Heard::Nothing => busy += 1,
            Heard::Answer(text) => {
                assert!(text.starts_with("HTTP/1.1 503 "), "connection {i}: {text}");
                assert!(
                    text.contains("Retry-After: 1\r\n"),
                    "connection {i}: {text}"
                );
                assert!(text.contains("connections are in use"), "{text}");
                refused += 1;
            }
            Heard::ClosedSilently(why) => panic!("connection {i} closed with no answer: {why}"),
        }
    }
    eprintln!("{busy} busy, {refused} refused with 503");
    assert!(busy <= cap, "{busy}");
    assert!(
        refused >= 1,
        "nothing was refused: is the cap above {total}?"
    );

    // An owner arriving now is answered too, not reset.
    let r = nl2sh_tests::mcp_post(server.addr, server.token(), &initialize_body("2025-11-25"));
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");

    // Once the table empties, requests are served again.
    drop(streams);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = server.mcp(&initialize_body("2025-11-25"));
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{r:?}");
        assert!(Instant::now() < deadline, "no room after the table emptied");
        std::thread::sleep(Duration::from_millis(50));
    }
    // netd was never killed (by its filter or otherwise) along the way.
    assert!(
        !server.stderr().contains("workers restarted"),
        "{}",
        server.stderr()
    );
}
