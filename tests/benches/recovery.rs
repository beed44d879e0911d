//! Recovery from a dead worker: the time from SIGKILL of one worker to the first good
//! answer of a tool call through the whole tree (netd → executor → approvald and back) on
//! the same URL, 20 kills per worker (issue target: under 1 s). Five kills are a normal
//! day for one service (a sixth within 60 s is a crash loop that stops it, by design), so
//! each service takes five and a fresh one takes the next five.
//!
//! Run: `cargo build --release && cargo bench -p nl2sh-tests --bench recovery`
//! (uses target/release/nl2sh, or $NL2SH_BIN). Servers bind 127.0.0.1 only.

use std::time::{Duration, Instant};

use nl2sh_tests::{try_mcp_post, Fixture, Server};

const KILLS_PER_WORKER: usize = 20;
const KILLS_PER_SERVICE: usize = 5;
const TARGET: Duration = Duration::from_secs(1);

/// A tool call through the whole tree answered with success.
fn good_answer(server: &Server) -> bool {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nl2sh_invoke", "arguments": {"tool": "fs.stat",
        "arguments": {"path": "/"}}}});
    try_mcp_post(
        server.addr,
        server.token(),
        &body.to_string(),
        Duration::from_secs(5),
    )
    .is_some_and(|r| r.status == 200 && r.json()["result"]["isError"] == false)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut all = Vec::new();
    println!("recovery: SIGKILL of one worker -> first good tool call on the same URL");
    for role in ["netd", "executor", "approvald"] {
        let mut times = Vec::with_capacity(KILLS_PER_WORKER);
        while times.len() < KILLS_PER_WORKER {
            let fx = Fixture::new("");
            let mut server = Server::start(&fx, &[], &[]);
            assert!(good_answer(&server), "the fresh service does not answer");
            for _ in 0..KILLS_PER_SERVICE.min(KILLS_PER_WORKER - times.len()) {
                // A service in use, not one that just restarted.
                std::thread::sleep(Duration::from_millis(300));
                assert!(good_answer(&server));
                let victim = server.worker(role);
                let killed = Instant::now();
                // SAFETY: kill with integer arguments.
                unsafe { libc::kill(victim, libc::SIGKILL) };
                loop {
                    if good_answer(&server) {
                        break;
                    }
                    assert!(killed.elapsed() < Duration::from_secs(30), "no recovery");
                    std::thread::sleep(Duration::from_millis(2));
                }
                times.push(killed.elapsed());
            }
            server.signal(libc::SIGTERM);
            let status = server.wait(Duration::from_secs(30));
            assert_eq!(status.code(), Some(0), "{}", server.stderr());
        }
        times.sort();
        println!(
            "  {role:<10} kills {:>3}  median {:>7}  p99 {:>7}  max {:>7}",
            times.len(),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(*times.last().unwrap_or(&Duration::ZERO)),
        );
        all.extend(times);
    }
    all.sort();
    let (median, p99) = (percentile(&all, 0.5), percentile(&all, 0.99));
    println!(
        "  {:<10} kills {:>3}  median {:>7}  p99 {:>7}  (target < {}: {})",
        "all",
        all.len(),
        ms(median),
        ms(p99),
        ms(TARGET),
        if p99 < TARGET { "met" } else { "NOT met" }
    );
}
