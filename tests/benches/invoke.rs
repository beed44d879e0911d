//! `nl2sh_invoke` over HTTP: the privilege-separated tree versus one process serving the
//! same tool (budgets, docs/BENCHMARKS.md: throughput tree/single ≥ 0.85 at concurrency 32; median
//! latency at concurrency 1, everything on one core: the privilege-separation cost, tree
//! minus single with approvald's audit in process, ≤ 15 µs, and the total overhead, tree
//! minus single without it, ≤ 40 µs; the four processes under that load ≤ 32 MiB
//! resident; `shell.exec` of `true` run unconfined ≤ 1.3× a bare `sh -c true` spawn). It also prints what the read-only
//! sandbox costs: `shell.exec` of `true` unasked (sandboxed) against the same unconfined.
//!
//! Run: `cargo build --release --locked && cargo bench -p nl2sh-tests --bench invoke`
//! (uses target/release/nl2sh, or $NL2SH_BIN, and this package's `single_rmcp`, or
//! $NL2SH_SINGLE_BIN). About 50 s.
//!
//! * tree: `nl2sh protocol serve --host 127.0.0.1 --port P`, `NL2SH_PROTOCOL_TOKEN` set,
//!   `NL2SH_LOG=warn`.
//! * single: `single_rmcp` (src/bin/single_rmcp.rs): netd's own front door and MCP code
//!   and the executor's own dispatch, over in-process socketpairs. The reference for
//!   the budgets is `--authority bare` (no approvald, no audit); `--authority audited`
//!   (approvald's Authority and SQLite store in the same process) is printed alongside
//!   to split the tree's cost into "audit" and "process hops".
//!
//! The load generator is a hand-written HTTP/1.1 keep-alive client: N connections each
//! sending back-to-back POSTs for a fixed time after a warm-up. A call counts only when it
//! answers 200 with `"isError":false`; the first answer on every connection is parsed and
//! must carry `structuredContent.success == true`. Any other answer fails the bench; a
//! missed budget only prints MISS. Everything binds and connects to 127.0.0.1.
//!
//! Besides the figures, each concurrency-1 run prints the CPU time and context switches
//! per call of every server process (from /proc/<pid>/task/*/{schedstat,status}), which
//! is where a call's time goes when everything shares one core.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nl2sh_tests::{children_of, initialize_body, mcp_post};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "bench-token-0123456789abcdef0123456789abcdef";

/// The servers run side by side and take turns, round after round, so that drift in the
/// machine's speed (a shared VM) hits all of them alike; each turn has its own warm-up.
const LATENCY_ROUNDS: usize = 12;
const LATENCY_WARMUP: Duration = Duration::from_millis(300);
const LATENCY_MEASURE: Duration = Duration::from_millis(1200);
const LOAD_ROUNDS: usize = 3;
const LOAD_WARMUP: Duration = Duration::from_millis(500);
const LOAD_MEASURE: Duration = Duration::from_millis(1500);
const LOAD_CONNECTIONS: usize = 32;
const SHELL_WARMUP: Duration = Duration::from_millis(500);
const SHELL_MEASURE: Duration = Duration::from_secs(3);
/// Paced sandboxed calls: how many, and the pause before each.
const PACED_CALLS: usize = 60;
const PACED_PAUSE: Duration = Duration::from_millis(50);
/// A sandboxed `shell.exec true` against a bare spawn of `sh -c true`.
const BUDGET_SANDBOX_RATIO: f64 = 1.5;
const SPAWN_MEASURE: Duration = Duration::from_secs(2);
/// The core the latency runs share (client and every server process).
const LATENCY_CORE: usize = 0;

const BUDGET_THROUGHPUT_RATIO: f64 = 0.85;
/// The privilege-separation cost: tree minus one process doing the same work including
/// approvald's audit (median, c=1, one core).
const BUDGET_SEPARATION_US: f64 = 15.0;
/// The total overhead: tree minus one process without the audit.
const BUDGET_TOTAL_US: f64 = 40.0;
const BUDGET_TREE_MIB: f64 = 32.0;
const BUDGET_SHELL_RATIO: f64 = 1.3;
/// Tail latency at one client: p99 within this many times the median (issue target).
const BUDGET_TAIL_RATIO: f64 = 4.0;
/// Paced calls made before the measured ones on a newly started tree (its sandbox probe
/// and the first sandboxes built ahead).
const PACED_WARMUP_CALLS: usize = 5;

