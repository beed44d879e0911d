//! One call through the whole pipeline. Every stage either passes the call on or ends it
//! with a result the caller can read; nothing runs unless approval said so. The stages
//! themselves, each with its own result, are in [`stages`].

mod stages;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio_util::sync::CancellationToken;

use super::authority::{Authority, Decided};
use super::locks::Locks;
use crate::device::DeviceEnv;
use crate::exec::ProcessGroups;
use crate::sandbox::{Availability, Sandbox};
use crate::tools::{Tool, ToolError, ToolOutput};
use nl2sh_proto::channels::{
    ActionSummary, CallId, CallStage, Correlation, InvokeRequest, ToolOutcome, ToolSpec,
};
use nl2sh_proto::limits::{MAX_TOOL_NAME_BYTES, MAX_TOOL_OUTPUT_BYTES};

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

    /// The call's stages, in order; `?` is a stage that ended it.
    async fn invoke_inner(&self, req: InvokeRequest) -> Result<ToolOutput, ToolError> {
        let registry = self.registry();
        let registered = stages::registered(&req, &registry)?;
        let validated = stages::validated(&req, registered)?;
        let prepared = stages::prepared(&req, validated).await?;
        let assessed = self.assessed(prepared).await;
        let call = self.register(req.correlation);
        let _held = self.locked(assessed.resources(), &call).await?;
        let summary = stages::summary(&req, call.call_id, &assessed);
        let ruling = self.decided(summary, &call).await?;
        let bound = stages::bound(assessed, &ruling.decided, registry.device.euid)?;
        let ran = self.ran(bound, &call, &registry.device).await;
        self.recorded(call.call_id, ruling, ran).await
    }

    /// A new call id for a call netd knows by `correlation`, cancellable by it until the
    /// guard is dropped.
    fn register(&self, correlation: Correlation) -> CallGuard<'_> {
        let cancel = CancellationToken::new();
        let call_id = CallId(self.next_call.fetch_add(1, Ordering::Relaxed));
        let stage = Arc::new(AtomicU8::new(STAGE_QUEUED));
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.entry(correlation).or_default().push(RunningCall {
            call_id,
            cancel: cancel.clone(),
            stage: stage.clone(),
        });
        CallGuard {
            pipeline: self,
            correlation,
            call_id,
            cancel,
            stage,
        }
    }

    async fn decide(&self, summary: ActionSummary) -> Decided {
        match &self.authority {
            Some(authority) => authority.decide(summary).await,
            None => Decided::refused("no approval authority is connected"),
        }
    }

    async fn withdraw(&self, call_id: CallId) {
        if let Some(authority) = &self.authority {
            authority.withdraw(call_id).await;
        }
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
    /// Fired by [`Pipeline::cancel`]; every stage that waits also waits for it.
    cancel: CancellationToken,
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
        read_from: out.read_from,
    }
}

fn failure(tool: &str, message: String) -> ToolOutcome {
    ToolOutcome {
        tool: bounded(tool, MAX_TOOL_NAME_BYTES),
        success: false,
        output: serde_json::json!({ "error": message }).to_string(),
        attachments: Vec::new(),
        read_from: Default::default(),
    }
}
