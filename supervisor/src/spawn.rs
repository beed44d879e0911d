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
    /// The supervisor's answering end of the Web console's discovery channel, when the
    /// tree has a Web console.
    pub discovery: Option<UnixStream>,
    /// Ends whose peer role this tree does not run (netd and the executor in a Web
    /// console without protocols, the Web console in `protocol serve`): held open and
    /// never greeted, so the worker on the other side waits at that channel's handshake
    /// instead of seeing its peer die. Closed with the tree.
    pub parked: Vec<UnixStream>,
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
    /// No protocols (a Web console alone): neither netd nor the executor runs.
    Off,
}

/// The Web console of a tree: its listener and identity.
pub struct WebIo {
    pub listener: OwnedFd,
    pub identity: NetdIdentity,
}

impl Tree {
    /// Start the workers. `netd_io` and `web` stay the caller's: a restarted tree gets the
    /// same listeners.
    pub fn spawn(
        netd_io: &NetdIo,
        netd_identity: &NetdIdentity,
        web: Option<&WebIo>,
        log_filter: &str,
    ) -> io::Result<Self> {
        // What can fail before any process exists, first.
        let root = nix::unistd::geteuid().is_root();
        let netd_drop = root.then(|| drop_target(netd_identity)).transpose()?;
        let web_drop = match web {
            Some(w) if root => Some(drop_target(&w.identity)?),
            _ => None,
        };
        let protocols = !matches!(netd_io, NetdIo::Off);
        let runs = |role: Role| match role {
            Role::Netd | Role::Executor => protocols,
            Role::Web => web.is_some(),
            Role::Approvald => true,
            Role::Supervisor | Role::Cli => false,
        };
        let mut channels = Channels::make(&runs)?;
        if web.is_none() {
            channels.discovery = None;
        }
        let specs = worker_specs(
            &mut channels,
            netd_io,
            netd_drop,
            web.map(|w| (w, web_drop)),
        )?;
        let workers = spawn_all(specs, log_filter)?;
        // The workers' ends of the channels close when this returns: from now on only the
        // workers hold them (and the caller the listeners, for a restart).
        Ok(Self {
            workers,
            discovery: channels.discovery,
            parked: channels.parked,
        })
    }
}

/// One tree's socketpairs, one per channel of the table: the supervisor keeps its asking
/// ends of the control channels (and its answering end of discovery), every other end
/// goes to its role at its number, or is parked when that role does not run here.
struct Channels {
    controls: Vec<(Role, UnixStream)>,
    /// (role, end, descriptor number in the role)
    inherited: Vec<(Role, OwnedFd, i32)>,
    parked: Vec<UnixStream>,
    discovery: Option<UnixStream>,
}

impl Channels {
    fn make(runs: &dyn Fn(Role) -> bool) -> io::Result<Channels> {
        let mut channels = Channels {
            controls: Vec::new(),
            inherited: Vec::new(),
            parked: Vec::new(),
            discovery: None,
        };
        for edge in TOPOLOGY.iter() {
            // Connected at run time (approvals.sock), or between roles none of which runs.
            let placed = |role: Role, fd: Option<i32>| fd.is_some() && is_worker(role);
            if !(placed(edge.answerer, edge.answerer_fd) || placed(edge.asker, edge.asker_fd)) {
                continue;
            }
            if edge.asker == Role::Supervisor && !runs(edge.answerer) {
                continue; // the control channel of a worker this tree does not start
            }
            let (asker_end, answerer_end) = UnixStream::pair()?;
            for (role, fd, end, supervisor_side) in [
                (
                    edge.answerer,
                    edge.answerer_fd,
                    answerer_end,
                    Role::Supervisor == edge.answerer,
                ),
                (
                    edge.asker,
                    edge.asker_fd,
                    asker_end,
                    Role::Supervisor == edge.asker,
                ),
            ] {
                match (supervisor_side, fd) {
                    (true, _) if edge.asker == Role::Web => channels.discovery = Some(end),
                    (true, _) => channels.controls.push((edge.answerer, end)),
                    (false, Some(fd)) if runs(role) => {
                        channels.inherited.push((role, OwnedFd::from(end), fd))
                    }
                    (false, Some(_)) => channels.parked.push(end),
                    (false, None) => {
                        return Err(io::Error::other(format!(
                            "the topology gives {:?}'s end of {:?} no descriptor",
                            role, edge.kind
                        )))
                    }
                }
            }
        }
        Ok(channels)
    }

    /// (descriptor here, number in the worker) of each end `role` inherits.
    fn fds_of(&self, role: Role) -> Vec<(i32, i32)> {
        self.inherited
            .iter()
            .filter(|(r, ..)| *r == role)
            .map(|(_, end, fd)| (end.as_raw_fd(), *fd))
            .collect()
    }

    /// The supervisor's end of `role`'s control channel, once.
    fn control_of(&mut self, role: Role) -> io::Result<UnixStream> {
        let at = self
            .controls
            .iter()
            .position(|(r, _)| *r == role)
            .ok_or_else(|| io::Error::other(format!("no control channel for {role:?}")))?;
        Ok(self.controls.swap_remove(at).1)
    }
}

/// The workers a tree starts, in order: approvald; the executor and netd when it serves
/// the protocols; the Web console when it has one (with its identity to drop to).
fn worker_specs(
    channels: &mut Channels,
    netd_io: &NetdIo,
    netd_drop: Option<DropTo>,
    web: Option<(&WebIo, Option<DropTo>)>,
) -> io::Result<Vec<WorkerSpec>> {
    let mut specs = vec![WorkerSpec {
        role: Role::Approvald,
        fds: channels.fds_of(Role::Approvald),
        env: APPROVALD_ENV,
        drop_to: None,
        no_new_privs: false,
        keep_stdio: false,
        control: channels.control_of(Role::Approvald)?,
    }];
    if !matches!(netd_io, NetdIo::Off) {
        let mut netd_fds = channels.fds_of(Role::Netd);
        if let NetdIo::Listener(l) = netd_io {
            netd_fds.push((l.as_raw_fd(), fds::NETD_LISTENER));
        }
        specs.push(WorkerSpec {
            role: Role::Executor,
            fds: channels.fds_of(Role::Executor),
            env: EXECUTOR_ENV,
            drop_to: None,
            no_new_privs: false,
            keep_stdio: false,
            control: channels.control_of(Role::Executor)?,
        });
        specs.push(WorkerSpec {
            role: Role::Netd,
            fds: netd_fds,
            env: &[],
            drop_to: netd_drop,
            no_new_privs: true,
            keep_stdio: matches!(netd_io, NetdIo::Stdio),
            control: channels.control_of(Role::Netd)?,
        });
    }
    if let Some((w, web_drop)) = web {
        let mut web_fds = channels.fds_of(Role::Web);
        web_fds.push((w.listener.as_raw_fd(), fds::WEB_LISTENER));
        specs.push(WorkerSpec {
            role: Role::Web,
            fds: web_fds,
            env: &[],
            drop_to: web_drop,
            no_new_privs: true,
            keep_stdio: false,
            control: channels.control_of(Role::Web)?,
        });
    }
    Ok(specs)
}

/// Start each worker; when one cannot start, those already started are killed.
fn spawn_all(specs: Vec<WorkerSpec>, log_filter: &str) -> io::Result<Vec<Worker>> {
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
    Ok(workers)
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
            "an unprivileged worker's uid and gid must not be 0",
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
