//! netd's life as a worker: supervisor handshake and `Start`, peer channels, serving,
//! `Drain`. Any channel that ends or misbehaves ends netd with a failure; the supervisor
//! then takes the tree down.

use std::time::Duration;

use nl2sh_proto::channels::{
    fds, CallOrigin, ControlRequest, ControlResponse, ExecutorRequest, ExecutorResponse,
    NetdSettings, NetdTransport, StoreRequest, StoreResponse, WorkerSettings,
};
use nl2sh_proto::frame::{read_frame, write_frame};
use nl2sh_proto::handshake::{handshake, ChannelKind, Role};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::sys::{inherited_channel, take_inherited, Expect};
use nl2sh_proto::FrameError;
use rmcp::ServiceExt;
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::NetdError;
use crate::mcp::McpServer;

/// How long approvald may take to answer the start-up ping.
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound on a drain grace, whatever the supervisor asks.
const MAX_GRACE: Duration = Duration::from_secs(60);

/// Where netd's channels and listener come from: the fds the supervisor placed
/// (`nl2sh` binary), or streams handed over in-process (tests wiring workers together).
pub enum Wiring {
    Inherited,
    Given(Given),
}

/// In-process wiring: the netd ends of its channels, and the listener for HTTP.
pub struct Given {
    pub supervisor: UnixStream,
    pub executor: UnixStream,
    pub approvald: UnixStream,
    pub listener: Option<std::net::TcpListener>,
}

/// [`Wiring`] while netd takes its pieces, each exactly once, in start-up order.
enum Source {
    Inherited,
    Given {
        supervisor: Option<UnixStream>,
        executor: Option<UnixStream>,
        approvald: Option<UnixStream>,
        listener: Option<std::net::TcpListener>,
    },
}

impl From<Wiring> for Source {
    fn from(wiring: Wiring) -> Self {
        match wiring {
            Wiring::Inherited => Source::Inherited,
            Wiring::Given(g) => Source::Given {
                supervisor: Some(g.supervisor),
                executor: Some(g.executor),
                approvald: Some(g.approvald),
                listener: g.listener,
            },
        }
    }
}

impl Source {
    fn channel(&mut self, fd: i32) -> Result<UnixStream, NetdError> {
        let slot = match self {
            Source::Inherited => return Ok(inherited_channel(fd)?),
            Source::Given { supervisor, .. } if fd == fds::SUPERVISOR => supervisor,
            Source::Given { executor, .. } if fd == fds::NETD_EXECUTOR => executor,
            Source::Given { approvald, .. } => approvald,
        };
        slot.take()
            .ok_or_else(|| NetdError::Settings(format!("channel {fd} taken twice")))
    }

    fn listener(&mut self) -> Result<tokio::net::TcpListener, NetdError> {
        let listener = match self {
            Source::Inherited => std::net::TcpListener::from(take_inherited(
                fds::NETD_LISTENER,
                Expect::TcpListener,
            )?),
            Source::Given { listener, .. } => listener
                .take()
                .ok_or_else(|| NetdError::Settings("HTTP transport without a listener".into()))?,
        };
        listener.set_nonblocking(true)?;
        Ok(tokio::net::TcpListener::from_std(listener)?)
    }
}

