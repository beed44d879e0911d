//! The Android tools end to end against the stand-in programs in
//! `tests/fixtures/android-bin/`: discovery finds them on PATH, each prepared action runs
//! through an `ExecContext` (identity, process group, deadline), and the tests assert
//! exactly which argv ran and what came back.
//!
//! These live inside the crate because `ExecContext` needs a `ChildSetup`, which only the
//! crate can make. Each test gets its own directory of wrapper scripts that set the
//! stand-ins' variables (log file, screen size, ...) and exec the real stand-in, so tests
//! never change the process environment and can run in parallel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::device::{DeviceEnv, ANDROID_PROGRAMS};
use crate::sys::ChildSetup;
use crate::tools::{schema, ExecContext, Tool, ToolError, ToolOutput};

static RIG_SEQ: AtomicU64 = AtomicU64::new(0);

pub(super) fn standins() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/android-bin");
    std::fs::canonicalize(&dir).expect("stand-in directory")
}

/// A device made of stand-ins, with its own log and stand-in variables.
pub(super) struct Rig {
    pub(super) dir: PathBuf,
    log: PathBuf,
    pub(super) env: Arc<DeviceEnv>,
    tools: Vec<Box<dyn Tool>>,
}

impl Rig {
    pub(super) fn new(vars: &[(&str, &str)]) -> Rig {
        use std::os::unix::fs::PermissionsExt;
        let n = RIG_SEQ.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("nl2sh-android-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        // Runs as shell (2000) when the tests run as root: everything must be reachable.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.join("standin.log");
        std::fs::write(&log, "").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
        // What stand-ins remember between calls (the input method `ime set` chose).
        let state = dir.join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut exports = format!(
            "export NL2SH_STANDIN_LOG='{}'\nexport NL2SH_STANDIN_STATE='{}'\n",
            log.display(),
            state.display()
        );
        for (k, v) in vars {
            exports.push_str(&format!("export {k}='{v}'\n"));
        }
        let real = standins();
        for name in ANDROID_PROGRAMS {
            let wrapper = bin.join(name);
            let script = format!(
                "#!/bin/sh\n{exports}exec '{}' \"$@\"\n",
                real.join(name).display()
            );
            std::fs::write(&wrapper, script).unwrap();
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env = DeviceEnv::probe(Some(path));
        // No event devices: gestures fall back to the `input` stand-in (touch/tests.rs
        // covers the touch engine).
        env.touch.input_dir = dir.join("no-event-devices");
        assert!(
            env.android,
            "getprop stand-in makes this an Android profile"
        );
        let mut tools = Vec::new();
        super::register(&env, &mut tools);
        Rig {
            dir,
            log,
            env: Arc::new(env),
            tools,
        }
    }

    pub(super) fn tool(&self, name: &str) -> &dyn Tool {
        self.tools
            .iter()
            .find(|t| t.def().name == name)
            .map(|t| t.as_ref())
            .expect(name)
    }

    /// Validate, prepare and run `name` the way the pipeline does (minus approval).
    pub(super) async fn run(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let tool = self.tool(name);
        schema::validate(&tool.def().schema, &args).map_err(ToolError::InvalidArguments)?;
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        let prepared = tool.prepare(&map, &self.env)?;
        assert_eq!(prepared.identity, self.env.ui_identity());
        let setup = ChildSetup::for_identity(prepared.identity, self.env.euid).expect("identity");
        let ctx = ExecContext {
            identity: prepared.identity,
            setup,
            sandbox: None,
            deadline: Instant::now() + prepared.timeout,
            cancel: CancellationToken::new(),
            groups: Arc::default(),
            env: self.env.clone(),
        };
        (prepared.run)(ctx).await
    }

    pub(super) async fn ok(&self, name: &str, args: Value) -> (Value, ToolOutput) {
        let out = self
            .run(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.success, "{name}: {}", out.output);
        (serde_json::from_str(&out.output).expect("JSON output"), out)
    }

    /// The argv lines the stand-ins recorded, program names without their directory.
    pub(super) fn ran(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn screen_dump_reads_the_visible_nodes() {
    let rig = Rig::new(&[]);
    let (v, out) = rig.ok("android.screen_dump", json!({})).await;
    // The stand-in's screen is Settings' text only.
    assert_eq!(out.read_from.as_slice(), ["com.android.settings"]);
    let ran = rig.ran();
    // The dump, then the screen's condition (one dumpsys window).
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!(ran[1], "dumpsys window");
    let file = ran[0]
        .strip_prefix("uiautomator dump ")
        .expect("uiautomator dump FILE");
    let name = Path::new(file)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(&format!("nl2sh-window-{}-", std::process::id()))
            && name.ends_with(".xml"),
        "{name}"
    );
    assert!(
        !Path::new(file).exists(),
        "the dump file is removed afterwards"
    );

    assert_eq!(
        (
            v["rotation"].clone(),
            v["total"].clone(),
            v["count"].clone()
        ),
        (json!(0), json!(52), json!(52))
    );
    assert_eq!(
        (v["truncated"].clone(), v["packages"].clone()),
        (json!(false), json!(["com.android.settings"]))
    );
    let nodes = v["nodes"].as_array().unwrap();
    let by_text = |t: &str| {
        nodes
            .iter()
            .find(|n| n["text"] == t)
            .unwrap_or_else(|| panic!("{t}"))
    };
    assert_eq!(
        by_text("Network & internet"),
        &json!({"text": "Network & internet", "desc": "", "id": "android:id/title", "class": "TextView",
                "bounds": [96, 250, 400, 276], "center": [248, 263], "clickable": false})
    );
    assert_eq!(
        by_text("Mobile, Wi\u{2011}Fi, hotspot")["id"],
        "android:id/summary"
    );
    let avatar = nodes
        .iter()
        .find(|n| {
            n["desc"]
                .as_str()
                .unwrap_or("")
                .starts_with("Profile picture")
        })
        .unwrap();
    assert_eq!(
        (avatar["center"].clone(), avatar["clickable"].clone()),
        (json!([494, 90]), json!(true))
    );
    let recycler = nodes
        .iter()
        .find(|n| n["id"] == "com.android.settings:id/recycler_view")
        .unwrap();
    assert_eq!(
        (recycler["class"].clone(), recycler["scrollable"].clone()),
        (json!("RecyclerView"), json!(true))
    );
    // Invisible (scrolled-off) rows and the zero-height toolbar are not there.
    assert!(nodes
        .iter()
        .all(|n| n["text"] != "System" && n["id"] != "com.android.settings:id/action_bar"));
    // Rows are clickable containers, centered on their row.
    let rows: Vec<_> = nodes
        .iter()
        .filter(|n| n["class"] == "LinearLayout" && n["clickable"] == true)
        .collect();
    assert_eq!(rows.len(), 10, "9 rows and the search bar");
}

#[tokio::test]
async fn screen_dump_failures_are_reported_and_cleaned_up() {
    let idle = Rig::new(&[("NL2SH_STANDIN_UI", "idle")]);
    let err = idle
        .run("android.screen_dump", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("wrote no window dump") && err.contains("could not get idle state"),
        "{err}"
    );
    let busy = Rig::new(&[("NL2SH_STANDIN_UI", "busy")]);
    let err = busy
        .run("android.screen_dump", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("uiautomator failed (exit status 1)") && err.contains("already registered"),
        "{err}"
    );
    for rig in [&idle, &busy] {
        let ran = rig.ran();
        let file = ran[0].strip_prefix("uiautomator dump ").unwrap();
        assert!(!Path::new(file).exists());
    }
    let bad = Rig::new(&[]);
    let xml = bad.dir.join("bad.xml");
    std::fs::write(
        &xml,
        "<hierarchy rotation=\"0\"><node text=\"x\" bounds=\"[0,0][1,1]\"></hierarchy>",
    )
    .unwrap();
    let custom = Rig::new(&[("NL2SH_STANDIN_UI_XML", &xml.display().to_string())]);
    let err = custom
        .run("android.screen_dump", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("malformed window dump"), "{err}");
}

#[tokio::test]
async fn input_tools_run_exactly_these_commands() {
    let rig = Rig::new(&[]);
    let tapped = rig.ok("android.tap", json!({"x": 248, "y": 263})).await.0;
    assert_eq!(
        (&tapped["tapped"], &tapped["injected"]),
        (&json!([248, 263]), &json!(true))
    );
    rig.ok(
        "android.swipe",
        json!({"x1": 270, "y1": 1000, "x2": 270, "y2": 300}),
    )
    .await;
    rig.ok(
        "android.swipe",
        json!({"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 450}),
    )
    .await;
    rig.ok("android.text", json!({"text": "hello world; $(id) 'q'"}))
        .await;
    rig.ok("android.key", json!({"key": "home"})).await;
    rig.ok("android.key", json!({"key": 66, "long_press": true}))
        .await;
    // The tap read the screen while preparing and again before input (target.rs).
    let inputs: Vec<String> = rig
        .ran()
        .into_iter()
        .filter(|l| l.starts_with("input "))
        .collect();
    assert_eq!(
        inputs,
        [
            "input tap 248 263",
            "input swipe 270 1000 270 300",
            "input swipe 1 2 3 4 450",
            "input text hello%sworld;%s$(id)%s'q'",
            "input keyevent KEYCODE_HOME",
            "input keyevent --longpress 66",
        ]
    );
}

#[tokio::test]
async fn refused_input_runs_nothing() {
    let rig = Rig::new(&[]);
    let err = rig
        .run("android.text", json!({"text": "bell\u{7}"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments(_)) && err.to_string().contains("U+0007"),
        "{err}"
    );
    for key in [
        json!("HOME; reboot"),
        json!("--help"),
        json!(""),
        json!(true),
    ] {
        assert!(
            rig.run("android.key", json!({ "key": key })).await.is_err(),
            "{key}"
        );
    }
    assert!(rig
        .run("android.tap", json!({"x": -1, "y": 5}))
        .await
        .is_err());
    assert!(rig.run("android.tap", json!({"x": 1})).await.is_err());
    assert!(rig
        .run("android.launch", json!({"package": "com.x; reboot"}))
        .await
        .is_err());
    assert!(rig
        .run(
            "android.launch",
            json!({"package": "com.x", "activity": "../a b"})
        )
        .await
        .is_err());
    assert!(rig.ran().is_empty(), "{:?}", rig.ran());
}

#[tokio::test]
async fn launch_uses_am_start() {
    let rig = Rig::new(&[]);
    let (v, _) = rig
        .ok(
            "android.launch",
            json!({"package": "com.android.settings", "activity": ".Settings"}),
        )
        .await;
    assert_eq!(
        v["am"],
        json!(["Starting: Intent { cmp=com.android.settings/.Settings }"])
    );
    rig.ok("android.launch", json!({"package": "org.mozilla.firefox"}))
        .await;
    let err = rig
        .run("android.launch", json!({"package": "com.example.missing"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unable to resolve Intent"), "{err}");
    assert_eq!(
        rig.ran(),
        [
            "am start -n com.android.settings/.Settings",
            "am start -a android.intent.action.MAIN -c android.intent.category.LAUNCHER -p org.mozilla.firefox",
            "am start -a android.intent.action.MAIN -c android.intent.category.LAUNCHER -p com.example.missing",
        ]
    );
}

#[tokio::test]
async fn packages_are_listed_sorted_and_filtered() {
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.packages", json!({})).await;
    let all: Vec<String> = serde_json::from_value(v["packages"].clone()).unwrap();
    assert_eq!(
        (all.len(), v["total"].clone(), v["truncated"].clone()),
        (25, json!(25), json!(false))
    );
    assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted");
    assert_eq!(all[0], "android");
    let (v, _) = rig
        .ok(
            "android.packages",
            json!({"third_party_only": true, "filter": "MOZ"}),
        )
        .await;
    assert_eq!(v["packages"], json!(["org.mozilla.firefox"]));
    let (v, _) = rig
        .ok("android.packages", json!({"third_party_only": true}))
        .await;
    assert_eq!(
        v["packages"],
        json!([
            "com.termux",
            "com.topjohnwu.magisk",
            "de.example.notes_app",
            "org.fdroid.fdroid",
            "org.mozilla.firefox"
        ])
    );
    assert_eq!(
        rig.ran(),
        [
            "pm list packages",
            "pm list packages -3",
            "pm list packages -3"
        ]
    );
}

#[tokio::test]
async fn current_app_reads_dumpsys_window() {
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.current_app", json!({})).await;
    assert_eq!(
        v,
        json!({"package": "com.android.settings", "activity": "com.android.settings.Settings", "user": 0,
               "focused_window": "com.android.settings/com.android.settings.Settings", "source": "mCurrentFocus"})
    );
    assert_eq!(rig.ran(), ["dumpsys window"]);
    let fox = Rig::new(&[(
        "NL2SH_STANDIN_FOCUS",
        "org.mozilla.firefox/org.mozilla.fenix.HomeActivity",
    )]);
    let (v, _) = fox.ok("android.current_app", json!({})).await;
    assert_eq!(
        (v["package"].clone(), v["activity"].clone()),
        (
            json!("org.mozilla.firefox"),
            json!("org.mozilla.fenix.HomeActivity")
        )
    );
}

#[tokio::test]
async fn a_cancelled_call_stops() {
    let rig = Rig::new(&[]);
    let tool = rig.tool("android.tap");
    let args = json!({"x": 1, "y": 2});
    let prepared = tool.prepare(args.as_object().unwrap(), &rig.env).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let ctx = ExecContext {
        identity: prepared.identity,
        setup: ChildSetup::for_identity(prepared.identity, rig.env.euid).unwrap(),
        sandbox: None,
        deadline: Instant::now() + prepared.timeout,
        cancel,
        groups: Arc::default(),
        env: rig.env.clone(),
    };
    let err = (prepared.run)(ctx).await.unwrap_err().to_string();
    assert!(err.contains("cancelled"), "{err}");
}

/// Every line the stand-ins recorded, joined, for "this text never reached a program".
fn ran_text(rig: &Rig) -> String {
    rig.ran().join("\n")
}

fn lines_of(v: &Value) -> Vec<String> {
    serde_json::from_value(v["lines"].clone()).expect("lines")
}

#[tokio::test]
async fn logcat_runs_a_fixed_command_and_filters_its_output() {
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.logcat", json!({})).await;
    let lines = lines_of(&v);
    // main, system and crash, in time order, without logcat's buffer separators.
    assert_eq!((lines.len(), v["count"].clone()), (14, json!(14)), "{v}");
    assert_eq!(v["truncated"], false);
    assert!(lines[0].contains("FATAL EXCEPTION"), "{lines:?}");
    assert!(lines.iter().all(|l| !l.starts_with("---------")));
    assert!(lines.last().unwrap().contains("Slow operation"));

    let (v, _) = rig
        .ok(
            "android.logcat",
            json!({"lines": 3, "buffer": "crash", "priority": "E"}),
        )
        .await;
    let lines = lines_of(&v);
    assert_eq!(lines.len(), 3, "{v}");
    assert!(
        lines[2].contains(" F libc    : Fatal signal 6"),
        "{lines:?}"
    );

    let (v, _) = rig
        .ok(
            "android.logcat",
            json!({"tag": "ActivityManager", "contains": "SLOW OPERATION"}),
        )
        .await;
    let lines = lines_of(&v);
    assert_eq!(lines.len(), 1, "{v}");
    assert!(lines[0].ends_with("now at startProcess: done updating pids map"));

    let (v, _) = rig
        .ok(
            "android.logcat",
            json!({"buffer": "events", "priority": "V", "tag": "am_proc_start"}),
        )
        .await;
    assert_eq!(v["count"], 1, "{v}");

    // Hostile filter text is applied to the output and reaches no program.
    let (v, _) = rig
        .ok(
            "android.logcat",
            json!({"tag": "*:S -f /data/x", "contains": "; rm -rf /"}),
        )
        .await;
    assert_eq!(
        (v["count"].clone(), v["lines"].clone()),
        (json!(0), json!([]))
    );

    assert_eq!(
        rig.ran(),
        [
            "logcat -d -v threadtime -t 200",
            "logcat -d -v threadtime -t 3 -b crash *:E",
            "logcat -d -v threadtime -t 200",
            "logcat -d -v threadtime -t 200 -b events *:V",
            "logcat -d -v threadtime -t 200",
        ]
    );
    let ran = ran_text(&rig);
    for caller_text in [
        "rm -rf",
        "SLOW",
        "ActivityManager",
        "am_proc_start",
        "-f /data/x",
    ] {
        assert!(
            !ran.contains(caller_text),
            "{caller_text:?} reached argv: {ran}"
        );
    }
}

#[tokio::test]
async fn logcat_keeps_the_newest_lines_within_the_budget() {
    let rig = Rig::new(&[("NL2SH_STANDIN_LOGCAT_SPAM", "3000")]);
    let (v, out) = rig.ok("android.logcat", json!({"lines": 2000})).await;
    assert!(
        out.output.len() <= crate::tools::OUTPUT_BUDGET,
        "{}",
        out.output.len()
    );
    let lines = lines_of(&v);
    assert_eq!(v["truncated"], true);
    assert!(lines.len() < 2000 && lines.len() > 100, "{}", lines.len());
    assert_eq!(v["count"], json!(lines.len()));
    assert!(
        lines.last().unwrap().contains("Slow operation"),
        "newest kept last"
    );
    assert_eq!(rig.ran(), ["logcat -d -v threadtime -t 2000"]);
}

#[tokio::test]
async fn logcat_arguments_outside_the_schema_run_nothing() {
    let rig = Rig::new(&[]);
    for args in [
        json!({"buffer": "all"}),
        json!({"buffer": "kernel"}),
        json!({"buffer": "main -c"}),
        json!({"priority": "S"}),
        json!({"priority": "X"}),
        json!({"priority": "*:V"}),
        json!({"priority": "w"}),
        json!({"lines": 0}),
        json!({"lines": 2001}),
        json!({"lines": "5"}),
        json!({"tag": ""}),
        json!({"contains": "x".repeat(257)}),
        json!({"args": ["-c"]}),
    ] {
        let err = rig.run("android.logcat", args.clone()).await.unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{args}: {err}"
        );
    }
    assert!(rig.ran().is_empty(), "{:?}", rig.ran());
}

#[tokio::test]
async fn dumpsys_dumps_one_named_service() {
    let rig = Rig::new(&[("NL2SH_STANDIN_MISSING_SERVICES", "thermalservice")]);
    let (v, _) = rig
        .ok("android.dumpsys", json!({"service": "battery"}))
        .await;
    assert_eq!(
        (v["service"].clone(), v["truncated"].clone()),
        (json!("battery"), json!(false))
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.starts_with("Current Battery Service state:") && text.contains("  level: 87"),
        "{text}"
    );
    let (v, _) = rig
        .ok("android.dumpsys", json!({"service": "media.audio_flinger"}))
        .await;
    assert!(v["text"]
        .as_str()
        .unwrap()
        .starts_with("media.audio_flinger state"));
    let err = rig
        .run("android.dumpsys", json!({"service": "thermalservice"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no service named `thermalservice`"), "{err}");
    assert_eq!(
        rig.ran(),
        [
            "dumpsys battery",
            "dumpsys media.audio_flinger",
            "dumpsys thermalservice"
        ]
    );
}

#[tokio::test]
async fn a_long_dump_is_cut_to_the_budget() {
    let rig = Rig::new(&[("NL2SH_STANDIN_DUMP_LINES", "20000")]);
    let (v, out) = rig
        .ok("android.dumpsys", json!({"service": "meminfo"}))
        .await;
    assert!(
        out.output.len() <= crate::tools::OUTPUT_BUDGET,
        "{}",
        out.output.len()
    );
    assert_eq!(v["truncated"], true);
    let text = v["text"].as_str().unwrap();
    assert!(
        text.starts_with("meminfo state") && text.len() > 40_000,
        "{}",
        text.len()
    );
}

#[tokio::test]
async fn dumpsys_refuses_names_that_are_not_one_service() {
    let rig = Rig::new(&[]);
    for service in [
        json!("-l"),
        json!("--help"),
        json!("-a"),
        json!("battery unplug"),
        json!("battery\nunplug"),
        json!("x;reboot"),
        json!("a/b"),
        json!(""),
        json!("a".repeat(65)),
        json!(7),
    ] {
        let err = rig
            .run("android.dumpsys", json!({ "service": service }))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{service}: {err}"
        );
    }
    assert!(rig.run("android.dumpsys", json!({})).await.is_err());
    let err = rig
        .run(
            "android.dumpsys",
            json!({"service": "battery", "args": ["unplug"]}),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
    // The tool checks again without the schema's help.
    let tool = rig.tool("android.dumpsys");
    for service in ["-l", "battery unplug", "--", "-"] {
        let args = json!({ "service": service });
        match tool.prepare(args.as_object().unwrap(), &rig.env) {
            Err(ToolError::InvalidArguments(m)) => assert!(m.contains("not a service name"), "{m}"),
            Err(e) => panic!("{service}: {e}"),
            Ok(p) => panic!("{service}: prepared {}", p.action),
        }
    }
    assert!(rig.ran().is_empty(), "{:?}", rig.ran());
}

#[tokio::test]
async fn dumpsys_reads_only_listed_services() {
    use super::diagnostics::LISTED_SERVICES;
    let rig = Rig::new(&[]);
    // What showed credentials or private content under its own name, and what shows the
    // same under another (sync wakelocks name accounts in batterystats and jobscheduler,
    // activity shows intents with their data, wifiscanner locates the device), in any
    // letter case: none is on the list.
    for service in [
        "account",
        "android.security.keystore",
        "autofill",
        "clipboard",
        "content",
        "credential",
        "iphonesubinfo",
        "isms",
        "keystore",
        "location",
        "lock_settings",
        "notification",
        "wifi",
        "batterystats",
        "jobscheduler",
        "activity",
        "wifiscanner",
        "media_session",
        "usagestats",
        "telephony.registry",
        "phone",
        "isub",
        "semclipboard",
        "package",
        "window",
        "Battery",
    ] {
        assert!(!LISTED_SERVICES.contains(&service), "{service}");
        let err = rig
            .run("android.dumpsys", json!({ "service": service }))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{service}: {msg}"
        );
        assert!(
            msg.contains("shell.exec")
                && msg.contains("\"unconfined\": true")
                && msg.contains("approval"),
            "{service}: {msg}"
        );
    }
    assert!(rig.ran().is_empty(), "{:?}", rig.ran());
}

#[tokio::test]
async fn device_state_reads_window_power_and_battery() {
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.device_state", json!({})).await;
    assert_eq!(
        rig.ran(),
        ["dumpsys window", "dumpsys power", "dumpsys battery"],
        "three dumpsys calls; wm only when dumpsys window has no size"
    );
    assert_eq!(v["screen_on"], json!(true));
    assert_eq!(v["wakefulness"], json!("Awake"));
    assert_eq!(v["locked"], json!(false));
    assert_eq!(v["package"], json!("com.android.settings"));
    assert_eq!(v["activity"], json!("com.android.settings.Settings"));
    assert_eq!(v["secure"], json!(false));
    assert_eq!(v["rotation"], json!(0));
    assert_eq!(
        v["display"],
        json!({"physical": {"width": 540, "height": 1200, "density": 280}, "override": null})
    );
    assert_eq!(
        v["battery"],
        json!({"level": 87, "charging": true, "plugged": ["usb"], "powered": true})
    );
    assert_eq!(v["unknown"], json!({}));
}

#[tokio::test]
async fn device_state_says_off_locked_secure_and_what_it_could_not_read() {
    let rig = Rig::new(&[
        ("NL2SH_STANDIN_SCREEN", "off"),
        ("NL2SH_STANDIN_LOCKED", "1"),
        ("NL2SH_STANDIN_SECURE", "1"),
        ("NL2SH_STANDIN_MISSING_SERVICES", "battery"),
    ]);
    let (v, _) = rig.ok("android.device_state", json!({})).await;
    assert_eq!(v["screen_on"], json!(false));
    assert_eq!(v["wakefulness"], json!("Asleep"));
    assert_eq!(v["locked"], json!(true));
    assert_eq!(v["secure"], json!(true));
    // No battery service: the level comes from dumpsys power, charging is not guessed.
    assert_eq!(v["battery"]["level"], json!(87));
    assert_eq!(v["battery"]["charging"], Value::Null);
    assert_eq!(v["battery"]["powered"], json!(true));
    let why = v["unknown"]["charging"].as_str().unwrap();
    assert!(why.contains("no such service"), "{why}");
}

#[tokio::test]
async fn screen_dump_says_whether_the_screen_is_off_locked_or_secure() {
    let rig = Rig::new(&[]);
    let (v, _) = rig.ok("android.screen_dump", json!({})).await;
    assert_eq!(
        v["screen"],
        json!({"off": false, "locked": false, "secure": false,
               "focused_window": "com.android.settings/com.android.settings.Settings"})
    );
    assert_eq!(
        rig.ran()
            .iter()
            .filter(|l| l.starts_with("dumpsys"))
            .count(),
        1
    );
    let rig = Rig::new(&[
        ("NL2SH_STANDIN_SCREEN", "off"),
        ("NL2SH_STANDIN_LOCKED", "1"),
        ("NL2SH_STANDIN_SECURE", "1"),
    ]);
    let (v, _) = rig.ok("android.screen_dump", json!({})).await;
    assert_eq!(v["screen"]["off"], json!(true));
    assert_eq!(v["screen"]["locked"], json!(true));
    assert_eq!(v["screen"]["secure"], json!(true));
}

#[tokio::test]
async fn notifications_run_one_fixed_dumpsys_and_ask_as_a_private_read() {
    let rig = Rig::new(&[]);
    let tool = rig.tool("android.notifications");
    let prepared = tool.prepare(&serde_json::Map::new(), &rig.env).unwrap();
    // Read-only, but unconfined: the pipeline asks, and only a grant naming the action
    // covers it (approvald's policy).
    assert_eq!(
        prepared.confinement,
        nl2sh_proto::channels::Confinement::Unconfined
    );
    assert_eq!(
        prepared.assessment.level,
        nl2sh_proto::channels::RiskLevel::ReadOnly
    );
    assert!(prepared.action.ends_with("dumpsys notification --noredact"));
    assert!(prepared
        .assessment
        .reasons
        .iter()
        .any(|r| r.contains("private")));
    let (v, out) = rig.ok("android.notifications", json!({})).await;
    assert_eq!(rig.ran(), ["dumpsys notification --noredact"]);
    // Whose text it is, for the Agent's later requests: each app once, in order.
    let apps: Vec<&str> = v["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["package"].as_str().unwrap())
        .fold(Vec::new(), |mut seen, p| {
            if !seen.contains(&p) {
                seen.push(p);
            }
            seen
        });
    assert_eq!(out.read_from.as_slice(), apps);
    assert_eq!(v["count"], json!(3));
    assert_eq!(v["incomplete"], json!(false));
    let n = &v["notifications"];
    assert_eq!(n[0]["title"], json!("Alice"));
    assert_eq!(
        n[0]["key"],
        json!("0|com.google.android.apps.messaging|12|conv-7|10143")
    );
    assert_eq!(n[1]["package"], json!("android"));
    assert_eq!(n[1]["ongoing"], json!(true));
    assert_eq!(n[2]["importance"], json!("DEFAULT"));
    assert_eq!(n[2]["channel"], json!("builds"));
    // Extra arguments run nothing.
    assert!(rig
        .run("android.notifications", json!({"all": true}))
        .await
        .is_err());
    assert_eq!(rig.ran().len(), 1);
}

#[tokio::test]
async fn notifications_without_the_service_say_so() {
    let rig = Rig::new(&[("NL2SH_STANDIN_MISSING_SERVICES", "notification")]);
    let err = rig
        .run("android.notifications", json!({}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no notification service"), "{err}");
}

/// A UI action is judged by where it lands (docs/APPROVALS.md, "Timed UI grants"): in an
/// ordinary app it is low and names the app a timed grant would cover; in Settings, an
/// installer, a permission dialog or on the lock screen it is high; anything else names
/// no app.
#[tokio::test]
async fn ui_actions_are_judged_by_the_app_in_front() {
    let prepare = |rig: &Rig, name: &str, args: Value| {
        let args: serde_json::Map<String, Value> = serde_json::from_value(args).unwrap();
        rig.tool(name).prepare(&args, &rig.env).unwrap()
    };
    let ui_calls = [
        ("android.tap", json!({"x": 5, "y": 5})),
        ("android.key", json!({"key": "BACK"})),
        ("android.text", json!({"text": "hi"})),
        ("android.swipe", json!({"x1": 1, "y1": 1, "x2": 9, "y2": 9})),
    ];
    let chat = Rig::new(&[("NL2SH_STANDIN_FOCUS", "com.example.chat/.ChatActivity")]);
    for (name, args) in &ui_calls {
        let p = prepare(&chat, name, args.clone());
        assert_eq!(p.ui_app.as_deref(), Some("com.example.chat"), "{name}");
        assert_eq!(
            p.assessment.level,
            nl2sh_proto::channels::RiskLevel::Low,
            "{name}: {:?}",
            p.assessment.reasons
        );
    }
    for focus in [
        "com.google.android.permissioncontroller/.GrantPermissionsActivity",
        "com.android.packageinstaller/.PackageInstallerActivity",
    ] {
        let rig = Rig::new(&[("NL2SH_STANDIN_FOCUS", focus)]);
        for (name, args) in &ui_calls {
            let p = prepare(&rig, name, args.clone());
            assert_eq!(
                p.assessment.level,
                nl2sh_proto::channels::RiskLevel::High,
                "{name} in {focus}"
            );
        }
    }
    let locked = Rig::new(&[
        ("NL2SH_STANDIN_FOCUS", "com.example.chat/.ChatActivity"),
        ("NL2SH_STANDIN_LOCKED", "1"),
    ]);
    for (name, args) in &ui_calls {
        let p = prepare(&locked, name, args.clone());
        assert_eq!(
            p.assessment.level,
            nl2sh_proto::channels::RiskLevel::High,
            "{name}"
        );
        assert!(
            p.assessment
                .reasons
                .iter()
                .any(|r| r.contains("lock screen")),
            "{name}: {:?}",
            p.assessment.reasons
        );
    }
    // The app in front is ordinary, but the point lands on an element of Settings (the
    // stand-in's window dump): judged by what it touches, high.
    let p = prepare(&chat, "android.tap", json!({"x": 270, "y": 160}));
    assert_eq!(p.assessment.level, nl2sh_proto::channels::RiskLevel::High);
    assert!(
        p.assessment
            .reasons
            .iter()
            .any(|r| r.contains("touches an element of com.android.settings")),
        "{:?}",
        p.assessment.reasons
    );
    assert_eq!(p.ui_app.as_deref(), Some("com.example.chat"));
    // Not a UI action: no app named, nothing read while preparing.
    let p = prepare(
        &chat,
        "android.launch",
        json!({"package": "com.example.chat"}),
    );
    assert_eq!(p.ui_app, None);
}

/// A UI action that reads no window dump is checked again right before input: judged
/// (and perhaps covered by a timed UI grant) for one app, it never lands in another that
/// came to the front meanwhile. Before, a key or text decided for a chat typed into
/// whatever was in front when it ran.
#[tokio::test]
async fn a_ui_action_finds_another_app_in_front_and_injects_nothing() {
    let rig = Rig::new(&[(
        "NL2SH_STANDIN_FOCUS_SEQ",
        "com.example.chat/.Main com.example.bank/.Main",
    )]);
    let out = rig
        .run("android.key", json!({"key": "ENTER"}))
        .await
        .unwrap();
    assert!(!out.success, "{out:?}");
    let v: Value = serde_json::from_str(&out.output).unwrap();
    assert_eq!(v["change"], "app", "{v}");
    assert_eq!(v["was"], "com.example.chat");
    assert_eq!(v["now"], "com.example.bank");
    assert_eq!(
        rig.ran(),
        ["dumpsys window", "dumpsys window"],
        "nothing injected"
    );
    // The same app still in front: it runs.
    let same = Rig::new(&[("NL2SH_STANDIN_FOCUS", "com.example.chat/.Main")]);
    let (_, out) = same.ok("android.key", json!({"key": "ENTER"})).await;
    assert!(out.success);
    assert_eq!(
        same.ran(),
        [
            "dumpsys window",
            "dumpsys window",
            "input keyevent KEYCODE_ENTER"
        ]
    );
}
