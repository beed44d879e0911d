//! The per-configuration state directory (docs/ARCHITECTURE.md, "State and who owns it"): private directories, the
//! one-process-per-state-directory lock, and the private `protocol/connection.json`
//! announcement that owner UIs use for discovery.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

pub use nl2sh_proto::announcement::ConnectionInfo;
use nl2sh_proto::announcement::{self, RecordError};
use nl2sh_proto::flock::lock_exclusive_within;
use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};
use nl2sh_proto::private_file::{self, Owner};
use nl2sh_proto::state_layout::{self, PRIVATE_FILE_MODE};

/// Largest lock-file content we read back ("pid transport\n").
const MAX_LOCK_NOTE_BYTES: u64 = 128;
/// Retries of a lock found held, and the pause between them (see [`prepare`]).
const LOCK_ATTEMPTS: u32 = 5;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(20);

/// Where everything lives inside one state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePaths {
    pub root: PathBuf,
    pub protocol_dir: PathBuf,
    pub lock: PathBuf,
    pub connection_json: PathBuf,
    /// Why the last service stopped after a crash loop (removed by the next start).
    pub failure_json: PathBuf,
    pub tasks_db: PathBuf,
    pub approvals_sock: PathBuf,
    pub sessions_dir: PathBuf,
}

pub fn state_paths(state_dir: &Path) -> StatePaths {
    StatePaths {
        root: state_dir.to_owned(),
        protocol_dir: state_layout::PROTOCOL_DIR.in_dir(state_dir),
        lock: state_layout::LOCK.in_dir(state_dir),
        connection_json: state_layout::CONNECTION_JSON.in_dir(state_dir),
        failure_json: state_layout::FAILURE_JSON.in_dir(state_dir),
        tasks_db: state_layout::TASKS_DB.in_dir(state_dir),
        approvals_sock: state_layout::APPROVALS_SOCK.in_dir(state_dir),
        sessions_dir: state_layout::SESSIONS_DIR.in_dir(state_dir),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "another nl2sh protocol process (pid {pid}, transport {transport}) is already using \
         state directory {}",
        .dir.display()
    )]
    Held {
        dir: PathBuf,
        pid: u32,
        transport: String,
    },
    #[error("another nl2sh protocol process is already using state directory {}", .dir.display())]
    HeldByUnknown { dir: PathBuf },
    #[error("{} is owned by uid {owner}, not by this process's uid {euid}; refusing to use it", .path.display())]
    WrongOwner {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error("{} is not a {expected}", .path.display())]
    WrongType {
        path: PathBuf,
        expected: &'static str,
    },
    #[error(transparent)]
    Dir(#[from] PrivateDirError),
    #[error("invalid transport name {0:?}")]
    BadTransport(String),
    #[error("{} is malformed: {reason}", .path.display())]
    Malformed { path: PathBuf, reason: String },
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The exclusive lock on `<state>/protocol/lock`, held for the life of the protocol
/// process. Dropping it clears the note and releases the lock.
#[derive(Debug)]
pub struct StateLock {
    paths: StatePaths,
    lock: Flock<File>,
}

impl StateLock {
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Best effort: the next holder rewrites it anyway.
        let _ = self.lock.set_len(0);
    }
}

