//! The touch engine's pure parts: the event frames of each gesture, the mapping from
//! screen pixels to raw axes (against Android's own inverse, and the corpus's real
//! touchscreens), the helper's request, and what it says without a touchscreen. The
//! kernel side is checked in the rig (tests/kernel/checks.sh, "touch").

use std::time::Instant;

use serde_json::json;

use super::device::{self, Caps};
use super::getevent;
use super::helper::{self, Request};
use super::*;
use crate::tools::android::corpus;

fn axis(min: i32, max: i32) -> AbsInfo {
    AbsInfo {
        minimum: min,
        maximum: max,
        ..AbsInfo::default()
    }
}

/// A phone panel as uinput makes one in the rig: 1080x2400, ten slots, pressure and
/// touch size, BTN_TOUCH and BTN_TOOL_FINGER.
fn phone() -> Touchscreen {
    Touchscreen {
        name: "phone".into(),
        x: axis(0, 1079),
        y: axis(0, 2399),
        slot: axis(0, 9),
        tracking: axis(0, 65535),
        pressure: Some(axis(0, 255)),
        touch_major: Some(axis(0, 255)),
        btn_touch: true,
        btn_tool_finger: true,
    }
}

const UPRIGHT: Screen = Screen {
    width: 1080,
    height: 2400,
    rotation: 0,
};

fn abs(code: u16, v: i32) -> Ev {
    Ev::abs(code, v)
}

#[test]
fn a_tap_is_one_contact_down_then_up() {
    let f = frames(&Gesture::tap((100, 200)), &phone(), &UPRIGHT, 0).unwrap();
    assert_eq!(
        f,
        vec![
            Frame {
                at_ms: 0,
                events: vec![
                    abs(ABS_MT_SLOT, 0),
                    abs(ABS_MT_TRACKING_ID, 0),
                    abs(ABS_MT_PRESSURE, 127),
                    abs(ABS_MT_TOUCH_MAJOR, 31),
                    abs(ABS_MT_POSITION_X, 100),
                    abs(ABS_MT_POSITION_Y, 200),
                    Ev::key(BTN_TOUCH, true),
                    Ev::key(BTN_TOOL_FINGER, true),
                    Ev::SYN,
                ],
            },
            Frame {
                at_ms: TAP_HOLD_MS,
                events: vec![
                    abs(ABS_MT_TRACKING_ID, -1),
                    Ev::key(BTN_TOUCH, false),
                    Ev::key(BTN_TOOL_FINGER, false),
                    Ev::SYN,
                ],
            },
        ]
    );
}

#[test]
fn what_the_device_lacks_is_not_written() {
    let mut bare = phone();
    bare.pressure = None;
    bare.touch_major = None;
    bare.btn_tool_finger = false;
    let f = frames(&Gesture::tap((5, 6)), &bare, &UPRIGHT, 7).unwrap();
    assert_eq!(
        f[0].events,
        [
            abs(ABS_MT_SLOT, 0),
            abs(ABS_MT_TRACKING_ID, 7),
            abs(ABS_MT_POSITION_X, 5),
            abs(ABS_MT_POSITION_Y, 6),
            Ev::key(BTN_TOUCH, true),
            Ev::SYN
        ]
    );
    assert_eq!(
        f[1].events,
        [
            abs(ABS_MT_TRACKING_ID, -1),
            Ev::key(BTN_TOUCH, false),
            Ev::SYN
        ]
    );
}

#[test]
fn a_long_press_holds_without_moving() {
    let f = frames(&Gesture::press((10, 20), 1000), &phone(), &UPRIGHT, 0).unwrap();
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!((f[0].at_ms, f[1].at_ms), (0, 1000));
}

