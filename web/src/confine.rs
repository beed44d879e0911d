//! The console confines itself once, in [`crate::run`], before its runtime exists or the
//! first frame is read, with the routine netd uses too (`nl2sh_http_worker::confine`):
//! identity checked (not root, no capabilities, no way back), made non-dumpable, then
//! Landlock with the console's `rules` (best effort by kernel ABI), then the seccomp
//! allow-list ([`crate::seccomp`]) last, so the earlier steps need no rows of their own.
//!
//! Landlock here allows nothing at all: every file system right of the newest ABI this
//! build knows is handled and no path is granted (the console's pages are compiled in
//! and it opens no file once started), TCP and UDP binds and connects are handled with
//! no port granted (it only accepts on its inherited listener), and abstract Unix
//! sockets and signals are scoped to the console itself. seccomp already refuses
//! `open`, `socket`, `connect` and `bind` outright; Landlock is the second wall should
//! the filter be missing (a kernel without seccomp, an architecture without a filter).

use nl2sh_http_worker::confine::{self, Access, AccessNet, ConfineError, Report, Rules};

/// Confine this process for good, with the routine netd uses too
/// (`nl2sh_http_worker::confine`), the console's `rules` and its table
/// ([`crate::seccomp`]); logged as `web confined`. Landlock is best effort (kernels
/// without it, many phones' among them, run without and say so); a seccomp filter that
/// exists for this architecture and kernel but fails to install stops the console from
/// starting, as does any sign of privilege.
pub fn apply() -> Result<Report, ConfineError> {
    confine::confine("web", &rules(), |_| table())
}

nl2sh_http_worker::cfg_seccomp_filter! {
    {
        /// The console's seccomp table.
        fn table() -> impl Iterator<Item = &'static nl2sh_http_worker::seccomp::Row> + Clone {
            crate::seccomp::table()
        }
    } else {
        /// No table where no filter is built.
        fn table() -> std::iter::Empty<&'static nl2sh_http_worker::seccomp::Row> {
            std::iter::empty()
        }
    }
}

/// Landlock with everything handled and nothing granted (see the module comment), on
/// every thread where the kernel can (ABI 8; there is one anyway).
fn rules() -> Rules {
    Rules {
        net: AccessNet::from_all(confine::LANDLOCK_ABI),
        readable: Vec::new(),
        sockets: Vec::new(),
        all_threads: true,
        describe: |abi, all_threads| Some(enforced(abi, all_threads)),
    }
}

