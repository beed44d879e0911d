//! The sandbox's view of the file system, built by the helper (root, in a fresh mount
//! namespace) before it forks the payload:
//!
//! 1. propagation private, so nothing done here reaches the device's mounts;
//! 2. a minimal `/dev` (tmpfs: null, zero, full, random, urandom, tty, the `fd` links,
//!    the device's `/dev/shm` read-only when the kernel can clone mounts);
//! 3. masks over the secret locations and nl2sh's own files: an empty, read-only tmpfs
//!    over a directory, the `nodev` `/dev/null` node over anything else (opening it
//!    fails with EACCES);
//! 4. every mount read-only, nosuid and nodev (`mount_setattr(AT_RECURSIVE)`, else a
//!    bind remount of each mount), `/dev` alone keeping its device nodes usable;
//! 5. a check of `/proc/self/mountinfo` that every reachable mount is read-only;
//! 6. a private scratch tmpfs at [`SCRATCH_DIR`], the payload's `TMPDIR`.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};
use nix::sys::stat::{mknod, Mode, SFlag};

use super::masks;
use crate::sys::sandbox::{clone_tree, mount_setattr, move_mount, Attrs};

/// The payload's `TMPDIR`: a throwaway tmpfs private to one call.
pub const SCRATCH_DIR: &str = "/dev/tmp";
/// Paths one mask pattern may expand to at most.
const MAX_MASKS_PER_PATTERN: usize = 64;

/// Character devices of the minimal `/dev` (Linux's fixed numbers, the same on Android).
const DEVICES: &[(&str, u64, u64)] = &[
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];
const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// How the mounts were made read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnlyBy {
    /// One recursive `mount_setattr` (Linux 5.12+).
    MountSetattr,
    /// A bind remount of each mount listed in `/proc/self/mountinfo`.
    Remount,
}

impl ReadOnlyBy {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadOnlyBy::MountSetattr => "mount_setattr",
            ReadOnlyBy::Remount => "remount",
        }
    }
}

#[derive(Debug)]
pub struct View {
    pub read_only_by: ReadOnlyBy,
    pub masked: usize,
    pub device_shm: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct MountError {
    step: String,
    #[source]
    source: io::Error,
}

fn step(what: impl Into<String>) -> impl FnOnce(io::Error) -> MountError {
    let step = what.into();
    move |source| MountError { step, source }
}

fn nix_step(what: impl Into<String>) -> impl FnOnce(nix::Error) -> MountError {
    let f = step(what);
    move |e| f(io::Error::from(e))
}

/// Build the view in the calling process's (new, private) mount namespace.
pub fn build(mask_patterns: &[String], scratch_bytes: u64) -> Result<View, MountError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(nix_step("making mount propagation private"))?;
    let device_shm = minimal_dev()?;
    let masked = apply_masks(mask_patterns)?;
    let read_only_by = make_read_only()?;
    verify_read_only()?;
    let scratch = format!("mode=1777,size={scratch_bytes},nr_inodes=4096");
    mount(
        Some("tmpfs"),
        SCRATCH_DIR,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(scratch.as_str()),
    )
    .map_err(nix_step(format!(
        "mounting the scratch tmpfs at {SCRATCH_DIR}"
    )))?;
    Ok(View {
        read_only_by,
        masked,
        device_shm,
    })
}

/// A fresh tmpfs over `/dev` with the few nodes a reader needs. Returns whether the
/// device's `/dev/shm` could be carried over (read-only).
fn minimal_dev() -> Result<bool, MountError> {
    // A detached copy of /dev/shm, taken before /dev is covered (kernel 5.2+).
    let shm = clone_tree(Path::new("/dev/shm")).ok();
    mount(
        Some("tmpfs"),
        "/dev",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=64k,nr_inodes=64"),
    )
    .map_err(nix_step("mounting a tmpfs over /dev"))?;
    let old = nix::sys::stat::umask(Mode::empty());
    let made = (|| {
        for (name, major, minor) in DEVICES {
            let path = format!("/dev/{name}");
            mknod(
                path.as_str(),
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                libc::makedev(*major as _, *minor as _),
            )
            .map_err(nix_step(format!("creating {path}")))?;
        }
        for (name, target) in DEV_LINKS {
            std::os::unix::fs::symlink(target, format!("/dev/{name}"))
                .map_err(step(format!("linking /dev/{name}")))?;
        }
        for dir in ["/dev/shm", SCRATCH_DIR] {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(dir)
                .map_err(step(format!("creating {dir}")))?;
        }
        Ok::<(), MountError>(())
    })();
    nix::sys::stat::umask(old);
    made?;
    Ok(match shm {
        Some(tree) => move_mount(&tree, Path::new("/dev/shm")).is_ok(),
        None => false,
    })
}

/// Mount a mask over every existing path the patterns name. A mask that cannot be
/// applied fails the sandbox: the secret would be readable.
fn apply_masks(patterns: &[String]) -> Result<usize, MountError> {
    let mut masked = 0;
    for pattern in patterns {
        for path in masks::expand(pattern, MAX_MASKS_PER_PATTERN) {
            mask(&path)?;
            masked += 1;
        }
    }
    Ok(masked)
}

