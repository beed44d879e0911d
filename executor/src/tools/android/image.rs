//! Screenshot images: decode the PNG `screencap -p` wrote (the fallback path), crop,
//! scale and encode a frame as JPEG or PNG within the screen limit (base64 of one image at
//! most `MAX_SCREEN_BASE64_BYTES`). Pure Rust (`png`, `jpeg-encoder`), bounded: dimensions
//! and decoder memory are capped before anything is allocated.

use std::io::Cursor;

/// The eight bytes every PNG starts with.
pub const PNG_SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";
/// Largest side accepted from `screencap` (phones and tablets are well under it).
pub const MAX_SIDE: u32 = 8192;
/// Most pixels accepted (bounds the decoded buffers: at most 4 + 3 bytes per pixel).
pub const MAX_PIXELS: u64 = 16 * 1024 * 1024;
/// Default JPEG quality: text stays readable.
pub const JPEG_QUALITY: u8 = 80;
/// Default longest side: what model image inputs take without shrinking again.
pub const DEFAULT_MAX_SIDE: u32 = 1280;
/// Smallest side a fitted image may shrink to before we give up.
const MIN_FIT_SIDE: u32 = 64;
/// Bytes some devices print before the PNG (linker warnings); the signature is searched
/// for within this prefix.
const MAX_PREFIX: usize = 1024;

/// Which encoding the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
}

/// How to encode one screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding {
    pub format: Format,
    /// JPEG quality, 1..=100 (unused for PNG).
    pub quality: u8,
    /// Longest side of the image, in pixels.
    pub max_side: u32,
}

impl Default for Encoding {
    fn default() -> Self {
        Self {
            format: Format::Jpeg,
            quality: JPEG_QUALITY,
            max_side: DEFAULT_MAX_SIDE,
        }
    }
}

/// An image ready to attach.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub media_type: &'static str,
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// The longest side had to shrink below `max_side` to fit the byte limit.
    pub shrunk_to_fit: bool,
}

impl Fitted {
    /// `"png"` or `"jpeg"`.
    pub fn format(&self) -> &'static str {
        if self.media_type == "image/jpeg" {
            "jpeg"
        } else {
            "png"
        }
    }
}

/// Length of the standard (padded) base64 of `n` bytes.
pub fn base64_len(n: usize) -> usize {
    n.div_ceil(3).saturating_mul(4)
}

/// The PNG in `out`: skips a short text prefix some devices print before it.
pub fn find_png(out: &[u8]) -> Result<&[u8], String> {
    let window = &out[..out.len().min(MAX_PREFIX + PNG_SIGNATURE.len())];
    let start = window
        .windows(PNG_SIGNATURE.len())
        .position(|w| w == PNG_SIGNATURE)
        .ok_or_else(|| match out.len() {
            0 => "screencap wrote nothing".to_string(),
            n => format!("screencap did not write a PNG ({n} bytes without a PNG signature)"),
        })?;
    Ok(&out[start..])
}

/// Width and height from the IHDR chunk, which must come first; checked against bounds.
pub fn png_dimensions(png: &[u8]) -> Result<(u32, u32), String> {
    if png.len() < 33 || !png.starts_with(PNG_SIGNATURE) {
        return Err("not a PNG (bad signature or too short)".into());
    }
    if &png[12..16] != b"IHDR" || png[8..12] != [0, 0, 0, 13] {
        return Err("malformed PNG: IHDR is not the first chunk".into());
    }
    let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let h = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE || u64::from(w) * u64::from(h) > MAX_PIXELS
    {
        return Err(format!("PNG dimensions {w}x{h} are out of range"));
    }
    Ok((w, h))
}

/// `(w, h)` scaled so the longer side is at most `max_side` (never enlarged).
pub fn bounded_dimensions(w: u32, h: u32, max_side: Option<u32>) -> (u32, u32) {
    let Some(max) = max_side else { return (w, h) };
    let long = w.max(h);
    if long <= max {
        return (w, h);
    }
    let scale = |v: u32| ((u64::from(v) * u64::from(max)) / u64::from(long)).max(1) as u32;
    (scale(w), scale(h))
}

