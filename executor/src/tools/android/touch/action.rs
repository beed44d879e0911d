//! The executor's side of a gesture: read the display's size and rotation, run the
//! touch helper as the UI identity, and fall back to `input` where the helper finds no
//! touchscreen it may write and the gesture has an `input` form.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::helper::{Request, UINPUT_SETTLE_MS};
use super::{Gesture, Screen};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::tools::android::dumpsys;
use crate::tools::android::state::MAX_STATE_BYTES;
use crate::tools::android::{
    command_action, low, render, run_checked, short_name, ANDROID_TIMEOUT,
};
use crate::tools::{ExecContext, Prepared, ToolError, ToolOutput};

/// How long a gesture's call may take beyond the gesture itself.
pub fn timeout_for(g: &Gesture) -> Duration {
    ANDROID_TIMEOUT + Duration::from_millis(g.duration_ms() + UINPUT_SETTLE_MS)
}

/// The words after an action's target: how it will be done.
pub fn means(fallback: &[Vec<String>]) -> String {
    if fallback.is_empty() {
        "through the touchscreen".into()
    } else {
        let shown: Vec<String> = fallback.iter().map(|a| render(a)).collect();
        format!("through the touchscreen (or: {})", shown.join("; "))
    }
}

/// Whether `dir` has any `event*` node (no helper is started where there is none).
fn has_event_nodes(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("event"))
    })
}

/// The display as `dumpsys window` states it (`window`, when the caller has just read
/// it, else read now): the override size when set, else the physical one, and the
/// rotation.
async fn screen(ctx: &ExecContext, window: Option<&str>) -> Result<Screen, String> {
    if let Some(text) = window {
        return screen_of(text);
    }
    let dumpsys = ctx
        .env
        .program("dumpsys")
        .ok_or("`dumpsys` is not on PATH, so the display's size and rotation are unknown")?
        .display()
        .to_string();
    let mut spec = CommandSpec::new(vec![dumpsys, "window".into()]);
    spec.max_stdout = MAX_STATE_BYTES;
    let out = run_checked(ctx, spec).await.map_err(|e| e.to_string())?;
    screen_of(&String::from_utf8_lossy(&out.stdout.bytes))
}

fn screen_of(window: &str) -> Result<Screen, String> {
    let facts = dumpsys::facts(window);
    let display = facts
        .overridden
        .or(facts.physical)
        .ok_or("dumpsys window states no display size (init=WxH)")?;
    let rotation = facts.rotation.ok_or("dumpsys window states no rotation")?;
    Ok(Screen {
        width: display.width,
        height: display.height,
        rotation,
    })
}

/// Draw `gesture`; where no touchscreen can be written, run `fallback` (`input` argument
/// lists) instead, or fail when it has none. `window` is `dumpsys window`'s text when
/// the caller has just read it (an aimed gesture's check of the screen). The fields it adds to the result: `path`
/// (`evdev:/dev/input/eventN`, `uinput` or `input`), the device, and `inject_ms`, the
/// time from here to the last event written.
pub async fn inject(
    ctx: &ExecContext,
    gesture: &Gesture,
    fallback: &[Vec<String>],
    window: Option<&str>,
) -> Result<Map<String, Value>, ToolError> {
    let started = Instant::now();
    let why = match try_touch(ctx, gesture, window).await? {
        Ok(mut done) => {
            done.insert("inject_ms".into(), json!(ms(started)));
            return Ok(done);
        }
        Err(why) => why,
    };
    if fallback.is_empty() {
        return Err(ToolError::Unavailable(format!(
            "this gesture needs a touchscreen nl2sh can write, and {why}"
        )));
    }
    for argv in fallback {
        run_checked(ctx, CommandSpec::new(argv.clone())).await?;
    }
    let name = fallback
        .first()
        .and_then(|a| a.first())
        .map(|p| short_name(p))
        .unwrap_or_default();
    let mut m = Map::new();
    m.insert("path".into(), json!(name));
    m.insert("why".into(), json!(why));
    m.insert("inject_ms".into(), json!(ms(started)));
    Ok(m)
}

/// The helper's result fields, or why no touchscreen could be used (`Err` inside), or
/// an error that ends the call (a finger on the glass, a failed write).
async fn try_touch(
    ctx: &ExecContext,
    gesture: &Gesture,
    window: Option<&str>,
) -> Result<Result<Map<String, Value>, String>, ToolError> {
    let paths = &ctx.env.touch;
    if !has_event_nodes(&paths.input_dir) {
        return Ok(Err(format!(
            "there are no event devices in {}",
            paths.input_dir.display()
        )));
    }
    let screen = match screen(ctx, window).await {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let (w, h) = screen.rotated();
    if let Some((x, y)) = gesture.points().find(|&(x, y)| x >= w || y >= h) {
        return Err(ToolError::InvalidArguments(format!(
            "point ({x}, {y}) is off the {w}x{h} screen"
        )));
    }
    let request = Request {
        screen,
        gesture: gesture.clone(),
        input_dir: paths.input_dir.clone(),
        uinput: paths.uinput.clone(),
    };
    let mut spec = CommandSpec::new(paths.helper.clone());
    spec.stdin = Some(request.to_json().to_string().into_bytes());
    let out = run_checked(ctx, spec).await?;
    let answer: Value = serde_json::from_slice(&out.stdout.bytes)
        .map_err(|e| ToolError::Failed(format!("the touch helper's answer is not JSON: {e}")))?;
    let why = answer
        .get("why")
        .and_then(Value::as_str)
        .unwrap_or("no reason given")
        .to_string();
    match answer.get("outcome").and_then(Value::as_str) {
        Some("done") => {
            let Value::Object(mut m) = answer else {
                return Err(ToolError::Failed(
                    "the touch helper answered no object".into(),
                ));
            };
            m.remove("outcome");
            Ok(Ok(m))
        }
        Some("unavailable") => Ok(Err(why)),
        Some("refused") => Err(ToolError::Failed(why)),
        _ => Err(ToolError::Failed(format!("touch: {why}"))),
    }
}

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 10_000.0).round() / 10.0
}

/// A gesture at points the caller gave (not an element): low risk, with the screen's
/// lock; `words` says what it does, `result` is extended with how it was done.
pub fn gesture_action(
    env: &DeviceEnv,
    words: String,
    gesture: Gesture,
    fallback: Vec<Vec<String>>,
    reason: &str,
    mut result: Map<String, Value>,
) -> Prepared {
    let mut prepared = command_action(env, CommandSpec::new(Vec::new()), low(reason), true, |_| {
        Ok(ToolOutput::default())
    });
    prepared.action = format!("{words}, {}", means(&fallback));
    prepared.timeout = timeout_for(&gesture);
    prepared.run = Box::new(move |ctx| {
        Box::pin(async move {
            let how = inject(&ctx, &gesture, &fallback, None).await?;
            result.extend(how);
            result.insert("injected".into(), Value::Bool(true));
            Ok(ToolOutput::json(true, &Value::Object(result)))
        })
    });
    prepared
}
