//! `nl2sh protocol serve`: check everything that can be checked before a process exists,
//! take the state lock, bind the listener, start the tree, announce it, then supervise
//! until a signal or a worker's death.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::sync::mpsc;

use nl2sh_proto::channels::{
    ApprovaldSettings, ControlRequest, ControlResponse, ExecutorSettings, FromWorker, HttpSettings,
    NetdSettings, NetdTransport, UidRange, WebSettings, WorkerEvent, WorkerSettings,
};
use nl2sh_proto::frame::{read_frame, write_frame};
use nl2sh_proto::handshake::{handshake, Role};
use nl2sh_proto::limits::SHUTDOWN_GRACE;
use nl2sh_proto::topology::control_channel;

use crate::advertise::{self, Origin};
use crate::cli::ServeArgs;
use crate::config;
use crate::discovery::Discovery;
use crate::spawn::{kill_all, NetdIdentity, NetdIo, Tree, WebIo, Worker};
use crate::startup;
use crate::state::{self, ConnectionInfo};
use crate::token;
use nl2sh_proto::Secret;

/// When memory runs out the kernel should end a sandboxed command first (they set 1000),
/// then a worker (the supervisor restarts it), and the supervisor last: without it
/// nothing restarts.
const SUPERVISOR_OOM_SCORE_ADJ: &str = "-900";
pub const WORKER_OOM_SCORE_ADJ: &str = "0";

/// How long a worker may take from exec to `Started`.
const START_TIMEOUT: Duration = Duration::from_secs(15);

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

/// What the HTTP transport announces once the tree is up.
struct Announcement {
    origin: Origin,
    listening: SocketAddr,
    token: Secret,
    token_source: token::TokenSource,
}

/// Everything about the HTTP front door that can fail before a process exists.
fn prepare_http(
    args: &ServeArgs,
    cfg: &config::Config,
) -> Result<(TcpListener, HttpSettings, Announcement), ServeError> {
    let (token, token_source) = token::resolve(
        std::env::var_os(token::TOKEN_ENV),
        cfg.protocol_token.as_deref(),
    )?;
    let host: IpAddr = args
        .host
        .parse()
        .map_err(|_| ServeError::Host(args.host.clone()))?;
    if !args.allow_insecure_http && !host.is_loopback() {
        return Err(ServeError::InsecureHttp(host));
    }
    let advertised = args
        .advertised_url
        .as_deref()
        .map(advertise::parse_advertised_url)
        .transpose()?;
    let listener = bind(host, args.port)?;
    let listening = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::new(host, args.port),
        source,
    })?;
    let origin = advertised.unwrap_or_else(|| advertise::default_origin(listening));
    let settings = HttpSettings {
        token: token.clone(),
        advertised_origin: origin.origin_string(),
        local_authorities: local_authorities(host, listening.port()),
    };
    let announcement = Announcement {
        origin,
        listening,
        token,
        token_source,
    };
    Ok((listener, settings, announcement))
}

/// The Web console's listener and settings, from `web_host`/`web_port`.
fn prepare_web(cfg: &config::Config) -> Result<(TcpListener, WebSettings), ServeError> {
    let host: IpAddr = cfg
        .web_host()
        .parse()
        .map_err(|_| ServeError::WebHost(cfg.web_host().to_owned()))?;
    if !host.is_loopback() && !cfg.web_allow_insecure_http {
        return Err(ServeError::InsecureWeb(host));
    }
    let listener = bind(host, cfg.web_port())?;
    let listening = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::new(host, cfg.web_port()),
        source,
    })?;
    let origin = advertise::default_origin(listening);
    let settings = WebSettings {
        origin: origin.origin_string(),
        local_authorities: local_authorities(host, listening.port()),
        insecure_remote: !host.is_loopback(),
    };
    Ok((listener, settings))
}

