//! The Web console's life as a worker: `Start`, its two channels, serving, `Drain`. A
//! channel that ends or misbehaves ends the console with a failure; the supervisor then
//! restarts the workers (docs/ARCHITECTURE.md, "Stopping and restarting").

use std::sync::Arc;
use std::time::Duration;

use nl2sh_http_worker::connections::{self, HttpLimits};
use nl2sh_http_worker::refusals::RefusalLog;
use nl2sh_proto::channels::fds;
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::sys::{take_inherited, Expect};
use nl2sh_proto::topology::WebEnds;
use nl2sh_proto::worker::{accept_start, ControlEvent, WorkerError};
use nl2sh_proto::FrameError;
use tokio::sync::oneshot;

use crate::http::{router, Backends};

/// Upper bound on a drain grace, whatever the supervisor asks.
const MAX_GRACE: Duration = Duration::from_secs(10);
/// Connections the console serves at once: one owner's browser tabs need a handful.
const MAX_CONNECTIONS: usize = 64;
/// Slots kept for connections that already carried an owner's request.
const RESERVED_FOR_OWNER: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error("{0}")]
    Settings(String),
    #[error("{0} channel: {1}")]
    Channel(&'static str, String),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Where the listener comes from: the fd the supervisor placed, or one handed over in
/// process (tests).
pub enum Listener {
    Inherited,
    Given(std::net::TcpListener),
}

impl Listener {
    fn take(self) -> Result<tokio::net::TcpListener, WebError> {
        let listener = match self {
            Listener::Inherited => std::net::TcpListener::from(
                take_inherited(fds::WEB_LISTENER, Expect::TcpListener)
                    .map_err(|e| WebError::Settings(format!("no inherited listener: {e}")))?,
            ),
            Listener::Given(listener) => listener,
        };
        listener.set_nonblocking(true)?;
        Ok(tokio::net::TcpListener::from_std(listener)?)
    }
}

/// The console's connection limits: netd's timeouts, a smaller cap.
pub fn limits() -> HttpLimits {
    HttpLimits {
        max_connections: MAX_CONNECTIONS,
        reserved_for_authorized: RESERVED_FOR_OWNER,
        ..HttpLimits::default()
    }
}

pub async fn serve_with(
    ends: WebEnds,
    listener: Listener,
    limits: HttpLimits,
) -> Result<(), WebError> {
    let WebEnds {
        control,
        approvald,
        supervisor,
    } = ends;
    let (mut control, settings) = accept_start(control).await?;
    let refusals = RefusalLog::new("web");
    let summaries = tokio::spawn(RefusalLog::flush_periodically(&refusals));
    // Whatever was refused since the last summary is said once when the console stops.
    let _flush_at_end = FlushAtEnd(refusals.clone(), summaries);
    let started = async {
        let (approvald, approvald_end) = RpcClient::start(approvald)
            .await
            .map_err(|e| WebError::Channel("approvald", e.to_string()))?;
        let (supervisor, supervisor_end) = RpcClient::start(supervisor)
            .await
            .map_err(|e| WebError::Channel("supervisor", e.to_string()))?;
        let app = router(
            &settings,
            Backends {
                approvald,
                supervisor,
            },
            refusals.clone(),
        )
        .map_err(WebError::Settings)?;
        let listener = listener.take()?;
        Ok::<_, WebError>((app, listener, approvald_end, supervisor_end))
    };
    let (app, listener, mut approvald_end, mut supervisor_end) = match started.await {
        Ok(parts) => parts,
        Err(e) => {
            let _ = control.refuse(e.to_string()).await;
            return Err(e);
        }
    };
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let limits = limits.fitted(0);
    let mut server = tokio::spawn(connections::serve(listener, app, limits, async move {
        let _ = stop_rx.await;
    }));
    control.started().await?;
    tracing::info!(origin = %settings.origin, "web serving");
    let ended = |name: &'static str, r: Result<Result<(), FrameError>, tokio::task::JoinError>| {
        let why = match r {
            Ok(Ok(())) => "closed".to_owned(),
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        WebError::Channel(name, why)
    };
    tokio::select! {
        event = control.next_event() => match event {
            ControlEvent::Drain { id, grace } => {
                let _ = stop_tx.send(());
                let grace = grace.min(MAX_GRACE);
                if tokio::time::timeout(grace, &mut server).await.is_err() {
                    tracing::warn!("web: requests still open at the end of the grace");
                    server.abort();
                }
                control.drained(id).await?;
                Ok(())
            }
            ControlEvent::Closed => Ok(()),
            ControlEvent::Hostile(e) => Err(e.into()),
        },
        r = &mut approvald_end => Err(ended("approvald", r)),
        r = &mut supervisor_end => Err(ended("supervisor", r)),
        r = &mut server => match r {
            Ok(Ok(())) => Err(WebError::Settings("the listener stopped".into())),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(WebError::Settings(format!("the server task ended: {e}"))),
        },
    }
}

/// Stops the summary timer and writes the last summary when dropped.
struct FlushAtEnd(Arc<RefusalLog>, tokio::task::JoinHandle<()>);

impl Drop for FlushAtEnd {
    fn drop(&mut self) {
        self.1.abort();
        self.0.flush();
    }
}

/// The worker with the production limits.
pub async fn serve(ends: WebEnds, listener: Listener) -> Result<(), WebError> {
    serve_with(ends, listener, limits()).await
}
