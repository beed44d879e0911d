//! `android.screenshot` end to end against the stand-in `screencap`
//! (tests/fixtures/android-bin/screencap): raw frames in every pixel format and both
//! header layouts made from the real `screencap -p` PNGs of the shared corpus, the
//! defaults, options, crop and coordinate map, and the fallback to `screencap -p`.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{json, Value};

use super::image::{base64_len, decode_rgb, Rgb};
use super::rawframe::{self, PixelFormat};
use super::tests::Rig;
use nl2sh_proto::limits::MAX_SCREEN_BASE64_BYTES;

/// Every real `screencap -p` PNG in the corpus, decoded.
fn real_screens() -> Option<Vec<(String, Rgb)>> {
    let dir = super::corpus::root_or_skip()?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir.join("screen"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "{paths:?}");
    Some(
        paths
            .into_iter()
            .map(|p| {
                let img = decode_rgb(&std::fs::read(&p).unwrap()).unwrap();
                (p.file_name().unwrap().to_string_lossy().into_owned(), img)
            })
            .collect(),
    )
}

fn attachment_bytes(out: &crate::tools::ToolOutput) -> Vec<u8> {
    assert_eq!(out.attachments.len(), 1);
    base64::engine::general_purpose::STANDARD
        .decode(&out.attachments[0].data_base64)
        .unwrap()
}

/// What `rawframe::encode` then `parse` keeps of `img` in `format` (RGB_565 drops bits).
fn as_device_keeps(img: &Rgb, format: PixelFormat) -> Rgb {
    rawframe::parse(&rawframe::encode(img, format, None))
        .unwrap()
        .1
}

/// Serve `raw` as the stand-in's raw output, in the rig's own directory.
fn raw_rig(raw: &[u8]) -> (Rig, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // The stand-in runs as shell (2000) when the tests run as root.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("frame.raw");
    std::fs::write(&file, raw).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let rig = Rig::new(&[("NL2SH_STANDIN_RAW_FILE", &file.display().to_string())]);
    (rig, dir)
}

/// The map, scale and device fields every screenshot result carries.
fn assert_map(v: &Value, image: (u32, u32), screen: [u32; 4], device: (u32, u32)) {
    assert_eq!(
        v["map"],
        json!({"image": [image.0, image.1], "screen": screen}),
        "{v}"
    );
    assert_eq!(v["device"], json!([device.0, device.1]));
    let scale = f64::from(image.0) / f64::from(screen[2] - screen[0]);
    assert!((v["scale"].as_f64().unwrap() - scale).abs() < 1e-9, "{v}");
    assert_eq!(
        (v["width"].clone(), v["height"].clone()),
        (json!(image.0), json!(image.1))
    );
}

