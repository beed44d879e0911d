//! Delegated tasks through the real tree: how fast a client gets tasks done over A2A, and
//! how long a ListTasks page takes with the store full (200 tasks, the retention limit).
//! The built-in Agent asks a scripted OpenAI-compatible model on 127.0.0.1 that answers
//! every request at once with a final answer (one model turn per task, no tool call), so
//! the figures are nl2sh's own cost per task: A2A, the task service, approvald's store
//! (SUBMITTED, WORKING, the session, COMPLETED), the executor's catalog and the model
//! round trip on loopback.
//!
//! Run: `cargo build --release --locked && cargo bench -p nl2sh-tests --bench tasks`
//! (uses target/release/nl2sh, or $NL2SH_BIN). About 5 s.
//!
//! * round trips: SendMessage with `returnImmediately`, then GetTask every millisecond
//!   until the task is COMPLETED, one client, then [`CLIENTS`] clients at once (each its
//!   own keep-alive connection, its own contexts, so the tasks run concurrently);
//! * ListTasks: pageSize 50 and 100, with and without `includeArtifacts`, sequential on
//!   one keep-alive connection.
//!
//! There are no budgets for these yet: the table prints the figures only. A wrong answer
//! (an error, a task that does not complete, a page of the wrong size) fails the bench.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nl2sh_tests::scripted_model::{Reply, ScriptedModel};
use nl2sh_tests::{Fixture, Server};
use serde_json::{json, Value};

const KEY_ENV: &str = "NL2SH_BENCH_MODEL_KEY";
const KEY: &str = "sk-bench-tasks-0123456789abcdef";
/// Round trips timed with one client, after the warm-up ones.
const SEQUENTIAL_TASKS: usize = 300;
const WARMUP_TASKS: usize = 30;
/// Concurrent clients, and the round trips each times after its warm-up.
const CLIENTS: usize = 4;
const TASKS_PER_CLIENT: usize = 100;
/// How often a client polls GetTask.
const POLL_EVERY: Duration = Duration::from_millis(1);
/// ListTasks requests timed per configuration, after the warm-up ones.
const LIST_REQUESTS: usize = 200;
const LIST_WARMUP: usize = 20;
const STORED_TASKS: u64 = 200;

