//! The owner's consoles' settings (the "MCP / A2A" category): read and saved with the
//! same validation, lock and atomic save as `config set`, and only the keys of
//! [`OWNER_SETTINGS`]. The Web console reaches them through approvald's owner channel,
//! the terminal console through the CLI.

use std::path::Path;

use nl2sh_proto::announcement::ConnectionInfo;
use nl2sh_proto::channels::{SettingKind, SettingView};
use nl2sh_proto::config::KeyKind;

use nl2sh_proto::display::Shown;
use nl2sh_proto::Secret;

use super::{apply_all, get, lookup, read_text, write_target, EditError, Got, RETIRED_KEY};

/// One setting of the consoles' "MCP / A2A" category: its key, and how the consoles show
/// and edit it (sent with its value, [`SettingView`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerSetting {
    pub key: &'static str,
    pub label: &'static str,
    pub kind: SettingKind,
    pub help: Option<&'static str>,
    pub warning: Option<&'static str>,
}

/// The settings of the consoles' "MCP / A2A" category, in the order they are shown: the
/// one list (the terminal console and the Web console render what they are sent).
pub const OWNER_SETTINGS: &[OwnerSetting] = &[
    OwnerSetting {
        key: "protocol_start_with_service",
        label: "Start MCP/A2A with the service",
        kind: SettingKind::Switch,
        help: None,
        warning: None,
    },
    OwnerSetting {
        key: "protocol_service_port",
        label: "Service port",
        kind: SettingKind::Port,
        help: Some("0 picks any free port."),
        warning: None,
    },
    OwnerSetting {
        key: "protocol_token",
        label: "HTTP token",
        kind: SettingKind::Secret,
        help: Some(
            "32–256 printable characters, no spaces. Clients using the old token stop working.",
        ),
        warning: None,
    },
    OwnerSetting {
        key: "protocol_auto_approve",
        label: "Approve every request automatically",
        kind: SettingKind::Switch,
        help: None,
        warning: Some(
            "Approves every request, dangerous and critical ones included, with no one asked.",
        ),
    },
    OwnerSetting {
        key: "approval_notifications",
        label: "Notify on Android when a request waits",
        kind: SettingKind::Switch,
        help: None,
        warning: None,
    },
];