/// Why `--web-only` cannot start when another process holds the state directory, and
/// where the owner's console is then: the running process's own, when it has one.
fn console_elsewhere(
    state_dir: &std::path::Path,
    config_path: &std::path::Path,
    held: state::StateError,
) -> String {
    let paths = state::state_paths(state_dir);
    let identity = config::identity(&config::absolute(config_path));
    match state::discover(&paths, &identity) {
        Ok(state::Discovered::Live(info)) => match &info.web_url {
            Some(url) => format!(
                "the nl2sh service (pid {}) already serves the Web console for this \
                 configuration at {}: log in with `nl2sh web login`",
                info.pid,
                nl2sh_proto::display::Shown::new(url)
            ),
            None => format!(
                "a standalone nl2sh protocol process (pid {}, transport {}) uses this \
                 configuration, and it has no Web console: stop it and run `nl2sh service \
                 start` (MCP/A2A and the console together) or `nl2sh --web-only` again",
                info.pid,
                nl2sh_proto::display::Shown::new(&info.transport)
            ),
        },
        _ => held.to_string(),
    }
}

/// `protocol serve` as the managed service and `--web-only` with protocols: every
/// interface, the configured port, plain HTTP allowed.
fn service_args(cfg: &config::Config) -> ServeArgs {
    ServeArgs {
        host: "0.0.0.0".into(),
        port: cfg.service_port(),
        advertised_url: None,
        allow_insecure_http: true,
        managed_service: false,
    }
}

