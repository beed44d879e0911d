//! The HTTP listener's connections, for both confined HTTP workers (netd's front door
//! and the Web console): accepting, a cap with room kept for authorized callers, and the
//! timeouts that keep slow or idle clients from holding the worker's descriptors.
//! (Measured on netd before these existed: 1,100 idle TCP connections against an
//! open-file limit of 1,024 made every authorized request time out until they closed.)
//!
//! Per connection:
//! * a request head must be complete within [`HttpLimits::header_read`] of the worker
//!   starting to wait for it (hyper's header timer: slow-header clients);
//! * an authorized request's body within [`HttpLimits::body_read`] (checked by the
//!   worker's front door; unauthenticated bodies are never read);
//! * a connection with no request in flight and no byte received for
//!   [`HttpLimits::idle`] is closed (idle keep-alive, or connected and silent);
//! * a write that makes no progress for [`HttpLimits::write_stall`] closes the connection
//!   (a client that sends requests and stops reading the answers: its receive window is
//!   full, and it would otherwise hold its slot and its request in flight for ever);
//! * [`HttpLimits::lifetime`] after accept no further request is read: responses in
//!   flight are finished, then the connection closes (the client reconnects).
//!
//! Across connections: at most [`HttpLimits::max_connections`], of which
//! [`HttpLimits::reserved_for_authorized`] only connections that already carried an
//! authorized request may hold (the front door says so through [`ConnHandle`]). When a
//! newcomer needs room, an idle connection is closed: one that never carried an
//! authorized request first, from the peer address holding the most connections, oldest
//! first. A connection with a request in flight is never closed for room; if every one is
//! busy, the newcomer is answered `503 Service Unavailable` with `Retry-After` and closed
//! (a bare close would reach the client as a reset, with no reason). That answer is one
//! non-blocking write, never a wait in the accept loop.
//!
//! The default limits are netd's; the Web console lowers the cap (`web/src/worker.rs`).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use nl2sh_proto::limits::{BUSY_RETRY_AFTER, MAX_CONCURRENT_TOOL_CALLS};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

/// Slow-header bound: a phone on a LAN sends a request head in milliseconds; ten seconds
/// tolerates a bad link and still frees a slowloris slot quickly.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Bodies are at most 32 KiB (`MAX_HTTP_BODY_BYTES`): ten seconds is 3 KiB/s.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle keep-alive, as uvicorn and Node use: clients reconnect transparently, and an
/// idle flood costs a slot for five seconds at most.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// One owner's MCP clients need a handful of connections; 256 keeps memory small on a
/// phone (a few KiB each) and far below the open-file limit.
pub const MAX_CONNECTIONS: usize = 256;
/// Slots a flood of unauthenticated connections can never take.
pub const RESERVED_FOR_AUTHORIZED: usize = 32;
/// A response write that makes no progress this long closes its connection. A client
/// that reads at all drains a socket buffer in far less; one that stopped reading would
/// otherwise hold its slot for ever.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// No new request is read on a connection this long after accept. Longer than any
/// single call may take (tool timeout 600 s at most), so only a client that keeps one
/// connection for ever notices: it reconnects.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// Newcomers refused for want of room whose connection is kept open a moment after the
/// 503 (see [`refuse`]); beyond this many, a refusal closes at once.
const MAX_LINGERING_REFUSALS: usize = 16;
/// How long a refused connection lingers for its request to be read and dropped, and
/// how much of it is read at most.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);
const REFUSAL_DISCARD_BYTES: usize = 128 * 1024;
/// Descriptors a worker keeps for itself (channels, listener, stdio, the runtime's own,
/// the lingering refusals) when the cap is fitted to the open-file limit.
const DESCRIPTORS_KEPT: u64 = 32 + MAX_LINGERING_REFUSALS as u64;
/// A connection's read buffer, and so its largest request head (hyper answers 431
/// beyond it). hyper's minimum is 8 KiB; its default (~400 KiB) is far more than an MCP
/// request head needs.
const MAX_READ_BUFFER: usize = 64 * 1024;
/// Pause after an accept error that is not about one connection (out of descriptors or
/// memory), so the loop does not spin while it lasts.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// At most one warning per this interval while the cap is being enforced.
const CAP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The limits above, as one value; tests pass shorter ones.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// A request head must be complete this long after the worker starts waiting for it.
    pub header_read: Duration,
    /// An authorized request's body must be complete this long after its head.
    pub body_read: Duration,
    /// A connection with nothing in flight and nothing received this long is closed.
    pub idle: Duration,
    /// Open connections at most (lowered to fit the open-file limit).
    pub max_connections: usize,
    /// Slots only connections that carried an authorized request may hold.
    pub reserved_for_authorized: usize,
    /// A response write making no progress this long closes the connection.
    pub write_stall: Duration,
    /// No new request is read on a connection this long after accept.
    pub lifetime: Duration,
    /// MCP tool calls that reach the executor at once (netd's `tool_calls`: each holds a
    /// connection, so the cap is sized with them), lowered to a quarter of the connection
    /// cap if that is less. The Web console has no tool calls and leaves it as it is.
    pub max_tool_calls: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read: HEADER_READ_TIMEOUT,
            body_read: BODY_READ_TIMEOUT,
            idle: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            reserved_for_authorized: RESERVED_FOR_AUTHORIZED,
            write_stall: WRITE_STALL_TIMEOUT,
            lifetime: CONNECTION_LIFETIME,
            max_tool_calls: MAX_CONCURRENT_TOOL_CALLS,
        }
    }
}

