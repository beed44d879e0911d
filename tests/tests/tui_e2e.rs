//! The terminal console (`nl2sh` with no subcommand) as a person uses it: in tmux, keys
//! typed with `send-keys`, the screen read with `capture-pane`, at 80x24.

use std::time::Duration;

use serde_json::json;

use nl2sh_tests::tmux::{sq, Tmux};
use nl2sh_tests::{pending_approvals, wait_pending, Fixture, Server};

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The console for `fx` in a new 80x24 window; the shell prints its exit code and
/// `stty -a` before and after into files beside the configuration.
fn open(tmux: &Tmux, fx: &Fixture, session: &str) {
    let dir = fx.dir.path();
    let line = format!(
        "stty -a > {before}; {console}; echo \"[exit $?]\"; stty -a > {after}; sleep 600",
        before = sq(&dir.join("stty-before").display().to_string()),
        after = sq(&dir.join("stty-after").display().to_string()),
        console = Tmux::nl2sh_line(fx, &[]),
    );
    tmux.open(session, 80, 24, &line);
}

fn exited(screen: &str) -> bool {
    screen.contains("[exit ")
}

#[test]
fn the_startup_page_shows_the_running_service_and_its_token_only_when_asked() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new(&format!("protocol_token = \"{TOKEN}\"\n"));
    let server = Server::start(&fx, &[], &[]);
    open(&tmux, &fx, "s");
    let mcp = format!("http://{}/mcp", server.addr);
    let screen = tmux.wait_screen("s", "the MCP URL", |s| s.contains(&mcp));
    assert!(screen.contains("hidden (t reveals it)"), "{screen}");
    assert!(!screen.contains(TOKEN), "{screen}");
    tmux.send_keys("s", &["t"]);
    // 64 characters after the label wrap on an 80-column screen: look for its first half.
    let half = &TOKEN[..32];
    tmux.wait_screen("s", "the revealed token", |s| s.contains(half));
    tmux.send_keys("s", &["t"]);
    tmux.wait_screen("s", "the token hidden again", |s| !s.contains(half));
    // It started nothing, so it quits at once and leaves the service running.
    tmux.send_keys("s", &["q"]);
    let screen = tmux.wait_screen("s", "the console's exit", exited);
    assert!(screen.contains("[exit 0]"), "{screen}");
    assert!(
        nl2sh_tests::alive(server.pid()),
        "the console stopped a service it did not start"
    );
    let before = std::fs::read_to_string(fx.dir.path().join("stty-before")).unwrap();
    let after = tmux_file(&fx, "stty-after");
    assert_eq!(before, after, "the terminal was left changed");
}

/// A console for a configuration with `protocol_start_with_service = true`, once it has
/// started the managed service.
fn console_that_started_the_service(tmux: &Tmux) -> Fixture {
    let fx = Fixture::new(
        "protocol_start_with_service = true\nprotocol_service_port = 0\nweb_port = 0\n",
    );
    open(tmux, &fx, "s");
    tmux.wait_screen("s", "the started service", |s| {
        s.contains("started by this TUI")
    });
    fx
}

/// The console exited 0, the service it started is gone, and the terminal is as before.
fn ended_cleanly(tmux: &Tmux, fx: &Fixture) {
    let screen = tmux.wait_screen("s", "the console's exit", exited);
    assert!(screen.contains("[exit 0]"), "{screen}");
    let (code, _, _) = nl2sh_tests::run_without_terminal(fx, &["service", "status"]);
    assert_eq!(code, Some(3), "the service the console started outlived it");
    assert_eq!(
        std::fs::read_to_string(fx.dir.path().join("stty-before")).unwrap(),
        tmux_file(fx, "stty-after")
    );
}

