//! Who is asking, in words the owner reads on every request and in the audit: the
//! client's own name and version (MCP `clientInfo`, from `initialize` or a 2026-07-28
//! request's `_meta`; an A2A caller's `User-Agent`), how it reached the device, and for the
//! built-in Agent the task and its goal (docs/APPROVALS.md, "Who is asking").
//!
//! A client's name is what the client says of itself: every holder of the token can claim
//! any name, so the words say "by its own name" and the name decides nothing. Every
//! receiver checks it as hostile input ([`ClientName::check`]); consoles show the words
//! through [`crate::display::Shown`].

use serde::{Deserialize, Serialize};

use crate::channels::{CallOrigin, Identity, TaskId};

/// A client's name and version as it gave them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientName {
    pub name: String,
    /// Empty when it gave none.
    pub version: String,
}

impl ClientName {
    /// Bytes of a name (longer ones are cut by netd, refused by the receivers).
    pub const MAX_NAME_BYTES: usize = 64;
    /// Bytes of a version.
    pub const MAX_VERSION_BYTES: usize = 32;

    /// From what a client sent: each part cut to its bound on a character boundary,
    /// spaces at the ends trimmed; `None` when no name is left.
    pub fn from_client(name: &str, version: &str) -> Option<ClientName> {
        let part = |text: &str, max: usize| {
            let kept: String = text
                .chars()
                .filter(|c| !Self::RESERVED.contains(c))
                .collect();
            crate::text::prefix(kept.trim(), max).trim().to_string()
        };
        let name = part(name, Self::MAX_NAME_BYTES);
        if name.is_empty() {
            return None;
        }
        Some(ClientName {
            name,
            version: part(version, Self::MAX_VERSION_BYTES),
        })
    }

    /// Characters a name or version may not hold: those that build the Agent's words
    /// (`the Agent, task …, goal "…", …`), so no client can name itself into them.
    pub const RESERVED: [char; 2] = [',', '"'];

    /// From an HTTP `User-Agent` (an A2A caller): its first product token, `name/version`.
    pub fn from_user_agent(agent: &str) -> Option<ClientName> {
        let product = agent.split_whitespace().next()?;
        let (name, version) = product.split_once('/').unwrap_or((product, ""));
        ClientName::from_client(name, version)
    }

    /// Whether a receiver may take it: a name of 1 to [`Self::MAX_NAME_BYTES`] bytes and
    /// a version of at most [`Self::MAX_VERSION_BYTES`].
    pub fn check(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > Self::MAX_NAME_BYTES {
            return Err(format!(
                "a client name of {} bytes; it must be 1 to {}",
                self.name.len(),
                Self::MAX_NAME_BYTES
            ));
        }
        if self.name.contains(Self::RESERVED) || self.version.contains(Self::RESERVED) {
            return Err("a client name or version holds a comma or a double quote".into());
        }
        if self.version.len() > Self::MAX_VERSION_BYTES {
            return Err(format!(
                "a client version of {} bytes; the limit is {}",
                self.version.len(),
                Self::MAX_VERSION_BYTES
            ));
        }
        Ok(())
    }

    /// `Codex 0.47.0`, or the name alone.
    pub fn words(&self) -> String {
        if self.version.is_empty() {
            self.name.clone()
        } else {
            format!("{} {}", self.name, self.version)
        }
    }

    /// How the audit keeps it: the words (one column).
    pub fn to_stored(&self) -> String {
        self.words()
    }
}

/// Bytes of a task's goal shown on a request (the rest is in the task).
pub const GOAL_SHOWN_BYTES: usize = 160;

/// A task's goal: the text of the first message from the user in its A2A document's
/// history (text parts joined by a space), cut to [`GOAL_SHOWN_BYTES`] with `…` after a
/// cut. `None` when the document has no such message.
pub fn goal_of(document: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(document).ok()?;
    let first = doc.get("history")?.as_array()?.iter().find(
        |m| matches!(m.get("role"), Some(serde_json::Value::String(r)) if r == "ROLE_USER"),
    )?;
    let text = first
        .get("parts")?
        .as_array()?
        .iter()
        .filter_map(|p| p.get("text")?.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let cut = crate::text::prefix(text, GOAL_SHOWN_BYTES);
    Some(if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    })
}