fn main() {
    let work = tempfile::Builder::new()
        .prefix("nl2sh-bench-invoke-")
        .tempdir()
        .expect("tempdir");
    let config = work.path().join("config.toml");
    // Auto-approve lets `shell.exec` with `unconfined: true` run the way every command ran
    // before the read-only sandbox, beside the sandboxed `true`, in one tree.
    std::fs::write(&config, "protocol_auto_approve = true\n").expect("config");
    let stat_path = config.display().to_string();
    let stat_body = invoke_body("fs.stat", serde_json::json!({ "path": stat_path }));
    let shell_body = invoke_body("shell.exec", serde_json::json!({ "command": "true" }));
    let unconfined_body = invoke_body(
        "shell.exec",
        serde_json::json!({ "command": "true", "unconfined": true }),
    );
    let nl2sh = nl2sh_tests::nl2sh_bin();
    let single = single_bin();
    println!("nl2sh:  {}", nl2sh.display());
    println!("single: {}", single.display());
    println!("fs.stat path: {stat_path}");
    println!(
        "cores: {} (latency runs pinned to core {LATENCY_CORE})",
        available_cores()
    );

    let targets = [
        Target::Tree,
        Target::Single(Authority::Bare),
        Target::Single(Authority::Audited),
    ];

    // Concurrency 1, every process (servers and client) on one core.
    let servers: Vec<Running> = targets
        .iter()
        .map(|t| t.start(&nl2sh, &single, work.path(), Some(LATENCY_CORE)))
        .collect();
    let mut latency: Vec<LoadResult> = targets.iter().map(|_| LoadResult::empty()).collect();
    for _ in 0..LATENCY_ROUNDS {
        for (server, total) in servers.iter().zip(&mut latency) {
            total.add(run_load(
                server.addr,
                &stat_body,
                "fs.stat",
                1,
                LATENCY_WARMUP,
                LATENCY_MEASURE,
                Some(LATENCY_CORE),
                &server.pids(),
                false,
            ));
        }
    }
    drop(servers);
    for (t, r) in targets.iter().zip(&latency) {
        println!(
            "  c=1  {:<16} {:>8.0} calls/s  median {:>7.1} µs  p99 {:>7.1} µs",
            t.label(),
            r.calls_per_sec(),
            r.median_us(),
            r.p99_us()
        );
        print_cpu("fs.stat, c=1, one core", r);
    }

    // Concurrency 32, all cores; memory sampled during the load.
    let servers: Vec<Running> = targets
        .iter()
        .map(|t| t.start(&nl2sh, &single, work.path(), None))
        .collect();
    let tree_pids = servers[0].pids();
    assert_eq!(
        tree_pids.len(),
        4,
        "expected four processes, found {tree_pids:?}"
    );
    let mut load: Vec<LoadResult> = targets.iter().map(|_| LoadResult::empty()).collect();
    for _ in 0..LOAD_ROUNDS {
        for (server, total) in servers.iter().zip(&mut load) {
            total.add(run_load(
                server.addr,
                &stat_body,
                "fs.stat",
                LOAD_CONNECTIONS,
                LOAD_WARMUP,
                LOAD_MEASURE,
                None,
                &server.pids(),
                true,
            ));
        }
    }
    for (t, r) in targets.iter().zip(&load) {
        println!(
            "  c={LOAD_CONNECTIONS} {:<16} {:>8.0} calls/s  median {:>7.1} µs  p99 {:>7.1} µs  VmRSS {} KiB  Pss {} KiB",
            t.label(),
            r.calls_per_sec(),
            r.median_us(),
            r.p99_us(),
            r.memory.rss_kib,
            r.memory.pss_kib
        );
    }
    let tree_mem = load[0].memory.clone();
    let single_mem = load[1].memory.clone();
    for (name, rss, pss) in &tree_mem.per_process {
        println!("       {name:<16} VmRSS {rss:>6} KiB  Pss {pss:>6} KiB");
    }

    // shell.exec of `true` at concurrency 1 on the (unpinned) tree: unconfined (approved,
    // the bound identity: what every command did before the sandbox), then unasked (in
    // the read-only sandbox).
    let shell = run_load(
        servers[0].addr,
        &unconfined_body,
        "shell.exec",
        1,
        SHELL_WARMUP,
        SHELL_MEASURE,
        None,
        &tree_pids,
        false,
    );
    let sandboxed = run_load(
        servers[0].addr,
        &shell_body,
        "shell.exec",
        1,
        SHELL_WARMUP,
        SHELL_MEASURE,
        None,
        &tree_pids,
        false,
    );
    // The same, one call at a time with a pause between calls, as an agent that thinks
    // between calls makes them: the sandboxes the executor builds ahead are ready.
    let paced = paced_calls(servers[0].addr, &shell_body, PACED_CALLS, PACED_PAUSE);
    drop(servers);
    println!(
        "  c=1  tree             shell.exec true, unconfined: median {:.1} µs  p99 {:.1} µs ({} calls)",
        shell.median_us(),
        shell.p99_us(),
        shell.latencies_ns.len()
    );
    print_cpu("shell.exec unconfined, c=1", &shell);
    println!(
        "  c=1  tree             shell.exec true, sandboxed:  median {:.1} µs  p99 {:.1} µs ({} calls)",
        sandboxed.median_us(),
        sandboxed.p99_us(),
        sandboxed.latencies_ns.len()
    );
    print_cpu("shell.exec sandboxed, c=1", &sandboxed);
    println!(
        "  c=1  tree             shell.exec true, sandboxed, a call every {} ms: median {:.1} µs  p99 {:.1} µs ({} calls, each on a new connection)",
        PACED_PAUSE.as_millis(),
        paced.median_us(),
        paced.p99_us(),
        paced.latencies_ns.len()
    );
    let spawn = bare_spawns(false);
    println!(
        "  bare `/bin/sh -c true` spawn (std::process::Command::output): median {:.1} µs  p99 {:.1} µs ({} spawns)",
        spawn.median_us(),
        spawn.p99_us(),
        spawn.latencies_ns.len()
    );
    let paced_spawn = paced_spawns(PACED_CALLS, PACED_PAUSE);
    println!(
        "  the same, a spawn every {} ms: median {:.1} µs  p99 {:.1} µs ({} spawns)",
        PACED_PAUSE.as_millis(),
        paced_spawn.median_us(),
        paced_spawn.p99_us(),
        paced_spawn.latencies_ns.len()
    );
    // The paced calls and spawns again with the tree, the client and the spawns all on one
    // core: a device busy elsewhere, where building the next sandbox competes with the
    // answer of the call that just ended (on two free cores it runs beside it).
    let (paced_one_core, paced_spawn_one_core) = {
        let tree = Target::Tree.start(&nl2sh, &single, work.path(), Some(LATENCY_CORE));
        let (addr, body) = (tree.addr, shell_body.clone());
        let calls = on_core(LATENCY_CORE, move || {
            paced_calls(addr, &body, PACED_WARMUP_CALLS, PACED_PAUSE);
            paced_calls(addr, &body, PACED_CALLS, PACED_PAUSE)
        });
        drop(tree);
        let spawns = on_core(LATENCY_CORE, || paced_spawns(PACED_CALLS, PACED_PAUSE));
        (calls, spawns)
    };
    println!(
        "  one core (tree, client, spawns): a sandboxed call every {} ms: median {:.1} µs  p99 {:.1} µs; a spawn every {0} ms: median {:.1} µs  p99 {:.1} µs",
        PACED_PAUSE.as_millis(),
        paced_one_core.median_us(),
        paced_one_core.p99_us(),
        paced_spawn_one_core.median_us(),
        paced_spawn_one_core.p99_us()
    );
    // For the breakdown: the same spawn forced onto std's fork path (a pre_exec hook, as
    // the executor installs one), instead of posix_spawn.
    let fork_spawn = bare_spawns(true);
    println!(
        "  (reference) the same with a no-op pre_exec hook (fork+exec path): median {:.1} µs  p99 {:.1} µs ({} spawns)",
        fork_spawn.median_us(),
        fork_spawn.p99_us(),
        fork_spawn.latencies_ns.len()
    );

    // ---- the table ----
    let (tree_l, single_l, audited_l) = (&latency[0], &latency[1], &latency[2]);
    let (tree_t, single_t, audited_t) = (&load[0], &load[1], &load[2]);
    let mut rows: Vec<[String; 6]> = Vec::new();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" }.to_string();
    let ratio = tree_t.calls_per_sec() / single_t.calls_per_sec();
    rows.push([
        format!("calls/s, c={LOAD_CONNECTIONS}, all cores"),
        format!("{:.0}", tree_t.calls_per_sec()),
        format!("{:.0}", single_t.calls_per_sec()),
        format!("ratio {:.3}", down(ratio, 1000.0)),
        format!(">= {BUDGET_THROUGHPUT_RATIO}"),
        verdict(ratio >= BUDGET_THROUGHPUT_RATIO),
    ]);
    let total = tree_l.median_us() - single_l.median_us();
    rows.push([
        "median latency µs, c=1, one core: total overhead".into(),
        format!("{:.1}", tree_l.median_us()),
        format!("{:.1}", single_l.median_us()),
        format!("{:+.1} µs", up(total, 10.0)),
        format!("<= +{BUDGET_TOTAL_US} µs"),
        verdict(total <= BUDGET_TOTAL_US),
    ]);
    let separation = tree_l.median_us() - audited_l.median_us();
    rows.push([
        "median latency µs, c=1, one core: privilege-separation cost".into(),
        format!("{:.1}", tree_l.median_us()),
        format!("{:.1} (single+audit)", audited_l.median_us()),
        format!("{:+.1} µs", up(separation, 10.0)),
        format!("<= +{BUDGET_SEPARATION_US} µs"),
        verdict(separation <= BUDGET_SEPARATION_US),
    ]);
    // The same cost from rounds paired in time: each round's tree median minus the
    // single+audit median of the same round (seconds apart), so that the machine's slower
    // drift (a shared VM) cancels out; the median of those differences, with the middle
    // half of them.
    let paired = paired_differences(&tree_l.round_medians_us, &audited_l.round_medians_us);
    let paired_median = quantile(&paired, 0.5);
    rows.push([
        format!(
            "privilege-separation cost, median of {} paired rounds (middle half)",
            paired.len()
        ),
        "-".into(),
        "-".into(),
        format!(
            "{:+.1} µs ({:+.1} .. {:+.1})",
            up(paired_median, 10.0),
            quantile(&paired, 0.25),
            quantile(&paired, 0.75)
        ),
        format!("<= +{BUDGET_SEPARATION_US} µs"),
        verdict(paired_median <= BUDGET_SEPARATION_US),
    ]);
    rows.push([
        "p99 latency µs, c=1, one core".into(),
        format!("{:.1}", tree_l.p99_us()),
        format!("{:.1}", single_l.p99_us()),
        format!("{:+.1} µs", tree_l.p99_us() - single_l.p99_us()),
        "-".into(),
        "-".into(),
    ]);
    let tail = tree_l.p99_us() / tree_l.median_us();
    rows.push([
        "p99 ÷ median, c=1, one core (tree; single in its column)".into(),
        format!("{:.2}x", up(tail, 100.0)),
        format!("{:.2}x", single_l.p99_us() / single_l.median_us()),
        "-".into(),
        format!("<= {BUDGET_TAIL_RATIO}x (target)"),
        verdict(tail <= BUDGET_TAIL_RATIO),
    ]);
    let rss_mib = tree_mem.rss_kib as f64 / 1024.0;
    let pss_mib = tree_mem.pss_kib as f64 / 1024.0;
    rows.push([
        format!("memory VmRSS sum MiB, c={LOAD_CONNECTIONS}"),
        format!("{:.1}", up(rss_mib, 10.0)),
        format!("{:.1}", single_mem.rss_kib as f64 / 1024.0),
        "4 processes".into(),
        format!("<= {BUDGET_TREE_MIB} MiB"),
        verdict(rss_mib <= BUDGET_TREE_MIB),
    ]);
    rows.push([
        format!("memory Pss sum MiB, c={LOAD_CONNECTIONS}"),
        format!("{:.1}", up(pss_mib, 10.0)),
        format!("{:.1}", single_mem.pss_kib as f64 / 1024.0),
        "4 processes".into(),
        format!("<= {BUDGET_TREE_MIB} MiB"),
        verdict(pss_mib <= BUDGET_TREE_MIB),
    ]);
    // A `shell.exec` row: its median against a bare spawn's made at the same pace, within
    // `budget` times.
    let against =
        |what: &str, calls: &LoadResult, spawn: &LoadResult, budget: f64| -> [String; 6] {
            let ratio = calls.median_us() / spawn.median_us();
            [
                what.to_string(),
                format!("{:.1}", calls.median_us()),
                format!("{:.1} (bare spawn)", spawn.median_us()),
                format!("ratio {:.2}", up(ratio, 100.0)),
                format!("<= {budget}x"),
                verdict(ratio <= budget),
            ]
        };
    let against_spawn =
        |what: &str, calls: &LoadResult, budget: f64| against(what, calls, &spawn, budget);
    rows.push(against_spawn(
        "shell.exec `true` unconfined median µs, c=1",
        &shell,
        BUDGET_SHELL_RATIO,
    ));
    rows.push([
        "shell.exec `true` sandboxed median µs, c=1".into(),
        format!("{:.1}", sandboxed.median_us()),
        format!("{:.1} (unconfined)", shell.median_us()),
        format!(
            "{:+.0} µs, ratio {:.2}",
            sandboxed.median_us() - shell.median_us(),
            sandboxed.median_us() / shell.median_us()
        ),
        "-".into(),
        "-".into(),
    ]);
    rows.push(against(
        &format!(
            "shell.exec `true` sandboxed median µs, a call every {} ms, vs a spawn every {0} ms",
            PACED_PAUSE.as_millis()
        ),
        &paced,
        &paced_spawn,
        BUDGET_SANDBOX_RATIO,
    ));
    rows.push(against(
        &format!(
            "the same, tree, client and spawns on one core (a call / a spawn every {} ms)",
            PACED_PAUSE.as_millis()
        ),
        &paced_one_core,
        &paced_spawn_one_core,
        BUDGET_SANDBOX_RATIO,
    ));
    rows.push(against_spawn(
        &format!(
            "shell.exec `true` sandboxed median µs, a call every {} ms, vs spawns back to back",
            PACED_PAUSE.as_millis()
        ),
        &paced,
        BUDGET_SANDBOX_RATIO,
    ));
    rows.push(against_spawn(
        "shell.exec `true` sandboxed median µs, c=1 back to back",
        &sandboxed,
        BUDGET_SANDBOX_RATIO,
    ));
    println!();
    println!(
        "nl2sh_invoke fs.stat: tree vs single process (`single_rmcp --authority bare`: netd's \
         and the executor's own code in one process over socketpairs, no approvald)"
    );
    nl2sh_tests::print_table(
        &[
            "measure",
            "tree",
            "single",
            "tree vs single",
            "budget",
            "result",
        ],
        &rows,
    );
    println!();
    println!("breakdown (single process with approvald's Authority + SQLite audit in process):");
    nl2sh_tests::print_table(
        &["measure", "tree", "single+audit", "single", "", ""],
        &[
            [
                "median latency µs, c=1, one core".into(),
                format!("{:.1}", tree_l.median_us()),
                format!("{:.1}", audited_l.median_us()),
                format!("{:.1}", single_l.median_us()),
                format!(
                    "audit {:+.1} µs",
                    audited_l.median_us() - single_l.median_us()
                ),
                format!("hops {:+.1} µs", tree_l.median_us() - audited_l.median_us()),
            ],
            [
                format!("calls/s, c={LOAD_CONNECTIONS}"),
                format!("{:.0}", tree_t.calls_per_sec()),
                format!("{:.0}", audited_t.calls_per_sec()),
                format!("{:.0}", single_t.calls_per_sec()),
                format!(
                    "tree/audit {:.2}",
                    tree_t.calls_per_sec() / audited_t.calls_per_sec()
                ),
                String::new(),
            ],
        ],
    );
}

