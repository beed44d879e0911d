//! Parsers for what `dumpsys window`, `dumpsys activity`, `dumpsys power`, `dumpsys
//! deviceidle`, `dumpsys battery`, `wm size` and `wm density` print, as the shell gives it.
//!
//! The formats differ by version and vendor, so each fact is read from every spelling
//! seen on real devices (docs/PROTOCOLS.md, `android.device_state`), first match wins, and
//! a fact no line states stays `None`: nothing is guessed. The parsers are line based and
//! read each line once; they take any text and never fail.

use super::apps::parse_focus;

/// One display's size in pixels and density in dpi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Display {
    pub width: u32,
    pub height: u32,
    pub density: Option<u32>,
}

/// What one `dumpsys` text says about the device's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `mWakefulness=` (`dumpsys power`): Awake, Asleep, Dreaming, Dozing.
    pub wakefulness: Option<String>,
    /// Whether the screen is on, and the key that said so.
    pub screen_on: Option<(bool, &'static str)>,
    /// Whether the keyguard (lock screen) shows, and the key that said so.
    pub locked: Option<(bool, &'static str)>,
    /// 0..=3 (quarter turns), from `mRotation=` or `ROTATION_n`.
    pub rotation: Option<u8>,
    /// `init=WxH Ndpi`: the display as built.
    pub physical: Option<Display>,
    /// `base=WxH Ndpi`: printed only when `wm size`/`wm density` override the built one.
    pub overridden: Option<Display>,
    /// `mBatteryLevel=` (`dumpsys power`).
    pub battery_level: Option<u8>,
    /// `mIsPowered=` (`dumpsys power`): plugged in.
    pub powered: Option<bool>,
}

/// `key=value` anywhere on a line, at a word start; the value ends at whitespace.
fn token<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = line[from..].find(key) {
        let start = from + at;
        let end = start + key.len();
        let boundary = start == 0
            || line[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || c == '{' || c == ',');
        if boundary {
            let rest = &line[end..];
            let value = rest.split_whitespace().next().unwrap_or("");
            return Some(value.trim_end_matches([',', '}']));
        }
        from = end;
    }
    None
}