/// A file the window's shell writes once the console has exited.
fn tmux_file(fx: &Fixture, name: &str) -> String {
    let path = fx.dir.path().join(name);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if !text.is_empty() {
                return text;
            }
        }
        assert!(std::time::Instant::now() < deadline, "{name} not written");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nothing_running_is_one_status_line_and_settings_save_as_config_set_does() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new("protocol_service_port = 8765\n");
    open(&tmux, &fx, "s");
    let screen = tmux.wait_screen("s", "the stopped status", |s| s.contains("stopped"));
    // One status line: no URL, no client configuration.
    assert!(!screen.contains("http://"), "{screen}");
    assert!(!screen.contains("mcp_servers"), "{screen}");
    // The port: the second setting. 70000 is refused before anything is saved.
    tmux.send_keys("s", &["j", "Enter"]);
    tmux.wait_screen("s", "the port entry", |s| s.contains("8765"));
    tmux.send_keys("s", &["BSpace"; 6]);
    tmux.type_text("s", "70000");
    tmux.send_keys("s", &["Enter"]);
    tmux.wait_screen("s", "the refusal", |s| s.contains("65535"));
    assert!(std::fs::read_to_string(fx.config())
        .unwrap()
        .contains("protocol_service_port = 8765"));
    tmux.send_keys("s", &["BSpace"; 6]);
    tmux.type_text("s", "9123");
    tmux.send_keys("s", &["Enter"]);
    tmux.wait_screen("s", "the saved message", |s| s.contains("Saved"));
    let text = std::fs::read_to_string(fx.config()).unwrap();
    assert!(text.contains("protocol_service_port = 9123"), "{text}");
    // Ask, without a model: what to add, and no typing.
    tmux.send_keys("s", &["4"]);
    let screen = tmux.wait_screen("s", "what to add", |s| s.contains("[model]"));
    assert!(screen.contains("api_key_env"), "{screen}");
    tmux.send_keys("s", &["i"]);
    tmux.type_text("s", "hello");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!tmux.screen("s").contains("hello"), "typed without a model");
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the console's exit", exited);
}

#[test]
fn requests_are_approved_and_rejected_with_keys_and_shown_escaped() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    open(&tmux, &fx, "s");
    tmux.wait_screen("s", "the console", |s| s.contains("MCP / A2A"));
    tmux.send_keys("s", &["2"]);
    tmux.wait_screen("s", "the approvals page", |s| s.contains("No requests"));

    // Approve: `a`, then confirm. The command runs.
    let marker = fx.dir.path().join("tui-marker");
    let call = server.invoke_async(
        "shell.exec",
        json!({ "command": format!("touch {}", marker.display()) }),
    );
    wait_pending(&fx, 1);
    tmux.wait_screen("s", "the request", |s| s.contains("tui-marker"));
    tmux.send_keys("s", &["a"]);
    tmux.send_keys("s", &["y"]);
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert!(marker.exists());

    // A spoofed action (a carriage return and an erase-line that would paint another
    // command over it, and a right-to-left override): shown with its controls visible,
    // then rejected.
    let spoofed = fx.dir.path().join("spoof");
    let command = format!(
        "touch {} # \r\u{1b}[2Kaction: ls -l \u{202e}",
        spoofed.display()
    );
    let call = server.invoke_async("shell.exec", json!({ "command": command }));
    wait_pending(&fx, 1);
    let screen = tmux.wait_screen("s", "the spoofed request", |s| s.contains("\\x1b[2K"));
    assert!(screen.contains("\\r"), "{screen}");
    assert!(screen.contains("\\u{202e}"), "{screen}");
    assert!(
        !screen
            .lines()
            .any(|l| l.trim_start().starts_with("action: ls")),
        "{screen}"
    );
    tmux.send_keys("s", &["r"]);
    tmux.send_keys("s", &["y"]);
    let r = call.join().unwrap();
    assert!(r.is_error, "a rejected command answered as run: {r:?}");
    assert!(!spoofed.exists());

    // A dangerous one: a wrong phrase is refused, the request stays.
    let victim = fx.dir.path().join("victim");
    std::fs::create_dir_all(victim.join("sub")).unwrap();
    let call = server.invoke_async(
        "shell.exec",
        json!({ "command": format!("rm -rf {}", victim.display()) }),
    );
    let p = wait_pending(&fx, 1).remove(0);
    let id = p["id"].as_str().unwrap().to_string();
    tmux.wait_screen("s", "the dangerous request", |s| s.contains(&id));
    tmux.send_keys("s", &["a"]);
    tmux.wait_screen("s", "the phrase question", |s| {
        s.contains("approve dangerous")
    });
    tmux.type_text("s", "approve dangerous nope");
    tmux.send_keys("s", &["Enter"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(pending_approvals(&fx).len(), 1, "a wrong phrase decided it");
    assert!(victim.exists());
    tmux.send_keys("s", &["Escape"]);
    tmux.send_keys("s", &["r"]);
    tmux.send_keys("s", &["y"]);
    let r = call.join().unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(victim.exists(), "a rejected command ran");
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the console's exit", exited);
}

/// A 40-line write at 60x20: the question shows its start, `y` is refused (nothing is
/// decided) until PgDn has shown its last line, then approves it; who is asking comes
/// first, and the page says so after the decision.
#[test]
fn a_long_write_is_approved_only_once_its_end_was_on_the_screen() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let line = Tmux::nl2sh_line(&fx, &[]) + "; echo \"[exit $?]\"; sleep 600";
    tmux.open("s", 60, 20, &line);
    tmux.wait_screen("s", "the console", |s| s.contains("MCP / A2A"));
    tmux.send_keys("s", &["2"]);
    tmux.wait_screen("s", "the approvals page", |s| s.contains("No requests"));
    let target = fx.dir.path().join("long-write");
    let content: String =
        (1..40).map(|i| format!("line {i}\n")).collect::<String>() + "the last line\n";
    let call = server.invoke_async(
        "fs.write",
        json!({ "path": target.display().to_string(), "content": content }),
    );
    wait_pending(&fx, 1);
    let screen = tmux.wait_screen("s", "the request", |s| s.contains("long-write"));
    assert!(screen.contains("over MCP (HTTP)"), "{screen}");
    tmux.send_keys("s", &["a"]);
    let screen = tmux.wait_screen("s", "the question", |s| s.contains("more below"));
    assert!(!screen.contains("the last line"), "{screen}");
    tmux.send_keys("s", &["y"]);
    tmux.wait_screen("s", "the refusal", |s| {
        s.contains("Not approved: read to the end first")
    });
    assert_eq!(
        pending_approvals(&fx).len(),
        1,
        "y approved an unread request"
    );
    assert!(!target.exists());
    for _ in 0..8 {
        tmux.send_keys("s", &["PageDown"]);
    }
    tmux.wait_screen("s", "the end of the content", |s| {
        s.contains("the last line")
    });
    tmux.send_keys("s", &["y"]);
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), content);
    tmux.wait_screen("s", "the feedback", |s| s.contains("Approved "));
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the console's exit", exited);
}

