//! Command line of the one `nl2sh` binary.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use nl2sh_proto::channels::CallOrigin;
use nl2sh_proto::stored_text::StoredText;

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

    /// Run the Web console alone in the foreground (with MCP/A2A too when
    /// protocol_start_with_service = true); Ctrl-C stops what it started.
    #[arg(long)]
    pub web_only: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The MCP/A2A protocol service.
    #[command(subcommand)]
    Protocol(ProtocolCommand),
    /// The managed background service of this configuration (MCP/A2A on
    /// 0.0.0.0:protocol_service_port, started only when protocol_start_with_service = true).
    #[command(subcommand, after_help = SERVICE_EXIT_CODES)]
    Service(ServiceCommand),
    /// Read and edit the configuration file, keeping its comments and order.
    #[command(subcommand, after_help = CONFIG_HELP)]
    Config(ConfigCommand),
    /// The owner's Web console of the running service.
    #[command(subcommand, after_help = WEB_HELP)]
    Web(WebCommand),
}

const WEB_HELP: &str = "\
The console runs with `nl2sh service start` (web_host:web_port, default 127.0.0.1:8766) or
alone with `nl2sh --web-only`. Reaching its port makes nobody the owner: `web login` asks the
running service for a one-time login link (valid 120 s, usable once), over the same local
socket as `protocol approve`, which no process of the service itself can use.
Exit codes: 0 done; 1 failed; 2 usage; 3 nothing runs for this configuration, or it has no
Web console.";

#[derive(Debug, Subcommand)]
pub enum WebCommand {
    /// Print a one-time login link for the Web console (valid 120 s, usable once).
    #[command(after_help = WEB_HELP)]
    Login {
        /// Open it in the browser instead (Android: an ACTION_VIEW intent; elsewhere
        /// xdg-open).
        #[arg(long)]
        open: bool,
    },
    /// End Web console sessions.
    #[command(after_help = WEB_HELP)]
    Logout {
        /// Every session (the only form: sessions are not named).
        #[arg(long, required = true)]
        all: bool,
    },
}

const SERVICE_EXIT_CODES: &str = "\
Exit codes:
  status   0 running (the managed service, or a standalone `protocol serve`/`stdio` for
           this configuration: see Transport); 3 not running; 10 not running, a stale
           record of a process that died is left; 11 cannot tell (starting, stopping, the
           state directory used by another configuration, or discovery unreadable)
  start    0 started, or already running as the managed service; 1 failed (the log's last
           lines are shown; nothing is left running); 12 not configured
           (protocol_start_with_service is not true, or the configuration is missing)
  stop     0 stopped, or was not running; 1 failed, or the running process is a standalone
           `protocol serve`/`stdio` (left alone)
  restart  as stop, then as start
The service's output, including a generated token, goes to <config dir>/<stem>.service/service.log
(private, 0600; kept within 1 MiB, the part before in service.log.1, and each new log begins with
the startup block); status and start never print the token.";

