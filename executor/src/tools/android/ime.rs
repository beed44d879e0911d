//! Running commands while one of the input methods of Appium's Settings helper
//! (`io.appium.settings`, Apache-2.0) is the device's input method, and switching back
//! afterwards, also when they fail (docs/PROTOCOLS.md, "Any text").
//!
//! The sequence is the one Appium's own ADB client uses (appium-adb,
//! `lib/tools/keyboard-commands.ts`, `runInImeContext`): read the current input method
//! (`settings get secure default_input_method`), `ime enable` and `ime set` the helper's,
//! wait half a second for the switch to reach the focused window (their note: "needed to
//! properly apply new IME on some devices"), run, then `ime set` the previous one. The
//! helper's README names the input methods (`io.appium.settings/.UnicodeIME`, which
//! decodes modified UTF-7 typed by `input text`, and `.AppiumIME`, the default input
//! method Android 10 and later require for a clipboard read through its receiver).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::apps::{valid_activity, valid_package};
use super::{render, run_checked};
use crate::device::DeviceEnv;
use crate::exec::{CommandOutput, CommandSpec};
use crate::tools::{ExecContext, ToolError};

/// The helper's package.
pub const HELPER_PACKAGE: &str = "io.appium.settings";
/// Its input method that types modified UTF-7 as the text it encodes.
pub const UNICODE_IME: &str = "io.appium.settings/.UnicodeIME";
/// How long a switch is given to reach the focused window before typing.
pub const SETTLE: Duration = Duration::from_millis(500);
/// How long restoring the previous input method may take, whatever became of the call.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to tell a caller when the helper is missing.
pub const NO_HELPER: &str = "Appium's Settings helper (package io.appium.settings, Apache-2.0) \
    is not installed on this device; it is what types text other than printable ASCII (its \
    Unicode IME) and reads the clipboard. To enable it, the owner installs its APK (from the \
    npm package io.appium.settings, or the one the nl2sh phone module ships) with \
    android.install or `pm install`; nl2sh then switches to its input method and back for \
    each call, with nothing else to set up.";

/// The programs a switch runs, found on PATH.
#[derive(Debug, Clone)]
pub struct Programs {
    pub pm: String,
    pub settings: String,
    pub ime: String,
}

impl Programs {
    pub fn find(env: &DeviceEnv, what: &str) -> Result<Programs, ToolError> {
        let find = |name: &str| {
            env.program(name)
                .map(|p| p.display().to_string())
                .ok_or_else(|| {
                    ToolError::Unavailable(format!(
                        "{what} needs `pm`, `settings` and `ime`; `{name}` is not on this device's PATH"
                    ))
                })
        };
        Ok(Programs {
            pm: find("pm")?,
            settings: find("settings")?,
            ime: find("ime")?,
        })
    }

    fn helper_path(&self) -> Vec<String> {
        vec![self.pm.clone(), "path".into(), HELPER_PACKAGE.into()]
    }

    fn current(&self) -> Vec<String> {
        [&self.settings, "get", "secure", "default_input_method"]
            .map(String::from)
            .to_vec()
    }

    fn ime(&self, verb: &str, id: &str) -> Vec<String> {
        vec![self.ime.clone(), verb.into(), id.into()]
    }

    /// The switch as the owner reads it, around `body` (already rendered).
    pub fn words(&self, ime: &str, body: &[String]) -> String {
        let mut steps = vec![
            render(&self.helper_path()),
            render(&self.current()),
            render(&self.ime("enable", ime)),
            render(&self.ime("set", ime)),
        ];
        steps.extend(body.iter().cloned());
        steps.push(format!("{} set (the previous input method)", self.ime));
        steps.join("; ")
    }
}

/// An input method id as `settings` prints it: `package/class`, `.Class` relative.
pub fn valid_ime_id(id: &str) -> bool {
    id.split_once('/')
        .is_some_and(|(p, c)| valid_package(p) && valid_activity(c))
}

/// What happened to the device's input method during a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub used: &'static str,
    /// The input method before, `None` when it already was `used`.
    pub previous: Option<String>,
}

impl Switch {
    pub fn to_json(&self) -> Value {
        json!({"used": self.used, "previous": self.previous, "restored": self.previous.is_some()})
    }
}

/// `ime` reports some refusals with exit status 0 on older versions: its words decide too.
async fn run_ime(ctx: &ExecContext, argv: Vec<String>) -> Result<CommandOutput, ToolError> {
    let out = run_checked(ctx, CommandSpec::new(argv.clone())).await?;
    let said = format!("{}{}", out.stdout.text(), out.stderr.text());
    if said.contains("Unknown input method") || said.contains("cannot be") {
        return Err(ToolError::Failed(format!(
            "`{}` failed: {}",
            render(&argv[1..]),
            said.trim()
        )));
    }
    Ok(out)
}

