//! The tools, one file per family. What registers reflects the device: Android tools
//! only where their programs exist on PATH.

pub mod android;
pub mod device;
pub mod fs;
pub mod shell;

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::device::DeviceEnv;
use crate::runtime::{Prepared, Tool, ToolDef, ToolError};

/// Turns a tool's validated arguments into an action.
pub type PrepareFn = fn(&Map<String, Value>, &Arc<DeviceEnv>) -> Result<Prepared, ToolError>;

/// A tool as data: what callers see, and the function that turns validated arguments
/// into an action (the Android tools add the program they drive: see `android.rs`).
pub struct TableTool {
    pub def: ToolDef,
    pub prepare: PrepareFn,
}

impl Tool for TableTool {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn prepare(
        &self,
        args: &Map<String, Value>,
        env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        (self.prepare)(args, env)
    }
}

/// The catalog for this device, computed at start.
pub fn discover(env: &DeviceEnv) -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = vec![
        Box::new(shell::exec()),
        Box::new(fs::read()),
        Box::new(fs::list()),
        Box::new(fs::stat()),
        Box::new(fs::write()),
        Box::new(device::info()),
        Box::new(device::processes()),
    ];
    android::register(env, &mut tools);
    tools
}
