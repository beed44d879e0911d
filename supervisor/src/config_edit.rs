//! `nl2sh config path|get|set`: the CLI's verbs over the configuration editor
//! ([`nl2sh_approvald::config_edit`], which the owner's consoles use too).
//!
//! Credentials (`protocol_token`, `model.api_key`) are never printed and never taken from
//! the command line, where they would stay in shell history and the process list: they
//! come from stdin (`-`) or a named environment variable.

use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nl2sh_approvald::config_edit::{
    apply, get, lookup, read_text, restart_note, EditError, Got, RETIRED_KEY,
};
use nl2sh_proto::config::KeyKind;

use crate::config;
use crate::state::{self, ConnectionInfo};

/// Longest credential line read from stdin.
const MAX_INPUT_BYTES: u64 = 4096;

/// Why `config set` saved nothing: how the value was given, or the edit itself.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    #[error(
        "{0} is a credential and is not taken from the command line (it would stay in shell \
         history and the process list): use `nl2sh config set {0} -` and type or pipe it on \
         stdin (one line), or `nl2sh config set {0} --from-env VAR`"
    )]
    CredentialOnCommandLine(String),
    #[error("no value on stdin")]
    NoInput,
    #[error("the value on stdin is longer than {MAX_INPUT_BYTES} bytes")]
    InputTooLong,
    #[error("environment variable {0} is not set")]
    EnvUnset(String),
    #[error("environment variable {0} is not valid UTF-8")]
    EnvNotUtf8(String),
    #[error(transparent)]
    Edit(#[from] EditError),
}

/// The protocol process serving the configuration at `path`, as discovery finds it: what
/// a saved change's note names.
pub fn running(path: &Path) -> Option<ConnectionInfo> {
    let (cfg, _) = config::load_for_discovery(path);
    let state = state::state_paths(&config::state_dir(&cfg, path));
    match state::discover(&state, &config::identity(path)) {
        Ok(state::Discovered::Live(info)) => Some(info),
        _ => None,
    }
}

/// One line of stdin, without echo when it is a terminal.
fn read_stdin_line(prompt_name: &str) -> Result<String, SetError> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let stdin = io::stdin();
    let terminal = nix::unistd::isatty(&stdin).unwrap_or(false);
    let saved = if terminal {
        eprint!("{prompt_name} (not echoed): ");
        let _ = io::stderr().flush();
        tcgetattr(&stdin).ok().inspect(|attrs| {
            let mut quiet = attrs.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            let _ = tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
        })
    } else {
        None
    };
    let mut bytes = Vec::new();
    let read = stdin
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_until(b'\n', &mut bytes);
    if let Some(attrs) = saved {
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &attrs);
        eprintln!();
    }
    read.map_err(|source| EditError::Io {
        what: "cannot read",
        path: PathBuf::from("stdin"),
        source,
    })?;
    if bytes.is_empty() {
        return Err(SetError::NoInput);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(SetError::InputTooLong);
    }
    String::from_utf8(bytes).map_err(|_| {
        SetError::Edit(EditError::BadValue {
            key: prompt_name.to_owned(),
            want: "UTF-8 text",
            got: String::new(),
        })
    })
}

fn config_path(config_arg: Option<PathBuf>) -> PathBuf {
    config::absolute(&config_arg.unwrap_or_else(config::default_config_path))
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("nl2sh: {e}");
    crate::exit::Exit::Failure.into()
}

pub fn path_command(config_arg: Option<PathBuf>) -> ExitCode {
    let path = config_path(config_arg);
    println!("{}", path.display());
    if !path.exists() {
        eprintln!(
            "nl2sh: {} does not exist yet; `config set` creates it",
            path.display()
        );
    }
    ExitCode::SUCCESS
}

pub fn get_command(config_arg: Option<PathBuf>, key: &str) -> ExitCode {
    let path = config_path(config_arg);
    let got = read_text(&path).and_then(|text| get(&path, &text, key));
    match got {
        Ok(Got::Value(v)) => println!("{v}"),
        Ok(Got::Default(v)) => {
            println!("{v}");
            eprintln!(
                "nl2sh: {key} is not set in {}; this is the default",
                path.display()
            );
        }
        Ok(Got::Credential(set)) => println!("{}", if set { "set" } else { "not set" }),
        Err(e) => return fail(e),
    }
    ExitCode::SUCCESS
}