fn run(config_arg: Option<PathBuf>, transport: Transport) -> Result<ExitCode, ServeError> {
    let explicit = config_arg.is_some();
    let config_path = config_arg.unwrap_or_else(config::default_config_path);
    let cfg = config::load(&config_path, explicit)?;
    if cfg.has_retired_bridge_auto_approve() {
        tracing::warn!(
            config = %config_path.display(),
            "bridge_auto_approve is retired and ignored; it never enables protocol_auto_approve"
        );
    }
    let state_dir = config::state_dir(&cfg, &config_path);
    let model = crate::model::setup(&cfg, &config_path, |name| std::env::var(name).ok())?;
    if let nl2sh_proto::channels::ModelSetup::Unavailable(why) = &model {
        tracing::info!("delegated tasks will fail: {why}");
    }
    let transport_name = match &transport {
        Transport::Http(args) if args.managed_service => "service",
        Transport::Http(_) => "http",
        Transport::Stdio => "stdio",
        Transport::WebOnly => WEB_ONLY_TRANSPORT,
    };
    // The Web console runs with the managed service and alone (`--web-only`); a
    // standalone `protocol serve` or `stdio` starts no UI.
    let with_web = matches!(&transport, Transport::Http(a) if a.managed_service)
        || matches!(transport, Transport::WebOnly);
    // Validate the HTTP front doors before taking the lock, so a bad flag never
    // disturbs a running service's state.
    let http = match &transport {
        Transport::Http(args) => Some(prepare_http(args, &cfg)?),
        Transport::WebOnly if cfg.protocol_start_with_service => {
            Some(prepare_http(&service_args(&cfg), &cfg)?)
        }
        Transport::WebOnly | Transport::Stdio => None,
    };
    // A Web console that cannot start closes the protocol listener just opened (it is
    // dropped with `http` on this error).
    let web = with_web.then(|| prepare_web(&cfg)).transpose()?;
    let lock = match state::prepare(&state_dir, transport_name) {
        Ok(lock) => lock,
        Err(e) if matches!(transport, Transport::WebOnly) => {
            return Err(ServeError::Start(console_elsewhere(
                &state_dir,
                &config_path,
                e,
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let redact = crate::model::secrets_to_redact(
        &cfg,
        http.as_ref().map(|(_, settings, _)| &settings.token),
        &model,
    );

    let stdio = matches!(transport, Transport::Stdio);
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
    let (uid, gid, groups) = cfg.netd_ids();
    let identity = NetdIdentity { uid, gid, groups };
    let (sandbox_first, sandbox_count) = cfg.sandbox_uids();
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
    // Lowering the score needs privilege; without it the supervisor keeps its own.
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", SUPERVISOR_OOM_SCORE_ADJ) {
        tracing::debug!(error = %e, "cannot protect the supervisor from the OOM killer");
    }
    // Orphans of the tree (daemonized tool commands) come back to us, so they still
    // descend from the supervisor and end with it.
    if let Err(e) = crate::orphans::become_subreaper() {
        tracing::warn!(error = %e, "cannot become a child subreaper");
    }
    let tree = Tree::spawn(&netd_io, &identity, web_io.as_ref(), &log_filter)
        .map_err(ServeError::Spawn)?;
    let discovery = Arc::new(Discovery {
        paths: lock.paths().clone(),
        identity: config::identity(&config_path),
        config_path: config_path.clone(),
    });
    let starts = Starts {
        netd: netd_transport.map(|transport| NetdSettings {
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
        executor: (!matches!(netd_io, NetdIo::Off)).then(|| ExecutorSettings {
            config_path: config_path.display().to_string(),
            state_dir: state_dir.display().to_string(),
            sandbox_uids: UidRange {
                first: sandbox_first,
                count: sandbox_count,
            },
            sandbox_limits: cfg.sandbox_limits(),
            sandbox_ceiling: cfg.sandbox_ceiling(),
            service_dir: crate::config::service_dir(&config_path)
                .display()
                .to_string(),
        }),
        approvald: Some(ApprovaldSettings {
            state_dir: state_dir.display().to_string(),
            redact,
            config_path: config_path.display().to_string(),
        }),
        web: web_settings.clone(),
    };
    rt.block_on(async move {
        let mut running = start_tree(tree, starts.clone(), &discovery).await?;
        let worker_pids = Arc::new(Mutex::new(running.pids()));
        let reaper = tokio::spawn(crate::orphans::reap(worker_pids.clone()));
        let mut info =
            ConnectionInfo::for_this_process(&config::identity(&config_path), transport_name)?;
        if let Some(a) = &announcement {
            info.listen = Some(a.listening.to_string());
            info.mcp_url = Some(a.origin.mcp_url());
            info.a2a_url = Some(a.origin.a2a_url());
            info.agent_card_url = Some(a.origin.agent_card_url());
            info.token = Some(a.token.expose().to_string());
        }
        if let (Some(web), Some(io)) = (&web_settings, &web_io) {
            info.web_url = Some(web.origin.clone());
            info.web_listen = local_addr_of(&io.listener);
        }
        let connection = state::write_connection(lock.paths(), &info)?;
        state::clear_failure(lock.paths());
        if let Some(a) = &announcement {
            let generated = matches!(a.token_source, token::TokenSource::Generated);
            let block = startup::startup_block(
                &a.origin,
                a.listening,
                generated.then(|| a.token.expose()),
                a.token_source,
            );
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(block.as_bytes());
            let _ = out.flush();
            if transport_name == "service" {
                crate::service_log::startup_block_printed(&block);
            }
            tracing::info!(listen = %a.listening, origin = %a.origin.origin_string(), "serving");
        } else if stdio {
            tracing::info!("serving MCP on stdin/stdout");
        }
        if let Some(url) = &info.web_url {
            let note = match &announcement {
                Some(_) => "",
                None => " (MCP/A2A not started: protocol_start_with_service is not true)",
            };
            // Printed for the person at the terminal (`--web-only`) and kept in the
            // service log; it holds no secret: the console needs `nl2sh web login`.
            println!("Web console: {url}{note}\nLog in with: nl2sh web login");
            tracing::info!(url = %url, "Web console serving");
        }
        let mut restart = Restart {
            netd_io,
            web_io,
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
        };
        let outcome = supervise(&mut running, &mut signals, &mut restart).await;
        reaper.abort();
        let pids = worker_pids.lock().map(|p| p.clone()).unwrap_or_default();
        let orphans = crate::orphans::kill_all(&pids);
        if orphans > 0 {
            tracing::info!(processes = orphans, "ended processes the tree left behind");
        }
        restart.connection.remove();
        drop(lock);
        Ok(outcome)
    })
}

#[derive(Clone)]
struct Starts {
    netd: Option<NetdSettings>,
    executor: Option<ExecutorSettings>,
    approvald: Option<ApprovaldSettings>,
    web: Option<WebSettings>,
}

impl Starts {
    /// The settings every later start gets: the same, without the debug builds' one-shot
    /// test violation (it would kill each restarted netd).
    fn for_restart(&self) -> Starts {
        #[allow(unused_mut)]
        let mut starts = self.clone();
        #[cfg(debug_assertions)]
        if let Some(netd) = starts.netd.as_mut() {
            netd.test_violation = None;
        }
        starts
    }

    /// The `Start` settings of `role`, once.
    fn take(&mut self, role: Role) -> Option<WorkerSettings> {
        match role {
            Role::Netd => self.netd.take().map(WorkerSettings::Netd),
            Role::Executor => self.executor.take().map(WorkerSettings::Executor),
            Role::Approvald => self.approvald.take().map(WorkerSettings::Approvald),
            Role::Web => self.web.take().map(WorkerSettings::Web),
            Role::Supervisor | Role::Cli => None,
        }
    }
}

/// Request ids on a control channel: the one `Start`, the one `Drain`.
const START_ID: u64 = 1;
const DRAIN_ID: u64 = 2;

/// The address a listener is bound to, as text.
fn local_addr_of(listener: &OwnedFd) -> Option<String> {
    let sock = nix::sys::socket::getsockname::<nix::sys::socket::SockaddrStorage>(
        std::os::fd::AsRawFd::as_raw_fd(listener),
    )
    .ok()?;
    sock.as_sockaddr_in()
        .map(|a| SocketAddr::from(std::net::SocketAddrV4::from(*a)).to_string())
        .or_else(|| {
            sock.as_sockaddr_in6()
                .map(|a| SocketAddr::from(std::net::SocketAddrV6::from(*a)).to_string())
        })
}

/// Bind `host:port`; when the port is taken, an available port on the same address.
fn bind(host: IpAddr, port: u16) -> Result<TcpListener, ServeError> {
    let addr = SocketAddr::new(host, port);
    match TcpListener::bind(addr) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && port != 0 => {
            let fallback = SocketAddr::new(host, 0);
            let l = TcpListener::bind(fallback).map_err(|source| ServeError::Bind {
                addr: fallback,
                source,
            })?;
            if let Ok(actual) = l.local_addr() {
                tracing::warn!(
                    requested = port,
                    actual = actual.port(),
                    "port is in use; using an available port"
                );
            }
            Ok(l)
        }
        Err(source) => Err(ServeError::Bind { addr, source }),
    }
}

/// Host header values that name this listener directly.
fn local_authorities(host: IpAddr, port: u16) -> Vec<String> {
    let fmt = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    };
    let mut out = Vec::new();
    if host.is_unspecified() {
        if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
            for a in addrs {
                if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
                    out.push(fmt(IpAddr::V4(sin.ip())));
                }
            }
        }
        out.push(fmt(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)));
    } else {
        out.push(fmt(host));
    }
    if host.is_loopback() || host.is_unspecified() {
        out.push(format!("localhost:{port}"));
    }
    out.sort();
    out.dedup();
    out
}

struct Running {
    /// Ends of channels whose peer role this tree does not run (see `Tree::parked`).
    _parked: Vec<std::os::unix::net::UnixStream>,
    /// Answers the Web console's discovery while this worker set lives.
    discovery: Option<tokio::task::JoinHandle<()>>,
    workers: Vec<Worker>,
    writers: Vec<tokio::net::unix::OwnedWriteHalf>,
    events: mpsc::UnboundedReceiver<(usize, Result<FromWorker, nl2sh_proto::FrameError>)>,
}

impl Running {
    fn pids(&self) -> Vec<u32> {
        self.workers.iter().map(|w| w.child.id()).collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = self.discovery.take() {
            task.abort();
        }
    }
}

async fn start_tree(
    tree: Tree,
    starts: Starts,
    discovery: &Arc<Discovery>,
) -> Result<Running, ServeError> {
    let Tree {
        mut workers,
        discovery: discovery_end,
        parked,
    } = tree;
    // Served from the start: the Web console may ask before it answers Start.
    let discovery_end = discovery_end.map(|end| {
        end.set_nonblocking(true)?;
        UnixStream::from_std(end)
    });
    let discovery = match discovery_end.transpose() {
        Ok(end) => end.and_then(|end| {
            nl2sh_proto::topology::Answerer::connected(end)
                .ok()
                .map(|end| tokio::spawn(crate::discovery::serve(end, discovery.clone())))
        }),
        Err(e) => {
            kill_all(&mut workers);
            return Err(ServeError::Spawn(e));
        }
    };
    let mut streams = Vec::new();
    for w in &workers {
        let std = match w.control.try_clone() {
            Ok(s) => s,
            Err(e) => {
                kill_all(&mut workers);
                return Err(ServeError::Spawn(e));
            }
        };
        let _ = std.set_nonblocking(true);
        match UnixStream::from_std(std) {
            Ok(s) => streams.push(s),
            Err(e) => {
                kill_all(&mut workers);
                return Err(ServeError::Spawn(e));
            }
        }
    }
    let mut starts = starts;
    let roles: Vec<Role> = workers.iter().map(|w| w.role).collect();
    // Send every Start before awaiting any answer: workers handshake with each other
    // after their own Start, so answers depend on all of them having started.
    let exchange = async {
        for (stream, role) in streams.iter_mut().zip(&roles) {
            let step = async {
                let kind = control_channel(*role).ok_or_else(|| {
                    nl2sh_proto::FrameError::OutOfPlace(format!("no control channel for {role:?}"))
                })?;
                handshake(stream, kind, Role::Supervisor, *role).await?;
                let settings = starts.take(*role).ok_or_else(|| {
                    nl2sh_proto::FrameError::OutOfPlace(format!("no settings for {role:?}"))
                })?;
                write_frame(stream, START_ID, &ControlRequest::Start(Box::new(settings))).await?;
                Ok::<_, nl2sh_proto::FrameError>(())
            };
            if let Err(e) = step.await {
                return Some(format!("{} failed to start: {e}", role.as_str()));
            }
        }
        for (stream, role) in streams.iter_mut().zip(&roles) {
            match read_frame::<FromWorker, _>(stream).await {
                Ok((START_ID, FromWorker::Answer(ControlResponse::Started))) => {}
                Ok((START_ID, FromWorker::Answer(ControlResponse::Refused(why)))) => {
                    return Some(format!("{} refused to start: {why}", role.as_str()))
                }
                Ok((id, other)) => {
                    return Some(format!(
                        "{} sent {other:?} (id {id}) instead of answering Start",
                        role.as_str()
                    ))
                }
                Err(e) => return Some(format!("{} failed to start: {e}", role.as_str())),
            }
        }
        None
    };
    let failure = tokio::time::timeout(START_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| {
            Some(format!(
                "workers did not start within {}s",
                START_TIMEOUT.as_secs()
            ))
        });
    if let Some(why) = failure {
        // A console killed mid-start shows up as whichever worker noticed first; ask the
        // console itself, so its deaths are counted whatever the order.
        let console_died = match workers.iter_mut().find(|w| w.role == Role::Web) {
            Some(w) => exited_within(&mut w.child, Duration::from_millis(200)).await,
            None => false,
        };
        kill_all(&mut workers);
        return Err(if console_died {
            ServeError::ConsoleDiedStarting(why)
        } else {
            ServeError::Start(why)
        });
    }
    let (tx, events) = mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for (i, stream) in streams.into_iter().enumerate() {
        let (mut rd, wr) = stream.into_split();
        writers.push(wr);
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                let r = read_frame::<FromWorker, _>(&mut rd)
                    .await
                    .map(|(_, resp)| resp);
                let end = r.is_err();
                if tx.send((i, r)).is_err() || end {
                    break;
                }
            }
        });
    }
    Ok(Running {
        _parked: parked,
        discovery,
        workers,
        writers,
        events,
    })
}

