//! The one nl2sh executable: the CLI, the supervisor, and (behind a hidden first argument)
//! each worker role of the process tree.

#![deny(unsafe_code)]

mod advertise;
mod cli;
mod config;
mod config_edit;
mod discovery;
mod exit;
mod local;
mod log_tail;
mod logging;
mod model;
mod orphans;
mod owner_token;
mod running;
mod serve;
mod service;
mod service_log;
mod spawn;
mod startup;
mod state;
#[allow(unsafe_code)] // the one room for it in this crate, each block with a SAFETY comment
mod sys;
mod token;
mod tui;
mod web;

use std::process::ExitCode;

use clap::Parser;
use nl2sh_proto::topology::Worker;

/// Log filter when `NL2SH_LOG` is unset. rmcp logs every stateless request at info
/// (session start and end), which would be several lines per tool call.
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// First argument that selects a worker role; never typed by users.
pub const WORKER_ARG: &str = "__nl2sh-worker";

fn init_logging(filter: &str, role: &'static str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false)
        .event_format(logging::RoleFormat::new(role))
        .try_init();
}

/// The entries the tree starts itself with, before any command line is parsed: the
/// sandbox and touch helpers, and a worker of the tree. `None` for a person's command.
fn internal_entry() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let _argv0 = args.next();
    let first = args.next();
    // The executor's sandbox helper: one sandboxed action, set up from its stdin.
    if first.as_deref() == Some(std::ffi::OsStr::new(nl2sh_executor::sandbox::HELPER_ARG)) {
        return Some(nl2sh_executor::sandbox::helper::main());
    }
    // The touch helper: one gesture, as the UI identity, from its stdin.
    if first.as_deref()
        == Some(std::ffi::OsStr::new(
            nl2sh_executor::tools::android::TOUCH_HELPER_ARG,
        ))
    {
        return Some(nl2sh_executor::tools::android::touch_helper_main());
    }
    if first.as_deref() == Some(std::ffi::OsStr::new(WORKER_ARG)) {
        let worker = args
            .next()
            .and_then(|r| r.into_string().ok())
            .and_then(|name| Worker::parse(&name));
        let filter = args
            .next()
            .and_then(|f| f.into_string().ok())
            .unwrap_or_else(|| DEFAULT_LOG_FILTER.into());
        let Some(worker) = worker else {
            eprintln!("nl2sh: unknown worker role");
            return Some(exit::Exit::Usage.into());
        };
        return Some(run_worker(worker, &filter));
    }
    None
}

