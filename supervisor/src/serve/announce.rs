//! Announcing a started tree: `protocol/connection.json` for discovery, and the lines the
//! owner reads (the startup block with the URLs and a generated token, the Web console's
//! address).

use std::path::Path;

use crate::config;
use crate::startup;
use crate::state::{self, ConnectionFile, ConnectionInfo, StatePaths};
use crate::token;

use super::listen::local_addr_of;
use super::{Fronts, ServeError};

/// Write connection.json (and clear the last crash loop's record), then print what the
/// owner needs. The record written, and the file that removes it when dropped.
pub(super) fn announce(
    paths: &StatePaths,
    config_path: &Path,
    transport_name: &str,
    fronts: &Fronts,
    stdio: bool,
) -> Result<(ConnectionInfo, ConnectionFile), ServeError> {
    let mut info = state::this_process_info(&config::identity(config_path), transport_name)?;
    if let Some(a) = &fronts.announcement {
        info.listen = Some(a.listening.to_string());
        info.mcp_url = Some(a.origin.mcp_url());
        info.a2a_url = Some(a.origin.a2a_url());
        info.agent_card_url = Some(a.origin.agent_card_url());
        info.token = Some(a.token.expose().to_string());
        info.token_source = Some(a.token_source.describe().to_owned());
        info.requested_port = Some(a.requested_port);
    }
    if let (Some(web), Some(io)) = (&fronts.web_settings, &fronts.web_io) {
        info.web_url = Some(web.origin.clone());
        info.web_listen = local_addr_of(&io.listener);
    }
    let connection = state::write_connection(paths, &info)?;
    state::clear_failure(paths);
    if let Some(a) = &fronts.announcement {
        let generated = matches!(a.token_source, token::TokenSource::Generated);
        let block = startup::startup_block(
            &a.origin,
            a.listening,
            generated.then(|| a.token.expose()),
            a.token_source,
        );
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(block.as_bytes());
        let _ = out.flush();
        if transport_name == "service" {
            crate::service_log::startup_block_printed(&block);
        }
        tracing::info!(listen = %a.listening, origin = %a.origin.origin_string(), "serving");
    } else if stdio {
        tracing::info!("serving MCP on stdin/stdout");
    }
    if let Some(url) = &info.web_url {
        let note = match &fronts.announcement {
            Some(_) => "",
            None => " (MCP/A2A not started: protocol_start_with_service is not true)",
        };
        // Printed for the person at the terminal (`--web-only`) and kept in the
        // service log; it holds no secret: the console needs `nl2sh web login`.
        println!("Web console: {url}{note}\nLog in with: nl2sh web login");
        tracing::info!(url = %url, "Web console serving");
    }
    Ok((info, connection))
}
