//! What the running service uses against what its configuration file says now: the
//! settings that apply only at a start (the protocol port, the token, whether MCP/A2A
//! start with the service), so every console can say "saved 8770, running 8765: restart
//! to apply" instead of showing the saved value as if it were live (issue 40). The live
//! settings (`protocol_auto_approve`, `approval_notifications`) are read again by
//! approvald at each decision: what the file says is what runs.
//!
//! Read by `service status` and by the Web console's discovery; never a token's text.

use std::path::Path;

use nl2sh_proto::config::{self as schema, Config, ConfigError, ParseMode};

use crate::serve::WEB_ONLY_TRANSPORT;
use crate::service::SERVICE_TRANSPORT;
use crate::state::ConnectionInfo;

/// One setting whose saved value the running process does not use yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub key: &'static str,
    /// The saved value, in words (a token only as set or not).
    pub saved: String,
    /// The running value, in words.
    pub running: String,
}

/// The running process against the saved file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub differs: Vec<Difference>,
    /// Why the saved file could not be compared (it does not load).
    pub unreadable: Option<String>,
}

impl Comparison {
    pub fn keys(&self) -> Vec<&'static str> {
        self.differs.iter().map(|d| d.key).collect()
    }
}

/// Compare the process `info` announced with the file at `config_path`. Only a process
/// started from the file's settings is compared (the managed service, `--web-only`); a
/// standalone `protocol serve` takes its port from its command line.
pub fn compare(info: &ConnectionInfo, config_path: &Path) -> Comparison {
    if info.transport != SERVICE_TRANSPORT && info.transport != WEB_ONLY_TRANSPORT {
        return Comparison::default();
    }
    match schema::load(config_path, ParseMode::Startup) {
        Ok(saved) => Comparison {
            differs: differences(info, &saved),
            unreadable: None,
        },
        Err(ConfigError::Missing { .. }) => Comparison {
            differs: differences(info, &Config::default()),
            unreadable: None,
        },
        Err(e) => Comparison {
            differs: Vec::new(),
            unreadable: Some(e.to_string()),
        },
    }
}

fn port_of(listen: &str) -> Option<u16> {
    listen.rsplit(':').next()?.parse().ok()
}

fn differences(info: &ConnectionInfo, saved: &Config) -> Vec<Difference> {
    let mut out = Vec::new();
    let serving = info.mcp_url.is_some();
    if serving != saved.protocol_start_with_service {
        out.push(Difference {
            key: "protocol_start_with_service",
            saved: saved.protocol_start_with_service.to_string(),
            running: serving.to_string(),
        });
    }
    if !serving {
        return out;
    }
    let bound = info.listen.as_deref().and_then(port_of);
    // The port it was asked for: a port in use falls back to a free one, which a
    // restart would not change.
    if let Some(asked) = info.requested_port.or(bound) {
        if asked != saved.service_port() {
            out.push(Difference {
                key: "protocol_service_port",
                saved: saved.service_port().to_string(),
                running: bound.unwrap_or(asked).to_string(),
            });
        }
    }
    if let Some(d) = token_difference(info, saved) {
        out.push(d);
    }
    out
}

