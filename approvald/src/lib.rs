//! approvald: owns the state directory (tasks, approvals, audit) and is the one owner of
//! approval decisions. It answers netd's store channel, the executor's authority channel,
//! the Web console's owner channel (every request checked against a session only
//! approvald knows, [`owner::sessions`]) and the local CLI on `protocol/approvals.sock`;
//! each is a separate type, so netd can never reach the authority or approval surface.

#![forbid(unsafe_code)]

pub mod authority;
pub mod config_edit;
pub mod dispatch;
pub mod notify;
pub mod owner;
pub mod peer;
pub mod pending;
pub mod policy;
pub mod socket;
pub mod store;
pub mod ui_grants;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::stat::{umask, Mode};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use nl2sh_proto::channels::{ApprovaldSettings, WorkerEvent};
use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};
use nl2sh_proto::topology::{
    Answerer, ApprovaldEnds, ExecutorApprovald, NetdApprovald, SupervisorApprovald, WebApprovald,
};
use nl2sh_proto::worker::{accept_start, Control, ControlEvent, WorkerError};
use nl2sh_proto::FrameError;

#[derive(Debug, thiserror::Error)]
pub enum ApprovaldError {
    #[error(transparent)]
    Worker(#[from] nl2sh_proto::worker::WorkerError),
    #[error("supervisor sent settings for another role")]
    WrongSettings,
    #[error("state directory: {0}")]
    StateDir(#[source] PrivateDirError),
    #[error("{0} channel ended: {1}")]
    Channel(&'static str, FrameError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("approvals socket: {0}")]
    Socket(#[from] socket::SocketError),
    #[error("approvals socket: {0}")]
    NoTreeRoot(#[from] peer::NoTreeRoot),
}

/// How long stopping waits for decisions in progress to be recorded.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Entry point of the hidden `approvald` role, on its ends of the tree's channels
/// (inherited in production: `ApprovaldEnds::inherited()`).
pub fn run(ends: ApprovaldEnds) -> ExitCode {
    // Everything approvald creates is private to its uid. The store creates its files
    // 0600 explicitly and SQLite copies the database's mode to `-wal`/`-shm`; the umask
    // also covers any file SQLite or a later module creates without saying a mode.
    umask(Mode::from_bits_truncate(0o077));
    nl2sh_proto::worker::run_single_threaded("approvald", serve(ends))
}

/// The state directory must be ours and private before anything is stored in it. The
/// supervisor made it so; approvald only checks, and refuses rather than repairs.
fn check_state_dir(path: PathBuf) -> Result<PathBuf, ApprovaldError> {
    open_private_dir(&path, Create::Never, WideMode::Refuse).map_err(ApprovaldError::StateDir)?;
    Ok(path)
}

async fn serve(ends: ApprovaldEnds) -> Result<(), ApprovaldError> {
    // Our parent is the supervisor, the root of the nl2sh process tree: nothing in that
    // tree (tool commands included) may approve. Read first, while it surely is.
    let peer_policy = socket::PeerPolicy::outside_parent_tree();
    let ApprovaldEnds {
        control,
        netd,
        executor,
        web,
    } = ends;
    let (mut control, settings) = accept_start(control).await.map_err(|e| match e {
        WorkerError::WrongSettings => ApprovaldError::WrongSettings,
        e => e.into(),
    })?;
    let opened = match open(&settings, peer_policy) {
        Ok(opened) => opened,
        Err(NotStarted { told, error }) => {
            let _ = control.refuse(told).await;
            return Err(error);
        }
    };
    let mut serving = Serving::start(
        opened,
        Peers {
            netd,
            executor,
            web,
        },
    );
    control
        .started()
        .await
        .map_err(|e| ApprovaldError::Channel("supervisor", e))?;
    let (drain_id, result) = serving.until_stopped(&mut control).await;
    let flushed = serving.stop().await;
    if let Some(id) = drain_id {
        control
            .drained(id)
            .await
            .map_err(|e| ApprovaldError::Channel("supervisor", e))?;
    }
    result?;
    Ok(flushed?)
}

/// What approvald serves with, each part opened and checked before the supervisor is
/// told it started.
struct Opened {
    peer_policy: socket::PeerPolicy,
    tasks: Arc<store::tasks::TaskStore>,
    authority: Arc<authority::Authority>,
    sessions: Arc<owner::OwnerSessions>,
    approvals_socket: socket::ApprovalsSocket,
}

/// A step of starting failed: what the supervisor is told, and what approvald ends with.
struct NotStarted {
    told: String,
    error: ApprovaldError,
}

impl NotStarted {
    /// `error`, told as `what: error`.
    fn because<E: std::fmt::Display + Into<ApprovaldError>>(
        what: &str,
    ) -> impl FnOnce(E) -> Self + '_ {
        move |e| NotStarted {
            told: format!("{what}: {e}"),
            error: e.into(),
        }
    }

    /// `error`, told as itself.
    fn plainly<E: std::fmt::Display + Into<ApprovaldError>>(e: E) -> Self {
        NotStarted {
            told: e.to_string(),
            error: e.into(),
        }
    }
}

/// The state directory checked, the store and the task store opened, the authority made,
/// the approvals socket bound: in this order, each refusing the start on failure.
fn open(
    settings: &ApprovaldSettings,
    peer_policy: Result<socket::PeerPolicy, peer::NoTreeRoot>,
) -> Result<Opened, NotStarted> {
    let state_dir =
        check_state_dir(PathBuf::from(&settings.state_dir)).map_err(NotStarted::plainly)?;
    let peer_policy = peer_policy.map_err(NotStarted::plainly)?;
    tracing::debug!(state_dir = %state_dir.display(), "approvald starting");
    // The store is open before any peer is answered: the executor's Ping means "ready".
    let store =
        store::Store::open(&state_dir).map_err(NotStarted::because("cannot open the store"))?;
    store.redact_audit(&settings.redact);
    let tasks = store
        .tasks(&settings.redact)
        .map_err(NotStarted::because("cannot open the task store"))?;
    let authority = authority::Authority::new(store, &settings.config_path)
        .with_notifier(notify::Notifier::for_this_device());
    // Web console sessions outlive a restart (their hashes, in a private file).
    let sessions = Arc::new(owner::OwnerSessions::kept_in(
        nl2sh_proto::state_layout::WEB_SESSIONS.in_dir(&state_dir),
    ));
    let approvals_socket = socket::ApprovalsSocket::bind(&state_dir)
        .map_err(NotStarted::because("cannot listen for approvals"))?;
    tracing::debug!(path = %approvals_socket.path().display(), "approvals socket ready");
    Ok(Opened {
        peer_policy,
        tasks: Arc::new(tasks),
        authority: Arc::new(authority),
        sessions,
        approvals_socket,
    })
}

/// approvald's ends of its peers' channels.
struct Peers {
    netd: Answerer<NetdApprovald>,
    executor: Answerer<ExecutorApprovald>,
    web: Answerer<WebApprovald>,
}

type Served<E> = JoinHandle<Result<(), E>>;

/// approvald once started: the approvals socket and each peer's channel, served in tasks
/// of their own.
struct Serving {
    authority: Arc<authority::Authority>,
    /// The console's sessions, and the owner's request for a restart.
    sessions: Arc<owner::OwnerSessions>,
    stop_socket: oneshot::Sender<()>,
    socket: Served<socket::SocketError>,
    executor: Served<FrameError>,
    netd: Served<FrameError>,
    web: Served<FrameError>,
}

impl Serving {
    fn start(opened: Opened, peers: Peers) -> Serving {
        let Opened {
            peer_policy,
            tasks,
            authority,
            sessions,
            approvals_socket,
        } = opened;
        let (stop_socket, socket_stopped) = oneshot::channel::<()>();
        let inbox = Arc::new(owner::asks::OwnerInbox::default());
        let local = Arc::new(dispatch::LocalOwner {
            sessions: sessions.clone(),
            tasks: tasks.clone(),
            inbox: inbox.clone(),
        });
        let serving_socket =
            approvals_socket.serve(authority.clone(), local, peer_policy, async move {
                let _ = socket_stopped.await;
            });
        let socket = tokio::spawn(serving_socket);
        // Serve each channel at once, each in its own task (the handshakes included):
        // peers may wait on an answer here before they complete their other handshakes.
        let executor = tokio::spawn(dispatch::serve_executor(peers.executor, authority.clone()));
        let netd = tokio::spawn(dispatch::serve_netd(peers.netd, tasks.clone(), inbox));
        let web = tokio::spawn(dispatch::serve_web(
            peers.web,
            authority.clone(),
            tasks,
            sessions.clone(),
        ));
        Serving {
            authority,
            sessions,
            stop_socket,
            socket,
            executor,
            netd,
            web,
        }
    }

    /// Serves until the supervisor says drain (its request id) or closes, or a channel
    /// or the approvals socket ends with an error (or the executor's ends at all).
    async fn until_stopped(
        &mut self,
        control: &mut Control<SupervisorApprovald>,
    ) -> (Option<u64>, Result<(), ApprovaldError>) {
        // netd is the first to go when the tree drains, while the executor may still have
        // audit records to send: a clean end of netd's channel alone stops nothing. Nor
        // does the Web console's: it may exit (or never run) while the service goes on.
        let mut netd_open = true;
        let mut web_open = true;
        let sessions = self.sessions.clone();
        loop {
            tokio::select! {
                () = sessions.restart_requested() => {
                    // The supervisor runs `service restart`, which drains this tree.
                    if let Err(e) = control.event(WorkerEvent::RestartRequested).await {
                        return (None, Err(ApprovaldError::Channel("supervisor", e)));
                    }
                }
                event = control.next_event() => return match event {
                    ControlEvent::Drain { id, .. } => (Some(id), Ok(())),
                    ControlEvent::Closed => (None, Ok(())),
                    ControlEvent::Hostile(e) => (None, Err(ApprovaldError::Channel("supervisor", e))),
                },
                r = &mut self.executor => return (None, peer_ended("executor", r)),
                r = &mut self.netd, if netd_open => {
                    netd_open = false;
                    if let Err(e) = peer_ended("netd", r) {
                        return (None, Err(e));
                    }
                }
                r = &mut self.web, if web_open => {
                    web_open = false;
                    if let Err(e) = peer_ended("web", r) {
                        return (None, Err(e));
                    }
                }
                r = &mut self.socket => return (None, match r {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.into()),
                    Err(_) => Err(ApprovaldError::Channel("approvals socket", FrameError::Closed)),
                }),
            }
        }
    }

    /// Nothing pending outlives us, and nothing pending is approved: every pending
    /// request is refused and recorded before the store is flushed. Whatever ends us,
    /// every queued audit record is committed first.
    async fn stop(self) -> Result<(), store::StoreError> {
        let _ = self.stop_socket.send(());
        if !self.socket.is_finished() {
            if let Ok(Err(e)) = self.socket.await {
                tracing::warn!(error = %e, "approvals socket stopped with an error");
            }
        }
        self.authority.stop(STOP_GRACE).await;
        let flushed = self.authority.store().flush().await;
        match &flushed {
            Err(e) => tracing::error!(error = %e, "audit records may be lost"),
            // Every journalled row is in the database now: the journal can go.
            Ok(()) => self.authority.store().close_journal().await,
        }
        flushed
    }
}

/// How a peer's channel ended. A peer closing between frames is exiting; the supervisor
/// judges why.
fn peer_ended(
    name: &'static str,
    r: Result<Result<(), FrameError>, tokio::task::JoinError>,
) -> Result<(), ApprovaldError> {
    if let Ok(Ok(())) = r {
        tracing::info!(channel = name, "peer closed its channel");
        return Ok(());
    }
    Err(ApprovaldError::Channel(
        name,
        match r {
            Ok(Err(e)) => e,
            _ => FrameError::Closed,
        },
    ))
}
