//! Redaction: the secrets approvald is given (`ApprovaldSettings.redact`: the protocol
//! token, the model key, the proxy URL, configured credentials) never reach a task
//! document or a session file.
//!
//! The JSON is redacted as values, not only as text: every string (object keys too) has
//! each secret replaced by [`REDACTED`], whatever escapes spelled it (`\u0041`, `\/`), and
//! so has its JSON-escaped form inside a string (JSON text carried in JSON, like a
//! model's tool-call arguments); a number whose digits hold one becomes the string
//! [`REDACTED`]. Text that held no
//! secret is kept byte for byte; text that did is written again by `serde_json`. Then the
//! text itself is searched for each secret, raw and JSON-escaped (a token may contain `"`
//! or `\`): one spelled across JSON syntax (`"a":"b"`) is replaced in the text, and if
//! that leaves no JSON, or the secret still there, the text is refused rather than
//! stored.

use serde_json::Value;

use nl2sh_proto::secret::Secret;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// A text that cannot be stored without a secret in it.
#[derive(Debug, thiserror::Error)]
#[error(
    "it contains a protected secret (the protocol token, the model key or a configured \
     credential) that cannot be removed without breaking its JSON"
)]
pub struct Unredactable;

/// One secret, as it appears raw and inside a JSON string.
struct Pattern {
    raw: String,
    escaped: String,
}

/// The secrets to remove; empty ones are ignored.
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    patterns: Vec<Pattern>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.patterns.len())
    }
}

impl Redactor {
    pub fn new(secrets: &[Secret]) -> Self {
        let mut raws: Vec<&str> = secrets
            .iter()
            .map(Secret::expose)
            .filter(|s| !s.is_empty())
            .collect();
        raws.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        raws.dedup();
        let patterns = raws
            .into_iter()
            .map(|raw| Pattern {
                raw: raw.to_owned(),
                escaped: json_escaped(raw),
            })
            .collect();
        Redactor { patterns }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `text` holds a secret, raw or JSON-escaped.
    pub fn found_in(&self, text: &str) -> bool {
        self.patterns
            .iter()
            .any(|p| text.contains(&p.raw) || text.contains(&p.escaped))
    }

    /// The text to store for JSON `text`, whose parse is `value` (updated to match what is
    /// returned).
    pub fn redact_json(&self, text: String, value: &mut Value) -> Result<String, Unredactable> {
        if self.is_empty() {
            return Ok(text);
        }
        let text = if self.redact_value(value) {
            serde_json::to_string(value).map_err(|_| Unredactable)?
        } else {
            text
        };
        if !self.found_in(&text) {
            return Ok(text);
        }
        // Only outside the strings now (a secret spelled across JSON syntax).
        let mut replaced = text;
        for p in &self.patterns {
            replaced = replaced.replace(&p.raw, REDACTED);
            replaced = replaced.replace(&p.escaped, REDACTED);
        }
        let reparsed: Value = serde_json::from_str(&replaced).map_err(|_| Unredactable)?;
        if self.found_in(&replaced) {
            return Err(Unredactable);
        }
        *value = reparsed;
        Ok(replaced)
    }

    /// Replace every secret inside `value`'s strings and numbers; whether anything changed.
    fn redact_value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) => self.redact_str(s),
            Value::Number(n) => {
                let digits = n.to_string();
                if self.patterns.iter().any(|p| digits.contains(&p.raw)) {
                    *value = Value::String(REDACTED.to_owned());
                    true
                } else {
                    false
                }
            }
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.redact_value(item);
                }
                changed
            }
            Value::Object(map) => {
                let mut changed = false;
                let keys_with_secrets: Vec<String> =
                    map.keys().filter(|k| self.found_in(k)).cloned().collect();
                for key in keys_with_secrets {
                    if let Some(mut v) = map.remove(&key) {
                        let mut new_key = key;
                        self.redact_str(&mut new_key);
                        self.redact_value(&mut v);
                        map.insert(new_key, v);
                        changed = true;
                    }
                }
                for v in map.values_mut() {
                    changed |= self.redact_value(v);
                }
                changed
            }
            Value::Null | Value::Bool(_) => false,
        }
    }

    /// Replace every secret in plain text (audit columns); whether anything changed.
    pub fn redact_text(&self, s: &mut String) -> bool {
        self.redact_str(s)
    }

    fn redact_str(&self, s: &mut String) -> bool {
        let mut changed = false;
        for p in &self.patterns {
            for form in [&p.raw, &p.escaped] {
                if s.contains(form.as_str()) {
                    *s = s.replace(form.as_str(), REDACTED);
                    changed = true;
                }
            }
        }
        changed
    }
}

