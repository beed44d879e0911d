//! End to end over the real binary: configuration, token, lock, listener, advertised URL,
//! the startup block and connection.json.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use nl2sh_tests::{http, initialize_body, Fixture, Server};

const TOKEN_A: &str = "test-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const TOKEN_B: &str = "test-token-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn post_init(server: &Server, token: &str, host: &str, origin: Option<&str>) -> u16 {
    let body = initialize_body("2025-11-25");
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Host", host),
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    http(server.addr, "POST", "/mcp", &headers, body.as_bytes()).status
}

#[test]
fn startup_block_announces_urls_generated_token_and_client_configuration() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let out = &server.stdout;
    let port = server.addr.port();
    assert!(
        out.lines()
            .any(|l| l.starts_with("MCP URL:")
                && l.ends_with(&format!(" http://127.0.0.1:{port}/mcp"))),
        "{out}"
    );
    assert!(
        out.contains(&format!("http://127.0.0.1:{port}/a2a")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "http://127.0.0.1:{port}/.well-known/agent-card.json"
        )),
        "{out}"
    );
    assert!(out.contains("[mcp_servers.nl2sh]"), "{out}");
    assert!(
        out.contains("bearer_token_env_var = \"NL2SH_PROTOCOL_TOKEN\""),
        "{out}"
    );
    assert!(out.contains("mcpServers"), "{out}");
    let token = server.token();
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    // Diagnostics never carry the token.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!server.stderr().contains(token));
}

#[test]
fn front_door_matrix_over_the_real_tree() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let host = server.host_header();
    let token = server.token().to_string();
    assert_eq!(post_init(&server, &token, &host, None), 200);
    assert_eq!(post_init(&server, &format!("{token}x"), &host, None), 401);
    let no_auth = http(
        server.addr,
        "POST",
        "/mcp",
        &[("Host", &host), ("Content-Type", "application/json")],
        initialize_body("2025-11-25").as_bytes(),
    );
    assert_eq!(no_auth.status, 401);
    assert!(no_auth
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Bearer")));
    assert_eq!(post_init(&server, &token, "evil.example:80", None), 403);
    assert_eq!(
        post_init(&server, &token, &host, Some("http://evil.example")),
        403
    );
    assert_eq!(
        post_init(&server, &token, &host, Some(&format!("http://{host}"))),
        200
    );
    let big = vec![b' '; 33 * 1024];
    let r = http(
        server.addr,
        "POST",
        "/mcp",
        &[
            ("Host", &host),
            ("Authorization", &format!("Bearer {token}")),
            ("Content-Type", "application/json"),
        ],
        &big,
    );
    assert_eq!(r.status, 413);
}

#[test]
fn token_precedence_environment_over_configuration_over_generated() {
    let fx = Fixture::new(&format!("protocol_token = \"{TOKEN_B}\"\n"));
    let server = Server::start(&fx, &[], &[("NL2SH_PROTOCOL_TOKEN", TOKEN_A)]);
    let host = server.host_header();
    assert_eq!(post_init(&server, TOKEN_A, &host, None), 200);
    assert_eq!(post_init(&server, TOKEN_B, &host, None), 401);
    // An explicit token is never printed, in the block or the logs.
    assert!(server.token.is_none());
    assert!(!server.stdout.contains(TOKEN_A) && !server.stdout.contains(TOKEN_B));
    assert!(!server.stderr().contains(TOKEN_A));
    drop(server);

    let fx = Fixture::new(&format!("protocol_token = \"{TOKEN_B}\"\n"));
    let server = Server::start(&fx, &[], &[]);
    assert_eq!(
        post_init(&server, TOKEN_B, &server.host_header(), None),
        200
    );
    assert!(!server.stdout.contains(TOKEN_B));
}

#[test]
fn invalid_tokens_refuse_startup_without_echoing_them() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("", &[("NL2SH_PROTOCOL_TOKEN", "")]),
        ("", &[("NL2SH_PROTOCOL_TOKEN", "short-secret-value")]),
        (
            "",
            &[(
                "NL2SH_PROTOCOL_TOKEN",
                "has a space in it but is long enough to pass",
            )],
        ),
        ("protocol_token = \"configured-but-too-short\"\n", &[]),
    ];
    for (config, env) in cases {
        let fx = Fixture::new(config);
        let err = Server::start_args(
            &fx,
            &["protocol", "serve", "--host", "127.0.0.1", "--port", "0"],
            env,
        )
        .err()
        .expect("startup must be refused");
        assert_ne!(err.0, Some(0));
        assert!(err.1.to_lowercase().contains("token"), "{err:?}");
        for secret in [
            "short-secret-value",
            "has a space",
            "configured-but-too-short",
        ] {
            assert!(
                !err.1.contains(secret),
                "message echoes the token: {}",
                err.1
            );
        }
    }
}

