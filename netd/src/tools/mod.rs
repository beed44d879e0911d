//! One file per MCP tool. Each tool module owns its descriptor (name, description,
//! schemas) and turns arguments into a typed request on a worker channel; it never runs
//! anything itself (DESIGN.md §1).

pub mod call;
pub mod catalog;
pub mod inspect;
pub mod invoke;
pub mod read_screen;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};

/// Every tool this build of netd lists, in listing order.
pub fn all() -> Vec<rmcp::model::Tool> {
    vec![
        inspect::tool(),
        catalog::tool(),
        invoke::tool(),
        read_screen::tool(),
    ]
}

/// The argument schema of a tool that takes none: the empty object, nothing else.
pub(crate) fn no_arguments_schema() -> std::sync::Arc<JsonObject> {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert(
        "properties".into(),
        serde_json::Value::Object(JsonObject::new()),
    );
    schema.insert("additionalProperties".into(), false.into());
    std::sync::Arc::new(schema)
}

/// A tool-level failure the caller should read (`isError: true`).
pub(crate) fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// For tools that take no parameters: `None` and `{}` are fine; anything else is an
/// isError result naming the unexpected field(s).
pub(crate) fn expect_no_arguments(
    tool: &str,
    arguments: Option<&JsonObject>,
) -> Result<(), CallToolResult> {
    let Some(arguments) = arguments else {
        return Ok(());
    };
    if arguments.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 4;
    let mut names: Vec<String> = arguments
        .keys()
        .take(SHOWN)
        .map(|k| shorten(k, 64))
        .collect();
    if arguments.len() > SHOWN {
        names.push(format!("and {} more", arguments.len() - SHOWN));
    }
    Err(failure(format!(
        "{tool} takes no arguments; unexpected field{}: {}",
        if arguments.len() == 1 { "" } else { "s" },
        names.join(", ")
    )))
}

/// `s` cut to at most `max` bytes on a char boundary, marked when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return format!("`{s}`");
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("`{}…`", &s[..end])
}
