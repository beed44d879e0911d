//! `android.wait_for`: poll the screen until an element appears or disappears, or the
//! foreground app changes; bounded (at most [`MAX_WAIT_MS`]). Read-only. Timing out is
//! not an error: the result says `"met": false` (the caller asked a question and got its
//! answer, "not yet").

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use nl2sh_proto::channels::Confinement;

use super::target::{self, look, Seen, Selector};
use super::{render, AndroidTool};
use crate::risk::Assessment;
use crate::tools::{ExecContext, Prepared, Resource, ToolDef, ToolError, ToolOutput};

/// Longest wait, and the default.
const MAX_WAIT_MS: u64 = 30_000;
const DEFAULT_WAIT_MS: u64 = 10_000;
/// Pause between two reads (a dump itself takes 0.3-1 s on phones).
const POLL: Duration = Duration::from_millis(500);

/// What is awaited.
enum Until {
    Appears(Selector),
    Disappears(Selector),
    /// The foreground app becomes this package, or (None) anything but the current one.
    App(Option<String>),
}

pub(super) fn wait_for() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.wait_for",
            description: "Wait until `element` appears (or disappears, with `gone`: true), or \
                the foreground app becomes `app`, or (app_changes: true) changes at all; at most \
                timeout_ms (default 10000, at most 30000), reading the screen every 0.5 s. \
                Timing out is not an error: `met` is false.",
            schema: json!({
                "type": "object",
                "properties": {
                    "element": target::element_schema(),
                    "gone": {"type": "boolean", "description": "Wait for the element to disappear"},
                    "app": {"type": "string", "minLength": 1, "maxLength": 255,
                            "description": "Wait until this package is in front"},
                    "app_changes": {"type": "boolean", "description": "Wait until another app is in front"},
                    "timeout_ms": {"type": "integer", "minimum": 100, "maximum": MAX_WAIT_MS}
                },
                "additionalProperties": false
            }),
        },
        program: "uiautomator",
        prepare: |args, env, program| {
            let timeout_ms = match args.opt_u64("timeout_ms")? {
                None => DEFAULT_WAIT_MS,
                Some(t @ 100..=MAX_WAIT_MS) => t,
                Some(t) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "`timeout_ms` {t} is not within 100..{MAX_WAIT_MS}"
                    )))
                }
            };
            let gone = args.opt_bool("gone")?.unwrap_or(false);
            let changes = args.opt_bool("app_changes")?.unwrap_or(false);
            let app = args.opt_str("app")?;
            let until = match (args.0.get("element"), app, changes) {
                (Some(e), None, false) => {
                    let s = Selector::from_value(e)?;
                    if gone {
                        Until::Disappears(s)
                    } else {
                        Until::Appears(s)
                    }
                }
                (None, Some(p), false) if !gone && super::apps::valid_package(p) => {
                    Until::App(Some(p.to_string()))
                }
                (None, None, true) if !gone => Until::App(None),
                _ => {
                    return Err(ToolError::InvalidArguments(
                        "wait for one thing: `element` (with `gone` to wait for it to go), \
                         `app` (a package name) or `app_changes`"
                            .into(),
                    ))
                }
            };
            let what = match &until {
                Until::Appears(s) => format!("wait for {} to appear", s.named()),
                Until::Disappears(s) => format!("wait for {} to disappear", s.named()),
                Until::App(Some(p)) => format!("wait for {p} to be in front"),
                Until::App(None) => "wait for the foreground app to change".into(),
            };
            let action = format!(
                "{what}, at most {timeout_ms} ms: {} dump (repeated)",
                render(&[program.to_string()])
            );
            let limit = Duration::from_millis(timeout_ms);
            Ok(Prepared {
                sent: None,
                data: None,
                ui_app: None,
                action,
                assessment: Assessment::read_only(),
                identity: env.ui_identity(),
                // The tool, not the caller, chose the command lines.
                confinement: Confinement::Fixed,
                // Held throughout: Android allows one UiAutomation client at a time.
                resources: vec![Resource::Screen],
                timeout: limit + 2 * target::PREPARE_LOOK,
                commands: None,
                run: Box::new(move |ctx| Box::pin(wait(ctx, until, limit))),
            })
        },
    }
}

/// Read the screen every [`POLL`] until `until` happens or `limit` passes.
async fn wait(ctx: ExecContext, until: Until, limit: Duration) -> Result<ToolOutput, ToolError> {
    let started = Instant::now();
    let mut first_front: Option<Option<String>> = None;
    let mut reads = 0u32;
    loop {
        let seen = look(&ctx).await?;
        reads += 1;
        let waited = started.elapsed().as_millis() as u64;
        if let Some(mut v) = happened(&until, &seen, &mut first_front) {
            v["met"] = json!(true);
            v["waited_ms"] = json!(waited);
            v["reads"] = json!(reads);
            // What it matched is the front app's text.
            return Ok(ToolOutput::json(true, &v).read_from(seen.front.as_deref()));
        }
        if started.elapsed() + POLL > limit {
            return Ok(ToolOutput::json(
                true,
                &json!({"met": false, "timed_out": true, "waited_ms": waited,
                        "reads": reads, "front": seen.front}),
            ));
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = ctx.cancel.cancelled() => {
                return Err(ToolError::Failed("cancelled".into()));
            }
        }
    }
}

/// What happened on this read, if what is awaited did; `first_front` keeps the app that
/// was in front at the first read, for `app_changes`.
fn happened(until: &Until, seen: &Seen, first_front: &mut Option<Option<String>>) -> Option<Value> {
    match until {
        // Several matches without `index` count as appeared.
        Until::Appears(s) => s
            .find(&seen.dump)
            .ok()
            .or_else(|| {
                s.index
                    .is_none()
                    .then(|| seen.dump.nodes.iter().find(|n| s.matches(n)))
                    .flatten()
            })
            .map(|n| json!({"appeared": target::words(n), "element": n.to_json()})),
        Until::Disappears(s) => (!seen.dump.nodes.iter().any(|n| s.matches(n)))
            .then(|| json!({"disappeared": s.named()})),
        Until::App(Some(p)) => {
            (seen.front.as_deref() == Some(p.as_str())).then(|| json!({"app": p}))
        }
        Until::App(None) => {
            let was = first_front.get_or_insert_with(|| seen.front.clone());
            (seen.front != *was).then(|| json!({"app_changed": {"was": was, "now": seen.front}}))
        }
    }
}
