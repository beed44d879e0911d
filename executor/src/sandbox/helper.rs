//! The sandbox helper: `nl2sh __nl2sh-sandbox`, started by the executor for every
//! sandboxed action (or ahead of one, ready for the next call). It runs as root,
//! single-threaded, reads its [`SandboxPlan`] from stdin, enters new mount and PID
//! namespaces, builds the read-only view ([`super::mounts`]), and starts the payload,
//! which becomes pid 1 of the new PID namespace, drops to the sandbox identity and is
//! confined ([`super::confine`]). Only then does the payload read the call itself, a
//! [`SandboxCall`], from stdin (what follows is the command's stdin) and run it. So a
//! sandbox built ahead of time waits, fully confined, for a call it cannot yet know; each
//! serves one call. The helper waits and exits as the payload did. When pid 1 exits, the
//! kernel kills everything else in its namespace, so nothing the payload started outlives
//! it; without PID namespaces the helper is a child subreaper and kills what is left.
//!
//! A failure before the payload runs is reported on stderr as one line starting with
//! [`SETUP_MARKER`] and exit status [`SETUP_FAILED`].

use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;

use nix::sched::{unshare, CloneFlags};
use serde_json::json;

use nl2sh_proto::channels::{SandboxCall, SandboxPayload, SandboxPlan};

use super::{confine, mounts, READY_BYTE, SETUP_FAILED, SETUP_MARKER};
use crate::runtime::exec;
use crate::sys::sandbox::{die_of, spawn_sharing_memory};

