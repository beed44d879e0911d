//! The managed service's `service.log`, capped while the service runs.
//!
//! `service start` gives the service the log (opened for appending) as stdout and
//! stderr. As it starts, the service moves both onto a pipe (before any worker exists, so
//! every worker inherits the pipe too) and a thread of its own copies the pipe into the
//! log. Before a write would take the log past [`LOG_CAP_BYTES`], the thread ends the log
//! at a line boundary, moves it to `service.log.1` (replacing the one before) and goes on
//! in a fresh 0600 `service.log`, which it begins with this run's startup block: the log
//! owners are sent to for a generated token always holds the running service's.
//!
//! Why a thread in the service rather than a process of its own: the service's death ends
//! its workers (they die with their supervisor), so nothing writes once the thread is
//! gone, and there is no further process to start, stop and account for. What the
//! service itself prints while it ends (after [`Capture::finish`], or a panic) goes to
//! the log directly.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Duration;

use nix::fcntl::OFlag;

use nl2sh_proto::state_layout::{self, PRIVATE_FILE_MODE};

use crate::state;

/// The most a log file holds: a write that would pass it goes to a fresh file.
pub const LOG_CAP_BYTES: u64 = 1024 * 1024;
/// The log's name in the service directory.
pub const LOG_NAME: &str = state_layout::SERVICE_LOG.path;
/// The one older log kept beside it.
pub const OLD_LOG_NAME: &str = state_layout::SERVICE_LOG_OLDER.path;
/// How long [`Capture::finish`] waits for the thread to write what is left in the pipe.
const FINISH_WAIT: Duration = Duration::from_secs(2);

/// This run's startup block, for the top of each log after a rotation.
static STARTUP_BLOCK: OnceLock<String> = OnceLock::new();
/// The current log file (the thread replaces it at each rotation): where the panic hook
/// and [`Capture::finish`] point stdout and stderr back at.
static DIRECT: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Remember the startup block just printed (stdout), so a rotated log starts with it.
pub fn startup_block_printed(block: &str) {
    let _ = STARTUP_BLOCK.set(block.to_owned());
}

/// The running capture: stdout and stderr go to the thread.
pub struct Capture {
    done: mpsc::Receiver<()>,
}

/// Move stdout and stderr onto a pipe copied into `<service_dir>/service.log` with the
/// cap. Only when stdout is that very log (what `service start` sets up): anything else
/// (someone ran the hidden `--managed-service` by hand) is left as it is, `Ok(None)`.
pub fn capture(service_dir: &Path) -> io::Result<Option<Capture>> {
    let path = service_dir.join(LOG_NAME);
    let stdout = io::stdout();
    let out = nix::sys::stat::fstat(stdout.as_fd()).map_err(io::Error::from)?;
    let is_log = fs::symlink_metadata(&path)
        .is_ok_and(|m| m.is_file() && m.dev() == out.st_dev && m.ino() == out.st_ino);
    if !is_log {
        return Ok(None);
    }
    // Close-on-exec copies: no worker or command inherits the log itself.
    let file = File::from(stdout.as_fd().try_clone_to_owned()?);
    let size = file.metadata()?.len();
    let direct = file.as_fd().try_clone_to_owned()?;
    *DIRECT.lock().unwrap_or_else(|e| e.into_inner()) = Some(direct);
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let mut log = CappedLog {
        path,
        old: service_dir.join(OLD_LOG_NAME),
        file,
        size,
        // What is there already counts: a full log rotates at the first write.
        written_since_rotation: size > 0,
        cap: LOG_CAP_BYTES,
        block: &STARTUP_BLOCK,
        direct: Some(&DIRECT),
    };
    let (tx, done) = mpsc::channel();
    std::thread::Builder::new()
        .name("service-log".into())
        .spawn(move || {
            copy(File::from(read), &mut log);
            // Whatever ended the copy, nothing may write into a pipe nobody reads (a
            // write would fail, and a failed print panics): the log itself again.
            point_at(DIRECT.lock().unwrap_or_else(|e| e.into_inner()).as_ref());
            let _ = tx.send(());
        })?;
    let _ = io::stdout().flush();
    // From here on, this process and every process it starts write to the pipe.
    nix::unistd::dup2_stdout(&write).map_err(io::Error::from)?;
    nix::unistd::dup2_stderr(&write).map_err(io::Error::from)?;
    drop(write);
    // A panic's message is the last thing the service says (it aborts): straight to the
    // log, not into a pipe whose reader dies with it.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Nothing that could wait here: another thread may hold stdout's lock, or be
        // replacing the log.
        if let Ok(direct) = DIRECT.try_lock() {
            point_at(direct.as_ref());
        }
        hook(info);
    }));
    Ok(Some(Capture { done }))
}