/// A flood over HTTP fills its share; the page says who holds the queue, and R rejects
/// all of that origin at once.
#[test]
fn r_rejects_a_whole_origin_in_the_console() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    open(&tmux, &fx, "s");
    tmux.wait_screen("s", "the console", |s| s.contains("MCP / A2A"));
    tmux.send_keys("s", &["2"]);
    tmux.wait_screen("s", "the approvals page", |s| s.contains("No requests"));
    let share = nl2sh_proto::limits::MAX_PENDING_APPROVALS_PER_CALLER;
    let marker = |i: usize| fx.dir.path().join(format!("flood-{i}"));
    let calls: Vec<_> = (0..share)
        .map(|i| {
            server.invoke_async(
                "shell.exec",
                json!({ "command": format!("touch {}", marker(i).display()) }),
            )
        })
        .collect();
    wait_pending(&fx, share);
    tmux.wait_screen("s", "the per-origin count", |s| {
        s.contains("3 of 8 pending: mcp_http 3")
    });
    tmux.send_keys("s", &["R"]);
    tmux.wait_screen("s", "the question", |s| {
        s.contains("Reject every request from mcp_http?")
    });
    tmux.send_keys("s", &["y"]);
    tmux.wait_screen("s", "the count rejected", |s| {
        s.contains("Rejected 3 requests from mcp_http.")
    });
    for call in calls {
        let r = call.join().unwrap();
        assert!(r.is_error, "a rejected command answered as run: {r:?}");
    }
    assert!((0..share).all(|i| !marker(i).exists()));
    assert!(pending_approvals(&fx).is_empty());
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the console's exit", exited);
}

#[test]
fn the_console_starts_the_service_when_configured_and_stops_only_that() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = console_that_started_the_service(&tmux);
    let (code, _, _) = nl2sh_tests::run_without_terminal(&fx, &["service", "status"]);
    assert_eq!(code, Some(0));
    // Quitting asks first, then stops what it started.
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the quit question", |s| s.contains("y/Enter"));
    tmux.send_keys("s", &["y"]);
    ended_cleanly(&tmux, &fx);
}

