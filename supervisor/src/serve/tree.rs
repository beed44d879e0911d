//! The worker set: what each worker's `Start` carries, starting a spawned set (the
//! handshake and `Start` on every control channel, then their answers), and the set while
//! it runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use nl2sh_proto::channels::{
    ApprovaldSettings, ControlRequest, ControlResponse, ExecutorSettings, FromWorker, NetdSettings,
    WebSettings, WorkerSettings,
};
use nl2sh_proto::frame::{read_frame, write_frame};
use nl2sh_proto::handshake::{handshake, Role};
use nl2sh_proto::topology::control_channel;
use nl2sh_proto::FrameError;

use crate::discovery::Discovery;
use crate::spawn::{kill_all, Tree, Worker};

use super::ServeError;

/// How long a worker may take from exec to `Started`.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Request ids on a control channel: the one `Start`, the one `Drain`.
const START_ID: u64 = 1;
pub(super) const DRAIN_ID: u64 = 2;

/// What the set's workers send on their control channels, tagged with the worker's index.
pub(super) type Events = mpsc::UnboundedReceiver<(usize, Result<FromWorker, FrameError>)>;

/// The `Start` settings of each worker (none for a role this tree does not run).
#[derive(Clone)]
pub(super) struct Starts {
    pub netd: Option<NetdSettings>,
    pub executor: Option<ExecutorSettings>,
    pub approvald: Option<ApprovaldSettings>,
    pub web: Option<WebSettings>,
}

impl Starts {
    /// The settings every later start gets: the same, without the debug builds' one-shot
    /// test violation (it would kill each restarted netd).
    pub(super) fn for_restart(&self) -> Starts {
        #[allow(unused_mut)]
        let mut starts = self.clone();
        #[cfg(debug_assertions)]
        if let Some(netd) = starts.netd.as_mut() {
            netd.test_violation = None;
        }
        starts
    }

    /// The `Start` settings of `role`, once.
    fn take(&mut self, role: Role) -> Option<WorkerSettings> {
        match role {
            Role::Netd => self.netd.take().map(WorkerSettings::Netd),
            Role::Executor => self.executor.take().map(WorkerSettings::Executor),
            Role::Approvald => self.approvald.take().map(WorkerSettings::Approvald),
            Role::Web => self.web.take().map(WorkerSettings::Web),
            Role::Supervisor | Role::Cli => None,
        }
    }
}

/// A started worker set.
pub(super) struct Running {
    /// Ends of channels whose peer role this tree does not run (see `Tree::parked`).
    _parked: Vec<std::os::unix::net::UnixStream>,
    /// Answers the Web console's discovery while this worker set lives.
    discovery: Option<tokio::task::JoinHandle<()>>,
    pub workers: Vec<Worker>,
    pub writers: Vec<OwnedWriteHalf>,
    pub events: Events,
}

impl Running {
    pub fn pids(&self) -> Vec<u32> {
        self.workers.iter().map(|w| w.child.id()).collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = self.discovery.take() {
            task.abort();
        }
    }
}

/// Start a spawned set: discovery served at once (the Web console may ask before it
/// answers `Start`), every `Start` sent, every answer read, then each control channel's
/// events forwarded. A set that fails to start is killed.
pub(super) async fn start_tree(
    tree: Tree,
    starts: Starts,
    discovery: &Arc<Discovery>,
) -> Result<Running, ServeError> {
    let Tree {
        mut workers,
        discovery: discovery_end,
        parked,
    } = tree;
    let ready = serve_discovery(discovery_end, discovery)
        .and_then(|discovery| Ok((discovery, control_streams(&workers)?)));
    let (discovery, mut streams) = match ready {
        Ok(ready) => ready,
        Err(e) => {
            kill_all(&mut workers);
            return Err(ServeError::Spawn(e));
        }
    };
    let roles: Vec<Role> = workers.iter().map(|w| w.role).collect();
    let failure = tokio::time::timeout(START_TIMEOUT, exchange(&mut streams, &roles, starts))
        .await
        .unwrap_or_else(|_| {
            Some(format!(
                "workers did not start within {}s",
                START_TIMEOUT.as_secs()
            ))
        });
    if let Some(why) = failure {
        return Err(start_failed(&mut workers, why).await);
    }
    let (writers, events) = forward_events(streams);
    Ok(Running {
        _parked: parked,
        discovery,
        workers,
        writers,
        events,
    })
}

