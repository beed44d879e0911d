//! A thread that does background work at the lowest CPU priority and can be hurried
//! back to its normal priority, by itself or by another thread of the process.
//!
//! Why (docs/AUDIT.md, "Background work yields to calls"): approvald's audit
//! writer commits batches of rows nobody waits for. At its normal priority, a batch of a
//! few hundred microseconds that starts while a call is on its way through the same
//! core delays that call by as much; at nice 19 the call's threads preempt it.
//!
//! On Linux, `setpriority(PRIO_PROCESS, tid, …)` acts on one thread. Going back up
//! (a lower nice) needs `CAP_SYS_NICE` or an `RLIMIT_NICE` that allows it:
//! [`Background::for_this_thread`] lowers nothing when the way back is closed, so a
//! thread is never left at nice 19 for good.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// The nice value background work runs at.
pub const BACKGROUND_NICE: i32 = 19;

/// `CAP_SYS_NICE` (linux/capability.h).
const CAP_SYS_NICE: u32 = 23;

/// One thread's background priority: lowered by [`Background::lower`] on that thread,
/// restored by [`Background::restore`] on that thread or from any other.
#[derive(Debug)]
pub struct Background {
    tid: libc::pid_t,
    /// The thread's nice when it was set up: what it goes back to.
    normal: i32,
    lowered: AtomicBool,
}

impl Background {
    /// Set up the calling thread, if it could go back to its present priority after
    /// lowering it; `None` otherwise (not root and no `RLIMIT_NICE` for it, or already
    /// at the lowest priority).
    pub fn for_this_thread() -> Option<Background> {
        Some(Background {
            tid: this_thread(),
            normal: restorable_nice()?,
            lowered: AtomicBool::new(false),
        })
    }

    /// Lower the thread to [`BACKGROUND_NICE`]. A [`Background::restore`] from another
    /// thread racing with this can leave it lowered until the next one: one batch of work.
    pub fn lower(&self) -> io::Result<()> {
        self.lowered.store(true, Ordering::Release);
        set_nice(self.tid, BACKGROUND_NICE).inspect_err(|_| {
            self.lowered.store(false, Ordering::Release);
        })
    }

    /// Back to the normal priority, if lowered; from any thread (someone now waits for
    /// the work). One atomic swap when it is not lowered.
    pub fn restore(&self) -> io::Result<()> {
        if self.lowered.swap(false, Ordering::AcqRel) {
            set_nice(self.tid, self.normal)?;
        }
        Ok(())
    }
}

/// The calling thread's id.
pub fn this_thread() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The nice value of thread `tid`.
pub fn nice_of(tid: libc::pid_t) -> io::Result<i32> {
    // getpriority returns the nice value, and -1 both for nice -1 and for an error:
    // errno tells them apart.
    nix::errno::Errno::clear();
    // SAFETY: getpriority takes integers and touches no memory of ours.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS as _, tid as libc::id_t) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(nice)
}

/// Set thread `tid`'s nice value.
pub fn set_nice(tid: libc::pid_t, nice: i32) -> io::Result<()> {
    // SAFETY: setpriority takes integers and touches no memory of ours.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, tid as libc::id_t, nice) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's nice, if this process could set a thread (or a process it
/// starts) back to it after lowering it.
pub fn restorable_nice() -> Option<i32> {
    let nice = nice_of(this_thread()).ok()?;
    (nice < BACKGROUND_NICE && may_raise_to(nice)).then_some(nice)
}

/// The calling thread at [`BACKGROUND_NICE`] until this is dropped, then back at
/// `normal` (a [`restorable_nice`]): a process it starts meanwhile inherits the low
/// priority from its first instruction. Keep it on the thread that made it.
#[derive(Debug)]
pub struct LoweredThread {
    tid: libc::pid_t,
    normal: i32,
}

impl LoweredThread {
    pub fn new(normal: i32) -> io::Result<LoweredThread> {
        let tid = this_thread();
        set_nice(tid, BACKGROUND_NICE)?;
        Ok(LoweredThread { tid, normal })
    }
}

impl Drop for LoweredThread {
    fn drop(&mut self) {
        if let Err(e) = set_nice(self.tid, self.normal) {
            tracing::error!(error = %e, "cannot put a thread back at its normal priority");
        }
    }
}

/// May this process lower a thread's nice to `nice` (the kernel's `can_nice`)?
fn may_raise_to(nice: i32) -> bool {
    let holds_cap_sys_nice = super::process::capabilities()
        .map(|c| c.effective & (1 << CAP_SYS_NICE) != 0)
        .unwrap_or(false);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `lim`, which outlives the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut lim) };
    // RLIMIT_NICE is 20 - nice: 20 allows nice 0, 40 allows -20.
    let allowed_by_limit = rc == 0 && lim.rlim_cur >= (20 - nice.clamp(-20, 19)) as libc::rlim_t;
    holds_cap_sys_nice || allowed_by_limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowered_work_runs_at_nice_19_and_the_thread_gets_its_priority_back() {
        // A fresh thread: lowering is per thread and must not touch the test harness's.
        std::thread::spawn(|| {
            let tid = this_thread();
            let before = nice_of(tid).expect("nice");
            let Some(bg) = Background::for_this_thread() else {
                // Not root and no RLIMIT_NICE: nothing may be lowered, nothing is.
                assert!(!may_raise_to(before));
                return;
            };
            assert_eq!(bg.normal, before);
            bg.lower().expect("lower");
            assert_eq!(nice_of(tid).expect("nice"), BACKGROUND_NICE);
            bg.restore().expect("restore");
            assert_eq!(nice_of(tid).expect("nice"), before);
            // Restoring twice is a no-op.
            bg.restore().expect("restore");
            assert_eq!(nice_of(tid).expect("nice"), before);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn another_thread_restores_a_lowered_one() {
        let (lowered_tx, lowered_rx) = std::sync::mpsc::channel();
        let (checked_tx, checked_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let bg = Background::for_this_thread().map(std::sync::Arc::new);
            if let Some(bg) = &bg {
                bg.lower().expect("lower");
            }
            lowered_tx.send(bg.clone()).expect("send");
            checked_rx.recv().expect("recv");
            bg.map(|bg| nice_of(this_thread()).expect("nice") == bg.normal)
        });
        let bg = lowered_rx.recv().expect("recv");
        if let Some(bg) = &bg {
            assert_eq!(nice_of(bg.tid).expect("nice"), BACKGROUND_NICE);
            bg.restore().expect("restore");
        }
        checked_tx.send(()).expect("send");
        let back = worker.join().expect("thread");
        assert_eq!(back, bg.map(|_| true));
    }

    #[test]
    fn a_process_started_while_lowered_runs_low_and_the_thread_is_put_back() {
        std::thread::spawn(|| {
            let Some(normal) = restorable_nice() else {
                return;
            };
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("5");
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            let lowered = LoweredThread::new(normal).expect("lowered");
            let mut child = cmd.spawn().expect("spawn");
            drop(lowered);
            let pid = child.id() as libc::pid_t;
            assert_eq!(nice_of(this_thread()).expect("nice"), normal);
            assert_eq!(nice_of(pid).expect("nice"), BACKGROUND_NICE);
            set_nice(pid, normal).expect("raise");
            assert_eq!(nice_of(pid).expect("nice"), normal);
            let _ = child.kill();
            let _ = child.wait();
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_thread_already_at_the_lowest_priority_is_left_alone() {
        std::thread::spawn(|| {
            set_nice(this_thread(), BACKGROUND_NICE).expect("lower");
            assert!(Background::for_this_thread().is_none());
        })
        .join()
        .expect("thread");
    }
}
