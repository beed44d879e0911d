//! `android.screen_dump` (`uiautomator dump`) and `android.screenshot` (`screencap`, raw,
//! with `screencap -p` as the fallback):
//! read-only, one UiAutomation client at a time (`Resource::Screen`).

use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use serde_json::{json, Value};

use nl2sh_proto::channels::{Attachment, Confinement, Identity};
use nl2sh_proto::limits::MAX_SCREEN_BASE64_BYTES;

use super::image::{self, Encoding, Format, Rgb};
use super::rawframe::{self, RawInfo};
use super::uixml::{self, MAX_DUMP_BYTES};
use super::{render, run_checked, within_budget, AndroidTool, ANDROID_TIMEOUT, OUTPUT_BUDGET};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::risk::Assessment;
use crate::tools::Resource;
use crate::tools::{Args, ExecContext, Prepared, ToolDef, ToolError, ToolOutput};

/// Largest PNG read from `screencap -p` (a 1440x3200 screen is well under it).
const MAX_SCREENCAP_BYTES: usize = 16 * 1024 * 1024;
/// Where dumps go when `NL2SH_UI_DUMP_DIR` is unset: shell's own directory on Android.
const ANDROID_TMP: &str = "/data/local/tmp";

/// Makes each dump file name unique within this executor.
static DUMP_SEQ: AtomicU64 = AtomicU64::new(0);

pub(super) fn dump() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.screen_dump",
            description: "Read the UI on screen as a list of visible elements (uiautomator): \
                text, desc (content description), id (resource id), class, bounds [x1,y1,x2,y2], \
                center [x,y] (tap there with android.tap) and clickable; at most 300, in drawing \
                order, with `truncated` when more exist.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "uiautomator",
        prepare: prepare_dump,
    }
}

/// The directory dump files are written to.
fn dump_dir() -> PathBuf {
    match std::env::var_os("NL2SH_UI_DUMP_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ if Path::new(ANDROID_TMP).is_dir() => PathBuf::from(ANDROID_TMP),
        _ => std::env::temp_dir(),
    }
}

fn prepare_dump(_args: &Args<'_>, env: &DeviceEnv, program: &str) -> Result<Prepared, ToolError> {
    let (argv, path) = dump_argv(program);
    let dumpsys = env.program("dumpsys").map(|p| p.display().to_string());
    let identity = env.ui_identity();
    Ok(Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: render(&argv),
        assessment: Assessment::read_only(),
        identity,
        // The tool, not the caller, chose the command line.
        confinement: Confinement::Fixed,
        resources: vec![Resource::Screen],
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let dump = dump_through(&ctx, argv, path).await?;
                let mut value = dump_json(&dump);
                value["screen"] = screen_now(&ctx, dumpsys).await;
                Ok(ToolOutput::json(true, &value).read_from(text_sources(&dump)))
            })
        }),
    })
}

/// Whether the screen is off, locked or shows a secure window (`state::screen_condition`,
/// one `dumpsys window`), or why that is not known.
async fn screen_now(ctx: &crate::tools::ExecContext, dumpsys: Option<String>) -> Value {
    let Some(dumpsys) = dumpsys else {
        return json!({"unknown": "dumpsys is not on this device's PATH"});
    };
    let mut spec = CommandSpec::new(vec![dumpsys, "window".into()]);
    spec.max_stdout = super::state::MAX_STATE_BYTES;
    match run_checked(ctx, spec).await {
        Ok(out) => super::state::screen_condition(&String::from_utf8_lossy(&out.stdout.bytes)),
        Err(e) => json!({"unknown": e.to_string()}),
    }
}

/// `uiautomator dump FILE` run as `ctx` says, FILE read back and parsed.
async fn dump_through(
    ctx: &ExecContext,
    argv: Vec<String>,
    path: PathBuf,
) -> Result<uixml::UiDump, ToolError> {
    let chown_to_shell = ctx.identity == Identity::Shell && ctx.env.euid == 0;
    let file = DumpFile::create(path, chown_to_shell)?;
    let out = run_checked(ctx, CommandSpec::new(argv)).await?;
    let said = out.stdout.text().trim().to_string();
    let xml = ctx.blocking(move || file.read()).await?;
    if xml.is_empty() {
        return Err(ToolError::Failed(format!(
            "uiautomator wrote no window dump: {said}"
        )));
    }
    uixml::parse(&xml).map_err(ToolError::Failed)
}