const CONFIG_HELP: &str = "\
Keys: every top-level key of the configuration, and model.<key> for the [model] table.
protocol_token and model.api_key are never printed, and never taken from the command line:
give `-` to read the value from stdin (one line), or --from-env VAR.
`set` holds <config>.lock while it edits, so concurrent edits of one file apply in turn.
Exit codes: 0 done; 1 refused or failed (the file is left as it was); 2 usage.";

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Start the managed service in the background (detached, output to service.log), or
    /// report it when it already runs.
    #[command(after_help = SERVICE_EXIT_CODES)]
    Start,
    /// Stop the managed service: cancel its tasks, close its listeners, wait for it to exit.
    #[command(after_help = SERVICE_EXIT_CODES)]
    Stop,
    /// Stop the managed service if it runs, then start it (picks up configuration changes).
    #[command(after_help = SERVICE_EXIT_CODES)]
    Restart,
    /// Show what runs for this configuration (from discovery; starts nothing, never shows
    /// the token).
    #[command(after_help = SERVICE_EXIT_CODES)]
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the configuration file's path.
    Path,
    /// Print a key's value (the default when it is not set; credentials print set/not set).
    Get {
        /// A top-level key or model.<key>.
        key: String,
    },
    /// Set a key, validate the result as loading does, and save it atomically (mode 0600).
    Set {
        /// A top-level key or model.<key>.
        key: String,
        /// The value: true/false, a number, or text; `-` reads one line from stdin.
        #[arg(allow_negative_numbers = true, required_unless_present = "from_env")]
        value: Option<String>,
        /// Take the value from this environment variable instead.
        #[arg(long, value_name = "VAR", conflicts_with = "value")]
        from_env: Option<String>,
    },
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
        /// The person confirmed already, in a console that runs this command for them
        /// (the root manager's WebUI): no terminal needed. Still refused to every process
        /// of the service's own tree.
        #[arg(long)]
        yes: bool,
        /// Also let the UI actions (taps, gestures, text, keys) of the same caller in the
        /// app the request names run unasked for this many minutes (1-30): a timed UI
        /// grant. Never a shell, a file, root, or a high or dangerous action; it ends
        /// early when another app comes to the front. Only for requests `approvals`
        /// shows with `--ui-minutes`.
        #[arg(long, value_name = "MINUTES",
              value_parser = clap::value_parser!(u32).range(1..=i64::from(nl2sh_proto::ui_grants::MAX_UI_GRANT_MINUTES)))]
        ui_minutes: Option<u32>,
    },
    /// List the timed UI grants in force (app, caller, time left, actions covered), or
    /// end one with --revoke.
    UiGrants {
        /// Machine-readable output.
        #[arg(long, conflicts_with = "revoke")]
        json: bool,
        /// End this grant now (its id from the list).
        #[arg(long, value_name = "ID")]
        revoke: Option<String>,
    },
    /// Print the token the running service accepts (owner-only, like `approve`: refused
    /// to every process of the service's own tree).
    Token,
    /// Reject a pending request, or with --origin every request of one origin; what is
    /// rejected does not run.
    Reject {
        /// The request id from `nl2sh protocol approvals`.
        #[arg(required_unless_present = "origin", conflicts_with = "origin")]
        id: Option<String>,
        /// Reject every request now pending from this origin, as `approvals` names it.
        #[arg(long, value_name = "ORIGIN", value_parser = PossibleValuesParser::new(CallOrigin::ALL.iter().map(|o| o.as_str())))]
        origin: Option<String>,
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

    /// Set by `nl2sh service start` for the process it starts: announces the transport as
    /// "service" so `service stop` knows the process is its own to stop.
    #[arg(long, hide = true)]
    pub managed_service: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("nl2sh").chain(args.iter().copied()))
    }

    #[test]
    fn web_only_and_web_commands() {
        let c = parse(&["--config", "/a.toml", "--web-only"]).unwrap();
        assert!(c.web_only && c.command.is_none());
        // Refused in `main` (clap cannot make an argument conflict with a subcommand
        // while `--config` stays global).
        assert!(parse(&["--web-only", "service", "start"]).unwrap().web_only);
        assert!(matches!(
            parse(&["web", "login", "--open"]).unwrap().command,
            Some(Command::Web(WebCommand::Login { open: true }))
        ));
        assert!(parse(&["web", "logout"]).is_err(), "--all is required");
        assert!(matches!(
            parse(&["web", "logout", "--all"]).unwrap().command,
            Some(Command::Web(WebCommand::Logout { all: true }))
        ));
        assert!(parse(&[]).unwrap().command.is_none());
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
        let serve = |args: &[&str]| match parse(args).unwrap().command.unwrap() {
            Command::Protocol(ProtocolCommand::Serve(s)) => s,
            other => panic!("{other:?}"),
        };
        assert!(serve(&["protocol", "serve"]).allow_insecure_http);
        assert!(serve(&["protocol", "serve", "--allow-insecure-http"]).allow_insecure_http);
        assert!(!serve(&["protocol", "serve", "--allow-insecure-http=false"]).allow_insecure_http);
        assert!(parse(&["protocol", "serve", "--allow-insecure-http=maybe"]).is_err());
        assert_eq!(serve(&["protocol", "serve"]).port, 8765);
        assert!(parse(&["protocol", "serve", "--port", "70000"]).is_err());
        assert!(!serve(&["protocol", "serve"]).managed_service);
        assert!(serve(&["protocol", "serve", "--managed-service"]).managed_service);
    }

    #[test]
    fn service_and_config_commands() {
        let cmd = |args: &[&str]| parse(args).unwrap().command.unwrap();
        assert!(matches!(
            cmd(&["service", "status", "--json"]),
            Command::Service(ServiceCommand::Status { json: true })
        ));
        assert!(matches!(
            cmd(&["--config", "/c.toml", "service", "restart"]),
            Command::Service(ServiceCommand::Restart)
        ));
        assert!(parse(&["service", "start", "--json"]).is_err());
        match cmd(&["config", "set", "netd_uid", "-5"]) {
            Command::Config(ConfigCommand::Set {
                key,
                value,
                from_env,
            }) => {
                assert_eq!(
                    (key.as_str(), value.as_deref(), from_env),
                    ("netd_uid", Some("-5"), None)
                );
            }
            other => panic!("{other:?}"),
        }
        match cmd(&["config", "set", "protocol_token", "--from-env", "T"]) {
            Command::Config(ConfigCommand::Set {
                value, from_env, ..
            }) => {
                assert_eq!((value, from_env.as_deref()), (None, Some("T")));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["config", "set", "protocol_token"]).is_err());
        assert!(parse(&["config", "set", "k", "v", "--from-env", "T"]).is_err());
        let help = Cli::try_parse_from(["nl2sh", "service", "--help"])
            .unwrap_err()
            .to_string();
        assert!(help.contains("Exit codes:"), "{help}");
    }
}
