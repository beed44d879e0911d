//! The executor: the Tool Runtime. It never parses network bytes; it answers typed
//! requests from netd's channel and asks approvald for authority.
//!
//! Its modules are layered; each imports only what lies beneath it (docs/ARCHITECTURE.md,
//! "Inside the executor"):
//!
//! 1. [`runtime`]: the call path, [`runtime::pipeline`] (registered → validated →
//!    prepared → assessed → decided → bound → ran → recorded), with approvald's link, the
//!    outbox and the resource locks;
//! 2. [`tools`]: what a call does. The contract every tool keeps ([`tools::Tool`],
//!    [`tools::Prepared`], [`tools::ExecContext`]), the argument schema and the reader
//!    threads, and the tools themselves, which run in the sandbox or through [`exec`];
//! 3. [`sandbox`]: the read-only sandbox: its pool, uid claims, limits and helper;
//! 4. [`exec`] (running one command in its own process group) and [`file_reads`] (the
//!    work of `fs.read` and `fs.list`, in process or as a sandbox payload).
//!
//! [`risk`], [`device`], [`inspect`], [`secrets`] and `sys` lie beneath all four;
//! [`dispatch`] and this file, which wire them together, above.

#![deny(unsafe_code)]

pub mod device;
pub mod dispatch;
pub mod exec;
pub mod file_reads;
pub mod inspect;
pub mod risk;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
#[allow(unsafe_code)] // the one room for it in this crate, each block with a SAFETY comment
mod sys;
pub mod tools;

use std::process::ExitCode;
use std::sync::Arc;

use nl2sh_proto::channels::AuthorityRequest;
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::topology::ExecutorEnds;
use nl2sh_proto::worker::{accept_start, ControlEvent, WorkerError};

use runtime::outbox::Outbox;

/// State shared by every request the executor answers.
pub struct Runtime {
    pub environment: inspect::Environment,
    pub pipeline: runtime::pipeline::Pipeline,
}

impl Runtime {
    /// Probe the device with the launching shell's `path_var` and register its tools.
    /// Without an `authority`, every action that needs a decision is refused; without a
    /// `sandbox`, read-only actions the caller chose ask like mutations.
    pub fn new(
        path_var: Option<&str>,
        authority: Option<Arc<runtime::authority::Authority>>,
        sandbox: Option<Arc<sandbox::Sandbox>>,
        protected: risk::Protected,
    ) -> Self {
        let device =
            device::DeviceEnv::probe(path_var.map(str::to_string)).with_protected(protected);
        Self {
            environment: inspect::Environment::probe(path_var),
            pipeline: runtime::pipeline::Pipeline::new(device, authority, sandbox),
        }
    }
}

/// nl2sh's own files as the executor protects them: the configuration file, the state
/// directory, the managed service's directory (its log holds the token), the running
/// executable (where it really is) and, when it runs from a phone module, that module's
/// directories (its boot scripts run as root). Each with what it is, in the owner's
/// words; the executable and the module come last, after `masked` entries.
pub struct OwnFiles {
    /// Configuration, state and service paths (the sandbox hides these), under the names
    /// they had and the ones they resolve to.
    pub masked: Vec<std::path::PathBuf>,
    pub labelled: Vec<(std::path::PathBuf, &'static str)>,
}

/// Where a root manager keeps a module's files (installed, and waiting for the reboot
/// that installs an update).
const MODULE_ROOTS: &[&str] = &["/data/adb/modules", "/data/adb/modules_update"];

pub fn own_files(config: &str, state_dir: &str, service_dir: &str) -> OwnFiles {
    use risk::{OWN_CONFIGURATION, OWN_EXECUTABLE, OWN_MODULE, OWN_SERVICE, OWN_STATE};
    let mut masked = Vec::new();
    let mut labelled = Vec::new();
    for (p, label) in [
        (config, OWN_CONFIGURATION),
        (state_dir, OWN_STATE),
        (service_dir, OWN_SERVICE),
    ] {
        let p = std::path::PathBuf::from(p);
        if let Ok(real) = std::fs::canonicalize(&p) {
            if real != p {
                masked.push(real.clone());
                labelled.push((real, label));
            }
        }
        masked.push(p.clone());
        labelled.push((p, label));
    }
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        if let Some(module) = module_of(&exe) {
            for root in MODULE_ROOTS {
                labelled.push((std::path::Path::new(root).join(&module), OWN_MODULE));
            }
        }
        labelled.push((exe, OWN_EXECUTABLE));
    }
    OwnFiles { masked, labelled }
}

/// The module a phone's root manager runs the executable from
/// (`/data/adb/modules/<id>/system/bin/nl2sh` gives `<id>`).
fn module_of(exe: &std::path::Path) -> Option<std::ffi::OsString> {
    MODULE_ROOTS.iter().find_map(|root| {
        let rest = exe.strip_prefix(root).ok()?;
        rest.components()
            .next()
            .map(|c| c.as_os_str().to_os_string())
    })
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Every command's process group dies with the executor.
        let killed = self.pipeline.groups.kill_all();
        if killed > 0 {
            tracing::info!(groups = killed, "killed running commands");
        }
    }
}

