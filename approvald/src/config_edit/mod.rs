//! The configuration editor: read and edit the configuration file in place. `nl2sh config
//! get|set` (the CLI) and the owner's consoles (the Web console through approvald's owner
//! channel, the terminal console through the CLI) use these same functions, so a console
//! saves exactly what `config set` would. It lives in approvald, which answers the Web
//! console's settings, and not in proto: no other worker edits the file, and netd, the
//! executor and the Web console have no use for a TOML editor.
//!
//! Edits go through `toml_edit`, so comments, blank lines and key order stay as the owner
//! wrote them. The edited text is validated by the same parse the supervisor loads with
//! ([`ParseMode::Startup`]) — plus the token rules `protocol serve` applies — before anything
//! is written; a refused edit leaves the file untouched. Saving writes a 0600 temporary
//! file in the same directory, syncs it and renames it over the file, and drops the
//! retired `bridge_auto_approve`.
//!
//! Credentials (`protocol_token`, `model.api_key`) are never printed; taking them from
//! stdin or the environment, never the command line, is the CLI's part.
//!
//! The rooms: `document` (the TOML document: a value set, the retired key removed, a value
//! rendered), `defaults` (what `get` shows for an absent key), `file` (the edit's lock, the
//! bounded read, the atomic save), `owner` (the consoles' settings). This file: the keys
//! as they are named, the edit and the read.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nl2sh_proto::config::{self as schema, ConfigError, Key, KeyKind, ParseMode, KEYS, MODEL_KEYS};
use toml_edit::{DocumentMut, Item, Table};

mod defaults;
mod document;
mod file;
pub mod owner;

pub use file::{lock_for_edit, read_text, save, write_target};
pub use owner::{
    restart_note, rotate_token, save_setting, save_settings, settings, SavedSetting,
    SettingRefused, OWNER_SETTINGS,
};

use defaults::default_of;
use document::{new_item, parse_document, put, remove_retired, render};

/// The retired key every save removes.
pub const RETIRED_KEY: &str = "bridge_auto_approve";
/// How long an edit waits for another edit of the same file to finish (an edit takes
/// milliseconds; a longer hold is a stuck or stopped process).
const LOCK_WAIT: Duration = Duration::from_secs(10);
const LOCK_POLL: Duration = Duration::from_millis(10);

/// A key as it is named: top-level, or `model.<key>`.
pub struct Named {
    pub spec: &'static Key,
    /// `Some("model")` for a `[model]` key.
    pub table: Option<&'static str>,
}

impl Named {
    pub fn full(&self) -> String {
        match self.table {
            Some(t) => format!("{t}.{}", self.spec.name),
            None => self.spec.name.to_owned(),
        }
    }
}

/// Why an edit or a read was refused.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("unknown key `{key}`; known keys: {}", known_keys())]
    UnknownKey { key: String },
    #[error(
        "{RETIRED_KEY} is retired: it is ignored, and removed whenever the file is saved; it \
         never enabled protocol_auto_approve (set that explicitly if you mean it)"
    )]
    Retired,
    #[error("`model` is a table: set its keys one by one ({})", model_keys())]
    Table,
    #[error("{key} takes {want}, not {got:?}")]
    BadValue {
        key: String,
        want: &'static str,
        got: String,
    },
    #[error("{key}: the value is not valid ({why})")]
    BadCredential { key: String, why: String },
    #[error("{}{}: not valid TOML ({message}); fix it by hand", .path.display(), line_suffix(*.line))]
    NotToml {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("{} has `{key}` but it is not a table; fix it by hand", .path.display())]
    NotATable { path: PathBuf, key: String },
    #[error("refusing to save, the result would not load: {0}")]
    Invalid(ConfigError),
    #[error("{0}")]
    Read(ConfigError),
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{0} is not set and has no default")]
    NotSet(String),
    #[error(
        "another `nl2sh config set` for {} has held {} for {} s; try again when it is done",
        .path.display(),
        .lock.display(),
        LOCK_WAIT.as_secs()
    )]
    Locked { path: PathBuf, lock: PathBuf },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

fn known_keys() -> String {
    let mut names: Vec<String> = KEYS
        .iter()
        .filter(|k| k.kind != KeyKind::Table)
        .map(|k| k.name.to_owned())
        .collect();
    names.extend(MODEL_KEYS.iter().map(|k| format!("model.{}", k.name)));
    names.join(", ")
}

