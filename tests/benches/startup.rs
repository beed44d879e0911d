//! Startup latency and idle memory of the process tree (issue budgets: serve → first
//! successful `initialize` ≤ 150 ms median; four processes idle ≤ 20 MiB resident, and
//! their summed Pss ≤ 12 MiB: what they really cost, shared pages of the one executable
//! divided among them).
//!
//! Run: `cargo build --release && cargo bench -p nl2sh-tests --bench startup`
//! (uses target/release/nl2sh, or $NL2SH_BIN). Servers bind 127.0.0.1 only.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nl2sh_tests::{children_of, initialize_body, mcp_post};

const RUNS: usize = 21;
const BUDGET_RSS_KIB: u64 = 20 * 1024;
const BUDGET_PSS_KIB: u64 = 12 * 1024;
const TOKEN: &str = "bench-token-0123456789abcdef0123456789abcdef";

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn main() {
    let bin = nl2sh_tests::nl2sh_bin();
    let mut startup = Vec::with_capacity(RUNS);
    let mut rss_total = Vec::new();
    let mut pss_total = Vec::new();
    let mut ahead_pss = Vec::new();
    for run in 0..RUNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "").expect("config");
        let port = free_port();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let body = initialize_body("2025-11-25");
        let t0 = Instant::now();
        let mut child = Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .args([
                "protocol",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env("NL2SH_PROTOCOL_TOKEN", TOKEN)
            .env("NL2SH_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let elapsed = loop {
            if std::net::TcpStream::connect(addr).is_ok() {
                let r = mcp_post(addr, TOKEN, &body);
                if r.status == 200 {
                    break t0.elapsed();
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not come up"
            );
            std::thread::sleep(Duration::from_micros(500));
        };
        startup.push(elapsed);
        if run == 0 || run == RUNS - 1 {
            // Idle memory after the first request has been served and things settled.
            std::thread::sleep(Duration::from_secs(1));
            let sup = child.id() as i32;
            let mut pids = vec![sup];
            pids.extend(children_of(sup));
            assert_eq!(pids.len(), 4, "expected four processes, found {pids:?}");
            rss_total.push(
                pids.iter()
                    .map(|&p| nl2sh_tests::proc_kib(p, "status", "VmRSS").unwrap_or(0))
                    .sum::<u64>(),
            );
            pss_total.push(
                pids.iter()
                    .map(|&p| nl2sh_tests::proc_kib(p, "smaps_rollup", "Pss").unwrap_or(0))
                    .sum::<u64>(),
            );
            for &p in &pids {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                println!(
                    "  {:<16} VmRSS {:>6} KiB  Pss {:>6} KiB",
                    comm.trim(),
                    nl2sh_tests::proc_kib(p, "status", "VmRSS").unwrap_or(0),
                    nl2sh_tests::proc_kib(p, "smaps_rollup", "Pss").unwrap_or(0)
                );
            }
            // The sandboxes the executor keeps built ahead (as root): helpers and their
            // waiting payloads, below the four.
            // A waiting payload shares its helper's memory (it is started with CLONE_VM
            // and has not exec'd yet): each address space is counted once.
            let mut below: Vec<(i32, i32)> = pids[1..]
                .iter()
                .flat_map(|&p| children_of(p).into_iter().map(move |c| (p, c)))
                .collect();
            let mut i = 0;
            while i < below.len() {
                let parent = below[i].1;
                below.extend(children_of(parent).into_iter().map(|c| (parent, c)));
                i += 1;
            }
            let ahead = below
                .iter()
                .filter(|&&(parent, p)| !same_memory(parent, p))
                .map(|&(_, p)| nl2sh_tests::proc_kib(p, "smaps_rollup", "Pss").unwrap_or(0))
                .sum::<u64>();
            println!(
                "  sandboxes built ahead: {} processes, Pss {ahead} KiB",
                below.len()
            );
            ahead_pss.push(ahead);
        }
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
    }
    startup.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "serve -> first initialize: median {:.1} ms, min {:.1} ms, max {:.1} ms over {RUNS} runs (budget 150 ms median)",
        ms(startup[RUNS / 2]),
        ms(startup[0]),
        ms(startup[RUNS - 1])
    );
    let rss = *rss_total.iter().max().unwrap_or(&0);
    let pss = *pss_total.iter().max().unwrap_or(&0);
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!(
        "idle tree (4 processes): VmRSS total {rss} KiB (budget {BUDGET_RSS_KIB} KiB: {}), \
         Pss total {pss} KiB (budget {BUDGET_PSS_KIB} KiB: {})",
        verdict(rss <= BUDGET_RSS_KIB),
        verdict(pss <= BUDGET_PSS_KIB),
    );
    let with_ahead = pss_total
        .iter()
        .zip(&ahead_pss)
        .map(|(a, b)| a + b)
        .max()
        .unwrap_or(0);
    println!(
        "idle tree with the sandboxes built ahead: Pss total {with_ahead} KiB (budget \
         {BUDGET_PSS_KIB} KiB: {})",
        verdict(with_ahead <= BUDGET_PSS_KIB),
    );
}

/// Whether processes `a` and `b` share one address space (`kcmp(2)`, `KCMP_VM`).
fn same_memory(a: i32, b: i32) -> bool {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp takes two pids and integer arguments and touches no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            libc::c_long::from(a),
            libc::c_long::from(b),
            KCMP_VM,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    rc == 0
}
