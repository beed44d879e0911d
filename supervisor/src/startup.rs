//! The connection block `nl2sh protocol serve` prints on stdout once it is listening:
//! endpoints, the token (only when generated), and MCP client configuration ready to paste.
//! Plain text, no colours: it often ends up in a log file.

use std::fmt::Write as _;
use std::net::SocketAddr;

use serde::Serialize;

use crate::advertise::{Origin, Scheme};
use crate::token::{TokenSource, TOKEN_ENV};

/// Client tool timeout in the MCP configuration: execution plus local approval waits.
pub const CLIENT_TOOL_TIMEOUT_SEC: u32 = 210;

/// The startup block for an HTTP listener advertised at `origin`. `generated_token` is
/// printed only when `source` is [`TokenSource::Generated`]; a configured or environment
/// token is never printed, even if passed. Notes about plaintext HTTP and loopback-only
/// origins are added automatically.
/// The startup block's last line when it shows the token.
const TOKEN_SHOWN_LAST_LINE: &str =
    "This output contains the token; share it only with trusted callers.";
/// The end of its last line when it does not.
const TOKEN_HIDDEN_LAST_LINE_END: &str =
    " in the client's environment to the token used by this device.";

/// Whether `text` holds a whole startup block (its last line is there).
pub fn holds_whole_block(text: &str) -> bool {
    text.lines().any(|l| {
        l == TOKEN_SHOWN_LAST_LINE
            || (l.starts_with("Set ") && l.ends_with(TOKEN_HIDDEN_LAST_LINE_END))
    })
}

pub fn startup_block(
    origin: &Origin,
    listening: SocketAddr,
    generated_token: Option<&str>,
    source: TokenSource,
) -> String {
    startup_block_with_notes(origin, listening, generated_token, source, &[])
}

/// [`startup_block`] with extra caller lines (e.g. "port 8765 was in use; listening on
/// 40123"), each printed as `Note: ...`.
pub fn startup_block_with_notes(
    origin: &Origin,
    listening: SocketAddr,
    generated_token: Option<&str>,
    source: TokenSource,
    notes: &[String],
) -> String {
    let shown_token = match source {
        TokenSource::Generated => generated_token,
        TokenSource::Environment | TokenSource::Config => None,
    };
    let mcp_url = origin.mcp_url();
    let mut out = String::new();
    // `write!` into a String cannot fail.
    let _ = writeln!(out, "nl2sh protocol service is running");
    let _ = writeln!(out);
    let _ = writeln!(out, "MCP URL:    {mcp_url}");
    let _ = writeln!(out, "A2A URL:    {}", origin.a2a_url());
    let _ = writeln!(out, "Agent Card: {}", origin.agent_card_url());
    let _ = writeln!(out, "Listening on: {listening}");
    match (shown_token, source) {
        (Some(token), _) => {
            let _ = writeln!(out, "Token:      {token} (generated; rotates on restart)");
        }
        (None, TokenSource::Generated) => {
            let _ = writeln!(out, "Token:      generated (not shown)");
        }
        (None, TokenSource::Environment | TokenSource::Config) => {
            let _ = writeln!(
                out,
                "Token:      set from {} (not shown)",
                source.describe()
            );
        }
    }
    let mut all_notes: Vec<String> = notes.to_vec();
    all_notes.extend(default_notes(origin));
    if !all_notes.is_empty() {
        let _ = writeln!(out);
        for note in &all_notes {
            let _ = writeln!(out, "Note: {note}");
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "MCP client configuration (TOML):");
    let _ = writeln!(out);
    out.push_str(&mcp_toml(&mcp_url));
    let _ = writeln!(out);
    let _ = writeln!(out, "MCP client configuration (JSON):");
    let _ = writeln!(out);
    out.push_str(&mcp_json(&mcp_url));
    let _ = writeln!(out);
    match shown_token {
        Some(token) => {
            let _ = writeln!(out, "Client environment:");
            let _ = writeln!(out);
            let _ = writeln!(out, "export {TOKEN_ENV}={}", shell_single_quote(token));
            let _ = writeln!(out);
            let _ = writeln!(out, "{TOKEN_SHOWN_LAST_LINE}");
        }
        None => {
            let _ = writeln!(out, "Set {TOKEN_ENV}{TOKEN_HIDDEN_LAST_LINE_END}");
        }
    }
    out
}

/// Warnings that follow from the origin alone.
pub fn default_notes(origin: &Origin) -> Vec<String> {
    let mut notes = Vec::new();
    if origin.is_loopback() {
        notes.push(format!(
            "{} is a loopback address; only clients on this device can connect.",
            origin.host
        ));
    } else if origin.scheme == Scheme::Http {
        notes.push(
            "HTTP sends the token in plaintext; use an HTTPS reverse proxy for public access."
                .to_owned(),
        );
    }
    notes
}

/// The TOML form for clients with `[mcp_servers.*]` tables.
pub fn mcp_toml(mcp_url: &str) -> String {
    format!(
        "[mcp_servers.nl2sh]\nurl = {}\nbearer_token_env_var = \"{TOKEN_ENV}\"\ntool_timeout_sec = {CLIENT_TOOL_TIMEOUT_SEC}\n",
        toml_basic_string(mcp_url)
    )
}

#[derive(Serialize)]
struct JsonConfig<'a> {
    #[serde(rename = "mcpServers")]
    mcp_servers: JsonServers<'a>,
}

