//! The stages of one call, in the order [`Pipeline::invoke`] runs them: registered →
//! validated → prepared → assessed → (queued for its resource locks) → decided → bound →
//! ran → recorded. Each takes what the stage before it produced and gives its own
//! result, or ends the call with an error the caller can read.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{CallGuard, Pipeline, Registry, STAGE_DECIDING, STAGE_RUNNING};
use crate::device::DeviceEnv;
use crate::runtime::authority::{Authority, Decided};
use crate::runtime::locks::Held;
use crate::sandbox::{Availability, Sandbox};
use crate::sys::ChildSetup;
use crate::tools::{
    readers, schema, ExecContext, Prepared, Resource, RunFn, Tool, ToolError, ToolOutput,
};
use nl2sh_proto::channels::{
    ActionSummary, CallId, CallOrigin, CallResult, ConfigVersion, Confinement, Decision, Identity,
    InvokeRequest, RanRecord, ReportedRow, RiskLevel,
};
use nl2sh_proto::limits::{
    MAX_ACTION_BYTES, MAX_ARGUMENT_JSON_BYTES, MAX_ID_BYTES, MAX_REASONS, MAX_REASON_BYTES,
    MAX_SUMMARY_BYTES, MAX_TOOL_NAME_BYTES, RESOURCE_LOCK_WAIT,
};
use nl2sh_proto::text::fit;

/// Registered: the tool the catalog lists under the name the call gives.
pub(super) struct Registered<'r> {
    registry: &'r Arc<Registry>,
    tool: &'r dyn Tool,
}

/// Validated: the call's arguments, an object that satisfies the tool's schema.
pub(super) struct Validated<'r> {
    registered: Registered<'r>,
    args: Map<String, Value>,
}

/// Assessed: the prepared action, its assessment completed with where it would run if
/// nobody were asked.
pub(super) struct Assessed {
    prepared: Prepared,
    /// The read-only sandbox, when the action would run there unasked.
    sandbox: Option<Arc<Sandbox>>,
}

impl Assessed {
    /// The resources the action locks.
    pub(super) fn resources(&self) -> Vec<Resource> {
        self.prepared.resources.clone()
    }
}

/// The decided stage's result: the decision, and the audit row its outcome will make.
#[must_use]
pub(super) struct Ruling {
    pub(super) decided: Decided,
    audit: Audit,
}

/// How a call's outcome is audited, which follows from who decided it.
enum Audit {
    /// approvald's policy snapshot (at `policy`) let it run without a round trip: one
    /// row records the decision and the outcome together.
    Snapshot {
        authority: Arc<Authority>,
        policy: ConfigVersion,
        summary: ActionSummary,
    },
    /// approvald decided, and recorded the decision before it answered: the outcome
    /// row carries what was asked, as approvald may have to write it after a restart
    /// that made it forget this call. None is written without an authority.
    Asked(ActionSummary),
}

/// Bound: what runs, and as whom.
pub(super) struct Bound {
    identity: Identity,
    /// How a command takes on `identity`; an error when nl2sh cannot act as it (the
    /// call then fails, and is audited as having failed).
    setup: Result<ChildSetup, ToolError>,
    /// Set when the action runs unasked, read-only, in the read-only sandbox.
    sandbox: Option<Arc<Sandbox>>,
    timeout: Duration,
    run: RunFn,
}

/// Ran: how the action ended, and when it began.
pub(super) struct Ran {
    result: Result<ToolOutput, ToolError>,
    started: Instant,
}

/// Registration: only what the catalog lists can run. The task id is netd's word, shown
/// to the approver and audited: bounded, and only the Agent works tasks.
pub(super) fn registered<'r>(
    req: &InvokeRequest,
    registry: &'r Arc<Registry>,
) -> Result<Registered<'r>, ToolError> {
    match (&req.task, req.origin) {
        (Some(task), origin)
            if origin.is_agent() && !task.0.is_empty() && task.0.len() <= MAX_ID_BYTES => {}
        (None, CallOrigin::McpHttp | CallOrigin::McpStdio) => {}
        _ => {
            return Err(ToolError::InvalidArguments(format!(
                "an Agent call names its task (1-{MAX_ID_BYTES} bytes); a direct call names none"
            )))
        }
    }
    if let Err(e) = req.after_reading.check() {
        return Err(ToolError::InvalidArguments(e));
    }
    if !req.after_reading.is_empty() && !req.origin.is_agent() {
        return Err(ToolError::InvalidArguments(
            "only the Agent's calls say what it had read".into(),
        ));
    }
    if let Some(Err(e)) = req.client.as_ref().map(|c| c.check()) {
        return Err(ToolError::InvalidArguments(e));
    }
    if req.tool.len() > MAX_TOOL_NAME_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "tool name is over {MAX_TOOL_NAME_BYTES} bytes"
        )));
    }
    let tool = registry.tool(&req.tool).ok_or_else(|| {
        ToolError::Unavailable(format!(
            "no tool named `{}` on this device; nl2sh_tools lists the available ones",
            req.tool
        ))
    })?;
    Ok(Registered { registry, tool })
}

