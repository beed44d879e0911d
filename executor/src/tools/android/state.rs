//! `android.device_state`: the device as it is, read-only, from three `dumpsys` calls
//! (parsers in `dumpsys.rs`), and `screen_condition`, what the screen tools report.
//!
//! Where each field comes from (first source that states it wins; a field none states is
//! `null`, with the reason in `unknown`):
//! - `screen_on`: `dumpsys power` `mWakefulness` (Awake/Dreaming on, Asleep/Dozing off);
//!   else `dumpsys window` `mAwake` (Android 12+) / `mScreenOnFully`; else
//!   `Display Power: state=` (Android 4–9 `dumpsys power`).
//! - `locked`: `dumpsys window` `isKeyguardShowing` (12+), `mShowingLockscreen` (older
//!   policy), `KeyguardServiceDelegate showing=`.
//! - `package`/`activity`: `dumpsys window` `mCurrentFocus`, else `mFocusedApp`,
//!   `topResumedActivity`, `mResumedActivity` (as `android.current_app`).
//! - `rotation`: `dumpsys window` `mRotation=N` / `mCurrentRotation=ROTATION_n`.
//! - `display`: `dumpsys window` `init=WxH Ndpi` (physical) and `base=WxH Ndpi` (override,
//!   printed only when set); when `dumpsys window` has no `init=` line, `wm size` and
//!   `wm density`.
//! - `battery`: `dumpsys battery` `level`/`scale`, `status` (2 = charging), `* powered`;
//!   else `dumpsys power` `mBatteryLevel` and `mIsPowered`.

use serde_json::{json, Map, Value};

use super::dumpsys::{self, Display, Facts};
use super::{render, AndroidTool, ANDROID_TIMEOUT};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::risk::Assessment;
use crate::tools::{ExecContext, Prepared, ToolDef, ToolOutput};
use nl2sh_proto::channels::Confinement;

/// One `dumpsys` service's output read at most (a busy `dumpsys window` is a few hundred KiB).
pub(super) const MAX_STATE_BYTES: usize = 4 * 1024 * 1024;

/// A command's text, or why there is none.
type Read = Result<String, String>;

pub(super) fn device_state() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.device_state",
            description: "The device as it is: screen_on, locked (keyguard showing), the \
                foreground package and activity, the focused window and whether it is secure \
                (FLAG_SECURE: screenshots of it are black), rotation (quarter turns), display \
                size and density (physical, and the override when one is set), battery level \
                and charging. From dumpsys window, power and battery; a field the device does \
                not state is null and `unknown` says why.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "dumpsys",
        prepare: |_args, env, program| Ok(prepare(env, program)),
    }
}

fn prepare(env: &DeviceEnv, program: &str) -> Prepared {
    let dumpsys = program.to_string();
    let wm = env.program("wm").map(|p| p.display().to_string());
    let lines: Vec<String> = ["window", "power", "battery"]
        .iter()
        .map(|s| render(&[dumpsys.clone(), s.to_string()]))
        .collect();
    Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: lines.join("; "),
        assessment: Assessment::read_only(),
        identity: env.ui_identity(),
        // The tool, not the caller, chose the command lines.
        confinement: Confinement::Fixed,
        resources: Vec::new(),
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let window = read(&ctx, vec![dumpsys.clone(), "window".into()]).await;
                let power = read(&ctx, vec![dumpsys.clone(), "power".into()]).await;
                let battery = read(&ctx, vec![dumpsys, "battery".into()]).await;
                let needs_wm = window
                    .as_ref()
                    .map_or(true, |t| dumpsys::facts(t).physical.is_none());
                let wm_out = match (needs_wm, wm) {
                    (true, Some(wm)) => Some((
                        read(&ctx, vec![wm.clone(), "size".into()]).await,
                        read(&ctx, vec![wm, "density".into()]).await,
                    )),
                    _ => None,
                };
                Ok(ToolOutput::json(
                    true,
                    &state_json(&window, &power, &battery, wm_out.as_ref()),
                ))
            })
        }),
    }
}

/// A command's text, or why there is none.
async fn read(ctx: &ExecContext, argv: Vec<String>) -> Read {
    let name = render(&argv[..argv.len().min(2)]);
    let mut spec = CommandSpec::new(argv);
    spec.max_stdout = MAX_STATE_BYTES;
    let out = super::run_checked(ctx, spec)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
    let err = String::from_utf8_lossy(&out.stderr.bytes);
    if text.trim().is_empty() {
        return Err(if err.contains("Can't find service") {
            format!("{name}: no such service on this device")
        } else {
            format!("{name} printed nothing")
        });
    }
    Ok(text)
}

