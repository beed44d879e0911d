//! The pool of sandboxes built ahead of the calls that will use them: how many it keeps
//! (more while calls outrun it, for a while), a call taking one, refilling it off the
//! call's path, and keeping it fresh while calls come. Building one is [`super::build`]'s.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::build::Built;
#[cfg(doc)]
use super::SandboxSettings;
use super::{Run, SandboxError, Shared};

/// Sandboxes built ahead: ready, and being built.
#[derive(Default)]
pub(super) struct Pool {
    /// Off until the probe found the sandbox ready.
    pub(super) enabled: bool,
    pub(super) ready: Vec<Built>,
    pub(super) building: usize,
    /// Calls in [`Shared::take_ahead`]: a sandbox that starts building meanwhile is
    /// raised at once (see [`Shared::fill`]).
    pub(super) waiting: usize,
    /// How many to keep ready or building now: [`SandboxSettings::ahead`], doubled (up to
    /// [`SandboxSettings::ahead_max`]) each time a call finds none ready.
    pub(super) target: usize,
    /// When a call last found none ready (while the pool was not merely stale).
    pub(super) starved_at: Option<Instant>,
    /// When the last sandboxed call ended.
    pub(super) last_call: Option<Instant>,
    /// The pool's upkeep task runs ([`Shared::keep`]).
    pub(super) keeper: bool,
}

/// A call waiting in [`Shared::take_ahead`], counted in [`Pool::waiting`] while it lives.
struct Waiting<'a>(&'a Shared);

impl<'a> Waiting<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.pool().waiting += 1;
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut pool = self.0.pool();
        pool.waiting = pool.waiting.saturating_sub(1);
    }
}

/// How long after a sandboxed command has ended the work it leaves behind begins: letting
/// go of its mount namespace and building the next sandbox. Both wake a blocking thread,
/// which, on a core the call's answer also needs (the executor, netd, the client), the
/// scheduler may run first: `perf sched` showed 0.15 ms of it between the command's end
/// and netd's answer. By then the answer has left.
const AFTER_ANSWER: Duration = Duration::from_millis(1);

impl Shared {
    /// The pool, locked; a poisoned lock is taken as it was left.
    pub(super) fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After [`AFTER_ANSWER`]: let go of a finished sandbox's mount namespace on a
    /// blocking thread (closing the last reference unmounts its view and waits for a grace
    /// period, which neither the executor's one thread nor the call's answer should wait
    /// for), and, with `refill`, build the next sandboxes.
    pub(super) fn after_answer(self: &Arc<Self>, namespace: Option<OwnedFd>, refill: bool) {
        if namespace.is_none() && !refill {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(AFTER_ANSWER).await;
            if let Some(namespace) = namespace {
                tokio::task::spawn_blocking(move || drop(namespace));
            }
            if refill {
                shared.pool().last_call = Some(Instant::now());
                shared.fill();
                shared.keep();
            }
        });
    }

    /// Start the pool's one upkeep task unless it runs. It sleeps until the pool next
    /// needs something, and ends once nothing is due (nothing wakes an idle device):
    /// * [`SandboxSettings::grown_for`] after a call last found none ready, the pool goes
    ///   back to [`SandboxSettings::ahead`] ([`Shared::fill`] trims the extra ones);
    /// * for [`SandboxSettings::keep_fresh_for`] after the last call, a sandbox ready ahead
    ///   is rebuilt at 5/6 of [`SandboxSettings::ahead_max_age`], so that the next call
    ///   finds one young enough.
    fn keep(self: &Arc<Self>) {
        if std::mem::replace(&mut self.pool().keeper, true) {
            return;
        }
        let mut keeper = Keeper {
            shared: self.clone(),
            running: true,
        };
        tokio::spawn(async move {
            while let Some(at) = keeper.shared.next_upkeep() {
                tokio::time::sleep_until(at.into()).await;
                keeper.shared.upkeep();
            }
            // `next_upkeep` cleared the flag under the lock that found nothing due.
            keeper.ended();
        });
    }

    /// The age at which a sandbox ready ahead is rebuilt, if the pool is kept fresh.
    fn refresh_age(&self) -> Option<Duration> {
        let age = self.settings.ahead_max_age * 5 / 6;
        (!self.settings.keep_fresh_for.is_zero()
            && age >= MIN_REFRESH_AGE
            && self.settings.ahead > 0)
            .then_some(age)
    }

    /// Until when the pool is kept fresh (the last call's end + `keep_fresh_for`).
    fn fresh_until(&self, pool: &Pool) -> Option<Instant> {
        self.refresh_age()?;
        pool.last_call.map(|at| at + self.settings.keep_fresh_for)
    }

    /// When the pool next needs upkeep; `None` (and the keeper's flag cleared) if never.
    fn next_upkeep(&self) -> Option<Instant> {
        let mut pool = self.pool();
        let now = Instant::now();
        let trim = pool
            .starved_at
            .filter(|_| pool.target > self.settings.ahead)
            .map(|at| at + self.settings.grown_for);
        let refresh = self
            .fresh_until(&pool)
            .filter(|&until| until > now)
            .zip(self.refresh_age())
            .map(|(until, age)| {
                let due = pool.ready.iter().map(|b| b.at + age).min();
                due.unwrap_or(now + age).min(until)
            });
        let next = trim.into_iter().chain(refresh).min();
        if next.is_none() {
            pool.keeper = false;
        }
        next
    }

    /// Rebuild the sandboxes grown too old to wait longer (while the pool is kept fresh),
    /// and refill or trim the pool to its size now.
    fn upkeep(self: &Arc<Self>) {
        let aged: Vec<Built> = {
            let mut pool = self.pool();
            match (self.fresh_until(&pool), self.refresh_age()) {
                (Some(until), Some(age)) if Instant::now() < until => {
                    let (aged, young) = std::mem::take(&mut pool.ready)
                        .into_iter()
                        .partition(|b| b.at.elapsed() >= age);
                    pool.ready = young;
                    aged
                }
                _ => Vec::new(),
            }
        };
        drop(aged);
        self.fill();
    }
}

