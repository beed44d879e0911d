//! Bench-only reference server for `benches/invoke.rs`: the tree's own code in ONE
//! process.
//!
//! * HTTP, MCP and the tools' glue: netd's real front door (`serve_http_with`: the
//!   connection table, Host and Bearer checks, the 32 KiB body limit, rmcp configured as
//!   netd configures it, `nl2sh_invoke`'s argument checks and result shaping).
//! * Tool: the executor's real dispatch and [`Pipeline`] (registration, validation,
//!   `fs.stat`/`shell.exec` preparation, locks, privilege binding, the read-only sandbox),
//!   reached over an in-process `NetdExecutor` socketpair as netd reaches it.
//! * Approval: `--authority bare` (default) answers the executor in this process without
//!   storing anything (read-only allowed, the rest refused); `--authority audited` answers
//!   it with approvald's real `Authority` and SQLite store in a private state directory,
//!   with the executor's audit outbox beside it.
//! * Tasks: approvald's real task store in a temporary directory (the bench delegates
//!   none; the routes need one).
//!
//! So the tree and this process run the same code; what separates them is processes:
//! their identities, confinement, and the kernel's work between them.
//!
//! Usage: `single_rmcp --port N [--authority bare|audited] [--state-dir DIR]`, token from
//! `NL2SH_PROTOCOL_TOKEN`. Binds 127.0.0.1 only and prints `Listening on: ADDR`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use nl2sh_approvald::store::Store;
use nl2sh_executor::runtime::authority::Authority as AuthorityLink;
use nl2sh_netd::executor::ExecutorClient;
use nl2sh_netd::store::StoreClient;
use nl2sh_netd::tasks::{TaskService, Unavailable};
use nl2sh_netd::{serve_http_with, Backends, HttpLimits};
use nl2sh_proto::channels::{
    AuthorityRequest, AuthorityResponse, CallOrigin, ConfigVersion, Decision, HttpSettings,
    PolicySnapshot, RiskLevel,
};
use nl2sh_proto::rpc::{self, RpcClient};
use nl2sh_proto::topology::{pair, ExecutorApprovald, NetdApprovald, NetdExecutor};
use nl2sh_proto::Secret;

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
    // The workers' runtime shape: one thread each (blocking work goes to the pool).
    let rt = tokio::runtime::Builder::new_current_thread()
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
    // The same read-only sandbox the tree uses (its default uid range, nothing else
    // masked).
    let sandbox = nl2sh_executor::sandbox::Sandbox::new(
        nl2sh_executor::sandbox::SandboxSettings::for_executor(
            nl2sh_proto::channels::UidRange {
                first: nl2sh_proto::config::DEFAULT_SANDBOX_UID_BASE,
                count: nl2sh_proto::config::DEFAULT_SANDBOX_UID_COUNT,
            },
            nl2sh_proto::config::Config::default().sandbox_limits(),
            nl2sh_proto::config::Config::default().sandbox_ceiling(),
            Vec::new(),
        ),
    );
    let runtime = Arc::new(nl2sh_executor::Runtime::new(
        std::env::var("PATH").ok().as_deref(),
        Some(authority),
        Some(Arc::new(sandbox)),
        Default::default(),
    ));
    let (asker, answerer) = pair::<NetdExecutor>().map_err(|e| e.to_string())?;
    tokio::spawn(nl2sh_executor::dispatch::serve_netd(answerer, runtime));
    let (executor, _) = ExecutorClient::start(asker)
        .await
        .map_err(|e| e.to_string())?;

    let tasks_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store = Store::open(tasks_dir.path()).map_err(|e| e.to_string())?;
    let task_store = Arc::new(store.tasks(&[]).map_err(|e| e.to_string())?);
    let (asker, answerer) = pair::<NetdApprovald>().map_err(|e| e.to_string())?;
    tokio::spawn(nl2sh_approvald::dispatch::serve_netd(
        answerer,
        task_store,
        Default::default(),
    ));
    let (store_client, _) = StoreClient::start(asker).await.map_err(|e| e.to_string())?;
    let runner = Arc::new(Unavailable("no Agent in the bench".into()));
    let backends = Backends {
        executor,
        tasks: TaskService::new(store_client, runner),
    };

    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], opts.port)))
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let settings = HttpSettings {
        token: Secret::new(opts.token),
        advertised_origin: format!("http://{addr}"),
        local_authorities: vec![addr.to_string()],
    };
    println!("Listening on: {addr}");
    serve_http_with(
        listener,
        settings,
        HttpLimits::default(),
        backends,
        std::future::pending(),
    )
    .await
    .map_err(|e| format!("serve: {e}"))?;
    drop(tasks_dir);
    Ok(())
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
            | AuthorityRequest::Kept(_)
            | AuthorityRequest::Withdraw { .. } => AuthorityResponse::Recorded,
            // Nothing ever waits for a person here.
            AuthorityRequest::Waiting { .. } => AuthorityResponse::Waiting(None),
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