/// A fresh dump through `program` (uiautomator), for tools that check the screen before
/// they act (`target.rs`).
pub(super) async fn read_dump(
    ctx: &ExecContext,
    program: &str,
) -> Result<uixml::UiDump, ToolError> {
    let (argv, path) = dump_argv(program);
    dump_through(ctx, argv, path).await
}

fn dump_argv(program: &str) -> (Vec<String>, PathBuf) {
    let n = DUMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let path = dump_dir().join(format!("nl2sh-window-{}-{n}.xml", std::process::id()));
    let argv = vec![
        program.to_string(),
        "dump".into(),
        path.display().to_string(),
    ];
    (argv, path)
}

/// The result object: nodes within the output budget, and whether any were left out.
fn dump_json(dump: &uixml::UiDump) -> Value {
    let (nodes, cut) = within_budget(dump.nodes.iter().map(uixml::UiNode::to_json), OUTPUT_BUDGET);
    let mut packages: Vec<&str> = Vec::new();
    for n in &dump.nodes {
        if !n.package.is_empty() && !packages.contains(&n.package.as_str()) && packages.len() < 8 {
            packages.push(&n.package);
        }
    }
    json!({
        "rotation": dump.rotation,
        "packages": packages,
        "count": nodes.len(),
        "total": dump.total,
        "truncated": cut || nodes.len() < dump.total,
        "nodes": nodes,
    })
}

/// The apps whose text a dump shows, the one with most labelled elements first.
pub(super) fn text_sources(dump: &uixml::UiDump) -> Vec<&str> {
    let mut counted: Vec<(&str, usize)> = Vec::new();
    let labelled = dump
        .nodes
        .iter()
        .filter(|n| !n.package.is_empty() && (!n.text.is_empty() || !n.desc.is_empty()));
    for n in labelled {
        match counted.iter_mut().find(|(p, _)| *p == n.package) {
            Some((_, count)) => *count += 1,
            None => counted.push((&n.package, 1)),
        }
    }
    // Stable: apps with as many elements keep their drawing order.
    counted.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
    counted.into_iter().map(|(p, _)| p).collect()
}

/// The dump file: created by us beforehand (exclusively, not through a link, so nothing
/// planted at the name is written through), removed when dropped.
struct DumpFile {
    path: PathBuf,
}

