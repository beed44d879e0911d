//! Shared harness for the end-to-end tests: start the real `nl2sh` binary on 127.0.0.1,
//! read its startup block, speak minimal HTTP to it, and inspect its process tree.
//! Every server binds loopback and every request goes to loopback.

pub mod in_process;
pub mod scripted_model;
pub mod tmux;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `nl2sh` binary of this build (target/<profile>/nl2sh), or `$NL2SH_BIN`.
/// A shell line for a sandboxed call that forks `n` processes each sleeping `secs`, going
/// on past forks that fail (a shell would give up at the first): what takes every process
/// a call may have.
pub fn fork_bomb(n: u32, secs: u32) -> String {
    format!(
        "python3 -c 'import os, time\n\
         for i in range({n}):\n    \
         try:\n        \
         if os.fork() == 0: time.sleep({secs}); os._exit(0)\n    \
         except OSError: pass\n\
         time.sleep({secs})'"
    )
}

pub fn nl2sh_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NL2SH_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/..");
    let bin = dir.join("nl2sh");
    assert!(
        bin.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (it builds the nl2sh binary)",
        bin.display()
    );
    bin
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A private directory holding a config file; state lands beside it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    config: PathBuf,
}

impl Fixture {
    pub fn new(config: &str) -> Self {
        Self::with_config_at("config.toml", config)
    }

    /// The configuration at `relative` (for example `nl2sh/config.toml`, where
    /// `XDG_CONFIG_HOME=<dir>` finds it) inside the private directory.
    pub fn with_config_at(relative: &str, config: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("nl2sh-test-")
            .tempdir()
            .expect("tempdir");
        let path = dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("config directory");
        }
        std::fs::write(&path, config).expect("write config");
        Self { dir, config: path }
    }
    pub fn config(&self) -> PathBuf {
        self.config.clone()
    }
    pub fn state_dir(&self) -> PathBuf {
        nl2sh_proto::config::state_dir(&nl2sh_proto::config::Config::default(), &self.config)
    }
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(nl2sh_bin());
        cmd.arg("--config").arg(self.config()).args(args);
        cmd.env_remove("NL2SH_PROTOCOL_TOKEN")
            .env_remove("NL2SH_LOG");
        cmd
    }
}

/// A running `nl2sh protocol serve`.
pub struct Server {
    pub child: Child,
    pub stdout: String,
    pub stderr: Arc<Mutex<String>>,
    pub addr: SocketAddr,
    pub token: Option<String>,
}

impl Server {
    /// Start with `--host 127.0.0.1 --port 0` plus `extra`, and wait for the startup block.
    pub fn start(fx: &Fixture, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut args = vec!["protocol", "serve", "--host", "127.0.0.1", "--port", "0"];
        args.extend_from_slice(extra);
        Self::start_args(fx, &args, env)
            .unwrap_or_else(|(code, err)| panic!("server did not start (exit {code:?}):\n{err}"))
    }

