//! The executor's only `unsafe`: what a tool's command does between fork and exec, and
//! signalling process groups. Everything in the child is async-signal-safe.

use std::io;

use nl2sh_proto::channels::Identity;

/// Android's shell user and the groups `adb shell` has that tools need (input, graphics,
/// network, sdcard access). AOSP: AID_SHELL 2000, AID_INPUT 1004, AID_LOG 1007,
/// AID_ADB 1011, AID_SDCARD_RW 1015, AID_NET_BT 3002, AID_INET 3003, AID_NET_BW_STATS 3006,
/// AID_READPROC 3009, AID_UHID 3011, AID_GRAPHICS 1003, AID_EVERYBODY 9997.
pub const AID_SHELL: u32 = 2000;
const SHELL_GROUPS: [libc::gid_t; 13] = [
    1003, 1004, 1007, 1011, 1015, 1028, 3001, 3002, 3003, 3006, 3009, 3011, 9997,
];

/// What a tool's child process does before exec.
#[derive(Debug, Clone, Copy)]
pub struct ChildSetup {
    /// Become this uid (and matching gid/groups) — only used when we are root.
    pub become_shell: bool,
}

impl ChildSetup {
    /// Whether the child must run code between fork and exec (an identity change).
    pub fn needs_hook(self) -> bool {
        self.become_shell
    }

    /// The setup for `identity`, given the executor's own euid; `None` when this executor
    /// cannot act as that identity.
    pub fn for_identity(identity: Identity, euid: u32) -> Option<Self> {
        match identity {
            Identity::Launching => Some(Self {
                become_shell: false,
            }),
            Identity::Root => (euid == 0).then_some(Self {
                become_shell: false,
            }),
            Identity::Shell if euid == AID_SHELL => Some(Self {
                become_shell: false,
            }),
            Identity::Shell => (euid == 0).then_some(Self { become_shell: true }),
        }
    }
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Install the child setup on a command.
pub fn install(cmd: &mut tokio::process::Command, setup: ChildSetup) {
    let hook = move || child_setup(setup);
    // SAFETY: `child_setup` makes only async-signal-safe system calls on a copied plain
    // value; it allocates nothing and takes no locks, as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(hook);
    }
}

fn child_setup(setup: ChildSetup) -> io::Result<()> {
    // Its own session, hence its own process group: the whole command line (pipelines,
    // background jobs) can be killed as one, and it has no controlling terminal.
    // SAFETY: setsid has no arguments.
    check(unsafe { libc::setsid() } as libc::c_long)?;
    if setup.become_shell {
        // SAFETY: setgroups reads SHELL_GROUPS.len() ids from a static array.
        let rc = unsafe { libc::setgroups(SHELL_GROUPS.len(), SHELL_GROUPS.as_ptr()) };
        check(rc as libc::c_long)?;
        // SAFETY: integer arguments only.
        check(unsafe { libc::setresgid(AID_SHELL, AID_SHELL, AID_SHELL) } as libc::c_long)?;
        // SAFETY: integer arguments only.
        check(unsafe { libc::setresuid(AID_SHELL, AID_SHELL, AID_SHELL) } as libc::c_long)?;
    }
    // The direct child dies with the executor even if nothing else reaches it.
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } as libc::c_long)?;
    // Signals the executor ignores must not stay ignored in tools.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: restoring the default disposition touches no memory.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    Ok(())
}

/// A process group this executor started: its leader's pid, always above 1, so that
/// signalling it can never address our own group (0) or every process (-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessGroup(i32);

impl ProcessGroup {
    /// The group a child leads (it called setsid or setpgid: pgid == pid).
    pub fn led_by(pid: u32) -> Option<Self> {
        i32::try_from(pid).ok().filter(|&p| p > 1).map(Self)
    }

    /// SIGKILL every process of the group. False when the group no longer exists.
    pub fn kill(self) -> bool {
        // SAFETY: kill with integer arguments; a negative pid (below -1, by construction)
        // addresses exactly this process group.
        unsafe { libc::kill(-self.0, libc::SIGKILL) == 0 }
    }

    /// Does the group still have members?
    pub fn alive(self) -> bool {
        // SAFETY: signal 0 only checks for existence and permission.
        unsafe { libc::kill(-self.0, 0) == 0 }
    }

    /// Set every process of the group to `nice` (`setpriority(PRIO_PGRP)`).
    pub fn set_nice(self, nice: i32) -> io::Result<()> {
        // SAFETY: setpriority with integer arguments; `self.0` is above 1 by construction.
        let rc = unsafe { libc::setpriority(libc::PRIO_PGRP as _, self.0 as libc::id_t, nice) };
        check(rc as libc::c_long)
    }
}

pub mod evdev;
pub mod sandbox;
