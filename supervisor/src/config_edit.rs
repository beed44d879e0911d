//! `nl2sh config path|get|set`: read and edit the configuration file in place.
//!
//! Edits go through `toml_edit`, so comments, blank lines and key order stay as the owner
//! wrote them. The edited text is validated by the same parse the supervisor loads with
//! ([`ParseMode::Startup`]) — plus the token rules `protocol serve` applies — before anything
//! is written; a refused edit leaves the file untouched. Saving writes a 0600 temporary
//! file in the same directory, syncs it and renames it over the file, and drops the
//! retired `bridge_auto_approve`.
//!
//! Credentials (`protocol_token`, `model.api_key`) are never printed and never taken from
//! the command line, where they would stay in shell history and the process list: they
//! come from stdin (`-`) or a named environment variable.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::Flock;
use nl2sh_proto::channels::SettingView;
use nl2sh_proto::config::{self as schema, ConfigError, Key, KeyKind, ParseMode, KEYS, MODEL_KEYS};
use nl2sh_proto::private_file::{self, Owner};
use nl2sh_proto::state_layout::{self, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE};
use toml_edit::{DocumentMut, Item, Table, Value};

use crate::config;
use crate::state;

/// The retired key every save removes.
const RETIRED_KEY: &str = "bridge_auto_approve";
/// Longest credential line read from stdin.
const MAX_INPUT_BYTES: u64 = 4096;
/// How long `set` waits for another edit of the same file to finish (an edit takes
/// milliseconds; a longer hold is a stuck or stopped process).
const LOCK_WAIT: Duration = Duration::from_secs(10);
const LOCK_POLL: Duration = Duration::from_millis(10);

/// A key named on the command line: top-level, or `model.<key>`.
struct Named {
    spec: &'static Key,
    /// `Some("model")` for a `[model]` key.
    table: Option<&'static str>,
}

impl Named {
    fn full(&self) -> String {
        match self.table {
            Some(t) => format!("{t}.{}", self.spec.name),
            None => self.spec.name.to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("unknown key `{key}`; known keys: {}", known_keys())]
    UnknownKey { key: String },
    #[error(
        "{RETIRED_KEY} is retired: it is ignored, and removed whenever the file is saved; it \
         never enabled protocol_auto_approve (set that explicitly if you mean it)"
    )]
    Retired,
    #[error(
        "{0} is a credential and is not taken from the command line (it would stay in shell \
         history and the process list): use `nl2sh config set {0} -` and type or pipe it on \
         stdin (one line), or `nl2sh config set {0} --from-env VAR`"
    )]
    CredentialOnCommandLine(String),
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
    #[error("no value on stdin")]
    NoInput,
    #[error("the value on stdin is longer than {MAX_INPUT_BYTES} bytes")]
    InputTooLong,
    #[error("environment variable {0} is not set")]
    EnvUnset(String),
    #[error("environment variable {0} is not valid UTF-8")]
    EnvNotUtf8(String),
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

fn lookup(name: &str) -> Result<Named, EditError> {
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

fn parse_document(path: &Path, text: &str) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>().map_err(|e| EditError::NotToml {
        path: path.to_owned(),
        line: e.span().map(|s| schema::line_at(text, s.start)),
        // The parser's message only: its excerpt of the source could show a credential.
        message: e.message().trim().to_owned(),
    })
}

/// The new value of `named` from the text given.
fn new_item(named: &Named, input: &str) -> Result<Item, EditError> {
    let bad = |want: &'static str| EditError::BadValue {
        key: named.full(),
        want,
        got: input.to_owned(),
    };
    Ok(match named.spec.kind {
        KeyKind::Bool => match input.trim() {
            "true" => toml_edit::value(true),
            "false" => toml_edit::value(false),
            _ => return Err(bad("true or false")),
        },
        KeyKind::Integer => {
            let n: i64 = input.trim().parse().map_err(|_| bad("a whole number"))?;
            toml_edit::value(n)
        }
        KeyKind::Text | KeyKind::Credential => toml_edit::value(input),
        KeyKind::Grants => {
            let value: Value = input
                .trim()
                .parse()
                .map_err(|_| bad("a TOML array of tables, e.g. [{ tool = \"fs.stat\" }]"))?;
            if !value.is_array() {
                return Err(bad("a TOML array of tables, e.g. [{ tool = \"fs.stat\" }]"));
            }
            // A non-empty array of inline tables reads better as [[approval_grants]].
            match Item::Value(value).into_array_of_tables() {
                Ok(tables) if !tables.is_empty() => Item::ArrayOfTables(tables),
                Ok(_) => toml_edit::value(toml_edit::Array::new()),
                Err(item) => item,
            }
        }
        KeyKind::Table => return Err(EditError::Table),
    })
}

