//! Request/answer multiplexing over one channel of [`crate::topology`]: the client tags
//! each request with an id so concurrent calls share a connection; the server answers each
//! request in its own task.
//!
//! Both sides are typed by the channel, so only its asking end can become a client and
//! only its requests can be sent. What arrives is checked against the state each side
//! holds, and anything out of place is fatal to the channel (one log line naming the
//! channel and the message, then the channel closes; the worker that loses a channel
//! ends, and the supervisor restarts the workers):
//! * the client: an answer of the wrong kind for its request ([`Channel::answers`]), or
//!   an answer to an id it never sent;
//! * the server: a request with id 0 (ids count from 1), or one its handler finds out of
//!   state ([`OutOfState`], e.g. an outcome for a call that was never decided).
//!
//! Every request is answered: nothing a peer sends is a record nobody waits for (the
//! audit's rows are answered once committed).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::frame::{encode, read_frame, FrameError, Wire};
use crate::limits::MAX_IN_FLIGHT_PER_CHANNEL;
use crate::topology::{Answerer, Asker, Channel, EndError};

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{0} channel is closed")]
    Closed(&'static str),
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("{0}")]
    WrongAnswer(String),
}

/// A request the handler refuses as out of state: fatal to the channel it came on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfState(pub String);

/// Waiting callers by request id; `None` once the channel has ended, so a late caller
/// fails at once instead of waiting for an answer that cannot come.
type Pending<Resp> = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Resp>>>>>;

/// Why the channel was closed by this side; every task of the channel waits on it.
struct Fatal {
    reason: watch::Sender<Option<String>>,
}

impl Default for Fatal {
    fn default() -> Self {
        Self {
            reason: watch::Sender::new(None),
        }
    }
}

impl Fatal {
    /// The first reason stays; raising again only wakes whoever has not noticed yet.
    fn raise(&self, reason: String) {
        self.reason.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Resolves (at once, if already raised) with the reason.
    async fn raised(&self) -> String {
        let mut rx = self.reason.subscribe();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(r) => r.clone(),
            // The sender lives as long as `self`.
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }
}

/// The asking end of channel `C`, running. The channel stays open while any clone of
/// the client lives: dropping the last one shuts down the write half, which the peer sees
/// as EOF.
pub struct RpcClient<C: Channel> {
    next_id: Arc<AtomicU64>,
    pending: Pending<C::Response>,
    writer: mpsc::Sender<Vec<u8>>,
    fatal: Arc<Fatal>,
}

/// Bytes read from a channel at once: a burst of frames costs one read.
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Bytes of queued frames written at once.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

impl<C: Channel> Clone for RpcClient<C> {
    fn clone(&self) -> Self {
        Self {
            next_id: self.next_id.clone(),
            pending: self.pending.clone(),
            writer: self.writer.clone(),
            fatal: self.fatal.clone(),
        }
    }
}

/// Resolves when a running channel ends, with the reason (`Ok` for a clean close by the
/// peer between frames).
pub type ChannelEnd = tokio::task::JoinHandle<Result<(), FrameError>>;

impl<C: Channel> RpcClient<C> {
    /// Handshake on `end`, then start the reader and writer tasks. The returned handle
    /// resolves when the channel ends; every waiting call then fails with `Closed`.
    pub async fn start(end: Asker<C>) -> Result<(Self, ChannelEnd), EndError> {
        let stream = end.greet().await?;
        Ok(Self::spawn(stream))
    }

