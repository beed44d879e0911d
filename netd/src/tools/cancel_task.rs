//! `nl2sh_cancel_task`: cancel a task and wait for it to settle (its running tool call
//! stopped, its pending approval withdrawn), then answer the Task. Side effects that
//! already happened stay; CANCELED is not a rollback.

use rmcp::model::{CallToolResult, JsonObject, Tool};

use super::Hints;
use crate::tasks::TaskService;

pub const NAME: &str = "nl2sh_cancel_task";

pub fn tool() -> Tool {
    let tool = Tool::new(
        NAME,
        "Cancel a device Task by id: stops its current tool call, withdraws its pending \
         approval, waits for it to settle and returns the Task (TASK_STATE_CANCELED). A \
         task that already ended cannot be canceled. What already ran is not undone.",
        super::task_id_schema(),
    );
    super::describe(
        tool,
        "Cancel a task",
        // Ends one task's work (nothing it did is undone); a second call finds the task
        // ended and is refused. Stays on the device.
        Hints {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        super::task_output_schema(),
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