/// Point stdout and stderr at the log file itself.
fn point_at(log: Option<&OwnedFd>) {
    if let Some(log) = log {
        let _ = nix::unistd::dup2_stdout(log);
        let _ = nix::unistd::dup2_stderr(log);
    }
}

impl Capture {
    /// The service is ending (its workers are gone): stdout and stderr go to the log
    /// directly again, and the thread writes what is left in the pipe (waiting a moment
    /// at most: a process the tree left behind may still hold the pipe).
    pub fn finish(self) {
        let _ = io::stdout().flush();
        point_at(DIRECT.lock().unwrap_or_else(|e| e.into_inner()).as_ref());
        let _ = self.done.recv_timeout(FINISH_WAIT);
    }
}

/// Copy the pipe into the log until every writer has closed it.
fn copy(mut pipe: File, log: &mut CappedLog) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => log.write(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The log file with its cap.
struct CappedLog {
    path: PathBuf,
    old: PathBuf,
    file: File,
    /// Bytes in `file`.
    size: u64,
    /// Whether `file` holds anything but the banner of a rotation: a line that does not
    /// fit an empty file is cut rather than rotated again.
    written_since_rotation: bool,
    cap: u64,
    /// The startup block a fresh file begins with, once printed.
    block: &'static OnceLock<String>,
    /// Where the current file is kept for [`Capture::finish`] and the panic hook.
    direct: Option<&'static Mutex<Option<OwnedFd>>>,
}

impl CappedLog {
    /// Append `data`, rotating before the cap would be passed. Errors are not reported:
    /// there is nowhere left to report them.
    fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = usize::try_from(self.cap.saturating_sub(self.size)).unwrap_or(usize::MAX);
            if data.len() <= room {
                self.append(data);
                return;
            }
            // What fits, up to its last line end. A fresh file takes something whatever
            // its size, or rotating would never end: a line too long for a whole file is
            // cut at the cap, and one line is written after a banner that fills it.
            let fits = &data[..room];
            let cut = match fits.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None if self.written_since_rotation => 0,
                None if room > 0 => room,
                None => data
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(data.len(), |i| i + 1),
            };
            self.append(&data[..cut]);
            data = &data[cut..];
            if data.is_empty() {
                return;
            }
            if !self.rotate() {
                // The cap holds even when rotating fails: the rest is dropped.
                return;
            }
        }
    }

    fn append(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.file.write_all(data).is_ok() {
            self.size += data.len() as u64;
            self.written_since_rotation = true;
        }
    }

    /// `service.log` → `service.log.1`, then a fresh `service.log` beginning with the
    /// startup block. The fresh file is made first, under a name of its own, so a failure
    /// leaves everything where it was (`false`: the caller drops what did not fit, and
    /// the next write past the cap tries again).
    fn rotate(&mut self) -> bool {
        let mut next = self.path.clone().into_os_string();
        next.push(".next");
        let next = PathBuf::from(next);
        let _ = fs::remove_file(&next);
        let fresh = open_new(&next).and_then(|file| {
            fs::rename(&self.path, &self.old)?;
            if let Err(e) = fs::rename(&next, &self.path) {
                // Put the old one back where people look for it.
                let _ = fs::rename(&self.old, &self.path);
                return Err(e);
            }
            Ok(file)
        });
        match fresh {
            Ok(file) => {
                if let (Some(direct), Ok(fd)) = (self.direct, file.as_fd().try_clone_to_owned()) {
                    *direct.lock().unwrap_or_else(|e| e.into_inner()) = Some(fd);
                }
                self.file = file;
                self.size = 0;
                self.written_since_rotation = false;
                let stamp = nl2sh_proto::clock::rfc3339_millis(nl2sh_proto::clock::now_unix_ms());
                let mut banner = format!(
                    "--- {stamp} log continued; the earlier lines are in {OLD_LOG_NAME} ---\n"
                );
                if let Some(block) = self.block.get() {
                    banner.push_str("This run's startup block:\n");
                    banner.push_str(block);
                    if !block.ends_with('\n') {
                        banner.push('\n');
                    }
                    banner.push_str("---\n");
                }
                self.append(banner.as_bytes());
                self.written_since_rotation = false;
                true
            }
            Err(_) => {
                let _ = fs::remove_file(&next);
                false
            }
        }
    }
}