#[tokio::test]
async fn real_screens_as_raw_frames_in_every_format_and_layout() {
    let Some(screens) = real_screens() else {
        return;
    };
    let formats = [
        PixelFormat::Rgba8888,
        PixelFormat::Rgbx8888,
        PixelFormat::Rgb888,
        PixelFormat::Rgb565,
        PixelFormat::Bgra8888,
    ];
    for (n, (name, img)) in screens.iter().enumerate() {
        let (w, h) = (img.width, img.height);
        // Every format and layout parses back to the source's pixels (as the format keeps
        // them: RGB_565 drops the low bits).
        for format in formats {
            for colour_space in [None, Some(1)] {
                let (info, got) =
                    rawframe::parse(&rawframe::encode(img, format, colour_space)).unwrap();
                assert_eq!((info.width, info.height, info.format), (w, h, format));
                if format == PixelFormat::Rgb565 {
                    let close = got
                        .pixels
                        .iter()
                        .zip(&img.pixels)
                        .all(|(a, b)| a.abs_diff(*b) <= 8);
                    assert!(close, "{name} {format:?}");
                } else {
                    assert!(got.pixels == img.pixels, "{name} {format:?}");
                }
            }
        }
        // Through the tool: two formats per screen, one per layout, so the five screens
        // cover every format, both layouts and each colour-space word.
        for (k, colour_space) in [None, Some((n % 3) as u32)].into_iter().enumerate() {
            let format = formats[(2 * n + k) % formats.len()];
            let what = format!("{name} {format:?} {colour_space:?}");
            let (rig, _dir) = raw_rig(&rawframe::encode(img, format, colour_space));
            // Lossless and full size: exactly the source's pixels (as the format keeps them).
            let (v, out) = rig
                .ok(
                    "android.screenshot",
                    json!({"format": "png", "max_side": 8192}),
                )
                .await;
            assert_eq!(rig.ran(), ["dumpsys window", "screencap "], "{what}");
            let got = decode_rgb(&attachment_bytes(&out)).unwrap();
            let want = as_device_keeps(img, format);
            assert!(got.pixels == want.pixels, "{what}: pixels differ");
            assert_map(&v, (w, h), [0, 0, w, h], (w, h));
            let cap = &v["capture"];
            assert_eq!(cap["mode"], "raw", "{what}");
            assert_eq!(cap["pixel_format"], format.name(), "{what}");
            assert_eq!(
                cap["header_bytes"],
                json!(if colour_space.is_some() { 16 } else { 12 })
            );
            let space = match colour_space {
                None => "not given",
                Some(1) => "sRGB",
                Some(2) => "Display P3",
                Some(_) => "unknown",
            };
            assert_eq!(cap["colour_space"], space, "{what}");
            assert!(
                out.attachments[0].data_base64.len() <= MAX_SCREEN_BASE64_BYTES,
                "{what}"
            );
        }
    }
}

#[tokio::test]
async fn real_screens_at_the_defaults_are_1280_px_jpegs_with_a_map() {
    let Some(screens) = real_screens() else {
        return;
    };
    for (name, img) in &screens {
        let (w, h) = (img.width, img.height);
        let (rig, _dir) = raw_rig(&rawframe::encode(img, PixelFormat::Rgba8888, Some(1)));
        let (v, out) = rig.ok("android.screenshot", json!({})).await;
        let long = w.max(h);
        let (iw, ih) = if long > 1280 {
            ((w * 1280 / long).max(1), (h * 1280 / long).max(1))
        } else {
            (w, h)
        };
        assert_map(&v, (iw, ih), [0, 0, w, h], (w, h));
        assert_eq!(
            (v["format"].clone(), v["quality"].clone()),
            (json!("jpeg"), json!(80))
        );
        let jpeg = attachment_bytes(&out);
        assert_eq!(jpeg_dimensions(&jpeg), Some((iw, ih)), "{name}");
        let a = &out.attachments[0];
        assert_eq!(
            (a.media_type.as_str(), a.width, a.height),
            ("image/jpeg", Some(iw), Some(ih))
        );
        assert!(a.data_base64.len() <= MAX_SCREEN_BASE64_BYTES, "{name}");
        assert_eq!(v["base64_bytes"], json!(a.data_base64.len()));
        // The same scaling as PNG: exactly the source averaged down.
        let (v, out) = rig.ok("android.screenshot", json!({"format": "png"})).await;
        assert_map(&v, (iw, ih), [0, 0, w, h], (w, h));
        let got = decode_rgb(&attachment_bytes(&out)).unwrap();
        assert!(got.pixels == img.resize(iw, ih).pixels, "{name}");
    }
}