/// Create (or check) `<state>` and `<state>/protocol` as private directories of this uid,
/// then take the state directory's exclusive lock for `transport` ("http" or "stdio").
pub fn prepare(state_dir: &Path, transport: &str) -> Result<StateLock, StateError> {
    if transport.is_empty()
        || transport.len() > 16
        || !transport
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(StateError::BadTransport(transport.to_owned()));
    }
    let paths = state_paths(state_dir);
    // The supervisor owns the layout, so it creates and tightens (approvald only checks).
    // A symlink is refused even as the root: it could point at another directory of ours.
    open_private_dir(&paths.root, Create::WithParents, WideMode::Tighten)?;
    open_private_dir(&paths.protocol_dir, Create::IfMissing, WideMode::Tighten)?;

    let file = open_private_file(&paths.lock, false)?;
    // A discovery probe ([`lock_is_held`]) holds a shared lock for microseconds; a few
    // short retries tell it apart from a real holder, which keeps the lock for its life.
    let lock = match lock_exclusive_within(file, LOCK_RETRY * LOCK_ATTEMPTS, LOCK_RETRY) {
        Ok(lock) => lock,
        Err((file, Errno::EWOULDBLOCK)) => return Err(held_error(&paths.root, &file)),
        Err((_, errno)) => {
            return Err(StateError::Io {
                what: "cannot lock",
                path: paths.lock.clone(),
                source: io::Error::from(errno),
            })
        }
    };
    let note = format!("{} {}\n", std::process::id(), transport);
    lock.set_len(0)
        .and_then(|()| lock.write_all_at(note.as_bytes(), 0))
        .map_err(io_err("cannot write", &paths.lock))?;
    Ok(StateLock { paths, lock })
}

fn held_error(dir: &Path, file: &File) -> StateError {
    let mut text = String::new();
    let read = file.take(MAX_LOCK_NOTE_BYTES).read_to_string(&mut text);
    match read.ok().and_then(|_| parse_lock_note(&text)) {
        Some((pid, transport)) => StateError::Held {
            dir: dir.to_owned(),
            pid,
            transport,
        },
        None => StateError::HeldByUnknown {
            dir: dir.to_owned(),
        },
    }
}

fn parse_lock_note(text: &str) -> Option<(u32, String)> {
    let line = text.strip_suffix('\n')?;
    let (pid, transport) = line.split_once(' ')?;
    let pid: u32 = pid.parse().ok().filter(|&p| p > 0)?;
    let ok = !transport.is_empty()
        && transport.len() <= 16
        && transport
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    ok.then(|| (pid, transport.to_owned()))
}

/// Open (creating 0600 if needed) a regular file of ours without following a symlink, and
/// tighten its mode if it is wider. Never truncates: opened for reading and writing, or
/// (`append`) for appending only.
pub fn open_private_file(path: &Path, append: bool) -> Result<File, StateError> {
    let file = OpenOptions::new()
        .read(!append)
        .write(!append)
        .append(append)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_err("cannot open", path))?;
    check_private_file(path, &file)?;
    Ok(file)
}

pub fn check_private_file(path: &Path, file: &File) -> Result<(), StateError> {
    let meta = file.metadata().map_err(io_err("cannot inspect", path))?;
    if !meta.file_type().is_file() {
        return Err(StateError::WrongType {
            path: path.to_owned(),
            expected: "regular file",
        });
    }
    let me = euid();
    if meta.uid() != me {
        return Err(StateError::WrongOwner {
            path: path.to_owned(),
            owner: meta.uid(),
            euid: me,
        });
    }
    if meta.mode() & 0o7777 != PRIVATE_FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(io_err("cannot chmod", path))?;
    }
    Ok(())
}

/// `protocol/failure.json`: the service stopped itself after its workers kept dying.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailureRecord {
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub pid: u32,
    pub restarts: u32,
    /// The last worker death, as the log line says it.
    pub cause: String,
}

/// The announcement of this process: pid, start time and uid of the calling process, the
/// rest from the arguments.
pub fn this_process_info(
    config_path: &Path,
    transport: &str,
) -> Result<ConnectionInfo, StateError> {
    let pid = std::process::id();
    let start_time = process_start_time(pid).ok_or_else(|| StateError::Malformed {
        path: PathBuf::from("/proc/self/stat"),
        reason: "cannot read the process start time".into(),
    })?;
    Ok(ConnectionInfo {
        pid,
        start_time,
        uid: euid(),
        config_path: config_path.to_string_lossy().into_owned(),
        transport: transport.to_owned(),
        mcp_url: None,
        a2a_url: None,
        agent_card_url: None,
        token: None,
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        started_at_ms: Some(nl2sh_proto::clock::now_unix_ms()),
        listen: None,
        restarts: 0,
        last_restart_cause: None,
        web_url: None,
        web_listen: None,
        token_source: None,
        requested_port: None,
    })
}

