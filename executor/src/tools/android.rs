//! Android tools (screen, input, apps, diagnostics); registered only where their programs exist.
//!
//! Each tool execs one Android program directly (never through a shell), found on PATH
//! by capability discovery, as `DeviceEnv::ui_identity()` (shell when nl2sh is root) and
//! through `ExecContext::run`, so identity, process group, timeout and cancellation all
//! apply. Screen reads and UI input hold `Resource::Screen`: Android allows one
//! UiAutomation client at a time, and input interleaved with a dump would describe a
//! screen that no longer exists. Results are JSON objects kept under the output bound.

mod apps;
#[doc(hidden)]
pub mod bench;
mod clipboard;
mod corpus;
mod diagnostics;
mod dumpsys;
mod gestures;
pub mod image;
mod ime;
mod input;
mod notifications;
pub mod rawframe;
mod screen;
mod state;
mod target;
mod text;
mod touch;
mod uixml;
mod utf7;
mod verbs;
mod wait;

pub use touch::helper::{main as touch_helper_main, HELPER_ARG as TOUCH_HELPER_ARG};

#[cfg(test)]
mod target_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_screenshot;
#[cfg(test)]
mod tests_text;
#[cfg(test)]
mod tests_verbs;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use nl2sh_proto::channels::{Confinement, RiskLevel};

use super::{within_budget, OUTPUT_BUDGET};
use crate::device::DeviceEnv;
use crate::exec::{CommandOutput, CommandSpec};
use crate::risk::Assessment;
use crate::tools::Resource;
use crate::tools::{Args, ExecContext, Prepared, Tool, ToolDef, ToolError, ToolOutput};

/// The tool `nl2sh_read_screen` runs.
pub const SCREEN_READ_TOOL: &str = "android.screenshot";

/// How long one Android command may run.
const ANDROID_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of a failing command's message kept in the error.
const MAX_ERROR_BYTES: usize = 1024;