/// SIGINT and SIGTERM, registered once.
struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Must be called inside the runtime's context.
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Worker deaths within [`CRASH_WINDOW`] the supervisor restarts; one more is a crash loop,
/// and the service stops.
const MAX_RESTARTS_IN_WINDOW: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// The wait before each restart within the window: the first is immediate, so one
/// crash costs a client one failed call, not a pause.
const RESTART_BACKOFF: [Duration; MAX_RESTARTS_IN_WINDOW] = [
    Duration::ZERO,
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];
/// Deaths of the Web console within [`CRASH_WINDOW`] after which the worker sets go on
/// without it (below the crash loop's count, so MCP/A2A outlive it).
const MAX_CONSOLE_DEATHS: usize = 3;
/// How long netd may take, once a peer died, to answer the requests it has in flight
/// (with errors) before the old workers are ended.
const PEER_DEATH_GRACE: Duration = Duration::from_secs(3);

/// What a restart of the worker set needs, and what it has done so far.
struct Restart {
    /// The listener (or stdio) every netd gets: clients keep the same URL.
    netd_io: NetdIo,
    /// The Web console's listener, the same for every restart.
    web_io: Option<WebIo>,
    discovery: Arc<Discovery>,
    identity: NetdIdentity,
    log_filter: String,
    /// The same settings (token, model, paths) as the first start.
    starts: Starts,
    worker_pids: Arc<Mutex<Vec<u32>>>,
    paths: state::StatePaths,
    info: ConnectionInfo,
    connection: state::ConnectionFile,
    /// When workers died, within the crash window.
    deaths: VecDeque<std::time::Instant>,
    /// When the Web console was the worker that died, within the crash window.
    console_deaths: VecDeque<std::time::Instant>,
    stdio: bool,
}

