//! `nl2sh_cancel_task`: cancel a task and wait for it to settle (its running tool call
//! stopped, its pending approval withdrawn), then answer the Task. Side effects that
//! already happened stay; CANCELED is not a rollback.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use crate::tasks::TaskService;

pub const NAME: &str = "nl2sh_cancel_task";

pub fn tool() -> Tool {
    let Value::Object(schema) = super::task_id_schema() else {
        unreachable!("literal object")
    };
    Tool::new(
        NAME,
        "Cancel a device Task by id: stops its current tool call, withdraws its pending \
         approval, waits for it to settle and returns the Task (TASK_STATE_CANCELED). A \
         task that already ended cannot be canceled. What already ran is not undone.",
        Arc::new(schema),
    )
    .with_title("Cancel a task")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
    )
}

pub async fn call(tasks: &TaskService, arguments: Option<&JsonObject>) -> CallToolResult {
    let id = match super::task_id_argument(NAME, arguments) {
        Ok(id) => id,
        Err(refused) => return refused,
    };
    match tasks.cancel(id).await {
        Ok(task) => super::task_result(task),
        Err(e) => super::failure(format!("{NAME}: {e}")),
    }
}
