//! Request/response multiplexing over one Unix stream: the client tags each request with
//! an id so concurrent calls share a connection; the server answers each request in its
//! own task. Either side closes the channel on the first hostile frame.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::frame::{encode, read_frame, FrameError, Wire};
use crate::limits::MAX_IN_FLIGHT_PER_CHANNEL;

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{0} channel is closed")]
    Closed(&'static str),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Waiting callers by request id; `None` once the channel has ended, so a late caller
/// fails at once instead of waiting for an answer that cannot come.
type Pending<Resp> = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Resp>>>>>;

/// The asking end of a channel. The channel stays open while any clone of the client
/// lives: dropping the last one shuts down the write half, which the peer sees as EOF.
pub struct RpcClient<Req, Resp> {
    next_id: Arc<AtomicU64>,
    pending: Pending<Resp>,
    writer: mpsc::Sender<Vec<u8>>,
    _req: PhantomData<fn(Req)>,
}

impl<Req, Resp> Clone for RpcClient<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            next_id: self.next_id.clone(),
            pending: self.pending.clone(),
            writer: self.writer.clone(),
            _req: PhantomData,
        }
    }
}

impl<Req: Wire, Resp: Wire> RpcClient<Req, Resp> {
    /// Start the reader and writer tasks. The returned handle resolves when the channel
    /// ends, with the reason; every waiting call then fails with `Closed`.
    pub fn spawn(stream: UnixStream) -> (Self, tokio::task::JoinHandle<Result<(), FrameError>>) {
        let (mut rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
        let pending: Pending<Resp> = Arc::new(Mutex::new(Some(HashMap::new())));
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if wr.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let pending_r = pending.clone();
        let next_id = Arc::new(AtomicU64::new(1));
        let issued = next_id.clone();
        let reader = tokio::spawn(async move {
            let result = loop {
                match read_frame::<Resp, _>(&mut rd).await {
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
                                    "{} for request id {id}, which was never sent",
                                    Resp::NAME
                                )))
                            }
                        }
                    }
                    Err(FrameError::Closed) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            if let Err(e) = &result {
                tracing::warn!(channel = Resp::NAME, error = %e, "closing channel");
            }
            // Dropping every sender wakes every waiting caller with `Closed`.
            *lock(&pending_r) = None;
            result
        });
        let client = Self {
            next_id,
            pending,
            writer: tx,
            _req: PhantomData,
        };
        (client, reader)
    }

    pub async fn call(&self, req: &Req) -> Result<Resp, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(id, req)?;
        let (tx, rx) = oneshot::channel();
        match lock(&self.pending).as_mut() {
            Some(p) => p.insert(id, tx),
            None => return Err(RpcError::Closed(Req::NAME)),
        };
        // Remove our entry if this future is dropped before the answer arrives.
        let guard = PendingGuard {
            pending: &self.pending,
            id,
        };
        if self.writer.send(bytes).await.is_err() {
            return Err(RpcError::Closed(Req::NAME));
        }
        let result = rx.await.map_err(|_| RpcError::Closed(Req::NAME));
        drop(guard);
        result
    }
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

/// Serve requests on `stream` until the peer closes it (Ok) or sends a hostile frame
/// (Err, after logging). Each request runs in its own task; at most
/// `MAX_IN_FLIGHT_PER_CHANNEL` at once.
pub async fn serve<Req, Resp, F, Fut>(stream: UnixStream, handler: F) -> Result<(), FrameError>
where
    Req: Wire,
    Resp: Wire,
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CHANNEL));
    let handler = Arc::new(handler);
    let result = loop {
        let (id, req) = match read_frame::<Req, _>(&mut rd).await {
            Ok(frame) => frame,
            Err(FrameError::Closed) => break Ok(()),
            Err(e) => break Err(e),
        };
        if id == 0 {
            break Err(FrameError::OutOfPlace(format!("{} with id 0", Req::NAME)));
        }
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break Ok(());
        };
        let tx = tx.clone();
        let handler = handler.clone();
        tokio::spawn(async move {
            let resp = handler(req).await;
            match encode(id, &resp) {
                Ok(bytes) => {
                    let _ = tx.send(bytes).await;
                }
                Err(e) => tracing::error!(channel = Resp::NAME, error = %e, "cannot encode reply"),
            }
            drop(permit);
        });
    };
    if let Err(e) = &result {
        tracing::warn!(channel = Req::NAME, error = %e, "closing channel");
    }
    drop(tx);
    if result.is_err() {
        writer.abort();
    } else {
        let _ = writer.await;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::{StoreRequest, StoreResponse};

    #[tokio::test]
    async fn concurrent_calls_share_one_connection() {
        let (a, b) = UnixStream::pair().unwrap();
        tokio::spawn(serve(b, |req: StoreRequest| async move {
            match req {
                StoreRequest::Ping => StoreResponse::Pong,
            }
        }));
        let (client, _) = RpcClient::<StoreRequest, StoreResponse>::spawn(a);
        let calls = (0..50).map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.call(&StoreRequest::Ping).await })
        });
        for call in calls {
            assert!(matches!(call.await.unwrap(), Ok(StoreResponse::Pong)));
        }
    }

    #[tokio::test]
    async fn calls_after_the_peer_is_gone_fail_instead_of_hanging() {
        let (a, b) = UnixStream::pair().unwrap();
        let (client, reader) = RpcClient::<StoreRequest, StoreResponse>::spawn(a);
        drop(b);
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
        let (a, mut b) = UnixStream::pair().unwrap();
        let (_client, reader) = RpcClient::<StoreRequest, StoreResponse>::spawn(a);
        crate::frame::write_frame(&mut b, 99, &StoreResponse::Pong)
            .await
            .unwrap();
        assert!(matches!(
            reader.await.unwrap(),
            Err(FrameError::OutOfPlace(_))
        ));
    }
}
