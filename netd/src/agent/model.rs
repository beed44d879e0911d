//! The model client: one OpenAI-compatible Chat Completions request per Agent step.
//! HTTPS with rustls (ring, Mozilla's roots compiled in: Android has no /etc/ssl), the
//! proxy only from the settings (never the environment), our own resolver
//! ([`super::dns`]), no redirects (the key must not follow one), a time limit per
//! request and a size limit on the answer. Whatever goes wrong becomes a [`ModelError`]
//! whose text names the endpoint and the cause and never holds the key or the proxy
//! URL.

use std::sync::Arc;
use std::time::Duration;

use nl2sh_proto::channels::ModelSettings;
use nl2sh_proto::limits::MAX_MODEL_REQUEST_BYTES;
use serde_json::{json, Map, Value};

use super::dns::{NameService, Resolver};
use super::evidence::prefix;

/// Largest response body read from the model.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Tool calls accepted in one model turn.
pub const MAX_TOOL_CALLS_PER_TURN: usize = 64;
/// Bytes of an error body kept for the status message.
const ERROR_EXCERPT_BYTES: usize = 300;
/// Longest tool call id accepted from the model.
const MAX_CALL_ID_BYTES: usize = 256;
/// Longest function name accepted from the model (they are looked up, never run).
const MAX_FUNCTION_NAME_BYTES: usize = 256;
/// Name resolution gets at most this long, within the request's own limit.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model client cannot be set up: {0}")]
    Setup(String),
    #[error("the model at {base_url} did not answer within request_timeout_secs ({secs} s)")]
    Timeout { base_url: String, secs: u64 },
    #[error("cannot reach the model at {base_url}: {cause}")]
    Unreachable { base_url: String, cause: String },
    #[error("the model at {base_url} answered HTTP {status}: {excerpt}")]
    Http {
        base_url: String,
        status: u16,
        excerpt: String,
    },
    #[error("the model at {base_url} sent an unusable response: {why}")]
    BadResponse { base_url: String, why: String },
    #[error(
        "the request to the model at {base_url} would be {bytes} bytes; the limit is \
         {MAX_MODEL_REQUEST_BYTES}"
    )]
    RequestTooLarge { base_url: String, bytes: usize },
}

/// One tool call the model asked for, as it asked (nothing checked yet but the shape).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub function: String,
    /// The arguments as the model wrote them (JSON text, not yet parsed).
    pub arguments: String,
}

/// The model's message of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

impl Reply {
    /// The assistant message as the history keeps it (only the fields the API defines,
    /// nothing else the provider added).
    pub fn message(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), json!(self.content));
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function, "arguments": c.arguments},
                    })
                })
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        Value::Object(m)
    }
}

pub struct ModelClient {
    http: reqwest::Client,
    url: String,
    base_url: String,
    model: String,
    key: nl2sh_proto::Secret,
    timeout: Duration,
    /// Text that must never appear in an error kept from this client: the key, the
    /// proxy URL and its password.
    redact: Vec<String>,
}

impl ModelClient {
    pub fn new(settings: &ModelSettings, names: NameService) -> Result<Self, ModelError> {
        let timeout = Duration::from_secs(settings.request_timeout_secs.max(1));
        let mut redact = vec![settings.api_key.expose().to_string()];
        if let Some(proxy) = &settings.https_proxy {
            redact.push(proxy.expose().to_string());
            if let Ok(url) = reqwest::Url::parse(proxy.expose()) {
                redact.extend(url.password().map(str::to_string));
            }
        }
        redact.retain(|s| !s.is_empty());
        let base_url = settings.base_url.trim_end_matches('/').to_string();
        let setup = |what: &str, e: &dyn std::fmt::Display| {
            ModelError::Setup(redacted(&format!("{what}: {e}"), &redact))
        };
        let tls = tls_config().map_err(|e| setup("TLS", &e))?;
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .dns_resolver(Arc::new(Resolver {
                service: names,
                timeout: RESOLVE_TIMEOUT.min(timeout),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("nl2sh/", env!("CARGO_PKG_VERSION")))
            // netd's environment is empty anyway; the settings alone decide.
            .no_proxy();
        if let Some(proxy) = &settings.https_proxy {
            let no_proxy = settings
                .no_proxy
                .as_deref()
                .and_then(reqwest::NoProxy::from_string);
            let proxy = reqwest::Proxy::https(proxy.expose())
                .map_err(|e| setup("https_proxy", &e))?
                .no_proxy(no_proxy);
            builder = builder.proxy(proxy);
        }
        let http = builder.build().map_err(|e| setup("HTTP client", &e))?;
        Ok(Self {
            http,
            url: format!("{base_url}/chat/completions"),
            base_url: without_userinfo(&base_url),
            model: settings.model.clone(),
            key: settings.api_key.clone(),
            timeout,
            redact,
        })
    }

    /// The request body for `messages` with `tools` offered.
    pub fn body(&self, messages: &[Value], tools: &[Value]) -> Value {
        let mut body = json!({"model": self.model, "messages": messages});
        // An empty `tools` array is refused by some servers; no tools, no field.
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools.to_vec());
            body["tool_choice"] = json!("auto");
        }
        body
    }