/// What Landlock of kernel ABI `abi` enforces with this ruleset, in words.
fn enforced(abi: i32, all_threads: bool) -> String {
    let mut parts = vec!["no file system access"];
    parts.push(match abi {
        ..=3 => "TCP and UDP not covered",
        4..=9 => "no TCP bind or connect (UDP not covered)",
        _ => "no TCP or UDP bind, connect or send",
    });
    if abi >= 6 {
        parts.push("abstract Unix sockets and signals scoped");
    }
    if all_threads {
        parts.push("on every thread");
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_says_what_each_abi_enforces() {
        assert_eq!(
            enforced(1, false),
            "no file system access, TCP and UDP not covered"
        );
        assert!(enforced(4, false).contains("no TCP bind or connect"));
        assert!(!enforced(5, false).contains("scoped"));
        assert!(enforced(6, false).contains("signals scoped"));
        assert!(enforced(8, true).ends_with("on every thread"));
        assert!(enforced(10, true).contains("no TCP or UDP"));
    }

    /// The confinement tests below run this test binary again, with this variable
    /// naming what the child does: the child confines itself as the console does
    /// (Landlock, then the filter) and then tries it. Confinement is for good, so it
    /// cannot happen in the test process itself.
    #[cfg(all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "riscv64"
        )
    ))]
    mod confined {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::net::TcpStream;
        use std::os::unix::process::ExitStatusExt;
        use std::process::{Command, ExitStatus, Stdio};
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        use nl2sh_proto::channels::{
            ControlRequest, ControlResponse, DiscoveryRequest, DiscoveryResponse, FromWorker,
            OwnerAction, OwnerErrorKind, OwnerRequest, OwnerResponse, WebSettings, WorkerSettings,
        };
        use nl2sh_proto::frame::{read_frame, write_frame};
        use nl2sh_proto::rpc::{self, OutOfState};
        use nl2sh_proto::topology::{pair, SupervisorWeb, WebApprovald, WebEnds, WebSupervisor};
        use nl2sh_proto::Secret;

        use nl2sh_http_worker::sys::attempt;

        use super::super::{rules, table};
        use crate::worker;

        const CHILD: &str = "NL2SH_WEB_CONFINED_CHILD";
        /// This file's child entry point, as libtest names it.
        const ENTRY: &str = "confine::tests::confined::child";
        /// What a child exits with when the forbidden call returned instead of killing it.
        const RETURNED: i32 = 3;
        /// A session the fake approvald hands out and accepts.
        const SESSION: &str = "abababababababababababababababababababababababababababababababab";

        /// The child's side: nothing unless started by [`run_child`].
        #[test]
        fn child() {
            let Ok(what) = std::env::var(CHILD) else {
                return;
            };
            let code = match what.as_str() {
                "serve" => serve(),
                other => forbidden(other),
            };
            // Not libtest's way out: under the filter, only what the console may do.
            std::process::exit(code);
        }

        /// Landlock, then the filter, as [`super::super::apply`] does after its identity
        /// checks (which a test run as root would fail). Exits with 10 if the filter is
        /// not on.
        fn lock_down() {
            let landlock = rules().restrict_self();
            match nl2sh_http_worker::seccomp::apply(table(), std::process::id()) {
                Ok((_, true)) => {}
                other => {
                    eprintln!("child: no filter: {other:?}");
                    std::process::exit(10);
                }
            }
            eprintln!("child: confined, landlock {}", landlock.report);
        }

        fn forbidden(what: &str) -> i32 {
            // Made before the filter, for the attempts that need one.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let parent = std::os::unix::process::parent_id();
            lock_down();
            let outcome: Result<(), std::io::Error> = match what {
                "execve" => Err(attempt::execve()),
                "socket-inet" => attempt::socket(libc::AF_INET),
                "socket-unix" => attempt::socket(libc::AF_UNIX),
                "bind" => std::net::TcpListener::bind("127.0.0.1:0").map(drop),
                "connect" => TcpStream::connect(listener.local_addr().unwrap()).map(drop),
                "open" => std::fs::File::open("/etc/hostname").map(drop),
                "create" => std::fs::File::create("/tmp/nl2sh-web-confined").map(drop),
                "stat" => std::fs::metadata("/etc/hostname").map(drop),
                "thread" => std::thread::Builder::new().spawn(|| ()).map(drop),
                "process" => Command::new("/bin/true").status().map(drop),
                "ptrace" => attempt::ptrace(),
                "kill-parent" => attempt::kill(parent),
                "mmap-exec" => attempt::mmap_exec(),
                "unshare" => attempt::unshare(),
                "setuid" => attempt::setuid(),
                "dumpable" => attempt::dumpable(),
                // musl's abort signals its calling thread with tkill, which the filter
                // allows for the console's only thread, whose id is the process id;
                // libtest runs this on a thread of its own, so do what musl's abort
                // does on the console's thread, then wait (on a futex) for the main
                // thread to take the signal.
                "abort" if cfg!(target_env = "musl") => {
                    attempt::abort_main_thread().map(|()| loop {
                        std::thread::park();
                    })
                }
                "abort" => std::process::abort(),
                // Refused, not fatal: claiming a descriptor again reports an error.
                "claim-listener" => {
                    use std::os::fd::AsRawFd;
                    let fd = listener.as_raw_fd();
                    match nl2sh_proto::sys::take_inherited(
                        fd,
                        nl2sh_proto::sys::Expect::TcpListener,
                    ) {
                        Ok(owned) => {
                            // Not ours to close twice.
                            std::mem::forget(owned);
                            Ok(())
                        }
                        Err(e) if e.to_string().contains("Operation not permitted") => {
                            eprintln!("child: refused: {e}");
                            return 0;
                        }
                        Err(e) => Err(e),
                    }
                }
                other => {
                    eprintln!("child: unknown attempt {other:?}");
                    return 2;
                }
            };
            eprintln!("child: {what} returned: {outcome:?}");
            RETURNED
        }

        /// Whether the filter can be tested here (not under qemu-user, nor on a kernel
        /// without seccomp); says so when not.
        fn filtering() -> bool {
            let on = nl2sh_http_worker::sys::kernel_has_seccomp();
            if !on {
                eprintln!("no seccomp on this kernel: the confinement is not tested here");
            }
            on
        }

        /// Start this binary's [`child`] with `what`.
        fn spawn_child(what: &str) -> std::process::Child {
            Command::new(std::env::current_exe().unwrap())
                .args([ENTRY, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD, what)
                // A panic under the filter must not go looking for debug info.
                .env("RUST_BACKTRACE", "0")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        }

        /// Wait for `child` (killing it after `limit`): its status and its stderr.
        fn finish(mut child: std::process::Child, limit: Duration) -> (ExitStatus, String) {
            let deadline = Instant::now() + limit;
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    break child.wait().unwrap();
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            (status, stderr)
        }

        #[test]
        fn what_the_filter_forbids_kills_the_console() {
            if !filtering() {
                return;
            }
            for what in [
                "execve",
                "socket-inet",
                "socket-unix",
                "bind",
                "connect",
                "open",
                "create",
                "stat",
                "thread",
                "process",
                "ptrace",
                "kill-parent",
                "mmap-exec",
                "unshare",
                "setuid",
                "dumpable",
            ] {
                let (status, stderr) = finish(spawn_child(what), Duration::from_secs(20));
                assert_eq!(
                    status.signal(),
                    Some(libc::SIGSYS),
                    "{what}: {status:?}\n{stderr}"
                );
                assert!(stderr.contains("child: confined"), "{what}: {stderr}");
            }
        }

        #[test]
        fn an_abort_still_ends_as_an_abort() {
            if !filtering() {
                return;
            }
            // The release profile aborts on a panic: SIGABRT, not SIGSYS, tells a crash
            // from a violation.
            let (status, stderr) = finish(spawn_child("abort"), Duration::from_secs(20));
            assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}\n{stderr}");
        }

        #[test]
        fn claiming_a_descriptor_after_the_filter_is_refused() {
            if !filtering() {
                return;
            }
            let (status, stderr) = finish(spawn_child("claim-listener"), Duration::from_secs(20));
            assert_eq!(status.code(), Some(0), "{status:?}\n{stderr}");
        }

        /// The child's console: the real worker, confined, on a listener and channels made
        /// before the filter (as the supervisor's are), with a fake supervisor and
        /// approvald in the same runtime. Serves until a login with the code `drain`, then
        /// drains. Prints `PORT=<port>` once confined.
        fn serve() -> i32 {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let (supervisor, control) = pair::<SupervisorWeb>().unwrap();
            let (approvald_end, approvald) = pair::<WebApprovald>().unwrap();
            let (discovery_end, discovery) = pair::<WebSupervisor>().unwrap();
            let ends = WebEnds {
                control,
                approvald: approvald_end,
                supervisor: discovery_end,
            };
            lock_down();
            println!("PORT={}", addr.port());
            let _ = std::io::stdout().flush();
            // As `run` does: the runtime exists only once the filter is on.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let outcome = runtime.block_on(async move {
                let drain = Arc::new(tokio::sync::Notify::new());
                let asked = drain.clone();
                tokio::spawn(rpc::serve(approvald, move |req: OwnerRequest| {
                    let asked = asked.clone();
                    async move { Ok(fake_approvald(req, &asked)) }
                }));
                tokio::spawn(rpc::serve(discovery, |_: DiscoveryRequest| async {
                    Err::<DiscoveryResponse, _>(OutOfState("not in this test".into()))
                }));
                let console = tokio::spawn(worker::serve(ends, worker::Listener::Given(listener)));
                let mut control = supervisor.greet().await.map_err(|e| e.to_string())?;
                let settings = WebSettings {
                    origin: format!("http://{addr}"),
                    local_authorities: vec![addr.to_string()],
                    insecure_remote: false,
                };
                let start = ControlRequest::Start(Box::new(WorkerSettings::Web(settings)));
                write_frame(&mut control, 1, &start)
                    .await
                    .map_err(|e| e.to_string())?;
                let answer = read_frame::<FromWorker, _>(&mut control).await;
                if !matches!(
                    answer,
                    Ok((1, FromWorker::Answer(ControlResponse::Started)))
                ) {
                    return Err(format!("no Started: {answer:?}"));
                }
                drain.notified().await;
                write_frame(&mut control, 2, &ControlRequest::Drain { grace_ms: 2_000 })
                    .await
                    .map_err(|e| e.to_string())?;
                let answer = read_frame::<FromWorker, _>(&mut control).await;
                if !matches!(
                    answer,
                    Ok((2, FromWorker::Answer(ControlResponse::Drained)))
                ) {
                    return Err(format!("no Drained: {answer:?}"));
                }
                match console.await {
                    Ok(Ok(())) => Ok(()),
                    other => Err(format!("the console ended with {other:?}")),
                }
            });
            // The runtime goes as it would at the console's exit.
            drop(runtime);
            match outcome {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("child: {e}");
                    1
                }
            }
        }

        fn fake_approvald(req: OwnerRequest, drain: &tokio::sync::Notify) -> OwnerResponse {
            let refused = |kind| OwnerResponse::Refused {
                kind,
                message: "refused by the test".into(),
            };
            match req {
                OwnerRequest::RedeemLogin { code } if code.expose() == "good" => {
                    OwnerResponse::LoggedIn {
                        session: Secret::new(SESSION.into()),
                        csrf: Secret::new("cd".repeat(32)),
                        expires_in_secs: 600,
                    }
                }
                OwnerRequest::RedeemLogin { code } => {
                    if code.expose() == "drain" {
                        drain.notify_one();
                    }
                    refused(OwnerErrorKind::NotLoggedIn)
                }
                OwnerRequest::Check { proof } | OwnerRequest::Act { proof, .. }
                    if proof.session.expose() != SESSION =>
                {
                    refused(OwnerErrorKind::NotLoggedIn)
                }
                OwnerRequest::Check { .. } => OwnerResponse::Owner {
                    expires_in_secs: 600,
                },
                OwnerRequest::Act { action, .. } => match action {
                    OwnerAction::ListPending => OwnerResponse::Pending(Vec::new()),
                    OwnerAction::Grants => OwnerResponse::Grants(vec!["a grant".into()]),
                    OwnerAction::UiGrants => OwnerResponse::UiGrants(Vec::new()),
                    _ => refused(OwnerErrorKind::Invalid),
                },
                OwnerRequest::Logout { .. } => OwnerResponse::Done,
            }
        }

        /// One HTTP/1.1 request on a new connection; the status and the whole answer.
        fn request(port: u16, head: &str, body: &str) -> (u16, String) {
            let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let host = format!("127.0.0.1:{port}");
            write!(
                conn,
                "{head}\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut answer = String::new();
            conn.read_to_string(&mut answer).unwrap();
            let status = answer
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            (status, answer)
        }

        #[test]
        fn the_confined_console_serves_and_drains() {
            if !filtering() {
                return;
            }
            let mut child = spawn_child("serve");
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            let port: u16 = loop {
                let mut line = String::new();
                if stdout.read_line(&mut line).unwrap() == 0 {
                    let (status, stderr) = finish(child, Duration::from_secs(5));
                    panic!("the child printed no port: {status:?}\n{stderr}");
                }
                // libtest's "test … … " precedes it on the line.
                if let Some((_, port)) = line.trim().split_once("PORT=") {
                    break port.parse().unwrap();
                }
            };
            let origin = format!("Origin: http://127.0.0.1:{port}");
            let json = "Content-Type: application/json";
            // Static pages, a 404, a refusal.
            let (status, page) = request(port, "GET / HTTP/1.1", "");
            assert_eq!(status, 200, "{page}");
            assert!(page.contains("<!doctype html>"), "{page}");
            assert_eq!(request(port, "GET /app.js HTTP/1.1", "").0, 200);
            assert_eq!(request(port, "GET /nope HTTP/1.1", "").0, 404);
            let post = format!("POST /api/login HTTP/1.1\r\n{json}");
            assert_eq!(request(port, &post, r#"{"code":"good"}"#).0, 403);
            // A login and the owner's pages, through the fake approvald.
            let login = format!("POST /api/login HTTP/1.1\r\n{origin}\r\n{json}");
            let (status, answer) = request(port, &login, r#"{"code":"good"}"#);
            assert_eq!(status, 200, "{answer}");
            assert!(
                answer.contains(&format!("nl2sh_session={SESSION}")),
                "{answer}"
            );
            let cookie = format!("Cookie: nl2sh_session={SESSION}");
            for page in ["/api/session", "/api/approvals"] {
                let (status, answer) =
                    request(port, &format!("GET {page} HTTP/1.1\r\n{cookie}"), "");
                assert_eq!(status, 200, "{page}: {answer}");
            }
            assert_eq!(request(port, "GET /api/session HTTP/1.1", "").0, 401);
            // Many at once, some left half-sent or idle.
            let clients: Vec<_> = (0..24)
                .map(|_| std::thread::spawn(move || request(port, "GET /app.css HTTP/1.1", "").0))
                .collect();
            let idle: Vec<_> = (0..8)
                .map(|i| {
                    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    if i % 2 == 0 {
                        let _ = conn.write_all(b"GET / HTTP/1.1\r\nHost: 127");
                    }
                    conn
                })
                .collect();
            for client in clients {
                assert_eq!(client.join().unwrap(), 200);
            }
            drop(idle);
            // The drain, asked for through the fake approvald.
            let _ = request(port, &login, r#"{"code":"drain"}"#);
            let (status, stderr) = finish(child, Duration::from_secs(20));
            assert_eq!(status.code(), Some(0), "{status:?}\n{stderr}");
            assert!(stderr.contains("child: confined"), "{stderr}");
        }
    }
}