pub fn set_command(
    config_arg: Option<PathBuf>,
    key: &str,
    value: Option<String>,
    from_env: Option<String>,
) -> ExitCode {
    let path = config_path(config_arg);
    match set(&path, key, value, from_env, &|var| std::env::var_os(var)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn set(
    path: &Path,
    key: &str,
    value: Option<String>,
    from_env: Option<String>,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), SetError> {
    let named = lookup(key)?;
    if named.spec.kind == KeyKind::Table {
        return Err(EditError::Table.into());
    }
    let credential = named.spec.kind == KeyKind::Credential;
    let input = match (value.as_deref(), from_env) {
        (_, Some(var)) => match env(&var).map(std::ffi::OsString::into_string) {
            Some(Ok(v)) => v,
            None => return Err(SetError::EnvUnset(var)),
            Some(Err(_)) => return Err(SetError::EnvNotUtf8(var)),
        },
        (Some("-"), None) => read_stdin_line(&named.full())?,
        (Some(_), None) if credential => {
            return Err(SetError::CredentialOnCommandLine(named.full()))
        }
        (Some(v), None) => v.to_owned(),
        (None, None) => return Err(SetError::NoInput),
    };
    let applied = apply(path, key, &input)?;
    if credential {
        println!(
            "Saved {} in {} (value not shown).",
            named.full(),
            applied.target.display()
        );
    } else {
        println!(
            "Saved {} = {} in {}.",
            named.full(),
            input.trim(),
            applied.target.display()
        );
    }
    if applied.removed_retired {
        println!("Removed the retired {RETIRED_KEY} (it was ignored).");
    }
    println!(
        "{}",
        restart_note(path, named.spec.live, running(path).as_ref())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::state_layout::config_lock;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn no_env(_: &str) -> Option<std::ffi::OsString> {
        None
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn credentials_come_from_stdin_or_the_environment_never_the_command_line() {
        let token = "tok-0123456789-abcdefghijklmnopqrstuvwxyz";
        // A literal on the command line is refused before anything is read or written.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        let err = set(&path, "protocol_token", Some(token.into()), None, &no_env).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("config set protocol_token -"), "{msg}");
        assert!(msg.contains("--from-env VAR"), "{msg}");
        assert!(!msg.contains(token), "{msg}");
        assert!(!path.exists());
        assert!(matches!(
            set(&path, "model.api_key", Some("sk".into()), None, &no_env),
            Err(SetError::CredentialOnCommandLine(_))
        ));
        // From the environment.
        let env = |var: &str| (var == "TOKEN_VAR").then(|| token.into());
        set(
            &path,
            "protocol_token",
            None,
            Some("TOKEN_VAR".into()),
            &env,
        )
        .unwrap();
        assert!(fs::read_to_string(&path).unwrap().contains(token));
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(
            set(
                &path,
                "protocol_token",
                None,
                Some("OTHER_VAR".into()),
                &env
            ),
            Err(SetError::EnvUnset(_))
        ));
    }

    /// Root editing another user's configuration leaves it (and its lock) theirs, also
    /// when the configuration is a symlink to it (edited where it points; the link stays).
    #[test]
    fn root_keeps_a_users_configuration_theirs() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            nl2sh_proto::test_skip::skip("needs root to own files as another user");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let owned = |p: &Path| {
            let m = fs::symlink_metadata(p).unwrap();
            (m.uid(), m.gid())
        };
        let theirs = tmp.path().join("theirs.toml");
        fs::write(&theirs, "").unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        set(
            &theirs,
            "protocol_service_port",
            Some("9000".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(owned(&theirs), (4242, 4242));
        assert_eq!(owned(&config_lock(&theirs)), (4242, 4242));

        let link = tmp.path().join("config.toml");
        std::os::unix::fs::symlink(&theirs, &link).unwrap();
        set(
            &link,
            "protocol_service_port",
            Some("9001".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_to_string(&theirs).unwrap(),
            "protocol_service_port = 9001\n"
        );
        assert_eq!(owned(&theirs), (4242, 4242));
    }

    #[test]
    fn save_is_atomic_private_and_creates_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("new/dir/config.toml");
        set(
            &path,
            "protocol_service_port",
            Some("9000".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "protocol_service_port = 9000\n"
        );
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&tmp.path().join("new")), 0o700);

        // A wide existing file comes back 0600; no temporary file is left.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        set(
            &path,
            "protocol_start_with_service",
            Some("true".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let mut names = names;
        names.sort();
        // Beside it only the lock edits take, private too.
        assert_eq!(names, ["config.toml", "config.toml.lock"]);
        assert_eq!(mode(&config_lock(&path)), 0o600);

        // A refused edit leaves the file exactly as it was (content and inode).
        let before = fs::read_to_string(&path).unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        assert!(set(
            &path,
            "protocol_service_port",
            Some("70000".into()),
            None,
            &no_env
        )
        .is_err());
        assert!(set(
            &path,
            "approval_timeout_secs",
            Some("0".into()),
            None,
            &no_env
        )
        .is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), before);
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);

        // A symlinked configuration is edited where it points; the link stays.
        let real = tmp.path().join("real.toml");
        fs::write(&real, "# mine\nprotocol_service_port = 0\n").unwrap();
        let link = tmp.path().join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        set(
            &link,
            "protocol_service_port",
            Some("1".into()),
            None,
            &no_env,
        )
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_to_string(&real).unwrap(),
            "# mine\nprotocol_service_port = 1\n"
        );
    }
}
