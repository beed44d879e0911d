//! `android.tap`, `android.swipe`, `android.key`: synthetic input through Android's `input`
//! program (`android.text` is in `text.rs`). Mutations of the UI (risk low), one at a time with screen
//! reads (`Resource::Screen`).
//!
//! `input` is exec'd directly, not through a shell, so arguments reach it verbatim: no
//! shell quoting is needed or applied.

use serde_json::{json, Map, Value};

use super::target::{self, aim, point, Aimed, MAX_COORD};
use super::touch::{self, Gesture};
use super::{command_action, low, render, run_checked, AndroidTool, ANDROID_TIMEOUT};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::tools::{Prepared, ToolDef, ToolError, ToolOutput};

/// How long `android.long_press` holds by default, and its bounds (Android's long-press
/// timeout is 400-500 ms by default, up to 1500 ms in accessibility settings).
const LONG_PRESS_MS: u64 = 1000;
const MIN_LONG_PRESS_MS: u64 = 500;
const MAX_LONG_PRESS_MS: u64 = 10_000;
/// A swipe's duration when none is given: what `input swipe` uses (300 ms).
const SWIPE_MS: u64 = 300;

pub(super) fn coord_schema(what: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": MAX_COORD, "description": what})
}

/// Properties shared by the tools that aim at a point or an element.
pub(super) fn aim_properties() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "x".into(),
        coord_schema("Pixels from the left (of the image, with `map`)"),
    );
    m.insert(
        "y".into(),
        coord_schema("Pixels from the top (of the image, with `map`)"),
    );
    m.insert("map".into(), target::map_schema());
    m.insert("element".into(), target::element_schema());
    m
}

/// A screen action aimed at `aimed`: right before input it reads the screen again and,
/// when the target changed, injects nothing and answers with what changed (isError).
/// `commands` are `input` argument lists run in order; with a `gesture`, the touch engine
/// draws it instead and `commands` are its fallback (touch/action.rs). `verb` begins the
/// action's words.
#[allow(clippy::too_many_arguments)]
pub(super) fn aimed_action(
    env: &DeviceEnv,
    program: &str,
    verb: &str,
    aimed: Aimed,
    commands: Vec<Vec<String>>,
    gesture: Option<Gesture>,
    reason: &str,
    mut result: Map<String, Value>,
) -> Prepared {
    let argvs: Vec<Vec<String>> = commands
        .into_iter()
        .map(|args| std::iter::once(program.to_string()).chain(args).collect())
        .collect();
    let how = match &gesture {
        Some(_) => touch::action::means(&argvs),
        None => argvs
            .iter()
            .map(|a| render(a))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let action = format!(
        "{verb} {} at ({}, {}): {how}",
        aimed.words, aimed.x, aimed.y
    );
    result.extend(aimed.to_json());
    let mut prepared = command_action(env, CommandSpec::new(Vec::new()), low(reason), true, |_| {
        Ok(ToolOutput::default())
    });
    target::judge_ui_target(
        &mut prepared,
        aimed.front.clone(),
        aimed.touched_package(),
        aimed.locked,
    );
    prepared.action = action;
    // Two screen reads (uiautomator, dumpsys) come before the input itself.
    prepared.timeout = 2 * target::PREPARE_LOOK
        + gesture
            .as_ref()
            .map_or(ANDROID_TIMEOUT, touch::action::timeout_for);
    prepared.run = Box::new(move |ctx| {
        Box::pin(async move {
            let window = match aimed.recheck(&ctx).await? {
                Ok(window) => window,
                Err(change) => return Ok(ToolOutput::json(false, &change)),
            };
            match gesture {
                Some(g) => {
                    result.extend(touch::action::inject(&ctx, &g, &argvs, window.as_deref()).await?)
                }
                None => {
                    for argv in argvs {
                        run_checked(&ctx, CommandSpec::new(argv)).await?;
                    }
                }
            }
            result.insert("injected".into(), Value::Bool(true));
            Ok(ToolOutput::json(true, &Value::Object(result)))
        })
    });
    prepared
}

/// `input ARGS...` as a low-risk screen action whose result is `result`.
fn input_action(
    env: &DeviceEnv,
    program: &str,
    args: Vec<String>,
    reason: &str,
    result: Value,
) -> Prepared {
    let mut argv = vec![program.to_string()];
    argv.extend(args);
    command_action(
        env,
        CommandSpec::new(argv),
        low(reason),
        true,
        move |_out| Ok(ToolOutput::json(true, &result)),
    )
}

pub(super) fn tap() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.tap",
            description: "Tap an element (`element`: text, desc or id as android.screen_dump \
                reports them) or a point (x, y) in screen pixels, or in a screenshot's pixels \
                with its `map`. The screen is read again right before the tap: if the element \
                is gone or moved, or another app is in front, nothing is tapped.",
            schema: json!({"type": "object", "properties": aim_properties(), "additionalProperties": false}),
        },
        program: "input",
        prepare: |args, env, program| {
            let aimed = aim(args, env, "x", "y")?;
            let (x, y) = (aimed.x, aimed.y);
            let mut result = Map::new();
            result.insert("tapped".into(), json!([x, y]));
            let argv = vec!["tap".into(), x.to_string(), y.to_string()];
            let gesture = Gesture::tap(touch_point(x, y)?);
            Ok(aimed_action(
                env,
                program,
                "tap",
                aimed,
                vec![argv],
                Some(gesture),
                "taps the screen",
                result,
            ))
        },
    }
}

