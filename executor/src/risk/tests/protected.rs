//! nl2sh's own files: touching them is at least `dangerous`, whatever the command.

use std::path::{Path, PathBuf};

use nl2sh_proto::channels::RiskLevel::{Dangerous, Low, Medium, ReadOnly};

use super::super::{
    assess_path_read_protected, assess_path_write_protected, assess_shell_protected, Protected,
};
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

/// nl2sh's files laid out for real, and a process that stands for the running service:
/// started in the configuration's directory, holding the configuration and the database
/// open, running the protected executable.
struct OwnTree {
    _dir: tempfile::TempDir,
    root: String,
    protected: Protected,
    service: std::process::Child,
}

impl OwnTree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_string_lossy().into_owned();
        for sub in ["conf", "state", "bin", "other"] {
            std::fs::create_dir(format!("{root}/{sub}")).expect("mkdir");
        }
        std::fs::write(
            format!("{root}/conf/config.toml"),
            "approval_policy = \"strict\"\n",
        )
        .expect("config");
        std::fs::write(format!("{root}/state/nl2sh.db"), "db").expect("db");
        std::fs::write(format!("{root}/other/notes.txt"), "notes").expect("notes");
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("a sleep program");
        std::fs::copy(sleep, format!("{root}/bin/nl2sh")).expect("executable");
        std::os::unix::fs::symlink(
            format!("{root}/conf/config.toml"),
            format!("{root}/other/link-to-config"),
        )
        .expect("symlink");
        std::os::unix::fs::symlink(format!("{root}/state"), format!("{root}/other/statelink"))
            .expect("symlink");
        std::fs::hard_link(
            format!("{root}/conf/config.toml"),
            format!("{root}/other/hardlink"),
        )
        .expect("hard link");
        let service = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "exec 3<config.toml 4<../state/nl2sh.db 5<../other/notes.txt; exec {root}/bin/nl2sh 60"
            ))
            .current_dir(format!("{root}/conf"))
            .spawn()
            .expect("service stand-in");
        // Until its exec, /proc/<pid>/exe is the shell.
        let exe = format!("/proc/{}/exe", service.id());
        for _ in 0..500 {
            if std::fs::canonicalize(&exe).is_ok_and(|p| p.ends_with("bin/nl2sh")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let protected = Protected::labelled([
            (
                PathBuf::from(format!("{root}/conf/config.toml")),
                super::super::OWN_CONFIGURATION,
            ),
            (
                PathBuf::from(format!("{root}/state")),
                super::super::OWN_STATE,
            ),
            (
                PathBuf::from(format!("{root}/bin/nl2sh")),
                super::super::OWN_EXECUTABLE,
            ),
        ]);
        OwnTree {
            _dir: dir,
            root,
            protected,
            service,
        }
    }

    fn pid(&self) -> u32 {
        self.service.id()
    }

    /// Each of nl2sh's files, with spellings the kernel resolves to it.
    fn aliases(&self) -> Vec<(String, Vec<String>)> {
        let (r, p) = (&self.root, self.pid());
        let mut exe = vec![format!("/proc/{p}/exe"), format!("/proc/{p}/task/{p}/exe")];
        // map_files needs CAP_SYS_ADMIN: its entries are there only for root.
        if let Ok(entries) = std::fs::read_dir(format!("/proc/{p}/map_files")) {
            let mapped = entries
                .flatten()
                .map(|e| e.path())
                .find(|e| std::fs::canonicalize(e).is_ok_and(|t| t.ends_with("bin/nl2sh")));
            exe.extend(mapped.map(|m| m.to_string_lossy().into_owned()));
        }
        vec![
            (
                format!("{r}/conf/config.toml"),
                vec![
                    format!("/proc/{p}/cwd/config.toml"),
                    format!("/proc/{p}/task/{p}/cwd/config.toml"),
                    format!("/proc/{p}/root{r}/conf/config.toml"),
                    format!("/proc/{p}/fd/3"),
                    format!("/proc/{p}/cwd/../conf/config.toml"),
                    format!("/proc/{p}/fd/5/../../conf/config.toml"),
                    format!("{r}/other/link-to-config"),
                    format!("{r}/other/link-to-co*"),
                    format!("{r}/other/hardlink"),
                    format!("{r}/other/../conf/./config.toml"),
                    format!("/proc/self/root{r}/conf/config.toml"),
                    // Relative: commands start in `/`.
                    format!("{}/conf/config.toml", r.trim_start_matches('/')),
                ],
            ),
            (
                format!("{r}/state/nl2sh.db"),
                vec![
                    format!("/proc/{p}/fd/4"),
                    format!("/proc/{p}/cwd/../state/nl2sh.db"),
                    format!("{r}/other/statelink/nl2sh.db"),
                    format!("{r}/other/statelink/new-file"),
                ],
            ),
            (format!("{r}/bin/nl2sh"), exe),
        ]
    }
}

