//! The managed service over the real binary: `nl2sh service start|stop|restart|status` and
//! `nl2sh config get|set` as a user (or the Magisk module's scripts) runs them.
//!
//! The managed service binds 0.0.0.0 — that is what the product does — but every
//! connection a test makes goes to 127.0.0.1. Each test's [`Managed`] guard ends whatever
//! still runs for its configuration, so a failing test leaves no background process.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nl2sh_tests::scripted_model::{Reply, ScriptedModel};
use nl2sh_tests::{
    alive, children_of, http, initialize_body, mcp_post, processes_with, run_without_terminal,
    wait_gone, Fixture, Server, StdioClient,
};
use serde_json::{json, Value};

const SWITCHED_ON: &str = "protocol_start_with_service = true\nprotocol_service_port = 0\n";

/// A configuration whose managed service is ended when the test ends, however it ends.
struct Managed {
    fx: Fixture,
}

impl Managed {
    fn new(config: &str) -> Self {
        Managed {
            fx: Fixture::new(config),
        }
    }

    fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        run_without_terminal(&self.fx, args)
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        let mut cmd = self.fx.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.stdin(Stdio::null()).output().expect("run nl2sh");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `service start`, required to succeed; the service's pid.
    fn start(&self) -> i32 {
        let (code, out, err) = self.run(&["service", "start"]);
        assert_eq!(
            code,
            Some(0),
            "service start failed:\n{out}\n{err}\nlog:\n{}",
            self.log()
        );
        self.status().1["connections"][0]["pid"]
            .as_i64()
            .expect("a running service has a pid") as i32
    }

    /// `service status --json`: exit code and document.
    fn status(&self) -> (Option<i32>, Value) {
        let (code, out, err) = self.run(&["service", "status", "--json"]);
        let v = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {out}\n{err}"));
        (code, v)
    }

    /// 127.0.0.1 and the port the running service listens on.
    fn addr(&self) -> SocketAddr {
        let (_, v) = self.status();
        let listen = v["connections"][0]["listen"].as_str().expect("listen");
        let port: u16 = listen.rsplit_once(':').unwrap().1.parse().unwrap();
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn service_dir(&self) -> PathBuf {
        self.fx.config().with_file_name("config.service")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.service_dir().join("service.log")).unwrap_or_default()
    }

    /// The generated token of the latest start, from the service log (where a user finds it).
    fn log_token(&self) -> String {
        self.log()
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("export NL2SH_PROTOCOL_TOKEN="))
            .map(|t| t.trim_matches('\'').to_string())
            .expect("a generated token in the service log")
    }

    fn connection_json(&self) -> PathBuf {
        self.fx.state_dir().join("protocol/connection.json")
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        // Everything started for this configuration has its path on its command line
        // (workers die with their supervisor).
        let needle = self.fx.config().display().to_string();
        let pids = processes_with(&needle);
        for &pid in &pids {
            // SAFETY: kill with integer arguments.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        if wait_gone(std::slice::from_ref(&needle), Duration::from_secs(30)).is_err() {
            for pid in processes_with(&needle) {
                // SAFETY: kill with integer arguments; the service leads its own group.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

fn wait_dead(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn initialize(addr: SocketAddr, token: &str) -> u16 {
    mcp_post(addr, token, &initialize_body("2025-11-25")).status
}

/// Processes started as the managed service of `fx`.
fn managed_processes(fx: &Fixture) -> Vec<i32> {
    let config = fx.config().display().to_string();
    processes_with("--managed-service")
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&config))
        })
        .collect()
}