/// Answer the Web console's discovery on its channel's end, if the set has one.
fn serve_discovery(
    end: Option<std::os::unix::net::UnixStream>,
    discovery: &Arc<Discovery>,
) -> std::io::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(end) = end else {
        return Ok(None);
    };
    end.set_nonblocking(true)?;
    let end = UnixStream::from_std(end)?;
    Ok(nl2sh_proto::topology::Answerer::connected(end)
        .ok()
        .map(|end| tokio::spawn(crate::discovery::serve(end, discovery.clone()))))
}

/// Each worker's control channel, for the runtime.
fn control_streams(workers: &[Worker]) -> std::io::Result<Vec<UnixStream>> {
    let mut streams = Vec::new();
    for w in workers {
        let std = w.control.try_clone()?;
        let _ = std.set_nonblocking(true);
        streams.push(UnixStream::from_std(std)?);
    }
    Ok(streams)
}

/// Send every `Start` before awaiting any answer: workers handshake with each other after
/// their own `Start`, so answers depend on all of them having started. Why the set did
/// not start, if it did not.
async fn exchange(
    streams: &mut [UnixStream],
    roles: &[Role],
    mut starts: Starts,
) -> Option<String> {
    for (stream, role) in streams.iter_mut().zip(roles) {
        if let Err(e) = send_start(stream, *role, &mut starts).await {
            return Some(format!("{} failed to start: {e}", role.as_str()));
        }
    }
    for (stream, role) in streams.iter_mut().zip(roles) {
        match read_frame::<FromWorker, _>(stream).await {
            Ok((START_ID, FromWorker::Answer(ControlResponse::Started))) => {}
            Ok((START_ID, FromWorker::Answer(ControlResponse::Refused(why)))) => {
                return Some(format!("{} refused to start: {why}", role.as_str()))
            }
            Ok((id, other)) => {
                return Some(format!(
                    "{} sent {other:?} (id {id}) instead of answering Start",
                    role.as_str()
                ))
            }
            Err(e) => return Some(format!("{} failed to start: {e}", role.as_str())),
        }
    }
    None
}

/// The handshake on `role`'s control channel, then its `Start`.
async fn send_start(
    stream: &mut UnixStream,
    role: Role,
    starts: &mut Starts,
) -> Result<(), FrameError> {
    let kind = control_channel(role)
        .ok_or_else(|| FrameError::OutOfPlace(format!("no control channel for {role:?}")))?;
    handshake(stream, kind, Role::Supervisor, role).await?;
    let settings = starts
        .take(role)
        .ok_or_else(|| FrameError::OutOfPlace(format!("no settings for {role:?}")))?;
    write_frame(stream, START_ID, &ControlRequest::Start(Box::new(settings))).await
}

/// Kill a set that did not start, and say why.
async fn start_failed(workers: &mut [Worker], why: String) -> ServeError {
    // A console killed mid-start shows up as whichever worker noticed first; ask the
    // console itself, so its deaths are counted whatever the order.
    let console_died = match workers.iter_mut().find(|w| w.role == Role::Web) {
        Some(w) => exited_within(&mut w.child, Duration::from_millis(200)).await,
        None => false,
    };
    kill_all(workers);
    if console_died {
        ServeError::ConsoleDiedStarting(why)
    } else {
        ServeError::Start(why)
    }
}

/// Split each control channel: the writers stay with the set, every frame read comes to
/// one queue tagged with its worker's index.
fn forward_events(streams: Vec<UnixStream>) -> (Vec<OwnedWriteHalf>, Events) {
    let (tx, events) = mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for (i, stream) in streams.into_iter().enumerate() {
        let (mut rd, wr) = stream.into_split();
        writers.push(wr);
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                let r = read_frame::<FromWorker, _>(&mut rd)
                    .await
                    .map(|(_, resp)| resp);
                let end = r.is_err();
                if tx.send((i, r)).is_err() || end {
                    break;
                }
            }
        });
    }
    (writers, events)
}

/// Whether the child has exited, or does within `limit`.
async fn exited_within(child: &mut std::process::Child, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ => return false,
        }
    }
}
