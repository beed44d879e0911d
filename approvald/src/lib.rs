//! approvald: owns the state directory (tasks, approvals, audit) and is the one owner of
//! approval decisions. It answers netd's store channel, the executor's authority channel,
//! the Web console's owner channel (every request checked against a session only
//! approvald knows, [`owner::sessions`]) and the local CLI on `protocol/approvals.sock`;
//! each is a separate type, so netd can never reach the authority or approval surface.

#![forbid(unsafe_code)]

pub mod authority;
pub mod clock;
pub mod config_edit;
pub mod dispatch;
pub mod notify;
pub mod owner;
pub mod peer;
pub mod pending;
pub mod policy;
pub mod socket;
pub mod store;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::stat::{umask, Mode};

use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};
use nl2sh_proto::topology::ApprovaldEnds;
use nl2sh_proto::worker::{accept_start, ControlEvent, WorkerError};
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
    let state_dir = match check_state_dir(PathBuf::from(&settings.state_dir)) {
        Ok(dir) => dir,
        Err(e) => {
            let _ = control.refuse(e.to_string()).await;
            return Err(e);
        }
    };
    let peer_policy = match peer_policy {
        Ok(policy) => policy,
        Err(e) => {
            let _ = control.refuse(e.to_string()).await;
            return Err(e.into());
        }
    };
    tracing::debug!(state_dir = %state_dir.display(), "approvald starting");
    // The store is open before any peer is answered: the executor's Ping means "ready".
    let store = match store::Store::open(&state_dir) {
        Ok(store) => store,
        Err(e) => {
            let _ = control.refuse(format!("cannot open the store: {e}")).await;
            return Err(e.into());
        }
    };
    store.redact_audit(&settings.redact);
    let tasks = match store.tasks(&settings.redact) {
        Ok(tasks) => Arc::new(tasks),
        Err(e) => {
            let _ = control
                .refuse(format!("cannot open the task store: {e}"))
                .await;
            return Err(e.into());
        }
    };
    let authority = Arc::new(
        authority::Authority::new(store, &settings.config_path)
            .with_notifier(notify::Notifier::for_this_device()),
    );
    // Web console sessions live as long as this process: a restart logs the owner out.
    let sessions = Arc::new(owner::OwnerSessions::new());
    let approvals_socket = match socket::ApprovalsSocket::bind(&state_dir) {
        Ok(s) => s,
        Err(e) => {
            let _ = control
                .refuse(format!("cannot listen for approvals: {e}"))
                .await;
            return Err(e.into());
        }
    };
    tracing::debug!(path = %approvals_socket.path().display(), "approvals socket ready");
    let (stop_socket, socket_stopped) = tokio::sync::oneshot::channel::<()>();
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
    let mut socket_task = tokio::spawn(serving_socket);
    // Serve each channel at once, each in its own task (the handshakes included): peers
    // may wait on an answer here before they complete their other handshakes.
    let mut executor_task = tokio::spawn(dispatch::serve_executor(executor, authority.clone()));
    let mut netd_task = tokio::spawn(dispatch::serve_netd(netd, tasks.clone(), inbox));
    let mut web_task = tokio::spawn(dispatch::serve_web(web, authority.clone(), tasks, sessions));
    control
        .started()
        .await
        .map_err(|e| ApprovaldError::Channel("supervisor", e))?;
    // A peer closing between frames is exiting; the supervisor judges why.
    let ended = |name: &'static str, r: Result<Result<(), FrameError>, tokio::task::JoinError>| {
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
    };
    // netd is the first to go when the tree drains, while the executor may still have
    // audit records to send: a clean end of netd's channel alone stops nothing. Nor does
    // the Web console's: it may exit (or never run) while the service goes on.
    let mut netd_open = true;
    let mut web_open = true;
    let (drain_id, result) = loop {
        tokio::select! {
            event = control.next_event() => break match event {
                ControlEvent::Drain { id, .. } => (Some(id), Ok(())),
                ControlEvent::Closed => (None, Ok(())),
                ControlEvent::Hostile(e) => (None, Err(ApprovaldError::Channel("supervisor", e))),
            },
            r = &mut executor_task => break (None, ended("executor", r)),
            r = &mut netd_task, if netd_open => {
                netd_open = false;
                if let Err(e) = ended("netd", r) {
                    break (None, Err(e));
                }
            }
            r = &mut web_task, if web_open => {
                web_open = false;
                if let Err(e) = ended("web", r) {
                    break (None, Err(e));
                }
            }
            r = &mut socket_task => break (None, match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.into()),
                Err(_) => Err(ApprovaldError::Channel("approvals socket", FrameError::Closed)),
            }),
        }
    };
    // Nothing pending outlives us, and nothing pending is approved: every pending request
    // is refused and recorded before the store is flushed.
    let _ = stop_socket.send(());
    if !socket_task.is_finished() {
        if let Ok(Err(e)) = socket_task.await {
            tracing::warn!(error = %e, "approvals socket stopped with an error");
        }
    }
    authority.stop(STOP_GRACE).await;
    // Whatever ends us, every queued audit record is committed first.
    let flushed = authority.store().flush().await;
    match &flushed {
        Err(e) => tracing::error!(error = %e, "audit records may be lost"),
        // Every journalled row is in the database now: the journal can go.
        Ok(()) => authority.store().close_journal().await,
    }
    if let Some(id) = drain_id {
        control
            .drained(id)
            .await
            .map_err(|e| ApprovaldError::Channel("supervisor", e))?;
    }
    result?;
    Ok(flushed?)
}
