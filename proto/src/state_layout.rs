//! The state directory's layout: the code form of the tree in docs/ARCHITECTURE.md ("State
//! and who owns it"). Every name of a file or directory nl2sh keeps for a configuration,
//! and every mode it gives them, is defined here and nowhere else; the processes take
//! their paths and modes from this module. A test below reads the document's tree and
//! fails when the two differ.
//!
//! Paths are relative to their base: the state directory ([`STATE_TREE`]) or the managed
//! service's directory ([`SERVICE_TREE`]). Where the bases themselves are is derived from
//! the configuration file's path ([`default_state_dir`], [`service_dir`], [`config_lock`];
//! the `state_dir` key may move the state directory, see `config::state_dir`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The mode of every private directory (the state directory, its subdirectories, the
/// service directory, a configuration's directory nl2sh creates).
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of every private file (each file of the state and service directories, the
/// configuration file and its lock).
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// What an [`Entry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Socket,
}

/// One file or directory of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Relative to its base, `/`-separated.
    pub path: &'static str,
    pub kind: Kind,
    pub mode: u32,
}

impl Entry {
    const fn dir(path: &'static str) -> Entry {
        Entry {
            path,
            kind: Kind::Dir,
            mode: PRIVATE_DIR_MODE,
        }
    }

    const fn file(path: &'static str) -> Entry {
        Entry {
            path,
            kind: Kind::File,
            mode: PRIVATE_FILE_MODE,
        }
    }

    /// Where it is under `base`.
    pub fn in_dir(&self, base: &Path) -> PathBuf {
        base.join(self.path)
    }

    /// Its own name (the last component).
    pub fn name(&self) -> &'static str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    /// Its directory, relative to the base ("" at the top).
    pub fn parent(&self) -> &'static str {
        self.path.rsplit_once('/').map_or("", |(dir, _)| dir)
    }
}

/// Paths in `protocol/`, written once.
macro_rules! protocol {
    () => {
        "protocol"
    };
    ($name:literal) => {
        concat!(protocol!(), "/", $name)
    };
}

/// The older copy of a file rotated once it is full: its name with `.1`.
macro_rules! older {
    ($path:expr) => {
        concat!($path, ".1")
    };
}

macro_rules! audit_journal {
    () => {
        protocol!("audit-journal")
    };
}

macro_rules! service_log {
    () => {
        "service.log"
    };
}

// The state directory.

/// The state directory's name beside its configuration (`<stem>.state`).
pub const STATE_DIR_SUFFIX: &str = ".state";
/// The supervisor's directory: the lock, discovery, approvald's store.
pub const PROTOCOL_DIR: Entry = Entry::dir(protocol!());
/// The supervisor's exclusive flock: one protocol process per state directory.
pub const LOCK: Entry = Entry::file(protocol!("lock"));
/// The running supervisor's announcement (discovery).
pub const CONNECTION_JSON: Entry = Entry::file(protocol!("connection.json"));
/// Why the last service stopped after a crash loop.
pub const FAILURE_JSON: Entry = Entry::file(protocol!("failure.json"));
/// approvald's SQLite database: the audit trail and the tasks. SQLite keeps its `-wal`
/// and `-shm` files beside it, with its mode.
pub const TASKS_DB: Entry = Entry::file(protocol!("tasks.sqlite3"));
/// approvald's journal of rows answered for, not yet committed.
pub const AUDIT_JOURNAL: Entry = Entry::file(audit_journal!());
/// The journal's older file, once the current one was rotated.
pub const AUDIT_JOURNAL_OLDER: Entry = Entry::file(older!(audit_journal!()));
/// The id and hash of the newest audit row.
pub const AUDIT_TAIL: Entry = Entry::file(protocol!("audit-tail.json"));
/// The executor's rows of answered calls approvald has not acknowledged.
pub const AUDIT_OUTBOX: Entry = Entry::file(protocol!("audit-outbox"));
/// approvald's Web console sessions kept across a restart: hashes and expiry times only.
pub const WEB_SESSIONS: Entry = Entry::file(protocol!("web-sessions.json"));
/// The local CLI's socket to approvald.
pub const APPROVALS_SOCK: Entry = Entry {
    kind: Kind::Socket,
    ..Entry::file(protocol!("approvals.sock"))
};
/// approvald's Agent sessions, one file per context.
pub const SESSIONS_DIR: Entry = Entry::dir("sessions");
/// How a session file's name ends (`<sha256 of the context id>.json`, mode
/// [`PRIVATE_FILE_MODE`]).
pub const SESSION_FILE_SUFFIX: &str = ".json";

/// Everything in the state directory, parents before their children.
pub const STATE_TREE: &[Entry] = &[
    PROTOCOL_DIR,
    LOCK,
    CONNECTION_JSON,
    FAILURE_JSON,
    TASKS_DB,
    AUDIT_JOURNAL,
    AUDIT_JOURNAL_OLDER,
    AUDIT_TAIL,
    AUDIT_OUTBOX,
    WEB_SESSIONS,
    APPROVALS_SOCK,
    SESSIONS_DIR,
];

