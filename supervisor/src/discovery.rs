//! The supervisor's answer to the Web console's `Discover`: what runs for this
//! configuration, read afresh from discovery (`protocol/connection.json`, the process's
//! start identity, the state lock) as `service status` reads it, plus the live token for
//! the console to show a verified owner who asks. No request is made to the advertised
//! URL.

use std::path::PathBuf;
use std::sync::Arc;

use nl2sh_proto::channels::{
    ClientSnippets, DiscoveryRequest, DiscoveryResponse, ProtocolState, ProtocolStatus,
    RunningState, SettingDiffers,
};
use nl2sh_proto::topology::{Answerer, WebSupervisor};
use nl2sh_proto::Secret;

use crate::running;
use crate::startup;
use crate::state::{self, ConnectionInfo, Discovered, StatePaths};

/// Where discovery looks, for one configuration.
pub struct Discovery {
    pub paths: StatePaths,
    /// The configuration's identity ([`crate::config::identity`]).
    pub identity: PathBuf,
    /// As the owner wrote it, for the startup command.
    pub config_path: PathBuf,
}

/// The default loopback origin the examples use when nothing serves HTTP.
const EXAMPLE_ORIGIN: &str = "http://127.0.0.1:8765";

impl Discovery {
    /// The protocol service as discovery sees it now.
    pub fn status(&self) -> ProtocolStatus {
        let config_path = self.config_path.display().to_string();
        let mut status = ProtocolStatus {
            state: ProtocolState::Unknown,
            transport: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            mcp_url: None,
            a2a_url: None,
            card_url: None,
            listen: None,
            pid: None,
            since: None,
            token: None,
            config_path: config_path.clone(),
            detail: String::new(),
            snippets: snippets(
                &format!("{EXAMPLE_ORIGIN}/mcp"),
                &format!("{EXAMPLE_ORIGIN}/a2a"),
                &config_path,
            ),
            examples: true,
            running: RunningState {
                restart_command: nl2sh_proto::hint::service_restart(&crate::config::absolute(
                    &self.config_path,
                )),
                ..RunningState::default()
            },
        };
        match state::discover(&self.paths, &self.identity) {
            Ok(Discovered::Live(info)) => self.live(info, &mut status),
            Ok(Discovered::Stopped) | Ok(Discovered::Stale(_)) => {
                status.state = ProtocolState::Stopped;
                status.detail = "MCP/A2A are stopped for this configuration.".into();
            }
            Ok(Discovered::Busy { .. }) => {
                status.detail = "MCP/A2A are starting or stopping; refresh in a moment.".into();
            }
            Err(e) => status.detail = format!("discovery cannot be read: {e}"),
        }
        status
    }

    fn live(&self, info: ConnectionInfo, status: &mut ProtocolStatus) {
        status.pid = Some(info.pid);
        status.since = info.started_at_ms.map(nl2sh_proto::clock::rfc3339_millis);
        if let Some(version) = &info.version {
            status.version.clone_from(version);
        }
        status.transport = Some(info.transport.clone());
        let comparison = running::compare(&info, &self.config_path);
        status.running.differs = comparison
            .differs
            .iter()
            .map(|d| SettingDiffers {
                key: d.key.to_owned(),
                saved: d.saved.clone(),
                running: d.running.clone(),
            })
            .collect();
        status.running.auto_approve = running::auto_approve(&self.config_path);
        status.running.token_source = info.token_source.clone();
        match (&info.mcp_url, &info.a2a_url) {
            (Some(mcp), Some(a2a)) => {
                status.state = ProtocolState::Running;
                status.snippets = snippets(mcp, a2a, &status.config_path);
                status.examples = false;
                status.detail = format!(
                    "MCP/A2A run over HTTP on {} (pid {}).",
                    info.listen.as_deref().unwrap_or("?"),
                    info.pid
                );
                status.mcp_url = Some(mcp.clone());
                status.a2a_url = Some(a2a.clone());
                status.card_url = info.agent_card_url.clone();
                status.listen = info.listen.clone();
                status.token = info.token.map(Secret::new);
            }
            _ if info.transport == "stdio" => {
                status.state = ProtocolState::Running;
                status.detail = format!(
                    "A local MCP client runs nl2sh over stdio (pid {}); there is no HTTP \
                     endpoint.",
                    info.pid
                );
            }
            _ => {
                status.state = ProtocolState::Stopped;
                status.detail = "MCP/A2A are not started (this console runs without them): \
                                 set protocol_start_with_service = true and restart, or run \
                                 `nl2sh protocol serve`."
                    .into();
            }
        }
    }
}

fn snippets(mcp_url: &str, a2a_url: &str, config_path: &str) -> ClientSnippets {
    ClientSnippets {
        codex_toml: startup::mcp_toml(mcp_url),
        mcp_servers_json: startup::mcp_json(mcp_url),
        startup_command: startup::service_start_command(config_path),
        a2a_request: startup::a2a_request(a2a_url),
    }
}

/// Answer `Discover` on the Web console's channel until it closes. Discovery reads small
/// files; it runs on the blocking pool so the supervisor's own loop never waits on it.
pub async fn serve(end: Answerer<WebSupervisor>, discovery: Arc<Discovery>) {
    let result = nl2sh_proto::rpc::serve(end, move |request: DiscoveryRequest| {
        let discovery = discovery.clone();
        async move {
            match request {
                DiscoveryRequest::Discover => {
                    let status = tokio::task::spawn_blocking(move || discovery.status())
                        .await
                        .map_err(|e| nl2sh_proto::rpc::OutOfState(e.to_string()))?;
                    Ok(DiscoveryResponse::Protocols(Box::new(status)))
                }
            }
        }
    })
    .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "the Web console's discovery channel ended");
    }
}
