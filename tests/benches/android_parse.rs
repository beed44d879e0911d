//! How long the Android parsers take on real device output: `android.screen_dump`'s parse
//! of the largest real uiautomator dump in the shared corpus (`uidump/`), and
//! `android.device_state`'s parsers over every file of `state/`, `dumpsys-window/` and
//! `display/` (each file given as the window, power and battery dumps at once).
//!
//! Run: `cargo bench -p nl2sh-tests --bench android_parse` with the corpus beside the
//! checkout (`../shared/android-real`) or named by `NL2SH_ANDROID_REAL`; nothing runs on a
//! device and no binary is needed. Prints the median and the fastest of many runs per file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nl2sh_executor::tools::android::bench;

/// Runs per figure: enough for a stable median of sub-millisecond work.
const RUNS: usize = 200;

fn corpus() -> Option<PathBuf> {
    let dir = match std::env::var_os("NL2SH_ANDROID_REAL") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/android-real"),
    };
    dir.join("MANIFEST.tsv").is_file().then_some(dir)
}

/// Every file directly in `dir`, decoded, with its name and size in bytes.
fn files(dir: &Path) -> Vec<(String, usize, String)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, bytes.len(), bench::corpus_text(&bytes))
        })
        .collect();
    out.sort();
    out
}

/// (median, fastest) of `RUNS` runs of `f`.
fn time(mut f: impl FnMut()) -> (Duration, Duration) {
    let mut runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    runs.sort();
    (runs[RUNS / 2], runs[0])
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let Some(root) = corpus() else {
        println!("android_parse: the real-device corpus is absent (../shared/android-real or NL2SH_ANDROID_REAL); nothing to measure");
        return;
    };
    // The largest file that is a window dump as uiautomator writes it (some corpus files
    // are saved search output around a dump, not a dump).
    let dumps = files(&root.join("uidump"));
    let (name, size, xml, nodes) = dumps
        .iter()
        .filter_map(|(n, s, t)| Some((n, *s, t, bench::screen_dump(t.as_bytes()).ok()?)))
        .max_by_key(|(_, s, _, _)| *s)
        .expect("a parsable window dump in uidump/");
    let (median, fastest) = time(|| {
        std::hint::black_box(bench::screen_dump(std::hint::black_box(xml.as_bytes())).ok());
    });
    println!(
        "screen_dump parse, largest real dump uidump/{name} ({size} bytes, {nodes} nodes shown): median {}, fastest {}",
        us(median),
        us(fastest)
    );

    let mut total = (Duration::ZERO, 0usize, 0usize);
    for dir in ["state", "dumpsys-window", "display"] {
        for (name, size, text) in files(&root.join(dir)) {
            let state = bench::device_state(&text);
            assert!(state.is_object(), "{dir}/{name}");
            let (median, fastest) = time(|| {
                std::hint::black_box(bench::device_state(std::hint::black_box(&text)));
            });
            println!(
                "device_state parse {dir}/{name} ({size} bytes): median {}, fastest {}",
                us(median),
                us(fastest)
            );
            total = (total.0 + median, total.1 + 1, total.2 + size);
        }
    }
    println!(
        "device_state parse, all {} state files ({} bytes): {} (sum of medians)",
        total.1,
        total.2,
        us(total.0)
    );
}
