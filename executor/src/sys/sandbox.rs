//! System calls the sandbox helper needs that have no safe wrapper in `nix`: the new
//! mount API (`mount_setattr`, `open_tree`, `move_mount`), starting the payload from the
//! single-threaded helper, and restoring a signal's default action to die of it.

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

/// Size of the stack the payload runs on before it execs its command (mapped lazily:
/// only the pages it touches cost memory).
const PAYLOAD_STACK_BYTES: usize = 1024 * 1024;

/// What [`spawn_sharing_memory`] hands its child: the work, and the status to exit with
/// if the work panics.
struct ChildWork<'a> {
    work: &'a mut dyn FnMut() -> u8,
    on_panic: u8,
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildWork` that `spawn_sharing_memory` passed to clone; it
    // lives in the parent's frame, which stays put while the parent is suspended
    // (CLONE_VFORK) until this child execs or exits.
    let child = unsafe { &mut *arg.cast::<ChildWork<'_>>() };
    let on_panic = child.on_panic;
    let work = &mut child.work;
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(on_panic);
    {
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    // SAFETY: _exit ends this process at once, without running the parent's atexit
    // handlers or destructors on memory the parent still owns.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}

/// Start a child process that shares this process's memory, on a stack of its own, and
/// wait until it has exec'd or exited (`clone(CLONE_VM | CLONE_VFORK)`, what
/// `posix_spawn` does); the child's pid, to wait for as usual (it signals SIGCHLD).
///
/// Only for the sandbox helper, which is single-threaded, so that the payload's `execve`
/// does not first tear down a copy of the helper's address space: with `fork`, that
/// teardown (about 0.3 ms, seen with `perf`) was on every sandboxed call's path. The
/// child runs nl2sh's own code only (it confines itself, reads its call and execs the
/// command, whose address space is then new) while the helper waits, so nothing else
/// touches the memory they share.
pub fn spawn_sharing_memory(work: &mut dyn FnMut() -> u8, on_panic: u8) -> io::Result<libc::pid_t> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(4096);
    // SAFETY: a new private anonymous mapping; no memory of ours is touched.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAYLOAD_STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // The lowest page is a guard: an overflow faults instead of writing below the stack.
    // SAFETY: the first page of the mapping just made, which nothing uses yet.
    if unsafe { libc::mprotect(stack, page, libc::PROT_NONE) } != 0 {
        let e = io::Error::last_os_error();
        // SAFETY: the mapping made above, used by nothing.
        unsafe { libc::munmap(stack, PAYLOAD_STACK_BYTES) };
        return Err(e);
    }
    let mut child = ChildWork { work, on_panic };
    // The stack grows down from the end of the mapping (which is page aligned, so 16).
    // SAFETY: in bounds of the mapping (one past its end is the initial stack pointer).
    let top = unsafe { stack.cast::<u8>().add(PAYLOAD_STACK_BYTES) }.cast::<libc::c_void>();
    // SAFETY: `child_entry` runs on the stack just mapped, in a process that shares our
    // memory; CLONE_VFORK keeps this (single-threaded) process suspended until the child
    // has exec'd or exited, so `child` and everything the work borrows stay valid and
    // nothing else uses the memory meanwhile.
    let pid = unsafe {
        libc::clone(
            child_entry,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut child as *mut ChildWork<'_>).cast::<libc::c_void>(),
        )
    };
    let spawned = if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    };
    // SAFETY: the child has exec'd or exited (or never started): nothing runs on the
    // stack any more.
    unsafe { libc::munmap(stack, PAYLOAD_STACK_BYTES) };
    spawned
}

/// Die of `signal` the way the waited-for child did (default action restored first).
pub fn die_of(signal: libc::c_int) {
    // SAFETY: restoring the default disposition touches no memory of ours.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
    // SAFETY: raise with an integer signal number.
    unsafe { libc::raise(signal) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit_status_of(pid: libc::pid_t) -> i32 {
        use nix::sys::wait::{waitpid, WaitStatus};
        match waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            other => panic!("the child did not exit: {other:?}"),
        }
    }

    #[test]
    fn the_child_shares_memory_and_exits_with_its_status() {
        let mut seen = 0u32;
        let mut work = || {
            // The parent's own variable: written here, read there after the child ended.
            seen = 41;
            7
        };
        let pid = spawn_sharing_memory(&mut work, 125).expect("clone");
        assert_eq!(exit_status_of(pid), 7);
        assert_eq!(seen, 41, "the child's write is the parent's memory");
    }

    #[test]
    fn a_child_that_panics_exits_with_the_status_given_for_it() {
        let mut work = || -> u8 { panic!("payload bug") };
        let pid = spawn_sharing_memory(&mut work, 125).expect("clone");
        assert_eq!(exit_status_of(pid), 125);
    }
}
