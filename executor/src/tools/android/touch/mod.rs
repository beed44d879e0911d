//! The touch engine: gestures written as the kernel's multi-touch events (protocol B,
//! `Documentation/input/multi-touch-protocol.rst`) to the phone's touchscreen, or to a
//! virtual one made with uinput, else Android's `input` (docs/PROTOCOLS.md, "Touch").
//!
//! This file is the pure part: a gesture as timed strokes ([`Gesture`]), a screen point
//! mapped to the touchscreen's raw axes through rotation and scale ([`Screen::to_raw`]),
//! and the frames of events that draw it ([`frames`]). `device.rs` finds and opens the
//! touchscreen, `helper.rs` is the process that writes (as the UI identity), and
//! `action.rs` is the executor's side of a call.

pub mod action;
pub mod device;
#[cfg(test)]
mod getevent;
pub mod helper;
#[cfg(test)]
mod tests;

use crate::sys::evdev::AbsInfo;

pub const EV_SYN: u16 = 0x00;
pub const EV_KEY: u16 = 0x01;
pub const EV_ABS: u16 = 0x03;
pub const SYN_REPORT: u16 = 0;
pub const BTN_TOOL_FINGER: u16 = 0x145;
pub const BTN_TOUCH: u16 = 0x14a;
pub const ABS_MT_SLOT: u16 = 0x2f;
pub const ABS_MT_TOUCH_MAJOR: u16 = 0x30;
pub const ABS_MT_POSITION_X: u16 = 0x35;
pub const ABS_MT_POSITION_Y: u16 = 0x36;
pub const ABS_MT_TRACKING_ID: u16 = 0x39;
pub const ABS_MT_PRESSURE: u16 = 0x3a;
pub const INPUT_PROP_DIRECT: u16 = 0x01;

/// Time between two moves of a finger: 100 reports a second, within what phone panels
/// report (60-240 Hz) and enough for Android's velocity tracker to see a fling.
pub const MOVE_INTERVAL_MS: u64 = 10;
/// How long a tap holds: long enough that down and up carry different times, far below
/// Android's tap timeout (100 ms) and the 20 ms budget of a tap.
pub const TAP_HOLD_MS: u64 = 10;
/// The gap between a double tap's taps: within Android's double-tap window (40-300 ms).
pub const DOUBLE_TAP_GAP_MS: u64 = 100;
/// Longest gesture, fingers at once and points on one finger's path.
pub const MAX_GESTURE_MS: u64 = 30_000;
pub const MAX_FINGERS: usize = 5;
pub const MAX_PATH_POINTS: usize = 64;
/// Most slots read from a device (panels have 10; the kernel allows more).
pub const MAX_SLOTS: usize = 64;

/// One event as written: type, code, value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    pub kind: u16,
    pub code: u16,
    pub value: i32,
}

impl Ev {
    pub const fn abs(code: u16, value: i32) -> Self {
        Self {
            kind: EV_ABS,
            code,
            value,
        }
    }
    pub const fn key(code: u16, down: bool) -> Self {
        Self {
            kind: EV_KEY,
            code,
            value: down as i32,
        }
    }
    pub const SYN: Ev = Ev {
        kind: EV_SYN,
        code: SYN_REPORT,
        value: 0,
    };
}

/// The events written at one moment, ending with `SYN_REPORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Milliseconds after the gesture starts.
    pub at_ms: u64,
    pub events: Vec<Ev>,
}

/// A multi-touch touchscreen as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touchscreen {
    pub name: String,
    pub x: AbsInfo,
    pub y: AbsInfo,
    pub slot: AbsInfo,
    pub tracking: AbsInfo,
    pub pressure: Option<AbsInfo>,
    pub touch_major: Option<AbsInfo>,
    pub btn_touch: bool,
    pub btn_tool_finger: bool,
}

impl Touchscreen {
    /// Slots the device has (`ABS_MT_SLOT`'s maximum + 1), bounded.
    pub fn slot_count(&self) -> usize {
        usize::try_from(self.slot.maximum.saturating_add(1))
            .unwrap_or(0)
            .min(MAX_SLOTS)
    }
}

