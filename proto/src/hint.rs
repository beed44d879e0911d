//! The commands a message tells the owner to run, with the configuration in use: a hint
//! without `--config` restarts another configuration's service (or none) when the owner's
//! setup names its file (issue 40). Quoted for a POSIX shell, so a path with a space or a
//! quote pastes back as one word.

use std::path::Path;

/// `s` quoted for a POSIX shell when it needs it (single quotes, a `'` as `'\''`).
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,@%=".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `nl2sh --config <path> <rest>`, the path quoted for a shell.
pub fn with_config(config_path: &Path, rest: &str) -> String {
    format!(
        "nl2sh --config {} {rest}",
        shell_word(&config_path.to_string_lossy())
    )
}

/// The command that restarts the managed service of the configuration at `config_path`.
pub fn service_restart(config_path: &Path) -> String {
    with_config(config_path, "service restart")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_needs_it() {
        assert_eq!(
            shell_word("/data/adb/nl2sh/config.toml"),
            "/data/adb/nl2sh/config.toml"
        );
        assert_eq!(shell_word("/tmp/my config.toml"), "'/tmp/my config.toml'");
        assert_eq!(shell_word("/tmp/it's"), r"'/tmp/it'\''s'");
        assert_eq!(shell_word("/tmp/$(reboot)"), "'/tmp/$(reboot)'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            service_restart(Path::new("/x/my y.toml")),
            "nl2sh --config '/x/my y.toml' service restart"
        );
    }
}