fn bool_of(v: &str) -> Option<bool> {
    match v {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// `1080x2340` and an optional following `440dpi`.
fn display_at(line: &str, key: &str) -> Option<Display> {
    let at = line.find(key)?;
    let mut words = line[at + key.len()..].split_whitespace();
    let (w, h) = words.next()?.split_once('x')?;
    let density = words
        .next()
        .and_then(|d| d.strip_suffix("dpi"))
        .and_then(|d| d.parse().ok());
    Some(Display {
        width: w.parse().ok()?,
        height: h.parse().ok()?,
        density,
    })
}

/// Keys that say whether the screen is on, best first: the window policy's own
/// (`mAwake` in Android 12+, `mScreenOnFully` before), then deviceidle's `mScreenOn`.
const SCREEN_KEYS: [&str; 3] = ["mAwake=", "mScreenOnFully=", "mScreenOn="];
/// Keys that say whether the keyguard shows, best first: the display policy's
/// `isKeyguardShowing` (Android 12+), the KeyguardController's `mKeyguardShowing`
/// (`dumpsys activity`), the policy's older `mShowingLockscreen`.
const LOCK_KEYS: [&str; 3] = [
    "isKeyguardShowing=",
    "mKeyguardShowing=",
    "mShowingLockscreen=",
];

/// The facts one `dumpsys` text states (any service: unknown lines are skipped).
pub fn facts(text: &str) -> Facts {
    let mut f = Facts::default();
    let mut screen: [Option<bool>; 3] = [None; 3];
    let mut lock: [Option<bool>; 4] = [None; 4];
    let mut in_keyguard_delegate = false;
    let mut display_power = None;
    let (mut rotation, mut config_rotation) = (None, None);
    for line in text.lines() {
        let trimmed = line.trim();
        for (i, key) in SCREEN_KEYS.iter().enumerate() {
            if screen[i].is_none() {
                screen[i] = token(line, key).and_then(bool_of);
            }
        }
        for (i, key) in LOCK_KEYS.iter().enumerate() {
            if lock[i].is_none() {
                lock[i] = token(line, key).and_then(bool_of);
            }
        }
        // The window policy's `KeyguardServiceDelegate` block: `showing=` on its own line.
        if trimmed == "KeyguardServiceDelegate" {
            in_keyguard_delegate = true;
        } else if in_keyguard_delegate {
            if let Some(v) = trimmed.strip_prefix("showing=").and_then(bool_of) {
                lock[3].get_or_insert(v);
                in_keyguard_delegate = false;
            } else if !trimmed.contains('=') {
                in_keyguard_delegate = false;
            }
        }
        if display_power.is_none() {
            // Android 4–9 `dumpsys power`: `Display Power: state=ON`.
            display_power = trimmed
                .strip_prefix("Display Power: state=")
                .map(|s| s != "OFF");
        }
        if f.wakefulness.is_none() {
            f.wakefulness = token(line, "mWakefulness=")
                .filter(|v| !v.is_empty() && v.len() <= 32)
                .map(str::to_string);
        }
        // The display's own `mRotation=1` / `mCurrentRotation=ROTATION_90` first; a
        // configuration's `mRotation=ROTATION_90` (a window's view of it) only failing those.
        if rotation.is_none() {
            rotation = token(line, "mRotation=")
                .and_then(|v| v.parse::<u8>().ok())
                .or_else(|| token(line, "mCurrentRotation=").and_then(rotation_name))
                .filter(|r| *r < 4);
        }
        if config_rotation.is_none() {
            config_rotation = token(line, "mRotation=").and_then(rotation_name);
        }
        if f.physical.is_none() && trimmed.starts_with("init=") {
            f.physical = display_at(trimmed, "init=");
            f.overridden = display_at(trimmed, " base=");
        }
        if f.battery_level.is_none() {
            f.battery_level = token(line, "mBatteryLevel=")
                .and_then(|v| v.parse().ok())
                .filter(|l| *l <= 100);
        }
        if f.powered.is_none() {
            f.powered = token(line, "mIsPowered=").and_then(bool_of);
        }
    }
    f.rotation = rotation.or(config_rotation);
    f.screen_on = screen
        .iter()
        .zip(SCREEN_KEYS)
        .find_map(|(v, k)| v.map(|v| (v, k.trim_end_matches('='))))
        .or(display_power.map(|v| (v, "Display Power")));
    let lock_keys = [LOCK_KEYS[0], LOCK_KEYS[1], LOCK_KEYS[2], "showing="];
    f.locked = lock
        .iter()
        .zip(lock_keys)
        .find_map(|(v, k)| v.map(|v| (v, k.trim_end_matches('='))));
    f
}

/// `ROTATION_90` → 1.
fn rotation_name(v: &str) -> Option<u8> {
    match v.strip_prefix("ROTATION_")? {
        "0" => Some(0),
        "90" => Some(1),
        "180" => Some(2),
        "270" => Some(3),
        _ => None,
    }
}

/// Whether the wakefulness `mWakefulness` names has the screen lit.
pub fn wakefulness_on(w: &str) -> Option<bool> {
    match w {
        "Awake" | "Dreaming" => Some(true),
        "Asleep" | "Dozing" => Some(false),
        _ => None,
    }
}

/// The focused window's title and whether it is secure (`FLAG_SECURE`: its content is
/// captured black), from `dumpsys window` (`windows` section). `None` for the flag when the
/// text has no block for the focused window (e.g. `dumpsys window displays` alone).
pub fn focused_window(text: &str) -> (Option<String>, Option<bool>) {
    let (_, title) = parse_focus(text);
    let Some(focus_line) = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("mCurrentFocus="))
    else {
        return (title, None);
    };
    // `Window{8d3e0f1 u0 title}`: the block header is `Window #N Window{8d3e0f1 u0 title}:`.
    let window = focus_line.trim();
    if !window.starts_with("Window{") || window == "null" {
        return (title, None);
    }
    let mut in_block = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("Window #") {
            if in_block {
                break;
            }
            in_block = t
                .split_once(' ')
                .and_then(|(_, rest)| rest.split_once(' '))
                .is_some_and(|(_, w)| w.trim_end_matches(':') == window);
            continue;
        }
        if in_block {
            if let Some(flags) = t.strip_prefix("fl=") {
                return (title, Some(secure_flags(flags)));
            }
        }
    }
    (title, None)
}

