//! netd's life as a worker: supervisor handshake and `Start`, peer channels, the Agent
//! and the task service, serving, `Drain`. Any channel that ends or misbehaves ends netd
//! with a failure; the supervisor then takes the tree down.

use std::sync::Arc;
use std::time::Duration;

use nl2sh_proto::channels::{fds, CallOrigin, NetdSettings, NetdTransport, WorkerEvent};
use nl2sh_proto::limits::SHUTDOWN_GRACE;
use nl2sh_proto::rpc::ChannelEnd;
use nl2sh_proto::sys::{take_inherited, Expect};
use nl2sh_proto::topology::{Asker, NetdApprovald, NetdEnds, NetdExecutor, SupervisorNetd};
use nl2sh_proto::worker::{accept_start, Control, ControlEvent, WorkerError};
use nl2sh_proto::FrameError;
use rmcp::ServiceExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::agent::Agent;
use crate::error::NetdError;
use crate::executor::ExecutorClient;
use crate::http::Backends;
use crate::mcp::McpServer;
use crate::store::StoreClient;
use crate::tasks::{Runner, TaskService, Unavailable};

/// How long approvald may take to answer the start-up ping.
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound on a drain grace, whatever the supervisor asks.
const MAX_GRACE: Duration = Duration::from_secs(60);
/// How long before the end of a stop's grace the calls still running are cancelled, so
/// their errors reach their callers in time.
const CANCEL_BEFORE_DEADLINE: Duration = Duration::from_secs(2);

/// Where the HTTP listener comes from: the fd the supervisor placed (`nl2sh` binary), or
/// one handed over in process (tests). stdio needs none.
pub enum Listener {
    Inherited,
    Given(std::net::TcpListener),
    None,
}

impl Listener {
    fn take(self) -> Result<tokio::net::TcpListener, NetdError> {
        let listener = match self {
            Listener::Inherited => std::net::TcpListener::from(take_inherited(
                fds::NETD_LISTENER,
                Expect::TcpListener,
            )?),
            Listener::Given(listener) => listener,
            Listener::None => {
                return Err(NetdError::Settings(
                    "HTTP transport without a listener".into(),
                ))
            }
        };
        listener.set_nonblocking(true)?;
        Ok(tokio::net::TcpListener::from_std(listener)?)
    }
}

/// The worker, from its channels to the end: `Start`, `start`, serving until a `Drain`
/// (`Serving::drain`), the transport's end (`Serving::transport_ended`) or a peer's. `Ok` means a clean end (drained, or stdin closed in stdio mode); any `Err`
/// should end the process with a failure.
pub async fn serve(ends: NetdEnds, listener: Listener) -> Result<(), NetdError> {
    let NetdEnds {
        control,
        executor,
        approvald,
    } = ends;
    let (mut control, settings) = accept_start(control).await.map_err(|e| match e {
        WorkerError::WrongSettings => NetdError::Protocol(e.to_string()),
        e => e.into(),
    })?;

    #[cfg(debug_assertions)]
    let test_violation = settings.test_violation.clone();

    // Anything that stops netd from serving is reported to the supervisor as Refused.
    let mut serving = match start(settings, executor, approvald, listener).await {
        Ok(serving) => serving,
        Err(e) => {
            let _ = control.refuse(e.to_string()).await;
            return Err(e);
        }
    };

    control.started().await?;
    // TEST HOOK (debug builds only): right after Started, before any request is served.
    #[cfg(debug_assertions)]
    if let Some(violation) = test_violation {
        return Err(crate::test_hook::attempt(&violation));
    }
    tracing::info!("netd serving");
    // The owner's Ask from the terminal console, handed over by approvald.
    let owner_work = tokio::spawn(serving.tasks.clone().serve_owner());
    let _owner_work = AbortOnDrop(owner_work);

    // Biased: when stdin closes, the transport ends first and then (because it held the
    // last executor client) the executor channel; both may be ready at once, and the
    // transport's clean end must win.
    tokio::select! {
        biased;
        event = control.next_event() => match event {
            ControlEvent::Drain { id, grace } => {
                serving.drain(grace).await;
                control.drained(id).await?;
                Ok(())
            }
            ControlEvent::Closed => Err(NetdError::PeerGone("supervisor")),
            ControlEvent::Hostile(e) => Err(e.into()),
        },
        end = &mut serving.server => serving.transport_ended(end, &mut control).await,
        end = &mut serving.executor_end => {
            let e = channel_ended("executor", end);
            serving.answer_in_flight().await;
            Err(e)
        }
        end = &mut serving.store_end => {
            let e = channel_ended("approvald", end);
            serving.answer_in_flight().await;
            Err(e)
        }
    }
}

/// What netd serves with, once started.
struct Serving {
    /// The task service; it holds the store client while serving (dropping the last one
    /// closes the channel).
    tasks: TaskService,
    /// The executor, to cancel the calls still running at the end of a drain.
    stopping: ExecutorClient,
    executor_end: ChannelEnd,
    store_end: ChannelEnd,
    /// Stops the transport: it stops accepting and finishes what is in flight.
    stop: Option<oneshot::Sender<()>>,
    /// The transport, in its own task.
    server: JoinHandle<std::io::Result<()>>,
}

