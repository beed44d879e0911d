//! Whether the sandbox works here: one probe, a sandboxed run that reports the parts
//! it could set up, answered from memory after the first call.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::SandboxPayload;

use super::procs::lasting_range_problem;
use super::{Run, Sandbox};
use crate::exec::{CommandOutput, ProcessGroups};

/// How long the start-up probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Whether sandboxed actions can run here, and which parts are active.
#[derive(Debug, Clone)]
pub enum Availability {
    /// The parts, as reported by the probe (an object for `nl2sh_inspect`).
    Ready(Value),
    /// Why not; unasked actions that would need the sandbox ask a person instead.
    Unavailable(String),
}

impl Availability {
    pub fn is_ready(&self) -> bool {
        matches!(self, Availability::Ready(_))
    }

    /// The object `nl2sh_inspect` shows.
    pub fn to_json(&self) -> Value {
        match self {
            Availability::Ready(parts) => {
                let mut v = parts.clone();
                v["active"] = Value::Bool(true);
                v
            }
            Availability::Unavailable(why) => serde_json::json!({
                "active": false,
                "reason": why,
                "effect": "read-only commands and file reads wait for local approval",
            }),
        }
    }
}

impl Sandbox {
    /// Probe once (the first caller waits for it), then answer from memory. Once it is
    /// ready, sandboxes are built ahead of calls.
    pub async fn availability(&self) -> &Availability {
        let found = self.availability.get_or_init(|| self.probe()).await;
        if found.is_ready() {
            let first = {
                let mut pool = self.shared.pool();
                !std::mem::replace(&mut pool.enabled, true)
            };
            if first {
                self.shared.fill();
            }
        }
        found
    }

    async fn probe(&self) -> Availability {
        let euid = nix::unistd::geteuid().as_raw();
        let found = if euid != 0 {
            Availability::Unavailable(format!(
                "nl2sh runs as uid {euid}, not root, so it cannot switch to the sandbox identity"
            ))
        } else if let Some(why) = lasting_range_problem(self.shared.settings.uids).await {
            Availability::Unavailable(why)
        } else {
            let cancel = CancellationToken::new();
            let groups = ProcessGroups::default();
            let run = Run {
                cwd: None,
                stdin: None,
                max_stdout: 16 * 1024,
                max_stderr: 4 * 1024,
                deadline: Instant::now() + PROBE_TIMEOUT,
                cancel: &cancel,
                groups: &groups,
                path_var: None,
            };
            match self.run(SandboxPayload::Probe, run).await {
                Ok(out) if out.success() => {
                    match serde_json::from_slice::<Value>(&out.stdout.bytes) {
                        Ok(mut parts) if parts.is_object() => {
                            parts["cgroup"] = serde_json::json!(match &self.shared.cgroups {
                                Some(c) => c.describe(),
                                None =>
                                    "none here: the limits are per process (rlimits)".to_string(),
                            });
                            let r = self.shared.settings.uids;
                            parts["ceiling"] = self.shared.ceiling.to_json(r.count);
                            parts["identity"] = serde_json::json!(format!(
                                "a uid of its own per running call, from {} to {} ({} at \
                                 once; gid = uid), no supplementary groups",
                                r.first,
                                u64::from(r.first) + u64::from(r.count) - 1,
                                r.count
                            ));
                            Availability::Ready(parts)
                        }
                        _ => Availability::Unavailable(format!(
                            "the probe answered {:?}",
                            out.stdout.text()
                        )),
                    }
                }
                Ok(out) => Availability::Unavailable(format!(
                    "the probe failed ({}): {}",
                    describe_status(&out),
                    out.stderr.text().trim()
                )),
                Err(e) => Availability::Unavailable(e.to_string()),
            }
        };
        match &found {
            Availability::Ready(parts) => {
                tracing::info!(parts = %parts, "read-only sandbox active")
            }
            Availability::Unavailable(why) => tracing::warn!(
                reason = %why,
                "read-only sandbox unavailable: read-only commands will wait for local approval"
            ),
        }
        found
    }
}

fn describe_status(out: &CommandOutput) -> String {
    match (out.exit_code, out.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ if out.timed_out => "timed out".into(),
        _ => "no status".into(),
    }
}