/// Why `service start` could not open the log it hands the service.
#[derive(Debug, thiserror::Error)]
pub enum StartLogError {
    #[error("cannot rotate {}: {source}", .path.display())]
    Rotate { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Open(#[from] state::StateError),
    #[error("cannot use {}: {source}", .path.display())]
    Use { path: PathBuf, source: io::Error },
}

/// For `service start`: `<service_dir>/service.log` opened for appending (moved to
/// `service.log.1` first when over the cap, as the running service would have done),
/// with a line marking this start for `config_path`; the offset where this start's
/// output begins.
pub fn open_for_start(
    service_dir: &Path,
    config_path: &Path,
) -> Result<(File, u64), StartLogError> {
    let path = service_dir.join(LOG_NAME);
    if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() > LOG_CAP_BYTES) {
        let old = service_dir.join(OLD_LOG_NAME);
        fs::rename(&path, &old).map_err(|source| StartLogError::Rotate {
            path: path.clone(),
            source,
        })?;
        // It may hold a token: private, whatever its mode had become.
        let _ = fs::set_permissions(
            &old,
            std::os::unix::fs::PermissionsExt::from_mode(PRIVATE_FILE_MODE),
        );
    }
    let mut log = state::open_private_file(&path, true)?;
    let offset = log
        .seek(SeekFrom::End(0))
        .map_err(|source| StartLogError::Use {
            path: path.clone(),
            source,
        })?;
    let stamp = nl2sh_proto::clock::rfc3339_millis(nl2sh_proto::clock::now_unix_ms());
    let _ = writeln!(
        log,
        "--- {stamp} nl2sh {} service start for {} ---",
        env!("CARGO_PKG_VERSION"),
        config_path.display()
    );
    Ok((log, offset))
}

/// A new private log file (0600, never through a symlink).
fn open_new(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    state::check_private_file(path, &file).map_err(io::Error::other)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    static NO_BLOCK: OnceLock<String> = OnceLock::new();

    fn log_in(dir: &Path, cap: u64, block: &'static OnceLock<String>) -> CappedLog {
        let path = dir.join(LOG_NAME);
        let file = open_new(&path).unwrap();
        CappedLog {
            path,
            old: dir.join(OLD_LOG_NAME),
            file,
            size: 0,
            written_since_rotation: false,
            cap,
            block,
            direct: None,
        }
    }

    fn read(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).unwrap_or_default()
    }

    fn len(dir: &Path, name: &str) -> u64 {
        fs::metadata(dir.join(name)).unwrap().len()
    }

