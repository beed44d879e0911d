//! Where the device text the built-in Agent had read came from: the apps whose screen or
//! notifications it read, the files it read. A tool that reads such text names its
//! sources in its outcome; the Agent carries the sources of what it has read into every
//! later call it makes, and the owner's approval request says "after reading text from
//! com.example.chat" (docs/SECURITY.md, "Device text reaching the Agent").
//!
//! It tells the owner why a request may have been provoked; it decides nothing. Every
//! receiver checks it as hostile input ([`ReadSources::check`]) and shows it through
//! [`crate::display::Shown`].

use serde::{Deserialize, Serialize};

/// The newest sources, most recent first, each a package name or a path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSources(Vec<String>);

impl ReadSources {
    /// How many sources are kept (the most recent ones).
    pub const MAX: usize = 4;
    /// Bytes of one source (a package name is at most 255; a longer path is cut).
    pub const MAX_BYTES: usize = 255;

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Note `source` as the most recent one: cut to [`Self::MAX_BYTES`] on a character
    /// boundary, moved to the front when already present, the oldest dropped past
    /// [`Self::MAX`]. An empty source is not noted.
    pub fn note(&mut self, source: &str) {
        let source = crate::text::prefix(source, Self::MAX_BYTES);
        if source.is_empty() {
            return;
        }
        self.0.retain(|s| s != source);
        self.0.insert(0, source.to_string());
        self.0.truncate(Self::MAX);
    }

    /// Note each of `older`'s sources as older than the ones held (for sources read in an
    /// earlier turn).
    pub fn note_older(&mut self, older: &ReadSources) {
        for source in &older.0 {
            if self.0.len() < Self::MAX && !self.0.contains(source) {
                self.0.push(source.clone());
            }
        }
    }

    /// Whether a receiver may take it: at most [`Self::MAX`] sources, each 1 to
    /// [`Self::MAX_BYTES`] bytes, none repeated.
    pub fn check(&self) -> Result<(), String> {
        if self.0.len() > Self::MAX {
            return Err(format!(
                "{} read sources; the limit is {}",
                self.0.len(),
                Self::MAX
            ));
        }
        for (i, source) in self.0.iter().enumerate() {
            if source.is_empty() || source.len() > Self::MAX_BYTES {
                return Err(format!(
                    "a read source is {} bytes (1-{})",
                    source.len(),
                    Self::MAX_BYTES
                ));
            }
            if self.0[..i].contains(source) {
                return Err("a read source is repeated".into());
            }
        }
        Ok(())
    }

    /// The note the owner reads, unescaped (show it through
    /// [`crate::display::Shown`]): `after reading text from com.a, /sdcard/b.txt`.
    pub fn words(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| format!("after reading text from {}", self.0.join(", ")))
    }

    /// As the audit stores it: a JSON array, or nothing.
    pub fn to_stored(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| serde_json::Value::from(self.0.clone()).to_string())
    }

    /// Read back from [`Self::to_stored`]'s form; anything else is no sources.
    pub fn from_stored(text: Option<&str>) -> Self {
        let parsed = text
            .and_then(|t| serde_json::from_str::<Vec<String>>(t).ok())
            .map(Self)
            .unwrap_or_default();
        if parsed.check().is_ok() {
            parsed
        } else {
            Self::default()
        }
    }
}

impl From<Vec<String>> for ReadSources {
    /// Taken as it came (a frame's): [`ReadSources::check`] it before use.
    fn from(sources: Vec<String>) -> Self {
        Self(sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_sources_are_kept_first_and_bounded() {
        let mut s = ReadSources::default();
        assert_eq!(s.words(), None);
        for app in ["a.one", "b.two", "c.three", "a.one", "d.four", "e.five"] {
            s.note(app);
        }
        assert_eq!(s.as_slice(), ["e.five", "d.four", "a.one", "c.three"]);
        assert_eq!(
            s.words().unwrap(),
            "after reading text from e.five, d.four, a.one, c.three"
        );
        s.note("");
        assert_eq!(s.as_slice().len(), 4);
        let long = format!("/sdcard/{}", "é".repeat(200));
        let mut t = ReadSources::default();
        t.note(&long);
        assert!(t.as_slice()[0].len() <= ReadSources::MAX_BYTES);
        assert!(long.starts_with(&t.as_slice()[0]));
        t.check().unwrap();
        let mut older = ReadSources::default();
        older.note("x.old");
        older.note("/sdcard/b");
        t.note_older(&older);
        assert_eq!(t.as_slice()[1..], ["/sdcard/b", "x.old"]);
    }

    #[test]
    fn a_receiver_refuses_what_no_sender_makes() {
        let many = ReadSources::from((0..5).map(|i| format!("p{i}")).collect::<Vec<_>>());
        assert!(many.check().unwrap_err().contains("limit is 4"));
        assert!(ReadSources::from(vec![String::new()]).check().is_err());
        assert!(ReadSources::from(vec!["x".repeat(256)]).check().is_err());
        assert!(ReadSources::from(vec!["a".into(), "a".into()])
            .check()
            .is_err());
        ReadSources::from(vec!["a".into(), "b".into()])
            .check()
            .unwrap();
    }

    #[test]
    fn the_stored_form_reads_back_and_junk_reads_as_nothing() {
        let mut s = ReadSources::default();
        s.note("com.example.chat");
        s.note("/sdcard/a \"b\".txt");
        let stored = s.to_stored().unwrap();
        assert_eq!(ReadSources::from_stored(Some(&stored)), s);
        assert_eq!(ReadSources::default().to_stored(), None);
        for junk in ["", "{}", "[1]", "[\"\"]", "not json"] {
            assert!(ReadSources::from_stored(Some(junk)).is_empty(), "{junk}");
        }
        assert!(ReadSources::from_stored(None).is_empty());
    }
}
