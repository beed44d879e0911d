//! The owner's Ask, from the terminal console to the built-in Agent in netd. netd answers
//! only the supervisor, so approvald never asks it anything: netd keeps a
//! `NextOwnerWork` request outstanding on its store channel, and an Ask (or a cancel)
//! from approvals.sock is the answer to it. The owner's `Ask` is answered once netd has
//! taken the work, or refused when no netd takes it within [`HAND_OVER_WAIT`] (no
//! protocol service runs the Agent).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use nl2sh_proto::channels::OwnerWork;
use tokio::sync::{oneshot, Notify};

/// How long an Ask waits for netd to take it.
pub const HAND_OVER_WAIT: Duration = Duration::from_secs(5);
/// Most pieces of work waiting for netd at once; one more is refused.
pub const MAX_WAITING: usize = 8;

/// Why the work was not handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    #[error("the built-in Agent is not running: start the protocol service (nl2sh service start) to ask it")]
    NoAgent,
    #[error("too many requests are waiting for the built-in Agent")]
    Full,
}

struct Waiting {
    seq: u64,
    work: OwnerWork,
    taken: oneshot::Sender<()>,
}

#[derive(Default)]
pub struct OwnerInbox {
    queue: Mutex<VecDeque<Waiting>>,
    arrived: Notify,
    seq: AtomicU64,
}

impl OwnerInbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiting>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// netd's `NextOwnerWork`: the oldest waiting work, when some arrives.
    pub async fn next(&self) -> OwnerWork {
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Some(w) = self.queue().pop_front() {
                // The asker may have given up just now; the work is netd's all the same
                // (a cancel of a task that never ran is a no-op there).
                let _ = w.taken.send(());
                return w.work;
            }
            arrived.await;
        }
    }

    /// Hand `work` to netd: `Ok` once netd has taken it.
    pub async fn hand_over(&self, work: OwnerWork, within: Duration) -> Result<(), NotTaken> {
        let (taken, was_taken) = oneshot::channel();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        {
            let mut queue = self.queue();
            if queue.len() >= MAX_WAITING {
                return Err(NotTaken::Full);
            }
            queue.push_back(Waiting { seq, work, taken });
        }
        self.arrived.notify_one();
        let mut was_taken = was_taken;
        match tokio::time::timeout(within, &mut was_taken).await {
            Ok(Ok(())) => Ok(()),
            _ => {
                let mut queue = self.queue();
                let before = queue.len();
                queue.retain(|w| w.seq != seq);
                if queue.len() < before {
                    Err(NotTaken::NoAgent)
                } else {
                    // Taken between the timeout and the lock.
                    Ok(())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::TaskId;
    use std::sync::Arc;

    fn cancel(n: u32) -> OwnerWork {
        OwnerWork::Cancel {
            id: TaskId(format!("owner-{n}")),
        }
    }

    #[tokio::test]
    async fn work_nobody_takes_is_refused_and_forgotten() {
        let inbox = OwnerInbox::default();
        let r = inbox.hand_over(cancel(1), Duration::from_millis(20)).await;
        assert_eq!(r, Err(NotTaken::NoAgent));
        // Not handed to a netd that asks later: the owner was told it failed.
        let later = tokio::time::timeout(Duration::from_millis(20), inbox.next()).await;
        assert!(later.is_err(), "refused work was still handed over");
    }

    #[tokio::test]
    async fn a_waiting_netd_takes_work_in_order() {
        let inbox = Arc::new(OwnerInbox::default());
        let netd = {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                let a = inbox.next().await;
                let b = inbox.next().await;
                (a, b)
            })
        };
        inbox
            .hand_over(cancel(1), Duration::from_secs(5))
            .await
            .expect("taken");
        inbox
            .hand_over(cancel(2), Duration::from_secs(5))
            .await
            .expect("taken");
        let (a, b) = netd.await.expect("netd");
        assert!(matches!(a, OwnerWork::Cancel { id } if id.0 == "owner-1"));
        assert!(matches!(b, OwnerWork::Cancel { id } if id.0 == "owner-2"));
    }

    #[tokio::test]
    async fn a_full_inbox_refuses_at_once() {
        let inbox = Arc::new(OwnerInbox::default());
        let mut waiting = Vec::new();
        for n in 0..MAX_WAITING as u32 {
            let inbox = inbox.clone();
            waiting.push(tokio::spawn(async move {
                inbox.hand_over(cancel(n), Duration::from_secs(5)).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let r = inbox.hand_over(cancel(99), Duration::from_secs(5)).await;
        assert_eq!(r, Err(NotTaken::Full));
        for _ in 0..MAX_WAITING {
            inbox.next().await;
        }
        for w in waiting {
            assert_eq!(w.await.expect("task"), Ok(()));
        }
    }
}