fn main() {
    // Every task takes one model request; the model keeps every request it gets (for
    // tests), so the phases are counted, not timed.
    let answers = WARMUP_TASKS + SEQUENTIAL_TASKS + CLIENTS * (WARMUP_TASKS + TASKS_PER_CLIENT);
    let model = ScriptedModel::start((0..answers + 50).map(|_| Reply::answer("Done.")));
    let fx = Fixture::new(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key_env = \"{KEY_ENV}\"\n\
         max_steps = 2\nrequest_timeout_secs = 30\n",
        model.base_url()
    ));
    let server = Server::start(&fx, &[], &[(KEY_ENV, KEY), ("NL2SH_LOG", "warn")]);
    let token = server.token().to_string();
    println!("nl2sh: {}", nl2sh_tests::nl2sh_bin().display());
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // One client.
    let mut conn = Conn::new(server.addr, &token);
    for i in 0..WARMUP_TASKS {
        round_trip(&mut conn, &format!("warm-up {i}"));
    }
    let t0 = Instant::now();
    let sequential: Vec<RoundTrip> = (0..SEQUENTIAL_TASKS)
        .map(|i| round_trip(&mut conn, &format!("sequential {i}")))
        .collect();
    let sequential_rate = SEQUENTIAL_TASKS as f64 / t0.elapsed().as_secs_f64();
    drop(conn);

    // CLIENTS clients at once; the rate is over the span in which all of them measured.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let addr = server.addr;
            let token = token.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::new(addr, &token);
                for i in 0..WARMUP_TASKS {
                    round_trip(&mut conn, &format!("client {c} warm-up {i}"));
                }
                barrier.wait();
                let start = Instant::now();
                let trips: Vec<RoundTrip> = (0..TASKS_PER_CLIENT)
                    .map(|i| round_trip(&mut conn, &format!("client {c} task {i}")))
                    .collect();
                (start, Instant::now(), trips)
            })
        })
        .collect();
    let results: Vec<(Instant, Instant, Vec<RoundTrip>)> = clients
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect();
    let first = results.iter().map(|r| r.0).min().expect("clients");
    let last = results.iter().map(|r| r.1).max().expect("clients");
    let concurrent: Vec<RoundTrip> = results.into_iter().flat_map(|r| r.2).collect();
    let concurrent_rate = concurrent.len() as f64 / (last - first).as_secs_f64();

    // ListTasks with the store at its retention limit.
    let mut conn = Conn::new(server.addr, &token);
    let total = conn.call("ListTasks", json!({"pageSize": 1}))["totalSize"].clone();
    assert_eq!(total, json!(STORED_TASKS), "the store should be full");
    let mut lists = Vec::new();
    for (page_size, artifacts) in [(50, false), (50, true), (100, false), (100, true)] {
        let params = json!({"pageSize": page_size, "includeArtifacts": artifacts});
        for _ in 0..LIST_WARMUP {
            conn.call("ListTasks", params.clone());
        }
        let mut latencies = Vec::with_capacity(LIST_REQUESTS);
        let mut bytes = 0;
        for _ in 0..LIST_REQUESTS {
            let t = Instant::now();
            let (page, size) = conn.call_sized("ListTasks", params.clone());
            latencies.push(t.elapsed());
            bytes = size;
            let tasks = page["tasks"].as_array().expect("tasks");
            assert_eq!(tasks.len(), page_size, "a page of the wrong size");
            assert_eq!(
                tasks.iter().all(|t| t.get("artifacts").is_some()),
                artifacts,
                "artifacts must be there exactly when asked for"
            );
        }
        lists.push((page_size, artifacts, Stats::of(latencies), bytes));
    }
    drop(conn);

    let requests = model.requests().len();
    drop(server);

    // ---- the table ----
    let mut rows: Vec<[String; 5]> = Vec::new();
    for (label, trips, rate) in [
        ("1 client".to_string(), &sequential, sequential_rate),
        (format!("{CLIENTS} clients"), &concurrent, concurrent_rate),
    ] {
        let stats = Stats::of(trips.iter().map(|t| t.elapsed).collect());
        let polls = trips.iter().map(|t| t.polls).sum::<usize>() as f64 / trips.len() as f64;
        rows.push([
            format!("SendMessage(returnImmediately) + GetTask until COMPLETED, {label}"),
            format!("{rate:.0} tasks/s"),
            format!("{:.2} ms", stats.median_ms()),
            format!("{:.2} ms", stats.p99_ms()),
            format!("{polls:.1} GetTask/task, {} tasks", trips.len()),
        ]);
    }
    for (page_size, artifacts, stats, bytes) in &lists {
        rows.push([
            format!(
                "ListTasks pageSize {page_size}{}, {STORED_TASKS} stored",
                if *artifacts {
                    " + includeArtifacts"
                } else {
                    ""
                }
            ),
            format!("{:.0} pages/s", 1000.0 / stats.mean_ms()),
            format!("{:.2} ms", stats.median_ms()),
            format!("{:.2} ms", stats.p99_ms()),
            format!("{} KiB answer", bytes / 1024),
        ]);
    }
    println!();
    println!(
        "delegated tasks over A2A JSON-RPC (scripted model answering at once; {requests} model requests)"
    );
    nl2sh_tests::print_table(&["measure", "rate", "median", "p99", ""], &rows);
}

/// One task from SendMessage to the GetTask that saw it COMPLETED.
struct RoundTrip {
    elapsed: Duration,
    polls: usize,
}

