//! `android.screen_dump` (`uiautomator dump`) and `android.screenshot` (`screencap -p`):
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

use super::image::{self, Format};
use super::uixml::{self, MAX_DUMP_BYTES};
use super::{render, run_checked, within_budget, AndroidTool, ANDROID_TIMEOUT, OUTPUT_BUDGET};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::risk::Assessment;
use crate::tools::Resource;
use crate::tools::{Args, ExecContext, Prepared, ToolDef, ToolError, ToolOutput};

/// Largest PNG read from `screencap` (a 1440x3200 screen is well under it).
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
        data: None,
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
                Ok(ToolOutput::json(true, &value))
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
            description: "Take a screenshot (screencap) and return it as one image. `auto` sends \
                the PNG when it fits the 3 MiB base64 limit and no scaling is asked, otherwise \
                a JPEG (quality 80), scaled down until it fits; `max_side` scales so the longer \
                side is at most that many pixels (some clients refuse images over 2000 px).",
            schema: json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "enum": ["auto", "png", "jpeg"],
                               "description": "Image encoding (default auto)"},
                    "max_side": {"type": "integer", "minimum": 320, "maximum": 4096,
                                 "description": "Longest side in pixels after scaling"}
                },
                "additionalProperties": false
            }),
        },
        program: "screencap",
        prepare: prepare_screenshot,
    }
}

fn prepare_screenshot(
    args: &Args<'_>,
    env: &DeviceEnv,
    program: &str,
) -> Result<Prepared, ToolError> {
    let format = match args.opt_str("format")?.unwrap_or("auto") {
        "auto" => Format::Auto,
        "png" => Format::Png,
        "jpeg" => Format::Jpeg,
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "`format` {other:?} is not auto, png or jpeg"
            )))
        }
    };
    let max_side = match args.opt_u64("max_side")? {
        None => None,
        Some(s @ 320..=4096) => Some(s as u32),
        Some(s) => {
            return Err(ToolError::InvalidArguments(format!(
                "`max_side` {s} is not within 320..4096"
            )))
        }
    };
    let mut spec = CommandSpec::new(vec![program.to_string(), "-p".into()]);
    spec.max_stdout = MAX_SCREENCAP_BYTES;
    Ok(Prepared {
        data: None,
        action: render(&spec.argv),
        assessment: Assessment::read_only(),
        identity: env.ui_identity(),
        // The tool, not the caller, chose the command line.
        confinement: Confinement::Fixed,
        resources: vec![Resource::Screen],
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let out = run_checked(&ctx, spec).await?;
                if out.stdout.dropped > 0 {
                    return Err(ToolError::Failed(format!(
                        "screencap wrote over {MAX_SCREENCAP_BYTES} bytes"
                    )));
                }
                // Decoding and encoding are CPU work: off the async threads.
                let png = out.stdout.bytes;
                ctx.blocking(move || screenshot_output(&png, format, max_side))
                    .await
            })
        }),
    })
}

/// The attachment and result object for the PNG `screencap` wrote.
fn screenshot_output(
    out: &[u8],
    format: Format,
    max_side: Option<u32>,
) -> Result<ToolOutput, ToolError> {
    let png = image::find_png(out).map_err(ToolError::Failed)?;
    let fitted =
        image::fit(png, format, max_side, MAX_SCREEN_BASE64_BYTES).map_err(ToolError::Failed)?;
    let data_base64 = base64::engine::general_purpose::STANDARD.encode(&fitted.data);
    let mut value = json!({
        "format": fitted.format(),
        "width": fitted.width,
        "height": fitted.height,
        "original_width": fitted.original_width,
        "original_height": fitted.original_height,
        "bytes": fitted.data.len(),
        "base64_bytes": data_base64.len(),
        "scaled": (fitted.width, fitted.height) != (fitted.original_width, fitted.original_height),
        "reencoded": fitted.reencoded,
    });
    if fitted.media_type == "image/jpeg" {
        value["quality"] = json!(image::JPEG_QUALITY);
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
