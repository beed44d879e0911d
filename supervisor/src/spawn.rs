//! Starting the workers: fork + exec of this same executable with a hidden role argument,
//! channels at fixed fd numbers, everything else closed, an explicit environment, and for
//! netd an unprivileged identity applied before exec.
//!
//! The topology is not written here: `Tree::spawn` walks `nl2sh_proto::topology::TOPOLOGY`,
//! makes one socketpair per channel and hands each end to the role and descriptor number
//! the table names.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use nl2sh_proto::channels::fds;
use nl2sh_proto::handshake::Role;
use nl2sh_proto::topology::TOPOLOGY;

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
    /// Start the workers. `netd_io` stays the caller's: a restarted tree gets the same
    /// listener.
    pub fn spawn(
        netd_io: &NetdIo,
        netd_identity: &NetdIdentity,
        log_filter: &str,
    ) -> io::Result<Self> {
        // What can fail before any process exists, first.
        let root = nix::unistd::geteuid().is_root();
        let netd_drop = root.then(|| drop_target(netd_identity)).transpose()?;

        // One socketpair per channel of the table; the supervisor keeps its asking ends
        // of the control channels, every other end goes to its role at its number.
        let mut controls: Vec<(Role, UnixStream)> = Vec::new();
        let mut inherited: Vec<(Role, OwnedFd, i32)> = Vec::new();
        for edge in TOPOLOGY.iter() {
            let (Some(answerer_fd), true) = (edge.answerer_fd, is_worker(edge.answerer)) else {
                continue; // connected at run time (approvals.sock)
            };
            let (asker_end, answerer_end) = UnixStream::pair()?;
            inherited.push((edge.answerer, OwnedFd::from(answerer_end), answerer_fd));
            match (edge.asker, edge.asker_fd) {
                (Role::Supervisor, _) => controls.push((edge.answerer, asker_end)),
                (role, Some(fd)) if is_worker(role) => {
                    inherited.push((role, OwnedFd::from(asker_end), fd))
                }
                (role, _) => {
                    return Err(io::Error::other(format!(
                        "the topology gives {:?}'s end of {:?} no descriptor",
                        role, edge.kind
                    )))
                }
            }
        }
        let fds_of = |role: Role| -> Vec<(i32, i32)> {
            inherited
                .iter()
                .filter(|(r, ..)| *r == role)
                .map(|(_, end, fd)| (end.as_raw_fd(), *fd))
                .collect()
        };
        let mut control_of = |role: Role| -> io::Result<UnixStream> {
            let at = controls
                .iter()
                .position(|(r, _)| *r == role)
                .ok_or_else(|| io::Error::other(format!("no control channel for {role:?}")))?;
            Ok(controls.swap_remove(at).1)
        };
        let mut netd_fds = fds_of(Role::Netd);
        if let NetdIo::Listener(l) = netd_io {
            netd_fds.push((l.as_raw_fd(), fds::NETD_LISTENER));
        }
        let specs = [
            WorkerSpec {
                role: Role::Approvald,
                fds: fds_of(Role::Approvald),
                env: APPROVALD_ENV,
                drop_to: None,
                no_new_privs: false,
                keep_stdio: false,
                control: control_of(Role::Approvald)?,
            },
            WorkerSpec {
                role: Role::Executor,
                fds: fds_of(Role::Executor),
                env: EXECUTOR_ENV,
                drop_to: None,
                no_new_privs: false,
                keep_stdio: false,
                control: control_of(Role::Executor)?,
            },
            WorkerSpec {
                role: Role::Netd,
                fds: netd_fds,
                env: &[],
                drop_to: netd_drop,
                no_new_privs: true,
                keep_stdio: matches!(netd_io, NetdIo::Stdio),
                control: control_of(Role::Netd)?,
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
        // The workers' ends of the channels close when this returns: from now on only the
        // workers hold them (and the caller the listener, for a restart).
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

fn is_worker(role: Role) -> bool {
    nl2sh_proto::topology::Worker::of(role).is_some()
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
