//! One call through the whole pipeline. Every step either passes the call on or ends it
//! with a result the caller can read; nothing runs unless approval said so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::authority::Authority;
use super::locks::Locks;
use crate::device::DeviceEnv;
use crate::exec::ProcessGroups;
use crate::sandbox::{Availability, Sandbox};
use crate::sys::ChildSetup;
use crate::tools::{readers, schema, ExecContext, Prepared, Tool, ToolError, ToolOutput};
use nl2sh_proto::channels::{
    ActionSummary, CallId, CallResult, CallStage, Confinement, Correlation, Decision,
    InvokeRequest, RanRecord, ReportedRow, RiskLevel, ToolOutcome, ToolSpec,
};
use nl2sh_proto::limits::{
    MAX_ACTION_BYTES, MAX_ARGUMENT_JSON_BYTES, MAX_ID_BYTES, MAX_REASONS, MAX_REASON_BYTES,
    MAX_SUMMARY_BYTES, MAX_TOOL_NAME_BYTES, MAX_TOOL_OUTPUT_BYTES, RESOURCE_LOCK_WAIT,
};
use nl2sh_proto::text::fit;

/// What the device offers right now: its profile and the tools that registered on it.
pub struct Registry {
    pub device: Arc<DeviceEnv>,
    pub tools: Vec<Box<dyn Tool>>,
}

impl Registry {
    /// Probe again, keeping what the executor was told at start (protected files).
    fn discover(previous: &DeviceEnv) -> Self {
        let device = Arc::new(
            DeviceEnv::probe(previous.path_var.clone()).with_protected(previous.protected.clone()),
        );
        let tools = crate::tools::discover(&device);
        Self { device, tools }
    }

    pub fn tool(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.def().name == name)
            .map(|t| t.as_ref())
    }
}

/// The registry and the shared state of every call.
pub struct Pipeline {
    /// Replaced when the catalog is asked for, so programs installed (or removed) since
    /// start are reflected; a call keeps the snapshot it started with.
    registry: RwLock<Arc<Registry>>,
    locks: Locks,
    pub groups: Arc<ProcessGroups>,
    /// Running calls by the id netd knows them by (netd may reuse one), each with the
    /// id the executor gave it.
    calls: Mutex<HashMap<Correlation, Vec<RunningCall>>>,
    /// The next call id: ids are ours, never netd's, so approvals and the audit cannot be
    /// confused by what netd sends.
    next_call: AtomicU64,
    authority: Option<Arc<Authority>>,
    /// Where unasked read-only actions run; `None` (tests of other parts) means there is
    /// no sandbox, so they ask.
    sandbox: Option<Arc<Sandbox>>,
}

impl Pipeline {
    pub fn new(
        device: DeviceEnv,
        authority: Option<Arc<Authority>>,
        sandbox: Option<Arc<Sandbox>>,
    ) -> Self {
        let device = Arc::new(device);
        let tools = crate::tools::discover(&device);
        Self {
            registry: RwLock::new(Arc::new(Registry { device, tools })),
            locks: Locks::default(),
            groups: Arc::default(),
            calls: Mutex::default(),
            next_call: AtomicU64::new(first_call_id()),
            authority,
            sandbox,
        }
    }

    /// Whether the read-only sandbox works here and which parts are active.
    pub async fn sandbox_status(&self) -> Availability {
        match &self.sandbox {
            Some(sandbox) => sandbox.availability().await.clone(),
            None => Availability::Unavailable("no sandbox is configured".into()),
        }
    }

    /// Where an action that the caller chose (`Confinement::Sandbox`) would run unasked:
    /// the sandbox when it works, else nowhere (`Unconfined`, so it asks).
    async fn confinement(&self, prepared: &mut Prepared) -> Option<Arc<Sandbox>> {
        if prepared.confinement == Confinement::Unconfined {
            prepared
                .assessment
                .note_reason("asks to run outside the read-only sandbox");
            return None;
        }
        if prepared.confinement != Confinement::Sandbox
            || prepared.assessment.level != RiskLevel::ReadOnly
        {
            return None;
        }
        match &self.sandbox {
            Some(sandbox) => match sandbox.availability().await {
                Availability::Ready(_) => Some(sandbox.clone()),
                Availability::Unavailable(why) => {
                    prepared.confinement = Confinement::Unconfined;
                    prepared.assessment.note_reason(format!(
                        "the read-only sandbox is unavailable here ({why}), so even reading asks"
                    ));
                    None
                }
            },
            None => {
                prepared.confinement = Confinement::Unconfined;
                prepared
                    .assessment
                    .note_reason("no read-only sandbox is configured, so even reading asks");
                None
            }
        }
    }