    /// Start with exactly `args`; on failure, the exit code and stderr.
    pub fn start_args(
        fx: &Fixture,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Server, (Option<i32>, String)> {
        Self::start_args_from(fx, args, env, None)
    }

    /// `protocol serve` started from `dir`, as a person or a boot script that changed
    /// into the configuration's directory first.
    pub fn start_from(fx: &Fixture, dir: &std::path::Path) -> Server {
        let args = ["protocol", "serve", "--host", "127.0.0.1", "--port", "0"];
        Self::start_args_from(fx, &args, &[], Some(dir))
            .unwrap_or_else(|(code, err)| panic!("serve exited {code:?}: {err}"))
    }

    fn start_args_from(
        fx: &Fixture,
        args: &[&str],
        env: &[(&str, &str)],
        cwd: Option<&std::path::Path>,
    ) -> Result<Server, (Option<i32>, String)> {
        let mut cmd = fx.command(args);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nl2sh");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line.clone()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut stdout = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut addr = None;
        let mut token = None;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                let err = stderr.lock().unwrap().clone();
                return Err((status.code(), err));
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    stdout.push_str(&line);
                    let l = line.trim();
                    if let Some(a) = l.strip_prefix("Listening on:") {
                        addr = Some(a.trim().to_string());
                    }
                    if let Some(t) = l.strip_prefix("export NL2SH_PROTOCOL_TOKEN=") {
                        token = Some(t.trim_matches('\'').to_string());
                    }
                    // The block's last line says where the token is.
                    if l.starts_with("This output contains the token")
                        || l.starts_with("Set NL2SH_PROTOCOL_TOKEN")
                    {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => {}
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "no startup block within 30s; stdout so far:\n{stdout}\nstderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        }
        let addr: SocketAddr = addr.and_then(|a| a.parse().ok()).unwrap_or_else(|| {
            panic!("no `Listening on:` address in the startup block:\n{stdout}")
        });
        Ok(Server {
            child,
            stdout,
            stderr,
            addr,
            token,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The worker processes, by role name (from /proc/<pid>/comm "nl2sh-<role>").
    pub fn workers(&self) -> Vec<(String, i32)> {
        children_of(self.pid())
            .into_iter()
            .filter_map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                Some((comm.trim().trim_start_matches("nl2sh-").to_string(), pid))
            })
            .collect()
    }

    pub fn worker(&self, role: &str) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some((_, pid)) = self.workers().into_iter().find(|(r, _)| r == role) {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no {role} worker; have {:?}",
                self.workers()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Wait for exit, with a bound.
    pub fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "nl2sh did not exit within {limit:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn token(&self) -> &str {
        self.token
            .as_deref()
            .expect("this server printed no generated token")
    }

    pub fn host_header(&self) -> String {
        self.addr.to_string()
    }

    /// One A2A 1.0 JSON-RPC call with this server's token; the whole answer (`result`
    /// or `error`), after checking it is HTTP 200 for this request's id.
    pub fn a2a(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": "e2e", "method": method, "params": params});
        let r = http(
            self.addr,
            "POST",
            "/a2a",
            &[
                ("Host", &self.host_header()),
                ("Authorization", &format!("Bearer {}", self.token())),
                ("Content-Type", "application/json"),
                ("A2A-Version", "1.0"),
                // What an A2A client names itself by (A2A has no field for it).
                ("User-Agent", A2A_USER_AGENT),
            ],
            body.to_string().as_bytes(),
        );
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json();
        assert_eq!(v["id"], "e2e", "{v}");
        v
    }

    /// POST a JSON-RPC body to /mcp with the token and a loopback Host.
    pub fn mcp(&self, body: &str) -> HttpResponse {
        mcp_post(self.addr, self.token(), body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pids whose parent is `pid`.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) {
            // Fields after the last ')' : state ppid ...
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let mut it = rest.split_whitespace();
                let _state = it.next();
                if it.next().and_then(|p| p.parse::<i32>().ok()) == Some(pid) {
                    out.push(child);
                }
            }
        }
    }
    out
}

pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie is dead for our purposes (its parent has not reaped it yet).
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => false,
    }
}