fn mask(path: &Path) -> Result<(), MountError> {
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    if is_dir {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=000,size=4k,nr_inodes=1"),
        )
        .map_err(nix_step(format!("masking {}", path.display())))
    } else {
        // The null node, on a nodev mount once everything is read-only: opening the
        // masked path fails, reading or writing alike.
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(nix_step(format!("masking {}", path.display())))
    }
}

fn make_read_only() -> Result<ReadOnlyBy, MountError> {
    let everything = Attrs {
        read_only: true,
        nosuid: true,
        nodev: true,
    };
    match mount_setattr(Path::new("/"), true, everything, Attrs::default()) {
        Ok(()) => {
            // Only the minimal /dev (not what is mounted under it) keeps its nodes usable.
            mount_setattr(
                Path::new("/dev"),
                false,
                Attrs::default(),
                Attrs {
                    nodev: true,
                    ..Attrs::default()
                },
            )
            .map_err(step("letting /dev hold device nodes"))?;
            Ok(ReadOnlyBy::MountSetattr)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            remount_each()?;
            Ok(ReadOnlyBy::Remount)
        }
        Err(e) => Err(step("making every mount read-only (mount_setattr)")(e)),
    }
}

/// One line of `/proc/self/mountinfo`, the fields used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountLine {
    pub mount_point: PathBuf,
    /// `major:minor` of the file system.
    pub device: (u64, u64),
    /// Per-mount options (`rw,nosuid,relatime`).
    pub options: String,
}

impl MountLine {
    pub fn read_only(&self) -> bool {
        self.options.split(',').next() == Some("ro")
    }
    fn has(&self, option: &str) -> bool {
        self.options.split(',').any(|o| o == option)
    }
}

/// Parse `/proc/self/mountinfo` text (fields: id, parent, major:minor, root, mount point,
/// options, …; octal escapes such as `\040` in paths).
pub fn parse_mountinfo(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let _id = f.next()?;
            let _parent = f.next()?;
            let (major, minor) = f.next()?.split_once(':')?;
            let _root = f.next()?;
            let mount_point = unescape(f.next()?);
            let options = f.next()?.to_string();
            Some(MountLine {
                mount_point,
                device: (major.parse().ok()?, minor.parse().ok()?),
                options,
            })
        })
        .collect()
}

fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

fn mountinfo() -> Result<Vec<MountLine>, MountError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(step("reading /proc/self/mountinfo"))?;
    Ok(parse_mountinfo(&text))
}

/// Kernels before 5.12: remount every mount read-only by path. `MS_BIND` with
/// `MS_REMOUNT` changes only this namespace's mount, never the file system itself.
fn remount_each() -> Result<(), MountError> {
    let mut done: Vec<PathBuf> = Vec::new();
    for line in mountinfo()? {
        if done.contains(&line.mount_point) {
            continue;
        }
        let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
        flags |= MsFlags::MS_NOSUID;
        if line.mount_point != Path::new("/dev") {
            flags |= MsFlags::MS_NODEV;
        }
        for (option, flag) in [
            ("noexec", MsFlags::MS_NOEXEC),
            ("noatime", MsFlags::MS_NOATIME),
            ("nodiratime", MsFlags::MS_NODIRATIME),
            ("relatime", MsFlags::MS_RELATIME),
        ] {
            if line.has(option) {
                flags |= flag;
            }
        }
        match mount(
            None::<&str>,
            &line.mount_point,
            None::<&str>,
            flags,
            None::<&str>,
        ) {
            Ok(()) => {}
            // Covered by a later mount or gone: not reachable by path, so not by the
            // payload either (the check below looks at what is reachable).
            Err(nix::Error::ENOENT) | Err(nix::Error::EINVAL) if !reachable(&line) => {}
            Err(e) => {
                return Err(nix_step(format!(
                    "remounting {} read-only",
                    line.mount_point.display()
                ))(e))
            }
        }
        done.push(line.mount_point);
    }
    Ok(())
}

/// Whether the mount of `line` is what its path reaches now (not covered by another).
fn reachable(line: &MountLine) -> bool {
    std::fs::metadata(&line.mount_point).is_ok_and(|m| {
        let dev = m.dev();
        (libc::major(dev) as u64, libc::minor(dev) as u64) == line.device
    })
}

/// Every mount the payload can reach must be read-only: the last mount at each path,
/// when its path still leads to it.
fn verify_read_only() -> Result<(), MountError> {
    let lines = mountinfo()?;
    for (i, line) in lines.iter().enumerate() {
        let covered = lines[i + 1..]
            .iter()
            .any(|later| later.mount_point == line.mount_point);
        if !covered && !line.read_only() && reachable(line) {
            return Err(MountError {
                step: "checking the mounts".into(),
                source: io::Error::other(format!(
                    "{} is still writable",
                    line.mount_point.display()
                )),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let text = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    36 35 98:0 /mnt1 /mnt/with\\040space ro,noatime master:1 - ext3 /dev/root rw\n\
                    garbage\n";
        let lines = parse_mountinfo(text);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].mount_point, PathBuf::from("/proc"));
        assert_eq!(lines[0].device, (0, 21));
        assert!(!lines[0].read_only());
        assert!(lines[0].has("relatime"));
        assert_eq!(lines[1].mount_point, PathBuf::from("/mnt/with space"));
        assert!(lines[1].read_only());
    }
}