    /// [`Self::body`] as the bytes sent, written straight from `messages` and `tools`
    /// (no copy of the conversation as a `Value` first), refused past
    /// [`MAX_MODEL_REQUEST_BYTES`].
    pub fn encode_body(&self, messages: &[Value], tools: &[Value]) -> Result<Vec<u8>, ModelError> {
        let mut out = Vec::new();
        let mut write = || -> serde_json::Result<()> {
            out.extend_from_slice(b"{\"model\":");
            serde_json::to_writer(&mut out, &self.model)?;
            out.extend_from_slice(b",\"messages\":");
            serde_json::to_writer(&mut out, messages)?;
            if !tools.is_empty() {
                out.extend_from_slice(b",\"tools\":");
                serde_json::to_writer(&mut out, tools)?;
                out.extend_from_slice(b",\"tool_choice\":\"auto\"");
            }
            out.push(b'}');
            Ok(())
        };
        write().map_err(|e| self.bad(e.to_string()))?;
        if out.len() > MAX_MODEL_REQUEST_BYTES {
            return Err(ModelError::RequestTooLarge {
                base_url: self.base_url.clone(),
                bytes: out.len(),
            });
        }
        Ok(out)
    }

    /// Bytes of a request with no messages: what the conversation shares the limit with.
    pub fn fixed_bytes(&self, tools: &[Value]) -> usize {
        self.encode_body(&[], tools).map_or(0, |b| b.len())
    }

    /// One model turn. Dropping the future drops the request.
    pub async fn complete(&self, messages: &[Value], tools: &[Value]) -> Result<Reply, ModelError> {
        let body = self.encode_body(messages, tools)?;
        // The client's own limit covers connect to the last byte; this one also covers
        // what the client does not (it cannot hang past the budget either way).
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out()),
        }
    }

    fn timed_out(&self) -> ModelError {
        ModelError::Timeout {
            base_url: self.base_url.clone(),
            secs: self.timeout.as_secs(),
        }
    }

    fn bad(&self, why: impl Into<String>) -> ModelError {
        ModelError::BadResponse {
            base_url: self.base_url.clone(),
            why: redacted(&why.into(), &self.redact),
        }
    }

    fn transport(&self, e: reqwest::Error) -> ModelError {
        if e.is_timeout() {
            return self.timed_out();
        }
        ModelError::Unreachable {
            base_url: self.base_url.clone(),
            cause: redacted(&cause_chain(&e), &self.redact),
        }
    }

    async fn exchange(&self, body: Vec<u8>) -> Result<Reply, ModelError> {
        let mut response = self
            .http
            .post(&self.url)
            .bearer_auth(self.key.expose())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport(e))?;
        let status = response.status();
        let mut bytes = Vec::new();
        let mut too_large = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                too_large = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let excerpt = error_excerpt(&text);
            return Err(ModelError::Http {
                base_url: self.base_url.clone(),
                status: status.as_u16(),
                excerpt: redacted(&excerpt, &self.redact),
            });
        }
        if too_large {
            return Err(self.bad(format!(
                "larger than {} MiB",
                MAX_RESPONSE_BYTES / (1024 * 1024)
            )));
        }
        parse_reply(&bytes).map_err(|why| self.bad(why))
    }
}

/// `url` as messages show it: any user name or password in it removed.
fn without_userinfo(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.as_str().trim_end_matches('/').to_string()
        }
        _ => url.to_string(),
    }
}