    fn spawn(stream: UnixStream) -> (Self, ChannelEnd) {
        let (rd, mut wr) = stream.into_split();
        let mut rd = tokio::io::BufReader::with_capacity(READ_BUFFER_BYTES, rd);
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
        let pending: Pending<C::Response> = Arc::new(Mutex::new(Some(HashMap::new())));
        let fatal = Arc::new(Fatal::default());
        let writer_fatal = fatal.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                tokio::select! {
                    more = gather(&mut rx, &mut out) => if !more {
                        break;
                    },
                    _ = writer_fatal.raised() => break,
                }
                if wr.write_all(&out).await.is_err() {
                    break;
                }
                out.clear();
            }
        });
        let pending_r = pending.clone();
        let next_id = Arc::new(AtomicU64::new(1));
        let issued = next_id.clone();
        let reader_fatal = fatal.clone();
        let reader = tokio::spawn(async move {
            let result = loop {
                let frame = tokio::select! {
                    frame = read_frame::<C::Response, _>(&mut rd) => frame,
                    why = reader_fatal.raised() => break Err(FrameError::OutOfPlace(why)),
                };
                match frame {
                    Ok((id, resp)) => {
                        let waiter = lock(&pending_r).as_mut().and_then(|p| p.remove(&id));
                        match waiter {
                            Some(w) => {
                                let _ = w.send(resp);
                            }
                            // A caller that gave up removed its entry: drop the late reply.
                            None if id != 0 && id < issued.load(Ordering::Relaxed) => continue,
                            // A reply to an id never issued: the peer is confused or hostile.
                            None => {
                                break Err(FrameError::OutOfPlace(format!(
                                    "{resp:?} for request id {id}, which was never sent"
                                )))
                            }
                        }
                    }
                    Err(FrameError::Closed) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            if let Err(e) = &result {
                tracing::warn!(channel = ?C::KIND, error = %e, "closing channel");
                reader_fatal.raise(e.to_string());
            }
            // Dropping every sender wakes every waiting caller with `Closed`.
            *lock(&pending_r) = None;
            result
        });
        let client = Self {
            next_id,
            pending,
            writer: tx,
            fatal,
        };
        (client, reader)
    }

    /// Ask, and wait for the answer. An answer of the wrong kind closes the channel.
    pub async fn call(&self, req: &C::Request) -> Result<C::Response, RpcError> {
        let closed = || RpcError::Closed(C::Request::NAME);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(id, req)?;
        let (tx, rx) = oneshot::channel();
        match lock(&self.pending).as_mut() {
            Some(p) => p.insert(id, tx),
            None => return Err(closed()),
        };
        // Remove our entry if this future is dropped before the answer arrives.
        let guard = PendingGuard {
            pending: &self.pending,
            id,
        };
        if self.writer.send(bytes).await.is_err() {
            return Err(closed());
        }
        let resp = rx.await.map_err(|_| closed())?;
        drop(guard);
        if !C::answers(req, &resp) {
            let why = format!("{:?}: {resp:?} is no answer to {req:?}", C::KIND);
            // The reader logs it once, with the channel, as it closes.
            self.fatal.raise(why.clone());
            return Err(RpcError::WrongAnswer(why));
        }
        Ok(resp)
    }
}

/// Wait for the next outgoing frame and gather what is queued behind it into `out`, so
/// a burst of concurrent calls costs one write. False when every sender is gone.
async fn gather(rx: &mut mpsc::Receiver<Vec<u8>>, out: &mut Vec<u8>) -> bool {
    let Some(first) = rx.recv().await else {
        return false;
    };
    out.extend_from_slice(&first);
    while out.len() < WRITE_BATCH_BYTES {
        match rx.try_recv() {
            Ok(next) => out.extend_from_slice(&next),
            Err(_) => break,
        }
    }
    true
}

struct PendingGuard<'a, Resp> {
    pending: &'a Pending<Resp>,
    id: u64,
}