/// Everything netd needs to serve, from the settings of `Start`: the executor and
/// approvald channels (approvald answering a ping in time), the built-in Agent (or why
/// not), the task service, and the transport started.
async fn start(
    settings: NetdSettings,
    executor: Asker<NetdExecutor>,
    approvald: Asker<NetdApprovald>,
    listener: Listener,
) -> Result<Serving, NetdError> {
    let (executor, executor_end) = ExecutorClient::start(executor).await?;
    let (store, store_end) = StoreClient::start(approvald).await?;
    match tokio::time::timeout(PING_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => return Err(NetdError::Timeout("approvald ping")),
    }
    let runner: Arc<dyn Runner> = match Agent::new(executor.clone(), settings.model.clone()) {
        Ok(agent) => agent,
        // The direct tools still serve; every task fails saying why.
        Err(why) => {
            tracing::warn!(reason = %why, "the built-in Agent is unavailable");
            Arc::new(Unavailable(format!(
                "the built-in Agent is unavailable: {why}"
            )))
        }
    };
    let tasks = TaskService::new(store, runner);
    let stopping = executor.clone();
    let backends = Backends {
        executor,
        tasks: tasks.clone(),
    };
    let (stop, stop_rx) = oneshot::channel::<()>();
    let server = start_serving(listener, settings, backends, stop_rx)?;
    Ok(Serving {
        tasks,
        stopping,
        executor_end,
        store_end,
        stop: Some(stop),
        server,
    })
}

impl Serving {
    /// The supervisor's `Drain` with `grace` (at most [`MAX_GRACE`]).
    async fn drain(&mut self, grace: Duration) {
        let grace = grace.min(MAX_GRACE);
        tracing::info!(grace_ms = grace.as_millis() as u64, "draining");
        let deadline = tokio::time::Instant::now() + grace;
        // Tasks first, through the same path as CancelTask (their tool calls stopped,
        // approvals withdrawn, CANCELED stored), so that requests waiting on them (a
        // blocking SendMessage) can answer before the transport stops.
        self.tasks.drain(deadline).await;
        self.stop_transport();
        // Direct calls still running when the grace is nearly out are cancelled (their
        // commands killed, pending approvals withdrawn), so each answers its caller with
        // an error instead of having its connection cut.
        let margin = (grace / 2).min(CANCEL_BEFORE_DEADLINE);
        let cancel_at = deadline - margin;
        let ended = tokio::select! {
            end = &mut self.server => Some(end),
            () = tokio::time::sleep_until(cancel_at) => None,
        };
        let ended = match ended {
            Some(end) => Ok(end),
            None => {
                tracing::info!("cancelling calls still running at the end of the grace");
                self.stopping.stop_calls();
                tokio::time::timeout_at(deadline, &mut self.server).await
            }
        };
        match ended {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "server ended with an error while draining")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "server task failed while draining"),
            Err(_) => {
                tracing::warn!("grace expired with requests in flight; dropping them");
                self.server.abort();
            }
        }
    }

    /// The transport ended by itself (`end`): only stdio does (stdin closed), which ends
    /// the session; HTTP serves until drained.
    async fn transport_ended(
        &self,
        end: Result<std::io::Result<()>, tokio::task::JoinError>,
        control: &mut Control<SupervisorNetd>,
    ) -> Result<(), NetdError> {
        match end {
            Ok(Ok(())) => {
                // The tree stops next: tasks still running end CANCELED now rather than
                // cut off with the process.
                self.tasks
                    .drain(tokio::time::Instant::now() + SHUTDOWN_GRACE)
                    .await;
                // Say so, so the supervisor stops the tree as a clean end of session.
                tracing::info!("transport closed");
                control.event(WorkerEvent::SessionEnded).await?;
                Ok(())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(NetdError::Protocol(format!("server task failed: {e}"))),
        }
    }

    /// A peer worker is gone and the supervisor will restart the tree: stop accepting,
    /// and let the requests in flight answer (with errors in their protocol's form, as
    /// their calls to the gone peer fail) instead of dropping their connections.
    async fn answer_in_flight(&mut self) {
        self.stop_transport();
        if tokio::time::timeout(PEER_GONE_GRACE, &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
        }
    }

    fn stop_transport(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// How long requests in flight may take to be answered once a peer is gone (their calls
/// to it fail at once, so this is only the time to write the answers).
const PEER_GONE_GRACE: Duration = Duration::from_secs(2);

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
    listener: Listener,
    settings: NetdSettings,
    backends: Backends,
    stop: oneshot::Receiver<()>,
) -> Result<JoinHandle<std::io::Result<()>>, NetdError> {
    let stop = async move {
        let _ = stop.await;
    };
    match settings.transport {
        NetdTransport::Http(http) => {
            crate::http::check_settings(&http).map_err(NetdError::Settings)?;
            let listener = listener.take()?;
            Ok(tokio::spawn(crate::http::serve_http(
                listener, http, backends, stop,
            )))
        }
        NetdTransport::Stdio => Ok(tokio::spawn(serve_stdio(backends, stop))),
    }
}

/// MCP over stdin/stdout: no token (the launching user is the caller). Ends at EOF.
async fn serve_stdio(
    backends: Backends,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    use rmcp::service::ServerInitializeError;
    tokio::pin!(stop);
    let server = McpServer::new(
        backends.executor,
        backends.tasks,
        CallOrigin::McpStdio,
        crate::tool_calls::ToolCalls::default(),
    );
    let running = tokio::select! {
        r = server.serve(rmcp::transport::io::stdio()) => match r {
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

/// Ends a spawned task when the worker's serving ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