/// Below this [`SandboxSettings::ahead_max_age`] sandboxes are not kept fresh (a test's
/// pool whose sandboxes are always too old would rebuild without pause).
const MIN_REFRESH_AGE: Duration = Duration::from_millis(500);

/// The pool's upkeep task ([`Shared::keep`]): if it is dropped before it ended (its
/// runtime ended), its flag is cleared so that a later call may start another.
struct Keeper {
    shared: Arc<Shared>,
    running: bool,
}

impl Keeper {
    /// Ended by itself: its flag is already cleared (and may be another keeper's now).
    fn ended(&mut self) {
        self.running = false;
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if self.running {
            let mut pool = self.shared.pool();
            pool.keeper = false;
        }
    }
}

/// One sandbox being built for the pool; counted until the build ends, however it ends
/// (a runtime shutting down drops the task mid-way).
struct Building(Arc<Shared>);

impl Drop for Building {
    fn drop(&mut self) {
        let mut pool = self.0.pool();
        pool.building = pool.building.saturating_sub(1);
        drop(pool);
        self.0.changed.notify_waiters();
    }
}

impl Shared {
    /// The sandbox a call runs in: one built ahead if one is ready, else one built now.
    /// The probe builds its own and fills nothing: the pool starts only once the probe
    /// has said yes.
    pub(super) async fn sandbox_for(
        self: &Arc<Self>,
        probe: bool,
        run: &Run<'_>,
    ) -> Result<Built, SandboxError> {
        let ahead = if probe {
            None
        } else {
            self.take_ahead(run.deadline, run.cancel).await
        };
        Ok(match ahead {
            Some(built) => {
                self.served_ahead
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                built
            }
            None => {
                let lease = self.identities.lease(run.deadline, run.cancel).await?;
                self.build(lease, run.groups, false).await?
            }
        })
    }

    /// A sandbox built ahead, if one is ready (for this runtime, and at most
    /// [`SandboxSettings::ahead_max_age`] old; the others are put aside in `unusable`);
    /// else whether one is being built.
    fn take_ready(&self, unusable: &mut Vec<Built>) -> Result<Built, bool> {
        let here = tokio::runtime::Handle::current().id();
        let max_age = self.settings.ahead_max_age;
        let mut pool = self.pool();
        let (usable, old): (Vec<Built>, Vec<Built>) = std::mem::take(&mut pool.ready)
            .into_iter()
            .partition(|b| b.runtime == here && b.at.elapsed() < max_age);
        pool.ready = usable;
        unusable.extend(old);
        pool.ready.pop().ok_or(pool.building > 0)
    }

