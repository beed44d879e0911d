//! Test helpers: the tests' shared HTTP client (`nl2sh-test-http`) on this runtime, the
//! harness, the scripted runner and the A2A schema.
#![allow(dead_code)]

pub mod harness;
pub mod runner;
pub mod schema;
pub mod store;

use std::net::SocketAddr;

use serde_json::Value;

pub use nl2sh_test_http::Response as Reply;

/// An authorized MCP POST (JSON-RPC `body`) on a fresh connection, with `token`
/// ([`nl2sh_test_http::mcp_post_async`]).
pub async fn mcp_post(addr: SocketAddr, token: &str, body: &Value) -> Reply {
    nl2sh_test_http::mcp_post_async(addr, token, &body.to_string()).await
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read to the end.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    nl2sh_test_http::send_async(addr, method, path, headers, body).await
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
