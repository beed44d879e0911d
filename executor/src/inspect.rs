//! `nl2sh_inspect`: the fixed device environment object plus build identity. Computed
//! once per executor start (the environment does not change under a running service);
//! the executable digest is computed off the start-up path and filled in when ready.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use nl2sh_proto::handshake::PROTOCOL_VERSION;

/// Android properties reported when `getprop` exists.
const ANDROID_PROPERTIES: &[&str] = &[
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.version.security_patch",
    "ro.build.fingerprint",
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.product.device",
    "ro.product.cpu.abi",
    "ro.debuggable",
    "ro.secure",
    "ro.boot.verifiedbootstate",
    "ro.build.type",
];

/// The device environment, computed once.
pub struct Environment {
    fixed: Map<String, Value>,
    executable_sha256: Arc<OnceLock<Option<String>>>,
}

impl Environment {
    /// Probe the device. `path_var` is the executor's PATH (the launching shell's).
    pub fn probe(path_var: Option<&str>) -> Self {
        let uts = nix::sys::utsname::uname().ok();
        let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
        let getprop = find_program("getprop", path_var);
        let android = getprop.as_deref().and_then(read_android_properties);
        let os_release = read_os_release(Path::new("/etc/os-release"));
        let os_name = if android.is_some() || nl2sh_proto::platform::is_android() {
            "android"
        } else {
            "linux"
        };
        let uid = nix::unistd::getuid().as_raw();
        let euid = nix::unistd::geteuid().as_raw();
        let su = find_program("su", path_var);
        let mut fixed = Map::new();
        fixed.insert(
            "os".into(),
            json!({
                "name": os_name,
                "pretty_name": os_release.get("PRETTY_NAME"),
                "id": os_release.get("ID"),
                "version_id": os_release.get("VERSION_ID"),
            }),
        );
        fixed.insert(
            "kernel".into(),
            json!({
                "sysname": uts.as_ref().map(|u| text(u.sysname())),
                "release": uts.as_ref().map(|u| text(u.release())),
                "version": uts.as_ref().map(|u| text(u.version())),
            }),
        );
        fixed.insert(
            "architecture".into(),
            json!(uts
                .as_ref()
                .map(|u| text(u.machine()))
                .unwrap_or_else(|| std::env::consts::ARCH.to_string())),
        );
        fixed.insert(
            "hostname".into(),
            json!(uts.as_ref().map(|u| text(u.nodename()))),
        );
        fixed.insert("android".into(), android.map_or(Value::Null, |p| json!(p)));
        fixed.insert("uid".into(), json!(uid));
        fixed.insert("euid".into(), json!(euid));
        fixed.insert(
            "root".into(),
            json!({
                "is_root": euid == 0,
                "available": euid == 0 || su.is_some(),
                "su_path": su.map(|p| p.display().to_string()),
            }),
        );
        let digest = Arc::new(OnceLock::new());
        let fill = digest.clone();
        // Hashing a multi-megabyte executable would delay start-up; do it beside it.
        std::thread::spawn(move || {
            fill.get_or_init(|| sha256_file(Path::new("/proc/self/exe")));
        });
        Self {
            fixed,
            executable_sha256: digest,
        }
    }

    /// The inspect object as JSON text.
    pub fn to_json(&self) -> String {
        self.to_json_with(&[])
    }

    /// The inspect object with `extra` members (state known only at the time of asking).
    pub fn to_json_with(&self, extra: &[(&str, Value)]) -> String {
        let mut obj = self.fixed.clone();
        for (key, value) in extra {
            obj.insert((*key).to_string(), value.clone());
        }
        // Waits for the background digest if it is still running.
        let sha = self
            .executable_sha256
            .get_or_init(|| sha256_file(Path::new("/proc/self/exe")))
            .clone();
        obj.insert(
            "build_identity".into(),
            build_identity(sha, obj.get("uid").cloned()),
        );
        Value::Object(obj).to_string()
    }
}

fn build_identity(executable_sha256: Option<String>, uid: Option<Value>) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "git_commit": option_env!("NL2SH_GIT_COMMIT"),
        "git_dirty": option_env!("NL2SH_GIT_DIRTY").map(|d| d == "true"),
        "build_id": option_env!("NL2SH_BUILD_ID"),
        "target": option_env!("NL2SH_TARGET"),
        "profile": option_env!("NL2SH_PROFILE"),
        "executable_sha256": executable_sha256,
        "protocol_version": PROTOCOL_VERSION,
        "uid": uid,
    })
}

pub fn sha256_file(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Some(hex::encode(hasher.finalize()))
}

/// Look a program up on PATH the way a shell would (first executable match).
pub fn find_program(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_var?
        .split(':')
        .filter(|d| !d.is_empty())
        .find_map(|dir| {
            let candidate = Path::new(dir).join(name);
            let meta = std::fs::metadata(&candidate).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
        })
}

fn read_android_properties(getprop: &Path) -> Option<BTreeMap<String, String>> {
    let out = std::process::Command::new(getprop)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let all = parse_getprop(&text);
    Some(
        ANDROID_PROPERTIES
            .iter()
            .filter_map(|k| all.get(*k).map(|v| ((*k).to_string(), v.clone())))
            .collect(),
    )
}

/// `getprop` prints `[key]: [value]` per line.
fn parse_getprop(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix('[')?;
            let (key, rest) = rest.split_once("]: [")?;
            let value = rest.strip_suffix(']')?;
            Some((key.to_string(), value.to_string()))
        })
        .collect()
}

fn read_os_release(path: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| {
            let (k, v) = line.split_once('=')?;
            Some((k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getprop_lines_parse_and_junk_is_skipped() {
        let props = parse_getprop(
            "[ro.build.version.sdk]: [34]\n[ro.product.model]: [Pixel 8]\nnonsense\n[x]: [y\n",
        );
        assert_eq!(
            props.get("ro.build.version.sdk").map(String::as_str),
            Some("34")
        );
        assert_eq!(
            props.get("ro.product.model").map(String::as_str),
            Some("Pixel 8")
        );
        assert_eq!(props.len(), 2);
    }

    #[test]
    fn inspect_object_has_every_documented_field() {
        let env = Environment::probe(std::env::var("PATH").ok().as_deref());
        let v: Value = serde_json::from_str(&env.to_json()).unwrap();
        for key in [
            "os",
            "kernel",
            "architecture",
            "android",
            "uid",
            "root",
            "build_identity",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        let bi = &v["build_identity"];
        for key in [
            "git_commit",
            "git_dirty",
            "build_id",
            "target",
            "profile",
            "executable_sha256",
            "protocol_version",
            "uid",
        ] {
            assert!(bi.get(key).is_some(), "missing build_identity.{key}");
        }
        assert_eq!(bi["executable_sha256"].as_str().map(str::len), Some(64));
        assert_eq!(v["uid"], json!(nix::unistd::getuid().as_raw()));
    }

    #[test]
    fn find_program_needs_the_execute_bit() {
        let dir = std::env::temp_dir().join(format!("nl2sh-find-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("getprop");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        let path = dir.display().to_string();
        assert!(find_program("getprop", Some(&path)).is_none());
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert_eq!(find_program("getprop", Some(&path)), Some(p));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
