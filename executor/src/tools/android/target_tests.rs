//! Element targets, words and revalidation (`target.rs`) on real dumps from the shared
//! corpus and against the stand-ins changing the screen between prepare and run.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::target::{ImageMap, Selector};
use super::tests::Rig;
use super::uixml;
use crate::tools::ToolError;

fn real_dump(name: &str) -> Option<uixml::UiDump> {
    let dir = super::corpus::root()?;
    let bytes = std::fs::read(dir.join("uidump").join(name)).ok()?;
    Some(uixml::parse(super::corpus::text(&bytes).as_bytes()).expect(name))
}

fn selector(v: Value) -> Selector {
    Selector::from_value(&v).expect("selector")
}

#[test]
fn every_labelled_element_of_every_real_dump_is_found_by_its_fields() {
    let Some(dir) = super::corpus::root_or_skip() else {
        return;
    };
    let mut files = 0;
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.join("uidump")).unwrap() {
        let path = entry.unwrap().path();
        let text = super::corpus::text(&std::fs::read(&path).unwrap());
        let Ok(dump) = uixml::parse(text.as_bytes()) else {
            continue;
        };
        files += 1;
        for (field, get) in [
            (
                "text",
                (|n: &uixml::UiNode| n.text.clone()) as fn(&uixml::UiNode) -> String,
            ),
            ("desc", |n| n.desc.clone()),
            ("id", |n| n.id.clone()),
        ] {
            for node in dump.nodes.iter().filter(|n| !get(n).is_empty()) {
                let want = get(node);
                let same: Vec<&uixml::UiNode> =
                    dump.nodes.iter().filter(|n| get(n) == want).collect();
                let index = same.iter().position(|n| std::ptr::eq(*n, node)).unwrap();
                let s = selector(json!({ field: want.clone(), "index": index }));
                assert!(
                    std::ptr::eq(s.find(&dump).unwrap(), node),
                    "{path:?} {field} {want:?}"
                );
                let bare = selector(json!({ field: want.clone() }));
                match bare.find(&dump) {
                    Ok(n) => assert!(same.len() == 1 && std::ptr::eq(n, node)),
                    Err(why) => assert!(
                        same.len() > 1 && why.contains("pick one with `index`"),
                        "{why}"
                    ),
                }
                checked += 1;
            }
        }
    }
    assert!(
        files >= 19 && checked > 1000,
        "{files} files, {checked} lookups"
    );
}

#[test]
fn cjk_and_emoji_labels_match_exactly() {
    let Some(zh) = real_dump("launcher_ldplayer_zh.xml") else {
        nl2sh_proto::test_skip::skip("the shared android-real corpus is absent");
        return;
    };
    let folder = selector(json!({"desc": "文件夹：系统应用"}));
    let n = folder.find(&zh).unwrap();
    assert_eq!(n.desc, "文件夹：系统应用");
    assert!(super::target::words(n).starts_with("'文件夹：系统应用' ("));
    // Exact, not contains: a prefix finds nothing.
    assert!(selector(json!({"desc": "文件夹"}))
        .find(&zh)
        .unwrap_err()
        .contains("no element"));

    let ko = real_dump("launcher_nova_drawer_ko_rot1.xml").unwrap();
    assert_eq!(
        selector(json!({"desc": "플레이 스토어"}))
            .find(&ko)
            .unwrap()
            .desc,
        "플레이 스토어"
    );

    let emoji = real_dump("compose_webview_emoji_home.xml").unwrap();
    let title =
        "Top 10🔥 Viral  Phonk Mix  ☠️| AGGRESSIVE PHONK | MUSIC PLAYLIST [FUNK, GYM, AGGRESSIVE]";
    let found: Vec<_> = emoji.nodes.iter().filter(|n| n.desc == title).collect();
    assert!(!found.is_empty(), "the dump names the emoji title");
    let s = selector(json!({"desc": title, "index": 0}));
    assert_eq!(s.find(&emoji).unwrap().desc, title);
}