impl Drop for OwnTree {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
    }
}

/// Ways a command line reads or writes the file a word names.
const USES: &[&str] = &[
    "echo protocol_auto_approve = true >> {}",
    "sed -i 1iprotocol_auto_approve=true {}",
    "tee -a {} < /dev/null",
    "cp /etc/hostname {}",
    "mv /tmp/x {}",
    "dd if=/dev/zero of={} count=1",
    "sort -o {} /dev/null",
    "cat {}",
    "truncate -s 0 {}",
    "ln -sf /tmp/x {}",
    "cd / && cat {}",
];

fn quote(path: &str) -> String {
    if path.contains('*') {
        path.to_string()
    } else {
        format!("'{path}'")
    }
}

#[test]
fn every_alias_of_an_own_file_is_judged_as_the_file() {
    let tree = OwnTree::new();
    let mut failures = Vec::new();
    for (file, aliases) in tree.aliases() {
        for use_ in USES {
            let direct =
                assess_shell_protected(&use_.replace("{}", &quote(&file)), &tree.protected);
            assert!(direct.level >= Dangerous, "{use_} {file}: {direct:?}");
            for alias in &aliases {
                let line = use_.replace("{}", &quote(alias));
                let a = assess_shell_protected(&line, &tree.protected);
                if a.level != direct.level {
                    failures.push(format!(
                        "{line}: {:?} {:?}, the file itself: {:?}",
                        a.level, a.reasons, direct.level
                    ));
                }
            }
        }
        for alias in aliases
            .iter()
            .filter(|a| a.starts_with('/') && !a.contains('*'))
        {
            let (w, r) = (
                assess_path_write_protected(Path::new(alias), &tree.protected),
                assess_path_read_protected(Path::new(alias), &tree.protected),
            );
            if w.level < Dangerous || r.level < Dangerous {
                failures.push(format!("fs tools on {alias}: write {w:?}, read {r:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn an_alias_names_its_file_in_plain_words() {
    let tree = OwnTree::new();
    let line = format!(
        "echo protocol_auto_approve = true >> /proc/{}/cwd/config.toml",
        tree.pid()
    );
    let a = assess_shell_protected(&line, &tree.protected);
    assert!(a.level >= Dangerous, "{a:?}");
    assert!(
        a.reasons
            .iter()
            .any(|r| r.contains("nl2sh's own configuration")),
        "{:?}",
        a.reasons
    );
}

#[test]
fn links_that_cannot_be_resolved_are_treated_as_own_files() {
    let tree = OwnTree::new();
    for line in [
        // A pattern through a magic link: any process's directory.
        "echo x >> /proc/[0-9]*/cwd/config.toml",
        "sed -i s/a/b/ /proc/*/cwd/config.toml",
        // A process that is not there now may be by the time the command runs.
        "echo x >> /proc/999999999/cwd/config.toml",
        "echo x >> /proc/999999999/cwd/../config.toml",
        // The command's own descriptors and directory.
        "echo x > /dev/fd/7",
        "cat /proc/self/fd/9",
        "echo x >> /proc/self/cwd/config.toml",
    ] {
        let a = assess_shell_protected(line, &tree.protected);
        assert!(a.level >= Dangerous, "{line}: {a:?}");
    }
}

#[test]
fn aliases_of_other_files_are_judged_as_before() {
    let tree = OwnTree::new();
    let (r, p) = (&tree.root, tree.pid());
    for (line, want) in [
        (format!("cat {r}/other/notes.txt"), ReadOnly),
        ("echo hi > /dev/stderr".to_string(), ReadOnly),
        ("echo hi > /proc/self/fd/1".to_string(), ReadOnly),
        ("ls /proc/self/fd".to_string(), ReadOnly),
        ("readlink /proc/self/exe".to_string(), ReadOnly),
    ] {
        let a = assess_shell_protected(&line, &tree.protected);
        assert_eq!(a.level, want, "{line}: {a:?}");
    }
    // `..` after a link is at most `medium` when it climbs to other files.
    for line in [
        format!("cat /proc/{p}/cwd/../other/notes.txt"),
        format!("cat /proc/{p}/fd/5"),
    ] {
        let a = assess_shell_protected(&line, &tree.protected);
        assert!(a.level < Dangerous, "{line}: {a:?}");
    }
    // The directory it was started in is not nl2sh's: a new file there is an ordinary write.
    let a = assess_shell_protected(
        &format!("echo x > /proc/{p}/cwd/../other/new"),
        &tree.protected,
    );
    assert!(a.level < Dangerous, "{a:?}");
}

#[test]
fn a_grant_never_matches_a_word_through_a_magic_link() {
    let tree = OwnTree::new();
    let p = tree.pid();
    for line in [
        format!("cat /proc/{p}/cwd/../other/notes.txt"),
        format!("sed -n 1p /proc/{p}/fd/5"),
        format!("grep --file=/proc/{p}/root/etc/hostname x"),
        "cat /dev/fd/3".to_string(),
    ] {
        let (_, commands) = super::super::assess_shell_commands(&line, None, &tree.protected);
        let matchable = commands.iter().flatten().any(|c| {
            c.argv.as_ref().is_some_and(|argv| {
                argv.iter()
                    .any(|w| w.contains("/proc/") || w.contains("/dev/fd"))
            })
        });
        assert!(!matchable, "{line}: {commands:?}");
    }
    // The standard streams stay matchable.
    let (_, commands) =
        super::super::assess_shell_commands("tee /dev/stderr", None, &tree.protected);
    assert!(commands.is_some_and(|c| c.iter().all(|c| c.argv.is_some())));
}

#[test]
fn other_ways_into_the_configurations_directory_through_a_link() {
    let tree = OwnTree::new();
    let p = tree.pid();
    let mut failures = Vec::new();
    for line in [
        format!("cd /proc/{p}/cwd && echo x >> config.toml"),
        format!("cd /proc/{p}/cwd; sed -i 1ix config.toml"),
        format!("cd /proc/{p} && echo x >> cwd/config.toml"),
        format!("install -m 644 /tmp/x /proc/{p}/cwd/config.toml"),
        format!("ln -sf /tmp/evil /proc/{p}/cwd/config.toml"),
        format!("find /proc/{p}/cwd -name config.toml -delete"),
        format!("rm -rf /proc/{p}/cwd"),
        format!("cp -r /tmp/x /proc/{p}/cwd/.."),
        format!("sh -c 'echo x >> /proc/{p}/cwd/config.toml'"),
        format!("echo x | tee -a /proc/{p}/task/{p}/cwd/config.toml"),
        format!("cat /proc/{p}/cwd/config.toml"),
    ] {
        let a = assess_shell_protected(&line, &tree.protected);
        if a.level < Dangerous {
            failures.push(format!("{line}: {:?} {:?}", a.level, a.reasons));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A name that holds pattern characters matches itself: `[` is a program in `/usr/bin`,
/// and `[ 1 -lt 40 ]` once expanded `/usr/bin/[` to itself without end and overflowed the
/// executor's stack.
#[test]
fn a_name_with_pattern_characters_is_expanded_once() {
    let tree = OwnTree::new();
    let r = &tree.root;
    for name in ["[", "x[", "a*b", "q?", "[ab]"] {
        std::fs::write(format!("{r}/other/{name}"), "x").expect("file");
    }
    std::os::unix::fs::symlink(
        format!("{r}/conf/config.toml"),
        format!("{r}/other/[config]"),
    )
    .expect("symlink");
    for (line, dangerous) in [
        ("[ 1 -lt 40 ]".to_string(), false),
        (format!("cat '{r}/other/['"), false),
        (format!("cat {r}/other/x["), false),
        (
            format!("cat {r}/other/a*b {r}/other/q? {r}/other/[ab]"),
            false,
        ),
        (format!("echo x >> {r}/other/[[]config]"), true),
        (format!("echo x >> {r}/other/*config*"), true),
    ] {
        let a = assess_shell_protected(&line, &tree.protected);
        assert_eq!(a.level >= Dangerous, dangerous, "{line}: {a:?}");
    }
}

/// The patterns of one line share one bound on the directories read for them: past it, a
/// write through a pattern is treated as one to nl2sh's own files (it could be), a read
/// is left to the sandbox; the line is judged without reading more.
#[test]
fn the_patterns_of_a_line_share_one_bound() {
    let tree = OwnTree::new();
    let r = &tree.root;
    std::fs::create_dir(format!("{r}/many")).expect("mkdir");
    for n in 0..600 {
        std::fs::write(format!("{r}/many/f{n}"), "").expect("file");
    }
    let write = format!("echo x > {r}/other/note?.txt");
    let alone = assess_shell_protected(&write, &tree.protected);
    assert!(alone.level < Dangerous, "{alone:?}");
    // 30 reads of 600 entries each: more than the line's bound.
    let reads = vec![format!("{r}/many/*"); 30].join(" ");
    let read_only = assess_shell_protected(&format!("cat {reads}"), &tree.protected);
    assert!(read_only.level < Dangerous, "{read_only:?}");
    let a = assess_shell_protected(&format!("cat {reads}; {write}"), &tree.protected);
    assert!(a.level >= Dangerous, "{a:?}");
    assert!(
        a.reasons
            .iter()
            .any(|r| r.contains("matches more files than are looked at")),
        "{:?}",
        a.reasons
    );
    // Each assessment has a bound of its own: the write alone is judged as before.
    let again = assess_shell_protected(&write, &tree.protected);
    assert_eq!(again.level, alone.level, "{again:?}");
}