impl DumpFile {
    fn create(path: PathBuf, chown_to_shell: bool) -> Result<Self, ToolError> {
        let fail =
            |e: std::io::Error| ToolError::Failed(format!("cannot create {}: {e}", path.display()));
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(nl2sh_proto::state_layout::PRIVATE_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(fail)?;
        let file = Self { path };
        if chown_to_shell {
            // uiautomator runs as shell and must be able to write the file we own.
            let shell = Some(nix::unistd::Uid::from_raw(crate::sys::AID_SHELL));
            let group = Some(nix::unistd::Gid::from_raw(crate::sys::AID_SHELL));
            nix::unistd::fchown(&f, shell, group).map_err(|e| {
                ToolError::Failed(format!("cannot hand {} to shell: {e}", file.path.display()))
            })?;
        }
        Ok(file)
    }

    /// The dump's bytes, refusing more than `MAX_DUMP_BYTES`.
    fn read(self) -> Result<Vec<u8>, ToolError> {
        let fail = |e: std::io::Error| {
            ToolError::Failed(format!("cannot read {}: {e}", self.path.display()))
        };
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .map_err(fail)?;
        let mut buf = Vec::new();
        f.take(MAX_DUMP_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(fail)?;
        if buf.len() > MAX_DUMP_BYTES {
            return Err(ToolError::Failed(format!(
                "window dump is over the {MAX_DUMP_BYTES}-byte limit"
            )));
        }
        Ok(buf)
    }
}

impl Drop for DumpFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

pub(super) fn screenshot() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: super::SCREEN_READ_TOOL,
            description: "Take a screenshot and return it as one image, JPEG (quality 80) with \
                the longest side at most 1280 px unless asked otherwise, always within the \
                3 MiB base64 limit (shrunk further when needed). `crop` [x1,y1,x2,y2] in device \
                pixels takes part of the screen. The result's `map` {image: [W,H], screen: \
                [x1,y1,x2,y2]} places the image on the screen: image pixel (ix, iy) is screen \
                pixel x1 + (ix + 0.5) * (x2 - x1) / W, likewise y; `scale` is W / (x2 - x1) and \
                `device` the screen's size. Captures raw (`screencap`) and encodes on the \
                device side; falls back to `screencap -p`, and `capture` says which was used.",
            schema: json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "enum": ["auto", "png", "jpeg"],
                               "description": "Image encoding (default jpeg; auto is jpeg)"},
                    "quality": {"type": "integer", "minimum": 1, "maximum": 100,
                                "description": "JPEG quality (default 80)"},
                    "max_side": {"type": "integer", "minimum": MIN_MAX_SIDE, "maximum": image::MAX_SIDE,
                                 "description": "Longest side of the image in pixels (default 1280); never enlarges"},
                    "crop": {"type": "array", "items": {"type": "integer", "minimum": 0},
                             "minItems": 4, "maxItems": 4,
                             "description": "[x1, y1, x2, y2] in device pixels, x1 < x2 <= width, y1 < y2 <= height"}
                },
                "additionalProperties": false
            }),
        },
        program: "screencap",
        prepare: prepare_screenshot,
    }
}

/// Smallest `max_side` a caller may ask for.
const MIN_MAX_SIDE: u32 = 64;

/// What one screenshot call asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct ShotOptions {
    pub enc: Encoding,
    /// `[x1, y1, x2, y2]` in device pixels, x1 < x2 and y1 < y2 (checked against the
    /// frame once it is captured).
    pub crop: Option<[u32; 4]>,
}

fn screenshot_options(args: &Args<'_>) -> Result<ShotOptions, ToolError> {
    let bad = |m: String| Err(ToolError::InvalidArguments(m));
    let mut opts = ShotOptions::default();
    opts.enc.format = match args.opt_str("format")?.unwrap_or("jpeg") {
        // `auto` (the old default) now means the new default.
        "auto" | "jpeg" => Format::Jpeg,
        "png" => Format::Png,
        other => return bad(format!("`format` {other:?} is not auto, png or jpeg")),
    };
    match args.opt_u64("quality")? {
        None => {}
        Some(q @ 1..=100) => opts.enc.quality = q as u8,
        Some(q) => return bad(format!("`quality` {q} is not within 1..100")),
    }
    match args.opt_u64("max_side")? {
        None => {}
        Some(s) if (u64::from(MIN_MAX_SIDE)..=u64::from(image::MAX_SIDE)).contains(&s) => {
            opts.enc.max_side = s as u32
        }
        Some(s) => {
            return bad(format!(
                "`max_side` {s} is not within {MIN_MAX_SIDE}..{}",
                image::MAX_SIDE
            ))
        }
    }
    if let Some(v) = args.0.get("crop").filter(|v| !v.is_null()) {
        let nums: Option<Vec<u32>> = v.as_array().and_then(|a| {
            a.iter()
                .map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()))
                .collect()
        });
        let Some([x1, y1, x2, y2]) = nums.as_deref().and_then(|n| <[u32; 4]>::try_from(n).ok())
        else {
            return bad("`crop` must be four non-negative integers [x1, y1, x2, y2]".into());
        };
        if x1 >= x2 || y1 >= y2 {
            return bad(format!(
                "`crop` [{x1}, {y1}, {x2}, {y2}] is empty: x1 < x2 and y1 < y2 are needed"
            ));
        }
        opts.crop = Some([x1, y1, x2, y2]);
    }
    Ok(opts)
}