/// Rounded so that a shown figure never looks inside a budget it misses: `down` for "at
/// least" budgets, `up` for "at most" ones (`scale` 10 keeps one decimal).
fn down(x: f64, scale: f64) -> f64 {
    (x * scale).floor() / scale
}

fn up(x: f64, scale: f64) -> f64 {
    (x * scale).ceil() / scale
}

/// CPU and context switches per call, by process: where a call's time goes (with
/// everything on one core, latency is about the sum).
fn print_cpu(what: &str, r: &LoadResult) {
    let parts = r.cpu_per_call();
    let total: f64 = parts.iter().map(|p| p.1).sum();
    let switches: f64 = parts.iter().map(|p| p.2).sum();
    let list: Vec<String> = parts
        .iter()
        .map(|(name, us, sw)| format!("{name} {us:.1} µs/{sw:.1} sw"))
        .collect();
    println!(
        "       per call ({what}): {}; total {total:.1} µs CPU, {switches:.1} context switches",
        list.join(", ")
    );
}

fn invoke_body(tool: &str, arguments: Value) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nl2sh_invoke", "arguments": {"tool": tool, "arguments": arguments}}
    })
    .to_string()
}

/// This package's single-process server, built with the bench (or $NL2SH_SINGLE_BIN).
fn single_bin() -> PathBuf {
    match std::env::var_os("NL2SH_SINGLE_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_single_rmcp")),
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run `f` on a thread of its own pinned to `cpu`, and return what it returns.
fn on_core<T: Send + 'static>(cpu: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        pin_current_thread(cpu);
        f()
    })
    .join()
    .expect("a pinned bench thread panicked")
}