#[test]
fn a_swipe_moves_every_interval_and_lifts_at_its_end() {
    let f = frames(
        &Gesture::path(&[(540, 2000), (540, 1000)], 300),
        &phone(),
        &UPRIGHT,
        0,
    )
    .unwrap();
    // Down at 0, a move every 10 ms to 300 (30), the lift at 300.
    assert_eq!(f.len(), 32);
    let times: Vec<u64> = f.iter().map(|f| f.at_ms).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    for (i, frame) in f[1..31].iter().enumerate() {
        assert_eq!(frame.at_ms, 10 * (i as u64 + 1));
        // Only y changes; the slot stays selected.
        let [Ev { code, value, .. }, syn] = frame.events[..] else {
            panic!("{frame:?}")
        };
        assert_eq!((code, syn), (ABS_MT_POSITION_Y, Ev::SYN));
        assert_eq!(value, 2000 - (1000 * 10 * (i as i32 + 1)) / 300);
    }
    assert_eq!(f[30].events[0], abs(ABS_MT_POSITION_Y, 1000));
    assert_eq!(f[31].at_ms, 300);
    assert_eq!(f[31].events[0], abs(ABS_MT_TRACKING_ID, -1));
}

#[test]
fn a_double_tap_is_two_contacts_with_their_own_tracking_ids() {
    let f = frames(&Gesture::double_tap((300, 400)), &phone(), &UPRIGHT, 0).unwrap();
    let times: Vec<u64> = f.iter().map(|f| f.at_ms).collect();
    assert_eq!(times, [0, 10, 110, 120]);
    assert_eq!(f[0].events[1], abs(ABS_MT_TRACKING_ID, 0));
    assert_eq!(f[2].events[0], abs(ABS_MT_TRACKING_ID, 1));
    assert!(f[2].events.contains(&abs(ABS_MT_POSITION_X, 300)));
    assert!(f[3].events.contains(&Ev::key(BTN_TOUCH, false)));
}

#[test]
fn a_pinch_uses_two_slots_and_one_touch_button() {
    let f = frames(
        &Gesture::pinch((540, 1200), 400, 100, 100),
        &phone(),
        &UPRIGHT,
        0,
    )
    .unwrap();
    assert_eq!(
        f[0].events,
        [
            abs(ABS_MT_SLOT, 0),
            abs(ABS_MT_TRACKING_ID, 0),
            abs(ABS_MT_PRESSURE, 127),
            abs(ABS_MT_TOUCH_MAJOR, 31),
            abs(ABS_MT_POSITION_X, 340),
            abs(ABS_MT_POSITION_Y, 1200),
            abs(ABS_MT_SLOT, 1),
            abs(ABS_MT_TRACKING_ID, 1),
            abs(ABS_MT_PRESSURE, 127),
            abs(ABS_MT_TOUCH_MAJOR, 31),
            abs(ABS_MT_POSITION_X, 740),
            abs(ABS_MT_POSITION_Y, 1200),
            Ev::key(BTN_TOUCH, true),
            Ev::key(BTN_TOOL_FINGER, true),
            Ev::SYN,
        ]
    );
    // A move selects each slot before its x.
    assert_eq!(
        f[1].events,
        [
            abs(ABS_MT_SLOT, 0),
            abs(ABS_MT_POSITION_X, 355),
            abs(ABS_MT_SLOT, 1),
            abs(ABS_MT_POSITION_X, 725),
            Ev::SYN
        ]
    );
    let last = f.last().unwrap();
    assert_eq!(
        last.events,
        [
            abs(ABS_MT_SLOT, 0),
            abs(ABS_MT_TRACKING_ID, -1),
            abs(ABS_MT_SLOT, 1),
            abs(ABS_MT_TRACKING_ID, -1),
            Ev::key(BTN_TOUCH, false),
            Ev::key(BTN_TOOL_FINGER, false),
            Ev::SYN
        ]
    );
    assert_eq!(f[f.len() - 2].events[1], abs(ABS_MT_POSITION_X, 490));
}

