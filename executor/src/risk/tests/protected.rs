//! nl2sh's own files: touching them is at least `dangerous`, whatever the command.

use std::path::{Path, PathBuf};

use nl2sh_proto::channels::RiskLevel::{Dangerous, Low, Medium, ReadOnly};

use super::super::{assess_path_read_protected, assess_path_write_protected, Protected};
use super::{check_rows, Want, Want::Is, Want::Min};

fn protected() -> Protected {
    Protected::new(
        [
            "/tmp/nlx/config.toml",
            "/tmp/nlx//config.state/",
            "/usr/local/bin/nl2sh",
            "relative/ignored",
            "",
        ]
        .iter()
        .map(PathBuf::from),
    )
}

const TOUCHING: &[(&str, Want)] = &[
    ("cat /tmp/nlx/config.toml", Min(Dangerous)),
    ("sed -i s/a/b/ /tmp/nlx/config.toml", Min(Dangerous)),
    ("echo x >> /tmp/nlx/config.toml", Min(Dangerous)),
    ("rm -rf /tmp/nlx", Min(Dangerous)),
    ("rm /tmp/nlx/config.toml", Min(Dangerous)),
    ("ls /tmp/nlx/config.state/protocol", Min(Dangerous)),
    ("cd /tmp/nlx && cat config.toml", Min(Dangerous)),
    ("cd /tmp/nlx/config.state", Min(Dangerous)),
    ("cp /tmp/evil /usr/local/bin/nl2sh", Min(Dangerous)),
    ("cat /tmp/nlx/conf*", Min(Dangerous)),
    ("cat /tmp/nl?/config.tom[l]", Min(Dangerous)),
    ("cat /tmp//nlx/./config.toml", Min(Dangerous)),
    ("cat /proc/self/root/tmp/nlx/config.toml", Min(Dangerous)),
    ("sort --output=/tmp/nlx/config.toml x", Min(Dangerous)),
    ("sort -o/tmp/nlx/config.toml x", Min(Dangerous)),
    ("dd if=/tmp/nlx/config.toml", Min(Dangerous)),
    ("tee /tmp/nlx/config.state/x < y", Min(Dangerous)),
    ("mv /tmp/nlx /tmp/y", Min(Dangerous)),
    ("chmod -R 777 /tmp", Min(Dangerous)),
    ("chown -R u /tmp/nlx", Min(Dangerous)),
    ("grep -r token /tmp", Min(Dangerous)),
    ("cp -r /tmp/nlx /sdcard/", Min(Dangerous)),
    ("tar -czf /sdcard/x.tgz /tmp", Min(Dangerous)),
    ("find /tmp -name x -exec cat {} \\;", Min(Dangerous)),
    ("X=/tmp/nlx/config.toml", Min(Dangerous)),
    ("cat <<< /tmp/nlx/config.toml", Min(Dangerous)),
    ("cat < /tmp/nlx/config.toml", Min(Dangerous)),
    ("/usr/local/bin/nl2sh --version", Min(Dangerous)),
    ("nl2sh --version", Min(Dangerous)),
    ("sh -c 'cat /tmp/nlx/config.toml'", Min(Dangerous)),
    ("echo $(cat /tmp/nlx/config.toml)", Min(Dangerous)),
    ("f=/tmp/nlx/config.toml; cat \"$f\"", Min(Dangerous)),
];

const NOT_TOUCHING: &[(&str, Want)] = &[
    ("ls /tmp", Is(ReadOnly)),
    ("cat /tmp/other", Is(ReadOnly)),
    ("ls /tmp/nlx", Is(ReadOnly)),
    ("du -sh /tmp/*", Is(ReadOnly)),
    ("echo hi > /tmp/out", Is(Low)),
    ("cat /tmp/nlxy/config.tomlx", Is(ReadOnly)),
    // Relative paths from an unknown directory and unknown expansions are left to the
    // sandbox, which hides these files from commands nobody approved.
    ("cat config.toml", Is(Medium)),
    ("cat \"$F\"", Is(Medium)),
];

#[test]
fn touching_own_files_is_dangerous() {
    check_rows(TOUCHING, &protected());
}

#[test]
fn other_paths_are_unchanged() {
    check_rows(NOT_TOUCHING, &protected());
}

#[test]
fn home_directory_forms() {
    let home = Protected::new([PathBuf::from("/home/u/.config/nl2sh/config.toml")]);
    check_rows(
        &[
            ("cat ~/.config/nl2sh/config.toml", Min(Dangerous)),
            ("cat $HOME/.config/nl2sh/config.toml", Min(Dangerous)),
            ("rm -rf ~/.config", Min(Dangerous)),
            ("cat ~/.config/other", Is(ReadOnly)),
        ],
        &home,
    );
    // `~` cannot be /tmp/nlx, which is no home directory.
    check_rows(&[("cat ~/config.toml", Is(Medium))], &protected());
}

#[test]
fn paths_are_normalised() {
    assert_eq!(
        protected().paths(),
        [
            "/tmp/nlx/config.state".to_string(),
            "/tmp/nlx/config.toml".to_string(),
            "/usr/local/bin/nl2sh".to_string(),
        ]
    );
    assert!(Protected::new([PathBuf::from("/")]).paths().is_empty());
    assert!(Protected::default().paths().is_empty());
}

#[test]
fn file_tools() {
    let p = protected();
    let read = |path: &str| assess_path_read_protected(Path::new(path), &p).level;
    let write = |path: &str| assess_path_write_protected(Path::new(path), &p).level;
    assert_eq!(read("/tmp/nlx/config.toml"), Dangerous);
    assert_eq!(read("/tmp/nlx/config.state/protocol/x"), Dangerous);
    assert_eq!(read("/proc/self/root/tmp/nlx/config.toml"), Dangerous);
    assert_eq!(read("/tmp/nlx"), ReadOnly);
    assert_eq!(read("/tmp/other"), ReadOnly);
    assert_eq!(write("/tmp/nlx"), Dangerous);
    assert_eq!(write("/tmp/nlx/new"), Low);
    assert_eq!(write("/usr/local/bin/nl2sh"), Dangerous);
    assert_eq!(write("/tmp/other"), Low);
}

#[test]
fn a_known_starting_directory_resolves_relative_paths() {
    use super::super::assess_shell_in;
    let p = protected();
    let nlx = Some(Path::new("/tmp/nlx"));
    for line in [
        "cat config.toml",
        "echo x >> ./config.toml",
        "ls config.state",
    ] {
        let a = assess_shell_in(line, nlx, &p);
        assert!(a.level >= Dangerous, "{line}: {a:?}");
    }
    let a = assess_shell_in("cat notes.txt", Some(Path::new("/tmp")), &p);
    assert_eq!(a.level, ReadOnly, "{a:?}");
    // Relative paths from a known place are judged there: a secret is not read-only.
    let a = assess_shell_in("cat shadow", Some(Path::new("/etc")), &p);
    assert!(a.level > ReadOnly, "{a:?}");
    let a = assess_shell_in("cat hostname", Some(Path::new("/etc")), &p);
    assert_eq!(a.level, ReadOnly, "{a:?}");
}