    /// The registry calls use now.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Discover the device's tools again and list them (capability discovery on demand).
    pub fn catalog(&self) -> Vec<ToolSpec> {
        let fresh = Arc::new(Registry::discover(&self.registry().device));
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        fresh
            .tools
            .iter()
            .map(|t| {
                let d = t.def();
                ToolSpec {
                    name: d.name.into(),
                    description: d.description.into(),
                    input_schema: d.schema.to_string(),
                }
            })
            .collect()
    }

    /// Cancel the running calls netd knows by `correlation`; true when one was running.
    pub fn cancel(&self, correlation: Correlation) -> bool {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match calls.get(&correlation) {
            Some(running) if !running.is_empty() => {
                for call in running {
                    call.cancel.cancel();
                }
                true
            }
            _ => false,
        }
    }

    /// Where the call netd knows by `correlation` stands (the first, if netd reused the
    /// correlation); `None` when none is running. A decision pending with a person is
    /// asked of approvald, which alone knows its id and expiry.
    pub async fn progress(&self, correlation: Correlation) -> Option<CallStage> {
        let (call_id, stage) = {
            let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            let call = calls.get(&correlation)?.first()?;
            (call.call_id, call.stage.load(Ordering::Relaxed))
        };
        Some(match stage {
            STAGE_QUEUED => CallStage::Queued,
            STAGE_DECIDING => CallStage::Deciding {
                wait: match &self.authority {
                    Some(authority) => authority.waiting(call_id).await,
                    None => None,
                },
            },
            _ => CallStage::Running,
        })
    }

    /// Run one call. Never panics on its input; every refusal is a readable outcome.
    pub async fn invoke(&self, req: InvokeRequest) -> ToolOutcome {
        let tool_name = req.tool.clone();
        match self.invoke_inner(req).await {
            Ok(out) => outcome(&tool_name, out),
            Err(e) => failure(&tool_name, e.to_string()),
        }
    }