// The managed service's directory.

/// The service directory's name beside its configuration (`<stem>.service`).
pub const SERVICE_DIR_SUFFIX: &str = ".service";
/// The managed service's output.
pub const SERVICE_LOG: Entry = Entry::file(service_log!());
/// The log's older file, once the current one was full.
pub const SERVICE_LOG_OLDER: Entry = Entry::file(older!(service_log!()));
/// Held by `service start`, `stop` and `restart`, so two never interleave.
pub const SERVICE_CONTROL_LOCK: Entry = Entry::file("control.lock");

/// Everything in the service directory.
pub const SERVICE_TREE: &[Entry] = &[SERVICE_LOG, SERVICE_LOG_OLDER, SERVICE_CONTROL_LOCK];

// Beside the configuration file.

/// How the lock `config set` holds while it edits a file is named (`<config>.lock`).
pub const CONFIG_LOCK_SUFFIX: &str = ".lock";

/// The state directory when the configuration names none: `<config dir>/<stem>.state`.
pub fn default_state_dir(config_path: &Path) -> PathBuf {
    beside_config(config_path, STATE_DIR_SUFFIX)
}

/// The managed service's directory: `<config dir>/<stem>.service`.
pub fn service_dir(config_path: &Path) -> PathBuf {
    beside_config(config_path, SERVICE_DIR_SUFFIX)
}

/// `<config>.lock`, the lock an edit of the configuration at `config_path` holds.
pub fn config_lock(config_path: &Path) -> PathBuf {
    let mut name = config_path
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_else(|| "config.toml".into());
    name.push(CONFIG_LOCK_SUFFIX);
    config_path.with_file_name(name)
}

/// The configuration file's directory ("" for a bare file name).
pub fn config_dir(config_path: &Path) -> &Path {
    config_path.parent().unwrap_or(Path::new(""))
}