const OOM_SCORE_ADJ: &str = "1000";
/// Largest plan accepted on stdin.
const MAX_PLAN_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
enum HelperError {
    #[error("reading the plan: {0}")]
    Plan(String),
    #[error("the sandbox helper must run as root (euid {0})")]
    NotRoot(u32),
    #[error("entering a new mount namespace: {0}")]
    Namespace(nix::Error),
    #[error("{0}")]
    Mounts(#[from] mounts::MountError),
    #[error("starting the payload: {0}")]
    Fork(std::io::Error),
    #[error("{0}")]
    Confine(#[from] confine::ConfineError),
    #[error("working directory {0}: {1}")]
    Cwd(String, nix::Error),
    #[error("joining the call's cgroup ({0}): {1}")]
    Cgroup(String, std::io::Error),
}

/// Entry point of the hidden helper role.
pub fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn report(e: &HelperError) {
    let _ = writeln!(std::io::stderr(), "{SETUP_MARKER}{e}");
}

/// Read exactly `buf.len()` bytes of fd 0, without buffering past them (the rest of
/// stdin belongs to the payload).
fn read_exact_stdin(buf: &mut [u8]) -> Result<(), HelperError> {
    let stdin = std::io::stdin();
    let mut filled = 0;
    while filled < buf.len() {
        match nix::unistd::read(stdin.as_fd(), &mut buf[filled..]) {
            Ok(0) => return Err(HelperError::Plan("stdin ended inside the plan".into())),
            Ok(n) => filled += n,
            Err(nix::Error::EINTR) => {}
            Err(e) => return Err(HelperError::Plan(e.to_string())),
        }
    }
    Ok(())
}

/// The next frame of type `T` on stdin (a length, then that many bytes), read without
/// buffering past it.
fn read_frame<T: nl2sh_proto::frame::Wire>() -> Result<T, HelperError> {
    let mut len = [0u8; 4];
    read_exact_stdin(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_PLAN_BYTES {
        return Err(HelperError::Plan(format!("a frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    read_exact_stdin(&mut body)?;
    nl2sh_proto::frame::decode::<T>(&body)
        .map(|(_, value)| value)
        .map_err(|e| HelperError::Plan(e.to_string()))
}

fn run() -> Result<ExitCode, HelperError> {
    let plan: SandboxPlan = read_frame()?;
    let euid = nix::unistd::geteuid().as_raw();
    if euid != 0 {
        return Err(HelperError::NotRoot(euid));
    }
    // The call's cgroup first, from the device's view, so everything the call starts is
    // inside it.
    for procs in &plan.cgroup_procs {
        std::fs::write(procs, std::process::id().to_string())
            .map_err(|e| HelperError::Cgroup(procs.clone(), e))?;
    }
    // What the kernel should kill first when memory runs out: the sandboxed command (it
    // inherits this), before any of nl2sh's own processes or the device's. Set before the
    // view makes /proc read-only; best effort.
    let _ = std::fs::write("/proc/self/oom_score_adj", OOM_SCORE_ADJ);
    // A PID namespace where the kernel has one; the mount namespace is essential.
    let pid_namespace = unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID).is_ok();
    if !pid_namespace {
        unshare(CloneFlags::CLONE_NEWNS).map_err(HelperError::Namespace)?;
        // Orphans of the payload come to us, and are killed when it ends.
        nix::sys::prctl::set_child_subreaper(true).map_err(HelperError::Namespace)?;
    }
    // An IPC namespace of its own where the kernel has them (it dies with the call, and
    // what was made in it); without one, seccomp refuses System V IPC instead.
    let ipc_namespace = unshare(CloneFlags::CLONE_NEWIPC).is_ok();
    let view = mounts::build(&plan.masks, plan.scratch_bytes)?;
    let helper = nix::unistd::getpid().as_raw();
    // The payload shares the helper's memory until it execs (the helper waits meanwhile):
    // its exec then has no copy of the helper to tear down first.
    let mut work = || match payload(&plan, helper, pid_namespace, ipc_namespace, &view) {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            SETUP_FAILED
        }
    };
    let child = spawn_sharing_memory(&mut work, SETUP_FAILED).map_err(HelperError::Fork)?;
    Ok(wait_for(child, pid_namespace))
}

/// The helper's side: hold nothing of the payload's pipes but stderr, wait, say on
/// stderr how the payload ended ([`exec::exit_record`]), close it, exit as it did.
fn wait_for(child: libc::pid_t, pid_namespace: bool) -> ExitCode {
    use nix::sys::wait::{waitpid, WaitStatus};
    // The executor reads the payload's output until every writer is gone; the helper
    // is one only of stderr, which it closes once it has written the record there.
    let null = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .ok();
    if let Some(null) = &null {
        let _ = nix::unistd::dup2_stdin(null);
        let _ = nix::unistd::dup2_stdout(null);
    }
    let child = nix::unistd::Pid::from_raw(child);
    let status = loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => break Ok(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => break Err(sig as libc::c_int),
            Ok(_) | Err(nix::Error::EINTR) => continue,
            Err(_) => break Ok(i32::from(SETUP_FAILED)),
        }
    };
    if !pid_namespace {
        kill_orphans();
    }
    // Nothing of the payload is left (its PID namespace, or the orphans killed above):
    // the record is the last thing on the pipe, and the call can be answered now, before
    // this process has exited.
    let ended = match status {
        Ok(code) => Ok(u8::try_from(code).unwrap_or(1)),
        Err(sig) => Err(u8::try_from(sig).unwrap_or(libc::SIGKILL as u8)),
    };
    // What is left to do here (closing, exiting: tearing down this process's memory,
    // about 0.6 ms) is nobody's wait: at the lowest priority, the executor, woken by the
    // record, answers the call first where they share a core (`perf sched` showed the
    // exit running ahead of the answer).
    let _ = nl2sh_proto::sys::thread::set_nice(0, nl2sh_proto::sys::thread::BACKGROUND_NICE);
    let _ = std::io::stderr().write_all(&exec::exit_record(ended));
    match &null {
        Some(null) => {
            let _ = nix::unistd::dup2_stderr(null);
        }
        None => {
            let _ = nix::unistd::close(2);
        }
    }
    match status {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(sig) => {
            die_of(sig);
            ExitCode::from(128u8.saturating_add(sig as u8))
        }
    }
}

/// Without a PID namespace: every process that re-parented to us (the helper is a
/// subreaper) is what the payload left behind. Kill and reap until none is left.
fn kill_orphans() {
    use nix::sys::signal::{kill, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let me = nix::unistd::getpid().as_raw();
    for _ in 0..1000 {
        let children = children_of(me);
        if children.is_empty() {
            break;
        }
        for pid in &children {
            let _ = kill(nix::unistd::Pid::from_raw(*pid), Signal::SIGKILL);
        }
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::__WALL)) {
            if status.pid().is_none() {
                break;
            }
        }
    }
}

/// Direct children of `pid`, from `/proc/*/stat`.
fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&p| {
            let stat = u32::try_from(p)
                .ok()
                .and_then(nl2sh_proto::procfs::Stat::of);
            let parent = stat.and_then(|s| libc::pid_t::try_from(s.ppid().ok()?).ok());
            parent == Some(pid)
        })
        .collect()
}

/// The payload's side: confine, then do what the plan says.
fn payload(
    plan: &SandboxPlan,
    helper: libc::pid_t,
    pid_namespace: bool,
    ipc_namespace: bool,
    view: &mounts::View,
) -> Result<u8, HelperError> {
    // In a PID namespace the helper is outside it and the payload sees parent pid 0.
    let parent = if pid_namespace { 0 } else { helper };
    confine::drop_identity(plan.uid, plan.gid, parent, plan.limits)?;
    let landlock = confine::landlock(mounts::SCRATCH_DIR);
    let seccomp = confine::seccomp(ipc_namespace)?;
    let applied = confine::Applied {
        uid: plan.uid,
        gid: plan.gid,
        seccomp,
        landlock,
    };
    // Confined: say so (the executor reads this one byte before anything else of
    // stdout), then wait for the call. A sandbox built ahead of time waits here.
    let _ = nix::unistd::write(std::io::stdout(), &[READY_BYTE]);
    let call: SandboxCall = read_frame()?;
    // Without a `cwd`, `/`, as an unconfined command (runtime::exec::START_DIR).
    let cwd = call.cwd.as_deref().unwrap_or("/");
    nix::unistd::chdir(cwd).map_err(|e| HelperError::Cwd(cwd.to_string(), e))?;
    match &call.payload {
        SandboxPayload::Probe => {
            let mut parts = applied.to_json();
            parts["mount_namespace"] = json!(format!(
                "every mount read-only ({}), {} secret locations masked, minimal /dev{}",
                view.read_only_by.as_str(),
                view.masked,
                if view.device_shm {
                    " with /dev/shm read-only"
                } else {
                    ""
                }
            ));
            parts["pid_namespace"] = json!(if pid_namespace {
                "on"
            } else {
                "off (kernel): leftover processes are killed when the call ends"
            });
            parts["ipc_namespace"] = json!(if ipc_namespace {
                "on"
            } else {
                "off (kernel): System V IPC and POSIX message queues are refused"
            });
            parts["host_sockets"] =
                json!("refused: no Unix or IP sockets (socketpairs and netlink queries only)");
            parts["file_locks"] = json!("refused (ENOLCK)");
            parts["tmpdir"] = json!(mounts::SCRATCH_DIR);
            println!("{parts}");
            Ok(0)
        }
        SandboxPayload::Exec { argv } => Err(exec(argv, call.path_var.as_deref())),
        SandboxPayload::ReadFile {
            path,
            offset,
            length,
        } => Ok(print_result(crate::tools::fs::read_file(
            std::path::Path::new(path),
            *offset,
            *length,
        ))),
        SandboxPayload::ListDir {
            path,
            hidden,
            limit,
        } => Ok(print_result(crate::tools::fs::list_dir(
            std::path::Path::new(path),
            *hidden,
            *limit as usize,
        ))),
    }
}

fn print_result(result: Result<serde_json::Value, String>) -> u8 {
    match result {
        Ok(value) => {
            println!("{value}");
            0
        }
        Err(error) => {
            println!("{}", json!({ "error": error }));
            1
        }
    }
}

/// Replace the payload process with the program; returns only on failure.
fn exec(argv: &[String], path_var: Option<&str>) -> HelperError {
    use std::ffi::CString;
    let args: Result<Vec<CString>, _> = argv.iter().map(|a| CString::new(a.as_bytes())).collect();
    let Ok(args) = args else {
        return HelperError::Plan("an argument contains a NUL byte".into());
    };
    let Some(program) = args.first() else {
        return HelperError::Plan("empty command".into());
    };
    // The lookup of argv[0] reads this process's PATH, and the program gets it too. (The
    // payload is single-threaded: nothing reads the environment meanwhile.)
    if let Some(path) = path_var {
        std::env::set_var("PATH", path);
    }
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != "TMPDIR")
        .filter_map(|(k, v)| {
            use std::os::unix::ffi::OsStrExt;
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    if let Ok(tmp) = CString::new(format!("TMPDIR={}", mounts::SCRATCH_DIR)) {
        env.push(tmp);
    }
    match nix::unistd::execvpe(program, &args, &env) {
        Err(e) => HelperError::Plan(format!("cannot run {}: {e}", argv[0])),
        Ok(never) => match never {},
    }
}
