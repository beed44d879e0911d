//! The phone's own verbs and any text through the real tree, one of each risk: a low
//! verb a grant covers runs unasked, a dangerous install asks even with a grant and only
//! its exact phrase approves it, a private clipboard read asks and rejected reads nothing,
//! and non-ASCII text switches the input method and back (docs/PROTOCOLS.md,
//! docs/APPROVALS.md). The device is the stand-ins of tests/fixtures/android-bin.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use nl2sh_tests::{pending_approvals, run_on_terminal, run_without_terminal, wait_pending};
use nl2sh_tests::{Fixture, Server};

const LATIN: &str = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME";

/// Android's programs, as wrappers that set the stand-ins' variables (tools run with a
/// clean environment) and exec the stand-ins of tests/fixtures/android-bin; their log and
/// state are reachable by the shell identity (2000) the Android tools run as when the
/// tests run as root.
struct Device {
    dir: tempfile::TempDir,
}

const PROGRAMS: [&str; 8] = [
    "getprop",
    "input",
    "am",
    "pm",
    "ime",
    "settings",
    "dumpsys",
    "uiautomator",
];

impl Device {
    fn new() -> Device {
        let dir = tempfile::Builder::new()
            .prefix("nl2sh-verbs-")
            .tempdir()
            .unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(dir.path(), 0o777);
        let log = dir.path().join("log");
        std::fs::write(&log, "").unwrap();
        mode(&log, 0o666);
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        mode(&bin, 0o755);
        let real = nl2sh_tests::android_standins();
        for name in PROGRAMS {
            let script = format!(
                "#!/bin/sh\nexport NL2SH_STANDIN_LOG='{}' NL2SH_STANDIN_STATE='{}'\n\
                 export NL2SH_STANDIN_INSTALLED=io.appium.settings\n\
                 export NL2SH_STANDIN_FOCUS=com.example.notes/.EditActivity\n\
                 export NL2SH_STANDIN_CLIPBOARD='one-time code 918273'\n\
                 exec '{}' \"$@\"\n",
                log.display(),
                dir.path().display(),
                real.join(name).display()
            );
            std::fs::write(bin.join(name), script).unwrap();
            mode(&bin.join(name), 0o755);
        }
        Device { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn start(&self, fx: &Fixture) -> Server {
        let path = nl2sh_tests::path_with(&self.path("bin"));
        Server::start(fx, &[], &[("PATH", &path)])
    }

    /// What ran on the device, without the `getprop` reads of discovery.
    fn ran(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("log"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("getprop"))
            .map(String::from)
            .collect()
    }
}

fn config(grants: &[&str]) -> String {
    let mut c = String::from("approval_timeout_secs = 60\n");
    for tool in grants {
        c.push_str(&format!("\n[[approval_grants]]\ntool = \"{tool}\"\n"));
    }
    c
}

fn short(action: &str, bin: &Path) -> String {
    action.replace(&format!("{}/", bin.display()), "")
}

#[test]
fn a_low_verb_a_grant_covers_runs_unasked() {
    let device = Device::new();
    let fx = Fixture::new(&config(&["android.wake"]));
    let server = device.start(&fx);
    let r = server.invoke("android.wake", json!({}));
    assert!(!r.is_error, "{r:?}");
    assert!(pending_approvals(&fx).is_empty());
    assert_eq!(device.ran(), ["input keyevent KEYCODE_WAKEUP"]);
}

#[test]
fn a_dangerous_install_asks_despite_a_grant_and_needs_its_phrase() {
    let device = Device::new();
    let apk = device.path("notes.apk");
    std::fs::write(&apk, b"PK\x03\x04").unwrap();
    std::fs::set_permissions(&apk, std::fs::Permissions::from_mode(0o644)).unwrap();
    let fx = Fixture::new(&config(&["android.install"]));
    let server = device.start(&fx);
    let call = server.invoke_async(
        "android.install",
        json!({"path": apk.display().to_string()}),
    );
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(
        (&p["tool"], &p["risk"]),
        (&json!("android.install"), &json!("dangerous")),
        "{p}"
    );
    let bin = device.path("bin");
    assert_eq!(
        short(p["action"].as_str().unwrap(), &bin),
        format!("pm install {}", apk.display())
    );
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(p["phrase"], format!("approve dangerous {id}"));
    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(6), "{err}");
    assert!(device.ran().is_empty(), "nothing runs before the phrase");
    let phrase = format!("approve dangerous {id}");
    let (code, out, err) = run_on_terminal(&fx, &["protocol", "approve", &id, "--phrase", &phrase]);
    assert_eq!(code, Some(0), "{out}{err}");
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["pm"], json!(["Success"]));
    assert_eq!(device.ran(), [format!("pm install {}", apk.display())]);
}

#[test]
fn a_clipboard_read_asks_and_rejected_reads_nothing() {
    let device = Device::new();
    let fx = Fixture::new(&config(&["android.clipboard_get"]));
    let server = device.start(&fx);
    let call = server.invoke_async("android.clipboard_get", json!({}));
    let p = wait_pending(&fx, 1).remove(0);
    assert_eq!(
        (&p["tool"], &p["risk"]),
        (&json!("android.clipboard_get"), &json!("read_only")),
        "{p}"
    );
    assert!(p.to_string().contains("private"), "{p}");
    let id = p["id"].as_str().unwrap();
    let (code, _, err) = run_without_terminal(&fx, &["protocol", "reject", id]);
    assert_eq!(code, Some(0), "{err}");
    let r = call.join().unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(!r.output().to_string().contains("918273"), "{r:?}");
    assert!(device.ran().is_empty());

    // Approved, it reads through the helper and puts the keyboard back.
    let call = server.invoke_async("android.clipboard_get", json!({}));
    let id = wait_pending(&fx, 1).remove(0)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, err) = run_on_terminal(&fx, &["protocol", "approve", &id]);
    assert_eq!(code, Some(0), "{err}");
    let r = call.join().unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["text"], "one-time code 918273");
    assert_eq!(device.ran().last().unwrap(), &format!("ime set {LATIN}"));
}

#[test]
fn non_ascii_text_goes_through_the_unicode_ime_and_back() {
    let device = Device::new();
    let fx = Fixture::new(&config(&["android.text"]));
    let server = device.start(&fx);
    let r = server.invoke("android.text", json!({"text": "Привет, 世界 👋"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.output()["via"], "unicode_ime");
    assert_eq!(
        device.ran(),
        [
            // Which app is in front (a UI action is judged by it, and checked again right
            // before input), then the typing.
            "dumpsys window",
            "dumpsys window",
            "pm path io.appium.settings",
            "settings get secure default_input_method",
            "ime enable io.appium.settings/.UnicodeIME",
            "ime set io.appium.settings/.UnicodeIME",
            "input text &BB8EQAQ4BDIENQRC-,%s&ThZ1TA-%s&2D3cSw-",
            &format!("ime set {LATIN}"),
        ]
    );
}
