//! Finding the touchscreen among the event devices, reading what it holds, making a
//! virtual copy of it with uinput, and writing frames on time.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    Contacts, Frame, Touchscreen, ABS_MT_POSITION_X, ABS_MT_POSITION_Y, ABS_MT_PRESSURE,
    ABS_MT_SLOT, ABS_MT_TOUCH_MAJOR, ABS_MT_TRACKING_ID, BTN_TOOL_FINGER, BTN_TOUCH, EV_ABS,
    EV_KEY, INPUT_PROP_DIRECT,
};
use crate::sys::evdev::{self, AbsInfo, InputId, RawEvent, UinputBit};

/// The name nl2sh gives its virtual touchscreens; such a device is never taken for the
/// phone's own.
pub const VIRTUAL_NAME: &str = "nl2sh-touch";
/// Event devices looked at, at most.
const MAX_NODES: usize = 256;
/// `BUS_VIRTUAL` (linux/input.h).
const BUS_VIRTUAL: u16 = 0x06;

fn bit(bits: &[u8], code: u16) -> bool {
    bits.get(usize::from(code / 8))
        .is_some_and(|b| b & (1 << (code % 8)) != 0)
}

/// `event12` → 12.
fn event_number(name: &str) -> Option<u32> {
    name.strip_prefix("event")?.parse().ok()
}

/// What an event device reports: its name, absolute axes (with their ranges), keys and
/// whether it is a direct input device (`INPUT_PROP_DIRECT`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    pub name: String,
    pub abs: BTreeMap<u16, AbsInfo>,
    pub keys: BTreeSet<u16>,
    pub direct: bool,
}

impl Caps {
    /// The device as a multi-touch touchscreen of protocol B, if it is one: the position
    /// axes, slots and tracking ids, and `INPUT_PROP_DIRECT` (without it Android takes the
    /// device for a touchpad, which moves a pointer instead of touching). nl2sh's own
    /// virtual touchscreens are never taken for the phone's.
    pub fn touchscreen(&self) -> Option<Touchscreen> {
        if !self.direct || self.name.starts_with(VIRTUAL_NAME) {
            return None;
        }
        let axis = |c: u16| self.abs.get(&c).copied();
        Some(Touchscreen {
            name: self.name.clone(),
            x: axis(ABS_MT_POSITION_X)?,
            y: axis(ABS_MT_POSITION_Y)?,
            slot: axis(ABS_MT_SLOT)?,
            tracking: axis(ABS_MT_TRACKING_ID)?,
            pressure: axis(ABS_MT_PRESSURE),
            touch_major: axis(ABS_MT_TOUCH_MAJOR),
            btn_touch: self.keys.contains(&BTN_TOUCH),
            btn_tool_finger: self.keys.contains(&BTN_TOOL_FINGER),
        })
    }
}

/// The axes and keys the touch engine reads.
const AXES: [u16; 6] = [
    ABS_MT_SLOT,
    ABS_MT_TOUCH_MAJOR,
    ABS_MT_POSITION_X,
    ABS_MT_POSITION_Y,
    ABS_MT_TRACKING_ID,
    ABS_MT_PRESSURE,
];
const KEYS: [u16; 2] = [BTN_TOUCH, BTN_TOOL_FINGER];

/// What the device behind `file` reports, as far as the touch engine cares.
pub fn probe(file: &File) -> io::Result<Caps> {
    let fd = file.as_fd();
    let types = evdev::event_bits(fd, 0)?;
    let mut caps = Caps {
        name: evdev::name(fd)?,
        direct: bit(&evdev::props(fd)?, INPUT_PROP_DIRECT),
        ..Caps::default()
    };
    if bit(&types, EV_ABS) {
        let abs = evdev::event_bits(fd, EV_ABS)?;
        for code in AXES.into_iter().filter(|&c| bit(&abs, c)) {
            caps.abs.insert(code, evdev::abs_info(fd, code)?);
        }
    }
    if bit(&types, EV_KEY) {
        let keys = evdev::event_bits(fd, EV_KEY)?;
        caps.keys = KEYS.into_iter().filter(|&k| bit(&keys, k)).collect();
    }
    Ok(caps)
}

/// What the touchscreen holds now: each slot's tracking id and `BTN_TOUCH`.
pub fn contacts(file: &File, ts: &Touchscreen) -> io::Result<Contacts> {
    let fd = file.as_fd();
    Ok(Contacts {
        tracking_ids: evdev::mt_slots(fd, ABS_MT_TRACKING_ID, ts.slot_count())?,
        touching: ts.btn_touch && bit(&evdev::keys_down(fd)?, BTN_TOUCH),
    })
}

/// The phone's touchscreen, opened for reading.
pub struct Found {
    pub path: PathBuf,
    pub ts: Touchscreen,
    pub file: File,
}