impl HttpLimits {
    /// The cap fitted to `open_files` (the soft limit; 0 if unknown), with at least one
    /// slot for newcomers and the reserve at most half the cap; the tool-call cap at most
    /// a quarter of the connection cap (at least one).
    pub fn fitted(mut self, open_files: u64) -> Self {
        if open_files > 0 {
            let budget =
                usize::try_from(open_files.saturating_sub(DESCRIPTORS_KEPT)).unwrap_or(usize::MAX);
            self.max_connections = self.max_connections.min(budget);
        }
        self.max_connections = self.max_connections.max(2);
        self.reserved_for_authorized = self.reserved_for_authorized.min(self.max_connections / 2);
        self.max_tool_calls = self.max_tool_calls.min(self.max_connections / 4).max(1);
        self
    }
}

/// One accepted connection, as the cap and the idle timer see it.
struct Conn {
    id: u64,
    peer: IpAddr,
    epoch: Instant,
    /// Set once a request on it passed the bearer check.
    authorized: AtomicBool,
    /// Requests whose response is not fully sent yet.
    in_flight: AtomicUsize,
    /// Last byte received or request finished, in ms since `epoch`.
    last_active_ms: AtomicU64,
    /// Asked to close for room.
    evict: Notify,
}

impl Conn {
    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active_ms.store(ms, Ordering::Relaxed);
    }

    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// When the idle timer fires next, seen at `now`.
    fn idle_deadline(&self, idle: Duration) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        if !self.idle() {
            return now + idle;
        }
        let last = self.epoch + Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        tokio::time::Instant::from_std(last) + idle
    }

    /// A request on this connection passed the front door's authentication.
    fn mark_authorized(&self) {
        self.authorized.store(true, Ordering::Release);
    }

    fn authorized(&self) -> bool {
        self.authorized.load(Ordering::Acquire)
    }
}

/// The request extension through which a worker's front door marks a connection
/// authorized, and learns its peer address.
#[derive(Clone)]
pub struct ConnHandle(Arc<Conn>);

impl ConnHandle {
    /// This connection carried a request that passed its server's authentication: it
    /// may hold one of the reserved slots from now on.
    pub fn mark_authorized(&self) {
        self.0.mark_authorized();
    }

    /// The address the connection came from.
    pub fn peer(&self) -> IpAddr {
        self.0.peer
    }
}

/// A request in flight; dropped when its response body is done (or abandoned).
struct InFlight(Arc<Conn>);