/// Validation: the executor re-checks what netd already bounded, then the tool's schema.
pub(super) fn validated<'r>(
    req: &InvokeRequest,
    registered: Registered<'r>,
) -> Result<Validated<'r>, ToolError> {
    if req.arguments.len() > MAX_ARGUMENT_JSON_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "arguments are over {MAX_ARGUMENT_JSON_BYTES} bytes of JSON"
        )));
    }
    let args: Value = serde_json::from_str(&req.arguments)
        .map_err(|e| ToolError::InvalidArguments(format!("arguments are not JSON: {e}")))?;
    schema::validate(&registered.tool.def().schema, &args).map_err(ToolError::InvalidArguments)?;
    let Value::Object(args) = args else {
        return Err(ToolError::InvalidArguments(
            "arguments must be an object".into(),
        ));
    };
    Ok(Validated { registered, args })
}

/// Preparation, with the tool's risk assessment: the exact action. A preparation that
/// may wait on the file system (a `stat` on a FUSE mount whose daemon hangs) runs on a
/// reader, never on this thread, which every call shares. What the owner approves is
/// never cut: an action longer than the approval channel carries is refused here, before
/// anything is sent (approvald would take it for a hostile peer).
pub(super) async fn prepared(
    req: &InvokeRequest,
    validated: Validated<'_>,
) -> Result<Prepared, ToolError> {
    let Validated {
        registered: Registered { registry, tool },
        args,
    } = validated;
    let prepared = if tool.prepare_waits_on_files() {
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
        tool.prepare(&args, &registry.device)?
    };
    if prepared.action.len() > MAX_ACTION_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "the action, as the owner would be shown it, is {} bytes; the limit is \
             {MAX_ACTION_BYTES}: shorten it",
            prepared.action.len()
        )));
    }
    Ok(prepared)
}

impl Pipeline {
    /// Assessment of where the action would run unasked: an action the caller chose
    /// (`Confinement::Sandbox`), read-only, in the sandbox when it works, else nowhere
    /// (`Unconfined`, so it asks); the reasons say which.
    pub(super) async fn assessed(&self, mut prepared: Prepared) -> Assessed {
        let sandbox = self.confinement(&mut prepared).await;
        Assessed { prepared, sandbox }
    }

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

    /// The resource locks the action needs, held until it has finished (the caller keeps
    /// them), or the call's end while it waits for them.
    pub(super) async fn locked(
        &self,
        resources: Vec<Resource>,
        call: &CallGuard<'_>,
    ) -> Result<Held, ToolError> {
        tokio::select! {
            held = self.locks.acquire(resources, RESOURCE_LOCK_WAIT) => {
                held.map_err(ToolError::Unavailable)
            }
            () = call.cancel.cancelled() => Err(ToolError::Failed("cancelled".into())),
        }
    }

    /// The decision on what approvald is shown (`summary`). A confined read-only call that
    /// approvald's policy snapshot lets run needs no round trip; it is reported with its
    /// outcome. Everything else asks approvald, which records the decision before it
    /// answers.
    pub(super) async fn decided(
        &self,
        summary: ActionSummary,
        call: &CallGuard<'_>,
    ) -> Result<Ruling, ToolError> {
        let snapshot = match &self.authority {
            Some(authority)
                if summary.risk == RiskLevel::ReadOnly
                    && summary.confinement != Confinement::Unconfined =>
            {
                authority
                    .lets_read(summary.origin)
                    .map(|policy| (authority, policy))
            }
            _ => None,
        };
        if let Some((authority, policy)) = snapshot {
            return Ok(Ruling {
                decided: Decided::allowed(),
                audit: Audit::Snapshot {
                    authority: authority.clone(),
                    policy,
                    // Only grants read the commands, and no grant decides this call.
                    summary: ActionSummary {
                        commands: None,
                        ..summary
                    },
                },
            });
        }
        let asked = summary.clone();
        call.stage.store(STAGE_DECIDING, Ordering::Relaxed);
        let decided = tokio::select! {
            decided = self.decide(summary) => decided,
            () = call.cancel.cancelled() => {
                // A pending approval of a cancelled call must never be approvable.
                self.withdraw(call.call_id).await;
                return Err(ToolError::Failed("cancelled while waiting for approval".into()));
            }
        };
        Ok(Ruling {
            decided,
            audit: Audit::Asked(asked),
        })
    }

