//! A tmux server of a test's own, for what a person sees on a real terminal: commands
//! run in a window, keys typed into it (`send-keys`), the screen read back
//! (`capture-pane`).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::{nl2sh_bin, Fixture};

/// A tmux server of this test's own, on a socket in a private directory (so nothing is
/// left in tmux's shared one), killed when dropped.
pub struct Tmux {
    dir: tempfile::TempDir,
}

impl Tmux {
    /// None (the reason printed) where tmux is not installed.
    pub fn start() -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            nl2sh_proto::test_skip::skip("tmux is not installed (scripts/test installs it)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("nl2sh-tmux-")
            .tempdir()
            .expect("tempdir");
        Some(Tmux { dir })
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        // No user configuration: the screen is tmux's defaults, 200x50.
        cmd.args(["-f", "/dev/null", "-S"])
            .arg(self.dir.path().join("socket"));
        cmd
    }

    /// The command line that runs the nl2sh binary for `fx` with `args`, without the
    /// environment's token and log filter.
    pub fn nl2sh_line(fx: &Fixture, args: &[&str]) -> String {
        let mut line = format!(
            "env -u NL2SH_PROTOCOL_TOKEN -u NL2SH_LOG {} --config {}",
            sq(&nl2sh_bin().display().to_string()),
            sq(&fx.config().display().to_string())
        );
        for a in args {
            line.push(' ');
            line.push_str(&sq(a));
        }
        line
    }

    /// Start `line` (a shell command) in a new detached `width`x`height` window named
    /// `session`.
    pub fn open(&self, session: &str, width: u16, height: u16, line: &str) {
        let status = self
            .tmux()
            .args(["new-session", "-d", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .args(["-s", session])
            .arg(line)
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
    }

    /// Type `keys` into `session` (tmux key names: `Enter`, `Tab`, `Escape`, `C-c`, or
    /// literal text).
    pub fn send_keys(&self, session: &str, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", session])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success(), "tmux send-keys failed");
    }

    /// Type `text` literally (no key names).
    pub fn type_text(&self, session: &str, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-l", "-t", session, text])
            .status()
            .expect("tmux send-keys");
        assert!(status.success(), "tmux send-keys failed");
    }

    /// The screen of `session` now, row by row.
    pub fn screen(&self, session: &str) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", session])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the screen of `session` satisfies `ready`; returns it.
    pub fn wait_screen(&self, session: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen(session);
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not on the screen in 20 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Run `args` of the nl2sh binary for `fx` in a new 200x50 window and return the
    /// screen once it has exited (wrapped lines joined), and its exit code.
    pub fn run(&self, fx: &Fixture, session: &str, args: &[&str]) -> (i32, String) {
        self.run_rows(fx, session, args, true)
    }

    /// [`Tmux::run`], with the screen's rows as a person sees them when `join` is false
    /// (a wrapped line is several rows).
    pub fn run_rows(
        &self,
        fx: &Fixture,
        session: &str,
        args: &[&str],
        join: bool,
    ) -> (i32, String) {
        let mut line = Self::nl2sh_line(fx, args);
        // The window stays after the command so its screen can be read.
        line.push_str("; echo \"[exit $?]\"; sleep 600");
        self.open(session, 200, 50, &line);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut capture = self.tmux();
            capture.args(["capture-pane", "-p", "-t", session]);
            if join {
                capture.arg("-J");
            }
            let out = capture.output().expect("tmux capture-pane");
            let screen = String::from_utf8_lossy(&out.stdout).into_owned();
            let code = screen.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("[exit ")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            });
            if let Some(code) = code {
                return (code, screen);
            }
            assert!(
                Instant::now() < deadline,
                "the command did not finish in tmux:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// `s` single-quoted for sh.
pub fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
