//! Everything that can be checked before a process exists: the configuration, the
//! model's settings, the front doors' flags and listeners, and the state directory's lock.
//! A bad flag fails here, before the lock is taken, so it never disturbs a running
//! service's state.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use nl2sh_proto::channels::{HttpSettings, ModelSetup, WebSettings};
use nl2sh_proto::Secret;

use crate::advertise::{self, Origin};
use crate::cli::ServeArgs;
use crate::config;
use crate::state;
use crate::token;

use super::listen::{bind, local_authorities};
use super::{ServeError, Transport, WEB_ONLY_TRANSPORT};

/// What the checks found and bound, for the tree to start with.
pub(super) struct Prepared {
    pub cfg: config::Config,
    pub config_path: PathBuf,
    pub state_dir: PathBuf,
    pub model: ModelSetup,
    /// How discovery names the transport ("http", "service", "stdio", "console").
    pub transport_name: &'static str,
    pub http: Option<(TcpListener, HttpSettings, Announcement)>,
    pub web: Option<(TcpListener, WebSettings)>,
    pub lock: state::StateLock,
}

/// The checks, in order; the state directory's lock last.
pub(super) fn prepare(
    config_arg: Option<PathBuf>,
    transport: &Transport,
) -> Result<Prepared, ServeError> {
    let explicit = config_arg.is_some();
    let config_path = config_arg.unwrap_or_else(config::default_config_path);
    let cfg = config::load(&config_path, explicit)?;
    if cfg.has_retired_bridge_auto_approve() {
        tracing::warn!(
            config = %config_path.display(),
            "bridge_auto_approve is retired and ignored; it never enables protocol_auto_approve"
        );
    }
    let state_dir = config::state_dir(&cfg, &config_path);
    let model = crate::model::setup(&cfg, &config_path, |name| std::env::var(name).ok())?;
    if let ModelSetup::Unavailable(why) = &model {
        tracing::info!("delegated tasks will fail: {why}");
    }
    let transport_name = match transport {
        Transport::Http(args) if args.managed_service => "service",
        Transport::Http(_) => "http",
        Transport::Stdio => "stdio",
        Transport::WebOnly => WEB_ONLY_TRANSPORT,
    };
    // The Web console runs with the managed service and alone (`--web-only`); a
    // standalone `protocol serve` or `stdio` starts no UI.
    let with_web = matches!(transport, Transport::Http(a) if a.managed_service)
        || matches!(transport, Transport::WebOnly);
    // Validate the HTTP front doors before taking the lock, so a bad flag never
    // disturbs a running service's state.
    let http = match transport {
        Transport::Http(args) => Some(prepare_http(args, &cfg)?),
        Transport::WebOnly if cfg.protocol_start_with_service => {
            Some(prepare_http(&service_args(&cfg), &cfg)?)
        }
        Transport::WebOnly | Transport::Stdio => None,
    };
    // A Web console that cannot start closes the protocol listener just opened (it is
    // dropped with `http` on this error).
    let web = with_web.then(|| prepare_web(&cfg)).transpose()?;
    let lock = match state::prepare(&state_dir, transport_name) {
        Ok(lock) => lock,
        Err(e) if matches!(transport, Transport::WebOnly) => {
            return Err(ServeError::Start(console_elsewhere(
                &state_dir,
                &config_path,
                e,
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Prepared {
        cfg,
        config_path,
        state_dir,
        model,
        transport_name,
        http,
        web,
        lock,
    })
}

/// What the HTTP transport announces once the tree is up.
pub(super) struct Announcement {
    pub origin: Origin,
    pub listening: SocketAddr,
    pub token: Secret,
    pub token_source: token::TokenSource,
    /// The port asked for (`listening` has the one bound).
    pub requested_port: u16,
}

/// Everything about the HTTP front door that can fail before a process exists.
fn prepare_http(
    args: &ServeArgs,
    cfg: &config::Config,
) -> Result<(TcpListener, HttpSettings, Announcement), ServeError> {
    let (token, token_source) = token::resolve(
        std::env::var_os(token::TOKEN_ENV),
        cfg.protocol_token.as_deref(),
    )?;
    let host: IpAddr = args
        .host
        .parse()
        .map_err(|_| ServeError::Host(args.host.clone()))?;
    if !args.allow_insecure_http && !host.is_loopback() {
        return Err(ServeError::InsecureHttp(host));
    }
    let advertised = args
        .advertised_url
        .as_deref()
        .map(advertise::parse_advertised_url)
        .transpose()?;
    let listener = bind(host, args.port)?;
    let listening = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::new(host, args.port),
        source,
    })?;
    let origin = advertised.unwrap_or_else(|| advertise::default_origin(listening));
    let settings = HttpSettings {
        token: token.clone(),
        advertised_origin: origin.origin_string(),
        local_authorities: local_authorities(host, listening.port()),
    };
    let announcement = Announcement {
        origin,
        listening,
        token,
        token_source,
        requested_port: args.port,
    };
    Ok((listener, settings, announcement))
}

/// The Web console's listener and settings, from `web_host`/`web_port`.
fn prepare_web(cfg: &config::Config) -> Result<(TcpListener, WebSettings), ServeError> {
    let host: IpAddr = cfg
        .web_host()
        .parse()
        .map_err(|_| ServeError::WebHost(cfg.web_host().to_owned()))?;
    if !host.is_loopback() && !cfg.web_allow_insecure_http {
        return Err(ServeError::InsecureWeb(host));
    }
    let listener = bind(host, cfg.web_port())?;
    let listening = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::new(host, cfg.web_port()),
        source,
    })?;
    let origin = advertise::default_origin(listening);
    let settings = WebSettings {
        origin: origin.origin_string(),
        local_authorities: local_authorities(host, listening.port()),
        insecure_remote: !host.is_loopback(),
    };
    Ok((listener, settings))
}

/// Why `--web-only` cannot start when another process holds the state directory, and
/// where the owner's console is then: the running process's own, when it has one.
fn console_elsewhere(state_dir: &Path, config_path: &Path, held: state::StateError) -> String {
    let paths = state::state_paths(state_dir);
    let identity = config::identity(&config::absolute(config_path));
    match state::discover(&paths, &identity) {
        Ok(state::Discovered::Live(info)) => match &info.web_url {
            Some(url) => format!(
                "the nl2sh service (pid {}) already serves the Web console for this \
                 configuration at {}: log in with `nl2sh web login`",
                info.pid,
                nl2sh_proto::display::Shown::new(url)
            ),
            None => format!(
                "a standalone nl2sh protocol process (pid {}, transport {}) uses this \
                 configuration, and it has no Web console: stop it and run `nl2sh service \
                 start` (MCP/A2A and the console together) or `nl2sh --web-only` again",
                info.pid,
                nl2sh_proto::display::Shown::new(&info.transport)
            ),
        },
        _ => held.to_string(),
    }
}

/// `protocol serve` as the managed service and `--web-only` with protocols: every
/// interface, the configured port, plain HTTP allowed.
fn service_args(cfg: &config::Config) -> ServeArgs {
    ServeArgs {
        host: "0.0.0.0".into(),
        port: cfg.service_port(),
        advertised_url: None,
        allow_insecure_http: true,
        managed_service: false,
    }
}
