//! `shell.exec`: one command line through the system shell, captured, bounded, timed.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use nl2sh_proto::channels::{Confinement, Identity};
use nl2sh_proto::config::SHELL_TOOL;
use nl2sh_proto::limits::{DEFAULT_TOOL_TIMEOUT, MAX_ARGUMENT_JSON_BYTES, MAX_TOOL_TIMEOUT};

use super::TableTool;
use crate::device::DeviceEnv;
use crate::exec::{CommandOutput, CommandSpec};
use crate::risk;
use crate::tools::{normalize_path, Args, Prepared, ToolDef, ToolError, ToolOutput};

pub fn exec() -> TableTool {
    TableTool {
        def: ToolDef {
            name: SHELL_TOOL,
            description: "Run a command line with the device's shell (sh -c), without a \
                terminal. Returns exit_code, stdout, stderr (bounded, truncation marked), \
                duration_ms, timed_out and sandboxed. Read-only commands run at once in a \
                read-only sandbox (an unprivileged identity that can read the device but \
                not change it, secrets hidden, no network, TMPDIR a private scratch \
                directory); anything else, or `unconfined: true`, waits for local approval \
                and then runs with real privileges.",
            schema: json!({
                "type": "object",
                "properties": {
                    // A command line can be no longer than the arguments that carry it.
                    "command": {"type": "string", "minLength": 1, "maxLength": MAX_ARGUMENT_JSON_BYTES,
                                "description": "Command line, as for sh -c"},
                    "cwd": {"type": "string", "description": "Absolute working directory"},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_TIMEOUT.as_secs(),
                                "description": format!(
                                    "Seconds before the command's process group is killed (default {})",
                                    DEFAULT_TOOL_TIMEOUT.as_secs()
                                )},
                    "unconfined": {"type": "boolean",
                                   "description": "Run outside the read-only sandbox (always waits for local approval)"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        },
        prepare: prepare_exec,
    }
}

fn prepare_exec(args: &Map<String, Value>, env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let command = a.str("command")?.to_string();
    let cwd = a
        .opt_str("cwd")?
        .map(|c| normalize_path(c, None))
        .transpose()?;
    let timeout = a.timeout("timeout")?;
    let unconfined = a.opt_bool("unconfined")?.unwrap_or(false);
    let (mut assessment, commands) =
        risk::assess_shell_commands(&command, cwd.as_deref(), &env.protected);
    if let Some(c) = &cwd {
        assessment.merge(risk::assess_path_read_protected(c, &env.protected));
    }
    // What the command needs decides who runs it; the caller cannot ask for root.
    let identity = if assessment.requires_root {
        Identity::Root
    } else {
        Identity::Launching
    };
    let shell = env.shell.display().to_string();
    let action = match &cwd {
        Some(c) => format!("{shell} -c {} (in {})", quote(&command), c.display()),
        None => format!("{shell} -c {}", quote(&command)),
    };
    // The command as sent is what the owner reads first; with a directory the argv is,
    // since where a line runs is part of what it does (`rm -rf ./*`).
    let sent = cwd.is_none().then(|| command.clone());
    let argv = vec![shell, "-c".into(), command];
    Ok(Prepared {
        sent,
        data: None,
        ui_app: None,
        action,
        assessment,
        identity,
        confinement: if unconfined {
            Confinement::Unconfined
        } else {
            Confinement::Sandbox
        },
        resources: Vec::new(),
        timeout,
        commands,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let mut spec = CommandSpec::new(argv);
                spec.cwd = cwd;
                let out = ctx.run(spec).await?;
                let mut result = command_result(&out);
                if let Some(sandbox) = &ctx.sandbox {
                    // Also when the line as a whole succeeded: a pipeline's status is its
                    // last command's, and an earlier one may be what a limit ended.
                    let limit = crate::sandbox::limit_hit(&out, sandbox.limits());
                    mark_sandboxed(&mut result, limit);
                }
                Ok(result)
            })
        }),
    })
}

/// A command's result as a tool output object.
pub fn command_result(out: &CommandOutput) -> ToolOutput {
    let value = json!({
        "sandboxed": false,
        "exit_code": out.exit_code,
        "signal": out.signal,
        "stdout": out.stdout.text(),
        "stderr": out.stderr.text(),
        "stdout_truncated": out.stdout.dropped > 0,
        "stderr_truncated": out.stderr.dropped > 0,
        "duration_ms": out.duration.as_millis() as u64,
        "timed_out": out.timed_out,
        "cancelled": out.cancelled,
    });
    ToolOutput {
        exit_code: out.exit_code,
        ..ToolOutput::json(out.success(), &value)
    }
}

/// Say in the result that the command ran in the read-only sandbox, and when it failed,
/// how to run it for real.
fn mark_sandboxed(result: &mut ToolOutput, limit: Option<String>) {
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(&result.output) else {
        return;
    };
    obj.insert("sandboxed".into(), Value::Bool(true));
    if !result.success {
        obj.insert("note".into(), Value::String(SANDBOX_NOTE.into()));
    }
    if let Some(limit) = limit {
        obj.insert("limit".into(), Value::String(limit));
    }
    result.output = Value::Object(obj).to_string();
}

/// What a failed sandboxed command's result says.
pub const SANDBOX_NOTE: &str = "This command ran in the read-only sandbox (an unprivileged \
    identity: every mount read-only, TMPDIR the only writable place, secrets hidden, no \
    network). If it failed because it needs to change something, call shell.exec again with \
    \"unconfined\": true; that waits for the owner's approval at the device.";

/// Single-quote for display, the way a shell would read it back.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
