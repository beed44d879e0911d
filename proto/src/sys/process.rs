//! What a worker that confines itself (netd, the Web console) asks the kernel about
//! itself first, before any thread exists: who it runs as, whether the way back to root
//! is closed, which capabilities it holds, its process flags and whether the kernel has
//! seccomp; and the one setting it makes before Landlock and the filter, being
//! non-dumpable. Each worker decides what it refuses and says so in its own words.

use std::io;

/// A way back to privilege, for which a worker refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("it must not run as root (uid {uid}, euid {euid})")]
    Root { uid: u32, euid: u32 },
    #[error("setuid(0) succeeded from euid {euid}: privileges were not dropped")]
    WayBack { euid: u32 },
    #[error("it holds capabilities (effective {effective:#x}, permitted {permitted:#x})")]
    Capabilities { effective: u64, permitted: u64 },
    #[error("cannot read its capabilities: {0}")]
    ReadCapabilities(io::Error),
}

/// The effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuse to go on if this process is root, can become root again, or holds any
/// capability.
///
/// The supervisor drops a worker's identity between fork and exec (docs/ARCHITECTURE.md,
/// "Starting a worker"); this is the worker's own check that it happened: neither the
/// real nor the effective uid is 0, `setuid(0)` fails (which also covers a saved uid of
/// 0 and a retained CAP_SETUID), and the effective and permitted capability sets are
/// empty (with no_new_privs nothing can refill them). Call before any thread exists:
/// setuid and capabilities act per thread.
pub fn verify_unprivileged() -> Result<(), PrivilegeError> {
    // SAFETY: getuid has no preconditions, touches no memory and cannot fail.
    let uid = unsafe { libc::getuid() };
    let euid = effective_uid();
    if uid == 0 || euid == 0 {
        return Err(PrivilegeError::Root { uid, euid });
    }
    verify_no_way_back(euid)?;
    let caps = capabilities()?;
    if caps.effective != 0 || caps.permitted != 0 {
        return Err(PrivilegeError::Capabilities {
            effective: caps.effective,
            permitted: caps.permitted,
        });
    }
    Ok(())
}

/// Refuse to go on if `setuid(0)` succeeds from `euid` (this process's effective uid):
/// it fails for a process whose real, effective and saved uids are not 0 and that holds
/// no CAP_SETUID.
pub fn verify_no_way_back(euid: u32) -> Result<(), PrivilegeError> {
    // SAFETY: setuid takes a plain integer and touches no memory of ours. If it succeeds
    // the caller is about to exit anyway; nothing relies on the identity staying
    // unchanged.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(PrivilegeError::WayBack { euid });
    }
    Ok(())
}

/// The capability sets of this thread, 64 bits each.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
}

/// `struct __user_cap_header_struct` of `<linux/capability.h>`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `<linux/capability.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two data structs, 64 capabilities.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Read this thread's capability sets (`capget`; libc has no wrapper).
pub fn capabilities() -> Result<Capabilities, PrivilegeError> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget reads the header we own and, for version 3, writes exactly two
    // data structs into the array we own; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(PrivilegeError::ReadCapabilities(io::Error::last_os_error()));
    }
    let wide = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    Ok(Capabilities {
        effective: wide(data[0].effective, data[1].effective),
        permitted: wide(data[0].permitted, data[1].permitted),
    })
}

/// Make this process non-dumpable: its `/proc/<pid>` entries then belong to root, so
/// another process of the same uid cannot read its memory, descriptors or environment,
/// nor attach to it, nor reach the host's mount namespace through its
/// `/proc/<pid>/root`.
pub fn forbid_inspection() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Who a worker runs as, and the process flags confinement relies on.
#[derive(Debug, Clone, Copy)]
pub struct ProcessState {
    pub uid: u32,
    pub gid: u32,
    pub no_new_privs: bool,
    pub dumpable: bool,
    /// Threads of this process, if /proc says.
    pub threads: Option<usize>,
}

/// Read [`ProcessState`] (before the seccomp filter, which refuses these prctl reads, and
/// before Landlock, which puts /proc out of reach).
pub fn process_state() -> ProcessState {
    // SAFETY: geteuid/getegid have no preconditions, touch no memory and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: prctl with integer arguments only; these options only read a flag.
    let no_new_privs = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
    // SAFETY: as above.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) } != 0;
    let threads = std::fs::read_dir("/proc/self/task").ok().map(|d| d.count());
    ProcessState {
        uid,
        gid,
        no_new_privs,
        dumpable,
        threads,
    }
}

/// Does this kernel have seccomp at all? (`PR_GET_SECCOMP` fails with EINVAL without it.)
pub fn kernel_has_seccomp() -> bool {
    // SAFETY: prctl with integer arguments only; reads our seccomp mode.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_root_and_accepts_an_unprivileged_uid() {
        let result = verify_unprivileged();
        if effective_uid() == 0 {
            assert!(
                matches!(result, Err(PrivilegeError::Root { .. })),
                "{result:?}"
            );
        } else if capabilities().is_ok_and(|c| c.effective == 0 && c.permitted == 0) {
            // An ordinary test user cannot become root, so the check passes.
            assert!(result.is_ok(), "{result:?}");
        }
    }

    #[test]
    fn reads_its_own_capabilities() {
        let caps = capabilities().unwrap();
        if effective_uid() == 0 {
            // Root (outside a user namespace that strips it) holds some.
            assert_ne!(caps.permitted, 0, "{caps:?}");
        }
        assert_eq!(caps.effective & !caps.permitted, 0, "{caps:?}");
    }

    #[test]
    fn the_messages_say_what_was_found() {
        let root = PrivilegeError::Root { uid: 0, euid: 0 };
        assert_eq!(root.to_string(), "it must not run as root (uid 0, euid 0)");
        let caps = PrivilegeError::Capabilities {
            effective: 0,
            permitted: 0x20,
        };
        assert_eq!(
            caps.to_string(),
            "it holds capabilities (effective 0x0, permitted 0x20)"
        );
    }
}