/// Who is asking, in words: `Codex 0.47.0 (by its own name) over MCP (HTTP)`,
/// `the Agent, task 3f2a…, goal "clear the downloads", for Claude 1.2 over HTTP`.
/// The caller's text in it (name, goal) is raw: the consoles show the whole through
/// [`crate::display::Shown`].
pub fn who(
    origin: CallOrigin,
    client: Option<&ClientName>,
    task: Option<&TaskId>,
    goal: Option<&str>,
) -> String {
    let client_words = |how: &str| match client {
        Some(c) => format!("{} (by its own name) {how}", c.words()),
        None => format!("a client that gave no name, {how}"),
    };
    let agent = || {
        let mut s = String::from("the Agent");
        if let Some(t) = task {
            s.push_str(&format!(", task {}", t.0));
        }
        if let Some(g) = goal.map(str::trim).filter(|g| !g.is_empty()) {
            let cut = crate::text::prefix(g, GOAL_SHOWN_BYTES + '…'.len_utf8());
            let more = if cut.len() < g.len() { "…" } else { "" };
            s.push_str(&format!(", goal \"{cut}{more}\""));
        }
        s
    };
    match origin {
        CallOrigin::McpHttp => client_words("over MCP (HTTP)"),
        CallOrigin::McpStdio => client_words("over MCP (stdio)"),
        CallOrigin::AgentHttp => format!("{}, for {}", agent(), client_words("over HTTP")),
        CallOrigin::AgentStdio => format!("{}, for {}", agent(), client_words("over stdio")),
        CallOrigin::OwnerTui => format!("{}, asked by you in the terminal console", agent()),
    }
}

/// Whose rights an action runs with, in words: `as root`, `as shell`, `as you`.
pub fn as_words(identity: Identity) -> &'static str {
    match identity {
        Identity::Root => "as root",
        Identity::Shell => "as shell",
        Identity::Launching => "as you",
    }
}