    /// A call found no sandbox ready although none had merely grown old: calls come
    /// faster than the pool is rebuilt. Keep more built ahead for a while.
    fn starved(self: &Arc<Self>) {
        let mut pool = self.pool();
        let base = self.settings.ahead;
        if base == 0 {
            return;
        }
        pool.target = (pool.target.max(base) * 2).min(self.settings.ahead_max.max(base));
        pool.starved_at = Some(Instant::now());
        drop(pool);
        self.keep();
    }

    /// A sandbox built ahead: one ready now, or the next one being built (it is further
    /// along than one this call would start), unless none is being built.
    async fn take_ahead(
        self: &Arc<Self>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Option<Built> {
        let _waiting = Waiting::new(self);
        let mut unusable = Vec::new();
        let mut counted = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let found = self.take_ready(&mut unusable);
            if !unusable.is_empty() {
                // Ending them (signals, closing pipes, a thread each) is not this call's
                // wait.
                let old = std::mem::take(&mut unusable);
                counted = true;
                tokio::spawn(async move {
                    tokio::time::sleep(AFTER_ANSWER).await;
                    drop(old);
                });
            }
            if found.is_err() && !counted {
                counted = true;
                self.starved();
            }
            match found {
                Ok(built) => {
                    self.raise(&built);
                    return Some(built);
                }
                Err(false) => return None,
                // This call waits for the sandboxes being built ahead (all in `groups`):
                // they no longer run in the background.
                Err(true) => {
                    if let Some(normal) = self.normal_nice {
                        self.groups.set_nice_all(normal);
                    }
                }
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline.into()) => return None,
                () = cancel.cancelled() => return None,
            }
        }
    }

    /// Build sandboxes ahead until [`SandboxSettings::ahead`] are ready or being built, off the
    /// caller's path. A uid is taken only if one is free at once: calls come first.
    pub(super) fn fill(self: &Arc<Self>) {
        let mut pool = self.pool();
        let grown = pool
            .starved_at
            .is_some_and(|at| at.elapsed() < self.settings.grown_for);
        if !grown {
            pool.target = self.settings.ahead;
        }
        let target = pool.target.max(self.settings.ahead);
        // Grown for a burst that has passed: the extra ones go (the oldest first).
        if pool.ready.len() > target {
            pool.ready.sort_by_key(|b| std::cmp::Reverse(b.at));
            let extra = pool.ready.split_off(target);
            drop(pool);
            drop(extra);
            pool = self.pool();
        }
        while pool.enabled && pool.ready.len() + pool.building < target {
            let Some(lease) = self.identities.try_lease() else {
                return;
            };
            pool.building += 1;
            let slot = Building(self.clone());
            tokio::spawn(async move {
                let shared = slot.0.clone();
                let started =
                    tokio::task::spawn_blocking(move || shared.start(lease, &shared.groups, true))
                        .await;
                let built = match started {
                    Ok(Ok((built, frame))) => {
                        // Its group joined `groups` when it was spawned; a call that
                        // began waiting since may have raised the groups before that.
                        let waiting = slot.0.pool().waiting;
                        if waiting > 0 {
                            slot.0.raise(&built);
                        }
                        slot.0.hand_plan(built, &frame, true).await
                    }
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(SandboxError::Setup(format!("building ahead: {e}"))),
                };
                {
                    let mut pool = slot.0.pool();
                    match built {
                        Ok(built) if built.set_up => pool.ready.push(built),
                        // Calls build their own, and say why it fails.
                        failed => {
                            let why = match &failed {
                                Ok(_) => "the helper did not set up".to_string(),
                                Err(e) => e.to_string(),
                            };
                            tracing::warn!(
                                error = %why,
                                "a sandbox built ahead failed: no more are built ahead"
                            );
                            pool.enabled = false;
                        }
                    }
                }
                slot.0.changed.notify_waiters();
            });
        }
    }
}
