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
use nl2sh_executor::sandbox::{
    Run, Sandbox, SandboxSettings, GROWN_FOR, HELPER_ARG, MAX_AHEAD_AGE, WARM_TARGET,
};
use nl2sh_proto::channels::{SandboxPayload, UidRange};
use nl2sh_tests::{alive, is_root, nl2sh_bin};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "protocol_token = \"sandbox-test-secret-0123456789abcdef\"";

struct Rig {
    dir: tempfile::TempDir,
    /// Helper in the test's own UTS, network and IPC namespaces.
    isolated: Sandbox,
    /// Helper in this machine's namespaces (for the loopback connect).
    plain: Sandbox,
    /// As `plain`, keeping sandboxes built ahead as the executor does.
    ahead: Sandbox,
    /// As `ahead`, but none is ever young enough to use.
    stale: Sandbox,
    /// As `plain`, its helper started by a shell that lingers after it, with no pipes.
    lingering: Sandbox,
}

impl Rig {
    fn new() -> Option<Rig> {
        if !is_root() {
            nl2sh_proto::test_skip::skip(
                "the sandbox needs root (it switches to the sandbox identity)",
            );
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("nl2sh-sandbox-")
            .tempdir()
            .unwrap();
        // Readable by anyone, so what hides nl2sh's files below is the masks alone.
        set_mode(dir.path(), 0o755);
        std::fs::write(dir.path().join("config.toml"), SECRET).unwrap();
        std::fs::create_dir(dir.path().join("config.state")).unwrap();
        std::fs::write(dir.path().join("config.state/audit"), SECRET).unwrap();
        std::fs::create_dir(dir.path().join("config.service")).unwrap();
        std::fs::write(dir.path().join("config.service/service.log"), SECRET).unwrap();
        std::fs::write(dir.path().join("victim"), "original\n").unwrap();
        for entry in walk(dir.path()) {
            set_mode(&entry, if entry.is_dir() { 0o755 } else { 0o644 });
        }
        let own = vec![
            dir.path().join("config.toml").display().to_string(),
            dir.path().join("config.state").display().to_string(),
            dir.path().join("config.service").display().to_string(),
        ];
        let helper = |prefix: &[&str], ahead: usize, ahead_max_age: Duration| {
            let mut argv: Vec<OsString> = prefix.iter().map(OsString::from).collect();
            argv.push(nl2sh_bin().into());
            argv.push(HELPER_ARG.into());
            Sandbox::new(SandboxSettings {
                helper: argv,
                uids: RANGE,
                limits: nl2sh_proto::config::Config::default().sandbox_limits(),
                ceiling: nl2sh_proto::config::Config::default().sandbox_ceiling(),
                own_files: own.clone(),
                scratch_bytes: 8 * 1024 * 1024,
                ahead,
                ahead_max: ahead,
                grown_for: GROWN_FOR,
                keep_fresh_for: Duration::ZERO,
                ahead_max_age,
            })
        };
        // Each call here runs on a runtime of its own, which sandboxes built ahead could
        // not outlive: only `ahead` builds them (the executor has one runtime).
        Some(Rig {
            isolated: helper(
                &["unshare", "--uts", "--net", "--ipc", "--"],
                0,
                MAX_AHEAD_AGE,
            ),
            plain: helper(&[], 0, MAX_AHEAD_AGE),
            ahead: helper(&[], WARM_TARGET, MAX_AHEAD_AGE),
            // Every sandbox it builds ahead is already too old when a call comes.
            stale: helper(&[], WARM_TARGET, Duration::ZERO),
            lingering: helper(&["sh", "-c", LINGERING_HELPER], 0, MAX_AHEAD_AGE),
            dir,
        })
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// Runs the helper (`$0 $1`), then closes its pipes and stays longer than a call may run
/// ([`sh_on`]'s 30 s deadline): a call that waited for this process to exit would time
/// out, so it must be answered from the helper's exit record. (The sleep is killed with
/// the test's runtime, which holds it as its child.)
const LINGERING_HELPER: &str = "\"$0\" \"$1\"; exec <&- >&- 2>&-; exec sleep 60";

/// The uids of this file's sandboxes: the tree's default range, shared by every test here
/// (they run at once and claim uids device-wide, as trees do).
const RANGE: UidRange = UidRange {
    first: nl2sh_proto::config::DEFAULT_SANDBOX_UID_BASE,
    count: nl2sh_proto::config::DEFAULT_SANDBOX_UID_COUNT,
};

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every path below `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
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
    sh_cancellable(sandbox, line, &CancellationToken::new())
}

/// [`sh`], ended early by `cancel`.
fn sh_cancellable(sandbox: &Sandbox, line: &str, cancel: &CancellationToken) -> CommandOutput {
    block_on(sh_on(sandbox, line, None, cancel))
}

/// `sh -c line` in `sandbox` on the caller's runtime, in `cwd`; the run must have set up.
async fn sh_on(
    sandbox: &Sandbox,
    line: &str,
    cwd: Option<&Path>,
    cancel: &CancellationToken,
) -> CommandOutput {
    let groups = ProcessGroups::default();
    let path = std::env::var("PATH").ok();
    let run = Run {
        cwd,
        stdin: None,
        max_stdout: 64 * 1024,
        max_stderr: 64 * 1024,
        deadline: Instant::now() + Duration::from_secs(30),
        cancel,
        groups: &groups,
        path_var: path.as_deref(),
    };
    let argv = vec!["/bin/sh".into(), "-c".into(), line.into()];
    sandbox
        .run(SandboxPayload::Exec { argv }, run)
        .await
        .unwrap_or_else(|e| panic!("{line}: the sandbox did not run: {e}"))
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
        "ipc_namespace",
        "host_sockets",
        "file_locks",
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
    let uid: u32 = lines[0].parse().unwrap();
    assert!(RANGE.contains(uid), "a uid of the range: {o}");
    assert_eq!(
        lines[1], lines[0],
        "gid = uid, no supplementary groups: {o}"
    );
    // No capability in any set.
    for set in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert!(
            o.contains(&format!("{set}:\t0000000000000000")),
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
    // "Max processes 256 256 processes": a fork bomb stops at the call's limit.
    assert_eq!(limits.get(2..4), Some(&["256", "256"][..]), "{text}");
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
    let log = rig.path("config.service/service.log");
    for line in [
        format!("cat {log}"),
        format!("grep -a Token {log}"),
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
    // World-readable files outside the masks read as they would for anyone.
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

#[test]
fn private_files_nobody_listed_cannot_be_read() {
    let Some(rig) = Rig::new() else { return };
    // A private key in a place no mask names, as a user would leave one.
    let keys = rig.path("srv/deploy/.ssh");
    std::fs::create_dir_all(&keys).unwrap();
    for d in ["srv", "srv/deploy", "srv/deploy/.ssh"] {
        set_mode(&rig.dir.path().join(d), 0o755);
    }
    let key = format!("{keys}/id_ed25519");
    std::fs::write(&key, "PRIVATE-KEY-sandbox-test-secret").unwrap();
    set_mode(Path::new(&key), 0o600);
    let db = rig.path("srv/deploy/app.db");
    std::fs::write(&db, "db-sandbox-test-secret").unwrap();
    set_mode(Path::new(&db), 0o640);
    for line in [
        format!("cat {key}"),
        format!("grep -r sandbox-test-secret {}", rig.path("srv")),
        format!("cat {db}"),
        format!("cat /proc/self/root{key}"),
        format!("find {} -type f -exec cat {{}} +", rig.path("srv")),
    ] {
        let out = sh(&rig.plain, &line);
        assert!(
            !text(&out).contains("sandbox-test-secret"),
            "{line} read a private file: {}",
            text(&out)
        );
        assert!(text(&out).contains(EACCES), "{line}: {}", text(&out));
    }
    // A private directory cannot even be listed.
    let out = sh(&rig.plain, "ls /root");
    refused(&out, &[EACCES]);
    // What anyone may read still answers.
    let out = sh(
        &rig.plain,
        &format!("ls {keys} && cat /etc/hostname >/dev/null && echo ok"),
    );
    assert!(out.stdout.text().contains("id_ed25519"), "{}", text(&out));
    assert!(out.stdout.text().contains("ok"), "{}", text(&out));
}

#[test]
fn ipc_objects_are_private_to_the_call() {
    let Some(rig) = Rig::new() else { return };
    if !Path::new("/proc/sysvipc/shm").exists() {
        nl2sh_proto::test_skip::skip("no System V IPC in this kernel");
        return;
    }
    // A segment of the device's: invisible inside.
    let host = std::process::Command::new("ipcmk")
        .args(["-M", "4096"])
        .output()
        .expect("ipcmk (util-linux)");
    let host_id: String = String::from_utf8_lossy(&host.stdout)
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    let out = sh(
        &rig.plain,
        "ipcs -m; ipcmk -M 65536 && ipcmk -Q && ipcmk -S 1 && echo made",
    );
    let _ = std::process::Command::new("ipcrm")
        .args(["-m", &host_id])
        .status();
    assert!(out.stdout.text().contains("made"), "{}", text(&out));
    let inside = out.stdout.text();
    assert!(
        !inside
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(host_id.as_str())),
        "the device's segment {host_id} is visible: {inside}"
    );
    // What the call made died with it.
    let shm = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    assert!(
        !shm.lines().any(|l| l
            .split_whitespace()
            .nth(7)
            .and_then(|uid| uid.parse().ok())
            .is_some_and(|uid| RANGE.contains(uid))),
        "a segment of a sandboxed call outlived it: {shm}"
    );
}

#[test]
fn file_locks_are_refused() {
    let Some(rig) = Rig::new() else { return };
    let victim = rig.path("victim");
    for line in [
        format!("flock -s {victim} true"),
        format!("flock -x -n {victim} true"),
        format!("python3 -c 'import fcntl; f = open(\"{victim}\"); fcntl.lockf(f, fcntl.LOCK_SH)'"),
        format!(
            "python3 -c 'import fcntl, struct; f = open(\"{victim}\"); \
             fcntl.fcntl(f, 37, struct.pack(\"hhqqi\", 0, 0, 0, 0, 0))'"
        ),
    ] {
        refused(&sh(&rig.plain, &line), &["No locks available"]);
    }
    // Asking whether a lock is held still works.
    let out = sh(
        &rig.plain,
        &format!(
            "python3 -c 'import fcntl, struct; f = open(\"{victim}\"); \
             fcntl.fcntl(f, fcntl.F_GETLK, struct.pack(\"hhqqi\", 0, 0, 0, 0, 0)); print(\"ok\")'"
        ),
    );
    assert_eq!(out.stdout.text().trim(), "ok", "{}", text(&out));
}

#[test]
fn host_services_cannot_be_reached_over_unix_sockets() {
    let Some(rig) = Rig::new() else { return };
    use std::os::linux::net::SocketAddrExt;
    // A world-writable named socket, as journald's and D-Bus's are, and an abstract one.
    let path = rig.path("service.sock");
    let named = std::os::unix::net::UnixListener::bind(&path).unwrap();
    named.set_nonblocking(true).unwrap();
    set_mode(Path::new(&path), 0o777);
    let name = format!("nl2sh-test-service-{}", std::process::id());
    let abstract_addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&abstract_addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let dgram = rig.path("log.sock");
    let log = std::os::unix::net::UnixDatagram::bind(&dgram).unwrap();
    log.set_nonblocking(true).unwrap();
    set_mode(Path::new(&dgram), 0o777);
    for line in [
        format!("python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{path}\")'"),
        format!("python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"\\0{name}\")'"),
        format!(
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\
             .sendto(b\"x\", \"{dgram}\")'"
        ),
        // A datagram pair can send to any named socket: refused as a pair too.
        format!(
            "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, \
             socket.SOCK_DGRAM); a.sendto(b\"x\", \"{dgram}\")'"
        ),
    ] {
        let out = sh(&rig.plain, &line);
        assert!(!out.success(), "{line} succeeded: {}", text(&out));
    }
    refused(
        &sh(
            &rig.plain,
            &format!(
                "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{path}\")'"
            ),
        ),
        &[EPERM],
    );
    for listener in [&named, &abstract_listener] {
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a connection reached the service"
        );
    }
    let mut buf = [0u8; 16];
    assert!(
        log.recv(&mut buf).is_err(),
        "a datagram reached the service"
    );
    // The command's own plumbing still works: pipes and stream socketpairs.
    let out = sh(
        &rig.plain,
        "echo piped | cat; python3 -c 'import socket; a, b = socket.socketpair(); \
         a.sendall(b\"paired\"); print(b.recv(6).decode())'",
    );
    assert_eq!(out.stdout.text(), "piped\npaired\n", "{}", text(&out));
}

/// Run `line` in `sandbox` on a thread of its own; cancelled by `cancel`.
fn sh_in_background(
    sandbox: std::sync::Arc<Sandbox>,
    line: String,
    cancel: CancellationToken,
) -> std::thread::JoinHandle<CommandOutput> {
    std::thread::spawn(move || sh_cancellable(&sandbox, &line, &cancel))
}

/// The pid and uid of the process whose command line is `cmdline` (space-separated).
fn find_process(cmdline: &str, within: Duration) -> Option<(u32, u32)> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        for (pid, ids) in nl2sh_executor::sandbox::processes_in(RANGE) {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&line).replace('\0', " ").trim() == cmdline {
                return Some((pid, ids[0]));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The most processes any one uid of the range runs now.
fn most_processes_of_one_uid() -> usize {
    let mut per_uid = std::collections::HashMap::<u32, usize>::new();
    for (_, ids) in nl2sh_executor::sandbox::processes_in(RANGE) {
        *per_uid.entry(ids[0]).or_default() += 1;
    }
    per_uid.into_values().max().unwrap_or(0)
}

#[test]
fn each_call_runs_as_its_own_uid_with_its_own_process_limit() {
    let Some(rig) = Rig::new() else { return };
    let sandbox = std::sync::Arc::new(rig.plain);
    let tag = format!("{}.{}", 20 + std::process::id() % 10, std::process::id());
    let cancel = CancellationToken::new();
    let first = sh_in_background(sandbox.clone(), format!("exec sleep {tag}"), cancel.clone());
    let (pid, uid) = find_process(&format!("sleep {tag}"), Duration::from_secs(10))
        .expect("the first call's sleep is running");
    assert!(RANGE.contains(uid));
    // Another call: another uid, and the first call's process is out of its reach.
    let out = sh(&sandbox, &format!("id -u; kill -9 {pid}"));
    let other: u32 = out.stdout.text().trim().parse().unwrap();
    assert_ne!(other, uid, "two running calls share a uid");
    assert!(RANGE.contains(other));
    refused(&out, &[EPERM, "No such process"]);
    assert!(alive(pid as i32), "one call killed another's process");
    cancel.cancel();
    let _ = first.join();

    // A call that takes every process it may have starves nobody else.
    let cancel = CancellationToken::new();
    let bomb = sh_in_background(
        sandbox.clone(),
        nl2sh_tests::fork_bomb(400, 30),
        cancel.clone(),
    );
    // The limit is counted per uid (the bomb's is the one with the most): other tests
    // here keep sandboxes ready in the same range meanwhile, one or two processes each.
    let until = Instant::now() + Duration::from_secs(20);
    let mut held = 0;
    while Instant::now() < until && held < 250 {
        held = nl2sh_executor::sandbox::processes_in(RANGE).len();
        std::thread::sleep(Duration::from_millis(50));
    }
    if held < 250 {
        cancel.cancel();
        let out = bomb.join().unwrap();
        panic!("the bomb reached only {held} processes: {}", text(&out));
    }
    let out = sh(&sandbox, "ls / | head -1 >/dev/null && echo still-works");
    assert_eq!(out.stdout.text().trim(), "still-works", "{}", text(&out));
    let below = most_processes_of_one_uid();
    assert!(
        below <= 256,
        "{below} processes: the per-call limit did not hold"
    );
    cancel.cancel();
    let _ = bomb.join();
}

#[test]
fn a_process_of_another_program_in_the_range_disables_the_sandbox() {
    if !is_root() {
        nl2sh_proto::test_skip::skip("needs root");
        return;
    }
    // A range of this test's own, so no other test's sandbox sees the stranger.
    let range = UidRange {
        first: 0x9200_0000 + (std::process::id() % 1000) * 16,
        count: 4,
    };
    let stranger_uid = range.first + 2;
    let mut stranger = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={stranger_uid}"),
            &format!("--regid={stranger_uid}"),
            "--clear-groups",
            "sleep",
            "60",
        ])
        .spawn()
        .expect("setpriv (util-linux)");
    let settings = |uids| SandboxSettings {
        uids,
        ahead: 0,
        ahead_max: 0,
        ..pool_settings()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = None;
    while Instant::now() < deadline {
        let found = block_on(async { Sandbox::new(settings(range)).availability().await.clone() });
        if !found.is_ready() {
            status = Some(found);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = stranger.kill();
    let _ = stranger.wait();
    let status = status.expect("the sandbox stayed available with a stranger in its range");
    let shown = status.to_json();
    assert_eq!(shown["active"], false);
    let reason = shown["reason"].as_str().unwrap();
    assert!(
        reason.contains(&stranger.id().to_string()) && reason.contains("sandbox_uid_base"),
        "{reason}"
    );
    // Once it is gone, the range is usable.
    let again = block_on(async { Sandbox::new(settings(range)).availability().await.clone() });
    assert!(again.is_ready(), "{}", again.to_json());
    // An ended process nobody reaped yet (a killed tree's, until init gets to it) is no
    // stranger: it can do nothing.
    let mut zombie = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={stranger_uid}"),
            &format!("--regid={stranger_uid}"),
            "--clear-groups",
            "true",
        ])
        .spawn()
        .unwrap();
    let pid = zombie.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|s| s.contains("State:\tZ"))
    {
        assert!(Instant::now() < deadline, "no zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(nl2sh_executor::sandbox::processes_in(range).is_empty());
    let with_zombie =
        block_on(async { Sandbox::new(settings(range)).availability().await.clone() });
    let _ = zombie.wait();
    assert!(with_zombie.is_ready(), "{}", with_zombie.to_json());
}

#[test]
fn a_calls_processes_together_cannot_pass_its_memory_cap() {
    let Some(rig) = Rig::new() else { return };
    let mut limits = nl2sh_proto::config::Config::default().sandbox_limits();
    limits.memory_bytes = 128 << 20;
    let sandbox = Sandbox::new(SandboxSettings {
        limits,
        ahead: 0,
        ahead_max: 0,
        ..pool_settings()
    });
    let parts = block_on(sandbox.availability()).to_json();
    let cgroup = parts["cgroup"].as_str().unwrap_or_default().to_string();
    if !cgroup.starts_with("cgroup") {
        nl2sh_proto::test_skip::skip(format_args!(
            "no cgroup for calls here ({cgroup}); the limits are per process"
        ));
        return;
    }
    // Four processes of 60 MiB each: every one under the per-process limit, together
    // over the call's.
    let out = sh(
        &sandbox,
        "python3 -c 'import os, time\n\
         for i in range(3):\n    \
         if os.fork() == 0: break\n\
         b = bytearray(60 << 20)\n\
         time.sleep(2)' ; echo done",
    );
    let limit = nl2sh_executor::sandbox::limit_hit(&out, limits);
    assert!(
        limit
            .as_deref()
            .is_some_and(|l| l.starts_with("memory: the call reached its 128 MiB")),
        "{limit:?}: {}",
        text(&out)
    );
    drop(rig);
}

#[test]
fn a_fork_refused_by_the_shared_process_ceiling_says_so_and_one_by_its_own_limit_too() {
    let Some(rig) = Rig::new() else { return };
    // A range of this test's own: the ceiling is shared by the sandboxes whose calls run
    // as the same uids, and the other tests' run at the same time.
    let range = UidRange {
        first: 0x9480_0000 + (std::process::id() % 1000) * 16,
        count: 16,
    };
    let forks = "i=0; while [ $i -lt 40 ]; do sleep 2 & i=$((i+1)); done; wait";
    let defaults = nl2sh_proto::config::Config::default();
    let mut own = defaults.sandbox_limits();
    own.processes = 8;
    let mut shared = defaults.sandbox_ceiling();
    shared.processes = 16;
    for (limits, ceiling, expected) in [
        // 16 processes for every call together: the call's own 256 are never reached.
        (
            defaults.sandbox_limits(),
            shared,
            "processes: the sandboxes' shared ceiling of 16 processes (sandbox_total_processes)",
        ),
        // 8 for the call, thousands for all: the call's own limit refuses.
        (
            own,
            defaults.sandbox_ceiling(),
            "processes: the call reached its 8 processes (sandbox_max_processes)",
        ),
    ] {
        let sandbox = Sandbox::new(SandboxSettings {
            uids: range,
            limits,
            ceiling,
            ahead: 0,
            ahead_max: 0,
            ..pool_settings()
        });
        let parts = block_on(sandbox.availability()).to_json();
        if parts["ceiling"]["enforced"] != true {
            nl2sh_proto::test_skip::skip(format_args!(
                "no cgroup here enforces the ceiling ({})",
                parts["ceiling"]
            ));
            return;
        }
        let out = sh(&sandbox, forks);
        let limit = nl2sh_executor::sandbox::limit_hit(&out, limits);
        eprintln!("{limit:?}");
        assert!(
            limit.as_deref().is_some_and(|l| l.starts_with(expected)),
            "{limit:?}: {}",
            text(&out)
        );
    }
    drop(rig);
}

/// `sh -c line` in `sandbox` in `/`, on the caller's runtime (sandboxes built ahead
/// belong to the runtime that built them).
async fn sh_here(sandbox: &Sandbox, line: &str) -> CommandOutput {
    sh_on(
        sandbox,
        line,
        Some(Path::new("/")),
        &CancellationToken::new(),
    )
    .await
}

/// Wait until `want` sandboxes are built ahead and ready.
async fn ready_ahead(sandbox: &Sandbox, want: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    while sandbox.ready_ahead() < want {
        assert!(
            Instant::now() < until,
            "{} of {want} built ahead",
            sandbox.ready_ahead()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two sandboxes built ahead in this machine's namespaces, nothing else of the pool's
/// behaviour (no growth, not kept fresh): what the pool tests start from.
fn pool_settings() -> SandboxSettings {
    SandboxSettings {
        helper: vec![nl2sh_bin().into(), HELPER_ARG.into()],
        uids: RANGE,
        limits: nl2sh_proto::config::Config::default().sandbox_limits(),
        ceiling: nl2sh_proto::config::Config::default().sandbox_ceiling(),
        own_files: Vec::new(),
        scratch_bytes: 8 * 1024 * 1024,
        ahead: 2,
        ahead_max: 2,
        grown_for: GROWN_FOR,
        keep_fresh_for: Duration::ZERO,
        ahead_max_age: MAX_AHEAD_AGE,
    }
}

#[test]
fn for_a_while_after_a_call_sandboxes_are_rebuilt_before_they_grow_too_old() {
    let Some(_rig) = Rig::new() else { return };
    let max_age = Duration::from_secs(2);
    let keep_fresh_for = Duration::from_secs(4);
    let sandbox = Sandbox::new(SandboxSettings {
        keep_fresh_for,
        ahead_max_age: max_age,
        ..pool_settings()
    });
    block_on(async {
        assert!(sandbox.availability().await.is_ready());
        ready_ahead(&sandbox, 2).await;
        let first = sh_here(&sandbox, "true").await;
        assert!(first.success(), "{}", text(&first));
        assert_eq!(sandbox.served_ahead(), 1);
        // Longer than a sandbox may wait: the ones ready now were built since.
        tokio::time::sleep(max_age + Duration::from_secs(1)).await;
        let second = sh_here(&sandbox, "true").await;
        assert!(second.success(), "{}", text(&second));
        assert_eq!(sandbox.served_ahead(), 2, "one young enough was ready");
        // Quiet for longer than `keep_fresh_for`, then `max_age`: nothing rebuilt them,
        // and the next call finds none young enough (it builds its own).
        tokio::time::sleep(keep_fresh_for + max_age + Duration::from_secs(1)).await;
        let third = sh_here(&sandbox, "true").await;
        assert!(third.success(), "{}", text(&third));
        assert_eq!(sandbox.served_ahead(), 2, "the quiet pool was left alone");
    });
}

/// The payload shares its root helper's memory until it execs the command (CLONE_VM):
/// once the command runs, neither its own helper nor any other sandbox's (a ready one of
/// the pool, waiting for its call) can be read or written from inside a sandbox.
#[test]
fn a_sandboxed_command_cannot_reach_the_memory_of_any_helper() {
    let Some(rig) = Rig::new() else { return };
    // Every helper and waiting payload by its command line (the `[x]` keeps this line's
    // own processes out of the match).
    let line = r#"for p in /proc/[0-9]*; do
        tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '__nl2sh-sandbo[x]' || continue
        echo "helper ${p#/proc/}"
        for f in mem environ maps auxv; do head -c 1 $p/$f >/dev/null 2>&1 && echo "READ $p/$f"; done
        printf x 2>/dev/null > $p/mem && echo "WROTE $p/mem"
    done; true"#;
    let out = block_on(async {
        assert!(rig.ahead.availability().await.is_ready());
        ready_ahead(&rig.ahead, WARM_TARGET).await;
        sh_here(&rig.plain, line).await
    });
    assert!(out.success(), "{}", text(&out));
    let seen = out.stdout.text();
    // This call's helper and the two the pool keeps ready, at least.
    assert!(
        seen.lines().filter(|l| l.starts_with("helper ")).count() >= 3,
        "{seen}"
    );
    assert!(!seen.contains("READ") && !seen.contains("WROTE"), "{seen}");
}

/// `true` three times at once in `sandbox`; each must succeed.
async fn three_at_once(sandbox: &Sandbox) {
    let (a, b, c) = tokio::join!(
        sh_here(sandbox, "true"),
        sh_here(sandbox, "true"),
        sh_here(sandbox, "true"),
    );
    for out in [&a, &b, &c] {
        assert!(out.success(), "{}", text(out));
    }
}

#[test]
fn the_pool_grows_while_calls_outrun_it_and_is_trimmed_back_once_they_stop() {
    let Some(_rig) = Rig::new() else { return };
    // Long enough that the pool is still grown when the second three calls come on a
    // busy machine; the trim is a timer, not a measure of speed.
    let grown_for = Duration::from_secs(10);
    let sandbox = Sandbox::new(SandboxSettings {
        ahead_max: 6,
        grown_for,
        ..pool_settings()
    });
    block_on(async {
        assert!(sandbox.availability().await.is_ready());
        ready_ahead(&sandbox, 2).await;
        assert_eq!(sandbox.ahead_target(), 2);
        // Three calls at once: two take the sandboxes ready, the third finds none.
        three_at_once(&sandbox).await;
        assert_eq!(sandbox.served_ahead(), 2);
        assert_eq!(sandbox.ahead_target(), 4, "one call found none ready");
        // The pool refills to the larger size, and the next calls find one ready.
        ready_ahead(&sandbox, 4).await;
        three_at_once(&sandbox).await;
        assert_eq!(
            sandbox.served_ahead(),
            5,
            "three calls, three sandboxes ready"
        );
        assert_eq!(
            sandbox.ahead_target(),
            4,
            "none of them found the pool empty"
        );
        // Quiet for longer than `grown_for`: back to two, with no call to trigger it.
        let until = Instant::now() + grown_for + Duration::from_secs(20);
        while sandbox.ahead_target() != 2 || sandbox.ready_ahead() != 2 {
            assert!(
                Instant::now() < until,
                "still {} kept ahead ({} ready)",
                sandbox.ahead_target(),
                sandbox.ready_ahead()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn sandboxes_built_ahead_serve_one_call_each_and_keep_nothing_of_it() {
    let Some(rig) = Rig::new() else { return };
    let sandbox = &rig.ahead;
    block_on(async {
        assert!(sandbox.availability().await.is_ready());
        ready_ahead(sandbox, WARM_TARGET).await;
        // A call leaves what it can behind: a file in its scratch directory, a process
        // in the background, its working directory.
        let first = sh_here(
            sandbox,
            "echo left > $TMPDIR/left; (sleep 31.25 &); id -u; pwd",
        )
        .await;
        assert!(first.success(), "{}", text(&first));
        assert_eq!(sandbox.served_ahead(), 1, "a ready sandbox served the call");
        let first = first.stdout.text();
        let first: Vec<&str> = first.lines().collect();
        assert_eq!(first[1], "/", "the call's own working directory");
        // Its background process ended with it (its PID namespace is gone).
        assert_eq!(
            find_process("sleep 31.25", Duration::from_millis(100)),
            None
        );
        ready_ahead(sandbox, WARM_TARGET).await;
        // The next two calls at once, each in a sandbox built ahead. A namespace's number
        // is reused once it is gone, so two are compared only while both exist.
        let (next, other) = tokio::join!(
            sh_here(
                sandbox,
                "ls -A $TMPDIR; echo scratch-listed; readlink /proc/self/ns/mnt; echo $PATH; \
                 sleep 1",
            ),
            sh_here(sandbox, "sleep 0.3; readlink /proc/self/ns/mnt"),
        );
        assert!(next.success(), "{}", text(&next));
        assert!(other.success(), "{}", text(&other));
        assert_eq!(sandbox.served_ahead(), 3);
        let out = next.stdout.text();
        let lines: Vec<&str> = out.lines().collect();
        // Nothing of the first call: an empty scratch directory.
        assert_eq!(lines[0], "scratch-listed", "{out}");
        // A mount namespace of its own: not the other call's, running beside it.
        assert_ne!(lines[1], other.stdout.text().trim(), "{out}");
        assert!(lines[1].starts_with("mnt:["), "{out}");
        // The call's PATH, not the one the sandbox was built with.
        assert_eq!(
            Some(lines[2]),
            std::env::var("PATH").ok().as_deref(),
            "{out}"
        );
        // The executor holds the mount namespace of each sandbox ready (so that a helper's
        // exit does not tear it down on a call's path) and lets go of it once its call has
        // ended: after three calls it holds as many as are ready, not more.
        ready_ahead(sandbox, WARM_TARGET).await;
        let until = Instant::now() + Duration::from_secs(10);
        while mount_namespaces_held() != WARM_TARGET {
            assert!(
                Instant::now() < until,
                "{} mount namespaces held, {WARM_TARGET} sandboxes ready",
                mount_namespaces_held()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

/// The nice value of process `pid` (field 19 of `/proc/<pid>/stat`, after the command
/// name, which may hold spaces).
fn nice_of_process(pid: u32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split(' ').nth(16)?.parse().ok()
}

/// Sandboxes built ahead wait at the lowest priority (their building would otherwise hold
/// back the answer of the call that just ended, on the same core), and the call that
/// takes one runs its command at the executor's priority.
#[test]
fn sandboxes_built_ahead_wait_at_the_lowest_priority_and_calls_run_at_the_normal_one() {
    let Some(rig) = Rig::new() else { return };
    let sandbox = &rig.ahead;
    let normal =
        nl2sh_proto::sys::thread::nice_of(nl2sh_proto::sys::thread::this_thread()).expect("nice");
    let lowers = nl2sh_proto::sys::thread::restorable_nice().is_some();
    let waiting = if lowers { 19 } else { normal };
    block_on(async {
        assert!(sandbox.availability().await.is_ready());
        ready_ahead(sandbox, WARM_TARGET).await;
        // The helpers of the sandboxes ready, and the payload process each has forked.
        let helpers = sandbox.ready_helpers();
        assert_eq!(helpers.len(), WARM_TARGET);
        for helper in helpers {
            let children =
                std::fs::read_to_string(format!("/proc/{helper}/task/{helper}/children"))
                    .unwrap_or_default();
            let mut waiting_processes: Vec<u32> = children
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            assert_eq!(waiting_processes.len(), 1, "helper {helper}: {children:?}");
            waiting_processes.push(helper);
            for pid in waiting_processes {
                assert_eq!(
                    nice_of_process(pid),
                    Some(waiting),
                    "process {pid} of helper {helper}"
                );
            }
        }
        for _ in 0..2 {
            let out = sh_here(sandbox, "nice").await;
            assert!(out.success(), "{}", text(&out));
            assert_eq!(
                out.stdout.text().trim(),
                normal.to_string(),
                "the call's nice"
            );
        }
        assert_eq!(
            sandbox.served_ahead(),
            2,
            "sandboxes built ahead served the calls"
        );
        // Tried as an attacker: a command cannot take a higher priority than the
        // executor's (no CAP_SYS_NICE, no RLIMIT_NICE) to starve other callers. `nice`
        // warns and runs the inner `nice` at the priority it was left at.
        let out = sh_here(sandbox, "nice -n -5 nice").await;
        assert_eq!(
            out.stdout.text().trim(),
            normal.to_string(),
            "{}",
            text(&out)
        );
    });
}

/// How many of this process's descriptors are mount namespaces (`mnt:[…]`).
fn mount_namespaces_held() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("mnt:["))
                .count()
        })
        .unwrap_or(0)
}

/// A sandbox built ahead is used only while young: its masks were expanded when it was
/// built, so a secret path created since would not be hidden in it.
#[test]
fn a_sandbox_built_ahead_too_long_ago_is_not_used() {
    let Some(rig) = Rig::new() else { return };
    let sandbox = &rig.stale;
    block_on(async {
        assert!(sandbox.availability().await.is_ready());
        ready_ahead(sandbox, WARM_TARGET).await;
        for _ in 0..2 {
            let out = sh_here(sandbox, "id -u").await;
            assert!(out.success(), "{}", text(&out));
            ready_ahead(sandbox, WARM_TARGET).await;
        }
        assert_eq!(sandbox.served_ahead(), 0, "a stale sandbox served a call");
    });
}

/// A call is answered from what the helper says on stderr once its payload has ended, not
/// when the helper has exited (the exit of a process that built a sandbox is slow):
/// here the helper's parent lingers, and the call still has its answer, whole.
#[test]
fn a_call_is_answered_once_its_payload_ended_not_when_the_helper_exits() {
    let Some(rig) = Rig::new() else { return };
    let sandbox = &rig.lingering;
    let out = sh(sandbox, "echo out; echo err >&2; exit 7");
    assert!(
        !out.timed_out,
        "the call waited for its helper's parent to exit"
    );
    assert_eq!(out.exit_code, Some(7), "{}", text(&out));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout.text(), "out\n");
    assert_eq!(out.stderr.text(), "err\n", "the record is not output");
    // A command that writes a record of its own as its last bytes (exit 0) and exits 5:
    // the helper's comes after it, so the call says 5 and the forged bytes are output.
    let out = sh(sandbox, "printf '\\000nl2sh-exit:e\\000' >&2; exit 5");
    assert_eq!(out.exit_code, Some(5), "{}", text(&out));
    assert_eq!(out.stderr.bytes, b"\0nl2sh-exit:e\0");
    // A command that closes its own output early is still waited for: the pipes end only
    // when the helper, which holds stderr, has said how the command ended.
    let out = sh(sandbox, "exec >&- 2>&-; sleep 0.5; exit 4");
    assert_eq!(out.exit_code, Some(4), "{}", text(&out));
    // More stderr than is kept: the record still ends the run, and is not counted.
    let out = sh(sandbox, "head -c 70000 /dev/zero >&2; exit 3");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stderr.bytes.len(), 64 * 1024);
    assert_eq!(out.stderr.dropped, 70000 - 64 * 1024);
}