/// `fl=` of a window's attributes: names (`SECURE`, or `FLAG_SECURE` where the name
/// table lacks one) or, before Android 8, `#hex` (`FLAG_SECURE` is 0x2000).
fn secure_flags(flags: &str) -> bool {
    if let Some(hex) = flags.strip_prefix('#') {
        let hex = hex.split_whitespace().next().unwrap_or("");
        return u32::from_str_radix(hex, 16).is_ok_and(|v| v & 0x2000 != 0);
    }
    flags
        .split_whitespace()
        .any(|f| f == "SECURE" || f == "FLAG_SECURE")
}

/// `dumpsys battery`'s state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Battery {
    /// Percent (level scaled by `scale`).
    pub level: Option<u8>,
    /// `status: 2` (BATTERY_STATUS_CHARGING); 5 (full) while plugged counts as not charging.
    pub charging: Option<bool>,
    /// Which source powers it: `ac`, `usb`, `wireless`, `dock`, or none.
    pub plugged: Option<Vec<&'static str>>,
}

/// `dumpsys battery`: `  level: 87`, `  status: 2`, `  AC powered: false`, ...
pub fn battery(text: &str) -> Battery {
    let mut level = None;
    let mut scale = None;
    let mut status = None;
    let mut sources: Vec<&'static str> = Vec::new();
    let mut saw_source = false;
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "level" => level = level.or(value.parse::<u32>().ok()),
            "scale" => scale = scale.or(value.parse::<u32>().ok()),
            "status" => status = status.or(value.parse::<u32>().ok()),
            "AC powered" | "USB powered" | "Wireless powered" | "Dock powered" => {
                saw_source = true;
                if value == "true" {
                    sources.push(match key {
                        "AC powered" => "ac",
                        "USB powered" => "usb",
                        "Wireless powered" => "wireless",
                        _ => "dock",
                    });
                }
            }
            _ => {}
        }
    }
    let level = match (level, scale) {
        (Some(l), Some(s)) if s > 0 && l <= s => Some((l * 100 / s) as u8),
        (Some(l), None) if l <= 100 => Some(l as u8),
        _ => None,
    };
    Battery {
        level,
        charging: status.map(|s| s == 2),
        plugged: saw_source.then_some(sources),
    }
}