#[test]
fn a_map_turns_image_pixels_into_screen_pixels() {
    let map =
        ImageMap::from_value(&json!({"image": [540, 1200], "screen": [0, 0, 1080, 2400]})).unwrap();
    assert_eq!(map.screen_point(0, 0).unwrap(), (1, 1));
    assert_eq!(map.screen_point(539, 1199).unwrap(), (1079, 2399));
    assert_eq!(map.screen_point(270, 600).unwrap(), (541, 1201));
    // A crop: the image shows the screen's [100,200]..[612,712] at 256x256.
    let crop = ImageMap::from_value(&json!({"image": [256, 256], "screen": [100, 200, 612, 712]}))
        .unwrap();
    assert_eq!(crop.screen_point(0, 255).unwrap(), (101, 711));
    assert!(crop.screen_point(256, 0).is_err());
    for bad in [
        json!({"image": [0, 10], "screen": [0, 0, 10, 10]}),
        json!({"image": [10, 10], "screen": [10, 0, 10, 10]}),
        json!({"image": [10, 10], "screen": [0, 9, 10, 2]}),
        json!({"image": [10], "screen": [0, 0, 10, 10]}),
        json!({"image": [10, 10], "screen": [0, 0, 10]}),
        json!({"image": [10, -1], "screen": [0, 0, 10, 10]}),
        json!({"image": [10, 10]}),
        json!("540x1200"),
    ] {
        assert!(ImageMap::from_value(&bad).is_err(), "{bad}");
    }
}

#[test]
fn selectors_are_checked() {
    for bad in [
        json!({}),
        json!({"package": "com.x"}),
        json!({"text": ""}),
        json!({"text": 5}),
        json!({"text": "a", "index": 300}),
        json!({"text": "a", "index": -1}),
        json!("OK"),
    ] {
        assert!(Selector::from_value(&bad).is_err(), "{bad}");
    }
}

/// A rig whose screen is the stand-in dump on the first read, then each of `later` (one
/// per read, the last one from then on); `focus` is the stand-in dumpsys's foreground app
/// per read, when given.
struct Changing {
    rig: Rig,
    screens: PathBuf,
}

impl Drop for Changing {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.screens);
    }
}

