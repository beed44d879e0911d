//! The touch helper: `nl2sh __nl2sh-touch`, run by the executor for each gesture as the
//! UI identity (Android's shell user, whose `input` group may open `/dev/input/event*` and
//! whose `uhid` group may open `/dev/uinput`), so the kernel grants it exactly the device
//! access that identity has. It reads one request (JSON) on stdin, finds the
//! touchscreen, and either writes the gesture to it, or, when its node is not writable,
//! to a virtual copy made with uinput; it prints one JSON line saying what it did:
//!
//! * `{"outcome":"done","path":"evdev:/dev/input/event2"|"uinput",...}`
//! * `{"outcome":"unavailable","why":...}`: no touchscreen it may write (the executor
//!   then uses `input`, where the gesture allows);
//! * `{"outcome":"refused","why":...}`: a finger is on the glass; nothing was written;
//! * `{"outcome":"failed","why":...}`: a write failed part way.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::device::{self, Found};
use super::{frames, Frame, Gesture, Screen, Stroke, Waypoint};

/// The argument that selects this role.
pub const HELPER_ARG: &str = "__nl2sh-touch";
/// Largest request read.
const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long a new virtual touchscreen is left before the first touch: Android's
/// InputReader sees the node through inotify and must open it and load its
/// configuration first, or the first events are lost.
pub const UINPUT_SETTLE_MS: u64 = 300;
/// How long a virtual touchscreen outlives its last event: destroying it ends its
/// readers' reads, dropping what they have not yet read.
const UINPUT_DRAIN_MS: u64 = 100;

/// What the executor asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub screen: Screen,
    pub gesture: Gesture,
    pub input_dir: PathBuf,
    pub uinput: PathBuf,
}

impl Request {
    pub fn to_json(&self) -> Value {
        let strokes: Vec<Value> = self
            .gesture
            .strokes
            .iter()
            .map(|s| Value::Array(s.0.iter().map(|w| json!([w.at_ms, w.x, w.y])).collect()))
            .collect();
        json!({
            "screen": [self.screen.width, self.screen.height, self.screen.rotation],
            "strokes": strokes,
            "input_dir": self.input_dir.display().to_string(),
            "uinput": self.uinput.display().to_string(),
        })
    }

    pub fn from_json(v: &Value) -> Result<Self, String> {
        let num = |v: &Value, what: &str| {
            v.as_u64()
                .ok_or_else(|| format!("`{what}` must be a non-negative integer"))
        };
        let small = |v: &Value, what: &str| {
            num(v, what).and_then(|n| u32::try_from(n).map_err(|_| format!("`{what}` is too big")))
        };
        let screen = v
            .get("screen")
            .and_then(Value::as_array)
            .filter(|a| a.len() == 3)
            .ok_or("`screen` must be [width, height, rotation]")?;
        let screen = Screen {
            width: small(&screen[0], "width")?,
            height: small(&screen[1], "height")?,
            rotation: (small(&screen[2], "rotation")? % 4) as u8,
        };
        let strokes = v
            .get("strokes")
            .and_then(Value::as_array)
            .ok_or("`strokes` must be an array")?
            .iter()
            .map(|s| {
                s.as_array()
                    .ok_or_else(|| "a stroke must be an array".to_string())?
                    .iter()
                    .map(|w| match w.as_array().map(Vec::as_slice) {
                        Some([t, x, y]) => Ok(Waypoint {
                            at_ms: num(t, "time")?,
                            x: small(x, "x")?,
                            y: small(y, "y")?,
                        }),
                        _ => Err("a waypoint must be [ms, x, y]".to_string()),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Stroke)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let path = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(PathBuf::from)
                .ok_or_else(|| format!("`{k}` must be a path"))
        };
        Ok(Self {
            screen,
            gesture: Gesture { strokes },
            input_dir: path("input_dir")?,
            uinput: path("uinput")?,
        })
    }
}

fn outcome(kind: &str, why: String) -> Value {
    json!({"outcome": kind, "why": why})
}

/// Entry point of the hidden helper role.
pub fn main() -> ExitCode {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut input);
    let answer = match read {
        Err(e) => outcome("failed", format!("reading the request: {e}")),
        Ok(_) if input.len() > MAX_REQUEST_BYTES => {
            outcome("failed", "the request is too large".into())
        }
        Ok(_) => match serde_json::from_slice(&input)
            .map_err(|e| e.to_string())
            .and_then(|v: Value| Request::from_json(&v))
        {
            Ok(req) => run(&req),
            Err(e) => outcome("failed", format!("bad request: {e}")),
        },
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{answer}").and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// Do what `req` asks; the answer line.
pub fn run(req: &Request) -> Value {
    let started = Instant::now();
    let found = match device::find(&req.input_dir) {
        Ok(f) => f,
        Err(why) => return outcome("unavailable", why),
    };
    let Found { path, ts, file } = found;
    match device::contacts(&file, &ts) {
        Ok(c) => {
            if let Some(why) = c.busy() {
                return outcome("refused", why);
            }
        }
        Err(e) => {
            return outcome(
                "unavailable",
                format!("{}: its contacts cannot be read: {e}", path.display()),
            )
        }
    }
    let first_id = ts.tracking.minimum.max(0);
    let planned = match frames(&req.gesture, &ts, &req.screen, first_id) {
        Ok(f) => f,
        Err(why) => return outcome("failed", why),
    };
    let described = |path: String, extra: Value| {
        let mut v = json!({
            "outcome": "done",
            "path": path,
            "device": ts.name,
            "frames": planned.len(),
            "events": planned.iter().map(|f| f.events.len()).sum::<usize>(),
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        v
    };
    match device::open_for_writing(&path) {
        Ok(writer) => match write(&writer, &planned) {
            Ok(last) => described(
                format!("evdev:{}", path.display()),
                json!({"write_ms": ms(last - started)}),
            ),
            Err(e) => outcome("failed", format!("writing to {}: {e}", path.display())),
        },
        Err(own) => {
            let virt = match device::create_virtual(
                &req.uinput,
                &req.input_dir,
                &ts,
                device::VIRTUAL_NAME,
            ) {
                Ok(v) => v,
                Err(e) => {
                    return outcome(
                        "unavailable",
                        format!(
                            "{} ({}) cannot be written ({own}), and no virtual touchscreen \
                             can be made through {} ({e})",
                            path.display(),
                            ts.name,
                            req.uinput.display()
                        ),
                    )
                }
            };
            std::thread::sleep(Duration::from_millis(UINPUT_SETTLE_MS));
            let result = write(&virt.file, &planned);
            std::thread::sleep(Duration::from_millis(UINPUT_DRAIN_MS));
            let node = virt.node.as_ref().map(|n| n.display().to_string());
            drop(virt);
            match result {
                Ok(last) => described(
                    "uinput".into(),
                    json!({
                        "write_ms": ms(last - started),
                        "settle_ms": UINPUT_SETTLE_MS,
                        "node": node,
                        "copy_of": path.display().to_string(),
                        "why": format!("{} cannot be written: {own}", path.display()),
                    }),
                ),
                Err(e) => outcome("failed", format!("writing to the virtual touchscreen: {e}")),
            }
        }
    }
}

fn write(file: &std::fs::File, frames: &[Frame]) -> std::io::Result<Instant> {
    device::write_frames(file, frames, Instant::now())
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}
