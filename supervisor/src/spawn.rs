//! Starting the workers: fork + exec of this same executable with a hidden role argument,
//! channels at fixed fd numbers, everything else closed, an explicit environment, and for
//! netd an unprivileged identity applied before exec.
//!
//! The topology (DESIGN.md §3) is written down once, in `Tree::spawn`.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use nl2sh_proto::channels::fds;
use nl2sh_proto::handshake::Role;

use crate::sys::{self, ChildPlan, DropTo, MAX_INHERITED};

/// Variables the executor keeps so tools resolve and format as in the launching shell.
const EXECUTOR_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "TZ",
    // Android runtime layout, needed by `am`, `pm` and friends.
    "ANDROID_ROOT",
    "ANDROID_DATA",
    "ANDROID_ART_ROOT",
    "ANDROID_I18N_ROOT",
    "ANDROID_TZDATA_ROOT",
    "ANDROID_RUNTIME_ROOT",
    "ANDROID_STORAGE",
    "EXTERNAL_STORAGE",
    "BOOTCLASSPATH",
    "DEX2OATBOOTCLASSPATH",
    "SYSTEMSERVERCLASSPATH",
    "ASEC_MOUNTPOINT",
];
/// approvald formats times; nothing else.
const APPROVALD_ENV: &[&str] = &["TZ"];

fn kept_env(names: &[&str]) -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            names.contains(&k.as_ref()) || (k.starts_with("LC_") && names.contains(&"LANG"))
        })
        .collect()
}

/// How netd's identity is dropped.
#[derive(Debug, Clone)]
pub struct NetdIdentity {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The supervisor's ends of the control channels and the running children.
pub struct Tree {
    pub workers: Vec<Worker>,
}

pub struct Worker {
    pub role: Role,
    pub child: Child,
    pub control: UnixStream,
}

pub enum NetdIo {
    /// HTTP: the listener the supervisor bound.
    Listener(OwnedFd),
    /// stdio: netd inherits stdin and stdout.
    Stdio,
}

impl Tree {
    pub fn spawn(
        netd_io: NetdIo,
        netd_identity: &NetdIdentity,
        log_filter: &str,
    ) -> io::Result<Self> {
        // What can fail before any process exists, first.
        let root = nix::unistd::geteuid().is_root();
        let netd_drop = root.then(|| drop_target(netd_identity)).transpose()?;

        let (sup_netd, netd_sup) = UnixStream::pair()?;
        let (sup_exec, exec_sup) = UnixStream::pair()?;
        let (sup_appr, appr_sup) = UnixStream::pair()?;
        // Servers don't talk to each other except along these three edges.
        let (netd_exec, exec_netd) = UnixStream::pair()?;
        let (netd_appr, appr_netd) = UnixStream::pair()?;
        let (exec_appr, appr_exec) = UnixStream::pair()?;

        let mut netd_fds = vec![
            (netd_sup.as_raw_fd(), fds::SUPERVISOR),
            (netd_exec.as_raw_fd(), fds::NETD_EXECUTOR),
            (netd_appr.as_raw_fd(), fds::NETD_APPROVALD),
        ];
        if let NetdIo::Listener(l) = &netd_io {
            netd_fds.push((l.as_raw_fd(), fds::NETD_LISTENER));
        }
        let specs = [
            WorkerSpec {
                role: Role::Approvald,
                fds: vec![
                    (appr_sup.as_raw_fd(), fds::SUPERVISOR),
                    (appr_netd.as_raw_fd(), fds::APPROVALD_NETD),
                    (appr_exec.as_raw_fd(), fds::APPROVALD_EXECUTOR),
                ],
                env: APPROVALD_ENV,
                drop_to: None,
                no_new_privs: false,
                keep_stdio: false,
                control: sup_appr,
            },
            WorkerSpec {
                role: Role::Executor,
                fds: vec![
                    (exec_sup.as_raw_fd(), fds::SUPERVISOR),
                    (exec_netd.as_raw_fd(), fds::EXECUTOR_NETD),
                    (exec_appr.as_raw_fd(), fds::EXECUTOR_APPROVALD),
                ],
                env: EXECUTOR_ENV,
                drop_to: None,
                no_new_privs: false,
                keep_stdio: false,
                control: sup_exec,
            },
            WorkerSpec {
                role: Role::Netd,
                fds: netd_fds,
                env: &[],
                drop_to: netd_drop,
                no_new_privs: true,
                keep_stdio: matches!(netd_io, NetdIo::Stdio),
                control: sup_netd,
            },
        ];
        let mut workers = Vec::with_capacity(specs.len());
        for spec in specs {
            match spawn_one(&spec, log_filter) {
                Ok(child) => workers.push(Worker {
                    role: spec.role,
                    child,
                    control: spec.control,
                }),
                Err(e) => {
                    kill_all(&mut workers);
                    return Err(e);
                }
            }
        }
        // The workers' ends of the channels and the listener close when this returns:
        // from now on only the workers hold them.
        Ok(Self { workers })
    }
}

/// One worker to start: its descriptors, environment and identity.
struct WorkerSpec {
    role: Role,
    /// (descriptor here, number in the worker)
    fds: Vec<(i32, i32)>,
    /// Names of the environment variables it keeps.
    env: &'static [&'static str],
    drop_to: Option<DropTo>,
    no_new_privs: bool,
    /// netd in stdio mode serves MCP on the inherited stdin/stdout.
    keep_stdio: bool,
    /// The supervisor's end of its control channel.
    control: UnixStream,
}

pub fn kill_all(workers: &mut [Worker]) {
    for w in workers.iter_mut() {
        let _ = w.child.kill();
    }
    for w in workers.iter_mut() {
        let _ = w.child.wait();
    }
}

fn drop_target(id: &NetdIdentity) -> io::Result<DropTo> {
    if id.uid == 0 || id.gid == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "netd_uid/netd_gid must not be 0",
        ));
    }
    if id.groups.len() > 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "netd keeps at most 4 groups",
        ));
    }
    let mut groups = [0; 4];
    groups[..id.groups.len()].copy_from_slice(&id.groups);
    let cap_last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    Ok(DropTo {
        uid: id.uid,
        gid: id.gid,
        groups,
        n_groups: id.groups.len(),
        cap_last,
    })
}

fn spawn_one(spec: &WorkerSpec, log_filter: &str) -> io::Result<Child> {
    if spec.fds.len() > MAX_INHERITED {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many inherited descriptors",
        ));
    }
    let mut plan = ChildPlan {
        fds: [(-1, -1); MAX_INHERITED],
        n_fds: spec.fds.len(),
        parent: std::process::id() as libc::pid_t,
        drop_to: spec.drop_to,
        no_new_privs: spec.no_new_privs,
    };
    plan.fds[..spec.fds.len()].copy_from_slice(&spec.fds);
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("nl2sh")
        .arg(crate::WORKER_ARG)
        .arg(spec.role.as_str())
        .arg(log_filter)
        .env_clear()
        .envs(kept_env(spec.env));
    if spec.keep_stdio {
        cmd.stdin(Stdio::inherit()).stdout(Stdio::inherit());
    } else {
        // Workers never write stdout: in stdio mode it belongs to MCP, in HTTP mode to
        // the startup block. Anything they print goes to stderr.
        cmd.stdin(Stdio::null()).stdout(std::io::stderr());
    }
    cmd.stderr(Stdio::inherit());
    sys::install(&mut cmd, plan);
    cmd.spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("starting {}: {e}", spec.role.as_str())))
}