impl Restart {
    /// The Web console was the worker that died. Past [`MAX_CONSOLE_DEATHS`] within the
    /// crash window, the worker sets restarted from now on have no console, so a console
    /// that cannot run (a system call its filter lacks on this kernel, say) never takes
    /// MCP/A2A down with it. A console alone (`--web-only` without protocols) is left to
    /// the crash-loop rule.
    fn console_died(&mut self, cause: &str) {
        count_within_window(&mut self.console_deaths);
        let protocols = !matches!(self.netd_io, NetdIo::Off);
        if protocols && self.web_io.is_some() && self.console_deaths.len() > MAX_CONSOLE_DEATHS {
            tracing::error!(
                deaths = self.console_deaths.len(),
                last = %cause,
                "the Web console keeps dying; MCP/A2A go on without it (restart the service \
                 to try it again)"
            );
            self.web_io = None;
            self.starts.web = None;
            self.info.web_url = None;
            self.info.web_listen = None;
        }
    }

    /// Count a death; false when it makes a crash loop.
    fn may_restart(&mut self) -> bool {
        count_within_window(&mut self.deaths);
        self.deaths.len() <= MAX_RESTARTS_IN_WINDOW
    }

    fn backoff(&self) -> Duration {
        let n = self.deaths.len().saturating_sub(1);
        RESTART_BACKOFF[n.min(RESTART_BACKOFF.len() - 1)]
    }

