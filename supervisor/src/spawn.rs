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
        let (sup_netd, netd_sup) = UnixStream::pair()?;
        let (sup_exec, exec_sup) = UnixStream::pair()?;
        let (sup_appr, appr_sup) = UnixStream::pair()?;
        // Servers don't talk to each other except along these three edges.
        let (netd_exec, exec_netd) = UnixStream::pair()?;
        let (netd_appr, appr_netd) = UnixStream::pair()?;
        let (exec_appr, appr_exec) = UnixStream::pair()?;

        let root = nix::unistd::geteuid().is_root();
        let mut workers = Vec::with_capacity(3);

        let appr_fds = [
            (appr_sup.as_raw_fd(), fds::SUPERVISOR),
            (appr_netd.as_raw_fd(), fds::APPROVALD_NETD),
            (appr_exec.as_raw_fd(), fds::APPROVALD_EXECUTOR),
        ];
        let child = spawn_one(
            Role::Approvald,
            &appr_fds,
            APPROVALD_ENV,
            None,
            false,
            log_filter,
            false,
        )?;
        workers.push(Worker {
            role: Role::Approvald,
            child,
            control: sup_appr,
        });
        drop((appr_sup, appr_netd, appr_exec));

        let exec_fds = [
            (exec_sup.as_raw_fd(), fds::SUPERVISOR),
            (exec_netd.as_raw_fd(), fds::EXECUTOR_NETD),
            (exec_appr.as_raw_fd(), fds::EXECUTOR_APPROVALD),
        ];
        let child = spawn_one(
            Role::Executor,
            &exec_fds,
            EXECUTOR_ENV,
            None,
            false,
            log_filter,
            false,
        );
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut workers);
                return Err(e);
            }
        };
        workers.push(Worker {
            role: Role::Executor,
            child,
            control: sup_exec,
        });
        drop((exec_sup, exec_netd, exec_appr));

        let mut netd_fds = vec![
            (netd_sup.as_raw_fd(), fds::SUPERVISOR),
            (netd_exec.as_raw_fd(), fds::NETD_EXECUTOR),
            (netd_appr.as_raw_fd(), fds::NETD_APPROVALD),
        ];
        let stdio = matches!(netd_io, NetdIo::Stdio);
        if let NetdIo::Listener(l) = &netd_io {
            netd_fds.push((l.as_raw_fd(), fds::NETD_LISTENER));
        }
        let drop_to = root.then(|| drop_target(netd_identity)).transpose()?;
        let child = spawn_one(Role::Netd, &netd_fds, &[], drop_to, true, log_filter, stdio);
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut workers);
                return Err(e);
            }
        };
        workers.push(Worker {
            role: Role::Netd,
            child,
            control: sup_netd,
        });
        // netd_io (the listener) is dropped here: only netd holds it from now on.
        Ok(Self { workers })
    }
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

fn spawn_one(
    role: Role,
    inherit: &[(i32, i32)],
    env: &[&str],
    drop_to: Option<DropTo>,
    no_new_privs: bool,
    log_filter: &str,
    keep_stdio: bool,
) -> io::Result<Child> {
    let mut plan = ChildPlan {
        fds: [(-1, -1); MAX_INHERITED],
        n_fds: inherit.len(),
        parent: std::process::id() as libc::pid_t,
        drop_to,
        no_new_privs,
    };
    plan.fds[..inherit.len()].copy_from_slice(inherit);
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("nl2sh")
        .arg(crate::WORKER_ARG)
        .arg(role.as_str())
        .arg(log_filter)
        .env_clear()
        .envs(kept_env(env));
    if keep_stdio {
        cmd.stdin(Stdio::inherit()).stdout(Stdio::inherit());
    } else {
        // Workers never write stdout: in stdio mode it belongs to MCP, in HTTP mode to
        // the startup block. Anything they print goes to stderr.
        cmd.stdin(Stdio::null()).stdout(std::io::stderr());
    }
    cmd.stderr(Stdio::inherit());
    sys::install(&mut cmd, plan);
    cmd.spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("starting {}: {e}", role.as_str())))
}
