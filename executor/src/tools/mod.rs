//! The tools, one file per family. What registers reflects the device: Android tools
//! only where their programs exist on PATH.

// A tool's `new` builds its registration; a `Default` of a tool would mean nothing.
#![allow(clippy::new_without_default)]

pub mod android;
pub mod device;
pub mod fs;
pub mod shell;

use crate::device::DeviceEnv;
use crate::runtime::Tool;

/// The catalog for this device, computed at start.
pub fn discover(env: &DeviceEnv) -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = vec![
        Box::new(shell::ShellExec::new()),
        Box::new(fs::FsRead::new()),
        Box::new(fs::FsList::new()),
        Box::new(fs::FsStat::new()),
        Box::new(fs::FsWrite::new()),
        Box::new(device::DeviceInfo::new()),
        Box::new(device::ProcessList::new()),
    ];
    android::register(env, &mut tools);
    tools
}