fn model_keys() -> String {
    MODEL_KEYS
        .iter()
        .map(|k| format!("model.{}", k.name))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn lookup(name: &str) -> Result<Named, EditError> {
    if name == RETIRED_KEY {
        return Err(EditError::Retired);
    }
    let unknown = || EditError::UnknownKey {
        key: name.to_owned(),
    };
    match name.split_once('.') {
        Some(("model", sub)) => MODEL_KEYS
            .iter()
            .find(|k| k.name == sub)
            .map(|spec| Named {
                spec,
                table: Some("model"),
            })
            .ok_or_else(unknown),
        Some(_) => Err(unknown()),
        None => KEYS
            .iter()
            .find(|k| k.name == name)
            .map(|spec| Named { spec, table: None })
            .ok_or_else(unknown),
    }
}

/// The edited text: `key` set from `input` in `text` (the file at `path`, for messages),
/// the retired key removed, and the result validated as loading validates it.
pub fn edit(path: &Path, text: &str, key: &str, input: &str) -> Result<String, EditError> {
    let named = lookup(key)?;
    let item = new_item(&named, input)?;
    if named.spec.kind == KeyKind::Credential && !input.is_empty() && named.table.is_none() {
        // protocol_token: `protocol serve` refuses a configured token that breaks these
        // rules (empty means "generate one at each start").
        nl2sh_proto::token::check(input).map_err(|problem| EditError::BadCredential {
            key: named.full(),
            why: problem.to_string(),
        })?;
    }
    let mut doc = parse_document(path, text)?;
    // First, so the comments it stood under never go to the key being set (which is
    // appended after it).
    remove_retired(&mut doc);
    match named.table {
        None => put(doc.as_table_mut(), named.spec.name, item),
        Some(table) => {
            if doc.get(table).is_none() {
                doc.insert(table, Item::Table(Table::new()));
            }
            let sub = doc
                .get_mut(table)
                .and_then(Item::as_table_like_mut)
                .ok_or_else(|| EditError::NotATable {
                    path: path.to_owned(),
                    key: table.to_owned(),
                })?;
            let added = !sub.contains_key(named.spec.name);
            put(sub, named.spec.name, item);
            // An inline table's spacing is all on one line: lay it out again after an
            // addition (a `[model]` table keeps its own, comments included).
            if let (true, Some(inline)) = (
                added,
                doc.get_mut(table).and_then(Item::as_inline_table_mut),
            ) {
                inline.fmt();
            }
        }
    }
    let edited = doc.to_string();
    schema::parse(path, &edited, ParseMode::Startup).map_err(EditError::Invalid)?;
    Ok(edited)
}

/// What `get` prints.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    /// Set in the file.
    Value(String),
    /// Not in the file: the value the program uses.
    Default(String),
    /// A credential: whether it is set (never its value).
    Credential(bool),
}

/// `key`'s value in `text` (the file at `path`).
pub fn get(path: &Path, text: &str, key: &str) -> Result<Got, EditError> {
    let named = lookup(key)?;
    let doc = parse_document(path, text)?;
    let item = match named.table {
        None => doc.get(named.spec.name),
        Some(table) => doc
            .get(table)
            .and_then(Item::as_table_like)
            .and_then(|t| t.get(named.spec.name)),
    };
    let item = item.filter(|i| !i.is_none());
    if named.spec.kind == KeyKind::Credential {
        let set = item.and_then(Item::as_str).is_some_and(|s| !s.is_empty());
        return Ok(Got::Credential(set));
    }
    match item {
        Some(item) => Ok(Got::Value(render(named.spec.name, item))),
        None => default_of(&named, path)
            .map(Got::Default)
            .ok_or_else(|| EditError::NotSet(named.full())),
    }
}

/// What one saved edit did.
pub struct Applied {
    /// The file written (a symlinked configuration's target).
    pub target: PathBuf,
    pub removed_retired: bool,
}

/// Validate `key = input` against the file at `path` and save it, under the edit lock:
/// what `config set` and the owner's consoles both do.
pub fn apply(path: &Path, key: &str, input: &str) -> Result<Applied, EditError> {
    apply_all(path, &[(key, input)])
}

