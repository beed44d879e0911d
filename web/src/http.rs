//! The console's HTTP surface: three static files and a JSON API under `/api/`.
//!
//! Checked on every request, in this order:
//! 1. `Host` names the console's own authority (a DNS-rebinding page names another) → else 403;
//! 2. `Origin`, when present, is the console's own origin → else 403;
//! 3. a `POST` must carry an `Origin` (every browser sends one on a POST; a form or a
//!    script of another site sends its own), `Content-Type: application/json` (→ 415;
//!    a cross-site form cannot send it), a body of at most [`MAX_WEB_BODY_BYTES`]
//!    (→ 413) and, except for the login itself, an `X-CSRF-Token` header (→ 403);
//! 4. every `/api/` request but the login carries the session cookie, which approvald
//!    checks (with the CSRF token, for a change) before anything is read or done
//!    (→ 401 / 403).
//!
//! Every response carries the headers of [`crate::assets::SECURITY_HEADERS`]. The session
//! cookie is `HttpOnly; SameSite=Strict`, so a script cannot read it and no other site's
//! request carries it. No cookie, code, token or header value is ever logged.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use http_body_util::{BodyExt, Limited};
use nl2sh_http_worker::connections::ConnHandle;
use nl2sh_http_worker::origin::{Authorities, HostPort, Origin};
use nl2sh_http_worker::refusals::RefusalLog;
use nl2sh_proto::channels::{
    csrf_for, ApprovalId, CallOrigin, DiscoveryRequest, DiscoveryResponse, OwnerAction,
    OwnerErrorKind, OwnerProof, OwnerRequest, OwnerResponse, ProtocolStatus, TaskId, WebSettings,
};
use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::{MAX_ID_BYTES, MAX_PENDING_APPROVALS, MAX_WEB_BODY_BYTES};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::stored_text::StoredText;
use nl2sh_proto::topology::{WebApprovald, WebSupervisor};
use nl2sh_proto::ui_grants::MAX_UI_GRANT_MINUTES;
use nl2sh_proto::Secret;
use serde_json::{json, Value};

use crate::assets;
use crate::views;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "nl2sh_session";
/// The header a change carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Tasks the Tasks page lists.
const TASKS_LISTED: u32 = 50;
/// Audit rows the Audit page shows by default, and at most.
const AUDIT_ROWS_DEFAULT: u32 = 100;
const AUDIT_ROWS_MAX: u32 = 500;
/// Longest session cookie or CSRF token looked at (they are 64 hex characters).
const MAX_SECRET_CHARS: usize = 128;

/// What the handlers reach: approvald for the owner's requests, the supervisor for
/// discovery, and the console's own settings.
#[derive(Clone)]
pub struct Backends {
    pub approvald: RpcClient<WebApprovald>,
    pub supervisor: RpcClient<WebSupervisor>,
}

struct Console {
    backends: Backends,
    authorities: Authorities,
    origin: String,
    insecure_remote: bool,
    /// Refusals of requests that reach no session check (Host, Origin, CSRF).
    refusals: Arc<RefusalLog>,
}

type Shared = Arc<Console>;

/// Check the settings the supervisor sent and build the router; refusals before any
/// session check go to `refusals`.
pub fn router(
    settings: &WebSettings,
    backends: Backends,
    refusals: Arc<RefusalLog>,
) -> Result<Router, String> {
    let advertised = Origin::parse(&settings.origin)
        .ok_or_else(|| format!("web origin {:?} is not http://host:port", settings.origin))?;
    let mut local = Vec::with_capacity(settings.local_authorities.len());
    for a in &settings.local_authorities {
        local.push(HostPort::parse(a, 80).ok_or_else(|| format!("{a:?} is not host:port"))?);
    }
    let console = Arc::new(Console {
        backends,
        authorities: Authorities { advertised, local },
        origin: settings.origin.clone(),
        insecure_remote: settings.insecure_remote,
        refusals,
    });
    let mut router = Router::new();
    for asset in assets::all() {
        let content_type = asset.content_type.clone();
        let text = asset.text;
        router = router.route(
            asset.path,
            get(move || async move { page(content_type, text) }),
        );
    }
    let api = Router::new()
        .route("/api/login", post(login))
        .route("/api/session", get(session))
        .route("/api/logout", post(logout))
        .route("/api/connection", get(connection))
        .route("/api/connection/token", post(reveal_token))
        .route("/api/settings", get(settings_get).post(settings_save))
        .route("/api/settings/rotate-token", post(rotate_token))
        .route("/api/approvals", get(approvals))
        .route("/api/approvals/reject-origin", post(reject_origin))
        .route("/api/approvals/{id}", post(decide))
        .route("/api/ui-grants/{id}/revoke", post(revoke_ui_grant))
        .route("/api/tasks", get(tasks))
        .route("/api/tasks/{id}", get(task))
        .route("/api/audit", get(audit))
        .route("/api/audit/verify", post(verify_audit));
    Ok(router
        .merge(api)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such page") })
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console))
}