/// The written connection.json; removing it (or dropping this) deletes the file.
#[derive(Debug)]
pub struct ConnectionFile {
    path: PathBuf,
    removed: bool,
}

impl ConnectionFile {
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replace the record with `info` (atomically, as it was written).
    pub fn update(&mut self, paths: &StatePaths, info: &ConnectionInfo) -> Result<(), StateError> {
        write_private_json(&paths.connection_json, info)
    }

    /// Delete the file now (at shutdown, before releasing the lock). A failure is logged;
    /// a leftover record is harmless because discovery also requires the lock.
    pub fn remove(mut self) {
        self.remove_now();
    }

    fn remove_now(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %self.path.display(), "cannot remove: {e}"),
        }
    }
}

impl Drop for ConnectionFile {
    fn drop(&mut self) {
        self.remove_now();
    }
}

/// Write `info` to `protocol/connection.json` atomically (see [`write_private_json`]).
/// Call only while holding the [`StateLock`].
pub fn write_connection(
    paths: &StatePaths,
    info: &ConnectionInfo,
) -> Result<ConnectionFile, StateError> {
    write_private_json(&paths.connection_json, info)?;
    Ok(ConnectionFile {
        path: paths.connection_json.clone(),
        removed: false,
    })
}

/// Record why the service stopped itself (a crash loop). Call only while holding the
/// [`StateLock`].
pub fn write_failure(paths: &StatePaths, record: &FailureRecord) -> Result<(), StateError> {
    write_private_json(&paths.failure_json, record)
}

/// The last crash loop's record, if one is left. A malformed record reads as none.
pub fn read_failure(paths: &StatePaths) -> Option<FailureRecord> {
    read_private_json(&paths.failure_json).ok().flatten()
}

/// Forget the last crash loop (a new start).
pub fn clear_failure(paths: &StatePaths) {
    match fs::remove_file(&paths.failure_json) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %paths.failure_json.display(), "cannot remove: {e}"),
    }
}

/// Write `value` as JSON to `path` in the protocol directory atomically, private (0600),
/// through the one writer of private files.
fn write_private_json(path: &Path, value: &impl serde::Serialize) -> Result<(), StateError> {
    let mut json = serde_json::to_vec_pretty(value).map_err(|e| StateError::Malformed {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    json.push(b'\n');
    private_file::replace(path, &json, Owner::Writer).map_err(io_err("cannot write", path))
}

/// Read `protocol/connection.json` as written, without any liveness check. `Ok(None)` when
/// there is none. See [`discover`] for the verified form.
pub fn read_connection(paths: &StatePaths) -> Result<Option<ConnectionInfo>, StateError> {
    read_private_json(&paths.connection_json)
}

/// A bounded JSON record of the protocol directory; `Ok(None)` when there is none.
fn read_private_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    announcement::read_record(path).map_err(|e| match e {
        RecordError::Io { what, source } => io_err(what, path)(source),
        RecordError::NotRegular => StateError::WrongType {
            path: path.to_owned(),
            expected: "regular file",
        },
        RecordError::Malformed(reason) => StateError::Malformed {
            path: path.to_owned(),
            reason,
        },
    })
}

/// What discovery finds for one configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovered {
    /// A live process of our uid serving this configuration holds the lock and announced
    /// itself.
    Live(ConnectionInfo),
    /// The lock is held but no announcement verifies: a process starting or stopping, or
    /// one serving another configuration from the same state directory. `holder` is the
    /// lock note ("pid transport"), unverified.
    Busy { holder: Option<(u32, String)> },
    /// An announcement is left but nothing holds the lock: its process died without
    /// cleaning up (SIGKILL, power loss). Nothing is running.
    Stale(ConnectionInfo),
    /// No announcement and no holder.
    Stopped,
}