    async fn invoke_inner(&self, req: InvokeRequest) -> Result<ToolOutput, ToolError> {
        // Registration: only what the catalog lists can run.
        // The task id is netd's word, shown to the approver and audited; bound it, and only
        // the Agent works tasks.
        match (&req.task, req.origin) {
            (Some(task), origin)
                if origin.is_agent() && !task.0.is_empty() && task.0.len() <= MAX_ID_BYTES => {}
            (
                None,
                nl2sh_proto::channels::CallOrigin::McpHttp
                | nl2sh_proto::channels::CallOrigin::McpStdio,
            ) => {}
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                "an Agent call names its task (1-{MAX_ID_BYTES} bytes); a direct call names none"
            )))
            }
        }
        if req.tool.len() > MAX_TOOL_NAME_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "tool name is over {MAX_TOOL_NAME_BYTES} bytes"
            )));
        }
        let registry = self.registry();
        let device = registry.device.clone();
        let tool = registry.tool(&req.tool).ok_or_else(|| {
            ToolError::Unavailable(format!(
                "no tool named `{}` on this device; nl2sh_tools lists the available ones",
                req.tool
            ))
        })?;
        // Validation: the executor re-checks what netd already bounded.
        if req.arguments.len() > MAX_ARGUMENT_JSON_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "arguments are over {MAX_ARGUMENT_JSON_BYTES} bytes of JSON"
            )));
        }
        let args: Value = serde_json::from_str(&req.arguments)
            .map_err(|e| ToolError::InvalidArguments(format!("arguments are not JSON: {e}")))?;
        schema::validate(&tool.def().schema, &args).map_err(ToolError::InvalidArguments)?;
        let Value::Object(args) = args else {
            return Err(ToolError::InvalidArguments(
                "arguments must be an object".into(),
            ));
        };
        // Preparation and risk assessment, then where it would run unasked. A preparation
        // that may wait on the file system (a `stat` on a FUSE mount whose daemon hangs)
        // runs on a reader, never on this thread, which every call shares.
        let mut prepared = if tool.prepare_waits_on_files() {
            let (registry, name) = (registry.clone(), req.tool.clone());
            readers::run(move || {
                registry
                    .tool(&name)
                    .map(|tool| tool.prepare(&args, &registry.device))
            })
            .await
            .map_err(|e| ToolError::Failed(format!("preparing the call was aborted: {e}")))?
            .ok_or_else(|| ToolError::Unavailable(format!("no tool named `{}`", req.tool)))??
        } else {
            tool.prepare(&args, &device)?
        };
        // What the owner approves is never cut: an action longer than the approval channel
        // carries is refused here, before anything is sent (approvald would take it for a
        // hostile peer).
        if prepared.action.len() > MAX_ACTION_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "the action, as the owner would be shown it, is {} bytes; the limit is \
                 {MAX_ACTION_BYTES}: shorten it",
                prepared.action.len()
            )));
        }
        let sandbox = self.confinement(&mut prepared).await;
        let cancel = CancellationToken::new();
        let registered = self.register(req.correlation, cancel.clone());
        let call_id = registered.call_id;
        let stage = registered.stage.clone();
        // Resource locks, held until the action has finished.
        let _held = tokio::select! {
            held = self.locks.acquire(prepared.resources.clone(), RESOURCE_LOCK_WAIT) => {
                held.map_err(ToolError::Unavailable)?
            }
            () = cancel.cancelled() => return Err(ToolError::Failed("cancelled".into())),
        };
        // Approval, recorded by approvald before it answers.
        let summary = ActionSummary {
            data: prepared.data.clone(),
            call_id,
            origin: req.origin,
            task: req.task.clone(),
            tool: req.tool.clone(),
            action: prepared.action.clone(),
            arguments_sha256: hex::encode(Sha256::digest(req.arguments.as_bytes())),
            risk: prepared.assessment.level,
            requires_root: prepared.assessment.requires_root,
            identity: prepared.identity,
            confinement: prepared.confinement,
            reasons: prepared
                .assessment
                .reasons
                .iter()
                .take(MAX_REASONS)
                .map(|r| fit(r, MAX_REASON_BYTES))
                .collect(),
            commands: prepared.commands.clone(),
        };
        // A confined read-only call that approvald's policy snapshot lets run needs no
        // round trip; it is reported with its outcome. Everything else asks.
        let fast = match &self.authority {
            Some(authority)
                if prepared.assessment.level == RiskLevel::ReadOnly
                    && prepared.confinement != Confinement::Unconfined =>
            {
                authority
                    .lets_read(req.origin)
                    .map(|version| (authority.clone(), version))
            }
            _ => None,
        };
        let (decision, reason, snapshot, asked) = match fast {
            Some((authority, version)) => (
                Decision::Allowed,
                String::new(),
                // Only grants read the commands, and no grant decides this call.
                Some((
                    authority,
                    version,
                    ActionSummary {
                        commands: None,
                        ..summary
                    },
                )),
                None,
            ),
            None => {
                // Kept for the outcome row: approvald may have to write it after a restart
                // that made it forget this call.
                let asked = summary.clone();
                stage.store(STAGE_DECIDING, Ordering::Relaxed);
                let (decision, reason) = tokio::select! {
                    d = self.decide(summary) => d,
                    () = cancel.cancelled() => {
                        // A pending approval of a cancelled call must never be approvable.
                        self.withdraw(call_id).await;
                        return Err(ToolError::Failed(
                            "cancelled while waiting for approval".into(),
                        ));
                    }
                };
                (decision, reason, None, Some(asked))
            }
        };
        // Unasked and read-only: whatever the caller chose runs in the sandbox, whatever
        // approvald said about confinement. Anything else ran past a person or the
        // owner's own configuration and gets the bound identity.
        let unasked = decision == Decision::Allowed
            && prepared.assessment.level == RiskLevel::ReadOnly
            && prepared.confinement != Confinement::Fixed;
        if unasked && sandbox.is_none() {
            return Err(ToolError::Failed(format!(
                "not run: it was not approved and cannot run in the read-only sandbox (action: {})",
                prepared.action
            )));
        }
        let sandbox = if unasked { sandbox } else { None };
        if !decision.runs() {
            return Err(ToolError::Failed(format!(
                "not run: {reason} (risk {}{}; action: {})",
                prepared.assessment.level.as_str(),
                if prepared.assessment.requires_root {
                    ", requires root"
                } else {
                    ""
                },
                prepared.action
            )));
        }
        // Privilege binding: the identity the tool chose must be one we can act as.
        let setup = ChildSetup::for_identity(prepared.identity, device.euid).ok_or_else(|| {
            ToolError::Unavailable(format!(
                "this action must run as {}, which nl2sh (uid {}) cannot act as",
                prepared.identity.as_str(),
                device.euid
            ))
        });
        let started = Instant::now();
        stage.store(STAGE_RUNNING, Ordering::Relaxed);
        let result = match setup {
            Err(e) => Err(e),
            Ok(setup) => {
                let ctx = ExecContext {
                    identity: prepared.identity,
                    setup,
                    sandbox,
                    deadline: started + prepared.timeout,
                    cancel: cancel.clone(),
                    groups: self.groups.clone(),
                    env: device.clone(),
                };
                (prepared.run)(ctx).await
            }
        };
        // Audit the outcome; the answer leaves only once its row is safe from a crash of
        // any worker (kept in the outbox, or committed), so nothing answered is missing
        // from the audit.
        let record = call_result(call_id, &result, started);
        let row = match snapshot {
            Some((authority, version, summary)) => Some((
                authority,
                ReportedRow::Ran(RanRecord {
                    summary,
                    result: record,
                    policy: version,
                }),
            )),
            None => self
                .authority
                .clone()
                .zip(asked)
                .map(|(authority, summary)| {
                    (
                        authority,
                        ReportedRow::Finished {
                            summary,
                            decision,
                            result: record,
                        },
                    )
                }),
        };
        let audited = match row {
            Some((authority, row)) => authority.report(row).await,
            None => Ok(()),
        };
        if let Err(why) = audited {
            tracing::error!(%call_id, error = %why, "a finished call's audit row was not recorded");
            return Err(ToolError::Failed(format!(
                "the call ran, but its audit row could not be recorded ({why}), so its result \
                 is withheld"
            )));
        }
        result
    }

    /// A new call id for a call netd knows by `correlation`, cancellable by it until the
    /// guard is dropped.
    fn register(&self, correlation: Correlation, token: CancellationToken) -> CallGuard<'_> {
        let call_id = CallId(self.next_call.fetch_add(1, Ordering::Relaxed));
        let stage = Arc::new(AtomicU8::new(STAGE_QUEUED));
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.entry(correlation).or_default().push(RunningCall {
            call_id,
            cancel: token,
            stage: stage.clone(),
        });
        CallGuard {
            pipeline: self,
            correlation,
            call_id,
            stage,
        }
    }

    async fn decide(&self, summary: ActionSummary) -> (Decision, String) {
        match &self.authority {
            Some(authority) => authority.decide(summary).await,
            None => (
                Decision::Refused,
                "no approval authority is connected".into(),
            ),
        }
    }

    async fn withdraw(&self, call_id: CallId) {
        if let Some(authority) = &self.authority {
            authority.withdraw(call_id).await;
        }
    }
}