/// Put `item` under `name` in `table`, keeping an existing value's surrounding comments
/// and spacing.
fn put(table: &mut dyn toml_edit::TableLike, name: &str, item: Item) {
    match table.get_mut(name) {
        Some(existing) if existing.is_value() && item.is_value() => {
            let decor = existing.as_value().map(|v| v.decor().clone());
            if let Ok(mut value) = item.into_value() {
                if let Some(decor) = decor {
                    *value.decor_mut() = decor;
                }
                *existing = Item::Value(value);
            }
        }
        // A value replacing a table (or the reverse) is a new entry: the key's old
        // formatting belongs to the other form.
        Some(_) => {
            table.remove(name);
            table.insert(name, item);
        }
        None => {
            table.insert(name, item);
        }
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
        crate::token::check(input).map_err(|problem| EditError::BadCredential {
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

/// Remove the retired key, keeping the comments that stand above it. toml_edit keeps
/// them in the key's leading decor, the file's own header comment too when the key comes
/// first, so removing the key would take them along. They go where they still stand
/// above the same things: the document's start when nothing came before the key, else
/// the next key, else the next table header, else the end of the document.
fn remove_retired(doc: &mut DocumentMut) {
    let root = doc.as_table_mut();
    let Some(index) = root.iter().position(|(k, _)| k == RETIRED_KEY) else {
        return;
    };
    let Some((key, item)) = root.remove_entry(RETIRED_KEY) else {
        return;
    };
    let leading = match &item {
        Item::Table(t) => t.decor().prefix(),
        Item::ArrayOfTables(a) => a.get(0).and_then(|t| t.decor().prefix()),
        Item::Value(_) | Item::None => key.leaf_decor().prefix(),
    };
    let leading = leading.and_then(|raw| raw.as_str()).unwrap_or_default();
    if leading.is_empty() {
        return;
    }
    let prepend = |decor: &mut toml_edit::Decor, default: &str| {
        let rest = decor
            .prefix()
            .and_then(|raw| raw.as_str())
            .unwrap_or(default)
            .to_owned();
        decor.set_prefix(format!("{leading}{rest}"));
    };
    // Keys render before table headers, in order; the key was the first when no key
    // came before it.
    let values_before = root
        .iter()
        .take(index)
        .filter(|(_, i)| i.is_value())
        .count();
    let comments = leading.contains('#');
    if values_before == 0 && matches!(item, Item::Value(_)) {
        if comments {
            prepend(root.decor_mut(), "");
        }
        return;
    }
    if let Some((mut next, _)) = root.iter_mut().skip(index).find(|(_, i)| i.is_value()) {
        prepend(next.leaf_decor_mut(), "");
        return;
    }
    if let Some(position) = first_header(root) {
        if let Some(table) = header_at(root, position) {
            prepend(table.decor_mut(), "\n");
            return;
        }
    }
    if comments {
        let trailing = doc.trailing().as_str().unwrap_or_default().to_owned();
        doc.set_trailing(format!("{trailing}{leading}"));
    }
}

/// The position of the first table header the document shows (implicit and dotted tables
/// have none of their own).
fn first_header(table: &Table) -> Option<isize> {
    let mut first: Option<isize> = None;
    for (_, item) in table.iter() {
        let tables: Vec<&Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter().collect(),
            _ => continue,
        };
        for t in tables {
            if !t.is_implicit() && !t.is_dotted() {
                if let Some(p) = t.position() {
                    first = Some(first.map_or(p, |f| f.min(p)));
                }
            }
            if let Some(p) = first_header(t) {
                first = Some(first.map_or(p, |f| f.min(p)));
            }
        }
    }
    first
}

/// The shown table header at `position`.
fn header_at(table: &mut Table, position: isize) -> Option<&mut Table> {
    for (_, item) in table.iter_mut() {
        let tables: Vec<&mut Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter_mut().collect(),
            _ => continue,
        };
        for t in tables {
            if !t.is_implicit() && !t.is_dotted() && t.position() == Some(position) {
                return Some(t);
            }
            if let Some(found) = header_at(t, position) {
                return Some(found);
            }
        }
    }
    None
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

/// A value as a script wants it: strings bare, everything else as TOML; a table without
/// its credential.
fn render(name: &str, item: &Item) -> String {
    if let Some(s) = item.as_str() {
        return s.to_owned();
    }
    if let Some(value) = item.as_value() {
        return value.clone().decorated("", "").to_string();
    }
    let mut item = item.clone();
    let mut hidden = false;
    if let Some(table) = item.as_table_like_mut() {
        hidden = table.remove("api_key").is_some();
    }
    let mut doc = DocumentMut::new();
    doc.insert(name, item);
    let mut out = doc.to_string().trim_end().to_owned();
    if hidden {
        out.push_str("\n# api_key: set (not shown)");
    }
    out
}

/// The value the program uses when `named` is absent.
fn default_of(named: &Named, path: &Path) -> Option<String> {
    use schema::*;
    let defaults = Config::default();
    Some(match (named.table, named.spec.name) {
        (None, "protocol_auto_approve" | "protocol_start_with_service") => "false".into(),
        (None, "protocol_service_port") => DEFAULT_PROTOCOL_PORT.to_string(),
        (None, "state_dir") => config::state_dir(&defaults, &config::absolute(path))
            .display()
            .to_string(),
        (None, "netd_uid") => defaults.netd_ids().0.to_string(),
        (None, "netd_gid") => defaults.netd_ids().1.to_string(),
        (None, "sandbox_uid_base") => defaults.sandbox_uids().0.to_string(),
        (None, "sandbox_uid_count") => defaults.sandbox_uids().1.to_string(),
        (None, "sandbox_max_processes") => defaults.sandbox_limits().processes.to_string(),
        (None, "sandbox_memory_mib") => (defaults.sandbox_limits().memory_bytes >> 20).to_string(),
        (None, "sandbox_cpu_secs") => defaults.sandbox_limits().cpu_secs.to_string(),
        (None, "sandbox_total_memory_mib") => {
            (defaults.sandbox_ceiling().memory_bytes >> 20).to_string()
        }
        (None, "sandbox_total_processes") => defaults.sandbox_ceiling().processes.to_string(),
        (None, "approval_policy") => ApprovalPolicy::default().as_str().into(),
        (None, "approval_timeout_secs") => defaults.approval_timeout().as_secs().to_string(),
        (None, "approval_grants") => "[]".into(),
        (None, "audit_max_rows") => DEFAULT_AUDIT_MAX_ROWS.to_string(),
        (None, "audit_max_bytes") => DEFAULT_AUDIT_MAX_BYTES.to_string(),
        (None, "web_host") => DEFAULT_WEB_HOST.into(),
        (None, "web_port") => DEFAULT_WEB_PORT.to_string(),
        (None, "web_allow_insecure_http") => "false".into(),
        (None, "web_uid") => defaults.web_ids().0.to_string(),
        (None, "web_gid") => defaults.web_ids().1.to_string(),
        (None, "approval_notifications") => "true".into(),
        (Some(_), "base_url") => DEFAULT_MODEL_BASE_URL.into(),
        (Some(_), "api_key_env") => DEFAULT_MODEL_API_KEY_ENV.into(),
        (Some(_), "max_steps") => DEFAULT_MODEL_MAX_STEPS.to_string(),
        (Some(_), "request_timeout_secs") => DEFAULT_MODEL_REQUEST_TIMEOUT_SECS.to_string(),
        _ => return None,
    })
}

/// The file's text, or "" when it does not exist yet.
fn read_text(path: &Path) -> Result<String, EditError> {
    match schema::read_bounded(path) {
        Ok(text) => Ok(text),
        Err(ConfigError::Missing { .. }) => Ok(String::new()),
        Err(e) => Err(EditError::Read(e)),
    }
}

/// The file an edit replaces: a symlinked configuration is edited where it points, so
/// the link stays a link.
fn write_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EditError {
    let path = path.to_owned();
    move |source| EditError::Io { what, path, source }
}

/// The directory of `path`, created (0700, with its parents) when missing.
fn config_dir(path: &Path) -> Result<PathBuf, EditError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(&dir)
            .map_err(io_err("cannot create directory", &dir))?;
    }
    Ok(dir)
}

/// `<path>.lock`, the lock an edit of `path` holds (see [`lock_for_edit`]).
pub fn lock_path(path: &Path) -> PathBuf {
    state_layout::config_lock(path)
}

/// Take the exclusive lock on [`lock_path`] (created 0600, never removed: removing a
/// lock file lets two editors lock two different files). Held from reading the file to
/// renaming its new version over it, so concurrent edits apply one after another and
/// none is lost. A file of its own because the rename replaces the configuration's inode,
/// and a lock on that would be a lock on a file no longer there.
fn lock_for_edit(path: &Path) -> Result<Flock<File>, EditError> {
    config_dir(path)?;
    let lock = lock_path(path);
    let open = |create_new: bool| {
        OpenOptions::new()
            .write(true)
            .create_new(create_new)
            .mode(PRIVATE_FILE_MODE)
            // No link followed, and no FIFO to hang on: whoever can write the directory
            // may have put anything there.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&lock)
    };
    let (file, created) = match open(true) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
            open(false).map_err(io_err("cannot open the lock file", &lock))?,
            false,
        ),
        Err(e) => return Err(io_err("cannot create the lock file", &lock)(e)),
    };
    let meta = file
        .metadata()
        .map_err(io_err("cannot inspect the lock file", &lock))?;
    // A hard link to another file (root would chown or lock that) or anything but a plain
    // file is not our lock.
    if !meta.file_type().is_file() || meta.nlink() != 1 {
        return Err(io_err("refusing the lock file", &lock)(io::Error::other(
            "it is not a plain file of its own (a link, a FIFO or a device)",
        )));
    }
    // Root editing another user's configuration leaves a lock it made theirs, as `save`
    // leaves the file: they must still be able to take it. Never one it found.
    if created {
        if let Owner::Keep { uid, gid } = owner_kept(path) {
            if nix::unistd::geteuid().is_root() {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                    .map_err(io_err("cannot chown", &lock))?;
            }
        }
    }
    match crate::state::lock_exclusive_within(file, LOCK_WAIT, LOCK_POLL) {
        Ok(held) => Ok(held),
        Err((_, Errno::EWOULDBLOCK)) => Err(EditError::Locked {
            path: path.to_owned(),
            lock,
        }),
        Err((_, errno)) => Err(io_err("cannot lock", &lock)(io::Error::from(errno))),
    }
}