/// The managed service's pid, from `service status --json`.
fn service_pid(fx: &Fixture) -> Option<u64> {
    let (_, out, _) = nl2sh_tests::run_without_terminal(fx, &["service", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out).ok()?;
    status["connections"]
        .as_array()?
        .iter()
        .find_map(|c| c["pid"].as_u64())
        .or_else(|| status["pid"].as_u64())
}

/// The issue's case: the console starts the service, `service restart` runs from another
/// shell while the quit question is open, `y`: the console stops nothing (the process now
/// running is not the one it started, by pid and start time) and says so; the restarted
/// service keeps running. Then S starts a stopped service from the console, and `l`
/// leaves it running.
#[test]
fn the_console_stops_only_the_service_it_started_and_can_leave_it_running() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = console_that_started_the_service(&tmux);
    let first = service_pid(&fx).expect("the started service's pid");
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the quit question", |s| {
        s.contains("l: leave it running and quit")
    });
    let (code, out, err) = nl2sh_tests::run_without_terminal(&fx, &["service", "restart"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let second = service_pid(&fx).expect("the restarted service's pid");
    assert_ne!(first, second);
    tmux.send_keys("s", &["y"]);
    let screen = tmux.wait_screen("s", "the console's exit", exited);
    assert!(screen.contains("[exit 0]"), "{screen}");
    assert!(
        screen.contains(&format!("Left the service running (pid {second})")),
        "{screen}"
    );
    assert_eq!(
        service_pid(&fx),
        Some(second),
        "the restarted service was stopped"
    );

    // Stopped from another shell: S starts it again from the console (at 60x20), and
    // quitting can leave it running.
    let (code, _, _) = nl2sh_tests::run_without_terminal(&fx, &["service", "stop"]);
    assert_eq!(code, Some(0));
    let line = Tmux::nl2sh_line(&fx, &[]) + "; echo \"[exit $?]\"; sleep 600";
    tmux.open("t", 60, 20, &line);
    tmux.wait_screen("t", "the started service", |s| {
        s.contains("started by this TUI")
    });
    let (code, _, _) = nl2sh_tests::run_without_terminal(&fx, &["service", "stop"]);
    assert_eq!(code, Some(0));
    let screen = tmux.wait_screen("t", "the stopped page", |s| s.contains("S: start"));
    assert!(
        screen.contains("The service this TUI started has stopped"),
        "{screen}"
    );
    assert!(screen.contains("q: quit"), "{screen}");
    tmux.send_keys("t", &["S"]);
    tmux.wait_screen("t", "the started service", |s| {
        s.contains("started by this TUI")
    });
    let third = service_pid(&fx).expect("the service S started");
    tmux.send_keys("t", &["q"]);
    tmux.wait_screen("t", "the quit question", |s| {
        s.contains("l: leave it running and quit")
    });
    tmux.send_keys("t", &["l"]);
    let screen = tmux.wait_screen("t", "the console's exit", exited);
    assert!(
        screen.contains("Left the service this TUI started running."),
        "{screen}"
    );
    assert_eq!(service_pid(&fx), Some(third), "l stopped the service");
    let (code, out, err) = nl2sh_tests::run_without_terminal(&fx, &["service", "stop"]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// A port saved from another shell while the console's service runs: the console says
/// the running service differs from the saved file, R restarts it (the service stays this
/// console's, so quitting still offers to stop it), and the difference is gone. While
/// `protocol_auto_approve` is on, a banner says so.
#[test]
fn restart_now_applies_the_saved_port_and_keeps_the_service_this_consoles() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = Fixture::new(
        "protocol_start_with_service = true\nprotocol_service_port = 0\nweb_port = 0\n\
         protocol_auto_approve = true\n",
    );
    open(&tmux, &fx, "s");
    let screen = tmux.wait_screen("s", "the started service", |s| {
        s.contains("started by this TUI")
    });
    assert!(
        screen.contains("! Every request is approved automatically (protocol_auto_approve)"),
        "{screen}"
    );
    let first = service_pid(&fx).expect("the started service's pid");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let (code, out, err) =
        nl2sh_tests::run_without_terminal(&fx, &["config", "set", "protocol_service_port", &port]);
    assert_eq!(code, Some(0), "{out}{err}");
    let screen = tmux.wait_screen("s", "the difference", |s| {
        s.contains("Running differs from saved")
    });
    assert!(screen.contains(&format!("saved {port}")), "{screen}");
    tmux.send_keys("s", &["R"]);
    tmux.wait_screen("s", "the restart question", |s| {
        s.contains("Restart the service now")
    });
    tmux.send_keys("s", &["y"]);
    let screen = tmux.wait_screen("s", "the restarted service", |s| {
        s.contains("Restarted: the service runs the saved settings.")
    });
    assert!(!screen.contains("Running differs"), "{screen}");
    assert!(screen.contains(&format!(":{port}/mcp")), "{screen}");
    assert!(screen.contains("started by this TUI"), "{screen}");
    assert_ne!(service_pid(&fx), Some(first));
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the quit question", |s| {
        s.contains("l: leave it running and quit")
    });
    tmux.send_keys("s", &["y"]);
    ended_cleanly(&tmux, &fx);
}