pub(super) fn long_press() -> AndroidTool {
    let mut properties = aim_properties();
    properties.insert(
        "duration_ms".into(),
        json!({"type": "integer", "minimum": MIN_LONG_PRESS_MS, "maximum": MAX_LONG_PRESS_MS,
               "description": "How long to hold (default 1000)"}),
    );
    AndroidTool {
        def: ToolDef {
            name: "android.long_press",
            description: "Press and hold an element or a point (as android.tap takes them) for \
                duration_ms (default 1000), as `input swipe x y x y ms` (a swipe that does not \
                move; every Android version's input has it). Checked again before input like \
                android.tap.",
            schema: json!({"type": "object", "properties": properties, "additionalProperties": false}),
        },
        program: "input",
        prepare: |args, env, program| {
            let ms = match args.opt_u64("duration_ms")? {
                None => LONG_PRESS_MS,
                Some(d @ MIN_LONG_PRESS_MS..=MAX_LONG_PRESS_MS) => d,
                Some(d) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "`duration_ms` {d} is not within {MIN_LONG_PRESS_MS}..{MAX_LONG_PRESS_MS}"
                    )))
                }
            };
            let aimed = aim(args, env, "x", "y")?;
            let gesture = Gesture::press(touch_point(aimed.x, aimed.y)?, ms);
            let (x, y) = (aimed.x.to_string(), aimed.y.to_string());
            let mut result = Map::new();
            result.insert("pressed".into(), json!([aimed.x, aimed.y]));
            result.insert("duration_ms".into(), json!(ms));
            let argv = vec!["swipe".into(), x.clone(), y.clone(), x, y, ms.to_string()];
            Ok(aimed_action(
                env,
                program,
                "long-press",
                aimed,
                vec![argv],
                Some(gesture),
                "presses and holds on the screen",
                result,
            ))
        },
    }
}

pub(super) fn swipe() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.swipe",
            description: "Swipe from (x1, y1) to (x2, y2) in screen pixels (or a screenshot's, \
                with its `map`), over duration_ms (default: input's own, about 300 ms). Swipe up \
                to scroll down.",
            schema: json!({
                "type": "object",
                "properties": {
                    "x1": coord_schema("Start, pixels from the left"),
                    "y1": coord_schema("Start, pixels from the top"),
                    "x2": coord_schema("End, pixels from the left"),
                    "y2": coord_schema("End, pixels from the top"),
                    "duration_ms": {"type": "integer", "minimum": 1, "maximum": 10000},
                    "map": target::map_schema()
                },
                "required": ["x1", "y1", "x2", "y2"],
                "additionalProperties": false
            }),
        },
        program: "input",
        prepare: |args, env, program| {
            let ((x1, y1), (x2, y2)) = (point(args, "x1", "y1")?, point(args, "x2", "y2")?);
            let p = [x1, y1, x2, y2];
            let duration = match args.opt_u64("duration_ms")? {
                Some(d @ 1..=10_000) => Some(d),
                Some(d) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "`duration_ms` {d} is not within 1..10000"
                    )))
                }
                None => None,
            };
            let mut argv: Vec<String> = vec![program.to_string(), "swipe".into()];
            argv.extend(p.iter().map(u64::to_string));
            argv.extend(duration.map(|d| d.to_string()));
            let gesture = Gesture::path(
                &[touch_point(x1, y1)?, touch_point(x2, y2)?],
                duration.unwrap_or(SWIPE_MS),
            );
            let mut result = Map::new();
            result.insert("from".into(), json!([p[0], p[1]]));
            result.insert("to".into(), json!([p[2], p[3]]));
            result.insert("duration_ms".into(), json!(duration));
            Ok(touch::action::gesture_action(
                env,
                format!("swipe from ({x1}, {y1}) to ({x2}, {y2})"),
                gesture,
                vec![argv],
                "swipes on the screen",
                result,
            ))
        },
    }
}

