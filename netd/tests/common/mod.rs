//! Test helpers: a minimal HTTP/1.1 client (one request per connection), enough for the
//! front door and JSON replies without pulling an HTTP client crate into the build.
#![allow(dead_code)]

pub mod harness;
pub mod runner;
pub mod schema;
pub mod store;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    /// Our own refusals: short JSON `{"error": ...}`.
    pub fn assert_refusal(&self, status: u16) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert!(self.json()["error"].is_string(), "{self:?}");
    }
}

/// An authorized MCP POST (JSON-RPC `body`, protocol version 2025-11-25) on a fresh
/// connection, with `token`.
pub async fn mcp_post(addr: SocketAddr, token: &str, body: &Value) -> Reply {
    let host = addr.to_string();
    let auth = format!("Bearer {token}");
    send(
        addr,
        "POST",
        "/mcp",
        &[
            ("Host", &host),
            ("Authorization", &auth),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        body.to_string().as_bytes(),
    )
    .await
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read to the end.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let chunked = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"));
    if !chunked
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (and close) before reading a body it refuses.
    let _ = stream.write_all(body).await;
    read_reply(&mut stream).await
}

async fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                // A reset after the reply was received still leaves a full reply.
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no reply in time");
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete head in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let is_chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if is_chunked {
        body = dechunk(&body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = std::str::from_utf8(&data[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        let start = line_end + 2;
        out.extend_from_slice(&data[start..start + size]);
        data = &data[start + size + 2..];
    }
}

/// An `nl2sh_inspect` result without netd's own `netd` object (which must be there):
/// the part the executor answered.
pub fn executor_part(structured: &Value) -> Value {
    let mut object = structured
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {structured}"))
        .clone();
    let netd = object
        .remove("netd")
        .unwrap_or_else(|| panic!("no netd object in {structured}"));
    assert!(
        netd["seccomp"].is_string() && netd["landlock"].is_string(),
        "{netd}"
    );
    assert!(
        netd["uid"].is_u64() && netd["dumpable"].is_boolean(),
        "{netd}"
    );
    Value::Object(object)
}