/// Restrict the calling thread (and threads and processes it creates later) to `cpu`.
fn pin_current_thread(cpu: usize) {
    // SAFETY: cpu_set_t is plain data, zeroed is the empty set; CPU_SET writes one bit
    // of it (`cpu` is below CPU_SETSIZE: it is a core this machine has).
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: pid 0 is the calling thread; `set` is a valid, initialised cpu_set_t.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity(cpu {cpu}): {}",
        std::io::Error::last_os_error()
    );
}

#[derive(Clone, Copy)]
enum Authority {
    Bare,
    Audited,
}

#[derive(Clone, Copy)]
enum Target {
    Tree,
    Single(Authority),
}

struct Running {
    child: Child,
    addr: SocketAddr,
    _state: Option<tempfile::TempDir>,
}

impl Running {
    /// The server's processes: the one we started and its children.
    fn pids(&self) -> Vec<i32> {
        let me = self.child.id() as i32;
        let mut pids = vec![me];
        pids.extend(children_of(me));
        pids
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill with integer arguments, to a child we started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Target {
    fn label(&self) -> &'static str {
        match self {
            Target::Tree => "tree",
            Target::Single(Authority::Bare) => "single",
            Target::Single(Authority::Audited) => "single+audit",
        }
    }

    /// Start the server on a free loopback port, optionally pinned to `cpu` (every
    /// process it starts inherits that), and wait until `initialize` answers 200.
    fn start(&self, nl2sh: &Path, single: &Path, work: &Path, cpu: Option<usize>) -> Running {
        let port = free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut state = None;
        let mut cmd = match self {
            Target::Tree => {
                let mut c = Command::new(nl2sh);
                c.arg("--config").arg(work.join("config.toml")).args([
                    "protocol",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                ]);
                c
            }
            Target::Single(authority) => {
                let mut c = Command::new(single);
                c.args(["--port", &port.to_string()]);
                if let Authority::Audited = authority {
                    let dir = tempfile::Builder::new()
                        .prefix("nl2sh-bench-single-")
                        .tempdir()
                        .expect("tempdir");
                    c.args(["--authority", "audited", "--state-dir"])
                        .arg(dir.path());
                    state = Some(dir);
                }
                c
            }
        };
        cmd.env("NL2SH_PROTOCOL_TOKEN", TOKEN)
            .env("NL2SH_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(cpu) = cpu {
            // SAFETY: the hook only calls sched_setaffinity (async-signal-safe) on a
            // copied plain value; it allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start {}: {e}", self.label());
        });
        let body = initialize_body("2025-11-25");
        let t0 = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{} exited during startup: {status}", self.label());
            }
            if std::net::TcpStream::connect(addr).is_ok() {
                let r = mcp_post(addr, TOKEN, &body);
                if r.status == 200 {
                    break;
                }
                panic!(
                    "{}: initialize answered {}: {}",
                    self.label(),
                    r.status,
                    r.body
                );
            }
            if t0.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                panic!("{} did not come up within 15 s", self.label());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Running {
            child,
            addr,
            _state: state,
        }
    }
}

