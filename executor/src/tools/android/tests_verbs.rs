//! The phone's own verbs against the stand-ins (`am`, `pm`, `input`, `ime`, `settings` in
//! tests/fixtures/android-bin): the exact argv each runs, its risk, and its failures.

use serde_json::{json, Value};

use super::tests::Rig;
use crate::tools::Tool;
use nl2sh_proto::channels::{Confinement, RiskLevel};

const LATIN: &str = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME";

/// The risk and confinement `name` is prepared with for `args`.
fn judged(rig: &Rig, name: &str, args: Value) -> (RiskLevel, Confinement) {
    let tool: &dyn Tool = rig.tool(name);
    let p = tool
        .prepare(args.as_object().unwrap(), &rig.env)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (p.assessment.level, p.confinement)
}

#[tokio::test]
async fn each_verb_runs_one_argv() {
    let rig = Rig::new(&[("NL2SH_STANDIN_INSTALLED", "com.example.notes")]);
    rig.ok(
        "android.open_url",
        json!({"url": "https://example.com/a?b=1&c=$(id)"}),
    )
    .await;
    rig.ok("android.open_url", json!({"url": "mailto:a@example.com"}))
        .await;
    let (v, _) = rig
        .ok(
            "android.intent",
            json!({"action": "android.intent.action.SEND", "mime_type": "text/plain",
                   "package": "com.example.notes",
                   "extras": [{"key": "android.intent.extra.TEXT", "type": "string", "value": "a b; c"},
                              {"key": "n", "type": "int", "value": 3}]}),
        )
        .await;
    assert_eq!(v["sent"], "start");
    let (v, _) = rig
        .ok(
            "android.intent",
            json!({"action": "com.example.PING", "broadcast": true,
                   "extras": [{"key": "on", "type": "bool", "value": false}]}),
        )
        .await;
    assert_eq!(
        (&v["sent"], &v["result_code"]),
        (&json!("broadcast"), &json!(0))
    );
    rig.ok("android.stop_app", json!({"package": "com.example.notes"}))
        .await;
    rig.ok(
        "android.uninstall",
        json!({"package": "com.example.notes", "keep_data": true}),
    )
    .await;
    let apk = rig.dir.join("state/notes.apk");
    std::fs::write(&apk, b"PK").unwrap();
    let (v, _) = rig
        .ok(
            "android.install",
            json!({"path": apk.display().to_string(), "replace": true}),
        )
        .await;
    assert_eq!(v["pm"], json!(["Success"]));
    rig.ok("android.wake", json!({})).await;
    rig.ok("android.sleep", json!({})).await;
    rig.ok("android.key", json!({"key": "recents"})).await;
    assert_eq!(
        rig.ran(),
        [
            "am start -a android.intent.action.VIEW -d https://example.com/a?b=1&c=$(id)",
            "am start -a android.intent.action.VIEW -d mailto:a@example.com",
            "am start -a android.intent.action.SEND -t text/plain -p com.example.notes --es \
             android.intent.extra.TEXT a b; c --ei n 3",
            "am broadcast -a com.example.PING --ez on false",
            "am force-stop com.example.notes",
            "pm uninstall -k com.example.notes",
            &format!("pm install -r {}", apk.display()),
            "input keyevent KEYCODE_WAKEUP",
            "input keyevent KEYCODE_SLEEP",
            // A key is a UI action: judged by the app in front, read while preparing, and
            // checked again right before input.
            "dumpsys window",
            "dumpsys window",
            "input keyevent KEYCODE_APP_SWITCH",
        ]
    );
}