/// What every console shows of who asks and what they sent, each text through the one
/// escaping function: `who` (the words of [`who`]), `as` ([`as_words`]), `action` (the
/// exact argv, as sent where it can be: [`as_sent`](crate::display::as_sent)) with
/// `action_escaped`, and `command` (a `shell.exec` line as the caller sent it; `null` for
/// other tools) with `command_escaped`.
pub fn shown_request(
    p: &crate::channels::PendingApproval,
) -> serde_json::Map<String, serde_json::Value> {
    use crate::display::{as_sent, Shown};
    use crate::limits::MAX_ACTION_BYTES;
    use serde_json::{json, Value};
    let words = who(
        p.origin,
        p.client.as_ref(),
        p.task.as_ref(),
        p.goal.as_deref(),
    );
    let action = as_sent(&p.action, MAX_ACTION_BYTES);
    let command = p.sent.as_deref().map(|c| as_sent(c, MAX_ACTION_BYTES));
    let mut m = serde_json::Map::new();
    m.insert("who".into(), json!(Shown::new(&words).to_string()));
    m.insert("as".into(), json!(as_words(p.identity)));
    m.insert("action".into(), json!(action.text));
    m.insert("action_escaped".into(), json!(action.escaped));
    m.insert(
        "command".into(),
        command.as_ref().map_or(Value::Null, |c| json!(c.text)),
    );
    m.insert(
        "command_escaped".into(),
        json!(command.is_some_and(|c| c.escaped)),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_named_in_words_by_how_it_came() {
        let codex = ClientName::from_client("Codex", "0.47.0");
        assert_eq!(
            who(CallOrigin::McpHttp, codex.as_ref(), None, None),
            "Codex 0.47.0 (by its own name) over MCP (HTTP)"
        );
        assert_eq!(
            who(CallOrigin::McpStdio, None, None, None),
            "a client that gave no name, over MCP (stdio)"
        );
        let task = TaskId("3f2a".into());
        assert_eq!(
            who(
                CallOrigin::AgentHttp,
                codex.as_ref(),
                Some(&task),
                Some(" clear the downloads\n")
            ),
            "the Agent, task 3f2a, goal \"clear the downloads\", for Codex 0.47.0 (by its own \
             name) over HTTP"
        );
        assert_eq!(
            who(CallOrigin::OwnerTui, None, Some(&task), Some("tidy up")),
            "the Agent, task 3f2a, goal \"tidy up\", asked by you in the terminal console"
        );
    }

    #[test]
    fn a_long_goal_is_cut_and_says_so() {
        let goal = "é".repeat(200);
        let w = who(CallOrigin::AgentStdio, None, None, Some(&goal));
        assert!(w.contains(&format!("\"{}…\"", "é".repeat(81))), "{w}");
        // A goal already cut by goal_of is not cut twice.
        let doc = serde_json::json!({"history": [
            {"role": "ROLE_AGENT", "parts": [{"text": "hello"}]},
            {"role": "ROLE_USER", "parts": [{"text": "é".repeat(200)}]},
        ]});
        let cut = goal_of(&doc.to_string()).unwrap();
        assert_eq!(cut, format!("{}…", "é".repeat(80)));
        let w = who(CallOrigin::AgentStdio, None, None, Some(&cut));
        assert!(
            w.ends_with(&format!(
                "\"{cut}\", for a client that gave no name, over stdio"
            )),
            "{w}"
        );
    }

    #[test]
    fn the_goal_is_the_first_user_message() {
        let doc = serde_json::json!({"history": [
            {"role": "ROLE_USER", "parts": [{"text": "clear"}, {"data": {}}, {"text": " the downloads "}]},
            {"role": "ROLE_USER", "parts": [{"text": "later"}]},
        ]});
        assert_eq!(
            goal_of(&doc.to_string()).as_deref(),
            Some("clear  the downloads")
        );
        assert_eq!(goal_of(r#"{"history": []}"#), None);
        assert_eq!(
            goal_of(r#"{"history": [{"role": "ROLE_USER", "parts": [{"text": " "}]}]}"#),
            None
        );
        assert_eq!(goal_of("not json"), None);
    }

    #[test]
    fn names_are_bounded_and_checked() {
        let long = ClientName::from_client(&"n".repeat(100), &"v".repeat(100)).unwrap();
        assert_eq!(long.name.len(), ClientName::MAX_NAME_BYTES);
        assert_eq!(long.version.len(), ClientName::MAX_VERSION_BYTES);
        assert!(long.check().is_ok());
        assert_eq!(ClientName::from_client("  ", "1"), None);
        let bad = ClientName {
            name: "n".repeat(65),
            version: String::new(),
        };
        assert!(bad.check().unwrap_err().contains("65 bytes"));
        let bad = ClientName {
            name: String::new(),
            version: "1".into(),
        };
        assert!(bad.check().is_err());
        let bad = ClientName {
            name: "a".into(),
            version: "v".repeat(33),
        };
        assert!(bad.check().is_err());
    }

    #[test]
    fn a_client_cannot_name_itself_into_the_agents_words() {
        let spoof = ClientName::from_client(
            "the Agent, task t1, goal \"list files\", asked by you in the terminal console",
            "1,\"",
        )
        .unwrap();
        assert!(spoof.check().is_ok());
        let w = who(CallOrigin::McpHttp, Some(&spoof), None, None);
        assert!(!w.starts_with("the Agent,"), "{w}");
        assert!(!w.contains('"'), "{w}");
        assert!(w.ends_with("1 (by its own name) over MCP (HTTP)"), "{w}");
        // A receiver refuses what netd would never send.
        let sent = ClientName {
            name: "the Agent, task t1".into(),
            version: String::new(),
        };
        assert!(sent.check().is_err());
    }

    #[test]
    fn a_user_agent_gives_its_first_product() {
        assert_eq!(
            ClientName::from_user_agent("a2a-python/0.3.1 httpx/0.28").map(|c| c.words()),
            Some("a2a-python 0.3.1".into())
        );
        assert_eq!(
            ClientName::from_user_agent("curl").map(|c| c.words()),
            Some("curl".into())
        );
        assert_eq!(ClientName::from_user_agent("   "), None);
    }

    #[test]
    fn identities_read_as_whose_rights() {
        assert_eq!(as_words(Identity::Root), "as root");
        assert_eq!(as_words(Identity::Shell), "as shell");
        assert_eq!(as_words(Identity::Launching), "as you");
    }
}