/// The token: a configured one the process does not use, a generated one where the file
/// now sets one, or one the file no longer sets. One from the environment overrides the
/// file at every start, so it never differs.
fn token_difference(info: &ConnectionInfo, saved: &Config) -> Option<Difference> {
    let saved_token = saved.protocol_token.as_deref().filter(|t| !t.is_empty());
    let running = info.token.as_deref()?;
    let source = info.token_source.as_deref();
    let differs = match (source, saved_token) {
        (Some("environment"), _) => false,
        (Some("generated"), saved) => saved.is_some(),
        (_, Some(saved)) => !constant_time_eq(saved.as_bytes(), running.as_bytes()),
        (Some("configuration"), None) => true,
        (_, None) => false,
    };
    differs.then(|| Difference {
        key: "protocol_token",
        saved: match saved_token {
            Some(_) => "set".into(),
            None => "not set (one is generated at each start)".into(),
        },
        running: match source {
            Some("generated") => "generated, rotates on restart".into(),
            _ => "the previous token".into(),
        },
    })
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the process running for the configuration at `config_path` approves every
/// request with no one asked: `protocol_auto_approve` as approvald reads it at each
/// decision. A file that does not load approves nothing (approvald fails closed).
pub fn auto_approve(config_path: &Path) -> bool {
    schema::load(config_path, ParseMode::Running).is_ok_and(|c| c.protocol_auto_approve)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tok-0123456789-abcdefghijklmnopqrstuvwxyz";

    fn info(port: u16, source: &str) -> ConnectionInfo {
        let mut info = crate::state::this_process_info(Path::new("/c.toml"), SERVICE_TRANSPORT)
            .expect("this process");
        info.mcp_url = Some(format!("http://127.0.0.1:{port}/mcp"));
        info.listen = Some(format!("0.0.0.0:{port}"));
        info.requested_port = Some(port);
        info.token = Some(TOKEN.into());
        info.token_source = Some(source.into());
        info
    }

    fn saved(text: &str) -> Config {
        schema::parse(Path::new("/c.toml"), text, ParseMode::Startup).expect("valid")
    }

    #[test]
    fn a_saved_port_the_service_does_not_use_differs() {
        let running = info(8765, "configuration");
        let text = format!("protocol_start_with_service = true\nprotocol_token = '{TOKEN}'\n");
        assert!(differences(&running, &saved(&text)).is_empty());
        let moved = saved(&format!("{text}protocol_service_port = 8770\n"));
        assert_eq!(
            differences(&running, &moved),
            vec![Difference {
                key: "protocol_service_port",
                saved: "8770".into(),
                running: "8765".into(),
            }]
        );
        // Asked for 8770, which was in use: it runs on another, and a restart would not
        // change that, so it does not differ.
        let mut fell_back = info(8771, "configuration");
        fell_back.requested_port = Some(8770);
        assert!(differences(&fell_back, &moved).is_empty());
    }

    #[test]
    fn the_token_differs_by_where_it_came_from() {
        let on = "protocol_start_with_service = true\n";
        let with_token = format!("{on}protocol_token = '{TOKEN}'\n");
        let other = format!("{on}protocol_token = '{TOKEN}-rotated'\n");
        let keys = |i: &ConnectionInfo, t: &str| {
            differences(i, &saved(t))
                .iter()
                .map(|d| d.key)
                .collect::<Vec<_>>()
        };
        assert!(keys(&info(8765, "generated"), on).is_empty());
        assert_eq!(
            keys(&info(8765, "generated"), &with_token),
            ["protocol_token"]
        );
        assert!(keys(&info(8765, "configuration"), &with_token).is_empty());
        assert_eq!(
            keys(&info(8765, "configuration"), &other),
            ["protocol_token"]
        );
        assert_eq!(keys(&info(8765, "configuration"), on), ["protocol_token"]);
        assert!(keys(&info(8765, "environment"), &other).is_empty());
        let d = differences(&info(8765, "generated"), &saved(&with_token));
        assert_eq!(d[0].running, "generated, rotates on restart");
        assert!(!format!("{d:?}").contains(TOKEN), "a token's text");
    }

    #[test]
    fn a_console_without_protocols_differs_when_they_are_switched_on() {
        let mut console = info(8765, "generated");
        console.transport = WEB_ONLY_TRANSPORT.into();
        console.mcp_url = None;
        console.token = None;
        assert!(differences(&console, &saved("")).is_empty());
        assert_eq!(
            differences(&console, &saved("protocol_start_with_service = true\n")),
            vec![Difference {
                key: "protocol_start_with_service",
                saved: "true".into(),
                running: "false".into(),
            }]
        );
    }

    #[test]
    fn automatic_approval_is_what_the_file_says_and_off_when_it_does_not_load() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("c.toml");
        assert!(!auto_approve(&path));
        std::fs::write(&path, "protocol_auto_approve = true\n").unwrap();
        assert!(auto_approve(&path));
        std::fs::write(
            &path,
            "protocol_auto_approve = true\nprotocol_service_port = 'x'\n",
        )
        .unwrap();
        assert!(!auto_approve(&path));
    }
}
