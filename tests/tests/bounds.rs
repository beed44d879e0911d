//! Bounded under abuse (docs/SECURITY.md, "Availability"): a flood of refused requests
//! writes a bounded number of log lines, concurrent reads of large tasks do not make
//! approvald hold a copy each, and a hostile model cannot make netd build or send
//! unbounded request bodies. Each prints the device's `MemAvailable` before and during
//! the abuse, and the figures it asserts on. Every server binds 127.0.0.1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nl2sh_proto::limits::{MAX_MODEL_REQUEST_BYTES, MAX_TASK_DOCUMENT_BYTES};
use nl2sh_tests::scripted_model::{Reply, ScriptedModel};
use nl2sh_tests::{is_root, mem_available_kib, proc_kib, Fixture, Server};
use serde_json::{json, Value};

fn kib(v: Option<u64>) -> String {
    v.map_or_else(|| "?".into(), |k| format!("{} MiB", k / 1024))
}

/// Send `n` requests without a token on one keep-alive connection; each must be 401.
/// The refusal lines `worker` logged, and the refusals they count: each line is the first
/// refusal alone, or a summary with `refused=N`.
fn refusal_lines<'a>(stderr: &'a str, worker: &str) -> (Vec<&'a str>, u64) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(worker) && l.contains("refused"))
        .collect();
    let counted = lines
        .iter()
        .map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("refused="))
                .map_or(1, |n| n.parse::<u64>().expect("refused=N"))
        })
        .sum();
    (lines, counted)
}

