//! Running one command for a tool: captured pipes (no terminal), bounded output with an
//! explicit truncation marker, a deadline, cancellation, and its own process group that
//! is killed on timeout, on cancellation and when the executor exits.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::sys::{self, ChildSetup, ProcessGroup};

/// After the command's first process exits, how long background members may keep its
/// pipes open before we stop reading (they keep running, tracked for executor exit).
const PIPE_LINGER: Duration = Duration::from_millis(500);

/// Process groups started by this executor, killed when it exits.
#[derive(Default)]
pub struct ProcessGroups {
    groups: Mutex<HashSet<ProcessGroup>>,
}

impl ProcessGroups {
    pub fn insert(&self, group: ProcessGroup) {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        // Forget groups that have ended, so the set stays small.
        g.retain(|p| p.alive());
        g.insert(group);
    }

    /// Kill every group still alive (executor shutdown).
    pub fn kill_all(&self) -> usize {
        let g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        g.iter().filter(|p| p.kill()).count()
    }

    /// Set every group to `nice`; a group that has ended is skipped.
    pub fn set_nice_all(&self, nice: i32) {
        let g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        for group in g.iter() {
            if let Err(e) = group.set_nice(nice) {
                tracing::debug!(error = %e, ?group, "process group not reniced");
            }
        }
    }
}

/// A command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub stdin: Option<Vec<u8>>,
    pub max_stdout: usize,
    pub max_stderr: usize,
}

impl CommandSpec {
    pub fn new(argv: Vec<String>) -> Self {
        Self {
            argv,
            cwd: None,
            stdin: None,
            max_stdout: 40 * 1024,
            max_stderr: 8 * 1024,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// Bytes read beyond the bound and discarded.
    pub dropped: u64,
}

impl Captured {
    /// UTF-8 (lossy) text with the truncation marker when bytes were dropped.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!(
                "\n[nl2sh: output truncated, {} more bytes]",
                self.dropped
            ));
        }
        s
    }
}

#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
    pub timed_out: bool,
    pub cancelled: bool,
    /// A limit the kernel enforced on the call as a whole that ended part of it (the
    /// sandbox's cgroup OOM killer), in words for the result.
    pub limit: Option<String>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("empty command")]
    Empty,
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for {program}: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
}

/// Where a command without a `cwd` starts (docs/PROTOCOLS.md, `shell.exec`).
pub const START_DIR: &str = "/";

/// Run `spec` as `setup`, until it exits, `deadline` passes or `cancel` fires.
pub async fn run(
    spec: CommandSpec,
    setup: ChildSetup,
    deadline: Instant,
    cancel: &CancellationToken,
    groups: &ProcessGroups,
    path_var: Option<&str>,
) -> Result<CommandOutput, ExecError> {
    let program = spec.argv.first().cloned().ok_or(ExecError::Empty)?;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&spec.argv[1..]);
    // Without a `cwd`, a command starts in `/`, never in the directory nl2sh was started
    // from (often the configuration's): the assessment judges its relative paths there.
    cmd.current_dir(
        spec.cwd
            .as_deref()
            .unwrap_or(std::path::Path::new(START_DIR)),
    );
    if setup.needs_hook() {
        // Changing identity needs code between fork and exec (setsid included).
        sys::install(&mut cmd, setup);
    } else {
        own_group(&mut cmd);
    }
    let io = Io {
        stdin: spec.stdin,
        max_stdout: spec.max_stdout,
        max_stderr: spec.max_stderr,
        path_var,
    };
    run_command(cmd, io, deadline, cancel, groups).await
}

/// The streams of one command and the environment it gets from us.
pub struct Io<'a> {
    /// Written to the command's stdin, which is then closed (`None`: /dev/null).
    pub stdin: Option<Vec<u8>>,
    pub max_stdout: usize,
    pub max_stderr: usize,
    /// The launching shell's PATH.
    pub path_var: Option<&'a str>,
}

/// Put the command in its own process group, so the whole command line can be killed as
/// one. Without a pre-exec hook std can use posix_spawn (vfork-like), which costs a
/// fraction of a fork of this process. Signals the executor catches are reset by exec.
pub fn own_group(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
}

/// Start `cmd` (already in its own process group, see [`own_group`]) with captured,
/// bounded output, and wait until it exits, `deadline` passes or `cancel` fires.
pub async fn run_command(
    cmd: tokio::process::Command,
    io: Io<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
    groups: &ProcessGroups,
) -> Result<CommandOutput, ExecError> {
    let started = start(cmd, io.stdin.is_some(), io.path_var, groups)?;
    finish(
        started,
        io.stdin,
        io.max_stdout,
        io.max_stderr,
        deadline,
        cancel,
    )
    .await
}

