//! The front door: everything a request passes before MCP or A2A sees it.
//!
//! Routes: `/mcp` (MCP, Streamable HTTP), `/a2a` and `/a2a/` (A2A JSON-RPC, see
//! [`crate::a2a`]) are protected; `/.well-known/agent-card.json` is public (no token) but
//! passes the same Host and Origin checks (3 and 4 below), so a page on another origin
//! cannot read it through a rebound name either. Anything else is 404.
//!
//! Order of the checks on a protected route, first failure wins:
//!
//! 1. declared body size: `Content-Length` over [`MAX_HTTP_BODY_BYTES`] → 413;
//! 2. `Authorization: Bearer <token>` missing or wrong → 401 with
//!    `WWW-Authenticate: Bearer` (checked before Host so nothing about the service's
//!    names is revealed to a caller without the token);
//! 3. `Host` (and an absolute-form request target) not the advertised authority or a
//!    local listener authority → 403;
//! 4. `Origin` present and not the advertised origin → 403;
//! 5. the body is read, bounded by [`MAX_HTTP_BODY_BYTES`] while streaming (chunked
//!    bodies have no Content-Length) → 413, and by [`HttpLimits::body_read`] in time →
//!    408. Only authenticated requests get their body read at all;
//! 6. on `/mcp` only: a `tools/call` of a tool that reaches the executor while
//!    [`HttpLimits::max_tool_calls`] such calls run → 503 with `Retry-After` and a
//!    JSON-RPC error (see [`crate::tool_calls`]).
//!
//! Connections (the cap, header and idle timeouts) are `nl2sh_http_worker::connections`'s,
//! and the Host and Origin rule is `nl2sh_http_worker::origin`'s: the Web console's too.
//!
//! Error bodies are `{"error":"..."}`. No header value (token, Host, Origin) is ever
//! logged. Refusals of unauthenticated requests (check 2, and checks 3 and 4 on the
//! public route) go to `nl2sh_http_worker::refusals`: the first one a line, the rest counted into
//! at most one summary line per interval, so a flood cannot fill the log.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use nl2sh_http_worker::connections::{ConnHandle, BODY_READ_TIMEOUT};
use nl2sh_http_worker::origin::{Authorities, HostPort, Origin};
use nl2sh_http_worker::refusals::RefusalLog;
use nl2sh_proto::channels::{CallOrigin, HttpSettings};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{
    BUSY_RETRY_AFTER, MAX_ACTIVE_TASKS, MAX_CONCURRENT_TOOL_CALLS, MAX_HTTP_BODY_BYTES,
    TOKEN_MAX_CHARS, TOKEN_MIN_CHARS,
};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::a2a::{self, card::Card, A2a};
use crate::executor::ExecutorClient;
use crate::mcp::McpServer;
use crate::tasks::TaskService;
use crate::tool_calls::ToolCalls;

pub use nl2sh_http_worker::connections::HttpLimits;

// Long tool calls and running tasks together can hold at most this many of netd's
// connections, leaving the reserve and more for everyone else.
const _: () = {
    use nl2sh_http_worker::connections::{MAX_CONNECTIONS, RESERVED_FOR_AUTHORIZED};
    assert!(
        MAX_CONCURRENT_TOOL_CALLS + MAX_ACTIVE_TASKS + RESERVED_FOR_AUTHORIZED < MAX_CONNECTIONS
    );
};

/// Where the public Agent Card is served.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// What the routes serve: the executor (direct tools) and the task service (A2A and the
/// MCP task tools share it).
#[derive(Clone)]
pub struct Backends {
    pub executor: ExecutorClient,
    pub tasks: TaskService,
}

/// Serve HTTP on `listener` with the production [`HttpLimits`] until `shutdown`
/// resolves, then stop accepting and wait for in-flight requests (the caller bounds that
/// wait).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    settings: HttpSettings,
    backends: Backends,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_http_with(
        listener,
        settings,
        HttpLimits::default(),
        backends,
        shutdown,
    )
    .await
}

