//! System calls the sandbox helper needs that have no safe wrapper in `nix`: the new
//! mount API (`mount_setattr`, `open_tree`, `move_mount`), `fork` of the single-threaded
//! helper, and restoring a signal's default action to die of it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Mount attributes the sandbox sets or clears.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attrs {
    pub read_only: bool,
    pub nosuid: bool,
    pub nodev: bool,
}

impl Attrs {
    fn bits(self) -> u64 {
        (if self.read_only { MOUNT_ATTR_RDONLY } else { 0 })
            | (if self.nosuid { MOUNT_ATTR_NOSUID } else { 0 })
            | (if self.nodev { MOUNT_ATTR_NODEV } else { 0 })
    }
}

fn cpath(path: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `mount_setattr(2)` on the mount at `path` (and every mount below it when
/// `recursive`): set `set`, clear `clear`. `ENOSYS` on kernels before 5.12.
pub fn mount_setattr(path: &Path, recursive: bool, set: Attrs, clear: Attrs) -> io::Result<()> {
    let path = cpath(path)?;
    let attr = MountAttr {
        attr_set: set.bits(),
        attr_clr: clear.bits(),
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is a NUL-terminated string and `attr` a properly laid out
    // `struct mount_attr` whose size is passed; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(rc).map(drop)
}

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE|AT_RECURSIVE)`),
/// to attach elsewhere with [`move_mount`].
pub fn clone_tree(path: &Path) -> io::Result<OwnedFd> {
    let path = cpath(path)?;
    // SAFETY: `path` is NUL-terminated and outlives the call; integer flags otherwise.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE,
        )
    };
    let fd = check(rc)? as libc::c_int;
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attach the detached tree `tree` at `to`.
pub fn move_mount(tree: &OwnedFd, to: &Path) -> io::Result<()> {
    let to = cpath(to)?;
    let empty = c"";
    // SAFETY: both strings are NUL-terminated and outlive the call; `tree` is open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(rc).map(drop)
}

pub enum Forked {
    Parent { child: libc::pid_t },
    Child,
}

/// `fork(2)`. Only for the sandbox helper, which is single-threaded (it never starts a
/// runtime or a thread), so the child may allocate and run ordinary code.
pub fn fork_single_threaded() -> io::Result<Forked> {
    // SAFETY: the helper process has exactly one thread (it is a fresh exec that starts
    // none), so no lock can be held by a thread that does not exist in the child.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(Forked::Parent {
            child: child.as_raw(),
        }),
        Ok(nix::unistd::ForkResult::Child) => Ok(Forked::Child),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Die of `signal` the way the waited-for child did (default action restored first).
pub fn die_of(signal: libc::c_int) {
    // SAFETY: restoring the default disposition touches no memory of ours.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
    // SAFETY: raise with an integer signal number.
    unsafe { libc::raise(signal) };
}