fn page(content_type: HeaderValue, text: &'static str) -> Response {
    let mut response = Response::new(Body::from(text));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    response
}

/// Checks 1–3 of the module comment, and the headers every response carries.
async fn guard(State(console): State<Shared>, request: Request, next: Next) -> Response {
    let mut response = match admit(&console, request).await {
        Ok(request) => next.run(request).await,
        Err(refusal) => refusal,
    };
    let headers = response.headers_mut();
    for (name, value) in assets::SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn admit(console: &Console, request: Request) -> Result<Request, Response> {
    // Nothing here is authenticated yet: refusals go to the rate-limited log.
    let peer = request
        .extensions()
        .get::<ConnHandle>()
        .map(ConnHandle::peer);
    let path = request.uri().path().to_string();
    let refused = |reason: &'static str| console.refusals.refused(reason, peer, &path);
    if !console
        .authorities
        .host_allowed(request.uri(), request.headers())
    {
        refused("Host is not the console's");
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Host is not allowed",
        ));
    }
    if !console
        .authorities
        .origin_allowed_or_local(request.headers())
    {
        refused("Origin is not the console's");
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Origin is not allowed",
        ));
    }
    if request.method() == Method::GET || request.method() == Method::HEAD {
        return Ok(request);
    }
    if request.method() != Method::POST {
        return Err(error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "only GET and POST",
        ));
    }
    let headers = request.headers();
    if !headers.contains_key(header::ORIGIN) {
        refused("a POST without Origin");
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a change must come from the console's own page",
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send application/json",
        ));
    }
    if request.uri().path() != "/api/login" && !headers.contains_key(CSRF_HEADER) {
        refused("a change without its CSRF token");
        return Err(error(
            StatusCode::FORBIDDEN,
            "bad_csrf",
            "the CSRF token is missing: reload the page",
        ));
    }
    // The body, bounded, read now: handlers get it whole or not at all.
    let (parts, body) = request.into_parts();
    let bytes = match Limited::new(body, MAX_WEB_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the request body is too large",
            ))
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// `{"error": message, "kind": kind}` with `status`.
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let mut response = json_response(status, &json!({ "error": message, "kind": kind }));
    if status == StatusCode::UNAUTHORIZED {
        // A login page, not a browser credentials dialog.
        response.headers_mut().remove(header::WWW_AUTHENTICATE);
    }
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn ok(value: Value) -> Response {
    json_response(StatusCode::OK, &value)
}

/// What an owner request may end in besides its answer.
enum Failure {
    Refused(OwnerErrorKind, String),
    /// approvald or the supervisor did not answer (the channel is gone: the tree restarts).
    Unavailable,
    BadRequest(String),
}

