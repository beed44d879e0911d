//! The read-only sandbox itself, proved without the parser: destructive commands run
//! directly through the sandboxed runner (the same `Sandbox::run` the executor uses, with
//! the real `nl2sh` binary as helper), and none has an effect; each fails with the
//! kernel's error. The system-changing cases are aimed at things this test owns: a
//! process it started, a file it wrote, a loop device over its own file, and UTS and
//! network namespaces made with `unshare` around the helper, so that a broken sandbox
//! could not change the machine the tests run on.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use nl2sh_executor::runtime::exec::{CommandOutput, ProcessGroups};
use nl2sh_executor::sandbox::{Run, Sandbox, SandboxSettings, HELPER_ARG};
use nl2sh_proto::channels::SandboxPayload;
use nl2sh_tests::{alive, is_root, nl2sh_bin};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "protocol_token = \"sandbox-test-secret-0123456789abcdef\"";

struct Rig {
    dir: tempfile::TempDir,
    /// Helper in the test's own UTS, network and IPC namespaces.
    isolated: Sandbox,
    /// Helper in this machine's namespaces (for the loopback connect).
    plain: Sandbox,
}

impl Rig {
    fn new() -> Option<Rig> {
        if !is_root() {
            eprintln!("skipped: the sandbox needs root (it switches to the sandbox identity)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("nl2sh-sandbox-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("config.toml"), SECRET).unwrap();
        std::fs::create_dir(dir.path().join("config.state")).unwrap();
        std::fs::write(dir.path().join("config.state/audit"), SECRET).unwrap();
        std::fs::write(dir.path().join("victim"), "original\n").unwrap();
        let own = vec![
            dir.path().join("config.toml").display().to_string(),
            dir.path().join("config.state").display().to_string(),
        ];
        let helper = |prefix: &[&str]| {
            let mut argv: Vec<OsString> = prefix.iter().map(OsString::from).collect();
            argv.push(nl2sh_bin().into());
            argv.push(HELPER_ARG.into());
            Sandbox::new(SandboxSettings {
                helper: argv,
                uid: nl2sh_proto::channels::Uid(65534),
                gid: nl2sh_proto::channels::Gid(65534),
                own_files: own.clone(),
                scratch_bytes: 8 * 1024 * 1024,
            })
        };
        Some(Rig {
            isolated: helper(&["unshare", "--uts", "--net", "--ipc", "--"]),
            plain: helper(&[]),
            dir,
        })
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// `sh -c line` in `sandbox`; the run must have set up (the line itself may fail).
fn sh(sandbox: &Sandbox, line: &str) -> CommandOutput {
    block_on(async {
        let cancel = CancellationToken::new();
        let groups = ProcessGroups::default();
        let path = std::env::var("PATH").ok();
        let run = Run {
            cwd: None,
            stdin: None,
            max_stdout: 64 * 1024,
            max_stderr: 64 * 1024,
            deadline: Instant::now() + Duration::from_secs(30),
            cancel: &cancel,
            groups: &groups,
            path_var: path.as_deref(),
        };
        let argv = vec!["/bin/sh".into(), "-c".into(), line.into()];
        sandbox
            .run(SandboxPayload::Exec { argv }, run)
            .await
            .unwrap_or_else(|e| panic!("{line}: the sandbox did not run: {e}"))
    })
}

fn text(out: &CommandOutput) -> String {
    format!("{}{}", out.stdout.text(), out.stderr.text())
}

/// The line failed, and said one of `errors` (the kernel's words, via the program).
#[track_caller]
fn refused(out: &CommandOutput, errors: &[&str]) {
    let all = text(out);
    assert!(!out.success(), "succeeded: {all}");
    assert!(
        errors.iter().any(|e| all.contains(e)),
        "expected one of {errors:?}, got: {all}"
    );
}

const EROFS: &str = "Read-only file system";
const EPERM: &str = "Operation not permitted";
const EACCES: &str = "Permission denied";

#[test]
fn the_sandbox_is_active_and_reports_its_parts() {
    let Some(rig) = Rig::new() else { return };
    let status = block_on(rig.plain.availability()).clone();
    let parts = status.to_json();
    assert_eq!(parts["active"], true, "{parts}");
    for key in [
        "identity",
        "capabilities",
        "no_new_privs",
        "mount_namespace",
        "pid_namespace",
        "seccomp",
        "landlock",
    ] {
        assert!(parts.get(key).is_some(), "{key} missing: {parts}");
    }
    let out = sh(
        &rig.plain,
        "id -u; id -G; grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; echo $TMPDIR; echo pid $$",
    );
    assert!(out.success(), "{}", text(&out));
    let o = out.stdout.text();
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "65534", "{o}");
    assert_eq!(lines[1], "65534", "no supplementary groups: {o}");
    // CAP_DAC_READ_SEARCH is bit 2: 0x4, and nothing else, in every set.
    for set in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert!(
            o.contains(&format!("{set}:\t0000000000000004")),
            "{set}: {o}"
        );
    }
    assert!(o.contains("NoNewPrivs:\t1"), "{o}");
    assert!(o.contains("Seccomp:\t2"), "{o}");
    assert!(o.contains("/dev/tmp"), "{o}");
    assert!(o.contains("pid 1"), "its own PID namespace: {o}");
    let out = sh(&rig.plain, "grep 'Max processes' /proc/self/limits");
    let text = out.stdout.text();
    let limits: Vec<&str> = text.split_whitespace().collect();
    // "Max processes 1024 1024 processes": a fork bomb stops at the sandbox's limit.
    assert_eq!(limits.get(2..4), Some(&["1024", "1024"][..]), "{text}");
}

#[test]
fn files_cannot_be_written_or_deleted_anywhere_but_scratch() {
    let Some(rig) = Rig::new() else { return };
    let victim = rig.path("victim");
    let marker = format!("nl2sh-sandbox-{}", std::process::id());
    for line in [
        format!("echo changed > {victim}"),
        format!("echo changed >> {victim}"),
        format!("rm -f {victim}"),
        format!("mv {victim} {victim}.moved"),
        format!("chmod 777 {victim}"),
        format!("truncate -s 0 {victim}"),
        format!("touch /tmp/{marker}"),
        format!("mkdir /tmp/{marker}"),
        format!("touch /dev/shm/{marker}"),
        format!("touch /dev/{marker}"),
        format!("ln -s /etc /tmp/{marker}"),
    ] {
        let out = sh(&rig.plain, &line);
        refused(&out, &[EROFS, EPERM, EACCES]);
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    assert!(!Path::new(&format!("{victim}.moved")).exists());
    assert!(!Path::new(&format!("/tmp/{marker}")).exists());
    assert!(!Path::new(&format!("/dev/shm/{marker}")).exists());
    assert!(!Path::new(&format!("/dev/{marker}")).exists());
    // Reading still works, and TMPDIR is writable scratch that is gone afterwards.
    let out = sh(
        &rig.plain,
        &format!("cat {victim} && echo scratch > $TMPDIR/f && cat $TMPDIR/f && sort -T $TMPDIR /etc/passwd > /dev/null && echo sorted"),
    );
    assert!(out.success(), "{}", text(&out));
    assert_eq!(out.stdout.text(), "original\nscratch\nsorted\n");
    let out = sh(&rig.plain, "ls -A $TMPDIR | wc -l");
    assert_eq!(
        out.stdout.text().trim(),
        "0",
        "scratch is private to one run"
    );
}

#[test]
fn masked_secrets_cannot_be_read_by_any_path() {
    let Some(rig) = Rig::new() else { return };
    let config = rig.path("config.toml");
    let state = rig.path("config.state");
    for line in [
        format!("cat {config}"),
        format!("cat /proc/self/root{config}"),
        format!("cd {} && cat config.toml", rig.dir.path().display()),
        format!("f={config}; cat \"$f\""),
        format!("cat {state}/audit"),
        format!("grep -r sandbox-test-secret {}", rig.dir.path().display()),
        format!("cat {}/config.tom[l]", rig.dir.path().display()),
    ] {
        let out = sh(&rig.plain, &line);
        assert!(
            !text(&out).contains("sandbox-test-secret"),
            "{line} read the secret: {}",
            text(&out)
        );
    }
    refused(&sh(&rig.plain, &format!("cat {config}")), &[EACCES]);
    let out = sh(&rig.plain, &format!("ls -A {state} | wc -l"));
    assert_eq!(
        out.stdout.text().trim(),
        "0",
        "the state directory looks empty"
    );
    if Path::new("/etc/shadow").exists() {
        refused(&sh(&rig.plain, "cat /etc/shadow"), &[EACCES]);
        refused(&sh(&rig.plain, "head -c1 /etc/shadow"), &[EACCES]);
    }
    // Files outside the masks read as they would for root.
    let out = sh(&rig.plain, &format!("cat {}", rig.path("victim")));
    assert_eq!(out.stdout.text(), "original\n");
}

#[test]
fn processes_outside_cannot_be_signalled_and_nothing_outlives_the_run() {
    let Some(rig) = Rig::new() else { return };
    let mut victim = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let out = sh(&rig.plain, &format!("kill -9 {pid}"));
    refused(&out, &["No such process", EPERM]);
    let out = sh(&rig.plain, "kill -9 -1; echo survived");
    assert!(alive(pid as i32), "the test's process was killed");
    assert!(text(&out).contains("survived") || !out.success());

    // A background process that tries to outlive the call (its own session, too).
    let tag = 4000 + std::process::id() % 1000;
    let out = sh(
        &rig.plain,
        &format!("setsid sleep {tag}.5 & nohup sleep {tag}.25 >/dev/null 2>&1 & echo started"),
    );
    assert!(out.success(), "{}", text(&out));
    let tags = [format!("{tag}.5"), format!("{tag}.25")];
    if let Err(left) = nl2sh_tests::wait_gone(&tags, Duration::from_secs(5)) {
        panic!("background processes outlived the run: {left:?}");
    }
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn the_machine_cannot_be_reconfigured() {
    let Some(rig) = Rig::new() else { return };
    // In the UTS and network namespaces `unshare` made around the helper for this test.
    let out = sh(&rig.isolated, "hostname nl2sh-evil");
    refused(&out, &[EPERM, "you must be root"]);
    let out = sh(&rig.isolated, "hostname");
    assert!(!out.stdout.text().contains("nl2sh-evil"));

    let out = sh(
        &rig.isolated,
        "ip link set lo up; ip -o link show lo | grep -q 'state DOWN' && echo still-down",
    );
    refused(
        &sh(&rig.isolated, "ip link set lo up"),
        &[EPERM, "RTNETLINK answers"],
    );
    assert!(out.stdout.text().contains("still-down"), "{}", text(&out));

    refused(
        &sh(&rig.isolated, "sysctl -w net.ipv4.ip_forward=1"),
        &[EROFS, EACCES, EPERM, "permission denied"],
    );
    refused(
        &sh(&rig.isolated, "echo 1 > /proc/sys/net/ipv4/ip_forward"),
        &[EROFS, EACCES],
    );
    let out = sh(&rig.isolated, "cat /proc/sys/net/ipv4/ip_forward");
    assert_eq!(out.stdout.text().trim(), "0");

    // Setting the clock to what it already is: harmless even if it were let through.
    refused(&sh(&rig.isolated, "date -s @$(date +%s)"), &[EPERM]);
}

#[test]
fn no_way_back_to_root_or_out_of_the_sandbox() {
    let Some(rig) = Rig::new() else { return };
    let proof = format!("/tmp/nl2sh-su-proof-{}", std::process::id());
    let out = sh(
        &rig.plain,
        &format!("su -c 'touch {proof}' root </dev/null"),
    );
    assert!(!out.success(), "{}", text(&out));
    let out = sh(
        &rig.plain,
        &format!("systemd-run --quiet --wait touch {proof}"),
    );
    assert!(!out.success(), "{}", text(&out));
    assert!(!Path::new(&proof).exists());
    // New namespaces (a user namespace would hand out capabilities of its own).
    refused(&sh(&rig.plain, "unshare -U -r id"), &[EPERM]);
    refused(&sh(&rig.plain, "unshare -m true"), &[EPERM]);
    // Another process's memory and environment.
    refused(&sh(&rig.plain, "cat /proc/1/environ"), &[EACCES]);
}

/// A loop device over a file of the test's, detached when dropped (also on a panic).
struct LoopDevice(String);

impl LoopDevice {
    fn attach(backing: &str) -> LoopDevice {
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show", backing])
            .output()
            .expect("losetup (util-linux) is needed");
        assert!(out.status.success(), "losetup: {out:?}");
        LoopDevice(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

#[test]
fn raw_devices_are_out_of_reach() {
    let Some(rig) = Rig::new() else { return };
    // A loop device over a file this test owns: writing it is what a broken sandbox
    // would do to a disk.
    let backing = rig.path("disk.img");
    std::fs::write(&backing, vec![b'A'; 64 * 1024]).unwrap();
    let attached = LoopDevice::attach(&backing);
    let loop_dev = attached.0.clone();
    let dev = std::fs::metadata(&loop_dev).unwrap();
    use std::os::unix::fs::MetadataExt;
    let rdev = dev.rdev();
    // The same device under a path outside /dev.
    let node = rig.path("blk");
    nix::sys::stat::mknod(
        Path::new(&node),
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        rdev,
    )
    .unwrap();
    {
        refused(
            &sh(
                &rig.plain,
                &format!("dd if=/dev/zero of={loop_dev} bs=512 count=1 conv=notrunc"),
            ),
            &["No such file", EACCES, EROFS],
        );
        refused(
            &sh(
                &rig.plain,
                &format!("dd if=/dev/zero of={node} bs=512 count=1 conv=notrunc"),
            ),
            &[EACCES, EROFS],
        );
        refused(&sh(&rig.plain, &format!("head -c 16 {node}")), &[EACCES]);
        let out = sh(&rig.plain, "ls /dev");
        assert!(!out.stdout.text().contains("loop"), "{}", out.stdout.text());
    }
    drop(attached);
    assert!(std::fs::read(&backing).unwrap().iter().all(|b| *b == b'A'));
}

#[test]
fn nothing_leaves_the_device_over_the_network() {
    let Some(rig) = Rig::new() else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let line =
        format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'");
    refused(&sh(&rig.plain, &line), &[EPERM]);
    refused(
        &sh(
            &rig.plain,
            &format!("bash -c 'echo x > /dev/tcp/127.0.0.1/{port}'"),
        ),
        &[EPERM],
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection reached the listener"
    );
    // Unix and netlink sockets stay, so the device can still be looked at.
    let out = sh(&rig.plain, "ip addr show lo && ss -ltn | head -1");
    assert!(out.success(), "{}", text(&out));
    assert!(
        out.stdout.text().contains("127.0.0.1"),
        "{}",
        out.stdout.text()
    );
}