/// A field of /proc/<pid>/status, e.g. "Uid" or "CapEff".
pub fn proc_status(pid: i32, field: &str) -> String {
    try_proc_status(pid, field).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// [`proc_status`] of a process that may be gone by the time it is read (None then).
pub fn try_proc_status(pid: i32, field: &str) -> Option<String> {
    proc_field(pid, "status", field)
}

/// A field of a `/proc/<pid>/<file>` of "Field: value" lines ("status", "smaps_rollup"),
/// trimmed; None when the process is gone or the field missing.
pub fn proc_field(pid: i32, file: &str, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(field)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// A size field of a `/proc/<pid>/<file>` in KiB, e.g. `proc_kib(pid, "smaps_rollup",
/// "Pss")`; None when the process is gone or the field missing.
pub fn proc_kib(pid: i32, file: &str, field: &str) -> Option<u64> {
    proc_field(pid, file, field)?
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

pub use nl2sh_test_http::Response as HttpResponse;

/// POST a JSON-RPC body to `addr`/mcp as an authorised client would
/// ([`nl2sh_test_http::with_mcp_headers`]).
pub fn mcp_post(addr: SocketAddr, token: &str, body: &str) -> HttpResponse {
    nl2sh_test_http::with_mcp_headers(addr, token, |headers| {
        http(addr, "POST", "/mcp", headers, body.as_bytes())
    })
}

/// One HTTP/1.1 request on a fresh connection (Connection: close).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    nl2sh_test_http::send(addr, method, path, headers, body)
}

/// The response on a connection the caller wrote a request to, read to the end.
pub fn read_response(s: &mut TcpStream) -> HttpResponse {
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_response(&raw).unwrap_or_else(|| {
        panic!(
            "no HTTP status in {:?}",
            String::from_utf8_lossy(&raw).to_string()
        )
    })
}

/// An MCP POST that may fail (a service restarting, a connection reset): the response, or
/// `None` when none came within `limit`.
pub fn try_mcp_post(
    addr: SocketAddr,
    token: &str,
    body: &str,
    limit: Duration,
) -> Option<HttpResponse> {
    nl2sh_test_http::with_mcp_headers(addr, token, |headers| {
        nl2sh_test_http::try_send(addr, "POST", "/mcp", headers, body.as_bytes(), limit).ok()
    })
}

/// An A2A JSON-RPC call (`method`, `params`) with the token, on its own connection: the
/// response, or `None` when none came within `limit`.
pub fn try_a2a(
    addr: SocketAddr,
    token: &str,
    method: &str,
    params: serde_json::Value,
    limit: Duration,
) -> Option<HttpResponse> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let host = addr.to_string();
    let auth = format!("Bearer {token}");
    let headers = [
        ("Host", host.as_str()),
        ("Authorization", auth.as_str()),
        ("A2A-Version", "1.0"),
        ("Content-Type", "application/json"),
    ];
    let body = body.to_string();
    nl2sh_test_http::try_send(addr, "POST", "/a2a", &headers, body.as_bytes(), limit).ok()
}

/// An HTTP/1.1 response as read off a closed connection; `None` without a status line.
pub fn parse_response(raw: &[u8]) -> Option<HttpResponse> {
    nl2sh_test_http::parse(raw)
}

/// The `User-Agent` of [`Server::a2a`]'s requests.
pub const A2A_USER_AGENT: &str = "nl2sh-tests-a2a/1.0 (e2e)";

/// An MCP initialize request body.
pub fn initialize_body(version: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "nl2sh-tests", "version": "0"}}
    })
    .to_string()
}

/// An MCP `tools/call` result.
#[derive(Debug)]
pub struct ToolCall {
    pub is_error: bool,
    pub structured: serde_json::Value,
    pub content: Vec<serde_json::Value>,
}

impl ToolCall {
    /// The result of a `tools/call` response (panics on an HTTP or protocol error).
    pub fn from_response(r: &HttpResponse) -> Self {
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json();
        let result = v
            .get("result")
            .unwrap_or_else(|| panic!("protocol error: {v}"))
            .clone();
        ToolCall {
            is_error: result["isError"] == serde_json::Value::Bool(true),
            structured: result["structuredContent"].clone(),
            content: result["content"].as_array().cloned().unwrap_or_default(),
        }
    }

    /// `structuredContent.output` parsed as JSON (tools answer with JSON object text).
    pub fn output(&self) -> serde_json::Value {
        let text = self.structured["output"].as_str().unwrap_or_default();
        serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
    }
}

