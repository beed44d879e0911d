//! The bound on what the Agent sends its model (docs/SECURITY.md, "Availability"): the
//! conversation grows with every model reply and tool result, and a hostile model could
//! keep asking for big outputs. Before each request the conversation is fitted into
//! [`MAX_MODEL_REQUEST_BYTES`]: the oldest messages are compacted first (a tool output
//! replaced by a note of its size, a long text or tool-call arguments cut to a short
//! prefix), never the system prompt or the task's own text. When even that does not fit,
//! the task fails saying so. The compacted form is what the conversation keeps, so netd
//! does not hold more than it may send either.

use nl2sh_proto::limits::MAX_MODEL_REQUEST_BYTES;
use serde_json::{json, Value};

use super::evidence::prefix;

/// Bytes of a compacted text kept before the note of what was cut.
const KEPT_PREFIX_BYTES: usize = 256;

/// Why a conversation cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the conversation with the model no longer fits its request limit: {needed} bytes \
     with every earlier message shortened, at most {MAX_MODEL_REQUEST_BYTES}"
)]
pub struct DoesNotFit {
    pub needed: usize,
}

/// Bytes `value` takes as JSON (as the request body writes it).
pub fn json_bytes(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a counter cannot fail; a failure would only undercount, and
    // the request body is checked again as written.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Compact the oldest messages of `messages` until they take at most
/// [`MAX_MODEL_REQUEST_BYTES`] minus `fixed` (the rest of the request: model, tools).
/// `protected` are indexes never touched (the system prompt, the task's text). Returns
/// how many messages were compacted.
pub fn fit(messages: &mut [Value], protected: &[usize], fixed: usize) -> Result<usize, DoesNotFit> {
    let room = MAX_MODEL_REQUEST_BYTES.saturating_sub(fixed);
    // The array's brackets and commas.
    let mut total = 2 + messages.len() + messages.iter().map(json_bytes).sum::<usize>();
    let mut compacted = 0;
    for (i, message) in messages.iter_mut().enumerate() {
        if total <= room {
            break;
        }
        if protected.contains(&i) {
            continue;
        }
        let before = json_bytes(message);
        if compact(message, MAX_MODEL_REQUEST_BYTES) {
            compacted += 1;
            total = total - before + json_bytes(message);
        }
    }
    if total <= room {
        Ok(compacted)
    } else {
        Err(DoesNotFit {
            needed: total + fixed,
        })
    }
}

/// Shorten one message in place; false when there was nothing to shorten.
fn compact(message: &mut Value, limit: usize) -> bool {
    let role = message["role"].as_str().unwrap_or_default().to_string();
    let mut changed = false;
    if let Some(content) = message.get_mut("content") {
        if let Some(text) = content.as_str() {
            if role == "tool" {
                // A note is longer than a short output: those stay.
                if text.len() > KEPT_PREFIX_BYTES && !is_dropped(text) {
                    let note = format!(
                        "{DROPPED_TOOL_OUTPUT} ({} bytes) to keep the request to the model \
                         under {limit} bytes]",
                        text.len()
                    );
                    // Whose text it was stays known: the Agent's later calls say so.
                    let read_from = serde_json::from_str::<Value>(text)
                        .ok()
                        .and_then(|v| v.get("read_from").cloned());
                    *content = match read_from {
                        Some(sources) => {
                            json!(json!({"output": note, "read_from": sources}).to_string())
                        }
                        None => json!(note),
                    };
                    changed = true;
                }
            } else if let Some(cut) = cut(text) {
                *content = json!(cut);
                changed = true;
            }
        }
    }
    if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for call in calls {
            let Some(arguments) = call.pointer_mut("/function/arguments") else {
                continue;
            };
            let len = arguments.as_str().map_or(0, str::len);
            if len > KEPT_PREFIX_BYTES {
                // Still a JSON object, as arguments are.
                *arguments = json!(json!({ "omitted_bytes": len }).to_string());
                changed = true;
            }
        }
    }
    changed
}

/// How a dropped tool output starts (so it is not dropped twice).
const DROPPED_TOOL_OUTPUT: &str = "[tool output dropped";