#[test]
fn sigterm_ends_the_console_like_ctrl_c_and_restores_the_terminal() {
    let Some(tmux) = Tmux::start() else { return };
    let fx = console_that_started_the_service(&tmux);
    // The console: the process whose whole command line is `nl2sh --config <path>`.
    let config = fx.config().display().to_string();
    let console = nl2sh_tests::processes_with(&config)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
                args.len() == 3 && args[1] == b"--config"
            })
        })
        .expect("the console's process");
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(console, libc::SIGTERM) };
    ended_cleanly(&tmux, &fx);
}

/// The environment variable the Ask configuration names for the model key.
const KEY_ENV: &str = "NL2SH_TUI_E2E_MODEL_KEY";

/// Ask against the scripted model, as the owner uses it: a plain answer; a mutation the
/// Agent wants, confirmed inline and then run; one refused inline; the conversation's
/// history carried from goal to goal; Esc cancelling a running command (its process
/// killed); and the protocol's front door never seeing any of it.
#[test]
fn ask_answers_confirms_inline_and_esc_cancels() {
    use nl2sh_tests::scripted_model::{Reply, ScriptedModel, ToolCall};
    let Some(tmux) = Tmux::start() else { return };
    let model = ScriptedModel::start([]);
    let fx = Fixture::new(&format!(
        "approval_timeout_secs = 60\n\
         [model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key_env = \"{KEY_ENV}\"\n\
         max_steps = 4\n",
        model.base_url()
    ));
    let server = Server::start(&fx, &[], &[(KEY_ENV, "sk-tui-e2e-0123456789")]);
    open(&tmux, &fx, "s");
    tmux.wait_screen("s", "the console", |s| s.contains("MCP / A2A"));
    tmux.send_keys("s", &["4"]);
    tmux.wait_screen("s", "the Ask page", |s| s.contains("A new conversation"));
    let ask = |goal: &str| {
        tmux.send_keys("s", &["i"]);
        tmux.type_text("s", goal);
        tmux.send_keys("s", &["Enter"]);
    };

    // A plain answer.
    model.push(Reply::answer("Plain answer: nothing to change."));
    ask("what is on this device");
    tmux.wait_screen("s", "the answer", |s| s.contains("Plain answer"));

    // A mutation, confirmed inline: the command runs and the answer follows.
    let marker = fx.dir.path().join("ask-marker");
    model.push(Reply::tool_calls([ToolCall::new(
        "call_1",
        "shell__exec",
        json!({ "command": format!("touch {}", marker.display()) }),
    )]));
    model.push(Reply::answer("Made the marker."));
    ask("make the marker");
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(p["origin"], "owner_tui", "{p}");
    let screen = tmux.wait_screen("s", "the inline request", |s| s.contains("ask-marker"));
    assert!(screen.contains("a: approve"), "{screen}");
    tmux.send_keys("s", &["a"]);
    tmux.send_keys("s", &["y"]);
    tmux.wait_screen("s", "the answer", |s| s.contains("Made the marker"));
    assert!(marker.exists(), "the confirmed command did not run");
    // The second goal carried the first: the Agent's history is the conversation's.
    let sent = model.requests();
    let second_goal = sent
        .iter()
        .find(|r| {
            r.messages()
                .iter()
                .any(|m| m.to_string().contains("make the marker"))
        })
        .expect("the model was asked the second goal");
    assert!(
        second_goal
            .messages()
            .iter()
            .any(|m| m.to_string().contains("Plain answer")),
        "the conversation's history was not carried"
    );

    // A mutation refused inline: nothing runs.
    let refused = fx.dir.path().join("ask-refused");
    model.push(Reply::tool_calls([ToolCall::new(
        "call_2",
        "shell__exec",
        json!({ "command": format!("touch {}", refused.display()) }),
    )]));
    model.push(Reply::answer("The owner said no."));
    ask("make another");
    wait_pending(&fx, 1);
    tmux.wait_screen("s", "the inline request", |s| s.contains("ask-refused"));
    tmux.send_keys("s", &["r"]);
    tmux.send_keys("s", &["y"]);
    tmux.wait_screen("s", "the answer", |s| s.contains("The owner said no"));
    assert!(!refused.exists(), "a refused command ran");

    // Esc cancels a running command: its process is killed and the task ends CANCELED.
    let tag = "ask-e2e-sleeper";
    model.push(Reply::tool_calls([ToolCall::new(
        "call_3",
        "shell__exec",
        json!({ "command": format!("sleep 3600 # {tag}") }),
    )]));
    ask("wait a long time");
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|c| c.starts_with(b"sleep\0") && String::from_utf8_lossy(&c).contains("3600"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !sleeping() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.send_keys("s", &["Escape"]);
    tmux.wait_screen("s", "the cancelled task", |s| s.contains("canceled"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sleeping() {
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled command still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // None of it is the protocol's: A2A lists no task.
    let listed = server.a2a("ListTasks", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
    tmux.send_keys("s", &["q"]);
    tmux.wait_screen("s", "the console's exit", exited);
}

/// An attacker's tool command that opens the console in a terminal of its own (a tmux it
/// starts) and types the keys that would approve a waiting request: the console reaches
/// approvald only over approvals.sock, whose peer check refuses every process of the
/// service's tree, so nothing is approved and the screen says why.
#[test]
fn a_tool_command_driving_the_console_approves_nothing() {
    let Some(_tmux) = Tmux::start() else { return };
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let victim = fx.dir.path().join("victim");
    let waiting = server.invoke_async(
        "shell.exec",
        json!({ "command": format!("touch {}", victim.display()) }),
    );
    let target = wait_pending(&fx, 1)[0]["id"].as_str().unwrap().to_string();

    let sock = fx.dir.path().join("tool-tmux.sock");
    let screen_file = fx.dir.path().join("tool-screen.txt");
    let t = format!("tmux -S {}", sq(&sock.display().to_string()));
    let script = format!(
        "export TERM=xterm; {t} new-session -d -x 80 -y 24 {console}; sleep 2; \
         {t} send-keys 2; sleep 2; {t} send-keys a; sleep 1; {t} send-keys y; sleep 2; \
         {t} capture-pane -p > {screen}; {t} kill-server",
        console = sq(&Tmux::nl2sh_line(&fx, &[])),
        screen = sq(&screen_file.display().to_string()),
    );
    let attack = server.invoke_async(
        "shell.exec",
        json!({ "command": script, "unconfined": true, "timeout": 60 }),
    );
    // The owner lets the tool command itself run (with nl2sh's rights, outside the
    // sandbox): the worst case.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let attack_id = loop {
        let found = pending_approvals(&fx).into_iter().find(|p| {
            p["action"]
                .as_str()
                .is_some_and(|a| a.contains("tool-tmux"))
        });
        if let Some(p) = found {
            break p["id"].as_str().unwrap().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tool command never asked"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (code, out, err) = nl2sh_tests::run_on_terminal(&fx, &["protocol", "approve", &attack_id]);
    assert_eq!(code, Some(0), "{out}{err}");
    let r = attack.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    // The console ended with its terminal (the tool killed its tmux), rather than running
    // on (and spinning) on a terminal that is gone.
    let console = format!("--config {}", fx.config().display());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<u32> = consoles_running(&console);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the console outlived its terminal: pids {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let screen = std::fs::read_to_string(&screen_file).expect("the tool's screen capture");
    assert!(screen.contains("refused this process"), "{screen}");
    let still: Vec<_> = pending_approvals(&fx)
        .into_iter()
        .filter_map(|p| p["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        still,
        std::slice::from_ref(&target),
        "the console run by a tool decided something"
    );
    assert!(!victim.exists());
    let (code, _, _) = nl2sh_tests::run_without_terminal(&fx, &["protocol", "reject", &target]);
    assert_eq!(code, Some(0));
    assert!(waiting.join().unwrap().is_error);
}

/// Pids of terminal consoles (`nl2sh --config FILE`, no subcommand) whose command line ends
/// with `config_args`.
fn consoles_running(config_args: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .is_ok_and(|c| c.trim_end().ends_with(config_args))
        })
        .collect()
}
