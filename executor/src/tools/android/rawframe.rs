//! `screencap`'s raw output (no `-p`): a header of little-endian u32 words — width,
//! height, pixel format and, on newer builds, a colour-space word — then `height` rows of
//! `width * bytes_per_pixel` bytes with no stride padding (docs/PROTOCOLS.md,
//! `android.screenshot`). The 12- and 16-byte layouts are told apart by the byte count;
//! output matching neither is refused. Everything is bounded before anything is allocated.

use super::image::{Rgb, MAX_PIXELS, MAX_SIDE};

/// Bytes of the older header (width, height, format).
pub const HEADER_12: usize = 12;
/// Bytes of the newer header (width, height, format, colour space).
pub const HEADER_16: usize = 16;
/// Largest raw frame accepted: the largest header and the most pixels at 4 bytes each.
pub const MAX_RAW_BYTES: usize = HEADER_16 + MAX_PIXELS as usize * 4;

/// The HAL pixel formats Android's `screencap` emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    Rgba8888,
    Rgbx8888,
    Rgb888,
    Rgb565,
    Bgra8888,
}

impl PixelFormat {
    /// The format for a HAL_PIXEL_FORMAT_* value, if `screencap` can emit it.
    pub fn from_hal(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Rgba8888,
            2 => Self::Rgbx8888,
            3 => Self::Rgb888,
            4 => Self::Rgb565,
            5 => Self::Bgra8888,
            _ => return None,
        })
    }

    pub fn hal(self) -> u32 {
        match self {
            Self::Rgba8888 => 1,
            Self::Rgbx8888 => 2,
            Self::Rgb888 => 3,
            Self::Rgb565 => 4,
            Self::Bgra8888 => 5,
        }
    }

    pub fn bytes_per_pixel(self) -> usize {
        match self {
            Self::Rgba8888 | Self::Rgbx8888 | Self::Bgra8888 => 4,
            Self::Rgb888 => 3,
            Self::Rgb565 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Rgba8888 => "RGBA_8888",
            Self::Rgbx8888 => "RGBX_8888",
            Self::Rgb888 => "RGB_888",
            Self::Rgb565 => "RGB_565",
            Self::Bgra8888 => "BGRA_8888",
        }
    }

    /// One pixel's 8-bit red, green, blue (alpha dropped: screens are opaque).
    fn rgb(self, px: &[u8]) -> [u8; 3] {
        match self {
            Self::Rgba8888 | Self::Rgbx8888 | Self::Rgb888 => [px[0], px[1], px[2]],
            Self::Bgra8888 => [px[2], px[1], px[0]],
            Self::Rgb565 => {
                // A little-endian u16, red in the top five bits.
                let v = u16::from_le_bytes([px[0], px[1]]);
                let (r, g, b) = ((v >> 11) & 0x1f, (v >> 5) & 0x3f, v & 0x1f);
                let five = |c: u16| ((c << 3) | (c >> 2)) as u8;
                [five(r), ((g << 2) | (g >> 4)) as u8, five(b)]
            }
        }
    }
}

/// The colour-space word of the 16-byte header (`dataSpaceToInt()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColourSpace {
    /// The 12-byte header has no colour-space word.
    NotGiven,
    Unknown,
    Srgb,
    DisplayP3,
}

impl ColourSpace {
    fn from_word(v: u32) -> Self {
        match v {
            1 => Self::Srgb,
            2 => Self::DisplayP3,
            // screencap maps every other dataspace to 0.
            _ => Self::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::NotGiven => "not given",
            Self::Unknown => "unknown",
            Self::Srgb => "sRGB",
            Self::DisplayP3 => "Display P3",
        }
    }
}

/// What the header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawInfo {
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    pub colour_space: ColourSpace,
    /// 12 or 16.
    pub header_bytes: usize,
}

/// Why raw output was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RawError {
    #[error("raw frame too short for a header ({0} bytes)")]
    Short(usize),
    #[error("raw frame is {width}x{height}, out of range (at most {MAX_SIDE} a side and {MAX_PIXELS} pixels)")]
    Dimensions { width: u32, height: u32 },
    #[error("raw frame pixel format {0} is not one screencap emits (1..5: RGBA_8888, RGBX_8888, RGB_888, RGB_565, BGRA_8888)")]
    PixelFormat(u32),
    #[error("raw frame is {got} bytes; a {width}x{height} {format} frame is {pixels} bytes after a 12- or 16-byte header")]
    Size {
        got: usize,
        width: u32,
        height: u32,
        format: &'static str,
        pixels: usize,
    },
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Read the header of `out` and check its size against what the header implies.
pub fn header(out: &[u8]) -> Result<RawInfo, RawError> {
    if out.len() < HEADER_12 {
        return Err(RawError::Short(out.len()));
    }
    let (width, height, fmt) = (word(out, 0), word(out, 4), word(out, 8));
    if width == 0
        || height == 0
        || width > MAX_SIDE
        || height > MAX_SIDE
        || u64::from(width) * u64::from(height) > MAX_PIXELS
    {
        return Err(RawError::Dimensions { width, height });
    }
    let format = PixelFormat::from_hal(fmt).ok_or(RawError::PixelFormat(fmt))?;
    // Bounded above: at most MAX_PIXELS * 4, no overflow.
    let pixels = width as usize * height as usize * format.bytes_per_pixel();
    let (header_bytes, colour_space) = if out.len() == HEADER_12 + pixels {
        (HEADER_12, ColourSpace::NotGiven)
    } else if out.len() == HEADER_16 + pixels {
        (HEADER_16, ColourSpace::from_word(word(out, 12)))
    } else {
        return Err(RawError::Size {
            got: out.len(),
            width,
            height,
            format: format.name(),
            pixels,
        });
    };
    Ok(RawInfo {
        width,
        height,
        format,
        colour_space,
        header_bytes,
    })
}