/// The audit's account of how a call ended.
fn call_result(
    call_id: CallId,
    result: &Result<ToolOutput, ToolError>,
    started: Instant,
) -> CallResult {
    CallResult {
        call_id,
        success: result.as_ref().is_ok_and(|o| o.success),
        exit_code: result.as_ref().ok().and_then(|o| o.exit_code),
        duration_ms: started.elapsed().as_millis() as u64,
        summary: match result {
            Ok(o) if o.success => "ok".into(),
            Ok(o) => match o.exit_code {
                Some(code) => format!("failed with exit status {code}"),
                None => "failed".into(),
            },
            Err(e) => fit(&e.to_string(), MAX_SUMMARY_BYTES),
        },
    }
}

/// A registered call: its id, how to cancel it, and its stage for progress.
struct RunningCall {
    call_id: CallId,
    cancel: CancellationToken,
    stage: Arc<AtomicU8>,
}

/// [`RunningCall::stage`]: waiting for resource locks, for approvald, or running.
const STAGE_QUEUED: u8 = 0;
const STAGE_DECIDING: u8 = 1;
const STAGE_RUNNING: u8 = 2;

/// A running call's registration; dropping it forgets the call.
#[must_use]
struct CallGuard<'a> {
    pipeline: &'a Pipeline,
    correlation: Correlation,
    call_id: CallId,
    stage: Arc<AtomicU8>,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let mut calls = self
            .pipeline
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(running) = calls.get_mut(&self.correlation) {
            running.retain(|call| call.call_id != self.call_id);
            if running.is_empty() {
                calls.remove(&self.correlation);
            }
        }
    }
}

/// Where call ids start: the clock in microseconds, so ids of one executor never repeat
/// and ids of a restarted one do not reuse the audit rows' ids of the last.
fn first_call_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(1)
}

fn bounded(s: &str, max: usize) -> String {
    nl2sh_proto::text::shortened(s, max)
}

fn outcome(tool: &str, out: ToolOutput) -> ToolOutcome {
    let mut output = out.output;
    if output.len() > MAX_TOOL_OUTPUT_BYTES {
        let extra = output.len() - MAX_TOOL_OUTPUT_BYTES;
        output = bounded(&output, MAX_TOOL_OUTPUT_BYTES);
        output.push_str(&format!("\n[nl2sh: output truncated, {extra} more bytes]"));
    }
    ToolOutcome {
        tool: tool.into(),
        success: out.success,
        output,
        attachments: out.attachments,
    }
}

fn failure(tool: &str, message: String) -> ToolOutcome {
    ToolOutcome {
        tool: bounded(tool, MAX_TOOL_NAME_BYTES),
        success: false,
        output: serde_json::json!({ "error": message }).to_string(),
        attachments: Vec::new(),
    }
}
