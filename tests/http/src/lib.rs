//! The tests' one HTTP/1.1 client: a request per connection (`Connection: close`), read
//! to the end. Hand-made rather than an HTTP client crate because the tests send what
//! no well-behaved client would (wrong hosts, missing or oversized bodies, chunked
//! bodies) and read the front door's answer to exactly those bytes. Blocking for the
//! end-to-end tests, which drive a real `nl2sh` process; async for netd's in-process
//! tests, whose server runs on the test's own runtime.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// The MCP protocol version the helpers send.
pub const MCP_VERSION: &str = "2025-11-25";

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy), de-chunked.
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON: plain JSON, or the last `data:` line of an SSE stream.
    pub fn json(&self) -> Value {
        let text = if self.body.trim_start().starts_with(['{', '[']) {
            self.body.as_str()
        } else {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .unwrap_or_default()
        };
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// One of nl2sh's own refusals: `status`, a short JSON `{"error": …}`.
    pub fn assert_refusal(&self, status: u16) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert!(self.json()["error"].is_string(), "{self:?}");
    }
}

/// Call `send` with the headers of an authorised MCP POST to `addr`: Host naming the
/// listener, Bearer `token`, the content types MCP requires and [`MCP_VERSION`].
pub fn with_mcp_headers<R>(
    addr: SocketAddr,
    token: &str,
    send: impl FnOnce(&[(&str, &str)]) -> R,
) -> R {
    let (host, bearer) = (addr.to_string(), format!("Bearer {token}"));
    send(&mcp_headers(&host, &bearer))
}

fn mcp_headers<'a>(host: &'a str, bearer: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("Host", host),
        ("Authorization", bearer),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MCP_VERSION),
    ]
}

/// The bytes of the request head: `Content-Length` added unless the caller gave one or
/// a `Transfer-Encoding`, then `Connection: close`.
pub fn request_head(method: &str, path: &str, headers: &[(&str, &str)], body_len: usize) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let framed = headers.iter().any(|(k, _)| {
        k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
    });
    if !framed {
        head.push_str(&format!("Content-Length: {body_len}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    head
}

/// A response as read off a closed connection; `None` without a status line.
pub fn parse(raw: &[u8]) -> Option<Response> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n");
    let (head, body) = match end {
        Some(end) => (raw.get(..end)?, raw.get(end + 4..)?),
        None => (raw, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Some(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&data[..line_end])
            .ok()
            .and_then(|t| usize::from_str_radix(t.split(';').next()?.trim(), 16).ok());
        let Some(size) = size.filter(|n| *n > 0) else {
            break;
        };
        let start = line_end + 2;
        let Some(chunk) = data.get(start..start + size) else {
            break;
        };
        out.extend_from_slice(chunk);
        data = data.get(start + size + 2..).unwrap_or_default();
    }
    out
}

/// One request on a fresh connection, every step bounded by `limit`. An error only when
/// the connection or the request could not be made, or no status line came back.
pub fn try_send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limit: Duration,
) -> io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, limit)?;
    s.set_read_timeout(Some(limit))?;
    s.set_write_timeout(Some(limit))?;
    s.write_all(request_head(method, path, headers, body.len()).as_bytes())?;
    // The server may answer (413) before reading a body it refuses, and close.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    // A reset after the response arrived still leaves the whole response.
    let _ = s.read_to_end(&mut raw);
    parse(&raw).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no HTTP status in {:?}", String::from_utf8_lossy(&raw)),
        )
    })
}

/// [`try_send`] that must succeed (30 s).
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    try_send(addr, method, path, headers, body, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{method} {path} to {addr}: {e}"))
}

/// [`send`] on the test's own runtime (20 s).
pub async fn send_async(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(request_head(method, path, headers, body.len()).as_bytes())
            .await?;
        let _ = s.write_all(body).await;
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        io::Result::Ok(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path} to {addr}: no response in time"))
        .unwrap_or_else(|e| panic!("{method} {path} to {addr}: {e}"));
    parse(&raw).unwrap_or_else(|| panic!("no HTTP status in {:?}", String::from_utf8_lossy(&raw)))
}

/// An authorised MCP POST of `body` ([`with_mcp_headers`]) on the test's own runtime.
pub async fn mcp_post_async(addr: SocketAddr, token: &str, body: &str) -> Response {
    let (host, bearer) = (addr.to_string(), format!("Bearer {token}"));
    let headers = mcp_headers(&host, &bearer);
    send_async(addr, "POST", "/mcp", &headers, body.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_response_is_joined() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\":1}\n\r\n0\r\n\r\n";
        let r = parse(raw).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json()["a"], 1);
    }

    #[test]
    fn sse_bodies_give_their_last_data_line() {
        let raw = b"HTTP/1.1 200 OK\r\n\r\nevent: message\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\n";
        assert_eq!(parse(raw).unwrap().json()["n"], 2);
    }

    #[test]
    fn no_status_line_is_no_response() {
        assert!(parse(b"").is_none());
        assert!(parse(b"garbage\r\n\r\n").is_none());
    }

    #[test]
    fn the_head_frames_the_body_once() {
        let head = request_head("POST", "/mcp", &[("Host", "h")], 3);
        assert!(head.contains("Content-Length: 3\r\n"));
        let head = request_head("POST", "/mcp", &[("Transfer-Encoding", "chunked")], 3);
        assert!(!head.contains("Content-Length"));
        assert!(head.ends_with("Connection: close\r\n\r\n"));
    }
}
