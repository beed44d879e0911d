//! What the Agent's result says about its tool calls, derived only from what actually
//! happened (each call the model asked for and what came back), never from the model's
//! words: `failed_tools` (at most [`MAX_FAILED_TOOLS`]) and `evidence` (at most
//! [`MAX_EVIDENCE_ENTRIES`] entries of at most [`MAX_EVIDENCE_OUTPUT_BYTES`] output each,
//! with explicit truncation and the total count). The answer itself stays the model's
//! unverified analysis, and the result says so.

use nl2sh_proto::limits::{MAX_EVIDENCE_ENTRIES, MAX_EVIDENCE_OUTPUT_BYTES, MAX_FAILED_TOOLS};
use serde_json::{json, Value};

/// How the result labels the model's answer.
pub const ANSWER_STATUS: &str = "unverified_model_analysis";
/// Bytes of a failed tool's error in `failed_tools`.
pub const MAX_FAILED_TOOL_ERROR_BYTES: usize = 512;
/// Bytes of a tool name or call id kept (the model chooses both).
const MAX_LABEL_BYTES: usize = 128;

pub use nl2sh_proto::text::prefix;

/// A result's output as the evidence keeps it: at most the bound, and whether more
/// was cut.
#[derive(Debug, Clone, PartialEq)]
struct Output {
    kept: String,
    truncated: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Success(Output),
    Failure(Output),
    /// Asked for, but no result came back (cancelled before it answered).
    Missing,
}

#[derive(Debug, Clone)]
struct Call {
    tool: String,
    call_id: String,
    outcome: Outcome,
}

/// Every tool call of one run, in the order the model asked for them.
#[derive(Debug, Default)]
pub struct Ledger {
    calls: Vec<Call>,
}

impl Ledger {
    /// A call the model asked for; it is missing until [`Ledger::settle`] says otherwise.
    /// Returns its index.
    pub fn begin(&mut self, tool: &str, call_id: &str) -> usize {
        self.calls.push(Call {
            tool: prefix(tool, MAX_LABEL_BYTES).to_string(),
            call_id: prefix(call_id, MAX_LABEL_BYTES).to_string(),
            outcome: Outcome::Missing,
        });
        self.calls.len() - 1
    }

    /// The result of call `index`: its output when it succeeded, the error when not.
    pub fn settle(&mut self, index: usize, success: bool, output: &str) {
        if let Some(call) = self.calls.get_mut(index) {
            // Only what the result needs is kept (the evidence bound).
            let kept = prefix(output, MAX_EVIDENCE_OUTPUT_BYTES);
            let kept = Output {
                truncated: kept.len() < output.len(),
                kept: kept.to_string(),
            };
            call.outcome = if success {
                Outcome::Success(kept)
            } else {
                Outcome::Failure(kept)
            };
        }
    }

    pub fn total(&self) -> usize {
        self.calls.len()
    }

    /// `failed_tools`: the first failures, bounded.
    pub fn failed_tools(&self) -> Value {
        let failed: Vec<Value> = self
            .calls
            .iter()
            .filter_map(|c| match &c.outcome {
                Outcome::Failure(error) => Some(json!({
                    "tool": c.tool,
                    "call_id": c.call_id,
                    "error": prefix(&error.kept, MAX_FAILED_TOOL_ERROR_BYTES),
                })),
                _ => None,
            })
            .take(MAX_FAILED_TOOLS)
            .collect();
        Value::Array(failed)
    }

    /// `evidence`: the first calls with their bounded output, and whether any were left
    /// out.
    pub fn evidence(&self) -> Value {
        let entries: Vec<Value> = self
            .calls
            .iter()
            .take(MAX_EVIDENCE_ENTRIES)
            .map(|c| {
                let (result, output, truncated) = match &c.outcome {
                    Outcome::Success(o) => ("success", o.kept.as_str(), o.truncated),
                    Outcome::Failure(o) => ("failure", o.kept.as_str(), o.truncated),
                    Outcome::Missing => ("missing", "", false),
                };
                json!({
                    "tool": c.tool,
                    "call_id": c.call_id,
                    "result": result,
                    "output": output,
                    "output_truncated": truncated,
                })
            })
            .collect();
        json!({
            "entries": entries,
            "total_tool_calls": self.calls.len(),
            "entries_truncated": self.calls.len() > MAX_EVIDENCE_ENTRIES,
        })
    }

