//! The MCP server (rmcp, hand-written [`ServerHandler`]): tools only, protocol versions
//! 2026-07-28, 2025-11-25, 2025-06-18 and 2024-11-05 (docs/PROTOCOLS.md, "MCP").
//!
//! rmcp serves both eras on one endpoint: a request whose `_meta` (or, over HTTP, whose
//! `MCP-Protocol-Version` header) names 2026-07-28 is served statelessly by that revision
//! (`server/discover`, per-request `_meta`, its error codes and HTTP statuses, the
//! header/body checks, `resultType`); an `initialize` selects a legacy revision. An
//! `initialize` naming 2026-07-28 (which has none) or a version we do not list is
//! answered with 2025-11-25, the preferred legacy version in [`ServerHandler::get_info`].
//! What nl2sh adds is the caching hints: the tool list and the discovery result are fixed
//! for the life of the process and the same for every caller.

use std::borrow::Cow;

use nl2sh_proto::channels::CallOrigin;
use nl2sh_proto::requester::ClientName;

use crate::executor::ExecutorClient;
use crate::tasks::TaskService;
use nl2sh_proto::limits::MAX_TOOL_NAME_BYTES;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, DiscoverResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::tool_calls::{ToolCallSlot, ToolCalls};
use crate::tools;
use crate::tools::progress::Reporter;

/// Exactly the versions nl2sh serves (docs/PROTOCOLS.md, "MCP"), newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2024_11_05,
];

/// How long a 2026-07-28 client may treat the tool list and the discovery result as fresh
/// (`ttlMs`). Both change only when nl2sh is upgraded, which restarts the service.
pub const LIST_TTL_MS: u64 = 60 * 60 * 1000;

const INSTRUCTIONS: &str = "nl2sh exposes this device through tools. Start with \
    nl2sh_inspect to learn the device, nl2sh_tools for the device tools and their \
    schemas, then nl2sh_invoke to run one, or nl2sh_read_screen for a screenshot. \
    To delegate a whole task to the device's own Agent, use nl2sh_ask (then \
    nl2sh_get_task / nl2sh_cancel_task with the task's id). Mutations wait for approval \
    by the device's owner and may be refused.";

/// One MCP server. Cheap to clone: the stateless HTTP transport builds one per request.
#[derive(Clone)]
pub struct McpServer {
    executor: ExecutorClient,
    /// The delegated tasks (`nl2sh_ask`, `nl2sh_get_task`, `nl2sh_cancel_task`), shared
    /// with A2A.
    tasks: TaskService,
    /// Which front door the calls came through (recorded in the audit trail).
    origin: CallOrigin,
    /// The cap on calls that reach the executor (see [`crate::tool_calls`]).
    calls: ToolCalls,
}

impl McpServer {
    /// A server with its own tool-call cap of the default size: for a transport that
    /// builds one server for its whole life (stdio).
    /// A server counting its tool calls against `calls` (HTTP builds one server per
    /// request, and they all share the service's one cap).
    pub fn new(
        executor: ExecutorClient,
        tasks: TaskService,
        origin: CallOrigin,
        calls: ToolCalls,
    ) -> Self {
        Self {
            executor,
            tasks,
            origin,
            calls,
        }
    }

    /// The slot the HTTP front door took for this call, or a new one; `None` when the cap
    /// is reached.
    fn slot(&self, context: &RequestContext<RoleServer>) -> Option<ToolCallSlot> {
        let taken = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ToolCallSlot>());
        match taken {
            Some(slot) => Some(slot.clone()),
            None => self.calls.try_start(),
        }
    }
}

/// Does this request speak 2026-07-28 (its `_meta` names that revision; rmcp has already
/// refused one naming a version we do not serve)?
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v == ProtocolVersion::V_2026_07_28)
}

/// The client's own name for itself: a 2026-07-28 request's `_meta` `clientInfo`; else,
/// over HTTP, its `User-Agent` (HTTP is served statelessly, so the `initialize` of an
/// older revision came in a request of its own, and rmcp stands its own name in for it);
/// else, over stdio, the session's `initialize`. A `title` is preferred to a `name`: it
/// is the one meant for a person.
fn client_name(context: &RequestContext<RoleServer>) -> Option<ClientName> {
    let named = |info: &rmcp::model::Implementation| {
        let title = info.title.as_deref().filter(|t| !t.trim().is_empty());
        ClientName::from_client(title.unwrap_or(&info.name), &info.version)
    };
    if let Some(info) = context.meta.client_info() {
        return named(&info);
    }
    if let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
        let agent = parts.headers.get(axum::http::header::USER_AGENT)?;
        return ClientName::from_user_agent(agent.to_str().ok()?);
    }
    let info = context.peer.peer_info()?;
    (info.client_info != Implementation::default())
        .then(|| named(&info.client_info))
        .flatten()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("nl2sh", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        // The same for every caller: nothing in it depends on who asks ("public").
        Ok(
            DiscoverResult::from_server_info(SUPPORTED_PROTOCOL_VERSIONS.to_vec(), self.get_info())
                .with_ttl_ms(LIST_TTL_MS)
                .with_cache_scope(CacheScope::Public),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // One page, in a fixed order. The caching hints are 2026-07-28's: the older
        // revisions' answer stays as it was.
        let list = ListToolsResult::with_all_items(tools::all());
        if !is_modern(&context) {
            return Ok(list);
        }
        // The same list for every caller ("public").
        Ok(list
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: &str = &request.name;
        if name.len() > MAX_TOOL_NAME_BYTES {
            return Err(ErrorData::invalid_params(
                format!("tool name is over {MAX_TOOL_NAME_BYTES} bytes"),
                None,
            ));
        }
        // Held until the call has answered.
        let _slot = if crate::tool_calls::counted(name) {
            match self.slot(&context) {
                Some(slot) => Some(slot),
                None => return Ok(self.calls.busy_result().into()),
            }
        } else {
            None
        };
        let result = match name {
            tools::inspect::NAME => {
                tools::inspect::call(&self.executor, request.arguments.as_ref()).await
            }
            tools::catalog::NAME => {
                tools::catalog::call(&self.executor, request.arguments.as_ref()).await
            }
            tools::invoke::NAME => {
                let args = request.arguments.as_ref();
                let reporter = Reporter::for_request(&context);
                let client = client_name(&context);
                tools::invoke::call(
                    &self.executor,
                    self.origin,
                    client,
                    args,
                    &context.ct,
                    reporter,
                )
                .await
            }
            tools::read_screen::NAME => {
                let args = request.arguments.as_ref();
                let reporter = Reporter::for_request(&context);
                tools::read_screen::call(&self.executor, self.origin, args, &context.ct, reporter)
                    .await
            }
            tools::ask::NAME => {
                let args = request.arguments.as_ref();
                let progress = Reporter::for_request(&context).map(|r| (&self.executor, r));
                let client = client_name(&context);
                tools::ask::call(
                    &self.tasks,
                    self.origin,
                    client,
                    args,
                    &context.ct,
                    progress,
                )
                .await
            }
            tools::get_task::NAME => {
                tools::get_task::call(&self.tasks, request.arguments.as_ref()).await
            }
            tools::cancel_task::NAME => {
                tools::cancel_task::call(&self.tasks, request.arguments.as_ref()).await
            }
            // rmcp's own tool router answers an unknown tool with invalid params.
            _ => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "tool not found: {}",
                        tools::shorten(name, MAX_TOOL_NAME_BYTES)
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}
