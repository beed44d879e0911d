//! The public Agent Card (`GET /.well-known/agent-card.json`): A2A 1.0, JSON-RPC binding
//! at `<advertised origin>/a2a`, Bearer authentication, no streaming, push or extended
//! card. Built once per process (the origin does not change while netd runs), served
//! with a strong ETag and a cache lifetime.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// How long clients may reuse the card without asking again.
pub const CACHE_CONTROL: &str = "max-age=300";

pub struct Card {
    body: axum::body::Bytes,
    etag: HeaderValue,
}

/// The card object for `origin` (`scheme://host[:port]`).
pub fn card_json(origin: &str) -> Value {
    let origin = origin.trim_end_matches('/');
    json!({
        "name": "nl2sh",
        "description": "A device agent on this phone or Linux host. Give it a task in \
            plain language; its built-in Agent works it with the device's tools (shell, \
            files, processes, screen and input on Android). Actions that change the \
            device wait for approval by the device's owner.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{origin}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }],
        "capabilities": {
            "streaming": false,
            "pushNotifications": false,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": [{
            "id": "device-task",
            "name": "Device task",
            "description": "Inspect or operate this device: run commands, read and write \
                files, look at processes and logs, read the screen and drive apps. The \
                result artifact holds the answer, the steps taken and every tool call \
                with its outcome.",
            "tags": ["device", "shell", "android", "linux", "automation"],
            "examples": [
                "How much free storage is left?",
                "Which app is in the foreground?",
                "Show the last 20 lines of the system log.",
            ],
        }],
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
    })
}

impl Card {
    pub fn new(origin: &str) -> Self {
        let body = card_json(origin).to_string();
        let digest = Sha256::digest(body.as_bytes());
        // Hex digits inside quotes: always a valid header value.
        let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
            .unwrap_or_else(|_| HeaderValue::from_static("\"card\""));
        Self {
            body: body.into(),
            etag,
        }
    }

    /// Does `If-None-Match` name this card's version? (Weak comparison, as RFC 9110
    /// prescribes for If-None-Match; `*` matches any.)
    fn not_modified(&self, headers: &HeaderMap) -> bool {
        let ours = self.etag.as_bytes();
        headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == ours)
    }
}

pub async fn serve(State(card): State<std::sync::Arc<Card>>, headers: HeaderMap) -> Response {
    let fresh = card.not_modified(&headers);
    let mut response = if fresh {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::from(card.body.clone()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, card.etag.clone());
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ETag is the first 128 bits of the body's SHA-256, lowercase hex in quotes:
    /// it changes exactly when the card does.
    #[test]
    fn etag_is_the_quoted_hex_of_the_body_hash() {
        let card = Card::new("http://127.0.0.1:8080");
        let digest = Sha256::digest(&card.body);
        let want: String = digest[..16]
            .iter()
            .flat_map(|b| [b >> 4, b & 0xf])
            .map(|n| char::from_digit(u32::from(n), 16).unwrap())
            .collect();
        assert_eq!(card.etag.to_str().unwrap(), format!("\"{want}\""));
        assert_eq!(want.len(), 32);
        let other = Card::new("http://127.0.0.1:8081");
        assert_ne!(other.etag, card.etag);
    }
}