fn main() -> ExitCode {
    if let Some(code) = internal_entry() {
        return code;
    }
    let cli = cli::Cli::parse();
    // The terminal console owns the screen: log lines on stderr would land in it.
    let console = cli.command.is_none() && !cli.web_only && tui::on_a_terminal();
    let filter = if console {
        "off".to_owned()
    } else {
        std::env::var("NL2SH_LOG").unwrap_or_else(|_| DEFAULT_LOG_FILTER.into())
    };
    init_logging(&filter, "supervisor");
    if cli.web_only && cli.command.is_some() {
        eprintln!("nl2sh: --web-only runs alone; give it no subcommand");
        return exit::Exit::Usage.into();
    }
    let Some(command) = cli.command else {
        if cli.web_only {
            return serve::serve(cli.config, serve::Transport::WebOnly);
        }
        if console {
            return tui::run(cli.config);
        }
        // Without a terminal, a usage error as clap reports one: the help on stderr,
        // exit 2.
        use clap::CommandFactory;
        eprint!("{}", cli::Cli::command().render_help());
        return exit::Exit::Usage.into();
    };
    let serves = matches!(
        command,
        cli::Command::Protocol(cli::ProtocolCommand::Serve(_) | cli::ProtocolCommand::Stdio)
    );
    if !serves {
        sys::default_sigpipe();
    }
    match command {
        cli::Command::Web(cli::WebCommand::Login { open }) => web::login(cli.config, open),
        cli::Command::Web(cli::WebCommand::Logout { .. }) => web::logout_all(cli.config),
        cli::Command::Protocol(cli::ProtocolCommand::Serve(args)) => {
            serve::serve(cli.config, serve::Transport::Http(args))
        }
        cli::Command::Protocol(cli::ProtocolCommand::Stdio) => {
            serve::serve(cli.config, serve::Transport::Stdio)
        }
        cli::Command::Protocol(cli::ProtocolCommand::Approvals { json }) => {
            local::approvals(cli.config, json)
        }
        cli::Command::Protocol(cli::ProtocolCommand::Approve {
            id,
            phrase,
            yes,
            ui_minutes,
        }) => local::approve(cli.config, id, phrase, yes, ui_minutes),
        cli::Command::Protocol(cli::ProtocolCommand::UiGrants { json, revoke }) => match revoke {
            Some(id) => local::revoke_ui_grant(cli.config, &id),
            None => local::ui_grants(cli.config, json),
        },
        cli::Command::Protocol(cli::ProtocolCommand::Token) => owner_token::print(cli.config),
        cli::Command::Protocol(cli::ProtocolCommand::Reject { id, origin }) => match (id, origin) {
            (_, Some(origin)) => local::reject_origin(cli.config, &origin),
            (Some(id), None) => local::decide(cli.config, id, local::Decision::Reject, false),
            // clap requires one of them.
            (None, None) => exit::Exit::Usage.into(),
        },
        cli::Command::Protocol(cli::ProtocolCommand::Audit {
            since,
            limit,
            json,
            verify,
        }) => local::audit(cli.config, since, limit, json, verify),
        cli::Command::Service(cli::ServiceCommand::Start) => service::start(cli.config),
        cli::Command::Service(cli::ServiceCommand::Stop) => service::stop(cli.config),
        cli::Command::Service(cli::ServiceCommand::Restart) => service::restart(cli.config),
        cli::Command::Service(cli::ServiceCommand::Status { json }) => {
            service::status(cli.config, json)
        }
        cli::Command::Config(cli::ConfigCommand::Path) => config_edit::path_command(cli.config),
        cli::Command::Config(cli::ConfigCommand::Get { key }) => {
            config_edit::get_command(cli.config, &key)
        }
        cli::Command::Config(cli::ConfigCommand::Set {
            key,
            value,
            from_env,
        }) => config_edit::set_command(cli.config, &key, value, from_env),
    }
}

fn run_worker(worker: Worker, filter: &str) -> ExitCode {
    use nl2sh_proto::topology::{ApprovaldEnds, EndError, ExecutorEnds, NetdEnds, WebEnds};
    let name = worker.name();
    sys::set_process_name(name);
    nl2sh_proto::sys::limit_heap_arenas();
    // Back from the supervisor's protected score to a moderate one (raising needs no
    // privilege, so netd can too); sandboxed commands raise theirs to the most.
    let _ = std::fs::write("/proc/self/oom_score_adj", serve::WORKER_OOM_SCORE_ADJ);
    init_logging(filter, name);
    // Each role runs on its ends of the channels the topology table gives it.
    let ran: Result<ExitCode, EndError> = match worker {
        Worker::Netd => NetdEnds::inherited().map(nl2sh_netd::run),
        Worker::Executor => ExecutorEnds::inherited().map(nl2sh_executor::run),
        Worker::Approvald => ApprovaldEnds::inherited().map(nl2sh_approvald::run),
        Worker::Web => WebEnds::inherited().map(nl2sh_web::run),
    };
    ran.unwrap_or_else(|e| {
        tracing::error!("{name}: {e} (this role is started only by `nl2sh protocol serve`)");
        eprintln!("nl2sh: {e} (this role is started only by `nl2sh protocol serve`)");
        crate::exit::Exit::Failure.into()
    })
}
