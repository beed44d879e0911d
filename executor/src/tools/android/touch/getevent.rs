//! Test-only readers of the corpus's input descriptions: `getevent -lp` (each device's
//! name, key and axis lists with ranges, and input props, as Android's getevent prints
//! them with labels) and the `Raw Touch Axes` and viewport of `dumpsys input`.

use super::device::Caps;
use super::{
    ABS_MT_POSITION_X, ABS_MT_POSITION_Y, ABS_MT_PRESSURE, ABS_MT_SLOT, ABS_MT_TOUCH_MAJOR,
    ABS_MT_TRACKING_ID, BTN_TOOL_FINGER, BTN_TOUCH,
};
use crate::sys::evdev::AbsInfo;

fn abs_code(label: &str) -> Option<u16> {
    Some(match label {
        "ABS_MT_SLOT" => ABS_MT_SLOT,
        "ABS_MT_TOUCH_MAJOR" => ABS_MT_TOUCH_MAJOR,
        "ABS_MT_POSITION_X" => ABS_MT_POSITION_X,
        "ABS_MT_POSITION_Y" => ABS_MT_POSITION_Y,
        "ABS_MT_TRACKING_ID" => ABS_MT_TRACKING_ID,
        "ABS_MT_PRESSURE" => ABS_MT_PRESSURE,
        _ => return None,
    })
}

/// `value 0, min 0, max 20639, fuzz 0, flat 0, resolution 0`.
fn absinfo(text: &str) -> Option<AbsInfo> {
    let field = |k: &str| -> Option<i32> {
        let at = text.find(&format!("{k} "))?;
        text[at + k.len() + 1..]
            .split(|c: char| c == ',' || c.is_whitespace())
            .next()?
            .parse()
            .ok()
    };
    Some(AbsInfo {
        value: field("value")?,
        minimum: field("min")?,
        maximum: field("max")?,
        fuzz: field("fuzz").unwrap_or(0),
        flat: field("flat").unwrap_or(0),
        resolution: field("resolution").unwrap_or(0),
    })
}

/// Each device of a `getevent -lp` output: its node and what it reports.
pub fn devices(text: &str) -> Vec<(String, Caps)> {
    let mut out: Vec<(String, Caps)> = Vec::new();
    let mut section = "";
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("add device ") {
            let node = rest.split_once(": ").map_or(rest, |(_, n)| n);
            out.push((node.trim().to_string(), Caps::default()));
            section = "";
            continue;
        }
        let Some((_, caps)) = out.last_mut() else {
            continue;
        };
        if let Some(name) = t.strip_prefix("name:") {
            caps.name = name.trim().trim_matches('"').to_string();
            continue;
        }
        if t == "input props:" {
            section = "props";
            continue;
        }
        let body = if let Some((head, rest)) = t.split_once("):") {
            section = match head.split_whitespace().next() {
                Some("KEY") => "key",
                Some("ABS") => "abs",
                _ => "other",
            };
            rest.trim()
        } else {
            t
        };
        match section {
            "key" => {
                for k in body.split_whitespace().map(|k| k.trim_end_matches('*')) {
                    match k {
                        "BTN_TOUCH" => caps.keys.insert(BTN_TOUCH),
                        "BTN_TOOL_FINGER" => caps.keys.insert(BTN_TOOL_FINGER),
                        _ => false,
                    };
                }
            }
            "abs" => {
                if let Some((label, info)) = body.split_once(':') {
                    if let (Some(code), Some(info)) = (abs_code(label.trim()), absinfo(info)) {
                        caps.abs.insert(code, info);
                    }
                }
            }
            "props" => caps.direct |= body == "INPUT_PROP_DIRECT",
            _ => {}
        }
    }
    out
}

/// The touchscreens `dumpsys input` describes: each `Raw Touch Axes` X and Y range of a
/// device whose `DeviceType` is a touch screen, with the size of the viewport listed
/// after it (`physicalFrame=[0, 0, W, H]`).
pub fn raw_touch_axes(text: &str) -> Vec<(AbsInfo, AbsInfo, u32, u32)> {
    let mut out = Vec::new();
    let mut touch_screen = false;
    let (mut x, mut y) = (None, None);
    let range = |t: &str| -> Option<AbsInfo> {
        let num = |k: &str| -> Option<i32> {
            let at = t.find(k)? + k.len();
            t[at..].split(',').next()?.trim().parse().ok()
        };
        Some(AbsInfo {
            minimum: num("min=")?,
            maximum: num("max=")?,
            ..AbsInfo::default()
        })
    };
    for line in text.lines() {
        let t = line.trim();
        if let Some(kind) = t.strip_prefix("DeviceType:") {
            touch_screen = kind.trim().eq_ignore_ascii_case("TOUCH_SCREEN")
                || kind.trim().eq_ignore_ascii_case("touchScreen");
            (x, y) = (None, None);
        } else if let Some(r) = t.strip_prefix("X: ") {
            x = range(r);
        } else if let Some(r) = t.strip_prefix("Y: ") {
            y = range(r);
        } else if t.contains("physicalFrame=[") && touch_screen {
            let at = t.find("physicalFrame=[").unwrap_or(0) + "physicalFrame=[".len();
            let nums: Vec<u32> = t[at..]
                .split(']')
                .next()
                .unwrap_or("")
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect();
            if let (Some(ax), Some(ay), [l, top, r, b]) = (x, y, nums.as_slice()) {
                out.push((ax, ay, r - l, b - top));
            }
            touch_screen = false;
        }
    }
    out
}
