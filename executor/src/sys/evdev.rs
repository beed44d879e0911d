//! The evdev and uinput ioctls the touch engine needs (`linux/input.h`, `linux/uinput.h`),
//! on an open device node. Request numbers follow the generic `_IOC` layout (8 bits of
//! number and type, 14 of size, 2 of direction), which arm, arm64, x86 and x86_64, the
//! architectures Android runs on, all use.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)`, as the C library's `ioctl` takes it (an unsigned long in
/// glibc and bionic, an int in musl: the same 32 bits).
const fn ioc(dir: u32, kind: u8, nr: u32, size: usize) -> libc::Ioctl {
    ((dir << 30) | ((size as u32) << 16) | ((kind as u32) << 8) | nr) as libc::Ioctl
}

/// `struct input_absinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AbsInfo {
    pub value: i32,
    pub minimum: i32,
    pub maximum: i32,
    pub fuzz: i32,
    pub flat: i32,
    pub resolution: i32,
}

/// `struct input_event` as the kernel reads it from a write(2): a `timeval` of two longs
/// (which the kernel ignores on write and fills in itself), type, code, value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawEvent {
    pub sec: libc::c_long,
    pub usec: libc::c_long,
    pub kind: u16,
    pub code: u16,
    pub value: i32,
}

/// `struct input_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct InputId {
    pub bustype: u16,
    pub vendor: u16,
    pub product: u16,
    pub version: u16,
}

/// `struct uinput_setup`.
#[repr(C)]
struct UinputSetup {
    id: InputId,
    name: [u8; 80],
    ff_effects_max: u32,
}

/// `struct uinput_abs_setup`.
#[repr(C)]
struct UinputAbsSetup {
    code: u16,
    absinfo: AbsInfo,
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `EVIOCGNAME`: the device's name.
pub fn name(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the request's size is buf's length; the kernel writes at most that many
    // bytes into it.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_READ, b'E', 0x06, buf.len()),
            buf.as_mut_ptr(),
        )
    };
    check(rc)?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// `EVIOCGBIT(kind)` (kind 0: the event types), `EVIOCGPROP` (`kind` = None) or
/// `EVIOCGKEY` (the keys held now): a bitmap of up to `buf.len() * 8` bits.
fn bitmap(fd: BorrowedFd<'_>, nr: u32, buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: the request's size is buf's length; the kernel writes at most that many
    // bytes into it.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_READ, b'E', nr, buf.len()),
            buf.as_mut_ptr(),
        )
    };
    check(rc)
}

/// The bits of event type `kind` the device reports (`EVIOCGBIT`); 0 gives the types.
pub fn event_bits(fd: BorrowedFd<'_>, kind: u16) -> io::Result<Vec<u8>> {
    // KEY_MAX is 0x2ff: 96 bytes cover every type's codes.
    let mut buf = vec![0u8; 96];
    bitmap(fd, 0x20 + u32::from(kind), &mut buf)?;
    Ok(buf)
}

/// The device's input properties (`EVIOCGPROP`).
pub fn props(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4];
    bitmap(fd, 0x09, &mut buf)?;
    Ok(buf)
}

/// The keys (and buttons) down now (`EVIOCGKEY`).
pub fn keys_down(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 96];
    bitmap(fd, 0x18, &mut buf)?;
    Ok(buf)
}

/// An absolute axis's range and current value (`EVIOCGABS`).
pub fn abs_info(fd: BorrowedFd<'_>, axis: u16) -> io::Result<AbsInfo> {
    let mut info = AbsInfo::default();
    // SAFETY: the request's size is that of AbsInfo, a repr(C) struct_input_absinfo.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(
                IOC_READ,
                b'E',
                0x40 + u32::from(axis & 0x3f),
                std::mem::size_of::<AbsInfo>(),
            ),
            &mut info as *mut AbsInfo,
        )
    };
    check(rc)?;
    Ok(info)
}

/// Every slot's value of multi-touch axis `code` (`EVIOCGMTSLOTS`), `slots` of them.
pub fn mt_slots(fd: BorrowedFd<'_>, code: u16, slots: usize) -> io::Result<Vec<i32>> {
    // struct input_mt_request_layout { __u32 code; __s32 values[slots]; }
    let mut buf = vec![0i32; slots + 1];
    buf[0] = i32::from(code);
    let size = buf.len() * std::mem::size_of::<i32>();
    // SAFETY: the request's size is buf's size in bytes; the kernel reads the code from
    // its first word and writes at most `slots` values after it.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_READ, b'E', 0x0a, size),
            buf.as_mut_ptr(),
        )
    };
    check(rc)?;
    buf.remove(0);
    Ok(buf)
}

