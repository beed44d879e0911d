//! Tool names as the model sees them. Chat Completions function names must match
//! `^[a-zA-Z0-9_-]{1,64}$`; the device's tools are dotted (`shell.exec`). A dot becomes
//! `__` (`shell__exec`), and only names for which that is reversible are offered: a name
//! with `__` already in it, or `_` next to a dot, would read back differently, so it is
//! left out (as is anything longer than 64 characters once mapped).

use std::collections::BTreeMap;

use nl2sh_proto::channels::ToolSpec;
use serde_json::{json, Value};

/// Longest function name the Chat Completions API accepts.
pub const MAX_FUNCTION_NAME: usize = 64;

/// The function name for `tool`, or `None` when it cannot be mapped reversibly.
pub fn function_name(tool: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    if tool.is_empty() || !tool.chars().all(allowed) {
        return None;
    }
    // `__` is the separator; `_.`/`._` would merge with it.
    if tool.contains("__") || tool.contains("_.") || tool.contains("._") {
        return None;
    }
    let name = tool.replace('.', "__");
    (name.len() <= MAX_FUNCTION_NAME).then_some(name)
}

/// The tool a function name stands for, if `function` is one [`function_name`] makes.
pub fn tool_name(function: &str) -> Option<String> {
    let tool = function.replace("__", ".");
    (function_name(&tool).as_deref() == Some(function)).then_some(tool)
}

/// The catalog of one task: what the model is offered, and the way back.
#[derive(Debug, Default)]
pub struct ToolMap {
    by_function: BTreeMap<String, String>,
    /// `tools` of the request: `{type: "function", function: {name, description,
    /// parameters}}`, in catalog order.
    functions: Vec<Value>,
}

impl ToolMap {
    pub fn new(catalog: &[ToolSpec]) -> Self {
        let mut map = ToolMap::default();
        for spec in catalog {
            let Some(function) = function_name(&spec.name) else {
                tracing::debug!(tool = %spec.name, "tool left out of the Agent's catalog: its name cannot be a function name");
                continue;
            };
            if map.by_function.contains_key(&function) {
                continue;
            }
            // The executor sends its schemas as JSON text; one that does not parse (it
            // never should) is offered as "any object" rather than dropping the tool.
            let parameters = serde_json::from_str::<Value>(&spec.input_schema)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"type": "object"}));
            map.functions.push(json!({
                "type": "function",
                "function": {
                    "name": function,
                    "description": spec.description,
                    "parameters": parameters,
                }
            }));
            map.by_function.insert(function, spec.name.clone());
        }
        map
    }

    /// The device tool behind `function`, if the model was offered it.
    pub fn tool(&self, function: &str) -> Option<&str> {
        self.by_function.get(function).map(String::as_str)
    }

    pub fn functions(&self) -> &[Value] {
        &self.functions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_map_both_ways() {
        for tool in [
            "shell.exec",
            "fs.stat",
            "android.ui.tap",
            "device-info",
            "a.b-c.d",
        ] {
            let f = function_name(tool).unwrap();
            assert!(
                f.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{f}"
            );
            assert!(!f.is_empty() && f.len() <= 64);
            assert_eq!(tool_name(&f).as_deref(), Some(tool), "{f}");
        }
        assert_eq!(function_name("shell.exec").as_deref(), Some("shell__exec"));
    }

    #[test]
    fn names_that_would_not_read_back_are_left_out() {
        for tool in [
            "",
            "a__b",
            "a_.b",
            "a._b",
            "sp ace",
            "ünï.code",
            "semi;colon",
            &"x".repeat(65),
            // 33 dots double to more than 64.
            &".".repeat(33),
        ] {
            assert_eq!(function_name(tool), None, "{tool:?}");
        }
        // Underscores away from dots are fine.
        assert_eq!(
            function_name("fs.read_all").as_deref(),
            Some("fs__read_all")
        );
        assert_eq!(tool_name("fs__read_all").as_deref(), Some("fs.read_all"));
        // A function name no tool maps to is not taken back.
        assert_eq!(tool_name("a___b"), None);
        assert_eq!(tool_name("bad name"), None);
        assert_eq!(tool_name(""), None);
    }

    #[test]
    fn the_map_offers_mappable_tools_and_knows_them_back() {
        let spec = |name: &str, schema: &str| ToolSpec {
            name: name.into(),
            description: format!("{name} does things"),
            input_schema: schema.into(),
        };
        let map = ToolMap::new(&[
            spec("shell.exec", r#"{"type":"object","required":["command"]}"#),
            spec("odd__name", "{}"),
            spec("fs.stat", "not json"),
        ]);
        assert_eq!(map.functions().len(), 2);
        assert_eq!(map.tool("shell__exec"), Some("shell.exec"));
        assert_eq!(map.tool("fs__stat"), Some("fs.stat"));
        assert_eq!(map.tool("odd__name"), None);
        assert_eq!(map.tool("shell.exec"), None);
        let first = &map.functions()[0];
        assert_eq!(first["type"], "function");
        assert_eq!(first["function"]["name"], "shell__exec");
        assert_eq!(first["function"]["parameters"]["required"][0], "command");
        assert_eq!(
            map.functions()[1]["function"]["parameters"],
            json!({"type": "object"})
        );
    }
}