    /// `artifacts[0].parts[0].data` of the task.
    pub fn result(&self, session: &str, answer: Option<&str>, steps: u32) -> Value {
        json!({
            "session": session,
            "answer": answer,
            "answer_status": ANSWER_STATUS,
            "steps": steps,
            "tool_calls": self.calls.len(),
            "failed_tools": self.failed_tools(),
            "evidence": self.evidence(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cuts_on_a_char_boundary() {
        assert_eq!(prefix("abc", 5), "abc");
        assert_eq!(prefix("abc", 2), "ab");
        // "é" is two bytes: cutting inside it keeps neither half.
        assert_eq!(prefix("aé", 2), "a");
        assert_eq!(prefix("€€", 4), "€");
        assert_eq!(prefix("", 0), "");
    }

    #[test]
    fn outcomes_are_linked_to_their_call_ids() {
        let mut l = Ledger::default();
        let a = l.begin("fs.stat", "call_a");
        let b = l.begin("nope", "call_b");
        let _c = l.begin("shell.exec", "call_c");
        l.settle(a, true, "{\"exists\":true}");
        l.settle(b, false, "unknown tool nope");
        let r = l.result("ctx-1", Some("done"), 2);
        assert_eq!(r["session"], "ctx-1");
        assert_eq!(r["answer"], "done");
        assert_eq!(r["answer_status"], ANSWER_STATUS);
        assert_eq!(r["steps"], 2);
        assert_eq!(r["tool_calls"], 3);
        let entries = r["evidence"]["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0]["call_id"], "call_a");
        assert_eq!(entries[0]["result"], "success");
        assert_eq!(entries[0]["output"], "{\"exists\":true}");
        assert_eq!(entries[1]["result"], "failure");
        assert_eq!(entries[2]["result"], "missing");
        assert_eq!(entries[2]["output"], "");
        assert_eq!(r["evidence"]["total_tool_calls"], 3);
        assert_eq!(r["evidence"]["entries_truncated"], false);
        let failed = r["failed_tools"].as_array().unwrap();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["tool"], "nope");
        assert_eq!(failed[0]["call_id"], "call_b");
        assert_eq!(failed[0]["error"], "unknown tool nope");
        // No answer is null, not an empty string.
        assert!(l.result("ctx-1", None, 1)["answer"].is_null());
    }

    #[test]
    fn evidence_and_failures_are_bounded_and_say_so() {
        let mut l = Ledger::default();
        let long = "é".repeat(MAX_EVIDENCE_OUTPUT_BYTES); // twice the bound in bytes
        for i in 0..(MAX_EVIDENCE_ENTRIES + 6) {
            let at = l.begin("fs.read", &format!("call_{i}"));
            l.settle(at, i % 2 == 0, &long);
        }
        let ev = l.evidence();
        let entries = ev["entries"].as_array().unwrap();
        assert_eq!(entries.len(), MAX_EVIDENCE_ENTRIES);
        assert_eq!(ev["total_tool_calls"], MAX_EVIDENCE_ENTRIES + 6);
        assert_eq!(ev["entries_truncated"], true);
        for e in entries {
            let out = e["output"].as_str().unwrap();
            assert!(out.len() <= MAX_EVIDENCE_OUTPUT_BYTES);
            assert!(out.len() > MAX_EVIDENCE_OUTPUT_BYTES - 2, "cut too early");
            assert!(out.chars().all(|c| c == 'é'));
            assert_eq!(e["output_truncated"], true);
        }
        assert_eq!(entries[63]["call_id"], "call_63");
        let failed = l.failed_tools();
        let failed = failed.as_array().unwrap();
        assert_eq!(failed.len(), MAX_FAILED_TOOLS);
        assert_eq!(failed[0]["call_id"], "call_1");
        for f in failed {
            assert!(f["error"].as_str().unwrap().len() <= MAX_FAILED_TOOL_ERROR_BYTES);
        }
        // Exactly at the bound is not truncated.
        let mut l = Ledger::default();
        let at = l.begin("t", "c");
        l.settle(at, true, &"x".repeat(MAX_EVIDENCE_OUTPUT_BYTES));
        assert_eq!(l.evidence()["entries"][0]["output_truncated"], false);
        // Labels the model chose are bounded too.
        let mut l = Ledger::default();
        l.begin(&"t".repeat(1000), &"c".repeat(1000));
        let e = &l.evidence()["entries"][0];
        assert_eq!(e["tool"].as_str().unwrap().len(), 128);
        assert_eq!(e["call_id"].as_str().unwrap().len(), 128);
    }
}