    /// A new worker set on the same listener with the same settings.
    async fn start(&self) -> Result<Running, ServeError> {
        let tree = Tree::spawn(
            &self.netd_io,
            &self.identity,
            self.web_io.as_ref(),
            &self.log_filter,
        )
        .map_err(ServeError::Spawn)?;
        // The new workers are ours to wait for from now on, not the orphan reaper's: one
        // that dies while starting must leave its status for `start_tree` to read.
        if let Ok(mut pids) = self.worker_pids.lock() {
            *pids = tree.workers.iter().map(|w| w.child.id()).collect();
        }
        start_tree(tree, self.starts.clone(), &self.discovery).await
    }

    /// The new set runs: record it for the reaper and in connection.json.
    fn started(&mut self, running: &Running, cause: &str) {
        if let Ok(mut pids) = self.worker_pids.lock() {
            *pids = running.pids();
        }
        self.info.restarts = self.info.restarts.saturating_add(1);
        self.info.last_restart_cause = Some(cause.to_string());
        if let Err(e) = self.connection.update(&self.paths, &self.info) {
            tracing::warn!(error = %e, "cannot update connection.json");
        }
    }

    /// The crash loop's record, for `service status`.
    fn failed(&self, cause: &str) {
        let record = state::FailureRecord {
            at_ms: nl2sh_approvald::clock::now_unix_ms(),
            pid: std::process::id(),
            restarts: self.info.restarts,
            cause: cause.to_string(),
        };
        if let Err(e) = state::write_failure(&self.paths, &record) {
            tracing::warn!(error = %e, "cannot record the failure");
        }
    }
}