/// rustls with the ring provider and Mozilla's roots, HTTP/1.1 only.
fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// What went wrong, innermost causes included (`reqwest`'s own text only says which
/// request failed).
fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        // reqwest names the URL; the message names the base URL once already.
        let text = match text.find(" for url (") {
            Some(at) => text[..at].to_string(),
            None => text,
        };
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

/// `text` with every secret replaced.
pub fn redacted(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), "<redacted>");
    }
    out
}

/// A short excerpt of an error body: the API's `error.message` when there is one.
fn error_excerpt(text: &str) -> String {
    let message = serde_json::from_str::<Value>(text).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
    });
    let text = message.unwrap_or_else(|| text.trim().to_string());
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cut = prefix(&text, ERROR_EXCERPT_BYTES);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else if cut.is_empty() {
        "(empty body)".into()
    } else {
        cut.to_string()
    }
}

/// `choices[0].message` of a Chat Completions response, checked field by field.
pub fn parse_reply(bytes: &[u8]) -> Result<Reply, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
    let Some(obj) = v.as_object() else {
        return Err("not a JSON object".into());
    };
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        return Err(format!(
            "an error: {}",
            error_excerpt(&json!({"error": err}).to_string())
        ));
    }
    let message = obj
        .get("choices")
        .and_then(Value::as_array)
        .ok_or("no `choices` array")?
        .first()
        .ok_or("`choices` is empty")?
        .get("message")
        .and_then(Value::as_object)
        .ok_or("`choices[0].message` is not an object")?;
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Content parts: the text ones, joined.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(_) => return Err("`message.content` is neither text nor null".into()),
    };
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => return Err("`message.tool_calls` is not an array".into()),
    };
    if calls.len() > MAX_TOOL_CALLS_PER_TURN {
        return Err(format!(
            "{} tool calls in one turn (at most {MAX_TOOL_CALLS_PER_TURN})",
            calls.len()
        ));
    }
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(i, c)| parse_call(c).map_err(|why| format!("tool_calls[{i}]: {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Reply {
        content,
        tool_calls,
    })
}