impl<Resp> Drop for PendingGuard<'_, Resp> {
    fn drop(&mut self) {
        if let Some(p) = lock(self.pending).as_mut() {
            p.remove(&self.id);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned map only means another task panicked mid-insert; the map is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Handshake on `end`, then serve its requests until the peer closes it (Ok) or sends
/// something out of place (Err, after one log line). Each request runs in its own task;
/// at most `MAX_IN_FLIGHT_PER_CHANNEL` at once. A handler answering [`OutOfState`] closes
/// the channel.
pub async fn serve<C, F, Fut>(end: Answerer<C>, handler: F) -> Result<(), FrameError>
where
    C: Channel,
    F: Fn(C::Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<C::Response, OutOfState>> + Send + 'static,
{
    serve_greeted_within(end, None, handler).await
}

/// What a handler keeps alive until its answer has been written to the socket: a permit
/// counting the bytes of a large answer, so that answers waiting to be sent are counted
/// as well as those being made (see [`serve_holding`]).
pub type Hold = Box<dyn Send + Sync>;

/// [`serve`], for a handler that answers with a [`Hold`]: it is dropped only once the
/// answer's frame has been written (or the channel has ended).
pub async fn serve_holding<C, F, Fut>(end: Answerer<C>, handler: F) -> Result<(), FrameError>
where
    C: Channel,
    F: Fn(C::Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(C::Response, Option<Hold>), OutOfState>> + Send + 'static,
{
    let stream = greet::<C>(end, None).await?;
    serve_greeted::<C, F, Fut>(stream, handler).await
}

/// [`serve`], for a peer that must complete its handshake within `limit` (a connection
/// accepted from a socket: an idle one must not hold a slot).
pub async fn serve_greeted_within<C, F, Fut>(
    end: Answerer<C>,
    limit: Option<std::time::Duration>,
    handler: F,
) -> Result<(), FrameError>
where
    C: Channel,
    F: Fn(C::Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<C::Response, OutOfState>> + Send + 'static,
{
    let stream = greet::<C>(end, limit).await?;
    let unheld = move |req: C::Request| {
        let answer = handler(req);
        async move { answer.await.map(|resp| (resp, None)) }
    };
    serve_greeted::<C, _, _>(stream, unheld).await
}

async fn greet<C: Channel>(
    end: Answerer<C>,
    limit: Option<std::time::Duration>,
) -> Result<UnixStream, FrameError> {
    let greeting = end.greet();
    let greeted = match limit {
        Some(limit) => tokio::time::timeout(limit, greeting)
            .await
            .map_err(|_| FrameError::OutOfPlace("no handshake in time".into()))?,
        None => greeting.await,
    };
    greeted.map_err(|e| match e {
        EndError::Handshake { source, .. } => source,
        other => FrameError::OutOfPlace(other.to_string()),
    })
}

async fn serve_greeted<C, F, Fut>(stream: UnixStream, handler: F) -> Result<(), FrameError>
where
    C: Channel,
    F: Fn(C::Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(C::Response, Option<Hold>), OutOfState>> + Send + 'static,
{
    let (rd, mut wr) = stream.into_split();
    let mut rd = tokio::io::BufReader::with_capacity(READ_BUFFER_BYTES, rd);
    let (tx, mut rx) = mpsc::channel::<(Vec<u8>, Option<Hold>)>(64);
    let writer = tokio::spawn(async move {
        let mut out = Vec::new();
        let mut holds = Vec::new();
        while let Some((bytes, hold)) = rx.recv().await {
            // Answers finished meanwhile go out in the same write.
            out.extend_from_slice(&bytes);
            drop(bytes);
            holds.extend(hold);
            while out.len() < WRITE_BATCH_BYTES {
                match rx.try_recv() {
                    Ok((more, hold)) => {
                        out.extend_from_slice(&more);
                        holds.extend(hold);
                    }
                    Err(_) => break,
                }
            }
            if wr.write_all(&out).await.is_err() {
                break;
            }
            // A large answer's buffer is not kept for the next small one.
            if out.capacity() > WRITE_BATCH_BYTES * 4 {
                out = Vec::new();
            } else {
                out.clear();
            }
            holds.clear();
        }
    });
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CHANNEL));
    let handler = Arc::new(handler);
    let fatal = Arc::new(Fatal::default());
    let result = loop {
        let frame = tokio::select! {
            frame = read_frame::<C::Request, _>(&mut rd) => frame,
            why = fatal.raised() => break Err(FrameError::OutOfPlace(why)),
        };
        let (id, req) = match frame {
            Ok(frame) => frame,
            Err(FrameError::Closed) => break Ok(()),
            Err(e) => break Err(e),
        };
        if id == 0 {
            break Err(FrameError::OutOfPlace(format!(
                "{req:?} with request id 0 (ids count from 1)"
            )));
        }
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break Ok(());
        };
        let tx = tx.clone();
        let handler = handler.clone();
        let fatal = fatal.clone();
        tokio::spawn(async move {
            // Kept for the log line should the request be out of state; bounded as it
            // is written, so a long request (a 16 KiB action) is not formatted whole.
            let described = debug_prefix(&req, DESCRIBED_BYTES);
            match handler(req).await {
                Ok((resp, hold)) => {
                    let encoded = encode(id, &resp);
                    // The answer is in its frame now: one copy waits for the writer.
                    drop(resp);
                    match encoded {
                        Ok(bytes) => {
                            let _ = tx.send((bytes, hold)).await;
                        }
                        Err(e) => {
                            tracing::error!(channel = ?C::KIND, error = %e, "cannot encode reply")
                        }
                    }
                }
                Err(OutOfState(why)) => fatal.raise(format!("{why}: {described}")),
            }
            drop(permit);
        });
    };
    if let Err(e) = &result {
        tracing::warn!(channel = ?C::KIND, error = %e, "closing channel");
    }
    drop(tx);
    if result.is_err() {
        writer.abort();
    } else {
        let _ = writer.await;
    }
    result
}

/// A message in a log line, without flooding it.
/// How much of a request an out-of-state log line quotes.
const DESCRIBED_BYTES: usize = 300;

/// The first `limit` bytes (or a little less, at a character boundary) of `value`'s
/// `Debug` form, without formatting the rest.
fn debug_prefix(value: &impl std::fmt::Debug, limit: usize) -> String {
    use std::fmt::Write;
    struct Upto {
        out: String,
        limit: usize,
    }
    impl Write for Upto {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = self.limit - self.out.len();
            if s.len() <= room {
                self.out.push_str(s);
                return Ok(());
            }
            self.out.push_str(crate::text::prefix(s, room));
            // Stops the formatting: nothing more fits.
            Err(std::fmt::Error)
        }
    }
    let mut upto = Upto {
        out: String::new(),
        limit,
    };
    let _ = write!(upto, "{value:?}");
    upto.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::{
        AuthorityRequest, AuthorityResponse, CallId, ExecutorRequest, ExecutorResponse,
        StoreRequest, StoreResponse,
    };
    use crate::topology::{pair, ExecutorApprovald, NetdApprovald, NetdExecutor};

    #[test]
    fn a_request_is_described_only_up_to_its_limit() {
        let long = "é".repeat(10_000);
        let described = debug_prefix(&long, 301);
        assert!(
            described.len() <= 301 && described.len() >= 299,
            "{}",
            described.len()
        );
        assert!(described.starts_with("\"éé"));
        assert_eq!(debug_prefix(&"short", 300), "\"short\"");
    }

    #[tokio::test]
    async fn concurrent_calls_share_one_connection() {
        let (a, b) = pair::<NetdApprovald>().unwrap();
        tokio::spawn(serve(b, |req: StoreRequest| async move {
            match req {
                StoreRequest::Ping => Ok(StoreResponse::Pong),
                _ => Err(OutOfState("only Ping here".into())),
            }
        }));
        let (client, _) = RpcClient::start(a).await.unwrap();
        let calls = (0..50).map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.call(&StoreRequest::Ping).await })
        });
        for call in calls {
            assert!(matches!(call.await.unwrap(), Ok(StoreResponse::Pong)));
        }
    }

    #[tokio::test]
    async fn holds_are_given_back_once_their_answers_are_out() {
        let (a, b) = pair::<NetdApprovald>().unwrap();
        // One permit: a second answer cannot be made while the first is held.
        let budget = Arc::new(Semaphore::new(1));
        let held = budget.clone();
        tokio::spawn(serve_holding(b, move |_req: StoreRequest| {
            let held = held.clone();
            async move {
                let permit = held.acquire_owned().await.expect("open");
                Ok((StoreResponse::Pong, Some(Box::new(permit) as Hold)))
            }
        }));
        let (client, _) = RpcClient::start(a).await.unwrap();
        for _ in 0..20 {
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                client.call(&StoreRequest::Ping),
            )
            .await
            .expect("a hold was never released");
            assert!(matches!(answer, Ok(StoreResponse::Pong)));
        }
        // Every hold is given back once its answer is out.
        let all = tokio::time::timeout(std::time::Duration::from_secs(5), budget.acquire())
            .await
            .expect("the last hold was kept");
        drop(all);
    }

    #[tokio::test]
    async fn calls_after_the_peer_is_gone_fail_instead_of_hanging() {
        let (a, b) = pair::<NetdApprovald>().unwrap();
        let peer = tokio::spawn(b.greet());
        let (client, reader) = RpcClient::start(a).await.unwrap();
        drop(peer.await.unwrap().unwrap());
        let _ = reader.await;
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            client.call(&StoreRequest::Ping),
        )
        .await
        .expect("call hung on a closed channel");
        assert!(matches!(r, Err(RpcError::Closed(_))));
    }

    #[tokio::test]
    async fn a_reply_to_an_unsent_id_closes_the_channel() {
        let (a, b) = pair::<NetdApprovald>().unwrap();
        let peer = tokio::spawn(b.greet());
        let (_client, reader) = RpcClient::start(a).await.unwrap();
        let mut b = peer.await.unwrap().unwrap();
        crate::frame::write_frame(&mut b, 99, &StoreResponse::Pong)
            .await
            .unwrap();
        assert!(matches!(
            reader.await.unwrap(),
            Err(FrameError::OutOfPlace(_))
        ));
    }

    #[tokio::test]
    async fn an_answer_of_the_wrong_kind_closes_the_channel() {
        let (a, b) = pair::<NetdExecutor>().unwrap();
        // An executor that answers everything with a catalog.
        tokio::spawn(serve(b, |_req: ExecutorRequest| async move {
            Ok(ExecutorResponse::Catalog(Vec::new()))
        }));
        let (client, reader) = RpcClient::start(a).await.unwrap();
        assert!(client.call(&ExecutorRequest::Catalog).await.is_ok());
        let r = client.call(&ExecutorRequest::Inspect).await;
        assert!(matches!(r, Err(RpcError::WrongAnswer(_))), "{r:?}");
        assert!(matches!(
            reader.await.unwrap(),
            Err(FrameError::OutOfPlace(why)) if why.contains("no answer to Inspect")
        ));
        // The channel is gone for everyone.
        assert!(matches!(
            client.call(&ExecutorRequest::Catalog).await,
            Err(RpcError::Closed(_))
        ));
    }

    #[tokio::test]
    async fn a_request_out_of_state_closes_the_channel_on_the_server() {
        let (a, b) = pair::<ExecutorApprovald>().unwrap();
        let server = tokio::spawn(serve(b, |req: AuthorityRequest| async move {
            match req {
                AuthorityRequest::Withdraw { call_id: CallId(7) } => Err(OutOfState(
                    "a withdrawal for a call that was never decided".into(),
                )),
                _ => Ok(AuthorityResponse::Pong),
            }
        }));
        let (client, reader) = RpcClient::start(a).await.unwrap();
        assert!(client.call(&AuthorityRequest::Ping).await.is_ok());
        let r = client
            .call(&AuthorityRequest::Withdraw { call_id: CallId(7) })
            .await;
        assert!(matches!(r, Err(RpcError::Closed(_))), "{r:?}");
        assert!(matches!(
            server.await.unwrap(),
            Err(FrameError::OutOfPlace(why)) if why.contains("never decided")
        ));
        assert!(
            reader.await.unwrap().is_ok(),
            "the client sees a clean close"
        );
    }

    fn result(call_id: u64) -> crate::channels::CallResult {
        crate::channels::CallResult {
            call_id: CallId(call_id),
            success: true,
            exit_code: None,
            duration_ms: 1,
            summary: "ok".into(),
        }
    }

    #[tokio::test]
    async fn a_request_with_id_0_closes_the_channel() {
        for req in [
            AuthorityRequest::Finished(result(1)),
            AuthorityRequest::Ping,
        ] {
            let id = 0;
            let (a, b) = pair::<ExecutorApprovald>().unwrap();
            let server = tokio::spawn(serve(b, |_req: AuthorityRequest| async move {
                Ok(AuthorityResponse::Pong)
            }));
            let mut a = a.greet().await.unwrap();
            crate::frame::write_frame(&mut a, id, &req).await.unwrap();
            let r = server.await.unwrap();
            assert!(
                matches!(&r, Err(FrameError::OutOfPlace(why)) if why.contains("id")),
                "{r:?}"
            );
        }
    }
}