#[derive(Serialize)]
struct JsonServers<'a> {
    nl2sh: JsonServer<'a>,
}

#[derive(Serialize)]
struct JsonServer<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    url: &'a str,
    headers: JsonHeaders,
}

#[derive(Serialize)]
struct JsonHeaders {
    #[serde(rename = "Authorization")]
    authorization: String,
}

/// The common JSON `mcpServers` form, pretty-printed; the token stays an environment
/// reference.
pub fn mcp_json(mcp_url: &str) -> String {
    let config = JsonConfig {
        mcp_servers: JsonServers {
            nl2sh: JsonServer {
                kind: "http",
                url: mcp_url,
                headers: JsonHeaders {
                    authorization: format!("Bearer ${{{TOKEN_ENV}}}"),
                },
            },
        },
    };
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    text
}

/// A TOML basic string (JSON string escaping is a valid subset for these characters).
fn toml_basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The command that starts the managed service of the configuration at `config_path`.
pub fn service_start_command(config_path: &str) -> String {
    format!(
        "nl2sh --config {} service start\n",
        shell_single_quote(config_path)
    )
}

/// A curl command sending an A2A 1.0 `SendMessage` to `a2a_url`, the token read from
/// the client's environment.
pub fn a2a_request(a2a_url: &str) -> String {
    format!(
        "curl -s {} -H \"Authorization: Bearer ${TOKEN_ENV}\" \\\n  \
         -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' -d '{{\n  \
         \"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{{\n    \
         \"message\":{{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{{\"text\":\"How full is /data?\"}}]}},\n    \
         \"configuration\":{{\"returnImmediately\":true}}}}}}'\n",
        shell_single_quote(a2a_url)
    )
}

