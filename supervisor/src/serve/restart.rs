//! The restart policy: a worker's death restarts the whole set on the same listener with
//! the same settings, after a short backoff, until deaths come too fast (a crash loop); a
//! Web console that keeps dying is left out of later sets.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::discovery::Discovery;
use crate::spawn::{NetdIdentity, NetdIo, Tree, WebIo};
use crate::state::{self, ConnectionInfo};

use super::tree::{start_tree, Running, Starts};
use super::ServeError;

/// Worker deaths within [`CRASH_WINDOW`] the supervisor restarts; one more is a crash loop,
/// and the service stops.
pub(super) const MAX_RESTARTS_IN_WINDOW: usize = 5;
pub(super) const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// The wait before each restart within the window: the first is immediate, so one
/// crash costs a client one failed call, not a pause.
const RESTART_BACKOFF: [Duration; MAX_RESTARTS_IN_WINDOW] = [
    Duration::ZERO,
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];
/// Deaths of the Web console within [`CRASH_WINDOW`] after which the worker sets go on
/// without it (below the crash loop's count, so MCP/A2A outlive it).
const MAX_CONSOLE_DEATHS: usize = 3;

/// What a restart of the worker set needs, and what it has done so far.
pub(super) struct Restart {
    /// The listener (or stdio) every netd gets: clients keep the same URL.
    pub netd_io: NetdIo,
    /// The Web console's listener, the same for every restart.
    pub web_io: Option<WebIo>,
    pub discovery: Arc<Discovery>,
    pub identity: NetdIdentity,
    pub log_filter: String,
    /// The same settings (token, model, paths) as the first start.
    pub starts: Starts,
    pub worker_pids: Arc<Mutex<Vec<u32>>>,
    pub paths: state::StatePaths,
    pub info: ConnectionInfo,
    pub connection: state::ConnectionFile,
    /// When workers died, within the crash window.
    pub deaths: VecDeque<std::time::Instant>,
    /// When the Web console was the worker that died, within the crash window.
    pub console_deaths: VecDeque<std::time::Instant>,
    pub stdio: bool,
    /// Children that outlive the tree: the `service restart` the owner asked for, which
    /// stops this process and starts the next (never ended with the tree's leftovers).
    pub spared: Vec<u32>,
}

impl Restart {
    /// The Web console was the worker that died. Past [`MAX_CONSOLE_DEATHS`] within the
    /// crash window, the worker sets restarted from now on have no console, so a console
    /// that cannot run (a system call its filter lacks on this kernel, say) never takes
    /// MCP/A2A down with it. A console alone (`--web-only` without protocols) is left to
    /// the crash-loop rule.
    pub(super) fn console_died(&mut self, cause: &str) {
        count_within_window(&mut self.console_deaths);
        let protocols = !matches!(self.netd_io, NetdIo::Off);
        if protocols && self.web_io.is_some() && self.console_deaths.len() > MAX_CONSOLE_DEATHS {
            tracing::error!(
                deaths = self.console_deaths.len(),
                last = %cause,
                "the Web console keeps dying; MCP/A2A go on without it (restart the service \
                 to try it again)"
            );
            self.web_io = None;
            self.starts.web = None;
            self.info.web_url = None;
            self.info.web_listen = None;
        }
    }

    /// Count a death; false when it makes a crash loop.
    pub(super) fn may_restart(&mut self) -> bool {
        count_within_window(&mut self.deaths);
        self.deaths.len() <= MAX_RESTARTS_IN_WINDOW
    }

    pub(super) fn backoff(&self) -> Duration {
        let n = self.deaths.len().saturating_sub(1);
        RESTART_BACKOFF[n.min(RESTART_BACKOFF.len() - 1)]
    }

    /// A new worker set on the same listener with the same settings.
    pub(super) async fn start(&self) -> Result<Running, ServeError> {
        let tree = Tree::spawn(
            &self.netd_io,
            &self.identity,
            self.web_io.as_ref(),
            &self.log_filter,
        )
        .map_err(ServeError::Spawn)?;
        // The new workers are ours to wait for from now on, not the orphan reaper's: one
        // that dies while starting must leave its status for `start_tree` to read.
        if let Ok(mut pids) = self.worker_pids.lock() {
            *pids = tree.workers.iter().map(|w| w.child.id()).collect();
        }
        start_tree(tree, self.starts.clone(), &self.discovery).await
    }

    /// The new set runs: record it for the reaper and in connection.json.
    pub(super) fn started(&mut self, running: &Running, cause: &str) {
        if let Ok(mut pids) = self.worker_pids.lock() {
            *pids = running.pids();
        }
        self.info.restarts = self.info.restarts.saturating_add(1);
        self.info.last_restart_cause = Some(cause.to_string());
        if let Err(e) = self.connection.update(&self.paths, &self.info) {
            tracing::warn!(error = %e, "cannot update connection.json");
        }
    }

    /// The crash loop's record, for `service status`.
    pub(super) fn failed(&self, cause: &str) {
        let record = state::FailureRecord {
            at_ms: nl2sh_proto::clock::now_unix_ms(),
            pid: std::process::id(),
            restarts: self.info.restarts,
            cause: cause.to_string(),
        };
        if let Err(e) = state::write_failure(&self.paths, &record) {
            tracing::warn!(error = %e, "cannot record the failure");
        }
    }
}

/// Record a death now in `deaths`, forgetting those older than [`CRASH_WINDOW`].
fn count_within_window(deaths: &mut VecDeque<std::time::Instant>) {
    let now = std::time::Instant::now();
    deaths.push_back(now);
    while deaths
        .front()
        .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
    {
        deaths.pop_front();
    }
}
