//! `nl2sh web login [--open]` and `nl2sh web logout --all`: the owner's way into the Web
//! console. Both talk to approvald over `protocol/approvals.sock` like `protocol approve`,
//! so its peer check applies: a process of the service's own tree (a tool command) is
//! refused, and only the service's user gets a code.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use nl2sh_proto::channels::{CliRequest, CliResponse};
use nl2sh_proto::display::Shown;
use nl2sh_proto::Secret;

use crate::config;
use crate::exit::Exit;
use crate::local::{ask, cli_error, fail, runtime, state_paths};
use crate::state::{self, Discovered};

/// Where the running service's Web console is: its origin, and the loopback form for a
/// browser on this device when it listens on every interface.
fn console_urls(
    config_path: &Path,
    paths: &state::StatePaths,
) -> Result<Vec<String>, (Exit, String)> {
    let identity = config::identity(&config::absolute(config_path));
    let info = match state::discover(paths, &identity) {
        Ok(Discovered::Live(info)) => info,
        Ok(_) => {
            return Err((
                Exit::NotRunning,
                format!(
                    "no nl2sh service is running for {}: start it with `nl2sh service start` \
                     (or `nl2sh --web-only`)",
                    config_path.display()
                ),
            ))
        }
        Err(e) => return Err((Exit::Failure, format!("cannot read discovery: {e}"))),
    };
    let Some(origin) = info.web_url else {
        return Err((
            Exit::NotRunning,
            format!(
                "the nl2sh process for {} (pid {}, transport {}) has no Web console: the \
                 console runs with `nl2sh service start` or `nl2sh --web-only`",
                config_path.display(),
                info.pid,
                Shown::new(&info.transport)
            ),
        ));
    };
    let mut urls = vec![origin.clone()];
    if let Some(port) = info
        .web_listen
        .as_deref()
        .filter(|l| l.starts_with("0.0.0.0:"))
        .and_then(|l| l.rsplit(':').next())
    {
        let local = format!("http://127.0.0.1:{port}");
        if local != origin {
            urls.push(local);
        }
    }
    Ok(urls)
}

pub fn login(config_arg: Option<PathBuf>, open: bool) -> ExitCode {
    let (config_path, paths) = match state_paths(config_arg) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Failure, e),
    };
    let urls = match console_urls(&config_path, &paths) {
        Ok(urls) => urls,
        Err((code, message)) => return fail(code, message),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let answer = rt.block_on(ask(
        &config_path,
        &paths.approvals_sock,
        CliRequest::WebLogin,
    ));
    let (code, valid_secs) = match answer {
        Ok(CliResponse::LoginCode { code, valid_secs }) => (code, valid_secs),
        Ok(CliResponse::Error { kind, message }) => {
            let (exit, message) = cli_error(kind, message);
            return fail(exit, message);
        }
        Ok(_) => return fail(Exit::Failure, "approvald answered out of place"),
        Err((exit, message)) => return fail(exit, message),
    };
    let links: Vec<Secret> = urls
        .iter()
        .map(|u| Secret::new(format!("{u}/#login={}", code.expose())))
        .collect();
    if open {
        // On this device: the loopback form when there is one.
        let Some(link) = links.last() else {
            return fail(Exit::Failure, "no Web console URL");
        };
        return match open_in_browser(link) {
            Ok(how) => {
                println!("Opened the Web console {how} (the link works once, for {valid_secs} s).");
                ExitCode::SUCCESS
            }
            Err(e) => fail(Exit::Failure, format!("cannot open the browser: {e}")),
        };
    }
    println!("Open this link within {valid_secs} s; it works once:");
    for link in &links {
        println!("  {}", link.expose());
    }
    ExitCode::SUCCESS
}

pub fn logout_all(config_arg: Option<PathBuf>) -> ExitCode {
    let (config_path, paths) = match state_paths(config_arg) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Failure, e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(ask(
        &config_path,
        &paths.approvals_sock,
        CliRequest::WebLogoutAll,
    )) {
        Ok(CliResponse::LoggedOut { sessions }) => {
            println!("Ended {sessions} Web console session(s).");
            ExitCode::SUCCESS
        }
        Ok(CliResponse::Error { kind, message }) => {
            let (exit, message) = cli_error(kind, message);
            fail(exit, message)
        }
        Ok(_) => fail(Exit::Failure, "approvald answered out of place"),
        Err((exit, message)) => fail(exit, message),
    }
}

/// Open `link` in the device's browser. The code never appears in a command line other
/// users can read: on Linux the browser is given a private file (0600, in a fresh 0700
/// directory) that redirects to the link; on Android only root can see `am`'s arguments
/// (`/proc` is mounted hidepid) and the intent goes to the browser alone.
fn open_in_browser(link: &Secret) -> std::io::Result<&'static str> {
    if nl2sh_proto::platform::is_android() {
        let status = Command::new("/system/bin/am")
            .args(["start", "-a", "android.intent.action.VIEW", "-d"])
            .arg(link.expose())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()?;
        return if status.success() {
            Ok("in the browser")
        } else {
            Err(std::io::Error::other(format!("am start: {status}")))
        };
    }
    let page = redirect_page(link)?;
    let status = Command::new("xdg-open")
        .arg(&page)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    if status.success() {
        Ok("with xdg-open")
    } else {
        Err(std::io::Error::other(format!("xdg-open: {status}")))
    }
}

/// A private HTML file that sends the browser to `link`.
fn redirect_page(link: &Secret) -> std::io::Result<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("nl2sh-login-{:016x}", rand::random::<u64>()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let path = dir.join("login.html");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    // The link is hex and a fixed origin: nothing in it needs escaping in an attribute.
    write!(
        file,
        "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url={}\"><title>nl2sh</title>",
        link.expose()
    )?;
    Ok(path)
}