#[test]
fn start_status_repeated_start_restart_and_stop() {
    let m = Managed::new(SWITCHED_ON);
    let (code, out, err) = m.run(&["service", "start"]);
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", m.log());
    assert!(out.starts_with("Started the managed service.\n"), "{out}");
    let token = m.log_token();
    assert!(
        !out.contains(&token) && !err.contains(&token),
        "start printed the token"
    );
    assert_eq!(mode(&m.service_dir()), 0o700);
    assert_eq!(mode(&m.service_dir().join("service.log")), 0o600);

    // Status as JSON: the managed service and its Web console, never the token.
    let (code, v) = m.status();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        (v["running"].as_bool(), v["stale"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(v["managed"], true);
    let c = &v["connections"][0];
    assert_eq!(v["connections"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(c["transport"], "service");
    assert_eq!(v["connections"][1]["transport"], "web", "{v}");
    assert!(v["connections"][1]["url"].is_string(), "{v}");
    let pid = c["pid"].as_i64().unwrap() as i32;
    let port = m.addr().port();
    assert_ne!(port, 0);
    assert_eq!(c["listen"], format!("0.0.0.0:{port}"));
    for (field, path) in [
        ("mcp_url", "/mcp"),
        ("a2a_url", "/a2a"),
        ("card_url", "/.well-known/agent-card.json"),
    ] {
        let url = c[field].as_str().unwrap_or_else(|| panic!("{field}: {v}"));
        assert!(
            url.starts_with("http://") && url.ends_with(&format!(":{port}{path}")),
            "{url}"
        );
        assert!(!url.contains("0.0.0.0"), "{url}");
    }
    assert_eq!(c["version"], env!("CARGO_PKG_VERSION"));
    assert!(c["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{v}");
    assert!(!v.to_string().contains(&token));

    // Status as text: the same facts for a person.
    let (code, text, _) = m.run(&["service", "status"]);
    assert_eq!(code, Some(0));
    for needle in [
        "Status:     running (managed service)\n".to_string(),
        "Transport:  service\n".into(),
        format!("PID:        {pid}\n"),
        format!("Version:    {}\n", env!("CARGO_PKG_VERSION")),
        format!("MCP URL:    {}\n", c["mcp_url"].as_str().unwrap()),
        format!("A2A URL:    {}\n", c["a2a_url"].as_str().unwrap()),
        format!("Agent Card: {}\n", c["card_url"].as_str().unwrap()),
        "Since:      ".into(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing in:\n{text}");
    }
    assert!(!text.contains(&token));

    // It serves for real, with the token from its log.
    assert_eq!(initialize(m.addr(), &token), 200);
    assert_eq!(
        initialize(m.addr(), "wrong-token-wrong-token-wrong-token"),
        401
    );
    // Detached: a session of its own, stdin /dev/null, output in the log.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.to_string(), "not its own session: {stat}");
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap(),
        PathBuf::from("/dev/null")
    );
    // Output goes through one pipe to the service's own log writer, which holds the log.
    let fd = |n: &str| std::fs::read_link(format!("/proc/{pid}/fd/{n}")).unwrap();
    let out_pipe = fd("1");
    assert!(
        out_pipe.to_string_lossy().starts_with("pipe:"),
        "{out_pipe:?}"
    );
    assert_eq!(fd("2"), out_pipe);
    let holds_log = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .any(|target| target == m.service_dir().join("service.log"));
    assert!(holds_log, "the service does not hold its log open");

    // A repeated start keeps the running process.
    let (code, out, _) = m.run(&["service", "start"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("already running; nothing was started"),
        "{out}"
    );
    assert_eq!(m.status().1["connections"][0]["pid"], pid);
    assert_eq!(managed_processes(&m.fx), vec![pid]);

    // Restart: a new process, the old one gone, a fresh generated token.
    let (code, out, err) = m.run(&["service", "restart"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains(&format!("Stopped the managed service (pid {pid}).")),
        "{out}"
    );
    assert!(!alive(pid), "the old service survived the restart");
    let (_, v) = m.status();
    let new_pid = v["connections"][0]["pid"].as_i64().unwrap() as i32;
    assert_ne!(new_pid, pid);
    let new_token = m.log_token();
    assert_ne!(new_token, token);
    assert_eq!(initialize(m.addr(), &new_token), 200);

    // Stop: the whole tree exits and the record goes.
    let workers = children_of(new_pid);
    assert_eq!(
        workers.len(),
        4,
        "netd, executor, approvald and web: {workers:?}"
    );
    let (code, out, err) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains(&format!("Stopped the managed service (pid {new_pid}).")),
        "{out}"
    );
    assert!(!alive(new_pid));
    for w in workers {
        assert!(
            wait_dead(w, Duration::from_secs(5)),
            "worker {w} outlived the service"
        );
    }
    assert!(!m.connection_json().exists());
    let (code, v) = m.status();
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(
        (v["running"].as_bool(), v["stale"].as_bool()),
        (Some(false), Some(false))
    );
    let (code, text, _) = m.run(&["service", "status"]);
    assert_eq!(code, Some(3));
    assert!(text.starts_with("Status:     not running\n"), "{text}");
    assert!(text.contains("(default loopback example"), "{text}");

    // Stop when stopped says so and succeeds.
    let (code, out, _) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("not running"), "{out}");
}

/// One A2A JSON-RPC call to `addr`; the whole answer.
fn a2a(addr: SocketAddr, token: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "svc", "method": method, "params": params});
    let r = http(
        addr,
        "POST",
        "/a2a",
        &[
            ("Host", &addr.to_string()),
            ("Authorization", &format!("Bearer {token}")),
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

#[test]
fn stop_cancels_an_in_flight_task_answers_its_caller_and_waits_for_the_tree() {
    const KEY_ENV: &str = "NL2SH_SERVICE_E2E_MODEL_KEY";
    let model = ScriptedModel::start([Reply::Hang]);
    let m = Managed::new(&format!(
        "{SWITCHED_ON}[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key_env = \"{KEY_ENV}\"\n",
        model.base_url()
    ));
    // The service gets its environment from `service start` (here: the model key).
    let (code, out, err) = m.run_env(&["service", "start"], &[(KEY_ENV, "sk-service-e2e-key")]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let pid = m.status().1["connections"][0]["pid"].as_i64().unwrap() as i32;
    let workers = children_of(pid);
    let (addr, token) = (m.addr(), m.log_token());
    // A blocking SendMessage whose task is working (the model never answers).
    let caller = {
        let token = token.clone();
        std::thread::spawn(move || {
            a2a(
                addr,
                &token,
                "SendMessage",
                json!({"message": {
                "messageId": "svc-e2e-1", "role": "ROLE_USER",
                "parts": [{"text": "Keep working until told."}]}}),
            )
        })
    };
    model.wait_requests(1, Duration::from_secs(20));

    let (code, out, err) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", m.log());
    assert!(
        out.contains(&format!("Stopped the managed service (pid {pid}).")),
        "{out}"
    );
    // The caller was answered before the listener closed: its task was cancelled by the
    // shutdown, not cut off.
    let answer = caller.join().expect("caller thread");
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{answer}");
    assert!(
        answer.to_string().contains("the service is shutting down"),
        "{answer}"
    );
    // The whole tree is gone, and the listener with it.
    assert!(!alive(pid));
    for w in workers {
        assert!(
            wait_dead(w, Duration::from_secs(5)),
            "worker {w} outlived the service"
        );
    }
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "the listener is still open"
    );
    assert!(
        m.log().contains("stopping: draining in-flight requests"),
        "{}",
        m.log()
    );
    assert!(!m.connection_json().exists());
    assert!(!m.log().contains("sk-service-e2e-key"));

    // The cancellation was stored: after a new start the task reads CANCELED.
    let (code, out, err) = m.run_env(&["service", "start"], &[(KEY_ENV, "sk-service-e2e-key")]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let id = task["id"].as_str().unwrap();
    let got = a2a(m.addr(), &m.log_token(), "GetTask", json!({"id": id}));
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{got}"
    );
    assert_eq!(model.requests().len(), 1, "the model was asked again");
}

#[test]
fn two_starts_at_once_run_one_service() {
    let m = Managed::new(SWITCHED_ON);
    let spawn = || {
        m.fx.command(&["service", "start"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs: Vec<String> = [a, b]
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            text
        })
        .collect();
    let started = outs.iter().filter(|o| o.starts_with("Started")).count();
    let kept = outs
        .iter()
        .filter(|o| o.contains("already running"))
        .count();
    assert_eq!((started, kept), (1, 1), "{outs:?}");
    let running = managed_processes(&m.fx);
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(m.status().1["connections"][0]["pid"], running[0]);
}

#[test]
fn status_after_sigkill_reports_a_stale_record_and_a_new_start_works() {
    let m = Managed::new(SWITCHED_ON);
    let pid = m.start();
    let workers = children_of(pid);
    // SAFETY: kill with integer arguments, on the service this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(wait_dead(pid, Duration::from_secs(5)));
    for w in workers {
        assert!(
            wait_dead(w, Duration::from_secs(5)),
            "worker {w} outlived its supervisor"
        );
    }
    assert!(
        m.connection_json().exists(),
        "a SIGKILL leaves the record behind"
    );

    let (code, v) = m.status();
    assert_eq!(code, Some(10), "{v}");
    assert_eq!(
        (v["running"].as_bool(), v["stale"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(v["connections"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["stale_record"]["pid"], pid);
    let (code, text, _) = m.run(&["service", "status"]);
    assert_eq!(code, Some(10));
    assert!(
        text.contains(&format!("not running (stale record: pid {pid}")),
        "{text}"
    );
    assert!(!text.contains("MCP URL"), "{text}");

    // Stop has nothing to stop; start replaces the record.
    let (code, out, _) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("stale record"), "{out}");
    let new_pid = m.start();
    assert_ne!(new_pid, pid);
    assert_eq!(m.status().0, Some(0));
    assert_eq!(initialize(m.addr(), &m.log_token()), 200);
}

#[test]
fn an_occupied_port_falls_back_to_a_free_one_and_status_shows_it() {
    let occupied = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = occupied.local_addr().unwrap().port();
    let m = Managed::new(&format!(
        "protocol_start_with_service = true\nprotocol_service_port = {taken}\n"
    ));
    m.start();
    let (_, v) = m.status();
    let actual = m.addr().port();
    assert_ne!(actual, taken, "{v}");
    let mcp = v["connections"][0]["mcp_url"].as_str().unwrap();
    assert!(mcp.ends_with(&format!(":{actual}/mcp")), "{mcp}");
    assert!(
        m.log().contains("port is in use; using an available port"),
        "{}",
        m.log()
    );
    assert_eq!(initialize(m.addr(), &m.log_token()), 200);
    // The card is public and names the actual port too.
    let card = http(
        m.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[("Host", &m.addr().to_string())],
        b"",
    );
    assert_eq!(card.status, 200, "{card:?}");
    assert!(
        card.body.contains(&format!(":{actual}/a2a")),
        "{}",
        card.body
    );
    drop(occupied);
}

#[test]
fn a_standalone_serve_makes_managed_start_fail_and_is_left_alone() {
    let m = Managed::new(SWITCHED_ON);
    let standalone = Server::start(&m.fx, &[], &[]);
    let spid = standalone.pid();

    let (code, v) = m.status();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["managed"], false);
    assert_eq!(v["connections"][0]["transport"], "http");
    assert_eq!(v["connections"][0]["pid"], spid);

    for command in ["start", "restart", "stop"] {
        let (code, out, err) = m.run(&["service", command]);
        assert_eq!(code, Some(1), "{command}: {out}\n{err}");
        assert!(
            err.contains(&format!(
                "a standalone `protocol serve` (pid {spid}, transport http)"
            )),
            "{command}: {err}"
        );
        assert!(err.contains("left running"), "{command}: {err}");
        assert!(
            managed_processes(&m.fx).is_empty(),
            "{command} started a process"
        );
        assert!(alive(spid), "{command} stopped the standalone process");
        assert_eq!(standalone.mcp(&initialize_body("2025-11-25")).status, 200);
    }
    assert_eq!(m.status().1["connections"][0]["pid"], spid);
}

#[test]
fn active_stdio_shows_a_local_process_without_http() {
    let m = Managed::new(SWITCHED_ON);
    let stdio = StdioClient::start(&m.fx);
    // stdio answers as soon as its tree is up, a moment before it announces itself;
    // meanwhile status says it cannot tell (11), never "running" without a record.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (code, v) = loop {
        let (code, v) = m.status();
        if code != Some(11) || Instant::now() > deadline {
            break (code, v);
        }
        assert_eq!(v["running"], false, "{v}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0), "{v}");
    let c = &v["connections"][0];
    assert_eq!(c["transport"], "stdio");
    assert_eq!(c["pid"], stdio.child.id());
    for field in ["mcp_url", "a2a_url", "card_url", "listen"] {
        assert!(c[field].is_null(), "{field}: {v}");
    }
    let (_, text, _) = m.run(&["service", "status"]);
    assert!(!text.contains("http"), "{text}");
    let (code, _, err) = m.run(&["service", "start"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`protocol stdio`"), "{err}");
    drop(stdio);
}

#[test]
fn with_the_switch_off_start_is_refused_naming_it_and_nothing_is_created() {
    for config in ["", "protocol_start_with_service = false\n"] {
        let m = Managed::new(config);
        for command in ["start", "restart"] {
            let (code, out, err) = m.run(&["service", command]);
            assert_eq!(code, Some(12), "{command}: {out}\n{err}");
            assert!(
                err.contains("protocol_start_with_service is not true"),
                "{err}"
            );
            assert!(
                err.contains("config set protocol_start_with_service true"),
                "{err}"
            );
        }
        // Status and stop read only.
        assert_eq!(m.status().0, Some(3));
        let (code, out, _) = m.run(&["service", "stop"]);
        assert_eq!((code, out.contains("not running")), (Some(0), true));
        assert!(!m.service_dir().exists());
        assert!(!m.fx.state_dir().exists());
    }
    // A missing configuration file is not configured either.
    let m = Managed::new("");
    std::fs::remove_file(m.fx.config()).unwrap();
    let (code, _, err) = m.run(&["service", "start"]);
    assert_eq!(code, Some(12));
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn a_start_that_fails_leaves_nothing_running_and_shows_the_log() {
    let m = Managed::new(SWITCHED_ON);
    let (code, out, err) = m.run_env(
        &["service", "start"],
        &[("NL2SH_PROTOCOL_TOKEN", "too-short-token")],
    );
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("exited during startup"), "{err}");
    assert!(
        err.contains("invalid protocol token from the NL2SH_PROTOCOL_TOKEN"),
        "{err}"
    );
    assert!(!err.contains("too-short-token"), "{err}");
    assert!(managed_processes(&m.fx).is_empty());
    assert!(!m.connection_json().exists());
    assert_eq!(m.status().0, Some(3));
    // Fixed, it starts.
    m.start();
}

#[test]
fn config_set_and_get_drive_the_service_and_keep_credentials_off_the_command_line() {
    let m = Managed::new("# my device\nprotocol_service_port = 0 # any free port\n");
    let token = "cfg-token-0123456789-abcdefghijklmnopqrstuvwxyz";
    // A literal credential is refused; the file is untouched.
    let before = std::fs::read_to_string(m.fx.config()).unwrap();
    let (code, _, err) = m.run(&["config", "set", "protocol_token", token]);
    assert_eq!(code, Some(1));
    assert!(err.contains("config set protocol_token -"), "{err}");
    assert_eq!(std::fs::read_to_string(m.fx.config()).unwrap(), before);
    // From stdin.
    let mut child =
        m.fx.command(&["config", "set", "protocol_token", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(token));
    let (code, out, _) = m.run(&["config", "get", "protocol_token"]);
    assert_eq!((code, out.as_str()), (Some(0), "set\n"));
    let (code, _, _) = m.run(&["config", "set", "protocol_start_with_service", "true"]);
    assert_eq!(code, Some(0));
    let (_, out, _) = m.run(&["config", "get", "protocol_start_with_service"]);
    assert_eq!(out, "true\n");
    let text = std::fs::read_to_string(m.fx.config()).unwrap();
    assert!(
        text.starts_with("# my device\nprotocol_service_port = 0 # any free port\n"),
        "{text}"
    );
    assert_eq!(mode(&m.fx.config()), 0o600);
    let (_, out, _) = m.run(&["config", "path"]);
    assert_eq!(out.trim(), m.fx.config().display().to_string());

    m.start();
    assert_eq!(initialize(m.addr(), token), 200);
    // A configured token is never written to the log.
    assert!(!m.log().contains(token));
    // A running service is told nothing; set says it needs a restart.
    let (code, out, _) = m.run(&["config", "set", "netd_uid", "65534"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("keeps the old value until it restarts"),
        "{out}"
    );
    assert!(out.contains("service restart"), "{out}");
    // An invalid value is refused naming the key, and the file stays as it was.
    let before = std::fs::read_to_string(m.fx.config()).unwrap();
    let (code, _, err) = m.run(&["config", "set", "protocol_service_port", "70000"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("protocol_service_port"), "{err}");
    assert_eq!(std::fs::read_to_string(m.fx.config()).unwrap(), before);
    let (code, _, err) = m.run(&["config", "set", "no_such_key", "1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("known keys: protocol_token"), "{err}");
}

/// A log line as long as the longest one in `text`.
fn longest_line(text: &str) -> u64 {
    text.lines().map(|l| l.len() as u64 + 1).max().unwrap_or(0)
}

#[test]
fn a_flooded_service_log_stays_within_its_cap_and_keeps_the_token() {
    const CAP: u64 = 1024 * 1024;
    let m = Managed::new(SWITCHED_ON);
    // At debug, every MCP request is logged whole (rmcp's "received request"): each
    // request below writes a line of about 30 KB.
    let (code, out, err) = m.run_env(&["service", "start"], &[("NL2SH_LOG", "debug")]);
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", m.log());
    let token = m.log_token();
    let addr = m.addr();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "no_such_tool", "arguments": {"pad": "x".repeat(30_000)}}})
    .to_string();
    let dir = m.service_dir();
    let old = dir.join("service.log.1");
    // Until the log has moved twice: the second move replaces the first service.log.1,
    // which began with the start's marker, with one that began as a continued log.
    let rotated_twice = || {
        std::fs::read_to_string(&old).is_ok_and(|t| {
            t.lines()
                .next()
                .is_some_and(|l| l.contains("log continued"))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut sent = 0;
    while !rotated_twice() {
        assert!(
            Instant::now() < deadline,
            "{sent} requests did not fill the log twice; its end:\n{}",
            m.log()
                .chars()
                .rev()
                .take(2000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        );
        for _ in 0..10 {
            assert_eq!(mcp_post(addr, &token, &body).status, 200);
            sent += 1;
        }
    }
    let check = |when: &str| {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["control.lock", "service.log", "service.log.1"],
            "{when}: one old log is kept"
        );
        for name in ["service.log", "service.log.1"] {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path).unwrap();
            let len = text.len() as u64;
            assert!(
                len <= CAP + longest_line(&text),
                "{when}: {name} is {len} bytes, over the cap and a line"
            );
            assert_eq!(mode(&path), 0o600, "{when}: {name}");
        }
    };
    check("flooded");
    // The current log still names the running service's token, which still works.
    let log = m.log();
    assert!(log.starts_with("--- ") && log.contains("This run's startup block:\n"));
    assert_eq!(m.log_token(), token);
    assert_eq!(initialize(addr, &token), 200);
    let (code, out, err) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    check("stopped");
    // What the service said as it stopped is in the current log, not a moved one.
    let log = m.log();
    assert!(
        log.contains("stopping: draining in-flight requests"),
        "{log}"
    );
}

#[test]
fn concurrent_config_sets_all_land() {
    let m = Managed::new(
        "# concurrent edits\nprotocol_auto_approve = true\n\n[model]\nmodel = \"m\"\n",
    );
    let token = "concurrent-token-0123456789-abcdefghijklmn";
    let state_dir = m.fx.dir.path().join("elsewhere.state");
    let state_dir = state_dir.display().to_string();
    // Twenty different keys, each set by a process of its own, all at once.
    let sets: Vec<(&str, &str)> = vec![
        ("protocol_auto_approve", "false"),
        ("protocol_start_with_service", "true"),
        ("protocol_service_port", "4321"),
        ("state_dir", &state_dir),
        ("netd_uid", "12345"),
        ("netd_gid", "12346"),
        ("sandbox_uid_base", "2415919200"),
        ("sandbox_uid_count", "32"),
        ("approval_policy", "strict"),
        ("approval_timeout_secs", "77"),
        ("audit_max_rows", "5000"),
        ("audit_max_bytes", "2097152"),
        ("approval_grants", "[{ tool = \"fs.stat\" }]"),
        ("protocol_token", "--from-env"),
        ("model.model", "m2"),
        ("model.base_url", "http://127.0.0.1:9/v1"),
        ("model.api_key_env", "MY_MODEL_KEY"),
        ("model.max_steps", "9"),
        ("model.request_timeout_secs", "42"),
        ("model.api_key", "--from-env"),
    ];
    assert_eq!(sets.len(), 20);
    let barrier = std::sync::Barrier::new(sets.len());
    std::thread::scope(|s| {
        for &(key, value) in &sets {
            let (barrier, fx) = (&barrier, &m.fx);
            s.spawn(move || {
                let mut cmd = if value == "--from-env" {
                    fx.command(&["config", "set", key, "--from-env", "SECRET_VALUE"])
                } else {
                    fx.command(&["config", "set", key, value])
                };
                let secret = if key == "protocol_token" {
                    token
                } else {
                    "sk-concurrent"
                };
                cmd.env("SECRET_VALUE", secret).stdin(Stdio::null());
                barrier.wait();
                let out = cmd.output().unwrap();
                assert!(
                    out.status.success(),
                    "config set {key}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            });
        }
    });
    for &(key, value) in &sets {
        let (code, out, err) = m.run(&["config", "get", key]);
        assert_eq!(code, Some(0), "{key}: {err}");
        let want = match key {
            "protocol_token" | "model.api_key" => "set",
            "approval_grants" => "[[approval_grants]]\ntool = \"fs.stat\"",
            _ => value,
        };
        assert_eq!(out.trim(), want, "{key}");
    }
    let text = std::fs::read_to_string(m.fx.config()).unwrap();
    assert!(text.starts_with("# concurrent edits\n"), "{text}");
    assert!(text.contains(token));
    assert_eq!(mode(&m.fx.config()), 0o600);
    let lock = m.fx.config().with_file_name("config.toml.lock");
    assert_eq!(mode(&lock), 0o600);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(m.fx.config().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// `nl2sh service status | head -1` and the like: a one-shot command whose reader has
/// gone ends at the broken pipe as `cat` does (SIGPIPE), never with a panic on stderr.
#[test]
fn a_one_shot_command_whose_reader_is_gone_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let fx = Fixture::new("");
    for args in [&["config", "path"][..], &["protocol", "approvals"][..]] {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = fx
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(write))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // `approvals` finds no service first (exit 3) on some paths; whatever it says,
        // a write to the gone reader is a SIGPIPE, not exit 101.
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        if args[0] == "config" {
            assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
        }
    }
}

/// `config set` from stdin, as the consoles' users run it for a credential.
fn set_from_stdin(m: &Managed, key: &str, value: &str) {
    let mut child =
        m.fx.command(&["config", "set", key, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    writeln!(child.stdin.take().unwrap(), "{value}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn status_says_which_saved_settings_the_running_service_does_not_use_yet() {
    let m = Managed::new(SWITCHED_ON);
    m.start();
    let (_, v) = m.status();
    assert_eq!(v["differs_from_saved"], json!([]), "{v}");
    assert_eq!(v["auto_approve"], false, "{v}");
    let restart = v["restart_command"].as_str().expect("restart_command");
    assert_eq!(
        restart,
        format!("nl2sh --config {} service restart", m.fx.config().display())
    );
    let running_port = m.addr().port();

    // A port saved while it runs: the running one stays until a restart, and status says
    // both, with the command that applies it.
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let saved_port = free.local_addr().unwrap().port();
    drop(free);
    let (code, _, _) = m.run(&[
        "config",
        "set",
        "protocol_service_port",
        &saved_port.to_string(),
    ]);
    assert_eq!(code, Some(0));
    // A token saved while a generated one is in use.
    let token = "saved-token-0123456789-abcdefghijklmnopqrstuv";
    set_from_stdin(&m, "protocol_token", token);
    let (_, v) = m.status();
    assert_eq!(
        v["differs_from_saved"],
        json!(["protocol_service_port", "protocol_token"]),
        "{v}"
    );
    assert_eq!(
        v["differences"][0],
        json!({"key": "protocol_service_port", "saved": saved_port.to_string(),
               "running": running_port.to_string()})
    );
    assert_eq!(
        v["differences"][1]["running"], "generated, rotates on restart",
        "{v}"
    );
    assert!(
        !v.to_string().contains(token),
        "status holds the token: {v}"
    );
    let (_, text, _) = m.run(&["service", "status"]);
    assert!(
        text.contains(&format!(
            "Differs:    protocol_service_port: saved {saved_port}, running {running_port}: \
             restart to apply: {restart}"
        )),
        "{text}"
    );
    assert!(!text.contains("Approval:"), "{text}");

    // Automatic approval is live: status says so at once, in text and JSON.
    let (code, _, _) = m.run(&["config", "set", "protocol_auto_approve", "true"]);
    assert_eq!(code, Some(0));
    assert_eq!(m.status().1["auto_approve"], true);
    let (_, text, _) = m.run(&["service", "status"]);
    assert!(
        text.contains(
            "Approval:   every request is approved automatically (protocol_auto_approve)"
        ),
        "{text}"
    );

    // The restart applies them: nothing differs, the saved port and token are live.
    let (code, out, err) = m.run(&["service", "restart"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (_, v) = m.status();
    assert_eq!(v["differs_from_saved"], json!([]), "{v}");
    assert_eq!(m.addr().port(), saved_port);
    assert_eq!(initialize(m.addr(), token), 200);
    // Stopped: nothing approves anything.
    let (code, _, _) = m.run(&["service", "stop"]);
    assert_eq!(code, Some(0));
    assert_eq!(m.status().1["auto_approve"], false);
}