/// Encode `image` as `enc` asks, scaled so its longest side is at most `max_side`, and
/// shrunk further until its base64 fits `max_base64` (or refused when it cannot).
pub fn fit(image: &Rgb, enc: &Encoding, max_base64: usize) -> Result<Fitted, String> {
    let (ow, oh) = (image.width, image.height);
    let (tw, th) = bounded_dimensions(ow, oh, Some(enc.max_side));
    let mut scaled = if (tw, th) == (ow, oh) {
        None
    } else {
        Some(image.resize(tw, th))
    };
    let jpeg = enc.format == Format::Jpeg;
    // Each try shrinks by the square root of how far over the limit the last one was
    // (bytes scale with area), with a margin; a few tries always suffice.
    for attempt in 0..8 {
        let current = scaled.as_ref().unwrap_or(image);
        let data = if jpeg {
            current.to_jpeg(enc.quality)?
        } else {
            current.to_png()?
        };
        let size = base64_len(data.len());
        if size <= max_base64 {
            return Ok(Fitted {
                media_type: if jpeg { "image/jpeg" } else { "image/png" },
                data,
                width: current.width,
                height: current.height,
                shrunk_to_fit: attempt > 0,
            });
        }
        let factor = ((max_base64 as f64 / size as f64).sqrt() * 0.9).clamp(0.25, 0.9);
        let nw = (f64::from(current.width) * factor) as u32;
        let nh = (f64::from(current.height) * factor) as u32;
        if nw.min(nh) < MIN_FIT_SIDE {
            break;
        }
        scaled = Some(image.resize(nw, nh));
    }
    Err(format!(
        "cannot fit the {ow}x{oh} screenshot into {max_base64} bytes of base64"
    ))
}

/// An 8-bit RGB image.
#[derive(Debug, Clone)]
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// Decode any PNG (palette, grey, alpha, 16-bit) to 8-bit RGB; alpha is dropped (screens
/// are opaque).
pub fn decode_rgb(png: &[u8]) -> Result<Rgb, String> {
    let limits = png::Limits {
        bytes: (MAX_PIXELS * 4) as usize,
    };
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(png), limits);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("cannot decode PNG: {e}"))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| "cannot decode PNG: image too large".to_string())?;
    let mut buf = vec![0u8; size];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("cannot decode PNG: {e}"))?;
    let (w, h) = (info.width, info.height);
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE || info.line_size == 0 {
        return Err(format!("PNG dimensions {w}x{h} are out of range"));
    }
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err("cannot decode PNG: palette was not expanded".into()),
    };
    let mut pixels = Vec::with_capacity(w as usize * h as usize * 3);
    for row in buf.chunks(info.line_size).take(h as usize) {
        for px in row.chunks_exact(channels).take(w as usize) {
            match channels {
                1 | 2 => pixels.extend_from_slice(&[px[0], px[0], px[0]]),
                _ => pixels.extend_from_slice(&px[..3]),
            }
        }
    }
    if pixels.len() != w as usize * h as usize * 3 {
        return Err("cannot decode PNG: short image data".into());
    }
    Ok(Rgb {
        width: w,
        height: h,
        pixels,
    })
}

/// For each destination index, the source range it averages (area sampling).
fn spans(src: u32, dst: u32) -> Vec<(usize, usize)> {
    let (src, dst) = (src as usize, dst.max(1) as usize);
    (0..dst)
        .map(|i| {
            let a = i * src / dst;
            let b = ((i + 1) * src / dst).max(a + 1).min(src);
            (a, b)
        })
        .collect()
}

impl Rgb {
    /// The pixels of `[x1, y1, x2, y2)` (already checked to lie within the image).
    pub fn crop(&self, [x1, y1, x2, y2]: [u32; 4]) -> Rgb {
        let (x1, x2) = (x1.min(self.width) as usize, x2.min(self.width) as usize);
        let (y1, y2) = (y1.min(self.height) as usize, y2.min(self.height) as usize);
        let sw = self.width as usize;
        let mut pixels = Vec::with_capacity((x2 - x1) * (y2 - y1) * 3);
        for y in y1..y2 {
            pixels.extend_from_slice(&self.pixels[(y * sw + x1) * 3..(y * sw + x2) * 3]);
        }
        Rgb {
            width: (x2 - x1) as u32,
            height: (y2 - y1) as u32,
            pixels,
        }
    }

    /// Downscale by averaging each destination pixel's source area (a box filter:
    /// readable text, no aliasing). Never enlarges.
    pub fn resize(&self, width: u32, height: u32) -> Rgb {
        let (width, height) = (width.clamp(1, self.width), height.clamp(1, self.height));
        let (sw, sh) = (self.width as usize, self.height as usize);
        let xs = spans(self.width, width);
        let ys = spans(self.height, height);
        // Horizontal pass: sh rows of `width` pixels.
        let mut tmp = vec![0u8; sh * width as usize * 3];
        for y in 0..sh {
            let row = &self.pixels[y * sw * 3..(y + 1) * sw * 3];
            for (x, &(a, b)) in xs.iter().enumerate() {
                let mut sum = [0u32; 3];
                for px in row[a * 3..b * 3].chunks_exact(3) {
                    for c in 0..3 {
                        sum[c] += u32::from(px[c]);
                    }
                }
                let n = (b - a) as u32;
                let out = &mut tmp[(y * width as usize + x) * 3..][..3];
                for c in 0..3 {
                    out[c] = ((sum[c] + n / 2) / n) as u8;
                }
            }
        }
        // Vertical pass.
        let w = width as usize;
        let mut pixels = vec![0u8; height as usize * w * 3];
        for (y, &(a, b)) in ys.iter().enumerate() {
            let n = (b - a) as u32;
            for x in 0..w * 3 {
                let sum: u32 = (a..b).map(|sy| u32::from(tmp[sy * w * 3 + x])).sum();
                pixels[y * w * 3 + x] = ((sum + n / 2) / n) as u8;
            }
        }
        Rgb {
            width,
            height,
            pixels,
        }
    }