impl Server {
    /// Call an MCP tool over HTTP and return its result (panics on a protocol error).
    pub fn call_tool(&self, name: &str, arguments: serde_json::Value) -> ToolCall {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}
        });
        ToolCall::from_response(&self.mcp(&body.to_string()))
    }

    /// `nl2sh_invoke` of one device tool.
    pub fn invoke(&self, tool: &str, arguments: serde_json::Value) -> ToolCall {
        self.call_tool(
            "nl2sh_invoke",
            serde_json::json!({"tool": tool, "arguments": arguments}),
        )
    }
}

impl Server {
    /// `nl2sh_invoke` on a thread of its own, for calls that wait (for approval, for a
    /// command to end) while the test acts.
    pub fn invoke_async(
        &self,
        tool: &str,
        arguments: serde_json::Value,
    ) -> std::thread::JoinHandle<ToolCall> {
        let addr = self.addr;
        let token = self.token().to_string();
        let tool = tool.to_string();
        std::thread::spawn(move || {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "nl2sh_invoke", "arguments": {"tool": tool, "arguments": arguments}}});
            ToolCall::from_response(&mcp_post(addr, &token, &body.to_string()))
        })
    }
}

/// Processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid: &i32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// Wait up to `limit` until no process's command line contains any of `needles`; the
/// ones still there otherwise.
pub fn wait_gone(needles: &[String], limit: Duration) -> Result<(), Vec<i32>> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = needles.iter().flat_map(|n| processes_with(n)).collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The stand-in Android programs (tests/fixtures/android-bin).
pub fn android_standins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/android-bin")
}

/// A copy of the stand-ins in `dir/android-bin` (modes kept), for a test that changes
/// what they serve: the service passes no test variable to the tools it runs, so a test
/// edits its copy's data or defaults instead.
pub fn android_standins_copy(dir: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let dest = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &dest);
            } else {
                std::fs::copy(entry.path(), dest).unwrap();
            }
        }
    }
    let to = dir.join("android-bin");
    copy(&android_standins(), &to);
    to
}

/// PATH with `dir` first.
pub fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Run an `nl2sh` command for `fx`'s configuration with stdin on a fresh pseudo-terminal
/// (what a person at the device has); returns (exit code, stdout, stderr).
pub fn run_on_terminal(fx: &Fixture, args: &[&str]) -> (Option<i32>, String, String) {
    run_on_terminal_typing(fx, args, "y\n")
}