/// Run `commands` in order while `ime` is the input method, then switch back; returns
/// their outputs. Missing helper: nothing switched, an `Unavailable` error saying how to
/// install it.
pub async fn run_with_ime(
    ctx: &ExecContext,
    programs: &Programs,
    ime: &'static str,
    commands: Vec<CommandSpec>,
) -> Result<(Vec<CommandOutput>, Switch), ToolError> {
    let out = ctx.run(CommandSpec::new(programs.helper_path())).await?;
    if out.timed_out || out.cancelled {
        return Err(ToolError::Failed(
            "`pm path` did not finish: the helper could not be looked for".into(),
        ));
    }
    // `pm path` of a package that is not there prints nothing (and exits 1).
    let found = out.stdout.text().lines().any(|l| l.starts_with("package:"));
    if !found {
        return Err(ToolError::Unavailable(NO_HELPER.into()));
    }
    let out = run_checked(ctx, CommandSpec::new(programs.current())).await?;
    let current = out.stdout.text().trim().to_string();
    if current == ime {
        let outputs = run_all(ctx, commands).await?;
        return Ok((
            outputs,
            Switch {
                used: ime,
                previous: None,
            },
        ));
    }
    if current.is_empty() || current == "null" {
        return Err(ToolError::Failed(
            "the device names no default input method (settings secure default_input_method \
             is null), so it could not be restored afterwards; nothing was switched"
                .into(),
        ));
    }
    if !valid_ime_id(&current) {
        return Err(ToolError::Failed(format!(
            "the current input method {:?} is not a package/class name, so it could not be \
             restored afterwards; nothing was switched",
            nl2sh_proto::text::prefix(&current, 200)
        )));
    }
    let switched = async {
        run_ime(ctx, programs.ime("enable", ime)).await?;
        run_ime(ctx, programs.ime("set", ime)).await?;
        tokio::select! {
            () = tokio::time::sleep(SETTLE) => {}
            () = ctx.cancel.cancelled() => return Err(ToolError::Failed("cancelled".into())),
        }
        run_all(ctx, commands).await
    }
    .await;
    // Restored whatever happened above, with a deadline and cancellation of its own: a
    // call that timed out or was cancelled must not leave the phone on the helper's IME.
    let restore_ctx = ExecContext {
        identity: ctx.identity,
        setup: ctx.setup,
        sandbox: ctx.sandbox.clone(),
        deadline: Instant::now() + RESTORE_TIMEOUT,
        cancel: CancellationToken::new(),
        groups: ctx.groups.clone(),
        env: ctx.env.clone(),
    };
    let restored = run_ime(&restore_ctx, programs.ime("set", &current)).await;
    match (switched, restored) {
        (Ok(outputs), Ok(_)) => Ok((
            outputs,
            Switch {
                used: ime,
                previous: Some(current),
            },
        )),
        (Ok(_), Err(e)) => Err(ToolError::Failed(format!(
            "done, but switching back to the input method {current} failed: {e}; choose the \
             keyboard again in the phone's settings"
        ))),
        (Err(e), Ok(_)) => Err(ToolError::Failed(format!(
            "{e} (the input method was switched back to {current})"
        ))),
        (Err(e), Err(r)) => Err(ToolError::Failed(format!(
            "{e}; switching back to the input method {current} failed too: {r}; choose the \
             keyboard again in the phone's settings"
        ))),
    }
}

async fn run_all(
    ctx: &ExecContext,
    commands: Vec<CommandSpec>,
) -> Result<Vec<CommandOutput>, ToolError> {
    let mut outputs = Vec::with_capacity(commands.len());
    for spec in commands {
        outputs.push(run_checked(ctx, spec).await?);
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_method_ids_are_components() {
        for ok in [
            UNICODE_IME,
            "io.appium.settings/.AppiumIME",
            "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME",
            "com.samsung.android.honeyboard/.service.HoneyBoardService",
        ] {
            assert!(valid_ime_id(ok), "{ok}");
        }
        for bad in [
            "",
            "null",
            "com.x",
            "com.x/",
            "/.X",
            "com.x/.X; reboot",
            "-n/x",
            "com.x/.X y",
        ] {
            assert!(!valid_ime_id(bad), "{bad:?}");
        }
    }
}