impl Failure {
    fn response(self) -> Response {
        match self {
            Failure::Refused(kind, message) => {
                let (status, name) = match kind {
                    OwnerErrorKind::NotLoggedIn => (StatusCode::UNAUTHORIZED, "not_logged_in"),
                    OwnerErrorKind::BadCsrf => (StatusCode::FORBIDDEN, "bad_csrf"),
                    OwnerErrorKind::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
                    OwnerErrorKind::NoSuchRequest => (StatusCode::NOT_FOUND, "no_such_request"),
                    OwnerErrorKind::NoSuchTask => (StatusCode::NOT_FOUND, "no_such_task"),
                    OwnerErrorKind::Expired => (StatusCode::GONE, "expired"),
                    OwnerErrorKind::PhraseRequired => (StatusCode::BAD_REQUEST, "phrase_required"),
                    OwnerErrorKind::WrongPhrase => (StatusCode::BAD_REQUEST, "wrong_phrase"),
                    OwnerErrorKind::Invalid => (StatusCode::BAD_REQUEST, "invalid"),
                    OwnerErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                };
                error(status, name, &Shown::new(&message).to_string())
            }
            Failure::Unavailable => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the service is restarting; try again in a moment",
            ),
            Failure::BadRequest(message) => error(
                StatusCode::BAD_REQUEST,
                "invalid",
                &Shown::new(&message).to_string(),
            ),
        }
    }
}

type Answer = Result<Response, Failure>;

fn respond(answer: Answer) -> Response {
    answer.unwrap_or_else(Failure::response)
}

/// The session secret of the request's cookie, if it has exactly one well-formed one.
fn session_cookie(headers: &HeaderMap) -> Option<Secret> {
    let mut found = None;
    for value in headers.get_all(header::COOKIE) {
        let text = value.to_str().ok()?;
        for pair in text.split(';') {
            let Some((name, value)) = pair.trim().split_once('=') else {
                continue;
            };
            if name == SESSION_COOKIE {
                if found.is_some() {
                    return None; // two: a cookie planted beside ours
                }
                found = Some(value.to_owned());
            }
        }
    }
    found
        .filter(|v| {
            !v.is_empty() && v.len() <= MAX_SECRET_CHARS && v.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(Secret::new)
}

fn csrf_header(headers: &HeaderMap) -> Option<Secret> {
    let value = headers.get(CSRF_HEADER)?.to_str().ok()?;
    (value.len() <= MAX_SECRET_CHARS).then(|| Secret::new(value.to_owned()))
}

/// The request's proof of being the owner: the cookie's session and, on a POST, the
/// CSRF token (approvald checks both). Marks the connection as the owner's once approvald
/// has said so (see `ask`).
fn proof(headers: &HeaderMap, change: bool) -> Result<OwnerProof, Failure> {
    let session = session_cookie(headers).ok_or_else(|| {
        Failure::Refused(
            OwnerErrorKind::NotLoggedIn,
            "not logged in: run `nl2sh web login` on the device".into(),
        )
    })?;
    let csrf = if change {
        Some(csrf_header(headers).ok_or_else(|| {
            Failure::Refused(OwnerErrorKind::BadCsrf, "the CSRF token is missing".into())
        })?)
    } else {
        None
    };
    Ok(OwnerProof { session, csrf })
}

async fn ask(console: &Console, request: OwnerRequest) -> Result<OwnerResponse, Failure> {
    match console.backends.approvald.call(&request).await {
        Ok(OwnerResponse::Refused { kind, message }) => Err(Failure::Refused(kind, message)),
        Ok(answer) => Ok(answer),
        Err(e) => {
            tracing::warn!(error = %e, "web: approvald did not answer");
            Err(Failure::Unavailable)
        }
    }
}

/// Do `action` as the owner whose proof the request carries.
async fn act(
    console: &Console,
    headers: &HeaderMap,
    change: bool,
    action: OwnerAction,
) -> Result<OwnerResponse, Failure> {
    let proof = proof(headers, change)?;
    ask(console, OwnerRequest::Act { proof, action }).await
}

/// The owner's session is live (and its CSRF token right, for a change).
async fn check(console: &Console, headers: &HeaderMap, change: bool) -> Result<u64, Failure> {
    let proof = proof(headers, change)?;
    match ask(console, OwnerRequest::Check { proof }).await? {
        OwnerResponse::Owner { expires_in_secs } => Ok(expires_in_secs),
        _ => Err(Failure::Unavailable),
    }
}

async fn discover(console: &Console) -> Result<ProtocolStatus, Failure> {
    match console
        .backends
        .supervisor
        .call(&DiscoveryRequest::Discover)
        .await
    {
        Ok(DiscoveryResponse::Protocols(status)) => Ok(*status),
        Err(e) => {
            tracing::warn!(error = %e, "web: the supervisor did not answer discovery");
            Err(Failure::Unavailable)
        }
    }
}

/// A request body as JSON: an object, or a clear 400.
fn body_json(body: &Bytes) -> Result<serde_json::Map<String, Value>, Failure> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Failure::BadRequest("the body must be a JSON object".into())),
    }
}

