//! `protocol/connection.json`, the running protocol process's announcement: written by
//! the supervisor once its tree is up, read by discovery (`service status`, the terminal
//! console, the Web console through the supervisor) and by approvald, which names the
//! process it runs in when a setting waits for a restart. Also the bounded reader of the
//! protocol directory's JSON records.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Largest record read back.
pub const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The private announcement of a running protocol process (`protocol/connection.json`).
/// `token` is present only for owner UIs; never log this struct's token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot): with `pid`, identifies the
    /// process even after the pid is reused.
    pub start_time: u64,
    pub uid: u32,
    /// The configuration's identity (its canonical path): discovery for another path
    /// naming the same file finds this process.
    pub config_path: String,
    /// "http" (standalone `protocol serve`), "service" (the managed service) or "stdio".
    pub transport: String,
    pub mcp_url: Option<String>,
    pub a2a_url: Option<String>,
    pub agent_card_url: Option<String>,
    pub token: Option<String>,
    /// Version of the running binary (it may differ from the CLI's after an upgrade).
    #[serde(default)]
    pub version: Option<String>,
    /// When the process announced itself, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub started_at_ms: Option<i64>,
    /// The bound listener ("0.0.0.0:8765"); none for stdio.
    #[serde(default)]
    pub listen: Option<String>,
    /// How often the supervisor restarted its workers since it started.
    #[serde(default)]
    pub restarts: u32,
    /// Why it last did (the worker and how it ended), if it did.
    #[serde(default)]
    pub last_restart_cause: Option<String>,
    /// The Web console's origin, when this process serves one.
    #[serde(default)]
    pub web_url: Option<String>,
    /// The Web console's bound listener.
    #[serde(default)]
    pub web_listen: Option<String>,
    /// Where the HTTP token in use came from: "environment", "configuration" or
    /// "generated" (a generated one is new at every start).
    #[serde(default)]
    pub token_source: Option<String>,
    /// The protocol port the process was asked for (0: any free one); `listen` has the
    /// one bound, which differs when that port was in use.
    #[serde(default)]
    pub requested_port: Option<u16>,
}

impl std::fmt::Debug for ConnectionInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionInfo")
            .field("pid", &self.pid)
            .field("start_time", &self.start_time)
            .field("uid", &self.uid)
            .field("config_path", &self.config_path)
            .field("transport", &self.transport)
            .field("mcp_url", &self.mcp_url)
            .field("a2a_url", &self.a2a_url)
            .field("agent_card_url", &self.agent_card_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("version", &self.version)
            .field("started_at_ms", &self.started_at_ms)
            .field("listen", &self.listen)
            .field("restarts", &self.restarts)
            .field("last_restart_cause", &self.last_restart_cause)
            .field("token_source", &self.token_source)
            .field("requested_port", &self.requested_port)
            .finish()
    }
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("not a regular file")]
    NotRegular,
    #[error("malformed: {0}")]
    Malformed(String),
}

/// The JSON record at `path`, read without following a symlink, never from a FIFO, and
/// at most [`MAX_RECORD_BYTES`]; `Ok(None)` when there is none.
pub fn read_record<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, RecordError> {
    let io = |what| move |source| RecordError::Io { what, source };
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("cannot open")(e)),
    };
    let meta = file.metadata().map_err(io("cannot inspect"))?;
    if !meta.file_type().is_file() {
        return Err(RecordError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io("cannot read"))?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(RecordError::Malformed("too large".into()));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RecordError::Malformed(e.to_string()))
}
