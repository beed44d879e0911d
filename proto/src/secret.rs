//! A value that must never reach a log line, argv or a child's environment.

use serde::{Deserialize, Serialize};

/// Secret text (the protocol token, later model keys). `Debug` and `Display` are redacted
/// so a stray `{:?}` in a log statement cannot leak it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }
    /// The secret itself; callers say why they need it by where they call this.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("hunter2-hunter2-hunter2-hunter2-xx".into());
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