fn parse_call(c: &Value) -> Result<ToolCall, String> {
    let id = c
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= MAX_CALL_ID_BYTES)
        .ok_or("no usable `id`")?;
    if let Some(kind) = c.get("type") {
        if kind != "function" {
            return Err(format!("type {kind} is not \"function\""));
        }
    }
    let function = c
        .get("function")
        .and_then(Value::as_object)
        .ok_or("no `function` object")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| n.len() <= MAX_FUNCTION_NAME_BYTES)
        .ok_or("no usable `function.name`")?;
    let arguments = match function.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        // Some servers send the object itself rather than its text.
        Some(v @ Value::Object(_)) => v.to_string(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Ok(ToolCall {
        id: id.to_string(),
        function: name.to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_text_calls_and_refuse_wrong_shapes() {
        let r = parse_reply(br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#)
            .unwrap();
        assert_eq!(r.content.as_deref(), Some("hi"));
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.message(), json!({"role": "assistant", "content": "hi"}));

        let r = parse_reply(
            br#"{"choices":[{"message":{"content":null,"reasoning":"x","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"fs__stat","arguments":"{\"path\":\"/\"}"}},
                {"id":"c2","function":{"name":"x","arguments":{"a":1}}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(r.content, None);
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].arguments, r#"{"path":"/"}"#);
        assert_eq!(r.tool_calls[1].arguments, r#"{"a":1}"#);
        let m = r.message();
        assert!(m.get("reasoning").is_none());
        assert_eq!(m["tool_calls"][1]["type"], "function");
        assert_eq!(m["content"], Value::Null);

        let parts = parse_reply(
            br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
        )
        .unwrap();
        assert_eq!(parts.content.as_deref(), Some("ab"));

        for (bad, says) in [
            (&b"not json"[..], "not JSON"),
            (b"[1]", "not a JSON object"),
            (b"{}", "choices"),
            (br#"{"choices":[]}"#, "empty"),
            (br#"{"choices":[{"message":"x"}]}"#, "not an object"),
            (br#"{"choices":[{"message":{"content":5}}]}"#, "content"),
            (
                br#"{"choices":[{"message":{"tool_calls":{}}}]}"#,
                "not an array",
            ),
            (
                br#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"a"}}]}}]}"#,
                "id",
            ),
            (
                br#"{"choices":[{"message":{"tool_calls":[{"id":"a","type":"web"}]}}]}"#,
                "type",
            ),
            (
                br#"{"choices":[{"message":{"tool_calls":[{"id":"a"}]}}]}"#,
                "function",
            ),
            (
                br#"{"error":{"message":"quota exceeded"}}"#,
                "quota exceeded",
            ),
        ] {
            let e = parse_reply(bad).unwrap_err();
            assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(bad));
        }
        let many: Vec<Value> = (0..=MAX_TOOL_CALLS_PER_TURN)
            .map(|i| json!({"id": format!("c{i}"), "function": {"name": "x", "arguments": "{}"}}))
            .collect();
        let body = json!({"choices": [{"message": {"tool_calls": many}}]}).to_string();
        assert!(parse_reply(body.as_bytes())
            .unwrap_err()
            .contains("at most"));
        // Deeply nested input is an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_reply(deep.as_bytes()).is_err());
    }

    #[test]
    fn error_excerpts_are_short_single_line_and_redacted() {
        assert_eq!(
            error_excerpt(r#"{"error":{"message":"bad key\nsk-123"}}"#),
            "bad key sk-123"
        );
        assert_eq!(error_excerpt(""), "(empty body)");
        let long = "x".repeat(1000);
        let e = error_excerpt(&long);
        assert!(e.len() < 320 && e.ends_with('…'), "{e}");
        assert_eq!(
            redacted("key sk-123 and sk-123", &["sk-123".into(), String::new()]),
            "key <redacted> and <redacted>"
        );
    }

    #[test]
    fn the_body_has_the_model_messages_and_tools_only_when_there_are_some() {
        let settings = ModelSettings {
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: "m-1".into(),
            api_key: nl2sh_proto::Secret::new("k".into()),
            max_steps: 3,
            request_timeout_secs: 5,
            https_proxy: None,
            no_proxy: None,
        };
        let c = ModelClient::new(&settings, NameService::System).unwrap();
        assert_eq!(c.url, "http://127.0.0.1:9/v1/chat/completions");
        let msgs = vec![json!({"role": "user", "content": "x"})];
        let b = c.body(&msgs, &[]);
        assert_eq!(b, json!({"model": "m-1", "messages": msgs}));
        let tools = vec![json!({"type": "function", "function": {"name": "a"}})];
        let b = c.body(&msgs, &tools);
        assert_eq!(b["tools"], Value::Array(tools.clone()));
        assert_eq!(b["tool_choice"], "auto");
        // The bytes sent are that body, written without a copy of the conversation.
        for tools in [&[][..], &tools[..]] {
            let sent = c.encode_body(&msgs, tools).unwrap();
            let sent: Value = serde_json::from_slice(&sent).unwrap();
            assert_eq!(sent, c.body(&msgs, tools));
        }
        assert_eq!(
            c.fixed_bytes(&tools),
            c.encode_body(&[], &tools).unwrap().len()
        );
        // Past the limit as written: refused, naming the size and the limit.
        let huge = vec![json!({"role": "user", "content": "x".repeat(MAX_MODEL_REQUEST_BYTES)})];
        let e = c.encode_body(&huge, &[]).unwrap_err();
        assert!(matches!(e, ModelError::RequestTooLarge { .. }), "{e}");
        assert!(
            e.to_string().contains(&MAX_MODEL_REQUEST_BYTES.to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_bad_proxy_is_a_setup_error_without_the_proxy_in_it() {
        let settings = ModelSettings {
            base_url: "https://model.example/v1".into(),
            model: "m".into(),
            api_key: nl2sh_proto::Secret::new("sk-secret-key".into()),
            max_steps: 3,
            request_timeout_secs: 5,
            https_proxy: Some(nl2sh_proto::Secret::new("::not a url user:pw@".into())),
            no_proxy: Some("localhost".into()),
        };
        let e = ModelClient::new(&settings, NameService::System)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("https_proxy"), "{e}");
        assert!(
            !e.contains("not a url") && !e.contains("sk-secret-key"),
            "{e}"
        );
    }
}
