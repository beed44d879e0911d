//! The worker side of the supervisor control channel, shared by every role: take the
//! inherited fd, complete the handshake, receive the one `Start`, then wait for `Drain`.

use std::marker::PhantomData;

use tokio::net::UnixStream;

use crate::channels::{
    ApprovaldSettings, ControlRequest, ControlResponse, ExecutorSettings, FromWorker, NetdSettings,
    WebSettings, WorkerEvent, WorkerSettings,
};
use crate::frame::{read_frame, write_frame, FrameError};
use crate::topology::{
    Answerer, Channel, EndError, SupervisorApprovald, SupervisorExecutor, SupervisorNetd,
    SupervisorWeb,
};

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("{0} (this role is started only by `nl2sh protocol serve`)")]
    End(#[from] EndError),
    #[error("{0}")]
    Control(FrameError),
    #[error("supervisor sent {0} before Start")]
    NotStarted(&'static str),
    /// `Start` carried another role's settings (refused on the channel already).
    #[error("Start carries another role's settings")]
    WrongSettings,
}

/// A control channel: the supervisor asks (`Start`, `Drain`), the worker answers and
/// reports events. Each one's worker starts with settings of its own type, so a worker
/// cannot be handed another's.
pub trait ControlChannel: Channel<Request = ControlRequest, Response = FromWorker> {
    /// What this channel's worker starts with.
    type Settings;
    /// This worker's settings out of the `Start` message, or `None` for another's.
    fn settings(start: WorkerSettings) -> Option<Self::Settings>;
}

impl ControlChannel for SupervisorNetd {
    type Settings = NetdSettings;
    fn settings(start: WorkerSettings) -> Option<NetdSettings> {
        match start {
            WorkerSettings::Netd(s) => Some(s),
            _ => None,
        }
    }
}

impl ControlChannel for SupervisorExecutor {
    type Settings = ExecutorSettings;
    fn settings(start: WorkerSettings) -> Option<ExecutorSettings> {
        match start {
            WorkerSettings::Executor(s) => Some(s),
            _ => None,
        }
    }
}

impl ControlChannel for SupervisorApprovald {
    type Settings = ApprovaldSettings;
    fn settings(start: WorkerSettings) -> Option<ApprovaldSettings> {
        match start {
            WorkerSettings::Approvald(s) => Some(s),
            _ => None,
        }
    }
}

impl ControlChannel for SupervisorWeb {
    type Settings = WebSettings;
    fn settings(start: WorkerSettings) -> Option<WebSettings> {
        match start {
            WorkerSettings::Web(s) => Some(s),
            _ => None,
        }
    }
}

/// The supervisor control channel after `Start`.
pub struct Control<C: ControlChannel> {
    stream: UnixStream,
    /// Id of the `Start` request, which `Started`/`Refused` answer.
    start_id: u64,
    _channel: PhantomData<fn() -> C>,
}

/// Handshake on the control channel and read this worker's `Start` settings. Another
/// role's settings are refused on the channel and end the worker
/// ([`WorkerError::WrongSettings`]).
pub async fn accept_start<C: ControlChannel>(
    end: Answerer<C>,
) -> Result<(Control<C>, C::Settings), WorkerError> {
    let mut stream = end.greet().await?;
    let (start_id, first): (u64, ControlRequest) = read_frame(&mut stream)
        .await
        .map_err(WorkerError::Control)?;
    match first {
        ControlRequest::Start(settings) => {
            let mut control = Control {
                stream,
                start_id,
                _channel: PhantomData,
            };
            match C::settings(*settings) {
                Some(settings) => Ok((control, settings)),
                None => {
                    let _ = control.refuse("settings for another role".into()).await;
                    Err(WorkerError::WrongSettings)
                }
            }
        }
        ControlRequest::Drain { .. } => Err(WorkerError::NotStarted("Drain")),
    }
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

impl<C: ControlChannel> Control<C> {
    pub async fn started(&mut self) -> Result<(), FrameError> {
        self.answer(self.start_id, ControlResponse::Started).await?;
        // Starting up (parsing, probing, handshakes) freed more than a worker keeps.
        crate::sys::trim_heap();
        Ok(())
    }

    pub async fn refuse(&mut self, why: String) -> Result<(), FrameError> {
        self.answer(self.start_id, ControlResponse::Refused(why))
            .await
    }

    async fn answer(&mut self, id: u64, answer: ControlResponse) -> Result<(), FrameError> {
        write_frame(&mut self.stream, id, &FromWorker::Answer(answer)).await
    }

    /// Tell the supervisor something unasked.
    pub async fn event(&mut self, event: WorkerEvent) -> Result<(), FrameError> {
        write_frame(&mut self.stream, 0, &FromWorker::Event(event)).await
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
        self.answer(id, ControlResponse::Drained).await
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