/// Discovery for the configuration whose identity is `config_identity`: the record must
/// exist, the lock must be held, and the record's pid, start time and uid must match a
/// live (not zombie) process of our uid that serves the same configuration. Reads only;
/// creates nothing and sends nothing to the advertised URL, so it does not prove remote
/// reachability.
pub fn discover(paths: &StatePaths, config_identity: &Path) -> Result<Discovered, StateError> {
    let record = read_connection(paths)?;
    let held = lock_is_held(paths)?;
    match (record, held) {
        (None, false) => Ok(Discovered::Stopped),
        (None, true) => Ok(Discovered::Busy {
            holder: lock_holder(paths),
        }),
        (Some(info), true) => {
            let ours = info.uid == euid()
                && info.config_path == config_identity.to_string_lossy()
                && process_is_live(info.pid, info.start_time)
                && process_uid(info.pid) == Some(info.uid);
            Ok(if ours {
                Discovered::Live(info)
            } else {
                Discovered::Busy {
                    holder: lock_holder(paths),
                }
            })
        }
        // The holder may have exited cleanly between the two reads (it removes the
        // record before releasing the lock): only a record still there is stale.
        (Some(info), false) => Ok(match read_connection(paths)? {
            Some(_) => Discovered::Stale(info),
            None => Discovered::Stopped,
        }),
    }
}

/// The lock file's note ("pid transport") if it has a well-formed one. Unverified: the
/// note of a holder that was killed stays behind.
pub fn lock_holder(paths: &StatePaths) -> Option<(u32, String)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&paths.lock)
        .ok()?;
    let mut text = String::new();
    file.take(MAX_LOCK_NOTE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    parse_lock_note(&text)
}

/// Whether some process holds the state directory's lock. Does not create anything.
pub fn lock_is_held(paths: &StatePaths) -> Result<bool, StateError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&paths.lock)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_err("cannot open", &paths.lock)(e)),
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_probe) => Ok(false), // released when `_probe` drops
        Err((_, Errno::EWOULDBLOCK)) => Ok(true),
        Err((_, errno)) => Err(StateError::Io {
            what: "cannot probe lock",
            path: paths.lock.clone(),
            source: io::Error::from(errno),
        }),
    }
}

/// Whether `pid` is the process that started at `start_time` and has not exited (a
/// zombie waiting for its parent has exited).
pub fn process_is_live(pid: u32, start_time: u64) -> bool {
    nl2sh_proto::procfs::Stat::of(pid)
        .is_some_and(|stat| stat.start_time() == Ok(start_time) && !stat.has_exited())
}

/// Start time (field 22 of `/proc/<pid>/stat`, clock ticks since boot) of `pid`.
pub fn process_start_time(pid: u32) -> Option<u64> {
    nl2sh_proto::procfs::Stat::of(pid)?.start_time().ok()
}