fn changing(later: &[fn(&str) -> String], focus: Option<&str>) -> Changing {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let base = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/android-bin/data/window_dump.xml"),
    )
    .unwrap();
    let screens = std::env::temp_dir().join(format!(
        "nl2sh-target-screens-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&screens).unwrap();
    // Read as shell (2000) when the tests run as root.
    std::fs::set_permissions(&screens, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut texts = vec![base.clone()];
    texts.extend(later.iter().map(|change| change(&base)));
    let mut files = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let f = screens.join(format!("{i}.xml"));
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        files.push(f.display().to_string());
    }
    let seq = files.join(":");
    let mut vars = vec![("NL2SH_STANDIN_UI_XML_SEQ", seq.as_str())];
    if let Some(f) = focus {
        vars.push(("NL2SH_STANDIN_FOCUS_SEQ", f));
    }
    Changing {
        rig: Rig::new(&vars),
        screens,
    }
}

/// The stand-in screen with the Battery row (and its texts) `dy` pixels lower.
fn battery_down(base: &str, dy: i32) -> String {
    base.replace(
        "[96,690][400,716]",
        &format!("[96,{}][400,{}]", 690 + dy, 716 + dy),
    )
    .replace(
        "[0,660][540,770]",
        &format!("[0,{}][540,{}]", 660 + dy, 770 + dy),
    )
}

fn inputs(rig: &Rig) -> Vec<String> {
    rig.ran()
        .into_iter()
        .filter(|l| l.starts_with("input "))
        .collect()
}

fn action(rig: &Rig, tool: &str, args: Value) -> Result<String, ToolError> {
    let prepared = rig
        .tool(tool)
        .prepare(args.as_object().unwrap(), &rig.env)?;
    // The action names `input` by its path; the rig's directory is left out here.
    Ok(prepared
        .action
        .replace(&format!("{}/bin/", rig.dir.display()), ""))
}

#[tokio::test]
async fn a_tap_on_an_element_says_what_it_touches_and_taps_its_center() {
    let rig = Rig::new(&[]);
    let args = json!({"element": {"text": "Battery"}});
    assert_eq!(
        action(&rig, "android.tap", args.clone()).unwrap(),
        "tap 'Battery' (text) in com.android.settings at (248, 703): \
         through the touchscreen (or: input tap 248 703)"
    );
    let (v, _) = rig.ok("android.tap", args).await;
    assert_eq!(
        (&v["tapped"], &v["injected"], &v["target"]),
        (
            &json!([248, 703]),
            &json!(true),
            &json!("'Battery' (text) in com.android.settings")
        )
    );
    assert_eq!(v["element"]["bounds"], json!([96, 690, 400, 716]));
    // Read while preparing (twice: the action above, then the call) and before input.
    let ran = rig.ran();
    assert_eq!(
        ran.iter()
            .filter(|l| l.starts_with("uiautomator dump"))
            .count(),
        3
    );
    assert_eq!(inputs(&rig), ["input tap 248 703"]);
    // The id without its package prefix, narrowed by package.
    let (v, _) = rig
        .ok(
            "android.tap",
            json!({"element": {"id": "homepage_title", "package": "com.android.settings"}}),
        )
        .await;
    assert_eq!(v["tapped"], json!([117, 90]));
}

#[tokio::test]
async fn an_ambiguous_or_missing_element_is_an_error_and_nothing_is_tapped() {
    let rig = Rig::new(&[]);
    let err = rig
        .run(
            "android.tap",
            json!({"element": {"id": "android:id/title"}}),
        )
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{msg}");
    assert!(
        msg.contains("elements match id 'android:id/title'")
            && msg.contains("0: 'Network & internet' (text)")
            && msg.contains("2: 'Apps' (text)"),
        "{msg}"
    );
    let (v, _) = rig
        .ok(
            "android.tap",
            json!({"element": {"id": "android:id/title", "index": 2}}),
        )
        .await;
    assert_eq!(v["target"], json!("'Apps' (text) in com.android.settings"));
    for missing in [
        json!({"text": "Delete account"}),
        json!({"text": "battery"}),
        json!({"text": "Battery", "package": "com.other"}),
        json!({"id": "android:id/title", "index": 40}),
    ] {
        let err = rig
            .run("android.tap", json!({ "element": missing }))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{missing}");
    }
    // An element and coordinates at once is refused.
    assert!(rig
        .run(
            "android.tap",
            json!({"element": {"text": "Battery"}, "x": 1, "y": 1})
        )
        .await
        .is_err());
    assert_eq!(inputs(&rig), ["input tap 248 483"]);
}

#[tokio::test]
async fn a_tap_is_refused_when_the_element_is_gone_moved_or_another_app_is_in_front() {
    type Case = (fn(&str) -> String, Option<&'static str>, &'static str);
    let cases: [Case; 4] = [
        (
            |b| b.replace("text=\"Battery\"", "text=\"Akku\""),
            None,
            "gone",
        ),
        (|b| battery_down(b, 100), None, "moved"),
        (
            |b| b.to_string(),
            Some("com.android.settings/.Settings com.evil/.Overlay"),
            "app",
        ),
        (
            |b| b.replace("text=\"Apps\"", "text=\"Battery\""),
            None,
            "ambiguous",
        ),
    ];
    for (change, focus, what) in cases {
        let screen = changing(&[change], focus);
        let out = screen
            .rig
            .run("android.tap", json!({"element": {"text": "Battery"}}))
            .await
            .unwrap();
        assert!(!out.success, "{what}: {}", out.output);
        let v: Value = serde_json::from_str(&out.output).unwrap();
        assert_eq!(
            (&v["change"], &v["injected"]),
            (&json!(what), &json!(false))
        );
        assert!(
            inputs(&screen.rig).is_empty(),
            "{what}: {:?}",
            screen.rig.ran()
        );
        if what == "app" {
            assert!(v["message"]
                .as_str()
                .unwrap()
                .contains("another app is in front: com.evil (was com.android.settings)"));
        }
    }
    // Within the tolerance it is the same element: tapped where it was approved.
    let screen = changing(&[|b| battery_down(b, 10)], None);
    let (v, _) = screen
        .rig
        .ok("android.tap", json!({"element": {"text": "Battery"}}))
        .await;
    assert_eq!(v["tapped"], json!([248, 703]));
    assert_eq!(inputs(&screen.rig), ["input tap 248 703"]);
}

#[tokio::test]
async fn a_point_is_named_by_the_element_under_it_and_checked_again() {
    let rig = Rig::new(&[]);
    assert_eq!(
        action(&rig, "android.tap", json!({"x": 300, "y": 700})).unwrap(),
        "tap 'Battery' (LinearLayout) in com.android.settings at (300, 700): \
         through the touchscreen (or: input tap 300 700)"
    );
    // The Battery row moved away between the approval and the tap.
    let screen = changing(&[|b| battery_down(b, 200)], None);
    let out = screen
        .rig
        .run("android.tap", json!({"x": 300, "y": 700}))
        .await
        .unwrap();
    assert!(!out.success);
    let v: Value = serde_json::from_str(&out.output).unwrap();
    assert_eq!(v["change"], json!("point"), "{v}");
    assert!(inputs(&screen.rig).is_empty());
    // In a screenshot's pixels: half-size image of the 540x1200 screen.
    let (v, _) = rig
        .ok(
            "android.tap",
            json!({"x": 150, "y": 350, "map": {"image": [270, 600], "screen": [0, 0, 540, 1200]}}),
        )
        .await;
    assert_eq!(v["tapped"], json!([301, 701]));
    assert!(rig
        .run(
            "android.tap",
            json!({"x": 270, "y": 0, "map": {"image": [270, 600], "screen": [0, 0, 540, 1200]}})
        )
        .await
        .is_err());
    rig.ok(
        "android.swipe",
        json!({"x1": 10, "y1": 500, "x2": 10, "y2": 100, "map": {"image": [270, 600], "screen": [0, 0, 540, 1200]}}),
    )
    .await;
    assert_eq!(
        inputs(&rig),
        ["input tap 301 701", "input swipe 21 1001 21 201"]
    );
}

#[tokio::test]
async fn an_unreadable_screen_is_said_for_a_point_and_refuses_an_element() {
    let rig = Rig::new(&[("NL2SH_STANDIN_UI", "busy")]);
    let shown = action(&rig, "android.tap", json!({"x": 5, "y": 6})).unwrap();
    assert!(
        shown.starts_with("tap the screen could not be read (uiautomator failed"),
        "{shown}"
    );
    let (v, _) = rig.ok("android.tap", json!({"x": 5, "y": 6})).await;
    assert_eq!(v["tapped"], json!([5, 6]));
    assert!(rig
        .run("android.tap", json!({"element": {"text": "Battery"}}))
        .await
        .is_err());
    assert_eq!(inputs(&rig), ["input tap 5 6"]);
}

#[tokio::test]
async fn long_press_and_text_aim_at_elements() {
    let rig = Rig::new(&[]);
    let (v, _) = rig
        .ok(
            "android.long_press",
            json!({"element": {"text": "Battery"}}),
        )
        .await;
    assert_eq!(
        (&v["pressed"], &v["duration_ms"]),
        (&json!([248, 703]), &json!(1000))
    );
    rig.ok(
        "android.long_press",
        json!({"x": 3, "y": 4, "duration_ms": 600}),
    )
    .await;
    assert!(rig
        .run(
            "android.long_press",
            json!({"x": 3, "y": 4, "duration_ms": 100})
        )
        .await
        .is_err());
    let shown = action(
        &rig,
        "android.text",
        json!({"text": "hi you", "element": {"text": "Search settings"}}),
    )
    .unwrap();
    assert_eq!(
        shown,
        "type into 'Search settings' (text) in com.android.settings at (190, 168): \
         input tap 190 168; input text hi%syou"
    );
    rig.ok(
        "android.text",
        json!({"text": "hi you", "element": {"text": "Search settings"}}),
    )
    .await;
    assert_eq!(
        inputs(&rig),
        [
            "input swipe 248 703 248 703 1000",
            "input swipe 3 4 3 4 600",
            "input tap 190 168",
            "input text hi%syou"
        ]
    );
}

#[tokio::test]
async fn wait_for_reports_what_happened_or_that_it_timed_out() {
    // The Battery row appears on the third read.
    let gone: fn(&str) -> String = |b| b.replace("text=\"Battery\"", "text=\"Akku\"");
    let screen = changing(&[gone, gone, |b| b.to_string()], None);
    let rig = &screen.rig;
    let (v, _) = rig
        .ok("android.wait_for", json!({"element": {"text": "Battery"}}))
        .await;
    // The first read is the plain stand-in screen: Battery is there at once.
    assert_eq!((&v["met"], &v["reads"]), (&json!(true), &json!(1)), "{v}");
    let (v, _) = rig
        .ok(
            "android.wait_for",
            json!({"element": {"text": "Battery"}, "timeout_ms": 5000}),
        )
        .await;
    assert_eq!((&v["met"], &v["reads"]), (&json!(true), &json!(3)), "{v}");
    assert_eq!(
        v["appeared"],
        json!("'Battery' (text) in com.android.settings")
    );

    let screen = changing(&[gone], None);
    let (v, _) = screen
        .rig
        .ok(
            "android.wait_for",
            json!({"element": {"text": "Battery"}, "gone": true, "timeout_ms": 3000}),
        )
        .await;
    assert_eq!((&v["met"], &v["reads"]), (&json!(true), &json!(2)), "{v}");

    let (v, _) = screen
        .rig
        .ok(
            "android.wait_for",
            json!({"element": {"text": "Nowhere"}, "timeout_ms": 1200}),
        )
        .await;
    assert_eq!(
        (&v["met"], &v["timed_out"]),
        (&json!(false), &json!(true)),
        "{v}"
    );

    let apps = changing(
        &[],
        Some("com.android.settings/.Settings com.android.settings/.Settings com.x/.Main"),
    );
    let (v, _) = apps
        .rig
        .ok(
            "android.wait_for",
            json!({"app_changes": true, "timeout_ms": 5000}),
        )
        .await;
    assert_eq!(
        v["app_changed"],
        json!({"was": "com.android.settings", "now": "com.x"}),
        "{v}"
    );
    for bad in [
        json!({}),
        json!({"app": "com.x", "app_changes": true}),
        json!({"element": {"text": "a"}, "app": "com.x"}),
        json!({"app": "not a package"}),
        json!({"app_changes": true, "gone": true}),
        json!({"element": {"text": "a"}, "timeout_ms": 30001}),
    ] {
        assert!(
            screen
                .rig
                .run("android.wait_for", bad.clone())
                .await
                .is_err(),
            "{bad}"
        );
    }
}

/// An app chooses its own texts: one that closes the quotes early cannot make the owner
/// read another app's element in the approval. The quote inside the label is escaped, so
/// the owner sees where the app's text ends.
#[tokio::test]
async fn a_label_cannot_close_its_quotes_and_name_another_app() {
    use std::os::unix::fs::PermissionsExt;
    let base = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/android-bin/data/window_dump.xml"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Read as shell (2000) when the tests run as root.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let screen = dir.path().join("spoof.xml");
    std::fs::write(
        &screen,
        base.replace(
            "text=\"Battery\"",
            "text=\"Pay&apos; (button) in com.bank.app\\\"",
        ),
    )
    .unwrap();
    std::fs::set_permissions(&screen, std::fs::Permissions::from_mode(0o644)).unwrap();
    let rig = Rig::new(&[("NL2SH_STANDIN_UI_XML", &screen.display().to_string())]);
    let action = action(&rig, "android.tap", json!({"x": 248, "y": 703})).unwrap();
    assert!(
        action.starts_with(
            "tap 'Pay\\' (button) in com.bank.app\\\\' (LinearLayout) in com.android.settings at (248, 703): "
        ),
        "{action}"
    );
    assert!(
        action.ends_with(": through the touchscreen (or: input tap 248 703)"),
        "{action}"
    );
}
