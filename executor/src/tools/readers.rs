//! Two long-lived threads for the tools' blocking work (a `stat`, a small read, a file
//! written), shared by every call of the process.
//!
//! Why not tokio's blocking pool alone: it starts a thread whenever none is idle, so 32
//! concurrent calls grew it to 62 threads on one core, all waiting on one condvar; waking
//! and contending for it was the largest item of the executor's profile (BENCHMARKS.md,
//! "Where the tree's CPU goes at 32 clients"). Here two readers drain one queue: a burst
//! of jobs costs at most two wake-ups, and a reader that finishes a job takes the next
//! without sleeping.
//!
//! A queue can hold a job behind one that hangs (a read on a FUSE mount such as
//! `/sdcard` whose daemon stopped answering). So a job still queued after
//! [`RESCUE_AFTER`] is taken back by its caller and run on tokio's blocking pool, where
//! it has a thread of its own, and one more reader starts (up to [`MAX_READERS`]) for
//! the jobs behind it: a hung read delays the others by that much once, never for good.
//! A reader beyond the first [`READERS`] ends after [`EXTRA_IDLE`] without a job.
//!
//! A job that has not started when its call ends (cancelled, timed out) never starts: an
//! `fs.write` must not happen after its call was answered as cancelled.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Threads that serve the queue for the life of the process.
const READERS: usize = 2;
/// Readers at most, counting those a hung job holds.
const MAX_READERS: usize = 16;
/// How long a reader beyond [`READERS`] waits for a job before it ends.
const EXTRA_IDLE: Duration = Duration::from_secs(10);

/// How long a job may wait in the queue before its caller runs it elsewhere. Far above a
/// job's usual wait (microseconds), far below what a caller notices.
pub const RESCUE_AFTER: Duration = Duration::from_millis(20);

type Job = Box<dyn FnOnce() + Send>;

/// One job, taken exactly once: by a reader, or back by its caller.
struct Slot(Mutex<Option<Job>>);

impl Slot {
    fn take(&self) -> Option<Job> {
        self.lock().take()
    }

    fn is_queued(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Job>> {
        // A job and nothing else: a panic elsewhere cannot leave it torn.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Arc<Slot>>,
    /// Readers waiting for a job.
    idle: usize,
    /// Readers started.
    readers: usize,
}

/// A queue and its readers: one per process ([`run`]); tests make their own.
struct Lane {
    queue: Mutex<Queue>,
    arrived: Condvar,
}

/// The job's closure ended without an answer (it panicked, or its thread is gone).
#[derive(Debug, thiserror::Error)]
#[error("the operation ended without an answer")]
pub struct Aborted;

impl Lane {
    fn new() -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            arrived: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A queue of slots: a panic elsewhere cannot leave it torn.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `slot`; false when no reader exists to serve it (none could be started).
    fn push(&'static self, slot: Arc<Slot>) -> bool {
        let mut queue = self.lock();
        queue.jobs.push_back(slot);
        if queue.idle > 0 {
            self.arrived.notify_one();
        } else if queue.readers < READERS {
            self.start_reader(&mut queue);
        }
        queue.readers > 0
    }

    /// A job waited [`RESCUE_AFTER`] with every reader busy: one more for the jobs behind
    /// it.
    fn rescued(&'static self) {
        let mut queue = self.lock();
        if queue.idle == 0 && queue.readers < MAX_READERS {
            self.start_reader(&mut queue);
        }
    }

    fn start_reader(&'static self, queue: &mut Queue) {
        let started = std::thread::Builder::new()
            .name("nl2sh-reader".into())
            .spawn(move || self.serve());
        match started {
            Ok(_) => queue.readers += 1,
            Err(e) => tracing::warn!(error = %e, "cannot start a reader thread"),
        }
    }

    /// A reader: run queued jobs, in order; end after [`EXTRA_IDLE`] without one while
    /// more than [`READERS`] are running.
    fn serve(&self) {
        let mut queue = self.lock();
        loop {
            if let Some(slot) = queue.jobs.pop_front() {
                drop(queue);
                // Empty if its caller took it back meanwhile.
                if let Some(job) = slot.take() {
                    job();
                }
                queue = self.lock();
                continue;
            }
            if queue.readers > READERS {
                queue.idle += 1;
                let (woken, waited) = self
                    .arrived
                    .wait_timeout(queue, EXTRA_IDLE)
                    .unwrap_or_else(|p| p.into_inner());
                queue = woken;
                queue.idle -= 1;
                if waited.timed_out() && queue.jobs.is_empty() && queue.readers > READERS {
                    queue.readers -= 1;
                    return;
                }
                continue;
            }
            queue.idle += 1;
            queue = self.arrived.wait(queue).unwrap_or_else(|p| p.into_inner());
            queue.idle -= 1;
        }
    }
}

/// Run `f` on a reader (or, if it waited [`RESCUE_AFTER`] for one, on tokio's blocking
/// pool) and wait for its result. Dropped before `f` started, `f` never runs.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Aborted> {
    static LANE: OnceLock<Lane> = OnceLock::new();
    run_on(LANE.get_or_init(Lane::new), f).await
}

async fn run_on<T: Send + 'static>(
    lane: &'static Lane,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Aborted> {
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    let slot = TakenBackOnDrop(Arc::new(Slot(Mutex::new(Some(job)))));
    if lane.push(slot.0.clone()) {
        if let Ok(done) = tokio::time::timeout(RESCUE_AFTER, &mut rx).await {
            return done.map_err(|_| Aborted);
        }
    }
    // Still queued (every reader busy, perhaps hung) or no reader at all: a thread of its
    // own, which takes the job unless this call ended first. Already taken by a reader:
    // it runs there, and the answer comes from it.
    if slot.0.is_queued() {
        lane.rescued();
        let queued = slot.0.clone();
        drop(tokio::task::spawn_blocking(move || {
            if let Some(job) = queued.take() {
                job();
            }
        }));
    }
    rx.await.map_err(|_| Aborted)
}