/// `raw` as `serde_json` writes it inside a string, without the quotes.
fn json_escaped(raw: &str) -> String {
    let quoted = Value::String(raw.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(secrets: &[&str]) -> Redactor {
        Redactor::new(
            &secrets
                .iter()
                .map(|s| Secret::new((*s).to_owned()))
                .collect::<Vec<_>>(),
        )
    }

    fn redact(r: &Redactor, text: &str) -> Result<String, Unredactable> {
        let mut value: Value = serde_json::from_str(text).unwrap();
        let out = r.redact_json(text.to_owned(), &mut value)?;
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), value);
        Ok(out)
    }

    #[test]
    fn text_without_secrets_is_kept_byte_for_byte() {
        let r = redactor(&["s3cret-token-value", ""]);
        let text = "{ \"z\": 1,   \"a\": [\"x\"] }";
        assert_eq!(redact(&r, text).unwrap(), text);
        assert_eq!(redact(&redactor(&[]), text).unwrap(), text);
        assert!(redactor(&["", ""]).is_empty());
    }

    #[test]
    fn secrets_go_from_strings_keys_and_numbers_however_escaped() {
        let token = "tok\"en\\with/quote";
        let r = redactor(&[token, "12345678901", "ab"]);
        let escaped = json_escaped(token);
        assert_eq!(escaped, "tok\\\"en\\\\with/quote");
        let twice = json_escaped(&escaped);
        let text = format!(
            "{{\"a\":\"x {escaped} y\",\"k{escaped}\":[1,\"t\\u006fk\\\"en\\\\with\\/quote\"],\
             \"n\":12345678901,\"m\":\"cab\",\"args\":\"{{\\\"t\\\":\\\"{twice}\\\"}}\"}}"
        );
        let out = redact(&r, &text).unwrap();
        assert!(!r.found_in(&out), "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], "x [REDACTED] y");
        assert_eq!(v["k[REDACTED]"][1], "[REDACTED]");
        assert_eq!(v["n"], "[REDACTED]");
        assert_eq!(v["m"], "c[REDACTED]");
        assert_eq!(v["args"], "{\"t\":\"[REDACTED]\"}");
    }

    #[test]
    fn a_secret_spelled_across_json_syntax_is_replaced_or_refused() {
        // `a","b` is no string's content, but the text holds it.
        let r = redactor(&["x\",\"y"]);
        let out = redact(&r, "[\"x\",\"y\"]");
        // Replacing it would leave `["[REDACTED]"]`: still JSON, and no secret left.
        assert_eq!(out.unwrap(), "[\"[REDACTED]\"]");
        // `[[REDACTED]]` would be no JSON: refused.
        let r = redactor(&["1,2"]);
        assert!(redact(&r, "[1,2]").is_err());
        let r = redactor(&["\":"]);
        assert!(redact(&r, "{\"a\":1}").is_err());
    }

    #[test]
    fn the_longer_of_two_overlapping_secrets_goes_whole() {
        let r = redactor(&["abc", "abcdef"]);
        assert_eq!(redact(&r, "[\"abcdefg\"]").unwrap(), "[\"[REDACTED]g\"]");
    }
}