/// `wm size` / `wm density`: the physical value and the override when one is set
/// (`Physical size: 1080x2400` / `Override size: 720x1600`, `Physical density: 420`).
pub fn wm(size: &str, density: &str) -> (Option<Display>, Option<Display>) {
    let value = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let dims = |v: Option<String>| -> Option<(u32, u32)> {
        let v = v?;
        let (w, h) = v.split_once('x')?;
        Some((w.parse().ok()?, h.parse().ok()?))
    };
    let dpi = |v: Option<String>| v.and_then(|d| d.parse::<u32>().ok());
    let physical = dims(value(size, "Physical size:")).map(|(width, height)| Display {
        width,
        height,
        density: dpi(value(density, "Physical density:")),
    });
    let override_size = dims(value(size, "Override size:"));
    let override_density = dpi(value(density, "Override density:"));
    let overridden = match (override_size, override_density, physical) {
        (None, None, _) => None,
        (Some((width, height)), d, p) => Some(Display {
            width,
            height,
            density: d.or(p.and_then(|p| p.density)),
        }),
        (None, d, Some(p)) => Some(Display { density: d, ..p }),
        (None, _, None) => None,
    };
    (physical, overridden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_start_at_a_word() {
        assert_eq!(
            token("  mAwake=true mScreenOnFully=false", "mAwake="),
            Some("true")
        );
        assert_eq!(token("  xmAwake=true", "mAwake="), None);
        assert_eq!(
            token(
                "a mScreenOnEarly=true mScreenOnFully=false",
                "mScreenOnFully="
            ),
            Some("false")
        );
    }

    #[test]
    fn secure_flags_in_every_spelling() {
        assert!(secure_flags("LAYOUT_IN_SCREEN SECURE SPLIT_TOUCH"));
        assert!(secure_flags("FLAG_SECURE"));
        assert!(secure_flags("#81812100 pfl=0x0"));
        assert!(!secure_flags("#81810100"));
        assert!(!secure_flags("NOT_FOCUSABLE FLAG_SLIPPERY"));
        assert!(!secure_flags("SECURE_X"));
    }

    #[test]
    fn battery_service_state() {
        let b = battery("Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  Wireless powered: false\n  status: 2\n  level: 87\n  scale: 100\n");
        assert_eq!(b.level, Some(87));
        assert_eq!(b.charging, Some(true));
        assert_eq!(b.plugged, Some(vec!["usb"]));
        let b = battery("  level: 3\n  scale: 4\n  status: 5\n");
        assert_eq!(
            (b.level, b.charging, b.plugged),
            (Some(75), Some(false), None)
        );
        assert_eq!(battery("junk").level, None);
    }

    #[test]
    fn wm_physical_and_override() {
        let (p, o) = wm(
            "Physical size: 1080x2400\nOverride size: 720x1600\n",
            "Physical density: 420\nOverride density: 320\n",
        );
        assert_eq!(
            p,
            Some(Display {
                width: 1080,
                height: 2400,
                density: Some(420)
            })
        );
        assert_eq!(
            o,
            Some(Display {
                width: 720,
                height: 1600,
                density: Some(320)
            })
        );
        let (p, o) = wm("Physical size: 540x1200", "Physical density: 280");
        assert_eq!(
            p,
            Some(Display {
                width: 540,
                height: 1200,
                density: Some(280)
            })
        );
        assert_eq!(o, None);
        assert_eq!(wm("Error: no display", ""), (None, None));
    }

    #[test]
    fn old_display_power_line() {
        let f = facts("POWER MANAGER\n  Display Power: state=OFF\n");
        assert_eq!(f.screen_on, Some((false, "Display Power")));
    }
}

#[cfg(test)]
mod corpus_tests {
    //! Every matching file of the real-device corpus through the parsers, with the values
    //! read from each file by hand (the line that says it is named beside each).

    use super::super::corpus;
    use super::*;

    /// What one file must yield: screen on, locked, rotation, physical WxH@dpi, override
    /// dpi, focus package, focused window title, secure, wakefulness, battery, powered.
    struct Want {
        screen_on: Option<(bool, &'static str)>,
        locked: Option<(bool, &'static str)>,
        rotation: Option<u8>,
        physical: Option<(u32, u32, u32)>,
        override_dpi: Option<u32>,
        package: Option<&'static str>,
        title: Option<&'static str>,
        wakefulness: Option<&'static str>,
        battery: Option<(u8, bool)>,
    }

    const NONE: Want = Want {
        screen_on: None,
        locked: None,
        rotation: None,
        physical: None,
        override_dpi: None,
        package: None,
        title: None,
        wakefulness: None,
        battery: None,
    };

    fn want(name: &str) -> Option<Want> {
        let mtk_displays = Want {
            // `mAwake=false mScreenOnEarly=false`, `isKeyguardShowing=true`, `mRotation=0`,
            // `init=480x800 240dpi`, `mFocusedApp=ActivityRecord{… com.mediatek.camera/…`,
            // `mCurrentFocus=Window{1651cd4 u0 NotificationShade}`.
            screen_on: Some((false, "mAwake")),
            locked: Some((true, "isKeyguardShowing")),
            rotation: Some(0),
            physical: Some((480, 800, 240)),
            package: Some("com.mediatek.camera"),
            title: Some("NotificationShade"),
            ..NONE
        };
        Some(match name {
            // Full `dumpsys activity` (Android 9/10 emulator, Android 9 car unit): the
            // KeyguardController's `mKeyguardShowing=false`, `mWakefulness=Awake`,
            // `mResumedActivity: ActivityRecord{…}`; no window-policy lines.
            "dumpsys-window/emu_zhTW_land_dumpsys_activity_full_utf16le.txt" => Want {
                locked: Some((false, "mKeyguardShowing")),
                package: Some("com.nexon.bluearchive"),
                wakefulness: Some("Awake"),
                ..NONE
            },
            "dumpsys-window/gwm_haval_hu_android9_dumpsys_partial.txt" => Want {
                locked: Some((false, "mKeyguardShowing")),
                package: Some("com.beantechs.vehiclecenter"),
                wakefulness: Some("Awake"),
                ..NONE
            },
            // `dumpsys window windows` alone (Android 13 MTK, Android 15 emulator): no focus
            // line; rotation only from the windows' configurations (`mRotation=ROTATION_0`).
            "dumpsys-window/mtk_a13_bugreport_slice_dumpsys_window_windows.txt"
            | "dumpsys-window/pixel_emu_dumpsys_window_windows.txt" => Want {
                rotation: Some(0),
                ..NONE
            },
            "dumpsys-window/mtk_smll_dumpsys_activity_activities.txt"
            | "state/mtk_smll_locked_dumpsys_activity_activities.txt"
            | "display/mtk_a13_bugreport_slice_dumpsys_window_displays.txt" => mtk_displays,
            // Pixel (nexuslauncher, `init=1080x2340 440dpi`), Samsung One UI (`450dpi`),
            // Xiaomi HyperOS (`init=1800x2880 400dpi … base=1800x2880 411dpi`: density
            // overridden): `mAwake=true`, `isKeyguardShowing=false`, `mRotation=0`.
            "dumpsys-window/pixel_440dpi_dumpsys_activity_activities_utf16le.txt" => Want {
                screen_on: Some((true, "mAwake")),
                locked: Some((false, "isKeyguardShowing")),
                rotation: Some(0),
                physical: Some((1080, 2340, 440)),
                package: Some("com.google.android.apps.nexuslauncher"),
                title: Some("com.google.android.apps.nexuslauncher/com.google.android.apps.nexuslauncher.NexusLauncherActivity"),
                ..NONE
            },
            "dumpsys-window/samsung_oneui_dumpsys_activity_activities_utf16le.txt" => Want {
                screen_on: Some((true, "mAwake")),
                locked: Some((false, "isKeyguardShowing")),
                rotation: Some(0),
                physical: Some((1080, 2340, 450)),
                package: Some("com.sec.android.app.launcher"),
                title: Some("com.sec.android.app.launcher/com.sec.android.app.launcher.activities.LauncherActivity"),
                ..NONE
            },
            "dumpsys-window/xiaomi_pad6_a14_dumpsys_activity_full.txt" => Want {
                screen_on: Some((true, "mAwake")),
                locked: Some((false, "isKeyguardShowing")),
                rotation: Some(0),
                physical: Some((1800, 2880, 400)),
                override_dpi: Some(411),
                package: Some("com.termux"),
                title: Some("com.termux/com.termux.app.TermuxActivity"),
                wakefulness: Some("Awake"),
                ..NONE
            },
            // `dumpsys activity top` (vivo): TASK/ACTIVITY blocks; only the activities'
            // configurations (`mRotation=ROTATION_0`) say anything read here.
            "dumpsys-window/vivo_mt6835_dumpsys_activity_top_utf16le.txt" => Want {
                rotation: Some(0),
                ..NONE
            },
            // `dumpsys deviceidle`: `mScreenOn=false` (MTK) / `mScreenOn=true` (Xiaomi).
            "state/mtk_a13_bugreport_slice_dumpsys_deviceidle.txt" => Want {
                screen_on: Some((false, "mScreenOn")),
                ..NONE
            },
            "state/xiaomi_pad6_a14_dumpsys_deviceidle.txt" => Want {
                screen_on: Some((true, "mScreenOn")),
                ..NONE
            },
            // `dumpsys window policy` (Android 13): `KeyguardServiceDelegate` / `showing=true`.
            "state/mtk_a13_bugreport_slice_dumpsys_window_policy.txt" => Want {
                locked: Some((true, "showing")),
                ..NONE
            },
            // `dumpsys power`: `mWakefulness=…`, `mIsPowered=true`, `mBatteryLevel=…`.
            "state/mtk_smll_dumpsys_power.txt" => Want {
                wakefulness: Some("Asleep"),
                battery: Some((57, true)),
                ..NONE
            },
            "state/vivo_mt6835_dumpsys_power_utf16le.txt" => Want {
                wakefulness: Some("Awake"),
                battery: Some((77, true)),
                ..NONE
            },
            "state/xiaomi_pad6_a14_dumpsys_power.txt" => Want {
                wakefulness: Some("Awake"),
                battery: Some((22, true)),
                ..NONE
            },
            // `dumpsys display`: none of these keys (its `FLAG_SECURE` is the display's).
            "display/mtk_smll_dumpsys_display.txt" | "display/xiaomi_pad6_a14_dumpsys_display.txt" => {
                NONE
            }
            _ => return None,
        })
    }

    #[test]
    fn every_state_file_yields_what_it_says() {
        let Some(root) = corpus::root_or_skip() else {
            return;
        };
        let mut seen = 0;
        for dir in ["dumpsys-window", "state", "display"] {
            for (name, text) in corpus::files(&root, dir) {
                let want = want(&name).unwrap_or_else(|| panic!("{name}: no expected values"));
                let f = facts(&text);
                let (title, secure) = focused_window(&text);
                assert_eq!(f.screen_on, want.screen_on, "{name}: screen");
                assert_eq!(f.locked, want.locked, "{name}: locked");
                assert_eq!(f.rotation, want.rotation, "{name}: rotation");
                assert_eq!(
                    f.physical
                        .map(|d| (d.width, d.height, d.density.unwrap_or(0))),
                    want.physical,
                    "{name}: physical display"
                );
                assert_eq!(
                    f.overridden.and_then(|d| d.density),
                    want.override_dpi,
                    "{name}: override"
                );
                assert_eq!(
                    parse_focus(&text).0.map(|f| f.package),
                    want.package.map(String::from),
                    "{name}: focus"
                );
                assert_eq!(title.as_deref(), want.title, "{name}: focused window");
                // No file holds both the focus line and the windows' blocks.
                assert_eq!(secure, None, "{name}: secure");
                assert_eq!(
                    f.wakefulness.as_deref(),
                    want.wakefulness,
                    "{name}: wakefulness"
                );
                assert_eq!(
                    f.battery_level.zip(f.powered),
                    want.battery,
                    "{name}: battery"
                );
                seen += 1;
            }
        }
        assert_eq!(seen, 19, "every state file was read");
    }

    /// `dumpsys window` prints the displays section (the focus) before the windows (their
    /// attributes): the two slices of one MTK bugreport, joined, are that output.
    #[test]
    fn the_focused_window_of_a_real_bugreport_is_not_secure() {
        let Some(root) = corpus::root_or_skip() else {
            return;
        };
        let read = |p: &str| corpus::text(&std::fs::read(root.join(p)).expect(p));
        let joined = read("display/mtk_a13_bugreport_slice_dumpsys_window_displays.txt")
            + &read("dumpsys-window/mtk_a13_bugreport_slice_dumpsys_window_windows.txt");
        let (title, secure) = focused_window(&joined);
        assert_eq!(title.as_deref(), Some("NotificationShade"));
        // `fl=TOUCHABLE_WHEN_WAKING ALT_FOCUSABLE_IM … DRAWS_SYSTEM_BAR_BACKGROUNDS`.
        assert_eq!(secure, Some(false));
        // The same output with SECURE added to that window's flags says so.
        let marked = joined.replacen(
            "fl=TOUCHABLE_WHEN_WAKING ALT_FOCUSABLE_IM",
            "fl=TOUCHABLE_WHEN_WAKING SECURE ALT_FOCUSABLE_IM",
            1,
        );
        assert_ne!(marked, joined);
        assert_eq!(focused_window(&marked).1, Some(true));
    }
}