// ---- memory -----------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Memory {
    rss_kib: u64,
    pss_kib: u64,
    /// At the sample with the largest VmRSS sum: (comm, VmRSS, Pss).
    per_process: Vec<(String, u64, u64)>,
}

/// CPU time (ns) and context switches (voluntary + involuntary) of each of `pids` so
/// far, all its threads summed (/proc/<pid>/task/<tid>/{schedstat,status}).
fn cpu_use(pids: &[i32]) -> Vec<(u64, u64)> {
    pids.iter()
        .map(|&p| {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                return (0, 0);
            };
            let mut ns = 0;
            let mut switches = 0;
            for t in tasks.flatten() {
                ns += std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
                switches += status
                    .lines()
                    .filter(|l| l.contains("ctxt_switches:"))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum::<u64>();
            }
            (ns, switches)
        })
        .collect()
}

fn own_cpu() -> (u64, u64) {
    cpu_use(&[std::process::id() as i32])
        .first()
        .copied()
        .unwrap_or_default()
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// From `start` until `stop`: the CPU time `pids` used, and (when `memory`) their memory
/// sampled every 200 ms, the largest sums seen.
fn sample(pids: Vec<i32>, start: Instant, stop: Arc<AtomicBool>, memory: bool) -> Sampled {
    let mut best = Memory::default();
    let wait = start.saturating_duration_since(Instant::now());
    std::thread::sleep(wait);
    let cpu_before = cpu_use(&pids);
    while !stop.load(Ordering::Relaxed) {
        if memory && !pids.is_empty() {
            let per: Vec<(String, u64, u64)> = pids
                .iter()
                .map(|&p| {
                    (
                        comm(p),
                        nl2sh_tests::proc_kib(p, "status", "VmRSS").unwrap_or(0),
                        nl2sh_tests::proc_kib(p, "smaps_rollup", "Pss").unwrap_or(0),
                    )
                })
                .collect();
            let rss: u64 = per.iter().map(|p| p.1).sum();
            let pss: u64 = per.iter().map(|p| p.2).sum();
            if rss > best.rss_kib {
                best.rss_kib = rss;
                best.per_process = per;
            }
            best.pss_kib = best.pss_kib.max(pss);
        }
        std::thread::sleep(Duration::from_millis(if memory { 200 } else { 20 }));
    }
    let cpu_after = cpu_use(&pids);
    let cpu = pids
        .iter()
        .zip(cpu_before.iter().zip(&cpu_after))
        .map(|(&p, (b, a))| (comm(p), a.0.saturating_sub(b.0), a.1.saturating_sub(b.1)))
        .collect();
    Sampled { memory: best, cpu }
}

struct Sampled {
    memory: Memory,
    /// (comm, CPU ns, context switches) in the measured window.
    cpu: Vec<(String, u64, u64)>,
}

// ---- load generator -----------------------------------------------------------------------

struct LoadResult {
    completed: u64,
    window: Duration,
    latencies_ns: Vec<u64>,
    memory: Memory,
    /// Server processes' CPU in the window: (comm, ns, context switches).
    cpu: Vec<(String, u64, u64)>,
    /// The load generator's own (ns, context switches) in the window (one connection
    /// only; the whole bench process).
    client_cpu: (u64, u64),
    /// The median of each run folded in ([`LoadResult::add`]), in order.
    round_medians_us: Vec<f64>,
}

impl LoadResult {
    fn empty() -> Self {
        LoadResult {
            completed: 0,
            window: Duration::ZERO,
            latencies_ns: Vec::new(),
            memory: Memory::default(),
            cpu: Vec::new(),
            client_cpu: (0, 0),
            round_medians_us: Vec::new(),
        }
    }

    /// Latencies of operations done one at a time in `window`, with no process figures.
    fn timed(mut latencies_ns: Vec<u64>, window: Duration) -> Self {
        latencies_ns.sort_unstable();
        LoadResult {
            completed: latencies_ns.len() as u64,
            window,
            latencies_ns,
            ..LoadResult::empty()
        }
    }

    /// Fold another run against the same server into this one.
    fn add(&mut self, other: LoadResult) {
        self.round_medians_us.push(other.median_us());
        self.completed += other.completed;
        self.window += other.window;
        self.latencies_ns.extend(other.latencies_ns);
        self.latencies_ns.sort_unstable();
        if other.memory.rss_kib > self.memory.rss_kib {
            self.memory.rss_kib = other.memory.rss_kib;
            self.memory.per_process = other.memory.per_process;
        }
        self.memory.pss_kib = self.memory.pss_kib.max(other.memory.pss_kib);
        if self.cpu.is_empty() {
            self.cpu = other.cpu;
        } else {
            for (mine, theirs) in self.cpu.iter_mut().zip(other.cpu) {
                mine.1 += theirs.1;
                mine.2 += theirs.2;
            }
        }
        self.client_cpu.0 += other.client_cpu.0;
        self.client_cpu.1 += other.client_cpu.1;
    }

    /// CPU µs and context switches per completed call of each server process, then the
    /// client's.
    fn cpu_per_call(&self) -> Vec<(String, f64, f64)> {
        let calls = self.completed.max(1) as f64;
        let mut out: Vec<(String, f64, f64)> = self
            .cpu
            .iter()
            .map(|(name, ns, sw)| {
                (
                    name.clone(),
                    *ns as f64 / 1000.0 / calls,
                    *sw as f64 / calls,
                )
            })
            .collect();
        if self.client_cpu.0 > 0 {
            out.push((
                "client".into(),
                self.client_cpu.0 as f64 / 1000.0 / calls,
                self.client_cpu.1 as f64 / calls,
            ));
        }
        out
    }

    fn calls_per_sec(&self) -> f64 {
        self.completed as f64 / self.window.as_secs_f64()
    }
    fn quantile_us(&self, q: f64) -> f64 {
        if self.latencies_ns.is_empty() {
            return f64::NAN;
        }
        let i = ((self.latencies_ns.len() - 1) as f64 * q).round() as usize;
        self.latencies_ns[i] as f64 / 1000.0
    }
    fn median_us(&self) -> f64 {
        self.quantile_us(0.5)
    }
    fn p99_us(&self) -> f64 {
        self.quantile_us(0.99)
    }
}

/// `connections` keep-alive connections sending `body` back to back for `warmup` +
/// `measure`; calls completing inside the measured window are counted, and calls started
/// inside it are timed. Runs on its own thread (pinned to `cpu` when given), with a
/// current-thread runtime for one connection and a runtime over all cores otherwise.
/// The CPU time of `pids` in the window is measured, and with `memory` their memory too.
#[allow(clippy::too_many_arguments)]
fn run_load(
    addr: SocketAddr,
    body: &str,
    tool: &'static str,
    connections: usize,
    warmup: Duration,
    measure: Duration,
    cpu: Option<usize>,
    pids: &[i32],
    memory: bool,
) -> LoadResult {
    let request = Arc::new(request_bytes(addr, body));
    let pids = pids.to_vec();
    let handle = std::thread::spawn(move || {
        if let Some(cpu) = cpu {
            pin_current_thread(cpu);
        }
        let rt = if connections == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(available_cores())
                .enable_all()
                .build()
        }
        .expect("client runtime");
        let start = Instant::now();
        let from = start + warmup;
        let until = from + measure;
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            std::thread::spawn(move || sample(pids, from, stop, memory))
        };
        let client_before = Arc::new(std::sync::Mutex::new((0, 0)));
        let results = rt.block_on(async {
            if connections == 1 {
                let before = client_before.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(from.into()).await;
                    *before.lock().unwrap() = own_cpu();
                });
            }
            let mut tasks = Vec::with_capacity(connections);
            for _ in 0..connections {
                let request = request.clone();
                tasks.push(tokio::spawn(connection(addr, request, tool, from, until)));
            }
            let mut all = Vec::with_capacity(connections);
            for t in tasks {
                all.push(t.await.expect("connection task"));
            }
            all
        });
        let client_cpu = if connections == 1 {
            let before = *client_before.lock().unwrap();
            let now = own_cpu();
            (
                now.0.saturating_sub(before.0),
                now.1.saturating_sub(before.1),
            )
        } else {
            (0, 0)
        };
        stop.store(true, Ordering::Relaxed);
        let sampled = sampler.join().expect("sampler");
        let mut completed = 0;
        let mut latencies = Vec::new();
        for r in results {
            match r {
                Ok((n, lat)) => {
                    completed += n;
                    latencies.extend(lat);
                }
                Err(e) => panic!("load against {addr} ({tool}) failed: {e}"),
            }
        }
        latencies.sort_unstable();
        LoadResult {
            completed,
            window: measure,
            latencies_ns: latencies,
            memory: sampled.memory,
            cpu: sampled.cpu,
            client_cpu,
            round_medians_us: Vec::new(),
        }
    });
    handle.join().expect("load thread")
}

