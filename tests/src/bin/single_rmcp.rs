//! Bench-only reference server for `benches/invoke.rs`: `nl2sh_invoke` served by ONE
//! process, without the privilege-separated tree.
//!
//! * HTTP: axum with rmcp's Streamable HTTP service configured exactly as netd configures
//!   it (stateless, JSON responses, no legacy sessions, 32 KiB body limit), behind a front
//!   door doing what netd's does on the hot path (body-size check, Bearer token, Host,
//!   body collected under the limit).
//! * MCP: netd's own `nl2sh_invoke` descriptor and result shaping
//!   (`nl2sh_netd::tools::{all, call::to_result}`), the same argument checks.
//! * Tool: the executor's [`Pipeline`] called in process — the registration, validation,
//!   `fs.stat`/`shell.exec` preparation, locks, privilege binding and run code the tree's
//!   executor runs, with no netd→executor hop. The pipeline asks an approval authority
//!   through an `RpcClient`, so one in-process socketpair remains:
//!   `--authority bare` (default) answers it in this process without storing anything
//!   (read-only allowed, the rest refused); `--authority audited` answers it with
//!   approvald's real `Authority` and SQLite store in a private state directory, with the
//!   executor's audit outbox beside it.
//!
//! Usage: `single_rmcp --port N [--authority bare|audited] [--state-dir DIR]`, token from
//! `NL2SH_PROTOCOL_TOKEN`. Binds 127.0.0.1 only and prints `Listening on: ADDR`.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use http_body_util::{BodyExt, Limited};
use nl2sh_executor::device::DeviceEnv;
use nl2sh_executor::runtime::authority::Authority as AuthorityLink;
use nl2sh_executor::runtime::pipeline::Pipeline;
use nl2sh_netd::mcp::SUPPORTED_PROTOCOL_VERSIONS;
use nl2sh_netd::tools;
use nl2sh_proto::channels::{
    AuthorityRequest, AuthorityResponse, CallOrigin, ConfigVersion, Correlation, Decision,
    InvokeRequest, PolicySnapshot, RiskLevel,
};
use nl2sh_proto::limits::{MAX_ARGUMENT_JSON_BYTES, MAX_HTTP_BODY_BYTES, MAX_TOOL_NAME_BYTES};
use nl2sh_proto::rpc::{self, RpcClient};
use nl2sh_proto::topology::{pair, ExecutorApprovald};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

#[derive(Clone, Copy, PartialEq)]
enum AuthorityMode {
    Bare,
    Audited,
}

struct Options {
    port: u16,
    authority: AuthorityMode,
    state_dir: Option<PathBuf>,
    token: String,
}

fn options() -> Result<Options, String> {
    let mut port = None;
    let mut authority = AuthorityMode::Bare;
    let mut state_dir = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--port" => port = Some(value()?.parse().map_err(|e| format!("--port: {e}"))?),
            "--authority" => {
                authority = match value()?.as_str() {
                    "bare" => AuthorityMode::Bare,
                    "audited" => AuthorityMode::Audited,
                    other => return Err(format!("--authority {other:?}: bare or audited")),
                }
            }
            "--state-dir" => state_dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let token = std::env::var("NL2SH_PROTOCOL_TOKEN")
        .map_err(|_| "NL2SH_PROTOCOL_TOKEN is not set".to_string())?;
    if authority == AuthorityMode::Audited && state_dir.is_none() {
        return Err("--authority audited needs --state-dir".into());
    }
    Ok(Options {
        port: port.ok_or("--port is required")?,
        authority,
        state_dir,
        token,
    })
}

fn main() -> std::process::ExitCode {
    // Sandboxed actions run through the helper, as in the tree.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(nl2sh_executor::sandbox::HELPER_ARG))
    {
        return nl2sh_executor::sandbox::helper::main();
    }
    let opts = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("single_rmcp: {e}");
            std::process::exit(2);
        }
    };
    // netd's runtime shape: two worker threads.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(serve(opts)) {
        eprintln!("single_rmcp: {e}");
        std::process::exit(1);
    }
    std::process::ExitCode::SUCCESS
}

async fn serve(opts: Options) -> Result<(), String> {
    let authority = match opts.authority {
        AuthorityMode::Bare => bare_authority().await?,
        AuthorityMode::Audited => {
            audited_authority(opts.state_dir.as_deref().expect("checked")).await?
        }
    };
    let device = DeviceEnv::probe(std::env::var("PATH").ok());
    // The same read-only sandbox the tree uses (its default uid range, nothing else
    // masked).
    let sandbox = nl2sh_executor::sandbox::Sandbox::new(
        nl2sh_executor::sandbox::SandboxSettings::for_executor(
            nl2sh_proto::channels::UidRange {
                first: nl2sh_proto::config::DEFAULT_SANDBOX_UID_BASE,
                count: nl2sh_proto::config::DEFAULT_SANDBOX_UID_COUNT,
            },
            nl2sh_proto::config::Config::default().sandbox_limits(),
            Vec::new(),
        ),
    );
    let pipeline = Arc::new(Pipeline::new(
        device,
        Some(authority),
        Some(Arc::new(sandbox)),
    ));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], opts.port)))
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let gate = Arc::new(Gate {
        bearer: format!("Bearer {}", opts.token),
        host: addr.to_string(),
    });
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_HTTP_BODY_BYTES);
    let mcp = StreamableHttpService::new(
        move || Ok(Single::new(pipeline.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let app = Router::new()
        .route_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(gate, guard));
    println!("Listening on: {addr}");
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("serve: {e}"))
}