/// `<config dir>/<stem><suffix>` (`nl2sh<suffix>` for a file without a stem).
fn beside_config(config_path: &Path, suffix: &str) -> PathBuf {
    let mut name = config_path
        .file_stem()
        .filter(|s| !s.is_empty())
        .map(|s| s.to_os_string())
        .unwrap_or_else(|| OsString::from("nl2sh"));
    name.push(suffix);
    config_dir(config_path).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHITECTURE: &str = include_str!("../../docs/ARCHITECTURE.md");

    /// One entry line of the document's tree.
    #[derive(Debug)]
    struct DocLine {
        depth: usize,
        /// The name as written (`protocol/`, `<config>.lock`).
        name: String,
        /// What the parentheses after the name hold (`.1`, `-wal, -shm`).
        beside: Option<String>,
        /// Who writes it, as the line says before the colon.
        writer: String,
        mode: u32,
    }

    /// The tree block of "State and who owns it": every line that starts in the name
    /// column (continuation lines start in the description column).
    fn doc_tree() -> Vec<DocLine> {
        let section = ARCHITECTURE
            .split_once("## State and who owns it")
            .expect("the section")
            .1;
        let block = section.split("```").nth(1).expect("the tree block");
        let mut lines = Vec::new();
        for line in block.lines().filter(|l| !l.trim().is_empty()) {
            let indent = line.len() - line.trim_start().len();
            if indent >= 16 {
                continue;
            }
            assert_eq!(indent % 2, 0, "odd indentation: {line:?}");
            let (named, described) = line
                .trim_start()
                .split_once("  ")
                .unwrap_or_else(|| panic!("no description: {line:?}"));
            let (name, beside) = match named.split_once(" (") {
                Some((name, rest)) => (name, Some(rest.trim_end_matches(')').to_owned())),
                None => (named, None),
            };
            let (writer, rest) = described
                .trim_start()
                .split_once(": ")
                .unwrap_or_else(|| panic!("no writer: {line:?}"));
            let mode = rest
                .split(|c: char| !c.is_ascii_digit())
                .find(|w| w.len() == 4 && w.starts_with('0'))
                .and_then(|w| u32::from_str_radix(w, 8).ok())
                .unwrap_or_else(|| panic!("no mode: {line:?}"));
            lines.push(DocLine {
                depth: indent / 2,
                name: name.to_owned(),
                beside,
                writer: writer.to_owned(),
                mode,
            });
        }
        lines
    }

    /// The document's entries under the top-level line whose name satisfies `root`, as
    /// (path relative to it, kind, mode); with the root's own line.
    fn subtree(
        tree: &[DocLine],
        root: impl Fn(&str) -> bool,
    ) -> (&DocLine, Vec<(String, Kind, u32)>) {
        let at = tree
            .iter()
            .position(|l| l.depth == 0 && root(&l.name))
            .expect("the root line");
        let mut found = Vec::new();
        let mut dirs: Vec<String> = Vec::new();
        for line in tree[at + 1..].iter().take_while(|l| l.depth > 0) {
            dirs.truncate(line.depth - 1);
            let kind = if line.name.ends_with('/') {
                Kind::Dir
            } else if line.name.ends_with(".sock") {
                Kind::Socket
            } else {
                Kind::File
            };
            let name = line.name.trim_end_matches('/');
            let mut path = dirs.clone();
            path.push(name.to_owned());
            let path = path.join("/");
            match line.beside.as_deref() {
                // SQLite's files beside the database: its names, not ours.
                Some("-wal, -shm") => {}
                Some(suffix) if suffix.starts_with('.') => {
                    found.push((format!("{path}{suffix}"), kind, line.mode));
                }
                Some(other) => panic!("unexpected ({other}) after {name}"),
                None => {}
            }
            if kind == Kind::Dir {
                dirs.push(name.to_owned());
            }
            found.push((path, kind, line.mode));
        }
        (&tree[at], found)
    }

    fn code(tree: &[Entry]) -> Vec<(String, Kind, u32)> {
        tree.iter()
            .map(|e| (e.path.to_owned(), e.kind, e.mode))
            .collect()
    }

    fn sorted(mut v: Vec<(String, Kind, u32)>) -> Vec<(String, Kind, u32)> {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    #[test]
    fn the_state_tree_is_the_documents() {
        let tree = doc_tree();
        let (root, mut found) = subtree(&tree, |n| n == "<state>/");
        assert_eq!(root.mode, PRIVATE_DIR_MODE);
        // Session files are named for their context: the document writes a pattern.
        let session = found
            .iter()
            .position(|(p, _, _)| p.starts_with("sessions/<"))
            .expect("the session files' line");
        let (pattern, kind, mode) = found.remove(session);
        assert!(
            pattern.ends_with(&format!(">{SESSION_FILE_SUFFIX}")),
            "{pattern}"
        );
        assert_eq!((kind, mode), (Kind::File, PRIVATE_FILE_MODE));
        assert_eq!(sorted(found), sorted(code(STATE_TREE)));
    }

    #[test]
    fn the_service_tree_and_the_config_lock_are_the_documents() {
        let tree = doc_tree();
        let (root, found) = subtree(&tree, |n| n.starts_with("<config dir>/"));
        assert_eq!(
            root.name,
            format!("<config dir>/<stem>{SERVICE_DIR_SUFFIX}/")
        );
        assert_eq!(root.mode, PRIVATE_DIR_MODE);
        assert_eq!(sorted(found), sorted(code(SERVICE_TREE)));
        let lock = tree
            .iter()
            .find(|l| l.depth == 0 && l.name.starts_with("<config>"))
            .expect("the config lock's line");
        assert_eq!(lock.name, format!("<config>{CONFIG_LOCK_SUFFIX}"));
        assert_eq!(lock.mode, PRIVATE_FILE_MODE);
        assert_eq!(tree.iter().filter(|l| l.depth == 0).count(), 3);
    }

    #[test]
    fn writers_are_named_and_every_parent_is_a_directory_of_the_tree() {
        for line in doc_tree() {
            assert!(!line.writer.is_empty(), "{line:?}");
        }
        for entry in STATE_TREE.iter().chain(SERVICE_TREE) {
            let parent = entry.parent();
            assert!(
                parent.is_empty()
                    || STATE_TREE
                        .iter()
                        .any(|d| d.kind == Kind::Dir && d.path == parent),
                "{entry:?}"
            );
            assert!(!entry.name().is_empty() && !entry.name().contains('/'));
        }
        assert_eq!(APPROVALS_SOCK.parent(), PROTOCOL_DIR.path);
        assert_eq!(APPROVALS_SOCK.name(), "approvals.sock");
        assert_eq!(SESSIONS_DIR.parent(), "");
        assert_eq!(
            AUDIT_JOURNAL_OLDER.path,
            format!("{}.1", AUDIT_JOURNAL.path)
        );
    }

    #[test]
    fn service_dir_is_beside_the_configuration() {
        assert_eq!(
            service_dir(Path::new("/data/adb/nl2sh/config.toml")),
            PathBuf::from("/data/adb/nl2sh/config.service")
        );
        assert_eq!(
            service_dir(Path::new("/tmp/t/other.conf.toml")),
            PathBuf::from("/tmp/t/other.conf.service")
        );
    }

    #[test]
    fn paths_in_a_base_and_beside_the_configuration() {
        assert_eq!(
            default_state_dir(Path::new("/data/adb/nl2sh/config.toml")),
            PathBuf::from("/data/adb/nl2sh/config.state")
        );
        assert_eq!(
            config_lock(Path::new("/data/adb/nl2sh/config.toml")),
            PathBuf::from("/data/adb/nl2sh/config.toml.lock")
        );
        assert_eq!(
            TASKS_DB.in_dir(Path::new("/s")),
            PathBuf::from("/s/protocol/tasks.sqlite3")
        );
    }
}