/// A command started by [`start`], its output not yet read: its stdin (when piped) is
/// still open, for [`finish`] to write and close.
pub struct Started {
    child: tokio::process::Child,
    /// The group it leads, registered for the executor's exit.
    group: Option<ProcessGroup>,
    program: String,
    /// When its call began (reset when a command started ahead of time is used).
    pub began: Instant,
    /// A byte its stdout starts with that is not output (a sandbox helper's "set up"),
    /// dropped by [`finish`] if it comes first.
    pub preamble: Option<u8>,
    /// Its stderr ends with an [`exit_record`] (a sandbox helper's): the call is answered
    /// from it once both pipes have ended, without waiting for the process to exit.
    pub exit_record: bool,
}

impl Started {
    /// Write `data` to its stdin and keep stdin open (a frame ahead of the call's).
    pub async fn write_stdin(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self.child.stdin.as_mut() {
            Some(stdin) => stdin.write_all(data).await,
            None => Err(std::io::Error::other("stdin is not piped")),
        }
    }

    /// The first byte of its stdout (`None` at end of file), read before [`finish`]
    /// reads the rest.
    pub async fn read_stdout_byte(&mut self) -> std::io::Result<Option<u8>> {
        let Some(stdout) = self.child.stdout.as_mut() else {
            return Err(std::io::Error::other("stdout is not piped"));
        };
        let mut byte = [0u8; 1];
        match stdout.read(&mut byte).await? {
            0 => Ok(None),
            _ => Ok(Some(byte[0])),
        }
    }

    /// Its pid, while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The process group it leads (see [`ProcessGroup::led_by`]).
    pub fn group(&self) -> Option<ProcessGroup> {
        self.group
    }

    /// Kill its whole process group (and so the command), as on timeout.
    pub fn kill(&self) {
        if let Some(group) = self.group {
            group.kill();
        }
    }
}

/// Spawn `cmd` (already in its own process group) with piped stdout and stderr, stdin
/// piped or /dev/null, killed when dropped, and its group registered in `groups`.
pub fn start(
    mut cmd: tokio::process::Command,
    piped_stdin: bool,
    path_var: Option<&str>,
    groups: &ProcessGroups,
) -> Result<Started, ExecError> {
    let began = Instant::now();
    let program = cmd.as_std().get_program().to_string_lossy().into_owned();
    cmd.stdin(if piped_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    if let Some(path) = path_var {
        cmd.env("PATH", path);
    }
    let child = cmd.spawn().map_err(|source| ExecError::Spawn {
        program: program.clone(),
        source,
    })?;
    // The child leads its own process group (setsid or setpgid): pgid == pid. (No pid:
    // it has been reaped already, and its group is empty or belongs to someone else.)
    let group = child.id().and_then(ProcessGroup::led_by);
    if let Some(group) = group {
        groups.insert(group);
    }
    Ok(Started {
        child,
        group,
        program,
        began,
        preamble: None,
        exit_record: false,
    })
}

/// Write `stdin` (then close it), read the output, bounded, and wait until the command
/// exits, `deadline` passes or `cancel` fires (then its group is killed).
pub async fn finish(
    started: Started,
    stdin: Option<Vec<u8>>,
    max_stdout: usize,
    max_stderr: usize,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<CommandOutput, ExecError> {
    let Started {
        mut child,
        group,
        program,
        began,
        preamble,
        exit_record: recorded,
    } = started;
    if let (Some(mut pipe), Some(data)) = (child.stdin.take(), stdin) {
        tokio::spawn(async move {
            let _ = pipe.write_all(&data).await;
        });
    }
    let out_buf = Arc::new(Mutex::new(Captured::default()));
    let err_buf = Arc::new(Mutex::new(Captured::default()));
    let mut out = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_bounded(s, max_stdout, preamble, out_buf.clone(), 0)));
    let tail = if recorded { EXIT_RECORD_LEN } else { 0 };
    let mut err = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_bounded(s, max_stderr, None, err_buf.clone(), tail)));
    let ended = wait_for_end(
        &mut child, recorded, &mut out, &mut err, deadline, cancel, &program,
    )
    .await?;
    use std::os::unix::process::ExitStatusExt;
    let (exit_code, signal, timed_out, cancelled) = match ended {
        Ended::Recorded { exit_code, signal } => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            (exit_code, signal, false, false)
        }
        Ended::Exited(status) => (status.code(), status.signal(), false, false),
        Ended::TimedOut | Ended::Cancelled => {
            if let Some(group) = group {
                group.kill();
            }
            let status = child.wait().await.map_err(|source| ExecError::Wait {
                program: program.clone(),
                source,
            })?;
            let timed_out = matches!(ended, Ended::TimedOut);
            (status.code(), status.signal(), timed_out, !timed_out)
        }
    };
    // Collect output. Background members of the group may hold the pipes open; give them
    // a moment, then stop reading. A timed-out or cancelled group is already dead.
    let linger = tokio::time::Instant::now() + PIPE_LINGER;
    let stdout = collect(out, &out_buf, linger).await;
    let stderr = collect(err, &err_buf, linger).await;
    Ok(CommandOutput {
        exit_code,
        signal,
        stdout,
        stderr,
        duration: began.elapsed(),
        timed_out,
        cancelled,
        limit: None,
    })
}

