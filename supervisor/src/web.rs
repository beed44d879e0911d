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
use nl2sh_proto::hint;
use nl2sh_proto::state_layout::{PRIVATE_DIR_MODE, PRIVATE_FILE_MODE};
use nl2sh_proto::Secret;

use crate::config;
use crate::exit::Exit;
use crate::local::{ask, cli_error, fail, local_call, runtime, state_paths};
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
                    "no nl2sh service is running for {}: start it with `{}` (or `{}`)",
                    config_path.display(),
                    hint::with_config(&config::absolute(config_path), "service start"),
                    hint::with_config(&config::absolute(config_path), "--web-only"),
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
                 console runs with `{}` or `{}`",
                config_path.display(),
                info.pid,
                Shown::new(&info.transport),
                hint::with_config(&config::absolute(config_path), "service start"),
                hint::with_config(&config::absolute(config_path), "--web-only"),
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
    let (config_path, paths, rt) = match local_call(config_arg) {
        Ok(setup) => setup,
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

/// Prefix of the private directories that hold a redirect page.
const LOGIN_DIR_PREFIX: &str = "nl2sh-login-";
/// A redirect page older than this holds an expired code: the next `--open` removes it.
const STALE_LOGIN_PAGE: std::time::Duration = std::time::Duration::from_secs(600);

/// A private HTML file that sends the browser to `link`.
fn redirect_page(link: &Secret) -> std::io::Result<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(std::env::temp_dir);
    remove_stale_pages(&base, STALE_LOGIN_PAGE);
    let unique = nl2sh_proto::ids::random_hex(8).map_err(std::io::Error::other)?;
    let dir = base.join(format!("{LOGIN_DIR_PREFIX}{unique}"));
    std::fs::DirBuilder::new()
        .mode(PRIVATE_DIR_MODE)
        .create(&dir)?;
    let path = dir.join("login.html");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(&path)?;
    // The link is hex and a fixed origin: nothing in it needs escaping in an attribute.
    write!(
        file,
        "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url={}\"><title>nl2sh</title>",
        link.expose()
    )?;
    Ok(path)
}

/// Remove our own redirect pages older than `age` from `base` (their codes expired long
/// ago; the browser has read them). Only directories of our uid, with our prefix, holding
/// nothing but `login.html`; anything else is left as it is.
fn remove_stale_pages(base: &Path, age: std::time::Duration) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let uid = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(LOGIN_DIR_PREFIX) {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|e| e > age);
        if !meta.is_dir() || meta.uid() != uid || !old {
            continue;
        }
        let dir = entry.path();
        let _ = std::fs::remove_file(dir.join("login.html"));
        // Fails, and so leaves it, when anything else is inside.
        let _ = std::fs::remove_dir(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_redirect_pages_go_and_everything_else_stays() {
        let base = tempfile::tempdir().unwrap();
        let page = |name: &str| {
            let dir = base.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("login.html"), "x").unwrap();
            dir
        };
        let old = page("nl2sh-login-0000000000000001");
        let other = page("someone-else");
        let crowded = page("nl2sh-login-0000000000000002");
        std::fs::write(crowded.join("notes"), "keep").unwrap();
        remove_stale_pages(base.path(), std::time::Duration::ZERO);
        assert!(!old.exists(), "an old page stayed");
        assert!(other.exists(), "another program's directory went");
        assert!(
            crowded.join("notes").exists(),
            "a file that is not ours went"
        );
        // A fresh one stays.
        let fresh = page("nl2sh-login-0000000000000003");
        remove_stale_pages(base.path(), std::time::Duration::from_secs(600));
        assert!(fresh.join("login.html").exists());
    }
}