/// The display as Android draws it: its natural (rotation 0) size, in the pixels the
/// screen tools use (the `wm size` override when set), and the quarter turns it is
/// rotated by now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    pub width: u32,
    pub height: u32,
    pub rotation: u8,
}

impl Screen {
    /// The size as the user sees it now (width and height swap at a quarter turn).
    pub fn rotated(&self) -> (u32, u32) {
        if self.rotation % 2 == 1 {
            (self.height, self.width)
        } else {
            (self.width, self.height)
        }
    }

    /// The raw touchscreen position that Android reads back as screen pixel (x, y).
    ///
    /// Android (TouchInputMapper) scales a raw value `r` on an axis of `min..=max` to
    /// `(r - min) * size / (max - min + 1)` pixels of the display's natural orientation,
    /// then rotates into the current orientation. So this undoes the rotation (pixel
    /// centres: a quarter turn maps x to `width - 1 - y`) and aims at the middle of the
    /// pixel's share of the axis, which lands on the same pixel at any scale (a 20640-unit
    /// axis on 2064 pixels: pixel 0 is raw 5).
    pub fn to_raw(self, ts: &Touchscreen, x: u32, y: u32) -> Result<(i32, i32), String> {
        let (w, h) = self.rotated();
        if self.width == 0 || self.height == 0 {
            return Err("the display's size is unknown (0)".into());
        }
        if x >= w || y >= h {
            return Err(format!(
                "point ({x}, {y}) is off the {w}x{h} screen (rotation {})",
                u32::from(self.rotation % 4) * 90
            ));
        }
        let (nx, ny) = match self.rotation % 4 {
            0 => (x, y),
            1 => (self.width - 1 - y, x),
            2 => (self.width - 1 - x, self.height - 1 - y),
            _ => (y, self.height - 1 - x),
        };
        Ok((scale(nx, self.width, ts.x)?, scale(ny, self.height, ts.y)?))
    }
}

/// The raw value in the middle of pixel `p`'s share of `axis` (of `pixels` pixels).
fn scale(p: u32, pixels: u32, axis: AbsInfo) -> Result<i32, String> {
    let range = i64::from(axis.maximum) - i64::from(axis.minimum) + 1;
    if range <= 0 {
        return Err(format!(
            "the touchscreen's axis range {}..{} is empty",
            axis.minimum, axis.maximum
        ));
    }
    let raw = i64::from(axis.minimum) + ((2 * i64::from(p) + 1) * range) / (2 * i64::from(pixels));
    i32::try_from(raw.min(i64::from(axis.maximum)))
        .map_err(|_| "the raw position overflows".to_string())
}

/// A point a finger passes at a time, in screen pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waypoint {
    pub at_ms: u64,
    pub x: u32,
    pub y: u32,
}

/// One finger's touch: down at the first waypoint, along straight lines between them,
/// up at the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stroke(pub Vec<Waypoint>);

/// Fingers on the screen over time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gesture {
    pub strokes: Vec<Stroke>,
}

fn wp(at_ms: u64, (x, y): (u32, u32)) -> Waypoint {
    Waypoint { at_ms, x, y }
}

impl Gesture {
    pub fn tap(p: (u32, u32)) -> Self {
        Self::press(p, TAP_HOLD_MS)
    }

    /// One finger down at `p` for `ms`.
    pub fn press(p: (u32, u32), ms: u64) -> Self {
        Self {
            strokes: vec![Stroke(vec![wp(0, p), wp(ms, p)])],
        }
    }

    pub fn double_tap(p: (u32, u32)) -> Self {
        let second = TAP_HOLD_MS + DOUBLE_TAP_GAP_MS;
        Self {
            strokes: vec![
                Stroke(vec![wp(0, p), wp(TAP_HOLD_MS, p)]),
                Stroke(vec![wp(second, p), wp(second + TAP_HOLD_MS, p)]),
            ],
        }
    }

    /// Along `path` (evenly in time) over `ms`.
    pub fn path(path: &[(u32, u32)], ms: u64) -> Self {
        Self {
            strokes: vec![Stroke(spread(path, 0, ms))],
        }
    }