/// Wait until the command has ended: by its exit record (with `recorded`, a sandbox
/// helper's), by exiting, or because `deadline` passed or `cancel` fired.
async fn wait_for_end(
    child: &mut tokio::process::Child,
    recorded: bool,
    out: &mut Option<tokio::task::JoinHandle<Vec<u8>>>,
    err: &mut Option<tokio::task::JoinHandle<Vec<u8>>>,
    deadline: Instant,
    cancel: &CancellationToken,
    program: &str,
) -> Result<Ended, ExecError> {
    let deadline_tokio = tokio::time::Instant::from_std(deadline);
    let ended = if recorded {
        // All its pipes end before it exits, the record last: answered from the record,
        // the process is reaped meanwhile. Without a record (it died, or failed before
        // its payload ran) it is waited for as any command.
        tokio::select! {
            record = pipes_with_record(out, err) => record,
            () = tokio::time::sleep_until(deadline_tokio) => Some(Ended::TimedOut),
            () = cancel.cancelled() => Some(Ended::Cancelled),
        }
    } else {
        None
    };
    Ok(match ended {
        Some(ended) => ended,
        None => tokio::select! {
            status = child.wait() => Ended::Exited(status.map_err(|source| ExecError::Wait {
                program: program.to_string(),
                source,
            })?),
            () = tokio::time::sleep_until(deadline_tokio) => Ended::TimedOut,
            () = cancel.cancelled() => Ended::Cancelled,
        },
    })
}