impl InFlight {
    fn start(conn: Arc<Conn>) -> Self {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Every open connection, oldest first (ids only grow).
struct Registry {
    limits: HttpLimits,
    epoch: Instant,
    inner: Mutex<RegistryInner>,
}

struct RegistryInner {
    next_id: u64,
    open: BTreeMap<u64, Arc<Conn>>,
    /// Each warning on its own clock, so one cannot hide the other.
    evicting_warning: Throttle,
    full_warning: Throttle,
}

/// Says yes at most once per `interval` (a warning while a cap is being enforced; netd's
/// tool-call cap uses one too).
#[derive(Debug, Default)]
pub struct Throttle {
    last: Option<Instant>,
}

impl Throttle {
    pub fn ready(&mut self, interval: Duration) -> bool {
        let now = Instant::now();
        if self.last.is_none_or(|t| now.duration_since(t) >= interval) {
            self.last = Some(now);
            return true;
        }
        false
    }
}

impl Registry {
    fn new(limits: HttpLimits) -> Self {
        Self {
            limits,
            epoch: Instant::now(),
            inner: Mutex::new(RegistryInner {
                next_id: 0,
                open: BTreeMap::new(),
                evicting_warning: Throttle::default(),
                full_warning: Throttle::default(),
            }),
        }
    }

    /// Take in a connection from `peer`, closing an idle one if that is what makes room.
    /// `None`: every connection that could give way is busy; close the newcomer.
    fn admit(&self, peer: IpAddr) -> Option<Arc<Conn>> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let max = self.limits.max_connections;
        let unauthorized_max = max - self.limits.reserved_for_authorized;
        let unauthorized = inner.open.values().filter(|c| !c.authorized()).count();
        let evicted = if unauthorized >= unauthorized_max {
            // Newcomers are unauthorized: one of them must give way.
            Some(pick_victim(&inner.open, |c| !c.authorized() && c.idle())?)
        } else if inner.open.len() >= max {
            Some(
                pick_victim(&inner.open, |c| !c.authorized() && c.idle())
                    .or_else(|| pick_victim(&inner.open, Conn::idle))?,
            )
        } else {
            None
        };
        if let Some(id) = evicted {
            if let Some(victim) = inner.open.remove(&id) {
                victim.evict.notify_one();
            }
            if inner.evicting_warning.ready(CAP_WARNING_INTERVAL) {
                tracing::warn!(
                    max_connections = max,
                    "connection cap reached; closing idle connections to make room"
                );
            }
        }
        inner.next_id += 1;
        let conn = Arc::new(Conn {
            id: inner.next_id,
            peer,
            epoch: self.epoch,
            authorized: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(0),
            evict: Notify::new(),
        });
        conn.touch();
        inner.open.insert(conn.id, conn.clone());
        Some(conn)
    }

    /// Every connection is busy and a newcomer is being refused: say so, at most once per
    /// [`CAP_WARNING_INTERVAL`].
    fn warn_full(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.full_warning.ready(CAP_WARNING_INTERVAL) {
            tracing::warn!(
                max_connections = self.limits.max_connections,
                "every connection is busy; answering new ones 503"
            );
        }
    }

    fn remove(&self, id: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.open.remove(&id);
    }
}

/// Among the connections `eligible` accepts: the oldest of the peer address that holds
/// the most open connections (a flood from one address gives way before anyone else).
fn pick_victim(open: &BTreeMap<u64, Arc<Conn>>, eligible: impl Fn(&Conn) -> bool) -> Option<u64> {
    let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
    for c in open.values() {
        *per_peer.entry(c.peer).or_default() += 1;
    }
    let mut best: Option<(usize, u64)> = None;
    // Oldest first, so on a tie in count the older connection is kept as the choice.
    for c in open.values().filter(|c| eligible(c)) {
        let count = per_peer.get(&c.peer).copied().unwrap_or(0);
        if best.is_none_or(|(n, _)| count > n) {
            best = Some((count, c.id));
        }
    }
    best.map(|(_, id)| id)
}

/// Serve `router` on `listener` within `limits` (already [`HttpLimits::fitted`]) until
/// `shutdown` resolves; then stop accepting, let every connection finish its requests in
/// flight, and return.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let registry = Arc::new(Registry::new(limits));
    let refusal: Arc<[u8]> = refusal_answer(limits.max_connections).into();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true)
        .max_buf_size(MAX_READ_BUFFER);
    let http1 = Arc::new(http1);
    let draining = CancellationToken::new();
    let mut tasks = JoinSet::new();
    // Dropped (so aborted) at the end: a refusal has nothing left to finish.
    let mut lingering = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            Some(_) = lingering.join_next(), if !lingering.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some(conn) = registry.admit(peer.ip()) else {
                        registry.warn_full();
                        refuse(stream, refusal.clone(), &mut lingering);
                        continue;
                    };
                    tasks.spawn(serve_connection(
                        stream,
                        conn,
                        router.clone(),
                        http1.clone(),
                        limits,
                        registry.clone(),
                        draining.clone(),
                    ));
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; pausing");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    }
    // New connections are refused from here on; open ones finish what they have.
    drop(listener);
    draining.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// The whole answer to a newcomer there is no room for: small enough for one write into
/// a fresh socket's empty send buffer.
fn refusal_answer(max_connections: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "error": format!(
            "nl2sh is busy: all {max_connections} connections are in use; retry shortly"
        )
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        BUSY_RETRY_AFTER.as_secs(),
        body.len()
    )
    .into_bytes()
}