fn request_bytes(addr: SocketAddr, body: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One keep-alive connection's loop: (calls completed in the window, latencies of calls
/// started in it).
async fn connection(
    addr: SocketAddr,
    request: Arc<Vec<u8>>,
    tool: &'static str,
    from: Instant,
    until: Instant,
) -> Result<(u64, Vec<u64>), String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut conn = Conn {
        stream,
        buf: vec![0; 16 * 1024],
        filled: 0,
    };
    let mut completed = 0u64;
    let mut latencies = Vec::with_capacity(64 * 1024);
    let mut first = true;
    loop {
        let t0 = Instant::now();
        if t0 >= until {
            break;
        }
        let (status, body) = conn.call(&request).await?;
        let t1 = Instant::now();
        if first {
            verify_first(status, body, tool)?;
            first = false;
        }
        if status != 200 || !contains(body, br#""isError":false"#) {
            return Err(format!(
                "answer {status}: {}",
                String::from_utf8_lossy(body)
            ));
        }
        if t1 >= from && t1 < until {
            completed += 1;
        }
        if t0 >= from {
            latencies.push((t1 - t0).as_nanos() as u64);
        }
    }
    Ok((completed, latencies))
}

/// The first answer, parsed: a tool result with `structuredContent.success == true` for
/// the expected tool.
fn verify_first(status: u16, body: &[u8], tool: &str) -> Result<(), String> {
    let text = String::from_utf8_lossy(body);
    if status != 200 {
        return Err(format!("first answer {status}: {text}"));
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("first answer not JSON ({e}): {text}"))?;
    let s = &v["result"]["structuredContent"];
    if v["result"]["isError"] != Value::Bool(false)
        || s["success"] != Value::Bool(true)
        || s["tool"] != Value::String(tool.into())
    {
        return Err(format!("first answer is not a successful {tool}: {text}"));
    }
    let output: Value = serde_json::from_str(s["output"].as_str().unwrap_or_default())
        .map_err(|e| format!("{tool} output is not JSON ({e}): {text}"))?;
    let good = match tool {
        "fs.stat" => output["exists"] == Value::Bool(true),
        "shell.exec" => output["exit_code"].as_i64() == Some(0),
        _ => true,
    };
    if !good {
        return Err(format!("unexpected {tool} output: {output}"));
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    filled: usize,
}

impl Conn {
    async fn fill(&mut self) -> Result<(), String> {
        if self.filled == self.buf.len() {
            let len = self.buf.len();
            self.buf.resize(len * 2, 0);
        }
        let n = self
            .stream
            .read(&mut self.buf[self.filled..])
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        self.filled += n;
        Ok(())
    }

    /// Send one request and read one response: (status, body).
    async fn call(&mut self, request: &[u8]) -> Result<(u16, &[u8]), String> {
        self.stream
            .write_all(request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        self.filled = 0;
        let head_end = loop {
            if let Some(i) = find(&self.buf[..self.filled], b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("no HTTP status in {head:?}"))?;
        let mut length = None;
        let mut chunked = false;
        for l in lines {
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse::<usize>().ok();
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.to_ascii_lowercase().contains("chunked");
                }
            }
        }
        if let Some(len) = length {
            while self.filled < head_end + len {
                self.fill().await?;
            }
            return Ok((status, &self.buf[head_end..head_end + len]));
        }
        if !chunked {
            return Err(format!("response without length: {head:?}"));
        }
        // Chunked: read to the terminating chunk, then join the chunks in place.
        while !self.buf[head_end..self.filled].ends_with(b"0\r\n\r\n") {
            self.fill().await?;
        }
        let raw = self.buf[head_end..self.filled].to_vec();
        let mut out = Vec::with_capacity(raw.len());
        let mut rest = &raw[..];
        while let Some(i) = find(rest, b"\r\n") {
            let size = std::str::from_utf8(&rest[..i])
                .ok()
                .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                .ok_or("bad chunk size")?;
            if size == 0 {
                break;
            }
            let data = rest.get(i + 2..i + 2 + size).ok_or("short chunk")?;
            out.extend_from_slice(data);
            rest = rest.get(i + 4 + size..).unwrap_or_default();
        }
        self.buf[head_end..head_end + out.len()].copy_from_slice(&out);
        Ok((status, &self.buf[head_end..head_end + out.len()]))
    }
}

// ---- paced calls ----------------------------------------------------------------------------

/// `op` done `calls` times, each after `pause`, each timed.
fn paced(calls: usize, pause: Duration, mut op: impl FnMut()) -> LoadResult {
    let started = Instant::now();
    let mut latencies_ns = Vec::with_capacity(calls);
    for _ in 0..calls {
        std::thread::sleep(pause);
        let t0 = Instant::now();
        op();
        latencies_ns.push(t0.elapsed().as_nanos() as u64);
    }
    LoadResult::timed(latencies_ns, started.elapsed())
}

/// `calls` POSTs of `body`, one at a time, each after `pause`, each on a new connection;
/// every answer must be a successful tool result.
fn paced_calls(addr: SocketAddr, body: &str, calls: usize, pause: Duration) -> LoadResult {
    paced(calls, pause, || {
        let r = mcp_post(addr, TOKEN, body);
        assert!(
            r.status == 200 && r.body.contains("\"isError\":false"),
            "a paced call failed: {} {}",
            r.status,
            r.body
        );
    })
}

/// `a[i] - b[i]` for every round both have, sorted.
fn paired_differences(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    d.sort_by(|x, y| x.total_cmp(y));
    d
}

/// The `q` quantile of sorted `values` (nearest rank; 0 when empty).
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = ((values.len() - 1) as f64 * q).round() as usize;
    values[rank.min(values.len() - 1)]
}