fn refused_requests(addr: SocketAddr, n: usize) {
    let request = format!("POST /a2a HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    refused_as(addr, &request, "401", n);
}

/// Send `request` `n` times on one keep-alive connection; each answer must be `status`.
fn refused_as(addr: SocketAddr, request: &str, status: &str, n: usize) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    for _ in 0..n {
        s.write_all(request.as_bytes()).expect("write");
        // The head, then the body its Content-Length declares.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let got = s.read(&mut chunk).expect("read");
            assert!(got > 0, "the connection closed");
            buf.extend_from_slice(&chunk[..got]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        assert!(head.starts_with(&format!("http/1.1 {status}")), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("content-length");
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            let got = s.read(&mut chunk).expect("read");
            assert!(got > 0, "the connection closed");
            buf.extend_from_slice(&chunk[..got]);
        }
        buf.drain(..head_end + len);
    }
}

#[test]
fn a_flood_of_refused_requests_writes_a_bounded_log_that_counts_them_all() {
    const THREADS: usize = 4;
    const EACH: usize = 2500;
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let addr = server.addr;
    let before = mem_available_kib();
    let started = Instant::now();
    let flood: Vec<_> = (0..THREADS)
        .map(|_| std::thread::spawn(move || refused_requests(addr, EACH)))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let during = mem_available_kib();
    for t in flood {
        t.join().expect("flood thread");
    }
    let took = started.elapsed();
    // Stopping netd writes the summary of what was counted since the last line.
    server.signal(libc::SIGTERM);
    server.wait(Duration::from_secs(30));
    let stderr = server.stderr();
    let (lines, counted) = refusal_lines(&stderr, "netd");
    let total = (THREADS * EACH) as u64;
    println!(
        "{total} refused requests in {took:?}: {} log line(s), {} bytes of stderr in all; \
         MemAvailable before {}, during {}",
        lines.len(),
        stderr.len(),
        kib(before),
        kib(during)
    );
    for l in &lines {
        println!("  {l}");
    }
    assert_eq!(counted, total, "every refusal is counted once:\n{stderr}");
    // One line for the first refusal, then one summary per interval, one at shutdown.
    let interval = nl2sh_proto::limits::REFUSAL_LOG_INTERVAL.as_secs_f64();
    let most = 3 + (took.as_secs_f64() / interval).ceil() as usize;
    assert!(
        lines.len() <= most,
        "{} lines for {total} refusals (at most {most})",
        lines.len()
    );
    assert!(
        lines.iter().any(|l| l.contains("from 1 address")),
        "the summary counts the one peer address: {lines:?}"
    );
}

const KEY_ENV: &str = "NL2SH_BOUNDS_MODEL_KEY";
const KEY: &str = "sk-bounds-0123456789abcdef";

fn model_config(model: &ScriptedModel, max_steps: u32) -> String {
    model.config(KEY_ENV, max_steps)
}

/// A2A SendMessage, waiting for the task's end; the task.
fn delegate(server: &Server, text: &str) -> Value {
    let message = json!({"messageId": "m-bounds", "role": "ROLE_USER", "parts": [{"text": text}]});
    let answer = server.a2a(
        "SendMessage",
        json!({"message": message, "configuration": {"returnImmediately": false}}),
    );
    assert!(answer.get("error").is_none(), "an error: {answer}");
    answer["result"]["task"].clone()
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Reset the peak RSS of `pid` (VmHWM) so it measures from now; false if the kernel
/// refused.
fn reset_peak(pid: i32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// One GetTask of `id` with the token, on its own connection: the body's length and
/// whether it is the task asked for.
fn get_task(addr: SocketAddr, token: &str, id: &str) -> (usize, bool) {
    let r = nl2sh_tests::try_a2a(
        addr,
        token,
        "GetTask",
        json!({"id": id}),
        Duration::from_secs(120),
    )
    .expect("GetTask answered");
    assert_eq!(r.status, 200);
    let v = r.json();
    (r.body.len(), v["result"]["id"] == id)
}

#[test]
fn concurrent_reads_of_a_large_task_are_bounded_in_approvald() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("resetting a worker's peak RSS needs root");
        return;
    }
    const READERS: usize = 120;
    // The answer is in the task three times (status message, artifact, history): close
    // to the limit.
    let answer = "a".repeat(MAX_TASK_DOCUMENT_BYTES / 3 - 48 * 1024);
    let model = ScriptedModel::start([Reply::answer(&answer)]);
    model.keep_bodies(false);
    let fx = Fixture::new(&model_config(&model, 2));
    let server = Server::start(&fx, &[], &[(KEY_ENV, KEY)]);
    let task = delegate(&server, "say a lot");
    assert_eq!(
        task["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{}",
        status_text(&task)
    );
    let id = task["id"].as_str().expect("id").to_string();
    let token = server.token().to_string();
    let (bytes, right) = get_task(server.addr, &token, &id);
    assert!(
        right && bytes > MAX_TASK_DOCUMENT_BYTES * 9 / 10,
        "{bytes} bytes"
    );
    let approvald = server.worker("approvald");
    let rss_before = proc_kib(approvald, "status", "VmRSS").expect("VmRSS");
    assert!(reset_peak(approvald), "cannot reset approvald's VmHWM");
    let mem_before = mem_available_kib();
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (addr, token, id) = (server.addr, token.clone(), id.clone());
            std::thread::spawn(move || get_task(addr, &token, &id))
        })
        .collect();
    // Sampled while the reads are under way.
    let mut mem_during = mem_before;
    let mut answers = Vec::new();
    for (i, r) in readers.into_iter().enumerate() {
        if i == READERS / 4 {
            mem_during = mem_available_kib();
        }
        answers.push(r.join().expect("reader"));
    }
    let peak = proc_kib(approvald, "status", "VmHWM").expect("VmHWM");
    let rss_after = proc_kib(approvald, "status", "VmRSS").expect("VmRSS");
    println!(
        "{READERS} concurrent GetTask of a {bytes}-byte task: approvald VmRSS before {} KiB, \
         peak (VmHWM) {} KiB, after {} KiB; MemAvailable before {}, during {}",
        rss_before,
        peak,
        rss_after,
        kib(mem_before),
        kib(mem_during)
    );
    assert!(
        answers.iter().all(|&(b, right)| right && b == bytes),
        "every GetTask gets the whole task"
    );
    // The budget is four documents; each in flight is held about three times over (the
    // record, its frame, the write), so the peak stays well under 160 MiB above before.
    let bound = rss_before + 160 * 1024;
    assert!(
        peak < bound,
        "approvald peaked at {peak} KiB (before {rss_before} KiB, bound {bound} KiB)"
    );
}

