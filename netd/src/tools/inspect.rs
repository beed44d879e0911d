//! `nl2sh_inspect`: the fixed device environment object, as the executor reports it
//! (including its `sandbox` object), plus a `netd` object saying how netd itself is
//! confined. netd forwards the request and checks that the answer is one bounded JSON
//! object.

use std::time::Duration;

use nl2sh_proto::limits::MAX_JSON_TEXT_BYTES;

use crate::executor::ExecutorClient;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Value};

use super::Hints;

pub const NAME: &str = "nl2sh_inspect";

/// How long the executor may take to describe the device before the call fails.
const TIMEOUT: Duration = Duration::from_secs(30);

pub fn tool() -> Tool {
    let tool = Tool::new(
        NAME,
        "Describe the device: operating system, kernel, architecture, the identity and \
         privileges the service runs with (root, su), the read-only sandbox, how netd is \
         confined, and the nl2sh build. Takes no arguments and changes nothing.",
        super::no_arguments_schema(),
    );
    super::describe(
        tool,
        "Inspect device",
        // Reads what the executor probed at start; reaches nothing off the device.
        Hints::LOCAL_READ,
        output_schema(),
    )
}

/// The inspect object: the executor's environment (`executor/src/inspect.rs`, every key
/// always there, `sandbox` added when asked) and netd's own `netd` object
/// (`confine::report_json`). The parts the executor fills per platform stay loose.
fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "os": {
                "type": "object",
                "description": "name (android or linux); pretty_name, id and version_id from \
                                /etc/os-release (null when absent)"
            },
            "kernel": {"type": "object", "description": "sysname, release, version (uname)"},
            "architecture": {"type": "string"},
            "android": {
                "type": ["object", "null"],
                "description": "Selected Android system properties; null without getprop"
            },
            "uid": {"type": "integer"},
            "euid": {"type": "integer"},
            "root": {"type": "object", "description": "is_root, available, su_path"},
            "hostname": {"type": ["string", "null"]},
            "build_identity": {
                "type": "object",
                "description": "version, git_commit, git_dirty, build_id, target, profile, \
                                executable_sha256, protocol_version, uid"
            },
            "sandbox": {
                "type": "object",
                "description": "Whether the read-only sandbox is active, and which parts \
                                (or why not)",
                "properties": {"active": {"type": "boolean"}},
                "required": ["active"]
            },
            "netd": {
                "type": "object",
                "description": "How netd itself is confined",
                "properties": {
                    "seccomp": {"type": "string"},
                    "landlock": {"type": "string"},
                    "uid": {"type": "integer"},
                    "gid": {"type": "integer"},
                    "no_new_privs": {"type": "boolean"},
                    "dumpable": {"type": "boolean"},
                    "open_files_limit": {"type": "integer"},
                    "name_resolution": {"type": "string"}
                },
                "required": [
                    "seccomp", "landlock", "uid", "gid", "no_new_privs", "dumpable",
                    "open_files_limit", "name_resolution"
                ],
                "additionalProperties": false
            }
        },
        "required": [
            "os", "kernel", "architecture", "android", "uid", "euid", "root", "hostname",
            "build_identity", "sandbox", "netd"
        ]
    })
}

/// Run `nl2sh_inspect` against the executor.
pub async fn call(executor: &ExecutorClient, arguments: Option<&JsonObject>) -> CallToolResult {
    if let Err(refused) = super::expect_no_arguments(NAME, arguments) {
        return refused;
    }
    let json = match tokio::time::timeout(TIMEOUT, executor.inspect()).await {
        Ok(Ok(json)) => json,
        Ok(Err(e)) => {
            tracing::warn!(tool = NAME, error = %e, "executor unavailable");
            return super::failure(format!("{NAME} failed: the executor is unavailable ({e})"));
        }
        Err(_) => {
            tracing::warn!(tool = NAME, "executor did not answer in time");
            return super::failure(format!(
                "{NAME} failed: the executor did not answer within {} s",
                TIMEOUT.as_secs()
            ));
        }
    };
    from_json_text(&json)
}

/// The executor's JSON text as an MCP result: one text block and the same object as
/// `structuredContent`.
fn from_json_text(json: &str) -> CallToolResult {
    if json.len() > MAX_JSON_TEXT_BYTES {
        tracing::warn!(
            tool = NAME,
            bytes = json.len(),
            "executor result over the limit"
        );
        return super::failure(format!(
            "{NAME} failed: the executor's result is over {MAX_JSON_TEXT_BYTES} bytes"
        ));
    }
    // serde_json bounds nesting depth (128) on its own.
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(mut object)) => {
            // netd's own part: the executor cannot see how netd is confined.
            object.insert("netd".into(), crate::confine::report_json());
            CallToolResult::structured(Value::Object(object))
        }
        Ok(_) => {
            tracing::warn!(tool = NAME, "executor result is not a JSON object");
            super::failure(format!(
                "{NAME} failed: the executor's result is not a JSON object"
            ))
        }
        Err(e) => {
            tracing::warn!(tool = NAME, error = %e, "executor result is not JSON");
            super::failure(format!(
                "{NAME} failed: the executor's result is not valid JSON"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_text_becomes_structured_content() {
        let r = from_json_text(r#"{"os":{"name":"linux"},"sandbox":{"active":true}}"#);
        assert_eq!(r.is_error, Some(false));
        let structured = r.structured_content.unwrap();
        assert_eq!(structured["os"], serde_json::json!({"name":"linux"}));
        assert_eq!(structured["sandbox"], serde_json::json!({"active":true}));
        // Unit tests run in-process: nothing was applied, and netd says so.
        let netd = &structured["netd"];
        assert!(
            netd["seccomp"].as_str().unwrap().starts_with("off"),
            "{netd}"
        );
        assert!(
            netd["landlock"].as_str().unwrap().starts_with("off"),
            "{netd}"
        );
        assert!(
            netd["uid"].is_u64() && netd["dumpable"].is_boolean(),
            "{netd}"
        );
        assert_eq!(r.content.len(), 1);
    }

    #[test]
    fn non_objects_and_garbage_are_errors() {
        for text in ["[1,2]", "3", "not json", ""] {
            let r = from_json_text(text);
            assert_eq!(r.is_error, Some(true), "{text}");
            assert!(r.structured_content.is_none());
        }
    }

    #[test]
    fn the_schema_is_the_empty_object() {
        let t = tool();
        assert_eq!(
            Value::Object((*t.input_schema).clone()),
            serde_json::json!({"type":"object","properties":{},"additionalProperties":false})
        );
    }
}
