//! The phone build, run: the static aarch64 binary named by `NL2SH_ARM64_BIN` prints its
//! version, then serves MCP on 127.0.0.1 with its whole process tree (workers re-executed
//! from /proc/self/exe, netd's privilege drop), answers `initialize` and `nl2sh_inspect`
//! (whose `build_identity` names the aarch64 musl target) and stops cleanly on SIGTERM.
//!
//! On an x86_64 host this needs qemu-user with binfmt_misc registered for aarch64, or
//! the workers' re-exec fails; `packaging/test-arm64` builds the binary, sets that up and
//! runs this test. Without `NL2SH_ARM64_BIN`, or where the binary cannot run, the test
//! says why and passes, unless `NL2SH_ARM64_REQUIRED=1` (as that script sets) makes it
//! fail instead.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nl2sh_tests::{http, initialize_body, is_root, mcp_post, Fixture, Server, ToolCall};
use serde_json::json;

const TARGET: &str = "aarch64-unknown-linux-musl";
const TOKEN: &str = "test-token-arm64-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// ELF e_machine of aarch64.
const EM_AARCH64: u16 = 183;

/// The binary to test, or why there is none that can run here.
fn arm64_binary() -> Result<PathBuf, String> {
    let bin = std::env::var_os("NL2SH_ARM64_BIN")
        .map(PathBuf::from)
        .ok_or("NL2SH_ARM64_BIN is not set (packaging/test-arm64 sets it)")?;
    let head = std::fs::read(&bin)
        .map(|mut b| {
            b.truncate(20);
            b
        })
        .map_err(|e| format!("NL2SH_ARM64_BIN={}: {e}", bin.display()))?;
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err(format!("{} is not an ELF file", bin.display()));
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    if machine != EM_AARCH64 {
        return Err(format!(
            "{} is not an aarch64 binary (ELF machine {machine})",
            bin.display()
        ));
    }
    if std::env::consts::ARCH != "aarch64" && !binfmt_registered() {
        return Err(
            "the kernel cannot run aarch64 binaries: no enabled qemu-aarch64 entry in \
             /proc/sys/fs/binfmt_misc (packaging/test-arm64 registers Debian's \
             qemu-user-static)"
                .into(),
        );
    }
    Ok(bin)
}

fn binfmt_registered() -> bool {
    std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64")
        .map(|entry| entry.lines().next() == Some("enabled"))
        .unwrap_or(false)
}

fn skip_or_fail(reason: &str) {
    if std::env::var("NL2SH_ARM64_REQUIRED").as_deref() == Ok("1") {
        panic!("NL2SH_ARM64_REQUIRED=1, but: {reason}");
    }
    nl2sh_proto::test_skip::skip(format_args!("{reason}"));
}

#[test]
fn arm64_binary_serves_mcp_under_emulation() {
    let bin = match arm64_binary() {
        Ok(bin) => bin,
        Err(reason) => return skip_or_fail(&reason),
    };

    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .expect("run the arm64 binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "--version failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("nl2sh {}", env!("CARGO_PKG_VERSION")),
        "--version"
    );

    // The harness starts `$NL2SH_BIN`; this file has this one test, so no other thread
    // reads the environment meanwhile.
    std::env::set_var("NL2SH_BIN", &bin);
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[("NL2SH_PROTOCOL_TOKEN", TOKEN)]);
    assert!(
        server.stdout.contains("Token:      set from environment"),
        "{}",
        server.stdout
    );
    // The whole tree is up: the workers re-executed themselves (through binfmt_misc
    // under emulation, where /proc/<pid>/exe names qemu, not nl2sh).
    for role in ["netd", "executor", "approvald"] {
        server.worker(role);
    }

    let init = mcp_post(server.addr, TOKEN, &initialize_body("2025-11-25"));
    assert_eq!(init.status, 200, "{init:?}");
    let init_json = init.json();
    assert_eq!(
        init_json["result"]["protocolVersion"], "2025-11-25",
        "{init_json}"
    );
    // A later request carries the session the server gave, if it gave one.
    let session = init.header("mcp-session-id").map(str::to_string);
    let addr = server.addr.to_string();
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("Host", addr.as_str()),
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(id) = session.as_deref() {
        headers.push(("Mcp-Session-Id", id));
    }
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "nl2sh_inspect", "arguments": {}}});
    let inspect = ToolCall::from_response(&http(
        server.addr,
        "POST",
        "/mcp",
        &headers,
        call.to_string().as_bytes(),
    ));
    assert!(!inspect.is_error, "{:?}", inspect.structured);
    let identity = &inspect.structured["build_identity"];
    assert_eq!(identity["target"], TARGET, "{identity}");
    assert_eq!(identity["version"], env!("CARGO_PKG_VERSION"), "{identity}");
    assert_eq!(identity["profile"], "release", "{identity}");
    // netd dropped its privileges here too (qemu-user passes setuid through).
    if is_root() {
        let netd = &inspect.structured["netd"];
        assert_ne!(netd["uid"], 0, "{netd}");
        assert_eq!(netd["no_new_privs"], true, "{netd}");
    }

    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(0),
        "exit after SIGTERM; stderr:\n{}",
        server.stderr()
    );
}