    /// Hold at `from` for `hold_ms`, then move to `to` over `ms`.
    pub fn drag(from: (u32, u32), to: (u32, u32), hold_ms: u64, ms: u64) -> Self {
        Self {
            strokes: vec![Stroke(vec![
                wp(0, from),
                wp(hold_ms, from),
                wp(hold_ms + ms, to),
            ])],
        }
    }

    /// Two fingers on a horizontal line through `center`, `from` pixels apart, moving
    /// until `to` apart (wider: zoom in) over `ms`.
    pub fn pinch(center: (u32, u32), from: u32, to: u32, ms: u64) -> Self {
        let (cx, cy) = center;
        let at = |half: u32, sign: bool| {
            if sign {
                (cx.saturating_add(half), cy)
            } else {
                (cx.saturating_sub(half), cy)
            }
        };
        Self {
            strokes: [false, true]
                .iter()
                .map(|&s| Stroke(vec![wp(0, at(from / 2, s)), wp(ms, at(to / 2, s))]))
                .collect(),
        }
    }

    /// Each finger along its own path, all together over `ms`.
    pub fn fingers(paths: &[Vec<(u32, u32)>], ms: u64) -> Self {
        Self {
            strokes: paths.iter().map(|p| Stroke(spread(p, 0, ms))).collect(),
        }
    }

    /// When the last finger lifts.
    pub fn duration_ms(&self) -> u64 {
        self.strokes
            .iter()
            .filter_map(|s| s.0.last().map(|w| w.at_ms))
            .max()
            .unwrap_or(0)
    }

    /// Every point as [x, y] (for checking them against the screen).
    pub fn points(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.strokes
            .iter()
            .flat_map(|s| s.0.iter().map(|w| (w.x, w.y)))
    }
}

/// `path` evenly over `start..=start+ms` (a single point is held there).
fn spread(path: &[(u32, u32)], start: u64, ms: u64) -> Vec<Waypoint> {
    match path {
        [] => Vec::new(),
        [p] => vec![wp(start, *p), wp(start + ms, *p)],
        _ => {
            let n = (path.len() - 1) as u64;
            path.iter()
                .enumerate()
                .map(|(i, p)| wp(start + ms * i as u64 / n, *p))
                .collect()
        }
    }
}

/// What the touchscreen holds before the gesture: its slots' tracking ids and whether
/// `BTN_TOUCH` is down.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Contacts {
    pub tracking_ids: Vec<i32>,
    pub touching: bool,
}

impl Contacts {
    /// Why no gesture may start now: a finger (or a stuck contact) on the glass. Writing
    /// beside it would merge into the user's touch, turning a tap into a two-finger one.
    pub fn busy(&self) -> Option<String> {
        let held: Vec<String> = self
            .tracking_ids
            .iter()
            .enumerate()
            .filter(|(_, id)| **id >= 0)
            .map(|(slot, id)| format!("slot {slot} (tracking id {id})"))
            .collect();
        if !held.is_empty() {
            return Some(format!(
                "a finger is on the touchscreen ({}): nothing was injected; try again when \
                 the screen is not being touched",
                held.join(", ")
            ));
        }
        self.touching.then(|| {
            "the touchscreen reports BTN_TOUCH down: nothing was injected; try again when \
             the screen is not being touched"
                .to_string()
        })
    }
}

/// Check a gesture's shape: 1..MAX_FINGERS strokes of 2..=MAX_PATH_POINTS waypoints in
/// time order, each lasting, within MAX_GESTURE_MS.
pub fn validate(g: &Gesture) -> Result<(), String> {
    if g.strokes.is_empty() {
        return Err("a gesture needs at least one finger".into());
    }
    if g.strokes.len() > MAX_FINGERS * 2 {
        return Err(format!("at most {} strokes", MAX_FINGERS * 2));
    }
    for (i, s) in g.strokes.iter().enumerate() {
        let w = &s.0;
        if w.len() < 2 || w.len() > MAX_PATH_POINTS + 2 {
            return Err(format!("finger {i}: 2..{MAX_PATH_POINTS} points"));
        }
        if w.windows(2).any(|p| p[1].at_ms < p[0].at_ms) || w[w.len() - 1].at_ms <= w[0].at_ms {
            return Err(format!("finger {i}: times must increase"));
        }
    }
    if g.duration_ms() > MAX_GESTURE_MS {
        return Err(format!("a gesture lasts at most {MAX_GESTURE_MS} ms"));
    }
    Ok(())
}