/// Record a death now in `deaths`, forgetting those older than [`CRASH_WINDOW`].
fn count_within_window(deaths: &mut VecDeque<std::time::Instant>) {
    let now = std::time::Instant::now();
    deaths.push_back(now);
    while deaths
        .front()
        .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
    {
        deaths.pop_front();
    }
}

/// Wait for SIGINT/SIGTERM (drain, stop, exit 0) or a worker's end. A worker's death ends
/// its channels and itself, not the service: the whole worker set is restarted on the same
/// listener with the same token (see `restart_after`), until deaths come too fast (a crash
/// loop: stop, exit 1). In stdio mode netd's `SessionEnded` event (stdin closed) ends the
/// session cleanly, and a death stops the process (its client starts it again).
async fn supervise(
    running: &mut Running,
    signals: &mut StopSignals,
    restart: &mut Restart,
) -> ExitCode {
    loop {
        let first = tokio::select! {
            () = signals.recv() => None,
            ev = running.events.recv() => Some(ev),
        };
        let Some(event) = first else {
            tracing::info!("stopping: draining in-flight requests");
            drain(running).await;
            return ExitCode::SUCCESS;
        };
        // One death usually ends its peers' channels too; let them settle, then report
        // every worker that ended, the one killed by a signal first, so the message names
        // the cause rather than whoever noticed first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut events = vec![event];
        while let Ok(ev) = running.events.try_recv() {
            events.push(Some(ev));
        }
        let netd = running.workers.iter().position(|w| w.role == Role::Netd);
        let session_over = events.iter().flatten().any(|(i, r)| {
            Some(*i) == netd && matches!(r, Ok(FromWorker::Event(WorkerEvent::SessionEnded)))
        });
        if restart.stdio && session_over {
            tracing::info!("stdin closed; stopping");
            drain(running).await;
            return ExitCode::SUCCESS;
        }
        let first = events
            .first()
            .and_then(Option::as_ref)
            .map_or(0, |(i, _)| *i);
        let first_role = running.workers.get(first).map(|w| w.role);
        let cause = end_workers(running, first).await;
        if first_role == Some(Role::Web) {
            restart.console_died(&cause);
        }
        if restart.stdio {
            tracing::error!(cause = %cause, "a worker ended; stopping (stdio)");
            return crate::exit::Exit::Failure.into();
        }
        loop {
            if !restart.may_restart() {
                tracing::error!(
                    deaths = restart.deaths.len(),
                    window_secs = CRASH_WINDOW.as_secs(),
                    last = %cause,
                    "workers keep dying (a crash loop); stopping the service"
                );
                eprintln!(
                    "nl2sh: stopping: {} worker deaths within {}s (last: {cause})",
                    restart.deaths.len(),
                    CRASH_WINDOW.as_secs()
                );
                restart.failed(&cause);
                return crate::exit::Exit::Failure.into();
            }
            let wait = restart.backoff();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = signals.recv() => {
                    tracing::info!("stopping while restarting workers");
                    return ExitCode::SUCCESS;
                }
            }
            match restart.start().await {
                Ok(new) => {
                    *running = new;
                    restart.started(running, &cause);
                    tracing::warn!(
                        restarts = restart.info.restarts,
                        cause = %cause,
                        "workers restarted on the same listener"
                    );
                    break;
                }
                Err(e) => {
                    let console = matches!(e, ServeError::ConsoleDiedStarting(_));
                    tracing::error!(error = %e, console_died = console, "restarting the workers failed");
                    if let ServeError::ConsoleDiedStarting(why) = &e {
                        restart.console_died(why);
                    }
                }
            }
        }
    }
}

