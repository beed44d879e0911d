//! Scoped grants on real command lines: the executor's parse of a line (the commands it
//! sends with the approval request) against approvald's matching and decision order, as
//! an attacker holding a grant would try them. Nothing runs here; `approvals_e2e.rs` runs
//! a granted command through the real binaries.

use std::path::Path;

use nl2sh_approvald::authority::settle_without_asking;
use nl2sh_approvald::policy::{self, Policy};
use nl2sh_executor::risk::{assess_shell_commands, Protected};
use nl2sh_proto::channels::{
    ActionSummary, CallId, CallOrigin, Confinement, Decision, Identity, RiskLevel,
};

/// What approvald decides without a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A grant covers it: it runs with real privileges, unasked.
    Granted,
    /// Read-only: it runs in the read-only sandbox, unasked.
    Sandboxed,
    /// It waits for a person.
    Asks,
}
use Outcome::{Asks, Granted, Sandboxed};

fn policy(grant: &str) -> Policy {
    let text = format!("[[approval_grants]]\ntool = \"shell.exec\"\n{grant}\n");
    policy::parse(Path::new("c.toml"), &text).unwrap()
}

/// The summary the executor sends for `shell.exec` of `line`.
fn summary(line: &str, confinement: Confinement) -> ActionSummary {
    let (a, commands) = assess_shell_commands(line, None, &Protected::default());
    ActionSummary {
        data: None,
        ui_app: None,
        call_id: CallId(1),
        origin: CallOrigin::McpHttp,
        task: None,
        after_reading: Default::default(),
        client: None,
        sent: None,
        tool: "shell.exec".into(),
        action: format!("/bin/sh -c '{}'", line.replace('\'', "'\\''")),
        arguments_sha256: "0".repeat(64),
        risk: a.level,
        requires_root: a.requires_root,
        identity: Identity::Launching,
        confinement,
        reasons: a.reasons,
        commands,
    }
}

fn outcome(policy: &Policy, line: &str, confinement: Confinement) -> (Outcome, RiskLevel) {
    let s = summary(line, confinement);
    let outcome = match settle_without_asking(policy, &s).map(|(d, _)| d) {
        Some(Decision::Granted) => Granted,
        Some(Decision::Allowed) => Sandboxed,
        None => Asks,
        Some(other) => panic!("{line:?}: {other:?}"),
    };
    (outcome, s.risk)
}

