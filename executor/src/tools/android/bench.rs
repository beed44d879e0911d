//! The Android parsers, reached from outside the crate for the `android_parse` bench
//! (tests/benches/android_parse.rs, docs/BENCHMARKS.md); no tool's interface.

use serde_json::Value;

/// `android.screen_dump`'s parse of a window dump: the nodes worth showing, or why the
/// dump is malformed.
pub fn screen_dump(xml: &[u8]) -> Result<usize, String> {
    super::uixml::parse(xml).map(|d| d.total)
}

/// What `android.device_state` reports when `text` is each of its three dumps (window,
/// power, battery): every parser of the device's state runs over the whole text.
pub fn device_state(text: &str) -> Value {
    let text = Ok(text.to_string());
    super::state::state_json(&text, &text, &text, None)
}

/// A corpus file's text as a phone's shell prints it (UTF-16LE or a BOM decoded, CRLF as
/// LF).
pub fn corpus_text(bytes: &[u8]) -> String {
    super::corpus::text(bytes)
}

/// A phone's touchscreen for the `touch` bench: 1080x2400 axes, ten slots, pressure and
/// touch size, made with uinput under `name`; removed when dropped.
pub struct Panel {
    _device: super::touch::device::Virtual,
    /// Its event node, when the kernel named it.
    pub node: Option<std::path::PathBuf>,
}

fn bench_phone() -> super::touch::Touchscreen {
    use crate::sys::evdev::AbsInfo;
    let axis = |maximum| AbsInfo {
        maximum,
        ..AbsInfo::default()
    };
    super::touch::Touchscreen {
        name: "bench".into(),
        x: axis(1079),
        y: axis(2399),
        slot: axis(9),
        tracking: axis(65535),
        pressure: Some(axis(255)),
        touch_major: Some(axis(255)),
        btn_touch: true,
        btn_tool_finger: true,
    }
}

/// Make the bench's touchscreen through `uinput`.
pub fn phone_panel(uinput: &std::path::Path, name: &str) -> std::io::Result<Panel> {
    let dir = std::path::Path::new("/dev/input");
    let device = super::touch::device::create_virtual(uinput, dir, &bench_phone(), name)?;
    Ok(Panel {
        node: device.node.clone(),
        _device: device,
    })
}

/// The touch helper's request (stdin) for a tap at (x, y) on a 1080x2400 screen, looking
/// for the touchscreen in `input_dir`.
pub fn tap_request(x: u32, y: u32, input_dir: &std::path::Path) -> String {
    super::touch::helper::Request {
        screen: super::touch::Screen {
            width: 1080,
            height: 2400,
            rotation: 0,
        },
        gesture: super::touch::Gesture::tap((x, y)),
        input_dir: input_dir.to_path_buf(),
        uinput: "/nonexistent".into(),
    }
    .to_json()
    .to_string()
}

/// The engine's own part of a tap, without a device: plan the frames and write them to
/// `sink` on time (so it includes the tap's 10 ms hold). Returns the events written.
pub fn tap_to_sink(sink: &std::fs::File, x: u32, y: u32) -> std::io::Result<usize> {
    let screen = super::touch::Screen {
        width: 1080,
        height: 2400,
        rotation: 0,
    };
    let frames = super::touch::frames(
        &super::touch::Gesture::tap((x, y)),
        &bench_phone(),
        &screen,
        0,
    )
    .map_err(std::io::Error::other)?;
    super::touch::device::write_frames(sink, &frames, std::time::Instant::now())?;
    Ok(frames.iter().map(|f| f.events.len()).sum())
}