/// [`serve_http`] with other limits (tests use short ones or low caps). The connection
/// cap is lowered to fit the open-file limit if needed, and the tool-call cap with it.
pub async fn serve_http_with(
    listener: tokio::net::TcpListener,
    settings: HttpSettings,
    limits: HttpLimits,
    backends: Backends,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut gate = Gate::new(&settings)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    gate.body_read = limits.body_read;
    let refusals = gate.refusals.clone();
    let summaries = tokio::spawn(RefusalLog::flush_periodically(&refusals));
    let limits = limits.fitted(crate::confine::open_file_limit());
    let calls = ToolCalls::new(limits.max_tool_calls);
    let router = router(gate, &settings, backends, calls);
    let served = nl2sh_http_worker::connections::serve(listener, router, limits, shutdown).await;
    summaries.abort();
    // What was refused since the last summary is still said once.
    refusals.flush();
    served
}

/// Would [`serve_http`] accept these settings? (Token length, advertised origin, local
/// authorities.) The error names the problem, never the token.
pub fn check_settings(settings: &HttpSettings) -> Result<(), String> {
    Gate::new(settings).map(|_| ())
}

/// The router [`serve_http`] serves, with the production body-read timeout and
/// tool-call cap but no listener, connection cap or connection timeouts: for driving
/// requests in-process (used by the `netd_requests` fuzz target). Fails like
/// [`check_settings`].
pub fn router_for(settings: &HttpSettings, backends: Backends) -> Result<Router, String> {
    Ok(router(
        Gate::new(settings)?,
        settings,
        backends,
        ToolCalls::default(),
    ))
}

fn router(gate: Gate, settings: &HttpSettings, backends: Backends, calls: ToolCalls) -> Router {
    let Backends { executor, tasks } = backends;
    let card = Arc::new(Card::new(&settings.advertised_origin));
    let gate = Arc::new(gate);
    let a2a = A2a {
        tasks: tasks.clone(),
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // Host and Origin are checked by `guard`, with nl2sh's stricter rule.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_HTTP_BODY_BYTES);
    let for_servers = calls.clone();
    let mcp = StreamableHttpService::new(
        move || {
            Ok(McpServer::new(
                executor.clone(),
                tasks.clone(),
                CallOrigin::McpHttp,
                for_servers.clone(),
            ))
        },
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let mcp = Router::new()
        .route_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(calls, cap_tool_calls));
    let protected = Router::new()
        .route("/a2a", post(a2a::serve))
        .route("/a2a/", post(a2a::serve))
        .with_state(a2a)
        .merge(mcp)
        .route_layer(middleware::from_fn_with_state(gate.clone(), guard));
    let public = Router::new()
        .route(AGENT_CARD_PATH, get(a2a::card::serve))
        .with_state(card)
        .route_layer(middleware::from_fn_with_state(gate, public_guard));
    protected.merge(public).fallback(not_found)
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "not found")
}

/// What a request must match to reach a protected route.
struct Gate {
    token_digest: [u8; 32],
    authorities: Authorities,
    /// How long an authorized request's body may take to arrive.
    body_read: Duration,
    /// Refusals before the token was checked, and for a missing or wrong one.
    refusals: Arc<RefusalLog>,
}

impl Gate {
    fn new(settings: &HttpSettings) -> Result<Self, String> {
        let token = settings.token.expose();
        let chars = token.chars().count();
        if !(TOKEN_MIN_CHARS..=TOKEN_MAX_CHARS).contains(&chars) {
            return Err(format!(
                "the protocol token must be {TOKEN_MIN_CHARS}-{TOKEN_MAX_CHARS} characters"
            ));
        }
        let advertised = Origin::parse(&settings.advertised_origin).ok_or_else(|| {
            format!(
                "advertised origin {:?} is not scheme://host[:port]",
                settings.advertised_origin
            )
        })?;
        let mut local = Vec::with_capacity(settings.local_authorities.len());
        for authority in &settings.local_authorities {
            // The listener speaks plain HTTP, so a port-less Host means port 80 here.
            local.push(
                HostPort::parse(authority, 80)
                    .ok_or_else(|| format!("local authority {authority:?} is not host:port"))?,
            );
        }
        Ok(Self {
            token_digest: digest(token.as_bytes()),
            authorities: Authorities { advertised, local },
            body_read: BODY_READ_TIMEOUT,
            refusals: RefusalLog::new("netd"),
        })
    }