    /// The run, under the call's deadline and cancellation.
    pub(super) async fn ran(
        &self,
        bound: Bound,
        call: &CallGuard<'_>,
        device: &Arc<DeviceEnv>,
    ) -> Ran {
        let started = Instant::now();
        call.stage.store(STAGE_RUNNING, Ordering::Relaxed);
        let result = match bound.setup {
            Err(e) => Err(e),
            Ok(setup) => {
                let ctx = ExecContext {
                    identity: bound.identity,
                    setup,
                    sandbox: bound.sandbox,
                    deadline: started + bound.timeout,
                    cancel: call.cancel.clone(),
                    groups: self.groups.clone(),
                    env: device.clone(),
                };
                (bound.run)(ctx).await
            }
        };
        Ran { result, started }
    }

    /// The audit of the outcome. The answer leaves only once its row is safe from a crash
    /// of any worker (kept in the outbox, or committed), so nothing answered is missing
    /// from the audit; a call whose row cannot be recorded answers with an error instead.
    pub(super) async fn recorded(
        &self,
        call_id: CallId,
        ruling: Ruling,
        ran: Ran,
    ) -> Result<ToolOutput, ToolError> {
        let Ran { result, started } = ran;
        let record = call_result(call_id, &result, started);
        let row = match ruling.audit {
            Audit::Snapshot {
                authority,
                policy,
                summary,
            } => Some((
                authority,
                ReportedRow::Ran(RanRecord {
                    summary,
                    result: record,
                    policy,
                }),
            )),
            Audit::Asked(summary) => self.authority.clone().map(|authority| {
                (
                    authority,
                    ReportedRow::Finished {
                        summary,
                        decision: ruling.decided.decision,
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
}

/// Privilege binding: the action runs only on a decision that lets it, and as an identity
/// nl2sh can act as. Unasked and read-only, whatever the caller chose runs in the sandbox,
/// whatever approvald said about confinement; anything else ran past a person or the
/// owner's own configuration and gets the bound identity.
pub(super) fn bound(assessed: Assessed, decided: &Decided, euid: u32) -> Result<Bound, ToolError> {
    let Assessed { prepared, sandbox } = assessed;
    let unasked = decided.decision == Decision::Allowed
        && prepared.assessment.level == RiskLevel::ReadOnly
        && prepared.confinement != Confinement::Fixed;
    if unasked && sandbox.is_none() {
        return Err(ToolError::Failed(format!(
            "not run: it was not approved and cannot run in the read-only sandbox (action: {})",
            prepared.action
        )));
    }
    let sandbox = if unasked { sandbox } else { None };
    if !decided.runs() {
        return Err(ToolError::Failed(format!(
            "not run: {} (risk {}{}; action: {})",
            decided.reason,
            prepared.assessment.level.as_str(),
            if prepared.assessment.requires_root {
                ", requires root"
            } else {
                ""
            },
            prepared.action
        )));
    }
    let setup = ChildSetup::for_identity(prepared.identity, euid).ok_or_else(|| {
        ToolError::Unavailable(format!(
            "this action must run as {}, which nl2sh (uid {euid}) cannot act as",
            prepared.identity.as_str(),
        ))
    });
    Ok(Bound {
        identity: prepared.identity,
        setup,
        sandbox,
        timeout: prepared.timeout,
        run: prepared.run,
    })
}

/// What approvald is shown of a call, to decide on and to record.
pub(super) fn summary(req: &InvokeRequest, call_id: CallId, assessed: &Assessed) -> ActionSummary {
    let prepared = &assessed.prepared;
    ActionSummary {
        data: prepared.data.clone(),
        ui_app: prepared.ui_app.clone(),
        call_id,
        origin: req.origin,
        task: req.task.clone(),
        after_reading: req.after_reading.clone(),
        client: req.client.clone(),
        tool: req.tool.clone(),
        action: prepared.action.clone(),
        sent: prepared.sent.clone(),
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
