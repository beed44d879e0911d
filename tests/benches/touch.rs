//! The cost of a tap (issue 39: 20 ms from the call to the last event written): nl2sh's
//! touch helper (`nl2sh __nl2sh-touch`, started as the executor starts it, answering when
//! the last event is written) on a touchscreen made with uinput, against the `input`
//! stand-in (tests/fixtures/android-bin/input, a shell script: on a phone `input` starts a
//! JVM, 200-400 ms), and the engine's own part without a device (frames planned and
//! written to /dev/null, the tap's 10 ms hold included).
//!
//! Run: `cargo build --release && cargo bench -p nl2sh-tests --bench touch` (uses
//! target/release/nl2sh, or $NL2SH_BIN). The touchscreen needs root and /dev/uinput;
//! without them that figure is skipped, saying so (the kernel rig measures it:
//! tests/kernel/checks.sh, "touch-bench"). The helper is pointed at a directory holding
//! only the bench's own touchscreen, so a real one on the machine is never touched.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nl2sh_executor::tools::android::bench;

const RUNS: usize = 40;

fn summary(mut runs: Vec<Duration>) -> String {
    runs.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "median {:.1} ms, fastest {:.1} ms, slowest {:.1} ms ({} taps)",
        ms(runs[runs.len() / 2]),
        ms(runs[0]),
        ms(runs[runs.len() - 1]),
        runs.len()
    )
}

fn main() {
    let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/android-bin/input");
    let input: Vec<Duration> = (0..RUNS)
        .map(|i| {
            let t = Instant::now();
            let ok = Command::new(&standin)
                .args(["tap", &(100 + i).to_string(), "200"])
                .status()
                .expect("input stand-in")
                .success();
            assert!(ok, "the input stand-in failed");
            t.elapsed()
        })
        .collect();
    println!(
        "input stand-in (`input tap x y`, a shell script): {}",
        summary(input)
    );

    let sink = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let engine: Vec<Duration> = (0..RUNS as u32)
        .map(|i| {
            let t = Instant::now();
            bench::tap_to_sink(&sink, 100 + i, 200).expect("engine");
            t.elapsed()
        })
        .collect();
    println!(
        "touch engine, frames to /dev/null (10 ms hold included): {}",
        summary(engine)
    );

    let panel = match bench::phone_panel(Path::new("/dev/uinput"), "nl2sh-bench-panel") {
        Ok(p) => p,
        Err(e) => {
            println!("touch helper on a touchscreen: skipped, /dev/uinput: {e} (the kernel rig measures it)");
            return;
        }
    };
    let Some(node) = panel.node.clone() else {
        println!("touch helper on a touchscreen: skipped, the kernel named no event node");
        return;
    };
    // Let the node appear, then point the helper at a directory holding only it.
    std::thread::sleep(Duration::from_millis(200));
    let dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(&node, dir.path().join("event0")).expect("symlink");
    let bin = nl2sh_tests::nl2sh_bin();
    let helper: Vec<Duration> = (0..RUNS as u32)
        .map(|i| {
            let request = bench::tap_request(100 + i, 200, dir.path());
            let t = Instant::now();
            let mut child = Command::new(&bin)
                .arg(nl2sh_executor::tools::android::TOUCH_HELPER_ARG)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("nl2sh");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(request.as_bytes())
                .expect("request");
            let out = child.wait_with_output().expect("answer");
            let took = t.elapsed();
            let answer = String::from_utf8_lossy(&out.stdout);
            assert!(answer.contains("\"outcome\":\"done\""), "{answer}");
            took
        })
        .collect();
    println!(
        "touch helper on a uinput touchscreen ({}), from start to the last event written: {}",
        node.display(),
        summary(helper)
    );
}