/// Answer a newcomer there is no room for, without ever waiting in the accept loop: one
/// non-blocking write of `answer` (tokio takes an accepted socket as writable, and its
/// send buffer is empty). Closing a socket whose request is still unread makes the kernel
/// reset the connection, which can reach the client before it has read the answer; so,
/// while few are lingering, the refused connection is half-closed in a task of its own
/// and its request read and dropped for a moment (bounded in time and bytes) before it is
/// closed. That task also finishes the answer if the first write could not.
fn refuse(stream: TcpStream, answer: Arc<[u8]>, lingering: &mut JoinSet<()>) {
    let written = match stream.try_write(&answer) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(_) => return,
    };
    if lingering.len() >= MAX_LINGERING_REFUSALS {
        return;
    }
    lingering.spawn(async move {
        let mut stream = stream;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            let rest = answer.get(written..).unwrap_or_default();
            if stream.write_all(rest).await.is_err() || stream.shutdown().await.is_err() {
                return;
            }
            let mut sink = [0u8; 4096];
            let mut left = REFUSAL_DISCARD_BYTES;
            while left > 0 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        })
        .await;
    });
}

/// Errors about one connection that went away before it was accepted.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn serve_connection(
    stream: TcpStream,
    conn: Arc<Conn>,
    router: Router,
    http1: Arc<hyper::server::conn::http1::Builder>,
    limits: HttpLimits,
    registry: Arc<Registry>,
    draining: CancellationToken,
) {
    let idle = limits.idle;
    let end_of_life = tokio::time::sleep(limits.lifetime);
    tokio::pin!(end_of_life);
    let inner = TowerToHyperService::new(router);
    let for_requests = conn.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let in_flight = InFlight::start(for_requests.clone());
        request
            .extensions_mut()
            .insert(ConnHandle(for_requests.clone()));
        let response = hyper::service::Service::call(&inner, request);
        async move {
            let response = response.await?;
            // The request stays in flight until its body is sent (or abandoned).
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(TrackedBody {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let io = TokioIo::new(Watched::new(stream, conn.clone(), limits.write_stall));
    let connection = http1.serve_connection(io, service);
    tokio::pin!(connection);
    let mut shutting_down = false;
    loop {
        let idle_at = conn.idle_deadline(idle);
        tokio::select! {
            end = connection.as_mut() => {
                if let Err(e) = end {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = conn.evict.notified() => {
                tracing::debug!("closed to make room");
                break;
            }
            () = draining.cancelled(), if !shutting_down => {
                shutting_down = true;
                connection.as_mut().graceful_shutdown();
            }
            // Responses in flight are finished; no further request is read.
            () = &mut end_of_life, if !shutting_down => {
                tracing::debug!("lifetime reached; closing after the requests in flight");
                shutting_down = true;
                connection.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep_until(idle_at) => {
                if conn.idle() && tokio::time::Instant::now() >= conn.idle_deadline(idle) {
                    tracing::debug!("closed while idle");
                    break;
                }
            }
        }
    }
    registry.remove(conn.id);
}

/// A response body that keeps its request in flight until it is dropped (sent, or
/// abandoned with its connection). Size and end are the wrapped body's, so responses keep
/// their Content-Length.
struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The TCP stream, noting when bytes arrive (for the idle timer) and closing the
/// connection when a write makes no progress for `write_stall` (the peer stopped reading:
/// the write waits on its full receive window). Generic for the unit tests.
struct Watched<S = TcpStream> {
    stream: S,
    conn: Arc<Conn>,
    write_stall: Duration,
    /// Armed when a write first has to wait; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> Watched<S> {
    fn new(stream: S, conn: Arc<Conn>, write_stall: Duration) -> Self {
        Self {
            stream,
            conn,
            write_stall,
            stalled: None,
        }
    }

    /// What a write that got `polled` from the stream answers: the same, unless it has
    /// been waiting for `write_stall`. Only a finished write (`wrote`) is progress: a
    /// TCP flush or shutdown is ready at once whatever the peer does.
    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
        wrote: bool,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            if wrote {
                self.stalled = None;
            }
            return polled;
        }
        let stall = self.write_stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        // Polled with the writer's waker, so the connection wakes when time is up.
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                tracing::debug!("closed: the client stopped reading");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no write progress: the client stopped reading",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.conn.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.progress(cx, polled, true)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.progress(cx, polled, true)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.progress(cx, polled, false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.progress(cx, polled, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, reserved: usize) -> HttpLimits {
        HttpLimits {
            max_connections: max,
            reserved_for_authorized: reserved,
            ..HttpLimits::default()
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        let fitted = HttpLimits::default().fitted(100);
        assert_eq!(fitted.max_connections, 100 - DESCRIPTORS_KEPT as usize);
        assert!(fitted.reserved_for_authorized <= fitted.max_connections / 2);
        assert_eq!(
            HttpLimits::default().fitted(0).max_connections,
            MAX_CONNECTIONS
        );
        assert_eq!(HttpLimits::default().fitted(1).max_connections, 2);
    }

    #[test]
    fn a_flood_gives_way_before_other_peers_and_authorized_ones() {
        let registry = Registry::new(limits(8, 2));
        let legit = registry.admit(ip(1)).unwrap();
        let owner = registry.admit(ip(2)).unwrap();
        owner.mark_authorized();
        let flood: Vec<_> = (0..100).filter_map(|_| registry.admit(ip(9))).collect();
        assert_eq!(
            flood.len(),
            100,
            "newcomers always get in while others are idle"
        );
        let inner = registry.inner.lock().unwrap();
        assert!(inner.open.len() <= 8);
        assert!(
            inner.open.contains_key(&legit.id),
            "the other peer's connection stays"
        );
        assert!(
            inner.open.contains_key(&owner.id),
            "the authorized connection stays"
        );
    }

    #[test]
    fn busy_connections_are_never_closed_for_room() {
        let registry = Registry::new(limits(4, 1));
        let busy: Vec<_> = (0..3).map(|_| registry.admit(ip(1)).unwrap()).collect();
        let in_flight: Vec<_> = busy.iter().map(|c| InFlight::start(c.clone())).collect();
        // Three unauthorized slots, all busy: a newcomer is refused.
        assert!(registry.admit(ip(2)).is_none());
        drop(in_flight);
        assert!(registry.admit(ip(2)).is_some());
    }

    #[test]
    fn the_reserve_is_kept_for_authorized_connections() {
        let registry = Registry::new(limits(4, 2));
        let a = registry.admit(ip(1)).unwrap();
        let b = registry.admit(ip(1)).unwrap();
        // Two unauthorized connections fill the unreserved part; a third evicts one.
        let c = registry.admit(ip(1)).unwrap();
        let inner = registry.inner.lock().unwrap();
        assert_eq!(inner.open.len(), 2);
        assert!(!inner.open.contains_key(&a.id), "the oldest gave way");
        assert!(inner.open.contains_key(&b.id) && inner.open.contains_key(&c.id));
    }

    #[test]
    fn the_tool_call_cap_stays_below_the_connection_cap() {
        assert_eq!(
            HttpLimits::default().fitted(0).max_tool_calls,
            MAX_CONCURRENT_TOOL_CALLS
        );
        let small = HttpLimits::default().fitted(DESCRIPTORS_KEPT + 40);
        assert_eq!(small.max_connections, 40);
        assert_eq!(small.max_tool_calls, 10);
        assert_eq!(HttpLimits::default().fitted(1).max_tool_calls, 1);
    }

    #[test]
    fn the_refusal_is_a_complete_503() {
        let answer = String::from_utf8(refusal_answer(256)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains("\r\nRetry-After: 1\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())));
        let error: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(error["error"].as_str().unwrap().contains("256 connections"));
    }

    fn watched(
        stream: tokio::io::DuplexStream,
        stall: Duration,
    ) -> Watched<tokio::io::DuplexStream> {
        let registry = Registry::new(limits(4, 1));
        let conn = registry.admit(ip(1)).unwrap();
        Watched::new(stream, conn, stall)
    }

    // Paused time: the runtime advances the clock whenever every task waits, so these
    // measure the timer, not the machine.
    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_reads_fails_after_the_stall_timeout() {
        let (server, _client) = tokio::io::duplex(64);
        let mut server = watched(server, WRITE_STALL_TIMEOUT);
        let start = tokio::time::Instant::now();
        let err = server.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let waited = start.elapsed();
        assert!(
            waited >= WRITE_STALL_TIMEOUT && waited < WRITE_STALL_TIMEOUT + Duration::from_secs(1),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut server = watched(server, WRITE_STALL_TIMEOUT);
        let pause = WRITE_STALL_TIMEOUT * 2 / 3;
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut total = 0;
            loop {
                tokio::time::sleep(pause).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return total,
                    Ok(n) => total += n,
                }
            }
        });
        let start = tokio::time::Instant::now();
        // Four buffers' worth: four pauses, each shorter than the stall timeout, together
        // far longer.
        server.write_all(&[1u8; 256]).await.unwrap();
        assert!(start.elapsed() > WRITE_STALL_TIMEOUT);
        drop(server);
        assert_eq!(reader.await.unwrap(), 256);
    }
}