/// Entry point of the hidden `executor` role, on its ends of the tree's channels
/// (inherited in production: `ExecutorEnds::inherited()`).
pub fn run(ends: ExecutorEnds) -> ExitCode {
    nl2sh_proto::worker::run_single_threaded("executor", serve(ends))
}

/// Longest wait at a clean stop for approvald to take the outbox's rows.
const OUTBOX_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

fn catch_stop_signals() -> Vec<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    [SignalKind::interrupt(), SignalKind::terminate(), SignalKind::hangup()]
        .into_iter()
        .filter_map(|kind| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot catch a stop signal; commands may inherit it ignored");
                None
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    #[error(transparent)]
    Worker(#[from] nl2sh_proto::worker::WorkerError),
    #[error("supervisor sent settings for another role")]
    WrongSettings,
    #[error("approvald channel: {0}")]
    Authority(String),
    #[error("netd channel closed: {0}")]
    NetdChannel(nl2sh_proto::FrameError),
    #[error("supervisor channel: {0}")]
    Control(nl2sh_proto::FrameError),
}

async fn serve(ends: ExecutorEnds) -> Result<(), ExecutorError> {
    let ExecutorEnds {
        control,
        netd,
        approvald,
    } = ends;
    let (mut control, settings) = accept_start(control).await.map_err(|e| match e {
        WorkerError::WrongSettings => ExecutorError::WrongSettings,
        e => e.into(),
    })?;
    // The supervisor starts workers with stop signals ignored (it drains them itself), and
    // an ignored signal stays ignored across exec. Catching them instead (and never
    // acting on it) keeps the executor deaf to them while every command it starts gets the
    // default dispositions back at exec, without code between fork and exec.
    let _caught = catch_stop_signals();
    tracing::debug!(config = %settings.config_path, "executor starting");
    let (authority, mut authority_task) = RpcClient::start(approvald)
        .await
        .map_err(|e| ExecutorError::Authority(e.to_string()))?;
    // The channel itself refuses any answer but Pong.
    authority
        .call(&AuthorityRequest::Ping)
        .await
        .map_err(|e| ExecutorError::Authority(e.to_string()))?;
    // Answered calls' rows wait here for approvald; a row an executor before us answered
    // for and approvald may never have received is handed over before any call.
    let (outbox, left) = match Outbox::open(std::path::Path::new(&settings.state_dir)) {
        Ok((outbox, left)) => (Some(Arc::new(outbox)), left),
        Err(e) => {
            tracing::error!(error = %e, "no audit outbox; every answer waits for approvald");
            (None, Vec::new())
        }
    };
    let link = runtime::authority::Authority::with_outbox(authority, &settings.config_path, outbox);
    link.recover(left).await;
    // The first snapshot, so read-only calls stop asking approvald as soon as it is here.
    link.refresh().await;
    let own = own_files(
        &settings.config_path,
        &settings.state_dir,
        &settings.service_dir,
    );
    // The masks hide the configuration, state and service log, under the names the paths
    // had and the ones they resolve to.
    let masked: Vec<String> = own.masked.iter().map(|p| p.display().to_string()).collect();
    let sandbox = Arc::new(sandbox::Sandbox::new(
        sandbox::SandboxSettings::for_executor(
            settings.sandbox_uids,
            settings.sandbox_limits,
            settings.sandbox_ceiling,
            masked,
        ),
    ));
    let runtime = Arc::new(Runtime::new(
        std::env::var("PATH").ok().as_deref(),
        Some(link.clone()),
        Some(sandbox.clone()),
        risk::Protected::labelled(own.labelled),
    ));
    // Probe the sandbox now, so startup says which parts are active and the first call
    // does not wait for it.
    tokio::spawn(async move {
        sandbox.availability().await;
    });
    let mut netd_task = tokio::spawn(dispatch::serve_netd(netd, runtime.clone()));
    control.started().await.map_err(ExecutorError::Control)?;
    let result = tokio::select! {
        event = control.next_event() => match event {
            ControlEvent::Drain { id, .. } => {
                // Nothing long-running exists yet; the rows of answered calls reach
                // approvald first, so the outbox is left empty (what does not arrive in
                // time stays in it for the next start).
                if !link.settle(OUTBOX_SETTLE).await {
                    tracing::warn!("audit rows still wait for approvald; the next start hands them over");
                }
                control.drained(id).await.map_err(ExecutorError::Control)?;
                Ok(())
            }
            ControlEvent::Closed => Ok(()),
            ControlEvent::Hostile(e) => Err(ExecutorError::Control(e)),
        },
        served = &mut netd_task => match served {
            // netd closed its end between frames: it is exiting (stdio EOF, or it died and
            // the supervisor will say so). Nothing to serve any more.
            Ok(Ok(())) => {
                tracing::info!("netd closed its channel; stopping");
                Ok(())
            }
            Ok(Err(e)) => Err(ExecutorError::NetdChannel(e)),
            Err(_) => Err(ExecutorError::NetdChannel(nl2sh_proto::FrameError::Closed)),
        },
        _ = &mut authority_task => Err(ExecutorError::Authority("closed".into())),
    };
    // Whatever ended us, no command outlives the executor.
    runtime.pipeline.groups.kill_all();
    result
}