fn owner_setting(key: &str) -> Option<&'static OwnerSetting> {
    OWNER_SETTINGS.iter().find(|s| s.key == key)
}

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
        .map(|setting| {
            let key = setting.key;
            let spec = lookup(key).map_err(|e| e.to_string())?.spec;
            let (value, set) = match get(config_path, &text, key).map_err(|e| e.to_string())? {
                Got::Credential(set) => ((if set { "set" } else { "not set" }).to_owned(), set),
                Got::Value(v) => (v, true),
                Got::Default(v) => (v, false),
            };
            Ok(SettingView {
                key: key.to_owned(),
                value,
                set,
                credential: spec.kind == KeyKind::Credential,
                live: spec.live,
                label: setting.label.to_owned(),
                kind: setting.kind,
                help: setting.help.map(str::to_owned),
                warning: setting.warning.map(str::to_owned),
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
    save_settings(config_path, &[(key, value)], running)
}

/// Validate every `key = value` of the console's one form, each as `nl2sh config set`
/// would, and save them together (one lock, one write, 0600): all of them or none. One
/// answer says what was saved and whether the running process needs a restart for it.
pub fn save_settings(
    config_path: &Path,
    values: &[(&str, &str)],
    running: &dyn Fn() -> Option<ConnectionInfo>,
) -> Result<SavedSetting, SettingRefused> {
    if values.is_empty() {
        return Err(SettingRefused::Invalid("nothing to save".into()));
    }
    let mut said = Vec::with_capacity(values.len());
    let mut live = true;
    for (i, (key, value)) in values.iter().enumerate() {
        if owner_setting(key).is_none() {
            let keys: Vec<&str> = OWNER_SETTINGS.iter().map(|s| s.key).collect();
            return Err(SettingRefused::Invalid(format!(
                "`{key}` is not one of the console's settings ({}); use `nl2sh config set`",
                keys.join(", ")
            )));
        }
        if values[..i].iter().any(|(k, _)| k == key) {
            return Err(SettingRefused::Invalid(format!("`{key}` is given twice")));
        }
        let spec = lookup(key)
            .map_err(|e| SettingRefused::Invalid(e.to_string()))?
            .spec;
        live &= spec.live;
        said.push(if spec.kind == KeyKind::Credential {
            format!("{key} (value not shown)")
        } else {
            format!("{key} = {}", value.trim())
        });
    }
    let applied = apply_all(config_path, values).map_err(|e| match e {
        EditError::Io { .. } | EditError::Locked { .. } | EditError::Read(_) => {
            SettingRefused::Failed(e.to_string())
        }
        e => SettingRefused::Invalid(e.to_string()),
    })?;
    let mut message = format!("Saved {} in {}.", said.join(", "), applied.target.display());
    if applied.removed_retired {
        message.push_str(&format!(
            " Removed the retired {RETIRED_KEY} (it was ignored)."
        ));
    }
    message.push(' ');
    message.push_str(&restart_note(config_path, live, running().as_ref()));
    Ok(SavedSetting {
        message,
        restart_needed: !live,
    })
}

/// Save a fresh random protocol_token; the token, for the owner to see once.
pub fn rotate_token(
    config_path: &Path,
    running: &dyn Fn() -> Option<ConnectionInfo>,
) -> Result<(Secret, SavedSetting), SettingRefused> {
    let token =
        nl2sh_proto::token::generate().map_err(|e| SettingRefused::Failed(e.to_string()))?;
    let saved = save_setting(config_path, "protocol_token", token.expose(), running)?;
    Ok((token, saved))
}

/// What the protocol process `running` for the configuration at `path` does with a saved
/// change (it is told nothing): a live key applies from its next decision, any other at
/// its next start. The command carries the `--config` in use, quoted for a shell.
pub fn restart_note(path: &Path, live: bool, running: Option<&ConnectionInfo>) -> String {
    let restart = nl2sh_proto::hint::service_restart(&nl2sh_proto::config::absolute(path));
    match (running, live) {
        (Some(info), true) => format!(
            "The running protocol process (pid {}) applies it from its next approval decision.",
            info.pid
        ),
        (Some(info), false) if info.transport == "service" => format!(
            "The running service (pid {}) keeps the old value until it restarts: {restart}",
            info.pid
        ),
        (Some(info), false) => format!(
            "The running protocol process (pid {}, transport {}) keeps the old value until it \
             restarts; it is not the managed service, so stop it where it was started and \
             start it again.",
            info.pid,
            Shown::new(&info.transport)
        ),
        (None, _) => {
            format!(
                "It applies when the service next starts (a running service needs `{restart}`)."
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::config::KEYS;

    /// Each console setting is a key of the file, of a kind its console control can write.
    #[test]
    fn the_owner_settings_are_keys_of_the_file_edited_as_their_kind() {
        for s in OWNER_SETTINGS {
            let key = KEYS.iter().find(|k| k.name == s.key).expect(s.key);
            let fits = match s.kind {
                SettingKind::Switch => key.kind == KeyKind::Bool,
                SettingKind::Port => key.kind == KeyKind::Integer,
                SettingKind::Secret => key.kind == KeyKind::Credential,
                SettingKind::Text => key.kind == KeyKind::Text,
            };
            assert!(fits, "{}: {:?} as {:?}", s.key, key.kind, s.kind);
            assert!(!s.label.is_empty());
        }
    }

    /// What the consoles are sent: every setting in the list's order, with its label,
    /// kind, help and warning, and its value (a credential only as set or not).
    #[test]
    fn the_settings_are_sent_in_order_with_how_to_show_them() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        std::fs::write(
            &path,
            "protocol_service_port = 9000\nprotocol_token = \"tok-0123456789-abcdefghijklmnopqrstuvwxyz\"\n",
        )
        .unwrap();
        let sent = settings(&path).unwrap();
        let keys: Vec<&str> = sent.iter().map(|s| s.key.as_str()).collect();
        let listed: Vec<&str> = OWNER_SETTINGS.iter().map(|s| s.key).collect();
        assert_eq!(keys, listed);
        for (view, setting) in sent.iter().zip(OWNER_SETTINGS) {
            assert_eq!(view.label, setting.label);
            assert_eq!(view.kind, setting.kind);
            assert_eq!(view.help.as_deref(), setting.help);
            assert_eq!(view.warning.as_deref(), setting.warning);
        }
        let port = &sent[1];
        assert_eq!(
            (port.value.as_str(), port.set, port.live),
            ("9000", true, false)
        );
        let token = &sent[2];
        assert_eq!((token.value.as_str(), token.credential), ("set", true));
        let auto = &sent[3];
        assert_eq!(
            (auto.value.as_str(), auto.set, auto.live),
            ("false", false, true)
        );
        assert!(auto
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("no one asked")));
    }
}
