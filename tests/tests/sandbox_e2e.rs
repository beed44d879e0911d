//! The read-only sandbox and the approval boundary end to end, through the real tree:
//! every bypass an attacker holding the token found either waits for approval or has no
//! effect; a tool command cannot approve its own request; an approved write cannot be
//! redirected; the everyday read-only commands still answer without a prompt.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use nl2sh_tests::{
    is_root, nl2sh_bin, pending_approvals, run_on_terminal, run_without_terminal, wait_gone,
    wait_pending, Fixture, Server, StdioClient,
};

const SECRET: &str = "bypass-test-secret-0123456789abcdef0123";

fn skip_unless_root() -> bool {
    if !is_root() {
        nl2sh_proto::test_skip::skip("the sandbox needs root");
        return true;
    }
    false
}

#[test]
fn inspect_says_which_sandbox_parts_are_active() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let r = server.call_tool("nl2sh_inspect", json!({}));
    let sandbox = &r.structured["sandbox"];
    assert_eq!(sandbox["active"], true, "{sandbox}");
    assert_eq!(sandbox["pid_namespace"], "on", "{sandbox}");
    assert_eq!(sandbox["seccomp"], "on", "{sandbox}");
    assert!(
        sandbox["mount_namespace"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{sandbox}"
    );
    assert!(sandbox["landlock"].is_string(), "{sandbox}");
    // The shared ceiling of all calls: sized from this machine (half its memory), and
    // whether the kernel enforces it.
    let ceiling = &sandbox["ceiling"];
    let half = (nl2sh_proto::config::device_memory_bytes().unwrap() / 2) >> 20;
    assert_eq!(ceiling["memory_mib"], half.clamp(256, 16384), "{ceiling}");
    assert!(
        ceiling["processes"].as_u64().is_some_and(|p| p >= 256),
        "{ceiling}"
    );
    assert!(ceiling["how"].is_string(), "{ceiling}");
    // Without calls' cgroups the kernel cannot enforce it, and inspect does not pretend.
    if !sandbox["cgroup"].as_str().unwrap().starts_with("cgroup") {
        assert_eq!(ceiling["enforced"], false, "{sandbox}");
    }
    if ceiling["enforced"] == false {
        assert!(ceiling["how"]
            .as_str()
            .unwrap()
            .starts_with("not by the kernel"));
    }
    // A command holds its three streams and nothing of the tree's (channels, listener).
    let r = server.invoke("shell.exec", json!({"command": "ls /proc/self/fd"}));
    let fds: Vec<String> = r.output()["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    // 0-2, and the directory `ls` itself opened.
    assert!(
        fds.len() <= 4 && fds.starts_with(&["0".into(), "1".into(), "2".into()]),
        "{fds:?}"
    );
    // Startup says so too (stderr, from the executor).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.stderr().contains("read-only sandbox active") {
        assert!(Instant::now() < deadline, "{}", server.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn everyday_read_only_commands_answer_without_a_prompt() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 1\n");
    let dir = fx.dir.path();
    std::fs::write(dir.join("hello.txt"), "hello, sandbox\nsecond line\n").unwrap();
    let path = nl2sh_tests::path_with(&nl2sh_tests::android_standins());
    let server = Server::start(&fx, &[], &[("PATH", &path)]);
    let d = dir.display();
    let uname = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .unwrap();
    let release = String::from_utf8_lossy(&uname.stdout).trim().to_string();
    for (command, expect) in [
        (format!("ls {d}"), "hello.txt".to_string()),
        (
            format!("cat {d}/hello.txt"),
            "hello, sandbox\nsecond line\n".into(),
        ),
        ("ps -e".into(), "nl2sh".into()),
        ("ps aux".into(), "nl2sh".into()),
        ("df -h /".into(), "/".into()),
        ("free -m".into(), "Mem:".into()),
        ("uname -r".into(), release),
        ("ip addr".into(), "127.0.0.1".into()),
        ("getprop ro.product.model".into(), "Pixel 7".into()),
        (
            format!("find {d} -maxdepth 1 -name hello.txt"),
            format!("{d}/hello.txt"),
        ),
        ("ls /".into(), "usr".into()),
        // `[` is also a program in /usr/bin: its name once sent the assessment round
        // without end, overflowing the executor's stack.
        ("[ 1 -lt 40 ] && echo smaller".into(), "smaller".into()),
        ("uname -a".into(), "Linux".into()),
        ("df -h".into(), "Filesystem".into()),
        ("find /usr -maxdepth 1 -name bin".into(), "/usr/bin".into()),
        (
            format!("grep -n second {d}/hello.txt"),
            "2:second line".into(),
        ),
        ("cat /proc/cpuinfo | head -1".into(), ":".into()),
    ] {
        let r = server.invoke("shell.exec", json!({ "command": command }));
        let out = r.output();
        assert!(!r.is_error, "{command}: {out}");
        assert_eq!(out["sandboxed"], true, "{command}: {out}");
        assert!(
            out["stdout"].as_str().unwrap().contains(&expect),
            "{command}: expected {expect:?} in {out}"
        );
    }
    // grep -r over /etc reads everything anyone may read, and says which files it could
    // not (exit status 2), as it would for any unprivileged user.
    let r = server.invoke("shell.exec", json!({ "command": "grep -rs '^root:' /etc" }));
    let out = r.output();
    assert_eq!(out["sandboxed"], true, "{out}");
    assert!(
        out["stdout"]
            .as_str()
            .unwrap()
            .contains("/etc/passwd:root:"),
        "{out}"
    );
    let r = server.invoke("fs.read", json!({"path": dir.join("hello.txt")}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["content"], "hello, sandbox\nsecond line\n");
    let r = server.invoke("fs.list", json!({"path": dir}));
    assert!(!r.is_error, "{r:?}");
    assert!(pending_approvals(&fx).is_empty());
}

#[test]
fn a_failed_sandboxed_command_says_so_and_unconfined_asks() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 1\n");
    let server = Server::start(&fx, &[], &[]);
    // Assessed read-only, but it writes: it runs in the sandbox and fails there.
    let marker = fx.dir.path().join("sandboxed-marker");
    let r = server.invoke(
        "shell.exec",
        json!({"command": format!("cat /etc/hostname > /dev/null; python3 -c 'open(\"{}\", \"w\")'", marker.display())}),
    );
    let out = r.output();
    if out["sandboxed"] == true {
        assert!(r.is_error, "{out}");
        assert!(
            out["stderr"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "{out}"
        );
        assert!(
            out["note"].as_str().unwrap().contains("unconfined"),
            "{out}"
        );
    } else {
        assert!(out["error"].as_str().unwrap().contains("not run"), "{out}");
    }
    assert!(!marker.exists());
    // Asking to run a read-only command outside the sandbox waits for a person.
    let r = server.invoke(
        "shell.exec",
        json!({"command": "id -u", "unconfined": true}),
    );
    let err = r.output()["error"].as_str().unwrap_or_default().to_string();
    assert!(r.is_error && err.contains("expired"), "{r:?}");
}

#[test]
fn touching_nl2sh_own_files_needs_the_dangerous_phrase() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let config = fx.config();
    let calls = [
        server.invoke_async("shell.exec",
            json!({"command": format!("echo 'protocol_auto_approve = true' >> {}", config.display())}),
        ),
        server.invoke_async("fs.write",
            json!({"path": config, "content": "protocol_auto_approve = true\n", "mode": "append"}),
        ),
        server.invoke_async("fs.read",
            json!({"path": fx.state_dir().join("protocol/connection.json")}),
        ),
    ];
    let pending = wait_pending(&fx, calls.len());
    for p in &pending {
        assert!(
            matches!(p["risk"].as_str(), Some("dangerous" | "critical")),
            "{p}"
        );
        assert!(p["phrase"].is_string(), "{p}");
        // A person approving without the phrase changes nothing.
        let (code, _, err) =
            run_on_terminal(&fx, &["protocol", "approve", p["id"].as_str().unwrap()]);
        assert_eq!(code, Some(6), "{err}");
        run_without_terminal(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    }
    for c in calls {
        assert!(c.join().unwrap().is_error);
    }
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "approval_timeout_secs = 60\n"
    );
}

/// The service started from the configuration's directory (as a boot script or a person
/// does): its `/proc/<pid>/cwd` is that directory. A grant for `sed` up to `high` once let
/// `sed -i … /proc/<pid>/cwd/config.toml` turn on `protocol_auto_approve` unasked.
#[test]
fn nl2sh_own_files_through_proc_links_need_the_dangerous_phrase() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new(
        "approval_timeout_secs = 60\n\
        [[approval_grants]]\n\
        tool = \"shell.exec\"\n\
        command = [\"sed\", \"**\"]\n\
        max_risk = \"high\"\n",
    );
    let config = fx.config();
    let before = std::fs::read_to_string(&config).unwrap();
    let dir = config.parent().unwrap().to_path_buf();
    let server = Server::start_from(&fx, &dir);
    let pid = server.pid();
    // Three: one caller's share of the pending approvals (the `..` spelling is in the
    // executor's alias test, every_alias_of_an_own_file_is_judged_as_the_file).
    let calls = [
        format!("sed -i 1iprotocol_auto_approve=true /proc/{pid}/cwd/config.toml"),
        format!("echo protocol_auto_approve = true >> /proc/{pid}/cwd/config.toml"),
        "sed -i 1iprotocol_auto_approve=true /proc/[0-9]*/cwd/config.toml".to_string(),
    ]
    .map(|command| server.invoke_async("shell.exec", json!({ "command": command })));
    let pending = wait_pending(&fx, calls.len());
    for p in &pending {
        assert_eq!(p["risk"], "dangerous", "{p}");
        assert!(p["phrase"].is_string(), "{p}");
        run_without_terminal(&fx, &["protocol", "reject", p["id"].as_str().unwrap()]);
    }
    assert!(
        pending
            .iter()
            .any(|p| p.to_string().contains("nl2sh's own configuration")),
        "{pending:?}"
    );
    for c in calls {
        assert!(c.join().unwrap().is_error);
    }
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
}

/// A command line whose paths lead into a FUSE mount whose daemon hangs (`/sdcard` on a
/// phone whose media daemon stopped answering): its assessment resolves those paths and
/// waits, but on a reader, so every other call is still answered.
#[test]
fn a_hung_mount_in_a_command_line_does_not_stop_other_calls() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let Some(hung) = nl2sh_tests::HungFuse::mount(&fx.dir.path().join("hung")) else {
        nl2sh_proto::test_skip::skip("no FUSE here");
        return;
    };
    let server = Server::start(&fx, &[], &[]);
    let waiting = server.invoke_async(
        "shell.exec",
        json!({"command": format!("cat {}/x", hung.dir.display())}),
    );
    for n in 0..3 {
        let other = server.invoke_async("fs.stat", json!({ "path": "/" }));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !other.is_finished() {
            assert!(
                Instant::now() < deadline,
                "call {n} behind the hung assessment was not answered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let r = other.join().unwrap();
        assert!(!r.is_error, "{r:?}");
    }
    assert!(!waiting.is_finished(), "the hung look-up did not wait");
    drop(hung);
    // The look-up fails once the mount is gone; the call then answers.
    let r = waiting.join().unwrap();
    assert!(r.output().to_string().len() > 2, "{r:?}");
}

#[test]
fn a_tool_command_cannot_approve_its_own_request() {
    if skip_unless_root() {
        return;
    }
    // The configuration sits where XDG_CONFIG_HOME finds it, so the attacking command
    // never names it (naming it would make the command dangerous, which no grant covers).
    let grant = "approval_timeout_secs = 60\n\
        [[approval_grants]]\n\
        tool = \"shell.exec\"\n\
        command = [\"env\", \"**\"]\n\
        max_risk = \"high\"\n";
    let fx = Fixture::with_config_at("nl2sh/config.toml", grant);
    let dir = fx.dir.path().to_path_buf();
    let server = Server::start(&fx, &[], &[]);
    let victim = dir.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let call = server.invoke_async(
        "shell.exec",
        json!({"command": format!("rm -rf {}", victim.display())}),
    );
    let pending = wait_pending(&fx, 1);
    let id = pending[0]["id"].as_str().unwrap().to_string();
    let phrase = pending[0]["phrase"].as_str().unwrap().to_string();
    // A copy of nl2sh under another name, run under `script` for the terminal it wants.
    let approver = dir.join("approver");
    std::fs::copy(nl2sh_bin(), &approver).unwrap();
    let attack = format!(
        "env XDG_CONFIG_HOME={} script -qec \"{} protocol approve {id} --phrase '{phrase}'\" /dev/null",
        dir.display(),
        approver.display()
    );
    let attacker = server.invoke_async("shell.exec", json!({ "command": attack }));
    // The grant lets the command run (as the service's user), or, if the assessment asks,
    // a person approves it: either way the command itself runs, outside the sandbox.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !attacker.is_finished() {
        let list = pending_approvals(&fx);
        if let Some(p) = list.iter().find(|p| p["id"] != id.as_str()) {
            let mut args = vec!["protocol", "approve", p["id"].as_str().unwrap()];
            if let Some(phrase) = p["phrase"].as_str() {
                args.extend(["--phrase", phrase]);
            }
            let (code, _, err) = run_on_terminal(&fx, &args);
            assert_eq!(code, Some(0), "{err}");
        }
        assert!(Instant::now() < deadline, "the attacking command never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = attacker.join().unwrap();
    let out = r.output();
    assert_eq!(out["sandboxed"], false, "{out}");
    let said = format!("{}{}", out["stdout"], out["stderr"]);
    assert!(said.contains("refused this process"), "{out}");
    // The request is still pending, for a person.
    let still: Vec<Value> = pending_approvals(&fx);
    assert!(still.iter().any(|p| p["id"] == id.as_str()), "{still:?}");
    run_without_terminal(&fx, &["protocol", "reject", &id]);
    assert!(call.join().unwrap().is_error);
    assert!(victim.exists());
    let stderr = server.stderr();
    assert!(stderr.contains("descends from"), "{stderr}");
}

#[test]
fn an_approved_write_is_not_redirected_by_a_swapped_directory() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 60\n");
    let server = Server::start(&fx, &[], &[]);
    let dir = fx.dir.path();
    let target = dir.join("target");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    let file = target.join("f");
    let call = server.invoke_async("fs.write", json!({"path": file, "content": "x"}));
    let p = wait_pending(&fx, 1).remove(0);
    assert!(p["action"]
        .as_str()
        .unwrap()
        .contains(&file.display().to_string()));
    // After the owner saw the action, the directory becomes a symlink to elsewhere.
    std::fs::rename(&target, dir.join("target.orig")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &target).unwrap();
    let mut args = vec!["protocol", "approve", p["id"].as_str().unwrap()];
    if let Some(phrase) = p["phrase"].as_str() {
        args.extend(["--phrase", phrase]);
    }
    let (code, _, err) = run_on_terminal(&fx, &args);
    assert_eq!(code, Some(0), "{err}");
    let r = call.join().unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(
        r.output()["error"]
            .as_str()
            .unwrap()
            .contains("nothing was written"),
        "{r:?}"
    );
    assert!(!elsewhere.join("f").exists());
    assert!(!dir.join("target.orig/f").exists());

    // A directory replaced by another real directory is refused too.
    std::fs::remove_file(&target).unwrap();
    std::fs::create_dir(&target).unwrap();
    let call = server.invoke_async("fs.write", json!({"path": file, "content": "y"}));
    let p = wait_pending(&fx, 1).remove(0);
    std::fs::rename(&target, dir.join("target.second")).unwrap();
    std::fs::create_dir(&target).unwrap();
    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", p["id"].as_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(call.join().unwrap().is_error);
    assert!(!file.exists());
    assert!(!dir.join("target.second/f").exists());
}

/// One bypass from the issue: the command, and what must not have happened.
struct Row {
    command: String,
    unchanged: Box<dyn Fn() -> Result<(), String>>,
}

fn absent(path: &Path) -> Box<dyn Fn() -> Result<(), String>> {
    let path = path.to_path_buf();
    Box::new(move || match path.exists() {
        false => Ok(()),
        true => Err(format!("{} was created", path.display())),
    })
}

fn holds(path: &Path, content: &str) -> Box<dyn Fn() -> Result<(), String>> {
    let (path, content) = (path.to_path_buf(), content.to_string());
    Box::new(move || match std::fs::read_to_string(&path) {
        Ok(now) if now == content => Ok(()),
        other => Err(format!("{} changed: {other:?}", path.display())),
    })
}

fn executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every example of the issue, over stdio, with the whole tree inside network and UTS
/// namespaces this test made (so `ip link` aims at the test's own loopback).
#[test]
fn every_bypass_found_waits_for_approval_or_has_no_effect() {
    if skip_unless_root() {
        return;
    }
    let config = format!("approval_timeout_secs = 1\nprotocol_token = \"{SECRET}\"\n");
    let fx = Fixture::new(&config);
    let d = fx.dir.path().to_path_buf();
    let p = |name: &str| d.join(name);
    let q = |name: &str| d.join(name).display().to_string();
    std::fs::write(p("file"), "a\n").unwrap();
    let status = std::process::Command::new("tar")
        .args(["-cf", &q("a.tar"), "-C", &q(""), "file"])
        .status()
        .unwrap();
    assert!(status.success());
    let big: String = (0..20000)
        .map(|i| format!("touch {} # {i:05}\n", q("mark-sort")))
        .collect();
    std::fs::write(p("big"), big).unwrap();
    executable(
        &p("evil1/ls"),
        &format!("#!/bin/sh\ntouch {}\n", q("mark-for")),
    );
    executable(
        &p("evil2/ls"),
        &format!("#!/bin/sh\ntouch {}\n", q("mark-read")),
    );
    let cfg = fx.config();
    let cfg_text = std::fs::read_to_string(&cfg).unwrap();
    let tag = 3000 + std::process::id() % 1000;

    let secret_kept = |out: &str| !out.contains(SECRET);
    let rows: Vec<Row> = vec![
        Row {
            command: format!("sed --i 's/a/b/' {}", q("file")),
            unchanged: holds(&p("file"), "a\n"),
        },
        Row {
            command: format!("sort --o={} {}", q("sorted"), q("file")),
            unchanged: absent(&p("sorted")),
        },
        Row {
            command: format!(
                "tar -tf {} --checkpoint=1 --checkpoint-action=exec='touch {}'",
                q("a.tar"),
                q("mark-tar")
            ),
            unchanged: absent(&p("mark-tar")),
        },
        Row {
            command: format!(
                "sort --compress-program=sh -S 1K --parallel=1 {} > /dev/null",
                q("big")
            ),
            unchanged: absent(&p("mark-sort")),
        },
        Row {
            command: format!(
                "LESSOPEN='|touch {}; cat %s' less {}",
                q("mark-less"),
                q("file")
            ),
            unchanged: absent(&p("mark-less")),
        },
        Row {
            command: format!("cat <<E\\OF\nEOF\ntouch {}\nE\\OF", q("mark-heredoc")),
            unchanged: absent(&p("mark-heredoc")),
        },
        Row {
            command: format!("alias ls='touch {}'\nls", q("mark-alias")),
            unchanged: absent(&p("mark-alias")),
        },
        Row {
            command: format!("for PATH in {}; do ls; done", q("evil1")),
            unchanged: absent(&p("mark-for")),
        },
        Row {
            command: format!("echo {} | {{ read PATH; ls; }}", q("evil2")),
            unchanged: absent(&p("mark-read")),
        },
        Row {
            command: format!("gzip -S -c {}", q("file")),
            unchanged: Box::new({
                let (file, gz) = (p("file"), p("file-c"));
                move || match (std::fs::read_to_string(&file), gz.exists()) {
                    (Ok(s), false) if s == "a\n" => Ok(()),
                    other => Err(format!("gzip compressed in place: {other:?}")),
                }
            }),
        },
        Row {
            command: format!("truncate -s 0 {}", q("file")),
            unchanged: holds(&p("file"), "a\n"),
        },
        Row {
            command: format!("shred -u {}", q("file")),
            unchanged: holds(&p("file"), "a\n"),
        },
        Row {
            command: format!("install /dev/null {}", q("installed")),
            unchanged: absent(&p("installed")),
        },
        Row {
            command: format!("echo 'protocol_auto_approve = true' >> {}", cfg.display()),
            unchanged: holds(&cfg, &cfg_text),
        },
        Row {
            command: format!("setsid sleep {tag}.5 & echo started"),
            unchanged: Box::new(move || {
                wait_gone(&[format!("{tag}.5")], Duration::from_secs(5))
                    .map_err(|left| format!("background sleep outlived the call: {left:?}"))
            }),
        },
        Row {
            command: "ip link s lo up".into(),
            // Checked below, from inside the same network namespace.
            unchanged: Box::new(|| Ok(())),
        },
    ];
    // Secret reads: the output must not carry the token, whatever ran.
    let secret_reads = [
        format!("f={}; cat \"$f\"", cfg.display()),
        format!("cat {}/config.tom[l]", d.display()),
        format!("cd {} && cat config.toml", d.display()),
        format!("cat /proc/self/root{}", cfg.display()),
        format!("grep -r {} {}", &SECRET[..12], d.display()),
        format!("cat {}/*.toml", d.display()),
    ];

    let mut s = StdioClient::start_in(&fx, &["unshare", "--net", "--uts", "--ipc", "--"]);
    let mut id = 100;
    // At most the stdio client's share of the pending approvals at once.
    for batch in rows.chunks(nl2sh_proto::limits::MAX_PENDING_APPROVALS_PER_CALLER) {
        let first = id;
        for row in batch {
            s.invoke(id, "shell.exec", json!({ "command": row.command }));
            id += 1;
        }
        for (i, row) in batch.iter().enumerate() {
            let r = s.response(first + i as i64);
            let output = r["result"]["structuredContent"]["output"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let out: Value = serde_json::from_str(&output).unwrap_or(Value::Null);
            let waited = out["error"]
                .as_str()
                .is_some_and(|e| e.contains("not run") && e.contains("expired"));
            let sandboxed = out["sandboxed"] == true;
            assert!(
                waited || sandboxed,
                "{:?} neither waited for approval nor ran sandboxed: {output}",
                row.command
            );
            if let Err(e) = (row.unchanged)() {
                panic!("{:?} had an effect: {e}\n{output}", row.command);
            }
        }
    }
    for (i, read) in secret_reads.iter().enumerate() {
        let n = id + i as i64;
        s.invoke(n, "shell.exec", json!({ "command": read }));
        let r = s.response(n);
        let text = r.to_string();
        assert!(secret_kept(&text), "{read:?} read the token: {text}");
    }
    let n = id + secret_reads.len() as i64;
    s.invoke(n, "shell.exec", json!({"command": "ip -o link show lo"}));
    let r = s.response(n);
    let out: Value =
        serde_json::from_str(r["result"]["structuredContent"]["output"].as_str().unwrap()).unwrap();
    assert!(
        out["stdout"].as_str().unwrap().contains("state DOWN"),
        "the loopback of the test's namespace was brought up: {out}"
    );
    let _ = s.child.kill();
    let _ = s.child.wait();
}

#[test]
fn a_killed_executor_leaves_no_command_behind() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("protocol_auto_approve = true\n");
    let mut server = Server::start(&fx, &[], &[]);
    let tag = 5000 + std::process::id() % 1000;
    // An approved command that leaves a daemon behind, and a sandboxed one still running.
    let approved = server.invoke_async("shell.exec",
        json!({"command": format!("setsid sleep {tag}.1 > /dev/null 2>&1 < /dev/null & sleep {tag}.2"),
               "unconfined": true, "timeout": 600}),
    );
    let sandboxed = server.invoke_async(
        "shell.exec",
        json!({"command": format!("sleep {tag}.3"), "timeout": 600}),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while ["1", "2", "3"]
        .iter()
        .any(|n| nl2sh_tests::processes_with(&format!("{tag}.{n}")).is_empty())
    {
        assert!(Instant::now() < deadline, "the commands did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let executor = server.worker("executor");
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(executor, libc::SIGKILL) };
    let tags: Vec<String> = ["1", "2", "3"]
        .iter()
        .map(|n| format!("{tag}.{n}"))
        .collect();
    // Within 2 s of the executor's death, nothing it started is left.
    if let Err(left) = wait_gone(&tags, Duration::from_secs(2)) {
        panic!("commands outlived the killed executor by 2 s: {left:?}");
    }
    // The calls in flight were answered (netd survived the executor and answered them
    // with errors before the workers were restarted), not cut off.
    for call in [approved, sandboxed] {
        let r = call.join().expect("the call got an HTTP answer");
        assert!(r.is_error, "{:?}", r.output());
    }
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn netd_and_sandboxed_commands_never_share_a_uid() {
    if skip_unless_root() {
        return;
    }
    // The secret as a comment: a configured token would not be printed for the harness.
    let fx = Fixture::new(&format!("approval_timeout_secs = 1\n# {SECRET}\n"));
    let server = Server::start(&fx, &[], &[]);
    let netd = server.worker("netd");
    let netd_uid = std::fs::read_to_string(format!("/proc/{netd}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .unwrap()
        .to_string();
    let r = server.invoke("shell.exec", json!({ "command": "id -u" }));
    let uid = r.output()["stdout"].as_str().unwrap().trim().to_string();
    assert_ne!(uid, netd_uid, "a sandboxed command runs as netd's uid");
    let uid: u32 = uid.parse().unwrap();
    assert!(
        (nl2sh_proto::config::DEFAULT_SANDBOX_UID_BASE..).contains(&uid),
        "{uid}"
    );
    // netd's memory, descriptors and its view of the device's mount namespace (where no
    // mask applies) are out of reach: another uid, and its /proc entries are root's.
    for command in [
        format!("ls -l /proc/{netd}/fd/"),
        format!("cat /proc/{netd}/fd/3"),
        format!("cat /proc/{netd}/environ"),
        format!("cat /proc/{netd}/root{}", fx.config().display()),
        format!("head -c 64 /proc/{netd}/mem"),
        format!("kill -STOP {netd}"),
    ] {
        let r = server.invoke("shell.exec", json!({ "command": command }));
        let out = r.output();
        assert!(r.is_error, "{command}: {out}");
        assert!(!out.to_string().contains(SECRET), "{command}: {out}");
        if out["sandboxed"] == true {
            let err = out["stderr"].as_str().unwrap();
            assert!(
                err.contains("Permission denied") || err.contains("Operation not permitted"),
                "{command}: {out}"
            );
        }
    }
}

#[test]
fn a_stranger_in_the_sandbox_uid_range_turns_the_sandbox_off() {
    if skip_unless_root() {
        return;
    }
    use std::os::unix::process::CommandExt;
    // A range of this test's own (other tests' trees run at the same time), and a process
    // nl2sh did not start running as one of its uids.
    let base = 0x9300_0000 + (std::process::id() % 1000) * 16;
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .uid(base + 3)
        .gid(base + 3)
        .spawn()
        .unwrap();
    let fx = Fixture::new(&format!(
        "approval_timeout_secs = 1\nsandbox_uid_base = {base}\nsandbox_uid_count = 8\n"
    ));
    let server = Server::start(&fx, &[], &[]);
    let r = server.call_tool("nl2sh_inspect", json!({}));
    let sandbox = r.structured["sandbox"].clone();
    // Fails closed: the read-only command waits for a person (and expires here).
    let ls = server.invoke("shell.exec", json!({ "command": "ls /" }));
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(sandbox["active"], false, "{sandbox}");
    let reason = sandbox["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&other.id().to_string()) && reason.contains("sandbox_uid_base"),
        "{reason}"
    );
    assert!(ls.is_error, "{:?}", ls.output());
    assert_ne!(ls.output()["sandboxed"], true, "{:?}", ls.output());
}

#[test]
fn a_sandboxed_call_cannot_take_the_devices_memory_and_says_which_limit_ended_it() {
    if skip_unless_root() {
        return;
    }
    let fx = Fixture::new("approval_timeout_secs = 1\nsandbox_memory_mib = 64\n");
    let server = Server::start(&fx, &[], &[]);
    // tail keeps the whole (endless) line in memory: the attacker's `tail -n 1 /dev/zero`,
    // bounded here so a broken limit cannot take the test machine's memory either.
    let r = server.invoke(
        "shell.exec",
        json!({ "command": "head -c 1500000000 /dev/zero | tail -n 1 | wc -c", "timeout": 60 }),
    );
    let out = r.output();
    assert_eq!(out["sandboxed"], true, "{out}");
    // Ended by the per-process limit (tail's own "memory exhausted") or, where a cgroup
    // holds the call, by the kernel's OOM killer within it ("Killed").
    let stderr = out["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("tail: memory exhausted") || stderr.contains("Killed"),
        "{out}"
    );
    assert!(
        out["limit"]
            .as_str()
            .is_some_and(|l| l.starts_with("memory:") && l.contains("64 MiB")),
        "{out}"
    );
    // And the limits are the configured ones.
    let r = server.invoke(
        "shell.exec",
        json!({ "command": "grep -E 'Max (data size|cpu time|processes)' /proc/self/limits" }),
    );
    let text = r.output()["stdout"].as_str().unwrap().to_string();
    let limit = |name: &str| limit_row(&text, name);
    assert_eq!(limit("Max data size"), ["67108864", "67108864"], "{text}");
    // SIGXCPU at 300 s, SIGKILL 5 s later.
    assert_eq!(limit("Max cpu time"), ["300", "305"], "{text}");
    assert_eq!(limit("Max processes"), ["256", "256"], "{text}");
}

/// `name` of `/proc/meminfo`, in bytes.
fn meminfo(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    nl2sh_proto::config::meminfo_field(&text, name).unwrap()
}

/// A number in a cgroup file (`max` and unreadable: `None`).
fn cgroup_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn concurrent_sandboxed_calls_cannot_pass_the_shared_memory_ceiling() {
    if skip_unless_root() {
        return;
    }
    const MIB: u64 = 1024 * 1024;
    const CEILING_MIB: u64 = 256;
    const HOGS: usize = 8;
    // A range of this test's own: the ceiling is shared by the trees whose calls run as
    // the same uids, and the other tests' trees run at the same time.
    let base = 0x9400_0000 + (std::process::id() % 1000) * 16;
    let fx = Fixture::new(&format!(
        "sandbox_uid_base = {base}\nsandbox_uid_count = 16\nsandbox_memory_mib = 512\n\
         sandbox_total_memory_mib = {CEILING_MIB}\n"
    ));
    let server = Server::start(&fx, &[], &[]);
    let r = server.call_tool("nl2sh_inspect", json!({}));
    let ceiling = r.structured["sandbox"]["ceiling"].clone();
    assert_eq!(ceiling["memory_mib"], CEILING_MIB, "{ceiling}");
    if ceiling["enforced"] != true {
        // Kept by running fewer calls at once: one, at 512 MiB each.
        assert_eq!(ceiling["calls_at_once"], 1, "{ceiling}");
        nl2sh_proto::test_skip::skip(format_args!(
            "no cgroup here enforces the ceiling ({ceiling})"
        ));
        return;
    }
    let memory_dir = std::path::PathBuf::from(ceiling["cgroup"][0].as_str().unwrap());
    let (usage, peak) = if memory_dir.join("memory.peak").exists() {
        (
            memory_dir.join("memory.current"),
            memory_dir.join("memory.peak"),
        )
    } else {
        // v1: the peak so far is reset to now.
        let peak = memory_dir.join("memory.max_usage_in_bytes");
        let _ = std::fs::write(&peak, "0");
        (memory_dir.join("memory.usage_in_bytes"), peak)
    };
    let available_before = meminfo("MemAvailable:");
    // The attacker's `tail -n 1 /dev/zero`, each wanting 512 MiB (bounded here so that a
    // broken ceiling cannot take the test machine's memory either), all at once.
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            server.invoke_async(
                "shell.exec",
                json!({ "command": "head -c 600000000 /dev/zero | tail -n 1 | wc -c",
                        "timeout": 60 }),
            )
        })
        .collect();
    // While they run: the least memory available, the most charged to the sandboxes.
    let (mut available_least, mut charged_most) = (available_before, 0);
    while hogs.iter().any(|h| !h.is_finished()) {
        available_least = available_least.min(meminfo("MemAvailable:"));
        charged_most = charged_most.max(cgroup_number(&usage).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(10));
    }
    let results: Vec<Value> = hogs
        .into_iter()
        .map(|h| h.join().unwrap().output())
        .collect();
    let peak = cgroup_number(&peak).unwrap();
    eprintln!(
        "{HOGS} hogs of 512 MiB under a {CEILING_MIB} MiB ceiling: MemAvailable {} MiB \
         before, {} MiB at least during; charged to the sandboxes at most {} MiB (sampled), \
         peak {} MiB ({})",
        available_before / MIB,
        available_least / MIB,
        charged_most / MIB,
        peak / MIB,
        memory_dir.display()
    );
    assert!(peak <= CEILING_MIB * MIB, "peak {peak}");
    assert!(charged_most <= CEILING_MIB * MIB, "charged {charged_most}");
    // Other work on this machine moves MemAvailable too: the floor leaves room for it,
    // and is far above what the hogs would take together without the ceiling (4 GiB).
    let floor = available_before.saturating_sub(2048 * MIB);
    assert!(
        available_least > floor,
        "MemAvailable fell to {available_least} from {available_before}"
    );
    for out in &results {
        assert_eq!(out["sandboxed"], true, "{out}");
        let limit = out["limit"].as_str().unwrap_or_default();
        assert!(
            limit.starts_with("memory: the sandboxes' shared memory ceiling of 256 MiB")
                && limit.contains("sandbox_total_memory_mib"),
            "{out}"
        );
    }
    // The sandbox still serves calls afterwards.
    let r = server.invoke("shell.exec", json!({ "command": "echo fine" }));
    assert_eq!(r.output()["stdout"], "fine\n", "{}", r.output());
}

/// Every descendant of `pid`.
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for child in nl2sh_tests::children_of(p) {
            out.push(child);
            next.push(child);
        }
    }
    out
}

/// The soft and hard values of one row of a `/proc/<pid>/limits` text, e.g. "Max data
/// size 67108864 67108864 bytes" (empty when the row is missing).
fn limit_row(limits: &str, name: &str) -> Vec<String> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|rest| rest.split_whitespace().take(2).map(String::from).collect())
        .unwrap_or_default()
}

/// The soft "Max data size" of `pid` in bytes (None: unlimited, or the process is gone).
fn data_limit(pid: i32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    limit_row(&limits, "Max data size").first()?.parse().ok()
}

#[test]
fn a_sandbox_has_room_under_its_own_memory_limit() {
    if skip_unless_root() {
        return;
    }
    // The helper limits its data (RLIMIT_DATA), then still allocates: a command's
    // environment, and all of fs.read and fs.list run in it. Whatever it already holds
    // counts against that limit: an allocator that commits a large reservation up front
    // (mimalloc does, a gigabyte, on kernels that overcommit) leaves it room for nothing.
    let fx = Fixture::new("sandbox_memory_mib = 64\n");
    let dir = fx.dir.path();
    std::fs::write(dir.join("hello.txt"), "hello, sandbox\n").unwrap();
    let path = nl2sh_tests::path_with(&nl2sh_tests::android_standins());
    let server = Server::start(&fx, &[], &[("PATH", &path)]);
    let r = server.invoke("shell.exec", json!({"command": "echo hi"}));
    assert_eq!(r.output()["stdout"], "hi\n", "{}", r.output());
    let r = server.invoke("fs.read", json!({"path": dir.join("hello.txt")}));
    assert!(!r.is_error, "{}", r.output());
    let r = server.invoke("fs.list", json!({"path": dir}));
    assert!(!r.is_error, "{}", r.output());
    // The sandboxes built ahead wait for their calls already limited: each holds a small
    // part of its limit.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let limited: Vec<(i32, u64, u64)> = descendants(server.pid())
            .into_iter()
            .filter_map(|pid| {
                let limit = data_limit(pid)?;
                // A sandbox may be replaced meanwhile: a process gone is skipped.
                let kib = nl2sh_tests::proc_kib(pid, "status", "VmData")?;
                Some((pid, limit, kib * 1024))
            })
            .collect();
        if !limited.is_empty() {
            for (pid, limit, data) in limited {
                assert_eq!(limit, 64 << 20, "pid {pid}");
                assert!(
                    data < limit / 4,
                    "pid {pid} holds {data} bytes of data, limit {limit}"
                );
            }
            break;
        }
        assert!(Instant::now() < deadline, "no sandbox waits with its limit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_private_file_is_read_only_with_the_owners_approval() {
    if skip_unless_root() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new("approval_timeout_secs = 2\n");
    let dir = fx.dir.path().join("srv");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.join("id_ed25519");
    std::fs::write(&key, "PRIVATE-KEY-e2e-secret").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start(&fx, &[], &[]);
    // Unasked: refused by the kernel, nothing of it in the answer, nobody asked.
    let r = server.invoke("fs.read", json!({ "path": key }));
    assert!(r.is_error, "{:?}", r.output());
    let text = r.output().to_string();
    assert!(
        !text.contains("e2e-secret") && text.contains("Permission denied"),
        "{text}"
    );
    for command in [
        format!("cat {}", key.display()),
        format!("grep -r e2e-secret {}", dir.display()),
    ] {
        let r = server.invoke("shell.exec", json!({ "command": command }));
        assert!(
            !r.output().to_string().contains("PRIVATE-KEY"),
            "{command}: {:?}",
            r.output()
        );
    }
    assert!(pending_approvals(&fx).is_empty());
    // Unconfined: the owner is asked (and here lets it expire, so nothing is read).
    let call = server.invoke_async("fs.read", json!({ "path": key, "unconfined": true }));
    let pending = wait_pending(&fx, 1);
    assert!(
        pending[0]["action"]
            .as_str()
            .unwrap()
            .contains("(unconfined)"),
        "{pending:?}"
    );
    let r = call.join().unwrap();
    assert!(r.is_error && !r.output().to_string().contains("e2e-secret"));
}
