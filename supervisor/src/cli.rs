//! Command line of the one `nl2sh` binary.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "nl2sh",
    version,
    about = "Device agent that outside AI agents reach over MCP and A2A",
    long_about = "nl2sh serves device tools (shell, files, Android screen and input) to external \
agents over MCP (Streamable HTTP or stdio) and A2A, behind a privilege-separated process tree \
and device-local approval of every mutation."
)]
pub struct Cli {
    /// Configuration file (TOML). Default: $XDG_CONFIG_HOME/nl2sh/config.toml (Linux) or
    /// /data/adb/nl2sh/config.toml (Android); a missing default file means built-in defaults.
    /// Accepted before or after the subcommand.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The MCP/A2A protocol service.
    #[command(subcommand)]
    Protocol(ProtocolCommand),
}

#[derive(Debug, Subcommand)]
pub enum ProtocolCommand {
    /// Serve MCP (/mcp) and A2A (/a2a) over HTTP with Bearer authentication.
    Serve(ServeArgs),
    /// Serve MCP on stdin/stdout for a local client (no token; the launching user's
    /// privileges). stdout carries only MCP; diagnostics go to stderr.
    Stdio,
    /// List the requests waiting for a local decision: id, tool, the exact action, risk,
    /// identity, origin, seconds left, and the phrase when one is needed.
    Approvals {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending request (needs an interactive terminal). Dangerous and critical
    /// actions also need their exact phrase, shown by `approvals`.
    Approve {
        /// The request id from `nl2sh protocol approvals`.
        id: String,
        /// The exact phrase bound to this request (dangerous and critical actions).
        #[arg(long)]
        phrase: Option<String>,
    },
    /// Reject a pending request; its action does not run.
    Reject {
        /// The request id from `nl2sh protocol approvals`.
        id: String,
    },
    /// Read the audit trail of this configuration's service.
    Audit {
        /// Only rows at or after this time: RFC 3339 UTC (2026-11-30T10:00:00Z) or an age
        /// (90s, 15m, 2h, 7d).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// At most this many of the newest rows.
        #[arg(long, default_value_t = 200)]
        limit: usize,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Check the hash chain; exits 8 naming the first bad row.
        #[arg(long)]
        verify: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to bind. 0.0.0.0 listens on every IPv4 interface (it is not a client
    /// destination); use 127.0.0.1 for local-only access.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
    pub host: String,

    /// Port to bind. 0 asks the system for a free port; if the port is taken, an available
    /// port on the same address is used. The actual port is announced at startup.
    #[arg(long, value_name = "N", default_value_t = 8765)]
    pub port: u16,

    /// Client-facing origin (http:// or https://, no path, credentials, query or fragment;
    /// not 0.0.0.0 or ::), e.g. behind an HTTPS proxy. Default: the device's IPv4 address
    /// chosen by route source selection, else the first active interface, else 127.0.0.1.
    #[arg(long, value_name = "URL")]
    pub advertised_url: Option<String>,

    /// Allow plain HTTP on a non-loopback listener (tokens cross the network in clear).
    /// With =false, a --host that is not loopback refuses startup.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_insecure_http: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("nl2sh").chain(args.iter().copied()))
    }

    #[test]
    fn config_before_or_after_the_subcommand() {
        let a = parse(&["--config", "/a.toml", "protocol", "serve"]).unwrap();
        let b = parse(&["protocol", "serve", "--config", "/a.toml"]).unwrap();
        assert_eq!(a.config, Some(PathBuf::from("/a.toml")));
        assert_eq!(b.config, Some(PathBuf::from("/a.toml")));
    }

    #[test]
    fn allow_insecure_http_forms() {
        let serve = |args: &[&str]| match parse(args).unwrap().command {
            Command::Protocol(ProtocolCommand::Serve(s)) => s,
            other => panic!("{other:?}"),
        };
        assert!(serve(&["protocol", "serve"]).allow_insecure_http);
        assert!(serve(&["protocol", "serve", "--allow-insecure-http"]).allow_insecure_http);
        assert!(!serve(&["protocol", "serve", "--allow-insecure-http=false"]).allow_insecure_http);
        assert!(parse(&["protocol", "serve", "--allow-insecure-http=maybe"]).is_err());
        assert_eq!(serve(&["protocol", "serve"]).port, 8765);
        assert!(parse(&["protocol", "serve", "--port", "70000"]).is_err());
    }
}