    fn host_allowed(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        self.authorities.host_allowed(uri, headers)
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        self.authorities.origin_allowed(headers)
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(candidate) = bearer_token(headers) else {
            return false;
        };
        // Both sides hashed to 32 bytes, then compared without early exit: neither the
        // token's bytes nor its length shape the timing.
        bool::from(digest(candidate).ct_eq(&self.token_digest))
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The token of the one `Authorization: Bearer <token>` header, if well formed.
fn bearer_token(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// The checks of the module comment, in that order, then the bounded body.
async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match declared_length(&parts.headers) {
        Ok(Some(len)) if len > MAX_HTTP_BODY_BYTES as u64 => {
            return too_large();
        }
        Ok(_) => {}
        Err(()) => return error_response(StatusCode::BAD_REQUEST, "invalid Content-Length"),
    }
    if !gate.authorized(&parts.headers) {
        gate.refusals.refused(
            "missing or invalid bearer token",
            peer(&parts.extensions),
            parts.uri.path(),
        );
        let mut response =
            error_response(StatusCode::UNAUTHORIZED, "missing or invalid bearer token");
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    }
    if !gate.host_allowed(&parts.uri, &parts.headers) {
        tracing::warn!(
            path = %Shown::new(parts.uri.path()),
            "refused: Host is not an allowed authority"
        );
        return error_response(StatusCode::FORBIDDEN, "Host is not allowed");
    }
    if !gate.origin_allowed(&parts.headers) {
        tracing::warn!(
            path = %Shown::new(parts.uri.path()),
            "refused: Origin is not the advertised origin"
        );
        return error_response(StatusCode::FORBIDDEN, "Origin is not allowed");
    }
    // Checked; nothing past this point (rmcp puts the request parts where handlers can
    // read them) needs the token.
    parts.headers.remove(header::AUTHORIZATION);
    // The connection now holds an authorized caller: it keeps its slot under a flood.
    if let Some(conn) = parts.extensions.get::<ConnHandle>() {
        conn.mark_authorized();
    }
    let reading = Limited::new(body, MAX_HTTP_BODY_BYTES).collect();
    let bytes = match tokio::time::timeout(gate.body_read, reading).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Ok(Err(e)) => {
            tracing::info!(error = %e, "request body unreadable");
            return error_response(StatusCode::BAD_REQUEST, "request body unreadable");
        }
        Err(_) => {
            tracing::info!("request body not received in time");
            return error_response(
                StatusCode::REQUEST_TIMEOUT,
                "request body not received in time",
            );
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Check 6: a counted tool call over the cap is refused here with HTTP 503, since inside
/// rmcp's handler the status is always 200; an admitted one carries its slot to the
/// handler in the request's extensions. Runs after `guard`, so the body is authorized
/// and already in memory (at most 32 KiB).
async fn cap_tool_calls(State(calls): State<ToolCalls>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match Limited::new(body, MAX_HTTP_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return too_large(),
    };
    if let Some(id) = crate::tool_calls::counted_request_id(&bytes) {
        match calls.try_start() {
            Some(slot) => {
                parts.extensions.insert(slot);
            }
            None => return busy(id, &calls),
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// 503, `Retry-After`, and the JSON-RPC error of a call refused by the tool-call cap.
fn busy(id: serde_json::Value, calls: &ToolCalls) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": calls.busy_error()});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::RETRY_AFTER,
        HeaderValue::from(BUSY_RETRY_AFTER.as_secs()),
    );
    response
}

/// The public routes: no token, but Host and Origin as on protected routes (checks 3
/// and 4); no body is ever read.
async fn public_guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    // Nobody is authenticated here: refusals go to the rate-limited log.
    if !gate.host_allowed(request.uri(), request.headers()) {
        gate.refusals.refused(
            "Host is not an allowed authority",
            peer(request.extensions()),
            request.uri().path(),
        );
        return error_response(StatusCode::FORBIDDEN, "Host is not allowed");
    }
    if !gate.origin_allowed(request.headers()) {
        gate.refusals.refused(
            "Origin is not the advertised origin",
            peer(request.extensions()),
            request.uri().path(),
        );
        return error_response(StatusCode::FORBIDDEN, "Origin is not allowed");
    }
    next.run(request).await
}

/// The peer address of the request's connection (absent when the router is driven
/// without `nl2sh_http_worker::connections`, as the fuzz target does).
fn peer(extensions: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    extensions.get::<ConnHandle>().map(ConnHandle::peer)
}

fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, ()> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or(()),
    }
}

fn too_large() -> Response {
    error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body is over 32 KiB")
}

fn error_response(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::Secret;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn gate(origin: &str, local: &[&str]) -> Gate {
        Gate::new(&HttpSettings {
            token: Secret::new(TOKEN.into()),
            advertised_origin: origin.into(),
            local_authorities: local.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn default_port_may_be_omitted() {
        let g = gate("http://Phone.lan", &["127.0.0.1:8765"]);
        let root: Uri = "/mcp".parse().unwrap();
        for ok in ["phone.lan", "PHONE.LAN:80", "127.0.0.1:8765"] {
            assert!(g.host_allowed(&root, &headers(&[("host", ok)])), "{ok}");
        }
        for bad in [
            "phone.lan:8765",
            "127.0.0.1",
            "evil.example",
            "user@phone.lan",
            "",
        ] {
            assert!(!g.host_allowed(&root, &headers(&[("host", bad)])), "{bad}");
        }
        assert!(!g.host_allowed(&root, &HeaderMap::new()));
        let g = gate("https://phone.lan", &[]);
        assert!(g.host_allowed(&root, &headers(&[("host", "phone.lan:443")])));
        assert!(!g.host_allowed(&root, &headers(&[("host", "phone.lan:80")])));
    }

    #[test]
    fn absolute_form_target_must_also_be_allowed() {
        let g = gate("http://10.0.0.2:8765", &["127.0.0.1:8765"]);
        let target: Uri = "http://evil.example/mcp".parse().unwrap();
        assert!(!g.host_allowed(&target, &headers(&[("host", "127.0.0.1:8765")])));
    }

    #[test]
    fn origin_must_be_the_advertised_one() {
        let g = gate("http://10.0.0.2:8765", &[]);
        assert!(g.origin_allowed(&HeaderMap::new()));
        assert!(g.origin_allowed(&headers(&[("origin", "http://10.0.0.2:8765")])));
        assert!(g.origin_allowed(&headers(&[("origin", "HTTP://10.0.0.2:8765")])));
        for bad in [
            "null",
            "http://10.0.0.2",
            "https://10.0.0.2:8765",
            "http://evil.example",
            "http://10.0.0.2:8765/path",
        ] {
            assert!(!g.origin_allowed(&headers(&[("origin", bad)])), "{bad}");
        }
        let g = gate("http://phone.lan", &[]);
        assert!(g.origin_allowed(&headers(&[("origin", "http://phone.lan:80")])));
    }

    #[test]
    fn bearer_parsing() {
        let g = gate("http://h", &[]);
        assert!(g.authorized(&headers(&[("authorization", &format!("Bearer {TOKEN}"))])));
        assert!(g.authorized(&headers(&[("authorization", &format!("bearer {TOKEN}"))])));
        for bad in [
            String::new(),
            "Bearer".into(),
            "Bearer ".into(),
            format!("Basic {TOKEN}"),
            format!("Bearer{TOKEN}"),
            format!("Bearer {TOKEN}x"),
            format!("Bearer {}", &TOKEN[1..]),
        ] {
            assert!(!g.authorized(&headers(&[("authorization", &bad)])), "{bad}");
        }
        let two = format!("Bearer {TOKEN}");
        assert!(!g.authorized(&headers(&[
            ("authorization", &two),
            ("authorization", &two)
        ])));
    }

    #[test]
    fn settings_are_checked() {
        let bad_token = HttpSettings {
            token: Secret::new("short".into()),
            advertised_origin: "http://h".into(),
            local_authorities: vec![],
        };
        assert!(Gate::new(&bad_token).is_err());
        for origin in ["h:80", "ftp://h", "http://h/x", "http://u@h"] {
            let s = HttpSettings {
                token: Secret::new(TOKEN.into()),
                advertised_origin: origin.into(),
                local_authorities: vec![],
            };
            assert!(Gate::new(&s).is_err(), "{origin}");
        }
    }
}