#[test]
fn more_fingers_than_slots_is_refused() {
    let mut one = phone();
    one.slot = axis(0, 0);
    let err = frames(
        &Gesture::pinch((540, 1200), 400, 100, 100),
        &one,
        &UPRIGHT,
        0,
    )
    .unwrap_err();
    assert!(err.contains("1 slots"), "{err}");
    let three = Gesture::fingers(&[vec![(1, 1)], vec![(2, 2)], vec![(3, 3), (4, 4)]], 50);
    let f = frames(&three, &phone(), &UPRIGHT, 0).unwrap();
    let slots: Vec<&Ev> = f[0]
        .events
        .iter()
        .filter(|e| e.code == ABS_MT_SLOT)
        .collect();
    assert_eq!(slots.len(), 3);
}

#[test]
fn bad_gestures_are_refused() {
    let no_time = Gesture {
        strokes: vec![Stroke(vec![
            Waypoint {
                at_ms: 5,
                x: 1,
                y: 1,
            },
            Waypoint {
                at_ms: 5,
                x: 1,
                y: 1,
            },
        ])],
    };
    assert!(validate(&no_time).is_err());
    assert!(validate(&Gesture { strokes: vec![] }).is_err());
    assert!(validate(&Gesture::press((1, 1), MAX_GESTURE_MS + 1)).is_err());
    let err = frames(&Gesture::tap((1080, 5)), &phone(), &UPRIGHT, 0).unwrap_err();
    assert!(err.contains("off the 1080x2400 screen"), "{err}");
}

/// Android's own mapping of a raw position to display pixels (TouchInputMapper's
/// rotateAndScale in Android 12-13: scale `size / (max - min + 1)`, then rotate; a
/// quarter turn reads y from `max - x`), written independently of [`Screen::to_raw`].
fn android_pixel(ts: &Touchscreen, s: &Screen, raw: (i32, i32)) -> (u32, u32) {
    let xs = f64::from(s.width) / f64::from(ts.x.maximum - ts.x.minimum + 1);
    let ys = f64::from(s.height) / f64::from(ts.y.maximum - ts.y.minimum + 1);
    let x_scaled = f64::from(raw.0 - ts.x.minimum) * xs;
    let y_scaled = f64::from(raw.1 - ts.y.minimum) * ys;
    let x_max = f64::from(ts.x.maximum - raw.0) * xs;
    let y_max = f64::from(ts.y.maximum - raw.1) * ys;
    let (x, y) = match s.rotation {
        0 => (x_scaled, y_scaled),
        1 => (y_scaled, x_max),
        2 => (x_max, y_max),
        _ => (y_max, x_scaled),
    };
    (x.floor() as u32, y.floor() as u32)
}

/// Every `step`-th pixel of the screen, in every rotation, lands where Android reads it.
fn round_trips(ts: &Touchscreen, width: u32, height: u32, step: usize) {
    for rotation in 0..4 {
        let s = Screen {
            width,
            height,
            rotation,
        };
        let (w, h) = s.rotated();
        for x in (0..w).step_by(step).chain([w - 1]) {
            for y in (0..h).step_by(step).chain([h - 1]) {
                let raw = s.to_raw(ts, x, y).unwrap();
                assert!(
                    (ts.x.minimum..=ts.x.maximum).contains(&raw.0)
                        && (ts.y.minimum..=ts.y.maximum).contains(&raw.1),
                    "{}: ({x}, {y}) at rotation {rotation} → {raw:?}",
                    ts.name
                );
                assert_eq!(
                    android_pixel(ts, &s, raw),
                    (x, y),
                    "{}: rotation {rotation}, raw {raw:?}",
                    ts.name
                );
            }
        }
    }
}