/// Turns validated arguments into an action, given the program's path.
type PrepareFn = fn(&Args<'_>, &DeviceEnv, &str) -> Result<Prepared, ToolError>;

/// One Android tool: what callers see, the program it drives, how it prepares.
struct AndroidTool {
    def: ToolDef,
    program: &'static str,
    prepare: PrepareFn,
}

impl Tool for AndroidTool {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn prepare(
        &self,
        args: &Map<String, Value>,
        env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        let program = env.program(self.program).ok_or_else(|| {
            ToolError::Unavailable(format!("`{}` is not on this device's PATH", self.program))
        })?;
        let program = program.display().to_string();
        let mut prepared = (self.prepare)(&Args(args), env, &program)?;
        // A UI action is judged by where it lands (docs/APPROVALS.md, "Timed UI grants"):
        // one that read no window while preparing reads which app is in front now.
        if nl2sh_proto::ui_grants::is_ui_action(self.def.name) && prepared.ui_app.is_none() {
            let (app, locked) = target::front_while_preparing(env).unwrap_or((None, false));
            target::judge_ui_target(&mut prepared, app, None, locked);
            if let Some(app) = prepared.ui_app.clone() {
                prepared.run = target::in_front_only(app, prepared.run);
            }
        }
        Ok(prepared)
    }

    /// Tools aimed at the screen read it while preparing (a window dump, up to
    /// `target::PREPARE_LOOK`): off the async thread, like a preparation that waits on files.
    fn prepare_waits_on_files(&self) -> bool {
        READS_SCREEN_WHILE_PREPARING.contains(&self.def.name)
    }
}

/// The tools whose preparation reads the screen (`target.rs`): those aimed at an element
/// or a point, and every UI action (which app is in front).
const READS_SCREEN_WHILE_PREPARING: &[&str] = nl2sh_proto::ui_grants::UI_ACTION_TOOLS;

/// Every Android tool, registered or not.
fn all() -> Vec<AndroidTool> {
    vec![
        screen::dump(),
        screen::screenshot(),
        input::tap(),
        input::long_press(),
        input::swipe(),
        gestures::double_tap(),
        gestures::drag(),
        gestures::pinch(),
        gestures::gesture(),
        text::text(),
        input::key(),
        apps::launch(),
        apps::packages(),
        apps::current_app(),
        diagnostics::logcat(),
        diagnostics::dumpsys(),
        state::device_state(),
        wait::wait_for(),
        notifications::notifications(),
        verbs::open_url(),
        verbs::intent(),
        verbs::stop_app(),
        verbs::install(),
        verbs::uninstall(),
        verbs::wake(),
        verbs::sleep(),
        clipboard::clipboard_get(),
    ]
}

/// Add the tools this device can run: an Android profile and each tool's program on PATH.
pub fn register(env: &DeviceEnv, tools: &mut Vec<Box<dyn Tool>>) {
    if !env.android {
        return;
    }
    for tool in all() {
        if env.has_all(&[tool.program]) {
            tools.push(Box::new(tool));
        }
    }
}

/// Display `argv` the way a shell would read it back (quoting only where needed).
fn render(argv: &[String]) -> String {
    let safe = |a: &String| {
        !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./:=%,@+".contains(&b))
    };
    argv.iter()
        .map(|a| {
            if safe(a) {
                a.clone()
            } else {
                super::shell::quote(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A mutation of the UI: risk low, one reason.
fn low(reason: &str) -> Assessment {
    let mut a = Assessment::read_only();
    a.raise(RiskLevel::Low, reason);
    a
}

/// A prepared action running `spec` once as the UI identity; `finish` reads its output.
fn command_action(
    env: &DeviceEnv,
    spec: CommandSpec,
    assessment: Assessment,
    screen: bool,
    finish: impl FnOnce(CommandOutput) -> Result<ToolOutput, ToolError> + Send + 'static,
) -> Prepared {
    Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: render(&spec.argv),
        assessment,
        identity: env.ui_identity(),
        // The tool, not the caller, chose the command line.
        confinement: Confinement::Fixed,
        resources: if screen {
            vec![Resource::Screen]
        } else {
            Vec::new()
        },
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let out = run_checked(&ctx, spec).await?;
                finish(out)
            })
        }),
    }
}

/// A read of the device through `spec`: read-only, without the screen's lock.
fn read_action(
    env: &DeviceEnv,
    spec: CommandSpec,
    finish: impl FnOnce(CommandOutput) -> Result<ToolOutput, ToolError> + Send + 'static,
) -> Prepared {
    command_action(env, spec, Assessment::read_only(), false, finish)
}

/// Run `spec`; anything but exit status 0 is an error naming the command and its message.
async fn run_checked(ctx: &ExecContext, spec: CommandSpec) -> Result<CommandOutput, ToolError> {
    let name = spec.argv.first().map(|p| short_name(p)).unwrap_or_default();
    let out = ctx.run(spec).await?;
    if out.timed_out {
        return Err(ToolError::Failed(format!("{name} timed out")));
    }
    if out.cancelled {
        return Err(ToolError::Failed(format!("{name} was cancelled")));
    }
    if out.exit_code != Some(0) {
        let status = match (out.exit_code, out.signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "unknown status".into(),
        };
        return Err(ToolError::Failed(format!(
            "{name} failed ({status}): {}",
            message(&out)
        )));
    }
    Ok(out)
}

/// What a command said: stderr, else stdout, trimmed and bounded.
fn message(out: &CommandOutput) -> String {
    let err = String::from_utf8_lossy(&out.stderr.bytes);
    let text = if err.trim().is_empty() {
        String::from_utf8_lossy(&out.stdout.bytes)
    } else {
        err
    };
    let text = text.trim();
    if text.is_empty() {
        return "no output".into();
    }
    nl2sh_proto::text::prefix(text, MAX_ERROR_BYTES).to_string()
}

/// `input` for `/system/bin/input`.
fn short_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}