/// Takes the job back (unrun) if the call's future is dropped before a thread took it.
struct TakenBackOnDrop(Arc<Slot>);

impl Drop for TakenBackOnDrop {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// A lane of this test's own: other tests' jobs cannot take or hold its readers.
    fn own_lane() -> &'static Lane {
        Box::leak(Box::new(Lane::new()))
    }

    /// Hang every reader `lane` starts for itself (held until the sender goes, or 30 s).
    async fn hang_readers(
        lane: &'static Lane,
    ) -> (
        mpsc::Sender<()>,
        Vec<tokio::task::JoinHandle<Result<(), Aborted>>>,
    ) {
        let (release, hold) = mpsc::channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let mut hung = Vec::new();
        for _ in 0..READERS {
            let hold = hold.clone();
            hung.push(tokio::spawn(run_on(lane, move || {
                let _ = hold.lock().map(|h| h.recv_timeout(Duration::from_secs(30)));
            })));
        }
        // Let the spawned calls queue their jobs, which start both readers.
        tokio::task::yield_now().await;
        assert_eq!(lane.lock().readers, READERS);
        (release, hung)
    }

    #[tokio::test]
    async fn a_job_runs_and_answers() {
        assert_eq!(run(|| 6 * 7).await.unwrap(), 42);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn jobs_behind_hung_readers_are_rescued() {
        let lane = own_lane();
        let (release, hung) = hang_readers(lane).await;
        let handles: Vec<_> = (0..8)
            .map(|i| tokio::spawn(run_on(lane, move || i)))
            .collect();
        let mut answers = Vec::new();
        for h in handles {
            answers.push(h.await.unwrap().unwrap());
        }
        assert_eq!(answers, (0..8).collect::<Vec<_>>());
        // They came while the hung jobs still hang.
        assert!(hung.iter().all(|h| !h.is_finished()));
        // And a reader started beside the hung ones, for the jobs to come.
        assert!(lane.lock().readers > READERS);
        drop(release);
        for h in hung {
            h.await.unwrap().unwrap();
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_job_whose_call_ended_before_it_started_never_runs() {
        let lane = own_lane();
        let (release, hung) = hang_readers(lane).await;
        let ran = Arc::new(AtomicBool::new(false));
        let witness = ran.clone();
        // The call ends (as a cancelled or timed-out call does) while its job waits.
        let ended = tokio::time::timeout(
            Duration::from_millis(1),
            run_on(lane, move || witness.store(true, Ordering::SeqCst)),
        )
        .await;
        assert!(ended.is_err());
        // Its job is gone: dropped unrun, holding the only other reference.
        assert_eq!(Arc::strong_count(&ran), 1);
        drop(release);
        for h in hung {
            h.await.unwrap().unwrap();
        }
        // The readers are free and have drained the queue, the ended job's empty slot too.
        assert_eq!(run_on(lane, || 1).await.unwrap(), 1);
        assert!(!ran.load(Ordering::SeqCst));
    }
}