fn check(policy: &Policy, rows: &[(&str, Outcome)], confinement: Confinement) {
    let mut failures = Vec::new();
    for (line, want) in rows {
        let (got, risk) = outcome(policy, line, confinement);
        if got != *want {
            let s = summary(line, confinement);
            failures.push(format!(
                "{line:?}: want {want:?}, got {got:?} (risk {risk:?}, commands {:?})",
                s.commands
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The attack that retired `action_prefix`, against its replacement.
#[test]
fn a_grant_for_ls_covers_ls_and_nothing_that_rides_along() {
    for max_risk in ["low", "high"] {
        let ls = policy(&format!(
            "command = [\"ls\", \"**\"]\nmax_risk = \"{max_risk}\""
        ));
        check(
            &ls,
            &[
                ("ls /tmp; touch F", Asks),
                ("ls /tmp; mkdir d", Asks),
                ("ls /tmp; cp a b", Asks),
                ("ls /tmp; ln -s /etc/passwd F", Asks),
                ("ls && mkdir d", Asks),
                ("ls || cp a b", Asks),
                ("ls\ntouch F", Asks),
                ("ls | tee F", Asks),
                ("ls & touch F", Asks),
                ("ls > F", Asks),
                ("ls >> F", Asks),
                ("ls $(touch F)", Asks),
                ("ls `touch F`", Asks),
                ("ls <(touch F)", Asks),
                ("sh <<EOF\ntouch F\nEOF", Asks),
                ("ls <<EOF\n$(touch F)\nEOF", Asks),
                ("(touch F)", Asks),
                ("{ touch F; }", Asks),
                ("for f in a; do touch $f; done", Asks),
                ("for f in a; do ls; done > F", Asks),
                ("LD_PRELOAD=x ls", Asks),
                ("$PROG", Asks),
                ("PROG=touch; $PROG F", Asks),
                ("eval touch F", Asks),
                ("eval ls", Sandboxed),
                ("sh -c 'ls; touch F'", Asks),
                ("ls() { touch F; }; ls", Asks),
                ("alias ls='touch F'\nls", Asks),
                ("cd /etc && ls", Sandboxed),
                ("ls /tmp\r; touch F", Asks),
                // Read-only lines run in the sandbox as always: no grant needed.
                ("ls /tmp", Sandboxed),
                ("ls /tmp/*", Sandboxed),
                ("ls /tmp; cat /etc/hostname", Sandboxed),
            ],
            Confinement::Sandbox,
        );
    }
}

/// A read asked to run outside the sandbox waits for a person unless the grant names
/// what it runs; only inert commands come along unnamed.
#[test]
fn unconfined_reads_need_the_grants_command() {
    let ls = policy("command = [\"ls\", \"**\"]\nmax_risk = \"high\"");
    check(
        &ls,
        &[
            ("ls /tmp", Granted),
            ("ls -la /tmp /data", Granted),
            ("ls /tmp && sleep 1 && echo done", Granted),
            ("ls /tmp; ls /data", Granted),
            // Read-only, but not the grant's: it would read as root.
            ("ls /tmp; cat /etc/hostname", Asks),
            ("ls /tmp | head -n 3", Asks),
            ("cat /etc/hostname", Asks),
            // A glob's words are decided when the line runs (a file named `-exec` is an
            // option too): never matched, not even by `**`.
            ("ls /tmp/*", Asks),
            ("ls ~", Asks),
            ("ls $HOME", Asks),
            ("/bin/ls /tmp", Asks),
            ("command ls /tmp", Asks),
            ("cd /data && ls", Asks),
            ("export LS_COLORS=x; ls", Asks),
            ("ls > /dev/null", Granted),
            ("ls 2>&1", Granted),
            // Input the caller chose is no part of what the grant names: a file read as
            // root through `<` (any file), a here-string, a pipe even from `echo`.
            ("ls < /etc/hostname", Asks),
            ("ls < /etc/shadow", Asks),
            ("ls < /dev/null", Granted),
            ("ls <<< x", Asks),
            ("echo x | ls", Asks),
            ("while true; do ls; done", Asks),
        ],
        Confinement::Unconfined,
    );
}

#[test]
fn an_exact_command_grant_covers_that_command_only() {
    let am = policy("command = [\"am\", \"start\", \"-n\", \"com.example/.Main\"]");
    check(
        &am,
        &[
            ("am start -n com.example/.Main", Granted),
            ("am  'start' -n \"com.example/.Main\"", Granted),
            ("\\am st\\art -n com.''example/.Main", Granted),
            ("am start -n com.example/.Main 2>/dev/null", Granted),
            (
                "am start -n com.example/.Main; am start -n com.example/.Main",
                Granted,
            ),
            ("am start -n com.example/.Main && sleep 1", Granted),
            ("am start -n com.example/.Main; echo started", Granted),
            // Read-only in the sandbox; as root, outside it, they read what it hides.
            (
                "am start -n com.example/.Main && sleep 1 && dumpsys activity top | grep -c Main",
                Asks,
            ),
            (
                "am start -n com.example/.Main; content query --uri content://sms",
                Asks,
            ),
            ("am start -n com.example/.Main; grep -r pass /data", Asks),
            ("am start -n com.example/.Main; screencap -p", Asks),
            ("am start -n com.example/.Main; logcat -d", Asks),
            ("am start -n com.example/.Main; cat /etc/hostname", Asks),
            ("am start -n com.example/.Main --user 0", Asks),
            ("am start -n com.other/.Main", Asks),
            ("am start -n 'com.example/.Main --user 0'", Asks),
            ("am start -n com.example/.Main*", Asks),
            ("am start -n $'com.example/.Main'", Asks),
            ("/tmp/am start -n com.example/.Main", Asks),
            ("/system/bin/am start -n com.example/.Main", Asks),
            ("exec am start -n com.example/.Main", Asks),
            ("nohup am start -n com.example/.Main", Asks),
            ("am start -n com.example/.Main &", Asks),
            ("am start -n com.example/.Main > /sdcard/out", Asks),
            (
                "am start -n com.example/.Main; am force-stop com.example",
                Asks,
            ),
            ("am start -n com.example/.Main; rm -f /sdcard/x", Asks),
            // The program's environment and directory are the executor's, not the caller's.
            (
                "LD_PRELOAD=/sdcard/x.so am start -n com.example/.Main",
                Asks,
            ),
            (
                "CLASSPATH=/sdcard/x.jar am start -n com.example/.Main",
                Asks,
            ),
            (
                "BOOTCLASSPATH=/sdcard/x.jar; export BOOTCLASSPATH; am start -n com.example/.Main",
                Asks,
            ),
            (
                "export ANDROID_DATA=/sdcard; am start -n com.example/.Main",
                Asks,
            ),
            ("set -a; X=1; am start -n com.example/.Main", Asks),
            ("cd /sdcard; am start -n com.example/.Main", Asks),
            ("umask 0; am start -n com.example/.Main", Asks),
            ("PATH=/sdcard:$PATH; am start -n com.example/.Main", Asks),
            (
                "am() { rm -rf /sdcard; }; am start -n com.example/.Main",
                Asks,
            ),
            ("hash -p /sdcard/am am; am start -n com.example/.Main", Asks),
            (
                "trap 'rm -f /sdcard/x' EXIT; am start -n com.example/.Main",
                Asks,
            ),
            ("eval 'am start -n com.example/.Main'", Asks),
            // mksh (Android's sh) and bash read `a[$(…)]` in arithmetic and run it, also
            // from fixed words and from a file's contents: builtins and computed words
            // never come along unnamed.
            (
                "am start -n com.example/.Main; [ 'a[$(touch F)]' -eq 0 ]",
                Asks,
            ),
            (
                "am start -n com.example/.Main; test 'a[$(touch F)]' -lt 0",
                Asks,
            ),
            ("am start -n com.example/.Main; let 'a[$(touch F)]'", Asks),
            (
                "am start -n com.example/.Main; ulimit -t 'a[$(touch F)]'",
                Asks,
            ),
            (
                "am start -n com.example/.Main; [ \"$(cat /sdcard/x)\" -eq 0 ]",
                Asks,
            ),
            (
                "am start -n com.example/.Main; echo $(( $(cat /sdcard/x) ))",
                Asks,
            ),
            (
                "am start -n com.example/.Main; x=$(cat /sdcard/x); [[ $x -eq 0 ]]",
                Asks,
            ),
            (
                "am start -n com.example/.Main; case $(( $(cat /sdcard/x) )) in *) ;; esac",
                Asks,
            ),
            (
                "am start -n com.example/.Main; sh -c 'echo $(($1))' s \"$(cat /sdcard/x)\"",
                Asks,
            ),
            ("am start -n com.example/.Main; echo done", Granted),
        ],
        Confinement::Sandbox,
    );
}

#[test]
fn a_pattern_stays_where_it_says() {
    let rm = policy("command = [\"rm\", \"/sdcard/Download/*.tmp\"]\nmax_risk = \"high\"");
    check(
        &rm,
        &[
            ("rm /sdcard/Download/a.tmp", Granted),
            (
                "rm /sdcard/Download/a.tmp; rm /sdcard/Download/b.tmp",
                Granted,
            ),
            ("rm /sdcard/Download/../../data/x.tmp", Asks),
            ("rm /sdcard/Download/x/y.tmp", Asks),
            ("rm /sdcard/Download/a.tmp /etc/x.tmp", Asks),
            ("rm -rf /sdcard/Download/a.tmp", Asks),
            ("rm /sdcard/Download/*.tmp", Asks),
            ("rm '/sdcard/Download/*.tmp'", Granted),
        ],
        Confinement::Sandbox,
    );
}

/// Whatever the grant says, what needs root, dangerous and critical actions wait.
#[test]
fn never_root_dangerous_or_critical() {
    let rm = policy("command = [\"rm\", \"**\"]\nmax_risk = \"high\"");
    for line in ["rm -rf /", "rm -rf /system", "rm -rf /data"] {
        let (got, risk) = outcome(&rm, line, Confinement::Sandbox);
        assert_eq!(got, Asks, "{line:?} ({risk:?})");
        assert!(risk >= RiskLevel::Dangerous, "{line:?} ({risk:?})");
    }
    let su = policy("command = [\"su\", \"**\"]\nmax_risk = \"high\"");
    let line = "su -c 'touch /sdcard/x'";
    let s = summary(line, Confinement::Sandbox);
    assert!(s.requires_root && s.risk > RiskLevel::ReadOnly, "{s:?}");
    assert_eq!(outcome(&su, line, Confinement::Sandbox).0, Asks);
}

/// The commands the executor lists for a line against what real shells run for it, with
/// stand-in programs that only log their words: a command that ran but is not listed
/// (and no listed command stands for unknown words) would run unseen under a grant.
#[test]
fn the_listed_commands_are_what_shells_run() {
    // dash is Debian's sh, mksh Android's, bash some distributions'.
    let mut shells: Vec<std::path::PathBuf> = ["dash", "bash", "mksh"]
        .into_iter()
        .flat_map(|name| ["/bin", "/usr/bin"].map(|dir| Path::new(dir).join(name)))
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    shells.dedup();
    if shells.is_empty() {
        nl2sh_proto::test_skip::skip("no shell to compare with");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let work = dir.path().join("work");
    let log = dir.path().join("log");
    for d in [&bin, &work, &log] {
        std::fs::create_dir_all(d).unwrap();
    }
    for program in STAND_INS {
        let path = bin.join(program);
        // One file per run (pipelines run at once): the name and the words, NUL-ended.
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nprintf '%s\\0' {program} \"$@\" > '{}/'$$\n",
                log.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut failures = Vec::new();
    let mut compared = 0;
    for line in TRICKY_LINES {
        let (_, commands) = assess_shell_commands(line, None, &Protected::default());
        let Some(commands) = commands else { continue };
        compared += 1;
        let unknown_words = commands.iter().any(|c| c.argv.is_none());
        // A command a wrapper runs is listed as the wrapper's words.
        let listed = |argv: &[String]| {
            commands.iter().filter_map(|c| c.argv.as_deref()).any(|l| {
                l == argv
                    || l.split_first().is_some_and(|(w, rest)| {
                        WRAPPER_WORDS.contains(&w.as_str()) && rest == argv
                    })
            })
        };
        for shell in &shells {
            for entry in std::fs::read_dir(&log).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
            std::os::unix::fs::symlink(shell, bin.join("sh")).unwrap();
            let mut child = std::process::Command::new(shell)
                .args(["-c", line])
                .current_dir(&work)
                .env_clear()
                .env("PATH", &bin)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while child.try_wait().unwrap().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    failures.push(format!("{} -c {line:?} did not finish", shell.display()));
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = child.wait();
            if line.contains('&') || line.contains("coproc") {
                // Background jobs may still be writing.
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            std::fs::remove_file(bin.join("sh")).unwrap();
            for entry in std::fs::read_dir(&log).unwrap() {
                let run = std::fs::read(entry.unwrap().path()).unwrap();
                let argv: Vec<String> = run
                    .strip_suffix(b"\0")
                    .unwrap_or(&run)
                    .split(|&b| b == 0)
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                if !listed(&argv) && !unknown_words {
                    failures.push(format!(
                        "{} -c {line:?} ran {argv:?}, listed {commands:?}",
                        shell.display()
                    ));
                }
            }
        }
    }
    assert!(compared > 50, "only {compared} lines had commands");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Words that run the command after them (listed with it, so a grant has to name them).
const WRAPPER_WORDS: &[&str] = &["exec", "command", "builtin", "time", "coproc", "!", "nohup"];

/// Programs the lines below run, replaced by stand-ins that only log.
const STAND_INS: &[&str] = &[
    "ls", "touch", "cat", "mkdir", "cp", "tee", "am", "rm", "ln", "head", "grep", "sleep",
];

/// Lines where a shell and a parser may disagree on what runs.
const TRICKY_LINES: &[&str] = &[
    "ls /tmp; touch F",
    "ls &>/dev/null touch F",
    "ls &>>/dev/null touch F",
    "ls; ((touch F))",
    "ls; (( touch F ))",
    "ls; ( (touch F) )",
    "ls; echo $((touch F) )",
    "ls; echo $( (touch F) )",
    "ls # x \\\ntouch F",
    "ls # <<EOF\ntouch F\nEOF",
    "ls#; touch F",
    "ls <<<x touch F",
    "ls <<EOF\nx\n EOF\ntouch F\nEOF",
    "ls <<-EOF\n\tx\n\tEOF\ntouch F",
    "ls <<EOF; touch F\nbody\nEOF",
    "ls <<'EOF'\n$(touch F)\nEOF",
    "ls <<EOF\n$(touch F)\nEOF",
    "ls <<E\\OF\nx\nEOF\ntouch F",
    "ls <<EOF\nEOF \ntouch F\nEOF",
    "ls <<EOF\n\\EOF\ntouch F\nEOF",
    "ls <<\"\"\ntouch F\n\n",
    "ls $(cat <<EOF\n)\nEOF\n); touch F",
    "ls `echo \\`touch F\\``",
    "ls \"`touch F`\"",
    "ls '`touch F`'",
    "ls \\`touch F\\`",
    "case x in (x) touch F;; esac; ls",
    "ls $(case x in x) touch F;; esac)",
    "ls $(case x in (x) echo;; esac); touch F",
    "ls ${x:-$(touch F)}",
    "ls ${x#$(touch F)}",
    "ls \"${x:-\"$(touch F)\"}\"",
    "ls \\\n; touch F",
    "ls |& touch F",
    "ls 2>&1 | touch F",
    "ls >&- touch F",
    "ls <&- touch F",
    "ls >&2 touch F",
    "ls\\;touch F",
    "l\\\ns /tmp; touch F",
    "ls `#`; touch F",
    "ls $(#); touch F",
    "ls $(: ')'); touch F",
    "ls $(echo ')'; touch F)",
    "ls \"$(echo \")\"; touch F)\"",
    "ls $((`touch F`))",
    "ls $'\\'' ; touch F'",
    "ls \"$'\" ; touch F\"",
    "ls x\\\n\\\n; touch F",
    "ls && ! touch F",
    "ls | ! touch F",
    "{ ls; touch F; }",
    "ls\ttouch F",
    "ls\u{a0}; touch F",
    "ls\u{b}; touch F",
    "ls\u{c}; touch F",
    "f() (touch F); ls",
    "ls; exec touch F",
    "ls; command touch F",
    "ls; eval 'touch F'",
    "ls; . /dev/stdin <<EOF\ntouch F\nEOF",
    "ls; trap 'touch F' EXIT",
    "ls; sh -c 'touch F'",
    "ls\n#\\\ntouch F",
    "ls; : $(touch F)",
    "ls; : \"${x:=$(touch F)}\"",
    "ls; x=$(touch F)",
    "ls; x=`touch F` ls",
    "ls; for i in $(touch F); do :; done",
    "ls; while false; do :; done; touch F",
    "ls </dev/null; touch F",
    "ls; [ x = x ] || touch F",
    "ls; ls >/dev/null; touch F",
    "ls a\\ b 'c d' \"e f\" g\\\"h",
    "ls -- --x -",
    "ls '' \"\"",
    "ls $'\\x41' a$'b'",
    "am start -n com.example/.Main",
    "ls\n\n;touch F",
    "ls; if touch F; then :; fi",
    "ls; until touch F; do :; done",
    "ls; case $(touch F) in *) ;; esac",
    "ls; [[ $(touch F) ]]",
    "ls; { touch F; } 2>/dev/null",
    "ls; ( touch F ) </dev/null",
    "ls; echo ${x[$(touch F)]}",
    "ls; echo $(( $(touch F) ))",
    "ls; echo \"$( touch F )\"",
    "ls; cat <<EOF | sh\ntouch F\nEOF",
    "ls; echo touch F | sh",
    "ls; sh <<EOF\ntouch F\nEOF",
    "ls; sh -c \"touch F\"",
    "ls; sh -c 'sh -c \"touch F\"'",
    "ls <<EOF\n$(\ntouch F\n)\nEOF",
    "ls <<EOF1; ls <<EOF2\na\nEOF1\ntouch F\nEOF2",
    "ls <<EOF1 <<EOF2\na\nEOF1\nb\nEOF2\ntouch F",
    "ls; function f { touch F; }",
    "ls; coproc touch F",
    "ls; time touch F",
    "ls; select x in a; do touch F; break; done </dev/null",
    "ls 10>/dev/null",
    "ls 10</dev/null",
    "ls 99>/dev/null touch",
    "ls 2>/dev/null touch",
    "ls 1>&2-",
    "ls ${ touch F;}",
    "ls; echo ${ touch F;}",
    "ls; echo ${|touch F;}",
    "ls; echo $(< /dev/null) ; touch F",
    "ls \\\\; touch F",
    "ls '\\'; touch F",
    "ls \"\\\"; touch F\"",
    "ls \"\\\\\"; touch F",
    "ls $'\\\\'; touch F",
    "ls\u{85}; touch F",
    "ls\u{feff}; touch F",
    "ls\u{2028}touch F",
    "ls\\\u{1}; touch F",
    "ls <<EOF\nx\nEOF\u{b}\ntouch F\nEOF",
    "ls <<'E F'\nx\nE F\ntouch F",
    "ls <<\"E\"F\nx\nEF\ntouch F",
    "ls <<E$\nx\nE$\ntouch F",
    "ls <<E\\\nF\nx\nEF\ntouch F",
    "ls <<-\\EOF\n\tx\n\tEOF\ntouch F",
    "ls << EOF\nx\nEOF\ntouch F",
    "ls <<EOF\\\nx\nEOF\ntouch F",
    "ls $(cat <<EOF\nx\nEOF\n)\ntouch F",
    "ls \"$(cat <<'EOF'\n\"\nEOF\n)\"; touch F",
    "ls `cat <<EOF\nx\nEOF\n`; touch F",
    "case a in a) ls;& b) touch F;; esac",
    "case a in a) ls;;& a) touch F;; esac",
    "ls; : ${x:-`touch F`}",
    "ls; : \"${x:-'$(touch F)'}\"",
    "ls; : '${x:-$(touch F)}'",
    "ls; : ${x:-'$(touch F)'}",
    "ls; : $(echo '$(touch F)')",
    "ls; echo $((1 #))\ntouch F",
    "ls # $(touch F)",
    "ls #`touch F`",
    "ls $# touch",
    "ls $- touch",
    "ls ${#} touch",
    "ls ${##} touch",
    "ls x#y; touch F",
    "ls; {touch F;}",
    "ls; { touch F }",
    "ls; !touch F",
    "ls; ! touch F",
    "ls; if ! touch F; then :; fi",
    "ls; (touch F) &",
    "ls && (touch F; ls) | cat",
    "ls; exec >/dev/null; touch F",
    "ls; exec 2>&1; touch F",
    "ls; exec; touch F",
    "ls; sh -c 'ls' touch F",
    "ls; sh -s <<EOF\ntouch F\nEOF",
    "ls; sh /dev/stdin <<EOF\ntouch F\nEOF",
    "ls; sh - <<EOF\ntouch F\nEOF",
    "ls; sh -c \"$(echo touch F)\"",
    "ls; sh -c 'touch \"$1\"' _ F",
    "ls; sh -ec 'touch F'",
    "ls; sh -xc 'touch F'",
    "ls; sh -c -- 'touch F'",
    "ls; sh +x -c 'touch F'",
    "ls; sh -o errexit -c 'touch F'",
    "ls; sh -c 'touch F' -c ls",
];