/// Where stroke `s` is at `t` (within its time span), in screen pixels.
fn position(s: &Stroke, t: u64) -> (u32, u32) {
    let w = &s.0;
    let seg = w
        .windows(2)
        .find(|p| t >= p[0].at_ms && t <= p[1].at_ms)
        .unwrap_or(&w[w.len() - 2..]);
    let (a, b) = (seg[0], seg[1]);
    let span = b.at_ms.saturating_sub(a.at_ms);
    if span == 0 {
        return (b.x, b.y);
    }
    let f = |p: u32, q: u32| {
        let d = i64::from(q) - i64::from(p);
        let off = d * (t.saturating_sub(a.at_ms)) as i64 / span as i64;
        (i64::from(p) + off) as u32
    };
    (f(a.x, b.x), f(a.y, b.y))
}

/// A contact value in the middle of an axis (pressure, touch size): above its minimum,
/// since Android reads zero pressure as a hovering finger.
fn middle(a: AbsInfo, divisor: i32) -> i32 {
    let span = (i64::from(a.maximum) - i64::from(a.minimum)).max(0);
    let v = i64::from(a.minimum) + (span / i64::from(divisor)).max(1);
    v.min(i64::from(a.maximum)) as i32
}

/// The frames that draw `g` on `ts` (shown on `screen`), with the fingers in the lowest
/// free slots and tracking ids from `first_id`.
///
/// Each frame writes `ABS_MT_SLOT` before a slot's values whenever the slot differs from
/// the last one written (always in the first frame, since the kernel may have another
/// slot staged), a new contact's tracking id, pressure and touch size (where the device
/// has them) and position, a moved contact's changed coordinates, a lifted contact's
/// tracking id -1, then `BTN_TOUCH` (and `BTN_TOOL_FINGER`) when the first finger lands or
/// the last lifts, then `SYN_REPORT`. A finger that reaches its end moves there in one
/// frame and lifts in the next, at the same time.
pub fn frames(
    g: &Gesture,
    ts: &Touchscreen,
    screen: &Screen,
    first_id: i32,
) -> Result<Vec<Frame>, String> {
    validate(g)?;
    // Every moment something happens: waypoints and a move every MOVE_INTERVAL_MS.
    let mut times: Vec<u64> = Vec::new();
    for s in &g.strokes {
        let (start, end) = (s.0[0].at_ms, s.0[s.0.len() - 1].at_ms);
        times.extend(s.0.iter().map(|w| w.at_ms));
        times.extend((start..end).step_by(MOVE_INTERVAL_MS as usize));
    }
    times.sort_unstable();
    times.dedup();

    let mut strokes = Strokes::new(ts, g.strokes.len(), first_id);
    let mut out = Vec::new();
    for &t in &times {
        let mut ev = Vec::new();
        let before = strokes.down;
        for (i, s) in g.strokes.iter().enumerate() {
            let (start, end) = (s.0[0].at_ms, s.0[s.0.len() - 1].at_ms);
            if t < start || t > end {
                continue;
            }
            let (px, py) = position(s, t);
            let raw = screen.to_raw(ts, px, py)?;
            strokes.place(&mut ev, i, raw)?;
        }
        if before == 0 && strokes.down > 0 {
            strokes.buttons(&mut ev, true);
        }
        if !ev.is_empty() {
            ev.push(Ev::SYN);
            out.push(Frame {
                at_ms: t,
                events: ev,
            });
        }
        // Fingers whose stroke ends now lift, in a frame of their own.
        let mut lift = Vec::new();
        for (i, s) in g.strokes.iter().enumerate() {
            if s.0[s.0.len() - 1].at_ms == t {
                strokes.lift(&mut lift, i);
            }
        }
        if !lift.is_empty() {
            if strokes.down == 0 {
                strokes.buttons(&mut lift, false);
            }
            lift.push(Ev::SYN);
            out.push(Frame {
                at_ms: t,
                events: lift,
            });
        }
    }
    Ok(out)
}