/// Parse a whole raw frame into 8-bit RGB.
pub fn parse(out: &[u8]) -> Result<(RawInfo, Rgb), RawError> {
    let info = header(out)?;
    let bpp = info.format.bytes_per_pixel();
    let mut pixels = Vec::with_capacity(info.width as usize * info.height as usize * 3);
    for px in out[info.header_bytes..].chunks_exact(bpp) {
        pixels.extend_from_slice(&info.format.rgb(px));
    }
    let rgb = Rgb {
        width: info.width,
        height: info.height,
        pixels,
    };
    Ok((info, rgb))
}

/// A raw frame of `img` as `screencap` would write it (`colour_space: None` gives the
/// 12-byte header). Used by the tests and the bench to serve real screens as raw frames.
pub fn encode(img: &Rgb, format: PixelFormat, colour_space: Option<u32>) -> Vec<u8> {
    let bpp = format.bytes_per_pixel();
    let mut out = Vec::with_capacity(HEADER_16 + img.pixels.len() / 3 * bpp);
    for w in [img.width, img.height, format.hal()] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    if let Some(cs) = colour_space {
        out.extend_from_slice(&cs.to_le_bytes());
    }
    for px in img.pixels.chunks_exact(3) {
        let (r, g, b) = (px[0], px[1], px[2]);
        match format {
            PixelFormat::Rgba8888 => out.extend_from_slice(&[r, g, b, 255]),
            // The X byte is undefined on devices: any value must be ignored.
            PixelFormat::Rgbx8888 => out.extend_from_slice(&[r, g, b, 0x5a]),
            PixelFormat::Rgb888 => out.extend_from_slice(&[r, g, b]),
            PixelFormat::Bgra8888 => out.extend_from_slice(&[b, g, r, 255]),
            PixelFormat::Rgb565 => {
                let v = (u16::from(r >> 3) << 11) | (u16::from(g >> 2) << 5) | u16::from(b >> 3);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Rgb {
        Rgb {
            width: 2,
            height: 2,
            pixels: vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30],
        }
    }

    #[test]
    fn both_layouts_and_every_format_round_trip() {
        for hal in 1..=5 {
            let f = PixelFormat::from_hal(hal).unwrap();
            for cs in [None, Some(0), Some(1), Some(2), Some(77)] {
                let raw = encode(&tiny(), f, cs);
                let (info, rgb) = parse(&raw).unwrap();
                assert_eq!(info.header_bytes, if cs.is_some() { 16 } else { 12 });
                let want = match cs {
                    None => ColourSpace::NotGiven,
                    Some(1) => ColourSpace::Srgb,
                    Some(2) => ColourSpace::DisplayP3,
                    Some(_) => ColourSpace::Unknown,
                };
                assert_eq!((info.format, info.colour_space), (f, want));
                if f == PixelFormat::Rgb565 {
                    // 5/6/5 bits: pure colours survive exactly, others within 8.
                    assert_eq!(&rgb.pixels[..9], &tiny().pixels[..9]);
                    for (a, b) in rgb.pixels.iter().zip(tiny().pixels.iter()) {
                        assert!(a.abs_diff(*b) <= 8, "{a} {b}");
                    }
                } else {
                    assert_eq!(rgb.pixels, tiny().pixels, "{f:?}");
                }
            }
        }
    }

    #[test]
    fn hostile_headers_are_refused_before_allocating() {
        assert_eq!(header(&[]), Err(RawError::Short(0)));
        assert_eq!(header(&[0; 11]), Err(RawError::Short(11)));
        let mut raw = encode(&tiny(), PixelFormat::Rgba8888, Some(1));
        // Huge sides: refused from the header alone.
        let mut huge = raw.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(header(&huge), Err(RawError::Dimensions { .. })));
        let mut many = raw.clone();
        many[0..4].copy_from_slice(&8192u32.to_le_bytes());
        many[4..8].copy_from_slice(&8192u32.to_le_bytes());
        assert!(matches!(header(&many), Err(RawError::Dimensions { .. })));
        let mut zero = raw.clone();
        zero[0..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(header(&zero), Err(RawError::Dimensions { .. })));
        let mut odd = raw.clone();
        odd[8..12].copy_from_slice(&0x16u32.to_le_bytes());
        assert_eq!(header(&odd), Err(RawError::PixelFormat(0x16)));
        // Truncated, one byte over, between the layouts: the count decides, and refuses.
        for len in [raw.len() - 1, raw.len() - 3, 13, 16] {
            assert!(
                matches!(header(&raw[..len]), Err(RawError::Size { .. })),
                "{len}"
            );
        }
        raw.push(0);
        assert!(matches!(parse(&raw), Err(RawError::Size { .. })));
    }
}
