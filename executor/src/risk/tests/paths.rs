//! `assess_path_write` / `assess_path_read`: every table row, and the matching rules.

use std::path::Path;

use nl2sh_proto::channels::RiskLevel::{Critical, Dangerous, High, Low, Medium, ReadOnly};

use super::super::path_table::{CRITICAL_TREES, READ_PATHS, WRITE_PATHS};
use super::super::paths::{critical_tree, glob, normalize};
use super::super::{assess_path_read, assess_path_write};

/// A concrete path a pattern stands for.
fn sample(pattern: &str) -> String {
    pattern.replace("**", "/home/u").replace(['*', '?'], "x")
}

#[test]
fn every_write_row() {
    for (pattern, level, why) in WRITE_PATHS {
        let path = sample(pattern);
        let a = assess_path_write(Path::new(&path));
        assert_eq!(a.level, *level, "{path}: {:?}", a.reasons);
        assert!(!why.is_empty());
        if *level > ReadOnly {
            let below = assess_path_write(Path::new(&format!("{path}/child")));
            assert!(below.level >= *level, "{path}/child");
        }
    }
}

#[test]
fn every_read_row() {
    for (pattern, level, _) in READ_PATHS.iter() {
        let path = sample(pattern);
        assert_eq!(assess_path_read(Path::new(&path)).level, *level, "{path}");
    }
}

#[test]
fn every_critical_tree() {
    for tree in CRITICAL_TREES {
        let path = tree.replace('*', "u");
        assert!(critical_tree(&path).is_some(), "{path}");
        assert!(critical_tree(&format!("{path}/*")).is_some(), "{path}/*");
    }
    assert!(critical_tree("/data/local/tmp").is_none());
    assert!(critical_tree("/sdcard/Download").is_none());
}

#[test]
fn writes() {
    let cases = [
        ("/sdcard/x.txt", Low),
        ("/data/local/tmp/a", Low),
        ("/tmp/x", Low),
        ("/home/u/notes.txt", Low),
        ("/system/build.prop", Dangerous),
        ("/system/../system/bin/sh", Dangerous),
        ("/vendor/etc/x", Dangerous),
        ("/product/app/x", Dangerous),
        ("/odm/x", Dangerous),
        ("/apex/com.android.runtime/bin/x", Dangerous),
        ("/boot/vmlinuz", Dangerous),
        ("/dev/block/mmcblk0", Critical),
        ("/dev/block/by-name/boot", Critical),
        ("/dev/sda1", Critical),
        ("/dev/mmcblk0p1", Critical),
        ("/dev/null", ReadOnly),
        ("/dev/input/event0", High),
        ("/data/adb/modules/x/service.sh", Dangerous),
        ("/data/system/packages.xml", Dangerous),
        ("/etc/passwd", Dangerous),
        ("/etc/shadow", Dangerous),
        ("/etc/sudoers.d/x", Dangerous),
        ("/etc/hosts", High),
        ("/proc/sys/kernel/x", High),
        ("/sys/class/x", High),
        ("/root/.ssh/authorized_keys", Dangerous),
        ("/home/u/.bashrc", High),
        ("/data/local/tmp/cfg/config.toml", High),
        (
            "/data/local/tmp/config.state/protocol/tasks.sqlite3",
            Dangerous,
        ),
    ];
    for (path, level) in cases {
        let a = assess_path_write(Path::new(path));
        assert_eq!(a.level, level, "{path}: {:?}", a.reasons);
    }
    assert_eq!(assess_path_write(Path::new("relative/x")).level, Medium);
}

#[test]
fn reads() {
    let cases = [
        ("/sdcard/x.txt", ReadOnly),
        ("/proc/cpuinfo", ReadOnly),
        ("/etc/passwd", ReadOnly),
        ("/etc/shadow", Medium),
        ("/data/adb/magisk.db", Medium),
        ("/home/u/.ssh/id_ed25519", Medium),
        ("/home/u/.ssh/id_ed25519.pub", ReadOnly),
        // The sandbox hides a home's whole `.ssh`, so reading in it asks (one table of
        // secrets: what is hidden is what asks), public keys aside.
        ("/home/u/.ssh/known_hosts", Medium),
        ("/root/.ssh/id_rsa.pub", ReadOnly),
        // Rows the two tables used to disagree on.
        ("/etc/wireguard/wg0.conf", Medium),
        ("/var/lib/iwd/home.psk", Medium),
        ("/home/u/.password-store/bank.gpg", Medium),
        ("~/.password-store/bank.gpg", Medium),
        ("/data/local/tmp/config.toml", Medium),
        ("/data/data/com.example/shared_prefs/x.xml", Medium),
        ("/proc/1/environ", Medium),
    ];
    for (path, level) in cases {
        assert_eq!(assess_path_read(Path::new(path)).level, level, "{path}");
    }
}

#[test]
fn normalising_and_globbing() {
    assert_eq!(normalize("/a/./b//c/../d/"), "/a/b/d");
    assert_eq!(normalize("/../.."), "/");
    assert!(glob("sd*", "sda1"));
    assert!(glob("ssh_host_*_key", "ssh_host_rsa_key"));
    assert!(!glob("ssh_host_*_key", "ssh_host_rsa_key.pub"));
    assert!(glob("*", ""));
    assert!(glob("a?c", "abc"));
    assert!(!glob("a?c", "ac"));
}
