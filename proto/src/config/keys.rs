//! The one list of the file's keys: their names and kinds (what `nl2sh config` reads and
//! writes), which are live, and the retired or replaced keys a parse treats specially.

/// What a key's value is, as `nl2sh config get/set` reads and writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Bool,
    Integer,
    Text,
    /// A string that is never printed nor taken from the command line.
    Credential,
    /// `approval_grants`: a TOML array of tables.
    Grants,
    /// `model`: its keys are set one by one ([`MODEL_KEYS`]).
    Table,
}

/// One key of the file: the one list of them, which [`Config`](super::Config) and
/// [`ModelConfig`](super::ModelConfig) match
/// field for field (a test checks it) and `nl2sh config` edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub kind: KeyKind,
    /// approvald re-reads it for every decision, so a running service uses it at once.
    pub live: bool,
}

const fn key(name: &'static str, kind: KeyKind, live: bool) -> Key {
    Key { name, kind, live }
}

/// Top-level keys a user may write, in the order error messages list them. The retired
/// `bridge_auto_approve` is deliberately absent: it is tolerated, not offered.
pub const KEYS: &[Key] = &[
    key("protocol_token", KeyKind::Credential, false),
    key("protocol_auto_approve", KeyKind::Bool, true),
    key("protocol_start_with_service", KeyKind::Bool, false),
    key("protocol_service_port", KeyKind::Integer, false),
    key("state_dir", KeyKind::Text, false),
    key("netd_uid", KeyKind::Integer, false),
    key("netd_gid", KeyKind::Integer, false),
    key("sandbox_uid_base", KeyKind::Integer, false),
    key("sandbox_uid_count", KeyKind::Integer, false),
    key("sandbox_max_processes", KeyKind::Integer, false),
    key("sandbox_memory_mib", KeyKind::Integer, false),
    key("sandbox_cpu_secs", KeyKind::Integer, false),
    key("sandbox_total_memory_mib", KeyKind::Integer, false),
    key("sandbox_total_processes", KeyKind::Integer, false),
    key("approval_policy", KeyKind::Text, true),
    key("approval_timeout_secs", KeyKind::Integer, true),
    key("approval_grants", KeyKind::Grants, true),
    key("audit_max_rows", KeyKind::Integer, true),
    key("audit_max_bytes", KeyKind::Integer, true),
    key("web_host", KeyKind::Text, false),
    key("web_port", KeyKind::Integer, false),
    key("web_allow_insecure_http", KeyKind::Bool, false),
    key("web_uid", KeyKind::Integer, false),
    key("web_gid", KeyKind::Integer, false),
    key("approval_notifications", KeyKind::Bool, true),
    key("model", KeyKind::Table, false),
];

/// The keys of the `[model]` table.
pub const MODEL_KEYS: &[Key] = &[
    key("base_url", KeyKind::Text, false),
    key("model", KeyKind::Text, false),
    key("api_key_env", KeyKind::Text, false),
    key("api_key", KeyKind::Credential, false),
    key("max_steps", KeyKind::Integer, false),
    key("request_timeout_secs", KeyKind::Integer, false),
];

/// Whether `name` is one of [`KEYS`].
pub(super) fn is_known_key(name: &str) -> bool {
    KEYS.iter().any(|k| k.name == name)
}

/// Top-level keys accepted with any value and ignored.
pub(super) const RETIRED_KEYS: &[&str] = &["bridge_auto_approve"];

/// Keys whose meaning changed: refused at startup with the replacement named (ignored
/// while running, like any key this build does not know).
pub(super) const REPLACED_KEYS: &[(&str, &str)] = &[
    (
        "sandbox_uid",
        "`sandbox_uid` is retired: each sandboxed call now runs as a uid of its own, taken \
         from the range `sandbox_uid_base` .. + `sandbox_uid_count` (gid = uid); remove it, \
         or set `sandbox_uid_base` to a range nothing else on the device uses",
    ),
    (
        "sandbox_gid",
        "`sandbox_gid` is retired: each sandboxed call's gid equals its uid, from the range \
         `sandbox_uid_base` .. + `sandbox_uid_count`; remove it",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ModelConfig};
    use serde::Deserialize;

    /// The field names serde knows a struct by: what the file may hold.
    fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
        use serde::de::value::Error;
        use serde::de::{Error as _, Visitor};
        struct Probe<'a>(&'a mut &'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for Probe<'_> {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                *self.0 = fields;
                Err(Error::custom("probed"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                enum identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(Probe(&mut fields));
        fields
    }

    #[test]
    fn the_key_table_is_the_structs_fields() {
        let mut top: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        top.extend(RETIRED_KEYS);
        assert_eq!(fields_of::<Config>(), top.as_slice());
        let model: Vec<&str> = MODEL_KEYS.iter().map(|k| k.name).collect();
        assert_eq!(fields_of::<ModelConfig>(), model.as_slice());
    }
}
