//! Screenshot capture-to-image at the defaults (JPEG q80, longest side 1280 px), for each
//! real screen size in the shared corpus: from a raw `screencap` frame (parse, scale,
//! encode) against decoding and re-encoding the `screencap -p` PNG of the same screen.
//! Run: `NL2SH_ANDROID_REAL=<corpus> cargo bench -p nl2sh-executor --bench screenshot`
//! (docs/BENCHMARKS.md). Times exclude running screencap itself.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nl2sh_executor::tools::android::image::{self, Encoding};
use nl2sh_executor::tools::android::rawframe::{self, PixelFormat};
use nl2sh_proto::limits::MAX_SCREEN_BASE64_BYTES;

const RUNS: usize = 5;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(f: impl Fn() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    (median(times), last.expect("RUNS > 0"))
}

fn main() {
    let dir = match std::env::var_os("NL2SH_ANDROID_REAL") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/android-real"),
    };
    let Ok(entries) = std::fs::read_dir(dir.join("screen")) else {
        eprintln!(
            "skipped: no corpus at {} (set NL2SH_ANDROID_REAL)",
            dir.display()
        );
        return;
    };
    let mut pngs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    pngs.sort();
    let enc = Encoding::default();
    println!(
        "screen     | raw frame bytes | raw->jpeg ms | png bytes | png->jpeg ms | image     | jpeg bytes"
    );
    for path in pngs {
        let png = std::fs::read(&path).expect("corpus PNG");
        let img = image::decode_rgb(&png).expect("corpus PNG decodes");
        let raw = rawframe::encode(&img, PixelFormat::Rgba8888, Some(1));
        let (raw_t, fitted) = time(|| {
            let (_, frame) = rawframe::parse(&raw).expect("raw parses");
            image::fit(&frame, &enc, MAX_SCREEN_BASE64_BYTES).expect("fits")
        });
        let (png_t, from_png) = time(|| {
            let frame = image::decode_rgb(&png).expect("png decodes");
            image::fit(&frame, &enc, MAX_SCREEN_BASE64_BYTES).expect("fits")
        });
        assert_eq!(
            fitted.data.len(),
            from_png.data.len(),
            "same pixels, same JPEG"
        );
        println!(
            "{:>10} | {:>15} | {:>12.1} | {:>9} | {:>12.1} | {:>9} | {:>10}",
            format!("{}x{}", img.width, img.height),
            raw.len(),
            raw_t.as_secs_f64() * 1000.0,
            png.len(),
            png_t.as_secs_f64() * 1000.0,
            format!("{}x{}", fitted.width, fitted.height),
            fitted.data.len(),
        );
    }
}
