//! The supervisor's side of the configuration file: where it lives, loading it at startup,
//! and where its state goes.
//!
//! What the file may contain — keys, types, defaults, validation and the error messages —
//! is [`nl2sh_proto::config`], shared with approvald, which re-reads the same file for
//! every decision. The supervisor parses it in [`ParseMode::Startup`]: unknown keys and
//! out-of-range values are refused with the file, line and key in the message. Loading
//! never rewrites the file.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nl2sh_proto::config::ParseMode;
pub use nl2sh_proto::config::{absolute, service_dir, state_dir};
pub use nl2sh_proto::config::{Config, ConfigError};

/// Configuration path on a rooted Android device.
const ANDROID_CONFIG_PATH: &str = "/data/adb/nl2sh/config.toml";
/// Last-resort configuration path on other systems.
const SYSTEM_CONFIG_PATH: &str = "/etc/nl2sh/config.toml";

/// The configuration path used when `--config` is not given.
pub fn default_config_path() -> PathBuf {
    default_config_path_for(
        nl2sh_proto::platform::is_android(),
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

fn default_config_path_for(
    android: bool,
    xdg_config_home: Option<OsString>,
    home: Option<OsString>,
) -> PathBuf {
    if android {
        return PathBuf::from(ANDROID_CONFIG_PATH);
    }
    // XDG Base Directory: a relative XDG_CONFIG_HOME is invalid and must be ignored.
    if let Some(xdg) = xdg_config_home.map(PathBuf::from) {
        if xdg.is_absolute() {
            return xdg.join("nl2sh").join("config.toml");
        }
    }
    if let Some(home) = home.map(PathBuf::from) {
        if home.is_absolute() {
            return home.join(".config").join("nl2sh").join("config.toml");
        }
    }
    PathBuf::from(SYSTEM_CONFIG_PATH)
}

/// Load `path`. A missing file is an error when the path was given explicitly and means
/// "all defaults" when it is the default path. The file is never modified.
pub fn load(path: &Path, explicit: bool) -> Result<Config, ConfigError> {
    let config = match nl2sh_proto::config::load(path, ParseMode::Startup) {
        Ok(config) => config,
        Err(ConfigError::Missing { .. }) if !explicit => return Ok(Config::default()),
        Err(e) => return Err(e),
    };
    warn_if_token_readable_by_others(path, &config);
    Ok(config)
}

fn warn_if_token_readable_by_others(path: &Path, config: &Config) {
    let has_token = config
        .protocol_token
        .as_deref()
        .is_some_and(|t| !t.is_empty());
    if !has_token {
        return;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", meta.mode() & 0o7777),
                "configuration file holds protocol_token but is readable by other users; chmod 600 it"
            );
        }
    }
}

/// The identity of the configuration at `path` for discovery: its canonical path when it
/// exists (so a symlink or a relative path finds the same process), else the absolute path.
pub fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| absolute(path))
}

/// The configuration for finding and stopping what runs, which must work even when the
/// file was edited into something that no longer loads: the strict load, else only its
/// `state_dir` string (read leniently), else the defaults. The second value says why the
/// strict load failed.
pub fn load_for_discovery(path: &Path) -> (Config, Option<ConfigError>) {
    match nl2sh_proto::config::load(path, ParseMode::Startup) {
        Ok(config) => (config, None),
        Err(ConfigError::Missing { .. }) => (Config::default(), None),
        Err(e) => {
            let state_dir = nl2sh_proto::config::read_bounded(path)
                .ok()
                .and_then(|text| text.parse::<toml_edit::DocumentMut>().ok())
                .and_then(|doc| doc.get("state_dir")?.as_str().map(PathBuf::from))
                .filter(|dir| !dir.as_os_str().is_empty());
            let mut config = Config::default();
            config.state_dir = state_dir;
            (config, Some(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    // The parse's tests (keys, messages, limits) moved with it to nl2sh_proto::config.

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn loading_never_rewrites_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let text = "bridge_auto_approve = true\n# comment\n";
        let p = write(dir, "config.toml", text);
        let before = std::fs::metadata(&p).unwrap().modified().unwrap();
        load(&p, true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_file_default_vs_explicit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = dir.join("nope.toml");
        assert_eq!(load(&p, false).unwrap(), Config::default());
        let msg = load(&p, true).unwrap_err().to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_reads_a_real_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = write(dir, "config.toml", "protocol_service_port = 9000\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load(&p, true).unwrap().service_port(), 9000);
        assert_eq!(load(&p, false).unwrap().service_port(), 9000);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn default_paths() {
        assert_eq!(
            default_config_path_for(true, Some("/x".into()), Some("/home/u".into())),
            PathBuf::from("/data/adb/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("/x".into()), Some("/home/u".into())),
            PathBuf::from("/x/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("rel".into()), Some("/home/u".into())),
            PathBuf::from("/home/u/.config/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, Some("".into()), None),
            PathBuf::from("/etc/nl2sh/config.toml")
        );
        assert_eq!(
            default_config_path_for(false, None, Some("".into())),
            PathBuf::from("/etc/nl2sh/config.toml")
        );
    }

    #[test]
    fn identity_resolves_symlinks_and_relative_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let real = write(&dir, "config.toml", "");
        let link = dir.join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(identity(&link), real);
        assert_eq!(identity(&real), real);
        let missing = dir.join("missing.toml");
        assert_eq!(identity(&missing), missing);
        assert!(identity(Path::new("rel.toml")).is_absolute());
    }

    #[test]
    fn discovery_finds_the_state_dir_of_a_file_that_no_longer_loads() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = write(
            dir,
            "config.toml",
            "state_dir = \"elsewhere\"\nunknown_key = 1\n",
        );
        let (cfg, why) = load_for_discovery(&p);
        assert_eq!(state_dir(&cfg, &p), dir.join("elsewhere"));
        assert!(why.unwrap().to_string().contains("unknown_key"));
        let p = write(dir, "broken.toml", "state_dir = \"x\"\n[[[\n");
        let (cfg, why) = load_for_discovery(&p);
        assert_eq!(state_dir(&cfg, &p), dir.join("broken.state"));
        assert!(why.is_some());
        let (cfg, why) = load_for_discovery(&dir.join("absent.toml"));
        assert_eq!(cfg, Config::default());
        assert!(why.is_none());
    }
}