fn text_field(map: &serde_json::Map<String, Value>, name: &str) -> Result<Option<String>, Failure> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Failure::BadRequest(format!("`{name}` must be a string"))),
    }
}

fn mark_owner(request_parts: &axum::http::Extensions) {
    if let Some(conn) = request_parts.get::<ConnHandle>() {
        conn.mark_authorized();
    }
}

// ---- handlers --------------------------------------------------------------------------

async fn login(State(console): State<Shared>, body: Bytes) -> Response {
    respond(
        async {
            let map = body_json(&body)?;
            let code = text_field(&map, "code")?
                .filter(|c| c.len() <= MAX_SECRET_CHARS)
                .ok_or_else(|| Failure::BadRequest("`code` is missing".into()))?;
            match ask(
                &console,
                OwnerRequest::RedeemLogin {
                    code: Secret::new(code),
                },
            )
            .await?
            {
                OwnerResponse::LoggedIn {
                    session,
                    csrf,
                    expires_in_secs,
                } => {
                    tracing::info!("web: an owner logged in");
                    let mut response = ok(json!({
                        "csrf": csrf.expose(),
                        "expires_in_secs": expires_in_secs,
                    }));
                    let cookie = format!(
                        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={expires_in_secs}",
                        session.expose()
                    );
                    match HeaderValue::from_str(&cookie) {
                        Ok(v) => {
                            response.headers_mut().insert(header::SET_COOKIE, v);
                            Ok(response)
                        }
                        Err(_) => Err(Failure::Unavailable),
                    }
                }
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

async fn session(State(console): State<Shared>, request: Parts) -> Response {
    let headers = &request.headers;
    respond(
        async {
            let expires_in_secs = check(&console, headers, false).await?;
            mark_owner(&request.extensions);
            // Given again after a reload: derived from the session, which only the
            // HttpOnly cookie holds (see `csrf_for`).
            let session = session_cookie(headers).ok_or(Failure::Unavailable)?;
            Ok(ok(json!({
                "csrf": csrf_for(&session).expose(),
                "expires_in_secs": expires_in_secs,
                "insecure_remote": console.insecure_remote,
                "version": env!("CARGO_PKG_VERSION"),
            })))
        }
        .await,
    )
}

async fn logout(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let proof = proof(&headers, true)?;
            ask(&console, OwnerRequest::Logout { proof }).await?;
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NO_CONTENT;
            response.headers_mut().insert(
                header::SET_COOKIE,
                HeaderValue::from_static(
                    "nl2sh_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                ),
            );
            Ok(response)
        }
        .await,
    )
}

async fn connection(State(console): State<Shared>, request: Parts) -> Response {
    respond(
        async {
            check(&console, &request.headers, false).await?;
            mark_owner(&request.extensions);
            let status = discover(&console).await?;
            Ok(ok(views::connection(
                &status,
                &console.origin,
                console.insecure_remote,
            )))
        }
        .await,
    )
}

async fn reveal_token(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            check(&console, &headers, true).await?;
            let status = discover(&console).await?;
            match status.token {
                Some(token) => {
                    tracing::info!("web: the owner revealed the protocol token");
                    Ok(ok(json!({ "token": token.expose() })))
                }
                None => Err(Failure::Refused(
                    OwnerErrorKind::Invalid,
                    "no protocol service runs over HTTP for this configuration".into(),
                )),
            }
        }
        .await,
    )
}

async fn settings_get(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            match act(&console, &headers, false, OwnerAction::Settings).await? {
                OwnerResponse::Settings(list) => Ok(ok(json!({
                    "settings": list.iter().map(|s| json!({
                        "key": s.key, "value": Shown::new(&s.value).to_string(), "set": s.set,
                        "credential": s.credential, "live": s.live,
                        "label": Shown::new(&s.label).to_string(), "kind": s.kind.as_str(),
                        "help": s.help.as_deref().map(|t| Shown::new(t).to_string()),
                        "warning": s.warning.as_deref().map(|t| Shown::new(t).to_string()),
                    })).collect::<Vec<_>>()
                }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

fn saved(answer: OwnerResponse) -> Answer {
    match answer {
        OwnerResponse::Saved {
            message,
            restart_needed,
        } => Ok(ok(json!({
            "message": Shown::new(&message).to_string(),
            "restart_needed": restart_needed,
        }))),
        _ => Err(Failure::Unavailable),
    }
}

async fn settings_save(State(console): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    respond(
        async {
            let map = body_json(&body)?;
            let key = text_field(&map, "key")?
                .ok_or_else(|| Failure::BadRequest("`key` is missing".into()))?;
            let value = text_field(&map, "value")?
                .ok_or_else(|| Failure::BadRequest("`value` is missing".into()))?;
            let action = OwnerAction::SaveSetting {
                key,
                value: Secret::new(value),
            };
            saved(act(&console, &headers, true, action).await?)
        }
        .await,
    )
}

async fn rotate_token(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(async { saved(act(&console, &headers, true, OwnerAction::RotateToken).await?) }.await)
}

async fn approvals(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let pending = match act(&console, &headers, false, OwnerAction::ListPending).await? {
                OwnerResponse::Pending(list) => list,
                _ => return Err(Failure::Unavailable),
            };
            let grants = match act(&console, &headers, false, OwnerAction::Grants).await? {
                OwnerResponse::Grants(list) => list,
                _ => return Err(Failure::Unavailable),
            };
            let ui_grants = match act(&console, &headers, false, OwnerAction::UiGrants).await? {
                OwnerResponse::UiGrants(list) => list,
                _ => return Err(Failure::Unavailable),
            };
            Ok(ok(json!({
                "pending": pending.iter().map(views::pending).collect::<Vec<_>>(),
                "limit": MAX_PENDING_APPROVALS,
                "grants": grants.iter().map(|g| Shown::new(g).to_string()).collect::<Vec<_>>(),
                "ui_grants": ui_grants.iter().map(views::ui_grant).collect::<Vec<_>>(),
            })))
        }
        .await,
    )
}

async fn decide(
    State(console): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(
        async {
            if id.is_empty() || id.len() > MAX_ID_BYTES {
                return Err(Failure::BadRequest("no such request id".into()));
            }
            let map = body_json(&body)?;
            let approve = match text_field(&map, "decision")?.as_deref() {
                Some("approve") => true,
                Some("reject") => false,
                _ => {
                    return Err(Failure::BadRequest(
                        "`decision` must be \"approve\" or \"reject\"".into(),
                    ))
                }
            };
            let phrase = text_field(&map, "phrase")?;
            let action = match ui_minutes(&map)? {
                None => OwnerAction::Decide {
                    id: ApprovalId(id),
                    approve,
                    phrase,
                },
                Some(minutes) if approve => OwnerAction::ApproveForUi {
                    id: ApprovalId(id),
                    phrase,
                    minutes,
                },
                Some(_) => {
                    return Err(Failure::BadRequest(
                        "`ui_minutes` goes with an approval only".into(),
                    ))
                }
            };
            match act(&console, &headers, true, action).await? {
                OwnerResponse::Done => Ok(ok(json!({ "ok": true }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

/// `ui_minutes` of a decision: absent for a plain one, else the minutes of the timed UI
/// grant that follows the approval (approvald checks the bounds and the request).
fn ui_minutes(map: &serde_json::Map<String, Value>) -> Result<Option<u32>, Failure> {
    match map.get("ui_minutes") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .map(Some)
            .ok_or_else(|| {
                Failure::BadRequest(format!(
                    "`ui_minutes` must be a whole number of minutes, 1 to {MAX_UI_GRANT_MINUTES}"
                ))
            }),
    }
}

/// An id from the path no id can be (empty, or longer than any) is refused as unknown,
/// before approvald is asked.
fn known_id(id: &str, kind: OwnerErrorKind, unknown: &str) -> Result<(), Failure> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(Failure::Refused(kind, unknown.into()));
    }
    Ok(())
}

/// End a timed UI grant now (`POST /api/ui-grants/ID/revoke`, an empty JSON object).
async fn revoke_ui_grant(
    State(console): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            known_id(&id, OwnerErrorKind::NoSuchRequest, "no such timed UI grant")?;
            match act(&console, &headers, true, OwnerAction::RevokeUiGrant { id }).await? {
                OwnerResponse::Done => Ok(ok(json!({ "ok": true }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

/// Reject every request pending from one origin (`{"origin": "mcp_http"}`), each on its
/// own as `protocol reject --origin` does; answers how many, and their ids.
async fn reject_origin(State(console): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    respond(
        async {
            let map = body_json(&body)?;
            let origin = text_field(&map, "origin")?
                .as_deref()
                .and_then(CallOrigin::from_text)
                .ok_or_else(|| {
                    Failure::BadRequest(format!(
                        "`origin` must be one of {}",
                        CallOrigin::ALL
                            .iter()
                            .map(|o| o.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            match act(
                &console,
                &headers,
                true,
                OwnerAction::RejectOrigin { origin },
            )
            .await?
            {
                OwnerResponse::Rejected(list) => Ok(ok(json!({
                    "ok": true,
                    "origin": origin.as_str(),
                    "rejected": list.len(),
                    "ids": list.iter().map(|p| Shown::new(&p.id.0).to_string()).collect::<Vec<_>>(),
                }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

async fn tasks(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let action = OwnerAction::Tasks {
                limit: TASKS_LISTED,
            };
            match act(&console, &headers, false, action).await? {
                OwnerResponse::Tasks(list) => Ok(ok(json!({
                    "tasks": list.iter().map(views::task_line).collect::<Vec<_>>(),
                }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

async fn task(
    State(console): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            known_id(&id, OwnerErrorKind::NoSuchTask, "no such task")?;
            let action = OwnerAction::Task { id: TaskId(id) };
            match act(&console, &headers, false, action).await? {
                OwnerResponse::Task(record) => Ok(ok(json!({ "task": views::task(&record) }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

async fn audit(State(console): State<Shared>, request: Parts) -> Response {
    let limit = request
        .uri
        .query()
        .and_then(|q| {
            q.split('&')
                .find_map(|p| p.strip_prefix("limit="))
                .and_then(|v| v.parse::<u32>().ok())
        })
        .unwrap_or(AUDIT_ROWS_DEFAULT)
        .clamp(1, AUDIT_ROWS_MAX);
    respond(
        async {
            let action = OwnerAction::Audit { limit };
            match act(&console, &request.headers, false, action).await? {
                OwnerResponse::Audit(rows) => {
                    let rows: Vec<Value> = rows
                        .iter()
                        .filter_map(|r| serde_json::from_str::<Value>(r).ok())
                        .map(views::audit_row)
                        .collect();
                    Ok(ok(json!({ "rows": rows })))
                }
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

async fn verify_audit(State(console): State<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            match act(&console, &headers, true, OwnerAction::VerifyAudit).await? {
                OwnerResponse::Verified { intact, message } => Ok(ok(json!({
                    "intact": intact,
                    "message": Shown::new(&message).to_string(),
                }))),
                _ => Err(Failure::Unavailable),
            }
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_session_cookie_must_be_one_well_formed_value() {
        let hex = "ab".repeat(32);
        let one = headers(&[("cookie", &format!("a=1; nl2sh_session={hex}; b=2"))]);
        assert_eq!(session_cookie(&one).unwrap().expose(), hex);
        let two = headers(&[
            ("cookie", &format!("nl2sh_session={hex}")),
            ("cookie", "nl2sh_session=cd"),
        ]);
        assert!(session_cookie(&two).is_none(), "a planted second cookie");
        assert!(session_cookie(&headers(&[("cookie", "nl2sh_session=<script>")])).is_none());
        assert!(session_cookie(&headers(&[("cookie", "nl2sh_session=")])).is_none());
        assert!(session_cookie(&headers(&[(
            "cookie",
            &format!("nl2sh_session={}", "a".repeat(129))
        )]))
        .is_none());
        assert!(session_cookie(&HeaderMap::new()).is_none());
    }
}