/// An authority that stores nothing: read-only actions are allowed, the rest refused
/// (approvald's rule without `protocol_auto_approve`), outcomes acknowledged.
async fn bare_authority() -> Result<Arc<AuthorityLink>, String> {
    let (ours, theirs) = pair::<ExecutorApprovald>().map_err(|e| e.to_string())?;
    tokio::spawn(rpc::serve(theirs, |req: AuthorityRequest| async move {
        Ok(match req {
            AuthorityRequest::Ping => AuthorityResponse::Pong,
            AuthorityRequest::Decide(summary) => {
                let (decision, reason) = if summary.risk == RiskLevel::ReadOnly {
                    (Decision::Allowed, "read-only")
                } else {
                    (Decision::Refused, "bench authority refuses mutations")
                };
                AuthorityResponse::Decided {
                    decision,
                    reason: reason.into(),
                }
            }
            AuthorityRequest::Finished(_)
            | AuthorityRequest::Ran(_)
            | AuthorityRequest::Recover(_)
            | AuthorityRequest::Withdraw { .. } => AuthorityResponse::Recorded,
            // The rule above as a snapshot: no configuration file, reads run unasked.
            AuthorityRequest::Policy => AuthorityResponse::Policy(PolicySnapshot {
                version: ConfigVersion::Absent,
                reads_unasked: vec![CallOrigin::McpHttp, CallOrigin::McpStdio],
            }),
        })
    }));
    let (client, _) = RpcClient::start(ours).await.map_err(|e| e.to_string())?;
    let link = AuthorityLink::new(client, NO_CONFIG);
    link.refresh().await;
    Ok(link)
}

/// The bare authority's configuration file, which does not exist.
const NO_CONFIG: &str = "/nonexistent/nl2sh-single-rmcp/config.toml";

/// approvald's real authority (decision committed to SQLite before the answer, outcome
/// queued), in this process.
async fn audited_authority(state_dir: &std::path::Path) -> Result<Arc<AuthorityLink>, String> {
    use nl2sh_approvald::authority::Authority;
    use nl2sh_approvald::store::Store;
    std::fs::create_dir_all(state_dir).map_err(|e| e.to_string())?;
    let store = Store::open(state_dir).map_err(|e| e.to_string())?;
    // Only consulted for actions that are not read-only; a missing file refuses them.
    let config = state_dir.join("config.toml");
    let authority = Arc::new(Authority::new(store, &config));
    let (ours, theirs) = pair::<ExecutorApprovald>().map_err(|e| e.to_string())?;
    tokio::spawn(nl2sh_approvald::dispatch::serve_executor(theirs, authority));
    let (client, _) = RpcClient::start(ours).await.map_err(|e| e.to_string())?;
    // The executor's outbox too, so that a call is answered as the tree answers it.
    let (outbox, _) =
        nl2sh_executor::runtime::outbox::Outbox::open(state_dir).map_err(|e| e.to_string())?;
    let link = AuthorityLink::with_outbox(client, config, Some(Arc::new(outbox)));
    link.refresh().await;
    Ok(link)
}

struct Gate {
    bearer: String,
    host: String,
}

async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_HTTP_BODY_BYTES as u64) {
        return error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body is over 32 KiB");
    }
    let authorized = parts
        .headers
        .get(header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == gate.bearer.as_bytes());
    if !authorized {
        return error_response(StatusCode::UNAUTHORIZED, "missing or invalid bearer token");
    }
    let host_ok = parts
        .headers
        .get(header::HOST)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(gate.host.as_bytes()));
    if !host_ok {
        return error_response(StatusCode::FORBIDDEN, "Host is not allowed");
    }
    parts.headers.remove(header::AUTHORIZATION);
    let bytes = match Limited::new(body, MAX_HTTP_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return error_response(StatusCode::BAD_REQUEST, "request body unreadable"),
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
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

static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// The MCP server: one per request, as with netd.
#[derive(Clone)]
struct Single {
    pipeline: Arc<Pipeline>,
}

impl Single {
    fn new(pipeline: Arc<Pipeline>) -> Self {
        Self { pipeline }
    }

    /// netd's `nl2sh_invoke` argument checks, then the pipeline in process.
    async fn invoke(&self, arguments: Option<&JsonObject>) -> CallToolResult {
        let empty = JsonObject::new();
        let arguments = arguments.unwrap_or(&empty);
        if arguments.keys().any(|k| k != "tool" && k != "arguments") {
            return failure("nl2sh_invoke: unexpected field");
        }
        let tool = match arguments.get("tool") {
            Some(Value::String(t)) if !t.is_empty() && t.len() <= MAX_TOOL_NAME_BYTES => t,
            _ => return failure("nl2sh_invoke: `tool` must be a non-empty string"),
        };
        let args_text = match arguments.get("arguments") {
            None | Some(Value::Null) => "{}".to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => return failure("nl2sh_invoke: `arguments` must be an object"),
        };
        if args_text.len() > MAX_ARGUMENT_JSON_BYTES {
            return failure("nl2sh_invoke: arguments are too large");
        }
        let outcome = self
            .pipeline
            .invoke(InvokeRequest {
                correlation: Correlation(NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed)),
                origin: CallOrigin::McpHttp,
                task: None,
                tool: tool.clone(),
                arguments: args_text,
            })
            .await;
        tools::call::to_result(&outcome, None)
    }
}

fn failure(text: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl ServerHandler for Single {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("nl2sh-bench-single", "0"))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != tools::invoke::NAME {
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        Ok(self.invoke(request.arguments.as_ref()).await.into())
    }
}