fn display_json(d: Option<Display>) -> Value {
    d.map_or(
        Value::Null,
        |d| json!({"width": d.width, "height": d.height, "density": d.density}),
    )
}

/// The result object from each command's text (or why it is missing).
pub(super) fn state_json(
    window: &Read,
    power: &Read,
    battery: &Read,
    wm: Option<&(Read, Read)>,
) -> Value {
    let mut unknown = Map::new();
    let mut note = |field: &str, why: String| {
        unknown.insert(field.to_string(), Value::String(why));
    };
    let why = |r: &Result<String, String>, what: &str| match r {
        Ok(_) => format!("the output states no {what}"),
        Err(e) => e.clone(),
    };
    let wf = window.as_deref().map(dumpsys::facts).unwrap_or_default();
    let pf: Facts = power.as_deref().map(dumpsys::facts).unwrap_or_default();

    let screen_on = pf
        .wakefulness
        .as_deref()
        .and_then(dumpsys::wakefulness_on)
        .or(wf.screen_on.map(|s| s.0))
        .or(pf.screen_on.map(|s| s.0));
    if screen_on.is_none() {
        note(
            "screen_on",
            format!("{}; {}", why(power, "mWakefulness"), why(window, "mAwake")),
        );
    }
    let locked = wf.locked.map(|l| l.0);
    if locked.is_none() {
        note("locked", why(window, "keyguard state"));
    }
    let focus = window
        .as_deref()
        .ok()
        .and_then(|t| super::apps::parse_focus(t).0);
    if focus.is_none() {
        note("package", why(window, "focused app"));
    }
    let (focused_window, secure) = window
        .as_deref()
        .map(dumpsys::focused_window)
        .unwrap_or((None, None));
    if secure.is_none() {
        note("secure", why(window, "attributes for the focused window"));
    }
    if wf.rotation.is_none() {
        note("rotation", why(window, "rotation"));
    }
    let (mut physical, mut overridden) = (wf.physical, wf.overridden);
    if physical.is_none() {
        let why_not = match wm {
            Some((Ok(size), Ok(density))) => {
                (physical, overridden) = dumpsys::wm(size, density);
                "neither dumpsys window nor wm states the size".to_string()
            }
            Some((Err(e), _)) | Some((_, Err(e))) => e.clone(),
            None => "dumpsys window has no init= line and wm is not on PATH".into(),
        };
        if physical.is_none() {
            note("display", why_not);
        }
    }
    let b = battery.as_deref().map(dumpsys::battery).unwrap_or_default();
    let level = b.level.or(pf.battery_level);
    let charging = b.charging;
    if level.is_none() {
        note(
            "battery_level",
            format!("{}; {}", why(battery, "level"), why(power, "mBatteryLevel")),
        );
    }
    if charging.is_none() {
        note("charging", why(battery, "status"));
    }
    json!({
        "screen_on": screen_on,
        "wakefulness": pf.wakefulness,
        "locked": locked,
        "package": focus.as_ref().map(|f| f.package.clone()),
        "activity": focus.as_ref().map(|f| f.activity.clone()),
        "focused_window": focused_window,
        "secure": secure,
        "rotation": wf.rotation,
        "display": {"physical": display_json(physical), "override": display_json(overridden)},
        "battery": {
            "level": level,
            "charging": charging,
            "plugged": b.plugged,
            "powered": b.plugged.as_ref().map(|p| !p.is_empty()).or(pf.powered),
        },
        "unknown": unknown,
    })
}

/// What the screen shows, as the screen tools report it (`"screen": {...}`): whether it is
/// off, locked, and whether the focused window is secure (captured black). One `dumpsys
/// window` call; a fact the output does not state is `null`.
pub fn screen_condition(window: &str) -> Value {
    let f = dumpsys::facts(window);
    let (focused_window, secure) = dumpsys::focused_window(window);
    json!({
        "off": f.screen_on.map(|s| !s.0),
        "locked": f.locked.map(|l| l.0),
        "secure": secure,
        "focused_window": focused_window,
    })
}