/// Replace `path` with `text` atomically: a 0600 temporary file beside it, fsync, rename,
/// fsync of the directory. Creates the directory (0700) when missing. The owner of a file
/// root edits for another uid stays that uid. Callers that read the file first hold
/// [`lock_for_edit`] around both.
pub fn save(path: &Path, text: &str) -> Result<(), EditError> {
    config_dir(path)?;
    private_file::replace(path, text.as_bytes(), owner_kept(path))
        .map_err(io_err("cannot write", path))
}

/// Who the edited file stays owned by: root editing another user's configuration keeps
/// it theirs. Only a plain file counts (callers pass the symlink's target,
/// [`write_target`]): a link itself would otherwise hand root's new file to whoever owns
/// what it points at.
fn owner_kept(path: &Path) -> Owner {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() && meta.uid() != nix::unistd::geteuid().as_raw() => {
            Owner::Keep {
                uid: meta.uid(),
                gid: meta.gid(),
            }
        }
        _ => Owner::Writer,
    }
}

/// One line of stdin, without echo when it is a terminal.
fn read_stdin_line(prompt_name: &str) -> Result<String, EditError> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let stdin = io::stdin();
    let terminal = nix::unistd::isatty(&stdin).unwrap_or(false);
    let saved = if terminal {
        eprint!("{prompt_name} (not echoed): ");
        let _ = io::stderr().flush();
        tcgetattr(&stdin).ok().inspect(|attrs| {
            let mut quiet = attrs.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            let _ = tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
        })
    } else {
        None
    };
    let mut bytes = Vec::new();
    let read = stdin
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_until(b'\n', &mut bytes);
    if let Some(attrs) = saved {
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &attrs);
        eprintln!();
    }
    read.map_err(|source| EditError::Io {
        what: "cannot read",
        path: PathBuf::from("stdin"),
        source,
    })?;
    if bytes.is_empty() {
        return Err(EditError::NoInput);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(EditError::InputTooLong);
    }
    String::from_utf8(bytes).map_err(|_| EditError::BadValue {
        key: prompt_name.to_owned(),
        want: "UTF-8 text",
        got: String::new(),
    })
}

