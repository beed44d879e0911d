//! The uids sandboxed calls run as: one per running call, leased from the range for this
//! tree and claimed device-wide (another nl2sh tree may use the same range), and given
//! back only once no process runs as it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use nl2sh_proto::channels::UidRange;

use super::procs::processes_in;
use super::SandboxError;

/// The free uids of the range; a call holds one ([`Lease`]) from before its helper starts
/// until the helper has exited (and with it, every process of the call's PID namespace).
/// Other nl2sh trees on the device may use the same range (two configurations on the
/// defaults): a uid is also claimed device-wide ([`claim`]) while a call runs as it.
pub(super) struct Identities {
    free: std::sync::Mutex<Vec<u32>>,
    /// Permits for [`Ceiling::slots`] calls at once (all of `free` unless the shared
    /// ceiling is kept by counting calls).
    available: Arc<tokio::sync::Semaphore>,
    /// The uids of the range, and how many may be leased at once.
    count: u32,
    slots: u32,
}

/// One uid of the range, given back when dropped.
pub(super) struct Lease {
    identities: Arc<Identities>,
    pub(super) uid: u32,
    /// Processes of the uid outlived the call: never hand it out again.
    quarantined: bool,
    // Fields drop in order: the claim ends before the permit lets the next caller in.
    claim: Option<Claim>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.quarantined {
            tracing::error!(
                uid = self.uid,
                "processes of a finished sandboxed call did not end: its uid stays unused"
            );
            // Held for the executor's life: no other tree may hand the uid out either.
            std::mem::forget(self.claim.take());
            return;
        }
        if let Ok(mut free) = self.identities.free.lock() {
            free.push(self.uid);
        }
    }
}

/// How long a killed call's processes may take to die before its uid is set aside.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

impl Lease {
    /// Wait until no process runs with this lease's uid; if some still do after
    /// [`SETTLE_TIMEOUT`], the uid is never handed out again by this tree.
    pub(super) async fn settle(&mut self) {
        let until = Instant::now() + SETTLE_TIMEOUT;
        while !self.settled(until) {
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// [`Lease::settle`] on a thread of its own (from a `Drop`).
    pub(super) fn settle_blocking(&mut self) {
        let until = Instant::now() + SETTLE_TIMEOUT;
        while !self.settled(until) {
            std::thread::sleep(SETTLE_POLL);
        }
    }

    /// No process runs as the uid (true), or `until` passed and it is quarantined (true).
    fn settled(&mut self, until: Instant) -> bool {
        let only = UidRange {
            first: self.uid,
            count: 1,
        };
        if processes_in(only).is_empty() {
            return true;
        }
        if Instant::now() >= until {
            self.quarantined = true;
            return true;
        }
        false
    }
}

const SETTLE_POLL: Duration = Duration::from_millis(5);

/// How long a caller waits before looking again when every free uid of the range is
/// claimed by another tree.
const CLAIM_RETRY: Duration = Duration::from_millis(50);

/// Where the device-wide claims live: a root-only directory on a tmpfs, so nothing
/// survives a reboot and no unprivileged process can take a claim (an abstract socket
/// name, which any app could bind, would let it deny every uid). `/run` on Linux; Android
/// has none, and its `/dev` is a tmpfs.
fn claims_dir() -> &'static Path {
    if Path::new("/run").is_dir() {
        Path::new("/run/nl2sh-sandbox-uids")
    } else {
        Path::new("/dev/nl2sh-sandbox-uids")
    }
}

/// Claim `uid` for one call, device-wide: an exclusive `flock` on `<uid>.lock` in
/// [`claims_dir`]. The kernel releases it when the file closes or its process dies, so a
/// crashed tree leaves no stale claim; sandboxed commands can take no lock at all.
pub(super) fn claim(uid: u32) -> Option<Claim> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = claims_dir();
    if !dir.is_dir() {
        let _ = std::fs::DirBuilder::new()
            .mode(nl2sh_proto::state_layout::PRIVATE_DIR_MODE)
            .create(dir);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(nl2sh_proto::state_layout::PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(format!("{uid}.lock")))
        .ok()?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()
}

/// A held claim; dropping it releases the lock.
pub(super) type Claim = nix::fcntl::Flock<std::fs::File>;

impl Identities {
    pub(super) fn new(range: UidRange, slots: u32) -> Arc<Self> {
        // Lowest uids first (popped from the end), so a quiet device reuses a few.
        let free: Vec<u32> = (0..range.count)
            .rev()
            .filter_map(|i| range.first.checked_add(i))
            .collect();
        let slots = slots.min(range.count);
        let available = Arc::new(tokio::sync::Semaphore::new(free.len().min(slots as usize)));
        Arc::new(Identities {
            free: std::sync::Mutex::new(free),
            available,
            count: range.count,
            slots,
        })
    }

    /// What a call that waited in vain for a uid is told.
    fn busy(&self) -> SandboxError {
        if self.slots < self.count {
            SandboxError::Full(self.slots)
        } else {
            SandboxError::Busy(self.count)
        }
    }

    /// A free uid claimed device-wide, for `permit`; `None` if every free one is claimed
    /// by another tree.
    fn claim_one(
        self: &Arc<Self>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Lease, tokio::sync::OwnedSemaphorePermit> {
        let claimed = self.free.lock().ok().and_then(|mut free| {
            let at = (0..free.len())
                .rev()
                .find_map(|i| Some((i, claim(free[i])?)))?;
            Some((free.remove(at.0), at.1))
        });
        match claimed {
            Some((uid, claim)) => Ok(Lease {
                identities: self.clone(),
                uid,
                quarantined: false,
                claim: Some(claim),
                _permit: permit,
            }),
            None => Err(permit),
        }
    }

    /// A uid now, without waiting (for a sandbox built ahead), or `None`.
    pub(super) fn try_lease(self: &Arc<Self>) -> Option<Lease> {
        let permit = self.available.clone().try_acquire_owned().ok()?;
        self.claim_one(permit).ok()
    }

    pub(super) async fn lease(
        self: &Arc<Self>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Lease, SandboxError> {
        loop {
            let permit = tokio::select! {
                permit = self.available.clone().acquire_owned() => {
                    permit.map_err(|_| self.busy())?
                }
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(self.busy())
                }
                () = cancel.cancelled() => return Err(SandboxError::Cancelled),
            };
            match self.claim_one(permit) {
                Ok(lease) => return Ok(lease),
                // Every uid this tree has free runs another tree's call: wait for one.
                Err(permit) => drop(permit),
            }
            tokio::select! {
                () = tokio::time::sleep(CLAIM_RETRY) => {}
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(SandboxError::Busy(self.count))
                }
                () = cancel.cancelled() => return Err(SandboxError::Cancelled),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_waited_in_vain_is_told_which_bound_held_it() {
        let range = UidRange {
            first: 0x9500_0000,
            count: 64,
        };
        assert!(matches!(
            Identities::new(range, 4).busy(),
            SandboxError::Full(4)
        ));
        assert!(matches!(
            Identities::new(range, 64).busy(),
            SandboxError::Busy(64)
        ));
        assert_eq!(Identities::new(range, 4).available.available_permits(), 4);
        assert_eq!(
            Identities::new(range, 100).available.available_permits(),
            64
        );
    }
}