fn round_trip(conn: &mut Conn, text: &str) -> RoundTrip {
    let t0 = Instant::now();
    let sent = conn.call(
        "SendMessage",
        json!({
            "message": {"messageId": format!("bench-{text}"), "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"returnImmediately": true, "historyLength": 0},
        }),
    );
    let id = sent["task"]["id"].as_str().expect("task id").to_string();
    let mut polls = 0;
    loop {
        std::thread::sleep(POLL_EVERY);
        let task = conn.call("GetTask", json!({"id": id, "historyLength": 0}));
        polls += 1;
        match task["status"]["state"].as_str().unwrap_or_default() {
            "TASK_STATE_COMPLETED" => break,
            "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING" => {}
            other => panic!("task {id} ended {other}: {task}"),
        }
    }
    RoundTrip {
        elapsed: t0.elapsed(),
        polls,
    }
}

/// A keep-alive HTTP/1.1 connection to `/a2a` (reopened when the server closed it).
struct Conn {
    addr: SocketAddr,
    auth: String,
    stream: Option<BufReader<TcpStream>>,
}

impl Conn {
    fn new(addr: SocketAddr, token: &str) -> Self {
        Self {
            addr,
            auth: format!("Bearer {token}"),
            stream: None,
        }
    }

    /// The `result` of one JSON-RPC call; an error answer fails the bench.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_sized(method, params).0
    }

    /// The `result`, and the size of the HTTP body it came in.
    fn call_sized(&mut self, method: &str, params: Value) -> (Value, usize) {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let request = format!(
            "POST /a2a HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {auth}\r\n\
             Content-Type: application/json\r\nA2A-Version: 1.0\r\n\
             Content-Length: {len}\r\n\r\n{body}",
            addr = self.addr,
            auth = self.auth,
            len = body.len(),
        );
        // A connection the server closed while idle is reopened once.
        let bytes = match self.exchange(request.as_bytes()) {
            Some(bytes) => bytes,
            None => {
                self.stream = None;
                self.exchange(request.as_bytes())
                    .unwrap_or_else(|| panic!("{method}: the server closed the connection"))
            }
        };
        let answer: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {bytes:?}"));
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        (answer["result"].clone(), bytes.len())
    }

    /// Send `request` and read one response body; `None` if the connection was closed
    /// before an answer began.
    fn exchange(&mut self, request: &[u8]) -> Option<Vec<u8>> {
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(self.addr).expect("connect");
                s.set_nodelay(true).expect("nodelay");
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .expect("timeout");
                self.stream.insert(BufReader::new(s))
            }
        };
        if stream.get_mut().write_all(request).is_err() {
            return None;
        }
        let mut line = String::new();
        match stream.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let status = line.split_whitespace().nth(1).unwrap_or_default();
        assert_eq!(status, "200", "HTTP status line {line:?}");
        let mut length = None;
        let mut close = false;
        loop {
            line.clear();
            stream.read_line(&mut line).expect("response head");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').expect("a header line");
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "connection" => close = value.trim().eq_ignore_ascii_case("close"),
                "transfer-encoding" => panic!("chunked answer: this client reads Content-Length"),
                _ => {}
            }
        }
        let mut body = vec![0; length.expect("Content-Length")];
        stream.read_exact(&mut body).expect("response body");
        if close {
            self.stream = None;
        }
        Some(body)
    }
}

struct Stats {
    sorted: Vec<Duration>,
}

impl Stats {
    fn of(mut latencies: Vec<Duration>) -> Self {
        latencies.sort();
        Self { sorted: latencies }
    }
    fn at(&self, q: f64) -> f64 {
        let i = ((self.sorted.len() as f64 - 1.0) * q).round() as usize;
        self.sorted[i].as_secs_f64() * 1000.0
    }
    fn median_ms(&self) -> f64 {
        self.at(0.5)
    }
    fn p99_ms(&self) -> f64 {
        self.at(0.99)
    }
    fn mean_ms(&self) -> f64 {
        let sum: f64 = self.sorted.iter().map(Duration::as_secs_f64).sum();
        sum * 1000.0 / self.sorted.len() as f64
    }
}
