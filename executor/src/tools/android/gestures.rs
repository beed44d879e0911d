//! `android.double_tap`, `android.drag`, `android.pinch`, `android.gesture`: gestures
//! `input` cannot make, drawn by the touch engine (touch/) on the touchscreen or a
//! virtual copy of it. Mutations of the UI like `android.tap` (risk low, the screen's
//! lock); those aimed at an element are checked again before input like android.tap.
//! Without a touchscreen nl2sh may write they fail, saying why: `input` has no double tap
//! (two `input tap` calls, a JVM start each, come too far apart to count as one), no drag
//! that holds first on every version, and no second finger.

use serde_json::{json, Map, Value};

use super::input::{aim_properties, aimed_action, coord_schema, touch_point};
use super::target::{aim, point};
use super::touch::{self, Gesture, MAX_FINGERS, MAX_GESTURE_MS, MAX_PATH_POINTS};
use super::AndroidTool;
use crate::tools::{Args, ToolDef, ToolError};

/// How long a drag holds before moving by default: past Android's long-press timeout
/// (400-500 ms), which starts a drag in lists and launchers.
const DRAG_HOLD_MS: u64 = 800;
const MAX_HOLD_MS: u64 = 5_000;
/// A drag's or pinch's movement by default.
const MOVE_MS: u64 = 500;

fn duration(args: &Args<'_>, key: &str, default: u64, range: (u64, u64)) -> Result<u64, ToolError> {
    match args.opt_u64(key)? {
        None => Ok(default),
        Some(d) if (range.0..=range.1).contains(&d) => Ok(d),
        Some(d) => Err(ToolError::InvalidArguments(format!(
            "`{key}` {d} is not within {}..{}",
            range.0, range.1
        ))),
    }
}

fn ms_schema(what: &str, min: u64, max: u64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": what})
}

pub(super) fn double_tap() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.double_tap",
            description: "Double-tap an element or a point (as android.tap takes them): two \
                taps 100 ms apart, written to the touchscreen (needs one nl2sh can write, or \
                uinput; `input` cannot double-tap). Checked again before input like \
                android.tap.",
            schema: json!({"type": "object", "properties": aim_properties(), "additionalProperties": false}),
        },
        program: "input",
        prepare: |args, env, program| {
            let aimed = aim(args, env, "x", "y")?;
            let gesture = Gesture::double_tap(touch_point(aimed.x, aimed.y)?);
            let mut result = Map::new();
            result.insert("double_tapped".into(), json!([aimed.x, aimed.y]));
            Ok(aimed_action(
                env,
                program,
                "double-tap",
                aimed,
                Vec::new(),
                Some(gesture),
                "double-taps the screen",
                result,
            ))
        },
    }
}

pub(super) fn drag() -> AndroidTool {
    let mut properties = aim_properties();
    properties.insert(
        "to_x".into(),
        coord_schema("Where to drop, pixels from the left"),
    );
    properties.insert(
        "to_y".into(),
        coord_schema("Where to drop, pixels from the top"),
    );
    properties.insert(
        "hold_ms".into(),
        ms_schema(
            "How long to hold before moving (default 800)",
            0,
            MAX_HOLD_MS,
        ),
    );
    properties.insert(
        "duration_ms".into(),
        ms_schema("How long the move takes (default 500)", 1, 10_000),
    );
    AndroidTool {
        def: ToolDef {
            name: "android.drag",
            description: "Drag an element or a point (as android.tap takes them) to (to_x, \
                to_y): press, hold for hold_ms (default 800, past the long-press time that \
                starts a drag), move over duration_ms, release. Written to the touchscreen \
                (needs one nl2sh can write, or uinput). The start is checked again before \
                input like android.tap; with `map` both points are the image's.",
            schema: json!({"type": "object", "properties": properties,
                           "required": ["to_x", "to_y"], "additionalProperties": false}),
        },
        program: "input",
        prepare: |args, env, program| {
            let hold = duration(args, "hold_ms", DRAG_HOLD_MS, (0, MAX_HOLD_MS))?;
            let ms = duration(args, "duration_ms", MOVE_MS, (1, 10_000))?;
            let (tx, ty) = point(args, "to_x", "to_y")?;
            let aimed = aim(args, env, "x", "y")?;
            let words = format!(
                "drag {} at ({}, {}) to ({tx}, {ty}): {}",
                aimed.words,
                aimed.x,
                aimed.y,
                touch::action::means(&[])
            );
            let from = touch_point(aimed.x, aimed.y)?;
            let gesture = Gesture::drag(from, touch_point(tx, ty)?, hold, ms);
            let mut result = Map::new();
            result.insert("from".into(), json!([aimed.x, aimed.y]));
            result.insert("to".into(), json!([tx, ty]));
            result.insert("hold_ms".into(), json!(hold));
            result.insert("duration_ms".into(), json!(ms));
            let mut prepared = aimed_action(
                env,
                program,
                "drag",
                aimed,
                Vec::new(),
                Some(gesture),
                "drags on the screen",
                result,
            );
            prepared.action = words;
            Ok(prepared)
        },
    }
}

