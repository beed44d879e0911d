//! `android.text` through the Unicode IME against the stand-ins (`ime`, `settings`, `pm`,
//! `input` in tests/fixtures/android-bin): the exact switch, type and restore sequence,
//! the restore after a failed type, and the error without the helper.

use serde_json::json;

use super::tests::Rig;
use crate::tools::ToolError;

const LATIN: &str = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME";
const HELPER: (&str, &str) = ("NL2SH_STANDIN_INSTALLED", "io.appium.settings");

/// The input method the device has now, as `settings` reports it.
fn current_ime(rig: &Rig) -> String {
    match std::fs::read_to_string(rig.dir.join("state/ime")) {
        Ok(s) => s.trim().to_string(),
        Err(_) => LATIN.to_string(),
    }
}

#[tokio::test]
async fn non_ascii_text_switches_to_the_unicode_ime_types_and_switches_back() {
    let rig = Rig::new(&[HELPER]);
    let (v, _) = rig
        .ok("android.text", json!({"text": "Grüße, 日本 😀\nok"}))
        .await;
    assert_eq!(
        rig.ran(),
        [
            // Which app is in front: while preparing (it judges the action) and again right
            // before input.
            "dumpsys window",
            "dumpsys window",
            "pm path io.appium.settings",
            "settings get secure default_input_method",
            "ime enable io.appium.settings/.UnicodeIME",
            "ime set io.appium.settings/.UnicodeIME",
            "input text Gr&APwA3w-e,%s&ZeVnLA-%s&2D3eAAAK-ok",
            &format!("ime set {LATIN}"),
        ]
    );
    assert_eq!(current_ime(&rig), LATIN);
    assert_eq!(
        v,
        json!({"typed_chars": 14, "via": "unicode_ime",
               "ime": {"used": "io.appium.settings/.UnicodeIME", "previous": LATIN, "restored": true}})
    );
}

#[tokio::test]
async fn ascii_text_keeps_the_plain_path_and_percent_s_is_typed() {
    let rig = Rig::new(&[HELPER]);
    let (v, _) = rig.ok("android.text", json!({"text": "50%s off"})).await;
    // Which app is in front: while preparing (it judges the action) and again right
    // before input. then the text.
    assert_eq!(
        rig.ran(),
        [
            "dumpsys window",
            "dumpsys window",
            "input text 50%",
            "input text s%soff"
        ]
    );
    assert_eq!(v["via"], "input");
}

#[tokio::test]
async fn a_failed_type_still_switches_back() {
    let rig = Rig::new(&[HELPER, ("NL2SH_STANDIN_INPUT_FAIL", "text")]);
    let err = rig
        .run("android.text", json!({"text": "ß"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("INJECT_EVENTS") && err.contains(&format!("switched back to {LATIN}")),
        "{err}"
    );
    let ran = rig.ran();
    assert_eq!(ran[ran.len() - 2], "input text &AN8-");
    assert_eq!(ran[ran.len() - 1], format!("ime set {LATIN}"));
    assert_eq!(current_ime(&rig), LATIN);
}

#[tokio::test]
async fn a_refused_switch_switches_back_and_types_nothing() {
    let rig = Rig::new(&[
        HELPER,
        ("NL2SH_STANDIN_IME_REFUSE", "io.appium.settings/.UnicodeIME"),
    ]);
    let err = rig
        .run("android.text", json!({"text": "é"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot be selected"), "{err}");
    let ran = rig.ran();
    assert!(!ran.iter().any(|l| l.starts_with("input ")), "{ran:?}");
    assert_eq!(ran.last().unwrap(), &format!("ime set {LATIN}"));
}

#[tokio::test]
async fn a_failed_restore_is_reported() {
    let rig = Rig::new(&[HELPER, ("NL2SH_STANDIN_IME_REFUSE", LATIN)]);
    let err = rig
        .run("android.text", json!({"text": "é"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("switching back to the input method") && err.contains("phone's settings"),
        "{err}"
    );
    assert!(rig.ran().contains(&"input text &AOk-".to_string()));
}

#[tokio::test]
async fn without_the_helper_non_ascii_text_fails_saying_how_to_enable_it() {
    let rig = Rig::new(&[]);
    let err = rig
        .run("android.text", json!({"text": "grüße"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Unavailable(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("io.appium.settings") && msg.contains("installs its APK"),
        "{msg}"
    );
    // Which app is in front: while preparing (it judges the action) and again right
    // before input. then the helper.
    assert_eq!(
        rig.ran(),
        [
            "dumpsys window",
            "dumpsys window",
            "pm path io.appium.settings"
        ]
    );
}

#[tokio::test]
async fn already_on_the_unicode_ime_nothing_is_switched() {
    let rig = Rig::new(&[
        HELPER,
        ("NL2SH_STANDIN_IME", "io.appium.settings/.UnicodeIME"),
    ]);
    let (v, _) = rig.ok("android.text", json!({"text": "ü"})).await;
    assert_eq!(
        rig.ran(),
        [
            // Which app is in front: while preparing (it judges the action) and again right
            // before input.
            "dumpsys window",
            "dumpsys window",
            "pm path io.appium.settings",
            "settings get secure default_input_method",
            "input text &APw-",
        ]
    );
    assert_eq!(v["ime"]["restored"], false);
}

#[tokio::test]
async fn an_unknown_or_hostile_current_ime_is_never_switched_from() {
    for (current, why) in [
        ("null", "no default input method"),
        ("com.x/.Y; reboot", "not a package/class"),
    ] {
        let rig = Rig::new(&[HELPER, ("NL2SH_STANDIN_IME", current)]);
        let err = rig
            .run("android.text", json!({"text": "ü"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(why) && err.contains("nothing was switched"),
            "{err}"
        );
        assert!(
            !rig.ran().iter().any(|l| l.starts_with("ime ")),
            "{current}"
        );
    }
}

#[tokio::test]
async fn the_owner_reads_the_text_and_each_step() {
    let rig = Rig::new(&[HELPER]);
    let tool = rig.tool("android.text");
    let args = json!({"text": "日本"});
    let prepared = tool.prepare(args.as_object().unwrap(), &rig.env).unwrap();
    let data = prepared.data.as_ref().unwrap();
    assert_eq!(
        (data.what.as_str(), data.bytes.as_slice()),
        ("text", "日本".as_bytes())
    );
    let bin = rig.dir.join("bin");
    let action = prepared.action.replace(&format!("{}/", bin.display()), "");
    assert_eq!(
        action,
        "type 2 characters through the Unicode IME: pm path io.appium.settings; settings get \
         secure default_input_method; ime enable io.appium.settings/.UnicodeIME; ime set \
         io.appium.settings/.UnicodeIME; input text '&ZeVnLA-'; ime set (the previous input method)"
    );
}
