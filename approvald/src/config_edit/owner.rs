//! The owner's consoles' settings (the "MCP / A2A" category): read and saved with the
//! same validation, lock and atomic save as `config set`, and only the keys of
//! [`OWNER_SETTINGS`]. The Web console reaches them through approvald's owner channel,
//! the terminal console through the CLI.

use std::path::Path;

use nl2sh_proto::announcement::ConnectionInfo;
use nl2sh_proto::channels::SettingView;
use nl2sh_proto::config::KeyKind;

use super::{apply, get, lookup, read_text, write_target, EditError, Got, RETIRED_KEY};

/// The settings of the consoles' "MCP / A2A" category, in the order they are shown.
pub const OWNER_SETTINGS: &[&str] = &[
    "protocol_start_with_service",
    "protocol_service_port",
    "protocol_token",
    "protocol_auto_approve",
    "approval_notifications",
];

/// A setting saved: what to tell the owner, and whether it applies only after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSetting {
    pub message: String,
    pub restart_needed: bool,
}

/// Why a setting was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingRefused {
    /// The key or value is wrong (unknown key, a value that does not validate).
    #[error("{0}")]
    Invalid(String),
    /// It could not be saved (the file, its lock).
    #[error("{0}")]
    Failed(String),
}

/// The "MCP / A2A" settings of the file at `config_path`.
pub fn settings(config_path: &Path) -> Result<Vec<SettingView>, String> {
    let text = read_text(&write_target(config_path)).map_err(|e| e.to_string())?;
    OWNER_SETTINGS
        .iter()
        .map(|key| {
            let spec = lookup(key).map_err(|e| e.to_string())?.spec;
            let (value, set) = match get(config_path, &text, key).map_err(|e| e.to_string())? {
                Got::Credential(set) => ((if set { "set" } else { "not set" }).to_owned(), set),
                Got::Value(v) => (v, true),
                Got::Default(v) => (v, false),
            };
            Ok(SettingView {
                key: (*key).to_owned(),
                value,
                set,
                credential: spec.kind == KeyKind::Credential,
                live: spec.live,
            })
        })
        .collect()
}

/// Validate and save `key = value` exactly as `nl2sh config set` does. `running` finds the
/// protocol process of this configuration once the file is saved (for the message: a
/// running service is told nothing).
pub fn save_setting(
    config_path: &Path,
    key: &str,
    value: &str,
    running: &dyn Fn() -> Option<ConnectionInfo>,
) -> Result<SavedSetting, SettingRefused> {
    if !OWNER_SETTINGS.contains(&key) {
        return Err(SettingRefused::Invalid(format!(
            "`{key}` is not one of the console's settings ({}); use `nl2sh config set`",
            OWNER_SETTINGS.join(", ")
        )));
    }
    let spec = lookup(key)
        .map_err(|e| SettingRefused::Invalid(e.to_string()))?
        .spec;
    let applied = apply(config_path, key, value).map_err(|e| match e {
        EditError::Io { .. } | EditError::Locked { .. } | EditError::Read(_) => {
            SettingRefused::Failed(e.to_string())
        }
        e => SettingRefused::Invalid(e.to_string()),
    })?;
    let shown = if spec.kind == KeyKind::Credential {
        "(value not shown)".to_owned()
    } else {
        format!("= {}", value.trim())
    };
    let mut message = format!("Saved {key} {shown} in {}.", applied.target.display());
    if applied.removed_retired {
        message.push_str(&format!(
            " Removed the retired {RETIRED_KEY} (it was ignored)."
        ));
    }
    message.push(' ');
    message.push_str(&restart_note(config_path, spec.live, running().as_ref()));
    Ok(SavedSetting {
        message,
        restart_needed: !spec.live,
    })
}

/// Save a fresh random protocol_token.
pub fn rotate_token(
    config_path: &Path,
    running: &dyn Fn() -> Option<ConnectionInfo>,
) -> Result<SavedSetting, SettingRefused> {
    let token =
        nl2sh_proto::token::generate().map_err(|e| SettingRefused::Failed(e.to_string()))?;
    save_setting(config_path, "protocol_token", token.expose(), running)
}

/// What the protocol process `running` for the configuration at `path` does with a saved
/// change (it is told nothing): a live key applies from its next decision, any other at
/// its next start.
pub fn restart_note(path: &Path, live: bool, running: Option<&ConnectionInfo>) -> String {
    match (running, live) {
        (Some(info), true) => format!(
            "The running protocol process (pid {}) applies it from its next approval decision.",
            info.pid
        ),
        (Some(info), false) => format!(
            "The running protocol process (pid {}, transport {}) keeps the old value until it \
             restarts: nl2sh --config {} service restart",
            info.pid,
            info.transport,
            path.display()
        ),
        (None, _) => "It applies when the service next starts (a running service needs \
                      `nl2sh service restart`)."
            .to_owned(),
    }
}