/// The strokes of one gesture as [`frames`] writes them: which slot each stroke holds,
/// where each slot was last put, the slot last selected, the tracking ids.
struct Strokes<'t> {
    ts: &'t Touchscreen,
    slot_of: Vec<Option<usize>>,
    last_pos: Vec<Option<(i32, i32)>>,
    in_use: Vec<bool>,
    written_slot: Option<usize>,
    down: usize,
    next_id: i32,
}

impl<'t> Strokes<'t> {
    fn new(ts: &'t Touchscreen, strokes: usize, first_id: i32) -> Self {
        let slots = ts.slot_count();
        Self {
            ts,
            slot_of: vec![None; strokes],
            last_pos: vec![None; slots],
            in_use: vec![false; slots],
            written_slot: None,
            down: 0,
            next_id: first_id,
        }
    }

    /// `ABS_MT_SLOT` when `slot` is not the one last written.
    fn select(&mut self, ev: &mut Vec<Ev>, slot: usize) {
        if self.written_slot != Some(slot) {
            ev.push(Ev::abs(ABS_MT_SLOT, slot as i32));
            self.written_slot = Some(slot);
        }
    }

    /// `BTN_TOUCH` (and `BTN_TOOL_FINGER`) where the device has them.
    fn buttons(&self, ev: &mut Vec<Ev>, touching: bool) {
        if self.ts.btn_touch {
            ev.push(Ev::key(BTN_TOUCH, touching));
        }
        if self.ts.btn_tool_finger {
            ev.push(Ev::key(BTN_TOOL_FINGER, touching));
        }
    }

    /// Stroke `i` is at `raw` now: it lands (a free slot, a new tracking id, pressure and
    /// size, the position), or moves (the coordinates that changed).
    fn place(&mut self, ev: &mut Vec<Ev>, i: usize, (rx, ry): (i32, i32)) -> Result<(), String> {
        let Some(slot) = self.slot_of[i] else {
            let slots = self.in_use.len();
            let slot = self.in_use.iter().position(|u| !u).ok_or_else(|| {
                format!("the touchscreen has {slots} slots, too few for this gesture")
            })?;
            self.in_use[slot] = true;
            self.slot_of[i] = Some(slot);
            self.select(ev, slot);
            ev.push(Ev::abs(ABS_MT_TRACKING_ID, self.next_id));
            self.next_id = self.next_id.wrapping_add(1);
            if self.next_id > self.ts.tracking.maximum || self.next_id < 0 {
                self.next_id = self.ts.tracking.minimum.max(0);
            }
            if let Some(p) = self.ts.pressure {
                ev.push(Ev::abs(ABS_MT_PRESSURE, middle(p, 2)));
            }
            if let Some(m) = self.ts.touch_major {
                ev.push(Ev::abs(ABS_MT_TOUCH_MAJOR, middle(m, 8)));
            }
            ev.push(Ev::abs(ABS_MT_POSITION_X, rx));
            ev.push(Ev::abs(ABS_MT_POSITION_Y, ry));
            self.last_pos[slot] = Some((rx, ry));
            self.down += 1;
            return Ok(());
        };
        let was = self.last_pos[slot];
        if was != Some((rx, ry)) {
            self.select(ev, slot);
            if was.map(|w| w.0) != Some(rx) {
                ev.push(Ev::abs(ABS_MT_POSITION_X, rx));
            }
            if was.map(|w| w.1) != Some(ry) {
                ev.push(Ev::abs(ABS_MT_POSITION_Y, ry));
            }
            self.last_pos[slot] = Some((rx, ry));
        }
        Ok(())
    }

    /// Stroke `i` lifts: its slot's tracking id -1, the slot free again.
    fn lift(&mut self, ev: &mut Vec<Ev>, i: usize) {
        if let Some(slot) = self.slot_of[i].take() {
            self.select(ev, slot);
            ev.push(Ev::abs(ABS_MT_TRACKING_ID, -1));
            self.in_use[slot] = false;
            self.down -= 1;
        }
    }
}
