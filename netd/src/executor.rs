//! netd's end of the executor channel: one method per request, each named after the
//! executor's `answer_x` it pairs with (`executor/src/dispatch.rs`). The channel accepts
//! exactly the answer each request may get; any other closes it, which ends netd.

use std::sync::atomic::{AtomicU64, Ordering};

use nl2sh_proto::channels::{
    CallOrigin, CallStage, Correlation, ExecutorRequest, ExecutorResponse, InvokeRequest,
    ToolOutcome, ToolSpec,
};
use nl2sh_proto::rpc::{ChannelEnd, RpcClient, RpcError};
use nl2sh_proto::topology::{Asker, EndError, NetdExecutor};
use tokio_util::sync::CancellationToken;

/// netd's own ids for calls it asks the executor to run, so it can cancel them. The
/// executor mints the ids approvald and the audit see; these never leave this channel.
static NEXT_CORRELATION: AtomicU64 = AtomicU64::new(1);

pub fn next_correlation() -> Correlation {
    Correlation(NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed))
}

#[derive(Clone)]
pub struct ExecutorClient {
    rpc: RpcClient<NetdExecutor>,
    /// Cancelled when the service stops: every direct call still running then cancels
    /// itself ([`crate::tools::call::run`]) and answers its caller with an error.
    stopping: CancellationToken,
}

/// The channel already refuses a wrong answer (and closes); this only names the case for
/// the match that unpacks the right one.
fn unreachable_answer(resp: ExecutorResponse) -> RpcError {
    RpcError::WrongAnswer(format!("{resp:?}"))
}

impl ExecutorClient {
    /// Handshake with the executor and start the channel.
    pub async fn start(end: Asker<NetdExecutor>) -> Result<(Self, ChannelEnd), EndError> {
        let (rpc, ended) = RpcClient::start(end).await?;
        Ok((
            Self {
                rpc,
                stopping: CancellationToken::new(),
            },
            ended,
        ))
    }

    /// The service is stopping: cancel the direct calls still running (each cancels its
    /// own, at once, through its task).
    pub fn stop_calls(&self) {
        self.stopping.cancel();
    }

    /// Cancelled once [`ExecutorClient::stop_calls`] was called.
    pub fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }

    /// The device environment object, as JSON text (`answer_inspect`).
    pub async fn inspect(&self) -> Result<String, RpcError> {
        match self.rpc.call(&ExecutorRequest::Inspect).await? {
            ExecutorResponse::Inspect { json } => Ok(json),
            other => Err(unreachable_answer(other)),
        }
    }

    /// The registered tools (`answer_catalog`).
    pub async fn catalog(&self) -> Result<Vec<ToolSpec>, RpcError> {
        match self.rpc.call(&ExecutorRequest::Catalog).await? {
            ExecutorResponse::Catalog(tools) => Ok(tools),
            other => Err(unreachable_answer(other)),
        }
    }

    /// Run one tool through the executor's pipeline (`answer_invoke`).
    pub async fn invoke(&self, call: InvokeRequest) -> Result<ToolOutcome, RpcError> {
        match self.rpc.call(&ExecutorRequest::Invoke(call)).await? {
            ExecutorResponse::Outcome(outcome) => Ok(outcome),
            other => Err(unreachable_answer(other)),
        }
    }

    /// A screen read (`answer_read_screen`).
    pub async fn read_screen(
        &self,
        correlation: Correlation,
        origin: CallOrigin,
    ) -> Result<ToolOutcome, RpcError> {
        let req = ExecutorRequest::ReadScreen {
            correlation,
            origin,
        };
        match self.rpc.call(&req).await? {
            ExecutorResponse::Outcome(outcome) => Ok(outcome),
            other => Err(unreachable_answer(other)),
        }
    }

    /// Where the call netd knows by `correlation` stands (`answer_progress`); `None` when
    /// it is not running. A pending approval described implausibly (an id no one could
    /// type, a wait longer than any approval) is passed on as a decision without one.
    pub async fn progress(&self, correlation: Correlation) -> Result<Option<CallStage>, RpcError> {
        match self
            .rpc
            .call(&ExecutorRequest::Progress { correlation })
            .await?
        {
            ExecutorResponse::Progress(Some(CallStage::Deciding { wait: Some(wait) }))
                if !wait.is_plausible() =>
            {
                Ok(Some(CallStage::Deciding { wait: None }))
            }
            ExecutorResponse::Progress(stage) => Ok(stage),
            other => Err(unreachable_answer(other)),
        }
    }

    /// Cancel the calls netd knows by `correlation` (`answer_cancel`); whether one ran.
    pub async fn cancel(&self, correlation: Correlation) -> Result<bool, RpcError> {
        match self
            .rpc
            .call(&ExecutorRequest::Cancel { correlation })
            .await?
        {
            ExecutorResponse::Cancelled { found } => Ok(found),
            other => Err(unreachable_answer(other)),
        }
    }
}