fn prepare_screenshot(
    args: &Args<'_>,
    env: &DeviceEnv,
    program: &str,
) -> Result<Prepared, ToolError> {
    let opts = screenshot_options(args)?;
    let mut raw = CommandSpec::new(vec![program.to_string()]);
    raw.max_stdout = rawframe::MAX_RAW_BYTES;
    let mut png = CommandSpec::new(vec![program.to_string(), "-p".into()]);
    png.max_stdout = MAX_SCREENCAP_BYTES;
    let dumpsys = env.program("dumpsys").map(|p| p.display().to_string());
    Ok(Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: render(&raw.argv),
        assessment: Assessment::read_only(),
        identity: env.ui_identity(),
        // The tool, not the caller, chose the command line.
        confinement: Confinement::Fixed,
        resources: vec![Resource::Screen],
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let screen = screen_now(&ctx, dumpsys).await;
                if let Some(why) = captured_black(&screen) {
                    return Err(ToolError::Failed(why));
                }
                let frame = capture(&ctx, raw, png).await?;
                // Cropping, scaling and encoding are CPU work: off the async threads.
                ctx.blocking(move || screenshot_result(&frame, &opts, screen))
                    .await
            })
        }),
    })
}

/// Why a capture now would be black, from [`screen_now`]: the screen is off, or the
/// focused window is secure (FLAG_SECURE, which Android captures as black). Said instead
/// of sending a black image an agent would misread. A locked screen is captured: the
/// keyguard is what is on it, and the result says it is locked.
fn captured_black(screen: &Value) -> Option<String> {
    if screen["off"] == true {
        return Some(
            "not captured: the screen is off, so the capture would be black \
             (wake it first, e.g. android.key WAKEUP)"
                .into(),
        );
    }
    if screen["secure"] == true {
        let window = screen["focused_window"]
            .as_str()
            .unwrap_or("the focused window");
        return Some(format!(
            "not captured: {window} is a secure window (FLAG_SECURE), which Android \
             captures as black"
        ));
    }
    None
}

/// How the frame was captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CaptureMode {
    Raw(RawInfo),
    /// `screencap -p`, after raw capture failed for this reason.
    Png {
        fallback_reason: String,
    },
}

/// One captured screen, decoded.
pub(super) struct Frame {
    pub image: Rgb,
    pub mode: CaptureMode,
}

/// Capture raw; when that fails (non-zero exit, too much output, a frame that does not
/// parse), capture a PNG instead. A timeout or cancellation ends the call.
async fn capture(
    ctx: &ExecContext,
    raw: CommandSpec,
    png: CommandSpec,
) -> Result<Frame, ToolError> {
    let out = ctx.run(raw).await?;
    if out.timed_out || out.cancelled {
        return Err(ToolError::Failed(format!(
            "screencap {}",
            if out.timed_out {
                "timed out"
            } else {
                "was cancelled"
            }
        )));
    }
    let reason = if out.exit_code != Some(0) {
        let said = String::from_utf8_lossy(&out.stderr.bytes);
        let said: String = said.trim().chars().take(200).collect();
        format!("raw screencap failed ({:?}): {said}", out.exit_code)
    } else if out.stdout.dropped > 0 {
        format!("raw screencap wrote over {} bytes", rawframe::MAX_RAW_BYTES)
    } else {
        let bytes = out.stdout.bytes;
        match ctx.blocking(move || Ok(rawframe::parse(&bytes))).await? {
            Ok((info, image)) => {
                return Ok(Frame {
                    image,
                    mode: CaptureMode::Raw(info),
                })
            }
            Err(e) => e.to_string(),
        }
    };
    tracing::debug!(%reason, "screenshot falls back to screencap -p");
    let out = run_checked(ctx, png).await?;
    if out.stdout.dropped > 0 {
        return Err(ToolError::Failed(format!(
            "screencap -p wrote over {MAX_SCREENCAP_BYTES} bytes (after: {reason})"
        )));
    }
    let bytes = out.stdout.bytes;
    let image = ctx
        .blocking(move || {
            let png = image::find_png(&bytes).map_err(ToolError::Failed)?;
            image::png_dimensions(png).map_err(ToolError::Failed)?;
            image::decode_rgb(png).map_err(ToolError::Failed)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("{e} (after raw capture failed: {reason})")))?;
    Ok(Frame {
        image,
        mode: CaptureMode::Png {
            fallback_reason: reason,
        },
    })
}