    pub fn to_jpeg(&self, quality: u8) -> Result<Vec<u8>, String> {
        let (w, h) = (self.width as u16, self.height as u16);
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, quality)
            .encode(&self.pixels, w, h, jpeg_encoder::ColorType::Rgb)
            .map_err(|e| format!("cannot encode JPEG: {e}"))?;
        Ok(out)
    }

    pub fn to_png(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let err = |e: png::EncodingError| format!("cannot encode PNG: {e}");
        let mut writer = encoder.write_header().map_err(err)?;
        writer.write_image_data(&self.pixels).map_err(err)?;
        writer.finish().map_err(err)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> Rgb {
        let mut pixels = Vec::new();
        for y in 0..h {
            for x in 0..w {
                pixels.extend_from_slice(&[(x % 256) as u8, (y % 256) as u8, 128]);
            }
        }
        Rgb {
            width: w,
            height: h,
            pixels,
        }
    }

    fn enc(format: Format, max_side: u32) -> Encoding {
        Encoding {
            format,
            quality: JPEG_QUALITY,
            max_side,
        }
    }

    #[test]
    fn max_side_scales_and_png_is_lossless() {
        let img = gradient(400, 800);
        let f = fit(&img, &enc(Format::Jpeg, 320), 1 << 20).unwrap();
        assert_eq!((f.media_type, f.width, f.height), ("image/jpeg", 160, 320));
        assert!(f.data.starts_with(&[0xff, 0xd8]));
        let p = fit(&img, &enc(Format::Png, 320), 1 << 20).unwrap();
        assert_eq!((p.media_type, p.width, p.height), ("image/png", 160, 320));
        assert_eq!(
            decode_rgb(&p.data).unwrap().pixels,
            img.resize(160, 320).pixels
        );
        let same = fit(&img, &enc(Format::Png, 1280), 1 << 20).unwrap();
        assert_eq!(decode_rgb(&same.data).unwrap().pixels, img.pixels);
    }

    #[test]
    fn a_tight_budget_shrinks_until_it_fits_or_refuses() {
        let img = gradient(600, 600);
        let f = fit(&img, &enc(Format::Jpeg, 1280), 6000).unwrap();
        assert!(
            base64_len(f.data.len()) <= 6000 && f.width < 600 && f.shrunk_to_fit,
            "{}x{}",
            f.width,
            f.height
        );
        assert!(fit(&img, &enc(Format::Jpeg, 1280), 100).is_err());
    }

    #[test]
    fn crop_takes_the_rectangle() {
        let img = gradient(10, 8);
        let c = img.crop([2, 3, 5, 7]);
        assert_eq!((c.width, c.height), (3, 4));
        assert_eq!(&c.pixels[..3], &[2, 3, 128]);
        assert_eq!(&c.pixels[c.pixels.len() - 3..], &[4, 6, 128]);
    }

    #[test]
    fn hostile_pngs_are_refused_without_panicking() {
        assert!(png_dimensions(b"").is_err());
        assert!(png_dimensions(b"\x89PNG\r\n\x1a\n").is_err());
        let mut huge = gradient(2, 2).to_png().unwrap();
        huge[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        assert!(png_dimensions(&huge).unwrap_err().contains("out of range"));
        let mut cut = gradient(50, 50).to_png().unwrap();
        cut.truncate(cut.len() / 2);
        assert!(decode_rgb(&cut).is_err());
        assert!(find_png(b"").is_err());
        assert!(find_png(&[b'x'; 5000]).is_err());
        let mut prefixed = b"WARNING: linker: unused DT entry\n".to_vec();
        prefixed.extend_from_slice(PNG_SIGNATURE);
        assert!(find_png(&prefixed).unwrap().starts_with(PNG_SIGNATURE));
    }

    #[test]
    fn resize_averages_areas() {
        let img = Rgb {
            width: 2,
            height: 1,
            pixels: vec![0, 0, 0, 255, 255, 255],
        };
        assert_eq!(img.resize(1, 1).pixels, vec![128, 128, 128]);
        assert_eq!(bounded_dimensions(1080, 2400, Some(1200)), (540, 1200));
        assert_eq!(bounded_dimensions(1080, 2400, Some(4096)), (1080, 2400));
        assert_eq!(bounded_dimensions(1080, 2400, None), (1080, 2400));
    }
}
