//! Building one sandbox: its uid's cgroup prepared, the helper started and handed its
//! plan, then (for one built ahead) waiting until it says it is set up. A [`Built`] is the
//! helper waiting, confined, for its call.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nl2sh_proto::channels::{Gid, SandboxPlan, Uid};

use super::uids::Lease;
use super::{cgroup, masks, SandboxError, Shared, READY_BYTE};
use crate::exec::{self, ProcessGroups};

/// How long a sandbox built ahead may take to set up before it is given up.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15);

/// A helper that has set a sandbox up and waits, confined, for its call's frame.
pub(super) struct Built {
    /// The runtime its pipes and child belong to: only a call on that runtime can use it
    /// (the executor has one for its life; tests start one per call).
    pub(super) runtime: tokio::runtime::Id,
    /// When it was built: its view of the device (the masks' paths) is from then.
    pub(super) at: Instant,
    /// Always `Some` until dropped.
    pub(super) lease: Option<Lease>,
    /// Taken by the call that uses it.
    pub(super) helper: Option<exec::Started>,
    /// The uid's cgroup counters when it was built.
    pub(super) counters_before: Option<cgroup::Counters>,
    /// The payload said it is set up and waits ([`READY_BYTE`]). If not, running the
    /// call reports why (the helper's exit status and stderr).
    pub(super) set_up: bool,
    /// The sandbox's mount namespace, held open by the executor (built ahead only): the
    /// helper is then not the last to leave it, so its exit, which the call's answer waits
    /// for, does not tear the namespace down. That teardown unmounts the view and waits
    /// for an expedited RCU grace period (about 0.35 ms with the helper in D state, seen
    /// with `perf sched`); it happens off the call's path instead ([`Shared::after_answer`]).
    pub(super) mount_namespace: Option<OwnedFd>,
}

impl Built {
    pub(super) fn uid(&self) -> Option<u32> {
        self.lease.as_ref().map(|l| l.uid)
    }
}

impl Drop for Built {
    fn drop(&mut self) {
        // Never used (the executor is stopping, a test's runtime ended, the call's future
        // was dropped): end it, not only its helper, and free its uid only once its
        // processes are gone, as after a killed call.
        // Its mount namespace goes on the same thread: closing it waits for a grace period.
        let namespace = self.mount_namespace.take();
        if let Some(helper) = self.helper.take() {
            helper.kill();
            drop(helper);
            let lease = self.lease.take();
            std::thread::spawn(move || {
                drop(namespace);
                if let Some(mut lease) = lease {
                    lease.settle_blocking();
                }
            });
        } else if namespace.is_some() {
            std::thread::spawn(move || drop(namespace));
        }
    }
}

/// The mount namespace of the process `pid` (a helper that has set its sandbox up).
fn mount_namespace_of(pid: Option<u32>) -> Option<OwnedFd> {
    let path = format!("/proc/{}/ns/mnt", pid?);
    match std::fs::File::open(&path) {
        Ok(file) => Some(OwnedFd::from(file)),
        Err(e) => {
            tracing::debug!(error = %e, "the mount namespace of a sandbox built ahead");
            None
        }
    }
}

impl Shared {
    /// Build a sandbox as `lease`'s uid: prepare its cgroup, start the helper and give
    /// it the plan. It then sets everything up and waits for its call's frame.
    ///
    /// With `wait`, it returns once the payload says it is set up ([`Built::set_up`]),
    /// or failed to (at most [`BUILD_TIMEOUT`]); without, at once, and the call's run
    /// waits for the setup under the call's deadline.
    pub(super) async fn build(
        &self,
        lease: Lease,
        groups: &ProcessGroups,
        wait: bool,
    ) -> Result<Built, SandboxError> {
        let (built, frame) = self.start(lease, groups, false)?;
        self.hand_plan(built, &frame, wait).await
    }

    /// The synchronous part of [`Shared::build`] (cgroup files, the spawn): for a sandbox
    /// built ahead it runs on a blocking thread, off the executor's one thread, lowered
    /// to the background priority, which the helper inherits (see
    /// [`Shared::normal_nice`]).
    pub(super) fn start(
        &self,
        lease: Lease,
        groups: &ProcessGroups,
        ahead: bool,
    ) -> Result<(Built, Vec<u8>), SandboxError> {
        let _lowered = self.normal_nice.filter(|_| ahead).and_then(|normal| {
            nl2sh_proto::sys::thread::LoweredThread::new(normal)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot lower a sandbox built ahead"))
                .ok()
        });
        let Some((program, args)) = self.settings.helper.split_first() else {
            return Err(SandboxError::Unavailable("no helper configured".into()));
        };
        let uid = lease.uid;
        // Set for every call, not once per uid: another tree may have run a call as this
        // uid meanwhile, with limits of its own.
        let cgroup_procs = match &self.cgroups {
            Some(c) => c
                .prepare(uid, self.settings.limits)
                .map_err(|e| SandboxError::Setup(format!("the call's cgroup: {e}")))?
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            None => Vec::new(),
        };
        let counters_before = self.cgroups.as_ref().and_then(|c| c.counters(uid));
        let plan = SandboxPlan {
            cgroup_procs,
            uid: Uid(uid),
            gid: Gid(uid),
            masks: masks::patterns(&self.settings.own_files),
            scratch_bytes: self.settings.scratch_bytes,
            limits: self.settings.limits,
        };
        let frame = nl2sh_proto::frame::encode(0, &plan)
            .map_err(|e| SandboxError::Setup(format!("encoding the plan: {e}")))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        exec::own_group(&mut cmd);
        let mut helper = exec::start(cmd, true, None, groups)?;
        helper.exit_record = true;
        // Owned from here on: dropped (cancelled) mid-way, it ends the helper and settles.
        let built = Built {
            runtime: tokio::runtime::Handle::current().id(),
            at: Instant::now(),
            lease: Some(lease),
            helper: Some(helper),
            counters_before,
            set_up: false,
            mount_namespace: None,
        };
        Ok((built, frame))
    }

    /// Give a started helper its plan; with `wait`, wait until it says it is set up.
    pub(super) async fn hand_plan(
        &self,
        mut built: Built,
        frame: &[u8],
        wait: bool,
    ) -> Result<Built, SandboxError> {
        // A helper that died before reading it, or failed to set up, is reported by its
        // exit status (and its stderr) when the call is run.
        if let Some(helper) = built.helper.as_mut() {
            if let Err(e) = helper.write_stdin(frame).await {
                tracing::debug!(error = %e, "the sandbox helper did not take its plan");
            }
            if wait {
                let said = tokio::time::timeout(BUILD_TIMEOUT, helper.read_stdout_byte()).await;
                built.set_up = matches!(said, Ok(Ok(Some(READY_BYTE))));
                if built.set_up {
                    built.mount_namespace = mount_namespace_of(helper.id());
                }
            } else {
                // Its "set up" byte is then the first of its output: not output.
                helper.preamble = Some(READY_BYTE);
            }
        }
        Ok(built)
    }

    /// Put `built`'s helper, and the payload process it forked, back at the executor's
    /// priority: a call's command never runs lowered.
    pub(super) fn raise(&self, built: &Built) {
        let (Some(normal), Some(group)) = (
            self.normal_nice,
            built.helper.as_ref().and_then(exec::Started::group),
        ) else {
            return;
        };
        if let Err(e) = group.set_nice(normal) {
            // Gone already (the call then reports how it ended), or refused: the command
            // runs at the background priority, slower but confined the same.
            tracing::warn!(error = %e, ?group, "cannot put a sandbox back at the normal priority");
        }
    }
}
