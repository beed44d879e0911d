//! The cap on MCP tool calls that reach the executor: at most
//! [`HttpLimits::max_tool_calls`](crate::HttpLimits::max_tool_calls) (by default
//! [`MAX_CONCURRENT_TOOL_CALLS`]) run at once; one more is refused at once as busy,
//! so long calls cannot hold every connection netd has.
//!
//! Counted: `nl2sh_invoke` and `nl2sh_read_screen` (see [`counted`]), which run device
//! tools and may take minutes. Not counted, so always answered: `initialize`,
//! notifications, `tools/list`, `nl2sh_inspect`, `nl2sh_tools`, `nl2sh_get_task`,
//! `nl2sh_cancel_task`, and `nl2sh_ask`, which like A2A `SendMessage` is bounded by the
//! active-task limit instead and answers that limit its own way.
//!
//! A refusal over HTTP is `503 Service Unavailable` with `Retry-After` and a JSON-RPC
//! error of code [`BUSY_CODE`], given by [`crate::http`] before rmcp reads the request
//! (inside rmcp's handler the HTTP status is always 200). That check leaves a
//! [`ToolCallSlot`] in the request's extensions, which reach the handler; the handler
//! holds it for the call. A handler that finds none (stdio, or a request the check did
//! not recognise) takes a slot itself, and answers a refusal as a tool result with
//! `isError: true`.
//!
//! A slot counts a call while the executor runs it, not while a connection waits: over
//! HTTP a call goes on when its client disconnects, and keeps its slot until it ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nl2sh_proto::limits::{BUSY_RETRY_AFTER, MAX_CONCURRENT_TOOL_CALLS};
use rmcp::model::CallToolResult;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::tools;
use nl2sh_http_worker::connections::Throttle;

/// The JSON-RPC error code of a call refused because the cap is reached: one of the
/// implementation-defined server errors (-32000 … -32099), clear of those MCP and its
/// SDKs use (-32000, -32001, -32002, -32020 … -32022, -32042). 503, as the HTTP status.
pub const BUSY_CODE: i64 = -32053;
/// The `reason` in that error's `data`.
pub const BUSY_REASON: &str = "TOOL_CALL_LIMIT";
/// At most one warning per this interval while calls are refused.
const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// Whether a call of this MCP tool counts against the cap.
pub fn counted(tool: &str) -> bool {
    matches!(tool, tools::invoke::NAME | tools::read_screen::NAME)
}

/// The cap, shared by every request of one transport. Cheap to clone.
#[derive(Clone)]
pub struct ToolCalls {
    slots: Arc<Semaphore>,
    max: usize,
    last_warning: Arc<Mutex<Throttle>>,
}

/// One running call's place under the cap, freed when the last clone is dropped. (A
/// clone, because request extensions are cloned on their way to the handler.)
#[derive(Clone)]
pub struct ToolCallSlot {
    _permit: Arc<OwnedSemaphorePermit>,
}

impl Default for ToolCalls {
    fn default() -> Self {
        Self::new(MAX_CONCURRENT_TOOL_CALLS)
    }
}

impl ToolCalls {
    /// A cap of `max` calls (at least one).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            last_warning: Arc::default(),
        }
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A slot, or `None` (and a warning, now and then) when `max` calls are running.
    pub fn try_start(&self) -> Option<ToolCallSlot> {
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => Some(ToolCallSlot {
                _permit: Arc::new(permit),
            }),
            Err(_) => {
                self.warn();
                None
            }
        }
    }

    fn warn(&self) {
        let mut last = self.last_warning.lock().unwrap_or_else(|p| p.into_inner());
        if last.ready(WARNING_INTERVAL) {
            tracing::warn!(
                max_tool_calls = self.max,
                "tool-call cap reached; refusing new calls as busy"
            );
        }
    }

    /// What a refused caller reads.
    pub fn busy_message(&self) -> String {
        format!(
            "nl2sh is busy: {} tool calls are running; retry shortly",
            self.max
        )
    }

    /// The JSON-RPC `error` object of a refusal.
    pub fn busy_error(&self) -> Value {
        json!({
            "code": BUSY_CODE,
            "message": self.busy_message(),
            "data": {
                "reason": BUSY_REASON,
                "limit": self.max,
                "retryAfterSeconds": BUSY_RETRY_AFTER.as_secs(),
            },
        })
    }

    /// A refusal as a tool result, where the transport's status cannot say it.
    pub fn busy_result(&self) -> CallToolResult {
        tools::failure(self.busy_message())
    }
}

/// The parts of a JSON-RPC request the HTTP check looks at; anything else is skipped.
#[derive(Deserialize)]
struct Probe {
    id: Option<Value>,
    method: String,
    params: Option<ProbeParams>,
}

#[derive(Deserialize)]
struct ProbeParams {
    name: String,
}

/// The `id` of `body` if it is a JSON-RPC `tools/call` request of a [`counted`] tool
/// with a string or number id (the only ids rmcp accepts, so the only ones a refusal
/// echoes). Anything else (another method, a notification, a batch, malformed JSON) is
/// `None` and left to rmcp, whose handler still takes a slot for a counted call it runs. `body` is
/// at most 32 KiB (the front door's bound), so parsing it twice costs little.
pub(crate) fn counted_request_id(body: &[u8]) -> Option<Value> {
    let probe: Probe = serde_json::from_slice(body).ok()?;
    let name = probe.params?.name;
    (probe.method == "tools/call" && counted(&name))
        .then_some(probe.id)
        .flatten()
        .filter(|id| id.is_string() || id.is_number())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_counted_tool_calls_are_recognised() {
        let call = |name: &str| {
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": name, "arguments": {"tool": "x"}}})
            .to_string()
        };
        assert_eq!(
            counted_request_id(call("nl2sh_invoke").as_bytes()),
            Some(json!(7))
        );
        assert_eq!(
            counted_request_id(call("nl2sh_read_screen").as_bytes()),
            Some(json!(7))
        );
        for cheap in [
            "nl2sh_inspect",
            "nl2sh_tools",
            "nl2sh_get_task",
            "nl2sh_ask",
            "nope",
        ] {
            assert_eq!(counted_request_id(call(cheap).as_bytes()), None, "{cheap}");
        }
        for other in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"nl2sh_invoke"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nl2sh_invoke"}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"nl2sh_invoke"}}"#,
            "not json",
        ] {
            assert_eq!(counted_request_id(other.as_bytes()), None, "{other}");
        }
        // Escapes are decoded as rmcp decodes them.
        let escaped = r#"{"jsonrpc":"2.0","id":"a","method":"tools\/call","params":{"name":"nl2sh_invok\u0065"}}"#;
        assert_eq!(counted_request_id(escaped.as_bytes()), Some(json!("a")));
    }

    #[test]
    fn slots_are_freed_with_their_last_clone() {
        let calls = ToolCalls::new(2);
        let a = calls.try_start().unwrap();
        let b = calls.try_start().unwrap();
        assert!(calls.try_start().is_none());
        let a2 = a.clone();
        drop(a);
        assert!(calls.try_start().is_none(), "a clone still holds the slot");
        drop(a2);
        assert!(calls.try_start().is_some());
        drop(b);
        let error = calls.busy_error();
        assert_eq!(error["code"], BUSY_CODE);
        assert_eq!(error["data"]["limit"], 2);
        assert!(error["message"]
            .as_str()
            .unwrap()
            .contains("2 tool calls are running"));
    }
}