/// Whether a tool message's content is already a dropped output's note.
fn is_dropped(text: &str) -> bool {
    text.starts_with(DROPPED_TOOL_OUTPUT)
        || text
            .strip_prefix("{\"output\":\"")
            .is_some_and(|rest| rest.starts_with(DROPPED_TOOL_OUTPUT))
}

/// `text` cut to its first bytes with a note, if it is long enough to be worth it.
fn cut(text: &str) -> Option<String> {
    if text.len() <= 2 * KEPT_PREFIX_BYTES {
        return None;
    }
    let kept = prefix(text, KEPT_PREFIX_BYTES);
    Some(format!(
        "{kept}\n[{} more bytes dropped to keep the request to the model bounded]",
        text.len() - kept.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(messages: &[Value]) -> usize {
        json_bytes(&messages.to_vec())
    }

    #[test]
    fn json_bytes_is_the_written_length() {
        let v = json!({"a": "é\u{1}\"", "b": [1, 2, null]});
        assert_eq!(json_bytes(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[test]
    fn the_oldest_go_first_and_the_protected_stay() {
        let big = "x".repeat(MAX_MODEL_REQUEST_BYTES / 4);
        let mut messages = vec![
            json!({"role": "system", "content": big}),
            json!({"role": "user", "content": big}),
            json!({"role": "assistant", "content": big, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "f", "arguments": big}}]}),
            json!({"role": "tool", "tool_call_id": "1", "content": big}),
            json!({"role": "tool", "tool_call_id": "2", "content": "small"}),
        ];
        let n = fit(&mut messages, &[0, 1], 1000).unwrap();
        assert!(total(&messages) + 1000 <= MAX_MODEL_REQUEST_BYTES);
        assert_eq!(n, 1, "only the oldest unprotected one was needed");
        assert_eq!(messages[0]["content"], big);
        assert_eq!(messages[1]["content"], big);
        let args = messages[2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap();
        let args: Value = serde_json::from_str(args).unwrap();
        assert_eq!(args["omitted_bytes"], big.len());
        assert_eq!(messages[3]["content"], big, "the newer one was kept");
    }

    #[test]
    fn tool_outputs_become_a_note_of_their_size() {
        let mut messages = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "tool", "tool_call_id": "1", "content": "y".repeat(MAX_MODEL_REQUEST_BYTES)}),
        ];
        fit(&mut messages, &[0], 0).unwrap();
        let note = messages[1]["content"].as_str().unwrap();
        assert!(note.starts_with(DROPPED_TOOL_OUTPUT), "{note}");
        assert!(
            note.contains(&MAX_MODEL_REQUEST_BYTES.to_string()),
            "{note}"
        );
        // A result that said whose text it was still says so, and is dropped once.
        let output = "y".repeat(MAX_MODEL_REQUEST_BYTES);
        let sources = ["com.example.chat", &"p".repeat(255), &"q".repeat(255)];
        let content = json!({"success": true, "output": output, "read_from": sources});
        let mut messages = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "tool", "tool_call_id": "1", "content": content.to_string()}),
        ];
        fit(&mut messages, &[0], 0).unwrap();
        let kept: Value = serde_json::from_str(messages[1]["content"].as_str().unwrap()).unwrap();
        assert_eq!(kept["read_from"], json!(sources));
        assert!(kept["output"]
            .as_str()
            .unwrap()
            .starts_with(DROPPED_TOOL_OUTPUT));
        let before = messages[1].clone();
        assert!(!compact(&mut messages[1], 10));
        assert_eq!(messages[1], before);
    }

    #[test]
    fn what_cannot_fit_is_an_error_naming_the_sizes() {
        let mut messages = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": "z".repeat(MAX_MODEL_REQUEST_BYTES)}),
        ];
        let e = fit(&mut messages, &[0, 1], 0).unwrap_err();
        assert!(e.needed > MAX_MODEL_REQUEST_BYTES);
        assert!(e.to_string().contains("request limit"), "{e}");
    }
}
