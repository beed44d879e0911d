//! Android tool registration and preparation through the crate's public API, with the
//! stand-in programs of `tests/fixtures/android-bin/` first on PATH, found by capability
//! discovery the same way as real ones. (Running the prepared actions needs an
//! `ExecContext`, which only the crate can build: those tests are in
//! `src/tools/android/tests.rs`.)

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use nl2sh_executor::device::DeviceEnv;
use nl2sh_executor::tools::android::{register, SCREEN_READ_TOOL};
use nl2sh_executor::tools::schema::unknown_keywords;
use nl2sh_executor::tools::Resource;
use nl2sh_executor::tools::{Prepared, Tool, ToolError};
use nl2sh_proto::channels::{Confinement, RiskLevel};

const ALL: [&str; 27] = [
    "android.screen_dump",
    "android.screenshot",
    "android.tap",
    "android.long_press",
    "android.swipe",
    "android.double_tap",
    "android.drag",
    "android.pinch",
    "android.gesture",
    "android.text",
    "android.key",
    "android.launch",
    "android.packages",
    "android.current_app",
    "android.logcat",
    "android.dumpsys",
    "android.device_state",
    "android.wait_for",
    "android.notifications",
    "android.open_url",
    "android.intent",
    "android.stop_app",
    "android.install",
    "android.uninstall",
    "android.wake",
    "android.sleep",
    "android.clipboard_get",
];

fn standins() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/android-bin")
}

fn probe(first: &std::path::Path) -> DeviceEnv {
    let path = format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    DeviceEnv::probe(Some(path))
}

fn tools(env: &DeviceEnv) -> Vec<Box<dyn Tool>> {
    let mut tools = Vec::new();
    register(env, &mut tools);
    tools
}

fn names(tools: &[Box<dyn Tool>]) -> Vec<&'static str> {
    tools.iter().map(|t| t.def().name).collect()
}

/// `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`
fn valid_tool_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            p.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

#[test]
fn every_android_tool_registers_with_the_standins_on_path() {
    let env = probe(&standins());
    assert!(env.android, "the getprop stand-in makes an Android profile");
    let tools = tools(&env);
    assert_eq!(names(&tools), ALL);
    assert!(names(&tools).contains(&SCREEN_READ_TOOL));
    for t in &tools {
        let d = t.def();
        assert!(valid_tool_name(d.name), "{}", d.name);
        let unknown = unknown_keywords(&d.schema);
        assert!(unknown.is_empty(), "{}: {unknown:?}", d.name);
        assert_eq!(d.schema["type"], "object", "{}", d.name);
        assert_eq!(d.schema["additionalProperties"], false, "{}", d.name);
        assert!(!d.description.is_empty());
    }
}

#[test]
fn nothing_registers_without_the_programs_or_an_android_profile() {
    let empty = std::env::temp_dir().join(format!("nl2sh-empty-path-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let env = DeviceEnv::probe(Some(empty.display().to_string()));
    assert!(tools(&env).is_empty());
    // Android profile, but none of the programs.
    let mut bare = env.clone();
    bare.android = true;
    assert!(tools(&bare).is_empty());
    // Programs, but not Android.
    let mut linux = probe(&standins());
    linux.android = false;
    assert!(tools(&linux).is_empty());
    // Only the programs present register their tools.
    let mut some = probe(&standins());
    some.programs
        .retain(|name, _| ["input", "getprop"].contains(name));
    assert_eq!(
        names(&tools(&some)),
        [
            "android.tap",
            "android.long_press",
            "android.swipe",
            "android.double_tap",
            "android.drag",
            "android.pinch",
            "android.gesture",
            "android.text",
            "android.key",
            "android.wake",
            "android.sleep"
        ]
    );
    std::fs::remove_dir(&empty).unwrap();
}

struct Device {
    env: Arc<DeviceEnv>,
    tools: Vec<Box<dyn Tool>>,
}

impl Device {
    fn new() -> Self {
        let env = probe(&standins());
        let tools = tools(&env);
        Self {
            env: Arc::new(env),
            tools,
        }
    }

    fn prepare(&self, name: &str, args: Value) -> Result<Prepared, ToolError> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.def().name == name)
            .expect(name);
        let args: Map<String, Value> = serde_json::from_value(args).unwrap();
        tool.prepare(&args, &self.env)
    }

    /// The action text with the stand-in directory dropped, as `input tap 1 2`.
    fn action(&self, name: &str, args: Value) -> String {
        let p = self
            .prepare(name, args)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let dir = format!("{}/", standins().display());
        p.action.replace(&dir, "")
    }
}

