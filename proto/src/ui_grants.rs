//! Timed UI grants: "UI actions in this app for N minutes", given by the owner from an
//! approval prompt (docs/APPROVALS.md, "Timed UI grants"). What every process agrees on:
//! which tools are UI actions, the bounds, and the grant as the consoles list it.
//! approvald keeps the grants (in memory: a restart ends them) and decides with them.

use serde::{Deserialize, Serialize};

use crate::channels::{CallOrigin, RiskLevel};

/// The tools a timed UI grant may cover: touches, gestures, text and keys on the
/// screen. Never a shell, a file, an app's install or removal, or anything else.
pub const UI_ACTION_TOOLS: &[&str] = &[
    "android.tap",
    "android.long_press",
    "android.swipe",
    "android.text",
    "android.key",
    "android.double_tap",
    "android.drag",
    "android.pinch",
    "android.gesture",
];

/// The highest risk a timed UI grant covers: a UI action judged `high` (aimed at
/// Settings, an installer, a permission dialog, the lock screen) always asks.
pub const MAX_UI_GRANT_RISK: RiskLevel = RiskLevel::Medium;
/// The longest a timed UI grant lasts.
pub const MAX_UI_GRANT_MINUTES: u32 = 30;
/// Timed UI grants in force at once; one more is refused until one ends.
pub const MAX_UI_GRANTS: usize = 8;
/// Bytes of an app's package name (Android's own limit).
pub const MAX_APP_BYTES: usize = 255;

/// Whether `tool` is one a timed UI grant may cover.
pub fn is_ui_action(tool: &str) -> bool {
    UI_ACTION_TOOLS.contains(&tool)
}

/// Whether `app` is a package name as Android writes it: segments of ASCII letters,
/// digits and `_`, each starting with a letter, joined by dots, at most
/// [`MAX_APP_BYTES`].
pub fn is_package_name(app: &str) -> bool {
    !app.is_empty()
        && app.len() <= MAX_APP_BYTES
        && app.split('.').all(|segment| {
            let mut chars = segment.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// One timed UI grant as the consoles list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiGrant {
    /// Short id, for `protocol ui-grants revoke ID`.
    pub id: String,
    /// The app whose UI actions it covers (a package name).
    pub app: String,
    /// The callers it covers: those of the origin whose request it was given on.
    pub origin: CallOrigin,
    /// How long it was given for.
    pub minutes: u32,
    pub seconds_left: u64,
    /// Actions it has let run.
    pub used: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_what_android_writes() {
        for ok in ["com.example.chat", "a", "com.android.settings", "x_1.y2"] {
            assert!(is_package_name(ok), "{ok}");
        }
        let long = format!("a{}", ".b".repeat(128));
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "1a.b",
            "a b",
            "a/b",
            "a.b\n",
            "ä.b",
            long.as_str(),
        ] {
            assert!(!is_package_name(bad), "{bad:?}");
        }
    }
}