pub(super) fn pinch() -> AndroidTool {
    let span = |what: &str| json!({"type": "integer", "minimum": 0, "maximum": 20_000, "description": what});
    AndroidTool {
        def: ToolDef {
            name: "android.pinch",
            description: "Two fingers on a horizontal line through (x, y), `from` pixels \
                apart, moving until `to` apart over duration_ms (default 500): to > from \
                zooms in, to < from zooms out. Screen pixels. Written to the touchscreen \
                (needs one nl2sh can write, or uinput).",
            schema: json!({
                "type": "object",
                "properties": {
                    "x": coord_schema("Centre, pixels from the left"),
                    "y": coord_schema("Centre, pixels from the top"),
                    "from": span("Distance between the fingers at the start"),
                    "to": span("Distance between the fingers at the end"),
                    "duration_ms": ms_schema("How long the move takes (default 500)", 1, 10_000)
                },
                "required": ["x", "y", "from", "to"],
                "additionalProperties": false
            }),
        },
        program: "input",
        prepare: |args, env, _program| {
            let (x, y) = point(args, "x", "y")?;
            let span = |k: &str| match args.opt_u64(k)? {
                Some(v) if v <= 20_000 => Ok(v as u32),
                _ => Err(ToolError::InvalidArguments(format!(
                    "`{k}` must be an integer 0..20000"
                ))),
            };
            let (from, to) = (span("from")?, span("to")?);
            let ms = duration(args, "duration_ms", MOVE_MS, (1, 10_000))?;
            let center = touch_point(x, y)?;
            let gesture = Gesture::pinch(center, from, to, ms);
            let zoom = if to >= from { "zoom in" } else { "zoom out" };
            let mut result = Map::new();
            result.insert("center".into(), json!([x, y]));
            result.insert("from".into(), json!(from));
            result.insert("to".into(), json!(to));
            result.insert("duration_ms".into(), json!(ms));
            Ok(touch::action::gesture_action(
                env,
                format!(
                    "pinch at ({x}, {y}) from {from} to {to} pixels apart over {ms} ms ({zoom})"
                ),
                gesture,
                Vec::new(),
                "pinches on the screen",
                result,
            ))
        },
    }
}

pub(super) fn gesture() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.gesture",
            description: "Any touch gesture: up to 5 fingers at once, each along its own path \
                of screen points ([[x, y], ...], 1 to 64 points; one point holds still), all \
                down together, moving evenly along their paths over duration_ms, and up \
                together. Written to the touchscreen (needs one nl2sh can write, or uinput).",
            schema: json!({
                "type": "object",
                "properties": {
                    "fingers": {
                        "type": "array", "minItems": 1, "maxItems": MAX_FINGERS,
                        "items": {
                            "type": "array", "minItems": 1, "maxItems": MAX_PATH_POINTS,
                            "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                      "items": {"type": "integer", "minimum": 0, "maximum": target_max()}}
                        }
                    },
                    "duration_ms": ms_schema("How long the gesture takes", 1, MAX_GESTURE_MS)
                },
                "required": ["fingers", "duration_ms"],
                "additionalProperties": false
            }),
        },
        program: "input",
        prepare: |args, env, _program| {
            let ms = duration(args, "duration_ms", 0, (1, MAX_GESTURE_MS))?;
            let paths = finger_paths(args.0.get("fingers"))?;
            let gesture = Gesture::fingers(&paths, ms);
            touch::validate(&gesture).map_err(ToolError::InvalidArguments)?;
            let shown: Vec<String> = paths
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let pts: Vec<String> = p.iter().map(|(x, y)| format!("({x}, {y})")).collect();
                    format!("finger {}: {}", i + 1, pts.join(" → "))
                })
                .collect();
            let mut result = Map::new();
            result.insert("fingers".into(), json!(paths.len()));
            result.insert("duration_ms".into(), json!(ms));
            Ok(touch::action::gesture_action(
                env,
                format!(
                    "a {}-finger gesture over {ms} ms ({})",
                    paths.len(),
                    shown.join("; ")
                ),
                gesture,
                Vec::new(),
                "touches the screen",
                result,
            ))
        },
    }
}

fn target_max() -> u64 {
    super::target::MAX_COORD
}

/// `fingers`: 1..=MAX_FINGERS paths of 1..=MAX_PATH_POINTS [x, y] points.
fn finger_paths(v: Option<&Value>) -> Result<Vec<Vec<(u32, u32)>>, ToolError> {
    let bad = |m: &str| ToolError::InvalidArguments(format!("`fingers`: {m}"));
    let list = v
        .and_then(Value::as_array)
        .ok_or_else(|| bad("must be an array of paths"))?;
    if list.is_empty() || list.len() > MAX_FINGERS {
        return Err(bad(&format!("1..{MAX_FINGERS} fingers")));
    }
    list.iter()
        .map(|path| {
            let pts = path
                .as_array()
                .ok_or_else(|| bad("a path must be an array"))?;
            if pts.is_empty() || pts.len() > MAX_PATH_POINTS {
                return Err(bad(&format!("a path has 1..{MAX_PATH_POINTS} points")));
            }
            pts.iter()
                .map(|p| match p.as_array().map(Vec::as_slice) {
                    Some([x, y]) => match (x.as_u64(), y.as_u64()) {
                        (Some(x), Some(y)) if x <= target_max() && y <= target_max() => {
                            touch_point(x, y)
                        }
                        _ => Err(bad("a point is [x, y], integers 0..65535")),
                    },
                    _ => Err(bad("a point is [x, y]")),
                })
                .collect()
        })
        .collect()
}
