//! The command line as users meet it. (Being an integration test of this package also
//! makes `cargo test --workspace` build the `nl2sh` binary that tests/ drives.)

use std::process::Command;

fn nl2sh(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nl2sh"))
        .args(args)
        .output()
        .expect("run nl2sh")
}

#[test]
fn serve_help_explains_every_option() {
    let out = nl2sh(&["protocol", "serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--config",
        "--host",
        "--port",
        "--advertised-url",
        "--allow-insecure-http",
    ] {
        assert!(help.contains(opt), "--help lacks {opt}:\n{help}");
    }
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    for args in [
        &["protocol", "bogus"][..],
        &["protocol", "serve", "--port", "x"],
        &[],
    ] {
        let out = nl2sh(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn a_missing_explicit_config_is_an_error_naming_it() {
    let out = nl2sh(&[
        "--config",
        "/nonexistent/nl2sh.toml",
        "protocol",
        "serve",
        "--port",
        "0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/nl2sh.toml"), "{err}");
}