#[tokio::test]
async fn crop_quality_and_max_side_apply_and_the_map_says_where() {
    let Some(screens) = real_screens() else {
        return;
    };
    let (name, img) = &screens[0];
    let (w, h) = (img.width, img.height);
    let (rig, _dir) = raw_rig(&rawframe::encode(img, PixelFormat::Rgbx8888, None));
    let rect = [100, 200, 100 + w / 2, 200 + h / 3];
    let (v, out) = rig
        .ok(
            "android.screenshot",
            json!({"format": "png", "crop": rect, "max_side": 8192}),
        )
        .await;
    assert_map(&v, (w / 2, h / 3), rect, (w, h));
    let got = decode_rgb(&attachment_bytes(&out)).unwrap();
    assert!(got.pixels == img.crop(rect).pixels, "{name}");
    // Scaled: image pixel (ix, iy) maps back into the crop.
    let (v, _) = rig
        .ok(
            "android.screenshot",
            json!({"crop": rect, "max_side": 200, "quality": 30}),
        )
        .await;
    let long = (w / 2).max(h / 3);
    let (iw, ih) = ((w / 2) * 200 / long, (h / 3) * 200 / long);
    assert_map(&v, (iw, ih), rect, (w, h));
    assert_eq!(v["quality"], 30);
    let low = v["bytes"].as_u64().unwrap();
    let (v, _) = rig
        .ok(
            "android.screenshot",
            json!({"crop": rect, "max_side": 200, "quality": 95}),
        )
        .await;
    assert!(
        v["bytes"].as_u64().unwrap() > low,
        "higher quality, more bytes"
    );
    // Crops outside the frame, empty ones and bad options are refused clearly.
    for (args, says) in [
        (json!({"crop": [0, 0, w + 1, 10]}), "outside the"),
        (json!({"crop": [10, 10, 10, 20]}), "is empty"),
        (json!({"crop": [0, 0, 10]}), ""),
        (json!({"crop": [-1, 0, 10, 10]}), ""),
        (json!({"quality": 0}), ""),
        (json!({"quality": 101}), ""),
        (json!({"max_side": 10}), ""),
        (json!({"format": "gif"}), ""),
    ] {
        let err = rig
            .run("android.screenshot", args.clone())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(says), "{args}: {err}");
    }
}

#[tokio::test]
async fn auto_is_the_jpeg_default() {
    let rig = Rig::new(&[]);
    let (v, _) = rig
        .ok("android.screenshot", json!({"format": "auto"}))
        .await;
    assert_eq!(v["format"], "jpeg");
    // Never enlarged: a 540x1200 screen stays 540x1200 under the 1280 px default.
    assert_map(&v, (540, 1200), [0, 0, 540, 1200], (540, 1200));
}

#[tokio::test]
async fn the_stand_ins_own_raw_frame_is_the_fixture_png() {
    let rig = Rig::new(&[]);
    let (v, out) = rig.ok("android.screenshot", json!({"format": "png"})).await;
    assert_eq!(rig.ran(), ["dumpsys window", "screencap "]);
    assert_eq!(v["capture"]["mode"], "raw");
    assert_eq!(v["capture"]["colour_space"], "sRGB");
    let fixture = std::fs::read(super::tests::standins().join("data/screen.png")).unwrap();
    let got = decode_rgb(&attachment_bytes(&out)).unwrap();
    assert!(got.pixels == decode_rgb(&fixture).unwrap().pixels);
    assert_map(&v, (540, 1200), [0, 0, 540, 1200], (540, 1200));
}

#[tokio::test]
async fn a_failing_raw_capture_falls_back_to_the_png_and_says_why() {
    for (mode, why) in [
        ("fail", "raw screencap failed"),
        ("badformat", "pixel format 22"),
        ("short", "bytes after a 12- or 16-byte header"),
    ] {
        let rig = Rig::new(&[("NL2SH_STANDIN_RAW", mode)]);
        let (v, out) = rig.ok("android.screenshot", json!({"format": "png"})).await;
        assert_eq!(
            rig.ran(),
            ["dumpsys window", "screencap ", "screencap -p"],
            "{mode}"
        );
        assert_eq!(v["capture"]["mode"], "png", "{mode}");
        let reason = v["capture"]["fallback_reason"].as_str().unwrap();
        assert!(reason.contains(why), "{mode}: {reason}");
        let fixture = std::fs::read(super::tests::standins().join("data/screen.png")).unwrap();
        let got = decode_rgb(&attachment_bytes(&out)).unwrap();
        assert!(got.pixels == decode_rgb(&fixture).unwrap().pixels, "{mode}");
        assert_map(&v, (540, 1200), [0, 0, 540, 1200], (540, 1200));
    }
}