/// The attachment and result object for one captured frame: the one place a screenshot's
/// result is built, so conditions about the screen can be added here.
pub(super) fn screenshot_result(
    frame: &Frame,
    opts: &ShotOptions,
    screen: Value,
) -> Result<ToolOutput, ToolError> {
    let (w, h) = (frame.image.width, frame.image.height);
    let rect = match opts.crop {
        None => [0, 0, w, h],
        Some(c @ [_, _, x2, y2]) if x2 <= w && y2 <= h => c,
        Some([x1, y1, x2, y2]) => {
            return Err(ToolError::InvalidArguments(format!(
                "`crop` [{x1}, {y1}, {x2}, {y2}] is outside the {w}x{h} screen"
            )))
        }
    };
    let cropped;
    let source = if opts.crop.is_some() {
        cropped = frame.image.crop(rect);
        &cropped
    } else {
        &frame.image
    };
    let fitted =
        image::fit(source, &opts.enc, MAX_SCREEN_BASE64_BYTES).map_err(ToolError::Failed)?;
    let data_base64 = base64::engine::general_purpose::STANDARD.encode(&fitted.data);
    let capture = match &frame.mode {
        CaptureMode::Raw(info) => json!({
            "mode": "raw",
            "header_bytes": info.header_bytes,
            "pixel_format": info.format.name(),
            "colour_space": info.colour_space.name(),
            "colour_conversion": "none: pixels are sent as the display stored them",
        }),
        CaptureMode::Png { fallback_reason } => json!({
            "mode": "png",
            "fallback_reason": fallback_reason,
        }),
    };
    let mut value = json!({
        "format": fitted.format(),
        "width": fitted.width,
        "height": fitted.height,
        "device": [w, h],
        "map": {"image": [fitted.width, fitted.height], "screen": rect},
        "scale": f64::from(fitted.width) / f64::from(rect[2] - rect[0]),
        "bytes": fitted.data.len(),
        "base64_bytes": data_base64.len(),
        "shrunk_to_fit": fitted.shrunk_to_fit,
        "capture": capture,
        "screen": screen,
    });
    if fitted.media_type == "image/jpeg" {
        value["quality"] = json!(opts.enc.quality);
    }
    let mut output = ToolOutput::json(true, &value);
    output.attachments.push(Attachment {
        media_type: fitted.media_type.into(),
        data_base64,
        width: Some(fitted.width),
        height: Some(fitted.height),
    });
    Ok(output)
}

#[cfg(test)]
mod text_source_tests {
    use super::*;

    #[test]
    fn the_app_with_most_text_comes_first_and_unlabelled_apps_not_at_all() {
        let node = |pkg: &str, text: &str, desc: &str| {
            format!(
                "<node text=\"{text}\" content-desc=\"{desc}\" package=\"{pkg}\" \
                 bounds=\"[0,0][10,10]\" />"
            )
        };
        let xml = format!(
            "<hierarchy rotation=\"0\">{}{}{}{}{}{}</hierarchy>",
            node("com.android.systemui", "12:00", ""),
            node("com.example.chat", "Hi", ""),
            node("com.example.chat", "", "Send"),
            node("com.example.empty", "", ""),
            node("", "orphan", ""),
            node("com.example.keyboard", "q", ""),
        );
        let dump = uixml::parse(xml.as_bytes()).unwrap();
        assert_eq!(
            text_sources(&dump),
            [
                "com.example.chat",
                "com.android.systemui",
                "com.example.keyboard"
            ]
        );
    }
}
