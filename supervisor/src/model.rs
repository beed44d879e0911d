//! The `[model]` section as the tree runs it: the supervisor resolves the key (from the
//! file or its own environment) once at start and hands netd the result over netd's
//! control channel, so the key is never in a child's argv or environment.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nl2sh_proto::channels::{ModelSettings, ModelSetup};
use nl2sh_proto::config::Config;
use nl2sh_proto::secret::Secret;

/// Why the configured model cannot be used at all (startup refuses).
#[derive(Debug, thiserror::Error)]
pub enum ModelConfigError {
    #[error(
        "{path}: model.api_key is set but the file is readable by other users (mode {mode:o}); chmod 600 it"
    )]
    KeyFileNotPrivate { path: String, mode: u32 },
    #[error("{path}: cannot check the mode of the file holding model.api_key: {source}")]
    Stat {
        path: String,
        source: std::io::Error,
    },
}

/// The model netd gets. `env` reads the supervisor's environment (a parameter for tests).
pub fn setup(
    cfg: &Config,
    config_path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ModelSetup, ModelConfigError> {
    let Some(model) = &cfg.model else {
        return Ok(ModelSetup::Unavailable(format!(
            "no model is configured: add a [model] section to {}",
            config_path.display()
        )));
    };
    let key = match &model.api_key {
        Some(key) => {
            let path = config_path.display().to_string();
            let meta = std::fs::metadata(config_path)
                .map_err(|source| ModelConfigError::Stat {
                    path: path.clone(),
                    source,
                })?;
            if meta.mode() & 0o077 != 0 {
                return Err(ModelConfigError::KeyFileNotPrivate {
                    path,
                    mode: meta.mode() & 0o7777,
                });
            }
            key.clone()
        }
        None => match env(model.api_key_env()).filter(|k| !k.is_empty()) {
            Some(key) => key,
            None => {
                return Ok(ModelSetup::Unavailable(format!(
                    "no model key: the environment variable {} is not set for nl2sh (or set model.api_key in a 0600 {})",
                    model.api_key_env(),
                    config_path.display()
                )))
            }
        },
    };
    let either =
        |upper: &str, lower: &str| env(upper).or_else(|| env(lower)).filter(|v| !v.is_empty());
    Ok(ModelSetup::Ready(ModelSettings {
        base_url: model.base_url().trim_end_matches('/').to_string(),
        model: model.model.clone(),
        api_key: Secret::new(key),
        max_steps: model.max_steps(),
        request_timeout_secs: model.request_timeout_secs(),
        https_proxy: either("HTTPS_PROXY", "https_proxy").map(Secret::new),
        no_proxy: either("NO_PROXY", "no_proxy"),
    }))
}

/// Everything task documents and sessions must never contain: the protocol token, the
/// model key, the proxy URL (it may carry credentials) and a configured token.
pub fn secrets_to_redact(cfg: &Config, token: Option<&Secret>, model: &ModelSetup) -> Vec<Secret> {
    let mut secrets: Vec<Secret> = token.into_iter().cloned().collect();
    if let Some(t) = cfg.protocol_token.as_deref().filter(|t| !t.is_empty()) {
        secrets.push(Secret::new(t.to_string()));
    }
    if let ModelSetup::Ready(m) = model {
        secrets.push(m.api_key.clone());
        secrets.extend(m.https_proxy.clone());
    }
    secrets.sort_by(|a, b| a.expose().cmp(b.expose()));
    secrets.dedup();
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn config(dir: &Path, text: &str, mode: u32) -> (Config, std::path::PathBuf) {
        let p = dir.join("config.toml");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        let cfg = nl2sh_proto::config::load(&p, nl2sh_proto::config::ParseMode::Startup).unwrap();
        (cfg, p)
    }

    #[test]
    fn no_section_and_no_key_are_reasons_not_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let (cfg, p) = config(tmp.path(), "", 0o600);
        let ModelSetup::Unavailable(why) = setup(&cfg, &p, |_| None).unwrap() else {
            panic!("no [model] must be unavailable");
        };
        assert!(why.contains("[model]"), "{why}");
        let (cfg, p) = config(tmp.path(), "[model]\nmodel = \"m\"\n", 0o600);
        let ModelSetup::Unavailable(why) = setup(&cfg, &p, |_| None).unwrap() else {
            panic!("no key must be unavailable");
        };
        assert!(why.contains("OPENAI_API_KEY"), "{why}");
    }

    #[test]
    fn key_from_env_and_proxy() {
        let tmp = tempfile::tempdir().unwrap();
        let (cfg, p) = config(
            tmp.path(),
            "[model]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1/\"\napi_key_env = \"K\"\n",
            0o644,
        );
        let env = |name: &str| match name {
            "K" => Some("sk-test".to_string()),
            "https_proxy" => Some("http://u:p@127.0.0.1:3128".to_string()),
            _ => None,
        };
        let ModelSetup::Ready(m) = setup(&cfg, &p, env).unwrap() else {
            panic!("must be ready");
        };
        assert_eq!(m.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(m.api_key.expose(), "sk-test");
        assert_eq!(m.max_steps, 24);
        assert_eq!(m.request_timeout_secs, 120);
        assert!(m.https_proxy.is_some());
        let setup = ModelSetup::Ready(m);
        let redact = secrets_to_redact(&cfg, None, &setup);
        assert_eq!(redact.len(), 2);
    }

    #[test]
    fn key_in_a_readable_file_refuses_to_start() {
        let tmp = tempfile::tempdir().unwrap();
        let text = "[model]\nmodel = \"m\"\napi_key = \"sk-file\"\n";
        let (cfg, p) = config(tmp.path(), text, 0o644);
        let err = setup(&cfg, &p, |_| None).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        assert!(!err.contains("sk-file"), "{err}");
        let (cfg, p) = config(tmp.path(), text, 0o600);
        assert!(matches!(
            setup(&cfg, &p, |_| None).unwrap(),
            ModelSetup::Ready(_)
        ));
    }
}
