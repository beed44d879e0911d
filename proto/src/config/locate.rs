//! Where a parse error is in the text: the line of a byte offset, the key a value belongs
//! to, which grant holds it, and the message that names them without quoting the text.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::KEYS;

/// Where things are in the text, taken from the parsed document before it is consumed, so
/// a validation error can give a line and an error inside a grant can say which grant.
pub(super) struct Layout {
    /// Top-level keys with the byte offset of each.
    keys: Vec<(String, usize)>,
    pub(super) grants: Vec<GrantLayout>,
}

pub(super) struct GrantLayout {
    /// From the grant's `[[approval_grants]]` header (or `{`) to the end of its last value.
    pub(super) extent: Range<usize>,
    /// Its keys with the byte offset of each.
    keys: Vec<(String, usize)>,
}

impl GrantLayout {
    pub(super) fn key_at(&self, key: &str) -> Option<usize> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, at)| *at)
    }
}

impl Layout {
    pub(super) fn of(doc: &DeTable<'_>) -> Layout {
        let keys = doc
            .iter()
            .map(|(key, _)| (key.get_ref().to_string(), key.span().start))
            .collect();
        let grants = match doc.get("approval_grants").map(|v| v.get_ref()) {
            Some(DeValue::Array(grants)) => grants
                .iter()
                .map(|grant| {
                    // An array-of-tables element's span is only its header: widen it to
                    // its keys and values.
                    let mut extent = grant.span();
                    let mut keys = Vec::new();
                    if let DeValue::Table(table) = grant.get_ref() {
                        for (key, value) in table.iter() {
                            extent.start = extent.start.min(key.span().start);
                            extent.end = extent.end.max(key.span().end).max(value.span().end);
                            keys.push((key.get_ref().to_string(), key.span().start));
                        }
                    }
                    GrantLayout { extent, keys }
                })
                .collect(),
            _ => Vec::new(),
        };
        Layout { keys, grants }
    }

    pub(super) fn key_at(&self, key: &str) -> Option<usize> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, at)| *at)
    }

    /// The 1-based number of the grant whose text holds byte `offset`.
    pub(super) fn grant_at(&self, offset: usize) -> Option<usize> {
        self.grants
            .iter()
            .position(|g| g.extent.contains(&offset))
            .map(|i| i + 1)
    }
}

/// 1-based line number of byte offset `offset` in `text` (the line of a parser's error
/// span, for messages that must not quote the text).
pub fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The key assigned just before byte `offset` on its line when `offset` is in its value, so
/// a type or value error can name the field.
pub(super) fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset.min(text.len()))?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let (assigned, _) = before.get(line_start..)?.rsplit_once('=')?;
    // Inside an inline table only the last key counts.
    let key = assigned.rsplit(['{', ',']).next()?.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'"'))
    };
    bare(key).then_some(key)
}

/// The message for a parser error. serde's unknown-field message for the top level lists
/// every declared field, including the retired one: list only the keys a user may write.
/// An error inside a grant says which grant; others get the key they concern.
pub(super) fn describe_toml_error(
    message: &str,
    key: Option<&str>,
    grant: Option<usize>,
) -> String {
    let message = message.trim_end();
    let names_field =
        message.starts_with("unknown field `") || message.starts_with("missing field `");
    if let Some(n) = grant {
        return match key {
            Some(key) if !names_field => format!("approval grant {n}: `{key}`: {message}"),
            _ => format!("approval grant {n}: {message}"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            let field = &rest[..end];
            let expected = KEYS
                .iter()
                .map(|k| format!("`{}`", k.name))
                .collect::<Vec<_>>()
                .join(", ");
            return format!("unknown field `{field}`, expected one of {expected}");
        }
    }
    match key {
        Some(key) => format!("`{key}`: {message}"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::testing::{parse, running};
    use crate::config::ConfigError;
    use std::path::Path;

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let text = "protocol_auto_approve = false\n\nprotcol_token = \"x\"\n";
        let err = parse(Path::new("/etc/x/config.toml"), text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("/etc/x/config.toml:3: unknown field `protcol_token`, expected one of `protocol_token`"),
            "{msg}"
        );
        assert!(!msg.contains("bridge_auto_approve"), "{msg}");
    }

    #[test]
    fn invalid_toml_has_right_line() {
        let text = "protocol_auto_approve = false\nprotocol_service_port = 8765\nstate_dir = \"unterminated\n";
        let msg = parse(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(msg.starts_with("c.toml:3: "), "{msg}");
    }

    #[test]
    fn wrong_type_has_right_line_and_key() {
        let text = "\n\nprotocol_auto_approve = \"yes\"\n";
        let err = parse(Path::new("c.toml"), text).unwrap_err();
        match &err {
            ConfigError::Invalid { line, .. } => assert_eq!(*line, Some(3)),
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with("c.toml:3: `protocol_auto_approve`: invalid type"),
            "{err}"
        );
        let out_of_range = "protocol_service_port = 70000\n";
        let msg = parse(Path::new("c.toml"), out_of_range)
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("c.toml:1: `protocol_service_port`: "),
            "{msg}"
        );
    }

    #[test]
    fn wrong_type_or_bad_toml_is_an_error_without_the_text() {
        let e = running("protocol_token = 'secret-value'\nprotocol_auto_approve = \"yes\"\n")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("c.toml:2: "), "{text}");
        assert!(!text.contains("secret-value"), "{text}");
        assert!(e.detail().starts_with("line 2: "), "{}", e.detail());
        assert!(!e.detail().contains("c.toml"));
        assert!(running("protocol_auto_approve = ").is_err());
    }
}