/// A worker ended: let netd answer what it has in flight (its peer channel is gone, so
/// with errors), end the rest of the set, and say what happened. Returns the cause.
async fn end_workers(running: &mut Running, first: usize) -> String {
    use std::os::unix::process::ExitStatusExt;
    let mut ended = Vec::new();
    for (i, w) in running.workers.iter_mut().enumerate() {
        let status = if i == first {
            Some(wait_briefly(&mut w.child).await)
        } else {
            w.child.try_wait().ok().flatten()
        };
        if let Some(status) = status {
            ended.push((w.role, w.child.id(), status));
        }
    }
    ended.sort_by_key(|(_, _, status)| status.signal().is_none());
    for (role, pid, status) in &ended {
        let status = describe(*status);
        tracing::error!(worker = role.as_str(), pid, status = %status, "worker exited unexpectedly");
        eprintln!(
            "nl2sh: worker {} (pid {pid}) exited unexpectedly: {status}",
            role.as_str()
        );
    }
    let cause = ended.first().map_or_else(
        || "a worker's channel ended".to_string(),
        |(role, pid, status)| format!("{} (pid {pid}) {}", role.as_str(), describe(*status)),
    );
    // netd, if alive, stops accepting and answers its in-flight requests once its peer
    // channel ends; give it that long. The Web console is no peer of netd's: when only it
    // died, netd would never end on its own, and waiting would only lengthen the outage.
    let netd_peer_died = ended.iter().any(|(role, _, _)| *role != Role::Web);
    if let Some(netd) = running
        .workers
        .iter_mut()
        .find(|w| w.role == Role::Netd && netd_peer_died)
    {
        let deadline = std::time::Instant::now() + PEER_DEATH_GRACE;
        while std::time::Instant::now() < deadline {
            match netd.child.try_wait() {
                Ok(None) => tokio::time::sleep(Duration::from_millis(10)).await,
                _ => break,
            }
        }
    }
    kill_all(&mut running.workers);
    // What the old set left running (a killed executor's commands come back to us, the
    // subreaper) ends with it: nothing of the old tree outlives a restart.
    let left = crate::orphans::kill_all(&[]);
    if left > 0 {
        tracing::info!(
            processes = left,
            "ended processes the old workers left behind"
        );
    }
    cause
}

/// Wait up to a second for a child whose channel closed; its status, or an error.
/// Whether the child has exited, or does within `limit`.
async fn exited_within(child: &mut std::process::Child, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ => return false,
        }
    }
}

async fn wait_briefly(child: &mut std::process::Child) -> std::process::ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    for _ in 0..50 {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => break,
        }
    }
    // Its channel closed but it lingers: it is misbehaving; end it.
    let _ = child.kill();
    child
        .wait()
        .unwrap_or_else(|_| std::process::ExitStatus::from_raw(libc::SIGKILL))
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

/// netd first (it stops accepting and lets requests settle), then the others.
async fn drain(running: &mut Running) {
    let grace = SHUTDOWN_GRACE;
    for role in nl2sh_proto::topology::Worker::ALL.map(|w| w.role()) {
        let Some(i) = running.workers.iter().position(|w| w.role == role) else {
            continue;
        };
        let req = ControlRequest::Drain {
            grace_ms: grace.as_millis() as u64,
        };
        if write_frame(&mut running.writers[i], DRAIN_ID, &req)
            .await
            .is_err()
        {
            continue;
        }
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(2);
        loop {
            match tokio::time::timeout_at(deadline, running.events.recv()).await {
                Ok(Some((j, Ok(FromWorker::Answer(ControlResponse::Drained))))) if j == i => break,
                Ok(Some((j, Err(_)))) if j == i => break,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    tracing::warn!(worker = role.as_str(), "did not drain in time");
                    break;
                }
            }
        }
    }
    // Workers exit after answering Drained; give them a moment, then make sure.
    for w in running.workers.iter_mut() {
        let _ = wait_briefly(&mut w.child).await;
    }
    kill_all(&mut running.workers);
}