// ---- bare spawn -----------------------------------------------------------------------------

/// `/bin/sh -c true` from this process, output captured through pipes as the tool
/// captures it. With `fork_path`, a no-op `pre_exec` hook makes std fork instead of using
/// posix_spawn.
fn spawn_sh_true(fork_path: bool) {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "true"]).stdin(Stdio::null());
    if fork_path {
        // SAFETY: the hook does nothing.
        unsafe {
            cmd.pre_exec(|| Ok(()));
        }
    }
    let out = cmd.output().expect("spawn /bin/sh");
    assert!(out.status.success(), "sh -c true failed: {:?}", out.status);
}

/// [`spawn_sh_true`] one at a time for `SPAWN_MEASURE` after a short warm-up.
fn bare_spawns(fork_path: bool) -> LoadResult {
    let warm = Instant::now() + SHELL_WARMUP;
    while Instant::now() < warm {
        spawn_sh_true(fork_path);
    }
    let started = Instant::now();
    let until = started + SPAWN_MEASURE;
    let mut latencies = Vec::new();
    while Instant::now() < until {
        let t0 = Instant::now();
        spawn_sh_true(fork_path);
        latencies.push(t0.elapsed().as_nanos() as u64);
    }
    LoadResult::timed(latencies, started.elapsed())
}

/// [`spawn_sh_true`] as [`paced_calls`] makes calls, so that a sandboxed call made at that
/// pace compares with a spawn made at it (a machine idle between calls wakes more slowly
/// than a busy one, for both alike).
fn paced_spawns(calls: usize, pause: Duration) -> LoadResult {
    paced(calls, pause, || spawn_sh_true(false))
}