/// A screen point as the touch engine takes it.
pub(super) fn touch_point(x: u64, y: u64) -> Result<(u32, u32), ToolError> {
    match (u32::try_from(x), u32::try_from(y)) {
        (Ok(x), Ok(y)) => Ok((x, y)),
        _ => Err(ToolError::InvalidArguments(format!(
            "point ({x}, {y}) is out of range"
        ))),
    }
}

/// `HOME`, `home`, `KEYCODE_HOME` → `KEYCODE_HOME`; `RECENTS` → `KEYCODE_APP_SWITCH`; `3` →
/// `3`. Anything outside
/// `[A-Z0-9_]` (after upper-casing ASCII letters) is refused.
pub fn keycode(key: &Value) -> Result<String, ToolError> {
    let bad = |k: &str| {
        ToolError::InvalidArguments(format!(
            "`key` {k:?} is not a key name like HOME, BACK, ENTER, KEYCODE_VOLUME_UP or a key code number"
        ))
    };
    let raw = match key {
        Value::Number(n) => match n.as_u64() {
            Some(v) if v <= 9999 => return Ok(v.to_string()),
            _ => return Err(bad(&n.to_string())),
        },
        Value::String(s) => s.trim(),
        other => return Err(bad(&other.to_string())),
    };
    if !raw.is_empty() && raw.len() <= 4 && raw.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(raw.to_string());
    }
    let upper = raw.to_ascii_uppercase();
    let name = upper.strip_prefix("KEYCODE_").unwrap_or(&upper);
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(bad(raw));
    }
    // The recents (overview) button is KEYCODE_APP_SWITCH; callers say "recents".
    let name = if name == "RECENTS" {
        "APP_SWITCH"
    } else {
        name
    };
    Ok(format!("KEYCODE_{name}"))
}

pub(super) fn key() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.key",
            description: "Press a key (input keyevent): a name such as BACK, HOME, RECENTS \
                (APP_SWITCH), ENTER, VOLUME_UP, POWER, DEL, TAB (KEYCODE_ prefix optional) or a \
                key code number; long_press holds it.",
            schema: json!({
                "type": "object",
                "properties": {
                    "key": {"type": ["string", "integer"], "description": "Key name or key code"},
                    "long_press": {"type": "boolean"}
                },
                "required": ["key"],
                "additionalProperties": false
            }),
        },
        program: "input",
        prepare: |args, env, program| {
            let key = keycode(args.0.get("key").unwrap_or(&Value::Null))?;
            let long = args.opt_bool("long_press")?.unwrap_or(false);
            let mut argv = vec!["keyevent".to_string()];
            if long {
                argv.push("--longpress".into());
            }
            argv.push(key.clone());
            let result = json!({"key": key, "long_press": long});
            Ok(input_action(env, program, argv, "presses a key", result))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_normalised_and_allow_listed() {
        assert_eq!(keycode(&json!("HOME")).unwrap(), "KEYCODE_HOME");
        assert_eq!(keycode(&json!("back")).unwrap(), "KEYCODE_BACK");
        assert_eq!(
            keycode(&json!("KEYCODE_VOLUME_UP")).unwrap(),
            "KEYCODE_VOLUME_UP"
        );
        assert_eq!(keycode(&json!("66")).unwrap(), "66");
        assert_eq!(keycode(&json!("recents")).unwrap(), "KEYCODE_APP_SWITCH");
        assert_eq!(keycode(&json!(3)).unwrap(), "3");
        for bad in [
            json!(""),
            json!("KEYCODE_"),
            json!("HOME; reboot"),
            json!("--longpress"),
            json!("a b"),
            json!(-1),
            json!(1.5),
            json!(null),
            json!("X".repeat(80)),
        ] {
            assert!(keycode(&bad).is_err(), "{bad}");
        }
    }
}