/// The worker, from its channels to the end. `Ok` means a clean end (drained, or stdin
/// closed in stdio mode); any `Err` should end the process with a failure.
pub async fn serve(wiring: Wiring) -> Result<(), NetdError> {
    let mut source = Source::from(wiring);
    let mut control = source.channel(fds::SUPERVISOR)?;
    handshake(
        &mut control,
        ChannelKind::SupervisorNetd,
        Role::Netd,
        Role::Supervisor,
    )
    .await?;
    let (start_id, first): (u64, ControlRequest) = read_frame(&mut control).await?;
    let settings = match first {
        ControlRequest::Start(WorkerSettings::Netd(settings)) => settings,
        ControlRequest::Start(_) => {
            return Err(NetdError::Protocol(
                "Start carries another role's settings".into(),
            ))
        }
        ControlRequest::Drain { .. } => {
            return Err(NetdError::Protocol("Drain before Start".into()))
        }
    };

    #[cfg(debug_assertions)]
    let test_violation = settings.test_violation.clone();

    // Anything that stops netd from serving is reported to the supervisor as Refused.
    let started = async {
        let executor_stream = peer(
            source.channel(fds::NETD_EXECUTOR)?,
            ChannelKind::NetdExecutor,
            Role::Executor,
        )
        .await?;
        let store_stream = peer(
            source.channel(fds::NETD_APPROVALD)?,
            ChannelKind::NetdApprovald,
            Role::Approvald,
        )
        .await?;
        let (executor, executor_end) =
            RpcClient::<ExecutorRequest, ExecutorResponse>::spawn(executor_stream);
        let (store, store_end) = RpcClient::<StoreRequest, StoreResponse>::spawn(store_stream);
        match tokio::time::timeout(PING_TIMEOUT, store.call(&StoreRequest::Ping)).await {
            Ok(Ok(StoreResponse::Pong)) => {}
            Ok(Ok(StoreResponse::Error(e))) => {
                return Err(NetdError::Protocol(format!(
                    "approvald refused the ping: {}",
                    e.message
                )))
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(NetdError::Timeout("approvald ping")),
        }
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let server = start_serving(&mut source, settings, executor, stop_rx)?;
        Ok((store, executor_end, store_end, stop_tx, server))
    };
    // `_store` stays alive while serving: dropping the last client closes the channel.
    let (_store, mut executor_end, mut store_end, stop_tx, mut server) = match started.await {
        Ok(parts) => parts,
        Err(e) => {
            let _ = write_frame(
                &mut control,
                start_id,
                &ControlResponse::Refused(e.to_string()),
            )
            .await;
            return Err(e);
        }
    };

    write_frame(&mut control, start_id, &ControlResponse::Started).await?;
    // TEST HOOK (debug builds only): right after Started, before any request is served.
    #[cfg(debug_assertions)]
    if let Some(violation) = test_violation {
        return Err(crate::test_hook::attempt(&violation));
    }
    tracing::info!("netd serving");

    // Biased: when stdin closes, the transport ends first and then (because it held the
    // last executor client) the executor channel; both may be ready at once, and the
    // transport's clean end must win.
    tokio::select! {
        biased;
        event = read_frame::<ControlRequest, _>(&mut control) => match event {
            Ok((id, ControlRequest::Drain { grace_ms })) => {
                let grace = Duration::from_millis(grace_ms).min(MAX_GRACE);
                tracing::info!(grace_ms = grace.as_millis() as u64, "draining");
                let _ = stop_tx.send(());
                match tokio::time::timeout(grace, &mut server).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => tracing::warn!(error = %e, "server ended with an error while draining"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "server task failed while draining"),
                    Err(_) => {
                        tracing::warn!("grace expired with requests in flight; dropping them");
                        server.abort();
                    }
                }
                write_frame(&mut control, id, &ControlResponse::Drained).await?;
                Ok(())
            }
            Ok((_, ControlRequest::Start(_))) => {
                Err(NetdError::Protocol("a second Start".into()))
            }
            Err(FrameError::Closed) => Err(NetdError::PeerGone("supervisor")),
            Err(e) => Err(e.into()),
        },
        end = &mut server => match end {
            Ok(Ok(())) => {
                // Only stdio ends by itself (stdin closed); HTTP serves until drained.
                // Say so, so the supervisor stops the tree as a clean end of session.
                tracing::info!("transport closed");
                write_frame(&mut control, 0, &ControlResponse::Finished).await?;
                Ok(())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(NetdError::Protocol(format!("server task failed: {e}"))),
        },
        end = &mut executor_end => Err(channel_ended("executor", end)),
        end = &mut store_end => Err(channel_ended("approvald", end)),
    }
}

async fn peer(
    mut stream: UnixStream,
    kind: ChannelKind,
    peer: Role,
) -> Result<UnixStream, NetdError> {
    handshake(&mut stream, kind, Role::Netd, peer).await?;
    Ok(stream)
}

fn channel_ended(
    name: &'static str,
    end: Result<Result<(), FrameError>, tokio::task::JoinError>,
) -> NetdError {
    match end {
        Ok(Err(e)) => tracing::error!(channel = name, error = %e, "channel failed"),
        Err(e) => tracing::error!(channel = name, error = %e, "channel task failed"),
        Ok(Ok(())) => {}
    }
    NetdError::PeerGone(name)
}

/// Start the configured transport in its own task; it ends when `stop` fires (or, for
/// stdio, when stdin closes).
fn start_serving(
    source: &mut Source,
    settings: NetdSettings,
    executor: RpcClient<ExecutorRequest, ExecutorResponse>,
    stop: oneshot::Receiver<()>,
) -> Result<JoinHandle<std::io::Result<()>>, NetdError> {
    let stop = async move {
        let _ = stop.await;
    };
    match settings.transport {
        NetdTransport::Http(http) => {
            crate::http::check_settings(&http).map_err(NetdError::Settings)?;
            let listener = source.listener()?;
            Ok(tokio::spawn(crate::http::serve_http(
                listener, http, executor, stop,
            )))
        }
        NetdTransport::Stdio => Ok(tokio::spawn(serve_stdio(executor, stop))),
    }
}

/// MCP over stdin/stdout: no token (the launching user is the caller). Ends at EOF.
async fn serve_stdio(
    executor: RpcClient<ExecutorRequest, ExecutorResponse>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    use rmcp::service::ServerInitializeError;
    tokio::pin!(stop);
    let running = tokio::select! {
        r = McpServer::new(executor, CallOrigin::McpStdio).serve(rmcp::transport::io::stdio()) => match r {
            Ok(running) => running,
            // stdin closed before (or during) the handshake: the client went away; that is
            // a clean end of the session, not a failure.
            Err(ServerInitializeError::ConnectionClosed(_))
            | Err(ServerInitializeError::ExpectedInitializeRequest(None)) => return Ok(()),
            Err(e) => return Err(std::io::Error::other(format!("stdio MCP: {e}"))),
        },
        () = &mut stop => return Ok(()),
    };
    let cancel = running.cancellation_token();
    tokio::select! {
        end = running.waiting() => {
            end.map_err(|e| std::io::Error::other(format!("stdio MCP: {e}")))?;
        }
        () = stop => cancel.cancel(),
    }
    Ok(())
}
