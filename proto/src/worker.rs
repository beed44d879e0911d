//! The worker side of the supervisor control channel, shared by every role: take the
//! inherited fd, complete the handshake, receive the one `Start`, then wait for `Drain`.

use tokio::net::UnixStream;

use crate::channels::{fds, ControlRequest, ControlResponse, WorkerSettings};
use crate::frame::{read_frame, write_frame, FrameError};
use crate::handshake::{handshake, ChannelKind, Role};

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("no supervisor channel on fd {fd}: {source} (this role is started only by `nl2sh protocol serve`)")]
    NoSupervisor { fd: i32, source: std::io::Error },
    #[error("inherited fd {fd}: {source}")]
    Fd { fd: i32, source: std::io::Error },
    #[error("{channel:?}: {source}")]
    Channel {
        channel: ChannelKind,
        source: FrameError,
    },
    #[error("supervisor sent {0} before Start")]
    NotStarted(&'static str),
}

/// The supervisor control channel after `Start`.
pub struct Control {
    stream: UnixStream,
    /// Id of the `Start` request, which `Started`/`Refused` answer.
    start_id: u64,
}

pub fn control_kind(role: Role) -> ChannelKind {
    match role {
        Role::Netd => ChannelKind::SupervisorNetd,
        Role::Executor => ChannelKind::SupervisorExecutor,
        _ => ChannelKind::SupervisorApprovald,
    }
}

/// Take fd 3, handshake as `role`, and read the `Start` settings.
pub async fn accept_start(role: Role) -> Result<(Control, WorkerSettings), WorkerError> {
    let kind = control_kind(role);
    let mut stream = crate::sys::inherited_channel(fds::SUPERVISOR).map_err(|source| {
        WorkerError::NoSupervisor {
            fd: fds::SUPERVISOR,
            source,
        }
    })?;
    let err = |source| WorkerError::Channel {
        channel: kind,
        source,
    };
    handshake(&mut stream, kind, role, Role::Supervisor)
        .await
        .map_err(err)?;
    let (start_id, first): (u64, ControlRequest) = read_frame(&mut stream).await.map_err(err)?;
    match first {
        ControlRequest::Start(settings) => Ok((Control { stream, start_id }, settings)),
        ControlRequest::Drain { .. } => Err(WorkerError::NotStarted("Drain")),
    }
}

/// Take an inherited peer channel and complete its handshake.
pub async fn connect_peer(
    fd: i32,
    kind: ChannelKind,
    me: Role,
    peer: Role,
) -> Result<UnixStream, WorkerError> {
    let mut stream =
        crate::sys::inherited_channel(fd).map_err(|source| WorkerError::Fd { fd, source })?;
    handshake(&mut stream, kind, me, peer)
        .await
        .map_err(|source| WorkerError::Channel {
            channel: kind,
            source,
        })?;
    Ok(stream)
}

/// What the supervisor asked after `Start`.
#[derive(Debug)]
pub enum ControlEvent {
    Drain {
        id: u64,
        grace: std::time::Duration,
    },
    /// The supervisor is gone (or closed the channel): stop now.
    Closed,
    /// A frame that has no place here; the channel is finished.
    Hostile(FrameError),
}

impl Control {
    pub async fn started(&mut self) -> Result<(), FrameError> {
        write_frame(&mut self.stream, self.start_id, &ControlResponse::Started).await
    }

    pub async fn refuse(&mut self, why: String) -> Result<(), FrameError> {
        write_frame(
            &mut self.stream,
            self.start_id,
            &ControlResponse::Refused(why),
        )
        .await
    }

    pub async fn next_event(&mut self) -> ControlEvent {
        match read_frame::<ControlRequest, _>(&mut self.stream).await {
            Ok((id, ControlRequest::Drain { grace_ms })) => ControlEvent::Drain {
                id,
                grace: std::time::Duration::from_millis(grace_ms.min(60_000)),
            },
            Ok((_, ControlRequest::Start(_))) => {
                ControlEvent::Hostile(FrameError::OutOfPlace("a second Start".into()))
            }
            Err(FrameError::Closed) => ControlEvent::Closed,
            Err(e) => ControlEvent::Hostile(e),
        }
    }

    pub async fn drained(&mut self, id: u64) -> Result<(), FrameError> {
        write_frame(&mut self.stream, id, &ControlResponse::Drained).await
    }
}

/// Run a worker's `serve` future on a single-threaded runtime (requests are short or wait
/// on other processes; blocking work goes to the blocking pool) and turn its end into
/// the process exit status, logging why it stopped.
pub fn run_single_threaded<E, F>(role: &str, serve: F) -> std::process::ExitCode
where
    E: std::fmt::Display,
    F: std::future::Future<Output = Result<(), E>>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "{role}: cannot start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "{role} stopped");
            std::process::ExitCode::FAILURE
        }
    }
}
