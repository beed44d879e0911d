//! `nl2sh protocol serve`: check everything that can be checked before a process exists,
//! take the state lock, bind the listener, start the tree, announce it, then supervise
//! until a signal or a worker's death.
//!
//! The rooms, in the order a start goes through them: `prepare` (the checks before any
//! process exists, and the state lock), `listen` (binding), `tree` (each worker's `Start`
//! and a set's start), `announce` (connection.json and the startup lines), `supervise`
//! with `restart` (the restart policy), `signals` and `drain` (stopping). This file holds
//! the order itself.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use nl2sh_proto::channels::{
    ApprovaldSettings, ExecutorSettings, HttpSettings, ModelSetup, NetdSettings, NetdTransport,
    UidRange, WebSettings,
};

use crate::advertise;
use crate::cli::ServeArgs;
use crate::config;
use crate::discovery::Discovery;
use crate::spawn::{NetdIdentity, NetdIo, Tree, WebIo};
use crate::state;
use crate::token;

mod announce;
mod drain;
mod listen;
mod prepare;
mod restart;
mod signals;
mod supervise;
mod tree;

use prepare::Announcement;
use restart::Restart;
use signals::StopSignals;
use tree::{start_tree, Starts};

/// When memory runs out the kernel should end a sandboxed command first (they set 1000),
/// then a worker (the supervisor restarts it), and the supervisor last: without it
/// nothing restarts.
const SUPERVISOR_OOM_SCORE_ADJ: &str = "-900";
pub const WORKER_OOM_SCORE_ADJ: &str = "0";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("{0}")]
    Token(#[from] token::TokenError),
    #[error("{0}")]
    Model(#[from] crate::model::ModelConfigError),
    #[error("--advertised-url: {0}")]
    Advertise(#[from] advertise::AdvertiseError),
    #[error("{0}")]
    State(#[from] state::StateError),
    #[error("--host {0:?} is not an IP address")]
    Host(String),
    #[error("--allow-insecure-http=false requires a loopback --host (such as 127.0.0.1); {0} is not loopback")]
    InsecureHttp(IpAddr),
    #[error("web_host {0} is not loopback: the owner's session would cross the network in plain HTTP; set web_allow_insecure_http = true to allow it")]
    InsecureWeb(IpAddr),
    #[error("web_host {0:?} is not an IP address")]
    WebHost(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the worker processes: {0}")]
    Spawn(std::io::Error),
    #[error("{0}")]
    Start(String),
    /// A worker set failed to start because its Web console died while starting (a
    /// restart counts that as one of the console's deaths).
    #[error("{0}")]
    ConsoleDiedStarting(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// Which front door the tree serves.
pub enum Transport {
    Http(ServeArgs),
    /// MCP on this process's stdin/stdout, for a local client that launched us.
    Stdio,
    /// `nl2sh --web-only`: the Web console in the foreground, with MCP/A2A as the managed
    /// service serves them when `protocol_start_with_service = true`, else without.
    WebOnly,
}

/// The transport name `--web-only` announces in discovery.
pub const WEB_ONLY_TRANSPORT: &str = "console";

pub fn serve(config_arg: Option<PathBuf>, transport: Transport) -> ExitCode {
    // The managed service keeps its own log within its cap, from before any worker
    // exists (they inherit its stdout and stderr).
    let capture = match &transport {
        Transport::Http(args) if args.managed_service => {
            let path = config_arg
                .clone()
                .unwrap_or_else(config::default_config_path);
            let service_dir = config::service_dir(&config::absolute(&path));
            crate::service_log::capture(&service_dir).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot cap the service log; it grows until the next start");
                None
            })
        }
        _ => None,
    };
    let code = match run(config_arg, transport) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("nl2sh: {e}");
            crate::exit::Exit::Failure.into()
        }
    };
    if let Some(capture) = capture {
        capture.finish();
    }
    code
}

/// What netd and the Web console serve on, and what they are told at `Start`.
struct Fronts {
    netd_io: NetdIo,
    /// Taken by netd's first `Start`.
    netd_transport: Option<NetdTransport>,
    announcement: Option<Announcement>,
    web_io: Option<WebIo>,
    web_settings: Option<WebSettings>,
}

impl Fronts {
    /// The listeners the checks bound (or stdio), for the tree to inherit.
    fn of(
        http: Option<(std::net::TcpListener, HttpSettings, Announcement)>,
        web: Option<(std::net::TcpListener, WebSettings)>,
        stdio: bool,
        cfg: &config::Config,
    ) -> Fronts {
        let (netd_io, netd_transport, announcement) = match http {
            Some((listener, settings, announcement)) => (
                NetdIo::Listener(OwnedFd::from(listener)),
                Some(NetdTransport::Http(settings)),
                Some(announcement),
            ),
            None if stdio => (NetdIo::Stdio, Some(NetdTransport::Stdio), None),
            // A Web console alone: no netd, no executor, so no settings for them.
            None => (NetdIo::Off, None, None),
        };
        let (web_io, web_settings) = match web {
            Some((listener, settings)) => {
                let (uid, gid) = cfg.web_ids();
                let identity = NetdIdentity {
                    uid,
                    gid,
                    groups: Vec::new(),
                };
                (
                    Some(WebIo {
                        listener: OwnedFd::from(listener),
                        identity,
                    }),
                    Some(settings),
                )
            }
            None => (None, None),
        };
        Fronts {
            netd_io,
            netd_transport,
            announcement,
            web_io,
            web_settings,
        }
    }
}

fn run(config_arg: Option<PathBuf>, transport: Transport) -> Result<ExitCode, ServeError> {
    let prepared = prepare::prepare(config_arg, &transport)?;
    let cfg = &prepared.cfg;
    let redact = crate::model::secrets_to_redact(
        cfg,
        prepared
            .http
            .as_ref()
            .map(|(_, settings, _)| &settings.token),
        &prepared.model,
    );
    let stdio = matches!(transport, Transport::Stdio);
    let mut fronts = Fronts::of(prepared.http, prepared.web, stdio, cfg);
    let (uid, gid, groups) = cfg.netd_ids();
    let identity = NetdIdentity { uid, gid, groups };
    let log_filter =
        std::env::var("NL2SH_LOG").unwrap_or_else(|_| crate::DEFAULT_LOG_FILTER.into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    // Handlers go in before any worker exists: a stop request that arrives while the
    // tree starts is then handled (drained) instead of killing the supervisor outright.
    let mut signals = {
        let _ctx = rt.enter();
        StopSignals::install().map_err(ServeError::Runtime)?
    };
    protect_the_supervisor();
    let tree = Tree::spawn(
        &fronts.netd_io,
        &identity,
        fronts.web_io.as_ref(),
        &log_filter,
    )
    .map_err(ServeError::Spawn)?;
    let (config_path, lock) = (prepared.config_path, prepared.lock);
    let discovery = Arc::new(Discovery {
        paths: lock.paths().clone(),
        identity: config::identity(&config_path),
        config_path: config_path.clone(),
    });
    let starts = first_starts(
        cfg,
        &config_path,
        &prepared.state_dir,
        prepared.model,
        redact,
        &mut fronts,
    );
    let transport_name = prepared.transport_name;
    rt.block_on(async move {
        let mut running = start_tree(tree, starts.clone(), &discovery).await?;
        let worker_pids = Arc::new(Mutex::new(running.pids()));
        let reaper = tokio::spawn(crate::orphans::reap(worker_pids.clone()));
        let (info, connection) =
            announce::announce(lock.paths(), &config_path, transport_name, &fronts, stdio)?;
        let mut restart = Restart {
            netd_io: fronts.netd_io,
            web_io: fronts.web_io,
            discovery,
            identity,
            log_filter,
            starts: starts.for_restart(),
            worker_pids: worker_pids.clone(),
            paths: lock.paths().clone(),
            info,
            connection,
            deaths: VecDeque::new(),
            console_deaths: VecDeque::new(),
            stdio,
            spared: Vec::new(),
        };
        let outcome = supervise::supervise(&mut running, &mut signals, &mut restart).await;
        reaper.abort();
        let mut pids = worker_pids.lock().map(|p| p.clone()).unwrap_or_default();
        pids.extend(&restart.spared);
        let orphans = crate::orphans::kill_all(&pids);
        if orphans > 0 {
            tracing::info!(processes = orphans, "ended processes the tree left behind");
        }
        restart.connection.remove();
        drop(lock);
        Ok(outcome)
    })
}

/// The supervisor ends last when memory runs out, and daemonized tool commands come back
/// to it.
fn protect_the_supervisor() {
    // Lowering the score needs privilege; without it the supervisor keeps its own.
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", SUPERVISOR_OOM_SCORE_ADJ) {
        tracing::debug!(error = %e, "cannot protect the supervisor from the OOM killer");
    }
    // Orphans of the tree (daemonized tool commands) come back to us, so they still
    // descend from the supervisor and end with it.
    if let Err(e) = crate::orphans::become_subreaper() {
        tracing::warn!(error = %e, "cannot become a child subreaper");
    }
}

/// Each worker's first `Start`: netd's transport and model, the executor's paths and
/// sandbox, approvald's store and what it redacts, the Web console's origin.
fn first_starts(
    cfg: &config::Config,
    config_path: &Path,
    state_dir: &Path,
    model: ModelSetup,
    redact: Vec<nl2sh_proto::Secret>,
    fronts: &mut Fronts,
) -> Starts {
    let (sandbox_first, sandbox_count) = cfg.sandbox_uids();
    Starts {
        netd: fronts.netd_transport.take().map(|transport| NetdSettings {
            transport,
            model,
            // TEST HOOK (debug builds only; see NetdSettings::test_violation).
            #[cfg(debug_assertions)]
            test_violation: std::env::var("NL2SH_TEST_NETD_VIOLATION").ok().map(|v| {
                if v == "open-state" {
                    format!("open:{}", state_dir.display())
                } else {
                    v
                }
            }),
        }),
        executor: (!matches!(fronts.netd_io, NetdIo::Off)).then(|| ExecutorSettings {
            config_path: config_path.display().to_string(),
            state_dir: state_dir.display().to_string(),
            sandbox_uids: UidRange {
                first: sandbox_first,
                count: sandbox_count,
            },
            sandbox_limits: cfg.sandbox_limits(),
            sandbox_ceiling: cfg.sandbox_ceiling(),
            service_dir: crate::config::service_dir(config_path)
                .display()
                .to_string(),
        }),
        approvald: Some(ApprovaldSettings {
            state_dir: state_dir.display().to_string(),
            redact,
            config_path: config_path.display().to_string(),
        }),
        web: fronts.web_settings.clone(),
    }
}
