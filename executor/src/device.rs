//! What this device is and which programs the tools can use, learned at start (and on
//! demand) the way a shell would find them: on the executor's PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::inspect::find_program;

/// Programs the Android tools drive; each tool registers only when its programs exist.
pub const ANDROID_PROGRAMS: &[&str] = &[
    "screencap",
    "uiautomator",
    "input",
    "am",
    "pm",
    "dumpsys",
    "getprop",
    "wm",
    "logcat",
    "ime",
    "settings",
];

#[derive(Debug, Clone)]
pub struct DeviceEnv {
    /// Android profile: build properties present, or `getprop` answers.
    pub android: bool,
    pub euid: u32,
    /// The launching shell's PATH, passed to every command.
    pub path_var: Option<String>,
    /// The system shell used for `shell.exec`.
    pub shell: PathBuf,
    /// Android programs found on PATH.
    pub programs: BTreeMap<&'static str, PathBuf>,
    /// nl2sh's own files: anything that touches them is at least `dangerous`.
    pub protected: crate::risk::Protected,
    /// Where the touch engine finds event devices and uinput, and how it starts its
    /// helper (docs/PROTOCOLS.md, "Touch").
    pub touch: TouchPaths,
}

/// The touch engine's device nodes and helper command.
#[derive(Debug, Clone)]
pub struct TouchPaths {
    pub input_dir: PathBuf,
    pub uinput: PathBuf,
    /// nl2sh's own executable in its touch role.
    pub helper: Vec<String>,
}

impl Default for TouchPaths {
    fn default() -> Self {
        Self {
            input_dir: PathBuf::from("/dev/input"),
            uinput: PathBuf::from("/dev/uinput"),
            helper: vec![
                "/proc/self/exe".into(),
                crate::tools::android::TOUCH_HELPER_ARG.into(),
            ],
        }
    }
}

impl DeviceEnv {
    pub fn probe(path_var: Option<String>) -> Self {
        let programs: BTreeMap<&'static str, PathBuf> = ANDROID_PROGRAMS
            .iter()
            .filter_map(|&name| find_program(name, path_var.as_deref()).map(|p| (name, p)))
            .collect();
        // The platform, or a device that answers `getprop` (what the Android tools need).
        let android = nl2sh_proto::platform::is_android() || programs.contains_key("getprop");
        let shell = ["/system/bin/sh", "/bin/sh"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("/bin/sh"));
        Self {
            android,
            euid: nix::unistd::geteuid().as_raw(),
            path_var,
            shell,
            programs,
            protected: crate::risk::Protected::default(),
            touch: TouchPaths::default(),
        }
    }

    /// The same device, with nl2sh's own files protected.
    pub fn with_protected(mut self, protected: crate::risk::Protected) -> Self {
        self.protected = protected;
        self
    }

    pub fn program(&self, name: &str) -> Option<&Path> {
        self.programs.get(name).map(PathBuf::as_path)
    }

    pub fn has_all(&self, names: &[&str]) -> bool {
        names.iter().all(|n| self.programs.contains_key(n))
    }

    /// The identity Android UI programs run as: shell (2000) when we are root, since
    /// screencap/input/uiautomator need no more; otherwise ourselves.
    pub fn ui_identity(&self) -> nl2sh_proto::channels::Identity {
        use nl2sh_proto::channels::Identity;
        if self.android && self.euid == 0 {
            Identity::Shell
        } else {
            Identity::Launching
        }
    }
}