/// [`run_on_terminal`], the person typing `typed` into the terminal (read only by a
/// command that asks: `approve` of a `high` request).
pub fn run_on_terminal_typing(
    fx: &Fixture,
    args: &[&str],
    typed: &str,
) -> (Option<i32>, String, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut master = std::fs::File::from(pty.master);
    std::io::Write::write_all(&mut master, typed.as_bytes()).expect("type into the terminal");
    let out = fx
        .command(args)
        .stdin(Stdio::from(pty.slave))
        .output()
        .expect("run nl2sh");
    drop(master);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run an `nl2sh` command with stdin from /dev/null (a script, not a person).
pub fn run_without_terminal(fx: &Fixture, args: &[&str]) -> (Option<i32>, String, String) {
    let out = fx
        .command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nl2sh");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `nl2sh protocol approvals --json`, parsed.
pub fn pending_approvals(fx: &Fixture) -> Vec<serde_json::Value> {
    let (code, out, err) = run_without_terminal(fx, &["protocol", "approvals", "--json"]);
    assert_eq!(code, Some(0), "approvals failed: {err}");
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap_or_else(|e| panic!("approvals --json is not JSON ({e}): {out}"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Wait until exactly `n` approvals are pending; returns them.
pub fn wait_pending(fx: &Fixture, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = pending_approvals(fx);
        if list.len() == n {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} pending approvals, have {list:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A minimal MCP client over `protocol stdio`, optionally started inside namespaces the
/// test makes (`prefix`, e.g. `unshare --net --uts --`).
pub struct StdioClient {
    pub child: Child,
    pub stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Messages read while waiting for another id.
    early: std::cell::RefCell<Vec<serde_json::Value>>,
}

impl StdioClient {
    pub fn start(fx: &Fixture) -> Self {
        Self::start_in(fx, &[])
    }

    pub fn start_in(fx: &Fixture, prefix: &[&str]) -> Self {
        let nl2sh = fx.command(&["protocol", "stdio"]);
        let mut cmd = match prefix.split_first() {
            None => nl2sh,
            Some((program, rest)) => {
                let mut wrapped = Command::new(program);
                wrapped
                    .args(rest)
                    .arg(nl2sh.get_program())
                    .args(nl2sh.get_args());
                wrapped
                    .env_remove("NL2SH_PROTOCOL_TOKEN")
                    .env_remove("NL2SH_LOG");
                wrapped
            }
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn nl2sh protocol stdio");
        let stdin = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                // Anything on stdout that is not JSON-RPC breaks the protocol.
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("non-MCP stdout: {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut s = Self {
            child,
            stdin,
            lines,
            early: Default::default(),
        };
        s.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "nl2sh-tests", "version": "0"}}}),
        );
        let init = s.response(0);
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        s.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    pub fn send(&mut self, v: serde_json::Value) {
        writeln!(self.stdin, "{v}").expect("write to stdio server");
        self.stdin.flush().expect("flush stdio server");
    }

    /// Send `nl2sh_invoke` of `tool` with request id `id` (answer with [`Self::response`]).
    pub fn invoke(&mut self, id: i64, tool: &str, arguments: serde_json::Value) {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "nl2sh_invoke", "arguments": {"tool": tool, "arguments": arguments}}}));
    }

    pub fn response(&self, id: i64) -> serde_json::Value {
        let want = serde_json::json!(id);
        {
            let mut early = self.early.borrow_mut();
            if let Some(at) = early.iter().position(|v| v["id"] == want) {
                return early.remove(at);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .expect("no response from stdio server");
            if v["id"] == want {
                return v;
            }
            self.early.borrow_mut().push(v);
        }
    }
}

/// Print a Markdown table (the benches' output), columns padded to their widest cell.
pub fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::from("|");
        for (cell, w) in cells.iter().zip(&widths) {
            let pad = w - cell.chars().count();
            out.push_str(&format!(" {cell}{} |", " ".repeat(pad)));
        }
        out
    };
    println!("{}", line(header.to_vec()));
    let sep: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("{}", line(sep.iter().map(String::as_str).collect()));
    for row in rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
    let _ = std::io::stdout().flush();
}

/// `MemAvailable` of /proc/meminfo in KiB: what the device could still give (the fault
/// tests print it before and during each flood).
pub fn mem_available_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("MemAvailable:")?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    })
}

/// A FUSE mount whose daemon never answers, as `/sdcard` is when its daemon hangs: every
/// look-up below it waits until the mount is dropped (the connection is then gone, and
/// what waited fails with ENOTCONN). Root only; `None` where FUSE is not available.
pub struct HungFuse {
    pub dir: PathBuf,
    device: Option<std::fs::File>,
}

impl HungFuse {
    pub fn mount(dir: &Path) -> Option<HungFuse> {
        use std::os::fd::AsRawFd;
        let device = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .ok()?;
        std::fs::create_dir_all(dir).ok()?;
        let options = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0",
            device.as_raw_fd()
        );
        let c = |s: &str| std::ffi::CString::new(s).ok();
        let (source, target, fstype, data) = (
            c("nl2sh-hung")?,
            c(&dir.to_string_lossy())?,
            c("fuse")?,
            c(&options)?,
        );
        // SAFETY: every pointer is a NUL-terminated string alive for the call.
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        (rc == 0).then(|| HungFuse {
            dir: dir.to_path_buf(),
            device: Some(device),
        })
    }
}

impl Drop for HungFuse {
    fn drop(&mut self) {
        // Closing the device ends the connection: whatever waited on it fails.
        drop(self.device.take());
        if let Ok(target) = std::ffi::CString::new(self.dir.to_string_lossy().as_bytes()) {
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