fn config_path(config_arg: Option<PathBuf>) -> PathBuf {
    config::absolute(&config_arg.unwrap_or_else(config::default_config_path))
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("nl2sh: {e}");
    crate::exit::Exit::Failure.into()
}

pub fn path_command(config_arg: Option<PathBuf>) -> ExitCode {
    let path = config_path(config_arg);
    println!("{}", path.display());
    if !path.exists() {
        eprintln!(
            "nl2sh: {} does not exist yet; `config set` creates it",
            path.display()
        );
    }
    ExitCode::SUCCESS
}

pub fn get_command(config_arg: Option<PathBuf>, key: &str) -> ExitCode {
    let path = config_path(config_arg);
    let got = read_text(&path).and_then(|text| get(&path, &text, key));
    match got {
        Ok(Got::Value(v)) => println!("{v}"),
        Ok(Got::Default(v)) => {
            println!("{v}");
            eprintln!(
                "nl2sh: {key} is not set in {}; this is the default",
                path.display()
            );
        }
        Ok(Got::Credential(set)) => println!("{}", if set { "set" } else { "not set" }),
        Err(e) => return fail(e),
    }
    ExitCode::SUCCESS
}

pub fn set_command(
    config_arg: Option<PathBuf>,
    key: &str,
    value: Option<String>,
    from_env: Option<String>,
) -> ExitCode {
    let path = config_path(config_arg);
    match set(&path, key, value, from_env, &|var| std::env::var_os(var)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn set(
    path: &Path,
    key: &str,
    value: Option<String>,
    from_env: Option<String>,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), EditError> {
    let named = lookup(key)?;
    if named.spec.kind == KeyKind::Table {
        return Err(EditError::Table);
    }
    let credential = named.spec.kind == KeyKind::Credential;
    let input = match (value.as_deref(), from_env) {
        (_, Some(var)) => match env(&var).map(std::ffi::OsString::into_string) {
            Some(Ok(v)) => v,
            None => return Err(EditError::EnvUnset(var)),
            Some(Err(_)) => return Err(EditError::EnvNotUtf8(var)),
        },
        (Some("-"), None) => read_stdin_line(&named.full())?,
        (Some(_), None) if credential => {
            return Err(EditError::CredentialOnCommandLine(named.full()))
        }
        (Some(v), None) => v.to_owned(),
        (None, None) => return Err(EditError::NoInput),
    };
    let applied = apply(path, key, &input)?;
    if credential {
        println!(
            "Saved {} in {} (value not shown).",
            named.full(),
            applied.target.display()
        );
    } else {
        println!(
            "Saved {} = {} in {}.",
            named.full(),
            input.trim(),
            applied.target.display()
        );
    }
    if applied.removed_retired {
        println!("Removed the retired {RETIRED_KEY} (it was ignored).");
    }
    println!("{}", restart_note(path, named.spec.live));
    Ok(())
}

/// What one saved edit did.
struct Applied {
    target: PathBuf,
    removed_retired: bool,
}

/// Validate `key = input` against the file at `path` and save it, under the edit lock:
/// what `config set` and the owner's consoles both do.
fn apply(path: &Path, key: &str, input: &str) -> Result<Applied, EditError> {
    let target = write_target(path);
    let lock = lock_for_edit(&target)?;
    let before = read_text(&target)?;
    let after = edit(&target, &before, key, input)?;
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

/// The settings of the consoles' "MCP / A2A" category, in the order they are shown.
pub const OWNER_SETTINGS: &[&str] = &[
    "protocol_start_with_service",
    "protocol_service_port",
    "protocol_token",
    "protocol_auto_approve",
    "approval_notifications",
];

/// The owner's consoles (Web, later the TUI) read and save their settings through
/// approvald with this: the same validation, lock and atomic save as `config set`, and
/// only the keys of [`OWNER_SETTINGS`].
pub struct OwnerSettings;

impl nl2sh_approvald::SettingsEditor for OwnerSettings {
    fn settings(&self, config_path: &Path) -> Result<Vec<SettingView>, String> {
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

    fn save(
        &self,
        config_path: &Path,
        key: &str,
        value: &str,
    ) -> Result<nl2sh_approvald::SavedSetting, nl2sh_approvald::SettingRefused> {
        use nl2sh_approvald::{SavedSetting, SettingRefused};
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
        message.push_str(&restart_note(config_path, spec.live));
        Ok(SavedSetting {
            message,
            restart_needed: !spec.live,
        })
    }

    fn rotate_token(
        &self,
        config_path: &Path,
    ) -> Result<nl2sh_approvald::SavedSetting, nl2sh_approvald::SettingRefused> {
        let token = crate::token::generate()
            .map_err(|e| nl2sh_approvald::SettingRefused::Failed(e.to_string()))?;
        self.save(config_path, "protocol_token", token.expose())
    }
}

/// What a running service does with the change (it is told nothing).
fn restart_note(path: &Path, live: bool) -> String {
    let (cfg, _) = config::load_for_discovery(path);
    let state = state::state_paths(&config::state_dir(&cfg, path));
    let running = match state::discover(&state, &config::identity(path)) {
        Ok(state::Discovered::Live(info)) => Some(info),
        _ => None,
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const P: &str = "/etc/nl2sh/config.toml";

    fn no_env(_: &str) -> Option<std::ffi::OsString> {
        None
    }

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
        // A literal on the command line is refused before anything is read or written.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        let err = set(&path, "protocol_token", Some(token.into()), None, &no_env).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("config set protocol_token -"), "{msg}");
        assert!(msg.contains("--from-env VAR"), "{msg}");
        assert!(!msg.contains(token), "{msg}");
        assert!(!path.exists());
        assert!(matches!(
            set(&path, "model.api_key", Some("sk".into()), None, &no_env),
            Err(EditError::CredentialOnCommandLine(_))
        ));
        // From the environment.
        let env = |var: &str| (var == "TOKEN_VAR").then(|| token.into());
        set(
            &path,
            "protocol_token",
            None,
            Some("TOKEN_VAR".into()),
            &env,
        )
        .unwrap();
        assert!(fs::read_to_string(&path).unwrap().contains(token));
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(
            set(
                &path,
                "protocol_token",
                None,
                Some("OTHER_VAR".into()),
                &env
            ),
            Err(EditError::EnvUnset(_))
        ));
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

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    /// Root editing another user's configuration leaves it (and its lock) theirs, also
    /// when the configuration is a symlink to it (edited where it points; the link stays).
    #[test]
    fn root_keeps_a_users_configuration_theirs() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root to own files as another user");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let owned = |p: &Path| {
            let m = fs::symlink_metadata(p).unwrap();
            (m.uid(), m.gid())
        };
        let theirs = tmp.path().join("theirs.toml");
        fs::write(&theirs, "").unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        set(
            &theirs,
            "protocol_service_port",
            Some("9000".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(owned(&theirs), (4242, 4242));
        assert_eq!(owned(&lock_path(&theirs)), (4242, 4242));

        let link = tmp.path().join("config.toml");
        std::os::unix::fs::symlink(&theirs, &link).unwrap();
        set(
            &link,
            "protocol_service_port",
            Some("9001".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_to_string(&theirs).unwrap(),
            "protocol_service_port = 9001\n"
        );
        assert_eq!(owned(&theirs), (4242, 4242));
    }

    #[test]
    fn save_is_atomic_private_and_creates_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("new/dir/config.toml");
        set(
            &path,
            "protocol_service_port",
            Some("9000".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "protocol_service_port = 9000\n"
        );
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&tmp.path().join("new")), 0o700);

        // A wide existing file comes back 0600; no temporary file is left.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        set(
            &path,
            "protocol_start_with_service",
            Some("true".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let mut names = names;
        names.sort();
        // Beside it only the lock edits take, private too.
        assert_eq!(names, ["config.toml", "config.toml.lock"]);
        assert_eq!(mode(&lock_path(&path)), 0o600);

        // A refused edit leaves the file exactly as it was (content and inode).
        let before = fs::read_to_string(&path).unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        assert!(set(
            &path,
            "protocol_service_port",
            Some("70000".into()),
            None,
            &no_env
        )
        .is_err());
        assert!(set(
            &path,
            "approval_timeout_secs",
            Some("0".into()),
            None,
            &no_env
        )
        .is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), before);
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);

        // A symlinked configuration is edited where it points; the link stays.
        let real = tmp.path().join("real.toml");
        fs::write(&real, "# mine\nprotocol_service_port = 0\n").unwrap();
        let link = tmp.path().join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        set(
            &link,
            "protocol_service_port",
            Some("1".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_to_string(&real).unwrap(),
            "# mine\nprotocol_service_port = 1\n"
        );
    }

    #[test]
    fn an_edit_waits_for_the_lock_and_then_applies_to_the_file_as_left() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        fs::write(&path, "protocol_service_port = 1\n").unwrap();
        let held = lock_for_edit(&path).unwrap();
        let editing = {
            let path = path.clone();
            std::thread::spawn(move || {
                set(
                    &path,
                    "approval_policy",
                    Some("strict".into()),
                    None,
                    &no_env,
                )
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!editing.is_finished(), "the edit did not wait for the lock");
        // What the holder writes meanwhile is what the waiting edit starts from.
        save(&path, "protocol_service_port = 2\n").unwrap();
        drop(held);
        editing.join().unwrap().unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "protocol_service_port = 2\napproval_policy = \"strict\"\n"
        );
    }

    #[test]
    fn a_lock_file_someone_else_left_is_never_a_link_or_a_fifo() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        fs::write(&path, "").unwrap();
        // A hard link to another file: refused, and that file untouched.
        let other = tmp.path().join("precious");
        fs::write(&other, "keep").unwrap();
        fs::hard_link(&other, lock_path(&path)).unwrap();
        let before = fs::metadata(&other).unwrap();
        let e = lock_for_edit(&path).unwrap_err().to_string();
        assert!(e.contains("not a plain file of its own"), "{e}");
        let after = fs::metadata(&other).unwrap();
        assert_eq!((after.uid(), after.mode()), (before.uid(), before.mode()));
        // A FIFO: refused at once, not waited on.
        fs::remove_file(lock_path(&path)).unwrap();
        nix::unistd::mkfifo(
            &lock_path(&path),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let e = lock_for_edit(&path).unwrap_err().to_string();
        assert!(e.contains("lock file"), "{e}");
        // A plain one of its own is the lock.
        fs::remove_file(lock_path(&path)).unwrap();
        drop(lock_for_edit(&path).unwrap());
        drop(lock_for_edit(&path).unwrap());
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