/// The first touchscreen among `dir`'s `event*` nodes (by number), or what was seen.
pub fn find(dir: &Path) -> Result<Found, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{} cannot be read: {e}", dir.display()))?;
    let mut nodes: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = event_number(&e.file_name().to_string_lossy())?;
            Some((n, e.path()))
        })
        .collect();
    nodes.sort();
    nodes.truncate(MAX_NODES);
    let mut refused = Vec::new();
    for (_, path) in &nodes {
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => f,
            Err(e) => {
                refused.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        match probe(&file).map(|c| c.touchscreen()) {
            Ok(Some(ts)) => {
                return Ok(Found {
                    path: path.clone(),
                    ts,
                    file,
                })
            }
            Ok(None) => {}
            Err(e) => refused.push(format!("{}: {e}", path.display())),
        }
    }
    let mut why = format!(
        "no multi-touch touchscreen (INPUT_PROP_DIRECT) among the {} event devices in {}",
        nodes.len(),
        dir.display()
    );
    if !refused.is_empty() {
        why.push_str(&format!(
            " ({} unreadable: {})",
            refused.len(),
            refused.join("; ")
        ));
    }
    Err(why)
}

/// Open the touchscreen's node for writing.
pub fn open_for_writing(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

/// A virtual touchscreen: destroyed when dropped.
pub struct Virtual {
    pub file: File,
    /// Its event node, when the kernel says which.
    pub node: Option<PathBuf>,
}

impl Drop for Virtual {
    fn drop(&mut self) {
        let _ = evdev::uinput_create(self.file.as_fd(), false);
    }
}

/// Make a virtual copy of `ts` through `uinput`: the same axes and ranges (so raw
/// positions mean the same pixels), `BTN_TOUCH`, and `INPUT_PROP_DIRECT`, without which
/// Android would take it for a touchpad and move a mouse pointer.
pub fn create_virtual(
    uinput: &Path,
    input_dir: &Path,
    ts: &Touchscreen,
    name: &str,
) -> io::Result<Virtual> {
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(uinput)?;
    let fd = file.as_fd();
    evdev::uinput_set_bit(fd, UinputBit::Event, EV_KEY)?;
    evdev::uinput_set_bit(fd, UinputBit::Event, EV_ABS)?;
    evdev::uinput_set_bit(fd, UinputBit::Key, BTN_TOUCH)?;
    if ts.btn_tool_finger {
        evdev::uinput_set_bit(fd, UinputBit::Key, BTN_TOOL_FINGER)?;
    }
    let mut axes = vec![
        (ABS_MT_SLOT, ts.slot),
        (ABS_MT_TRACKING_ID, ts.tracking),
        (ABS_MT_POSITION_X, ts.x),
        (ABS_MT_POSITION_Y, ts.y),
    ];
    axes.extend(ts.pressure.map(|a| (ABS_MT_PRESSURE, a)));
    axes.extend(ts.touch_major.map(|a| (ABS_MT_TOUCH_MAJOR, a)));
    for (code, mut info) in axes {
        info.value = 0;
        evdev::uinput_set_bit(fd, UinputBit::Abs, code)?;
        evdev::uinput_abs_setup(fd, code, info)?;
    }
    evdev::uinput_set_bit(fd, UinputBit::Prop, INPUT_PROP_DIRECT)?;
    let id = InputId {
        bustype: BUS_VIRTUAL,
        ..InputId::default()
    };
    evdev::uinput_dev_setup(fd, id, name)?;
    evdev::uinput_create(fd, true)?;
    let node = evdev::uinput_sysname(fd)
        .ok()
        .and_then(|sys| event_node(&sys, input_dir));
    Ok(Virtual { file, node })
}

/// `/dev/input/eventN` of the input device `sysname` (`input12`), from sysfs.
fn event_node(sysname: &str, input_dir: &Path) -> Option<PathBuf> {
    let dir = Path::new("/sys/class/input").join(sysname);
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| event_number(n).is_some())
        .map(|n| input_dir.join(n))
}

/// Write each frame at its time (sleeping until then, so delays do not add up): the
/// first at its time after `start`, each later one at its time after the first frame was
/// in, so a slow first write cannot shorten a hold (seen under emulation: a tap's 10 ms
/// became 1.7 ms after an 8 ms write). Returns when the last one was written.
pub fn write_frames(file: &File, frames: &[Frame], start: Instant) -> io::Result<Instant> {
    let mut last = Instant::now();
    let first_at = frames.first().map_or(0, |f| f.at_ms);
    let mut first_in: Option<Instant> = None;
    for f in frames {
        let due = match first_in {
            Some(base) => base + Duration::from_millis(f.at_ms.saturating_sub(first_at)),
            None => start + Duration::from_millis(f.at_ms),
        };
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let raw: Vec<RawEvent> = f
            .events
            .iter()
            .map(|e| RawEvent {
                sec: 0,
                usec: 0,
                kind: e.kind,
                code: e.code,
                value: e.value,
            })
            .collect();
        evdev::write_events(file.as_fd(), &raw)?;
        last = Instant::now();
        first_in.get_or_insert(last);
    }
    Ok(last)
}