#[test]
fn a_hostile_model_cannot_make_netd_send_or_hold_unbounded_requests() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("the Agent's reads run in the sandbox, which needs root");
        return;
    }
    const STEPS: u32 = 10;
    let fx_dir = tempfile::tempdir().expect("tempdir");
    let big_file = fx_dir.path().join("big.txt");
    std::fs::write(&big_file, "b".repeat(64 * 1024)).expect("write");
    // Every reply: a megabyte of text and four reads of a big file, again and again.
    let reply = |step: u32| {
        let calls: Vec<Value> = (0..4)
            .map(|i| {
                json!({"id": format!("call-{step}-{i}"), "type": "function",
                   "function": {"name": "fs__read",
                                "arguments": json!({"path": big_file}).to_string()}})
            })
            .collect();
        let message = json!({"role": "assistant", "content": "h".repeat(1024 * 1024),
                             "tool_calls": calls});
        Reply::Raw(
            json!({"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                   "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})
            .to_string(),
        )
    };
    let model = ScriptedModel::start((0..STEPS).map(reply));
    model.keep_bodies(false);
    let fx = Fixture::new(&model_config(&model, STEPS));
    let server = Server::start(&fx, &[], &[(KEY_ENV, KEY)]);
    let netd = server.worker("netd");
    let rss_before = proc_kib(netd, "status", "VmRSS").expect("VmRSS");
    assert!(reset_peak(netd), "cannot reset netd's VmHWM");
    let mem_before = mem_available_kib();
    let during = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(1500));
        mem_available_kib()
    });
    let task = delegate(&server, "read that file, again and again");
    let peak = proc_kib(netd, "status", "VmHWM").expect("VmHWM");
    let mem_during = during.join().expect("sampler");
    let sizes: Vec<usize> = model.requests().iter().map(|r| r.body_bytes).collect();
    let sent: usize = sizes.iter().sum();
    println!(
        "{} requests to the hostile model, {sent} bytes in all, largest {} (limit {}): \
         netd VmRSS before {rss_before} KiB, peak (VmHWM) {peak} KiB; MemAvailable \
         before {}, during {}; the task: {} / {}",
        sizes.len(),
        sizes.iter().max().copied().unwrap_or(0),
        MAX_MODEL_REQUEST_BYTES,
        kib(mem_before),
        kib(mem_during),
        task["status"]["state"],
        status_text(&task)
    );
    assert_eq!(sizes.len(), STEPS as usize, "{sizes:?}");
    assert!(
        sizes.iter().all(|&b| b <= MAX_MODEL_REQUEST_BYTES),
        "a request over the limit: {sizes:?}"
    );
    // The task ends, and says why.
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert!(
        status_text(&task).contains(&format!("max_steps ({STEPS})")),
        "{}",
        status_text(&task)
    );
    // Without the limit netd held every reply and sent it again each step (10 MiB by
    // the last, copied while written: 36 MiB above before); with it, about 10.
    let bound = rss_before + 24 * 1024;
    assert!(
        peak < bound,
        "netd peaked at {peak} KiB (before {rss_before} KiB, bound {bound} KiB)"
    );
}

#[test]
fn a_flood_of_refused_console_requests_writes_a_bounded_log_too() {
    const EACH: usize = 2000;
    let fx = Fixture::new(
        "web_port = 0\nprotocol_service_port = 0\nprotocol_start_with_service = false\n",
    );
    let mut child = fx
        .command(&["--web-only"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start nl2sh --web-only");
    let mut pipe = child.stderr.take().expect("stderr");
    let collected = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = pipe.read_to_string(&mut all);
        all
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let web = loop {
        let (code, out, _) =
            nl2sh_tests::run_without_terminal(&fx, &["service", "status", "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        let port = v["connections"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["transport"] == "web"))
            .and_then(|c| c["listen"].as_str())
            .and_then(|l| l.rsplit_once(':'))
            .and_then(|(_, p)| p.parse::<u16>().ok());
        if let (Some(0), Some(port)) = (code, port) {
            break SocketAddr::from(([127, 0, 0, 1], port));
        }
        assert!(
            Instant::now() < deadline,
            "the console did not start: {out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let before = mem_available_kib();
    // A DNS-rebinding page's requests, and a cross-site page's.
    let rebinding = "GET /api/session HTTP/1.1\r\nHost: attacker.example\r\n\r\n".to_string();
    let cross_site =
        format!("GET /api/session HTTP/1.1\r\nHost: {web}\r\nOrigin: http://evil.example\r\n\r\n");
    let flood = [rebinding, cross_site]
        .map(|request| std::thread::spawn(move || refused_as(web, &request, "403", EACH)));
    std::thread::sleep(Duration::from_millis(200));
    let during = mem_available_kib();
    for t in flood {
        t.join().expect("flood thread");
    }
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let stopped = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < stopped, "the console did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = collected.join().expect("stderr reader");
    let (lines, counted) = refusal_lines(&stderr, "nl2sh-web");
    println!(
        "{} refused console requests: {} log line(s); MemAvailable before {}, during {}",
        2 * EACH,
        lines.len(),
        kib(before),
        kib(during)
    );
    for l in &lines {
        println!("  {l}");
    }
    assert_eq!(
        counted,
        2 * EACH as u64,
        "every refusal is counted:\n{stderr}"
    );
    assert!(lines.len() <= 6, "{} lines", lines.len());
    assert!(
        lines.iter().any(|l| l.contains("Host is not the console's")
            && l.contains("Origin is not the console's")),
        "the summary names both reasons: {lines:?}"
    );
}