#[tokio::test]
async fn a_large_screen_becomes_a_jpeg_under_the_limit() {
    let rig = Rig::new(&[("NL2SH_STANDIN_SCREEN", "large")]);
    // Noise at full size and top quality is far over 3 MiB: shrunk until it fits.
    let (v, out) = rig
        .ok(
            "android.screenshot",
            json!({"max_side": 8192, "quality": 100}),
        )
        .await;
    let a = &out.attachments[0];
    assert_eq!(a.media_type, "image/jpeg");
    assert!(
        a.data_base64.len() <= MAX_SCREEN_BASE64_BYTES,
        "{}",
        a.data_base64.len()
    );
    let (w, h) = (a.width.unwrap(), a.height.unwrap());
    assert!(w < 1440 && h < 3200, "{w}x{h}");
    assert_eq!(v["shrunk_to_fit"], true);
    assert_map(&v, (w, h), [0, 0, 1440, 3200], (1440, 3200));
    let jpeg = attachment_bytes(&out);
    assert_eq!(jpeg_dimensions(&jpeg), Some((w, h)));
    assert_eq!(base64_len(jpeg.len()), a.data_base64.len());
    // PNG of noise cannot fit at any readable size either way it ends: fits or says so.
    match rig
        .run(
            "android.screenshot",
            json!({"format": "png", "max_side": 8192}),
        )
        .await
    {
        Ok(out) => assert!(out.attachments[0].data_base64.len() <= MAX_SCREEN_BASE64_BYTES),
        Err(e) => assert!(e.to_string().contains("cannot fit"), "{e}"),
    }
}

/// Width and height from a baseline JPEG's SOF0 segment.
fn jpeg_dimensions(j: &[u8]) -> Option<(u32, u32)> {
    if !j.starts_with(&[0xff, 0xd8]) {
        return None;
    }
    let mut i = 2;
    while i + 9 < j.len() {
        if j[i] != 0xff {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([j[i + 2], j[i + 3]]));
        if j[i + 1] == 0xc0 {
            let h = u16::from_be_bytes([j[i + 5], j[i + 6]]);
            let w = u16::from_be_bytes([j[i + 7], j[i + 8]]);
            return Some((u32::from(w), u32::from(h)));
        }
        i += 2 + len;
    }
    None
}

/// A capture that would be black is not taken: the screen off, or a secure (FLAG_SECURE)
/// window in front. A locked screen is captured, and the result says it is locked.
#[tokio::test]
async fn a_capture_that_would_be_black_says_why_instead() {
    for (var, value, why) in [
        ("NL2SH_STANDIN_SCREEN", "off", "the screen is off"),
        ("NL2SH_STANDIN_SECURE", "1", "secure window (FLAG_SECURE)"),
    ] {
        let rig = Rig::new(&[(var, value)]);
        let err = rig
            .run("android.screenshot", json!({}))
            .await
            .expect_err("a black capture was taken");
        assert!(err.to_string().contains(why), "{var}: {err}");
        assert_eq!(rig.ran(), ["dumpsys window"], "{var}: screencap ran");
    }
    let rig = Rig::new(&[("NL2SH_STANDIN_LOCKED", "1")]);
    let (v, _) = rig.ok("android.screenshot", json!({})).await;
    assert_eq!(v["screen"]["locked"], true);
    assert_eq!(v["screen"]["off"], false);
    assert_eq!(v["screen"]["secure"], false);
    assert_eq!(rig.ran(), ["dumpsys window", "screencap "]);
}