#[test]
fn points_map_through_rotation_and_scale_as_android_reads_them_back() {
    round_trips(&phone(), 1080, 2400, 7);
    let mut scaled = phone();
    scaled.name = "scaled".into();
    scaled.x = axis(0, 10799);
    scaled.y = axis(0, 23999);
    round_trips(&scaled, 1080, 2400, 13);
    let mut offset = phone();
    offset.name = "offset".into();
    offset.x = axis(-50, 4049);
    offset.y = axis(100, 9099);
    round_trips(&offset, 1080, 2400, 11);
    // Concrete values: a quarter turn of a 1080x2400 panel, seen as 2400x1080.
    let turned = Screen {
        rotation: 1,
        ..UPRIGHT
    };
    assert_eq!(turned.to_raw(&phone(), 0, 0), Ok((1079, 0)));
    assert_eq!(turned.to_raw(&phone(), 2399, 1079), Ok((0, 2399)));
    assert!(turned.to_raw(&phone(), 100, 1080).is_err());
}

#[test]
fn the_corpus_tablet_maps_through_its_tenfold_axis() {
    let Some(root) = corpus::root_or_skip() else {
        return;
    };
    let text = corpus::text(&std::fs::read(root.join("input/vivo_pad_getevent_lp.txt")).unwrap());
    let devices = getevent::devices(&text);
    assert_eq!(devices.len(), 8);
    let touch: Vec<(&String, Touchscreen)> = devices
        .iter()
        .filter_map(|(node, caps)| caps.touchscreen().map(|t| (node, t)))
        .collect();
    // vivo_ts only: the pen has no multi-touch axes, vivo_ts_fp no slots and no
    // INPUT_PROP_DIRECT.
    assert_eq!(touch.len(), 1, "{touch:?}");
    let (node, ts) = &touch[0];
    assert_eq!(node.as_str(), "/dev/input/event6");
    assert_eq!(
        (ts.name.as_str(), ts.x.maximum, ts.y.maximum),
        ("vivo_ts", 20639, 30959)
    );
    assert_eq!(
        (
            ts.slot_count(),
            ts.pressure,
            ts.btn_touch,
            ts.btn_tool_finger
        ),
        (10, None, true, true)
    );
    assert_eq!(ts.touch_major.map(|a| a.maximum), Some(31));
    // Its display, as the same tablet's dumpsys input states it.
    let dump = corpus::text(&std::fs::read(root.join("input/vivo_pad_dumpsys_input.txt")).unwrap());
    let viewports = getevent::raw_touch_axes(&dump);
    assert!(
        viewports.contains(&(ts.x, ts.y, 2064, 3096))
            || viewports.iter().any(|v| (v.2, v.3) == (2064, 3096))
    );
    let s = Screen {
        width: 2064,
        height: 3096,
        rotation: 0,
    };
    assert_eq!(s.to_raw(ts, 0, 0), Ok((5, 5)));
    assert_eq!(s.to_raw(ts, 2063, 3095), Ok((20635, 30955)));
    round_trips(ts, 2064, 3096, 37);
}

#[test]
fn every_corpus_touchscreen_maps_back_to_the_same_pixel() {
    let Some(root) = corpus::root_or_skip() else {
        return;
    };
    let mut seen = 0;
    for (name, text) in corpus::files(&root, "input") {
        if !name.contains("dumpsys_input") {
            continue;
        }
        for (x, y, w, h) in getevent::raw_touch_axes(&text) {
            let ts = Touchscreen {
                name: format!("{name} {w}x{h}"),
                x,
                y,
                ..phone()
            };
            round_trips(&ts, w, h, 97);
            seen += 1;
        }
    }
    // vivo (2), vivo tablet (2 + 2), HONOR, Xiaomi pad and sdm845 at least.
    assert!(
        seen >= 6,
        "{seen} touchscreens in the corpus's dumpsys input"
    );
}

#[test]
fn a_finger_on_the_glass_stops_the_gesture() {
    let idle = Contacts {
        tracking_ids: vec![-1; 10],
        touching: false,
    };
    assert_eq!(idle.busy(), None);
    let mut held = idle.clone();
    held.tracking_ids[3] = 812;
    let why = held.busy().unwrap();
    assert!(why.contains("slot 3 (tracking id 812)") && why.contains("nothing was injected"));
    let pressed = Contacts {
        touching: true,
        ..idle
    };
    assert!(pressed.busy().unwrap().contains("BTN_TOUCH"));
}