#[tokio::test]
async fn each_verb_has_its_own_risk() {
    let rig = Rig::new(&[]);
    let fixed = Confinement::Fixed;
    for (name, args, want) in [
        (
            "android.open_url",
            json!({"url": "https://x.org"}),
            RiskLevel::Low,
        ),
        (
            "android.open_url",
            json!({"url": "tel:123"}),
            RiskLevel::Medium,
        ),
        (
            "android.intent",
            json!({"action": "x.Y"}),
            RiskLevel::Medium,
        ),
        (
            "android.intent",
            json!({"action": "android.intent.action.CALL", "data": "tel:1"}),
            RiskLevel::High,
        ),
        (
            "android.stop_app",
            json!({"package": "com.x.y"}),
            RiskLevel::Medium,
        ),
        (
            "android.stop_app",
            json!({"package": "com.android.systemui"}),
            RiskLevel::High,
        ),
        (
            "android.install",
            json!({"path": "/data/local/tmp/x.apk"}),
            RiskLevel::Dangerous,
        ),
        (
            "android.uninstall",
            json!({"package": "com.x.y"}),
            RiskLevel::Dangerous,
        ),
        ("android.wake", json!({}), RiskLevel::Low),
        ("android.sleep", json!({}), RiskLevel::Low),
    ] {
        assert_eq!(
            judged(&rig, name, args.clone()),
            (want, fixed),
            "{name} {args}"
        );
    }
    // A private read: read-only, but never run unasked (only a grant naming it covers it).
    assert_eq!(
        judged(&rig, "android.clipboard_get", json!({})),
        (RiskLevel::ReadOnly, Confinement::Unconfined)
    );
}

#[tokio::test]
async fn failures_are_reported_not_hidden() {
    let rig = Rig::new(&[("NL2SH_STANDIN_NO_HANDLER", "com.example.NOBODY")]);
    let err = rig
        .run("android.intent", json!({"action": "com.example.NOBODY"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unable to resolve"), "{err}");
    let err = rig
        .run(
            "android.uninstall",
            json!({"package": "com.example.missing"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("DELETE_FAILED_INTERNAL_ERROR"), "{err}");
    let err = rig
        .run(
            "android.install",
            json!({"path": "/data/local/tmp/none.apk"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("Can't open file"), "{err}");
}

#[tokio::test]
async fn hostile_arguments_run_nothing() {
    let rig = Rig::new(&[]);
    for (name, args) in [
        (
            "android.open_url",
            json!({"url": "intent://x#Intent;component=com.x/.Evil;end"}),
        ),
        ("android.open_url", json!({"url": "javascript:alert(1)"})),
        ("android.open_url", json!({"url": "https://x\n--es a b"})),
        (
            "android.intent",
            json!({"action": "x.Y", "package": "-n com.x/.Y"}),
        ),
        (
            "android.intent",
            json!({"component": {"package": "com.x", "class": ".A --user 10"}}),
        ),
        (
            "android.intent",
            json!({"action": "x.Y", "extras": [{"key": "-e", "type": "string", "value": "v"}]}),
        ),
        ("android.stop_app", json!({"package": "--user"})),
        ("android.stop_app", json!({"package": "android"})),
        ("android.uninstall", json!({"package": "com.x; reboot"})),
        ("android.install", json!({"path": "relative/x.apk"})),
        ("android.install", json!({"path": "/data/local/tmp/x.sh"})),
        (
            "android.install",
            json!({"path": "/data/local/tmp/../../system/x.apk\n"}),
        ),
    ] {
        assert!(rig.run(name, args.clone()).await.is_err(), "{name} {args}");
    }
    assert!(rig.ran().is_empty(), "{:?}", rig.ran());
}

#[tokio::test]
async fn the_clipboard_is_read_through_the_helper_and_the_input_method_restored() {
    let rig = Rig::new(&[
        ("NL2SH_STANDIN_INSTALLED", "io.appium.settings"),
        ("NL2SH_STANDIN_CLIPBOARD", "code 4711 – ok"),
    ]);
    let (v, out) = rig.ok("android.clipboard_get", json!({})).await;
    assert_eq!(out.read_from.as_slice(), ["the clipboard"]);
    assert_eq!(
        (&v["text"], &v["truncated"]),
        (&json!("code 4711 – ok"), &json!(false))
    );
    assert_eq!(
        rig.ran(),
        [
            "pm path io.appium.settings",
            "settings get secure default_input_method",
            "ime enable io.appium.settings/.AppiumIME",
            "ime set io.appium.settings/.AppiumIME",
            "am broadcast -a io.appium.settings.clipboard.get -n io.appium.settings/.receivers.ClipboardReceiver",
            &format!("ime set {LATIN}"),
        ]
    );
    // Without the helper: nothing switched, and how to install it.
    let rig = Rig::new(&[]);
    let err = rig
        .run("android.clipboard_get", json!({}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("io.appium.settings"), "{err}");
    assert_eq!(rig.ran(), ["pm path io.appium.settings"]);
}