/// How a command's run ended.
enum Ended {
    Exited(std::process::ExitStatus),
    /// As its [`exit_record`] says; the process is still exiting.
    Recorded {
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
    TimedOut,
    Cancelled,
}

/// The length of an [`exit_record`].
pub const EXIT_RECORD_LEN: usize = EXIT_RECORD_MAGIC.len() + 2;
const EXIT_RECORD_MAGIC: &[u8; 12] = b"\0nl2sh-exit:";

/// What a sandbox helper writes last on its stderr once its payload has ended (and with
/// it every process of the call), right before it closes stderr and exits: how the
/// payload ended, `Ok(code)` or `Err(signal)`. Payload output cannot forge it, as nothing
/// of the payload is left to write after it; a run whose stderr does not end with one is
/// waited for instead.
pub fn exit_record(ended: Result<u8, u8>) -> [u8; EXIT_RECORD_LEN] {
    let mut record = [0u8; EXIT_RECORD_LEN];
    record[..EXIT_RECORD_MAGIC.len()].copy_from_slice(EXIT_RECORD_MAGIC);
    let (kind, value) = match ended {
        Ok(code) => (b'e', code),
        Err(signal) => (b's', signal),
    };
    record[EXIT_RECORD_MAGIC.len()] = kind;
    record[EXIT_RECORD_MAGIC.len() + 1] = value;
    record
}

/// The exit code and signal an [`exit_record`] says, if `tail` is one.
fn read_exit_record(tail: &[u8]) -> Option<(Option<i32>, Option<i32>)> {
    let rest = tail.strip_prefix(EXIT_RECORD_MAGIC.as_slice())?;
    match rest {
        [b'e', code] => Some((Some(i32::from(*code)), None)),
        [b's', signal] if *signal > 0 => Some((None, Some(i32::from(*signal)))),
        _ => None,
    }
}

/// Wait until both pipes have ended, then read the record stderr ended with (its bytes
/// are not output). A handle is set to `None` once awaited, so this can be given up at
/// any await and the pipes still collected.
async fn pipes_with_record(
    out: &mut Option<tokio::task::JoinHandle<Vec<u8>>>,
    err: &mut Option<tokio::task::JoinHandle<Vec<u8>>>,
) -> Option<Ended> {
    let mut tail = Vec::new();
    if let Some(handle) = err.as_mut() {
        tail = handle.await.unwrap_or_default();
        *err = None;
    }
    if let Some(handle) = out.as_mut() {
        let _ = handle.await;
        *out = None;
    }
    let (exit_code, signal) = read_exit_record(&tail)?;
    Some(Ended::Recorded { exit_code, signal })
}

async fn collect(
    task: Option<tokio::task::JoinHandle<Vec<u8>>>,
    buf: &Mutex<Captured>,
    until: tokio::time::Instant,
) -> Captured {
    if let Some(mut task) = task {
        if tokio::time::timeout_at(until, &mut task).await.is_err() {
            task.abort();
        }
    }
    std::mem::take(&mut *buf.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Keep the first `max` bytes; count and discard the rest so the writer never blocks.
/// A first byte equal to `preamble` is not output and is dropped. With `tail`, the last
/// `tail` bytes are returned, and taken out of `into` (or its count) when they are an
/// [`exit_record`].
async fn read_bounded<R: AsyncRead + Unpin>(
    mut r: R,
    max: usize,
    mut preamble: Option<u8>,
    into: Arc<Mutex<Captured>>,
    tail: usize,
) -> Vec<u8> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut last: Vec<u8> = Vec::with_capacity(tail * 2);
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let skip = usize::from(preamble.take().is_some_and(|p| buf[0] == p));
                let data = &buf[skip..n];
                if tail > 0 {
                    last.extend_from_slice(data);
                    let extra = last.len().saturating_sub(tail);
                    last.drain(..extra);
                }
                let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
                let room = max.saturating_sub(c.bytes.len());
                let keep = room.min(data.len());
                c.bytes.extend_from_slice(&data[..keep]);
                c.dropped += (data.len() - keep) as u64;
            }
        }
    }
    if tail > 0 && read_exit_record(&last).is_some() {
        // The tail is the stream's last bytes: out of the count first, then the bytes.
        let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
        let counted = (c.dropped as usize).min(tail);
        c.dropped -= counted as u64;
        let kept = c.bytes.len().saturating_sub(tail - counted);
        c.bytes.truncate(kept);
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` read by [`read_bounded`] with room for `max` bytes and a record's tail.
    fn read_with_tail(data: &[u8], max: usize) -> (Captured, Vec<u8>) {
        let into = Arc::new(Mutex::new(Captured::default()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tail = rt.block_on(read_bounded(data, max, None, into.clone(), EXIT_RECORD_LEN));
        let captured = into.lock().unwrap().clone();
        (captured, tail)
    }

    #[test]
    fn an_exit_record_is_read_from_the_end_and_is_not_output() {
        let record = exit_record(Ok(7));
        let stream = [b"some error\n".as_slice(), &record].concat();
        // Room for everything: the record is taken out of the bytes kept.
        let (captured, tail) = read_with_tail(&stream, 1024);
        assert_eq!(captured.bytes, b"some error\n");
        assert_eq!(captured.dropped, 0);
        assert_eq!(read_exit_record(&tail), Some((Some(7), None)));
        // Room for 4 bytes: the record was counted as dropped, and is not any more.
        let (captured, _) = read_with_tail(&stream, 4);
        assert_eq!(captured.bytes, b"some");
        assert_eq!(captured.dropped, 7);
        // Cut in the middle of the record: part kept, part counted.
        let (captured, _) = read_with_tail(&stream, 15);
        assert_eq!(captured.bytes, b"some error\n");
        assert_eq!(captured.dropped, 0);
        // A signal.
        assert_eq!(
            read_exit_record(&exit_record(Err(9))),
            Some((None, Some(9)))
        );
    }

    #[test]
    fn a_stream_not_ending_with_a_record_is_all_output() {
        let record = exit_record(Ok(0));
        // Output written after a record (impossible from a helper): no record, all kept.
        let stream = [record.as_slice(), b"x"].concat();
        let (captured, tail) = read_with_tail(&stream, 1024);
        assert_eq!(captured.bytes, stream);
        assert_eq!(read_exit_record(&tail), None);
        // Shorter than a record, a wrong kind, signal 0, another magic.
        for bad in [
            b"short".to_vec(),
            [&record[..12], b"x\0"].concat(),
            [&record[..12], b"s\0"].concat(),
            [b"\0nl2sh-exxt:".as_slice(), b"e\0"].concat(),
        ] {
            assert_eq!(read_exit_record(&bad), None, "{bad:?}");
            let (captured, _) = read_with_tail(&bad, 1024);
            assert_eq!(captured.bytes, bad);
        }
    }

    #[test]
    fn a_process_group_is_never_ours_or_everyone() {
        // kill(-0) is our own group and kill(-1) every process we may signal.
        assert_eq!(ProcessGroup::led_by(0), None);
        assert_eq!(ProcessGroup::led_by(1), None);
        // A pid that does not fit a pid_t would wrap to a negative one.
        assert_eq!(ProcessGroup::led_by(u32::MAX), None);
        assert!(ProcessGroup::led_by(4242).is_some());
        // A group that does not exist is neither alive nor killed.
        let gone = ProcessGroup::led_by(i32::MAX as u32).unwrap();
        assert!(!gone.alive());
        assert!(!gone.kill());
    }
}