/// Every `key = input` of `edits` applied in order, each validated as [`edit`] does, and
/// saved once under the edit lock: all of them, or (the first refusal) none.
pub fn apply_all(path: &Path, edits: &[(&str, &str)]) -> Result<Applied, EditError> {
    let target = write_target(path);
    let lock = lock_for_edit(&target)?;
    let before = read_text(&target)?;
    let mut after = before.clone();
    for (key, input) in edits {
        after = edit(&target, &after, key, input)?;
    }
    save(&target, &after)?;
    drop(lock);
    let removed_retired = before
        .parse::<DocumentMut>()
        .is_ok_and(|d| d.contains_key(RETIRED_KEY));
    Ok(Applied {
        target,
        removed_retired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/etc/nl2sh/config.toml";

    fn ed(text: &str, key: &str, input: &str) -> Result<String, EditError> {
        edit(Path::new(P), text, key, input)
    }

    #[test]
    fn every_schema_key_is_editable_and_nothing_else() {
        for k in KEYS {
            assert!(lookup(k.name).is_ok(), "{}", k.name);
        }
        // Each model key is one the schema accepts, with a value of the kind we write.
        for k in MODEL_KEYS {
            let sample = match k.kind {
                KeyKind::Integer => "3",
                KeyKind::Text if k.name == "base_url" => "http://127.0.0.1:9/v1",
                _ => "x",
            };
            let mut text = String::from("[model]\nmodel = \"m\"\n");
            if k.name != "model" {
                text = ed(&text, &format!("model.{}", k.name), sample)
                    .unwrap_or_else(|e| panic!("{}: {e}", k.name));
            }
            assert!(schema::parse(Path::new(P), &text, ParseMode::Startup).is_ok());
        }
        let msg = ed("", "protocl_token", "x").unwrap_err().to_string();
        assert!(
            msg.starts_with(
                "unknown key `protocl_token`; known keys: protocol_token, protocol_auto_approve"
            ),
            "{msg}"
        );
        assert!(msg.contains("model.request_timeout_secs"), "{msg}");
        assert!(matches!(
            ed("", "model.nope", "1"),
            Err(EditError::UnknownKey { .. })
        ));
        assert!(matches!(
            ed("", "agent.x", "1"),
            Err(EditError::UnknownKey { .. })
        ));
        assert!(matches!(ed("", "model", "x"), Err(EditError::Table)));
        assert!(matches!(
            ed("", "bridge_auto_approve", "true"),
            Err(EditError::Retired)
        ));
    }

    #[test]
    fn round_trip_keeps_comments_and_order() {
        let text = "\
# nl2sh configuration
# (kept)

protocol_service_port = 8765 # the port
# auto-approve is dangerous
protocol_auto_approve = false

[model]
# which model
model = \"m\"
";
        let out = ed(text, "protocol_service_port", "9000").unwrap();
        assert_eq!(out, text.replace("8765 # the port", "9000 # the port"));
        let out = ed(&out, "protocol_start_with_service", "true").unwrap();
        assert!(
            out.contains("protocol_auto_approve = false\nprotocol_start_with_service = true\n"),
            "{out}"
        );
        // The new key goes with the top-level keys, before [model].
        assert!(out.find("protocol_start_with_service").unwrap() < out.find("[model]").unwrap());
        let out = ed(&out, "model.max_steps", "7").unwrap();
        assert!(
            out.ends_with("# which model\nmodel = \"m\"\nmax_steps = 7\n"),
            "{out}"
        );
        let out = ed(&out, "state_dir", "st ate \"quoted\"").unwrap();
        assert!(
            out.contains(r#"state_dir = 'st ate "quoted"'"#)
                || out.contains(r#"state_dir = "st ate \"quoted\"""#),
            "{out}"
        );
        for (key, want) in [
            ("protocol_service_port", "9000"),
            ("protocol_start_with_service", "true"),
            ("model.max_steps", "7"),
            ("state_dir", "st ate \"quoted\""),
            ("model.model", "m"),
        ] {
            assert_eq!(
                get(Path::new(P), &out, key).unwrap(),
                Got::Value(want.into()),
                "{key}"
            );
        }
        assert!(
            out.starts_with("# nl2sh configuration\n# (kept)\n\n"),
            "{out}"
        );
        assert!(out.contains("# auto-approve is dangerous\n"), "{out}");
    }

    #[test]
    fn model_table_is_created_and_validated_whole() {
        // [model] needs model.model: setting another key first is refused.
        let msg = ed("", "model.max_steps", "3").unwrap_err().to_string();
        assert!(
            msg.starts_with("refusing to save, the result would not load: /etc/nl2sh/config.toml"),
            "{msg}"
        );
        assert!(msg.contains("missing field `model`"), "{msg}");
        let out = ed(
            "protocol_auto_approve = true\n",
            "model.model",
            "gpt-4.1-mini",
        )
        .unwrap();
        assert_eq!(
            out,
            "protocol_auto_approve = true\n\n[model]\nmodel = \"gpt-4.1-mini\"\n"
        );
        let out = ed(&out, "model.base_url", "http://127.0.0.1:8080/v1").unwrap();
        assert!(ed(&out, "model.base_url", "ftp://x").is_err());
        assert!(ed(&out, "model.max_steps", "0").is_err());
        // An inline or dotted [model] is edited where it is.
        let out = ed("model = { model = \"m\" }\n", "model.max_steps", "2").unwrap();
        assert_eq!(out, "model = { model = \"m\", max_steps = 2 }\n");
        let msg = ed("model = 3\n", "model.max_steps", "2")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("is not a table"), "{msg}");
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        assert!(matches!(
            ed("", "protocol_start_with_service", "yes"),
            Err(EditError::BadValue {
                want: "true or false",
                ..
            })
        ));
        assert!(matches!(
            ed("", "protocol_service_port", "80x"),
            Err(EditError::BadValue {
                want: "a whole number",
                ..
            })
        ));
        let msg = ed("", "protocol_service_port", "70000")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`protocol_service_port`"), "{msg}");
        assert!(ed("", "netd_uid", "0")
            .unwrap_err()
            .to_string()
            .contains("netd_uid must not be 0"));
        assert!(ed("", "approval_policy", "lenient").is_err());
        assert_eq!(
            ed("", "approval_policy", "strict").unwrap(),
            "approval_policy = \"strict\"\n"
        );
        assert_eq!(
            ed("", "protocol_service_port", " 0 ").unwrap(),
            "protocol_service_port = 0\n"
        );
        let out = ed(
            "",
            "approval_grants",
            r#"[{ tool = "fs.stat" }, { tool = "shell.exec", command = ["ls", "**"] }]"#,
        )
        .unwrap();
        assert!(
            out.contains("[[approval_grants]]\ntool = \"fs.stat\"\n"),
            "{out}"
        );
        assert_eq!(
            schema::parse(Path::new(P), &out, ParseMode::Startup)
                .unwrap()
                .approval_grants
                .len(),
            2
        );
        assert!(ed(
            "",
            "approval_grants",
            r#"[{ tool = "x", max_risk = "critical" }]"#
        )
        .is_err());
        assert!(ed("", "approval_grants", "3").is_err());
        assert!(out.contains("command = [\"ls\", \"**\"]"), "{out}");
        // Never written: a retired `action_prefix`, a shell grant by tool alone, a bad
        // pattern (the message says why and what to write instead).
        for (grants, needle) in [
            (
                r#"[{ tool = "shell.exec", action_prefix = "/bin/sh -c 'ls " }]"#,
                "`action_prefix` is retired",
            ),
            (
                r#"[{ tool = "shell.exec", command = ["ls"], action_prefix = "x" }]"#,
                "`action_prefix` is retired",
            ),
            (
                r#"[{ tool = "shell.exec", max_risk = "high" }]"#,
                "must say which commands it covers",
            ),
            (
                r#"[{ tool = "shell.exec", command = ["ls", "**", "-l"] }]"#,
                "`**` may only be the last element",
            ),
            (
                r#"[{ tool = "fs.write", command = ["ls"] }]"#,
                "`command` applies only",
            ),
        ] {
            let msg = ed("", "approval_grants", grants).unwrap_err().to_string();
            assert!(msg.contains(needle), "{grants}: {msg}");
        }
        // A file with one is repaired by setting the grants again, and only so.
        let old = "[[approval_grants]]\ntool = \"shell.exec\"\naction_prefix = \"ls \"\n";
        let msg = ed(old, "approval_timeout_secs", "30")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`action_prefix` is retired"), "{msg}");
        let fixed = ed(
            old,
            "approval_grants",
            r#"[{ tool = "shell.exec", command = ["ls", "**"] }]"#,
        )
        .unwrap();
        assert!(!fixed.contains("action_prefix"), "{fixed}");
        assert_eq!(
            ed(&out, "approval_grants", "[]").unwrap(),
            "approval_grants = []\n"
        );
    }

    #[test]
    fn retired_key_is_removed_by_any_save() {
        let text = "bridge_auto_approve = true\nprotocol_service_port = 1\n";
        let out = ed(text, "protocol_service_port", "2").unwrap();
        assert_eq!(out, "protocol_service_port = 2\n");
        assert!(
            !schema::parse(Path::new(P), &out, ParseMode::Startup)
                .unwrap()
                .protocol_auto_approve
        );
    }

    #[test]
    fn removing_the_retired_key_keeps_the_comments_above_it() {
        // The file's header comment is the retired key's leading decor when it comes
        // first: it stays at the top, with its blank line.
        let text = "# my nl2sh settings\n\nbridge_auto_approve = true\n";
        assert_eq!(
            ed(text, "protocol_service_port", "1").unwrap(),
            "# my nl2sh settings\n\nprotocol_service_port = 1\n"
        );
        assert_eq!(
            ed(text, "model.model", "m").unwrap(),
            "# my nl2sh settings\n\n[model]\nmodel = \"m\"\n"
        );
        // A comment between two keys above it belongs to the key below it and stays
        // there; the retired key's own comment goes to the key that followed it.
        let text = "\
# my nl2sh settings

protocol_service_port = 1
# between the keys
approval_policy = \"strict\"
# the old switch
bridge_auto_approve = true # legacy
# the timeout
approval_timeout_secs = 30
";
        assert_eq!(
            ed(text, "protocol_service_port", "2").unwrap(),
            "\
# my nl2sh settings

protocol_service_port = 2
# between the keys
approval_policy = \"strict\"
# the old switch
# the timeout
approval_timeout_secs = 30
"
        );
        // Nothing after it: before the next table header, else at the end.
        let text = "a_key_first = 0\n# old\nbridge_auto_approve = true\n\n[model]\nmodel = \"m\"\n";
        let text = text.replace("a_key_first", "protocol_service_port");
        assert_eq!(
            ed(&text, "approval_timeout_secs", "5").unwrap(),
            "protocol_service_port = 0\napproval_timeout_secs = 5\n# old\n\n[model]\nmodel = \"m\"\n"
        );
        let text = "protocol_service_port = 0\n# old\nbridge_auto_approve = true\n";
        assert_eq!(
            ed(text, "protocol_service_port", "3").unwrap(),
            "protocol_service_port = 3\n# old\n"
        );
    }

    #[test]
    fn credentials_are_checked_and_never_shown() {
        let token = "tok-0123456789-abcdefghijklmnopqrstuvwxyz";
        let out = ed("", "protocol_token", token).unwrap();
        assert_eq!(
            get(Path::new(P), &out, "protocol_token").unwrap(),
            Got::Credential(true)
        );
        assert_eq!(
            get(Path::new(P), "", "protocol_token").unwrap(),
            Got::Credential(false)
        );
        assert_eq!(
            get(Path::new(P), "protocol_token = \"\"\n", "protocol_token").unwrap(),
            Got::Credential(false)
        );
        // Empty means "generate at each start"; a short one would refuse startup.
        assert!(ed("", "protocol_token", "").is_ok());
        let msg = ed("", "protocol_token", "short-secret")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("too short"), "{msg}");
        assert!(!msg.contains("short-secret"), "{msg}");
        let out = ed("[model]\nmodel = \"m\"\n", "model.api_key", "sk-abc").unwrap();
        assert_eq!(
            get(Path::new(P), &out, "model.api_key").unwrap(),
            Got::Credential(true)
        );
        let model = get(Path::new(P), &out, "model").unwrap();
        let Got::Value(text) = model else {
            panic!("{model:?}")
        };
        assert!(!text.contains("sk-abc"), "{text}");
        assert!(text.contains("# api_key: set (not shown)"), "{text}");
        let msg = ed("[model]\nmodel = \"m\"\n", "model.api_key", "")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("model.api_key must not be empty"), "{msg}");
    }

    #[test]
    fn defaults_for_unset_keys() {
        let get = |key| get(Path::new(P), "", key).unwrap();
        assert_eq!(get("protocol_service_port"), Got::Default("8765".into()));
        assert_eq!(
            get("protocol_start_with_service"),
            Got::Default("false".into())
        );
        assert_eq!(get("approval_policy"), Got::Default("balanced".into()));
        assert_eq!(
            get("state_dir"),
            Got::Default("/etc/nl2sh/config.state".into())
        );
        assert_eq!(get("model.max_steps"), Got::Default("24".into()));
        assert!(matches!(
            super::get(Path::new(P), "", "model.model"),
            Err(EditError::NotSet(_))
        ));
    }

    #[test]
    fn invalid_toml_is_reported_without_its_text() {
        let text = "protocol_token = \"secret-in-a-broken-file-0123456789\"\nport = [\n";
        let msg = ed(text, "protocol_service_port", "1")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("/etc/nl2sh/config.toml:"), "{msg}");
        assert!(msg.contains("not valid TOML"), "{msg}");
        assert!(!msg.contains("secret-in"), "{msg}");
    }

    #[test]
    fn a_file_that_does_not_load_can_be_repaired_but_not_made_worse() {
        // The broken value is the key being set: the result loads, so it is saved.
        let out = ed(
            "protocol_service_port = \"x\"\n",
            "protocol_service_port",
            "9000",
        )
        .unwrap();
        assert_eq!(out, "protocol_service_port = 9000\n");
        // Another key broken: refused, naming it.
        let msg = ed("protocol_service_port = \"x\"\n", "netd_uid", "5")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("protocol_service_port"), "{msg}");
    }
}
