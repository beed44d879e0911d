//! approvald: owns the state directory (tasks, approvals, audit). It answers netd's store
//! channel and the executor's authority channel; the two are separate types, so netd can
//! never reach the authority surface.

pub mod dispatch;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::ExitCode;

use nl2sh_proto::channels::{fds, WorkerSettings};
use nl2sh_proto::handshake::{ChannelKind, Role};
use nl2sh_proto::worker::{accept_start, connect_peer, ControlEvent};
use nl2sh_proto::FrameError;

#[derive(Debug, thiserror::Error)]
pub enum ApprovaldError {
    #[error(transparent)]
    Worker(#[from] nl2sh_proto::worker::WorkerError),
    #[error("supervisor sent settings for another role")]
    WrongSettings,
    #[error("state directory {path}: {why}")]
    StateDir { path: PathBuf, why: String },
    #[error("{0} channel ended: {1}")]
    Channel(&'static str, FrameError),
}

/// Entry point of the hidden `approvald` role.
pub fn run() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "approvald: cannot start runtime");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "approvald stopped");
            ExitCode::FAILURE
        }
    }
}

/// The state directory must be ours and private before anything is stored in it.
fn check_state_dir(path: PathBuf) -> Result<PathBuf, ApprovaldError> {
    let meta = std::fs::metadata(&path).map_err(|e| ApprovaldError::StateDir {
        path: path.clone(),
        why: e.to_string(),
    })?;
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(ApprovaldError::StateDir {
            path,
            why: format!("must be a directory owned by uid {euid} with mode 0700"),
        });
    }
    Ok(path)
}

async fn serve() -> Result<(), ApprovaldError> {
    let (mut control, settings) = accept_start(Role::Approvald).await?;
    let WorkerSettings::Approvald(settings) = settings else {
        let _ = control.refuse("settings for another role".into()).await;
        return Err(ApprovaldError::WrongSettings);
    };
    let state_dir = match check_state_dir(PathBuf::from(&settings.state_dir)) {
        Ok(dir) => dir,
        Err(e) => {
            let _ = control.refuse(e.to_string()).await;
            return Err(e);
        }
    };
    tracing::debug!(state_dir = %state_dir.display(), "approvald starting");
    let executor = connect_peer(
        fds::APPROVALD_EXECUTOR,
        ChannelKind::ExecutorApprovald,
        Role::Approvald,
        Role::Executor,
    )
    .await?;
    // Serve each channel as soon as it is up: peers may wait on an answer here before
    // they complete their other handshakes.
    let mut executor_task = tokio::spawn(dispatch::serve_executor(executor));
    let netd = connect_peer(
        fds::APPROVALD_NETD,
        ChannelKind::NetdApprovald,
        Role::Approvald,
        Role::Netd,
    )
    .await?;
    let mut netd_task = tokio::spawn(dispatch::serve_netd(netd));
    control
        .started()
        .await
        .map_err(|e| ApprovaldError::Channel("supervisor", e))?;
    // A peer closing between frames is exiting; the supervisor judges why.
    let ended = |name: &'static str, r: Result<Result<(), FrameError>, tokio::task::JoinError>| {
        if let Ok(Ok(())) = r {
            tracing::info!(channel = name, "peer closed its channel; stopping");
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
    tokio::select! {
        event = control.next_event() => match event {
            ControlEvent::Drain { id, .. } => {
                control.drained(id).await.map_err(|e| ApprovaldError::Channel("supervisor", e))
            }
            ControlEvent::Closed => Ok(()),
            ControlEvent::Hostile(e) => Err(ApprovaldError::Channel("supervisor", e)),
        },
        r = &mut executor_task => ended("executor", r),
        r = &mut netd_task => ended("netd", r),
    }
}