fn process_uid(pid: u32) -> Option<u32> {
    let meta = fs::metadata(format!("/proc/{pid}")).ok()?;
    Some(meta.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        use std::time::{SystemTime, UNIX_EPOCH};
        let n = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("nl2sh-state-test-{tag}-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn prepare_creates_private_dirs_and_lock() {
        let base = tempdir("prepare");
        let state = base.join("deep/er/config.state");
        let lock = prepare(&state, "http").unwrap();
        let p = lock.paths().clone();
        assert_eq!(p, state_paths(&state));
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&p.protocol_dir), 0o700);
        assert_eq!(mode(&p.lock), 0o600);
        assert_eq!(
            fs::read_to_string(&p.lock).unwrap(),
            format!("{} http\n", std::process::id())
        );
        drop(lock);
        assert_eq!(fs::read_to_string(&p.lock).unwrap(), "");
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn wide_modes_are_tightened() {
        let base = tempdir("modes");
        let state = base.join("s");
        fs::create_dir_all(state.join("protocol")).unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(state.join("protocol"), fs::Permissions::from_mode(0o777)).unwrap();
        fs::write(state.join("protocol/lock"), "").unwrap();
        fs::set_permissions(
            state.join("protocol/lock"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let lock = prepare(&state, "stdio").unwrap();
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join("protocol")), 0o700);
        assert_eq!(mode(&lock.paths().lock), 0o600);
        drop(lock);
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn lock_held_twice_names_the_holder() {
        let base = tempdir("twice");
        let state = base.join("s");
        let first = prepare(&state, "http").unwrap();
        let err = prepare(&state, "stdio").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "another nl2sh protocol process (pid {}, transport http) is already using state directory ",
                std::process::id()
            )),
            "{msg}"
        );
        assert!(msg.contains(&state.display().to_string()), "{msg}");
        // The loser did not disturb the holder's note.
        assert_eq!(
            fs::read_to_string(&first.paths().lock).unwrap(),
            format!("{} http\n", std::process::id())
        );
        assert!(lock_is_held(first.paths()).unwrap());
        drop(first);
        assert!(!lock_is_held(&state_paths(&state)).unwrap());
        let again = prepare(&state, "stdio").unwrap();
        drop(again);
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn held_with_unreadable_note_is_reported_generically() {
        let base = tempdir("generic");
        let state = base.join("s");
        let first = prepare(&state, "http").unwrap();
        fs::write(&first.paths().lock, "garbage").unwrap();
        let msg = prepare(&state, "http").unwrap_err().to_string();
        assert!(
            msg.starts_with("another nl2sh protocol process is already using state directory"),
            "{msg}"
        );
        drop(first);
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn lock_note_parsing() {
        assert_eq!(parse_lock_note("12 http\n"), Some((12, "http".into())));
        assert_eq!(parse_lock_note("12 http"), None);
        assert_eq!(parse_lock_note("0 http\n"), None);
        assert_eq!(parse_lock_note("12 \x1b[31m\n"), None);
        assert_eq!(parse_lock_note(""), None);
    }

    #[test]
    fn bad_transport_and_non_directory_are_refused() {
        let base = tempdir("bad");
        assert!(matches!(
            prepare(&base.join("s"), "ht tp"),
            Err(StateError::BadTransport(_))
        ));
        let file = base.join("file");
        fs::write(&file, "").unwrap();
        assert!(matches!(
            prepare(&file, "http"),
            Err(StateError::Dir(PrivateDirError::NotADirectory { .. }))
        ));
        // A symlinked protocol/ directory is refused.
        let state = base.join("s2");
        fs::create_dir_all(&state).unwrap();
        fs::create_dir_all(base.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), state.join("protocol")).unwrap();
        assert!(matches!(
            prepare(&state, "http"),
            Err(StateError::Dir(PrivateDirError::Symlink { .. }))
        ));
        // So is a symlinked state directory, and its target is left as it was.
        let linked = base.join("s3");
        fs::set_permissions(base.join("elsewhere"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), &linked).unwrap();
        assert!(matches!(
            prepare(&linked, "http"),
            Err(StateError::Dir(PrivateDirError::Symlink { .. }))
        ));
        assert_eq!(mode(&base.join("elsewhere")), 0o755);
        assert!(!base.join("elsewhere/protocol").exists());
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn foreign_owner_is_refused() {
        if euid() != 0 {
            return; // needs root to create a directory owned by someone else
        }
        let base = tempdir("owner");
        let state = base.join("s");
        fs::create_dir_all(&state).unwrap();
        std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
        let err = prepare(&state, "http").unwrap_err();
        assert!(
            matches!(
                err,
                StateError::Dir(PrivateDirError::WrongOwner { owner: 65534, .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("owned by uid 65534"));
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn connection_json_is_private_atomic_and_removed() {
        let base = tempdir("conn");
        let state = base.join("s");
        let lock = prepare(&state, "http").unwrap();
        let config = base.join("config.toml");
        let mut info = this_process_info(&config, "http").unwrap();
        info.mcp_url = Some("http://127.0.0.1:8765/mcp".into());
        info.token = Some("t".repeat(64));
        assert!(!format!("{info:?}").contains("tttt"));

        let file = write_connection(lock.paths(), &info).unwrap();
        assert_eq!(mode(file.path()), 0o600);
        assert_eq!(read_connection(lock.paths()).unwrap().as_ref(), Some(&info));
        // No temporary files left behind.
        let names: Vec<_> = fs::read_dir(&lock.paths().protocol_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");

        // Live, locked, same uid and configuration: discovered.
        assert_eq!(
            discover(lock.paths(), &config).unwrap(),
            Discovered::Live(info.clone())
        );
        let holder = Some((std::process::id(), "http".to_owned()));
        assert_eq!(lock_holder(lock.paths()), holder);
        // Another configuration: not ours, but the directory is in use.
        assert_eq!(
            discover(lock.paths(), &base.join("other.toml")).unwrap(),
            Discovered::Busy {
                holder: holder.clone()
            }
        );
        // A stale start time (pid reused): not live.
        let mut stale = info.clone();
        stale.start_time += 1;
        let f2 = write_connection(lock.paths(), &stale).unwrap();
        assert_eq!(
            discover(lock.paths(), &config).unwrap(),
            Discovered::Busy {
                holder: holder.clone()
            }
        );
        std::mem::forget(f2); // same path as `file`; removed below

        // Overwrite is atomic and keeps 0600.
        let again = write_connection(lock.paths(), &info).unwrap();
        assert_eq!(mode(again.path()), 0o600);
        std::mem::forget(again);

        let path = file.path().to_owned();
        file.remove();
        assert!(!path.exists());
        assert_eq!(read_connection(lock.paths()).unwrap(), None);
        // Locked without a record: starting or stopping.
        assert_eq!(
            discover(lock.paths(), &config).unwrap(),
            Discovered::Busy {
                holder: holder.clone()
            }
        );

        // Dropping also removes it.
        let paths = lock.paths().clone();
        {
            let _f = write_connection(&paths, &info).unwrap();
            assert!(paths.connection_json.exists());
        }
        assert!(!paths.connection_json.exists());

        // Lock released: a leftover record is stale, not running.
        let leftover = write_connection(&paths, &info).unwrap();
        drop(lock);
        assert_eq!(
            discover(&paths, &config).unwrap(),
            Discovered::Stale(info.clone())
        );
        drop(leftover);
        assert_eq!(discover(&paths, &config).unwrap(), Discovered::Stopped);
        // Discovery of a directory that does not exist creates nothing.
        let never = state_paths(&base.join("never"));
        assert_eq!(discover(&never, &config).unwrap(), Discovered::Stopped);
        assert!(!never.root.exists());
        fs::remove_dir_all(base).unwrap();
    }

    /// The parsing is proto's (`procfs`, tested there with hostile names); here, that a
    /// live process is one with its start time.
    #[test]
    fn stat_start_time_of_this_process() {
        let me = process_start_time(std::process::id()).unwrap();
        assert!(me > 0);
        assert_eq!(process_start_time(std::process::id()), Some(me));
        assert!(process_is_live(std::process::id(), me));
        assert!(!process_is_live(std::process::id(), me + 1));
    }

    #[test]
    fn an_exited_child_is_not_live_even_before_it_is_reaped() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = process_start_time(pid).unwrap();
        // Wait for it to become a zombie without reaping it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_is_live(pid, start) {
            assert!(std::time::Instant::now() < deadline, "child never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(process_start_time(pid), Some(start), "reaped too early");
        child.wait().unwrap();
        assert!(!process_is_live(pid, start));
    }
}