#[test]
fn second_serve_on_the_same_state_directory_names_the_running_one() {
    let fx = Fixture::new("");
    let server = Server::start(&fx, &[], &[]);
    let err = Server::start_args(
        &fx,
        &["protocol", "serve", "--host", "127.0.0.1", "--port", "0"],
        &[],
    )
    .err()
    .expect("second serve must fail");
    assert_ne!(err.0, Some(0));
    assert!(
        err.1.contains(&format!("pid {}", server.pid())),
        "{}",
        err.1
    );
    // The first one is unaffected.
    assert_eq!(
        post_init(&server, server.token(), &server.host_header(), None),
        200
    );
}

#[test]
fn occupied_port_falls_back_to_an_available_one_and_announces_it() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let fx = Fixture::new("");
    let port = taken.to_string();
    let server = Server::start_args(
        &fx,
        &["protocol", "serve", "--host", "127.0.0.1", "--port", &port],
        &[],
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_ne!(server.addr.port(), taken);
    assert_eq!(
        post_init(&server, server.token(), &server.host_header(), None),
        200
    );
}

#[test]
fn insecure_http_false_requires_loopback() {
    let fx = Fixture::new("");
    let err = Server::start_args(
        &fx,
        &[
            "protocol",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--allow-insecure-http=false",
        ],
        &[],
    )
    .err()
    .expect("non-loopback with insecure http off must be refused");
    assert!(err.1.contains("loopback"), "{}", err.1);
    let server = Server::start(&fx, &["--allow-insecure-http=false"], &[]);
    assert_eq!(
        post_init(&server, server.token(), &server.host_header(), None),
        200
    );
}

#[test]
fn advertised_url_is_validated_and_drives_host_and_origin_checks() {
    for bad in [
        "ftp://device.example",
        "http://device.example/prefix",
        "http://user:pw@device.example",
        "http://device.example/?q=1",
        "http://device.example/#frag",
        "http://0.0.0.0:8765",
        "http://[::]:8765",
        "not a url",
    ] {
        let fx = Fixture::new("");
        let err = Server::start_args(
            &fx,
            &[
                "protocol",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--advertised-url",
                bad,
            ],
            &[],
        )
        .err()
        .unwrap_or_else(|| panic!("{bad} was accepted"));
        assert!(err.1.contains("advertised"), "{bad}: {}", err.1);
    }
    let fx = Fixture::new("");
    let server = Server::start(&fx, &["--advertised-url", "https://agent.example.com"], &[]);
    assert!(
        server.stdout.contains("https://agent.example.com/mcp"),
        "{}",
        server.stdout
    );
    let token = server.token().to_string();
    assert_eq!(
        post_init(
            &server,
            &token,
            "agent.example.com",
            Some("https://agent.example.com")
        ),
        200
    );
    assert_eq!(
        post_init(
            &server,
            &token,
            "agent.example.com",
            Some("http://agent.example.com")
        ),
        403
    );
    assert_eq!(post_init(&server, &token, "other.example.com", None), 403);
    // The listener's own address still works for local callers.
    assert_eq!(post_init(&server, &token, &server.host_header(), None), 200);
}

#[test]
fn connection_json_is_private_while_running_and_removed_on_exit() {
    let fx = Fixture::new("");
    let mut server = Server::start(&fx, &[], &[]);
    let path = fx.state_dir().join("protocol/connection.json");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let info: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(info["pid"], serde_json::json!(server.pid()));
    assert_eq!(info["transport"], "http");
    assert_eq!(info["token"], server.token());
    assert!(info["mcp_url"].as_str().unwrap().ends_with("/mcp"));
    let state_mode = std::fs::metadata(fx.state_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(state_mode, 0o700);
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(20)).code(), Some(0));
    assert!(!path.exists());
}

#[test]
fn bad_configuration_names_file_line_and_field() {
    let fx = Fixture::new("protocol_auto_approve = false\nprotcol_token = \"x\"\n");
    let err = Server::start_args(&fx, &["protocol", "serve", "--port", "0"], &[])
        .err()
        .unwrap();
    assert!(err.1.contains("config.toml"), "{}", err.1);
    assert!(err.1.contains('2'), "{}", err.1);
    assert!(err.1.contains("protcol_token"), "{}", err.1);
    let fx = Fixture::new("protocol_token = \n");
    let err = Server::start_args(&fx, &["protocol", "serve", "--port", "0"], &[])
        .err()
        .unwrap();
    assert!(err.1.contains("config.toml"), "{}", err.1);
    // The retired bridge_auto_approve is ignored and the file left as it was.
    let text = format!("bridge_auto_approve = true\nprotocol_token = \"{TOKEN_A}\"\n");
    let fx = Fixture::new(&text);
    let server = Server::start(&fx, &[], &[]);
    assert_eq!(
        post_init(&server, TOKEN_A, &server.host_header(), None),
        200
    );
    assert_eq!(std::fs::read_to_string(fx.config()).unwrap(), text);
}
