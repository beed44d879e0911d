//! `nl2sh_get_task`: a saved Task (the same format as A2A GetTask), whole.

use rmcp::model::{CallToolResult, JsonObject, Tool};

use super::Hints;
use crate::tasks::TaskService;

pub const NAME: &str = "nl2sh_get_task";

pub fn tool() -> Tool {
    let tool = Tool::new(
        NAME,
        "Get a device Task by id (from nl2sh_ask): its status, history and, once it has \
         ended, its result artifact.",
        super::task_id_schema(),
    );
    super::describe(
        tool,
        "Get a task",
        // Reads the task service (or approvald's store); changes nothing.
        Hints::LOCAL_READ,
        super::task_output_schema(),
    )
}

pub async fn call(tasks: &TaskService, arguments: Option<&JsonObject>) -> CallToolResult {
    let id = match super::task_id_argument(NAME, arguments) {
        Ok(id) => id,
        Err(refused) => return refused,
    };
    match tasks.get(id).await {
        Ok(task) => super::task_result(task),
        Err(e) => super::failure(format!("{NAME}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn schema_requires_the_id() {
        let t = tool();
        assert_eq!(
            Value::Object((*t.input_schema).clone())["required"],
            json!(["task_id"])
        );
    }
}