/// `'text'` for a POSIX shell, with embedded single quotes closed, escaped and reopened.
fn shell_single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advertise::parse_advertised_url;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn the_a2a_request_is_a_valid_send_message() {
        let cmd = a2a_request("http://203.0.113.5:8765/a2a");
        assert!(
            cmd.starts_with("curl -s 'http://203.0.113.5:8765/a2a' "),
            "{cmd}"
        );
        assert!(cmd.contains("Bearer $NL2SH_PROTOCOL_TOKEN"), "{cmd}");
        let body = cmd
            .split("-d '")
            .nth(1)
            .unwrap()
            .trim_end()
            .trim_end_matches('\'');
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["method"], "SendMessage");
        assert_eq!(v["params"]["message"]["role"], "ROLE_USER");
        assert_eq!(
            service_start_command("/data/it's/config.toml"),
            "nl2sh --config '/data/it'\\''s/config.toml' service start\n"
        );
    }

    fn lan() -> Origin {
        Origin::http(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5)), 8765)
    }

    fn listen() -> std::net::SocketAddr {
        std::net::SocketAddr::from(([0, 0, 0, 0], 8765))
    }

    const GENERATED: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const FIXED: &str = "my-fixed-token-that-must-never-be-printed-000";

    #[test]
    fn a_whole_block_is_told_from_one_cut_short() {
        for (token, source) in [
            (Some(GENERATED), TokenSource::Generated),
            (None, TokenSource::Config),
            (None, TokenSource::Environment),
        ] {
            let block = startup_block(&lan(), listen(), token, source);
            let logged = format!("--- start ---\nINFO a worker line\n{block}INFO serving\n");
            assert!(holds_whole_block(&logged), "{block}");
            let cut = &block[..block.trim_end().rfind('\n').unwrap()];
            assert!(!holds_whole_block(cut), "{cut}");
        }
    }

    #[test]
    fn generated_token_is_shown_with_export_line() {
        let out = startup_block(&lan(), listen(), Some(GENERATED), TokenSource::Generated);
        assert!(
            out.starts_with("nl2sh protocol service is running\n"),
            "{out}"
        );
        assert!(
            out.contains("MCP URL:    http://203.0.113.5:8765/mcp\n"),
            "{out}"
        );
        assert!(
            out.contains("A2A URL:    http://203.0.113.5:8765/a2a\n"),
            "{out}"
        );
        assert!(out.contains("Agent Card: http://203.0.113.5:8765/.well-known/agent-card.json\n"));
        assert!(out.contains(&format!(
            "Token:      {GENERATED} (generated; rotates on restart)\n"
        )));
        assert!(out.contains(&format!("export NL2SH_PROTOCOL_TOKEN='{GENERATED}'\n")));
        assert!(out.contains(
            "[mcp_servers.nl2sh]\nurl = \"http://203.0.113.5:8765/mcp\"\nbearer_token_env_var = \"NL2SH_PROTOCOL_TOKEN\"\ntool_timeout_sec = 210\n"
        ), "{out}");
        assert!(out.contains("plaintext"), "{out}");
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn fixed_tokens_are_never_printed() {
        for source in [TokenSource::Environment, TokenSource::Config] {
            // Even if a caller passes the fixed token by mistake.
            for passed in [Some(FIXED), None] {
                let out = startup_block(&lan(), listen(), passed, source);
                assert!(!out.contains(FIXED), "{out}");
                assert!(!out.contains("export "), "{out}");
                assert!(out.contains(&format!(
                    "Token:      set from {} (not shown)\n",
                    source.describe()
                )));
            }
        }
        let out = startup_block(&lan(), listen(), None, TokenSource::Config);
        assert!(out.contains("set from configuration"));
        let out = startup_block(&lan(), listen(), None, TokenSource::Environment);
        assert!(out.contains("set from environment"));
        let out = startup_block(&lan(), listen(), None, TokenSource::Generated);
        assert!(out.contains("Token:      generated (not shown)\n"));
        assert!(!out.contains("export "));
    }

    #[test]
    fn json_shape_and_toml_parse_back() {
        let url = "https://agent.example.com/mcp";
        let v: serde_json::Value = serde_json::from_str(&mcp_json(url)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"mcpServers":{"nl2sh":{"type":"http","url":url,
                "headers":{"Authorization":"Bearer ${NL2SH_PROTOCOL_TOKEN}"}}}})
        );
        let j = mcp_json(url);
        assert!(j.find("\"type\"").unwrap() < j.find("\"url\"").unwrap());
        assert!(j.find("\"url\"").unwrap() < j.find("\"headers\"").unwrap());

        let t: toml::Table = toml::from_str(&mcp_toml(url)).unwrap();
        let server = &t["mcp_servers"]["nl2sh"];
        assert_eq!(server["url"].as_str(), Some(url));
        assert_eq!(
            server["bearer_token_env_var"].as_str(),
            Some("NL2SH_PROTOCOL_TOKEN")
        );
        assert_eq!(server["tool_timeout_sec"].as_integer(), Some(210));
    }

    #[test]
    fn notes() {
        let https = parse_advertised_url("https://agent.example.com").unwrap();
        let out = startup_block_with_notes(
            &https,
            listen(),
            Some(GENERATED),
            TokenSource::Generated,
            &["port 8765 was in use; listening on 40123".into()],
        );
        assert!(
            out.contains("MCP URL:    https://agent.example.com/mcp\n"),
            "{out}"
        );
        assert!(out.contains("Note: port 8765 was in use; listening on 40123\n"));
        assert!(!out.contains("plaintext"));

        let local = Origin::http(IpAddr::V4(Ipv4Addr::LOCALHOST), 8765);
        let notes = default_notes(&local);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("only clients on this device"));
    }

    #[test]
    fn quoting_helpers() {
        assert_eq!(shell_single_quote("a'b"), r"'a'\''b'");
        assert_eq!(toml_basic_string("a\"b\\c"), r#""a\"b\\c""#);
    }
}