    #[test]
    fn rotates_at_line_ends_below_the_cap_and_keeps_one_old_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut log = log_in(dir, 200, &NO_BLOCK);
        let line = |i: usize| format!("{i:019}\n"); // 20 bytes
        for i in 0..9 {
            log.write(line(i).as_bytes());
        }
        assert_eq!(len(dir, LOG_NAME), 180);
        assert!(!dir.join(OLD_LOG_NAME).exists());
        // Two lines in one write: the first fills the file to the cap, the second goes
        // to a new one.
        log.write(format!("{}{}", line(9), line(10)).as_bytes());
        let old = read(dir, OLD_LOG_NAME);
        assert_eq!(old.len(), 200);
        assert!(
            old.starts_with(&line(0)) && old.ends_with(&line(9)),
            "{old}"
        );
        let new = read(dir, LOG_NAME);
        assert!(
            new.starts_with("--- ")
                && new.contains(" log continued; the earlier lines are in service.log.1 ---\n"),
            "{new}"
        );
        assert!(new.ends_with(&line(10)), "{new}");
        // Many more: never over the cap, whole lines, one old file only, both private.
        for i in 11..100 {
            log.write(line(i).as_bytes());
        }
        for name in [LOG_NAME, OLD_LOG_NAME] {
            assert!(len(dir, name) <= 200, "{name}");
            let mode = fs::metadata(dir.join(name)).unwrap().permissions().mode();
            assert_eq!(mode & 0o7777, 0o600, "{name}");
        }
        assert!(read(dir, LOG_NAME).ends_with(&line(99)));
        assert!(read(dir, OLD_LOG_NAME).ends_with("\n"));
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [LOG_NAME, OLD_LOG_NAME]);
    }

    #[test]
    fn a_line_longer_than_the_cap_is_cut_and_rotation_ends() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut log = log_in(dir, 150, &NO_BLOCK);
        log.write(&[b'x'; 200]);
        log.write(b"\nend\n");
        assert!(read(dir, LOG_NAME).ends_with(&format!("{}\nend\n", "x".repeat(50))));
        assert_eq!(read(dir, OLD_LOG_NAME), "x".repeat(150));
        // A cap smaller than the banner: one line per file, and it still ends.
        let dir = &dir.join("small");
        fs::create_dir(dir).unwrap();
        let mut log = log_in(dir, 10, &NO_BLOCK);
        for _ in 0..5 {
            log.write(b"a line\n");
        }
        assert!(read(dir, LOG_NAME).ends_with("---\na line\n"));
    }

    #[test]
    fn a_rotated_log_begins_with_the_startup_block() {
        static BLOCK: OnceLock<String> = OnceLock::new();
        let tmp = tempfile::tempdir().unwrap();
        let mut log = log_in(tmp.path(), 4096, &BLOCK);
        let _ =
            BLOCK.set("Token:      abc (generated)\nexport NL2SH_PROTOCOL_TOKEN='abc'\n".into());
        log.write(&b"line\n".repeat(1000));
        let new = read(tmp.path(), LOG_NAME);
        assert!(
            new.contains(
                "This run's startup block:\nToken:      abc (generated)\n\
                 export NL2SH_PROTOCOL_TOKEN='abc'\n---\nline\n"
            ),
            "{new}"
        );
        assert!(!read(tmp.path(), OLD_LOG_NAME).contains("Token:"));
    }

    #[test]
    fn a_symlink_is_never_opened_as_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::write(&elsewhere, "").unwrap();
        let link = tmp.path().join(LOG_NAME);
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(open_new(&link).is_err());
        assert_eq!(fs::read_to_string(&elsewhere).unwrap(), "");
    }

    #[test]
    fn a_rotation_that_fails_keeps_the_cap_and_the_log_where_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        // `service.log.1` cannot be replaced: a directory with something in it.
        fs::create_dir(tmp.path().join(OLD_LOG_NAME)).unwrap();
        fs::write(tmp.path().join(OLD_LOG_NAME).join("x"), "").unwrap();
        let mut log = log_in(tmp.path(), 300, &NO_BLOCK);
        for i in 0..50 {
            log.write(format!("line {i:02} of the flood\n").as_bytes());
        }
        assert!(
            len(tmp.path(), LOG_NAME) <= 300,
            "{}",
            len(tmp.path(), LOG_NAME)
        );
        assert!(read(tmp.path(), LOG_NAME).starts_with("line 00"));
        assert!(!tmp.path().join("service.log.next").exists());
        // Once it can rotate again, it does.
        fs::remove_dir_all(tmp.path().join(OLD_LOG_NAME)).unwrap();
        log.write(format!("after{}\n", "!".repeat(60)).as_bytes());
        assert!(read(tmp.path(), OLD_LOG_NAME).starts_with("line 00"));
        assert!(read(tmp.path(), LOG_NAME).contains("after"));
    }

    #[test]
    fn a_large_log_is_rotated_at_start_and_the_new_one_is_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("config.service");
        let config = tmp.path().join("config.toml");
        let log = dir.join(LOG_NAME);
        fs::create_dir(&dir).unwrap();
        fs::write(&log, vec![b'x'; LOG_CAP_BYTES as usize + 1]).unwrap();
        fs::set_permissions(&log, fs::Permissions::from_mode(0o644)).unwrap();
        let (_, offset) = open_for_start(&dir, &config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(offset, 0);
        let rotated = dir.join(OLD_LOG_NAME);
        assert_eq!(fs::metadata(&rotated).unwrap().len(), LOG_CAP_BYTES + 1);
        assert_eq!(
            fs::metadata(&rotated).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        let text = fs::read_to_string(&log).unwrap();
        assert!(
            text.starts_with("--- ") && text.contains(" service start for "),
            "{text}"
        );
        assert_eq!(
            fs::metadata(&log).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        // A small log is appended to.
        let (_, offset) = open_for_start(&dir, &config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(offset, text.len() as u64);
        // A symlink in the log's place is refused, not followed.
        fs::remove_file(&log).unwrap();
        std::os::unix::fs::symlink(&rotated, &log).unwrap();
        assert!(open_for_start(&dir, &config).is_err());
    }
}