#[test]
fn prepared_actions_say_exactly_what_will_run() {
    let d = Device::new();
    assert_eq!(
        d.action("android.tap", json!({"x": 10, "y": 20})),
        "tap no clickable element, in com.android.settings at (10, 20): \
         through the touchscreen (or: input tap 10 20)"
    );
    assert_eq!(
        d.action(
            "android.swipe",
            json!({"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 500})
        ),
        "swipe from (1, 2) to (3, 4), through the touchscreen (or: input swipe 1 2 3 4 500)"
    );
    assert_eq!(
        d.action("android.double_tap", json!({"x": 10, "y": 20})),
        "double-tap no clickable element, in com.android.settings at (10, 20): \
         through the touchscreen"
    );
    assert_eq!(
        d.action(
            "android.drag",
            json!({"x": 10, "y": 20, "to_x": 30, "to_y": 40})
        ),
        "drag no clickable element, in com.android.settings at (10, 20) to (30, 40): \
         through the touchscreen"
    );
    assert_eq!(
        d.action(
            "android.pinch",
            json!({"x": 500, "y": 600, "from": 400, "to": 100})
        ),
        "pinch at (500, 600) from 400 to 100 pixels apart over 500 ms (zoom out), \
         through the touchscreen"
    );
    assert_eq!(
        d.action(
            "android.gesture",
            json!({"fingers": [[[1, 2], [3, 4]], [[5, 6]]], "duration_ms": 200})
        ),
        "a 2-finger gesture over 200 ms (finger 1: (1, 2) → (3, 4); finger 2: (5, 6)), \
         through the touchscreen"
    );
    assert_eq!(
        d.action("android.text", json!({"text": "a b"})),
        "input text a%sb"
    );
    assert_eq!(
        d.action("android.text", json!({"text": "it's"})),
        "input text 'it'\\''s'"
    );
    assert_eq!(
        d.action("android.key", json!({"key": "BACK"})),
        "input keyevent KEYCODE_BACK"
    );
    assert_eq!(d.action("android.screenshot", json!({})), "screencap");
    assert_eq!(d.action("android.current_app", json!({})), "dumpsys window");
    assert_eq!(
        d.action("android.packages", json!({"third_party_only": true})),
        "pm list packages -3"
    );
    assert_eq!(
        d.action(
            "android.launch",
            json!({"package": "com.a", "activity": "com.a.Main"})
        ),
        "am start -n com.a/com.a.Main"
    );
    assert_eq!(
        d.action("android.logcat", json!({})),
        "logcat -d -v threadtime -t 200"
    );
    // `*:W` is quoted: a shell would expand it.
    assert_eq!(
        d.action(
            "android.logcat",
            json!({"lines": 50, "buffer": "radio", "priority": "W", "tag": "RILJ", "contains": "x"})
        ),
        "logcat -d -v threadtime -t 50 -b radio '*:W'"
    );
    assert_eq!(
        d.action("android.dumpsys", json!({"service": "battery"})),
        "dumpsys battery"
    );
    let dump = d.action("android.screen_dump", json!({}));
    assert!(
        dump.starts_with("uiautomator dump /") && dump.ends_with(".xml"),
        "{dump}"
    );
}

#[test]
fn assessments_identities_and_locks() {
    let d = Device::new();
    let cases = [
        ("android.screen_dump", json!({}), RiskLevel::ReadOnly, true),
        ("android.screenshot", json!({}), RiskLevel::ReadOnly, true),
        // The stand-in's screen is Settings: a UI action there is high.
        (
            "android.tap",
            json!({"x": 1, "y": 1}),
            RiskLevel::High,
            true,
        ),
        (
            "android.swipe",
            json!({"x1": 1, "y1": 1, "x2": 2, "y2": 2}),
            RiskLevel::High,
            true,
        ),
        ("android.text", json!({"text": "x"}), RiskLevel::High, true),
        ("android.key", json!({"key": 4}), RiskLevel::High, true),
        (
            "android.launch",
            json!({"package": "com.a"}),
            RiskLevel::Low,
            true,
        ),
        ("android.packages", json!({}), RiskLevel::ReadOnly, false),
        ("android.current_app", json!({}), RiskLevel::ReadOnly, false),
        ("android.logcat", json!({}), RiskLevel::ReadOnly, false),
        (
            "android.dumpsys",
            json!({"service": "power"}),
            RiskLevel::ReadOnly,
            false,
        ),
    ];
    for (name, args, level, screen) in cases {
        let p = d.prepare(name, args).unwrap();
        assert_eq!(p.assessment.level, level, "{name}");
        assert!(!p.assessment.requires_root, "{name}");
        assert_eq!(p.identity, d.env.ui_identity(), "{name}");
        // The tool chose the command line: it runs outside the sandbox.
        assert_eq!(p.confinement, Confinement::Fixed, "{name}");
        assert_eq!(p.resources.contains(&Resource::Screen), screen, "{name}");
        assert!(p.timeout.as_secs() <= 60, "{name}");
        let ui = nl2sh_proto::ui_grants::is_ui_action(name);
        assert_eq!(
            p.ui_app.as_deref(),
            ui.then_some("com.android.settings"),
            "{name}"
        );
        if ui {
            assert!(
                p.assessment
                    .reasons
                    .iter()
                    .any(|r| r.contains("aimed at com.android.settings")),
                "{name}: {:?}",
                p.assessment.reasons
            );
        }
    }
}

#[test]
fn arguments_input_cannot_carry_are_refused() {
    let d = Device::new();
    let refused = |name: &str, args: Value| match d.prepare(name, args) {
        Err(ToolError::InvalidArguments(m)) => m,
        Err(e) => panic!("{name}: unexpected {e}"),
        Ok(p) => panic!("{name}: prepared {}", p.action),
    };
    assert!(refused("android.text", json!({"text": "a\u{1b}b"})).contains("android.key"));
    assert!(refused("android.key", json!({"key": "HOME && reboot"})).contains("key name"));
    assert!(refused("android.key", json!({"key": 100000})).contains("key name"));
    assert!(refused("android.launch", json!({"package": "-n evil"})).contains("package name"));
    assert!(refused(
        "android.launch",
        json!({"package": "com.a", "activity": "x/y"})
    )
    .contains("class name"));
    assert!(refused("android.tap", json!({"x": 70000, "y": 1})).contains("over"));
    assert!(refused("android.dumpsys", json!({"service": "-l"})).contains("service name"));
    assert!(refused("android.dumpsys", json!({"service": "clipboard"})).contains("unconfined"));
}
