//! `nl2sh_tools`: the executor's catalog — the tools registered on this device (after
//! capability discovery) with their argument schemas.

use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Value};

use super::call::ExecutorClient;
use super::Hints;

pub const NAME: &str = "nl2sh_tools";

pub fn tool() -> Tool {
    let tool = Tool::new(
        NAME,
        "List the device tools available to nl2sh_invoke, with their argument schemas. \
         What is listed reflects this device (Android tools only where they work).",
        super::no_arguments_schema(),
    );
    super::describe(
        tool,
        "List device tools",
        // The executor looks on the device for the programs the tools need; nothing
        // changes.
        Hints::LOCAL_READ,
        output_schema(),
    )
}

/// `{"tools": [{name, description, input_schema}]}`, exactly as [`call`] builds it.
fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "input_schema": {
                            "type": "object",
                            "description": "The JSON Schema of the tool's arguments"
                        }
                    },
                    "required": ["name", "description", "input_schema"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["tools"],
        "additionalProperties": false
    })
}

pub async fn call(executor: &ExecutorClient, arguments: Option<&JsonObject>) -> CallToolResult {
    if let Err(refused) = super::expect_no_arguments(NAME, arguments) {
        return refused;
    }
    let specs = match executor.catalog().await {
        Ok(specs) => specs,
        Err(e) => {
            return super::failure(format!("{NAME} failed: the executor is unavailable ({e})"))
        }
    };
    let mut tools = Vec::with_capacity(specs.len());
    for s in specs {
        let Ok(schema @ Value::Object(_)) = serde_json::from_str::<Value>(&s.input_schema) else {
            return super::failure(format!(
                "{NAME} failed: tool {} has an invalid schema",
                s.name
            ));
        };
        tools.push(json!({"name": s.name, "description": s.description, "input_schema": schema}));
    }
    CallToolResult::structured(json!({ "tools": tools }))
}