#[test]
fn the_helper_request_survives_its_json() {
    let req = Request {
        screen: Screen {
            width: 1080,
            height: 2400,
            rotation: 3,
        },
        gesture: Gesture::drag((1, 2), (300, 400), 800, 500),
        input_dir: "/dev/input".into(),
        uinput: "/dev/uinput".into(),
    };
    assert_eq!(Request::from_json(&req.to_json()), Ok(req));
    for bad in [
        json!({}),
        json!({"screen": [1, 2], "strokes": [], "input_dir": "/d", "uinput": "/u"}),
        json!({"screen": [1, 2, 0], "strokes": [[[0, -1, 2]]], "input_dir": "/d", "uinput": "/u"}),
        json!({"screen": [1, 2, 0], "strokes": [[[0, 1]]], "input_dir": "/d", "uinput": "/u"}),
        json!({"screen": [1, 2, 0], "strokes": [], "input_dir": 5, "uinput": "/u"}),
    ] {
        assert!(Request::from_json(&bad).is_err(), "{bad}");
    }
}

#[test]
fn without_a_touchscreen_the_helper_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let req = |d: &std::path::Path| Request {
        screen: UPRIGHT,
        gesture: Gesture::tap((1, 1)),
        input_dir: d.to_path_buf(),
        uinput: d.join("uinput"),
    };
    let answer = helper::run(&req(&dir.path().join("missing")));
    assert_eq!(answer["outcome"], "unavailable");
    assert!(answer["why"].as_str().unwrap().contains("cannot be read"));
    // A node that is no event device (a plain file answers ENOTTY to the ioctls).
    std::fs::write(dir.path().join("event0"), b"").unwrap();
    std::fs::write(dir.path().join("mice"), b"").unwrap();
    let answer = helper::run(&req(dir.path()));
    assert_eq!(answer["outcome"], "unavailable", "{answer}");
    let why = answer["why"].as_str().unwrap();
    assert!(
        why.contains("among the 1 event devices") && why.contains("event0"),
        "{why}"
    );
}

#[test]
fn frames_are_written_whole_and_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sink");
    let file = std::fs::File::create(&path).unwrap();
    let planned = frames(&Gesture::press((10, 20), 30), &phone(), &UPRIGHT, 0).unwrap();
    let start = Instant::now();
    let last = device::write_frames(&file, &planned, start).unwrap();
    assert!(last.duration_since(start).as_millis() >= 30);
    let bytes = std::fs::read(&path).unwrap();
    let size = std::mem::size_of::<crate::sys::evdev::RawEvent>();
    let written: Vec<(u16, u16, i32)> = bytes
        .chunks_exact(size)
        .map(|c| {
            let at = size - 8;
            (
                u16::from_ne_bytes([c[at], c[at + 1]]),
                u16::from_ne_bytes([c[at + 2], c[at + 3]]),
                i32::from_ne_bytes([c[at + 4], c[at + 5], c[at + 6], c[at + 7]]),
            )
        })
        .collect();
    let want: Vec<(u16, u16, i32)> = planned
        .iter()
        .flat_map(|f| f.events.iter().map(|e| (e.kind, e.code, e.value)))
        .collect();
    assert_eq!(written, want);
}

#[test]
fn caps_without_direct_or_slots_are_no_touchscreen() {
    let ts = phone();
    let mut caps = Caps {
        name: "panel".into(),
        abs: [
            (ABS_MT_SLOT, ts.slot),
            (ABS_MT_TRACKING_ID, ts.tracking),
            (ABS_MT_POSITION_X, ts.x),
            (ABS_MT_POSITION_Y, ts.y),
        ]
        .into_iter()
        .collect(),
        keys: [BTN_TOUCH].into_iter().collect(),
        direct: true,
    };
    assert!(caps.touchscreen().is_some());
    caps.name = device::VIRTUAL_NAME.into();
    assert!(
        caps.touchscreen().is_none(),
        "nl2sh's own virtual touchscreen"
    );
    caps.name = "panel".into();
    caps.direct = false;
    assert!(caps.touchscreen().is_none(), "a touchpad");
    caps.direct = true;
    caps.abs.remove(&ABS_MT_SLOT);
    assert!(caps.touchscreen().is_none(), "protocol A");
}

