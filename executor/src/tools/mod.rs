//! The tools, one file per family, and the contract every tool keeps with the runtime
//! ([`Tool`], [`Prepared`], [`ExecContext`]). What registers reflects the device: Android
//! tools only where their programs exist on PATH.

pub mod android;
mod args;
mod contract;
pub mod device;
pub mod fs;
pub mod kernel_log;
pub mod readers;
pub mod schema;
pub mod shell;

pub use args::{normalize_path, Args};
pub use contract::{
    BoxFuture, ExecContext, Prepared, Resource, RunFn, Tool, ToolDef, ToolError, ToolOutput,
};

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::device::DeviceEnv;

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

/// A tool whose preparation may wait on the file system (see
/// [`Tool::prepare_waits_on_files`]).
pub struct WaitsOnFiles<T>(pub T);

impl<T: Tool> Tool for WaitsOnFiles<T> {
    fn def(&self) -> &ToolDef {
        self.0.def()
    }

    fn prepare(
        &self,
        args: &Map<String, Value>,
        env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        self.0.prepare(args, env)
    }

    fn prepare_waits_on_files(&self) -> bool {
        true
    }
}

/// Budget for a result's JSON text, under the pipeline's `MAX_TOOL_OUTPUT_BYTES` cut (a
/// cut would leave invalid JSON, so lists stop early and say `truncated`).
pub(crate) const OUTPUT_BUDGET: usize = 56 * 1024;

/// Push `items` (already JSON) while the serialized list stays within `budget` bytes;
/// returns the kept items and whether any were left out.
pub(crate) fn within_budget(
    items: impl IntoIterator<Item = Value>,
    budget: usize,
) -> (Vec<Value>, bool) {
    let mut kept = Vec::new();
    let mut used = 0usize;
    for item in items {
        let len = item.to_string().len() + 1;
        if used + len > budget {
            return (kept, true);
        }
        used += len;
        kept.push(item);
    }
    (kept, false)
}

/// The newest items (the end of `items`) that fit `budget`, oldest first; for logs,
/// where the last records matter most.
pub(crate) fn newest_within_budget(items: Vec<Value>, budget: usize) -> (Vec<Value>, bool) {
    let (mut kept, cut) = within_budget(items.into_iter().rev(), budget);
    kept.reverse();
    (kept, cut)
}

/// The longest prefix of `text` whose JSON string (quotes and escapes included) fits
/// `budget` bytes, and whether anything was cut.
pub(crate) fn text_within_budget(text: &str, budget: usize) -> (&str, bool) {
    let mut used = 2;
    for (i, c) in text.char_indices() {
        // serde_json's escaping: two bytes for the short escapes, six for other controls.
        used += match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if c < ' ' => 6,
            c => c.len_utf8(),
        };
        if used > budget {
            return (&text[..i], true);
        }
    }
    (text, false)
}

/// The catalog for this device, computed at start.
pub fn discover(env: &DeviceEnv) -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = vec![
        // Its assessment resolves every path the line names (risk::Protected).
        Box::new(WaitsOnFiles(shell::exec())),
        Box::new(fs::read()),
        Box::new(fs::list()),
        Box::new(fs::stat()),
        Box::new(fs::write()),
        Box::new(device::info()),
        Box::new(device::processes()),
        Box::new(kernel_log::kernel_log()),
    ];
    android::register(env, &mut tools);
    tools
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_cut_where_its_json_string_reaches_the_budget() {
        for text in [
            "plain text",
            "quote \" back\\slash\n",
            "ctl \u{1}\u{1f} é ✓",
            "",
        ] {
            let full = Value::String(text.into()).to_string().len();
            assert_eq!(text_within_budget(text, full), (text, false));
            for budget in 2..full {
                let (kept, cut) = text_within_budget(text, budget);
                assert!(cut && text.starts_with(kept));
                assert!(
                    Value::String(kept.into()).to_string().len() <= budget,
                    "{text:?} {budget}"
                );
                // The next character would not have fitted.
                let next = text[kept.len()..].chars().next().unwrap();
                let longer = format!("{kept}{next}");
                assert!(
                    Value::String(longer).to_string().len() > budget,
                    "{text:?} {budget}"
                );
            }
        }
    }

    #[test]
    fn the_newest_items_are_kept() {
        let items: Vec<Value> = (0..10).map(|i| json!(i)).collect();
        assert_eq!(
            newest_within_budget(items.clone(), 6),
            (vec![json!(7), json!(8), json!(9)], true)
        );
        assert_eq!(newest_within_budget(items.clone(), 100), (items, false));
    }
}