/// Write whole events to an event node or a uinput device; one write(2), so a frame
/// reaches the kernel as one piece.
pub fn write_events(fd: BorrowedFd<'_>, events: &[RawEvent]) -> io::Result<()> {
    let bytes = std::mem::size_of_val(events);
    // SAFETY: the pointer and length describe the `events` slice, which outlives the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), events.as_ptr().cast(), bytes) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != bytes {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("wrote {n} of {bytes} bytes"),
        ));
    }
    Ok(())
}

const UINPUT: u8 = b'U';

fn uinput_int(fd: BorrowedFd<'_>, nr: u32, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the UI_SET_*BIT requests take an int by value.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_WRITE, UINPUT, nr, std::mem::size_of::<libc::c_int>()),
            value,
        )
    };
    check(rc)
}

/// `UI_SET_EVBIT`, `UI_SET_KEYBIT`, `UI_SET_ABSBIT`, `UI_SET_PROPBIT`.
pub fn uinput_set_bit(fd: BorrowedFd<'_>, what: UinputBit, code: u16) -> io::Result<()> {
    let nr = match what {
        UinputBit::Event => 100,
        UinputBit::Key => 101,
        UinputBit::Abs => 103,
        UinputBit::Prop => 110,
    };
    uinput_int(fd, nr, libc::c_int::from(code))
}

/// Which bit `uinput_set_bit` sets.
#[derive(Debug, Clone, Copy)]
pub enum UinputBit {
    Event,
    Key,
    Abs,
    Prop,
}

/// `UI_ABS_SETUP` (Linux 4.5+): one axis's range.
pub fn uinput_abs_setup(fd: BorrowedFd<'_>, code: u16, info: AbsInfo) -> io::Result<()> {
    let setup = UinputAbsSetup {
        code,
        absinfo: info,
    };
    // SAFETY: the request's size is that of UinputAbsSetup (struct uinput_abs_setup),
    // which the kernel only reads.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_WRITE, UINPUT, 4, std::mem::size_of::<UinputAbsSetup>()),
            &setup as *const UinputAbsSetup,
        )
    };
    check(rc)
}

/// `UI_DEV_SETUP` (Linux 4.5+): the device's name and id.
pub fn uinput_dev_setup(fd: BorrowedFd<'_>, id: InputId, name: &str) -> io::Result<()> {
    let mut setup = UinputSetup {
        id,
        name: [0; 80],
        ff_effects_max: 0,
    };
    let bytes = name.as_bytes();
    let n = bytes.len().min(setup.name.len() - 1);
    setup.name[..n].copy_from_slice(&bytes[..n]);
    // SAFETY: the request's size is that of UinputSetup (struct uinput_setup), which the
    // kernel only reads; the name is NUL-terminated within it.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_WRITE, UINPUT, 3, std::mem::size_of::<UinputSetup>()),
            &setup as *const UinputSetup,
        )
    };
    check(rc)
}

/// `UI_DEV_CREATE` / `UI_DEV_DESTROY`.
pub fn uinput_create(fd: BorrowedFd<'_>, create: bool) -> io::Result<()> {
    let nr = if create { 1 } else { 2 };
    // SAFETY: these requests take no argument.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), ioc(0, UINPUT, nr, 0)) };
    check(rc)
}

/// `UI_GET_SYSNAME` (Linux 3.15+): the created device's name under /sys/class/input
/// (`input12`).
pub fn uinput_sysname(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 64];
    // SAFETY: the request's size is buf's length; the kernel writes at most that many
    // bytes into it.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            ioc(IOC_READ, UINPUT, 44, buf.len()),
            buf.as_mut_ptr(),
        )
    };
    check(rc)?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_match_the_kernel_headers() {
        // Values from linux/input.h and linux/uinput.h as compiled for x86_64 and arm64.
        assert_eq!(ioc(IOC_READ, b'E', 0x06, 256) as u32, 0x8100_4506); // EVIOCGNAME(256)
        assert_eq!(ioc(IOC_READ, b'E', 0x40 + 0x35, 24) as u32, 0x8018_4575); // EVIOCGABS(ABS_MT_POSITION_X)
        assert_eq!(ioc(IOC_READ, b'E', 0x09, 4) as u32, 0x8004_4509); // EVIOCGPROP(4)
        assert_eq!(ioc(IOC_WRITE, UINPUT, 100, 4) as u32, 0x4004_5564); // UI_SET_EVBIT
        assert_eq!(ioc(0, UINPUT, 1, 0) as u32, 0x5501); // UI_DEV_CREATE
        assert_eq!(ioc(IOC_WRITE, UINPUT, 3, 92) as u32, 0x405c_5503); // UI_DEV_SETUP
        assert_eq!(ioc(IOC_WRITE, UINPUT, 4, 28) as u32, 0x401c_5504); // UI_ABS_SETUP
        assert_eq!(std::mem::size_of::<UinputSetup>(), 92);
        assert_eq!(std::mem::size_of::<UinputAbsSetup>(), 28);
        assert_eq!(std::mem::size_of::<AbsInfo>(), 24);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<RawEvent>(), 24);
    }
}