/// Through the tools: without a touchscreen a tap falls back to `input` and says so; a
/// gesture `input` cannot make fails, saying why; a point off the screen is refused.
#[tokio::test]
async fn the_tools_say_which_path_they_took() {
    use crate::tools::android::tests::Rig;
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.tap", json!({"x": 5, "y": 6})).await;
    assert_eq!(v["path"], "input", "{v}");
    assert!(
        v["why"].as_str().unwrap().contains("no event devices"),
        "{v}"
    );
    let (v, _) = rig
        .ok("android.swipe", json!({"x1": 1, "y1": 2, "x2": 3, "y2": 4}))
        .await;
    assert_eq!(v["path"], "input", "{v}");
    for (tool, args) in [
        ("android.double_tap", json!({"x": 5, "y": 6})),
        (
            "android.pinch",
            json!({"x": 500, "y": 600, "from": 100, "to": 300}),
        ),
        (
            "android.drag",
            json!({"x": 5, "y": 6, "to_x": 50, "to_y": 60}),
        ),
    ] {
        let err = rig.run(tool, args).await.unwrap_err().to_string();
        assert!(
            err.contains("needs a touchscreen nl2sh can write, and there are no event devices"),
            "{tool}: {err}"
        );
    }
    assert_eq!(
        rig.ran().iter().filter(|l| l.starts_with("input ")).count(),
        2,
        "{:?}",
        rig.ran()
    );
}

/// With event devices but a display too small for the point, nothing is injected.
#[tokio::test]
async fn a_point_off_the_display_is_refused_before_any_input() {
    use crate::tools::android::tests::Rig;
    let mut rig = Rig::new(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("event0"), b"").unwrap();
    let mut env = (*rig.env).clone();
    env.touch.input_dir = dir.path().to_path_buf();
    rig.env = std::sync::Arc::new(env);
    let err = rig
        .run(
            "android.pinch",
            json!({"x": 5000, "y": 600, "from": 100, "to": 300}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("is off the"), "{err}");
    assert!(!rig.ran().iter().any(|l| l.starts_with("input ")));
}

/// An aimed tap reads `dumpsys window` while preparing and again when it checks the
/// screen before input; the touch engine takes the display from that second read rather
/// than a third. (A stand-in helper answers that no touchscreen is usable: the tap then
/// falls back to `input`, saying the helper's reason.)
#[tokio::test]
async fn an_aimed_tap_reads_the_display_once_more_not_twice() {
    use crate::tools::android::tests::Rig;
    use std::os::unix::fs::PermissionsExt;
    let mut rig = Rig::new(&[]);
    let helper = rig.dir.join("touch-helper");
    std::fs::write(
        &helper,
        "#!/bin/sh\ncat >/dev/null\necho '{\"outcome\":\"unavailable\",\"why\":\"stand-in helper\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(rig.dir.join("event0"), b"").unwrap();
    let mut env = (*rig.env).clone();
    env.touch.input_dir = rig.dir.clone();
    env.touch.helper = vec![helper.display().to_string()];
    rig.env = std::sync::Arc::new(env);
    let (v, _) = rig
        .ok("android.tap", json!({"element": {"text": "Battery"}}))
        .await;
    assert_eq!(
        (&v["path"], &v["why"]),
        (&json!("input"), &json!("stand-in helper")),
        "{v}"
    );
    let windows = rig.ran().iter().filter(|l| *l == "dumpsys window").count();
    assert_eq!(windows, 2, "{:?}", rig.ran());
}
