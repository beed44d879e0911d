//! The one way nl2sh binds and connects a Unix socket by path, at any depth of directory.
//!
//! A `sockaddr_un` holds at most [`MAX_SOCKET_PATH`] bytes of path, so a configuration in
//! a deep directory would put `<state>/protocol/approvals.sock` out of reach ("path must
//! be shorter than SUN_LEN"). Instead the socket's directory is held open and the socket
//! is named through it, as `/proc/self/fd/<dir fd>/<name>`: the kernel resolves that
//! magic link to the very directory the descriptor holds, so the address is short
//! whatever the directory's path, and it names the directory that was opened (and, for
//! approvald, checked), not whatever the path leads to later. Linux and Android both
//! have it wherever /proc is mounted; without /proc the full path is used when it fits.
//!
//! Modes, ownership and peer checks stay the callers' business: this only chooses the
//! address.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Component, Path, PathBuf};

/// The longest path a `sockaddr_un` holds: `sun_path` is 108 bytes, its NUL included.
pub const MAX_SOCKET_PATH: usize = 107;

/// Where the per-process descriptor links live.
const PROC_FD: &str = "/proc/self/fd";

/// Bind a listening socket named `name` in the directory `dir` (open; `dir_path` is its
/// path, used only when /proc is not there).
pub fn bind_in(dir: BorrowedFd<'_>, dir_path: &Path, name: &OsStr) -> io::Result<UnixListener> {
    UnixListener::bind(address_in(dir, dir_path, name)?)
}

/// Connect to the socket named `name` in the directory `dir` (see [`bind_in`]).
pub fn connect_in(dir: BorrowedFd<'_>, dir_path: &Path, name: &OsStr) -> io::Result<UnixStream> {
    UnixStream::connect(address_in(dir, dir_path, name)?)
}

/// Connect to the socket at `path`, however long: its directory is opened (`O_PATH`, so
/// only search permission is needed, as for a connect by path) and the socket named
/// through it. The connection is blocking; a caller that wants otherwise sets it.
pub fn connect(path: &Path) -> io::Result<UnixStream> {
    let (dir_path, name) = split(path)?;
    let dir = open_dir(dir_path)?;
    connect_in(dir.as_fd(), dir_path, name)
}

/// Bind a listening socket at `path`, however long (see [`connect`]).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    let (dir_path, name) = split(path)?;
    let dir = open_dir(dir_path)?;
    bind_in(dir.as_fd(), dir_path, name)
}

/// The address the kernel is given for `name` in `dir`: through /proc when it is there,
/// else the full path if it fits.
pub fn address_in(dir: BorrowedFd<'_>, dir_path: &Path, name: &OsStr) -> io::Result<PathBuf> {
    address_with(dir, dir_path, name, Path::new(PROC_FD).is_dir())
}

fn address_with(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    name: &OsStr,
    have_proc: bool,
) -> io::Result<PathBuf> {
    check_name(name)?;
    if have_proc {
        let mut via_fd = PathBuf::from(format!("{PROC_FD}/{}", dir.as_raw_fd()));
        via_fd.push(name);
        if fits(&via_fd) {
            return Ok(via_fd);
        }
    }
    let direct = dir_path.join(name);
    if fits(&direct) {
        return Ok(direct);
    }
    let why = if have_proc {
        "and its name is too long to reach it through /proc/self/fd"
    } else {
        "and /proc is not mounted to reach it by a shorter path"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "the socket path is {} bytes, longer than a Unix socket address holds \
             ({MAX_SOCKET_PATH}), {why}",
            direct.as_os_str().len()
        ),
    ))
}

fn fits(path: &Path) -> bool {
    path.as_os_str().len() <= MAX_SOCKET_PATH
}

/// One plain file name: anything else would escape the directory held open.
fn check_name(name: &OsStr) -> io::Result<()> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) if n == name && !name.as_bytes().contains(&b'/') => {
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name for a socket"),
        )),
    }
}

fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a socket file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::FileTypeExt;

    /// A directory below `base` whose path is at least `len` bytes.
    fn deep_dir(base: &Path, len: usize) -> PathBuf {
        let mut dir = base.to_path_buf();
        let mut i = 0;
        while dir.as_os_str().len() < len {
            dir.push(format!("a-rather-long-directory-name-{i:02}"));
            i += 1;
        }
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_socket_far_deeper_than_sun_path_binds_and_connects() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = deep_dir(tmp.path(), 240);
        let path = dir.join("approvals.sock");
        assert!(path.as_os_str().len() > 200);
        // What std does with the path itself.
        assert!(UnixListener::bind(&path).is_err());

        let listener = bind(&path).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket(), "created where the path says");
        let mut client = connect(&path).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        served.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");

        // Through a directory held open: the same socket.
        let held = open_dir(&dir).unwrap();
        let addr = address_in(held.as_fd(), &dir, OsStr::new("approvals.sock")).unwrap();
        assert!(addr.as_os_str().len() <= MAX_SOCKET_PATH, "{addr:?}");
        assert!(addr.starts_with(PROC_FD), "{addr:?}");
        drop(connect_in(held.as_fd(), &dir, OsStr::new("approvals.sock")).unwrap());
        assert!(listener.accept().is_ok());

        // Nothing there: the error is the kernel's, as for a path.
        let e = connect(&dir.join("none.sock")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn without_proc_the_full_path_is_used_when_it_fits() {
        let tmp = tempfile::tempdir().unwrap();
        let held = open_dir(tmp.path()).unwrap();
        let name = OsStr::new("s.sock");
        let short = address_with(held.as_fd(), tmp.path(), name, false).unwrap();
        assert_eq!(short, tmp.path().join("s.sock"));

        let dir = deep_dir(tmp.path(), 150);
        let held = open_dir(&dir).unwrap();
        let e = address_with(held.as_fd(), &dir, name, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("/proc is not mounted"), "{e}");
        // With /proc, the same directory is reachable.
        assert!(address_with(held.as_fd(), &dir, name, true).is_ok());
    }

    #[test]
    fn only_a_plain_name_is_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let held = open_dir(tmp.path()).unwrap();
        for bad in ["", ".", "..", "a/b", "/abs", "../up.sock"] {
            assert!(
                address_in(held.as_fd(), tmp.path(), OsStr::new(bad)).is_err(),
                "{bad:?}"
            );
        }
        let long = "n".repeat(MAX_SOCKET_PATH);
        assert!(address_in(held.as_fd(), tmp.path(), OsStr::new(&long)).is_err());
        assert!(split(Path::new("/")).is_err());
        assert_eq!(
            split(Path::new("x.sock")).unwrap(),
            (Path::new("."), OsStr::new("x.sock"))
        );
    }
}
